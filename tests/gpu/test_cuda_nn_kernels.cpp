// defines: 8 Catch2 test cases tagged [cuda_nn_kernels]; helpers: device_sync, DevArr, DevIds, normals,
//          quantize, rms and 2 more
//
// The model-op kernels of cuda/kernels/{norm,softmax_ce,embedding_rope}.h against their CPU ops,
// on random inputs (never all zeros), float32 and bfloat16 storage.
//
// Every GPU output is poisoned with 0xFF bytes (NaN) before each launch, so an element a kernel
// fails to write shows up. Row widths C = 1, 33 (scalar path), 768 (128-bit path) and 768 at a
// pointer offset of one element (misaligned: scalar path); rows = 1 and 1000.
// References: the CPU ops in float32 (core/kernels/*.h). For bfloat16 the inputs are rounded to
// bf16 first and the CPU op runs in float32 on those exact values; its result rounded to bf16 is
// the reference.
//
// Tolerances (|gpu - ref| <= tol, NaN never passes):
// - float32: tol = 1e-5 * max(|ref|, scale), scale = the reference's RMS over the whole output
//   (so cancellation near zero is not a relative-error trap). The GPU sums rows in another order
//   than the CPU's 16 lanes and uses CUDA's expf / logf (<= 2 ulp) where the CPU uses a Cephes
//   polynomial: ~1e-6 relative expected. Reductions over rows (dweight, dbias) use
//   scale = sum over rows of |term| per column (computed in double): the error bound of a sum.
// - bfloat16: the float32 bound plus one bf16 ulp (2^-7 |ref| = 7.8e-3 relative): both sides round
//   their own float32 result to nearest even, and results a float32 rounding apart may round to
//   neighbouring bf16 values.
// - embedding forward and backward: bit-exact (a copy; the backward adds in token order in float32
//   exactly as the CPU, and bf16 rounds that float32 sum once).
// - RoPE tables: within 1 float ulp + 1e-12 absolute of the CPU's (both are double results rounded
//   to float; CUDA's double pow / sin / cos are within 2 ulp of glibc's).
// Determinism: the reductions (norm statistics and dweight / dbias, softmax, cross-entropy mean,
// embedding backward) run twice and must agree bit for bit.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/embedding.h"
#include "core/kernels/norm.h"
#include "core/kernels/rope.h"
#include "core/kernels/softmax.h"
#include "cuda/check.h"
#include "cuda/kernels/embedding_rope.h"
#include "cuda/kernels/norm.h"
#include "cuda/kernels/softmax_ce.h"

using namespace zt;

namespace {

void device_sync() { ZT_CUDA_CHECK(cudaDeviceSynchronize()); }

// n elements of dtype t in cudaMalloc'd memory at an element offset (1 breaks 16-byte alignment),
// poisoned with 0xFF on creation; up / down convert from / to float32 (bf16: round to nearest even).
struct DevArr {
  DType t;
  int64_t n;
  size_t off;
  void* base = nullptr;
  DevArr(DType t_, int64_t n_, size_t off_ = 0) : t(t_), n(n_), off(off_) {
    ZT_CUDA_CHECK(cudaMalloc(&base, bytes() + off * dtype_size(t) + 1));
    poison();
  }
  ~DevArr() { cudaFree(base); }
  DevArr(const DevArr&) = delete;
  DevArr& operator=(const DevArr&) = delete;
  size_t bytes() const { return static_cast<size_t>(n) * dtype_size(t); }
  void* p() const { return static_cast<char*>(base) + off * dtype_size(t); }
  float* f() const { return static_cast<float*>(p()); }
  void poison() const { ZT_CUDA_CHECK(cudaMemset(base, 0xFF, bytes() + off * dtype_size(t) + 1)); }
  void up(const std::vector<float>& v) const {
    REQUIRE(static_cast<int64_t>(v.size()) == n);
    if (t == DType::f32) {
      ZT_CUDA_CHECK(cudaMemcpy(p(), v.data(), bytes(), cudaMemcpyHostToDevice));
    } else {
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
      ZT_CUDA_CHECK(cudaMemcpy(p(), h.data(), bytes(), cudaMemcpyHostToDevice));
    }
  }
  std::vector<uint8_t> raw() const {
    std::vector<uint8_t> h(bytes());
    ZT_CUDA_CHECK(cudaMemcpy(h.data(), p(), bytes(), cudaMemcpyDeviceToHost));
    return h;
  }
  std::vector<float> down() const {
    const auto r = raw();
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (t == DType::f32) std::memcpy(&v[i], r.data() + 4 * i, 4);
      else {
        uint16_t h;
        std::memcpy(&h, r.data() + 2 * i, 2);
        v[i] = bf16_to_f32(h);
      }
    }
    return v;
  }
};

// int32 ids / targets in cudaMalloc'd memory, freed on scope exit.
struct DevIds {
  int32_t* p = nullptr;
  explicit DevIds(const std::vector<int32_t>& h) {
    ZT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), h.size() * sizeof(int32_t) + 1));
    set(h);
  }
  ~DevIds() { cudaFree(p); }
  DevIds(const DevIds&) = delete;
  DevIds& operator=(const DevIds&) = delete;
  void set(const std::vector<int32_t>& h) const {
    ZT_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  }
};

std::vector<float> normals(int64_t n, float mean, float sd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(mean, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

// The values the GPU sees for dtype t (bf16: rounded).
std::vector<float> quantize(std::vector<float> v, DType t) {
  if (t == DType::bf16)
    for (auto& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

// Elements of got outside the tolerance around want (see the file comment); scale: per-element
// (size n) or empty (then the RMS of want). want is the float32 reference, rounded here for bf16.
int64_t count_bad(const std::vector<float>& got, const std::vector<float>& want, DType t,
                  const std::vector<double>& scale = {}, double rtol = 1e-5) {
  REQUIRE(got.size() == want.size());
  const double floor = rms(want);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = t == DType::bf16 ? bf16_to_f32(f32_to_bf16(want[i])) : want[i];
    const double sc = scale.empty() ? floor : scale[i];
    const double tol = rtol * std::max(std::fabs(w), sc) + (t == DType::bf16 ? std::ldexp(std::fabs(w), -7) : 0.0);
    if (!(std::fabs(got[i] - w) <= tol)) {
      if (bad == 0) UNSCOPED_INFO("first mismatch at " << i << ": gpu " << got[i] << ", ref " << w << ", tol " << tol);
      ++bad;
    }
  }
  return bad;
}

const DType kTypes[] = {DType::f32, DType::bf16};
struct RowShape {
  int64_t N, C;
  size_t off;
};
// N past the norms' 1024 weight-gradient chunks (chunks of 2 or 3 rows) with 8-column packs
// (C = 40), pairs (C = 34) and single columns (offset 1)
const RowShape kRowShapes[] = {{1, 1, 0},      {1000, 1, 0},   {1, 33, 0},    {1000, 33, 0}, {1, 768, 0},
                               {1000, 768, 0}, {1000, 768, 1}, {2500, 40, 0}, {3001, 34, 0}, {2100, 40, 1}};

}  // namespace

// ---------------------------------------------------------------- LayerNorm / RMSNorm

TEST_CASE("cuda layernorm / rmsnorm forward and backward match the CPU ops", "[cuda_nn_kernels]") {
  const float eps = 1e-5f;
  for (DType t : kTypes)
    for (const auto& sh : kRowShapes)
      for (int kind = 0; kind < 3; ++kind) {  // 0 LayerNorm with bias, 1 LayerNorm without, 2 RMSNorm
        const int64_t N = sh.N, C = sh.C, NC = N * C;
        const bool ln = kind < 2, bias = kind == 0;
        CAPTURE(dtype_name(t), N, C, sh.off, kind);
        const auto x = quantize(normals(NC, 0.3f, 1.5f, 1), t), w = quantize(normals(C, 1.0f, 0.5f, 2), t),
                   b = quantize(normals(C, 0.0f, 0.5f, 3), t), dout = quantize(normals(NC, 0.0f, 1.0f, 4), t);
        // CPU reference (float32 on the values the GPU sees)
        std::vector<float> out(NC), mean(N), rstd(N), dx(NC), dw(C), db(C);
        if (ln) layernorm_forward<float>(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias ? b.data() : nullptr, N, C, eps);
        else rmsnorm_forward<float>(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
        if (ln) layernorm_backward<float>(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
        else rmsnorm_backward<float>(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
        // error scales: sum_rows |dout xhat| (dw), sum_rows |dout| (db), mean |x| per row (mean), and
        // rstd (|g| + |mean(g)| + |xhat mean(g xhat)|) per element (dx: RMSNorm with C = 1 cancels
        // to ~eps / x^2 of its terms)
        std::vector<double> sw(C, 0.0), sb(C, 0.0), sm(N, 0.0), sdx(NC, 0.0);
        for (int64_t r = 0; r < N; ++r) {
          auto xh = [&](int64_t c) { return ln ? (double(x[r * C + c]) - mean[r]) * rstd[r] : double(x[r * C + c]) * rstd[r]; };
          // the means' magnitudes before cancellation: each mean is a float32 sum of C terms
          double gm = 0, gxm = 0;
          for (int64_t c = 0; c < C; ++c) {
            const double g = double(dout[r * C + c]) * w[c];
            gm += std::fabs(g) / C, gxm += std::fabs(g * xh(c)) / C;
            sw[c] += std::fabs(dout[r * C + c] * xh(c));
            sb[c] += std::fabs(dout[r * C + c]);
            sm[r] += std::fabs(x[r * C + c]) / C;
          }
          for (int64_t c = 0; c < C; ++c)
            sdx[r * C + c] = rstd[r] * (std::fabs(double(dout[r * C + c]) * w[c]) + (ln ? std::fabs(gm) : 0.0) + std::fabs(xh(c) * gxm));
        }

        DevArr gx(t, NC, sh.off), gw(t, C, sh.off), gb(t, C, sh.off), gout(t, NC, sh.off), gg(t, NC, sh.off);
        DevArr gmean(DType::f32, N), grstd(DType::f32, N), gdx(t, NC, sh.off), gdw(t, C, sh.off), gdb(t, C, sh.off);
        DevArr ws(DType::f32, cuda_kernels::norm_backward_workspace_bytes(N, C) / 4);
        gx.up(x), gw.up(w), gb.up(b), gg.up(dout);
        std::vector<uint8_t> first[6];
        for (int run = 0; run < 2; ++run) {
          for (const DevArr* a : {&gout, &gmean, &grstd, &gdx, &gdw, &gdb, &ws}) a->poison();
          if (ln) cuda_kernels::layernorm_forward(t, gout.p(), gmean.f(), grstd.f(), gx.p(), gw.p(), bias ? gb.p() : nullptr, N, C, eps, nullptr);
          else cuda_kernels::rmsnorm_forward(t, gout.p(), grstd.f(), gx.p(), gw.p(), N, C, eps, nullptr);
          // the backward from the CPU's statistics, so it is checked on its own
          DevArr cm(DType::f32, N), cr(DType::f32, N);
          cm.up(mean), cr.up(rstd);
          if (ln)
            cuda_kernels::layernorm_backward(t, gdx.p(), gdw.p(), gdb.p(), gg.p(), gx.p(), gw.p(), cm.f(), cr.f(),
                                             nullptr, N, C, ws.p(), nullptr);
          else
            cuda_kernels::rmsnorm_backward(t, gdx.p(), gdw.p(), gg.p(), gx.p(), gw.p(), cr.f(), nullptr, N, C, ws.p(),
                                           nullptr);
          device_sync();
          const std::vector<uint8_t> now[6] = {gout.raw(), gmean.raw(), grstd.raw(), gdx.raw(), gdw.raw(), gdb.raw()};
          if (run == 0) {
            for (int k = 0; k < 6; ++k) first[k] = now[k];
            CHECK(count_bad(gout.down(), out, t) == 0);
            if (ln) CHECK(count_bad(gmean.down(), mean, DType::f32, sm) == 0);
            CHECK(count_bad(grstd.down(), rstd, DType::f32) == 0);
            CHECK(count_bad(gdx.down(), dx, t, sdx) == 0);
            CHECK(count_bad(gdw.down(), dw, t, sw) == 0);
            if (ln) CHECK(count_bad(gdb.down(), db, t, sb) == 0);
          } else {
            for (int k = 0; k < 6; ++k) {
              if (!ln && (k == 1 || k == 5)) continue;  // RMSNorm: no mean, no dbias
              CAPTURE(k);
              CHECK(now[k] == first[k]);  // bitwise reproducible
            }
          }
        }
      }
}

TEST_CASE("cuda norms: optional outputs and argument errors", "[cuda_nn_kernels]") {
  const int64_t N = 37, C = 64;
  const auto x = normals(N * C, 0.0f, 1.0f, 7), w = normals(C, 1.0f, 0.2f, 8), g = normals(N * C, 0.0f, 1.0f, 9);
  std::vector<float> out(N * C), mean(N), rstd(N), dw(C);
  layernorm_forward<float>(out.data(), mean.data(), rstd.data(), x.data(), w.data(), nullptr, N, C, 1e-5);
  layernorm_backward<float>(nullptr, dw.data(), nullptr, g.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  DevArr gx(DType::f32, N * C), gg(DType::f32, N * C), gm(DType::f32, N), gr(DType::f32, N), gdw(DType::f32, C);
  DevArr ws(DType::f32, cuda_kernels::norm_backward_workspace_bytes(N, C) / 4);
  gx.up(x), gg.up(g), gm.up(mean), gr.up(rstd);
  // dw only: dx and db null, w not needed
  cuda_kernels::layernorm_backward(DType::f32, nullptr, gdw.p(), nullptr, gg.p(), gx.p(), nullptr, gm.f(), gr.f(),
                                   nullptr, N, C, ws.p(), nullptr);
  device_sync();
  std::vector<double> sw(C, 0.0);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < C; ++c) sw[c] += std::fabs(g[r * C + c] * (x[r * C + c] - mean[r]) * rstd[r]);
  CHECK(count_bad(gdw.down(), dw, DType::f32, sw) == 0);

  CHECK_THROWS_WITH(cuda_kernels::layernorm_forward(DType::f64, gx.p(), gm.f(), gr.f(), gx.p(), gx.p(), nullptr, N, C,
                                                    1e-5f, nullptr),
                    Catch::Contains("float64") && Catch::Contains("expected float32 or bfloat16"));
  CHECK_THROWS_WITH(cuda_kernels::rmsnorm_forward(DType::f32, gx.p(), gr.f(), gx.p(), gx.p(), N, 0, 1e-5f, nullptr),
                    Catch::Contains("C = 0"));
  CHECK_THROWS_WITH(cuda_kernels::rmsnorm_backward(DType::f32, nullptr, gdw.p(), gg.p(), gx.p(), nullptr, gr.f(),
                                                   nullptr, N, C, nullptr, nullptr),
                    Catch::Contains("workspace is null"));
}

// ---------------------------------------------------------------- softmax

TEST_CASE("cuda softmax forward and backward match the CPU ops", "[cuda_nn_kernels]") {
  for (DType t : kTypes)
    for (const auto& sh : kRowShapes) {
      const int64_t R = sh.N, N = sh.C, RN = R * N;
      CAPTURE(dtype_name(t), R, N, sh.off);
      const auto x = quantize(normals(RN, 1.0f, 3.0f, 11), t), dy = quantize(normals(RN, 0.0f, 1.0f, 12), t);
      std::vector<float> y(RN), dx(RN);
      softmax_forward<float>(y.data(), x.data(), R, N);
      const auto yq = quantize(y, t);  // the backward's input, as the GPU stores it
      softmax_backward<float>(dx.data(), dy.data(), yq.data(), R, N);
      // dx = y (dy - sum(dy y)): the error scale is y (|dy| + sum |dy y|), the terms before the
      // sum cancels (the CPU's own float32 sum over N terms errs on that scale)
      std::vector<double> sdx(RN);
      for (int64_t r = 0; r < R; ++r) {
        double s = 0;
        for (int64_t c = 0; c < N; ++c) s += std::fabs(double(dy[r * N + c]) * yq[r * N + c]);
        for (int64_t c = 0; c < N; ++c) sdx[r * N + c] = yq[r * N + c] * (std::fabs(dy[r * N + c]) + s);
      }
      DevArr gx(t, RN, sh.off), gy(t, RN, sh.off), gdy(t, RN, sh.off), gyq(t, RN, sh.off), gdx(t, RN, sh.off);
      gx.up(x), gdy.up(dy), gyq.up(yq);
      std::vector<uint8_t> first[2];
      for (int run = 0; run < 2; ++run) {
        gy.poison(), gdx.poison();
        cuda_kernels::softmax_forward(t, gy.p(), gx.p(), R, N, nullptr);
        cuda_kernels::softmax_backward(t, gdx.p(), gdy.p(), gyq.p(), R, N, nullptr);
        device_sync();
        if (run == 0) {
          CHECK(count_bad(gy.down(), y, t) == 0);
          CHECK(count_bad(gdx.down(), dx, t, sdx) == 0);
          first[0] = gy.raw(), first[1] = gdx.raw();
        } else {
          CHECK(gy.raw() == first[0]);
          CHECK(gdx.raw() == first[1]);
        }
      }
      // in place: out == in
      cuda_kernels::softmax_forward(t, gx.p(), gx.p(), R, N, nullptr);
      device_sync();
      CHECK(gx.raw() == first[0]);
    }
}

// ---------------------------------------------------------------- cross entropy

TEST_CASE("cuda fused softmax cross-entropy matches the CPU op", "[cuda_nn_kernels]") {
  struct Shape {
    int64_t N, V, Vv;
    size_t off;
  };
  const Shape shapes[] = {{1, 1, 1, 0},      {1000, 1, 1, 0},     {1, 33, 33, 0},     {1000, 33, 33, 0},
                          {1000, 40, 33, 0}, {1, 768, 768, 0},    {1000, 768, 768, 0}, {1000, 768, 700, 1},
                          {64, 50304, 50257, 0}};
  for (DType t : kTypes)
    for (const auto& sh : shapes) {
      const int64_t N = sh.N, V = sh.V, Vv = sh.Vv;
      CAPTURE(dtype_name(t), N, V, Vv, sh.off);
      auto logits = quantize(normals(N * V, 0.0f, 2.0f, 21), t);
      std::vector<int32_t> tg(N);
      std::mt19937 rng(22);
      std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(Vv - 1));
      int64_t count = 0;
      for (int64_t i = 0; i < N; ++i) {
        tg[i] = (N > 1 && i % 7 == 3) ? -1 : pick(rng);  // some ignored rows (never all)
        count += tg[i] != -1;
      }
      std::vector<float> lse(N), dl(N * V);
      const double total = cross_entropy_forward<float>(lse.data(), logits.data(), tg.data(), N, V, Vv);
      const float mean_ref = static_cast<float>(total / static_cast<double>(count));
      const float scale = 1.0f / static_cast<float>(count);
      cross_entropy_backward<float>(dl.data(), logits.data(), lse.data(), tg.data(), scale, N, V, Vv);
      std::vector<float> loss_ref(N);
      for (int64_t i = 0; i < N; ++i) loss_ref[i] = tg[i] == -1 ? 0.0f : lse[i] - logits[i * V + tg[i]];

      DevArr gl(t, N * V, sh.off), glse(DType::f32, N), gloss(DType::f32, N), gmean(DType::f32, 1),
          gdl(t, N * V, sh.off), clse(DType::f32, N);
      DevIds dt(tg);
      const int32_t* gt = dt.p;
      gl.up(logits), clse.up(lse);
      std::vector<uint8_t> first[4];
      for (int run = 0; run < 2; ++run) {
        glse.poison(), gloss.poison(), gmean.poison(), gdl.poison();
        cuda_kernels::cross_entropy_forward(t, gmean.f(), gloss.f(), glse.f(), gl.p(), gt, N, V, Vv, nullptr);
        cuda_kernels::cross_entropy_backward(t, gdl.p(), gl.p(), clse.f(), gt, scale, N, V, Vv, nullptr);
        device_sync();
        const std::vector<uint8_t> now[4] = {glse.raw(), gloss.raw(), gmean.raw(), gdl.raw()};
        if (run == 0) {
          for (int k = 0; k < 4; ++k) first[k] = now[k];
          CHECK(count_bad(glse.down(), lse, DType::f32) == 0);
          // loss_i = lse_i - x_t: a difference of two O(log V) numbers
          std::vector<double> ls(N);
          for (int64_t i = 0; i < N; ++i) ls[i] = std::fabs(lse[i]) + (tg[i] < 0 ? 0.0 : std::fabs(logits[i * V + tg[i]]));
          CHECK(count_bad(gloss.down(), loss_ref, DType::f32, ls) == 0);
          CHECK(count_bad(gmean.down(), {mean_ref}, DType::f32, {rms(loss_ref) + std::fabs(mean_ref)}) == 0);
          const auto d = gdl.down();
          CHECK(count_bad(d, dl, t) == 0);
          int64_t pad_nonzero = 0;  // exactly zero in the padded columns and the ignored rows
          for (int64_t i = 0; i < N; ++i)
            for (int64_t j = 0; j < V; ++j)
              if (j >= Vv || tg[i] == -1) pad_nonzero += d[i * V + j] != 0.0f;
          CHECK(pad_nonzero == 0);
        } else {
          for (int k = 0; k < 4; ++k) {
            CAPTURE(k);
            CHECK(now[k] == first[k]);
          }
        }
      }
    }
}

TEST_CASE("cuda cross-entropy: every row ignored gives NaN, bad targets NaN, argument errors", "[cuda_nn_kernels]") {
  const int64_t N = 5, V = 16;
  DevArr gl(DType::f32, N * V), glse(DType::f32, N), gloss(DType::f32, N), gmean(DType::f32, 1);
  gl.up(normals(N * V, 0.0f, 1.0f, 31));
  const std::vector<int32_t> all_ignored(N, -1), bad = {1, 2, 16, 3, -1};
  DevIds dt(all_ignored);
  const int32_t* gt = dt.p;
  cuda_kernels::cross_entropy_forward(DType::f32, gmean.f(), gloss.f(), glse.f(), gl.p(), gt, N, V, V, nullptr);
  device_sync();
  CHECK(std::isnan(gmean.down()[0]));
  CHECK(gloss.down() == std::vector<float>(N, 0.0f));
  dt.set(bad);
  cuda_kernels::cross_entropy_forward(DType::f32, gmean.f(), gloss.f(), glse.f(), gl.p(), gt, N, V, V, nullptr);
  device_sync();
  const auto l = gloss.down();
  CHECK(std::isnan(l[2]));
  CHECK(std::isfinite(l[0]));
  CHECK(l[4] == 0.0f);
  CHECK(std::isnan(gmean.down()[0]));
  CHECK_THROWS_WITH(cuda_kernels::cross_entropy_forward(DType::f32, gmean.f(), gloss.f(), glse.f(), gl.p(), gt, N, V,
                                                        V + 1, nullptr),
                    Catch::Contains("1 <= Vv <= V"));
  CHECK_THROWS_WITH(cuda_kernels::cross_entropy_backward(DType::f32, gl.p(), gl.p(), glse.f(), gt, NAN, N, V, V, nullptr),
                    Catch::Contains("not finite"));
}

// ---------------------------------------------------------------- embedding

TEST_CASE("cuda embedding forward and backward are bit-exact against the CPU ops", "[cuda_nn_kernels]") {
  const int64_t V = 50;  // small: tokens repeat, so rows receive several additions
  for (DType t : kTypes)
    for (const auto& sh : kRowShapes) {
      const int64_t n = sh.N, C = sh.C;
      CAPTURE(dtype_name(t), n, C, sh.off);
      const auto table = quantize(normals(V * C, 0.0f, 1.0f, 41), t), dout = quantize(normals(n * C, 0.0f, 1.0f, 42), t),
                 dtable0 = quantize(normals(V * C, 0.0f, 0.1f, 43), t);
      std::vector<int32_t> ids(n);
      std::mt19937 rng(44);
      std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
      for (auto& i : ids) i = pick(rng);
      std::vector<float> out(n * C), dtable = dtable0;
      embedding_forward<float>(out.data(), ids.data(), table.data(), n, C);
      embedding_backward<float>(dtable.data(), dout.data(), ids.data(), n, C);

      DevArr gtab(t, V * C, sh.off), gout(t, n * C, sh.off), gdo(t, n * C, sh.off), gdt(t, V * C, sh.off);
      DevIds di(ids);
      const int32_t* gid = di.p;
      gtab.up(table), gdo.up(dout);
      std::vector<uint8_t> first;
      for (int run = 0; run < 2; ++run) {
        gout.poison();
        gdt.up(dtable0);  // accumulated into
        cuda_kernels::embedding_forward(t, gout.p(), gid, gtab.p(), n, V, C, nullptr);
        DevArr ws(DType::f32, cuda_kernels::embedding_backward_workspace_bytes(n) / 4 + 1);
        cuda_kernels::embedding_backward(t, gdt.p(), gdo.p(), gid, n, V, C, ws.p(), nullptr);
        device_sync();
        if (run == 0) {
          CHECK(gout.down() == out);
          CHECK(gdt.down() == quantize(dtable, t));  // bf16: the float32 sum rounded once
          first = gdt.raw();
        } else {
          CHECK(gdt.raw() == first);
        }
      }
    }
}

TEST_CASE("cuda embedding: out-of-range ids and argument errors", "[cuda_nn_kernels]") {
  const int64_t V = 4, C = 8, n = 3;
  DevArr gtab(DType::f32, V * C), gout(DType::f32, n * C), gdt(DType::f32, V * C), gdo(DType::f32, n * C);
  gtab.up(normals(V * C, 0.0f, 1.0f, 51)), gdo.up(normals(n * C, 0.0f, 1.0f, 52));
  const auto dt0 = normals(V * C, 0.0f, 1.0f, 53);
  gdt.up(dt0);
  const std::vector<int32_t> ids = {1, 4, -2};
  DevIds di(ids);
  const int32_t* gid = di.p;
  cuda_kernels::embedding_forward(DType::f32, gout.p(), gid, gtab.p(), n, V, C, nullptr);
  DevArr ws(DType::f32, cuda_kernels::embedding_backward_workspace_bytes(n) / 4 + 1);
  cuda_kernels::embedding_backward(DType::f32, gdt.p(), gdo.p(), gid, n, V, C, ws.p(), nullptr);
  device_sync();
  const auto o = gout.down(), dt = gdt.down(), tab = gtab.down(), d = gdo.down();
  for (int64_t c = 0; c < C; ++c) {
    CHECK(o[c] == tab[1 * C + c]);
    CHECK(std::isnan(o[C + c]));
    CHECK(std::isnan(o[2 * C + c]));
    CHECK(dt[1 * C + c] == dt0[1 * C + c] + d[c]);  // only row 1 changes
    CHECK(dt[0 * C + c] == dt0[0 * C + c]);
    CHECK(dt[3 * C + c] == dt0[3 * C + c]);
  }
  {  // C = 16384: wide rows (each thread owns 64 columns)
    const int64_t Cb = 16384, Vb = 3, nb = 5;
    const std::vector<int32_t> idb = {2, 0, 2, 2, 1};
    const auto tb0 = normals(Vb * Cb, 0.0f, 1.0f, 54), db = normals(nb * Cb, 0.0f, 1.0f, 55);
    auto want = tb0;
    embedding_backward<float>(want.data(), db.data(), idb.data(), nb, Cb);
    DevArr gtb(DType::f32, Vb * Cb), gdb(DType::f32, nb * Cb);
    DevIds dib(idb);
    gtb.up(tb0), gdb.up(db);
    DevArr wsb(DType::f32, cuda_kernels::embedding_backward_workspace_bytes(nb) / 4 + 1);
    cuda_kernels::embedding_backward(DType::f32, gtb.p(), gdb.p(), dib.p, nb, Vb, Cb, wsb.p(), nullptr);
    device_sync();
    CHECK(gtb.down() == want);
  }
  CHECK_THROWS_WITH(cuda_kernels::embedding_backward(DType::f32, gdt.p(), gdo.p(), gid, n, V, C, nullptr, nullptr),
                    Catch::Contains("workspace is null"));
  CHECK_THROWS_WITH(cuda_kernels::embedding_forward(DType::f16, gout.p(), gid, gtab.p(), n, V, C, nullptr),
                    Catch::Contains("float16"));
}

// ---------------------------------------------------------------- RoPE

TEST_CASE("cuda rope tables, forward and backward match the CPU ops", "[cuda_nn_kernels]") {
  struct Shape {
    int64_t B, T, H, D;
  };
  // D/2 = 1, 6 and 32: one, two and four pairs a thread
  const Shape shapes[] = {{1, 1, 1, 2}, {2, 7, 3, 2}, {2, 5, 3, 12}, {1, 1, 1, 64}, {2, 33, 4, 64}, {3, 100, 2, 128}};
  // plain, and Llama 3's scaling with an original context of 16 positions (past it at T 33, 100)
  const RopeParams params[] = {RopeParams(10000.0), RopeParams(500000.0),
                               RopeParams(500000.0, {RopeScaling::Type::llama3, 32.0, 1.0, 4.0, 16})};
  for (const RopeParams& theta : params)
    for (const auto& sh : shapes) {
      const int64_t half = sh.D / 2, n = sh.B * sh.T * sh.H * sh.D;
      CAPTURE(theta.theta, int(theta.scaling.type), sh.B, sh.T, sh.H, sh.D);
      std::vector<float> cs(sh.T * half), sn(sh.T * half);
      rope_tables<float>(cs.data(), sn.data(), sh.T, sh.D, theta);
      DevArr gc(DType::f32, sh.T * half), gs(DType::f32, sh.T * half);
      cuda_kernels::rope_tables(gc.f(), gs.f(), sh.T, sh.D, theta, nullptr);
      device_sync();
      const auto c2 = gc.down(), s2 = gs.down();
      int64_t bad = 0;
      for (int64_t i = 0; i < sh.T * half; ++i) {
        bad += !(std::fabs(c2[i] - cs[i]) <= std::ldexp(std::fabs(cs[i]), -23) + 1e-12);
        bad += !(std::fabs(s2[i] - sn[i]) <= std::ldexp(std::fabs(sn[i]), -23) + 1e-12);
      }
      CHECK(bad == 0);
      gc.up(cs), gs.up(sn);  // the apply kernels checked on the CPU's tables
      for (DType t : kTypes)
        for (int64_t rot : {sh.H, sh.H / 2}) {  // rot < H: the last heads pass unchanged (packed v)
          CAPTURE(dtype_name(t), rot);
          const auto x = quantize(normals(n, 0.0f, 1.0f, 61), t);
          std::vector<float> y(n), dx(n);
          rope_apply<float>(y.data(), x.data(), cs.data(), sn.data(), sh.B, sh.T, sh.H, sh.D, false, rot);
          rope_apply<float>(dx.data(), x.data(), cs.data(), sn.data(), sh.B, sh.T, sh.H, sh.D, true, rot);
          DevArr gx(t, n), gy(t, n), gdx(t, n);
          gx.up(x);
          cuda_kernels::rope_forward(t, gy.p(), gx.p(), gc.f(), gs.f(), sh.B, sh.T, sh.H, sh.D, rot, nullptr);
          cuda_kernels::rope_backward(t, gdx.p(), gx.p(), gc.f(), gs.f(), sh.B, sh.T, sh.H, sh.D, rot, nullptr);
          device_sync();
          CHECK(count_bad(gy.down(), y, t) == 0);
          CHECK(count_bad(gdx.down(), dx, t) == 0);
          // in place, and backward(forward(x)) = x up to rounding
          cuda_kernels::rope_forward(t, gx.p(), gx.p(), gc.f(), gs.f(), sh.B, sh.T, sh.H, sh.D, rot, nullptr);
          device_sync();
          CHECK(gx.raw() == gy.raw());
          if (t == DType::f32) {
            cuda_kernels::rope_backward(t, gx.p(), gx.p(), gc.f(), gs.f(), sh.B, sh.T, sh.H, sh.D, rot, nullptr);
            device_sync();
            CHECK(count_bad(gx.down(), x, t) == 0);
          }
        }
    }
  DevArr g(DType::f32, 8);
  CHECK_THROWS_WITH(cuda_kernels::rope_forward(DType::f32, g.p(), g.p(), g.f(), g.f(), 1, 1, 1, 3, 1, nullptr),
                    Catch::Contains("D even"));
  CHECK_THROWS_WITH(cuda_kernels::rope_tables(g.f(), g.f(), 2, 4, -1.0, nullptr), Catch::Contains("theta"));
}
