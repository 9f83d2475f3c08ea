// defines: main (zt-estimate)
//
// zt-estimate: per-rank memory by category and tier, and the bytes a step moves, for a model: its
// training step run on the meta device for rank 0 and the last rank of N over K nodes (train/
// dry_run.h); --time, how long that step takes, simulated on a device profile (train/step_time.h,
// docs/step-time.md), with --compare every ZeRO choice side by side (train/compare.h) and with
// --tokens its hours and price; --fit, the largest size that fits (train/fit.h), and with --time how
// fast it runs; --params, the model states
// of a bare parameter count from the ZeRO paper's formulas; --paper, the paper's Table 1. See
// docs/estimator.md.
//
// Includes:
#include <omp.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/json.h"               // defines: read_json_file
#include "core/memory.h"             // defines: Category, category_name, format_bytes
#include "models/model_config.h"     // defines: ModelConfig, model_config
#include "train/compare.h"           // defines: compare_choices
#include "train/device_profile.h"    // defines: DeviceProfile, read_device_profile
#include "train/dry_run.h"           // defines: dry_run
#include "train/fit.h"               // defines: fit, Capacity, parse_fit_axis
#include "train/run_config.h"        // defines: run_config_keys
#include "train/step_time.h"         // defines: simulate_step_time, StepTime
#include "train/step_time_report.h"  // defines: print_step_time, step_time_json, Pricing, print_compare
#include "zero/engine_config.h"      // defines: Precision, ZeroOptimization, engine_config_from_file
#include "zero/footprint.h"          // defines: Footprint, model_state
#include "zero/paper_tables.h"       // defines: paper_table1, parse_count
#include "zero/stage.h"              // defines: stage_keeps

using namespace zt;

namespace {

nlohmann::json stats_json(const MemoryStats& m) {
  nlohmann::json j;
  for (Category c : kAllCategories) j[category_name(c)] = {{"peak", m.max(c)}, {"held", m.cur(c)}};
  j["peak_total"] = m.peak_total;
  return j;
}

// --model: the training step of rank 0 and of the last rank (they differ by the units' padding), run
// on the meta device (train/dry_run.h); with a profile, also its time (train/step_time.h).
void print_dry_runs(const std::string& what, DryRunRequest req, bool json, const DeviceProfile* profile,
                    const std::string& trace_path, const Pricing& pr) {
  const int world = req.world_size, nodes = req.nodes, threads = req.threads;
  const RunConfig& rc = req.run;
  nlohmann::json all = nlohmann::json::array();
  nlohmann::json trace_events = nlohmann::json::array();
  for (int rank : dry_run_ranks(world)) {
    req.rank = rank;
    DryRun d;
    StepTime time;
    if (profile) {
      time = simulate_step_time(req, *profile, &d);
      const nlohmann::json trace = step_time_trace_json(time, rank);
      for (const nlohmann::json& e : trace.at("traceEvents")) trace_events.push_back(e);
    } else {
      d = dry_run(req);
    }
    const DryRunStep& s = d.steady();
    if (json) {
      nlohmann::json j = {{"model", what},  {"rank", rank}, {"world_size", world},
                          {"nodes", nodes}, {"psi", d.psi}, {"psi_padded", d.psi_padded}};
      j["device"] = {
          {"setup", stats_json(d.setup_device)}, {"steady_step", stats_json(s.device)}, {"run", stats_json(d.device)}};
      j["host"] = {
          {"setup", stats_json(d.setup_host)}, {"steady_step", stats_json(s.host)}, {"run", stats_json(d.host)}};
      j["nvme"] = stats_json(d.nvme);  // bytes reserved in the swap files (reserved at setup, never freed)
      for (int k = 0; k < kNumCollectives; ++k)
        j["comm_per_step"][collective_name(static_cast<Collective>(k))] = s.comm.bytes[k];
      j["comm_per_step"]["intra_node"] = s.comm.link[0];
      j["comm_per_step"]["inter_node"] = s.comm.link[1];
      if (profile) j["time"] = step_time_json(time, *profile, world);
      if (profile && pr.asked()) j["cost"] = cost_json(pr, time, world);
      all.push_back(j);
      continue;
    }
    std::printf("zt-estimate: %s, rank %d of %d (%d node%s), %lld parameters (%lld padded), ZeRO stage %d, %s\n",
                what.c_str(), rank, world, nodes, nodes == 1 ? "" : "s", static_cast<long long>(d.psi),
                static_cast<long long>(d.psi_padded), rc.engine.zero.stage, precision_name(rc.engine.precision));
    std::printf("micro batch %lld x %lld tokens, %lld micro-step%s, %d thread%s; the step run on the meta device\n\n",
                static_cast<long long>(rc.batch()), static_cast<long long>(rc.seq_len),
                static_cast<long long>(rc.grad_accum()), rc.grad_accum() == 1 ? "" : "s", threads,
                threads == 1 ? "" : "s");
    std::printf("%-12s %-8s %14s %14s %14s\n", "category", "tier", "setup peak", "step peak", "held after");
    // Tiers: device, host, nvme (the swap files' regions: reserved at setup and held throughout).
    static const char* kTier[3] = {"device", "host", "nvme"};
    for (Category c : kAllCategories)
      for (int tier = 0; tier < 3; ++tier) {
        const MemoryStats& setup = tier == 0 ? d.setup_device : tier == 1 ? d.setup_host : d.nvme;
        const MemoryStats& step = tier == 0 ? s.device : tier == 1 ? s.host : d.nvme;
        if (tier && setup.max(c) == 0 && step.max(c) == 0) continue;
        std::printf("%-12s %-8s %14s %14s %14s\n", category_name(c), kTier[tier], format_bytes(setup.max(c)).c_str(),
                    format_bytes(step.max(c)).c_str(), format_bytes(step.cur(c)).c_str());
      }
    std::printf("%-12s %-8s %14s %14s %14s\n", "total", "device", format_bytes(d.setup_device.peak_total).c_str(),
                format_bytes(s.device.peak_total).c_str(), format_bytes(s.device.total()).c_str());
    if (d.setup_host.peak_total > 0 || s.host.peak_total > 0)
      std::printf("%-12s %-8s %14s %14s %14s\n", "total", "host", format_bytes(d.setup_host.peak_total).c_str(),
                  format_bytes(s.host.peak_total).c_str(), format_bytes(s.host.total()).c_str());
    if (d.nvme.peak_total > 0)
      std::printf("%-12s %-8s %14s %14s %14s\n", "total", "nvme", format_bytes(d.nvme.peak_total).c_str(),
                  format_bytes(d.nvme.peak_total).c_str(), format_bytes(d.nvme.total()).c_str());
    std::printf("\nbytes moved in a steady step (ring convention, docs/multi-node.md)\n");
    for (int k = 0; k < kNumCollectives; ++k)
      if (s.comm.bytes[k] > 0)
        std::printf("  %-16s %16lld %12s in %lld calls\n", collective_name(static_cast<Collective>(k)),
                    static_cast<long long>(s.comm.bytes[k]), format_bytes(s.comm.bytes[k]).c_str(),
                    static_cast<long long>(s.comm.calls[k]));
    std::printf("  intra-node %20lld %12s\n  inter-node %20lld %12s\n\n", static_cast<long long>(s.comm.link[0]),
                format_bytes(s.comm.link[0]).c_str(), static_cast<long long>(s.comm.link[1]),
                format_bytes(s.comm.link[1]).c_str());
    if (profile) print_step_time(time, *profile, world);
    if (profile && pr.asked()) print_cost(pr, time, world);
  }
  if (json) std::cout << all.dump(2) << std::endl;
  if (!trace_path.empty()) {
    std::ofstream f(trace_path);
    f << nlohmann::json{{"traceEvents", trace_events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    ZT_CHECK(f.good(), "--trace '", trace_path, "': cannot write the file");
  }
}

// --params: a parameter count without a shape has no step to run; its model states per rank are
// the policies' own answers for one unit of Psi elements (zero/footprint.h), the ZeRO paper's
// Figure 1 (bytes rounded up per category where N does not divide them).
void print_params(const std::string& what, int64_t psi, const EngineConfig& run, int64_t world, bool json) {
  const Footprint f = model_state(psi, world, stage_keeps(run.zero.stage), run.precision, run.zero, run.optimizer);
  const Category states[3] = {Category::params, Category::grads, Category::optim};
  static const char* kTier[kNumMemoryTiers] = {"model_state", "host_state", "nvme_state"};
  int64_t device_total = 0;
  for (Category c : states) device_total += f.bytes(MemoryTier::device, c, world);
  if (json) {
    nlohmann::json j = {{"model", what},
                        {"psi", psi},
                        {"stage", run.zero.stage},
                        {"world_size", world},
                        {"precision", precision_name(run.precision)},
                        {"model_state_total", device_total}};
    for (int t = 0; t < kNumMemoryTiers; ++t)
      for (Category c : states) j[kTier[t]][category_name(c)] = f.bytes(static_cast<MemoryTier>(t), c, world);
    std::cout << j.dump(2) << std::endl;
    return;
  }
  std::printf("zt-estimate: %s, ZeRO stage %d, %lld rank%s, %s: model states per rank (the ZeRO paper's Figure 1)\n\n",
              what.c_str(), run.zero.stage, static_cast<long long>(world), world == 1 ? "" : "s",
              precision_name(run.precision));
  std::printf("%-10s %16s %12s\n", "category", "device (bytes)", "");
  for (Category c : states) {
    const int64_t b = f.bytes(MemoryTier::device, c, world);
    std::printf("%-10s %16lld %12s\n", category_name(c), static_cast<long long>(b), format_bytes(b).c_str());
  }
  std::printf("%-10s %16lld %12s\n", "total", static_cast<long long>(device_total), format_bytes(device_total).c_str());
  static const char* kOff[2] = {"host memory", "nvme swap file"};
  for (int t = 1; t < kNumMemoryTiers; ++t) {
    int64_t total = 0;
    for (Category c : states) total += f.bytes(static_cast<MemoryTier>(t), c, world);
    if (total == 0) continue;
    std::printf("offloaded to %-15s", kOff[t - 1]);
    for (Category c : states)
      std::printf(" %s %s", category_name(c), format_bytes(f.bytes(static_cast<MemoryTier>(t), c, world)).c_str());
    std::printf("\n");
  }
  std::printf("\nactivations and the step's buffers: give --model (the step is then run on the meta device).\n");
}

const char* axis_name(FitAxis a) {
  return a == FitAxis::layers ? "n_layer" : a == FitAxis::batch ? "batch" : "seq_len";
}

nlohmann::json trial_json(const FitTrial& t) {
  nlohmann::json j = {{"size", t.size}, {"fits", t.fits}};
  if (!t.fits && t.size > 0)
    j["over"] = {{"tier", t.tier}, {"category", category_name(t.category)}, {"need", t.need}, {"capacity", t.capacity}};
  return j;
}

// --fit: the largest size of one axis that fits the capacities, by bisection over dry runs.
void print_fit(const std::string& what, const DryRunRequest& req, FitAxis axis, double device_mib, double host_mib,
               double nvme_mib, int64_t limit, bool json, const DeviceProfile* profile, const Pricing& pr) {
  auto mib = [](double m, const char* flag) {
    if (!(m >= 0 && m < 1e12)) ZT_THROW(flag, " ", m, ": expected a capacity in MiB >= 0 (0: no limit)");
    return static_cast<int64_t>(m * 1024 * 1024);
  };
  const Capacity cap{mib(device_mib, "--device-mib"), mib(host_mib, "--host-mib"), mib(nvme_mib, "--nvme-mib")};
  if (cap.device == 0 && cap.host == 0 && cap.nvme == 0)
    ZT_THROW("--fit needs a capacity: --device-mib, --host-mib or --nvme-mib");
  if (limit == 0) limit = axis == FitAxis::layers ? 1024 : axis == FitAxis::batch ? 4096 : int64_t{1} << 20;
  const FitResult r = fit(req, axis, cap, limit);
  // With a profile: how fast the size that fits runs (the slowest simulated rank's step).
  std::optional<StepTime> time;
  if (profile && r.best.size > 0)
    for (int rank : dry_run_ranks(req.world_size)) {
      DryRunRequest q = with_size(req, axis, r.best.size);
      q.rank = rank;
      const StepTime t = simulate_step_time(q, *profile);
      if (!time || t.step_s > time->step_s) time = t;
    }
  if (json) {
    nlohmann::json j = {{"model", what},
                        {"axis", axis_name(axis)},
                        {"world_size", req.world_size},
                        {"nodes", req.nodes},
                        {"dry_runs", r.trials.size()}};
    j["capacity"] = {{"device", cap.device}, {"host", cap.host}, {"nvme", cap.nvme}};
    j["fits"] = trial_json(r.best);
    j["does_not_fit"] = trial_json(r.next);
    if (time) {
      j["fits"]["time"] = step_time_json(*time, *profile, req.world_size);
      if (pr.asked()) j["fits"]["cost"] = cost_json(pr, *time, req.world_size);
    }
    if (axis == FitAxis::layers)  // the configs themselves, ready for zt-train --model / zt-estimate --model
      for (auto [key, t] : {std::pair{"fits", &r.best}, std::pair{"does_not_fit", &r.next}})
        if (t->size > 0) {
          ModelConfig m = req.model;
          m.n_layer = t->size;
          j[key]["model_config"] = m;
        }
    std::cout << j.dump(2) << std::endl;
    return;
  }
  auto cap_str = [](int64_t b) { return b > 0 ? format_bytes(b) : std::string("no limit"); };
  std::printf("zt-estimate --fit %s: %s, ZeRO stage %d, %d rank%s (%d node%s), %s\n", axis_name(axis), what.c_str(),
              req.run.engine.zero.stage, req.world_size, req.world_size == 1 ? "" : "s", req.nodes,
              req.nodes == 1 ? "" : "s", precision_name(req.run.engine.precision));
  std::printf("capacity per rank: device %s, host %s, nvme %s\n\n", cap_str(cap.device).c_str(),
              cap_str(cap.host).c_str(), cap_str(cap.nvme).c_str());
  if (r.best.size > 0) std::printf("fits:          %s %lld\n", axis_name(axis), static_cast<long long>(r.best.size));
  else std::printf("fits:          nothing: %s 1 does not fit\n", axis_name(axis));
  if (r.next.size > 0)
    std::printf("does not fit:  %s %lld: the %s passes its %s (%s, reaching %s)\n", axis_name(axis),
                static_cast<long long>(r.next.size), r.next.tier.c_str(), format_bytes(r.next.capacity).c_str(),
                r.next.tier == "nvme" ? "the swap files' reserved bytes" : category_name(r.next.category),
                format_bytes(r.next.need).c_str());
  else std::printf("does not fit:  none up to %s %lld (--fit-limit)\n", axis_name(axis), static_cast<long long>(limit));
  std::printf("(%zu dry runs of rank 0 and the last rank; train/fit.h)\n", r.trials.size());
  if (time) {
    std::printf("\nat %s %lld: ", axis_name(axis), static_cast<long long>(r.best.size));
    print_step_time(*time, *profile, req.world_size);
    if (pr.asked()) print_cost(pr, *time, req.world_size);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "zt-estimate: per-rank memory (params, grads, optim, activations, comm, workspace, secondary) of a "
      "ZeRO training run, or the ZeRO paper's Table 1 (--paper)"};
  std::string model_name, params_str, precision = "fp32", config_path, compute_dtype = "f32";
  int64_t tp = 1, sp = 1;  // --tensor-parallel-size, --sequence-parallel-size
  int stage = 0;
  int64_t world = 1, batch = 0, seq_len = 0, threads = omp_get_max_threads();
  bool ckpt = false, cpu_ckpt = false, paper = false, json = false, dry = false, megatron_sp = false;
  ZeroOptimization zero;
  app.add_option("--model", model_name,
                 "a named model config or a model config file (*.json): its training step is run on the meta device "
                 "for rank 0 and the last rank (train/dry_run.h), every byte and collective counted, none computed");
  app.add_option("--params", params_str, "a parameter count instead of a model: 124000000, 124M, 7.5B, 1T");
  app.add_option("--stage", stage, "ZeRO stage: 0, 1, 2 or 3");
  app.add_option("--world-size,--nd", world,
                 "ranks N (the paper's Nd; with --tensor-parallel-size, Nd x the tensor-parallel degree)");
  app.add_option("--tensor-parallel-size", tp,
                 "split each block over this many ranks (docs/parallel.md; config key tensor_parallel_size)");
  app.add_option("--sequence-parallel-size", sp,
                 "split each sequence over this many ranks (Ulysses; config key sequence_parallel_size)");
  app.add_flag("--megatron-sequence-parallel", megatron_sp,
               "with --tensor-parallel-size: the tokens split over the tensor group between the sub-layers (config "
               "key megatron_sequence_parallel)");
  app.add_option("--precision", precision, "fp32 | bf16 | fp16 (bf16 / fp16: the paper's mixed precision, K = 12)");
  app.add_option("--compute-dtype", compute_dtype,
                 "f32 (the CPU's mixed precision: float32 copies, 4-byte activations) or bf16 (a GPU's with bf16: "
                 "the model built in bf16, as zt-train --compute-dtype)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app.add_option("--batch,-b", batch, "micro batch per rank B (default: --config's, else 1; needs --model)");
  app.add_option("--seq-len,-t", seq_len, "sequence length T (default: the model's context)");
  app.add_flag("--activation-checkpointing", ckpt, "checkpoint the transformer blocks");
  app.add_flag("--cpu-checkpointing", cpu_ckpt, "the checkpoints in host memory (needs --activation-checkpointing)");
  app.add_option("--config", config_path, "a DeepSpeed-style JSON config: zero_optimization knobs (and stage, "
                                           "precision, activation_checkpointing unless given here)");
  app.add_option("--reduce-bucket-size", zero.reduce_bucket_size, "elements per gradient reduction call");
  app.add_option("--allgather-bucket-size", zero.allgather_bucket_size, "elements per parameter all-gather call");
  app.add_option("--prefetch-bucket-size", zero.stage3_prefetch_bucket_size, "stage 3: elements prefetched ahead");
  app.add_option("--max-live-parameters", zero.stage3_max_live_parameters, "stage 3: bound on gathered elements");
  app.add_option("--persistence-threshold", zero.stage3_param_persistence_threshold,
                 "stage 3: units with at most this many parameters stay gathered");
  app.add_option("--max-reuse-distance", zero.stage3_max_reuse_distance,
                 "stage 3: keep a unit gathered if it is used again within this many elements");
  app.add_flag("--overlap-comm", zero.overlap_comm,
               "reductions overlap the next unit's backward (default: DeepSpeed's, on at stage 3 only)");
  app.add_option("--threads", threads, "OpenMP threads per rank (attention backward scratch)");
  app.add_flag("--paper", paper, "print Table 1 of the ZeRO paper (Rajbhandari et al. 2019) from the formulas");
  app.add_flag("--json", json, "machine-readable output (bytes)");
  std::string fit_axis;
  double device_mib = 0, host_mib = 0, nvme_mib = 0;
  int64_t fit_limit = 0;
  CLI::Option* fit_opt = app.add_option(
      "--fit", fit_axis,
      "layers | batch | seq: the largest model depth, micro-batch or sequence length whose dry run fits "
      "--device-mib / --host-mib / --nvme-mib per rank (bisection over dry runs; train/fit.h)");
  app.add_option(
      "--device-mib", device_mib,
      "with --fit or --compare: the device's capacity per rank, MiB (0: no limit; --compare: the profile's)");
  app.add_option(
      "--host-mib", host_mib,
      "with --fit or --compare: the host tier's capacity per rank, MiB (0: no limit; --compare: the profile's)");
  app.add_option("--nvme-mib", nvme_mib, "with --fit: the swap files' capacity per rank, MiB (0: no limit)")
      ->needs(fit_opt);
  app.add_option("--fit-limit", fit_limit,
                 "with --fit: the largest size tried (default 1024 layers, 4096 sequences, "
                 "1048576 tokens)")
      ->needs(fit_opt);
  app.add_flag("--dry-run", dry, "what --model always does (the flag is accepted for scripts written before)");
  int64_t nodes = 1, accum = 0;
  app.add_option(
      "--nodes", nodes,
      "with --model: the bytes a step moves, ranks spread over this many nodes (N / nodes each, in rank order)");
  int64_t gpus_per_node = 0;
  app.add_option(
      "--gpus-per-node", gpus_per_node,
      "with --nodes: ranks per node (the world is nodes x gpus-per-node; --world-size, if given, must agree)");
  app.add_option("--grad-accum", accum, "gradient accumulation steps of that step (default: --config's, else 1)");
  std::string time_profile, trace_path;
  app.add_option("--time,--cluster", time_profile,
                 "with --model: the step's time, simulated on this device profile (zt-profile writes one; "
                 "configs/devices/ has datasheet ones; "
                 "train/step_time.h): step, forward, backward, optimizer, communication busy and exposed");
  app.add_option("--trace", trace_path, "with --time: the simulated step as a Chrome trace (Perfetto opens it)");
  bool compare = false;
  app.add_flag("--compare", compare,
               "with --time: every ZeRO choice (stages 0-3, cpu offload, ZeRO++ across nodes) for this model and "
               "cluster, fastest first, with its peaks and whether it fits the profile's memory (train/compare.h)");
  Pricing pricing;
  app.add_option("--tokens", pricing.tokens,
                 "with --time: the tokens to train (1e9, 2e12): the wall-clock hours and GPU-hours it takes");
  app.add_option("--price-per-gpu-hour", pricing.price_per_gpu_hour, "with --tokens: the price of a GPU-hour")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    if (paper) {
      std::cout << paper_table1();
      return 0;
    }
    if (app.count("--gpus-per-node")) {
      if (gpus_per_node < 1) ZT_THROW("--gpus-per-node ", gpus_per_node, ": expected >= 1");
      if (app.count("--world-size") && world != nodes * gpus_per_node)
        ZT_THROW("--world-size ", world, " disagrees with --nodes ", nodes, " x --gpus-per-node ", gpus_per_node);
      world = nodes * gpus_per_node;
    }
    EngineConfig run;  // the settings the estimate is for (the command line over --config's)
    bool overlap_set = app.count("--overlap-comm") > 0;  // else DeepSpeed's default: on at stage 3 only
    if (!config_path.empty()) {
      // zt-train's own top-level keys (train/run_config.cpp) may sit in the same file; the batch keys
      // count per data-parallel rank (world / tensor_parallel_size), as zt-train reads them
      const nlohmann::json j = read_json_file(config_path, "config '" + config_path + "'");
      if (!app.count("--tensor-parallel-size") && j.contains("tensor_parallel_size"))
        tp = json_integer(j.at("tensor_parallel_size"), "config '" + config_path + "': tensor_parallel_size", 1);
      if (!app.count("--sequence-parallel-size") && j.contains("sequence_parallel_size"))
        sp = json_integer(j.at("sequence_parallel_size"), "config '" + config_path + "': sequence_parallel_size", 1);
      if (!megatron_sp && j.contains("megatron_sequence_parallel")) {
        if (!j.at("megatron_sequence_parallel").is_boolean())
          ZT_THROW("config '", config_path,
                   "': megatron_sequence_parallel has the wrong type: ", j.at("megatron_sequence_parallel").dump(),
                   " (expected true or false)");
        megatron_sp = j.at("megatron_sequence_parallel").get<bool>();
      }
      if (tp < 1 || sp < 1 || world % (tp * sp) != 0)
        ZT_THROW("tensor_parallel_size ", tp, " x sequence_parallel_size ", sp, " does not divide the ", world,
                 " rank(s) of --world-size");
      const EngineConfig ec = engine_config_from_file(config_path, static_cast<int>(world < 1 ? 1 : world / (tp * sp)),
                                                      run_config_keys());
      run = ec;  // every key of the file (optimizer, fp16's scaler, aio, ...); the flags below win
      if (!app.count("--compute-dtype") && j.contains("compute_dtype") && j.at("compute_dtype") == "bf16")
        compute_dtype = "bf16";  // zt-train's key; "auto" is the CPU's float32 here
      const nlohmann::json zo = j.value("zero_optimization", nlohmann::json::object());
      if (zo.is_object() && zo.contains("overlap_comm")) overlap_set = true;
      const ZeroOptimization cli = zero;
      zero = ec.zero;  // the file's knobs, then whatever the command line set explicitly
      if (app.count("--reduce-bucket-size")) zero.reduce_bucket_size = cli.reduce_bucket_size;
      if (app.count("--allgather-bucket-size")) zero.allgather_bucket_size = cli.allgather_bucket_size;
      if (app.count("--prefetch-bucket-size")) zero.stage3_prefetch_bucket_size = cli.stage3_prefetch_bucket_size;
      if (app.count("--max-live-parameters")) zero.stage3_max_live_parameters = cli.stage3_max_live_parameters;
      if (app.count("--persistence-threshold"))
        zero.stage3_param_persistence_threshold = cli.stage3_param_persistence_threshold;
      if (app.count("--max-reuse-distance")) zero.stage3_max_reuse_distance = cli.stage3_max_reuse_distance;
      if (app.count("--overlap-comm")) zero.overlap_comm = true;
      if (!app.count("--stage")) stage = ec.zero.stage;
      if (!app.count("--precision")) precision = precision_name(ec.precision);
      if (!app.count("--activation-checkpointing")) ckpt = ec.activation_checkpointing;
      if (!app.count("--cpu-checkpointing")) cpu_ckpt = ec.cpu_checkpointing;
      if (!app.count("--batch")) batch = ec.train_micro_batch_size_per_gpu;
      if (!app.count("--grad-accum")) accum = ec.gradient_accumulation_steps;
    }
    if (stage < 0 || stage > 3) ZT_THROW("--stage ", stage, ": expected 0, 1, 2 or 3");
    if (!overlap_set) zero.overlap_comm = default_overlap_comm(stage);  // as zt-train's
    if (world < 1) ZT_THROW("--world-size ", world, ": expected >= 1");
    if (precision == "fp32") run.precision = Precision::f32;
    else if (precision == "bf16") run.precision = Precision::bf16;
    else if (precision == "fp16") run.precision = Precision::f16;
    else ZT_THROW("--precision \"", precision, "\": expected fp32, bf16 or fp16");
    if (model_name.empty() == params_str.empty()) ZT_THROW("give exactly one of --model NAME and --params N");
    if (batch < 0 || seq_len < 0 || threads < 1)
      ZT_THROW("--batch ", batch, ", --seq-len ", seq_len, ", --threads ", threads, ": expected >= 0, >= 0, >= 1");
    std::string what;
    ModelConfig cfg;  // --model
    int64_t psi = 0;  // --params
    if (!model_name.empty()) {
      cfg = model_config(model_name);
      if (compute_dtype == "bf16" && run.precision != Precision::bf16)
        ZT_THROW("--compute-dtype bf16 needs bf16 precision (--precision bf16 or bf16.enabled in --config)");
      // The step that runs: micro-batch 1 unless given (here or in --config), the model's context
      // unless --seq-len says otherwise.
      if (batch == 0) batch = 1;
      if (seq_len == 0) seq_len = cfg.max_seq_len;
      if (seq_len > cfg.max_seq_len)
        ZT_THROW("--seq-len ", seq_len, ": ", model_name, "'s context is ", cfg.max_seq_len);
      what = model_name;
    } else {
      psi = parse_count(params_str, "--params");
      if (app.count("--batch") || app.count("--seq-len"))
        ZT_THROW("--batch / --seq-len: activations need --model (a parameter count has no shape)");
      batch = 0;
      what = params_str + " parameters";
    }
    if (cpu_ckpt && !ckpt) ZT_THROW("--cpu-checkpointing moves the activation checkpoints to host memory: it needs --activation-checkpointing");
    run.zero = zero;
    run.zero.stage = stage;
    run.train_micro_batch_size_per_gpu = batch;
    run.activation_checkpointing = ckpt;
    run.cpu_checkpointing = cpu_ckpt;
    if (!model_name.empty()) {  // a model: its training step run on the meta device
      if (nodes < 1 || world % nodes != 0) ZT_THROW("--nodes ", nodes, ": expected a divisor of --world-size ", world);
      if (tp < 1 || sp < 1 || world % (tp * sp) != 0)
        ZT_THROW("--tensor-parallel-size ", tp, " x --sequence-parallel-size ", sp, " does not divide the ", world,
                 " rank(s) of --world-size");
      if (seq_len % sp != 0) ZT_THROW("--seq-len ", seq_len, " is not a multiple of --sequence-parallel-size ", sp);
      RunConfig rc;
      rc.model = model_name;
      rc.tensor_parallel_size = tp;
      rc.sequence_parallel_size = sp;
      rc.megatron_sequence_parallel = megatron_sp;
      rc.engine = run;
      rc.engine.gradient_accumulation_steps = accum < 1 ? 1 : accum;
      rc.seq_len = seq_len;
      rc.compute_dtype = compute_dtype == "bf16" ? DType::bf16 : DType::f32;
      DryRunRequest req;
      req.model = cfg;
      req.run = rc;
      req.world_size = static_cast<int>(world);
      req.nodes = static_cast<int>(nodes);
      req.threads = static_cast<int>(threads);
      std::optional<DeviceProfile> profile;
      // The profile as this job's ranks see it, N / K on a node: the host memory --compare holds
      // each choice against is a rank's share (simulate_step_time splits the rates the same way).
      if (!time_profile.empty())
        profile = read_device_profile(time_profile).for_ranks_per_node(req.world_size / req.nodes);
      if (!trace_path.empty() && !profile) ZT_THROW("--trace writes the simulated step: it needs --time PROFILE");
      if ((compare || pricing.asked()) && !profile)
        ZT_THROW(compare ? "--compare" : "--tokens", " needs --time PROFILE (or --cluster PROFILE): a step to time");
      if (pricing.price_per_gpu_hour > 0 && !pricing.asked()) ZT_THROW("--price-per-gpu-hour needs --tokens");
      if (compare && !fit_axis.empty()) ZT_THROW("--compare and --fit: run one, then the other on its answer");
      if (!trace_path.empty() && (compare || !fit_axis.empty()))
        ZT_THROW("--trace writes one simulated step: not with --compare or --fit");
      if (fit_axis.empty() && !compare && (device_mib > 0 || host_mib > 0))
        ZT_THROW("--device-mib / --host-mib are capacities for --fit or --compare");
      if (compare) {
        auto cap_of = [](double mib, int64_t profile_bytes) {
          return mib > 0 ? static_cast<int64_t>(mib * 1024 * 1024) : profile_bytes;
        };
        const Capacity cap{cap_of(device_mib, profile->device_memory_bytes),
                           cap_of(host_mib, profile->host_memory_bytes), 0};
        const std::vector<ChoiceResult> rs = compare_choices(req, *profile, cap);
        if (json) std::cout << compare_json(rs, *profile, cap, req.world_size, pricing).dump(2) << std::endl;
        else print_compare(what, rs, *profile, cap, req.world_size, req.nodes, pricing);
      } else if (!fit_axis.empty()) {
        print_fit(what, req, parse_fit_axis(fit_axis), device_mib, host_mib, nvme_mib, fit_limit, json,
                  profile ? &*profile : nullptr, pricing);
      } else {
        print_dry_runs(what, req, json, profile ? &*profile : nullptr, trace_path, pricing);
      }
      return 0;
    }
    if (tp != 1 || sp != 1 || megatron_sp)
      ZT_THROW(
          "--tensor-parallel-size / --sequence-parallel-size / --megatron-sequence-parallel need --model (a parameter "
          "count has no blocks to split)");
    if (!fit_axis.empty()) ZT_THROW("--fit needs --model (a step to run)");
    if (!time_profile.empty()) ZT_THROW("--time needs --model (a step to run)");
    if (compare || pricing.asked()) ZT_THROW("--compare / --tokens need --model and --time (a step to time)");
    if (app.count("--nodes") || app.count("--grad-accum"))
      ZT_THROW("--nodes / --grad-accum: the bytes a step moves need --model (a parameter count has no units)");
    print_params(what, psi, run, world, json);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "zt-estimate: error: %s\n", ex.what());
    return 1;
  }
  return 0;
}
