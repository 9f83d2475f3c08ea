// defines: main (bench_train_step)
//
// bench_train_step — one training step (zero_grad, forward, backward, AdamW) of a named model,
// timed like ../shared/peers/libtorch-gpt so the two can be compared in one run:
// random token ids, AdamW(lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on 2-D weights),
// no clipping; `warmup` untimed steps, then `steps` steps timed one at a time; median reported.
//
// MFU = (6 N + 6 L C T) * B * T / step time / the measured FMA ceiling of the same threads
// (core/fma_ceiling.h). N counts every parameter once (wte shared with the head).
// The last line of stdout is one JSON object (like the peer's), for bench/train_step.sh.
//
// --device cuda[:N] runs the same step on a GPU (train/launch/run_device.h): phase times are taken after
// the device finished (Backend::synchronize), and MFU is also given against --peak-tflops, the
// device's dense peak (default 989: H100 / H200 SXM bf16).
//
// --precision bf16 trains the way a bf16 run of zt-train does: the model built in bfloat16 (bf16
// compute), through the ZeRO engine at stage 0 on one rank (bf16 gradients, float32 master and
// AdamW moments, the updated master rounded into the bf16 parameters; zero/engine.h). fp32 (the
// default) keeps the plain float32 model and AdamW on its ParamSets, the libtorch peer's setup.
// --f32-matmul high makes float32 GEMMs TF32 on a GPU (core/backend.h F32Matmul).
//
// On a GPU the JSON also gives each phase's host time (ms_*_host_median: the host's time in the
// call, less its waits for the device) and the waits per step: whether the host keeps ahead of the
// kernels, the question CUDA graphs answer (docs/cuda.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/fma_ceiling.h"
#include "core/kernels/gemm_libs.h"
#include "core/parallel.h"
#ifdef ZT_HAVE_CUDA
#include "cuda/backend.h"  // CudaBackend::set_gelu_epilogue
#endif
#include "models/init.h"
#include "optim/adamw.h"
#include "train/launch/run_device.h"
#include "zero/engine.h"
#include "zero/param_layout.h"

using namespace zt;

int main(int argc, char** argv) {
  CLI::App app{"bench_train_step: time a training step of a named model"};
  std::string model = "gpt-mini";
  int64_t B = 8, T = 256, steps = 10, warmup = 2;
  int threads = 2;
  bool ckpt = false;
  app.add_option("--model", model)->capture_default_str();
  app.add_option("--batch", B)->capture_default_str();
  app.add_option("--seq", T)->capture_default_str();
  app.add_option("--steps", steps)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_flag("--activation-checkpointing", ckpt);
  std::string gemm_lib_text = gemm_lib_name(gemm_lib());
  app.add_option("--gemm-lib", gemm_lib_text, "CPU float32 GEMM library (core/kernels/gemm_libs.h): openblas, blis, "
                 "onednn or eigen, where built")->capture_default_str();
  std::string device_text = "cpu";
  double peak_tflops = 989.0;
  app.add_option("--device", device_text, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--peak-tflops", peak_tflops, "the device's dense peak for MFU on a GPU")->capture_default_str();
  std::string precision = "fp32", f32_matmul = "highest";
  app.add_option("--precision", precision, "fp32, or bf16 (bf16 compute through the ZeRO engine, stage 0)")
      ->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  app.add_option("--f32-matmul", f32_matmul, "float32 GEMMs: highest (IEEE) or high (TF32, GPU only)")->capture_default_str();
  std::string gelu_epilogue = "on";
  app.add_option("--gelu-epilogue", gelu_epilogue,
                 "GPU: GPT-2's forward GELU in cuBLASLt's epilogue (on) or in our kernel after the GEMM (off)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const bool bf16 = precision == "bf16";

  set_num_threads(threads);
  try {
    set_gemm_lib(parse_gemm_lib(gemm_lib_text));
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_train_step: --gemm-lib: %s\n", e.what());
    return 2;
  }
  SingleProcessGroup single;
  const RunDevice run = select_run_device(device_text, "mpi", single);
  Backend& dev = backend(run.device);
  dev.set_f32_matmul_precision(parse_f32_matmul(f32_matmul));
#ifdef ZT_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&dev)) cuda->set_gelu_epilogue(gelu_epilogue == "on");
#endif
  if (gelu_epilogue == "off" && run.device.type != DeviceType::cuda) {
    std::fprintf(stderr, "bench_train_step: --gelu-epilogue off is a GPU setting (the CPU has no epilogues)\n");
    return 2;
  }

  const ModelConfig cfg = model_config(model);
  auto m = make_model(cfg, ModelOptions{.dtype = bf16 ? DType::bf16 : DType::f32});
  Rng rng(1337);
  init_model(*m, rng);
  m->set_activation_checkpointing(ckpt);
  std::vector<ParamSet*> sets;
  for (Unit* u : m->units()) sets.push_back(&u->params());
  AdamWHyper h;
  h.lr = 3e-4; h.beta1 = 0.9; h.beta2 = 0.95; h.eps = 1e-8; h.weight_decay = 0.1;
  std::unique_ptr<AdamW> opt;      // fp32: AdamW on the model's own buffers
  std::unique_ptr<Engine> engine;  // bf16: the ZeRO engine's mixed-precision step (stage 0)
  if (bf16) {
    EngineConfig e;
    e.train_micro_batch_size_per_gpu = B;
    e.precision = Precision::bf16;
    e.optimizer.type = OptimizerType::adamw;
    e.optimizer.lr = h.lr, e.optimizer.beta1 = h.beta1, e.optimizer.beta2 = h.beta2;
    e.optimizer.eps = h.eps, e.optimizer.weight_decay = h.weight_decay;
    e.zero.stage = 0;
    e.activation_checkpointing = ckpt;
    engine = initialize(*m, e, single);
  } else {
    opt = std::make_unique<AdamW>(full_shards(sets, "AdamW"), h);
  }

  // The batch is made on the host (as the data loader's); embedding / cross_entropy move it.
  Tensor idx = Tensor::empty({B, T}, DType::i32, Category::activations, cpu_allocator());
  Tensor tgt = Tensor::empty({B, T}, DType::i32, Category::activations, cpu_allocator());
  std::vector<double> ms, fwd_ms, bwd_ms, opt_ms;  // whole step, and its three phases
  // On a GPU, also the host's own time in each phase: from its start until the call returned,
  // less the time the host spent waiting for the device inside it (CudaBackend::host_waits: the
  // gradient norm's read-back, copies to and from the host). Where a phase's host time is close
  // to the phase's time, the GPU waited for the host's launches (what CUDA graphs would remove);
  // where it is far below, the host queued ahead and the kernels set the pace.
  std::vector<double> fwd_host, bwd_host, opt_host;
  std::vector<int64_t> waits;  // the host's waits inside one step's three calls
  auto host_waits = [&dev]() -> std::pair<int64_t, double> {
#ifdef ZT_HAVE_CUDA
    if (auto* cuda = dynamic_cast<CudaBackend*>(&dev)) {
      const CudaBackend::HostWaits hw = cuda->host_waits();
      return {hw.count, hw.seconds};
    }
#endif
    (void)dev;
    return {0, 0.0};  // the CPU: every op ran before it returned
  };
  double loss = 0;
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); };
  for (int64_t s = 0; s < warmup + steps; ++s) {
    for (int64_t i = 0; i < B * T; ++i) {  // fresh random ids each step, as the peer does
      idx.data<int32_t>()[i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
      tgt.data<int32_t>()[i] = static_cast<int32_t>(rng.next_u32() % cfg.vocab_size);
    }
    dev.synchronize();
    int64_t step_waits = 0;
    // the host's time in a call that started at t with the waits w0 before it (ms)
    auto host_ms = [&](clock::time_point t, std::pair<int64_t, double> w0) {
      const double in_call = since(t);
      const auto w1 = host_waits();
      step_waits += w1.first - w0.first;
      return in_call - 1e3 * (w1.second - w0.second);
    };
    const auto t0 = clock::now();
    auto w = host_waits();
    if (!bf16) m->zero_grad();  // (the engine zeroes its gradients in step())
    Var l = bf16 ? engine->forward(idx, tgt) : m->loss(idx, tgt);
    const double fh = host_ms(t0, w);
    dev.synchronize();
    const double f = since(t0);
    const auto t1 = clock::now();
    w = host_waits();
    if (bf16) engine->backward(l);
    else l.backward();
    const double bh = host_ms(t1, w);
    dev.synchronize();
    const double b = since(t1);
    const auto t2 = clock::now();
    w = host_waits();
    if (bf16) engine->step(h.lr);
    else opt->step();
    const double oh = host_ms(t2, w);
    dev.synchronize();
    const double o = since(t2);
    const double dt = since(t0);
    loss = l.value().item();
    if (s >= warmup) {
      ms.push_back(dt);
      fwd_ms.push_back(f);
      bwd_ms.push_back(b);
      opt_ms.push_back(o);
      fwd_host.push_back(fh);
      bwd_host.push_back(bh);
      opt_host.push_back(oh);
      waits.push_back(step_waits);
    }
    std::fprintf(stderr, "step %lld loss %.4f %.1f ms\n", static_cast<long long>(s), loss, dt);
  }
  auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double median = median_of(ms), min = *std::min_element(ms.begin(), ms.end());
  const double N = static_cast<double>(m->num_params());
  const double flops_per_token = 6 * N + 6.0 * cfg.n_layer * cfg.n_embd * T;
  const double tokens = static_cast<double>(B * T);
  // The CPU's FMA ceiling (MFU's denominator), measured after the steps: probed before them (with
  // the threads just started) it came out up to 30% low, and MFU above 1.
  const FmaCeiling ceil = run.device.is_cpu() ? fma_ceiling(threads) : FmaCeiling{};
  const double gflops = flops_per_token * tokens / (median / 1000) * 1e-9;
  const MemoryStats mem = default_allocator().stats();
  nlohmann::json j = {{"impl", "zerotensor"}, {"model", model}, {"params", m->num_params()},
                      {"config", {{"layers", cfg.n_layer}, {"embd", cfg.n_embd}, {"heads", cfg.n_head}, {"seq", T}, {"batch", B}, {"vocab", cfg.vocab_size}, {"steps", steps}, {"warmup", warmup}}},
                      {"threads", threads}, {"activation_checkpointing", ckpt}, {"gemm_lib", gemm_lib_name(gemm_lib())},
                      {"ms_per_step_median", median}, {"ms_per_step_min", min},
                      {"ms_forward_median", median_of(fwd_ms)}, {"ms_backward_median", median_of(bwd_ms)},
                      {"ms_optimizer_median", median_of(opt_ms)}, {"tokens_per_s", tokens / (median / 1000)},
                      {"gflops_per_s", gflops}, {"fma_ceiling_gflops", ceil.gflops}, {"isa", ceil.isa},
                      {"mfu", gflops / ceil.gflops}, {"peak_bytes", mem.peak_total}, {"final_loss", loss},
                      {"device", run.describe()}, {"precision", bf16 ? "bf16 (bf16 compute, fp32 master)" : "float32"},
                      {"f32_matmul", f32_matmul}};
  if (!run.device.is_cpu()) {  // the CPU FMA ceiling means nothing for a GPU run
    j["mfu"] = gflops / (peak_tflops * 1e3);
    j["peak_tflops"] = peak_tflops;
    j.erase("fma_ceiling_gflops");
    j.erase("isa");
    j["ms_forward_host_median"] = median_of(fwd_host);
    j["ms_backward_host_median"] = median_of(bwd_host);
    j["ms_optimizer_host_median"] = median_of(opt_host);
    j["host_waits_per_step"] = *std::max_element(waits.begin(), waits.end());
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
