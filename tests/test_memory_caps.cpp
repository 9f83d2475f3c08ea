// defines: 6 Catch2 test cases tagged [memory_caps]; helpers: nano_run, error_of
//
// The run's memory caps (train/memory_caps.h): the host tier's cap from process start, its
// errors (an allocation past it; a cap too small for this rank's offloaded model states), and
// activation checkpoint offload under it (zero/activation_offload.h). The config key and the
// RunConfig checks; zt-train's flags are tested in tests/cli/test_memory_caps.sh.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <fstream>

#include "core/backend.h"
#include "models/init.h"  // defines: make_model
#include "temp_dir.h"
#include "train/dry_run.h"  // defines: dry_run, dry_run_of_rank
#include "train/memory_caps.h"
#include "train/trainer.h"

using namespace zt;

namespace {

const std::string kCorpus = std::string(ZT_SOURCE_DIR) + "/data/corpus/train.txt";
constexpr int64_t kMiB = 1 << 20;

RunConfig nano_run() {
  RunConfig c;
  c.model = "gpt2-nano";
  c.train_data = kCorpus;
  c.engine.train_micro_batch_size_per_gpu = 8;
  c.seq_len = 32;
  c.steps = 2;
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("host memory cap: an allocation past it names the allocator, the category and the bytes", "[memory_caps]") {
  RunConfig c = nano_run();
  c.host_memory_limit = kMiB;
  c.memory_limit = 3 * kMiB;
  {
    MemoryCaps caps(c, Device::cpu());
    caps.apply(CapStart::process_start);
    CHECK(host_allocator().limit() == kMiB);
    // The device cap starts where kDeviceCapStart says (the end of setup, until construction is partitioned).
    CHECK(cpu_allocator().limit() == (kDeviceCapStart == CapStart::process_start ? 3 * kMiB : 0));
    Tensor small = Tensor::empty({1024}, DType::f32, Category::optim, host_allocator());  // 4 KiB fit
    const std::string msg = error_of([] { Tensor::empty({kMiB / 2}, DType::f32, Category::activations, host_allocator()); });
    INFO(msg);
    CHECK(msg.find("out of memory on host: allocating 2.00 MiB for category 'activations'") != std::string::npos);
    CHECK(msg.find("over the limit of 1.00 MiB") != std::string::npos);
    CHECK(msg.find("optim 4.00 KiB") != std::string::npos);  // what each category held
    REQUIRE_THROWS_AS(Tensor::empty({kMiB / 2}, DType::f32, Category::activations, host_allocator()), OutOfMemory);
  }
  CHECK(host_allocator().limit() == 0);  // lifted with the scope
  CHECK(cpu_allocator().limit() == 0);
}

TEST_CASE("host memory cap too small for the offloaded model states fails at setup naming the bytes needed", "[memory_caps]") {
  RunConfig c = nano_run();
  c.engine.zero.stage = 1;
  c.engine.zero.offload_optimizer.device = OffloadDevice::cpu;
  c.host_memory_limit = 64 * 1024;
  // What the host tier must hold on one rank: at least the fp32 master, m and v (12 bytes) and the
  // float32 gradient shard (4 bytes) of every padded parameter (zero/offload.h); the Trainer names
  // its dry run's host peak, which adds the staging buffers.
  ModelOptions opt;
  opt.world_size = 1;
  opt.alignment = kShardAlignment;
  std::unique_ptr<Model> m = make_model(model_config("gpt2-nano"), opt);
  int64_t padded = 0;
  for (Unit* u : m->units()) padded += u->params().padded_numel();
  SingleProcessGroup one;
  const int64_t need = dry_run(dry_run_of_rank(c, model_config("gpt2-nano"), one, omp_get_max_threads()))
                           .host.peak_total;
  CHECK(need >= 16 * padded);
  const std::string msg = error_of([&] { Trainer t(c, one); });
  INFO(msg);
  CHECK(msg.find("--host-memory-limit-mib / host_memory_limit_mib = 64.00 KiB is too small") != std::string::npos);
  CHECK(msg.find("peaks at " + std::to_string(need) + " bytes") != std::string::npos);
  CHECK(msg.find("optim ") != std::string::npos);  // the categories it peaks in
  CHECK(host_allocator().limit() == 0);  // the failed Trainer lifted its cap
}

TEST_CASE("host memory cap: a host OutOfMemory during setup is rethrown with the key and the need", "[memory_caps]") {
  RunConfig c = nano_run();
  c.host_memory_limit = 2 * kMiB;
  MemoryCaps caps(c, Device::cpu());
  MemoryStats need;  // a dry run's host tier
  need.peak[static_cast<int>(Category::grads)] = 1000;
  need.peak[static_cast<int>(Category::optim)] = 3000;
  need.peak_total = 4000;
  const std::string host = error_of([&] {
    caps.rethrow_setup_failure(OutOfMemory("out of memory on host: allocating 8.00 KiB for category 'optim'"), need);
  });
  CHECK(host.find("host_memory_limit_mib = 2.00 MiB is too small for the engine's setup") != std::string::npos);
  CHECK(host.find("peaks at 4000 bytes") != std::string::npos);
  CHECK(host.find("(optim 2.93 KiB, grads 1000 B)") != std::string::npos);
  CHECK(host.find("The allocation that failed: out of memory on host: allocating 8.00 KiB for category 'optim'") != std::string::npos);
  // The device's OutOfMemory is not the host cap's business: it goes on as it was.
  const std::string dev = error_of(
      [&] { caps.rethrow_setup_failure(OutOfMemory("out of memory on cpu: allocating 1 B"), need); });
  CHECK(dev == "out of memory on cpu: allocating 1 B");
}

TEST_CASE("host memory cap: offload and cpu_checkpointing train under a generous cap, and it is lifted after", "[memory_caps]") {
  RunConfig c = nano_run();
  c.engine.zero.stage = 2;
  c.engine.zero.offload_optimizer.device = OffloadDevice::cpu;
  c.engine.activation_checkpointing = true;
  c.engine.cpu_checkpointing = true;
  c.host_memory_limit = 256 * kMiB;
  SingleProcessGroup one;
  {
    Trainer t(c, one);
    CHECK(host_allocator().limit() == 256 * kMiB);
    while (!t.done()) CHECK(std::isfinite(t.step().loss));
    const MemoryReport r = t.engine().memory_report();
    CHECK(r.host.cur(Category::optim) > 0);              // the offloaded optimizer state, under the cap
    CHECK(r.host.max(Category::activations) > 0);        // the checkpoints passed through the host
    CHECK(r.host.cur(Category::activations) == 0);       // and all came back
  }
  CHECK(host_allocator().limit() == 0);
}

TEST_CASE("cpu_checkpointing under a host cap smaller than the checkpoints: refused before setup, naming activations",
          "[memory_caps]") {
  RunConfig c = nano_run();
  c.engine.activation_checkpointing = true;
  c.engine.cpu_checkpointing = true;
  c.host_memory_limit = 16 * 1024;  // one checkpoint is 8 x 32 x C x 4 bytes, C = 32: 32 KiB
  SingleProcessGroup one;
  // Nothing of this run is on the host at setup, but its steps pass two checkpoints through the
  // host tier at once: the run's dry run sees them, and the Trainer refuses the cap before setup
  // (the allocator's own error at the step, had it gone on: the allocation test above).
  const std::string msg = error_of([&] { Trainer t(c, one); });
  INFO(msg);
  CHECK(msg.find("host_memory_limit_mib = 16.00 KiB is too small") != std::string::npos);
  CHECK(msg.find("peaks at 65536 bytes") != std::string::npos);
  CHECK(msg.find("the peaks by category: activations 64.00 KiB") != std::string::npos);
  CHECK(host_allocator().limit() == 0);
}

TEST_CASE("host_memory_limit_mib in a config file, and cpu_checkpointing's RunConfig check", "[memory_caps]") {
  test::TempDir tmp("memory_caps");
  auto parse = [&](const std::string& text) {
    const std::string path = tmp.file("c.json");
    std::ofstream(path) << text;
    RunConfig c = nano_run();
    run_config_from_json(path, 1, c);
    return c;
  };
  CHECK(parse(R"({"host_memory_limit_mib": 64})").host_memory_limit == 64 * kMiB);
  CHECK(parse(R"({"host_memory_limit_mib": 0.5})").host_memory_limit == kMiB / 2);
  CHECK(parse(R"({})").host_memory_limit == 0);
  CHECK(error_of([&] { parse(R"({"host_memory_limit_mib": -1})"); })
            .find("host_memory_limit_mib = -1 is invalid: expected a number of MiB >= 0") != std::string::npos);
  CHECK(error_of([&] { parse(R"({"host_memory_limit_mib": "64"})"); })
            .find("host_memory_limit_mib = \"64\" is invalid") != std::string::npos);
  const RunConfig both = parse(R"({"activation_checkpointing": {"enabled": true, "cpu_checkpointing": true}})");
  CHECK(both.engine.cpu_checkpointing);

  RunConfig c = nano_run();
  c.engine.cpu_checkpointing = true;
  CHECK(
      error_of([&] { c.validate(); })
          .find(
              "activation_checkpointing.cpu_checkpointing = true is invalid: expected activation_checkpointing.enabled "
              "too") != std::string::npos);
  c.engine.activation_checkpointing = true;
  CHECK_NOTHROW(c.validate());
}
