// defines: 7 Catch2 test cases tagged [offload_equivalence], [offload_memory], [offload_checkpoint];
//          helpers: swap_dir, run, tier, losses, check_close, MeasuredRun, measure_stage3
//
// ZeRO-Offload and ZeRO-Infinity (zero/offload.h, zero/tiers.cpp, zero/shard_optimizer.cpp) on N ranks: the same
// losses as the same run without offload (float32: within 1e-6 relative over 20 steps; the
// arithmetic is the same, so the measured difference is 0), the memory report's tiers, and
// checkpoints that move between tiers.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "models/init.h"
#include "tests/mpi/small_run.h"  // defines: dry_run_of
#include "train/trainer.h"
#include "zero/engine.h"

using namespace zt;

namespace {

const std::string kCorpus = std::string(ZT_SOURCE_DIR) + "/data/corpus/train.txt";

// The swap directory of one test: every rank of the job uses it (one file per rank).
std::string swap_dir(ProcessGroup& g, const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("zt_offload_np" + std::to_string(g.size()) + "_" + tag)).string();
}

RunConfig run(const std::string& model, int world_size, int stage, int64_t steps = 20) {
  RunConfig c;
  c.model = model;
  c.train_data = kCorpus;
  c.engine.train_micro_batch_size_per_gpu = 8 / world_size;
  c.seq_len = 32;
  c.steps = steps;
  c.engine.optimizer.lr = 3e-3;
  c.engine.scheduler = SchedulerConfig::defaults(SchedulerType::cosine);  // llm.c\'s, floor 0.1
  c.engine.scheduler.warmup_num_steps = 2;
  c.engine.gradient_clipping = 1.0;  // the clipping factor reaches the CPU AdamW
  c.engine.zero.stage = stage;
  c.engine.zero.overlap_comm = true;
  c.engine.zero.reduce_bucket_size = 1000;
  c.engine.zero.stage3_param_persistence_threshold = 100;
  c.engine.zero.stage3_prefetch_bucket_size = 20000;
  c.engine.zero.sub_group_size = 3000;  // several sub-groups per unit: the streaming and read-ahead paths
  return c;
}

OffloadConfig tier(const std::string& device, const std::string& path, int64_t buffers = 2) {
  OffloadConfig o;
  o.device = offload_device_from_name(device);
  o.nvme_path = device == "nvme" ? path : "";
  o.buffer_count = buffers;
  return o;
}

std::vector<double> losses(const RunConfig& c, ProcessGroup& g) {
  Trainer t(c, g);
  std::vector<double> out;
  while (!t.done()) out.push_back(t.step().loss);
  return out;
}

// Largest relative difference; every step must be within `rel`.
double check_close(const std::vector<double>& got, const std::vector<double>& ref, double rel) {
  REQUIRE(got.size() == ref.size());
  double worst = 0;
  for (size_t k = 0; k < ref.size(); ++k) {
    INFO("step " << k + 1 << ": " << got[k] << " vs " << ref[k] << " without offload");
    const double d = std::abs(got[k] - ref[k]) / std::abs(ref[k]);
    CHECK(d <= rel);
    worst = std::max(worst, d);
  }
  return worst;
}

// `steps` stage-3 steps of cfg under c, built as zt-train builds it (partitioned construction:
// each unit's initial shard comes from the source into a host buffer during setup, which the host
// tier's peak includes; the device's peaks count the steps only, as zt-train resets them every
// step), and the same run on the meta device (train/dry_run.h).
struct MeasuredRun {
  MemoryReport rep;
  DryRun dry;
  int64_t device_step_peak(Category c) const {  // the dry run's device peak over its steps
    int64_t m = 0;
    for (const DryRunStep& s : dry.steps) m = std::max(m, s.device.max(c));
    return m;
  }
};
MeasuredRun measure_stage3(ProcessGroup& g, const ModelConfig& cfg, const RunConfig& c, int steps) {
  const int64_t N = g.size();
  const EngineConfig ec = c.engine;
  ModelOptions o{DType::f32, N, kShardAlignment};
  o.materialize = false;
  auto m = make_model(cfg, o);
  Rng rng(7);
  ModelInit init(*m, rng);
  host_allocator().reset_peaks();
  auto engine = initialize(*m, ec, g, &init);
  default_allocator().reset_peaks();
  Tensor idx = Tensor::empty({1, 32}, DType::i32, Category::workspace);
  for (int step = 0; step < steps; ++step) {
    for (int64_t i = 0; i < idx.numel(); ++i)
      idx.data<int32_t>()[i] = static_cast<int32_t>((37 * i + step) % cfg.vocab_size);
    engine->backward(engine->forward(idx, idx));
    engine->step(1e-3);
  }
  MeasuredRun out{engine->memory_report(), {}};
  RunConfig one = c;  // the steps above: one sequence of 32 tokens
  one.engine.train_micro_batch_size_per_gpu = 1;
  one.engine.gradient_accumulation_steps = 1;
  one.seq_len = 32;
  out.dry = test::dry_run_of(one, g, steps, &cfg);
  return out;
}

}  // namespace

TEST_CASE("offloaded runs give the losses of the same run without offload", "[offload_equivalence]") {
  ProcessGroup& g = init_process_group();
  const std::string dir = swap_dir(g, "equivalence");
  struct Case {
    int stage;
    const char* opt;
    const char* param;
  };
  const Case cases[] = {{1, "cpu", "none"},  {1, "nvme", "none"}, {2, "cpu", "none"}, {2, "nvme", "none"},
                        {3, "cpu", "none"},  {3, "nvme", "none"}, {3, "cpu", "cpu"},  {3, "nvme", "nvme"},
                        {3, "cpu", "nvme"}};
  for (const char* model : {"gpt2-nano", "llama-nano"}) {
    std::vector<double> ref[4];
    for (int stage = 1; stage <= 3; ++stage) ref[stage] = losses(run(model, g.size(), stage), g);
    for (const Case& k : cases) {
      if (std::string(model) == "llama-nano" && k.stage != 3) continue;  // llama: stage 3's tiers
      RunConfig c = run(model, g.size(), k.stage);
      c.engine.zero.offload_optimizer = tier(k.opt, dir);
      c.engine.zero.offload_param = tier(k.param, dir, 3);
      INFO(model << ", stage " << k.stage << ", offload_optimizer " << k.opt << ", offload_param " << k.param << ", "
                 << g.size() << " ranks");
      const double worst = check_close(losses(c, g), ref[k.stage], 1e-6);
      if (g.rank() == 0)
        std::printf("[offload] %s stage %d optimizer %s param %s, %d ranks: max relative difference %.1e\n", model,
                    k.stage, k.opt, k.param, g.size(), worst);
    }
  }
  CHECK(!std::filesystem::exists(dir + "/zt-swap-rank" + std::to_string(g.rank()) + ".bin"));  // removed at exit
}

TEST_CASE("offloaded runs with gradient accumulation match the run without offload", "[offload_equivalence]") {
  ProcessGroup& g = init_process_group();
  const std::string dir = swap_dir(g, "accum");
  if (8 / g.size() < 2) return;  // needs 2 micro-batches per rank
  for (int stage = 1; stage <= 3; ++stage) {
    RunConfig c = run("gpt2-nano", g.size(), stage, 8);
    c.engine
        .train_micro_batch_size_per_gpu /= 2;  // 2 micro-steps: stages 2-3 accumulate into the host's gradient shard
    c.engine.gradient_accumulation_steps = 2;
    const std::vector<double> ref = losses(c, g);
    c.engine.zero.offload_optimizer = tier(stage == 2 ? "nvme" : "cpu", dir);
    c.engine.zero.offload_param = tier(stage == 3 ? "nvme" : "none", dir, 3);
    INFO("stage " << stage << ", 2 micro-steps, " << g.size() << " ranks");
    check_close(losses(c, g), ref, 1e-6);
  }
}

TEST_CASE("bf16 offloaded runs give the losses of bf16 without offload", "[offload_equivalence]") {
  ProcessGroup& g = init_process_group();
  const std::string dir = swap_dir(g, "bf16");
  for (int stage : {2, 3}) {
    RunConfig c = run("gpt2-nano", g.size(), stage, 10);
    c.engine.precision = Precision::bf16;
    const std::vector<double> ref = losses(c, g);
    c.engine.zero.offload_optimizer = tier(stage == 2 ? "cpu" : "nvme", dir);
    c.engine.zero.offload_param = tier(stage == 3 ? "nvme" : "none", dir, 3);
    INFO("bf16, stage " << stage << ", " << g.size() << " ranks");
    check_close(losses(c, g), ref, 1e-6);
  }
}

// The memory report: the device keeps no optimizer state (and, with parameter offload, no
// parameters at rest); the host holds master + m + v = 12 bytes per shard element and the
// gradient; the swap file holds what the host would. Peaks count from after the setup (the model
// is built whole on the device before the engine shards it).
TEST_CASE("the memory report shows the model states leaving the device", "[offload_memory]") {
  ProcessGroup& g = init_process_group();
  const std::string dir = swap_dir(g, "memory");
  auto report = [&](const RunConfig& c) {
    Trainer t(c, g);
    default_allocator().reset_peaks();
    host_allocator().reset_peaks();
    while (!t.done()) t.step();
    return t.engine().memory_report();
  };
  RunConfig base = run("gpt2-nano", g.size(), 3, 2);
  base.engine.zero.stage3_param_persistence_threshold = 0;  // nothing stays gathered: params at rest are the shards
  const MemoryReport none = report(base);
  int64_t max_shard = 0;  // the largest unit's shard: one staging buffer
  {
    Trainer t(base, g);  // named: a temporary in the range-for would die before the loop body (UBSan)
    for (Unit* u : t.model().units()) max_shard = std::max(max_shard, u->params().padded_numel() / g.size());
  }
  for (const char* opt : {"cpu", "nvme"}) {
    RunConfig c = base;
    c.engine.zero.offload_optimizer = tier(opt, dir);
    c.engine.zero.offload_param = tier(opt, dir, 3);
    const MemoryReport m = report(c);
    const int64_t S = m.psi_padded / g.size();  // this rank's shard elements, all units
    INFO(opt << ", " << g.size() << " ranks: device " << m.measured.to_string() << "; host " << m.host.to_string()
             << "; nvme " << m.nvme.to_string());
    CHECK(none.measured.cur(Category::optim) == 8 * S);  // without offload: m and v on the device
    CHECK(none.measured.cur(Category::params) == 4 * S);
    CHECK(m.measured.cur(Category::optim) == 0);
    CHECK(m.measured.max(Category::optim) == 0);
    CHECK(m.measured.cur(Category::params) == 0);
    CHECK(none.measured.cur(Category::grads) == 4 * S);
    CHECK(m.measured.cur(Category::grads) == 0);   // stages 2-3 reduce into the host's gradient shard
    CHECK(m.host.cur(Category::grads) == 4 * S);
    // While a unit computes, the device holds its gathered parameters as before, plus at most one
    // shard-sized staging buffer per unit being brought in.
    CHECK(m.measured.max(Category::params) <= none.measured.max(Category::params) - 4 * S + 4 * max_shard * 3);
    // the policies' own answers (zero/footprint.h) agree with what was measured, tier by tier
    const int64_t N = g.size();
    for (Category c : {Category::params, Category::grads, Category::optim}) {
      INFO(category_name(c));
      CHECK(m.model_state.bytes(MemoryTier::device, c, N) == m.measured.cur(c));
      CHECK(none.model_state.bytes(MemoryTier::device, c, N) == none.measured.cur(c));
      if (std::string(opt) == "cpu") CHECK(m.model_state.bytes(MemoryTier::host, c, N) == m.host.cur(c));
      else CHECK(m.model_state.bytes(MemoryTier::nvme, c, N) <= m.nvme.cur(c));  // regions rounded up
    }
    if (std::string(opt) == "cpu") {
      CHECK(m.host.cur(Category::optim) == 12 * S);
      CHECK(m.host.cur(Category::params) == 4 * S);
      CHECK(m.nvme.cur(Category::optim) == 0);
    } else {
      CHECK(m.nvme.cur(Category::optim) >= 12 * S);  // regions rounded up to 4096 bytes each
      CHECK(m.nvme.cur(Category::params) >= 4 * S);
      CHECK(m.host.cur(Category::optim) < 12 * S);    // only the sub-group buffers
      CHECK(m.host.cur(Category::params) == 0);       // only while a shard is read or written
    }
  }
}

// A checkpoint written with one tier resumes with another (the same "param", "exp_avg",
// "exp_avg_sq" shards), continuing the uninterrupted run's losses.
TEST_CASE("checkpoints move between offload tiers", "[offload_checkpoint]") {
  ProcessGroup& g = init_process_group();
  const std::string dir = swap_dir(g, "ckpt");
  const std::string ckpt = dir + "/ckpt";
  RunConfig base = run("gpt2-nano", g.size(), 3, 8);
  const std::vector<double> ref = losses(base, g);
  const std::pair<const char*, const char*> moves[] = {{"nvme", "none"}, {"none", "nvme"}, {"cpu", "nvme"}};
  for (auto [first, second] : moves) {
    if (g.rank() == 0) std::filesystem::remove_all(ckpt);
    g.barrier();
    RunConfig a = base;
    a.ckpt_dir = ckpt;
    a.ckpt_interval = 4;
    a.engine.zero.offload_optimizer = tier(first, dir);
    a.engine.zero.offload_param = tier(std::string(first) == "nvme" ? "nvme" : "none", dir, 3);
    {
      Trainer t(a, g);
      for (int k = 0; k < 4; ++k) t.step();  // saved after step 4 (ckpt_interval)
    }
    RunConfig b = base;
    b.ckpt_dir = ckpt;
    b.resume = true;
    b.engine.zero.offload_optimizer = tier(second, dir);
    b.engine.zero.offload_param = tier(std::string(second) == "nvme" ? "nvme" : "none", dir, 3);
    Trainer t(b, g);
    std::vector<double> rest;
    while (!t.done()) rest.push_back(t.step().loss);
    INFO("written with offload " << first << ", resumed with " << second);
    check_close(rest, std::vector<double>(ref.begin() + 4, ref.end()), 1e-6);
  }
}

// The dry run (train/dry_run.h) against a measured run whose units differ in size, as in
// Llama 3.2 1B: a tied embedding ten times a block, the final norm persistent; the knobs of that
// run scaled down (one unit prefetched ahead, the embedding and a block never both prefetched,
// reuse distance 0). The parameter offload's buffers are each their own unit's size: the device
// peak is the embedding's full parameters plus its own shard buffer (not the largest shard on top
// of the largest live set), the host peak the largest of the reads' bounce buffers, the optimizer
// step's staging buffers and the setup's two buffers of the embedding's shard (not buffer_count
// + 1 of the largest). Both exact.
TEST_CASE("the dry run matches parameter offload on units of unequal sizes", "[offload_memory]") {
  ProcessGroup& g = init_process_group();
  const int64_t N = g.size();
  const std::string dir = swap_dir(g, "unequal");
  ModelConfig cfg = model_config("llama-nano");
  cfg.n_layer = 4;
  cfg.vocab_size = cfg.padded_vocab_size = 4096;  // embed 131,072 elements, a block 12,352
  cfg.tie_embeddings = true;
  for (const char* where : {"nvme", "cpu"}) {
    RunConfig c = run("llama-nano", g.size(), 3, 3);
    c.engine.zero.offload_optimizer = tier(where, dir);
    c.engine.zero.offload_param = tier(where, dir, 2);
    c.engine.zero.sub_group_size = 10000;
    c.engine.zero.stage3_prefetch_bucket_size = 0;      // the next unit only
    c.engine.zero.stage3_max_live_parameters = 140000;  // the embedding alone, never with a block
    c.engine.zero.stage3_max_reuse_distance = 0;
    c.engine.activation_checkpointing = c.engine.cpu_checkpointing = true;
    const MeasuredRun got = measure_stage3(g, cfg, c, 3);
    const MemoryReport& rep = got.rep;
    INFO(where << ", " << N << " ranks: device params measured " << rep.measured.max(Category::params) << ", dry run "
               << got.device_step_peak(Category::params) << "; host params measured " << rep.host.max(Category::params)
               << ", dry run " << got.dry.host.max(Category::params));
    CHECK(rep.measured.max(Category::params) == got.device_step_peak(Category::params));
    CHECK(rep.host.max(Category::params) == got.dry.host.max(Category::params));  // cpu: the shards themselves
  }
}

TEST_CASE("the dry run follows the step's refresh of persistent units under parameter offload", "[offload_memory]") {
  // Every unit under the persistence threshold: nothing is gathered during the step, and at its
  // end publish refreshes every unit from its new shard at once, each through its own device
  // buffer (and with nvme its own host bounce buffer): the parameters' peaks are that moment's.
  ProcessGroup& g = init_process_group();
  const int64_t N = g.size();
  const std::string dir = swap_dir(g, "persistent");
  const ModelConfig cfg = model_config("llama-nano");
  for (const char* where : {"cpu", "nvme"}) {
    RunConfig c = run("llama-nano", g.size(), 3, 3);
    c.engine.zero.offload_optimizer = tier(where, dir);
    c.engine.zero.offload_param = tier(where, dir, 2);
    c.engine.zero.stage3_param_persistence_threshold = 1 << 30;
    const MeasuredRun got = measure_stage3(g, cfg, c, 2);
    const MemoryReport& rep = got.rep;
    const int64_t all = rep.psi_padded;  // every unit's padded elements
    INFO(where << ", " << N << " ranks: device params measured " << rep.measured.max(Category::params) << ", dry run "
               << got.device_step_peak(Category::params) << " (every unit gathered: " << 4 * all << " bytes)");
    CHECK(rep.measured.max(Category::params) == got.device_step_peak(Category::params));
    CHECK(rep.measured.max(Category::params) == 4 * (all + all / N));
    if (std::string(where) == "nvme") CHECK(rep.host.max(Category::params) == got.dry.host.max(Category::params));
  }
}
