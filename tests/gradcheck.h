// defines: gradcheck — float64 finite-difference check of an op's gradients (test helper).
//
// For an op y = f(x_0, ..., x_n) with float64 inputs, picks a fixed random R shaped like y and
// compares the analytic gradients of L = sum(y * R) (one backward with grad_out = R) against
// central differences (L(x + h e_i) - L(x - h e_i)) / 2h for every element of every input that
// requires grad. Tolerance: |a - n| <= atol + rtol * |n|.
#pragma once
#include <catch2/catch.hpp>
#include <functional>
#include <vector>

#include "autograd/var.h"
#include "core/rng.h"

namespace zt::test {

// A float64 tensor of the shape with N(0, 1) entries (seeded: every run checks the same point).
inline Tensor randn(const Shape& shape, uint64_t seed, double std = 1.0, DType dt = DType::f64) {
  Rng r(seed);
  Tensor t = Tensor::empty(shape, dt);
  r.fill_normal(t, 0.0, std);
  return t;
}

inline double weighted_sum(const Tensor& y, const Tensor& R) {
  auto a = y.to_vector(), b = R.to_vector();
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// inputs: the op's tensors (float64); needs_grad[i]: whether input i is differentiated.
inline void gradcheck(const std::function<Var(const std::vector<Var>&)>& f, const std::vector<Tensor>& inputs,
                      std::vector<bool> needs_grad = {}, double h = 1e-6, double atol = 1e-7, double rtol = 1e-5) {
  if (needs_grad.empty()) needs_grad.assign(inputs.size(), true);
  std::vector<Var> vars;
  for (size_t i = 0; i < inputs.size(); ++i) vars.emplace_back(inputs[i].clone(), static_cast<bool>(needs_grad[i]));
  Var y = f(vars);
  REQUIRE(y.dtype() == DType::f64);
  Tensor R = randn(y.shape(), 7);
  y.backward(R);

  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!needs_grad[i]) continue;
    INFO("input " << i << " " << inputs[i].str());
    REQUIRE(vars[i].grad().defined());
    std::vector<double> analytic = vars[i].grad().to_vector();
    Tensor x = inputs[i].clone();
    double* p = x.data<double>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double orig = p[j];
      auto eval = [&](double v) {
        p[j] = v;
        std::vector<Var> vs;
        for (size_t k = 0; k < inputs.size(); ++k) vs.emplace_back(k == i ? x.clone() : inputs[k].clone(), false);
        NoGradGuard ng;
        return weighted_sum(f(vs).value(), R);
      };
      const double numeric = (eval(orig + h) - eval(orig - h)) / (2 * h);
      p[j] = orig;
      INFO("element " << j << ": analytic " << analytic[j] << " numeric " << numeric);
      CHECK(std::abs(analytic[j] - numeric) <= atol + rtol * std::abs(numeric));
    }
  }
}

}  // namespace zt::test
