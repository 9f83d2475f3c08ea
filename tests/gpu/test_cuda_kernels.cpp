// defines: 5 Catch2 test cases tagged [cuda_kernels]; helpers: upload, download, device_sync, from_bits,
//          wide_floats, normals and 8 more
//
// The CUDA kernels of cuda/kernels/ against their CPU ops, on random inputs (never all zeros).
//
// Every output buffer is poisoned with 0xFF bytes (NaN in float32 / bfloat16 / float16) before
// each launch, so an element a kernel fails to write shows up. Sizes 1, 7, 8, 16385 and 1000003
// and pointers offset by one element (misaligned for 128-bit access) hit the vector path, the
// scalar tail and the scalar-only path.
//
// Tolerances:
// - cast: bit-exact against cast_ (the same integer rounding formulas). Only exception, documented
//   in cuda/kernels/cast.h: with factor != 1 a NaN input gives a NaN of another payload.
// - AdamW: within 1e-6 relative of the CPU adamw_update<float>, relative to the size of the terms
//   (|b1 m| + |(1 - b1) g| for m; |p| + 10 lr for p; |v| for v): the GPU rounds every operation,
//   the CPU build may contract mul+add into FMA (an ulp apart). out_bf16 is bf16(new master),
//   bit-exact. Aligned (vector path) and misaligned (scalar path) runs agree bit for bit.
// - sum_of_squares: within 1e-12 relative of the CPU's double result, and bitwise equal across
//   two runs.
// - GELU / SwiGLU float32: |gpu - cpu| <= 1e-5 * scale + 1e-30, scale = the sum of the absolute
//   terms (so the zero of gelu' near x = -0.75 is not a relative-error trap; expf differs from
//   the CPU's polynomial exp by ~2 ulp; 1e-30 covers exp overflow: the CPU clamps exp at
//   exp(88), CUDA returns inf, so the sigmoid of a very negative argument is ~1e-38 vs 0).
//   bfloat16: the float32 bound plus one bf16 ulp (2^-7 relative): both sides round their own
//   float32 result to nearest even. Aligned and misaligned GPU runs agree bit for bit.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/kernels/activation.h"
#include "core/kernels/cast.h"
#include "core/kernels/shard_norm.h"
#include "core/tensor.h"
#include "cuda/check.h"
#include "tests/gpu/device_buffer.h"
#include "cuda/kernels/activation.h"
#include "cuda/kernels/adamw.h"
#include "cuda/kernels/cast.h"
#include "cuda/kernels/reduce.h"
#include "optim/adamw.h"

using namespace zt;

static_assert(cuda_kernels::kCudaSumChunk == kSumChunk, "the GPU must chunk the sum as core/kernels/reduce.h does");

namespace {

using test::DeviceBuffer;

template <class T>
void upload(T* dst, const std::vector<T>& h) {
  ZT_CUDA_CHECK(cudaMemcpy(dst, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> download(const T* src, size_t n) {
  std::vector<T> h(n);
  ZT_CUDA_CHECK(cudaMemcpy(h.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
void device_sync() { ZT_CUDA_CHECK(cudaDeviceSynchronize()); }

const int64_t kSizes[] = {1, 7, 8, 16385, 1000003};
const size_t kOffsets[] = {0, 1};  // elements; 1 breaks 16-byte alignment

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Values across magnitudes (f16 overflow and subnormals, bf16 ties), with signs, zeros, infs and
// NaNs sprinkled in. Never all zeros.
std::vector<float> wide_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-30, 18), kind(0, 99);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const int k = kind(rng);
    if (k < 70) x = std::ldexp(nd(rng), ex(rng));
    else if (k < 90) x = from_bits(any(rng));  // any bit pattern: huge, tiny, denormal, NaN
    else if (k < 93) x = from_bits((any(rng) & 0xffff0000u) | 0x8000u);  // exact bf16 ties
    else if (k < 95) x = (k & 1 ? -1.0f : 1.0f) * (65504.0f + static_cast<float>(any(rng) % 32));  // f16 max..inf
    else if (k < 96) x = k & 1 ? -0.0f : 0.0f;
    else if (k < 97) x = k & 1 ? -INFINITY : INFINITY;
    else x = from_bits(0x7fc00000u | (any(rng) & 0x803fffffu));  // NaN with payload and sign
  }
  v[0] = v[0] == 0.0f ? 1.5f : v[0];
  return v;
}

std::vector<uint16_t> random_halves(int64_t n, uint32_t seed) {  // every bit pattern, NaN / inf included
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint32_t> any(0, 0xffff);
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<uint16_t>(any(rng));
  v[0] = 0x3c01;
  return v;
}

std::vector<float> normals(int64_t n, float sd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> b(x.size());
  for (size_t i = 0; i < x.size(); ++i) b[i] = f32_to_bf16(x[i]);
  return b;
}
std::vector<float> from_bf16(const std::vector<uint16_t>& b) {
  std::vector<float> x(b.size());
  for (size_t i = 0; i < b.size(); ++i) x[i] = bf16_to_f32(b[i]);
  return x;
}

Tensor host_view(void* p, int64_t n, DType t) { return Tensor::borrow(p, {n}, t); }

bool is_nan_bits(DType t, uint32_t u) {
  if (t == DType::f32) return (u & 0x7fffffffu) > 0x7f800000u;
  if (t == DType::bf16) return (u & 0x7fffu) > 0x7f80u;
  return (u & 0x7fffu) > 0x7c00u;
}

}  // namespace

// ---------------------------------------------------------------- cast

TEST_CASE("cuda cast matches cast_ bit for bit", "[cuda_kernels]") {
  const DType types[] = {DType::f32, DType::bf16, DType::f16};
  for (DType st : types)
    for (DType dt : types)
      for (float factor : {1.0f, 0.3711f})
        for (int64_t n : kSizes)
          for (size_t off : kOffsets) {
            CAPTURE(dtype_name(st), dtype_name(dt), factor, n, off);
            const size_t ss = dtype_size(st), ds = dtype_size(dt);
            std::vector<uint8_t> src(n * ss), want(n * ds), got(n * ds);
            if (st == DType::f32) {
              const auto v = wide_floats(n, static_cast<uint32_t>(n + 17 * off));
              std::memcpy(src.data(), v.data(), src.size());
            } else {
              const auto v = random_halves(n, static_cast<uint32_t>(n + 17 * off));
              std::memcpy(src.data(), v.data(), src.size());
            }
            cast_(host_view(want.data(), n, dt), host_view(src.data(), n, st), factor);

            DeviceBuffer dsrc((n + off) * ss), ddst((n + off) * ds);
            ZT_CUDA_CHECK(cudaMemcpy(static_cast<char*>(dsrc.p) + off * ss, src.data(), src.size(), cudaMemcpyHostToDevice));
            ddst.poison();
            cuda_kernels::cast(dt, static_cast<char*>(ddst.p) + off * ds, st, static_cast<char*>(dsrc.p) + off * ss, n,
                               factor, nullptr);
            device_sync();
            ZT_CUDA_CHECK(cudaMemcpy(got.data(), static_cast<char*>(ddst.p) + off * ds, got.size(), cudaMemcpyDeviceToHost));
            int64_t bad = 0, first = -1;
            for (int64_t i = 0; i < n; ++i) {
              uint32_t g = 0, w = 0, s = 0;
              std::memcpy(&g, got.data() + i * ds, ds);
              std::memcpy(&w, want.data() + i * ds, ds);
              std::memcpy(&s, src.data() + i * ss, ss);
              const bool ok = g == w || (factor != 1.0f && is_nan_bits(st, s) && is_nan_bits(dt, g) && is_nan_bits(dt, w));
              if (!ok && bad++ == 0) first = i;
            }
            INFO("first mismatch at " << first);
            CHECK(bad == 0);
          }
}

TEST_CASE("cuda cast in place and argument errors", "[cuda_kernels]") {
  const int64_t n = 1000003;
  const auto v = random_halves(n, 5);
  std::vector<uint16_t> want(n);
  std::vector<uint16_t> tmp = v;
  cast_(host_view(want.data(), n, DType::f16), host_view(tmp.data(), n, DType::bf16), 2.0);
  DeviceBuffer b(n * 2);
  upload(b.at<uint16_t>(0), v);
  cuda_kernels::cast(DType::f16, b.p, DType::bf16, b.p, n, 2.0f, nullptr);
  device_sync();
  const auto got = download(b.at<uint16_t>(0), n);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i)
    bad += got[i] != want[i] && !(is_nan_bits(DType::bf16, v[i]) && is_nan_bits(DType::f16, got[i]));
  CHECK(bad == 0);

  CHECK_THROWS_WITH(cuda_kernels::cast(DType::f64, b.p, DType::f32, b.p, 4, 1.0f, nullptr),
                    Catch::Contains("float64") && Catch::Contains("expected dtypes"));
  CHECK_THROWS_WITH(cuda_kernels::cast(DType::f32, b.at<uint16_t>(1), DType::bf16, b.p, 100, 1.0f, nullptr),
                    Catch::Contains("overlap"));
  CHECK_THROWS_WITH(cuda_kernels::cast(DType::f32, b.p, DType::bf16, b.p, 4, NAN, nullptr),
                    Catch::Contains("not finite"));
}

// ---------------------------------------------------------------- AdamW

TEST_CASE("cuda adamw_step matches adamw_update over three steps", "[cuda_kernels]") {
  AdamWHyper h;
  h.lr = 3e-3;
  h.weight_decay = 0.1;
  cuda_kernels::AdamWConfig c{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay};
  for (int64_t n : kSizes)
    for (bool decay : {true, false})
      for (bool with_bf16 : {true, false}) {
        CAPTURE(n, decay, with_bf16);
        auto p = normals(n, 0.5f, 1), m = normals(n, 1e-3f, 2), v = normals(n, 1e-3f, 3);
        for (auto& x : v) x = x * x;  // v >= 0
        // per offset: device state; results of the offset-0 (vector) run kept for the bitwise check
        std::vector<float> gpu_p[2], gpu_m[2], gpu_v[2];
        std::vector<uint16_t> gpu_b[2];
        for (size_t off : kOffsets) {
          DeviceBuffer dp((n + off) * 4), dg((n + off) * 4), dm((n + off) * 4), dv((n + off) * 4), db((n + off) * 2);
          upload(dp.at<float>(off), p);
          upload(dm.at<float>(off), m);
          upload(dv.at<float>(off), v);
          std::vector<float> cp = p, cm = m, cv = v;
          for (int64_t step = 1; step <= 3; ++step) {
            CAPTURE(off, step);
            auto g = normals(n, 1e-2f, static_cast<uint32_t>(10 + step));
            upload(dg.at<float>(off), g);
            db.poison();
            cuda_kernels::adamw_step(dp.at<float>(off), dg.at<float>(off), dm.at<float>(off), dv.at<float>(off), n, c,
                                     step, decay, with_bf16 ? db.at<uint16_t>(off) : nullptr, nullptr);
            const std::vector<float> m_prev = cm;
            adamw_update<float>(cp.data(), g.data(), cm.data(), cv.data(), n, h, step, decay);
            device_sync();
            const auto gp = download(dp.at<float>(off), n), gm = download(dm.at<float>(off), n),
                       gv = download(dv.at<float>(off), n);
            int64_t bad_p = 0, bad_m = 0, bad_v = 0, bad_b = 0;
            for (int64_t i = 0; i < n; ++i) {
              const double sp = std::fabs(cp[i]) + 10 * h.lr;
              const double sm = std::fabs(h.beta1 * m_prev[i]) + std::fabs((1 - h.beta1) * g[i]);
              bad_p += !(std::fabs(double(gp[i]) - cp[i]) <= 1e-6 * sp);
              bad_m += !(std::fabs(double(gm[i]) - cm[i]) <= 1e-6 * sm);
              bad_v += !(std::fabs(double(gv[i]) - cv[i]) <= 1e-6 * std::fabs(cv[i]) + 1e-30);
            }
            if (with_bf16) {
              const auto gb = download(db.at<uint16_t>(off), n);
              for (int64_t i = 0; i < n; ++i) bad_b += gb[i] != f32_to_bf16(gp[i]);
              if (step == 3) gpu_b[off] = gb;
            }
            CHECK(bad_p == 0);
            CHECK(bad_m == 0);
            CHECK(bad_v == 0);
            CHECK(bad_b == 0);
            // the next step starts from the GPU's state on both sides, so each step's bound holds
            // for that step alone (carried differences would meet m near 0 by cancellation)
            cp = gp, cm = gm, cv = gv;
            if (step == 3) {
              gpu_p[off] = gp;
              gpu_m[off] = gm;
              gpu_v[off] = gv;
            }
          }
        }
        // vector path (aligned) and scalar path (offset by one) give the same bits
        CHECK(std::memcmp(gpu_p[0].data(), gpu_p[1].data(), n * 4) == 0);
        CHECK(std::memcmp(gpu_m[0].data(), gpu_m[1].data(), n * 4) == 0);
        CHECK(std::memcmp(gpu_v[0].data(), gpu_v[1].data(), n * 4) == 0);
        if (with_bf16) CHECK(gpu_b[0] == gpu_b[1]);
      }
  CHECK_THROWS_WITH(cuda_kernels::adamw_step(nullptr, nullptr, nullptr, nullptr, 4, c, 0, true, nullptr, nullptr),
                    Catch::Contains("1-based"));
}

// ---------------------------------------------------------------- sum of squares

TEST_CASE("cuda sum_of_squares matches the CPU and is bitwise reproducible", "[cuda_kernels]") {
  int64_t bitwise_equal_to_cpu = 0, cases = 0;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(16384), int64_t(16385), int64_t(1000003)})
      for (size_t off : kOffsets) {
        CAPTURE(dtype_name(t), n, off);
        auto x = normals(n, 3.0f, static_cast<uint32_t>(n + off));
        x[0] = 2.5f;  // never all zeros (and n = 1 is not 0)
        const size_t es = dtype_size(t);
        std::vector<uint8_t> host(n * es);
        if (t == DType::f32) {
          std::memcpy(host.data(), x.data(), host.size());
        } else {
          std::vector<uint16_t> hx(n);
          for (int64_t i = 0; i < n; ++i) hx[i] = t == DType::bf16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
          std::memcpy(host.data(), hx.data(), host.size());
        }
        const double want = sum_of_squares(host_view(host.data(), n, t));
        DeviceBuffer dx((n + off) * es);
        ZT_CUDA_CHECK(cudaMemcpy(static_cast<char*>(dx.p) + off * es, host.data(), host.size(), cudaMemcpyHostToDevice));
        double r1 = NAN, r2 = NAN;
        cuda_kernels::sum_of_squares(static_cast<char*>(dx.p) + off * es, t, n, &r1, nullptr);
        cuda_kernels::sum_of_squares(static_cast<char*>(dx.p) + off * es, t, n, &r2, nullptr);
        CHECK(want > 0);
        CHECK(std::fabs(r1 - want) <= 1e-12 * want);
        CHECK(std::bit_cast<uint64_t>(r1) == std::bit_cast<uint64_t>(r2));
        bitwise_equal_to_cpu += std::bit_cast<uint64_t>(r1) == std::bit_cast<uint64_t>(want);
        ++cases;
      }
  // Not required (the CPU build may or may not contract acc += v * v into an FMA), but reported.
  WARN("sum_of_squares: " << bitwise_equal_to_cpu << " of " << cases << " cases bitwise equal to the CPU");

  // The async form: result in device memory, caller's workspace; n == 0 gives 0.
  DeviceBuffer res(sizeof(double)), ws(8);
  res.poison();
  CHECK(cuda_kernels::sum_of_squares_workspace_bytes(0) == 0);
  CHECK(cuda_kernels::sum_of_squares_workspace_bytes(16385) == 16);
  cuda_kernels::sum_of_squares_async(nullptr, DType::f32, 0, res.at<double>(0), ws.p, nullptr);
  device_sync();
  CHECK(download(res.at<double>(0), 1)[0] == 0.0);
  double r = 0;
  CHECK_THROWS_WITH(cuda_kernels::sum_of_squares(ws.p, DType::i32, 1, &r, nullptr), Catch::Contains("int32"));
}

// ---------------------------------------------------------------- activations

namespace {

enum class Act { gelu_fwd, gelu_bwd, swiglu_fwd, swiglu_bwd_both, swiglu_bwd_gate, swiglu_bwd_up };

// CPU reference outputs (float32 math on the given float inputs) and per-element scales.
struct Ref {
  std::vector<float> y[2];
  std::vector<double> scale[2];
};

Ref cpu_ref(Act a, const std::vector<float>& x0, const std::vector<float>& x1, const std::vector<float>& x2) {
  const int64_t n = static_cast<int64_t>(x0.size());
  Ref r;
  r.y[0].resize(n);
  r.y[1].resize(n);
  r.scale[0].resize(n);
  r.scale[1].resize(n);
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  const double a2 = 0.7978845608028654, c = 0.044715;
  switch (a) {
    case Act::gelu_fwd: gelu_forward<float>(r.y[0].data(), x0.data(), n); break;
    case Act::gelu_bwd: gelu_backward<float>(r.y[0].data(), x0.data(), x1.data(), n); break;
    case Act::swiglu_fwd: swiglu_forward<float>(r.y[0].data(), x0.data(), x1.data(), n); break;
    case Act::swiglu_bwd_both: swiglu_backward<float>(r.y[0].data(), r.y[1].data(), x0.data(), x1.data(), x2.data(), n); break;
    case Act::swiglu_bwd_gate: swiglu_backward<float>(r.y[0].data(), nullptr, x0.data(), x1.data(), x2.data(), n); break;
    case Act::swiglu_bwd_up: swiglu_backward<float>(nullptr, r.y[0].data(), x0.data(), x1.data(), nullptr, n); break;
  }
  for (int64_t i = 0; i < n; ++i) {
    switch (a) {
      case Act::gelu_fwd: r.scale[0][i] = std::fabs(r.y[0][i]); break;
      case Act::gelu_bwd: {
        const double v = x1[i], s = sig(2 * a2 * (v + c * v * v * v));
        r.scale[0][i] = std::fabs(x0[i]) * (s + std::fabs(v * 2 * s * (1 - s) * a2 * (1 + 3 * c * v * v)));
        break;
      }
      case Act::swiglu_fwd: r.scale[0][i] = std::fabs(r.y[0][i]); break;
      case Act::swiglu_bwd_both:
      case Act::swiglu_bwd_gate:
      case Act::swiglu_bwd_up: {
        const double g = x1[i], s = sig(g);
        const double dgate = std::fabs(double(x0[i]) * (a == Act::swiglu_bwd_up ? 0.0 : x2[i])) * (s + std::fabs(g * s * (1 - s)));
        const double dup = std::fabs(double(x0[i]) * g * s);
        r.scale[0][i] = a == Act::swiglu_bwd_up ? dup : dgate;
        r.scale[1][i] = dup;
        break;
      }
    }
  }
  return r;
}

void launch_act(Act a, DType t, void* y0, void* y1, const void* x0, const void* x1, const void* x2, int64_t n) {
  switch (a) {
    case Act::gelu_fwd: return cuda_kernels::gelu_forward(t, y0, x0, n, nullptr);
    case Act::gelu_bwd: return cuda_kernels::gelu_backward(t, y0, x0, x1, n, nullptr);
    case Act::swiglu_fwd: return cuda_kernels::swiglu_forward(t, y0, x0, x1, n, nullptr);
    case Act::swiglu_bwd_both: return cuda_kernels::swiglu_backward(t, y0, y1, x0, x1, x2, n, nullptr);
    case Act::swiglu_bwd_gate: return cuda_kernels::swiglu_backward(t, y0, nullptr, x0, x1, x2, n, nullptr);
    case Act::swiglu_bwd_up: return cuda_kernels::swiglu_backward(t, nullptr, y0, x0, x1, x2, n, nullptr);
  }
}

int outputs_of(Act a) { return a == Act::swiglu_bwd_both ? 2 : 1; }

}  // namespace

TEST_CASE("cuda gelu and swiglu match the CPU ops in float32 and bfloat16", "[cuda_kernels]") {
  const Act acts[] = {Act::gelu_fwd, Act::gelu_bwd, Act::swiglu_fwd, Act::swiglu_bwd_both, Act::swiglu_bwd_gate,
                      Act::swiglu_bwd_up};
  for (Act a : acts)
    for (DType t : {DType::f32, DType::bf16})
      for (int64_t n : kSizes) {
        CAPTURE(static_cast<int>(a), dtype_name(t), n);
        // forward: x0 = x / gate, x1 = up; backward: x0 = dout, x1 = x / gate, x2 = up. Extremes in the
        // first slots of x / gate.
        auto x0 = normals(n, 2.0f, 101), x1 = normals(n, 2.0f, 102), x2 = normals(n, 1.5f, 103);
        const float extremes[] = {-30.0f, -12.0f, -0.75f, 0.0f, 12.0f, 30.0f, 1e-20f};
        for (size_t k = 0; k < 7 && k < size_t(n); ++k) {
          if (a == Act::gelu_fwd || a == Act::swiglu_fwd) x0[k] = extremes[k];  // x / gate
          else x1[k] = extremes[k];
        }
        if (t == DType::bf16) {  // the inputs the bf16 kernels see, exactly, for the CPU reference
          x0 = from_bf16(to_bf16(x0));
          x1 = from_bf16(to_bf16(x1));
          x2 = from_bf16(to_bf16(x2));
        }
        const Ref ref = cpu_ref(a, x0, x1, x2);
        const size_t es = dtype_size(t);
        std::vector<uint8_t> outs[2][2];  // [offset][output] raw bytes
        for (size_t off : kOffsets) {
          CAPTURE(off);
          DeviceBuffer d0((n + off) * es), d1((n + off) * es), d2((n + off) * es), o0((n + off) * es), o1((n + off) * es);
          const std::vector<float>* xs[3] = {&x0, &x1, &x2};
          DeviceBuffer* ds[3] = {&d0, &d1, &d2};
          for (int k = 0; k < 3; ++k) {
            if (t == DType::f32) upload(ds[k]->at<float>(off), *xs[k]);
            else upload(ds[k]->at<uint16_t>(off), to_bf16(*xs[k]));
          }
          o0.poison();
          o1.poison();
          auto ptr = [&](DeviceBuffer& b) { return static_cast<char*>(b.p) + off * es; };
          launch_act(a, t, ptr(o0), ptr(o1), ptr(d0), ptr(d1), ptr(d2), n);
          device_sync();
          for (int o = 0; o < outputs_of(a); ++o) {
            DeviceBuffer& ob = o == 0 ? o0 : o1;
            outs[off][o].resize(n * es);
            ZT_CUDA_CHECK(cudaMemcpy(outs[off][o].data(), ptr(ob), n * es, cudaMemcpyDeviceToHost));
            int64_t bad = 0, first = -1;
            for (int64_t i = 0; i < n; ++i) {
              float g = 0;
              if (t == DType::f32) std::memcpy(&g, outs[off][o].data() + i * 4, 4);
              else {
                uint16_t h = 0;
                std::memcpy(&h, outs[off][o].data() + i * 2, 2);
                g = bf16_to_f32(h);
              }
              const double w = t == DType::f32 ? double(ref.y[o][i]) : double(bf16_to_f32(f32_to_bf16(ref.y[o][i])));
              double tol = 1e-5 * ref.scale[o][i] + 1e-30;
              if (t == DType::bf16) tol += std::ldexp(std::max(std::fabs(double(g)), std::fabs(w)), -7);
              if (!(std::fabs(double(g) - w) <= tol) && bad++ == 0) first = i;
            }
            INFO("output " << o << ": first mismatch at " << first);
            CHECK(bad == 0);
          }
        }
        for (int o = 0; o < outputs_of(a); ++o) CHECK(outs[0][o] == outs[1][o]);  // vector vs scalar path
      }
  DeviceBuffer b(64);
  CHECK_THROWS_WITH(cuda_kernels::gelu_forward(DType::f16, b.p, b.p, 4, nullptr), Catch::Contains("float16"));
  CHECK_THROWS_WITH(cuda_kernels::swiglu_backward(DType::f32, nullptr, nullptr, b.p, b.p, b.p, 4, nullptr),
                    Catch::Contains("both null"));
}
