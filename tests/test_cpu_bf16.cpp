// defines: 3 Catch2 test cases tagged [backend], [bf16], [models]; helpers: round_bf16, rounded
//
// bfloat16 compute on the cpu (core/cpu_bf16.h): each entry is the float32 kernel on the
// bfloat16 inputs (exact in float32), its outputs rounded once to nearest even; statistics stay
// float32; accumulating entries add to what the output holds. And a model built in bfloat16 is its
// float32 twin rounded, with a loss and gradients that track the float32 model's.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/ops.h"
#include "core/cpu_backend.h"
#include "core/kernels/accumulate.h"
#include "models/init.h"
#include "tests/backend_test_util.h"

using namespace zt;
using zt::test::rnd;
using zt::test::Vec;

namespace {

// The bfloat16 rounding (nearest even) of float32 values: what one bf16 output element must be.
Vec round_bf16(const Tensor& f32) {
  Vec v = f32.to_vector();
  for (double& x : v) x = bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
  return v;
}

Tensor rounded(const Shape& s, uint64_t seed) { return rnd(s, seed).to(DType::bf16); }

}  // namespace

TEST_CASE("cpu bf16: the float32 kernel on the inputs, each output rounded once", "[backend][bf16]") {
  CpuBackend& be = cpu_backend();
  Tensor x = rounded({4, 8}, 1), w = rounded({6, 8}, 2), b = rounded({6}, 3);
  // linear: y = x w^T + b
  Tensor y = Tensor::full({4, 6}, std::nan(""), DType::bf16);
  be.linear(y, x, w, b);
  Tensor y32 = Tensor::empty({4, 6}, DType::f32);
  be.linear(y32, x.to(DType::f32), w.to(DType::f32), b.to(DType::f32));
  CHECK(y.to_vector() == round_bf16(y32));
  // gelu
  Tensor g = Tensor::full({4, 8}, std::nan(""), DType::bf16), g32 = Tensor::empty({4, 8}, DType::f32);
  be.gelu(g, x);
  be.gelu(g32, x.to(DType::f32));
  CHECK(g.to_vector() == round_bf16(g32));
  // layernorm: out rounded, mean and rstd float32 (stats_dtype), equal to the float32 run's
  Tensor lw = rounded({8}, 4), lb = rounded({8}, 5);
  Tensor out = Tensor::empty({4, 8}, DType::bf16), mean = Tensor::empty({4}, DType::f32), rstd = Tensor::empty({4}, DType::f32);
  be.layernorm(out, mean, rstd, x, lw, lb, 1e-5);
  Tensor out32 = Tensor::empty({4, 8}, DType::f32), mean32 = Tensor::empty({4}, DType::f32), rstd32 = Tensor::empty({4}, DType::f32);
  be.layernorm(out32, mean32, rstd32, x.to(DType::f32), lw.to(DType::f32), lb.to(DType::f32), 1e-5);
  CHECK(out.to_vector() == round_bf16(out32));
  CHECK(mean.to_vector() == mean32.to_vector());
  CHECK(rstd.to_vector() == rstd32.to_vector());
}

TEST_CASE("cpu bf16: accumulating entries add to what they hold, then round once", "[backend][bf16]") {
  CpuBackend& be = cpu_backend();
  Tensor x = rounded({5, 8}, 6), w = rounded({3, 8}, 7), dy = rounded({5, 3}, 8);
  Tensor dw = rounded({3, 8}, 9), db = rounded({3}, 10);
  const Tensor dw0 = dw.to(DType::f32), db0 = db.to(DType::f32);
  be.linear_backward(Tensor(), dw, db, dy, x, w, /*accumulate=*/true);
  Tensor dw32 = dw0.clone(), db32 = db0.clone();
  be.linear_backward(Tensor(), dw32, db32, dy.to(DType::f32), x.to(DType::f32), w.to(DType::f32), true);
  CHECK(dw.to_vector() == round_bf16(dw32));
  CHECK(db.to_vector() == round_bf16(db32));
  CHECK(dw.to_vector() != dw0.to_vector());  // something was added
  // autograd's gradient accumulation (accumulate_) on a bfloat16 destination
  Tensor acc = rounded({8}, 11), add = rounded({8}, 12);
  Tensor want = acc.to(DType::f32);
  accumulate_(want, add.to(DType::f32), 0.5);
  accumulate_(acc, add, 0.5);
  CHECK(acc.to_vector() == round_bf16(want));
  CHECK_THROWS_WITH(accumulate_(acc, add.to(DType::f32)), Catch::Contains("accumulate_: dtype float32 into bfloat16"));
}

TEST_CASE("a model built in bf16 is its float32 twin rounded, with loss and gradients near float32", "[models][bf16]") {
  for (const char* name : {"gpt2-nano", "llama-nano"}) {
    INFO(name);
    ModelConfig c = model_config(name);
    c.n_layer = 2, c.max_seq_len = 16;
    auto m32 = make_model(c);
    auto m16 = make_model(c, ModelOptions{.dtype = DType::bf16});
    Rng r1(3), r2(3);
    init_model(*m32, r1);
    init_model(*m16, r2);
    const auto u32 = m32->units(), u16 = m16->units();
    REQUIRE(u32.size() == u16.size());
    for (size_t u = 0; u < u32.size(); ++u) {
      REQUIRE(u16[u]->params().flat().dtype() == DType::bf16);
      CHECK(u16[u]->params().flat().to_vector() == round_bf16(u32[u]->params().flat()));
    }
    // Start both from the same (bf16-representable) weights, so only the compute dtype differs.
    for (size_t u = 0; u < u32.size(); ++u) Tensor(u32[u]->params().flat()).copy_(u16[u]->params().flat());
    Tensor idx = Tensor::empty({2, 16}, DType::i32), tgt = Tensor::empty({2, 16}, DType::i32);
    for (int64_t i = 0; i < 32; ++i) {
      idx.data<int32_t>()[i] = static_cast<int32_t>((7 * i + 3) % c.vocab_size);
      tgt.data<int32_t>()[i] = static_cast<int32_t>((5 * i + 1) % c.vocab_size);
    }
    m32->zero_grad();
    m16->zero_grad();
    Var l32 = m32->loss(idx, tgt), l16 = m16->loss(idx, tgt);
    CHECK(l16.dtype() == DType::f32);  // the loss is a float32 statistic of bf16 logits
    CHECK(std::abs(l16.value().item() - l32.value().item()) <= 1e-2 * std::abs(l32.value().item()));
    l32.backward();
    l16.backward();
    // Every unit's gradient: the relative L2 distance to float32's within bf16's few-ulp budget.
    for (size_t u = 0; u < u32.size(); ++u) {
      INFO("unit " << u32[u]->name());
      const Vec a = u16[u]->params().flat_grad().to_vector(), b = u32[u]->params().flat_grad().to_vector();
      double diff = 0, norm = 0;
      for (size_t k = 0; k < a.size(); ++k) {
        diff += (a[k] - b[k]) * (a[k] - b[k]);
        norm += b[k] * b[k];
      }
      REQUIRE(norm > 0);
      CHECK(std::sqrt(diff / norm) < 5e-2);
    }
  }
}
