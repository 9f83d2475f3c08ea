// defines: 5 Catch2 test cases tagged [autograd], [nn]; helpers: times, plus, vec
//
// autograd: the engine (topological order, accumulation, freeing), no_grad, leaf groups,
// checkpointing, and ParamSet's flat buffers. Uses hand-written GradFns only, so it tests the
// engine independently of the ops.
#include <catch2/catch.hpp>

#include "autograd/recompute.h"
#include "core/kernels/accumulate.h"
#include "nn/param_set.h"

using namespace zt;

namespace {
// y = a * x (elementwise with a scalar constant), a tiny op built on Var::make.
Var times(const Var& x, double a) {
  Tensor out = x.value().clone(Category::activations);
  for (double* p = out.data<double>(); p != out.data<double>() + out.numel(); ++p) *p *= a;
  return Var::make(out, {x}, [a](std::vector<Var>& in, const Tensor& g) {
    Tensor gx = g.clone(Category::activations);
    for (double* p = gx.data<double>(); p != gx.data<double>() + gx.numel(); ++p) *p *= a;
    in[0].add_grad(gx);
  }, "times");
}
// y = x0 + x1
Var plus(const Var& x0, const Var& x1) {
  Tensor out = x0.value().clone(Category::activations);
  accumulate_(out, x1.value());
  return Var::make(out, {x0, x1}, [](std::vector<Var>& in, const Tensor& g) {
    in[0].add_grad(g);  // the same tensor passed to both: add_grad must not alias-corrupt it
    in[1].add_grad(g);
  }, "plus");
}
Tensor vec(std::vector<double> v) { return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::f64); }
}  // namespace

TEST_CASE("backward accumulates over a diamond and shared inputs", "[autograd]") {
  Var x(vec({1, 2, 3}), true);
  // y = 2x + 3x, z = y + x  => dz/dx = 6
  Var y = plus(times(x, 2), times(x, 3));
  Var z = plus(y, x);
  z.backward(vec({1, 1, 1}));
  CHECK(x.grad().to_vector() == std::vector<double>{6, 6, 6});
  // z = x + x => dz/dx = 2, with the same gradient tensor handed to both inputs
  Var w(vec({5}), true);
  plus(w, w).backward(vec({1}));
  CHECK(w.grad().to_vector() == std::vector<double>{2});
}

TEST_CASE("no_grad records nothing", "[autograd]") {
  Var x(vec({1}), true);
  Var y;
  {
    NoGradGuard ng;
    y = times(x, 2);
  }
  CHECK_FALSE(y.requires_grad());
  CHECK_THROWS_WITH(y.backward(vec({1})), Catch::Contains("does not require grad"));
}

TEST_CASE("parameters accumulate into the flat gradient buffer", "[autograd][nn]") {
  ParamSet ps("unit", DType::f64);
  int a = ps.add("a.weight", {2, 2}, true);
  int b = ps.add("a.bias", {3}, false);
  ps.finalize(/*world_size=*/4, /*alignment=*/2);
  CHECK(ps.numel() == 7);
  CHECK(ps.padded_numel() == 8);  // multiple of 4 * 2
  CHECK(ps.infos()[b].offset == 4);
  ps.value(a).fill_(1.0);
  ps.value(b).fill_(2.0);
  CHECK(ps.flat().to_vector() == std::vector<double>{1, 1, 1, 1, 2, 2, 2, 0});
  // Two micro-steps: gradients add up in flat_grad until zero_grad.
  for (int step = 0; step < 2; ++step) times(ps.var(b), 3).backward(vec({1, 1, 1}));
  CHECK(ps.flat_grad().to_vector() == std::vector<double>{0, 0, 0, 0, 6, 6, 6, 0});
  // Row views of a parameter write their gradient into the right rows.
  times(ps.var_rows(a, 1, 1), 5).backward(Tensor::from_vector({1, 1}, {1, 2}, DType::f64));
  CHECK(ps.flat_grad().to_vector() == std::vector<double>{0, 0, 5, 5, 6, 6, 6, 0});
  ps.zero_grad();
  CHECK(ps.flat_grad().to_vector() == std::vector<double>(8, 0.0));
}

TEST_CASE("a span of consecutive parameters is one leaf over both flat buffers", "[autograd][nn]") {
  ParamSet ps("unit", DType::f64);
  const int q = ps.add("q.weight", {2, 3}, true), k = ps.add("k.weight", {1, 3}, true);
  const int n = ps.add("norm.weight", {3}, false), w = ps.add("w.weight", {2, 2}, true);
  ps.finalize();
  for (int64_t i = 0; i < ps.numel(); ++i) ps.flat().flat_view(i, {1}).fill_(static_cast<double>(i));
  const Var qk = ps.var_span(q, 2);  // q (2, 3) over k (1, 3): (3, 3), a view, no copy
  CHECK(qk.shape() == Shape{3, 3});
  CHECK(qk.value().to_vector() == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  times(qk, 2).backward(Tensor::from_vector(std::vector<double>(9, 1.0), {3, 3}, DType::f64));
  times(qk, 2).backward(Tensor::from_vector(std::vector<double>(9, 1.0), {3, 3}, DType::f64));  // accumulates
  const std::vector<double> g = ps.flat_grad().to_vector();
  CHECK(std::vector<double>(g.begin(), g.begin() + 9) == std::vector<double>(9, 4.0));
  CHECK(std::vector<double>(g.begin() + 9, g.end()) == std::vector<double>(g.size() - 9, 0.0));
  CHECK_THROWS_WITH(ps.var_span(k, 2), Catch::Contains("does not stack"));  // (1, 3) over (3)
  CHECK(ps.var_span(n, 1).shape() == Shape{3});
  CHECK_THROWS_WITH(ps.var_span(w, 2), Catch::Contains("parameters [3, 5) of 4"));
}

TEST_CASE("leaf group hooks bracket the unit's backward", "[autograd][nn]") {
  ParamSet u1("u1", DType::f64), u2("u2", DType::f64);
  int p1 = u1.add("w", {1}, false), p2 = u2.add("w", {1}, false);
  u1.finalize();
  u2.finalize();
  std::vector<std::string> events;
  for (ParamSet* ps : {&u1, &u2}) {
    ps->group()->before_backward = [&events, ps] { events.push_back("before " + ps->unit_name()); };
    ps->group()->after_backward = [&events, ps] { events.push_back("after " + ps->unit_name()); };
  }
  // forward: h = x + w1 (unit 1); y = 2h + w2 (unit 2); also reads w1 again at the end (tied).
  Var x(vec({1}), true);
  Var h = plus(x, u1.var(p1));
  Var y = plus(plus(times(h, 2), u2.var(p2)), u1.var(p1));
  y.backward(vec({1}));
  // u1 is read last in forward (tied) so its backward starts first and ends last.
  CHECK(events == std::vector<std::string>{"before u1", "before u2", "after u2", "after u1"});
  CHECK(u1.grad(p1).item() == 3);
  CHECK(u2.grad(p2).item() == 1);
}

TEST_CASE("checkpoint recomputes and gives the same gradients", "[autograd]") {
  ParamSet ps("blk", DType::f64);
  int w = ps.add("w", {3}, false);
  ps.finalize();
  ps.value(w).fill_(0.5);
  int calls = 0;
  auto fn = [&](const Var& in) { ++calls; return plus(times(in, 3), ps.var(w)); };
  Var x1(vec({1, 2, 3}), true);
  fn(x1).backward(vec({1, 1, 1}));
  auto g_plain = ps.flat_grad().to_vector();
  ps.zero_grad();
  Var x2(vec({1, 2, 3}), true);
  calls = 0;
  Var y = recompute(fn, x2, ps.vars());
  CHECK(calls == 1);
  y.backward(vec({1, 1, 1}));
  CHECK(calls == 2);  // recomputed once in backward
  CHECK(ps.flat_grad().to_vector() == g_plain);
  CHECK(x2.grad().to_vector() == x1.grad().to_vector());
}
