// defines: 1 Catch2 test case tagged [cuda_generation]; helpers: to_gpu, perturb
//
// Generation on the GPU: the KV cache's decode step (nn/kv_cache.cpp: strided copies
// into the cache, RoPE tables sliced at a position, batched strided GEMMs and a softmax, all
// through the CUDA backend's table) gives the CPU's logits at every step and the same tokens.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/backend.h"
#include "models/init.h"
#include "models/model_config.h"
#include "train/sampling.h"

using namespace zt;

namespace {

// The CPU model's parameters copied into a model built on the GPU.
std::unique_ptr<Model> to_gpu(Model& cpu, const ModelConfig& c) {
  std::unique_ptr<Model> gpu;
  {
    DefaultDeviceScope scope(Device::cuda(0));
    gpu = make_model(c);
  }
  auto cu = cpu.units(), gu = gpu->units();
  for (size_t i = 0; i < cu.size(); ++i) Tensor(gu[i]->params().flat()).copy_(cu[i]->params().flat());  // a view: same storage
  return gpu;
}

// Away from init (std 0.02 leaves near-ties that float rounding may flip): every parameter +=
// N(0, 0.3), on the host.
void perturb(Model& m) {
  Rng rng(5);
  for (Unit* u : m.units()) {
    const Tensor& f = u->params().flat();
    Tensor noise = Tensor::empty(f.shape(), f.dtype());
    rng.fill_normal(noise, 0.0, 0.3);
    std::vector<double> a = f.to_vector(), b = noise.to_vector();
    for (size_t k = 0; k < a.size(); ++k) a[k] += b[k];
    Tensor(f).copy_(Tensor::from_vector(a, f.shape(), f.dtype()));
  }
}

}  // namespace

TEST_CASE("cuda generation: cached logits and greedy tokens equal the CPU's", "[cuda_generation]") {
  ModelConfig g = model_config("gpt2-nano");
  g.max_seq_len = 48;
  ModelConfig l = model_config("llama-nano");  // 4 query heads over 2 kv heads
  l.max_seq_len = 48;
  for (const ModelConfig& c : {g, l}) {
    INFO(c.family);
    auto cpu = make_model(c);
    Rng init(1);
    init_model(*cpu, init);
    perturb(*cpu);
    auto gpu = to_gpu(*cpu, c);
    REQUIRE(gpu->units()[0]->params().flat().device() == Device::cuda(0));
    std::vector<int32_t> seq = {1, 50, 100, 150, 200};
    NoGradGuard ng;
    KVCache kc = cpu->make_kv_cache(), kg = gpu->make_kv_cache();
    Tensor idx = Tensor::empty({1, 5}, DType::i32, Category::activations, cpu_allocator());
    std::copy(seq.begin(), seq.end(), idx.data<int32_t>());
    std::vector<double> a = cpu->logits_cached(idx, kc).value().to_vector();
    std::vector<double> b = gpu->logits_cached(idx, kg).value().to_vector();
    double worst = 0;
    for (int step = 0; step < 40; ++step) {
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(a[i])));
      Tensor one = Tensor::empty({1, 1}, DType::i32, Category::activations, cpu_allocator());
      one.data<int32_t>()[0] = (step * 37 + 3) % 256;
      a = cpu->logits_cached(one, kc).value().to_vector();
      b = gpu->logits_cached(one, kg).value().to_vector();
    }
    CHECK(kg.length() == 45);
    CHECK(worst < 1e-4);
    // Greedy generation across the window slide (48): the same tokens on both devices.
    GenerationOptions o;
    o.max_new_tokens = 80;
    o.temperature = 0;
    const GenerationResult rc = generate(*cpu, {7, 8, 9}, o), rg = generate(*gpu, {7, 8, 9}, o);
    CHECK(rc.tokens == rg.tokens);
    CHECK(rg.stats.context_slides > 0);
  }
}
