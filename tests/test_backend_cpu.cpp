// defines: 12 Catch2 test cases tagged [backend]; helpers: out_like, ref_gemm, gelu_ref, silu_ref, ref_sgd,
//          values_of
//
// core/cpu_backend.h: every CpuBackend entry against a straightforward float64 reference on
// random data. The backward entries are also covered through autograd by the gradient checks of
// tests/test_ops_*.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/dispatch.h"  // dispatch_float
#include "core/kernels/accumulate.h"
#include "core/kernels/cast.h"
#include "core/kernels/shard_norm.h"
#include "tests/backend_test_util.h"

using namespace zt;
using namespace zt::test;

namespace {

Tensor out_like(const Shape& s, DType dt = DType::f32) {
  return Tensor::empty(s, dt, Category::activations, cpu_allocator());
}

// C (M, N) = alpha op(A) op(B) + beta C0 in double, row-major, one product.
Vec ref_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, const double* B,
             double beta, const double* C0) {
  Vec C(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += (ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
      C[i * N + j] = alpha * s + (beta != 0 ? beta * C0[i * N + j] : 0.0);
    }
  return C;
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu_ref(double x) { return x / (1 + std::exp(-x)); }

// The SGD loop as optim/sgd.cpp wrote it before the update went through the backend (one thread, no
// OpenMP; compiled with the same flags, so with the same FMA contractions): the cpu backend's
// sgd_step must give its bits, so that training is bitwise what it was.
template <class T>
void ref_sgd(T* __restrict param, const T* __restrict grad, T* __restrict buf, int64_t n, const SgdArgs& h) {
  const T lr = static_cast<T>(h.lr), mu = static_cast<T>(h.momentum);
  const T wd = h.decay ? static_cast<T>(h.weight_decay) : T(0);
  const bool nesterov = h.nesterov;
  if (h.momentum == 0) {
    for (int64_t i = 0; i < n; ++i) param[i] = param[i] - lr * (grad[i] + wd * param[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T d = grad[i] + wd * param[i];
    const T b = mu * buf[i] + d;
    buf[i] = b;
    const T u = nesterov ? d + mu * b : b;
    param[i] = param[i] - lr * u;
  }
}

template <class T> std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

}  // namespace

TEST_CASE("cpu backend: copies, fill, accumulate", "[backend]") {
  CpuBackend& be = cpu_backend();
  Tensor src = rnd({3, 5}, 2);
  Tensor dst = out_like({5, 3}, DType::f64);
  be.copy(dst.transpose(0, 1), src);  // strided destination, converting f32 -> f64
  const Vec s = src.to_vector(), d = dst.to_vector();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) CHECK(d[j * 3 + i] == s[i * 5 + j]);

  Tensor h = out_like({3, 5});
  be.copy_to_host(h, src);
  CHECK(h.to_vector() == s);
  Tensor h2 = out_like({3, 5});
  be.copy_from_host(h2, h);
  CHECK(h2.to_vector() == s);
  CHECK_THROWS(be.copy_to_host(out_like({3, 5}, DType::f64), src));   // dtypes differ
  CHECK_THROWS(be.copy_from_host(out_like({5, 3}), src.transpose(0, 1)));  // not contiguous
  // The asynchronous forms on the CPU: done on return (the transfer's wait() has nothing left),
  // with the synchronous forms' checks.
  CHECK_FALSE(be.copies_to_host_async(h));
  Tensor h3 = out_like({3, 5}), h4 = out_like({3, 5});
  TransferPtr to = be.copy_to_host_async(h3, src), from = be.copy_from_host_async(h4, h3);
  CHECK(h3.to_vector() == s);
  CHECK(h4.to_vector() == s);
  to->wait();
  from->wait();
  CHECK_THROWS(be.copy_to_host_async(out_like({3, 5}, DType::f64), src));

  Tensor f = Tensor::zeros({4, 4});
  be.fill(f.slice(1, 0, 4, 2), 2.5);  // every other column
  const Vec fv = f.to_vector();
  for (int i = 0; i < 16; ++i) CHECK(fv[i] == (i % 2 == 0 ? 2.5 : 0.0));

  Tensor acc = rnd({3, 5}, 3, DType::f64), add = rnd({3, 5}, 4, DType::f64);
  const Vec a0 = acc.to_vector(), ad = add.to_vector();
  be.accumulate(acc, add, -0.5);
  Vec want(a0.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = a0[i] - 0.5 * ad[i];
  check_close(acc.to_vector(), want, 1e-15, 1e-15);
}

TEST_CASE("cpu backend: cast, accumulate_cast, all_finite", "[backend]") {
  CpuBackend& be = cpu_backend();
  Tensor x = rnd({257}, 5);
  Tensor b = out_like({257}, DType::bf16);
  be.cast(b, x, 0.25);
  const Vec xv = x.to_vector(), bv = b.to_vector();
  for (size_t i = 0; i < xv.size(); ++i)
    CHECK(bv[i] == bf16_to_f32(f32_to_bf16(static_cast<float>(xv[i]) * 0.25f)));

  Tensor acc = Tensor::zeros({257}, DType::bf16);
  be.accumulate_cast(acc, x);
  be.accumulate_cast(acc, x);
  const Vec av = acc.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    const float once = bf16_to_f32(f32_to_bf16(static_cast<float>(xv[i])));
    CHECK(av[i] == bf16_to_f32(f32_to_bf16(once + static_cast<float>(xv[i]))));
  }

  CHECK(be.all_finite(x));
  CHECK(be.all_finite(b));
  Tensor y = x.clone();
  y.data<float>()[100] = INFINITY;
  CHECK_FALSE(be.all_finite(y));
  Tensor h = out_like({257}, DType::f16);
  be.cast(h, y, 1.0);
  CHECK_FALSE(be.all_finite(h));
}

TEST_CASE("cpu backend: sum_of_squares and scale_", "[backend]") {
  CpuBackend& be = cpu_backend();
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    Tensor x = rnd({3 * kSumChunk + 17}, 6).to(dt);
    double want = 0;
    for (double v : x.to_vector()) want += v * v;
    CHECK(be.sum_of_squares(x) == Approx(want).epsilon(1e-12));
    CHECK(be.sum_of_squares(x) == sum_of_squares(x));  // core/kernels/shard_norm.h goes through the backend
  }
  Tensor t = rnd({1000}, 7);
  const Vec t0 = t.to_vector();
  be.scale_(t, 0.3);
  const Vec t1 = t.to_vector();
  for (size_t i = 0; i < t0.size(); ++i) CHECK(t1[i] == static_cast<float>(static_cast<float>(t0[i]) * 0.3f));
}

TEST_CASE("cpu backend: adamw_step against the PyTorch formula in double", "[backend]") {
  CpuBackend& be = cpu_backend();
  const int64_t n = 100;
  AdamWArgs h;
  h.lr = 1e-2, h.beta1 = 0.8, h.beta2 = 0.95, h.eps = 1e-6, h.weight_decay = 0.1;
  Tensor p = rnd({n}, 8), g = rnd({n}, 9), m = rnd({n}, 10, DType::f32, 0.1), v = rnd({n}, 11, DType::f32, 0.1);
  v.copy_(Tensor::from_vector([&] {
    Vec a = v.to_vector();
    for (double& e : a) e = e * e;
    return a;
  }(), {n}));
  Vec P = p.to_vector(), G = g.to_vector(), Mv = m.to_vector(), V = v.to_vector();
  Tensor lowp = out_like({n}, DType::bf16);
  for (int64_t step = 1; step <= 3; ++step) {
    h.step = step;
    h.decay = step != 2;
    be.adamw_step(p, g, m, v, h, lowp);
    const double bc1 = 1 - std::pow(h.beta1, step), bc2 = 1 - std::pow(h.beta2, step);
    for (int64_t i = 0; i < n; ++i) {
      if (h.decay) P[i] *= 1 - h.lr * h.weight_decay;
      Mv[i] = h.beta1 * Mv[i] + (1 - h.beta1) * G[i];
      V[i] = h.beta2 * V[i] + (1 - h.beta2) * G[i] * G[i];
      P[i] -= h.lr / bc1 * Mv[i] / (std::sqrt(V[i]) / std::sqrt(bc2) + h.eps);
    }
    check_close(p.to_vector(), P, 1e-6, 1e-5);
    check_close(m.to_vector(), Mv, 1e-6, 1e-5);
    check_close(v.to_vector(), V, 1e-7, 1e-5);
    const Vec pv = p.to_vector(), lv = lowp.to_vector();
    for (int64_t i = 0; i < n; ++i) CHECK(lv[i] == bf16_to_f32(f32_to_bf16(static_cast<float>(pv[i]))));
  }
  CHECK_THROWS(be.adamw_step(p, g.slice(0, 0, 50), m, v, h, Tensor()));
}

TEST_CASE("cpu backend: sgd_step equals the reference loop bit for bit", "[backend]") {
  CpuBackend& be = cpu_backend();
  struct Case {
    double momentum;
    bool nesterov;
  };
  // 1, 37: short; 40013: above kParallelMinElements (core/parallel.h), the OpenMP split (two threads
  // under ctest).
  for (DType dt : {DType::f32, DType::f64})
    for (Case c : {Case{0.0, false}, Case{0.9, false}, Case{0.8, true}})
      for (bool decay : {false, true})
        for (int64_t n : {int64_t(1), int64_t(37), int64_t(40013)}) {
          CAPTURE(dtype_name(dt), c.momentum, c.nesterov, decay, n);
          SgdArgs h;
          h.lr = 0.05, h.momentum = c.momentum, h.weight_decay = 0.01, h.nesterov = c.nesterov, h.decay = decay;
          Tensor p = rnd({n}, 40, dt), buf = c.momentum > 0 ? rnd({n}, 41, dt, 0.1) : Tensor();
          dispatch_float(dt, "", "sgd test", [&](auto tag) {
            using T = decltype(tag);
            std::vector<T> P = values_of<T>(p), B = buf.defined() ? values_of<T>(buf) : std::vector<T>();
            for (int step = 1; step <= 3; ++step) {
              const Tensor g = rnd({n}, 41 + static_cast<uint64_t>(step), dt, 0.1);
              const std::vector<T> G = values_of<T>(g);
              be.sgd_step(p, g, buf, h);
              ref_sgd<T>(P.data(), G.data(), B.empty() ? nullptr : B.data(), n, h);
            }
            CHECK(values_of<T>(p) == P);
            if (buf.defined()) CHECK(values_of<T>(buf) == B);
          });
        }
  SgdArgs h;
  h.momentum = 0.9;
  Tensor p = rnd({8}, 1), g = rnd({8}, 2), b = rnd({8}, 3);
  CHECK_THROWS_WITH(be.sgd_step(p, g, Tensor(), h), Catch::Contains("no momentum buffer"));
  CHECK_THROWS_WITH(be.sgd_step(p, g.slice(0, 0, 4), b, h), Catch::Contains("same numel and dtype"));
  CHECK_THROWS_WITH(be.sgd_step(p, g, b.to(DType::f64), h), Catch::Contains("same numel and dtype"));
  h.momentum = 0;
  CHECK_THROWS_WITH(be.sgd_step(p, g, b, h), Catch::Contains("with a momentum buffer"));
  CHECK_THROWS_WITH(be.sgd_step(p.to(DType::bf16), g.to(DType::bf16), Tensor(), h), Catch::Contains("bfloat16"));
}

// ---------------------------------------------------------------------------------------------
// CpuBackend: compute entries (float32 results against float64 references)

TEST_CASE("cpu backend: elementwise and reductions", "[backend]") {
  CpuBackend& be = cpu_backend();
  Tensor a = rnd({7, 9}, 12), b = rnd({7, 9}, 13);
  const Vec av = a.to_vector(), bv = b.to_vector();
  const int64_t n = 63;
  for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul}) {
    Tensor y = out_like({7, 9});
    be.binary(op, y, a, b);
    Vec want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = op == BinaryOp::add ? av[i] + bv[i] : op == BinaryOp::sub ? av[i] - bv[i] : av[i] * bv[i];
    check_close(y.to_vector(), want);
  }
  Tensor y = out_like({7, 9});
  be.scale(y, a, -1.5);
  Vec want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = -1.5 * av[i];
  check_close(y.to_vector(), want);

  Tensor dout = rnd({7, 9}, 14), da = out_like({7, 9}), db = out_like({7, 9});
  const Vec dv = dout.to_vector();
  be.mul_backward(da, db, dout, a, b);
  Vec wa(n), wb(n);
  for (int64_t i = 0; i < n; ++i) wa[i] = dv[i] * bv[i], wb[i] = dv[i] * av[i];
  check_close(da.to_vector(), wa);
  check_close(db.to_vector(), wb);
  Tensor da2 = out_like({7, 9});
  be.mul_backward(da2, Tensor(), dout, a, b);  // db not wanted
  check_close(da2.to_vector(), wa);

  Tensor s = out_like({});
  be.sum_all(s, a, 0.5);
  double tot = 0;
  for (double v : av) tot += v;
  CHECK(s.item() == Approx(0.5 * tot).margin(1e-5));
  Tensor g = Tensor::full({}, 3.0);
  Tensor dx = out_like({7, 9});
  be.fill_scaled(dx, g, 0.25);
  for (double v : dx.to_vector()) CHECK(v == 0.75);

  Tensor rows = out_like({7});
  be.sum_last(rows, a);
  Vec wr(7, 0.0);
  for (int64_t i = 0; i < n; ++i) wr[i / 9] += av[i];
  check_close(rows.to_vector(), wr);
  Tensor back = out_like({7, 9});
  be.sum_last_backward(back, rows);
  for (int64_t i = 0; i < n; ++i) CHECK(back.to_vector()[i] == static_cast<float>(rows.to_vector()[i / 9]));
}

TEST_CASE("cpu backend: gemm, every transpose, batched with strides", "[backend]") {
  CpuBackend& be = cpu_backend();
  const int64_t N = 6, K = 7, P = 3;
  // M = 1 is the GEMV path (core/kernels/gemm.cpp: a decode step's linear); beta = 0 must ignore
  // C's old contents, NaN included.
  for (int64_t M : {int64_t(5), int64_t(1)})
    for (double beta : {2.0, 0.0})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (int64_t batch : {int64_t(1), P}) {
            INFO("M " << M << " beta " << beta << " trans_a " << ta << " trans_b " << tb << " batch " << batch);
            Tensor A = rnd({batch, M * K}, 15, DType::f64), B = rnd({K * N}, 16, DType::f64);  // B shared: stride 0
            Tensor C = rnd({batch, M * N}, 17, DType::f64);
            if (beta == 0) C.fill_(NAN);
            const Vec a = A.to_vector(), b = B.to_vector(), c0 = C.to_vector();
            GemmShape g;
            g.trans_a = ta, g.trans_b = tb, g.M = M, g.N = N, g.K = K, g.alpha = 0.5, g.beta = beta;
            g.batch = batch, g.stride_a = M * K, g.stride_b = 0, g.stride_c = M * N;
            be.gemm(g, A, B, C);
            const Vec c = C.to_vector();
            for (int64_t p = 0; p < batch; ++p) {
              const Vec want = ref_gemm(ta, tb, M, N, K, 0.5, a.data() + p * M * K, b.data(), beta,
                                        beta == 0 ? nullptr : c0.data() + p * M * N);
              check_close(Vec(c.begin() + p * M * N, c.begin() + (p + 1) * M * N), want, 1e-12, 1e-12);
            }
          }
}

TEST_CASE("cpu backend: linear and linear_backward", "[backend]") {
  CpuBackend& be = cpu_backend();
  const int64_t M = 6, in = 5, out = 4;
  Tensor x = rnd({M, in}, 18), w = rnd({out, in}, 19), b = rnd({out}, 20), dy = rnd({M, out}, 21);
  const Vec xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector(), gv = dy.to_vector();
  for (bool bias : {false, true}) {
    Tensor y = out_like({M, out});
    be.linear(y, x, w, bias ? b : Tensor());
    Vec want = ref_gemm(false, true, M, out, in, 1.0, xv.data(), wv.data(), 0.0, nullptr);
    if (bias)
      for (int64_t i = 0; i < M * out; ++i) want[i] += bv[i % out];
    check_close(y.to_vector(), want);
  }
  const Vec wdx = ref_gemm(false, false, M, in, out, 1.0, gv.data(), wv.data(), 0.0, nullptr);
  const Vec wdw = ref_gemm(true, false, out, in, M, 1.0, gv.data(), xv.data(), 0.0, nullptr);
  Vec wdb(out, 0.0);
  for (int64_t i = 0; i < M * out; ++i) wdb[i % out] += gv[i];
  Tensor dx = out_like({M, in}), dw = out_like({out, in}), db = out_like({out});
  be.linear_backward(dx, dw, db, dy, x, w, /*accumulate=*/false);
  check_close(dx.to_vector(), wdx);
  check_close(dw.to_vector(), wdw);
  check_close(db.to_vector(), wdb);
  be.linear_backward(Tensor(), dw, db, dy, x, w, /*accumulate=*/true);  // adds a second time
  Vec wdw2 = wdw, wdb2 = wdb;
  for (double& e : wdw2) e *= 2;
  for (double& e : wdb2) e *= 2;
  check_close(dw.to_vector(), wdw2);
  check_close(db.to_vector(), wdb2);
}

TEST_CASE("cpu backend: activations and softmax", "[backend]") {
  CpuBackend& be = cpu_backend();
  Tensor x = rnd({5, 13}, 22, DType::f32, 2.0), u = rnd({5, 13}, 23), dout = rnd({5, 13}, 24);
  const Vec xv = x.to_vector(), uv = u.to_vector(), gv = dout.to_vector();
  const size_t n = xv.size();
  Tensor y = out_like({5, 13}), dx = out_like({5, 13}), du = out_like({5, 13});
  Vec want(n), wd(n), wu(n);
  const double h = 1e-6;
  be.gelu(y, x);
  be.gelu_backward(dx, dout, x);
  for (size_t i = 0; i < n; ++i) {
    want[i] = gelu_ref(xv[i]);
    wd[i] = gv[i] * (gelu_ref(xv[i] + h) - gelu_ref(xv[i] - h)) / (2 * h);
  }
  check_close(y.to_vector(), want);
  check_close(dx.to_vector(), wd, 1e-4, 1e-4);
  be.silu(y, x);
  be.silu_backward(dx, dout, x);
  for (size_t i = 0; i < n; ++i) {
    want[i] = silu_ref(xv[i]);
    wd[i] = gv[i] * (silu_ref(xv[i] + h) - silu_ref(xv[i] - h)) / (2 * h);
  }
  check_close(y.to_vector(), want);
  check_close(dx.to_vector(), wd, 1e-4, 1e-4);
  be.swiglu(y, x, u);
  be.swiglu_backward(dx, du, dout, x, u);
  for (size_t i = 0; i < n; ++i) {
    want[i] = silu_ref(xv[i]) * uv[i];
    wd[i] = gv[i] * uv[i] * (silu_ref(xv[i] + h) - silu_ref(xv[i] - h)) / (2 * h);
    wu[i] = gv[i] * silu_ref(xv[i]);
  }
  check_close(y.to_vector(), want);
  check_close(dx.to_vector(), wd, 1e-4, 1e-4);
  check_close(du.to_vector(), wu);

  be.softmax(y, x);
  for (int r = 0; r < 5; ++r) {
    double mx = -1e300, s = 0;
    for (int j = 0; j < 13; ++j) mx = std::max(mx, xv[r * 13 + j]);
    for (int j = 0; j < 13; ++j) s += std::exp(xv[r * 13 + j] - mx);
    for (int j = 0; j < 13; ++j) want[r * 13 + j] = std::exp(xv[r * 13 + j] - mx) / s;
  }
  check_close(y.to_vector(), want);
  be.softmax_backward(dx, dout, y);
  for (int r = 0; r < 5; ++r) {
    double dot = 0;
    for (int j = 0; j < 13; ++j) dot += gv[r * 13 + j] * want[r * 13 + j];
    for (int j = 0; j < 13; ++j) wd[r * 13 + j] = want[r * 13 + j] * (gv[r * 13 + j] - dot);
  }
  check_close(dx.to_vector(), wd);
}

TEST_CASE("cpu backend: embedding and cross_entropy", "[backend]") {
  CpuBackend& be = cpu_backend();
  const int64_t V = 11, C = 6, n = 5;
  Tensor table = rnd({V, C}, 25), ids = ids_tensor({3, 0, 10, 3, 7}, {n});
  const Vec tv = table.to_vector();
  const std::vector<int> idv{3, 0, 10, 3, 7};
  Tensor y = out_like({n, C});
  be.embedding(y, ids, table);
  Vec want(n * C);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < C; ++c) want[i * C + c] = tv[idv[i] * C + c];
  CHECK(y.to_vector() == want);
  Tensor dout = rnd({n, C}, 26), dtable = Tensor::full({V, C}, 1.0);
  const Vec dv = dout.to_vector();
  be.embedding_backward(dtable, dout, ids);  // accumulates
  Vec wt(V * C, 1.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < C; ++c) wt[idv[i] * C + c] += dv[i * C + c];
  check_close(dtable.to_vector(), wt);

  const int64_t N = 4, Vl = 9, Vv = 7;
  Tensor logits = rnd({N, Vl}, 27, DType::f32, 2.0), targets = ids_tensor({2, -1, 6, 0}, {N});
  const std::vector<int> tg{2, -1, 6, 0};
  const Vec lv = logits.to_vector();
  Tensor loss = out_like({}), lse = out_like({N});
  be.cross_entropy(loss, lse, logits, targets, Vv, 3);
  Vec wl(N, 0.0);
  double total = 0;
  for (int64_t i = 0; i < N; ++i) {
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < Vv; ++j) mx = std::max(mx, lv[i * Vl + j]);
    for (int64_t j = 0; j < Vv; ++j) s += std::exp(lv[i * Vl + j] - mx);
    wl[i] = mx + std::log(s);
    if (tg[i] >= 0) total += wl[i] - lv[i * Vl + tg[i]];
  }
  CHECK(loss.item() == Approx(total / 3).epsilon(1e-5));
  const Vec lsev = lse.to_vector();
  for (int64_t i = 0; i < N; ++i)
    if (tg[i] >= 0) CHECK(lsev[i] == Approx(wl[i]).epsilon(1e-5));
  Tensor dl = out_like({N, Vl});
  be.cross_entropy_backward(dl, logits, lse, targets, Tensor::full({}, 2.0), Vv, 3);
  Vec wdl(N * Vl, 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < Vv && tg[i] >= 0; ++j)
      wdl[i * Vl + j] = 2.0 / 3 * (std::exp(lv[i * Vl + j] - wl[i]) - (j == tg[i] ? 1 : 0));
  check_close(dl.to_vector(), wdl);
  Tensor nan_loss = out_like({});
  be.cross_entropy(nan_loss, lse, logits, ids_tensor({-1, -1, -1, -1}, {N}), Vv, 0);
  CHECK(std::isnan(nan_loss.item()));
}

// The rows vocabulary parallelism uses (parallel/vocab_parallel.h): a vocabulary cut in two
// halves, each half's cross_entropy with its v0 (lse of every row; the loss terms of its own
// targets only), the lse combined, and each half's backward with the combined lse, give the
// whole vocabulary's loss and gradient; an embedding id of -1 is a zero row and adds nothing.
TEST_CASE("cpu backend: cross_entropy's v0 and embedding's -1 (a vocabulary cut in halves)", "[backend]") {
  CpuBackend& be = cpu_backend();
  const int64_t N = 5, Vh = 6, V = 2 * Vh, count = 4;
  Tensor logits = rnd({N, V}, 41, DType::f32, 2.0), targets = ids_tensor({1, 7, -1, 11, 5}, {N});
  Tensor loss = out_like({}), lse = out_like({N});
  be.cross_entropy(loss, lse, logits, targets, V, count);
  Tensor dl = out_like({N, V});
  be.cross_entropy_backward(dl, logits, lse, targets, Tensor::full({}, 1.0), V, count);
  Tensor half[2], part[2] = {out_like({}), out_like({})}, hlse[2] = {out_like({N}), out_like({N})};
  for (int h = 0; h < 2; ++h) {
    half[h] = logits.slice(1, h * Vh, (h + 1) * Vh).contiguous();
    be.cross_entropy(part[h], hlse[h], half[h], targets, Vh, count, h * Vh);
  }
  const Vec l0 = hlse[0].to_vector(), l1 = hlse[1].to_vector();
  const std::vector<int> tg{1, 7, -1, 11, 5};
  Vec whole(N);
  double correction = 0;
  for (int64_t i = 0; i < N; ++i) {
    const double m = std::max(l0[i], l1[i]);
    whole[i] = m + std::log(std::exp(l0[i] - m) + std::exp(l1[i] - m));
    if (tg[i] >= 0) correction += whole[i] - (tg[i] < Vh ? l0[i] : l1[i]);
  }
  CHECK(part[0].item() + part[1].item() + correction / count == Approx(loss.item()).epsilon(1e-6));
  Tensor LSE = Tensor::from_vector(whole, {N});
  Vec got;
  for (int h = 0; h < 2; ++h) {
    Tensor d = out_like({N, Vh});
    be.cross_entropy_backward(d, half[h], LSE, targets, Tensor::full({}, 1.0), Vh, count, h * Vh);
    const Vec dv = d.to_vector();
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < Vh; ++j) CHECK(dv[i * Vh + j] == Approx(dl.to_vector()[i * V + h * Vh + j]).margin(1e-6));
  }

  const int64_t C = 3;
  Tensor table = rnd({4, C}, 42), ids = ids_tensor({2, -1, 0}, {3});
  Tensor y = out_like({3, C});
  be.embedding(y, ids, table);
  const Vec yv = y.to_vector(), tv = table.to_vector();
  for (int64_t c = 0; c < C; ++c) {
    CHECK(yv[c] == tv[2 * C + c]);
    CHECK(yv[C + c] == 0.0);  // -1: a zero row
  }
  Tensor dtable = Tensor::zeros({4, C});
  be.embedding_backward(dtable, Tensor::full({3, C}, 1.0), ids);
  CHECK(dtable.to_vector() == Vec{1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0});  // rows 0 and 2 only
}

TEST_CASE("cpu backend: layernorm and rmsnorm forward", "[backend]") {
  CpuBackend& be = cpu_backend();
  const int64_t N = 6, C = 10;
  const double eps = 1e-5;
  Tensor x = rnd({N, C}, 28, DType::f32, 3.0), w = rnd({C}, 29), b = rnd({C}, 30);
  const Vec xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
  Tensor out = out_like({N, C}), mean = out_like({N}), rstd = out_like({N});
  be.layernorm(out, mean, rstd, x, w, b, eps);
  Vec want(N * C), wm(N), wr(N);
  for (int64_t r = 0; r < N; ++r) {
    double m = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) m += xv[r * C + c];
    m /= C;
    for (int64_t c = 0; c < C; ++c) var += (xv[r * C + c] - m) * (xv[r * C + c] - m);
    const double rs = 1 / std::sqrt(var / C + eps);
    wm[r] = m, wr[r] = rs;
    for (int64_t c = 0; c < C; ++c) want[r * C + c] = (xv[r * C + c] - m) * rs * wv[c] + bv[c];
  }
  check_close(out.to_vector(), want);
  check_close(mean.to_vector(), wm);
  check_close(rstd.to_vector(), wr);
  be.layernorm(out, mean, rstd, x, w, Tensor(), eps);  // no bias
  for (int64_t i = 0; i < N * C; ++i) want[i] -= bv[i % C];
  check_close(out.to_vector(), want);

  be.rmsnorm(out, rstd, x, w, eps);
  for (int64_t r = 0; r < N; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += xv[r * C + c] * xv[r * C + c];
    wr[r] = 1 / std::sqrt(ss / C + eps);
    for (int64_t c = 0; c < C; ++c) want[r * C + c] = xv[r * C + c] * wr[r] * wv[c];
  }
  check_close(out.to_vector(), want);
  check_close(rstd.to_vector(), wr);
}

TEST_CASE("cpu backend: rope and causal attention forward", "[backend]") {
  CpuBackend& be = cpu_backend();
  const int64_t B = 2, T = 5, H = 2, D = 6;
  const double theta = 100.0;
  Tensor cos_t = out_like({T, D / 2}), sin_t = out_like({T, D / 2});
  be.rope_tables(cos_t, sin_t, theta);
  Tensor x = rnd({B, T, H, D}, 31), y = out_like({B, T, H, D});
  be.rope(y, x, cos_t, sin_t, false, x.size(2));
  const Vec xv = x.to_vector();
  Vec want(xv.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D / 2; ++d) {
          const double ang = t * std::pow(theta, -2.0 * d / D);
          const int64_t o = ((b * T + t) * H + h) * D;
          want[o + d] = xv[o + d] * std::cos(ang) - xv[o + d + D / 2] * std::sin(ang);
          want[o + d + D / 2] = xv[o + d + D / 2] * std::cos(ang) + xv[o + d] * std::sin(ang);
        }
  check_close(y.to_vector(), want);
  Tensor back = out_like({B, T, H, D});
  be.rope(back, y, cos_t, sin_t, true, x.size(2));  // the inverse rotation undoes it
  check_close(back.to_vector(), xv);

  const int64_t Hq = 4, Hkv = 2, Dh = 3;
  Tensor q = rnd({B, T, Hq, Dh}, 32), k = rnd({B, T, Hkv, Dh}, 33), v = rnd({B, T, Hkv, Dh}, 34);
  const Vec qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector();
  Tensor o = out_like({B, T, Hq, Dh});
  Tensor lse = be.attention(o, q, k, v, /*keep_for_backward=*/true);
  REQUIRE(lse.defined());
  CHECK(lse.shape() == Shape{B, Hq, T});  // the row log-sum-exp, not the (B, Hq, T, T) probabilities
  Vec wo(o.numel(), 0.0), wlse(lse.numel());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / (Hq / Hkv);
      for (int64_t i = 0; i < T; ++i) {
        Vec s(i + 1);
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < Dh; ++d)
            dot += qv[((b * T + i) * Hq + h) * Dh + d] * kv[((b * T + j) * Hkv + hk) * Dh + d];
          s[j] = dot / std::sqrt(double(Dh));
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= i; ++j) z += (s[j] = std::exp(s[j] - mx));
        wlse[(b * Hq + h) * T + i] = mx + std::log(z);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < Dh; ++d)
            wo[((b * T + i) * Hq + h) * Dh + d] += s[j] / z * vv[((b * T + j) * Hkv + hk) * Dh + d];
      }
    }
  check_close(o.to_vector(), wo);
  check_close(lse.to_vector(), wlse);
  Tensor o2 = out_like({B, T, Hq, Dh});
  CHECK_FALSE(be.attention(o2, q, k, v, /*keep_for_backward=*/false).defined());
  CHECK(o2.to_vector() == o.to_vector());
}

// ---------------------------------------------------------------------------------------------
// the ops' device and dtype checks

