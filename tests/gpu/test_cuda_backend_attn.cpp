// defines: 8 Catch2 test cases tagged [cuda_backend_attn]; helpers: tol_for, gpu, cpu, host_randn, rows2d,
//          host_empty and 16 more
//
// CudaBackend's GEMM, linear, RoPE and attention entries (cuda/backend_attention.cpp) against
// cpu_backend() on random inputs (normal, never all zeros). Every GPU output is poisoned with NaN
// before the call (an element an entry fails to write fails the check); accumulating outputs
// start from random values instead, uploaded to both sides.
//
// bfloat16: the inputs are rounded to bf16 on the host, the CPU backend (float32 only) runs in
// float32 on those exact values, and the GPU's bf16 results (float32 math, one final rounding) are
// compared with that float32 reference.
//
// Tolerances (|gpu - ref| <= tol * scale; NaN never passes):
//   float32 (GEMMs in IEEE fp32 mode)  tol = 1e-5
//   tf32 (CudaGemm::gemm directly)     tol = 1e-3
//   bfloat16                           tol = 1e-2 (covers the output's rounding, 2^-9 relative)
// scale, per element:
// - GEMM and linear: the same product on the absolute values (|alpha| |A| |B| + |beta| |C|, for
//   linear |x| |w|^T + |b|, for the backward |dy| |w|, |dy|^T |x| (+ |old dw|), column sums of |dy|
//   (+ |old db|)), computed by cpu_backend() too: the size of the terms, so cancellation is not a
//   relative-error trap. fp32 products and sums differ from OpenBLAS's by ~K ulp of that scale.
// - bfloat16 attention gradients: the size of the terms they sum (attention_grad_scale, below).
// - RoPE and the rest of attention: max(|ref|, RMS of the whole reference tensor). Both attentions run
//   FlashAttention-2's algorithm (online softmax, P recomputed from the saved log-sum-exp), the
//   GPU with its own tiles and expf, the CPU with 64 x 64 tiles multiplied by OpenBLAS: float32
//   computations of the same sums in other orders, ~1e-6 of the RMS apart. The saved row
//   log-sum-exp (B, Hq, T) is checked against a float64 host computation and against the CPU's
//   saved one (the same statistic, float32 on both) at 1e-5 * max(1, |lse|).
// - RoPE tables: within one float ulp (+1e-12) of the CPU's (both round a double result).
//   The gradients' scale has an absolute floor of 0.1 (see kGradFloor).
// Determinism: attention forward and backward run twice and must agree bit for bit.
// These attention kernels were also run, before any GPU was available, in a host emulation (one
// host thread per CUDA thread, barriers for __syncthreads and the shuffles) on these shapes against
// the CPU: worst error / scale 3.7e-6 (float32) and 3.9e-3 (bfloat16).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "cuda/backend.h"
#include "cuda/gemm.h"
#include "tests/gpu/host_lse.h"  // defines: zt::test::host_lse

using namespace zt;

namespace {

constexpr double kTolF32 = 1e-5, kTolTf32 = 1e-3, kTolBf16 = 1e-2;
double tol_for(DType t) { return t == DType::bf16 ? kTolBf16 : kTolF32; }

CudaBackend& gpu() {
  static const bool registered = (register_cuda_backend(), true);
  (void)registered;
  return static_cast<CudaBackend&>(backend(Device::cuda(0)));
}
CpuBackend& cpu() { return cpu_backend(); }

// A host float32 tensor of normal values (sd), rounded to bf16 precision when `t` is bf16.
Tensor host_randn(const Shape& s, uint32_t seed, double sd, DType t) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, sd);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) {
    float f = static_cast<float>(nd(rng));
    if (t == DType::bf16) f = bf16_to_f32(f32_to_bf16(f));
    x = f;
  }
  return Tensor::from_vector(v, s, DType::f32, Category::activations);
}
// (..., n) as (rows, n): the CPU backend's linear takes 2-D operands, the GPU's any leading dims
Tensor rows2d(const Tensor& t) { return t.defined() ? t.view({-1, t.size(-1)}) : t; }
Tensor host_empty(const Shape& s) { return Tensor::empty(s, DType::f32, Category::activations, cpu_allocator()); }
Tensor host_zeros(const Shape& s) { return Tensor::zeros(s, DType::f32, Category::activations, cpu_allocator()); }
Tensor host_abs(const Tensor& t) {
  auto v = t.to_vector();
  for (auto& x : v) x = std::fabs(x);
  return Tensor::from_vector(v, t.shape(), DType::f32, Category::activations);
}
// The host tensor on the GPU in dtype t (exact: the values are representable).
Tensor to_gpu(const Tensor& h, DType t) {
  const Tensor c = t == DType::f32 ? h : h.to(t);
  return c.to(Device::cuda(0), Category::activations);
}
Tensor gpu_poisoned(const Shape& s, DType t) {
  Tensor g = Tensor::empty(s, t, Category::activations, gpu().allocator());
  g.fill_(std::nan(""));
  return g;
}

// |got - ref| <= tol * scale[i] for every element (NaN fails); reports count, first and worst.
void check_bound(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>& scale,
                 double tol, const std::string& what) {
  REQUIRE(got.size() == ref.size());
  REQUIRE(scale.size() == ref.size());
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - ref[i]);
    const double ratio = std::isfinite(err) ? err / (tol * scale[i] + 1e-30) : INFINITY;
    if (!(ratio <= 1.0) && bad++ == 0) first = i;
    if (!(ratio <= worst)) worst = ratio;
  }
  INFO(what << ": " << bad << " of " << got.size() << " out of tolerance " << tol << "; first at " << first
            << ": got " << (got.empty() ? 0 : got[first]) << ", want " << (ref.empty() ? 0 : ref[first])
            << " (scale " << (scale.empty() ? 0 : scale[first]) << "); worst err / bound " << worst);
  CHECK(bad == 0);
}
// scale = a tensor of the same shape (the absolute-value product)
void check_scaled(const Tensor& got, const Tensor& ref, const Tensor& scale, double tol, const std::string& what) {
  check_bound(got.to_vector(), ref.to_vector(), scale.to_vector(), tol, what);
}
// scale = max(|ref|, RMS(ref), floor)
void check_rms(const Tensor& got, const Tensor& ref, double tol, const std::string& what, double floor = 0.0) {
  const auto r = ref.to_vector();
  double ss = 0;
  for (double x : r) ss += x * x;
  const double rms = r.empty() ? 0 : std::sqrt(ss / static_cast<double>(r.size()));
  std::vector<double> scale(r.size());
  for (size_t i = 0; i < r.size(); ++i) scale[i] = std::max({std::fabs(r[i]), rms, floor});
  check_bound(got.to_vector(), r, scale, tol, what);
}
bool same_bits(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i]) && !(std::isnan(x[i]) && std::isnan(y[i]))) return false;
  return true;
}

std::string dt_name(DType t) { return dtype_name(t); }

}  // namespace

// ---- gemm -----------------------------------------------------------------------------------------

namespace {

struct GemmCase {
  int64_t M, N, K, batch;
  bool b_shared;  // stride_b = 0: one B for every product
  double alpha, beta;
};

// Runs one GemmShape on the GPU (through the backend, or CudaGemm::gemm with `prec` when tf32) and
// on the CPU, and checks it.
void run_gemm(const GemmCase& c, bool ta, bool tb, DType dt, bool tf32, uint32_t seed) {
  GemmShape g;
  g.trans_a = ta, g.trans_b = tb;
  g.M = c.M, g.N = c.N, g.K = c.K;
  g.alpha = c.alpha, g.beta = c.beta;
  g.batch = c.batch;
  g.stride_a = c.M * c.K;
  g.stride_b = c.b_shared ? 0 : c.K * c.N;
  g.stride_c = c.M * c.N;
  const std::string what = "gemm " + dt_name(dt) + (tf32 ? " tf32" : "") + " M " + std::to_string(c.M) + " N " +
                           std::to_string(c.N) + " K " + std::to_string(c.K) + " batch " + std::to_string(c.batch) +
                           (c.b_shared ? " (B shared)" : "") + (ta ? " A^T" : "") + (tb ? " B^T" : "") + " alpha " +
                           std::to_string(c.alpha) + " beta " + std::to_string(c.beta);
  const Tensor A = host_randn({c.batch * c.M * c.K}, seed, 1.0, dt);
  const Tensor B = host_randn({(c.b_shared ? 1 : c.batch) * c.K * c.N}, seed + 1, 1.0, dt);
  const Tensor C0 = host_randn({c.batch * c.M * c.N}, seed + 2, 1.0, dt);
  Tensor Cg;
  if (c.beta != 0.0) Cg = to_gpu(C0, dt);
  else Cg = gpu_poisoned(C0.shape(), dt);  // not read when beta == 0
  if (tf32) {
    GemmStridedArgs a;
    a.trans_a = g.trans_a, a.trans_b = g.trans_b;
    a.M = g.M, a.N = g.N, a.K = g.K;
    a.alpha = g.alpha, a.beta = g.beta;
    a.batch = g.batch, a.stride_a = g.stride_a, a.stride_b = g.stride_b, a.stride_c = g.stride_c;
    a.precision = GemmPrecision::tf32;
    const Tensor Ag = to_gpu(A, dt), Bg = to_gpu(B, dt);
    a.a = Ag.raw(), a.b = Bg.raw(), a.c = Cg.raw();
    gpu().gemm_engine().gemm(a, gpu().stream());
    gpu().synchronize();
  } else {
    gpu().gemm(g, to_gpu(A, dt), to_gpu(B, dt), Cg);
  }
  Tensor Cr = c.beta != 0.0 ? C0.clone() : host_zeros(C0.shape());
  cpu().gemm(g, A, B, Cr);
  GemmShape ga = g;
  ga.alpha = std::fabs(g.alpha), ga.beta = std::fabs(g.beta);
  Tensor Cs = c.beta != 0.0 ? host_abs(C0) : host_zeros(C0.shape());
  cpu().gemm(ga, host_abs(A), host_abs(B), Cs);
  check_scaled(Cg, Cr, Cs, tf32 ? kTolTf32 : tol_for(dt), what);
}

}  // namespace

TEST_CASE("CudaBackend gemm: four transpose combinations, batches, shared B, alpha and beta", "[cuda_backend_attn]") {
  const GemmCase cases[] = {
      {5, 7, 3, 1, false, 1.0, 0.0},    {33, 17, 65, 1, false, 0.75, -0.5}, {9, 12, 16, 3, false, 1.0, 0.0},
      {9, 12, 16, 4, true, -1.25, 1.0}, {1, 1, 1, 2, true, 2.0, 0.5},
  };
  uint32_t seed = 10;
  for (DType dt : {DType::f32, DType::bf16})
    for (const auto& c : cases)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) run_gemm(c, ta, tb, dt, false, seed += 3);
}

TEST_CASE("CudaGemm::gemm in tf32 precision (strided batch)", "[cuda_backend_attn]") {
  const GemmCase cases[] = {{33, 17, 65, 1, false, 0.75, -0.5}, {9, 12, 16, 4, true, 1.0, 0.0}};
  uint32_t seed = 500;
  for (const auto& c : cases)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) run_gemm(c, ta, tb, DType::f32, true, seed += 3);
}

TEST_CASE("CudaBackend gemm refuses bad arguments", "[cuda_backend_attn]") {
  GemmShape g;
  g.M = 2, g.N = 3, g.K = 4, g.batch = 2, g.stride_a = 8, g.stride_b = 12, g.stride_c = 6;
  const Tensor A = to_gpu(host_randn({16}, 1, 1.0, DType::f32), DType::f32);
  const Tensor B = to_gpu(host_randn({24}, 2, 1.0, DType::f32), DType::f32);
  const Tensor small = gpu_poisoned({6}, DType::f32);
  CHECK_THROWS_WITH(gpu().gemm(g, A, B, small), Catch::Contains("the batch needs 12"));
  const Tensor Cb = gpu_poisoned({12}, DType::bf16);
  CHECK_THROWS_WITH(gpu().gemm(g, A, B, Cb), Catch::Contains("expected bfloat16"));
}

// ---- linear -------------------------------------------------------------------------------------

TEST_CASE("CudaBackend linear forward, with and without bias", "[cuda_backend_attn]") {
  struct Case {
    Shape x;
    int64_t out;
  };
  const Case cases[] = {{{2, 9, 24}, 40}, {{33, 65}, 17}, {{1, 1}, 1}};
  uint32_t seed = 1000;
  for (DType dt : {DType::f32, DType::bf16})
    for (const auto& c : cases)
      for (bool bias : {false, true}) {
        const int64_t in = c.x.back();
        Shape ys = c.x;
        ys.back() = c.out;
        const std::string what = "linear " + dt_name(dt) + " x " + shape_str(c.x) + " out " + std::to_string(c.out) +
                                 (bias ? " +bias" : "");
        const Tensor x = host_randn(c.x, seed += 3, 1.0, dt);
        const Tensor w = host_randn({c.out, in}, seed + 1, 1.0 / std::sqrt(double(in)), dt);
        const Tensor b = bias ? host_randn({c.out}, seed + 2, 0.5, dt) : Tensor();
        Tensor yg = gpu_poisoned(ys, dt);
        gpu().linear(yg, to_gpu(x, dt), to_gpu(w, dt), bias ? to_gpu(b, dt) : Tensor());
        Tensor yr = host_empty(ys), ysc = host_empty(ys);
        cpu().linear(rows2d(yr), rows2d(x), w, b);
        cpu().linear(rows2d(ysc), rows2d(host_abs(x)), host_abs(w), bias ? host_abs(b) : Tensor());
        check_scaled(yg, yr, ysc, tol_for(dt), what);
      }
}

TEST_CASE("CudaBackend linear_backward: dx, dw, db written or accumulated", "[cuda_backend_attn]") {
  struct Case {
    Shape x;
    int64_t out;
  };
  const Case cases[] = {{{2, 9, 24}, 40}, {{130, 33}, 17}, {{1100, 16}, 24}};  // the last: 18 row chunks of db
  uint32_t seed = 2000;
  for (DType dt : {DType::f32, DType::bf16})
    for (const auto& c : cases)
      for (bool acc : {false, true})
        for (int which : {0, 1, 2}) {  // 0: dx, dw, db; 1: dx, dw (no bias); 2: db only (no dw GEMM)
          const int64_t in = c.x.back();
          Shape ys = c.x;
          ys.back() = c.out;
          const std::string what = "linear_backward " + dt_name(dt) + " x " + shape_str(c.x) + " out " +
                                   std::to_string(c.out) + (acc ? " accumulate" : "") +
                                   (which == 0 ? " dx dw db" : which == 1 ? " dx dw" : " db only");
          const Tensor x = host_randn(c.x, seed += 5, 1.0, dt);
          const Tensor w = host_randn({c.out, in}, seed + 1, 0.2, dt);
          const Tensor dy = host_randn(ys, seed + 2, 1.0, dt);
          const Tensor dw0 = host_randn({c.out, in}, seed + 3, 1.0, dt);
          const Tensor db0 = host_randn({c.out}, seed + 4, 1.0, dt);
          const bool want_dx = which != 2, want_dw = which != 2, want_db = which != 1;

          Tensor dxg = want_dx ? gpu_poisoned(c.x, dt) : Tensor();
          Tensor dwg = want_dw ? (acc ? to_gpu(dw0, dt) : gpu_poisoned(dw0.shape(), dt)) : Tensor();
          Tensor dbg = want_db ? (acc ? to_gpu(db0, dt) : gpu_poisoned(db0.shape(), dt)) : Tensor();
          gpu().linear_backward(dxg, dwg, dbg, to_gpu(dy, dt), to_gpu(x, dt), to_gpu(w, dt), acc);

          Tensor dxr = want_dx ? host_empty(c.x) : Tensor();
          Tensor dwr = want_dw ? (acc ? dw0.clone() : host_empty(dw0.shape())) : Tensor();
          Tensor dbr = want_db ? (acc ? db0.clone() : host_empty(db0.shape())) : Tensor();
          cpu().linear_backward(rows2d(dxr), dwr, dbr, rows2d(dy), rows2d(x), w, acc);
          Tensor dxs = want_dx ? host_empty(c.x) : Tensor();
          Tensor dws = want_dw ? (acc ? host_abs(dw0) : host_empty(dw0.shape())) : Tensor();
          Tensor dbs = want_db ? (acc ? host_abs(db0) : host_empty(db0.shape())) : Tensor();
          cpu().linear_backward(rows2d(dxs), dws, dbs, rows2d(host_abs(dy)), rows2d(host_abs(x)), host_abs(w), acc);

          const double tol = tol_for(dt);
          if (want_dx) check_scaled(dxg, dxr, dxs, tol, what + " (dx)");
          if (want_dw) check_scaled(dwg, dwr, dws, tol, what + " (dw)");
          if (want_db) check_scaled(dbg, dbr, dbs, tol, what + " (db)");
        }
}

// ---- RoPE ---------------------------------------------------------------------------------------

TEST_CASE("CudaBackend rope_tables, rope forward and inverse", "[cuda_backend_attn]") {
  const int64_t B = 2, T = 13, H = 3, D = 24;
  const double theta = 10000.0;
  Tensor cg = gpu_poisoned({T, D / 2}, DType::f32), sg = gpu_poisoned({T, D / 2}, DType::f32);
  gpu().rope_tables(cg, sg, theta);
  Tensor cr = host_empty({T, D / 2}), sr = host_empty({T, D / 2});
  cpu().rope_tables(cr, sr, theta);
  for (int which = 0; which < 2; ++which) {
    const auto got = (which ? sg : cg).to_vector(), ref = (which ? sr : cr).to_vector();
    std::vector<double> scale(ref.size());
    for (size_t i = 0; i < ref.size(); ++i) scale[i] = std::ldexp(std::fabs(ref[i]), -23) + 1e-12;
    check_bound(got, ref, scale, 1.0, which ? "rope_tables (sin)" : "rope_tables (cos)");
  }
  // the application, on the CPU's tables (uploaded) so that only the rotation is measured
  const Tensor cu = to_gpu(cr, DType::f32), su = to_gpu(sr, DType::f32);
  uint32_t seed = 3000;
  // rot_heads < H: a packed q | k | v, the last heads copied unchanged
  for (int64_t rot : {H, int64_t{1}})
    for (DType dt : {DType::f32, DType::bf16})
      for (bool inverse : {false, true}) {
        const std::string what = std::string("rope ") + dt_name(dt) + (inverse ? " inverse" : " forward") +
                                 " rot_heads " + std::to_string(rot);
        const Tensor x = host_randn({B, T, H, D}, seed += 7, 1.0, dt);
        const Tensor xg = to_gpu(x, dt);
        Tensor og = gpu_poisoned(x.shape(), dt);
        gpu().rope(og, xg, cu, su, inverse, rot);
        Tensor orf = host_empty(x.shape());
        cpu().rope(orf, x, cr, sr, inverse, rot);
        check_rms(og, orf, tol_for(dt), what);
        if (rot < H) {  // the passed heads are the input's bits
          const auto got = og.to_vector(), in = x.to_vector();
          int64_t bad = 0;
          for (int64_t i = 0; i < B * T * H * D; ++i)
            bad += (i / D) % H >= rot && got[static_cast<size_t>(i)] != in[static_cast<size_t>(i)];
          CHECK(bad == 0);
        }
        if (dt == DType::f32) {  // the inverse undoes the rotation
          Tensor back = gpu_poisoned(x.shape(), dt);
          gpu().rope(back, og, cu, su, !inverse, rot);
          check_rms(back, x, kTolF32, what + " then its inverse");
        }
      }
}

// ---- attention ----------------------------------------------------------------------------------

namespace {

struct AttnCase {
  int64_t B, T, Hq, Hkv, D;
};
std::string attn_name(const AttnCase& c, DType dt) {
  return "attention " + dt_name(dt) + " B " + std::to_string(c.B) + " T " + std::to_string(c.T) + " Hq " +
         std::to_string(c.Hq) + " Hkv " + std::to_string(c.Hkv) + " D " + std::to_string(c.D);
}

// An absolute floor for the gradients' scale: 0.1 of one term's size (dout . v / sqrt(D) ~ 1 with
// unit-normal inputs). Where dq, dk cancel to exactly 0 on the CPU (T = 1: ds = p (dp - Dl) with
// p = 1 and Dl = dp), the GPU's dp and Dl are the same sum in two orders, ~1e-7 apart.
constexpr double kGradFloor = 0.1;

// bfloat16 gradients' scale, per element: the size of the terms each gradient sums, in float64,
// with P = softmax(q k^T / sqrt(D)) (causal), dP = dout v^T and A_i = sum_e |dout_ie out_ie|:
//   dq: (1/sqrt(D)) sum_j P_ij (|dP_ij| + A_i) |k_j|,   dk: (1/sqrt(D)) sum_i P_ij (|dP_ij| + A_i) |q_i|,
//   dv: sum_i P_ij |dout_i|.
// cuDNN (which the backend uses for bfloat16) rounds P and dS = P (dP - Delta) to bfloat16 before
// its GEMMs, like FlashAttention-2, and Delta_i = sum dout out is a sum of those A_i-sized terms;
// each rounding errs by 2^-8 of a term, so its error is a few 2^-8 of this scale, not of the RMS
// of the result (which cancellation makes smaller: measured on an H100, dq up to 2.8 x 1e-2 of it).
// The output's scale is sum_j P_ij |v_j| (cuDNN rounds P to bfloat16 before P v too).
struct GradScale {
  std::vector<double> out, dq, dk, dv;
};
GradScale attention_grad_scale(const AttnCase& c, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& out, const Tensor& dout) {
  const auto Q = q.to_vector(), K = k.to_vector(), Vv = v.to_vector(), O = out.to_vector(), dO = dout.to_vector();
  const int64_t B = c.B, T = c.T, Hq = c.Hq, Hkv = c.Hkv, D = c.D, group = Hq / Hkv;
  GradScale g{std::vector<double>(Q.size(), 0.0), std::vector<double>(Q.size(), 0.0), std::vector<double>(K.size(), 0.0),
              std::vector<double>(K.size(), 0.0)};
  const double r = 1.0 / std::sqrt(double(D));
  auto qi = [&](int64_t b, int64_t t, int64_t h) { return ((b * T + t) * Hq + h) * D; };
  auto ki = [&](int64_t b, int64_t t, int64_t h) { return ((b * T + t) * Hkv + h) * D; };
  std::vector<double> p(static_cast<size_t>(T)), dp(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < T; ++i) {
        double mx = -INFINITY, sum = 0, A = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double sc = 0, d = 0;
          for (int64_t e = 0; e < D; ++e) {
            sc += Q[qi(b, i, h) + e] * K[ki(b, j, hk) + e];
            d += dO[qi(b, i, h) + e] * Vv[ki(b, j, hk) + e];
          }
          p[j] = sc * r, dp[j] = d;
          mx = std::max(mx, p[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int64_t e = 0; e < D; ++e) A += std::fabs(dO[qi(b, i, h) + e] * O[qi(b, i, h) + e]);
        for (int64_t j = 0; j <= i; ++j) {
          const double pj = p[j] / sum, w = pj * (std::fabs(dp[j]) + A) * r;
          for (int64_t e = 0; e < D; ++e) {
            g.out[qi(b, i, h) + e] += pj * std::fabs(Vv[ki(b, j, hk) + e]);
            g.dq[qi(b, i, h) + e] += w * std::fabs(K[ki(b, j, hk) + e]);
            g.dk[ki(b, j, hk) + e] += w * std::fabs(Q[qi(b, i, h) + e]);
            g.dv[ki(b, j, hk) + e] += pj * std::fabs(dO[qi(b, i, h) + e]);
          }
        }
      }
    }
  return g;
}

void run_attention(const AttnCase& c, DType dt, uint32_t seed) {
  const std::string what = attn_name(c, dt);
  const Shape qs{c.B, c.T, c.Hq, c.D}, ks{c.B, c.T, c.Hkv, c.D};
  const Tensor q = host_randn(qs, seed, 1.0, dt), k = host_randn(ks, seed + 1, 1.0, dt),
               v = host_randn(ks, seed + 2, 1.0, dt), dout = host_randn(qs, seed + 3, 1.0, dt);
  const Tensor qg = to_gpu(q, dt), kg = to_gpu(k, dt), vg = to_gpu(v, dt), doutg = to_gpu(dout, dt);
  const double tol = tol_for(dt);

  // forward
  Tensor og = gpu_poisoned(qs, dt);
  const Tensor saved = gpu().attention(og, qg, kg, vg, true);
  Tensor orf = host_empty(qs);
  const Tensor cpu_saved = cpu().attention(orf, q, k, v, true);
  // bfloat16: each result against the size of the terms it sums (attention_grad_scale)
  const GradScale gs = dt == DType::bf16 ? attention_grad_scale(c, q, k, v, orf, dout) : GradScale{};
  auto bound = [&](const std::vector<double>& terms, const Tensor& ref) {
    const auto rv = ref.to_vector();
    std::vector<double> sc(rv.size());
    for (size_t i = 0; i < rv.size(); ++i) sc[i] = std::max({terms[i], std::fabs(rv[i]), 1e-3});
    return sc;
  };
  if (dt == DType::f32) check_rms(og, orf, tol, what + " (out)");
  else check_bound(og.to_vector(), orf.to_vector(), bound(gs.out, orf), tol, what + " (out)");
  REQUIRE(saved.defined());
  CHECK(saved.device() == Device::cuda(0));
  CHECK(saved.dtype() == DType::f32);
  CHECK(saved.shape() == Shape{c.B, c.Hq, c.T});
  REQUIRE(cpu_saved.shape() == saved.shape());
  {
    const auto got = saved.to_vector(), ref = zt::test::host_lse(c.B, c.T, c.Hq, c.Hkv, c.D, q, k);
    std::vector<double> scale(ref.size());
    for (size_t i = 0; i < ref.size(); ++i) scale[i] = std::max(1.0, std::fabs(ref[i]));
    check_bound(got, ref, scale, kTolF32, what + " (saved lse)");
    check_bound(got, cpu_saved.to_vector(), scale, kTolF32, what + " (saved lse vs the CPU's)");
  }
  // without keep_for_backward: nothing returned, the same output bits
  Tensor og2 = gpu_poisoned(qs, dt);
  CHECK_FALSE(gpu().attention(og2, qg, kg, vg, false).defined());
  CHECK(same_bits(og, og2));

  // backward
  Tensor dqg = gpu_poisoned(qs, dt), dkg = gpu_poisoned(ks, dt), dvg = gpu_poisoned(ks, dt);
  gpu().attention_backward(dqg, dkg, dvg, doutg, qg, kg, vg, og, saved);
  Tensor dqr = host_empty(qs), dkr = host_empty(ks), dvr = host_empty(ks);
  // the CPU's backward on its own forward (its out; the GPU's out differs by rounding only)
  cpu().attention_backward(dqr, dkr, dvr, dout, q, k, v, orf, cpu_saved);
  if (dt == DType::f32) {
    check_rms(dqg, dqr, tol, what + " (dq)", kGradFloor);
    check_rms(dkg, dkr, tol, what + " (dk)", kGradFloor);
    check_rms(dvg, dvr, tol, what + " (dv)", kGradFloor);
  } else {  // bfloat16: against the terms' size (attention_grad_scale), plus the output's rounding
    check_bound(dqg.to_vector(), dqr.to_vector(), bound(gs.dq, dqr), tol, what + " (dq)");
    check_bound(dkg.to_vector(), dkr.to_vector(), bound(gs.dk, dkr), tol, what + " (dk)");
    check_bound(dvg.to_vector(), dvr.to_vector(), bound(gs.dv, dvr), tol, what + " (dv)");
  }

  // determinism: the same bits again
  Tensor dq2 = gpu_poisoned(qs, dt), dk2 = gpu_poisoned(ks, dt), dv2 = gpu_poisoned(ks, dt);
  gpu().attention_backward(dq2, dk2, dv2, doutg, qg, kg, vg, og, saved);
  CHECK(same_bits(dqg, dq2));
  CHECK(same_bits(dkg, dk2));
  CHECK(same_bits(dvg, dv2));
}

}  // namespace

TEST_CASE("CudaBackend attention forward and backward against the CPU (GQA and MHA)", "[cuda_backend_attn]") {
  // T not a multiple of the kernels' tiles (16 query / key rows per block, 32 per shared tile;
  // the CPU's 64 x 64): 37, 77, 65, 200, 257, and 64 exactly; D = 64, 24, the limit 128, and an
  // odd 7; one T = 1; Hq = 6 over Hkv = 2, 4 over 2 and over 1, and Hq = Hkv.
  const AttnCase cases[] = {{2, 37, 4, 2, 64}, {1, 77, 3, 3, 24}, {1, 1, 2, 1, 24},  {2, 20, 2, 2, 128},
                            {1, 50, 4, 1, 7},  {1, 64, 6, 2, 64}, {1, 65, 6, 2, 64}, {1, 200, 4, 1, 32},
                            {1, 257, 6, 2, 64}};
  uint32_t seed = 4000;
  for (DType dt : {DType::f32, DType::bf16})
    for (const auto& c : cases) run_attention(c, dt, seed += 11);
}

TEST_CASE("CudaBackend attention refuses bad arguments with clear errors", "[cuda_backend_attn]") {
  const DType dt = DType::f32;
  {  // D above the kernel's limit
    const Shape s{1, 2, 1, 130};
    const Tensor q = to_gpu(host_randn(s, 1, 1.0, dt), dt);
    Tensor o = gpu_poisoned(s, dt);
    CHECK_THROWS_WITH(gpu().attention(o, q, q, q, true), Catch::Contains("1 <= D <= 128"));
  }
  const Shape s{1, 5, 2, 8};
  const Tensor q = to_gpu(host_randn(s, 2, 1.0, dt), dt);
  {  // output of the wrong shape
    Tensor o = gpu_poisoned({1, 5, 2, 4}, dt);
    CHECK_THROWS_WITH(gpu().attention(o, q, q, q, true), Catch::Contains("out has shape"));
  }
  {  // Hq not a multiple of Hkv
    const Tensor k = to_gpu(host_randn({1, 5, 3, 8}, 3, 1.0, dt), dt);
    Tensor o = gpu_poisoned(s, dt);
    CHECK_THROWS_WITH(gpu().attention(o, q, k, k, true), Catch::Contains("multiple of Hkv"));
  }
  {  // backward without the saved statistics
    Tensor o = gpu_poisoned(s, dt), dq = gpu_poisoned(s, dt), dk = gpu_poisoned(s, dt), dv = gpu_poisoned(s, dt);
    CHECK_FALSE(gpu().attention(o, q, q, q, false).defined());
    CHECK_THROWS_WITH(gpu().attention_backward(dq, dk, dv, o, q, q, q, o, Tensor()),
                      Catch::Contains("keep_for_backward = false"));
  }
  {  // a host tensor
    const Tensor h = host_randn(s, 4, 1.0, dt);
    Tensor o = gpu_poisoned(s, dt);
    CHECK_THROWS_WITH(gpu().attention(o, h, q, q, true), Catch::Contains("is on cpu"));
  }
}
