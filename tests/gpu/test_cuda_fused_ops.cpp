// defines: 5 Catch2 test cases tagged [cuda_fused_ops]; helpers: RowShape, host_t, f32_of, same_bits
//
// The fused entries of the table — bias_gelu, bias_gelu_backward, linear_gelu,
// linear_dgelu_backward, residual_layernorm, residual_rmsnorm (core/backend_ops.def) — on cuda:0
// against the cpu backend's, and the fused autograd ops (bias_gelu, gelu_mlp, residual_layernorm,
// residual_rmsnorm) on GPU Vars against the same ops
// on the CPU. Helpers and tolerance rule: tests/gpu/backend_compare.h (GPU outputs poisoned with
// NaN first; |gpu - ref| <= rtol max(|ref|, RMS of ref), plus one bf16 ulp in bfloat16).
//
// References: the cpu entry on host tensors of the same dtype (bfloat16 runs the cpu's float32
// kernels on the exact values and rounds as the row says: bias_gelu's x + b unrounded, the residual
// norms' h rounded before its norm, which is what the GPU kernels do).
// Tolerances: bias_gelu, its dx, the norms' out: 1e-5 (CUDA's expf vs the CPU's polynomial, other
// reduction orders); db (sums over rows): 2e-5; h = x + y: exact; mean, rstd: 1e-5. Within the GPU,
// the residual kernels' h, out, mean, rstd are the bits of the GPU's add then its norm entry.
// Shapes: one element, odd C (the scalar paths), C = 768 (128-bit packs), more rows than one
// bias-gradient chunk (64), and views offset by one element (misaligned: the scalar paths).
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/ops.h"
#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/tensor.h"
#include "cuda/backend.h"
#include "tests/gpu/backend_compare.h"  // gpu, cpu, values, host, device_empty, device_from, count_bad

using namespace zt;
using namespace zt::test;

namespace {

const DType kTypes[] = {DType::f32, DType::bf16};
struct RowShape {
  int64_t R, C;
};
// {1100, 24}: 18 row chunks of the bias gradient, more than one batch of partials summed in order
const RowShape kShapes[] = {{1, 1}, {13, 33}, {64, 768}, {200, 40}, {130, 96}, {1100, 24}};

// A host tensor of dtype t with the values v (exact in t: values() rounds them).
Tensor host_t(const std::vector<double>& v, const Shape& s, DType t) { return host(v, s).to(t); }

// A host float32 copy (what count_bad compares against).
Tensor f32_of(const Tensor& t) { return t.to(Device::cpu()).to(DType::f32); }

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i])) return false;  // NaN never equal: an unwritten element fails
  return true;
}

}  // namespace

TEST_CASE("cuda backend: bias_gelu forward and backward match the cpu backend", "[cuda_fused_ops]") {
  Backend& g = gpu();
  for (DType t : kTypes)
    for (const RowShape& sh : kShapes)
      for (int64_t off : {int64_t(0), int64_t(1)}) {
        CAPTURE(dtype_name(t), sh.R, sh.C, off);
        const Shape s{sh.R, sh.C}, sc{sh.C};
        const Tensor x = host_t(values(sh.R * sh.C, 1, t, 0.2, 1.5), s, t), b = host_t(values(sh.C, 2, t), sc, t);
        const Tensor d = host_t(values(sh.R * sh.C, 3, t), s, t), db0 = host_t(values(sh.C, 4, t), sc, t);
        const Tensor gx = device_from(x, t, off), gb = device_from(b, t, off), gd = device_from(d, t, off);

        Tensor rout = host_empty(s, t), out = device_empty(s, t, off);
        cpu().bias_gelu(rout, x, b);
        g.bias_gelu(out, gx, gb);
        CHECK(count_bad(out, f32_of(rout), t, 1e-5) == 0);

        // dx and db, dx only, db only; db written, then accumulated onto db0
        for (int which = 0; which < 3; ++which)
          for (bool acc : {false, true}) {
            if (which == 1 && acc) continue;  // no db to accumulate into
            CAPTURE(which, acc);
            const bool want_dx = which != 2, want_db = which != 1;
            Tensor rdx = host_empty(s, t), rdb = db0.clone();
            Tensor dx = device_empty(s, t, off), db = device_empty(sc, t, off);
            if (acc) db.copy_(db0);
            cpu().bias_gelu_backward(want_dx ? rdx : Tensor(), want_db ? rdb : Tensor(), d, x, b, acc);
            g.bias_gelu_backward(want_dx ? dx : Tensor(), want_db ? db : Tensor(), gd, gx, gb, acc);
            if (want_dx) CHECK(count_bad(dx, f32_of(rdx), t, 1e-5) == 0);
            if (want_db) CHECK(count_bad(db, f32_of(rdb), t, 2e-5) == 0);
          }
      }
  // argument errors: a cpu tensor, a bias of the wrong length, neither gradient wanted
  const Tensor gx = device_from(host(values(16, 5, DType::f32), {2, 8}), DType::f32);
  const Tensor gb = device_from(host(values(8, 6, DType::f32), {8}), DType::f32);
  CHECK_THROWS_WITH(g.bias_gelu(device_empty({2, 8}, DType::f32), gx, host(values(8, 7, DType::f32), {8})),
                    Catch::Contains("is on cpu"));
  CHECK_THROWS_WITH(g.bias_gelu(device_empty({2, 8}, DType::f32), gx, device_empty({7}, DType::f32)),
                    Catch::Contains("bias_gelu") && Catch::Contains("expected 8"));
  CHECK_THROWS_WITH(g.bias_gelu_backward(Tensor(), Tensor(), gx, gx, gb, false), Catch::Contains("both undefined"));
}

TEST_CASE("cuda backend: residual_layernorm and residual_rmsnorm match the cpu backend", "[cuda_fused_ops]") {
  Backend& g = gpu();
  for (DType t : kTypes)
    for (const RowShape& sh : kShapes)
      for (int64_t off : {int64_t(0), int64_t(1)})
        for (bool bias : {true, false}) {
          CAPTURE(dtype_name(t), sh.R, sh.C, off, bias);
          const Shape s{sh.R, sh.C}, sc{sh.C}, sr{sh.R};
          const Tensor x = host_t(values(sh.R * sh.C, 10, t, 0.3, 1.5), s, t);
          const Tensor y = host_t(values(sh.R * sh.C, 11, t), s, t);
          const Tensor w = host_t(values(sh.C, 12, t, 1.0, 0.5), sc, t), b = host_t(values(sh.C, 13, t, 0.0, 0.5), sc, t);
          const Tensor gx = device_from(x, t, off), gy = device_from(y, t, off), gw = device_from(w, t, off),
                       gbias = device_from(b, t, off);

          Tensor rh = host_empty(s, t), rout = host_empty(s, t), rmean = host_empty(sr), rrstd = host_empty(sr);
          Tensor h = device_empty(s, t, off), out = device_empty(s, t, off);
          Tensor mean = device_empty(sr, DType::f32), rstd = device_empty(sr, DType::f32);
          cpu().residual_layernorm(rh, rout, rmean, rrstd, x, y, w, bias ? b : Tensor(), 1e-5);
          g.residual_layernorm(h, out, mean, rstd, gx, gy, gw, bias ? gbias : Tensor(), 1e-5);
          CHECK(count_bad(h, f32_of(rh), t, 0.0) == 0);
          CHECK(count_bad(out, f32_of(rout), t, 1e-5) == 0);
          CHECK(count_bad(mean, rmean, DType::f32, 1e-5) == 0);
          CHECK(count_bad(rstd, rrstd, DType::f32, 1e-5) == 0);
          {  // the GPU's own add then layernorm: the same bits
            Tensor h2 = device_empty(s, t, off), out2 = device_empty(s, t, off);
            Tensor mean2 = device_empty(sr, DType::f32), rstd2 = device_empty(sr, DType::f32);
            g.binary(BinaryOp::add, h2, gx, gy);
            g.layernorm(out2, mean2, rstd2, h2, gw, bias ? gbias : Tensor(), 1e-5);
            CHECK(same_bits(h, h2));
            CHECK(same_bits(out, out2));
            CHECK(same_bits(mean, mean2));
            CHECK(same_bits(rstd, rstd2));
          }
          if (!bias) continue;  // RMSNorm has no bias: once per shape
          Tensor rrs = host_empty(sr), rs = device_empty(sr, DType::f32);
          cpu().residual_rmsnorm(rh, rout, rrs, x, y, w, 1e-5);
          g.residual_rmsnorm(h, out, rs, gx, gy, gw, 1e-5);
          CHECK(count_bad(h, f32_of(rh), t, 0.0) == 0);
          CHECK(count_bad(out, f32_of(rout), t, 1e-5) == 0);
          CHECK(count_bad(rs, rrs, DType::f32, 1e-5) == 0);
          Tensor h2 = device_empty(s, t, off), out2 = device_empty(s, t, off), rs2 = device_empty(sr, DType::f32);
          g.binary(BinaryOp::add, h2, gx, gy);
          g.rmsnorm(out2, rs2, h2, gw, 1e-5);
          CHECK(same_bits(out, out2));
          CHECK(same_bits(rs, rs2));
        }
  const Tensor gx = device_from(host(values(16, 20, DType::f32), {2, 8}), DType::f32);
  const Tensor gw = device_from(host(values(8, 21, DType::f32), {8}), DType::f32);
  Tensor h = device_empty({2, 8}, DType::f32), out = device_empty({2, 8}, DType::f32);
  Tensor st = device_empty({2}, DType::f32);
  CHECK_THROWS_WITH(g.residual_rmsnorm(h, out, st, gx, device_empty({2, 7}, DType::f32), gw, 1e-5),
                    Catch::Contains("residual_rmsnorm") && Catch::Contains("expected shape"));
}

// GPT-2's MLP entries, linear_gelu with cuBLASLt's GELU_AUX_BIAS epilogue and with the GELU
// kernel after the GEMM (set_gelu_epilogue(false)). Tolerances (count_bad's, relative to the
// reference's magnitude): float32 1e-4 (the GEMMs' other summation orders over K up to 768,
// CUDA's tanh in the epilogue); bfloat16 1e-2 (the epilogue rounds the product before adding the
// bias and computes y from the unrounded pre, the GPU sums db before dpre's rounding and the CPU
// after: a few ulps of 2^-8 at most).
TEST_CASE("cuda backend: linear_gelu (epilogue and kernel) and linear_dgelu_backward match the cpu backend",
          "[cuda_fused_ops]") {
  auto& g = dynamic_cast<CudaBackend&>(gpu());
  struct MlpShape {
    int64_t M, C, H;  // x (M, C), w_fc (H, C); c_proj's w (C, H)
  };
  // H % 8 != 0 (20) runs the GELU kernel even with the epilogue on; 768 x 3072: GPT-2's widths
  const MlpShape shapes[] = {{1, 8, 16}, {37, 24, 96}, {130, 16, 20}, {256, 768, 3072}};
  for (bool epilogue : {true, false})
    for (DType t : kTypes)
      for (const MlpShape& sh : shapes) {
        CAPTURE(epilogue, dtype_name(t), sh.M, sh.C, sh.H);
        g.set_gelu_epilogue(epilogue);
        const double tol = t == DType::f32 ? 1e-4 : 1e-2;
        const Shape sx{sh.M, sh.C}, sh_{sh.M, sh.H};
        const Tensor x = host_t(values(sh.M * sh.C, 60, t), sx, t);
        const Tensor w = host_t(values(sh.H * sh.C, 61, t, 0.0, 0.1), {sh.H, sh.C}, t);
        const Tensor b = host_t(values(sh.H, 62, t), {sh.H}, t);
        const Tensor wp = host_t(values(sh.C * sh.H, 63, t, 0.0, 0.1), {sh.C, sh.H}, t);
        const Tensor dy = host_t(values(sh.M * sh.C, 64, t), sx, t), db0 = host_t(values(sh.H, 65, t), {sh.H}, t);

        Tensor rpre = host_empty(sh_, t), ry = host_empty(sh_, t);
        Tensor pre = device_empty(sh_, t), y = device_empty(sh_, t);
        cpu().linear_gelu(ry, rpre, x, w, b);
        g.linear_gelu(y, pre, device_from(x, t), device_from(w, t), device_from(b, t));
        CHECK(count_bad(pre, f32_of(rpre), t, tol) == 0);
        CHECK(count_bad(y, f32_of(ry), t, tol) == 0);

        // the backward from the cpu's pre on both sides: dpre alone, with db written, with db added
        const Tensor gpre = device_from(rpre, t), gdy = device_from(dy, t), gwp = device_from(wp, t);
        for (int mode = 0; mode < 3; ++mode) {
          CAPTURE(mode);
          const bool want_db = mode > 0, acc = mode == 2;
          Tensor rdpre = host_empty(sh_, t), rdb = db0.clone();
          Tensor dpre = device_empty(sh_, t), db = device_empty({sh.H}, t);
          if (acc) db.copy_(db0);
          cpu().linear_dgelu_backward(rdpre, want_db ? rdb : Tensor(), dy, wp, rpre, acc);
          g.linear_dgelu_backward(dpre, want_db ? db : Tensor(), gdy, gwp, gpre, acc);
          CHECK(count_bad(dpre, f32_of(rdpre), t, tol) == 0);
          if (want_db) CHECK(count_bad(db, f32_of(rdb), t, tol) == 0);
        }
      }
  g.set_gelu_epilogue(true);
}

TEST_CASE("cuda fused autograd ops: gelu_mlp on the GPU matches the CPU - epilogue and kernels", "[cuda_fused_ops]") {
  auto& g = dynamic_cast<CudaBackend&>(gpu());
  const Device dev = Device::cuda(0);
  const int64_t B = 2, T = 33, C = 64, H = 256;
  const Tensor x = host(values(B * T * C, 70, DType::f32), {B, T, C});
  const Tensor w1 = host(values(H * C, 71, DType::f32, 0.0, 0.1), {H, C}), b1 = host(values(H, 72, DType::f32), {H});
  const Tensor w2 = host(values(C * H, 73, DType::f32, 0.0, 0.1), {C, H}), b2 = host(values(C, 74, DType::f32), {C});
  const Tensor gr = host(values(B * T * C, 75, DType::f32), {B, T, C});
  auto run = [&](const Device& d) {
    Var vx(x.to(d), true), v1(w1.to(d), true), vb1(b1.to(d), true), v2(w2.to(d), true), vb2(b2.to(d), true);
    Var out = gelu_mlp(vx, v1, vb1, v2, vb2);
    out.backward(gr.to(d));
    std::vector<Tensor> r;
    for (const Tensor& t : {out.value(), vx.grad(), v1.grad(), vb1.grad(), v2.grad(), vb2.grad()})
      r.push_back(t.to(Device::cpu()));
    return r;
  };
  const auto ref = run(Device::cpu());
  for (bool epilogue : {true, false}) {
    CAPTURE(epilogue);
    g.set_gelu_epilogue(epilogue);
    const auto got = run(dev);
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("output " << i << " (y, dx, dw_fc, db_fc, dw_proj, db_proj)");
      CHECK(count_bad(got[i], ref[i], DType::f32, 1e-4) == 0);
    }
  }
  g.set_gelu_epilogue(true);
}

TEST_CASE("cuda fused autograd ops: values and gradients on the GPU match the CPU", "[cuda_fused_ops]") {
  gpu();
  const Device dev = Device::cuda(0);
  const int64_t B = 3, T = 50, C = 64;
  const Tensor x = host(values(B * T * C, 30, DType::f32), {B, T, C}), y = host(values(B * T * C, 31, DType::f32), {B, T, C});
  const Tensor w = host(values(C, 32, DType::f32, 1.0, 0.3), {C}), b = host(values(C, 33, DType::f32), {C});
  const Tensor gr = host(values(B * T * C, 34, DType::f32), {B, T, C});
  // out = h + bias_gelu(n, b): both fused ops, both outputs of the residual norm read
  auto run = [&](const Device& d, bool layer) {
    Var vx(x.to(d), true), vy(y.to(d), true), vw(w.to(d), true), vb(b.to(d), true);
    auto [h, n] = layer ? residual_layernorm(vx, vy, vw, vb) : residual_rmsnorm(vx, vy, vw);
    Var out = add(h, bias_gelu(n, vb));
    out.backward(gr.to(d));
    return std::vector<Tensor>{out.value().to(Device::cpu()), vx.grad().to(Device::cpu()),
                               vy.grad().to(Device::cpu()), vw.grad().to(Device::cpu()), vb.grad().to(Device::cpu())};
  };
  for (bool layer : {true, false}) {
    CAPTURE(layer);
    const auto ref = run(Device::cpu(), layer), got = run(dev, layer);
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("output " << i << " (out, dx, dy, dw, db)");
      CHECK(count_bad(got[i], ref[i], DType::f32, i < 3 ? 1e-5 : 1e-4) == 0);
    }
  }
}
