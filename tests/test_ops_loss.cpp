// defines: 9 Catch2 test cases tagged [ops], [loss], [determinism], [errors], [backend], [models];
//          helpers: randn32, Step, step
//
// linear_cross_entropy (autograd/ops_loss.cpp), the classifier fused into the loss as llm.c's:
// float64 gradient checks (an ignored target, padded columns, a loss gradient other than 1, each
// input alone); in float32 and bfloat16 on the cpu the bits of cross_entropy(linear(x, w)) — the
// loss, dx, dw, and dw added into a parameter's gradient buffer —; the no-grad path; the backend
// entries it rests on (cross_entropy_and_grad, scale_by) against the entries they replace; the
// models' loss() against cross_entropy over their logits(); and errors naming the op.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "autograd/ops.h"
#include "core/backend.h"
#include "models/init.h"
#include "tests/backend_test_util.h"
#include "tests/bitwise.h"
#include "tests/gradcheck.h"

using namespace zt;
using zt::test::bitwise_equal;
using zt::test::gradcheck;
using zt::test::ids_tensor;
using zt::test::randn;

namespace {

// N(0, std) drawn in float32, then held in dt (bfloat16 rounds it).
Tensor randn32(const Shape& s, uint64_t seed, double std = 1.0, DType dt = DType::f32) {
  return randn(s, seed, std, DType::f32).to(dt);
}

// One forward + backward (loss gradient g) of either form: the loss and the two input gradients.
struct Step {
  Tensor loss, dx, dw;
};
Step step(const Tensor& x, const Tensor& w, const Tensor& tg, int64_t Vv, double g, bool fused) {
  Var vx(x.clone(), true), vw(w.clone(), true);
  Var loss = fused ? linear_cross_entropy(vx, vw, tg, Vv) : cross_entropy(linear(vx, vw, Var()), tg, Vv);
  if (g == 1.0) loss.backward();
  else scale(loss, g).backward();
  return {loss.value().clone(), vx.grad().clone(), vw.grad().clone()};
}

}  // namespace

TEST_CASE("linear_cross_entropy: float64 gradients - ignored target, padded columns, each input alone", "[ops][loss]") {
  // gradcheck's loss gradient is a random R, not 1: the backward's scaling by it is checked too
  const Tensor tg = ids_tensor({0, 4, -1, 2, 3, 1}, {2, 3});
  const Tensor x = randn({2, 3, 4}, 90), w = randn({7, 4}, 91, 0.8);
  auto f = [&](const std::vector<Var>& v) { return linear_cross_entropy(v[0], v[1], tg, 5); };
  gradcheck(f, {x, w});
  gradcheck(f, {x, w}, {true, false});
  gradcheck(f, {x, w}, {false, true});
  gradcheck([&](const std::vector<Var>& v) { return linear_cross_entropy(v[0], v[1], tg); }, {x, w});
}

TEST_CASE("linear_cross_entropy: float32 on the cpu gives the bits of cross_entropy(linear(x, w))",
          "[ops][loss][determinism]") {
  // 15 rows, 40 columns of which 37 are real (a padded vocabulary), one ignored row
  const Tensor x = randn32({3, 5, 16}, 92), w = randn32({40, 16}, 93, 0.5);
  const Tensor tg = ids_tensor({1, 36, 0, -1, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25}, {3, 5});
  const Step a = step(x, w, tg, 37, 1.0, true), b = step(x, w, tg, 37, 1.0, false);
  CHECK(bitwise_equal(a.loss, b.loss));
  CHECK(bitwise_equal(a.dx, b.dx));
  CHECK(bitwise_equal(a.dw, b.dw));
  // a loss gradient other than 1 is applied on the (N, C) side: equal to rounding
  const Step c = step(x, w, tg, 37, 3.0, true), d = step(x, w, tg, 37, 3.0, false);
  CHECK(bitwise_equal(c.loss, d.loss));
  zt::test::check_close(c.dx.to_vector(), d.dx.to_vector(), 1e-7, 1e-5);
  zt::test::check_close(c.dw.to_vector(), d.dw.to_vector(), 1e-7, 1e-5);
}

TEST_CASE("linear_cross_entropy: bfloat16 on the cpu gives the bits of the two ops", "[ops][loss][determinism]") {
  const Tensor x = randn32({4, 8, 32}, 94).to(DType::bf16), w = randn32({72, 32}, 95, 0.3).to(DType::bf16);
  std::vector<int> t(32);
  for (int i = 0; i < 32; ++i) t[static_cast<size_t>(i)] = i % 5 == 4 ? -1 : (i * 7) % 70;
  const Tensor tg = ids_tensor(t, {4, 8});
  const Step a = step(x, w, tg, 70, 1.0, true), b = step(x, w, tg, 70, 1.0, false);
  REQUIRE(a.loss.dtype() == DType::f32);  // the statistics dtype of bfloat16
  REQUIRE(a.dx.dtype() == DType::bf16);
  CHECK(bitwise_equal(a.loss, b.loss));
  CHECK(bitwise_equal(a.dx, b.dx));
  CHECK(bitwise_equal(a.dw, b.dw));
}

TEST_CASE("linear_cross_entropy: dw adds into a parameter's gradient buffer", "[ops][loss]") {
  const Tensor x = randn32({6, 8}, 96), w = randn32({12, 8}, 97, 0.5);
  const Tensor tg = ids_tensor({0, 3, 11, 2, -1, 9}, {6});
  Tensor buf = randn32({12, 8}, 98);
  const Tensor before = buf.clone();
  Var pw = Var::parameter(w.clone(), buf);
  linear_cross_entropy(Var(x.clone(), true), pw, tg).backward();
  CHECK(pw.grad().raw() == buf.raw());  // the same buffer, updated in place
  const Step ref = step(x, w, tg, 12, 1.0, false);
  std::vector<double> want = before.to_vector(), dw = ref.dw.to_vector();
  for (size_t i = 0; i < want.size(); ++i) want[i] += dw[i];
  zt::test::check_close(buf.to_vector(), want, 1e-6, 1e-6);
}

TEST_CASE("linear_cross_entropy: without gradients it is the two ops", "[ops][loss]") {
  const Tensor x = randn32({2, 3, 8}, 99), w = randn32({10, 8}, 100);
  const Tensor tg = ids_tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor want = cross_entropy(linear(Var(x), Var(w), Var()), tg, 9).value();
  {
    NoGradGuard ng;
    Var l = linear_cross_entropy(Var(x, true), Var(w, true), tg, 9);
    CHECK(!l.requires_grad());
    CHECK(bitwise_equal(l.value(), want));
  }
  CHECK(bitwise_equal(linear_cross_entropy(Var(x), Var(w), tg, 9).value(), want));
}

TEST_CASE("cpu backend: cross_entropy_and_grad is cross_entropy then its backward for dloss 1, in place",
          "[ops][loss][backend]") {
  Backend& be = backend(Device::cpu());
  const int64_t N = 6, V = 24, Vv = 21;
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    INFO(dtype_name(dt));
    for (const std::vector<int>& t : {std::vector<int>{3, -1, 20, 0, 7, 7}, std::vector<int>(6, -1)}) {
      const Tensor tg = ids_tensor(t, {N});
      int64_t count = 0;
      for (int v : t) count += v != -1;
      const Tensor logits = randn32({N, V}, 101, 3.0, dt);
      const DType st = be.stats_dtype(dt);
      Tensor loss = Tensor::empty({}, st), lse = Tensor::empty({N}, st), dl = Tensor::empty({N, V}, dt);
      be.cross_entropy(loss, lse, logits, tg, Vv, count);
      be.cross_entropy_backward(dl, logits, lse, tg, Tensor::full({}, 1.0, st), Vv, count);
      Tensor fused = logits.clone(), floss = Tensor::empty({}, st);
      be.cross_entropy_and_grad(floss, fused, tg, Vv, count);
      if (count == 0) {
        CHECK(std::isnan(floss.item()));  // the mean over nothing, as cross_entropy's
      } else {
        CHECK(bitwise_equal(floss, loss));
      }
      CHECK(bitwise_equal(fused, dl));
    }
  }
}

TEST_CASE("cpu backend: scale_by multiplies by a () tensor, in place or not", "[ops][loss][backend]") {
  Backend& be = backend(Device::cpu());
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    INFO(dtype_name(dt));
    const Tensor x = randn32({5, 7}, 102, 1.0, dt);
    Tensor out = Tensor::empty({5, 7}, dt), want = Tensor::empty({5, 7}, dt);
    be.scale_by(out, x, Tensor::full({}, -2.5, DType::f32));
    be.scale(want, x, -2.5);
    CHECK(bitwise_equal(out, want));
    Tensor y = x.clone();
    be.scale_by(y, y, Tensor::full({}, -2.5, DType::f64));
    CHECK(bitwise_equal(y, want));
  }
}

TEST_CASE("models: loss() has the bits of cross_entropy over logits() - values and every gradient",
          "[ops][loss][models][determinism]") {
  for (const char* name : {"gpt2-nano", "llama-nano"}) {
    INFO(name);
    const ModelConfig cfg = model_config(name);
    std::unique_ptr<Model> m[2];
    for (auto& mi : m) {
      mi = make_model(cfg);
      Rng rng(5);
      init_model(*mi, rng);
    }
    const int64_t B = 2, T = 16;
    std::vector<int> ids(B * T), tg(B * T);
    for (int i = 0; i < B * T; ++i) {
      ids[static_cast<size_t>(i)] = (i * 37 + 3) % static_cast<int>(cfg.vocab_size);
      tg[static_cast<size_t>(i)] = i == 5 ? -1 : (i * 53 + 11) % static_cast<int>(cfg.vocab_size);
    }
    const Tensor idx = ids_tensor(ids, {B, T}), targets = ids_tensor(tg, {B, T});
    Var fused = m[0]->loss(idx, targets);
    Var plain = cross_entropy(m[1]->logits(idx), targets, cfg.vocab_size);
    CHECK(bitwise_equal(fused.value(), plain.value()));
    fused.backward();
    plain.backward();
    const std::vector<Unit*> u0 = m[0]->units(), u1 = m[1]->units();
    REQUIRE(u0.size() == u1.size());
    for (size_t u = 0; u < u0.size(); ++u) {
      const auto& v0 = u0[u]->params().vars();
      const auto& v1 = u1[u]->params().vars();
      REQUIRE(v0.size() == v1.size());
      for (size_t k = 0; k < v0.size(); ++k) {
        INFO("unit " << u0[u]->name() << " parameter " << k);
        REQUIRE(v0[k].grad().defined());
        CHECK(bitwise_equal(v0[k].grad(), v1[k].grad()));
      }
    }
  }
}

TEST_CASE("linear_cross_entropy: errors name the op and the argument", "[ops][loss][errors]") {
  Var x(randn32({2, 3, 8}, 103), true), w(randn32({10, 8}, 104), true);
  const Tensor tg = ids_tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK_THROWS_WITH(linear_cross_entropy(x, Var(randn32({10, 8, 1}, 105)), tg),
                    Catch::Contains("linear_cross_entropy: w must be 2-D"));
  CHECK_THROWS_WITH(linear_cross_entropy(x, Var(randn32({10, 6}, 106)), tg),
                    Catch::Contains("linear_cross_entropy: x (2, 3, 8) has 8 features"));
  CHECK_THROWS_WITH(linear_cross_entropy(x, w, ids_tensor({1, 2, 3}, {3})),
                    Catch::Contains("linear_cross_entropy: targets must have shape (2, 3) for x (2, 3, 8)"));
  CHECK_THROWS_WITH(linear_cross_entropy(x, w, ids_tensor({1, 2, 3, 4, 5, 9}, {2, 3}), 9),
                    Catch::Contains("linear_cross_entropy: target 9 at position 5 is outside [0, 9)"));
  CHECK_THROWS_WITH(linear_cross_entropy(x, w, tg, 11), Catch::Contains("linear_cross_entropy: valid_vocab must be"));
  CHECK_THROWS_WITH(linear_cross_entropy(x, Var(randn32({10, 8}, 107, 1.0, DType::f64)), tg),
                    Catch::Contains("linear_cross_entropy: w: expected float32"));
}
