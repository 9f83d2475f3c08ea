// defines: 4 Catch2 test cases tagged [rng], [partitioned_init]; helpers: sequential_init, small
//
// Partitioned construction's foundation (models/init.h): Rng::jump, and ModelInit's values — for
// any range of any unit — bitwise equal to the sequential whole-model initialization, which this
// file re-implements independently (Rng::fill_normal over each parameter in order: the algorithm
// every checkpoint and reference number of the project was made with).
#include <catch2/catch.hpp>

#include "models/gpt2.h"
#include "models/init.h"
#include "models/llama.h"
#include "tests/bitwise.h"

using namespace zt;

namespace {

// The sequential initialization, parameter by parameter from one Rng (the pre-partitioning code).
void sequential_init(Model& m, Rng& rng) {
  for (Unit* u : m.units()) {
    ParamSet& ps = u->params();
    for (int i = 0; i < ps.size(); ++i) {
      const std::string& name = ps.infos()[i].name;
      const InitRule rule = m.family() == "gpt2" ? dynamic_cast<GPT2&>(m).init_rule(name)
                                                 : dynamic_cast<Llama&>(m).init_rule(name);
      Tensor w = ps.value(i);
      if (rule.kind == InitRule::constant) {
        w.fill_(rule.value);
        continue;
      }
      const int64_t rows = rule.rows < 0 ? w.size(0) : rule.rows;
      Tensor head = w.slice(0, 0, rows);
      rng.fill_normal(head, 0.0, rule.value);
      if (rows < w.size(0)) w.slice(0, rows, w.size(0)).zero_();
    }
  }
}

ModelConfig small(const std::string& family) {
  ModelConfig c = model_config(family == "gpt2" ? "gpt-mini" : "llama-nano");
  c.n_layer = 2;
  return c;
}

}  // namespace

TEST_CASE("Rng::jump(n) lands where n draws do", "[rng]") {
  for (uint64_t n : {0ull, 1ull, 2ull, 63ull, 64ull, 1000ull, 123457ull}) {
    Rng a(7), b(7);
    for (uint64_t i = 0; i < n; ++i) a.next_u32();
    b.jump(n);
    INFO("n = " << n);
    CHECK(a.state() == b.state());
    CHECK(a.next_u32() == b.next_u32());
  }
}

TEST_CASE("init_model equals the sequential initialization bit for bit", "[partitioned_init]") {
  for (const char* family : {"gpt2", "llama"})
    for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
      INFO(family << " " << dtype_name(dt));
      ModelOptions o;
      o.dtype = dt;
      auto a = make_model(small(family), o), b = make_model(small(family), o);
      Rng ra(1337), rb(1337);
      init_model(*a, ra);
      sequential_init(*b, rb);
      CHECK(ra.state() == rb.state());  // the stream continues where the whole model's draws end
      for (size_t u = 0; u < a->units().size(); ++u)
        CHECK(test::bitwise_equal(a->units()[u]->params().flat(), b->units()[u]->params().flat()));
    }
}

TEST_CASE("each rank's shard drawn alone equals its slice of the whole model", "[partitioned_init]") {
  for (const char* family : {"gpt2", "llama"})
    for (int64_t N : {1, 2, 4, 3}) {
      INFO(family << " N = " << N);
      ModelOptions whole_opt;
      whole_opt.world_size = N;
      whole_opt.alignment = 1;  // odd shard boundaries: pairs of the Box-Muller stream split across ranks
      auto whole = make_model(small(family), whole_opt);
      Rng r1(42);
      sequential_init(*whole, r1);
      ModelOptions lazy_opt = whole_opt;
      lazy_opt.materialize = false;
      auto lazy = make_model(small(family), lazy_opt);
      Rng r2(42);
      ModelInit init(*lazy, r2);
      CHECK(r1.state() == r2.state());
      std::vector<Unit*> us = lazy->units();
      for (size_t u = 0; u < us.size(); ++u) {
        CHECK_FALSE(us[u]->params().flat().storage()->resident());  // laid out, no bytes
        const int64_t P = us[u]->params().padded_numel(), S = P / N;
        for (int64_t r = 0; r < N; ++r) {
          Tensor shard = Tensor::empty({S}, DType::f32, Category::params);
          init.fill(static_cast<int>(u), r * S, shard);
          CHECK(test::bitwise_equal(shard, whole->units()[u]->params().flat().flat_view(r * S, {S})));
        }
        // and an arbitrary odd range crossing parameter boundaries
        const int64_t lo = P / 3 | 1, n = std::min<int64_t>(P - lo, 1001);
        Tensor part = Tensor::empty({n}, DType::f32, Category::params);
        init.fill(static_cast<int>(u), lo, part);
        CHECK(test::bitwise_equal(part, whole->units()[u]->params().flat().flat_view(lo, {n})));
      }
    }
}

TEST_CASE("ModelInit rejects a range outside the unit", "[partitioned_init]") {
  ModelOptions o;
  o.materialize = false;
  auto m = make_model(small("gpt2"), o);
  Rng r(1);
  ModelInit init(*m, r);
  const int64_t P = m->units()[0]->params().padded_numel();
  Tensor t = Tensor::empty({8}, DType::f32, Category::params);
  CHECK_THROWS_WITH(init.fill(0, P - 4, t), Catch::Contains("of unit 0"));
  CHECK_THROWS_WITH(init.fill(99, 0, t), Catch::Contains("no unit 99"));
  CHECK_THROWS_WITH(init_model(*m, r), Catch::Contains("holds no bytes"));
}
