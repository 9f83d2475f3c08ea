// defines: TrainOptions, parse_train_options, resolve_run_config — zt-train's command line: its
//          options parsed (CLI11) into the run's settings and the tool's own, then merged with
//          a --config file into the RunConfig the Trainer takes.
//
// Two steps because the merge needs the world size (run_config_from_json checks the batch against
// it), known only once the process group is up, and its errors must stop every rank:
//
//   parse_train_options(argc, argv)      before init_process_group: --help, a bad flag -> exit code
//   resolve_run_config(options, world)   inside zt-train's try: the --config merge, the MiB caps
//
// Part of the zt-train program (tools/), not a library: CLI11 is a dependency of the tools only.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "train/run_config.h"

namespace zt {

struct TrainOptions {
  RunConfig run;            // as given on the command line (defaults where not given)
  std::string config_path;  // --config: the engine settings come from this file
  // The flags that name a mode, checked against their choices by CLI11 and turned into the
  // config's enums by resolve_run_config; --warmup and --min-lr-frac: scheduler parameters of --schedule.
  std::string optimizer_text = "adamw", schedule_text = "none", compute_dtype_text = "auto";
  int64_t warmup = 0;
  double min_lr_frac = 0;
  // The flags given on the command line (long names, "--batch"): a flag that the file also sets is
  // an error, and run settings given here win over the file's.
  std::set<std::string> given;
  double memory_limit_mib = 0, host_memory_limit_mib = 0;
  int threads = 0;  // 0: cores / ranks on this machine
  std::string device_text = "cpu", dist_text = "auto", f32_matmul = "highest";
  std::string log_path;            // --log: one JSON object per step
  std::string save_llmc, save_hf;  // written at the end of the run
  std::string save_hf_shard_size = "5GB";
  int save_llmc_version = 3;
  std::string trace_path;  // --trace
  int64_t trace_steps = 0;
  double peak_tflops = 0;  // the MFU's denominator (0: measured on the cpu, 989 on a GPU)
};

// Parses zt-train's command line into `o`. Returns the exit code when the command line ends the
// program (--help: 0, printed on stdout; an unknown or invalid flag: CLI11's message and code),
// nothing when training should go on.
std::optional<int> parse_train_options(int argc, char** argv, TrainOptions& o);

// The run's settings: with --config, the file's engine settings (a command-line flag that would
// contradict them is an error naming it) and the command line's run settings over the file's;
// the memory caps in bytes. Without --config, the flags make the engine config as the parser
// would make the same keys (SGD's weight decay 0 unless given, overlap_comm on at stage 3, the
// scheduler's defaults for --schedule). `compute_dtype_auto` (optional) is set to whether neither
// --compute-dtype nor the file chose the compute dtype: the device decides. Throws a zt::Error.
RunConfig resolve_run_config(const TrainOptions& o, int world_size, bool* compute_dtype_auto = nullptr);

}  // namespace zt
