// defines: 18 Catch2 test cases tagged [ops], [basic], [determinism]; helpers: ids_tensor, check_close,
//          f32, gelu_ref, silu_ref, same_bits and 1 more
//
// autograd/ops_basic.cpp: every op's float64 gradient check, float32 forward against a naive
// reference loop, input errors, and bitwise determinism.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/ops.h"
#include "core/parallel.h"
#include "tests/gradcheck.h"

using namespace zt;
using zt::test::gradcheck;
using zt::test::randn;

namespace {

Tensor ids_tensor(const std::vector<int>& v, const Shape& s) {
  std::vector<double> d(v.begin(), v.end());
  return Tensor::from_vector(d, s, DType::i32);
}

// |got - want| <= atol + rtol |want| elementwise, with the first failure reported.
void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol = 1e-5,
                 double rtol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}

Var f32(const Shape& s, uint64_t seed, double std = 1.0) { return Var(randn(s, seed, std, DType::f32)); }

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1 + std::exp(-x)); }

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.is_contiguous() && b.is_contiguous() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// gradient checks (float64)

TEST_CASE("gradcheck: reshape and transpose", "[ops][basic]") {
  gradcheck([](const std::vector<Var>& v) { return reshape(v[0], {4, -1}); }, {randn({2, 3, 4}, 1)});
  gradcheck([](const std::vector<Var>& v) { return transpose(v[0], 0, 2); }, {randn({2, 3, 4}, 2)});
  gradcheck([](const std::vector<Var>& v) { return transpose(v[0], -1, -2); }, {randn({2, 3, 4}, 3)});
  // reshape of a non-contiguous value (copies) still routes the gradient back
  gradcheck([](const std::vector<Var>& v) { return reshape(transpose(v[0], 0, 1), {6, 2}); }, {randn({3, 2, 2}, 4)});
}

TEST_CASE("gradcheck: add - sub - mul - scale", "[ops][basic]") {
  auto a = randn({2, 3, 4}, 10), b = randn({2, 3, 4}, 11);
  gradcheck([](const std::vector<Var>& v) { return add(v[0], v[1]); }, {a, b});
  gradcheck([](const std::vector<Var>& v) { return sub(v[0], v[1]); }, {a, b});
  gradcheck([](const std::vector<Var>& v) { return mul(v[0], v[1]); }, {a, b});
  gradcheck([](const std::vector<Var>& v) { return mul(v[0], v[1]); }, {a, b}, {false, true});
  gradcheck([](const std::vector<Var>& v) { return sub(v[0], v[1]); }, {a, b}, {false, true});
  gradcheck([](const std::vector<Var>& v) { return mul(v[0], v[0]); }, {a});  // one Var used twice
  gradcheck([](const std::vector<Var>& v) { return add(v[0], v[0]); }, {a});
  gradcheck([](const std::vector<Var>& v) { return scale(v[0], -1.7); }, {a});
}

TEST_CASE("gradcheck: sum - mean - sum_last", "[ops][basic]") {
  gradcheck([](const std::vector<Var>& v) { return sum(v[0]); }, {randn({3, 4}, 20)});
  gradcheck([](const std::vector<Var>& v) { return mean(v[0]); }, {randn({2, 3, 4}, 21)});
  gradcheck([](const std::vector<Var>& v) { return sum_last(v[0]); }, {randn({2, 3, 5}, 22)});
  gradcheck([](const std::vector<Var>& v) { return sum_last(v[0]); }, {randn({7}, 23)});
}

TEST_CASE("gradcheck: matmul - 2-D and batched", "[ops][basic]") {
  gradcheck([](const std::vector<Var>& v) { return matmul(v[0], v[1]); }, {randn({3, 4}, 30), randn({4, 5}, 31)});
  gradcheck([](const std::vector<Var>& v) { return matmul(v[0], v[1]); },
            {randn({2, 3, 4, 5}, 32), randn({5, 3}, 33)});
  gradcheck([](const std::vector<Var>& v) { return matmul(v[0], v[1]); },
            {randn({2, 3, 4, 5}, 34), randn({2, 3, 5, 2}, 35)});
  gradcheck([](const std::vector<Var>& v) { return matmul(v[0], v[1]); },
            {randn({2, 3, 4, 5}, 34), randn({2, 3, 5, 2}, 35)}, {false, true});
  // a non-contiguous a (a transposed view) is made contiguous first
  gradcheck([](const std::vector<Var>& v) { return matmul(transpose(v[0], 0, 1), v[1]); },
            {randn({4, 3}, 36), randn({4, 2}, 37)});
}

TEST_CASE("gradcheck: linear with and without bias", "[ops][basic]") {
  gradcheck([](const std::vector<Var>& v) { return linear(v[0], v[1], v[2]); },
            {randn({2, 3, 5}, 40), randn({4, 5}, 41), randn({4}, 42)});
  gradcheck([](const std::vector<Var>& v) { return linear(v[0], v[1], Var()); }, {randn({7, 5}, 43), randn({3, 5}, 44)});
  gradcheck([](const std::vector<Var>& v) { return linear(v[0], v[1], v[2]); },
            {randn({2, 3, 5}, 45), randn({4, 5}, 46), randn({4}, 47)}, {true, false, true});
}

TEST_CASE("gradcheck: gelu - silu - swiglu - softmax", "[ops][basic]") {
  gradcheck([](const std::vector<Var>& v) { return gelu(v[0]); }, {randn({3, 7}, 50, 2.0)});
  gradcheck([](const std::vector<Var>& v) { return silu(v[0]); }, {randn({3, 7}, 51, 2.0)});
  gradcheck([](const std::vector<Var>& v) { return swiglu(v[0], v[1]); }, {randn({2, 3, 4}, 52, 2.0), randn({2, 3, 4}, 53)});
  gradcheck([](const std::vector<Var>& v) { return swiglu(v[0], v[1]); }, {randn({2, 3, 4}, 52, 2.0), randn({2, 3, 4}, 53)},
            {false, true});
  gradcheck([](const std::vector<Var>& v) { return softmax(v[0]); }, {randn({2, 3, 6}, 54, 2.0)});
}

TEST_CASE("gradcheck: embedding (repeated ids)", "[ops][basic]") {
  Tensor ids = ids_tensor({0, 3, 3, 4, 1, 3}, {2, 3});
  gradcheck([&](const std::vector<Var>& v) { return embedding(ids, v[0]); }, {randn({5, 4}, 60)});
}

// Llama 3's 128256-token vocabulary: ids past 65535 through the embedding and the loss. The float64
// gradient check runs through a small input x (2, 3) projected by a fixed (3, V) matrix, so the
// finite differences stay cheap with V columns; the embedding's rows past 65535 get their
// gradient where the ids say.
TEST_CASE("vocabulary past 65536: embedding rows and cross-entropy targets above 65535", "[ops][basic]") {
  const int64_t V = 128256, C = 3;
  Tensor ids = ids_tensor({128255, 70000, 5, 70000}, {2, 2});
  Tensor targets = ids_tensor({65536, 128255, 99999, 3}, {2, 2});
  Var table(randn({V, C}, 80, 0.5), true);
  Var e = embedding(ids, table);  // (2, 2, C)
  const std::vector<double> ev = e.value().to_vector(), tv = table.value().to_vector();
  const int64_t rows[4] = {128255, 70000, 5, 70000};
  for (int k = 0; k < 4; ++k)
    for (int64_t c = 0; c < C; ++c) CHECK(ev[k * C + c] == tv[rows[k] * C + c]);
  const Tensor w = randn({C, V}, 81, 0.5);
  Var loss = cross_entropy(matmul(e, Var(w)), targets);
  loss.backward();
  const std::vector<double> g = table.grad().to_vector();
  auto row_norm = [&](int64_t r) {
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::abs(g[r * C + c]);
    return s;
  };
  CHECK(row_norm(70000) > 0);
  CHECK(row_norm(128255) > 0);
  CHECK(row_norm(5) > 0);
  double others = 0;  // every row no id names: exactly zero
  for (int64_t r = 0; r < V; ++r)
    if (r != 5 && r != 70000 && r != 128255) others += row_norm(r);
  CHECK(others == 0.0);
  gradcheck([&](const std::vector<Var>& v) { return cross_entropy(matmul(v[0], Var(w)), targets.view({4})); },
            {randn({4, C}, 82)});
}

TEST_CASE("gradcheck: cross_entropy with an ignored target and valid_vocab < V", "[ops][basic]") {
  Tensor tg = ids_tensor({0, 4, -1, 2, 3, 1}, {2, 3});
  gradcheck([&](const std::vector<Var>& v) { return cross_entropy(v[0], tg, 5); }, {randn({2, 3, 7}, 70, 2.0)});
  gradcheck([&](const std::vector<Var>& v) { return cross_entropy(v[0], tg); }, {randn({2, 3, 7}, 71, 2.0)});
  // padded columns and ignored rows get exactly zero gradient
  Var x(randn({2, 3, 7}, 72), true);
  cross_entropy(x, tg, 5).backward();
  auto g = x.grad().to_vector();
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 7; ++j)
      if (j >= 5 || r == 2) CHECK(g[r * 7 + j] == 0.0);
}

TEST_CASE("parameter leaves accumulate straight into their gradient buffers", "[ops][basic]") {
  // linear / matmul / embedding write dW into a pre-bound (parameter) gradient with beta = 1:
  // the result must equal old contents + the gradient a plain leaf receives.
  Tensor x = randn({3, 4, 5}, 80), w = randn({6, 5}, 81), b = randn({6}, 82), R = randn({3, 4, 6}, 83);
  Var xv(x.clone(), true), wv(w.clone(), true), bv(b.clone(), true);
  linear(xv, wv, bv).backward(R);
  Tensor gw = Tensor::full({6, 5}, 0.25, DType::f64), gb = Tensor::full({6}, -0.5, DType::f64);
  Var wp = Var::parameter(w.clone(), gw), bp = Var::parameter(b.clone(), gb);
  linear(Var(x.clone()), wp, bp).backward(R);
  auto want_w = wv.grad().to_vector(), want_b = bv.grad().to_vector();
  for (auto& v : want_w) v += 0.25;
  for (auto& v : want_b) v -= 0.5;
  check_close(gw.to_vector(), want_w, 1e-12, 1e-12);
  check_close(gb.to_vector(), want_b, 1e-12, 1e-12);

  Tensor m = randn({5, 2}, 84), Rm = randn({3, 4, 2}, 85);
  Var mv(m.clone(), true);
  matmul(Var(x.clone()), mv).backward(Rm);
  Tensor gm = Tensor::full({5, 2}, 1.0, DType::f64);
  matmul(Var(x.clone()), Var::parameter(m.clone(), gm)).backward(Rm);
  auto want_m = mv.grad().to_vector();
  for (auto& v : want_m) v += 1.0;
  check_close(gm.to_vector(), want_m, 1e-12, 1e-12);

  Tensor ids = ids_tensor({1, 1, 0, 2}, {4}), tbl = randn({3, 5}, 86), Re = randn({4, 5}, 87);
  Var tv(tbl.clone(), true);
  embedding(ids, tv).backward(Re);
  Tensor ge = Tensor::full({3, 5}, 2.0, DType::f64);
  embedding(ids, Var::parameter(tbl.clone(), ge)).backward(Re);
  auto want_e = tv.grad().to_vector();
  for (auto& v : want_e) v += 2.0;
  check_close(ge.to_vector(), want_e, 1e-12, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// float32 forward against naive loops

TEST_CASE("float32 forward: elementwise - reductions - shape ops", "[ops][basic]") {
  Var a = f32({3, 50}, 100), b = f32({3, 50}, 101);
  auto av = a.value().to_vector(), bv = b.value().to_vector();
  std::vector<double> s(av.size()), d(av.size()), p(av.size()), k(av.size());
  for (size_t i = 0; i < av.size(); ++i) {
    s[i] = av[i] + bv[i];
    d[i] = av[i] - bv[i];
    p[i] = av[i] * bv[i];
    k[i] = 2.5 * av[i];
  }
  check_close(add(a, b).value().to_vector(), s);
  check_close(sub(a, b).value().to_vector(), d);
  check_close(mul(a, b).value().to_vector(), p);
  check_close(scale(a, 2.5).value().to_vector(), k);

  double tot = 0;
  std::vector<double> rows(3, 0.0);
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 50; ++j) {
      tot += av[r * 50 + j];
      rows[r] += av[r * 50 + j];
    }
  CHECK(sum(a).value().shape() == Shape{});
  CHECK(sum(a).value().item() == Approx(tot).margin(1e-4));
  CHECK(mean(a).value().item() == Approx(tot / 150).margin(1e-6));
  CHECK(sum_last(a).value().shape() == Shape{3});
  check_close(sum_last(a).value().to_vector(), rows, 1e-4);

  // a sum big enough for several blocks and threads
  Var big = f32({100003}, 102);
  double bt = 0;
  for (double v : big.value().to_vector()) bt += v;
  CHECK(sum(big).value().item() == Approx(bt).margin(1e-3));

  Var t = transpose(f32({2, 3, 4}, 103), 0, 2);
  CHECK(t.shape() == Shape{4, 3, 2});
  CHECK(t.value().is_contiguous());
  CHECK(reshape(t, {-1, 6}).shape() == Shape{4, 6});
}

TEST_CASE("float32 forward: matmul and linear against loops", "[ops][basic]") {
  const int B = 2, M = 5, K = 7, N = 3;
  Var a = f32({B, M, K}, 110), b = f32({K, N}, 111), bb = f32({B, K, N}, 112);
  auto av = a.value().to_vector(), bv = b.value().to_vector(), bbv = bb.value().to_vector();
  std::vector<double> y(B * M * N, 0.0), yb(B * M * N, 0.0);
  for (int p = 0; p < B; ++p)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        for (int k = 0; k < K; ++k) {
          y[(p * M + i) * N + j] += av[(p * M + i) * K + k] * bv[k * N + j];
          yb[(p * M + i) * N + j] += av[(p * M + i) * K + k] * bbv[(p * K + k) * N + j];
        }
  Var out = matmul(a, b);
  CHECK(out.shape() == Shape{B, M, N});
  check_close(out.value().to_vector(), y);
  check_close(matmul(a, bb).value().to_vector(), yb);

  // linear: x (2, 5, 7), w (3, 7), bias (3)
  Var w = f32({N, K}, 113), bias = f32({N}, 114);
  auto wv = w.value().to_vector(), biv = bias.value().to_vector();
  std::vector<double> yl(B * M * N), yn(B * M * N);
  for (int r = 0; r < B * M; ++r)
    for (int o = 0; o < N; ++o) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += av[r * K + k] * wv[o * K + k];
      yn[r * N + o] = acc;
      yl[r * N + o] = acc + biv[o];
    }
  Var l = linear(a, w, bias);
  CHECK(l.shape() == Shape{B, M, N});
  check_close(l.value().to_vector(), yl);
  check_close(linear(a, w, Var()).value().to_vector(), yn);
}

TEST_CASE("float32 forward: activations and softmax against loops", "[ops][basic]") {
  Var x = f32({4, 3001}, 120, 3.0), u = f32({4, 3001}, 121);  // large enough for threads + SIMD tails
  auto xv = x.value().to_vector(), uv = u.value().to_vector();
  std::vector<double> g(xv.size()), s(xv.size()), sw(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    g[i] = gelu_ref(xv[i]);
    s[i] = silu_ref(xv[i]);
    sw[i] = silu_ref(xv[i]) * uv[i];
  }
  check_close(gelu(x).value().to_vector(), g, 1e-6, 1e-5);
  check_close(silu(x).value().to_vector(), s, 1e-6, 1e-5);
  check_close(swiglu(x, u).value().to_vector(), sw, 1e-6, 1e-5);
  // extreme inputs stay finite and saturate correctly
  Var e(Tensor::from_vector({-100, -30, 0, 30, 100}, {5}));
  check_close(gelu(e).value().to_vector(), {0, 0, 0, 30, 100}, 1e-6);
  check_close(silu(e).value().to_vector(), {-100 * std::exp(-100.0), -30 / (1 + std::exp(30.0)), 0, 30, 100}, 1e-6);

  // softmax, including a row of huge logits (must not overflow)
  Var z = f32({3, 37}, 122, 4.0);
  auto zv = z.value().to_vector();
  for (int j = 0; j < 37; ++j) zv[2 * 37 + j] += 1000.0;
  z = Var(Tensor::from_vector(zv, {3, 37}));
  zv = z.value().to_vector();
  std::vector<double> sm(zv.size());
  for (int r = 0; r < 3; ++r) {
    double m = -1e300, tot = 0;
    for (int j = 0; j < 37; ++j) m = std::max(m, zv[r * 37 + j]);
    for (int j = 0; j < 37; ++j) tot += std::exp(zv[r * 37 + j] - m);
    for (int j = 0; j < 37; ++j) sm[r * 37 + j] = std::exp(zv[r * 37 + j] - m) / tot;
  }
  check_close(softmax(z).value().to_vector(), sm, 1e-7, 1e-5);
}

TEST_CASE("float32 forward: embedding and cross_entropy against loops", "[ops][basic]") {
  Var tbl = f32({6, 4}, 130);
  Tensor ids = ids_tensor({5, 0, 0, 3}, {2, 2});
  Var e = embedding(ids, tbl);
  CHECK(e.shape() == Shape{2, 2, 4});
  auto tv = tbl.value().to_vector();
  std::vector<double> want;
  for (int id : {5, 0, 0, 3})
    for (int c = 0; c < 4; ++c) want.push_back(tv[id * 4 + c]);
  CHECK(e.value().to_vector() == want);

  // cross_entropy: logits (4, 3, 40) with a +500 offset row (stability), one ignored target,
  // valid_vocab 33 (columns 33..39 hold large values that must be ignored)
  const int N = 12, V = 40, Vv = 33;
  auto lv = randn({N, V}, 131, 3.0, DType::f32).to_vector();
  for (int j = 0; j < V; ++j) lv[5 * V + j] += 500.0;
  for (int r = 0; r < N; ++r)
    for (int j = Vv; j < V; ++j) lv[r * V + j] = 80.0;
  std::vector<int> t = {0, 32, 5, -1, 7, 1, 2, 3, 31, 30, 4, 9};
  Var logits(Tensor::from_vector(lv, {4, 3, V}));
  lv = logits.value().to_vector();
  double loss = 0;
  int count = 0;
  for (int r = 0; r < N; ++r) {
    if (t[r] < 0) continue;
    double m = -1e300, tot = 0;
    for (int j = 0; j < Vv; ++j) m = std::max(m, lv[r * V + j]);
    for (int j = 0; j < Vv; ++j) tot += std::exp(lv[r * V + j] - m);
    loss += m + std::log(tot) - lv[r * V + t[r]];
    ++count;
  }
  Var ce = cross_entropy(logits, ids_tensor(t, {4, 3}), Vv);
  CHECK(ce.shape() == Shape{});
  CHECK(ce.value().item() == Approx(loss / count).epsilon(1e-5));
}

// ---------------------------------------------------------------------------------------------
// input errors

TEST_CASE("ops refuse bad shapes and dtypes with clear messages", "[ops][basic]") {
  Var x = f32({2, 5}, 200), w = f32({3, 4}, 201), b3 = f32({3}, 202);
  CHECK_THROWS_WITH(linear(x, w, b3), Catch::Contains("linear") && Catch::Contains("5 input features") &&
                                          Catch::Contains("expects 4"));
  CHECK_THROWS_WITH(linear(f32({2, 4}, 203), w, f32({4}, 204)), Catch::Contains("linear: bias must have shape (3,)"));
  CHECK_THROWS_WITH(add(x, f32({5, 2}, 205)), Catch::Contains("add") && Catch::Contains("(2, 5)") &&
                                                  Catch::Contains("(5, 2)") && Catch::Contains("same shape"));
  CHECK_THROWS_WITH(mul(x, Var(randn({2, 5}, 206))), Catch::Contains("mul") && Catch::Contains("same dtype"));
  Var ints(Tensor::from_vector({1, 2, 3}, {3}, DType::i32));
  CHECK_THROWS_WITH(gelu(ints), Catch::Contains("gelu") && Catch::Contains("float32, float64 or bfloat16") &&
                                    Catch::Contains("int32"));
  CHECK_THROWS_WITH(softmax(ints), Catch::Contains("softmax"));
  CHECK_THROWS_WITH(sum(ints), Catch::Contains("sum"));
  CHECK_THROWS_WITH(matmul(f32({2, 3}, 207), f32({4, 5}, 208)),
                    Catch::Contains("matmul") && Catch::Contains("K = 3") && Catch::Contains("4 rows"));
  CHECK_THROWS_WITH(matmul(f32({2, 2, 3}, 209), f32({3, 3, 4}, 210)), Catch::Contains("leading dims"));
  CHECK_THROWS_WITH(reshape(x, {3, 3}), Catch::Contains("reshape") && Catch::Contains("(3, 3)"));
  CHECK_THROWS_WITH(transpose(x, 0, 2), Catch::Contains("transpose") && Catch::Contains("out of range"));
  CHECK_THROWS_WITH(swiglu(x, f32({2, 4}, 211)), Catch::Contains("swiglu"));

  Var tbl = f32({10, 4}, 212);
  CHECK_THROWS_WITH(embedding(ids_tensor({1, 10}, {2}), tbl),
                    Catch::Contains("embedding") && Catch::Contains("id 10") && Catch::Contains("size 10"));
  CHECK_THROWS_WITH(embedding(ids_tensor({-2}, {1}), tbl), Catch::Contains("id -2"));
  // -1 is another rank's id under vocabulary parallelism: a zero row (parallel/vocab_parallel.h)
  CHECK(embedding(ids_tensor({-1}, {1}), tbl).value().to_vector() == std::vector<double>(4, 0.0));
  CHECK_THROWS_WITH(embedding(Tensor::from_vector({1}, {1}, DType::i64), tbl), Catch::Contains("int32"));

  Var lg = f32({2, 6}, 213);
  CHECK_THROWS_WITH(cross_entropy(lg, ids_tensor({1, 5}, {2}), 5),
                    Catch::Contains("cross_entropy") && Catch::Contains("target 5") && Catch::Contains("[0, 5)"));
  CHECK_THROWS_WITH(cross_entropy(lg, ids_tensor({1, -2}, {2})), Catch::Contains("target -2"));
  CHECK_THROWS_WITH(cross_entropy(lg, ids_tensor({1, 2, 3}, {3})), Catch::Contains("targets must have shape (2,)"));
  CHECK_THROWS_WITH(cross_entropy(lg, ids_tensor({1, 2}, {2}), 7), Catch::Contains("valid_vocab"));
  CHECK_THROWS_WITH(cross_entropy(lg, Tensor::from_vector({1, 2}, {2}, DType::i64)), Catch::Contains("int32"));
}

TEST_CASE("cross_entropy with every target ignored is NaN with a zero gradient", "[ops][basic]") {
  Var x(randn({2, 4}, 220), true);
  Var l = cross_entropy(x, ids_tensor({-1, -1}, {2}));
  CHECK(std::isnan(l.value().item()));
  l.backward();
  for (double g : x.grad().to_vector()) CHECK(g == 0.0);
}

// ---------------------------------------------------------------------------------------------
// determinism

namespace {
// A GPT-like forward + backward in float32, sized so every parallel path runs.
// Returns {loss, dx0, dW1, db1, dW2, dtable}.
std::vector<Tensor> mini_step() {
  const int64_t T = 512, C = 96, H = 192, V = 300;
  Rng r(9);
  Tensor tbl = Tensor::empty({V, C});
  r.fill_normal(tbl, 0, 0.5);
  Tensor w1 = Tensor::empty({H, C}), b1 = Tensor::empty({H}), w2 = Tensor::empty({V, H});
  r.fill_normal(w1, 0, 0.2);
  r.fill_normal(b1, 0, 0.2);
  r.fill_normal(w2, 0, 0.2);
  std::vector<int> idv(T), tv(T);
  for (int64_t i = 0; i < T; ++i) {
    idv[i] = static_cast<int>(r.next_u32() % V);
    tv[i] = i % 17 == 0 ? -1 : static_cast<int>(r.next_u32() % 290);
  }
  Var vt(tbl, true), v1(w1, true), vb(b1, true), v2(w2, true);
  Var x = embedding(ids_tensor(idv, {2, T / 2}), vt);
  Var h = gelu(linear(x, v1, vb));
  Var s = softmax(h);
  Var y = linear(add(mul(h, s), scale(h, 0.5)), v2, Var());
  Var loss = add(cross_entropy(y, ids_tensor(tv, {2, T / 2}), 290), mean(sum_last(silu(h))));
  loss.backward();
  return {loss.value().clone(), vt.grad().clone(), v1.grad().clone(), vb.grad().clone(), v2.grad().clone()};
}
}  // namespace

TEST_CASE("the same ops run twice give bitwise identical results (2 threads)", "[ops][basic][determinism]") {
  const int prev = num_threads();
  set_num_threads(2);
  auto r1 = mini_step();
  auto r2 = mini_step();
  set_num_threads(prev);
  REQUIRE(r1.size() == r2.size());
  for (size_t i = 0; i < r1.size(); ++i) {
    INFO("output " << i);
    CHECK(same_bits(r1[i], r2[i]));
  }
  CHECK(std::isfinite(r1[0].item()));
}

TEST_CASE("row kernels do not depend on the thread count", "[ops][basic][determinism]") {
  // Everything but the GEMMs splits work so that each output element has one fixed arithmetic
  // order: 1 thread and 2 threads must agree bit for bit.
  Tensor x = randn({300, 257}, 300, 3.0, DType::f32);
  Tensor tg = Tensor::empty({300}, DType::i32);
  for (int i = 0; i < 300; ++i) tg.data<int32_t>()[i] = i % 11 == 0 ? -1 : (i * 37) % 250;
  Tensor ids = Tensor::empty({300}, DType::i32);
  for (int i = 0; i < 300; ++i) ids.data<int32_t>()[i] = (i * 7) % 13;
  auto run = [&](int threads) {
    set_num_threads(threads);
    Var xv(x.clone(), true), tv(randn({13, 257}, 301, 1.0, DType::f32), true);
    Var l = add(add(cross_entropy(xv, tg, 250), sum(softmax(xv))), mean(gelu(embedding(ids, tv))));
    l.backward();
    return std::vector<Tensor>{l.value().clone(), xv.grad().clone(), tv.grad().clone()};
  };
  const int prev = num_threads();
  auto one = run(1), two = run(2);
  set_num_threads(prev);
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("output " << i);
    CHECK(same_bits(one[i], two[i]));
  }
}
