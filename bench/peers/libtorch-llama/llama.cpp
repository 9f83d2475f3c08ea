// defines: main (bench_llama); helpers: Config, RMSNormImpl, BlockImpl, LlamaImpl, linear_nobias,
//          rotate_half, setup_blas, gemm_gflops and 1 more
//
// libtorch reference peer: times one Llama-style training step on CPU.
// step = zero_grad + forward + backward + AdamW step, on random token ids.
//
// The model is ZeroTensor's Llama (models/llama.cpp, nn/layers.cpp) written the way a libtorch
// 1.13 user writes it: pre-norm blocks with RMSNorm, q/k/v/o projections without bias, RoPE
// (Hugging Face rotate_half convention, theta 10000) on q and k, grouped-query attention, SwiGLU
// MLP, final RMSNorm, untied lm_head, no position embedding. Same parameters, same count.
#include <torch/torch.h>
#include <torch/version.h>

#include <dlfcn.h>
#include <limits.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// Defaults: ZeroTensor's "llama-mini" preset, llama_shape(6, 384, 6, 2, 1024, 256, 256), batch 8.
struct Config {
  int64_t layers = 6, embd = 384, heads = 6, kv_heads = 2, ffn = 1024, seq = 256, batch = 8, vocab = 256;
  int64_t steps = 10, warmup = 2, threads = 2, seed = 1337;
};

constexpr double kNormEps = 1e-5, kRopeTheta = 10000.0;

// x / sqrt(mean(x^2) + eps) * w. libtorch 1.13 has no RMSNorm module.
struct RMSNormImpl : torch::nn::Module {
  torch::Tensor weight;
  explicit RMSNormImpl(int64_t C) { weight = register_parameter("weight", torch::ones({C})); }
  torch::Tensor forward(const torch::Tensor& x) {
    return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + kNormEps) * weight;
  }
};
TORCH_MODULE(RMSNorm);

static torch::nn::Linear linear_nobias(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

// Hugging Face Llama's rotate_half: (x1, x2) -> (-x2, x1) over the two halves of the head dim.
static torch::Tensor rotate_half(const torch::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return torch::cat({-halves[1], halves[0]}, -1);
}

struct BlockImpl : torch::nn::Module {
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  int64_t nh, nkv, hd;

  BlockImpl(int64_t C, int64_t nh_, int64_t nkv_, int64_t F) : nh(nh_), nkv(nkv_), hd(C / nh_) {
    const int64_t kv = nkv * hd;
    input_layernorm = register_module("input_layernorm", RMSNorm(C));
    q_proj = register_module("q_proj", linear_nobias(C, C));
    k_proj = register_module("k_proj", linear_nobias(C, kv));
    v_proj = register_module("v_proj", linear_nobias(C, kv));
    o_proj = register_module("o_proj", linear_nobias(C, C));
    post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(C));
    gate_proj = register_module("gate_proj", linear_nobias(C, F));
    up_proj = register_module("up_proj", linear_nobias(C, F));
    down_proj = register_module("down_proj", linear_nobias(F, C));
  }

  // cos, sin: (T, hd); causal_mask: (T, T), true above the diagonal = masked out.
  torch::Tensor attn(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                     const torch::Tensor& causal_mask) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto q = q_proj(x).view({B, T, nh, hd}).transpose(1, 2);   // (B, nh, T, hd)
    auto k = k_proj(x).view({B, T, nkv, hd}).transpose(1, 2);  // (B, nkv, T, hd)
    auto v = v_proj(x).view({B, T, nkv, hd}).transpose(1, 2);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    // Grouped-query attention: query head h reads kv head h / (nh / nkv).
    if (nkv != nh) {
      k = k.repeat_interleave(nh / nkv, /*dim=*/1);  // (B, nh, T, hd)
      v = v.repeat_interleave(nh / nkv, /*dim=*/1);
    }
    // libtorch 1.13 has no scaled_dot_product_attention (torch 2.0): a libtorch 1.13 user writes
    // attention as nanoGPT's fallback path does: matmul, masked_fill, softmax, matmul.
    auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));
    att = att.masked_fill(causal_mask, -INFINITY).softmax(-1);
    auto y = torch::matmul(att, v).transpose(1, 2).contiguous().view({B, T, C});
    return o_proj(y);
  }

  torch::Tensor forward(torch::Tensor x, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& causal_mask) {
    auto h = x + attn(input_layernorm(x), cos, sin, causal_mask);
    auto n = post_attention_layernorm(h);
    return h + down_proj(torch::silu(gate_proj(n)) * up_proj(n));  // SwiGLU
  }
};
TORCH_MODULE(Block);

struct LlamaImpl : torch::nn::Module {
  torch::nn::Embedding embed_tokens{nullptr};
  std::vector<Block> layers;
  RMSNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};
  torch::Tensor causal_mask, rope_cos, rope_sin;  // constants, not parameters

  explicit LlamaImpl(const Config& c) {
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(c.vocab, c.embd));
    for (int64_t i = 0; i < c.layers; i++)
      layers.push_back(register_module("layers" + std::to_string(i), Block(c.embd, c.heads, c.kv_heads, c.ffn)));
    norm = register_module("norm", RMSNorm(c.embd));
    lm_head = register_module("lm_head", linear_nobias(c.embd, c.vocab));  // untied
    causal_mask = torch::ones({c.seq, c.seq}, torch::kBool).triu(1);

    // RoPE tables as Hugging Face builds them: inv_freq[d] = theta^(-2d/hd), angles t * inv_freq,
    // duplicated over both halves of the head dim: (T, hd).
    const int64_t hd = c.embd / c.heads;
    auto inv_freq = torch::pow(kRopeTheta, -torch::arange(0, hd, 2, torch::kDouble) / double(hd));
    auto freqs = torch::outer(torch::arange(c.seq, torch::kDouble), inv_freq);
    auto emb = torch::cat({freqs, freqs}, -1);
    rope_cos = emb.cos().to(torch::kFloat);
    rope_sin = emb.sin().to(torch::kFloat);

    // ZeroTensor's Llama init (models/llama.cpp): N(0, 0.02); o_proj and down_proj
    // N(0, 0.02/sqrt(2L)); RMSNorm gains 1 (already set).
    torch::NoGradGuard no_grad;
    const double proj_std = 0.02 / std::sqrt(2.0 * c.layers);
    for (auto& p : named_parameters()) {
      const std::string& name = p.key();
      if (p.value().dim() == 1) continue;  // norm gains
      if (name.find("o_proj.") != std::string::npos || name.find("down_proj.") != std::string::npos)
        p.value().normal_(0.0, proj_std);
      else
        p.value().normal_(0.0, 0.02);
    }
  }

  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets) {
    using torch::indexing::Slice;
    const int64_t T = idx.size(1);
    auto x = embed_tokens(idx);  // (B, T, C); no position embedding (RoPE)
    auto mask = causal_mask.index({Slice(0, T), Slice(0, T)});
    auto cos = rope_cos.index({Slice(0, T)}), sin = rope_sin.index({Slice(0, T)});
    for (auto& b : layers) x = b->forward(x, cos, sin, mask);
    auto logits = lm_head(norm(x));  // (B, T, V)
    return torch::nn::functional::cross_entropy(logits.view({-1, logits.size(-1)}), targets.view({-1}));
  }
};
TORCH_MODULE(Llama);

// Debian's libtorch calls the system BLAS (libblas.so.3). If that is OpenBLAS, its thread
// pool is separate from ATen's OpenMP pool, so set both. Returns the file providing sgemm_.
static std::string setup_blas(int n) {
  using setter_t = void (*)(int);
  if (auto f = (setter_t)dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) f(n);
  Dl_info info;
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  if (!sgemm || !dladdr(sgemm, &info) || !info.dli_fname) return "unknown";
  char path[PATH_MAX];
  return realpath(info.dli_fname, path) ? path : info.dli_fname;
}

// BLAS sanity check: best-of-5 rate of a 1024^3 sgemm (netlib BLAS gives ~5 GFLOP/s).
static double gemm_gflops() {
  auto a = torch::full({1024, 1024}, 0.5f), b = torch::full({1024, 1024}, 0.25f);
  torch::mm(a, b);
  double best = 1e30;
  for (int i = 0; i < 5; i++) {
    auto t0 = std::chrono::steady_clock::now();
    torch::mm(a, b);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * 1024 * 1024 * 1024 / best / 1e9;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) { fprintf(stderr, "missing value for %s\n", a.c_str()); return 2; }
    int64_t v = std::atoll(argv[++i]);
    if (a == "--layers") c.layers = v;
    else if (a == "--embd") c.embd = v;
    else if (a == "--heads") c.heads = v;
    else if (a == "--kv-heads") c.kv_heads = v;
    else if (a == "--ffn") c.ffn = v;
    else if (a == "--seq") c.seq = v;
    else if (a == "--batch") c.batch = v;
    else if (a == "--vocab") c.vocab = v;
    else if (a == "--steps") c.steps = v;
    else if (a == "--warmup") c.warmup = v;
    else if (a == "--threads") c.threads = v;
    else if (a == "--seed") c.seed = v;
    else { fprintf(stderr, "unknown flag %s\n", a.c_str()); return 2; }
  }
  if (c.layers < 1 || c.embd < 1 || c.heads < 1 || c.kv_heads < 1 || c.ffn < 1 || c.seq < 1 || c.batch < 1 ||
      c.vocab < 1 || c.threads < 1 || c.warmup < 0 || c.steps < 1 || c.embd % c.heads != 0 ||
      c.heads % c.kv_heads != 0 || (c.embd / c.heads) % 2 != 0) {
    fprintf(stderr, "bad config (need embd %% heads == 0, heads %% kv-heads == 0, even head dim, steps >= 1)\n");
    return 2;
  }

  torch::set_num_threads(c.threads);
  std::string blas = setup_blas(int(c.threads));
  const double gemm = gemm_gflops();
  printf("blas %s, %lld threads, sgemm 1024^3: %.1f GFLOP/s\n", blas.c_str(), (long long)c.threads, gemm);
  torch::manual_seed(c.seed);

  Llama model(c);
  int64_t n_params = 0;
  std::vector<torch::Tensor> decay, no_decay;  // weight decay on 2-D weights only
  for (auto& p : model->parameters()) {
    n_params += p.numel();
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  auto opts = torch::optim::AdamWOptions(3e-4).betas({0.9, 0.95}).eps(1e-8);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(opts).weight_decay(0.1)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(opts).weight_decay(0.0)));
  torch::optim::AdamW optimizer(std::move(groups), opts);

  std::vector<double> ms;
  for (int64_t s = 0; s < c.warmup + c.steps; s++) {
    auto data = torch::randint(c.vocab, {c.batch, c.seq + 1}, torch::kLong);
    auto x = data.narrow(1, 0, c.seq).contiguous(), y = data.narrow(1, 1, c.seq).contiguous();
    auto t0 = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    auto loss = model->forward(x, y);
    loss.backward();
    optimizer.step();
    double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s >= c.warmup) ms.push_back(dt);
    printf("step %lld%s loss %.4f %.1f ms\n", (long long)s, s < c.warmup ? " (warmup)" : "",
           loss.item<double>(), dt);
  }

  const double med = median(ms), mn = *std::min_element(ms.begin(), ms.end());
  const double tokens = double(c.batch * c.seq);
  // 6N for the weights (fwd+bwd) + 6LCT for causal attention (half of nanoGPT's 12LCT), as the
  // GPT peer and bench_train_step count it.
  const double flops_per_token = 6.0 * n_params + 6.0 * c.layers * c.embd * c.seq;
  printf("{\"peer\":\"libtorch-llama\",\"torch\":\"%s\",\"params\":%lld,"
         "\"config\":{\"layers\":%lld,\"embd\":%lld,\"heads\":%lld,\"kv_heads\":%lld,\"ffn\":%lld,\"seq\":%lld,"
         "\"batch\":%lld,\"vocab\":%lld,\"steps\":%lld,\"warmup\":%lld},\"threads\":%lld,\"blas\":\"%s\","
         "\"gemm_gflops_per_s\":%.1f,\"ms_per_step_median\":%.3f,\"ms_per_step_min\":%.3f,\"tokens_per_s\":%.1f,\"gflops_per_s\":%.3f}\n",
         TORCH_VERSION, (long long)n_params, (long long)c.layers, (long long)c.embd, (long long)c.heads,
         (long long)c.kv_heads, (long long)c.ffn, (long long)c.seq, (long long)c.batch, (long long)c.vocab,
         (long long)c.steps, (long long)c.warmup, (long long)c.threads, blas.c_str(), gemm, med, mn,
         tokens / (med / 1e3), flops_per_token * tokens / (med / 1e3) / 1e9);
  return 0;
}
