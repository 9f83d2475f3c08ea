// defines: 12 Catch2 test cases tagged [optim], [adamw], [shard], [sgd], [schedule], [clip]; helpers:
//          make_set, fill_grad, decay_mask, RefAdamW, RefSgd, check_close and 1 more
//
// optim: AdamW and SGD against scalar double-precision references of PyTorch's updates, the LR
// schedule at hand-computed points, gradient clipping, and updates restricted to flat shards.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>
#include <vector>

#include "core/kernels/shard_norm.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "zero/param_layout.h"

using namespace zt;

namespace {

// A unit with decayed weights and undecayed 1-D parameters, padded (world 4 x alignment 8), so
// shards cut through parameters and the padding is exercised. `big` adds a weight above the
// kernels' parallel threshold (2^15 elements) so the OpenMP path runs too.
std::unique_ptr<ParamSet> make_set(DType dt, bool big = false) {
  auto ps = std::make_unique<ParamSet>("unit", dt);
  ps->add("attn.weight", {3, 5}, true);
  ps->add("attn.bias", {5}, false);
  ps->add("ln.weight", {7}, false);
  ps->add("mlp.weight", {4, 6}, true);
  if (big) ps->add("big.weight", {200, 200}, true);
  ps->finalize(4, 8);
  Rng r(7);
  Tensor vals = ps->flat().flat_view(0, {ps->numel()});
  r.fill_normal(vals, 0.0, 1.0);
  return ps;
}

// Deterministic gradient for step t (the pad stays zero, as backward leaves it).
void fill_grad(ParamSet& ps, int t) {
  Rng r(1000 + t);
  Tensor g = ps.flat_grad().flat_view(0, {ps.numel()});
  r.fill_normal(g, 0.0, 0.5);
}

// Per-element decay flags of the flat buffer (padding: false).
std::vector<bool> decay_mask(const ParamSet& ps) {
  std::vector<bool> d(ps.padded_numel(), false);
  for (const ParamInfo& p : ps.infos())
    for (int64_t i = 0; i < p.numel; ++i) d[p.offset + i] = p.decay;
  return d;
}

// torch.optim.AdamW (_single_tensor_adamw), written out per element in double.
struct RefAdamW {
  AdamWHyper h;
  std::vector<double> p, m, v;
  std::vector<bool> decay;
  int t = 0;
  void step(const std::vector<double>& g) {
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      if (decay[i]) p[i] *= 1 - h.lr * h.weight_decay;
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g[i];
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * g[i] * g[i];
      const double bc1 = 1 - std::pow(h.beta1, t), bc2 = 1 - std::pow(h.beta2, t);
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + h.eps;
      p[i] -= h.lr / bc1 * m[i] / denom;
    }
  }
};

// torch.optim.SGD (_single_tensor_sgd, dampening 0), per element in double.
struct RefSgd {
  SgdHyper h;
  std::vector<double> p, buf;
  std::vector<bool> decay;
  void step(const std::vector<double>& g) {
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + (decay[i] ? h.weight_decay * p[i] : 0.0);
      if (h.momentum > 0) {
        buf[i] = h.momentum * buf[i] + d;
        d = h.nesterov ? d + h.momentum * buf[i] : buf[i];
      }
      p[i] -= h.lr * d;
    }
  }
};

void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}

AdamWHyper test_hyper() {
  AdamWHyper h;
  h.lr = 1e-2;
  h.beta1 = 0.8;
  h.beta2 = 0.95;
  h.eps = 1e-6;
  h.weight_decay = 0.1;
  return h;
}

}  // namespace

TEST_CASE("AdamW matches a double-precision PyTorch reference", "[optim][adamw]") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO("dtype " << dtype_name(dt));
    auto ps = make_set(dt, /*big=*/dt == DType::f32);
    const AdamWHyper h = test_hyper();
    AdamW opt(full_shards({ps.get()}, "AdamW"), h);
    RefAdamW ref{h, ps->flat().to_vector(), std::vector<double>(ps->padded_numel(), 0.0),
                 std::vector<double>(ps->padded_numel(), 0.0), decay_mask(*ps)};
    const std::vector<double> p0 = ps->flat().to_vector();
    for (int t = 1; t <= 6; ++t) {
      fill_grad(*ps, t);
      ref.step(ps->flat_grad().to_vector());
      opt.step();
    }
    CHECK(opt.step_count() == 6);
    // float64 agrees to rounding; float32 to its precision over 6 steps of size ~lr.
    const double atol = dt == DType::f64 ? 1e-13 : 2e-6, rtol = dt == DType::f64 ? 1e-12 : 1e-5;
    check_close(ps->flat().to_vector(), ref.p, atol, rtol);
    check_close(opt.exp_avg(0).to_vector(), ref.m, atol, rtol);
    check_close(opt.exp_avg_sq(0).to_vector(), ref.v, atol * 1e-2, rtol);
    CHECK(opt.exp_avg(0).category() == Category::optim);
    CHECK(opt.state_bytes() == 2 * ps->padded_numel() * static_cast<int64_t>(dtype_size(dt)));
    // The padding is neither a parameter nor decayed: it stays exactly zero.
    const auto p = ps->flat().to_vector();
    for (int64_t i = ps->numel(); i < ps->padded_numel(); ++i) CHECK(p[i] == 0.0);
    // Sanity that the test can fail: the parameters moved by ~lr per step, far past the
    // tolerance (and the decay alone moves a weight by 6 lr wd |p| = 6e-3 |p|).
    double moved = 0;
    for (int64_t i = 0; i < ps->numel(); ++i) moved += std::abs(p[i] - p0[i]);
    CHECK(moved / ps->numel() > 5e-3);
  }
}

TEST_CASE("AdamW weight decay follows ParamInfo::decay and the bias correction", "[optim][adamw]") {
  // One step with g = 0 for one element of each kind: decayed weights shrink by exactly
  // (1 - lr wd), undecayed ones do not move. With g != 0 at step 1, m_hat / sqrt(v_hat) = sign(g),
  // so the update is lr * sign(g) up to eps (the bias correction at work).
  auto ps = make_set(DType::f64);
  AdamWHyper h = test_hyper();
  h.eps = 1e-12;  // not 0: an element with g = 0 at step 1 computes 0 / (0 + eps)
  AdamW opt(full_shards({ps.get()}, "AdamW"), h);
  const auto p0 = ps->flat().to_vector();
  ps->zero_grad();
  const int64_t b = ps->infos()[1].offset, w = ps->infos()[0].offset;
  ps->flat_grad().data<double>()[w + 1] = -3.0;
  ps->flat_grad().data<double>()[b + 1] = 0.25;
  opt.step();
  const auto p1 = ps->flat().to_vector();
  CHECK(p1[w] == Approx(p0[w] * (1 - h.lr * h.weight_decay)).epsilon(1e-14));
  CHECK(p1[b] == p0[b]);
  CHECK(p1[w + 1] == Approx(p0[w + 1] * (1 - h.lr * h.weight_decay) + h.lr).epsilon(1e-12));
  CHECK(p1[b + 1] == Approx(p0[b + 1] - h.lr).epsilon(1e-12));
}

TEST_CASE("AdamW state round-trips through load_state", "[optim][adamw]") {
  auto a = make_set(DType::f32), b = make_set(DType::f32);
  AdamW oa(full_shards({a.get()}, "AdamW"), test_hyper()), ob(full_shards({b.get()}, "AdamW"), test_hyper());
  for (int t = 1; t <= 3; ++t) {
    fill_grad(*a, t);
    oa.step();
  }
  Tensor bflat = b->flat();
  bflat.copy_(a->flat());
  ob.load_state(oa.step_count(), {oa.exp_avg(0).clone()}, {oa.exp_avg_sq(0).clone()});
  CHECK(ob.step_count() == 3);
  for (int t = 4; t <= 5; ++t) {
    fill_grad(*a, t);
    fill_grad(*b, t);
    oa.step();
    ob.step();
  }
  CHECK(a->flat().to_vector() == b->flat().to_vector());  // a resumed run is bitwise identical
  CHECK_THROWS_WITH(ob.load_state(3, {oa.exp_avg(0)}, {}), Catch::Contains("one each per shard"));
  CHECK_THROWS_WITH(ob.load_state(3, {Tensor::zeros({5})}, {Tensor::zeros({5})}),
                    Catch::Contains("shard 'unit'"));
}

TEST_CASE("AdamW on a shard lo..hi equals the full update restricted to it", "[optim][adamw][shard]") {
  auto full = make_set(DType::f32, /*big=*/true);
  AdamW ofull(full_shards({full.get()}, "AdamW"), test_hyper());
  const int64_t P = full->padded_numel(), S = P / 4;
  // Four "ranks", each owning [r S, (r+1) S) of a copy of the same unit (what ZeRO stage 1 does),
  // plus one arbitrary range cutting through parameters.
  std::vector<std::unique_ptr<ParamSet>> ranks;
  std::vector<AdamW> opts;
  std::vector<std::pair<int64_t, int64_t>> ranges = {{0, S}, {S, 2 * S}, {2 * S, 3 * S}, {3 * S, P}, {7, 50}};
  for (auto [lo, hi] : ranges) {
    ranks.push_back(make_set(DType::f32, true));
    opts.emplace_back(std::vector<FlatShard>{shard_of(*ranks.back(), lo, hi)}, test_hyper());
  }
  const auto p0 = full->flat().to_vector();
  for (int t = 1; t <= 3; ++t) {
    fill_grad(*full, t);
    ofull.step();
    for (size_t r = 0; r < ranks.size(); ++r) {
      fill_grad(*ranks[r], t);
      opts[r].step();
    }
  }
  const auto pf = full->flat().to_vector(), mf = ofull.exp_avg(0).to_vector();
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto [lo, hi] = ranges[r];
    INFO("range [" << lo << ", " << hi << ")");
    const auto pr = ranks[r]->flat().to_vector(), mr = opts[r].exp_avg(0).to_vector();
    REQUIRE(static_cast<int64_t>(mr.size()) == hi - lo);
    bool inside = true, outside = true, moments = true;
    for (int64_t i = 0; i < P; ++i) {
      if (i >= lo && i < hi) {
        inside = inside && pr[i] == pf[i];  // bitwise
        moments = moments && mr[i - lo] == mf[i];
      } else {
        outside = outside && pr[i] == p0[i];  // not this rank's: untouched
      }
    }
    CHECK(inside);
    CHECK(moments);
    CHECK(outside);
  }
}

TEST_CASE("AdamW is bitwise independent of the thread count", "[optim][adamw]") {
  std::vector<std::vector<double>> out;
  const int before = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    auto ps = make_set(DType::f32, true);
    AdamW opt(full_shards({ps.get()}, "AdamW"), test_hyper());
    for (int t = 1; t <= 2; ++t) {
      fill_grad(*ps, t);
      opt.step();
    }
    out.push_back(ps->flat().to_vector());
  }
  set_num_threads(before);
  CHECK(out[0] == out[1]);
}

TEST_CASE("optimizer inputs are validated", "[optim]") {
  auto ps = make_set(DType::f32);
  AdamWHyper h;
  h.beta1 = 1.0;
  CHECK_THROWS_WITH(AdamW(full_shards({ps.get()}, "AdamW"), h), Catch::Contains("beta1"));
  h = AdamWHyper{};
  h.lr = -1;
  CHECK_THROWS_WITH(AdamW(full_shards({ps.get()}, "AdamW"), h), Catch::Contains("lr = -1"));
  CHECK_THROWS_WITH(shard_of(*ps, 10, ps->padded_numel() + 1), Catch::Contains("outside its flat buffer"));
  FlatShard bad = shard_of(*ps, 0, 16);
  bad.grad = Tensor::zeros({15});
  CHECK_THROWS_WITH(AdamW({bad}, AdamWHyper{}), Catch::Contains("grad is float32(15"));
  bad.grad = Tensor::zeros({16}, DType::f64);
  CHECK_THROWS_WITH(AdamW({bad}, AdamWHyper{}), Catch::Contains("param is float32 but grad is float64"));
  SgdHyper s;
  s.nesterov = true;
  CHECK_THROWS_WITH(Sgd(full_shards({ps.get()}, "SGD"), s), Catch::Contains("nesterov"));
  ParamSet unfinalized("u");
  unfinalized.add("w", {2}, true);
  CHECK_THROWS_WITH(AdamW(full_shards({&unfinalized}, "AdamW"), AdamWHyper{}), Catch::Contains("not finalized"));
}

TEST_CASE("decay segments cover a shard in order", "[optim][shard]") {
  auto ps = make_set(DType::f32);  // 15 decay | 5 + 7 no decay | 24 decay | pad (numel 51, padded 64)
  auto segs = decay_segments(full_shard(*ps));
  REQUIRE(segs.size() == 4);
  CHECK((segs[0].begin == 0 && segs[0].end == 15 && segs[0].decay));
  CHECK((segs[1].begin == 15 && segs[1].end == 27 && !segs[1].decay));  // bias and ln merged
  CHECK((segs[2].begin == 27 && segs[2].end == 51 && segs[2].decay));
  CHECK((segs[3].begin == 51 && segs[3].end == 64 && !segs[3].decay));  // padding
  segs = decay_segments(shard_of(*ps, 10, 30));  // shard-local coordinates
  REQUIRE(segs.size() == 3);
  CHECK((segs[0].begin == 0 && segs[0].end == 5 && segs[0].decay));
  CHECK((segs[1].begin == 5 && segs[1].end == 17 && !segs[1].decay));
  CHECK((segs[2].begin == 17 && segs[2].end == 20 && segs[2].decay));
}

TEST_CASE("SGD with momentum matches a double-precision PyTorch reference", "[optim][sgd]") {
  struct Case {
    double momentum, wd;
    bool nesterov;
  };
  for (Case c : {Case{0.9, 0.01, false}, Case{0.9, 0.05, true}, Case{0.0, 0.1, false}}) {
    for (DType dt : {DType::f64, DType::f32}) {
      INFO("momentum " << c.momentum << " nesterov " << c.nesterov << " dtype " << dtype_name(dt));
      auto ps = make_set(dt, dt == DType::f32);
      SgdHyper h{0.05, c.momentum, c.wd, c.nesterov};
      Sgd opt(full_shards({ps.get()}, "SGD"), h);
      RefSgd ref{h, ps->flat().to_vector(), std::vector<double>(ps->padded_numel(), 0.0), decay_mask(*ps)};
      for (int t = 1; t <= 5; ++t) {
        fill_grad(*ps, t);
        ref.step(ps->flat_grad().to_vector());
        opt.step();
      }
      const double atol = dt == DType::f64 ? 1e-13 : 2e-6, rtol = dt == DType::f64 ? 1e-12 : 1e-5;
      check_close(ps->flat().to_vector(), ref.p, atol, rtol);
      if (c.momentum > 0)
        check_close(opt.momentum_buffer(0).to_vector(), ref.buf, atol, rtol);
      else
        CHECK_FALSE(opt.momentum_buffer(0).defined());  // plain SGD keeps no state
    }
  }
}

TEST_CASE("SGD on a shard equals the full update restricted to it", "[optim][sgd][shard]") {
  auto full = make_set(DType::f32, true), part = make_set(DType::f32, true);
  SgdHyper h{0.05, 0.9, 0.01, false};
  Sgd a(full_shards({full.get()}, "SGD"), h);
  Sgd b({shard_of(*part, 13, 40013)}, h);
  for (int t = 1; t <= 3; ++t) {
    fill_grad(*full, t);
    fill_grad(*part, t);
    a.step();
    b.step();
  }
  const auto pa = full->flat().to_vector(), pb = part->flat().to_vector();
  bool same = true;
  for (int64_t i = 13; i < 40013; ++i) same = same && pa[i] == pb[i];
  CHECK(same);

  // And one thread gives the same bits as two.
  const int before = num_threads();
  set_num_threads(1);
  auto one = make_set(DType::f32, true);
  Sgd c(full_shards({one.get()}, "SGD"), h);
  for (int t = 1; t <= 3; ++t) {
    fill_grad(*one, t);
    c.step();
  }
  set_num_threads(before);
  CHECK(one->flat().to_vector() == pa);
}

TEST_CASE("llm.c's schedules at warmup - peak and end", "[optim][schedule]") {
  SchedulerConfig s = SchedulerConfig::defaults(SchedulerType::cosine);
  s.warmup_num_steps = 10;
  s.total_num_steps = 110;
  s.cos_min_ratio = 0.1;
  s.validate();
  auto at = [](const SchedulerConfig& c, double lr, int64_t step) { return scheduled_lr(c, lr, step, step, 1000); };
  CHECK(at(s, 1e-3, 0) == Approx(1e-4));  // (0 + 1) / 10 of the peak: step 0 already learns
  CHECK(at(s, 1e-3, 4) == Approx(5e-4));
  CHECK(at(s, 1e-3, 9) == Approx(1e-3));     // end of warmup
  CHECK(at(s, 1e-3, 10) == Approx(1e-3));    // peak: decay ratio 0
  CHECK(at(s, 1e-3, 60) == Approx(5.5e-4));  // ratio 1/2: min + (lr - min) / 2
  CHECK(at(s, 1e-3, 35) == Approx(1e-4 + 9e-4 * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(at(s, 1e-3, 110) == Approx(1e-4));  // min_lr = lr * cos_min_ratio at total_num_steps
  CHECK(at(s, 1e-3, 500) == Approx(1e-4));  // and beyond
  for (int64_t t = 11; t <= 110; ++t) CHECK(at(s, 1e-3, t) <= at(s, 1e-3, t - 1));
  // total_num_steps 0: the run's steps
  s.total_num_steps = 0;
  CHECK(scheduled_lr(s, 1e-3, 60, 60, 110) == Approx(5.5e-4));

  SchedulerConfig c = SchedulerConfig::defaults(scheduler_type_from_name("constant"));
  c.warmup_num_steps = 4;
  c.validate();
  CHECK(at(c, 0.5, 0) == Approx(0.125));
  CHECK(at(c, 0.5, 3) == Approx(0.5));
  CHECK(at(c, 0.5, 1000) == Approx(0.5));
  c.warmup_num_steps = 0;
  CHECK(at(c, 0.5, 0) == Approx(0.5));
  CHECK(at(SchedulerConfig{}, 0.5, 7) == 0.5);  // none: the optimizer's lr

  SchedulerConfig bad = SchedulerConfig::defaults(SchedulerType::cosine);
  bad.warmup_num_steps = 10;
  bad.total_num_steps = 5;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("total_num_steps = 5 is invalid for cosine"));
  // a run shorter than the warmup (total_num_steps 0: the run's) only warms up: no error
  SchedulerConfig short_run = SchedulerConfig::defaults(SchedulerType::cosine);
  short_run.warmup_num_steps = 50;
  CHECK_NOTHROW(short_run.validate(20));
  CHECK(scheduled_lr(short_run, 1.0, 19, 19, 20) == Approx(20.0 / 50));
  bad = s;
  bad.cos_min_ratio = 2;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("cos_min_ratio = 2 is invalid"));
  CHECK_THROWS_WITH(scheduler_type_from_name("linear"), Catch::Contains("'linear' is unknown"));
  CHECK_THROWS_WITH(warmup_type_from_name("exp"), Catch::Contains("expected \"log\" or \"linear\""));
}

// DeepSpeed's three against a transcription of deepspeed/runtime/lr_schedules.py (WarmupLR,
// WarmupDecayLR, WarmupCosineLR, with warmup_type) run in Python the way DeepSpeedEngine drives
// them: the lr set at construction (last_batch_iteration -1), scheduler.step() after each applied
// optimizer step. Each list is the lr of applied steps 0, 1, 2, ... as Python printed it.
TEST_CASE("DeepSpeed's schedulers give DeepSpeed's learning rates", "[optim][schedule]") {
  auto curve = [](SchedulerConfig s, double lr, const std::vector<double>& want) {
    s.validate(static_cast<int64_t>(want.size()));
    for (size_t k = 0; k < want.size(); ++k) {
      const int64_t n = static_cast<int64_t>(k);
      INFO(scheduler_type_name(s.type) << " step " << k);
      CHECK(scheduled_lr(s, lr, n, n, 100) == Approx(want[k]).epsilon(1e-14).margin(1e-18));
    }
  };
  SchedulerConfig w = SchedulerConfig::defaults(SchedulerType::warmup_lr);  // log warmup: DeepSpeed's default
  w.warmup_min_lr = 1e-5;
  w.warmup_max_lr = 3e-3;
  w.warmup_num_steps = 5;
  curve(w, 0, {1e-05, 1e-05, 0.0012977229086394452, 0.0020509925215130963, 0.0025854458172788904, 0.003, 0.003, 0.003});
  w = SchedulerConfig::defaults(SchedulerType::warmup_lr);
  w.warmup_max_lr = 0.002;
  w.warmup_num_steps = 4;
  w.warmup_type = WarmupType::linear;
  curve(w, 0, {0.0, 0.0, 0.0005, 0.001, 0.0015, 0.002, 0.002});
  SchedulerConfig d = SchedulerConfig::defaults(SchedulerType::warmup_decay_lr);
  d.warmup_max_lr = 0.01;
  d.warmup_num_steps = 3;
  d.warmup_type = WarmupType::linear;
  d.total_num_steps = 10;
  curve(d, 0,
        {0.0, 0.0, 0.003333333333333333, 0.006666666666666666, 0.01, 0.008571428571428572, 0.0071428571428571435,
         0.005714285714285714, 0.004285714285714286, 0.002857142857142857, 0.0014285714285714286, 0.0, 0.0});
  SchedulerConfig c = SchedulerConfig::defaults(SchedulerType::warmup_cosine_lr);
  c.warmup_min_ratio = 0.1;
  c.warmup_num_steps = 3;
  c.cos_min_ratio = 0.05;
  c.total_num_steps = 12;
  // past total_num_steps the cosine rises again: DeepSpeed's formula, kept
  curve(c, 0.004,
        {0.0, 0.0004, 0.0026713471128572462, 0.004, 0.0038854159794932262, 0.003555484441926058, 0.0030499999999999998,
         0.002429931537567168, 0.0017700684624328323, 0.0011500000000000004, 0.0006445155580739419,
         0.0003145840205067742, 0.0002, 0.000314584020506774});
  c = SchedulerConfig::defaults(SchedulerType::warmup_cosine_lr);  // warmup 0 is 2 steps; defaults otherwise
  c.warmup_num_steps = 0;
  c.total_num_steps = 6;
  curve(c, 0.001, {0.0, 0.0, 0.001, 0.0008535680352542144, 0.00050005, 0.0001465319647457856});
  // a skipped step (fp16 overflow) does not advance DeepSpeed's iteration; llm.c's counts every step
  CHECK(scheduled_lr(d, 0, 5, 2, 100) == scheduled_lr(d, 0, 2, 2, 100));
  SchedulerConfig l = SchedulerConfig::defaults(SchedulerType::cosine);
  l.warmup_num_steps = 4;
  CHECK(scheduled_lr(l, 1, 2, 0, 100) == Approx(0.75));
  // the parameters each type reads
  CHECK(w.uses("warmup_max_lr"));
  CHECK_FALSE(w.uses("cos_min_ratio"));
  CHECK(c.uses("warmup_min_ratio"));
  CHECK_FALSE(SchedulerConfig{}.uses("warmup_num_steps"));
}

TEST_CASE("global-norm clipping follows torch.nn.utils.clip_grad_norm_", "[optim][clip]") {
  // Three buffers, one long enough for several kSumChunk chunks (the parallel path).
  Rng r(3);
  std::vector<Tensor> g = {Tensor::empty({5 * kSumChunk + 17}), Tensor::empty({100}), Tensor::empty({9}, DType::f64)};
  for (Tensor& t : g) r.fill_normal(t, 0.0, 0.1);
  double ss = 0;
  for (const Tensor& t : g)
    for (double x : t.to_vector()) ss += x * x;
  const double norm = std::sqrt(ss);
  CHECK(sum_of_squares(g) == Approx(ss).epsilon(1e-12));
  CHECK(global_norm(g) == Approx(norm).epsilon(1e-12));

  // Below the threshold: nothing changes, bitwise.
  std::vector<std::vector<double>> before;
  for (const Tensor& t : g) before.push_back(t.to_vector());
  CHECK(clip_grad_norm(g, 2 * norm) == Approx(norm).epsilon(1e-12));
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i].to_vector() == before[i]);

  // Above: every element scaled by max_norm / (norm + 1e-6); the pre-clip norm is returned.
  const double max_norm = norm / 4, coef = max_norm / (norm + 1e-6);
  CHECK(clip_grad_norm(g, max_norm) == Approx(norm).epsilon(1e-12));
  for (size_t i = 0; i < g.size(); ++i) {
    const auto after = g[i].to_vector();
    // coef here uses the test's own norm (sequential sum): it differs from the code's chunked sum
    // by rounding, ~sqrt(n) ulps.
    const double tol = g[i].dtype() == DType::f32 ? 1e-6 : 1e-12;
    for (size_t j = 0; j < after.size(); j += 97) {
      INFO("buffer " << i << " element " << j);
      CHECK(after[j] == Approx(before[i][j] * coef).epsilon(tol));
    }
  }
  CHECK(global_norm(g) == Approx(max_norm).epsilon(1e-5));

  // The ZeRO path: sum of squares per shard, combined, then scale_ each shard.
  Tensor whole = Tensor::empty({3 * kSumChunk});
  r.fill_normal(whole, 0.0, 1.0);
  const double ss_whole = sum_of_squares(whole);
  const double ss_shards = sum_of_squares(whole.flat_view(0, {kSumChunk + 5})) +
                           sum_of_squares(whole.flat_view(kSumChunk + 5, {2 * kSumChunk - 5}));
  CHECK(ss_shards == Approx(ss_whole).epsilon(1e-12));
  const double c = clip_coefficient(std::sqrt(ss_shards), 1.0);
  scale_(whole.flat_view(0, {kSumChunk + 5}), c);
  scale_(whole.flat_view(kSumChunk + 5, {2 * kSumChunk - 5}), c);
  CHECK(global_norm({whole}) == Approx(1.0).epsilon(1e-5));

  CHECK_THROWS_WITH(clip_grad_norm(g, 0.0), Catch::Contains("max_norm = 0"));
  CHECK_THROWS_WITH(sum_of_squares(Tensor::zeros({4, 4}).transpose(0, 1)), Catch::Contains("not contiguous"));
}

TEST_CASE("clipping is deterministic and leaves non-finite gradients alone", "[optim][clip]") {
  Tensor t = Tensor::empty({7 * kSumChunk + 3});
  Rng(11).fill_normal(t, 0.0, 1.0);
  const int before = num_threads();
  set_num_threads(1);
  const double s1 = sum_of_squares(t);
  set_num_threads(2);
  const double s2 = sum_of_squares(t);
  set_num_threads(before);
  CHECK(s1 == s2);  // bitwise: fixed chunks, fixed combination order

  Tensor n = Tensor::from_vector({1.0, NAN, 2.0}, {3});
  const double norm = clip_grad_norm({n}, 1.0);
  CHECK(std::isnan(norm));
  CHECK(n.to_vector()[0] == 1.0);
  CHECK(n.to_vector()[2] == 2.0);
}
