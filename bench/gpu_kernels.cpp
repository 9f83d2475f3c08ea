// defines: main (bench_gpu_kernels); helpers: DevBuf, time_median_ms, time_stream_ms, op_name, Mode,
//          LtProblem, lt_problem, LtBest and 3 more
//
// bench_gpu_kernels — the GPU kernel yardsticks: GEMM TFLOP/s through our cuBLASLt wrapper
// (cuda/gemm.h CudaGemm) against cuBLASLt's best algorithm for the same problems, and the time of
// our attention kernels (cuda/kernels/attention.h). Built only in CUDA builds (bench/CMakeLists.txt:
// bench/gpu_*.cpp link zt_cuda and are skipped when ZT_HAVE_CUDA is OFF).
//
// STATUS: first run on an H100 on 2026-11-25 (bench/results/gpu.md). Without a GPU it
// exits 2 with cuda_runtime_summary() on stderr.
//
// Bandwidth part: element-wise kernels (cast, add, GELU, AdamW) and the gradient norm's sum of
// squares over 2^26 elements, GB/s from the bytes each must move, against a device-to-device
// cudaMemcpyAsync. Cross-entropy part: the separate forward + backward over (8192, V) bf16 logits
// against the fused in-place pass, at GPT-2's and Llama 3's vocabularies.
//
// GEMM part. The GPT-2 124M training GEMMs at M = B*T = 8*1024 = 8192 rows (row-major, nn.Linear's
// W (out, in)): qkv 768->2304, attn proj 768->768, fc 768->3072, fc proj 3072->768, lm head
// 768->50304. Three ops per shape, as the training step calls them, without epilogues (no bias, no
// GELU, no BGRADB: the plain GEMM, so both sides do the same work), beta = 0:
//   fwd    Y (M, N)  = X (M, K) @ W^T            CudaGemm::linear
//   dgrad  dX (M, K) = dY (M, N) @ W (N, K)      CudaGemm::linear_grad_input
//   wgrad  dW (N, K) = dY^T (N, M) @ X (M, K)    CudaGemm::linear_grad_weight
// in three modes: bf16 in / bf16 out (fp32 accumulation, CUBLAS_COMPUTE_32F), f32 fp32
// (CUBLAS_COMPUTE_32F), f32 tf32 (CUBLAS_COMPUTE_32F_FAST_TF32). FLOPs = 2 M N K for each op.
// "ours": the CudaGemm call itself (descriptor creation on the host each call, the algorithm its
// cache got from cublasLtMatmulAlgoGetHeuristic's first result). "best": direct cuBLASLt code
// below that builds the SAME column-major problem the wrapper builds (cuda/gemm.h "Row-major
// through cuBLASLt's column-major"; mirrored from gemm.cpp: transposes, m/n/k, leading dimensions,
// the same 32 MiB workspace limit and pointer-alignment preferences), asks
// cublasLtMatmulAlgoGetHeuristic for up to 16 candidates, times each the same way and keeps the
// fastest (candidates that fail to run are counted and skipped). ratio = ours TFLOP/s / best.
//
// Timing: `warmup` untimed calls, then `iters` calls, each between two CudaEvents (timing) on one
// non-blocking stream; the median of the per-call times is reported. A per-call event pair also
// sees host time spent between the two records when the GPU runs dry (the wrapper's descriptor
// setup, tens of microseconds); so the JSON also has "ours_stream_ms": the mean over `iters`
// back-to-back calls between one event pair (the GPU stays busy when the kernels are longer than
// the host work), which is what a training step sees.
//
// Attention part: cuda_kernels::attention_forward (with lse kept, as in training) and
// attention_backward at B = 8, T = 1024, H = Hq = Hkv = 12, D = 64, in bf16 and f32; median ms of
// the per-call event pairs (cuDNN's calls include their per-call host work: variant pack
// creation and a workspace from the caching allocator). FLOPs, the usual causal convention (FlashAttention's benchmarks):
//   forward  = 2 * 2 * B * H * T * T * D / 2   (QK^T and PV, half the pairs)
//   backward = 2.5 * forward                    (5 GEMMs instead of 2)
// These count useful work; our backward kernel does more (attention.h "Cost": 7 B H T^2 D, plus
// 2 B H T^2 D in bf16), so the backward TFLOP/s here understate its raw FLOP rate.
// cuDNN: in a build with cuDNN (ZT_HAVE_CUDNN), CudnnAttention (cuda/cudnn_attention.h, the path
// CudaBackend::attention takes for bfloat16) is timed the same way at the same shapes, forward
// (statistics written) and backward, and the table gives ours/cuDNN = our ms / cuDNN's ms (< 1:
// ours faster). float32 has no cuDNN flash attention: its row says so with supported()'s reason.
// Without cuDNN in the build the output says "cudnn: not built" and times nothing in its place.
//
// Output: a markdown table on stdout, then one JSON object as the last line. Exit 2 (with the
// reason on stderr) when no usable GPU is there; numbers are never printed then.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_util.h"  // defines: bench::median, bench::loadavg
#include "core/check.h"
#include "core/dtype.h"
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemm.h"
#include "cuda/kernels/activation.h"
#include "cuda/kernels/adamw.h"
#include "cuda/kernels/attention.h"
#include "cuda/kernels/cast.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/kernels/reduce.h"
#include "cuda/kernels/softmax_ce.h"
#include "cuda/stream.h"
#if defined(ZT_HAVE_CUDNN)
#include "cuda/cudnn_attention.h"
#endif

using namespace zt;

namespace {
using bench::median;

#define BENCH_LT_CHECK(call)                                                                               \
  do {                                                                                                     \
    const cublasStatus_t st_ = (call);                                                                     \
    if (st_ != CUBLAS_STATUS_SUCCESS) ZT_THROW(#call, " failed: ", cublasLtGetStatusName(st_), " at ", __FILE__, ":", __LINE__); \
  } while (0)

// A device buffer from cudaMalloc (256-byte aligned), filled with uniform values in [-1, 1)
// (a fixed LCG pattern of 1 Mi elements tiled over the buffer) or zeros.
struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  DevBuf(int64_t elems, DType t, bool random, uint32_t seed) : bytes(size_t(elems) * dtype_size(t)) {
    ZT_CUDA_CHECK(cudaMalloc(&p, bytes));
    if (!random) {
      ZT_CUDA_CHECK(cudaMemset(p, 0, bytes));
      return;
    }
    const int64_t chunk = std::min<int64_t>(elems, int64_t(1) << 20);
    std::vector<uint8_t> host(size_t(chunk) * dtype_size(t));
    uint32_t s = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < chunk; ++i) {
      s = s * 1664525u + 1013904223u;
      const float v = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;  // [-1, 1)
      if (t == DType::bf16) {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(host.data() + 2 * i, &h, 2);
      } else {
        std::memcpy(host.data() + 4 * i, &v, 4);
      }
    }
    const size_t cb = host.size();
    for (size_t off = 0; off < bytes; off += cb)
      ZT_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(p) + off, host.data(), std::min(cb, bytes - off),
                               cudaMemcpyHostToDevice));
  }
  ~DevBuf() {
    if (p) (void)cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// Median ms of `iters` calls of f, each between two timing events, after `warmup` calls.
template <class F>
double time_median_ms(F&& f, cudaStream_t s, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) f();
  ZT_CUDA_CHECK(cudaStreamSynchronize(s));
  CudaEvent a(true), b(true);
  std::vector<double> ms;
  ms.reserve(size_t(iters));
  for (int i = 0; i < iters; ++i) {
    a.record(s);
    f();
    b.record(s);
    b.synchronize();
    ms.push_back(CudaEvent::elapsed_ms(a, b));
  }
  return median(ms);
}

// Mean ms per call over `iters` back-to-back calls between one event pair.
template <class F>
double time_stream_ms(F&& f, cudaStream_t s, int iters) {
  CudaEvent a(true), b(true);
  a.record(s);
  for (int i = 0; i < iters; ++i) f();
  b.record(s);
  b.synchronize();
  return CudaEvent::elapsed_ms(a, b) / iters;
}

enum class Op { fwd, dgrad, wgrad };
const char* op_name(Op o) { return o == Op::fwd ? "fwd" : o == Op::dgrad ? "dgrad" : "wgrad"; }

struct Mode {
  const char* name;
  DType dtype;  // in = out
  GemmPrecision precision;
};

// The column-major problem CudaGemm builds for one op (cuda/gemm.h, gemm.cpp).
struct LtProblem {
  cublasOperation_t ta, tb;
  uint64_t m, n, k;
  const void* A;
  int64_t lda;
  const void* B;
  int64_t ldb;
  void* D;
  int64_t ldd;
};

LtProblem lt_problem(Op op, int64_t M, int64_t N, int64_t K, const void* x, const void* w, const void* dy, void* y,
                     void* dx, void* dw) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  switch (op) {
    case Op::fwd:  // Y^T (N, M) = W (N, K) . X^T (K, M)
      return {CUBLAS_OP_T, CUBLAS_OP_N, u(N), u(M), u(K), w, K, x, K, y, N};
    case Op::dgrad:  // dX^T (K, M) = W^T (K, N) . dY^T (N, M)
      return {CUBLAS_OP_N, CUBLAS_OP_N, u(K), u(M), u(N), w, K, dy, N, dx, K};
    case Op::wgrad:  // dW^T (K, N) = X^T (K, M) . dY (M, N)
      return {CUBLAS_OP_N, CUBLAS_OP_T, u(K), u(N), u(M), x, K, dy, N, dw, K};
  }
  ZT_THROW("lt_problem: unknown op");
}

uint32_t alignment_of(const void* p) {  // as gemm.cpp: the largest power of two <= 256 dividing p
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a >>= 1;
  return a;
}

struct LtBest {
  double ms = 0;       // fastest candidate's median
  int candidates = 0;  // returned by the heuristic
  int failed = 0;      // candidates whose cublasLtMatmul failed
  int best_index = -1; // its rank in the heuristic's list (0 = what the wrapper picks)
};

LtBest lt_best(cublasLtHandle_t h, const LtProblem& p, const Mode& mode, void* ws, size_t ws_bytes, cudaStream_t s,
               int warmup, int iters) {
  const cublasComputeType_t compute =
      mode.precision == GemmPrecision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t t = mode.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtBest out;
  try {
    BENCH_LT_CHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
    const int32_t ta = p.ta, tb = p.tb;
    const uint32_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    BENCH_LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    BENCH_LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    BENCH_LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    const bool a_n = p.ta == CUBLAS_OP_N, b_n = p.tb == CUBLAS_OP_N;
    BENCH_LT_CHECK(cublasLtMatrixLayoutCreate(&la, t, a_n ? p.m : p.k, a_n ? p.k : p.m, p.lda));
    BENCH_LT_CHECK(cublasLtMatrixLayoutCreate(&lb, t, b_n ? p.k : p.n, b_n ? p.n : p.k, p.ldb));
    BENCH_LT_CHECK(cublasLtMatrixLayoutCreate(&ld, t, p.m, p.n, p.ldd));
    BENCH_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t max_ws = ws_bytes;
    BENCH_LT_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof(max_ws)));
    const uint32_t aligns[4] = {alignment_of(p.A), alignment_of(p.B), alignment_of(p.D), alignment_of(p.D)};
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      BENCH_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &aligns[i], sizeof(aligns[i])));
    cublasLtMatmulHeuristicResult_t res[16] = {};
    int count = 0;
    const cublasStatus_t hst = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 16, res, &count);
    if (hst == CUBLAS_STATUS_NOT_SUPPORTED) count = 0;  // no algorithm: reported as "none ran"
    else BENCH_LT_CHECK(hst);
    out.candidates = count;
    const float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < count; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) {
        ++out.failed;
        continue;
      }
      const cublasLtMatmulAlgo_t* algo = &res[i].algo;
      bool ok = true;
      auto call = [&] {
        if (cublasLtMatmul(h, op, &alpha, p.A, la, p.B, lb, &beta, p.D, ld, p.D, ld, algo, ws, ws_bytes, s) !=
            CUBLAS_STATUS_SUCCESS)
          ok = false;
      };
      const double ms = time_median_ms(call, s, warmup, iters);
      if (!ok) {
        ++out.failed;
        continue;
      }
      if (out.best_index < 0 || ms < out.ms) {
        out.ms = ms;
        out.best_index = i;
      }
    }
  } catch (...) {
    if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
    if (ld) (void)cublasLtMatrixLayoutDestroy(ld);
    if (lb) (void)cublasLtMatrixLayoutDestroy(lb);
    if (la) (void)cublasLtMatrixLayoutDestroy(la);
    if (op) (void)cublasLtMatmulDescDestroy(op);
    throw;
  }
  (void)cublasLtMatmulPreferenceDestroy(pref);
  (void)cublasLtMatrixLayoutDestroy(ld);
  (void)cublasLtMatrixLayoutDestroy(lb);
  (void)cublasLtMatrixLayoutDestroy(la);
  (void)cublasLtMatmulDescDestroy(op);
  return out;
}

struct Shape {
  const char* name;
  int64_t K, N;  // nn.Linear in -> out
};

int run(int device_index, int warmup, int iters) {
  std::string reason;
  const auto& devs = cuda_devices(&reason);
  if (devs.empty() || !cuda_available()) {
    std::fprintf(stderr, "bench_gpu_kernels: no usable CUDA device; nothing measured.\n%s\n",
                 cuda_runtime_summary().c_str());
    return 2;
  }
  if (device_index < 0 || device_index >= static_cast<int>(devs.size()) || !devs[size_t(device_index)].supported()) {
    std::fprintf(stderr, "bench_gpu_kernels: --device-index %d is not a usable device (need sm_80+); nothing measured.\n%s\n",
                 device_index, cuda_runtime_summary().c_str());
    return 2;
  }
  const CudaDevice& dev = devs[size_t(device_index)];
  ZT_CUDA_CHECK(cudaSetDevice(device_index));
  CudaStream stream = CudaStream::create();
  const cudaStream_t s = stream.get();
  CudaAllocator alloc(device_index);
  alloc.set_stream(s);
  CudaGemm gemm(alloc);
  cublasLtHandle_t lt = nullptr;
  BENCH_LT_CHECK(cublasLtCreate(&lt));
  const size_t ws_bytes = gemm.workspace_bytes();  // the wrapper's limit, for a like-for-like search
  DevBuf ws(int64_t((ws_bytes + 3) / 4), DType::f32, false, 0);  // ws_bytes, as float32 elements

  nlohmann::json jg = nlohmann::json::array(), ja = nlohmann::json::array();
  std::printf("# bench_gpu_kernels on %s (sm_%d%d), warmup %d, iters %d\n\n", dev.name.c_str(), dev.major, dev.minor,
              warmup, iters);
  std::printf("## GEMM, M = 8192 rows (GPT-2 124M, B*T = 8*1024), FLOPs = 2 M N K\n\n");
  std::printf("| mode | shape | op | M | N | K | ours ms | ours TFLOP/s | best ms | best TFLOP/s | ours/best | best algo rank / candidates |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const int64_t M = 8 * 1024;
  const Shape shapes[] = {{"qkv", 768, 2304}, {"attn_proj", 768, 768}, {"fc", 768, 3072},
                          {"fc_proj", 3072, 768}, {"lm_head", 768, 50304}};
  const Mode modes[] = {{"bf16", DType::bf16, GemmPrecision::fp32},
                        {"f32-fp32", DType::f32, GemmPrecision::fp32},
                        {"f32-tf32", DType::f32, GemmPrecision::tf32}};
  for (const Mode& mode : modes) {
    for (const Shape& sh : shapes) {
      const int64_t N = sh.N, K = sh.K;
      const DType t = mode.dtype;
      DevBuf x(M * K, t, true, 1), w(N * K, t, true, 2), dy(M * N, t, true, 3);
      DevBuf y(M * N, t, false, 0), dx(M * K, t, false, 0), dw(N * K, t, false, 0);
      for (Op op : {Op::fwd, Op::dgrad, Op::wgrad}) {
        std::function<void()> ours;
        if (op == Op::fwd) {
          GemmArgs a;
          a.M = M, a.N = N, a.K = K, a.in_dtype = t, a.out_dtype = t, a.precision = mode.precision;
          a.x = x.p, a.w = w.p, a.y = y.p;
          ours = [&gemm, a, s] { gemm.linear(a, s); };
        } else if (op == Op::dgrad) {
          GemmGradInputArgs a;
          a.M = M, a.N = N, a.K = K, a.in_dtype = t, a.out_dtype = t, a.precision = mode.precision;
          a.dy = dy.p, a.w = w.p, a.dx = dx.p;
          ours = [&gemm, a, s] { gemm.linear_grad_input(a, s); };
        } else {
          GemmGradWeightArgs a;
          a.M = M, a.N = N, a.K = K, a.in_dtype = t, a.out_dtype = t, a.precision = mode.precision;
          a.dy = dy.p, a.x = x.p, a.dw = dw.p;
          ours = [&gemm, a, s] { gemm.linear_grad_weight(a, s); };
        }
        const double flops = 2.0 * double(M) * double(N) * double(K);
        const double ours_ms = time_median_ms(ours, s, warmup, iters);
        const double ours_stream_ms = time_stream_ms(ours, s, iters);
        const LtProblem p = lt_problem(op, M, N, K, x.p, w.p, dy.p, y.p, dx.p, dw.p);
        const LtBest best = lt_best(lt, p, mode, ws.p, ws_bytes, s, warmup, iters);
        const double ours_tf = flops / (ours_ms * 1e-3) / 1e12;
        nlohmann::json row = {{"mode", mode.name}, {"shape", sh.name}, {"op", op_name(op)}, {"M", M}, {"N", N},
                              {"K", K}, {"flops", flops}, {"ours_ms", ours_ms}, {"ours_tflops", ours_tf},
                              {"ours_stream_ms", ours_stream_ms}, {"best_candidates", best.candidates},
                              {"best_failed", best.failed}};
        if (best.best_index < 0) {
          std::printf("| %s | %s | %s | %lld | %lld | %lld | %.4f | %.1f | none ran | - | - | - / %d |\n", mode.name,
                      sh.name, op_name(op), (long long)M, (long long)N, (long long)K, ours_ms, ours_tf,
                      best.candidates);
          row["best_ms"] = nullptr;
        } else {
          const double best_tf = flops / (best.ms * 1e-3) / 1e12;
          std::printf("| %s | %s | %s | %lld | %lld | %lld | %.4f | %.1f | %.4f | %.1f | %.3f | %d / %d |\n", mode.name,
                      sh.name, op_name(op), (long long)M, (long long)N, (long long)K, ours_ms, ours_tf, best.ms,
                      best_tf, ours_tf / best_tf, best.best_index, best.candidates);
          row["best_ms"] = best.ms;
          row["best_tflops"] = best_tf;
          row["best_rank"] = best.best_index;
          row["ratio"] = ours_tf / best_tf;
        }
        std::fflush(stdout);
        jg.push_back(row);
      }
    }
  }

  // Attention: B = 8, T = 1024, H = 12, D = 64 (GPT-2 124M).
  const int64_t B = 8, T = 1024, H = 12, D = 64;
  const double fwd_flops = 2.0 * 2.0 * double(B) * double(H) * double(T) * double(T) * double(D) / 2.0;
  const double bwd_flops = 2.5 * fwd_flops;
  std::printf("\n## Attention (ours: cuda_kernels, CUDA cores), B %lld T %lld H %lld D %lld, causal\n",
              (long long)B, (long long)T, (long long)H, (long long)D);
  std::printf("FLOPs: forward = 2*2*B*H*T*T*D/2 = %.3g, backward = 2.5 x forward = %.3g\n", fwd_flops, bwd_flops);
#if defined(ZT_HAVE_CUDNN)
  CudnnAttention dnn(alloc);
  const std::string cudnn_status = "cuDNN " + CudnnAttention::version_string();
  std::printf("cudnn: %s (CudnnAttention, deterministic plans); ratio = ours ms / cuDNN ms\n\n", cudnn_status.c_str());
#else
  const std::string cudnn_status = "not built";
  std::printf("cudnn: not built (this build found no cuDNN; nothing timed in its place)\n\n");
#endif
  std::printf("| dtype | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s | cuDNN fwd ms | cuDNN fwd TFLOP/s | cuDNN bwd ms "
              "| cuDNN bwd TFLOP/s | fwd ours/cuDNN | bwd ours/cuDNN |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (DType t : {DType::bf16, DType::f32}) {
    const int64_t n = B * T * H * D;
    DevBuf q(n, t, true, 11), k(n, t, true, 12), v(n, t, true, 13), dout(n, t, true, 14);
    DevBuf out(n, t, false, 0), dq(n, t, false, 0), dk(n, t, false, 0), dv(n, t, false, 0);
    DevBuf lse(B * H * T, DType::f32, false, 0);
    DevBuf wsa((cuda_kernels::attention_backward_workspace_bytes(B, T, H) + 3) / 4, DType::f32, false, 0);  // bytes / 4
    float* lsep = static_cast<float*>(lse.p);
    auto fwd = [&] { cuda_kernels::attention_forward(t, out.p, lsep, q.p, k.p, v.p, B, T, H, H, D, s); };
    auto bwd = [&] {
      cuda_kernels::attention_backward(t, dq.p, dk.p, dv.p, dout.p, q.p, k.p, v.p, out.p, lsep, wsa.p, B, T, H, H, D, s);
    };
    const double fms = time_median_ms(fwd, s, warmup, iters);  // also leaves out / lse for the backward
    const double bms = time_median_ms(bwd, s, warmup, iters);
    const double ftf = fwd_flops / (fms * 1e-3) / 1e12, btf = bwd_flops / (bms * 1e-3) / 1e12;
    nlohmann::json row = {{"dtype", dtype_name(t)}, {"B", B}, {"T", T}, {"H", H}, {"D", D}, {"fwd_ms", fms},
                          {"fwd_tflops", ftf}, {"bwd_ms", bms}, {"bwd_tflops", btf}, {"fwd_flops", fwd_flops},
                          {"bwd_flops", bwd_flops}};
    std::string cudnn_cells = "| - | - | - | - | - | - |";
#if defined(ZT_HAVE_CUDNN)
    const CudnnAttnShape shape{B, T, H, H, D, t};
    std::string why;
    if (dnn.supported(shape, &why)) {
      // the same buffers: cuDNN's forward rewrites out and lse, its backward reads them
      auto dfwd = [&] { dnn.forward(shape, out.p, lsep, q.p, k.p, v.p, s); };
      auto dbwd = [&] { dnn.backward(shape, dq.p, dk.p, dv.p, dout.p, q.p, k.p, v.p, out.p, lsep, s); };
      const double cf = time_median_ms(dfwd, s, warmup, iters);
      const double cb = time_median_ms(dbwd, s, warmup, iters);
      const double cftf = fwd_flops / (cf * 1e-3) / 1e12, cbtf = bwd_flops / (cb * 1e-3) / 1e12;
      char buf[256];
      std::snprintf(buf, sizeof(buf), "| %.3f | %.2f | %.3f | %.2f | %.2f | %.2f |", cf, cftf, cb, cbtf, fms / cf,
                    bms / cb);
      cudnn_cells = buf;
      row["cudnn_fwd_ms"] = cf, row["cudnn_fwd_tflops"] = cftf, row["cudnn_bwd_ms"] = cb, row["cudnn_bwd_tflops"] = cbtf;
      row["fwd_ours_over_cudnn"] = fms / cf, row["bwd_ours_over_cudnn"] = bms / cb;
    } else {
      cudnn_cells = "| unsupported | - | - | - | - | - |";
      row["cudnn_unsupported"] = why;
      std::fprintf(stderr, "cuDNN does not run %s: %s\n", shape.str().c_str(), why.c_str());
    }
#endif
    std::printf("| %s | %.3f | %.2f | %.3f | %.2f %s\n", dtype_name(t), fms, ftf, bms, btf, cudnn_cells.c_str());
    std::fflush(stdout);
    ja.push_back(row);
  }
  ZT_CUDA_CHECK(cudaStreamSynchronize(s));
  (void)cublasLtDestroy(lt);

  // Element-wise kernels: bytes each must move (every input read once, every output written once)
  // over the time, against a device-to-device copy (cudaMemcpyAsync) of the same buffers: the
  // ceiling a memory-bound kernel can reach. n = 2^26 elements (256 MiB of float32 per buffer).
  nlohmann::json jb = nlohmann::json::array();
  {
    const int64_t n = int64_t(1) << 26;
    DevBuf a32(n, DType::f32, true, 71), b32(n, DType::f32, true, 72), c32(n, DType::f32, true, 73),
        d32(n, DType::f32, true, 74), a16(n, DType::bf16, true, 75), b16(n, DType::bf16, true, 76),
        c16(n, DType::bf16, true, 77);
    cuda_kernels::AdamWConfig hc{1e-4, 0.9, 0.95, 1e-8, 0.1};
    ZT_CUDA_CHECK(cudaMemsetAsync(d32.p, 0, d32.bytes, s));  // v >= 0
    // the gradient norm's sum of squares: its result and chunk partials
    DevBuf sq_ws(cuda_kernels::sum_of_squares_workspace_bytes(n) / 4 + 2, DType::f32, false, 0);
    struct Row {
      const char* name;
      double bytes_per_elem;
      std::function<void()> f;
    };
    int64_t step = 0;
    const Row rows[] = {
        {"device copy (cudaMemcpyAsync), float32", 8,
         [&] { ZT_CUDA_CHECK(cudaMemcpyAsync(b32.p, a32.p, a32.bytes, cudaMemcpyDeviceToDevice, s)); }},
        {"cast float32 -> bfloat16", 6, [&] { cuda_kernels::cast(DType::bf16, a16.p, DType::f32, a32.p, n, 1.0f, s); }},
        {"add, float32", 12,
         [&] { cuda_kernels::binary(cuda_kernels::EwOp::add, DType::f32, c32.p, a32.p, b32.p, n, s); }},
        {"add, bfloat16", 6,
         [&] { cuda_kernels::binary(cuda_kernels::EwOp::add, DType::bf16, c16.p, a16.p, b16.p, n, s); }},
        {"gelu forward, bfloat16", 4, [&] { cuda_kernels::gelu_forward(DType::bf16, c16.p, a16.p, n, s); }},
        {"sum of squares (the gradient norm's, float64 in a fixed order), bfloat16", 2,
         [&] {
           auto* w = static_cast<double*>(sq_ws.p);
           cuda_kernels::sum_of_squares_async(b16.p, DType::bf16, n, w, w + 1, s);
         }},
        {"AdamW step (fp32 master, m, v; bf16 copy out)", 30,
         [&] {
           cuda_kernels::adamw_step(static_cast<float*>(a32.p), static_cast<const float*>(b32.p),
                                    static_cast<float*>(c32.p), static_cast<float*>(d32.p), n, hc, ++step, true,
                                    static_cast<uint16_t*>(b16.p), s);
         }},
    };
    std::printf("\n## Element-wise bandwidth, n = %lld elements; GB/s = bytes moved (inputs read once, outputs written "
                "once) / time\n\n| kernel | bytes / element | ms | GB/s | of copy |\n|---|---|---|---|---|\n",
                static_cast<long long>(n));
    double copy_gbs = 0;
    for (const Row& r : rows) {
      const double ms = time_median_ms(r.f, s, warmup, iters);
      const double gbs = r.bytes_per_elem * double(n) / (ms * 1e-3) / 1e9;
      if (copy_gbs == 0) copy_gbs = gbs;
      std::printf("| %s | %.0f | %.3f | %.0f | %.2f |\n", r.name, r.bytes_per_elem, ms, gbs, gbs / copy_gbs);
      jb.push_back({{"kernel", r.name}, {"bytes_per_elem", r.bytes_per_elem}, {"ms", ms}, {"gb_per_s", gbs},
                    {"of_copy", gbs / copy_gbs}});
    }
    ZT_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  // Cross-entropy over the logits, bfloat16, B*T = 8192 rows: the separate forward (with the mean)
  // and backward, as cross_entropy's op runs them, against the fused pass that writes the gradient
  // over the logits (cross_entropy_and_grad, linear_cross_entropy's). GB/s from the bytes the
  // separate pair must move at least (read the logits twice, write the gradient once: 3 x N x V x
  // 2) and from the fused pass's (read once, write once: 2 x N x V x 2). Every 16th row ignored.
  nlohmann::json jc = nlohmann::json::array();
  {
    std::printf(
        "\n## Cross-entropy, bfloat16, N = 8192 rows: forward + backward vs the fused pass\n\n"
        "| vocabulary | separate ms | separate GB/s | fused ms | fused GB/s | fused / separate |\n"
        "|---|---|---|---|---|---|\n");
    const int64_t N = 8192;
    const struct {
      const char* name;
      int64_t V, Vv;
    } vocabs[] = {{"GPT-2 (50304, 50257 real)", 50304, 50257}, {"Llama 3 (128256)", 128256, 128256}};
    std::vector<int32_t> tg(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) tg[size_t(i)] = i % 16 == 5 ? -1 : static_cast<int32_t>((i * 7919) % 50257);
    int64_t count = 0;
    for (int32_t t : tg) count += t != -1;
    DevBuf targets(N, DType::i32, false, 0), stats(2 * N + 2, DType::f32, false, 0);  // lse, row losses, mean
    ZT_CUDA_CHECK(cudaMemcpy(targets.p, tg.data(), tg.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    const auto* t32 = static_cast<const int32_t*>(targets.p);
    auto* st = static_cast<float*>(stats.p);
    for (const auto& v : vocabs) {
      DevBuf logits(N * v.V, DType::bf16, true, 81), grad(N * v.V, DType::bf16, false, 0);
      auto separate = [&] {
        cuda_kernels::cross_entropy_forward(DType::bf16, st + 2 * N, st + N, st, logits.p, t32, N, v.V, v.Vv, count, 0,
                                            s);
        cuda_kernels::cross_entropy_backward(DType::bf16, grad.p, logits.p, st, t32, 1.0f / float(count), N, v.V, v.Vv,
                                             s);
      };
      // over a fresh copy of the logits each call would time the copy too: the fused pass runs on
      // what the previous call left (gradients: finite, the same amount of work)
      auto fused = [&] {
        cuda_kernels::cross_entropy_and_grad(DType::bf16, st + 2 * N, st + N, logits.p, t32, N, v.V, v.Vv, count, s);
      };
      const double sms = time_median_ms(separate, s, warmup, iters), fms = time_median_ms(fused, s, warmup, iters);
      const double nv2 = double(N) * double(v.V) * 2.0;
      const double sgb = 3 * nv2 / (sms * 1e-3) / 1e9, fgb = 2 * nv2 / (fms * 1e-3) / 1e9;
      std::printf("| %s | %.3f | %.0f | %.3f | %.0f | %.3f |\n", v.name, sms, sgb, fms, fgb, fms / sms);
      std::fflush(stdout);
      jc.push_back({{"vocab", v.V},
                    {"valid_vocab", v.Vv},
                    {"rows", N},
                    {"separate_ms", sms},
                    {"separate_gb_per_s", sgb},
                    {"fused_ms", fms},
                    {"fused_gb_per_s", fgb},
                    {"fused_over_separate", fms / sms}});
    }
    ZT_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  nlohmann::json j = {{"bench", "gpu_kernels"},
                      {"device", dev.name},
                      {"sm", dev.major * 10 + dev.minor},
                      {"warmup", warmup},
                      {"iters", iters},
                      {"timing", "median of per-call CudaEvent pairs"},
                      {"gemm_flops", "2*M*N*K"},
                      {"attention_flops", "fwd 2*2*B*H*T*T*D/2, bwd 2.5*fwd"},
                      {"cudnn", cudnn_status},
                      {"gemm", jg},
                      {"attention", ja},
                      {"bandwidth", jb},
                      {"cross_entropy", jc}};
  std::printf("\n%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gpu_kernels: GEMM (ours vs cuBLASLt's best) and attention kernel timings on a GPU"};
  int warmup = 5, iters = 20, device_index = 0;
  app.add_option("--warmup", warmup, "untimed calls before timing")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--iters", iters, "timed calls (median reported)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--device-index", device_index, "CUDA device to run on")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    return run(device_index, warmup, iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_kernels: error: %s\n", e.what());
    return 1;
  }
}
