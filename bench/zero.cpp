// defines: main (bench_zero); helpers: run, ms_since, gather_rows, time_collective
//
// bench_zero — one ZeRO configuration (stage, N ranks under mpirun) of the Trainer on a named model:
// measured memory per rank by category, bytes moved per step, step time, and the time the training
// thread spent blocked on each kind of collective. bench/zero.sh sweeps stages 0-3 x N = 1, 2, 4, 8.
//
//   mpirun -np N bench_zero --stage S --global-batch 8 --seq 256 --json out.jsonl
//
// The global batch is the same for every N (batch per rank = global / N), so tokens per step and
// the arithmetic per step are the same, only split differently. Per timed step:
//   - memory: cpu_allocator() peaks per category (Trainer::step resets the peaks at its start, so
//     each reading is that step's peak; the max over timed steps is reported) and the current
//     bytes after the step (the model states at rest), beside the formulas of zero/engine.h:
//     fp32, Psi = psi_padded: stage 0 16Psi, 1 8Psi + 8Psi/N, 2 4Psi + 12Psi/N, 3 16Psi/N;
//   - communication: the ProcessGroup counters over the step (ring convention, dist/process_group.h)
//     beside 2Psi(N-1)/N x 4 bytes (stages 0-2) and 3Psi(N-1)/N x 4 bytes (stage 3);
//   - time: wall time of Trainer::step() with the ranks lined up by a barrier before it; the step
//     time of a step is the slowest rank's; the median over timed steps is reported;
//   - exposed communication: the time the training thread spent inside Work::wait(), by kind (a
//     decorator around the ProcessGroup), i.e. communication that compute did not hide.
// Optionally (--probe) the bare collectives on a buffer of Psi elements are timed too.
// Rank 0 prints one row per rank and appends one JSON object per run to --json.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/parallel.h"       // defines: set_num_threads, num_threads
#include "dist/process_group.h"  // defines: ProcessGroup, CommCounters, init_process_group
#include "train/run_config.h"    // defines: RunConfig
#include "train/trainer.h"       // defines: Trainer
#include "bench/bench_util.h"  // defines: bench::median, bench::loadavg

using namespace zt;
using Clock = std::chrono::steady_clock;

namespace {
using bench::median;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Gathers `mine` (the same length on every rank) from every rank: (N, K) row-major.
std::vector<double> gather_rows(ProcessGroup& g, const std::vector<double>& mine) {
  const int64_t K = static_cast<int64_t>(mine.size()), N = g.size();
  Tensor in = Tensor::empty({K}, DType::f64, Category::workspace);
  for (int64_t i = 0; i < K; ++i) in.data<double>()[i] = mine[i];
  Tensor out = Tensor::empty({N * K}, DType::f64, Category::workspace);
  g.all_gather(in, out);
  return std::vector<double>(out.data<double>(), out.data<double>() + N * K);
}

// Median ms (this rank's clock) of `reps` runs of fn on all ranks, lined up by a barrier each time.
template <class F>
double time_collective(ProcessGroup& g, int reps, F fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    g.barrier();
    const auto t0 = Clock::now();
    fn();
    t.push_back(ms_since(t0));
  }
  return median(t);
}

}  // namespace

int run(int argc, char** argv, ProcessGroup& world) {
  CLI::App app{"bench_zero: memory, communication and speed of one ZeRO stage on N ranks (run under mpirun)"};
  std::string model = "gpt-mini", data = "data/corpus/train.txt";
  std::string json_path, label, precision = "fp32";
  int64_t global_batch = 8, T = 256, steps = 4, warmup = 2;
  int stage = 0, threads = 0;
  bool probe = false;
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag overrides
  ZeroOptimization z;
  z.overlap_comm = true;
  z.stage3_param_persistence_threshold = 0;  // nothing stays gathered: the pure ZeRO-3 formula
  z.stage3_max_reuse_distance = 0;           // re-gather in backward: the paper's 3Psi
  app.add_option("--model", model)->capture_default_str();
  app.add_option("--data", data)->capture_default_str();
  app.add_option("--stage", stage)->capture_default_str()->check(CLI::Range(0, 3));
  app.add_option("--global-batch", global_batch, "sequences per step over all ranks (per rank: global / N)")->capture_default_str();
  app.add_option("--seq", T)->capture_default_str();
  app.add_option("--steps", steps, "timed steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first (the first records the stage-3 order)")->capture_default_str();
  app.add_option("--threads", threads, "OpenMP/BLAS threads per rank; 0 = leave OMP_NUM_THREADS")->capture_default_str();
  app.add_option("--overlap-comm", z.overlap_comm)->capture_default_str();
  app.add_option("--reduce-bucket", z.reduce_bucket_size)->capture_default_str();
  app.add_option("--allgather-bucket", z.allgather_bucket_size)->capture_default_str();
  app.add_option("--prefetch-bucket", z.stage3_prefetch_bucket_size)->capture_default_str();
  app.add_option("--max-live", z.stage3_max_live_parameters)->capture_default_str();
  app.add_option("--reuse-distance", z.stage3_max_reuse_distance)->capture_default_str();
  app.add_option("--persistence", z.stage3_param_persistence_threshold)->capture_default_str();
  app.add_option("--precision", precision, "fp32 | bf16 | fp16 (2-byte params and grads, fp32 master)")
      ->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_flag("--probe", probe, "also time bare all-gather / reduce-scatter / all-reduce of Psi elements");
  app.add_option("--label", label, "a name for this variant in the JSON")->capture_default_str();
  app.add_option("--json", json_path, "append one JSON line per run here (rank 0)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return world.rank() == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
  }
  const int N = world.size(), rank = world.rank();
  if (global_batch % N != 0) {
    if (rank == 0) std::fprintf(stderr, "bench_zero: --global-batch %lld is not divisible by N = %d ranks\n",
                                static_cast<long long>(global_batch), N);
    return 2;
  }
  if (threads > 0) set_num_threads(threads);
  z.stage = stage;

  // The group times every collective's wait per kind (ProcessGroup::times(), dist/process_group.h).
  ProcessGroup& g = world;
  RunConfig c;
  c.model = model;
  c.train_data = data;
  c.engine.train_micro_batch_size_per_gpu = global_batch / N;
  c.seq_len = T;
  c.steps = warmup + steps;
  c.engine.optimizer.lr = 1e-3;
  c.engine.scheduler.type = SchedulerType::constant;
  c.engine.gradient_clipping = 1.0;
  c.engine.zero = z;
  c.engine.precision = precision == "bf16" ? Precision::bf16 : precision == "fp16" ? Precision::f16 : Precision::f32;
  Trainer t(c, g);

  for (int64_t s = 0; s < warmup; ++s) t.step();

  // Per timed step, this rank: step ms, exposed comm ms by kind, peaks by category.
  std::vector<double> step_ms, wait_total;
  std::array<std::vector<double>, kNumCollectives> wait_kind;
  std::array<int64_t, kNumCategories> peak{};
  int64_t peak_total = 0;
  CommCounters moved;
  double loss = 0;
  for (int64_t s = 0; s < steps; ++s) {
    world.barrier();  // line the ranks up (read before the step's counters and times: not counted)
    const CommTimes times0 = g.times();
    const CommCounters before = g.counters();
    const auto t0 = Clock::now();
    const StepStats st = t.step();
    step_ms.push_back(ms_since(t0));
    moved = g.counters() - before;
    const CommTimes times1 = g.times();
    loss = st.loss;
    double w = 0;
    for (int k = 0; k < kNumCollectives; ++k) {
      const double ms = 1000.0 * (times1.wait_s[k] - times0.wait_s[k]);
      wait_kind[k].push_back(ms);
      w += ms;
    }
    wait_total.push_back(w);
    const MemoryStats m = default_allocator().stats();  // this step's peaks (Trainer::step reset them)
    for (int k = 0; k < kNumCategories; ++k) peak[k] = std::max(peak[k], m.peak[k]);
    peak_total = std::max(peak_total, m.peak_total);
  }
  const MemoryReport rep = t.engine().memory_report();  // current = at rest after a step
  const int64_t P = rep.psi_padded;

  // ---- per-rank row: gathered to rank 0 ----
  std::vector<double> row;
  for (int k = 0; k < kNumCategories; ++k) row.push_back(static_cast<double>(peak[k]));
  row.push_back(static_cast<double>(peak_total));
  for (int k = 0; k < kNumCategories; ++k) row.push_back(static_cast<double>(rep.measured.current[k]));
  for (int k = 0; k < kNumCollectives; ++k) row.push_back(static_cast<double>(moved.bytes[k]));
  for (int k = 0; k < kNumCollectives; ++k) row.push_back(static_cast<double>(moved.calls[k]));
  row.push_back(median(step_ms));
  row.push_back(median(wait_total));
  for (int k = 0; k < kNumCollectives; ++k) row.push_back(median(wait_kind[k]));
  for (double v : step_ms) row.push_back(v);
  const size_t K = row.size();
  const std::vector<double> all = gather_rows(world, row);

  // ---- optional: the bare collectives on Psi elements (the same buffers ZeRO moves per pass) ----
  double probe_ag = -1, probe_rs = -1, probe_ar = -1;
  if (probe && N > 1) {
    Tensor full = Tensor::zeros({P}, DType::f32, Category::comm);
    Tensor shard = Tensor::zeros({P / N}, DType::f32, Category::comm);
    probe_ag = time_collective(world, 3, [&] { world.all_gather(shard, full); });
    probe_rs = time_collective(world, 3, [&] { world.reduce_scatter(full, shard); });
    probe_ar = time_collective(world, 3, [&] { world.all_reduce(full); });
  }

  if (rank == 0) {
    auto at = [&](int r, size_t i) { return all[static_cast<size_t>(r) * K + i]; };
    const size_t i_peak = 0, i_ptot = kNumCategories, i_cur = i_ptot + 1, i_bytes = i_cur + kNumCategories,
                 i_calls = i_bytes + kNumCollectives, i_med = i_calls + kNumCollectives, i_wait = i_med + 1,
                 i_waitk = i_wait + 1, i_steps = i_waitk + kNumCollectives;
    // Step time of each timed step = the slowest rank's.
    std::vector<double> slowest(steps, 0.0);
    for (int64_t s = 0; s < steps; ++s)
      for (int r = 0; r < N; ++r) slowest[s] = std::max(slowest[s], at(r, i_steps + s));
    const double med = median(slowest);
    const double tokens = static_cast<double>(global_batch * T);
    const double Pd = static_cast<double>(P), Nd = N;
    // zero/engine.h: fp32 16Psi, 8Psi + 8Psi/N, 4Psi + 12Psi/N, 16Psi/N; mixed precision (the
    // paper's K = 12) 16Psi, 4Psi + 12Psi/N, 2Psi + 14Psi/N, 16Psi/N.
    const bool mixed = c.engine.precision != Precision::f32;
    const double state_formula = !mixed ? (stage == 0 ? 16 * Pd : stage == 1 ? 8 * Pd + 8 * Pd / Nd
                                           : stage == 2 ? 4 * Pd + 12 * Pd / Nd : 16 * Pd / Nd)
                                        : (stage == 0 ? 16 * Pd : stage == 1 ? 4 * Pd + 12 * Pd / Nd
                                           : stage == 2 ? 2 * Pd + 14 * Pd / Nd : 16 * Pd / Nd);
    const double comm_formula = (stage == 3 ? 3 : 2) * Pd * (Nd - 1) / Nd * (mixed ? 2 : 4);

    std::printf(
        "stage %d, N = %d (batch %lld per rank x T %lld), %s, Psi = %lld (padded %lld), threads %d, overlap_comm "
        "%d%s%s\n",
        stage, N, static_cast<long long>(c.engine.train_micro_batch_size_per_gpu), static_cast<long long>(T),
        model.c_str(), static_cast<long long>(rep.psi), static_cast<long long>(P), num_threads(),
        z.overlap_comm ? 1 : 0, label.empty() ? "" : ", ", label.c_str());
    std::printf("%4s | %10s %10s %10s %10s %10s %10s %10s | %12s | %12s %12s %12s | %9s %9s\n", "rank", "params", "grads",
                "optim", "activ", "comm", "work", "peak_total", "state@rest", "all_reduce", "red_scatter",
                "all_gather", "step_ms", "wait_ms");
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < N; ++r) {
      const double state = at(r, i_cur + 0) + at(r, i_cur + 1) + at(r, i_cur + 2);
      std::printf("%4d | %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f %10.0f | %12.0f | %12.0f %12.0f %12.0f | %9.1f %9.1f\n", r,
                  at(r, i_peak + 0), at(r, i_peak + 1), at(r, i_peak + 2), at(r, i_peak + 3), at(r, i_peak + 4),
                  at(r, i_peak + 5), at(r, i_ptot), state, at(r, i_bytes + 0), at(r, i_bytes + 1), at(r, i_bytes + 2),
                  at(r, i_med), at(r, i_wait));
      nlohmann::json jr;
      jr["rank"] = r;
      for (int k = 0; k < kNumCategories; ++k) {
        const char* name = category_name(kAllCategories[k]);
        jr["peak_bytes"][name] = static_cast<int64_t>(at(r, i_peak + k));
        jr["rest_bytes"][name] = static_cast<int64_t>(at(r, i_cur + k));
      }
      jr["peak_total_bytes"] = static_cast<int64_t>(at(r, i_ptot));
      jr["model_state_rest_bytes"] = static_cast<int64_t>(state);
      for (int k = 0; k < kNumCollectives; ++k) {
        const char* name = collective_name(static_cast<Collective>(k));
        jr["bytes_per_step"][name] = static_cast<int64_t>(at(r, i_bytes + k));
        jr["calls_per_step"][name] = static_cast<int64_t>(at(r, i_calls + k));
        jr["wait_ms_median"][name] = at(r, i_waitk + k);
      }
      double total_bytes = 0;
      for (int k = 0; k < kNumCollectives; ++k) total_bytes += at(r, i_bytes + k);
      jr["bytes_per_step_total"] = static_cast<int64_t>(total_bytes);
      jr["step_ms_median"] = at(r, i_med);
      jr["wait_ms_median_total"] = at(r, i_wait);
      std::vector<double> sm;
      for (int64_t s = 0; s < steps; ++s) sm.push_back(at(r, i_steps + s));
      jr["step_ms"] = sm;
      ranks.push_back(jr);
    }
    std::printf("median step %.1f ms (slowest rank), %.0f tokens/s global; model states at rest (rank 0) %.0f B, "
                "formula %.0f B; bytes moved (rank 0) %.0f, formula %.0f (+ scalars); loss %.4f\n",
                med, tokens / (med / 1000), at(0, i_cur) + at(0, i_cur + 1) + at(0, i_cur + 2), state_formula,
                at(0, i_bytes) + at(0, i_bytes + 1) + at(0, i_bytes + 2), comm_formula, loss);
    if (probe_ag >= 0)
      std::printf("bare collectives on Psi elements: all_gather %.1f ms, reduce_scatter %.1f ms, all_reduce %.1f ms\n",
                  probe_ag, probe_rs, probe_ar);

    nlohmann::json j;
    j["model"] = model;
    j["label"] = label;
    j["stage"] = stage;
    j["world_size"] = N;
    j["global_batch"] = global_batch;
    j["batch_per_rank"] = c.engine.train_micro_batch_size_per_gpu;
    j["seq"] = T;
    j["threads_per_rank"] = num_threads();
    j["precision"] = precision;
    j["warmup"] = warmup;
    j["steps"] = steps;
    j["zero"] = nlohmann::json(c.engine).at("zero_optimization");  // zero/engine_config.h's to_json
    j["psi"] = rep.psi;
    j["psi_padded"] = P;
    j["model_state_formula_bytes"] = static_cast<int64_t>(state_formula);
    j["comm_formula_bytes"] = static_cast<int64_t>(comm_formula);
    j["step_ms_slowest_rank"] = slowest;
    j["step_ms_median"] = med;
    j["tokens_per_s"] = tokens / (med / 1000);
    j["final_loss"] = loss;
    if (probe_ag >= 0) j["probe_ms"] = {{"all_gather", probe_ag}, {"reduce_scatter", probe_rs}, {"all_reduce", probe_ar}};
    j["ranks"] = ranks;
    if (!json_path.empty()) {
      std::ofstream f(json_path, std::ios::app);
      if (!f) {
        std::fprintf(stderr, "bench_zero: cannot open --json file '%s' for appending\n", json_path.c_str());
        world.abort("bench_zero: cannot write " + json_path, 2);
      }
      f << j.dump() << "\n";
    }
  }
  world.barrier();
  return 0;
}

int main(int argc, char** argv) {
  ProcessGroup& world = init_process_group();
  int rc = 0;
  try {
    rc = run(argc, argv, world);
  } catch (const std::exception& e) {  // one rank failing must not leave the others in a collective
    world.abort(std::string("bench_zero: ") + e.what(), 1);
  }
  finalize_process_group();
  return rc;
}
