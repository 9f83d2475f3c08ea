// defines: main (zt-train); helpers: fmt_duration, memory_json, RunPeaks, threads_per_rank, start_device,
//          TrainingRun (prepare, open_log, print_banner, report_step, train and 2 more)
//
// zt-train — train a GPT-2 or Llama model on a token shard or a text file, on the CPU, on one
// rank or on N MPI ranks with ZeRO stages 0-3.
//
//   zt-train --model gpt-mini --train data/corpus/train.txt --val data/corpus/val.txt
//              --steps 300 --batch 8 --seq-len 256 --lr 1e-3 --log run.jsonl --ckpt-dir runs/mini
//   mpirun -np 4 zt-train --config configs/zero3.json --train data/corpus/train.txt --steps 100
//
// Rank 0 prints a live progress line on stderr and writes one JSON object per step with --log;
// every rank saves its shards of a checkpoint (--ckpt-dir, --ckpt-interval, --resume). At the end
// a table of every rank's memory by category. An error on any rank stops the whole job with a
// message naming the rank.
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "core/backend.h"             // defines: backend, parse_f32_matmul (--f32-matmul)
#include "core/json.h"                // defines: parse_json, read_json_file
#include "core/kernels/gemm_libs.h"   // defines: gemm_lib, gemm_lib_name (the banner)
#include "core/parallel.h"            // defines: set_num_threads
#include "dist/process_group.h"       // defines: init_process_group, ProcessGroup
#include "dist/trace_file.h"          // defines: write_trace (--trace)
#include "formats/hf_weights.h"       // defines: save_hf_weights (--save-hf)
#include "formats/llmc_checkpoint.h"  // defines: save_llmc_checkpoint
#include "models/gpt2.h"              // defines: GPT2 (for --save-llmc)
#include "models/init.h"              // defines: make_model (the whole model a tensor group saves)
#include "parallel/sliced_params.h"   // defines: gather_slices
#include "tools/zt_train_options.h"   // defines: TrainOptions, parse_train_options, resolve_run_config
#include "train/dry_run.h"            // defines: DryRunRequest, dry_run
#include "train/launch/run_device.h"  // defines: select_run_device (--device, --dist)
#include "train/run_config.h"         // defines: RunConfig, run_config_from_json
#include "train/train_report.h"  // defines: memory_stats_json, flops_per_token, peak_flops, print_*_table, print_run_summary
#include "train/trainer.h"       // defines: Trainer, StepStats
#include "train/wall_clock_breakdown.h"  // defines: PhaseTimes
#include "zero/zeropp.h"                 // defines: qgz_summary (the banner)

using namespace zt;

namespace {

std::string fmt_duration(double seconds) {
  char buf[32];
  const long s = std::lround(std::max(0.0, seconds));
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// The step's memory for the log: the device's allocator (its peaks are this step's) and, with a
// host tier (offload, cpu_checkpointing), the host tier's allocator and the swap files' reserved
// bytes (peaks: the run's, setup included).
nlohmann::json memory_json(const MemoryReport& r) {
  nlohmann::json j = memory_stats_json(default_allocator().stats());
  if (!r.host_name.empty()) {
    j["host"] = memory_stats_json(r.host);
    j["host"]["allocator"] = r.host_name;
    j["nvme"] = memory_stats_json(r.nvme);
  }
  return j;
}

// The allocator's peaks restart every step (the log reports each step's peak); the run's peak is
// the maximum over the steps, kept here.
struct RunPeaks {
  MemoryStats peaks;
  void update() {
    const MemoryStats m = default_allocator().stats();
    for (Category c : kAllCategories) {
      const int i = static_cast<int>(c);
      peaks.peak[i] = std::max(peaks.peak[i], m.peak[i]);
    }
    peaks.peak_total = std::max(peaks.peak_total, m.peak_total);
  }
};

// Threads per rank: --threads, else the cores shared among the ranks on this machine.
int threads_per_rank(int requested) {
  if (requested > 0) return requested;
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_here = local ? std::max(1, std::atoi(local)) : 1;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_here);
}

// The device a rank trains on, chosen before anything is allocated: the model, the engine and the
// optimizer allocate on the default device (core/backend.h). Collectives of training go through
// the returned group (MPI, or NCCL between GPUs); `group` (MPI) stays for the banner and the
// abort. Resolves the run's compute dtype "auto", which depends on the device.
RunDevice start_device(const TrainOptions& o, RunConfig& c, bool compute_dtype_auto, ProcessGroup& group) {
  const bool lead = group.rank() == 0;
  RunDevice run = select_run_device(o.device_text, o.dist_text, group);
  // The collective timeout guards the MPI group (dist/mpi_watchdog.h) and the NCCL one
  // (NcclProcessGroup's watchdog).
  group.set_collective_timeout(c.collective_timeout_s);
  if (run.group != &group && !run.group->set_collective_timeout(c.collective_timeout_s) && lead && group.size() > 1)
    std::fprintf(stderr, "zt-train: note: the %s backend does not enforce collective_timeout_s (docs/faults.md)\n",
                 run.group->backend().c_str());
  backend(run.device).set_f32_matmul_precision(parse_f32_matmul(o.f32_matmul));  // high on the cpu: an error
  // auto: a GPU computes bf16 runs in bf16 (its kernels take bf16; DeepSpeed's bf16 mode); the
  // cpu computes in float32, faster there than bf16 through float32 stand-ins (core/cpu_bf16.h).
  if (compute_dtype_auto)
    c.compute_dtype = !run.device.is_cpu() && c.engine.precision == Precision::bf16 ? DType::bf16 : DType::f32;
  return run;
}

// One training run of this rank: the Trainer, and what zt-train prints and writes around it (the
// banner, the live line and --log, the saved models, the end-of-run tables, --trace).
class TrainingRun {
 public:
  TrainingRun(const TrainOptions& o, const RunConfig& c, const RunDevice& run, ProcessGroup& group, int threads)
      : o_(o), c_(c), run_(run), group_(group), nt_(threads), lead_(group.rank() == 0), tr_(c, *run.group) {}

  // Before the first step: the trace's clock, the MFU's peak, the log file, the banner.
  void prepare();
  void train();
  // After the last step: --save-llmc, --save-hf, where the checkpoint is.
  void save_models();
  // Every rank's memory, offload and time tables (collective), then --trace's file.
  void report();

 private:
  void open_log();
  void print_banner();
  void report_step(const StepStats& s);  // called from inside step(), before its checkpoint

  const TrainOptions& o_;
  const RunConfig& c_;
  const RunDevice& run_;
  ProcessGroup& group_;  // MPI: the banner, the tables, the trace
  const int nt_;         // threads of this rank
  const bool lead_;      // rank 0 prints and logs
  Trainer tr_;
  std::unique_ptr<Tracer> tracer_;
  PeakFlops peak_;
  double flops_tok_ = 0;
  RunTotals totals_;
  CommCounters comm0_;
  CommTimes times0_;
  std::ofstream log_;
  bool tty_ = false;
  PhaseTimes breakdown_;  // wall_clock_breakdown: the phases since the last printed line
  double ms_sum_ = 0;
  int64_t timed_ = 0;
  RunPeaks run_peaks_;  // from the first step on: the setup's peak is printed apart (and in the first --log line)
  MemoryStats setup_;
};

void TrainingRun::prepare() {
  if (lead_ && tr_.tokenizer())
    std::fprintf(stderr, "zt-train: tokenizer '%s' (%s, %d tokens); the model's vocabulary: %lld (padded %lld)\n",
                 tr_.tokenizer()->source().c_str(), tr_.tokenizer()->kind().c_str(), tr_.tokenizer()->vocab_size(),
                 static_cast<long long>(tr_.model_config().vocab_size),
                 static_cast<long long>(tr_.model_config().padded_vocab_size));
  if (!o_.trace_path.empty()) {  // a trace that cannot be written is an error now, not after the run
    const std::filesystem::path dir = std::filesystem::absolute(o_.trace_path).parent_path();
    if (!std::filesystem::is_directory(dir))
      ZT_THROW("--trace '", o_.trace_path, "': the directory '", dir.string(), "' does not exist");
  }
  // --trace: the clocks of all ranks start together (after a barrier); the engine hands the
  // tracer to its group and swap files (core/trace.h).
  if (!o_.trace_path.empty()) {
    tracer_ = std::make_unique<Tracer>(group_.rank());
    group_.barrier();
    tracer_->set_origin(Tracer::Clock::now());
    tr_.engine().set_tracer(tracer_.get());
  }
  peak_ = peak_flops(run_.device, nt_, o_.peak_tflops);
  flops_tok_ = flops_per_token(tr_.model_config(), tr_.model().num_params(), tr_.config().seq_len);
  comm0_ = tr_.group().counters();
  times0_ = tr_.group().times();
  breakdown_ = PhaseTimes(tr_.group(), tr_.engine().times());
  open_log();
  print_banner();
  tty_ = lead_ && isatty(STDERR_FILENO);
  setup_ = default_allocator().stats();
}

void TrainingRun::open_log() {
  if (o_.log_path.empty() || !lead_) return;
  const std::string& log_path = o_.log_path;
  // On resume, keep the lines up to the checkpoint's step and drop any a killed run wrote
  // after it: those steps are about to be run again.
  std::vector<std::string> kept;
  if (c_.resume) {
    std::ifstream old(log_path);
    for (std::string line; std::getline(old, line);) {
      try {
        if (parse_json(line, "log '" + log_path + "'").at("step").get<int64_t>() <= tr_.step_count())
          kept.push_back(line);
      } catch (const std::exception&) {  // a torn last line of a killed run (or no "step")
      }
    }
  }
  log_.open(log_path, std::ios::trunc);
  if (!log_) ZT_THROW("cannot open log file '", log_path, "'");
  for (const std::string& line : kept) log_ << line << "\n";
}

void TrainingRun::print_banner() {
  if (!lead_) return;
  const RunConfig& c = c_;
  std::fprintf(
      stderr,
      "zt-train: %s, %lld parameters, %d rank%s, ZeRO stage %d, %s, B=%lld per rank, T=%lld, %d threads per "
      "rank (float32 GEMM: %s), %lld steps%s\n",
      c.init_from.empty() ? c.model.c_str() : c.init_from.c_str(), static_cast<long long>(tr_.model().num_params()),
      group_.size(), group_.size() > 1 ? "s" : "", c.engine.zero.stage,
      (std::string(precision_name(c.engine.precision)) +
       (c.engine.precision == Precision::f32 ? ""
                                             : " (compute " + std::string(compute_dtype_name(c.compute_dtype)) + ")"))
          .c_str(),
      static_cast<long long>(tr_.config().batch()), static_cast<long long>(tr_.config().seq_len), nt_,
      gemm_lib_name(gemm_lib()), static_cast<long long>(c.steps),
      tr_.step_count() ? (" (resumed at step " + std::to_string(tr_.step_count()) + ")").c_str() : "");
  if (group_.size() > 1)
    std::fprintf(stderr, "zt-train: %s (found by %s)\n", group_.topology().summary().c_str(),
                 group_.topology().source.c_str());
  if (const ProcessGrid* g = tr_.grid()) {
    std::string parts;
    if (g->tp > 1) parts += "each block split over " + std::to_string(g->tp) + " ranks (tensor), ";
    if (c.megatron_sequence_parallel) parts += "the tokens between its sub-layers too (Megatron's sequence parallel), ";
    if (g->sp > 1) parts += "each sequence over " + std::to_string(g->sp) + " ranks (Ulysses), ";
    std::fprintf(stderr, "zt-train: process grid %s: %sZeRO over the %d ranks holding the same parameters\n",
                 g->describe().c_str(), parts.c_str(), g->replica->size());
  }
  const ZeroOptimization& z = c.engine.zero;
  if (z.zeropp()) {
    std::string parts;
    auto add = [&parts](const std::string& s) { parts += (parts.empty() ? "" : ", ") + s; };
    const std::string blocks = "blocks of " + std::to_string(z.zero_quantization_block_size);
    if (z.zero_quantized_weights) add("qwZ int8 (" + blocks + ")");
    if (z.zero_hpz_partition_size > 1) add("hpZ over " + std::to_string(z.zero_hpz_partition_size) + " ranks");
    if (z.zero_quantized_gradients) add(qgz_summary(z, group_.topology().num_nodes()));
    std::fprintf(stderr, "zt-train: ZeRO++: %s\n", parts.c_str());
  }
  if (z.offload_optimizer.enabled()) {
    auto where = [](const OffloadConfig& o) {
      return o.nvme() ? "nvme (" + o.nvme_path + ")" : std::string(offload_device_name(o.device));
    };
    std::fprintf(stderr, "zt-train: offload: optimizer -> %s, parameters -> %s, sub_group_size %lld%s\n",
                 where(z.offload_optimizer).c_str(), where(z.offload_param).c_str(),
                 static_cast<long long>(z.sub_group_size),
                 run_.device.is_cpu() ? "; the device is the --memory-limit-mib capped cpu allocator, the host "
                                        "tier the rest of RAM (pin_memory has no meaning on a cpu device)"
                                      : "");
  }
  if (c.engine.cpu_checkpointing)
    std::fprintf(stderr,
                 "zt-train: activation checkpoints in host memory between forward and recompute "
                 "(cpu_checkpointing), brought back one block ahead\n");
  std::fprintf(stderr, "zt-train: MFU = (6N + 6LCT) FLOPs per token x tokens/s per rank / %s\n", peak_.source.c_str());
  if (!run_.device.is_cpu())
    std::fprintf(stderr, "zt-train: device %s, float32 matmul %s\n", run_.describe().c_str(), o_.f32_matmul.c_str());
}

void TrainingRun::report_step(const StepStats& s) {
  const RunConfig& c = c_;
  ms_sum_ += s.step_ms;
  ++timed_;
  const double eta = (ms_sum_ / timed_) * static_cast<double>(c.steps - s.step) / 1000.0;
  totals_.step_s += s.step_ms / 1000.0;
  ++totals_.steps;
  const double mfu = s.tokens_per_s / group_.size() * flops_tok_ / peak_.flops_per_s;
  const MemoryStats mem = default_allocator().stats();  // peaks: this step's
  char line[400];
  std::snprintf(
      line, sizeof line,
      "step %5lld/%lld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | MFU %.1f%% | mem %s (peak %s) | ETA %s",
      static_cast<long long>(s.step), static_cast<long long>(c.steps), s.loss, s.lr, s.grad_norm, s.tokens_per_s,
      100.0 * mfu, format_bytes(mem.total()).c_str(), format_bytes(mem.peak_total).c_str(), fmt_duration(eta).c_str());
  if (c.engine.precision == Precision::f16) {  // fp16: the loss scale, and whether the step was skipped
    const size_t len = std::strlen(line);
    std::snprintf(line + len, sizeof line - len, " | scale %g%s", s.loss_scale,
                  s.skipped ? " | overflow: step skipped" : "");
  }
  // steps_per_print: a line every that many steps and at the last; a terminal shows every step in
  // place and keeps those lines. An overflow or an evaluation is always worth a line of its own.
  const bool due = s.step % c.engine.steps_per_print == 0 || s.step == c.steps;
  if (c.engine.wall_clock_breakdown) breakdown_.add(s, tr_.group(), tr_.engine().times());
  if (!lead_) {
  } else if (s.val_loss >= 0) {
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s | val loss %.4f\n", line, s.val_loss);
  } else if (due || s.skipped) {
    std::fprintf(stderr, "%s%s\n", tty_ ? "\r\033[K" : "", line);
  } else if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line);
  }
  if (due && c.engine.wall_clock_breakdown) {
    if (lead_) std::fprintf(stderr, "%s\n", breakdown_.line().c_str());
    breakdown_ = PhaseTimes(tr_.group(), tr_.engine().times());
  }
  if (log_) {
    nlohmann::json j = {{"step", s.step},
                        {"loss", s.loss},
                        {"lr", s.lr},
                        {"grad_norm", s.grad_norm},
                        {"tokens_per_s", s.tokens_per_s},
                        {"mfu", mfu},
                        {"step_ms", s.step_ms},
                        {"memory", memory_json(tr_.engine().memory_report())},
                        {"comm_bytes", tr_.group().counters().total()},
                        {"comm_bytes_inter_node", tr_.group().counters().inter_node()}};
    // The first line this run writes also holds the setup's device bytes (its peaks: construction's,
    // which the steps' peaks leave out), so the log has the run's peak with the setup in it.
    if (timed_ == 1) j["memory"]["setup"] = memory_stats_json(setup_);
    if (c.engine.precision == Precision::f16) {
      j["loss_scale"] = s.loss_scale;
      j["skipped"] = s.skipped;
    }
    if (s.val_loss >= 0) j["val_loss"] = s.val_loss;
    log_ << j.dump() << "\n" << std::flush;
  }
}

void TrainingRun::train() {
  while (!tr_.done()) {
    if (tracer_ && o_.trace_steps > 0 && totals_.steps >= o_.trace_steps) tracer_->set_recording(false);
    tr_.step([this](const StepStats& s) { report_step(s); });
    run_peaks_.update();
  }
  totals_.comm = tr_.group().counters() - comm0_;
  const CommTimes times1 = tr_.group().times();
  for (int k = 0; k < kNumCollectives; ++k) {
    totals_.comm_times.busy_s[k] = times1.busy_s[k] - times0_.busy_s[k];
    totals_.comm_times.wait_s[k] = times1.wait_s[k] - times0_.wait_s[k];
  }
  totals_.engine = tr_.engine().times();
  if (tracer_) tr_.engine().set_tracer(nullptr);  // the trace holds the training; not the tables below
  if (tty_) std::fprintf(stderr, "\n");
}

void TrainingRun::save_models() {
  // Stages 0-2 hold the whole model on every rank; under tensor parallelism each rank's slices,
  // which the tensor group gathers into the whole model first (parallel/sliced_params.h).
  Model* model = &tr_.model();
  std::unique_ptr<Model> whole;
  if ((!o_.save_llmc.empty() || !o_.save_hf.empty()) && c_.engine.zero.stage < 3 && c_.tensor_parallel_size > 1) {
    ModelOptions opt;
    opt.dtype = c_.compute_dtype;
    whole = make_model(tr_.model_config(), opt);
    gather_slices(*whole, tr_.model(), TensorParallel{tr_.grid()->tensor.get()});
    model = whole.get();
  }
  if (!o_.save_llmc.empty()) {
    if (c_.engine.zero.stage == 3)
      ZT_THROW("--save-llmc with ZeRO stage 3: consolidate the checkpoint instead (zt-ckpt consolidate --format llmc)");
    auto* gpt = dynamic_cast<GPT2*>(model);
    if (!gpt) ZT_THROW("--save-llmc: llm.c checkpoints hold GPT-2 models; this is a ", model->family(), " model");
    if (lead_) {
      save_llmc_checkpoint(o_.save_llmc, *gpt, o_.save_llmc_version);
      std::fprintf(stderr, "wrote %s\n", o_.save_llmc.c_str());
    }
  }
  if (!o_.save_hf.empty()) {
    if (c_.engine.zero.stage == 3)
      ZT_THROW("--save-hf with ZeRO stage 3: consolidate the checkpoint instead (zt-ckpt consolidate --format hf)");
    if (lead_)
      save_hf_weights(o_.save_hf, *model, DType::f32, parse_shard_size(o_.save_hf_shard_size, "--save-hf-shard-size"));
    if (lead_) std::fprintf(stderr, "wrote %s\n", o_.save_hf.c_str());
  }
  if (!c_.ckpt_dir.empty() && lead_) std::fprintf(stderr, "checkpoint: %s/latest\n", c_.ckpt_dir.c_str());
}

void TrainingRun::report() {
  const RunConfig& c = c_;
  // This rank's training step run on the meta device (train/dry_run.h): the prediction beside the
  // measurement (the Trainer's own, made at setup under a host cap).
  const DryRun& est = tr_.own_dry_run();
  if (est.nodes != group_.topology().num_nodes() && lead_)
    std::fprintf(stderr, "\n(the dry run below simulates one node: this job's %s is not node-major over equal nodes)\n",
                 group_.topology().summary().c_str());
  if (lead_)
    std::fprintf(stderr,
                 "\nsetup (rank 0): partitioned construction (each unit created as the stage keeps it, "
                 "under --memory-limit-mib): peak %s\n",
                 format_bytes(setup_.peak_total).c_str());
  print_memory_table(group_, run_peaks_.peaks, est);
  if (c.engine.zero.offload_optimizer.enabled()) print_offload_table(group_, tr_.engine().memory_report(), est);
  if (c.engine.cpu_checkpointing && lead_) {  // the checkpoints' round trip (zero/activation_offload.h)
    const MemoryReport m = tr_.engine().memory_report();
    std::fprintf(stderr,
                 "\nactivation checkpoints in host memory (cpu_checkpointing; rank 0, %s allocator): peak %s, "
                 "now %s; waited for their return %.3f s\n",
                 m.host_name.c_str(), format_bytes(m.host.max(Category::activations)).c_str(),
                 format_bytes(m.host.cur(Category::activations)).c_str(), tr_.engine().times().checkpoint_wait_s);
  }
  print_run_summary(group_, totals_);
  if (tracer_) {
    const int64_t trace_steps = o_.trace_steps;
    const nlohmann::json about = {{"model", c.init_from.empty() ? c.model : c.init_from},
                                  {"zero_stage", c.engine.zero.stage},
                                  {"steps", c.steps},
                                  {"micro_batch", tr_.config().batch()},
                                  {"seq_len", tr_.config().seq_len},
                                  {"traced_steps", trace_steps > 0 ? std::min(trace_steps, c.steps) : c.steps}};
    write_trace(*tracer_, group_, o_.trace_path, about);
    if (lead_)
      std::fprintf(stderr, "\ntrace: %s (%zu events on rank 0; open in https://ui.perfetto.dev)\n",
                   o_.trace_path.c_str(), tracer_->size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) must be an error that names the file (EFBIG from the write:
  // swap files, checkpoints, logs), not a kill by SIGXFSZ that leaves the job without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  TrainOptions options;
  if (const std::optional<int> exit_code = parse_train_options(argc, argv, options)) return *exit_code;

  ProcessGroup& group = init_process_group();
  try {
    const int threads = set_num_threads(threads_per_rank(options.threads));
    bool compute_dtype_auto = false;
    RunConfig config = resolve_run_config(options, group.size(), &compute_dtype_auto);
    const RunDevice device = start_device(options, config, compute_dtype_auto, group);
    TrainingRun run(options, config, device, group, threads);
    run.prepare();
    run.train();
    run.save_models();
    run.report();
  } catch (const std::exception& e) {
    // One rank's error must not leave the others waiting in a collective: stop the whole job.
    if (group.size() > 1) group.abort(std::string("zt-train: ") + e.what());
    std::fprintf(stderr, "\nzt-train: error: %s\n", e.what());
    return 1;
  }
  finalize_process_group();
  return 0;
}
