// defines: 10 Catch2 test cases tagged [cuda_backend_ops]
//
// CudaBackend's table entries (cuda/backend.cpp, cuda/backend_ops.cpp) against the cpu backend's,
// through the Backend interface (core/backend.h), on random inputs (never zeros).
//
// Every GPU output is poisoned first (filled with NaN through the backend), so an element an entry
// fails to write fails the comparison (NaN never passes). Sizes 1, 37 (odd: the scalar tail),
// 1000 (whole 128-bit packs) and 8193 (two sum blocks); every elementwise case also runs on views
// offset by one element (misaligned: the scalar-only paths).
// References: the cpu backend in float32. For bfloat16 the inputs are rounded to bf16 first, the
// cpu op runs in float32 on those exact values, and its result rounded to bf16 is the reference.
//
// Tolerances, |gpu - ref| <= tol (NaN never passes):
// - exact (tol 0), float32 and bfloat16: binary, scale, scale_, scale_by, mul_backward, copy, fill, cast,
//   accumulate_cast, embedding forward / backward, sum_last_backward, copies to and from the host,
//   a norm backward's dres (against the GPU's own dx and add)
//   (the same float32 operations, one rounding each; copies are bits). fill_scaled: 2e-7 (one
//   float ulp, should the cpu round factor to float before the product).
// - sum_all, sum_last: 1e-6 relative — the GPU adds in the CPU's order (cuda/kernels/elementwise.h),
//   so they are expected bit-exact; the slack only covers a CPU build that reorders.
// - cross_entropy_and_grad: bitwise the GPU's cross_entropy then cross_entropy_backward (dloss 1).
// - accumulate, AdamW, SGD: 1e-6 relative (one side fuses a multiply-add where the other rounds
//   twice: the GPU's accumulate where a CPU build may not contract; the CPU's AdamW kernel, and a
//   CPU build's contraction of SGD's a * b + c, where the GPU's AdamW and SGD round each operation).
// - silu, gelu, swiglu, softmax, cross-entropy, LayerNorm, RMSNorm: 1e-5 of max(|ref|, RMS of
//   the reference) (CUDA's expf / logf vs the CPU's polynomial, other reduction orders); for the
//   norms' dw / db 2e-5 (sums over rows). bfloat16: that bound plus one bf16 ulp (2^-7 |ref|):
//   both sides round their own float32 result.
// - sum_of_squares: 1e-12 relative.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/tensor.h"
#include "cuda/backend.h"
#include "cuda/device.h"
#include "optim/sgd.h"
#include "tests/bitwise.h"
#include "tests/gpu/backend_compare.h"  // gpu, cpu, values, host, device_empty, device_from, count_bad

using namespace zt;
using namespace zt::test;

namespace {

const DType kTypes[] = {DType::f32, DType::bf16};
const int64_t kSizes[] = {1, 37, 1000, 8193};
const int64_t kOffsets[] = {0, 1};

}  // namespace

// ---------------------------------------------------------------- elementwise

TEST_CASE("cuda backend: binary, scale, mul_backward, silu match the cpu backend", "[cuda_backend_ops]") {
  Backend& g = gpu();
  for (DType t : kTypes)
    for (int64_t n : kSizes)
      for (int64_t off : kOffsets) {
        CAPTURE(dtype_name(t), n, off);
        const Shape s{n};
        const Tensor a = host(values(n, 1, t), s), b = host(values(n, 2, t), s), d = host(values(n, 3, t), s);
        const Tensor ga = device_from(a, t, off), gb = device_from(b, t, off), gd = device_from(d, t, off);
        for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul}) {
          Tensor ref = host_empty(s), out = device_empty(s, t, off);
          cpu().binary(op, ref, a, b);
          g.binary(op, out, ga, gb);
          CHECK(count_bad(out, ref, t, 0.0) == 0);
        }
        {
          Tensor ref = host_empty(s), out = device_empty(s, t, off);
          cpu().scale(ref, a, -0.37);
          g.scale(out, ga, -0.37);
          CHECK(count_bad(out, ref, t, 0.0) == 0);
          Tensor inplace = device_from(a, t, off);
          g.scale_(inplace, -0.37);
          CHECK(count_bad(inplace, ref, t, 0.0) == 0);
          // scale_by: the factor a () tensor read on the device (float32 or bfloat16), in place too
          for (DType st : kTypes) {
            const Tensor f = host({st == DType::bf16 ? bf16_round(-0.37) : -0.37}, {});
            Tensor rby = host_empty(s), by = device_empty(s, t, off), self = device_from(a, t, off);
            cpu().scale_by(rby, a, f);
            g.scale_by(by, ga, device_from(f, st));
            g.scale_by(self, self, device_from(f, st));
            CHECK(count_bad(by, rby, t, 0.0) == 0);
            CHECK(count_bad(self, rby, t, 0.0) == 0);
          }
        }
        for (int which = 0; which < 3; ++which) {  // both, da only, db only
          Tensor rda = host_empty(s), rdb = host_empty(s);
          Tensor da = device_empty(s, t, off), db = device_empty(s, t, off);
          cpu().mul_backward(which != 2 ? rda : Tensor(), which != 1 ? rdb : Tensor(), d, a, b);
          g.mul_backward(which != 2 ? da : Tensor(), which != 1 ? db : Tensor(), gd, ga, gb);
          if (which != 2) CHECK(count_bad(da, rda, t, 0.0) == 0);
          if (which != 1) CHECK(count_bad(db, rdb, t, 0.0) == 0);
        }
        {
          Tensor ref = host_empty(s), out = device_empty(s, t, off), rdx = host_empty(s), dx = device_empty(s, t, off);
          cpu().silu(ref, a);
          g.silu(out, ga);
          CHECK(count_bad(out, ref, t, 1e-5) == 0);
          cpu().silu_backward(rdx, d, a);
          g.silu_backward(dx, gd, ga);
          CHECK(count_bad(dx, rdx, t, 1e-5) == 0);
        }
        {
          Tensor ref = host_empty(s), out = device_empty(s, t, off), rdx = host_empty(s), dx = device_empty(s, t, off);
          cpu().gelu(ref, a);
          g.gelu(out, ga);
          CHECK(count_bad(out, ref, t, 1e-5) == 0);
          cpu().gelu_backward(rdx, d, a);
          g.gelu_backward(dx, gd, ga);
          CHECK(count_bad(dx, rdx, t, 1e-5) == 0);
          Tensor rdg = host_empty(s), rdu = host_empty(s), dg = device_empty(s, t, off), du = device_empty(s, t, off);
          cpu().swiglu(ref, a, b);
          g.swiglu(out, ga, gb);
          CHECK(count_bad(out, ref, t, 1e-5) == 0);
          cpu().swiglu_backward(rdg, rdu, d, a, b);
          g.swiglu_backward(dg, du, gd, ga, gb);
          CHECK(count_bad(dg, rdg, t, 1e-5) == 0);
          CHECK(count_bad(du, rdu, t, 1e-5) == 0);
        }
      }
  // argument errors: a cpu tensor, a float64 tensor, a shape mismatch
  const Tensor a = device_from(host(values(8, 1, DType::f32), {8}), DType::f32);
  const Tensor b = device_from(host(values(9, 2, DType::f32), {9}), DType::f32);
  CHECK_THROWS_WITH(g.binary(BinaryOp::add, device_empty({8}, DType::f32), a, host(values(8, 3, DType::f32), {8})),
                    Catch::Contains("is on cpu"));
  CHECK_THROWS_WITH(g.binary(BinaryOp::add, device_empty({9}, DType::f32), b, a), Catch::Contains("expected shape"));
  const Tensor a64 = device_from(host(values(8, 1, DType::f32), {8}), DType::f64);
  CHECK_THROWS_WITH(g.scale(device_empty({8}, DType::f64), a64, 2.0), Catch::Contains("float32 or bfloat16"));
}

// Llama's packed gate | up (N, 2F): the CPU's swiglu_packed within 1e-5, and the bits of the GPU's
// own swiglu on the two halves apart (the same per-element code), on the vector path (F % 8 == 0,
// aligned) and the scalar one (odd F, or an offset buffer).
TEST_CASE("cuda backend: swiglu_packed forward and backward match the cpu and the unpacked swiglu",
          "[cuda_backend_ops]") {
  Backend& g = gpu();
  for (DType t : kTypes)
    for (int64_t F : {int64_t(1), int64_t(7), int64_t(8), int64_t(2048)})
      for (int64_t N : {int64_t(1), int64_t(5), int64_t(33)})
        for (int64_t off : kOffsets) {
          CAPTURE(dtype_name(t), N, F, off);
          const Tensor gu = host(values(N * 2 * F, 5, t), {N, 2 * F}), d = host(values(N * F, 6, t), {N, F});
          const Tensor ggu = device_from(gu, t, off), gd = device_from(d, t, off);
          Tensor ref = host_empty({N, F}), out = device_empty({N, F}, t, off);
          cpu().swiglu_packed(ref, gu);
          g.swiglu_packed(out, ggu);
          CHECK(count_bad(out, ref, t, 1e-5) == 0);
          Tensor rdgu = host_empty({N, 2 * F}), dgu = device_empty({N, 2 * F}, t, off);
          cpu().swiglu_packed_backward(rdgu, d, gu);
          g.swiglu_packed_backward(dgu, gd, ggu);
          CHECK(count_bad(dgu, rdgu, t, 1e-5) == 0);
          // the halves apart through the unpacked entries: the same bits
          const Tensor gate = gu.slice(1, 0, F).contiguous(), up = gu.slice(1, F, 2 * F).contiguous();
          const Tensor ggate = device_from(gate, t, 0), gup = device_from(up, t, 0);
          Tensor o2 = device_empty({N, F}, t, 0), dg = device_empty({N, F}, t, 0), du = device_empty({N, F}, t, 0);
          g.swiglu(o2, ggate, gup);
          g.swiglu_backward(dg, du, device_from(d, t, 0), ggate, gup);
          const Tensor packed_back = dgu.to(Device::cpu(), Category::workspace);
          CHECK(count_bad(o2, out.to(Device::cpu(), Category::workspace), t, 0.0) == 0);
          CHECK(count_bad(dg, packed_back.slice(1, 0, F).contiguous(), t, 0.0) == 0);
          CHECK(count_bad(du, packed_back.slice(1, F, 2 * F).contiguous(), t, 0.0) == 0);
        }
  CHECK_THROWS_WITH(g.swiglu_packed(device_empty({2, 3}, DType::f32, 0), device_empty({2, 5}, DType::f32, 0)),
                    Catch::Contains("(..., 2F)"));
}

// ---------------------------------------------------------------- reductions

TEST_CASE("cuda backend: sum_all, fill_scaled, sum_last forward and backward", "[cuda_backend_ops]") {
  Backend& g = gpu();
  for (DType t : kTypes)
    for (int64_t n : {int64_t(1), int64_t(37), int64_t(8193), int64_t(70001)}) {
      CAPTURE(dtype_name(t), n);
      const Tensor x = host(values(n, 4, t, 0.2), {n});
      const Tensor gx = device_from(x, t, 1);
      for (double factor : {1.0, 1.0 / static_cast<double>(n)}) {
        Tensor ref = host_empty({}), out = device_empty({}, t);
        cpu().sum_all(ref, x, factor);
        g.sum_all(out, gx, factor);
        CHECK(count_bad(out, ref, t, 1e-6) == 0);
        Tensor again = device_empty({}, t);
        g.sum_all(again, gx, factor);
        CHECK(again.item() == out.item());  // deterministic
        // fill_scaled: dx = factor * g, g read on the device
        Tensor rdx = host_empty({n}), dx = device_empty({n}, t, 1);
        const Tensor hg = host({t == DType::bf16 ? bf16_round(1.7) : 1.7}, {});
        cpu().fill_scaled(rdx, hg, factor);
        g.fill_scaled(dx, device_from(hg, t), factor);
        CHECK(count_bad(dx, rdx, t, 2e-7) == 0);  // round(double(g) * factor): exact unless the cpu rounds factor first
      }
    }
  const struct { int64_t R, N; } shapes[] = {{1, 1}, {7, 37}, {64, 1000}, {3, 4099}, {1000, 16}};
  for (DType t : kTypes)
    for (const auto& sh : shapes) {
      CAPTURE(dtype_name(t), sh.R, sh.N);
      const Tensor x = host(values(sh.R * sh.N, 5, t, 0.1), {sh.R, sh.N});
      Tensor ref = host_empty({sh.R}), out = device_empty({sh.R}, t, 1);
      cpu().sum_last(ref, x);
      g.sum_last(out, device_from(x, t, 1));
      CHECK(count_bad(out, ref, t, 1e-6) == 0);
      const Tensor dout = host(values(sh.R, 6, t), {sh.R});
      Tensor rdx = host_empty({sh.R, sh.N}), dx = device_empty({sh.R, sh.N}, t, 1);
      cpu().sum_last_backward(rdx, dout);
      g.sum_last_backward(dx, device_from(dout, t, 1));
      CHECK(count_bad(dx, rdx, t, 0.0) == 0);
    }
}

// ---------------------------------------------------------------- memory entries

TEST_CASE("cuda backend: strided, converting copies and fills equal Tensor::copy_ / fill_ on the host",
          "[cuda_backend_ops]") {
  Backend& g = gpu();
  const DType kAll[] = {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64};
  // values exact in every dtype's range: small integers and halves, plus general floats
  std::vector<double> v = values(5 * 7 * 9, 7, DType::f32, 0.0, 20.0);
  for (size_t i = 0; i < v.size(); i += 3) v[i] = std::round(v[i]);
  const Tensor base = host(v, {5, 7, 9});
  for (DType st : kAll)
    for (DType dt : kAll) {
      CAPTURE(dtype_name(st), dtype_name(dt));
      const Tensor hsrc = base.to(st);
      const Tensor dsrc = hsrc.to(Device::cuda(0));
      // views: contiguous, permuted, sliced with a step, a single column
      struct View {
        Tensor h, d;
      };
      const View views[] = {{hsrc, dsrc},
                            {hsrc.permute({2, 0, 1}), dsrc.permute({2, 0, 1})},
                            {hsrc.slice(1, 1, 7, 2).slice(2, 0, 9, 3), dsrc.slice(1, 1, 7, 2).slice(2, 0, 9, 3)},
                            {hsrc.slice(2, 4, 5), dsrc.slice(2, 4, 5)}};
      for (const View& w : views) {
        CAPTURE(shape_str(w.h.shape()), shape_str(w.h.strides()));
        // destination: a transposed view of a fresh buffer (strided on both sides)
        const Shape& s = w.h.shape();
        Tensor hdst = host_empty({s[2], s[1], s[0]}, dt).permute({2, 1, 0});
        Tensor ddst = device_empty({s[2], s[1], s[0]}, dt).permute({2, 1, 0});
        hdst.copy_(w.h);
        g.copy(ddst, w.d);
        const Tensor back = ddst.contiguous().to(Device::cpu());
        const Tensor want = hdst.contiguous();
        REQUIRE(back.nbytes() == want.nbytes());
        CHECK(std::memcmp(back.raw(), want.raw(), want.nbytes()) == 0);
      }
      if (st == dt) {  // fill on a strided view: the elements outside it keep their values
        Tensor hbuf = hsrc.clone(), dbuf = dsrc.clone();
        hbuf.slice(1, 0, 7, 3).fill_(-2.5);
        g.fill(dbuf.slice(1, 0, 7, 3), -2.5);
        const Tensor back = dbuf.to(Device::cpu());
        CHECK(std::memcmp(back.raw(), hbuf.raw(), hbuf.nbytes()) == 0);
      }
    }
  // host <-> device round trip of an odd size, and the copy's contiguity checks
  const Tensor h = host(values(1001, 8, DType::f32), {1001});
  const Tensor d = h.to(Device::cuda(0));
  const Tensor r = d.to(Device::cpu());
  CHECK(std::memcmp(r.raw(), h.raw(), h.nbytes()) == 0);
  CHECK_THROWS_WITH(g.copy_to_host(host_empty({999}), d.slice(0, 0, 1000)), Catch::Contains("same dtype and number"));
}

TEST_CASE("cuda backend: accumulate, cast, accumulate_cast, scale_ match the cpu backend", "[cuda_backend_ops]") {
  Backend& g = gpu();
  for (DType t : kTypes)
    for (int64_t n : kSizes)
      for (int64_t off : kOffsets) {
        CAPTURE(dtype_name(t), n, off);
        const Tensor dst = host(values(n, 9, t), {n}), src = host(values(n, 10, t), {n});
        Tensor ref = dst.clone(), gd = device_from(dst, t, off);
        cpu().accumulate(ref, src, 0.75);
        g.accumulate(gd, device_from(src, t, off), 0.75);
        CHECK(count_bad(gd, ref, t, 1e-6) == 0);
      }
  {  // strided: a transposed destination and a sliced source
    const Tensor dst = host(values(37 * 11, 11, DType::f32), {37, 11}), src = host(values(11 * 74, 12, DType::f32), {11, 74});
    Tensor ref = dst.clone();
    Tensor gd = device_from(dst, DType::f32);
    cpu().accumulate(ref.transpose(0, 1), src.slice(1, 0, 74, 2), -1.5);
    g.accumulate(gd.transpose(0, 1), device_from(src, DType::f32).slice(1, 0, 74, 2), -1.5);
    CHECK(count_bad(gd, ref, DType::f32, 1e-6) == 0);
  }
  const DType k3[] = {DType::f32, DType::bf16, DType::f16};
  for (int64_t n : kSizes)
    for (DType st : k3)
      for (DType dt : k3) {
        CAPTURE(n, dtype_name(st), dtype_name(dt));
        const Tensor src = host(values(n, 13, DType::f32, 0.0, 100.0), {n}).to(st);
        Tensor ref = host_empty({n}, dt), out = device_empty({n}, dt, 1);
        cpu().cast(ref, src, 0.125);
        g.cast(out, src.to(Device::cuda(0)), 0.125);
        Tensor back = out.to(Device::cpu());
        CHECK(std::memcmp(back.raw(), ref.raw(), ref.nbytes()) == 0);
        // accumulate_cast: dst f32 with any src, or a 2-byte dst with src of its dtype or f32. The
        // reference is written out here (float32 add, one rounding: core/kernels/cast.h), as the
        // cpu kernel does not take every pair the table allows (dst f32 with a 2-byte src).
        if (dt == DType::f32 || dt == st || st == DType::f32) {
          const Tensor acc = host(values(n, 14, DType::f32), {n}).to(dt);
          const std::vector<double> av = acc.to_vector(), sv = src.to_vector();
          std::vector<double> sum(av.size());
          for (size_t i = 0; i < av.size(); ++i) sum[i] = static_cast<float>(static_cast<float>(av[i]) + static_cast<float>(sv[i]));
          const Tensor want = host(sum, {n}).to(dt);
          Tensor gacc = device_from(acc, dt, 1);
          g.accumulate_cast(gacc, device_from(src, st, 1));
          back = gacc.to(Device::cpu());
          CHECK(std::memcmp(back.raw(), want.raw(), want.nbytes()) == 0);
        }
      }
}

TEST_CASE("cuda backend: all_finite, sum_of_squares, adamw_step", "[cuda_backend_ops]") {
  Backend& g = gpu();
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (int64_t n : {int64_t(1), int64_t(37), int64_t(20001)}) {
      CAPTURE(dtype_name(t), n);
      Tensor h = host(values(n, 15, DType::f32), {n}).to(t);
      Tensor d = h.to(Device::cuda(0));
      CHECK(g.all_finite(d));
      for (double bad : {std::numeric_limits<double>::infinity(), kNaN}) {
        Tensor e = d.clone();
        g.fill(e.slice(0, n - 1, n), bad);
        CHECK_FALSE(g.all_finite(e));
      }
      if (t != DType::f64) {
        const double ref = cpu().sum_of_squares(h), got = g.sum_of_squares(d);
        CHECK(std::fabs(got - ref) <= 1e-12 * ref);
        CHECK(g.sum_of_squares(d) == got);  // deterministic
      }
    }
  AdamWArgs h;
  h.lr = 3e-3, h.weight_decay = 0.1;
  for (int64_t n : kSizes)
    for (bool lowp : {false, true}) {
      CAPTURE(n, lowp);
      Tensor p = host(values(n, 16, DType::f32), {n}), m = host(values(n, 17, DType::f32, 0.0, 1e-3), {n});
      std::vector<double> vv = values(n, 18, DType::f32, 0.0, 1e-3);
      for (auto& x : vv) x = static_cast<float>(x * x);  // v >= 0
      Tensor v = host(vv, {n});
      Tensor dp = device_from(p, DType::f32, 1), dm = device_from(m, DType::f32, 1), dv = device_from(v, DType::f32, 1);
      Tensor out = lowp ? device_empty({n}, DType::bf16, 1) : Tensor();
      for (int64_t step = 1; step <= 3; ++step) {
        h.step = step;
        const Tensor gr = host(values(n, 20 + static_cast<uint32_t>(step), DType::f32, 0.0, 1e-2), {n});
        cpu().adamw_step(p, gr, m, v, h, Tensor());
        g.adamw_step(dp, device_from(gr, DType::f32, 1), dm, dv, h, out);
      }
      CHECK(count_bad(dp, p, DType::f32, 1e-6) == 0);
      CHECK(count_bad(dm, m, DType::f32, 1e-6) == 0);
      CHECK(count_bad(dv, v, DType::f32, 1e-6) == 0);
      if (lowp) CHECK(count_bad(out, dp, DType::bf16, 0.0) == 0);  // bf16 of the GPU's own master
    }
  Tensor p = device_from(host(values(8, 1, DType::f32), {8}), DType::f32);
  Tensor o16 = device_empty({8}, DType::f16);
  CHECK_THROWS_WITH(g.adamw_step(p, p.clone(), p.clone(), p.clone(), h, o16), Catch::Contains("bfloat16 copy only"));
}

// SGD (core/backend_ops.def's sgd_step): plain, momentum, Nesterov, with and without decay, over
// sizes around the kernel's 256-thread blocks and its 4-element packs (1, 3, 255, 257, 1029 and
// 100003 are not multiples of either), aligned and misaligned (offset 1: the scalar path); then
// the optimizer itself (optim/sgd.h's Sgd) on a GPU shard against the same shard on the cpu.
TEST_CASE("cuda backend: sgd_step matches the cpu backend", "[cuda_backend_ops]") {
  Backend& g = gpu();
  struct Case {
    double momentum;
    bool nesterov;
  };
  const int64_t sizes[] = {1, 3, 37, 255, 256, 257, 1000, 1029, 8193, 100003};
  for (Case c : {Case{0.0, false}, Case{0.9, false}, Case{0.9, true}})
    for (bool decay : {false, true})
      for (int64_t n : sizes)
        for (int64_t off : kOffsets) {
          CAPTURE(c.momentum, c.nesterov, decay, n, off);
          SgdArgs h;
          h.lr = 0.05, h.momentum = c.momentum, h.weight_decay = 0.1, h.nesterov = c.nesterov, h.decay = decay;
          Tensor p = host(values(n, 50, DType::f32), {n});
          Tensor b = c.momentum > 0 ? host(values(n, 51, DType::f32, 0.0, 0.1), {n}) : Tensor();
          Tensor dp = device_from(p, DType::f32, off), db = b.defined() ? device_from(b, DType::f32, off) : Tensor();
          for (int step = 1; step <= 3; ++step) {
            const Tensor gr = host(values(n, 52 + static_cast<uint32_t>(step), DType::f32, 0.0, 0.1), {n});
            cpu().sgd_step(p, gr, b, h);
            g.sgd_step(dp, device_from(gr, DType::f32, off), db, h);
          }
          CHECK(count_bad(dp, p, DType::f32, 1e-6) == 0);
          if (b.defined()) CHECK(count_bad(db, b, DType::f32, 1e-6) == 0);
        }

  // the argument checks (adamw_step's): device, dtype, sizes, the buffer exactly when momentum > 0
  SgdArgs h;
  h.momentum = 0.9;
  const Tensor hp = host(values(8, 1, DType::f32), {8});
  Tensor p = device_from(hp, DType::f32), gr = p.clone(), b = p.clone();
  CHECK_THROWS_WITH(g.sgd_step(p, gr, Tensor(), h), Catch::Contains("no momentum buffer"));
  CHECK_THROWS_WITH(g.sgd_step(p, hp, b, h), Catch::Contains("is on cpu"));
  CHECK_THROWS_WITH(g.sgd_step(p, gr.slice(0, 0, 4), b, h), Catch::Contains("has 4 elements"));
  CHECK_THROWS_WITH(g.sgd_step(p, gr, device_from(hp, DType::bf16), h), Catch::Contains("expected float32"));
  h.momentum = 0;
  CHECK_THROWS_WITH(g.sgd_step(p, gr, b, h), Catch::Contains("with a momentum buffer"));

  // Sgd on a shard [13, 1030) of a unit [w (decay) | bias (no decay) | w2 (decay)], on cuda:0 and on
  // the cpu: the momentum buffer lives on the shard's device, every decay segment goes through
  // sgd_step, and the two agree as the entry does.
  const std::vector<FlatParam> layout = {{"w", 0, 600, true}, {"bias", 600, 37, false}, {"w2", 637, 400, true}};
  const int64_t lo = 13, hi = 1030, n = hi - lo;
  const Tensor p0 = host(values(n, 60, DType::f32), {n});
  auto shard = [&](const Device& d) {
    FlatShard s;
    s.name = "unit";
    s.lo = lo, s.hi = hi, s.layout = layout;
    s.param = d.is_cpu() ? p0.clone() : device_from(p0, DType::f32);
    s.grad = d.is_cpu() ? host_empty({n}) : device_empty({n}, DType::f32);
    return s;
  };
  const SgdHyper sh{0.05, 0.9, 0.1, true};
  Sgd on_cpu({shard(Device::cpu())}, sh), on_gpu({shard(Device::cuda(0))}, sh);
  CHECK(on_gpu.momentum_buffer(0).device() == Device::cuda(0));
  for (int step = 1; step <= 3; ++step) {
    const Tensor gr = host(values(n, 60 + static_cast<uint32_t>(step), DType::f32, 0.0, 0.1), {n});
    Tensor(on_cpu.shard(0).grad).copy_(gr);
    Tensor(on_gpu.shard(0).grad).copy_(gr);
    on_cpu.step();
    on_gpu.step();
  }
  CHECK(count_bad(on_gpu.shard(0).param, on_cpu.shard(0).param, DType::f32, 1e-6) == 0);
  CHECK(count_bad(on_gpu.momentum_buffer(0), on_cpu.momentum_buffer(0), DType::f32, 1e-6) == 0);
}

// ---------------------------------------------------------------- rows: softmax, loss, norms

TEST_CASE("cuda backend: softmax, cross_entropy, embedding match the cpu backend", "[cuda_backend_ops]") {
  Backend& g = gpu();
  const struct { int64_t R, N, Vv; } shapes[] = {{1, 1, 1}, {13, 37, 33}, {64, 1000, 1000}, {5, 1024, 1000}};
  for (DType t : kTypes)
    for (const auto& sh : shapes) {
      CAPTURE(dtype_name(t), sh.R, sh.N, sh.Vv);
      const Shape s{sh.R, sh.N};
      const Tensor x = host(values(sh.R * sh.N, 30, t, 0.0, 2.0), s), dout = host(values(sh.R * sh.N, 31, t), s);
      const Tensor gx = device_from(x, t), gdout = device_from(dout, t);
      Tensor ref = host_empty(s), out = device_empty(s, t);
      cpu().softmax(ref, x);
      g.softmax(out, gx);
      CHECK(count_bad(out, ref, t, 1e-5) == 0);
      // the backward from the same (bf16-rounded) forward output on both sides
      const Tensor y = host(out.to_vector(), s);
      Tensor rdx = host_empty(s), dx = device_empty(s, t);
      cpu().softmax_backward(rdx, dout, y);
      g.softmax_backward(dx, gdout, out);
      CHECK(count_bad(dx, rdx, t, 1e-5) == 0);
      // cross-entropy: every third target ignored (-1) when there is more than one row
      std::vector<double> tg(static_cast<size_t>(sh.R));
      int64_t count = 0;
      for (int64_t i = 0; i < sh.R; ++i) {
        tg[i] = (sh.R > 1 && i % 3 == 1) ? -1 : static_cast<double>((i * 7 + 3) % sh.Vv);
        count += tg[i] != -1;
      }
      const Tensor targets = host(tg, {sh.R}).to(DType::i32);
      const Tensor gtargets = targets.to(Device::cuda(0));
      Tensor rloss = host_empty({}), rlse = host_empty({sh.R}), loss = device_empty({}, t), lse = device_empty({sh.R}, DType::f32);
      cpu().cross_entropy(rloss, rlse, x, targets, sh.Vv, count);
      g.cross_entropy(loss, lse, gx, gtargets, sh.Vv, count);
      CHECK(count_bad(loss, rloss, t, 1e-5) == 0);
      CHECK(count_bad(lse, rlse, DType::f32, 1e-5) == 0);
      const Tensor dloss = host({t == DType::bf16 ? bf16_round(0.7) : 0.7}, {});
      Tensor rdl = host_empty(s), dl = device_empty(s, t);
      cpu().cross_entropy_backward(rdl, x, rlse, targets, dloss, sh.Vv, count);
      g.cross_entropy_backward(dl, gx, lse, gtargets, device_from(dloss, t), sh.Vv, count);
      CHECK(count_bad(dl, rdl, t, 1e-5) == 0);
      // vocabulary parallelism's v0 (parallel/vocab_parallel.h): these columns as [v0, v0 + N) of
      // a larger vocabulary, targets shifted by v0 where they fall here and moved past the columns
      // (another rank's) elsewhere: the lse of every row, the loss terms and -1s of its own only
      const int64_t v0 = 1000;
      std::vector<double> tv(tg);
      for (int64_t i = 0; i < sh.R; ++i)
        if (tv[i] != -1) tv[i] = i % 2 ? tv[i] + v0 : v0 + sh.N + i;  // odd rows here, even ones elsewhere
      const Tensor vt = host(tv, {sh.R}).to(DType::i32), gvt = vt.to(Device::cuda(0));
      cpu().cross_entropy(rloss, rlse, x, vt, sh.Vv, count, v0);
      g.cross_entropy(loss, lse, gx, gvt, sh.Vv, count, v0);
      CHECK(count_bad(loss, rloss, t, 1e-5) == 0);
      CHECK(count_bad(lse, rlse, DType::f32, 1e-5) == 0);
      cpu().cross_entropy_backward(rdl, x, rlse, vt, dloss, sh.Vv, count, v0);
      g.cross_entropy_backward(dl, gx, lse, gvt, device_from(dloss, t), sh.Vv, count, v0);
      CHECK(count_bad(dl, rdl, t, 1e-5) == 0);
    }
  for (DType t : kTypes)
    for (int64_t C : {int64_t(1), int64_t(33), int64_t(768)}) {
      CAPTURE(dtype_name(t), C);
      const int64_t V = 50, n = 301;
      std::vector<double> idv(n);
      for (int64_t i = 0; i < n; ++i)
        idv[i] = i % 11 == 5 ? -1.0 : static_cast<double>((i * 13 + i / 7) % V);  // -1: another rank's
      const Tensor ids = host(idv, {n}).to(DType::i32), gids = ids.to(Device::cuda(0));
      const Tensor table = host(values(V * C, 32, t), {V, C});
      Tensor ref = host_empty({n, C}), out = device_empty({n, C}, t);
      cpu().embedding(ref, ids, table);
      g.embedding(out, gids, device_from(table, t));
      CHECK(count_bad(out, ref, t, 0.0) == 0);
      {  // both add the rows in token order in float32; bf16 rounds the sum once (= the reference rounded)
        const Tensor dout = host(values(n * C, 33, t), {n, C});
        Tensor rdt = host(values(V * C, 34, t), {V, C});
        Tensor dt = device_from(rdt, t);
        cpu().embedding_backward(rdt, dout, ids);
        g.embedding_backward(dt, device_from(dout, t), gids);
        CHECK(count_bad(dt, rdt, t, 0.0) == 0);
      }
    }
}

TEST_CASE("cuda backend: layernorm and rmsnorm forward and backward match the cpu backend", "[cuda_backend_ops]") {
  Backend& g = gpu();
  // {1000, 64}: 128 chunks of 7 or 8 rows for dw, db (whole batches of rows and a tail, vector loads)
  const struct { int64_t N, C; } shapes[] = {{1, 1}, {13, 33}, {64, 768}, {1000, 64}};
  for (DType t : kTypes)
    for (const auto& sh : shapes)
      for (bool bias : {true, false}) {
        CAPTURE(dtype_name(t), sh.N, sh.C, bias);
        const Shape s{sh.N, sh.C};
        const Tensor x = host(values(sh.N * sh.C, 40, t, 0.3, 1.5), s), dout = host(values(sh.N * sh.C, 41, t), s);
        const Tensor w = host(values(sh.C, 42, t, 1.0, 0.5), {sh.C}), b = host(values(sh.C, 43, t, 0.0, 0.5), {sh.C});
        const Tensor gx = device_from(x, t), gdout = device_from(dout, t), gw = device_from(w, t), gb = device_from(b, t);
        Tensor rout = host_empty(s), rmean = host_empty({sh.N}), rrstd = host_empty({sh.N});
        Tensor out = device_empty(s, t), mean = device_empty({sh.N}, DType::f32), rstd = device_empty({sh.N}, DType::f32);
        cpu().layernorm(rout, rmean, rrstd, x, w, bias ? b : Tensor(), 1e-5);
        g.layernorm(out, mean, rstd, gx, gw, bias ? gb : Tensor(), 1e-5);
        CHECK(count_bad(out, rout, t, 1e-5) == 0);
        CHECK(count_bad(mean, rmean, DType::f32, 1e-5) == 0);
        CHECK(count_bad(rstd, rrstd, DType::f32, 1e-5) == 0);
        Tensor rdx = host_empty(s), rdw = host_empty({sh.C}), rdb = host_empty({sh.C});
        Tensor dx = device_empty(s, t), dw = device_empty({sh.C}, t), db = device_empty({sh.C}, t);
        // the backward from the same statistics on both sides (the GPU's, read back)
        const Tensor hmean = mean.to(Device::cpu()), hrstd = rstd.to(Device::cpu());
        cpu().layernorm_backward(rdx, rdw, rdb, dout, x, w, hmean, hrstd);
        g.layernorm_backward(dx, dw, db, gdout, gx, gw, mean, rstd);
        CHECK(count_bad(dx, rdx, t, 1e-5) == 0);
        CHECK(count_bad(dw, rdw, t, 2e-5) == 0);
        CHECK(count_bad(db, rdb, t, 2e-5) == 0);
        // dres (the residual stream's gradient joined in the same pass): the bits of dx, then an add
        const Tensor gres = device_from(host(values(sh.N * sh.C, 44, t), s), t);
        Tensor fused = device_empty(s, t), apart = device_empty(s, t);
        g.layernorm_backward(fused, Tensor(), Tensor(), gdout, gx, gw, mean, rstd, gres);
        g.binary(BinaryOp::add, apart, gres, dx);
        CHECK(count_bad(fused, apart.to(Device::cpu()), t, 0.0) == 0);
        // RMSNorm (bias plays no part: run once per shape)
        if (!bias) continue;
        Tensor rrs = host_empty({sh.N}), rs = device_empty({sh.N}, DType::f32);
        cpu().rmsnorm(rout, rrs, x, w, 1e-5);
        g.rmsnorm(out, rs, gx, gw, 1e-5);
        CHECK(count_bad(out, rout, t, 1e-5) == 0);
        CHECK(count_bad(rs, rrs, DType::f32, 1e-5) == 0);
        const Tensor hrs = rs.to(Device::cpu());
        cpu().rmsnorm_backward(rdx, rdw, dout, x, w, hrs);
        g.rmsnorm_backward(dx, dw, gdout, gx, gw, rs);
        // C = 1: dx = g (1 - xhat^2) cancels to ~eps / x^2 of its terms, no relative accuracy to test
        if (sh.C > 1) CHECK(count_bad(dx, rdx, t, 1e-5) == 0);
        CHECK(count_bad(dw, rdw, t, 2e-5) == 0);
        g.rmsnorm_backward(fused, Tensor(), gdout, gx, gw, rs, gres);
        g.binary(BinaryOp::add, apart, gres, dx);
        CHECK(count_bad(fused, apart.to(Device::cpu()), t, 0.0) == 0);
        CHECK_THROWS_WITH(g.rmsnorm_backward(gres, Tensor(), gdout, gx, gw, rs, gres), Catch::Contains("overlaps dx"));
      }
}

TEST_CASE("cuda backend: cross_entropy_and_grad has the bits of cross_entropy then its backward, in place",
          "[cuda_backend_ops]") {
  // Rows staged in shared memory (a bfloat16 row of 16000, a float32 one) and not (128256: past
  // the shared memory; 37: the scalar path), 128-bit packs with a tail (1001, 16001), padded
  // columns, ignored rows, every row ignored, a bfloat16 loss.
  Backend& g = gpu();
  const struct {
    int64_t R, N, Vv;
  } shapes[] = {{1, 1, 1},         {13, 37, 33},      {64, 1000, 1000},   {5, 1024, 1001},
                {7, 16384, 16000}, {7, 16384, 16001}, {3, 131072, 128256}};
  for (DType t : kTypes)
    for (const auto& sh : shapes)
      for (bool all_ignored : {false, true}) {
        CAPTURE(dtype_name(t), sh.R, sh.N, sh.Vv, all_ignored);
        const Shape s{sh.R, sh.N};
        const Tensor x = host(values(sh.R * sh.N, 33, t, 0.0, 3.0), s);
        std::vector<double> tg(static_cast<size_t>(sh.R));
        int64_t count = 0;
        for (int64_t i = 0; i < sh.R; ++i) {
          tg[i] = all_ignored || (sh.R > 1 && i % 4 == 2) ? -1 : static_cast<double>((i * 11 + 5) % sh.Vv);
          count += tg[i] != -1;
        }
        const Tensor targets = host(tg, {sh.R}).to(DType::i32), gt = targets.to(Device::cuda(0));
        // the two entries on the GPU, dloss 1
        const Tensor gx = device_from(x, t);
        Tensor loss = device_empty({}, DType::f32), lse = device_empty({sh.R}, DType::f32), dl = device_empty(s, t);
        g.cross_entropy(loss, lse, gx, gt, sh.Vv, count);
        g.cross_entropy_backward(dl, gx, lse, gt, device_from(host({1.0}, {}), DType::f32), sh.Vv, count);
        // fused, over a copy of the logits
        Tensor fused = device_from(x, t), floss = device_empty({}, DType::f32);
        g.cross_entropy_and_grad(floss, fused, gt, sh.Vv, count);
        CHECK(bitwise_equal(fused, dl));
        CHECK(bitwise_equal(floss, loss));
        // a bfloat16 loss: the float32 mean rounded once
        Tensor bfused = device_from(x, t), bloss = device_empty({}, DType::bf16);
        g.cross_entropy_and_grad(bloss, bfused, gt, sh.Vv, count);
        CHECK(bitwise_equal(bloss, floss.to(DType::bf16)));
        if (count == 0) {
          CHECK(std::isnan(floss.item()));
          continue;
        }
        // and the cpu's fused entry on the same values
        Tensor rfused = x.clone(), rloss = host_empty({});
        cpu().cross_entropy_and_grad(rloss, rfused, targets, sh.Vv, count);
        CHECK(count_bad(floss, rloss, DType::f32, 1e-5) == 0);
        CHECK(count_bad(fused, rfused, t, 1e-5) == 0);
      }
}
