// defines: 21 Catch2 test cases tagged [ops], [fused], [determinism], [errors]; helpers: randn32,
//          check_close, broadcast_rows, with_threads, bias_gelu_step, mlp_step, mlp_inputs, residual_norm_step
//
// The fused ops of autograd/ops.h — bias_gelu, gelu_mlp, residual_layernorm, residual_rmsnorm,
// swiglu_packed, rope_packed: float64
// gradient checks, float32 values and gradients against the unfused ops they replace
// (gelu(add(x, b broadcast)); add then layernorm / rmsnorm), the same bits for 1 and 2 threads,
// bfloat16 on the cpu, the bias gradient accumulated into a parameter's buffer, and input errors
// naming the op and the argument.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "autograd/ops.h"
#include "core/parallel.h"
#include "tests/bitwise.h"
#include "tests/gradcheck.h"

using namespace zt;
using zt::test::bitwise_equal;
using zt::test::gradcheck;
using zt::test::randn;

namespace {

Tensor randn32(const Shape& s, uint64_t seed, double std = 1.0) { return randn(s, seed, std, DType::f32); }

// |got - want| <= atol + rtol |want| elementwise, the first failure reported.
void check_close(const Tensor& got, const Tensor& want, double atol, double rtol) {
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << " want " << w[i]);
    REQUIRE(std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]));
  }
}

// b (C) broadcast to (R, C) through ops that are exact in the forward: ones (R, 1) @ b (1, C).
// Its backward sums the rows of the gradient (a GEMM: another order than bias_gelu's).
Var broadcast_rows(const Var& b, int64_t R) {
  const int64_t C = b.size(0);
  Var ones(Tensor::full({R, 1}, 1.0, b.dtype()));
  return matmul(ones, reshape(b, {1, C}));
}

// Runs f with `threads` OpenMP threads (and OpenBLAS's), restoring the count after.
template <class F>
auto with_threads(int threads, F&& f) {
  const int prev = num_threads();
  set_num_threads(threads);
  auto r = f();
  set_num_threads(prev);
  return r;
}

// A bias_gelu step in float32: {out, dx, db}, the loss weighted by g.
std::vector<Tensor> bias_gelu_step(const Tensor& x, const Tensor& b, const Tensor& g, bool fused) {
  Var vx(x.clone(), true), vb(b.clone(), true);
  const int64_t C = x.size(-1), R = x.numel() / C;
  Var y = fused ? bias_gelu(vx, vb)
                : gelu(add(vx, reshape(broadcast_rows(vb, R), x.shape())));
  y.backward(g);
  return {y.value().clone(), vx.grad().clone(), vb.grad().clone()};
}

// A residual + norm step in float32 through a small graph that reads both outputs (as a block
// does: out = h + f(n)): {h, n, out, dx, dy, dw, db (layernorm with bias only)}.
std::vector<Tensor> residual_norm_step(bool layer, bool fused, bool with_bias, const Tensor& x, const Tensor& y,
                                       const Tensor& w, const Tensor& b, const Tensor& g) {
  Var vx(x.clone(), true), vy(y.clone(), true), vw(w.clone(), true), vb(b.clone(), true);
  Var bias = with_bias ? vb : Var();
  Var h, n;
  if (fused) {
    auto hn = layer ? residual_layernorm(vx, vy, vw, bias, 1e-5) : residual_rmsnorm(vx, vy, vw, 1e-5);
    h = hn.first, n = hn.second;
  } else {
    h = add(vx, vy);
    n = layer ? layernorm(h, vw, bias, 1e-5) : rmsnorm(h, vw, 1e-5);
  }
  Var out = add(h, mul(n, silu(n)));
  out.backward(g);
  std::vector<Tensor> r{h.value().clone(), n.value().clone(), out.value().clone(), vx.grad().clone(),
                        vy.grad().clone(), vw.grad().clone()};
  if (layer && with_bias) r.push_back(vb.grad().clone());
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// bias + GELU

TEST_CASE("bias_gelu: float64 gradients", "[ops][fused]") {
  gradcheck([](const std::vector<Var>& v) { return bias_gelu(v[0], v[1]); }, {randn({2, 3, 7}, 1, 1.5), randn({7}, 2)});
  gradcheck([](const std::vector<Var>& v) { return bias_gelu(v[0], v[1]); }, {randn({70, 3}, 3), randn({3}, 4)});
  // one input differentiated at a time (the other's gradient is not computed)
  gradcheck([](const std::vector<Var>& v) { return bias_gelu(v[0], v[1]); }, {randn({4, 5}, 5), randn({5}, 6)},
            {true, false});
  gradcheck([](const std::vector<Var>& v) { return bias_gelu(v[0], v[1]); }, {randn({4, 5}, 7), randn({5}, 8)},
            {false, true});
}

TEST_CASE("bias_gelu: float32 values and gradients match gelu(x + b) - 1 and 2 threads give the same bits",
          "[ops][fused][determinism]") {
  // 300 rows of 200 columns: threads split the rows (forward) and 4 strips of columns (backward)
  const Tensor x = randn32({3, 100, 200}, 11, 2.0), b = randn32({200}, 12), g = randn32({3, 100, 200}, 13);
  const auto fused1 = with_threads(1, [&] { return bias_gelu_step(x, b, g, true); });
  const auto fused2 = with_threads(2, [&] { return bias_gelu_step(x, b, g, true); });
  const auto ref = with_threads(2, [&] { return bias_gelu_step(x, b, g, false); });
  for (size_t i = 0; i < fused1.size(); ++i) {
    INFO("output " << i << " (out, dx, db)");
    CHECK(bitwise_equal(fused1[i], fused2[i]));
  }
  // out and dx: gelu's arithmetic on the same x + b, element by element: the same bits
  CHECK(bitwise_equal(fused2[0], ref[0]));
  CHECK(bitwise_equal(fused2[1], ref[1]));
  check_close(fused2[2], ref[2], 1e-4, 1e-5);  // db: sums of 300 rows, the reference's GEMM order
}

TEST_CASE("bias_gelu: the bits of GeluMLP's former gelu(linear with bias) - db in linear's column-sum order",
          "[ops][fused][determinism]") {
  // linear(x, I, b) is x + b exactly (products by 1 and 0), and its backward's dx (dy I) and db
  // (col_sum: 64-column strips, rows in order) are exact images of dy: the unfused MLP's path.
  const int64_t R = 150, C = 130;
  const Tensor x = randn32({R, C}, 14, 2.0), b = randn32({C}, 15), g = randn32({R, C}, 16);
  std::vector<double> eye(C * C, 0.0);
  for (int64_t i = 0; i < C; ++i) eye[i * C + i] = 1.0;
  Var vx(x.clone(), true), vb(b.clone(), true), I(Tensor::from_vector(eye, {C, C}, DType::f32));
  Var y = gelu(linear(vx, I, vb));
  y.backward(g);
  const auto fused = bias_gelu_step(x, b, g, true);
  CHECK(bitwise_equal(fused[0], y.value()));
  CHECK(bitwise_equal(fused[1], vx.grad()));
  CHECK(bitwise_equal(fused[2], vb.grad()));
}

TEST_CASE("bias_gelu: the bias gradient adds into a parameter's gradient buffer", "[ops][fused]") {
  // A parameter's gradient is pre-bound (a view into its unit's flat buffer): bias_gelu's backward
  // adds db into it in place, as linear's does, and the result is what add_grad would give.
  const Tensor x = randn32({6, 9}, 21), b = randn32({9}, 22), g = randn32({6, 9}, 23);
  Tensor buf = randn32({9}, 24);
  const Tensor before = buf.clone();
  Var pb = Var::parameter(b.clone(), buf);
  bias_gelu(Var(x), pb).backward(g);
  CHECK(pb.grad().raw() == buf.raw());  // the same buffer, updated in place
  const auto ref = bias_gelu_step(x, b, g, true);
  std::vector<double> want = before.to_vector(), db = ref[2].to_vector();
  for (size_t i = 0; i < want.size(); ++i) want[i] += db[i];
  check_close(buf, Tensor::from_vector(want, {9}, DType::f32), 1e-6, 1e-6);
}

TEST_CASE("bias_gelu: bfloat16 on the cpu is the float32 op rounded once", "[ops][fused]") {
  const Tensor x = randn32({5, 24}, 31, 2.0).to(DType::bf16), b = randn32({24}, 32).to(DType::bf16);
  const Tensor g = randn32({5, 24}, 33).to(DType::bf16);
  Var vx(x, true), vb(b, true);
  Var y = bias_gelu(vx, vb);
  REQUIRE(y.dtype() == DType::bf16);
  y.backward(g);
  // the reference: the float32 op on the same (exact) values, rounded to bfloat16
  const auto ref = bias_gelu_step(x.to(DType::f32), b.to(DType::f32), g.to(DType::f32), true);
  CHECK(bitwise_equal(y.value(), ref[0].to(DType::bf16)));
  CHECK(bitwise_equal(vx.grad(), ref[1].to(DType::bf16)));
  CHECK(bitwise_equal(vb.grad(), ref[2].to(DType::bf16)));
}

TEST_CASE("bias_gelu: shape and dtype errors name the op and the argument", "[ops][fused][errors]") {
  Var x(randn32({2, 8}, 41)), b(randn32({8}, 42));
  CHECK_THROWS_WITH(bias_gelu(x, Var(randn32({7}, 43))),
                    Catch::Contains("bias_gelu: b: expected shape (8,)") && Catch::Contains("got (7,)"));
  CHECK_THROWS_WITH(bias_gelu(x, Var(randn32({1, 8}, 44))), Catch::Contains("bias_gelu: b: expected shape (8,)"));
  CHECK_THROWS_WITH(bias_gelu(x, Var(randn({8}, 45))), Catch::Contains("bias_gelu: b: expected float32"));
  CHECK_THROWS_WITH(bias_gelu(x, Var()), Catch::Contains("bias_gelu: b is undefined"));
  CHECK_THROWS_WITH(bias_gelu(Var(randn32({}, 46)), Var(randn32({1}, 47))), Catch::Contains("bias_gelu: x must be"));
  CHECK_THROWS_WITH(bias_gelu(Var(Tensor::zeros({2, 8}, DType::i32)), b),
                    Catch::Contains("bias_gelu: x: expected a float32, float64 or bfloat16"));
}

// ---------------------------------------------------------------------------------------------
// gelu_mlp: GPT-2's MLP as one op

namespace {

// A GPT-2 MLP step in float32, as gelu_mlp or as the three ops it replaces (linear, gelu, linear):
// {y, dx, dw_fc, db_fc, dw_proj, db_proj}, the loss weighted by g.
std::vector<Tensor> mlp_step(const std::vector<Tensor>& t, const Tensor& g, bool fused) {
  Var x(t[0].clone(), true), w1(t[1].clone(), true), b1(t[2].clone(), true), w2(t[3].clone(), true),
      b2(t[4].clone(), true);
  Var y = fused ? gelu_mlp(x, w1, b1, w2, b2) : linear(gelu(linear(x, w1, b1)), w2, b2);
  y.backward(g);
  return {y.value().clone(), x.grad().clone(),  w1.grad().clone(),
          b1.grad().clone(), w2.grad().clone(), b2.grad().clone()};
}

// x (2, 5, C), w_fc (H, C), b_fc (H), w_proj (out, H), b_proj (out) in dtype t
std::vector<Tensor> mlp_inputs(int64_t C, int64_t H, int64_t out, uint64_t seed, DType t = DType::f64) {
  return {randn({2, 5, C}, seed, 1.0, t), randn({H, C}, seed + 1, 0.5, t), randn({H}, seed + 2, 0.5, t),
          randn({out, H}, seed + 3, 0.5, t), randn({out}, seed + 4, 0.5, t)};
}

}  // namespace

TEST_CASE("gelu_mlp: float64 gradients - with and without c_proj's bias, one input at a time", "[ops][fused]") {
  auto mlp = [](const std::vector<Var>& v) { return gelu_mlp(v[0], v[1], v[2], v[3], v[4]); };
  gradcheck(mlp, mlp_inputs(6, 16, 6, 1));
  gradcheck(mlp, mlp_inputs(3, 5, 4, 7));  // odd widths, out != C
  auto no_b2 = [](const std::vector<Var>& v) { return gelu_mlp(v[0], v[1], v[2], v[3], Var()); };
  auto in = mlp_inputs(4, 8, 4, 13);
  in.pop_back();
  gradcheck(no_b2, in);
  for (int only = 0; only < 5; ++only) {
    CAPTURE(only);
    std::vector<bool> wanted(5, false);
    wanted[only] = true;
    gradcheck(mlp, mlp_inputs(4, 8, 4, 20 + 5 * only), wanted);
  }
}

TEST_CASE("gelu_mlp: float32 on the cpu gives the bits of linear, gelu, linear", "[ops][fused][determinism]") {
  // The cpu's linear_gelu is the linear then the gelu entry, and linear_dgelu_backward the dX GEMM,
  // gelu_backward and linear's column sums: the unfused graph's arithmetic in its order.
  const auto t = mlp_inputs(48, 192, 48, 40, DType::f32);
  const Tensor g = randn32({2, 5, 48}, 45);
  const auto fused = mlp_step(t, g, true), ref = mlp_step(t, g, false);
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("output " << i << " (y, dx, dw_fc, db_fc, dw_proj, db_proj)");
    CHECK(bitwise_equal(fused[i], ref[i]));
  }
}

TEST_CASE("gelu_mlp: bias gradients add into the parameters' gradient buffers", "[ops][fused]") {
  const auto t = mlp_inputs(8, 32, 8, 50, DType::f32);
  const Tensor g = randn32({2, 5, 8}, 55);
  Tensor buf1 = randn32({32}, 56), buf2 = randn32({8}, 57);
  const Tensor before1 = buf1.clone(), before2 = buf2.clone();
  Var b1 = Var::parameter(t[2].clone(), buf1), b2 = Var::parameter(t[4].clone(), buf2);
  gelu_mlp(Var(t[0]), Var(t[1], true), b1, Var(t[3], true), b2).backward(g);
  CHECK(b1.grad().raw() == buf1.raw());  // the same buffers, updated in place
  CHECK(b2.grad().raw() == buf2.raw());
  const auto ref = mlp_step(t, g, false);
  for (auto [buf, before, grad] : {std::tuple{&buf1, &before1, ref[3]}, {&buf2, &before2, ref[5]}}) {
    std::vector<double> want = before->to_vector(), d = grad.to_vector();
    for (size_t i = 0; i < want.size(); ++i) want[i] += d[i];
    check_close(*buf, Tensor::from_vector(want, buf->shape(), DType::f32), 1e-6, 1e-6);
  }
}

TEST_CASE("gelu_mlp: bfloat16 on the cpu stays within bfloat16's rounding of the float32 op", "[ops][fused]") {
  const auto t32 = mlp_inputs(16, 64, 16, 60, DType::f32);
  const Tensor g32 = randn32({2, 5, 16}, 65);
  std::vector<Tensor> t16;
  for (const Tensor& v : t32) t16.push_back(v.to(DType::bf16));
  const Tensor g16 = g32.to(DType::bf16);
  const auto got = mlp_step(t16, g16, true);
  std::vector<Tensor> exact;  // the float32 op on the same (bfloat16-exact) values
  for (const Tensor& v : t16) exact.push_back(v.to(DType::f32));
  const auto ref = mlp_step(exact, g16.to(DType::f32), true);
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("output " << i << " (y, dx, dw_fc, db_fc, dw_proj, db_proj)");
    REQUIRE(got[i].dtype() == DType::bf16);
    // each stage rounds to bfloat16 (2^-9 relative); a few stages and sums of 10-64 terms
    const std::vector<double> a = got[i].to_vector(), b = ref[i].to_vector();
    double scale = 0;
    for (double v : b) scale = std::max(scale, std::abs(v));
    for (size_t k = 0; k < a.size(); ++k) {
      INFO("element " << k << ": got " << a[k] << " want " << b[k]);
      REQUIRE(std::abs(a[k] - b[k]) <= 2e-2 * scale);
    }
  }
}

TEST_CASE("gelu_mlp: shape and dtype errors name the op and the argument", "[ops][fused][errors]") {
  const auto t = mlp_inputs(8, 32, 8, 70, DType::f32);
  Var x(t[0]), w1(t[1]), b1(t[2]), w2(t[3]), b2(t[4]);
  CHECK_THROWS_WITH(gelu_mlp(x, w1, Var(randn32({31}, 71)), w2, b2),
                    Catch::Contains("gelu_mlp: for x (..., 8) expected w_fc (H, 8), b_fc (H)"));
  CHECK_THROWS_WITH(gelu_mlp(x, w1, b1, Var(randn32({8, 31}, 72)), b2), Catch::Contains("w_proj (8, 31)"));
  CHECK_THROWS_WITH(gelu_mlp(x, w1, b1, w2, Var(randn32({7}, 73))),
                    Catch::Contains("gelu_mlp: b_proj must have shape (8,), got (7,)"));
  CHECK_THROWS_WITH(gelu_mlp(x, w1, Var(randn({32}, 74)), w2, b2), Catch::Contains("gelu_mlp: b_fc: expected float32"));
  CHECK_THROWS_WITH(gelu_mlp(x, w1, Var(), w2, b2), Catch::Contains("gelu_mlp: b_fc is undefined"));
  CHECK_THROWS_WITH(gelu_mlp(Var(randn32({}, 75)), w1, b1, w2, b2), Catch::Contains("gelu_mlp: x must be"));
}

// ---------------------------------------------------------------------------------------------
// residual + LayerNorm / RMSNorm

TEST_CASE("residual_layernorm: float64 gradients of h and n - with and without bias", "[ops][fused]") {
  // n alone (h's gradient only from the norm), h alone, and both read by one expression
  gradcheck([](const std::vector<Var>& v) { return residual_layernorm(v[0], v[1], v[2], v[3]).second; },
            {randn({2, 3, 7}, 51), randn({2, 3, 7}, 52), randn({7}, 53), randn({7}, 54)});
  gradcheck([](const std::vector<Var>& v) { return residual_layernorm(v[0], v[1], v[2], v[3]).first; },
            {randn({3, 5}, 55), randn({3, 5}, 56), randn({5}, 57), randn({5}, 58)}, {true, true, false, false});
  gradcheck(
      [](const std::vector<Var>& v) {
        auto [h, n] = residual_layernorm(v[0], v[1], v[2], Var(), 1e-3);
        return add(h, mul(n, h));
      },
      {randn({4, 6}, 59), randn({4, 6}, 60), randn({6}, 61)});
  // y only (x a constant), the norm's parameters not differentiated
  gradcheck([](const std::vector<Var>& v) { return residual_layernorm(v[0], v[1], v[2], v[3]).second; },
            {randn({3, 6}, 62), randn({3, 6}, 63), randn({6}, 64), randn({6}, 65)}, {false, true, false, false});
}

TEST_CASE("residual_rmsnorm: float64 gradients of h and n", "[ops][fused]") {
  gradcheck([](const std::vector<Var>& v) { return residual_rmsnorm(v[0], v[1], v[2]).second; },
            {randn({2, 3, 9}, 71), randn({2, 3, 9}, 72), randn({9}, 73)});
  gradcheck(
      [](const std::vector<Var>& v) {
        auto [h, n] = residual_rmsnorm(v[0], v[1], v[2], 0.5);
        return add(h, mul(n, h));
      },
      {randn({20, 3}, 74), randn({20, 3}, 75), randn({3}, 76)});
  gradcheck([](const std::vector<Var>& v) { return residual_rmsnorm(v[0], v[1], v[2]).second; },
            {randn({3, 4}, 77), randn({3, 4}, 78), randn({4}, 79)}, {true, false, true});
}

TEST_CASE("residual norms: float32 values and gradients are those of add then the norm - 1 and 2 threads agree",
          "[ops][fused][determinism]") {
  // The fused kernels run the unfused row code on the h they just wrote, and the autograd graph
  // has the unfused shape (h from {x, y}, n from {h, w, b}): every output is the same bits.
  const Tensor x = randn32({4, 75, 96}, 81, 2.0), y = randn32({4, 75, 96}, 82), g = randn32({4, 75, 96}, 83);
  const Tensor w = randn32({96}, 84, 0.5), b = randn32({96}, 85, 0.5);
  for (bool layer : {true, false})
    for (bool with_bias : {true, false}) {
      if (!layer && with_bias) continue;
      CAPTURE(layer, with_bias);
      const auto fused1 = with_threads(1, [&] { return residual_norm_step(layer, true, with_bias, x, y, w, b, g); });
      const auto fused2 = with_threads(2, [&] { return residual_norm_step(layer, true, with_bias, x, y, w, b, g); });
      const auto ref = with_threads(2, [&] { return residual_norm_step(layer, false, with_bias, x, y, w, b, g); });
      REQUIRE(fused1.size() == ref.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        INFO("output " << i << " (h, n, out, dx, dy, dw, db)");
        CHECK(bitwise_equal(fused1[i], fused2[i]));
        CHECK(bitwise_equal(fused2[i], ref[i]));
      }
    }
}

TEST_CASE("residual norms: bfloat16 on the cpu normalizes the rounded h", "[ops][fused]") {
  const Tensor x = randn32({6, 40}, 91, 2.0).to(DType::bf16), y = randn32({6, 40}, 92).to(DType::bf16);
  const Tensor w = randn32({40}, 93).to(DType::bf16), b = randn32({40}, 94).to(DType::bf16);
  {
    auto [h, n] = residual_layernorm(Var(x), Var(y), Var(w), Var(b));
    const Var hr = add(Var(x), Var(y));
    CHECK(bitwise_equal(h.value(), hr.value()));
    CHECK(bitwise_equal(n.value(), layernorm(hr, Var(w), Var(b)).value()));
  }
  {
    auto [h, n] = residual_rmsnorm(Var(x), Var(y), Var(w));
    const Var hr = add(Var(x), Var(y));
    CHECK(bitwise_equal(h.value(), hr.value()));
    CHECK(bitwise_equal(n.value(), rmsnorm(hr, Var(w)).value()));
  }
}

TEST_CASE("residual norms: shape and dtype errors name the op and the argument", "[ops][fused][errors]") {
  Var x(randn32({2, 8}, 101)), y(randn32({2, 8}, 102)), w(randn32({8}, 103)), b(randn32({8}, 104));
  CHECK_THROWS_WITH(residual_layernorm(x, Var(randn32({2, 7}, 105)), w, b),
                    Catch::Contains("residual_layernorm: y: expected the shape of x (2, 8), got (2, 7)"));
  CHECK_THROWS_WITH(residual_layernorm(x, Var(randn32({8, 2}, 106)), w, b),
                    Catch::Contains("residual_layernorm: y: expected the shape of x"));
  CHECK_THROWS_WITH(residual_layernorm(x, y, Var(randn32({7}, 107)), b),
                    Catch::Contains("residual_layernorm: weight: expected shape (8,)") && Catch::Contains("got (7,)"));
  CHECK_THROWS_WITH(residual_layernorm(x, y, w, Var(randn32({2, 8}, 108))),
                    Catch::Contains("residual_layernorm: bias: expected shape (8,)"));
  CHECK_THROWS_WITH(residual_layernorm(x, Var(randn({2, 8}, 109)), w, b),
                    Catch::Contains("residual_layernorm: y: expected float32"));
  CHECK_THROWS_WITH(residual_layernorm(x, Var(), w, b), Catch::Contains("residual_layernorm: y is undefined"));
  CHECK_THROWS_WITH(residual_layernorm(x, y, w, b, -1.0), Catch::Contains("residual_layernorm: eps must be >= 0"));
  CHECK_THROWS_WITH(residual_rmsnorm(x, Var(randn32({3, 8}, 110)), w),
                    Catch::Contains("residual_rmsnorm: y: expected the shape of x (2, 8), got (3, 8)"));
  CHECK_THROWS_WITH(residual_rmsnorm(x, y, Var(randn32({9}, 111))),
                    Catch::Contains("residual_rmsnorm: weight: expected shape (8,)") && Catch::Contains("got (9,)"));
  CHECK_THROWS_WITH(residual_rmsnorm(x, y, Var()), Catch::Contains("residual_rmsnorm: weight is undefined"));
  CHECK_THROWS_WITH(residual_rmsnorm(Var(randn32({}, 112)), Var(randn32({}, 113)), w),
                    Catch::Contains("residual_rmsnorm: x: expected at least 1 dimension"));
}

// ---- the residual stream's gradient joining a norm's: one pass, the bits of two ----

TEST_CASE("norms: x read by a norm and another op - its gradient is the two contributions added apart, bitwise",
          "[ops][fused][determinism]") {
  // x (an intermediate, as the residual stream is) feeds a norm and a second op; the norm's
  // backward adds x's gradient so far into its own dx in the same pass (Var::grad_to_fold,
  // Backend::layernorm_backward's dres). The reference: each contribution from its own graph,
  // then one add — what the gradient was before the fold.
  for (DType dt : {DType::f32, DType::bf16})
    for (bool layer : {true, false}) {
      CAPTURE(dtype_name(dt), layer);
      const Tensor x0 = randn32({5, 48}, 121, 2.0).to(dt), w0 = randn32({48}, 122).to(dt);
      const Tensor b0 = randn32({48}, 123).to(dt), c0 = randn32({5, 48}, 124).to(dt);
      const Tensor g1 = randn32({5, 48}, 125).to(dt), g2 = randn32({5, 48}, 126).to(dt);
      const auto norm = [&](const Var& x) { return layer ? layernorm(x, Var(w0), Var(b0)) : rmsnorm(x, Var(w0)); };
      Var xa(x0, true), xb(x0, true);
      norm(xa).backward(g1);
      mul(xb, Var(c0)).backward(g2);
      Tensor want = Tensor::empty(x0.shape(), dt);
      backend(Device::cpu()).binary(BinaryOp::add, want, xa.grad(), xb.grad());
      for (bool norm_first : {true, false}) {
        CAPTURE(norm_first);
        Var leaf(x0, true);
        const Var x = mul(leaf, Var(Tensor::full(x0.shape(), 1.0, dt)));  // x * 1: an intermediate, the same bits
        const Var a = sum(mul(norm(x), Var(g1))), b = sum(mul(mul(x, Var(c0)), Var(g2)));
        add(norm_first ? b : a, norm_first ? a : b).backward();
        CHECK(bitwise_equal(leaf.grad(), want));
      }
    }
  // the backend entry's own check: dres needs dx
  const Tensor x = randn32({3, 8}, 127), w = randn32({8}, 128), g = randn32({3, 8}, 129);
  Tensor rstd = Tensor::empty({3}), out = Tensor::empty({3, 8});
  Backend& be = backend(Device::cpu());
  be.rmsnorm(out, rstd, x, w, 1e-5);
  CHECK_THROWS_WITH(be.rmsnorm_backward(Tensor(), Tensor::empty({8}), g, x, w, rstd, g),
                    Catch::Contains("rmsnorm_backward: dres") && Catch::Contains("needs dx"));
}

// ---- the packed projections of Llama: swiglu_packed, rope_packed ----

TEST_CASE("swiglu_packed: float64 gradients", "[ops][fused]") {
  gradcheck([](const std::vector<Var>& v) { return swiglu_packed(v[0]); }, {randn({2, 3, 8}, 71, 2.0)});
  gradcheck([](const std::vector<Var>& v) { return swiglu_packed(v[0]); }, {randn({5, 2}, 72, 2.0)});
}

TEST_CASE("swiglu_packed: the bits of swiglu on the two halves - values and the packed gradient",
          "[ops][fused][determinism]") {
  const int64_t N = 6, F = 40;
  const Tensor gu0 = randn32({N, 2 * F}, 73, 2.0), dy = randn32({N, F}, 74);
  Var gu(gu0.clone(), true);
  Var y = swiglu_packed(gu);
  y.backward(dy);
  Var gate(gu0.slice(1, 0, F).contiguous(), true), up(gu0.slice(1, F, 2 * F).contiguous(), true);
  Var y2 = swiglu(gate, up);
  y2.backward(dy);
  CHECK(bitwise_equal(y.value(), y2.value()));
  CHECK(bitwise_equal(gu.grad().slice(1, 0, F).contiguous(), gate.grad()));
  CHECK(bitwise_equal(gu.grad().slice(1, F, 2 * F).contiguous(), up.grad()));
  CHECK_THROWS_WITH(swiglu_packed(Var(randn32({3, 5}, 75))),
                    Catch::Contains("swiglu_packed: gu: expected shape (..., 2F)"));
}

TEST_CASE("rope_packed: float64 gradients - q and k rotate, v passes", "[ops][fused]") {
  // B 2, T 5, Hq 4, Hkv 2, D 6: (2, 5, (4 + 2 * 2) * 6)
  gradcheck([](const std::vector<Var>& v) { return rope_packed(v[0], 4, 2, 50.0); }, {randn({2, 5, 48}, 76)});
  gradcheck([](const std::vector<Var>& v) { return rope_packed(v[0], 2, 2, 7.0); }, {randn({1, 3, 12}, 77)});
}

TEST_CASE("rope_packed: the bits of rope on q and k apart, v unchanged", "[ops][fused][determinism]") {
  const int64_t B = 2, T = 7, Hq = 6, Hkv = 2, D = 8, C = Hq * D, kv = Hkv * D;
  const Tensor qkv = randn32({B, T, C + 2 * kv}, 78);
  const Tensor out = rope_packed(Var(qkv), Hq, Hkv, 500000.0).value();
  const auto block = [&](const Tensor& t, int64_t c0, int64_t w, int64_t H) {
    return t.slice(2, c0, c0 + w).contiguous().view({B, T, H, D});
  };
  CHECK(bitwise_equal(block(out, 0, C, Hq), rope(Var(block(qkv, 0, C, Hq)), 500000.0).value()));
  CHECK(bitwise_equal(block(out, C, kv, Hkv), rope(Var(block(qkv, C, kv, Hkv)), 500000.0).value()));
  CHECK(bitwise_equal(block(out, C + kv, kv, Hkv), block(qkv, C + kv, kv, Hkv)));
  CHECK_THROWS_WITH(rope_packed(Var(qkv), 5, 2), Catch::Contains("rope_packed: qkv"));
}
