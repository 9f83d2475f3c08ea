// defines: memory_stats_json, flops_per_token, PeakFlops, peak_flops, RunTotals, print_memory_table,
//          print_offload_table, print_run_summary — what zt-train reports besides the loss: the
//          live line's MFU, and the end-of-run tables of every rank (collective; rank 0 prints).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/device.h"
#include "dist/process_group.h"
#include "models/model_config.h"
#include "train/dry_run.h"  // defines: DryRun
#include "zero/engine.h"    // defines: MemoryReport, EngineTimes

namespace zt {

// One allocator's bytes as JSON, by category (core/memory.h's names): {"current": {...},
// "peak": {...}, "current_total", "peak_total"} — zt-train's --log and bench_capacity's report.
nlohmann::json memory_stats_json(const MemoryStats& m);

// Training FLOPs per token, forward + backward: 6N for the weight matmuls (2 per multiply-add,
// times 3 for forward, input gradient and weight gradient) + 6 L C T for attention's QK^T and AV
// (PaLM's 12 L C T, Chowdhery et al. 2022 appendix B, halved for the causal mask, as llm.c
// counts). N = every parameter once; the same formula as bench/train_step.cpp.
double flops_per_token(const ModelConfig& m, int64_t num_params, int64_t seq_len);

// The peak MFU divides by, per rank.
struct PeakFlops {
  double flops_per_s = 0;
  std::string source;  // "measured fma ceiling, 2 threads" / "--peak-tflops 989"
};
// cpu: the float32 FMA ceiling of this rank's threads, measured now (core/fma_ceiling.h, ~0.1 s;
// ranks sharing cores measure their share). A GPU: `peak_tflops` (the device's dense bf16 peak;
// default 989, H100 / H200 SXM). peak_tflops > 0 always wins.
PeakFlops peak_flops(const Device& d, int threads, double peak_tflops);

// What one rank did over the run (its steps), for print_run_summary.
struct RunTotals {
  double step_s = 0;  // wall time of Trainer::step(): forward, backward, optimizer
  int64_t steps = 0;
  CommCounters comm;     // bytes and calls by collective
  CommTimes comm_times;  // run and wait time by collective
  EngineTimes engine;    // offload work on the training thread
};

// Every rank's current and run-peak device bytes per category, with its own dry run's peak over
// the training steps beside them (`dry`: this rank's, train/dry_run.h).
void print_memory_table(ProcessGroup& g, const MemoryStats& run_peaks, const DryRun& dry);
// Offload: every rank's model states in the host tier and the swap file, with its dry run's.
void print_offload_table(ProcessGroup& g, const MemoryReport& m, const DryRun& dry);
// Every rank's bytes moved by collective, and its time in compute, communication and offload:
//   comm busy   = the collectives' run time (the communication thread; overlaps compute)
//   comm wait   = the training thread blocked on them (what compute did not hide)
//   offload     = the training thread in the host optimizer, fetching offloaded parameters and
//                 landing gradients in host memory (optimizer / fetch / grads)
//   compute     = step time - comm wait - offload
void print_run_summary(ProcessGroup& g, const RunTotals& mine);

}  // namespace zt
