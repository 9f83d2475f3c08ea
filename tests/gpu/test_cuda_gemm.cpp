// defines: 9 Catch2 test cases tagged [cuda_gemm]; helpers: DevMat, device_sync, randn, to_d, absd, Ref and
//          9 more
//
// CudaGemm (cuda/gemm.h) against float64 references computed on the CPU with zt::gemm<double>
// (core/kernels/gemm.h) and zt::gelu_forward<double> (core/kernels/activation.h), on random inputs.
//
// Every output buffer is poisoned with 0xFF bytes (NaN in float32 and bfloat16) before each launch,
// so an element the GEMM fails to write shows up; accumulating outputs are filled with random
// values instead, and the reference adds them. bf16 inputs are rounded on the host first and the
// reference uses the rounded values, so only the GPU's arithmetic is measured.
//
// Tolerances, per element, with scale = sum_k |a_k b_k| (+ |bias|, + |old value| when
// accumulating) — the size of the terms, so cancellation is not a relative-error trap:
//   fp32 (CUBLAS_COMPUTE_32F):           |gpu - ref| <= 1e-5 * scale
//   tf32 (CUBLAS_COMPUTE_32F_FAST_TF32): |gpu - ref| <= 2e-3 * scale (inputs rounded to 10
//       mantissa bits: <= 2^-10 relative per product even if truncated; cuda/gemm.h)
//   bf16 inputs, fp32 accumulation:      1e-4 * scale, plus 2^-8 |ref| for a bfloat16 output
//       (its final rounding, 2^-9 relative, with margin)
//   GELU epilogue: the pre-activation bound times 1.2 (|gelu'| <= 1.13) plus 1e-5 absolute (the
//       float32 tolerance PyTorch's fused-vs-unfused addmm+gelu test uses); the pre-GELU aux output
//       must meet the plain bound. On the K = 7 shape this bound is ~2e-5, so the erf form of
//       GELU (up to ~5e-4 away from the tanh form) would fail.
// Exact mode is also checked bit-exactly where float32 is exact and TF32 is not (1 + 2^-20).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/kernels/activation.h"
#include "core/kernels/gemm.h"
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "tests/gpu/device_buffer.h"
#include "cuda/gemm.h"
#include "cuda/stream.h"

using namespace zt;

namespace {

using test::DeviceBuffer;

// A device matrix of n elements of dtype t, starting `offset` elements into its buffer (offset 1
// breaks every alignment above the element size).
struct DevMat {
  DType t;
  size_t n;
  DeviceBuffer buf;
  size_t offset;
  DevMat(DType t_, size_t n_, size_t off = 0) : t(t_), n(n_), buf((n_ + off) * dtype_size(t_)), offset(off) {}
  void* ptr() const { return static_cast<char*>(buf.p) + offset * dtype_size(t); }
  void poison() const { ZT_CUDA_CHECK(cudaMemset(buf.p, 0xFF, buf.bytes)); }
  void upload(const std::vector<float>& v) const {  // v already representable in t
    REQUIRE(v.size() == n);
    if (t == DType::f32) {
      ZT_CUDA_CHECK(cudaMemcpy(ptr(), v.data(), n * 4, cudaMemcpyHostToDevice));
    } else {
      std::vector<uint16_t> b(n);
      for (size_t i = 0; i < n; ++i) b[i] = f32_to_bf16(v[i]);
      ZT_CUDA_CHECK(cudaMemcpy(ptr(), b.data(), n * 2, cudaMemcpyHostToDevice));
    }
  }
  std::vector<float> download() const {
    std::vector<float> v(n);
    if (t == DType::f32) {
      ZT_CUDA_CHECK(cudaMemcpy(v.data(), ptr(), n * 4, cudaMemcpyDeviceToHost));
    } else {
      std::vector<uint16_t> b(n);
      ZT_CUDA_CHECK(cudaMemcpy(b.data(), ptr(), n * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n; ++i) v[i] = bf16_to_f32(b[i]);
    }
    return v;
  }
};

void device_sync() { ZT_CUDA_CHECK(cudaDeviceSynchronize()); }

// n normal values of standard deviation sd, rounded to dtype t (so the reference sees what the GPU sees).
std::vector<float> randn(size_t n, double sd, DType t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, sd);
  std::vector<float> v(n);
  for (auto& x : v) {
    x = static_cast<float>(nd(rng));
    if (t == DType::bf16) x = bf16_to_f32(f32_to_bf16(x));
  }
  return v;
}
std::vector<double> to_d(const std::vector<float>& v) { return {v.begin(), v.end()}; }
std::vector<double> absd(const std::vector<float>& v) {
  std::vector<double> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::fabs(static_cast<double>(v[i]));
  return a;
}

// The float64 reference of one product and its scale: out = op(A) @ op(B) with zt::gemm's row-major
// conventions, and scale = |op(A)| @ |op(B)|.
struct Ref {
  std::vector<double> val, scale;
};
Ref ref_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const std::vector<float>& a, int64_t lda,
             const std::vector<float>& b, int64_t ldb) {
  Ref r{std::vector<double>(size_t(M * N)), std::vector<double>(size_t(M * N))};
  const auto ad = to_d(a), bd = to_d(b), aa = absd(a), ba = absd(b);
  gemm<double>(ta, tb, M, N, K, 1.0, ad.data(), lda, bd.data(), ldb, 0.0, r.val.data(), N);
  gemm<double>(ta, tb, M, N, K, 1.0, aa.data(), lda, ba.data(), ldb, 0.0, r.scale.data(), N);
  return r;
}

struct Tol {
  double scale = 0, rel = 0, abs = 0;
};
// two_roundings: a bfloat16 output that cuBLASLt forms from a product already rounded to bfloat16
// (seen on an H100 with cuBLASLt 13.1: the bias and GELU epilogues, and beta = 1 accumulation,
// err by up to ~1 ulp of the output): half an ulp of the scale (|A||B| + |C|) comes on top.
Tol tol_for(DType in, DType out, GemmPrecision p, bool two_roundings = false) {
  Tol t;
  t.scale = in == DType::bf16 ? 1e-4 : (p == GemmPrecision::tf32 ? 2e-3 : 1e-5);
  if (out == DType::bf16) t.rel = std::ldexp(1.0, -8);
  if (out == DType::bf16 && two_roundings) t.scale += std::ldexp(1.0, -8);
  return t;
}

// Every element within tol; reports the count, the first bad element and the worst ratio.
void check_close(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& scale,
                 Tol tol, const std::string& what) {
  REQUIRE(got.size() == ref.size());
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = tol.scale * scale[i] + tol.rel * std::fabs(ref[i]) + tol.abs + 1e-30;
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double ratio = std::isfinite(err) ? err / bound : INFINITY;  // NaN (poison) fails
    if (!(ratio <= 1.0)) {
      if (bad++ == 0) first = i;
    }
    if (!(ratio <= worst)) worst = ratio;
  }
  INFO(what << ": " << bad << " of " << got.size() << " elements out of tolerance; first at " << first << ": got "
            << got[first] << ", want " << ref[first] << " (scale " << scale[first] << "); worst err/bound " << worst);
  CHECK(bad == 0);
}

struct Shape {
  int64_t M, N, K;
};
struct Mode {
  DType in, out;
  GemmPrecision prec;
};
const Mode kModes[] = {{DType::f32, DType::f32, GemmPrecision::fp32},
                       {DType::f32, DType::f32, GemmPrecision::tf32},
                       {DType::bf16, DType::bf16, GemmPrecision::fp32},
                       {DType::bf16, DType::f32, GemmPrecision::fp32}};
std::string mode_name(const Mode& m) {
  return std::string(dtype_name(m.in)) + "->" + dtype_name(m.out) + " " + gemm_precision_name(m.prec);
}
std::string shape_name(const Shape& s) {
  return "M " + std::to_string(s.M) + " N " + std::to_string(s.N) + " K " + std::to_string(s.K);
}

// One forward call: Y = X W^T [+ b] [GELU], checked against the reference. offset: elements by
// which every device pointer is shifted (misaligned when 1).
void run_linear(CudaGemm& g, const Shape& sh, const Mode& md, bool bias, bool gelu, bool aux, size_t offset,
                uint32_t seed) {
  const auto [M, N, K] = sh;
  const std::string what = "linear " + shape_name(sh) + " " + mode_name(md) + (bias ? " +bias" : "") +
                           (gelu ? " gelu" : "") + (aux ? " aux" : "") + (offset ? " misaligned" : "");
  const auto x = randn(size_t(M * K), 1.0, md.in, seed);
  const auto w = randn(size_t(N * K), 1.0 / std::sqrt(double(K)), md.in, seed + 1);
  const auto b = randn(size_t(N), 0.5, md.out, seed + 2);
  DevMat dx(md.in, x.size(), offset), dw(md.in, w.size(), offset), db(md.out, b.size(), offset);
  DevMat dy(md.out, size_t(M * N), offset), dpre(md.out, size_t(M * N), offset);
  dx.upload(x);
  dw.upload(w);
  db.upload(b);
  dy.poison();
  dpre.poison();
  device_sync();

  GemmArgs a;
  a.M = M, a.N = N, a.K = K;
  a.in_dtype = md.in, a.out_dtype = md.out, a.precision = md.prec;
  a.x = dx.ptr(), a.w = dw.ptr(), a.bias = bias ? db.ptr() : nullptr, a.y = dy.ptr();
  a.gelu = gelu;
  a.pre_gelu = aux ? dpre.ptr() : nullptr;
  g.linear(a, nullptr);
  device_sync();

  Ref r = ref_gemm(false, true, M, N, K, x, K, w, K);  // (M, N) = X (M, K) @ W^T
  if (bias)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        r.val[size_t(i * N + j)] += b[size_t(j)];
        r.scale[size_t(i * N + j)] += std::fabs(b[size_t(j)]);
      }
  const Tol tol = tol_for(md.in, md.out, md.prec, bias || gelu);
  if (!gelu) {
    check_close(dy.download(), r.val, r.scale, tol, what);
    return;
  }
  std::vector<double> act(r.val.size());
  gelu_forward<double>(act.data(), r.val.data(), int64_t(act.size()));
  Tol tg = tol;
  tg.scale *= 1.2;
  tg.abs += 1e-5;
  check_close(dy.download(), act, r.scale, tg, what + " (GELU output)");
  if (aux) check_close(dpre.download(), r.val, r.scale, tol, what + " (pre-GELU aux)");
}

}  // namespace

TEST_CASE("CudaGemm linear forward, plain and with bias, against the CPU", "[cuda_gemm]") {
  CudaGemm g(cuda_allocator(0));
  const Shape shapes[] = {{3, 5, 7}, {1, 1, 1}, {33, 17, 65}, {512, 768, 3072}};
  uint32_t seed = 100;
  for (const auto& sh : shapes)
    for (const auto& md : kModes)
      for (bool bias : {false, true}) run_linear(g, sh, md, bias, false, false, 0, seed += 10);
}

TEST_CASE("CudaGemm linear forward on misaligned pointers (offset by one element)", "[cuda_gemm]") {
  CudaGemm g(cuda_allocator(0));
  uint32_t seed = 300;
  for (const auto& md : kModes)
    for (const Shape sh : {Shape{3, 5, 7}, Shape{40, 24, 72}}) run_linear(g, sh, md, true, false, false, 1, seed += 10);
}

TEST_CASE("CudaGemm GELU epilogues (with and without bias, with the pre-GELU aux output)", "[cuda_gemm]") {
  CudaGemm g(cuda_allocator(0));
  uint32_t seed = 500;
  for (const auto& md : kModes) {
    for (bool bias : {false, true}) {
      run_linear(g, {3, 5, 7}, md, bias, true, false, 0, seed += 10);     // N % 8 != 0: no aux
      run_linear(g, {16, 24, 7}, md, bias, true, true, 0, seed += 10);    // small K: tight bound
      run_linear(g, {64, 3072, 768}, md, bias, true, true, 0, seed += 10);  // GPT-2 fc1
    }
  }
}

TEST_CASE("CudaGemm fp32 mode is IEEE float32 where TF32 would round", "[cuda_gemm]") {
  // y = x * 1 with x = 1 + j 2^-20 (K = 1): exact in float32, not representable in TF32 (10 bits).
  CudaGemm g(cuda_allocator(0));
  const int64_t M = 4, N = 8, K = 1;
  std::vector<float> x(M), w(N, 1.0f);
  for (int64_t i = 0; i < M; ++i) x[size_t(i)] = 1.0f + std::ldexp(float(i + 1), -20);
  DevMat dx(DType::f32, x.size()), dw(DType::f32, w.size()), dy(DType::f32, size_t(M * N));
  dx.upload(x);
  dw.upload(w);
  dy.poison();
  device_sync();
  GemmArgs a;
  a.M = M, a.N = N, a.K = K;
  a.x = dx.ptr(), a.w = dw.ptr(), a.y = dy.ptr();
  g.linear(a, nullptr);
  device_sync();
  const auto y = dy.download();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      INFO("row " << i << " col " << j);
      CHECK(y[size_t(i * N + j)] == x[size_t(i)]);
    }
}

TEST_CASE("CudaGemm linear_grad_input: dX (=, +=) dY @ W", "[cuda_gemm]") {
  CudaGemm g(cuda_allocator(0));
  const Shape shapes[] = {{3, 5, 7}, {512, 768, 3072}};
  uint32_t seed = 700;
  for (const auto& sh : shapes)
    for (const auto& md : kModes)
      for (bool acc : {false, true}) {
        const auto [M, N, K] = sh;
        const std::string what = "grad_input " + shape_name(sh) + " " + mode_name(md) + (acc ? " accumulate" : "");
        const auto dy = randn(size_t(M * N), 1.0, md.in, seed += 10);
        const auto w = randn(size_t(N * K), 1.0 / std::sqrt(double(N)), md.in, seed + 1);
        const auto dx0 = randn(size_t(M * K), 1.0, md.out, seed + 2);
        DevMat ddy(md.in, dy.size()), dw(md.in, w.size()), ddx(md.out, dx0.size());
        ddy.upload(dy);
        dw.upload(w);
        if (acc) ddx.upload(dx0);
        else ddx.poison();
        device_sync();
        GemmGradInputArgs a;
        a.M = M, a.N = N, a.K = K;
        a.in_dtype = md.in, a.out_dtype = md.out, a.precision = md.prec;
        a.dy = ddy.ptr(), a.w = dw.ptr(), a.dx = ddx.ptr(), a.accumulate = acc;
        g.linear_grad_input(a, nullptr);
        device_sync();
        Ref r = ref_gemm(false, false, M, K, N, dy, N, w, K);  // (M, K) = dY (M, N) @ W (N, K)
        if (acc)
          for (size_t i = 0; i < r.val.size(); ++i) r.val[i] += dx0[i], r.scale[i] += std::fabs(dx0[i]);
        check_close(ddx.download(), r.val, r.scale, tol_for(md.in, md.out, md.prec, acc), what);
      }
}

TEST_CASE("CudaGemm linear_grad_weight: dW (=, +=) dY^T @ X, with the bias gradient epilogue", "[cuda_gemm]") {
  CudaGemm g(cuda_allocator(0));
  const Shape shapes[] = {{3, 5, 7}, {512, 768, 3072}};
  uint32_t seed = 900;
  for (const auto& sh : shapes)
    for (const auto& md : kModes)
      for (bool acc : {false, true})
        for (bool with_db : {false, true}) {
          const auto [M, N, K] = sh;
          const std::string what = "grad_weight " + shape_name(sh) + " " + mode_name(md) + (acc ? " accumulate" : "") +
                                   (with_db ? " +dbias" : "");
          const auto dy = randn(size_t(M * N), 1.0, md.in, seed += 10);
          const auto x = randn(size_t(M * K), 1.0, md.in, seed + 1);
          const auto dw0 = randn(size_t(N * K), 1.0, md.out, seed + 2);
          DevMat ddy(md.in, dy.size()), dx(md.in, x.size()), ddw(md.out, dw0.size()), ddb(md.out, size_t(N));
          ddy.upload(dy);
          dx.upload(x);
          if (acc) ddw.upload(dw0);
          else ddw.poison();
          ddb.poison();  // written even when dW accumulates
          device_sync();
          GemmGradWeightArgs a;
          a.M = M, a.N = N, a.K = K;
          a.in_dtype = md.in, a.out_dtype = md.out, a.precision = md.prec;
          a.dy = ddy.ptr(), a.x = dx.ptr(), a.dw = ddw.ptr(), a.accumulate = acc;
          a.dbias = with_db ? ddb.ptr() : nullptr;
          g.linear_grad_weight(a, nullptr);
          device_sync();
          Ref r = ref_gemm(true, false, N, K, M, dy, N, x, K);  // (N, K) = dY^T (N, M) @ X (M, K)
          if (acc)
            for (size_t i = 0; i < r.val.size(); ++i) r.val[i] += dw0[i], r.scale[i] += std::fabs(dw0[i]);
          const Tol tol = tol_for(md.in, md.out, md.prec, acc);
          check_close(ddw.download(), r.val, r.scale, tol, what);
          if (with_db) {
            std::vector<double> db(size_t(N), 0.0), dbs(size_t(N), 0.0);
            for (int64_t i = 0; i < M; ++i)
              for (int64_t j = 0; j < N; ++j) db[size_t(j)] += dy[size_t(i * N + j)], dbs[size_t(j)] += std::fabs(dy[size_t(i * N + j)]);
            // the mode's bound (tf32: the epilogue may sum the TF32-rounded dY)
            check_close(ddb.download(), db, dbs, tol, what + " (dbias)");
          } else {
            CHECK(std::isnan(ddb.download()[0]));  // untouched without dbias
          }
        }
}

TEST_CASE("CudaGemm algorithm cache: one heuristic query per key, the same algorithm on repeat", "[cuda_gemm]") {
  CudaGemm g(cuda_allocator(0));
  const int64_t M = 64, N = 96, K = 128;
  const auto x = randn(size_t(M * K), 1.0, DType::f32, 1), w = randn(size_t(N * K), 0.1, DType::f32, 2);
  DevMat dx(DType::f32, x.size()), dw(DType::f32, w.size()), dy(DType::f32, size_t(M * N));
  dx.upload(x);
  dw.upload(w);
  device_sync();
  GemmArgs a;
  a.M = M, a.N = N, a.K = K;
  a.x = dx.ptr(), a.w = dw.ptr(), a.y = dy.ptr();
  CHECK(g.algo_cache_size() == 0);
  g.linear(a, nullptr);
  device_sync();
  const auto y1 = dy.download();
  const cublasLtMatmulAlgo_t first = g.last_algo();
  CHECK(g.algo_cache_size() == 1);
  CHECK(g.heuristic_queries() == 1);

  dy.poison();
  device_sync();
  g.linear(a, nullptr);
  device_sync();
  CHECK(g.algo_cache_size() == 1);
  CHECK(g.heuristic_queries() == 1);
  CHECK(std::memcmp(&first, &g.last_algo(), sizeof(first)) == 0);
  const auto y2 = dy.download();
  CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);  // bitwise reproducible

  a.M = M - 1;  // another shape (fewer rows, so the buffers still fit): a new key
  g.linear(a, nullptr);
  device_sync();
  CHECK(g.algo_cache_size() == 2);
  CHECK(g.heuristic_queries() == 2);
  a.M = M;
  a.precision = GemmPrecision::tf32;  // another mode: a new key
  g.linear(a, nullptr);
  device_sync();
  CHECK(g.algo_cache_size() == 3);
  a.precision = GemmPrecision::fp32;
  g.linear(a, nullptr);  // back to the first key: cached
  device_sync();
  CHECK(g.algo_cache_size() == 3);
  CHECK(g.heuristic_queries() == 3);
  CHECK(std::memcmp(&first, &g.last_algo(), sizeof(first)) == 0);
}

TEST_CASE("CudaGemm workspace: one per stream from the allocator's workspace category", "[cuda_gemm]") {
  CudaAllocator& alloc = cuda_allocator(0);
  const int64_t before = alloc.stats().cur(Category::workspace);
  const size_t ws = size_t(4) << 20;
  // The streams outlive the CudaGemm, whose destructor returns the workspaces cached under them.
  CudaStream s1 = CudaStream::create(), s2 = CudaStream::create();
  {
    CudaGemm g(alloc, ws);
    CHECK(g.workspace_bytes() == ws);
    const int64_t M = 8, N = 16, K = 32;
    const auto x = randn(size_t(M * K), 1.0, DType::f32, 3), w = randn(size_t(N * K), 0.2, DType::f32, 4);
    DevMat dx(DType::f32, x.size()), dw(DType::f32, w.size()), dy1(DType::f32, size_t(M * N)), dy2(DType::f32, size_t(M * N));
    dx.upload(x);
    dw.upload(w);
    dy1.poison();
    dy2.poison();
    device_sync();
    GemmArgs a;
    a.M = M, a.N = N, a.K = K;
    a.x = dx.ptr(), a.w = dw.ptr(), a.y = dy1.ptr();
    g.linear(a, s1.get());
    CHECK(alloc.stats().cur(Category::workspace) == before + int64_t(CudaAllocator::round_size(ws)));
    g.linear(a, s1.get());  // same stream: same workspace
    CHECK(alloc.stats().cur(Category::workspace) == before + int64_t(CudaAllocator::round_size(ws)));
    a.y = dy2.ptr();
    g.linear(a, s2.get());
    CHECK(alloc.stats().cur(Category::workspace) == before + 2 * int64_t(CudaAllocator::round_size(ws)));
    s1.synchronize();
    s2.synchronize();
    const auto y1 = dy1.download(), y2 = dy2.download();
    Ref r = ref_gemm(false, true, M, N, K, x, K, w, K);
    check_close(y1, r.val, r.scale, tol_for(DType::f32, DType::f32, GemmPrecision::fp32), "stream 1");
    check_close(y2, r.val, r.scale, tol_for(DType::f32, DType::f32, GemmPrecision::fp32), "stream 2");
  }
  CHECK(alloc.stats().cur(Category::workspace) == before);  // returned by the destructor
}

TEST_CASE("CudaGemm refuses unsupported combinations with messages naming shapes and dtypes", "[cuda_gemm]") {
  CudaGemm g(cuda_allocator(0));
  DevMat buf(DType::f32, 4096);
  GemmArgs a;
  a.M = 3, a.N = 5, a.K = 7;
  a.x = a.w = buf.ptr();
  a.y = buf.ptr();

  a.in_dtype = DType::f16;
  a.out_dtype = DType::f16;
  CHECK_THROWS_WITH(g.linear(a, nullptr), Catch::Contains("unsupported dtypes in float16, out float16") &&
                                              Catch::Contains("Y (3, 5) = X (3, 7) @ W^T, W (5, 7)"));
  a.in_dtype = DType::f32;
  a.out_dtype = DType::bf16;
  CHECK_THROWS_WITH(g.linear(a, nullptr), Catch::Contains("unsupported dtypes in float32, out bfloat16"));
  a.in_dtype = DType::bf16;
  a.precision = GemmPrecision::tf32;
  CHECK_THROWS_WITH(g.linear(a, nullptr), Catch::Contains("tf32 needs float32 inputs, got bfloat16"));
  a.in_dtype = DType::f32;
  a.out_dtype = DType::f32;
  a.precision = GemmPrecision::fp32;
  a.gelu = true;
  a.pre_gelu = buf.ptr();
  CHECK_THROWS_WITH(g.linear(a, nullptr), Catch::Contains("N % 8 == 0") && Catch::Contains("N = 5"));
  a.gelu = false;
  CHECK_THROWS_WITH(g.linear(a, nullptr), Catch::Contains("pre_gelu is set but gelu is false"));
  a.pre_gelu = nullptr;
  a.M = 0;
  CHECK_THROWS_WITH(g.linear(a, nullptr), Catch::Contains("every size must be >= 1"));
  a.M = 3;
  a.x = nullptr;
  CHECK_THROWS_WITH(g.linear(a, nullptr), Catch::Contains("got a nullptr"));

  GemmGradInputArgs gi;
  gi.M = 2, gi.N = 3, gi.K = 4;
  gi.in_dtype = DType::f64, gi.out_dtype = DType::f64;
  gi.dy = gi.w = buf.ptr();
  gi.dx = buf.ptr();
  CHECK_THROWS_WITH(g.linear_grad_input(gi, nullptr),
                    Catch::Contains("dX (2, 4) = dY (2, 3) @ W (3, 4)") && Catch::Contains("in float64"));
  GemmGradWeightArgs gw;
  gw.M = 2, gw.N = 3, gw.K = 4;
  gw.in_dtype = DType::bf16, gw.out_dtype = DType::f16;
  gw.dy = gw.x = buf.ptr();
  gw.dw = buf.ptr();
  CHECK_THROWS_WITH(g.linear_grad_weight(gw, nullptr),
                    Catch::Contains("dW (3, 4) = dY^T @ X, dY (2, 3), X (2, 4)") && Catch::Contains("out float16"));
  CHECK(g.algo_cache_size() == 0);  // nothing reached cuBLASLt
}
