// defines: the dry run's tests against real runs — on every rank of a real job (1, 2 or 4 ranks
//          under mpirun), the same configuration trained for real by zt-train's Trainer and dry-run
//          for that rank on the meta device: every category's peak and held bytes on the device and
//          in the host tier, at setup and in each step, the NVMe tier's bytes reserved in the swap
//          files, and each step's bytes per collective and link class, equal to the byte.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "tests/mpi/small_run.h"
#include "tests/temp_dir.h"  // defines: zt::test::TempDir
#include "train/dry_run.h"

using namespace zt;

namespace {

struct Measured {
  MemoryStats setup_device, setup_host;
  std::vector<DryRunStep> steps;
  MemoryStats nvme;  // the swap files' reserved bytes at the end (the engine's memory report)
};

// Bytes above what the process held before (the test process holds other things in the same
// allocators): peaks and current minus `base`'s current.
MemoryStats above(MemoryStats s, const MemoryStats& base) {
  for (Category c : kAllCategories) {
    const int i = static_cast<int>(c);
    s.current[i] -= base.current[i];
    s.peak[i] -= base.current[i];
  }
  s.peak_total -= base.total();
  return s;
}

Measured real_run(const RunConfig& c, ProcessGroup& g, int steps) {
  Allocator& dev = cpu_allocator();
  Allocator& host = zt::host_allocator();
  const MemoryStats d0 = dev.stats(), h0 = host.stats();
  dev.reset_peaks();
  host.reset_peaks();
  Measured m;
  Trainer t(c, g);
  m.setup_device = above(dev.stats(), d0);
  m.setup_host = above(host.stats(), h0);
  for (int s = 0; s < steps; ++s) {
    host.reset_peaks();  // the Trainer resets the device's at the step's start
    const CommCounters before = g.counters();
    t.step();
    m.steps.push_back({above(dev.stats(), d0), above(host.stats(), h0), g.counters() - before});
  }
  m.nvme = t.engine().memory_report().nvme;
  return m;
}

// `slack`: how far the device's activation peak may differ (see check_same).
std::string diff(const char* what, const MemoryStats& real, const MemoryStats& dry, int64_t slack = 0) {
  std::ostringstream o;
  for (Category c : kAllCategories)
    if (std::abs(real.max(c) - dry.max(c)) > (c == Category::activations ? slack : 0) || real.cur(c) != dry.cur(c))
      o << what << " " << category_name(c) << ": real peak " << real.max(c) << " held " << real.cur(c) << ", dry peak "
        << dry.max(c) << " held " << dry.cur(c) << "\n";
  return o.str();
}

std::string diff(const CommCounters& real, const CommCounters& dry) {
  std::ostringstream o;
  for (int k = 0; k < kNumCollectives; ++k)
    if (real.bytes[k] != dry.bytes[k] || real.calls[k] != dry.calls[k])
      o << collective_name(static_cast<Collective>(k)) << ": real " << real.bytes[k] << " B in " << real.calls[k]
        << " calls, dry " << dry.bytes[k] << " B in " << dry.calls[k] << "\n";
  for (int l = 0; l < 2; ++l)
    if (real.link[l] != dry.link[l]) o << "link " << l << ": real " << real.link[l] << ", dry " << dry.link[l] << "\n";
  return o.str();
}

// The real run and the dry run of `c` on this rank agree, or the differences are listed. One
// exception, a property of the real run: with cpu_checkpointing the copies of the checkpoints run
// on a worker thread (zero/activation_offload.h), and whether one block's checkpoint is still on
// the device (or already back) at the backward's peak depends on that thread's timing — the real
// peak varies from run to run by one checkpoint (B, T, C), measured here as 232200 or 240392
// bytes at 4 ranks. The dry run runs the same worker (its copies take no time, its peak varies
// likewise); the two peaks are held within that one checkpoint.
void check_same(const std::string& name, RunConfig c, ProcessGroup& g) {
  const int steps = 3;
  c.steps = steps;
  const Measured real = real_run(c, g, steps);
  const DryRun dry = test::dry_run_of(c, g, steps);
  const int64_t checkpoint = c.engine.cpu_checkpointing ? c.batch() * c.seq_len * model_config(c.model).n_embd * 4
                                                        : 0;  // float32 compute here
  std::string d = diff("setup device", real.setup_device, dry.setup_device) +
                  diff("setup host", real.setup_host, dry.setup_host) + diff("nvme", real.nvme, dry.nvme);
  if (real.nvme.peak_total != dry.nvme.peak_total)
    d += "nvme total: real " + std::to_string(real.nvme.peak_total) + ", dry " + std::to_string(dry.nvme.peak_total) +
         "\n";
  const bool nvme = c.engine.zero.offload_optimizer.nvme() || c.engine.zero.offload_param.nvme();
  if (nvme && real.nvme.peak_total == 0) d += "offload to nvme, but the real run reserved no swap-file bytes\n";
  for (int s = 0; s < steps; ++s) {
    const std::string at = "step " + std::to_string(s + 1);
    d += diff((at + " device").c_str(), real.steps[s].device, dry.steps[s].device, checkpoint) +
         diff((at + " host").c_str(), real.steps[s].host, dry.steps[s].host) +
         diff(real.steps[s].comm, dry.steps[s].comm);
  }
  INFO(name << " on rank " << g.rank() << " of " << g.size() << ":\n" << d);
  CHECK(d.empty());
}

}  // namespace

TEST_CASE("dry run equals the real run: stages, precisions, offload", "[dry_run]") {
  ProcessGroup& g = init_process_group();
  for (int stage = 0; stage <= 3; ++stage)
    for (Precision p : {Precision::f32, Precision::bf16, Precision::f16}) {
      RunConfig c = test::small_run("gpt2-nano", g.size(), stage);
      c.engine.precision = p;
      check_same("gpt2-nano stage " + std::to_string(stage) + " " + precision_name(p), c, g);
    }
}

TEST_CASE("dry run equals the real run: offload, ZeRO++, checkpointing, accumulation, bf16 compute, llama",
          "[dry_run]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  auto cpu = [] {
    OffloadConfig o;
    o.device = OffloadDevice::cpu;
    return o;
  };
  // The NVMe tier: this rank's swap files in a scratch directory of its own (the real run's; the
  // dry run creates nothing there). Several sub-groups per unit: the read-ahead and write-back paths.
  const test::TempDir swap("dry_run_nvme");
  auto nvme = [&] {
    OffloadConfig o;
    o.device = OffloadDevice::nvme;
    o.nvme_path = swap.dir.string();
    o.buffer_count = 2;
    return o;
  };
  struct Case {
    std::string name;
    std::function<void(RunConfig&)> set;
  };
  const std::vector<Case> cases = {
      {"stage 1, optimizer offloaded",
       [&](RunConfig& c) { c.engine.zero.stage = 1, c.engine.zero.offload_optimizer = cpu(); }},
      {"stage 2 bf16, optimizer offloaded",
       [&](RunConfig& c) {
         c.engine.zero.stage = 2, c.engine.precision = Precision::bf16, c.engine.zero.offload_optimizer = cpu();
       }},
      {"stage 3 fp16, optimizer and parameters offloaded",
       [&](RunConfig& c) {
         c.engine.precision = Precision::f16, c.engine.zero.offload_optimizer = cpu(),
         c.engine.zero.offload_param = cpu();
       }},
      {"stage 1, optimizer on nvme",
       [&](RunConfig& c) {
         c.engine.zero.stage = 1, c.engine.zero.offload_optimizer = nvme(), c.engine.zero.sub_group_size = 3000;
       }},
      {"stage 1 bf16, optimizer on nvme",
       [&](RunConfig& c) {
         c.engine.zero.stage = 1, c.engine.precision = Precision::bf16, c.engine.zero.offload_optimizer = nvme();
       }},
      {"stage 2, optimizer on nvme",
       [&](RunConfig& c) {
         c.engine.zero.stage = 2, c.engine.zero.offload_optimizer = nvme(), c.engine.zero.sub_group_size = 3000;
       }},
      {"stage 2 bf16, optimizer on nvme",
       [&](RunConfig& c) {
         c.engine.zero.stage = 2, c.engine.precision = Precision::bf16, c.engine.zero.offload_optimizer = nvme(),
         c.engine.zero.sub_group_size = 3000;
       }},
      {"stage 3 bf16, optimizer and parameters on nvme",
       [&](RunConfig& c) {
         c.engine.precision = Precision::bf16, c.engine.zero.offload_optimizer = nvme(),
         c.engine.zero.offload_param = nvme(), c.engine.zero.sub_group_size = 3000;
       }},
      {"stage 3 qwZ", [&](RunConfig& c) { c.engine.zero.zero_quantized_weights = true; }},
      {"stage 3 qgZ bf16",
       [&](RunConfig& c) {
         c.engine.precision = Precision::bf16;
         c.engine.zero.zero_quantized_gradients = c.engine.zero.zero_quantized_gradients_one_node = true;
       }},
      {"stage 3 hpZ",
       [&](RunConfig& c) { c.engine.zero.zero_hpz_partition_size = g.topology().local_size() % 2 == 0 ? 2 : 1; }},
      {"stage 3 qwZ + hpZ + qgZ",
       [&](RunConfig& c) {
         c.engine.zero.zero_quantized_weights = c.engine.zero.zero_quantized_gradients = true;
         c.engine.zero.zero_quantized_gradients_one_node = true;
         c.engine.zero.zero_hpz_partition_size = g.topology().local_size() % 2 == 0 ? 2 : 1;
       }},
      {"stage 3, activation checkpointing", [&](RunConfig& c) { c.engine.activation_checkpointing = true; }},
      {"stage 2, checkpoints in host memory",
       [&](RunConfig& c) {
         c.engine.zero.stage = 2, c.engine.activation_checkpointing = c.engine.cpu_checkpointing = true;
       }},
      {"stage 2, two micro-steps",
       [&](RunConfig& c) {
         c.engine.zero.stage = 2, c.engine.gradient_accumulation_steps = 2;
         c.engine.train_micro_batch_size_per_gpu = std::max<int64_t>(1, c.engine.train_micro_batch_size_per_gpu / 2);
       }},
      {"stage 3, bf16 compute",
       [&](RunConfig& c) { c.engine.precision = Precision::bf16, c.compute_dtype = DType::bf16; }},
      {"llama-nano stage 3 bf16", [&](RunConfig& c) { c.model = "llama-nano", c.engine.precision = Precision::bf16; }},
      {"llama-nano stage 1, DeepSpeed's defaults", [&](RunConfig& c) {
         c.model = "llama-nano";
         c.engine.zero = ZeroOptimization{};
         c.engine.zero.stage = 1;
       }}};
  for (const Case& k : cases) {
    RunConfig c = test::small_run("gpt2-nano", N, 3);
    k.set(c);
    check_same(k.name, c, g);
  }
  // The dry runs left nothing in the swap directory (and the real runs removed their files).
  CHECK(std::filesystem::is_empty(swap.dir));
}

// A grid (docs/parallel.md): the dry run makes the same grid on its simulated rank, cuts the
// blocks over the tensor group, the sequences over the sequence group, and runs ZeRO over the
// replica group, so the slices' bytes, the tensor group's all-reduces (or, with Megatron's sequence
// parallelism, its all-gathers and reduce-scatters), the sequence group's all-to-alls and the
// replica group's collectives all count as the real run's.
TEST_CASE("dry run equals the real run: tensor and sequence parallelism", "[dry_run]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  for (int tp : {2, 4}) {
    if (N % tp != 0) continue;
    for (int stage = 0; stage <= 3; ++stage) {
      RunConfig c = test::small_run("gpt2-nano", N / tp, stage);
      c.tensor_parallel_size = tp;
      check_same("gpt2-nano tp " + std::to_string(tp) + " stage " + std::to_string(stage), c, g);
    }
    RunConfig b = test::small_run("gpt2-nano", N / tp, 3);
    b.tensor_parallel_size = tp;
    b.engine.precision = Precision::bf16;
    b.engine.zero.offload_optimizer.device = OffloadDevice::cpu;
    b.engine.zero.offload_param.device = OffloadDevice::cpu;
    check_same("gpt2-nano tp " + std::to_string(tp) + " stage 3 bf16, optimizer and parameters offloaded", b, g);
    {  // at tp 4, its 2 kv heads shared by 2 ranks each
      RunConfig l = test::small_run("llama-nano", N / tp, 3);
      l.tensor_parallel_size = tp;
      l.engine.activation_checkpointing = true;
      check_same("llama-nano tp " + std::to_string(tp) + " stage 3, activation checkpointing", l, g);
      l.megatron_sequence_parallel = true;
      check_same("llama-nano tp " + std::to_string(tp) +
                     " stage 3, activation checkpointing, Megatron's sequence "
                     "parallelism",
                 l, g);
    }
    RunConfig m = test::small_run("gpt2-nano", N / tp, 3);  // the tokens split between the sub-layers
    m.tensor_parallel_size = tp;
    m.megatron_sequence_parallel = true;
    check_same("gpt2-nano tp " + std::to_string(tp) + " stage 3, Megatron's sequence parallelism", m, g);
  }
  // sequence parallelism (Ulysses): the batch's shares, the all-to-alls, ZeRO over data x sequence ranks
  for (int sp : {2, 4}) {
    if (N % sp != 0) continue;
    RunConfig c = test::small_run("gpt2-nano", N / sp, 3);
    c.sequence_parallel_size = sp;
    check_same("gpt2-nano sp " + std::to_string(sp) + " stage 3", c, g);
  }
  if (N == 4) {
    RunConfig c = test::small_run("gpt2-nano", 1, 2);
    c.sequence_parallel_size = 2, c.tensor_parallel_size = 2;
    check_same("gpt2-nano sp 2 x tp 2 stage 2", c, g);
    c.megatron_sequence_parallel = true;
    check_same("gpt2-nano sp 2 x tp 2 stage 2, Megatron's sequence parallelism", c, g);
    RunConfig l = test::small_run("llama-nano", 2, 3);
    l.sequence_parallel_size = 2;
    l.engine.activation_checkpointing = true;
    check_same("llama-nano sp 2 stage 3, activation checkpointing", l, g);
  }
}
