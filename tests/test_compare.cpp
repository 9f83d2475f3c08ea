// defines: the tests of train/compare.h — every ZeRO choice of one job, dry-run and timed, and
//          what training N tokens costs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "tests/step_time_fixtures.h"  // defines: zt::test::simple_profile, zt::test::nano_request
#include "train/compare.h"
#include "zero/engine_config.h"

using namespace zt;

namespace {

DryRunRequest nano(int world, int nodes) { return test::nano_request(world, 0, nodes); }

}  // namespace

TEST_CASE("the ZeRO choices of a job: ZeRO++ only across nodes with several ranks each", "[compare]") {
  CHECK(zero_choices(nano(4, 1)).size() == 7);
  CHECK(zero_choices(nano(4, 4)).size() == 7);  // one rank a node: no node group for hpZ
  const std::vector<ZeroChoice> cs = zero_choices(nano(4, 2));
  REQUIRE(cs.size() == 8);
  const DryRunRequest zpp = cs.back().apply(nano(4, 2));
  CHECK(zpp.run.engine.zero.stage == 3);
  CHECK(zpp.run.engine.zero.zero_quantized_weights);
  CHECK(zpp.run.engine.zero.zero_quantized_gradients);
  CHECK(zpp.run.engine.zero.zero_hpz_partition_size == 2);
  for (const ZeroChoice& c : cs) {
    const DryRunRequest r = c.apply(nano(4, 2));
    CHECK(r.run.engine.zero.overlap_comm == default_overlap_comm(c.stage));  // DeepSpeed's default
    CHECK(r.run.engine.zero.offload_optimizer.enabled() == c.offload_optimizer);
    CHECK(r.run.engine.zero.offload_param.enabled() == c.offload_param);
  }
}

TEST_CASE("compare: each choice's peaks are its own dry run's, fastest first, what does not fit last", "[compare]") {
  const DryRunRequest base = nano(4, 2);
  const DeviceProfile p = test::simple_profile();
  // No limit: everything fits, ordered by step time.
  const std::vector<ChoiceResult> all = compare_choices(base, p, Capacity{});
  REQUIRE(all.size() == 8);
  for (size_t i = 0; i < all.size(); ++i) {
    INFO(all[i].choice.name);
    CHECK(all[i].fits);
    CHECK(all[i].time.step_s > 0);
    if (i) CHECK(all[i - 1].time.step_s <= all[i].time.step_s);
    // the same peaks as the choice's own dry runs (zt-estimate --model on that config)
    int64_t dev = 0;
    for (int rank : dry_run_ranks(4)) {
      DryRunRequest q = all[i].choice.apply(base);
      q.rank = rank;
      dev = std::max(dev, dry_run(q).device.peak_total);
    }
    CHECK(all[i].device_peak == dev);
  }
  // A device capacity between stage 3's peak and stage 0's: stage 0 does not fit, and comes last.
  int64_t s0 = 0, s3 = 0;
  for (const ChoiceResult& r : all) {
    if (r.choice.name == "stage 0 (data parallel)") s0 = r.device_peak;
    if (r.choice.name == "stage 3") s3 = r.device_peak;
  }
  REQUIRE(s3 < s0);
  const std::vector<ChoiceResult> capped = compare_choices(base, p, Capacity{(s0 + s3) / 2, 0, 0});
  CHECK(capped.back().choice.name == "stage 0 (data parallel)");
  CHECK_FALSE(capped.back().fits);
  CHECK(capped.back().overflow == "device");
  CHECK(capped.front().fits);
}

TEST_CASE("training cost: hours, GPU-hours and price from the job's tokens/s", "[compare]") {
  const TrainingCost c = training_cost(3.6e6, 1000, 4, 2.5);  // an hour on 4 GPUs
  CHECK(c.hours == Approx(1.0));
  CHECK(c.gpu_hours == Approx(4.0));
  CHECK(c.price == Approx(10.0));
  CHECK_THROWS_WITH(training_cost(1, 0, 1, 1), Catch::Matchers::Contains("no throughput"));
}
