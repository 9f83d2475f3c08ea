// defines: main (bench_capacity); helpers: Tier, tier_by_name, split, family_member, block_params,
//          engine_config, trial_request, dry_run_json and 4 more
//
// bench_capacity — ZeRO-Offload's headline on this machine (Ren et al. 2021, "ZeRO-Offload:
// Democratizing Billion-Scale Model Training", section 6 / Figure 7: the largest model one device
// trains): under one fixed device cap, the largest GPT-2-shaped model that trains for `steps`
// steps at each tier
//
//   stage0        plain data parallelism: 16Psi on the device (fp32 params, grads, m, v)
//   stage1        ZeRO-1 (optimizer states sharded): 8Psi + 8Psi/N
//   stage2        ZeRO-2 (also the gradients): 4Psi + 12Psi/N
//   stage3        ZeRO-3 without offload: 16Psi/N (N = 1: the shard is the whole model)
//   stage3+cpu    ZeRO-Offload/-Infinity: offload_optimizer cpu + offload_param cpu + the
//                 activation checkpoints in host memory (cpu_checkpointing)
//   stage3+nvme   ZeRO-Infinity: offload_optimizer nvme + offload_param nvme (one swap file) +
//                 cpu_checkpointing
//
// and its step time. The model family has a fixed width (n_embd, n_head, seq_len, batch, a
// byte-level vocabulary) and a growing depth n_layer: a deeper model is where stage 3 + offload
// wins, since the device then holds only the gathered units in flight, one unit's full gradient
// during its backward, and the activations (checkpointed: one (B, T, C) boundary per block, plus
// one block's recomputed internals during its backward). Every tier runs with activation
// checkpointing, the same batch and the same stage-3 knobs.
//
// Both caps hold from the process start (the first byte counts): the device cap
// (--cap-mib, on default_allocator(): zt-train --memory-limit-mib) and the host cap (--host-cap-mib,
// on host_allocator(): zt-train --host-memory-limit-mib), set before the model is built. The
// model is built by partitioned construction (models/init.h's ModelInit, zero/engine.cpp's
// load_initial): each rank creates only what its stage keeps. The offload tiers also move the
// activation checkpoints to the host tier (activation_checkpointing.cpu_checkpointing). Each
// trial records the process's own peak RSS (getrusage) beside the allocators' peaks, so that no
// allocation outside the count goes unseen.
//
// Each trial runs in its own process (this program re-executed with --trial; under mpirun when
// --ranks > 1), so an OutOfMemory cannot leave ranks hanging in a collective: the trial exits 3
// on OutOfMemory (the overflowing rank aborts the job), 0 when every step ran, 1 on any other
// error, which stops the search (a bug is not "does not fit"). A trial past --trial-timeout is
// killed and counted as not completing. Search over n_layer: doubling from --start-layers while
// it fits, then bisection between the largest fit and the smallest failure.
//
//   bench_capacity --cap-mib 32 --host-cap-mib 256 --tiers stage0,stage3,stage3+cpu,stage3+nvme
//                  --data data/corpus/train.txt --nvme-dir /tmp/zt_capacity --json capacity.json
//
// Every trial appends one JSON object to --json (kind "trial"), and every search one more (kind
// "best"): the largest fit with its memory by category (device peaks over the timed steps and at
// rest; the host tier's and the swap file's bytes; Engine::memory_report()) and the OutOfMemory
// message of the smallest failure (which category filled the cap). A trial that fits also carries
// the dry run of itself (train/dry_run.h: the same model, engine config, rank, batch and steps run
// on the meta device, what zt-estimate --model prints), whose peaks should be the measured ones
// to the byte: both go through the same allocators' accounting. bench/capacity.sh turns them into
// bench/results/capacity.md.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bench/bench_util.h"        // defines: bench::median, bench::loadavg
#include "core/memory.h"             // defines: OutOfMemory, default_allocator, host_allocator
#include "core/parallel.h"           // defines: set_num_threads
#include "dist/process_group.h"      // defines: init_process_group, finalize_process_group
#include "formats/token_data.h"      // defines: load_tokens, DataLoader
#include "models/init.h"             // defines: make_model, ModelInit
#include "models/model_config.h"     // defines: ModelConfig, from_json
#include "train/device_profile.h"    // defines: read_device_profile
#include "train/dry_run.h"           // defines: dry_run, DryRunRequest
#include "train/step_time.h"         // defines: simulate_step_time
#include "train/train_report.h"      // defines: memory_stats_json
#include "zero/engine.h"             // defines: Engine, initialize, MemoryReport

using namespace zt;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {
using bench::median;

struct FamilyShape {           // the fixed part of the family; n_layer varies
  int64_t n_embd = 128, n_head = 4, seq_len = 64, batch = 4, vocab = 256;
};

struct Tier {
  std::string name;
  int stage = 0;
  OffloadDevice opt = OffloadDevice::none, param = OffloadDevice::none;  // offload_optimizer / offload_param
  bool offload() const { return opt != OffloadDevice::none; }
};

Tier tier_by_name(const std::string& name) {
  if (name == "stage0") return {name, 0};
  if (name == "stage1") return {name, 1};
  if (name == "stage2") return {name, 2};
  if (name == "stage3") return {name, 3};
  if (name == "stage3+cpu") return {name, 3, OffloadDevice::cpu, OffloadDevice::cpu};
  if (name == "stage3+nvme") return {name, 3, OffloadDevice::nvme, OffloadDevice::nvme};
  ZT_THROW("--tiers: unknown tier '", name, "' (known: stage0, stage1, stage2, stage3, stage3+cpu, stage3+nvme)");
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

ModelConfig family_member(const FamilyShape& sh, int64_t layers) {
  // from_json fills the family's defaults (ffn 4C, tied head, padded vocab = vocab) and validates.
  const nlohmann::json j = {{"family", "gpt2"}, {"n_layer", layers}, {"n_embd", sh.n_embd}, {"n_head", sh.n_head},
                            {"vocab_size", sh.vocab}, {"max_seq_len", sh.seq_len}};
  return j.get<ModelConfig>();
}

// One block's parameters: c_attn 3C^2+3C, c_proj C^2+C, c_fc 4C^2+4C, mlp proj 4C^2+C, 2 LayerNorms 4C.
int64_t block_params(int64_t C) { return 12 * C * C + 13 * C; }

EngineConfig engine_config(const Tier& t, const FamilyShape& sh, const std::string& nvme_dir) {
  EngineConfig e;
  e.train_micro_batch_size_per_gpu = sh.batch;
  e.gradient_clipping = 1.0;
  e.optimizer.lr = 1e-3;
  e.optimizer.beta2 = 0.95;
  e.optimizer.weight_decay = 0.1;
  e.activation_checkpointing = true;  // every tier
  e.cpu_checkpointing = t.offload();   // the offload tiers: the checkpoints in the host tier too
  ZeroOptimization& z = e.zero;
  z.stage = t.stage;
  z.overlap_comm = t.stage == 3;  // DeepSpeed's stage-3 default
  // Stage 3: prefetch about one block ahead and never hold more than two blocks gathered (plus the
  // unit in use past the bound, engine.h); nothing is kept for reuse. Units under the persistence
  // threshold (the embedding, the final norm) stay gathered, as with DeepSpeed's default.
  const int64_t bp = block_params(sh.n_embd);
  z.stage3_prefetch_bucket_size = bp;
  z.stage3_max_live_parameters = 2 * bp;
  z.stage3_max_reuse_distance = 0;
  z.stage3_param_persistence_threshold = 100000;
  for (auto [cfg, dev] : {std::pair{&z.offload_optimizer, t.opt}, std::pair{&z.offload_param, t.param}}) {
    cfg->device = dev;
    if (dev == OffloadDevice::nvme) cfg->nvme_path = nvme_dir;
  }
  return e;
}

// The dry run of this trial (train/dry_run.h; zt-estimate --model): the same model, engine
// config, micro-batch (B, T), steps and thread count, for this rank of this world, run on the meta
// device, which has allocators of its own (the real ones' stats are not touched). Its peaks per
// category and tier, over the last (steady) step and over the whole run with the construction, and
// the swap files' reserved bytes ("current": reserved at setup, never freed).
DryRunRequest trial_request(const ModelConfig& mc, const EngineConfig& ec, int64_t seq_len, int world_size, int rank,
                            int threads, int steps) {
  DryRunRequest req;
  req.model = mc;  // built as the trial builds it: laid out without bytes, partitioned construction
  req.run.engine = ec;
  req.run.seq_len = seq_len;
  req.run.compute_dtype = DType::f32;  // the trial builds its model in float32 (ModelOptions' default)
  req.world_size = world_size;
  req.rank = rank;
  req.threads = threads;
  req.steps = std::max(steps, 2);  // the dry run needs the recording step and a steady one
  return req;
}

nlohmann::json dry_run_json(const ModelConfig& mc, const EngineConfig& ec, int64_t seq_len, int world_size, int rank,
                            int threads, int steps) {
  const DryRunRequest req = trial_request(mc, ec, seq_len, world_size, rank, threads, steps);
  const auto t0 = Clock::now();
  const DryRun d = dry_run(req);
  return {{"rank", rank},
          {"steps", req.steps},
          {"device", {{"steady_step", memory_stats_json(d.steady().device)}, {"run", memory_stats_json(d.device)}}},
          {"host", {{"steady_step", memory_stats_json(d.steady().host)}, {"run", memory_stats_json(d.host)}}},
          {"nvme", memory_stats_json(d.nvme)},
          {"psi", d.psi},
          {"s", std::chrono::duration<double>(Clock::now() - t0).count()}};
}

// ---------------------------------------------------------------------------------------------
// One trial (a child process): build, set up, train `steps` steps under the cap.

constexpr int kExitOom = 3;

int64_t peak_rss_bytes() {  // this process's peak resident set (Linux: ru_maxrss in KiB)
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

int run_trial(const Tier& t, const FamilyShape& sh, int64_t layers, int64_t cap, int64_t host_cap, int steps,
              const std::string& data, const std::string& nvme_dir, int threads, const std::string& result_path,
              const std::string& profile_path) {
  ProcessGroup& g = init_process_group();
  set_num_threads(threads);
  nlohmann::json r = {{"kind", "trial"}, {"tier", t.name}, {"layers", layers}, {"cap_bytes", cap},
                      {"host_cap_bytes", host_cap}, {"world_size", g.size()}, {"rss_base", peak_rss_bytes()}};
  auto write = [&](const nlohmann::json& j) {
    if (g.rank() != 0 && j.value("fits", false)) return;  // rank 0 reports a success; a failing rank its failure
    std::ofstream(result_path) << j.dump() << "\n";
  };
  const auto t_start = Clock::now();
  std::string phase = "build";
  try {
    default_allocator().set_limit(cap);  // both caps from the first byte
    host_allocator().set_limit(host_cap);
    const ModelConfig mc = family_member(sh, layers);
    ModelOptions opt;
    opt.world_size = g.size();
    opt.alignment = kShardAlignment;
    opt.materialize = false;  // partitioned construction: the engine creates what the stage keeps
    std::unique_ptr<Model> model = make_model(mc, opt);
    Rng rng(1337);
    ModelInit init(*model, rng);
    TokenIds tokens = load_tokens(data);
    check_tokens_fit_vocab(tokens, mc.vocab_size, data);
    DataLoader loader(std::move(tokens), sh.batch, sh.seq_len, g.rank(), g.size());
    phase = "setup";
    const EngineConfig ec = engine_config(t, sh, nvme_dir);
    std::unique_ptr<Engine> engine = initialize(*model, ec, g, &init);
    r["setup_peak_total"] = default_allocator().stats().peak_total;
    r["setup_host_peak_total"] = host_allocator().stats().peak_total;
    r["setup"] = {{"device", memory_stats_json(default_allocator().stats())},
                  {"host", memory_stats_json(host_allocator().stats())}};
    const MemoryReport rest = engine->memory_report();
    r["psi"] = rest.psi;
    r["psi_padded"] = rest.psi_padded;
    r["at_rest"] = {{"device", memory_stats_json(rest.measured)},
                    {"host", memory_stats_json(rest.host)},
                    {"nvme", memory_stats_json(rest.nvme)}};
    default_allocator().reset_peaks();
    host_allocator().reset_peaks();
    phase = "train";
    std::vector<double> ms, losses;
    std::array<std::vector<double>, 3> phase_ms;  // forward (with the batch), backward, optimizer step
    Tensor idx, targets;
    for (int s = 0; s < steps; ++s) {
      g.barrier();
      const auto t0 = Clock::now();
      loader.next_batch(idx, targets);
      Var loss = engine->forward(idx, targets);
      const auto t1 = Clock::now();
      engine->backward(loss);
      const auto t2 = Clock::now();
      const StepResult res = engine->step(1e-3);
      const auto t3 = Clock::now();
      auto ms_between = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
      };
      ms.push_back(ms_between(t0, t3));
      if (s > 0) {  // step 1 records the order
        phase_ms[0].push_back(ms_between(t0, t1));
        phase_ms[1].push_back(ms_between(t1, t2));
        phase_ms[2].push_back(ms_between(t2, t3));
      }
      losses.push_back(res.loss);
      if (!std::isfinite(res.loss)) ZT_THROW("step ", s + 1, ": loss is ", res.loss);
    }
    const MemoryReport m = engine->memory_report();
    std::vector<double> timed(ms.begin() + (ms.size() > 1 ? 1 : 0), ms.end());  // step 1 records the order
    r["fits"] = true;
    r["step_ms"] = ms;
    r["step_ms_median"] = median(timed);
    if (!phase_ms[0].empty())
      r["phase_ms_median"] = {
          {"forward", median(phase_ms[0])}, {"backward", median(phase_ms[1])}, {"optimizer", median(phase_ms[2])}};
    r["losses"] = losses;
    r["train"] = {{"device", memory_stats_json(m.measured)},
                  {"host", memory_stats_json(m.host)},
                  {"nvme", memory_stats_json(m.nvme)}};
    r["host_name"] = m.host_name;
    r["rss_peak"] = peak_rss_bytes();  // the whole trial, setup included
    r["trial_s"] = std::chrono::duration<double>(Clock::now() - t_start).count();
    engine.reset();  // removes the swap file
    // Measured first, then the dry run of the same trial, beside it (the caps are the real
    // allocators'; the meta device's are not capped).
    phase = "dry_run";
    r["dry_run"] = dry_run_json(mc, ec, sh.seq_len, g.size(), g.rank(), threads, steps);
    if (!profile_path.empty()) {  // and its step simulated on a profile (zt-profile's, of this machine)
      const StepTime st = simulate_step_time(trial_request(mc, ec, sh.seq_len, g.size(), g.rank(), threads, steps),
                                             read_device_profile(profile_path));
      r["predicted_step_ms"] = st.step_s * 1e3;
      r["predicted_nvme_ms"] = (st.nvme_s[0] + st.nvme_s[1]) * 1e3;
      r["predicted_exposed_nvme_ms"] = st.exposed_nvme_s * 1e3;
      r["predicted_untimed_ms"] = st.untimed_s * 1e3;  // ops the profile did not time: at class rates
      for (int c = 0; c < kNumOpClasses; ++c)
        r["predicted_compute_ms"][op_class_name(static_cast<OpClass>(c))] = st.compute_s[c] * 1e3;
      r["predicted_phase_ms"] = {
          {"forward", st.forward_s * 1e3}, {"backward", st.backward_s * 1e3}, {"optimizer", st.optimizer_s * 1e3}};
    }
    write(r);
    finalize_process_group();
    return 0;
  } catch (const OutOfMemory& e) {
    r["fits"] = false;
    r["phase"] = phase;
    r["error"] = e.what();
    write(r);
    std::fprintf(stderr, "bench_capacity trial: rank %d: %s\n", g.rank(), e.what());
    if (g.size() > 1) g.abort(std::string("bench_capacity: out of memory: ") + e.what(), kExitOom);
    return kExitOom;
  } catch (const std::exception& e) {
    r["fits"] = false;
    r["phase"] = phase;
    r["error"] = std::string("error: ") + e.what();
    write(r);
    std::fprintf(stderr, "bench_capacity trial: rank %d: error: %s\n", g.rank(), e.what());
    if (g.size() > 1) g.abort(std::string("bench_capacity: ") + e.what(), 1);
    return 1;
  }
}

// ---------------------------------------------------------------------------------------------
// The search (the parent process): each trial a child, killed past the timeout.

struct TrialOutcome {
  enum Kind { fits, oom, timeout, error } kind = error;
  nlohmann::json result;  // the child's JSON (empty on timeout)
  std::string log;        // the child's output (errors)
};

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) ZT_THROW("bench_capacity: cannot resolve /proc/self/exe: ", ec.message());
  return p.string();
}

struct Runner {
  std::string exe, data, nvme_dir, json_path, work_dir;
  FamilyShape shape;
  int64_t cap = 0, host_cap = 0;
  int steps = 5, ranks = 1, threads = 2;
  double timeout_s = 300;

  TrialOutcome trial(const Tier& t, int64_t layers) {
    const std::string result = work_dir + "/trial.json", log = work_dir + "/trial.log";
    fs::remove(result);
    std::vector<std::string> args;
    if (ranks > 1)
      args = {"mpirun", "-np", std::to_string(ranks), "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"};
    const std::vector<std::string> mine = {
        exe, "--trial", "--tier", t.name, "--layers", std::to_string(layers), "--cap-bytes", std::to_string(cap),
        "--host-cap-bytes", std::to_string(host_cap), "--steps", std::to_string(steps), "--data", data, "--nvme-dir", nvme_dir,
        "--threads", std::to_string(threads), "--result", result, "--n-embd", std::to_string(shape.n_embd),
        "--n-head", std::to_string(shape.n_head), "--seq-len", std::to_string(shape.seq_len), "--batch",
        std::to_string(shape.batch), "--vocab", std::to_string(shape.vocab)};
    args.insert(args.end(), mine.begin(), mine.end());
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) ZT_THROW("bench_capacity: fork failed");
    if (pid == 0) {
      setpgid(0, 0);  // its own process group: a timeout kills mpirun and its ranks together
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      if (!f || dup2(fileno(stdout), STDERR_FILENO) < 0) _exit(127);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    setpgid(pid, pid);
    const auto t0 = Clock::now();
    int status = 0;
    bool timed_out = false;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s) {
        kill(-pid, SIGKILL);
        waitpid(pid, &status, 0);
        timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    TrialOutcome o;
    {
      std::ifstream f(log);
      std::stringstream ss;
      ss << f.rdbuf();
      o.log = ss.str();
    }
    {
      std::ifstream f(result);
      std::string line;
      if (f && std::getline(f, line) && !line.empty()) o.result = nlohmann::json::parse(line);
    }
    // A killed trial may leave its swap file behind (a finished one removes it).
    for (int r = 0; r < ranks; ++r) fs::remove(nvme_dir + "/zt-swap-rank" + std::to_string(r) + ".bin");
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const bool said_oom = o.result.is_object() && o.result.value("error", "").rfind("out of memory", 0) == 0;
    if (timed_out) o.kind = TrialOutcome::timeout;
    else if (rc == 0 && o.result.is_object() && o.result.value("fits", false)) o.kind = TrialOutcome::fits;
    else if (rc == kExitOom || said_oom) o.kind = TrialOutcome::oom;
    else o.kind = TrialOutcome::error;
    if (!o.result.is_object()) o.result = {{"kind", "trial"}, {"tier", t.name}, {"layers", layers}, {"fits", false}};
    o.result["rc"] = rc;
    o.result["wall_s"] = std::chrono::duration<double>(Clock::now() - t0).count();
    o.result["outcome"] = timed_out ? "timeout" : o.kind == TrialOutcome::fits ? "fits"
                                                : o.kind == TrialOutcome::oom  ? "oom" : "error";
    std::ofstream(json_path, std::ios::app) << o.result.dump() << "\n";
    std::fprintf(stderr, "  %-12s N = %d L = %4lld: %-7s %6.1f s%s\n", t.name.c_str(), ranks,
                 static_cast<long long>(layers), o.result["outcome"].get<std::string>().c_str(),
                 o.result["wall_s"].get<double>(),
                 o.kind == TrialOutcome::fits
                     ? (" (" + std::to_string(static_cast<int>(o.result["step_ms_median"].get<double>())) + " ms/step)").c_str()
                     : "");
    if (o.kind == TrialOutcome::error)
      ZT_THROW("bench_capacity: trial ", t.name, " L = ", layers, " failed with an error (rc ", rc,
               ") that is not an out-of-memory; its output:\n", o.log);
    return o;
  }

  // Largest n_layer in [1, max_layers] that fits: doubling from `start`, then bisection.
  nlohmann::json search(const Tier& t, int64_t start, int64_t max_layers) {
    int64_t lo = 0, hi = max_layers + 1;  // lo fits (0: none known), hi does not
    std::map<int64_t, TrialOutcome> seen;
    auto probe = [&](int64_t L) {
      TrialOutcome o = trial(t, L);
      const bool ok = o.kind == TrialOutcome::fits;
      seen[L] = std::move(o);
      if (ok) lo = std::max(lo, L);
      else hi = std::min(hi, L);
      return ok;
    };
    for (int64_t L = std::clamp<int64_t>(start, 1, max_layers); probe(L) && L < max_layers;)
      L = std::min(2 * L, max_layers);
    while (hi - lo > 1) probe(lo + (hi - lo) / 2);
    nlohmann::json best = {{"kind", "best"}, {"tier", t.name}, {"cap_bytes", cap}, {"host_cap_bytes", host_cap},
                           {"layers", lo}, {"max_layers", max_layers}, {"world_size", ranks}};
    if (lo > 0) best["fit"] = seen.at(lo).result;
    if (hi <= max_layers) {
      best["first_failure"] = seen.at(hi).result;
      best["first_failure_layers"] = hi;
    }
    best["trials"] = static_cast<int64_t>(seen.size());
    std::ofstream(json_path, std::ios::app) << best.dump() << "\n";
    return best;
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_capacity: the largest gpt-family model each ZeRO tier trains under one device cap"};
  FamilyShape sh;
  double cap_mib = 32, host_cap_mib = 256;
  int64_t cap_bytes = 0, host_cap_bytes = 0, layers = 0, start_layers = 1, max_layers = 1024;
  int steps = 5, ranks = 1, threads = 2;
  double timeout_s = 300;
  bool trial = false;
  std::string tiers = "stage0,stage3,stage3+cpu,stage3+nvme", tier = "stage0";
  std::string data = "data/corpus/train.txt", nvme_dir = "/tmp/zt_capacity_nvme", json_path = "capacity.json", result;
  app.add_option("--cap-mib", cap_mib, "device cap (MiB)")->capture_default_str();
  app.add_option("--tiers", tiers, "comma-separated: stage0, stage1, stage2, stage3, stage3+cpu, stage3+nvme")->capture_default_str();
  app.add_option("--host-cap-mib", host_cap_mib, "host-tier cap (MiB)")->capture_default_str();
  app.add_option("--n-embd", sh.n_embd)->capture_default_str();
  app.add_option("--n-head", sh.n_head)->capture_default_str();
  app.add_option("--seq-len", sh.seq_len, "T (also the model's context length)")->capture_default_str();
  app.add_option("--batch", sh.batch, "sequences per rank per step")->capture_default_str();
  app.add_option("--vocab", sh.vocab, "vocabulary (256: the byte-level corpus)")->capture_default_str();
  app.add_option("--steps", steps, "steps a model must train for")->capture_default_str();
  app.add_option("--ranks", ranks, "ranks per trial (> 1: each trial under mpirun)")->capture_default_str();
  app.add_option("--threads", threads, "threads per rank")->capture_default_str();
  app.add_option("--start-layers", start_layers, "first n_layer of the doubling")->capture_default_str();
  app.add_option("--max-layers", max_layers, "largest n_layer tried")->capture_default_str();
  app.add_option("--trial-timeout", timeout_s, "seconds before a trial is killed (counted as not completing)")->capture_default_str();
  app.add_option("--data", data, "training tokens (text: byte tokens)")->capture_default_str();
  app.add_option("--nvme-dir", nvme_dir, "swap directory of the nvme tier (a disk-backed filesystem)")->capture_default_str();
  app.add_option("--json", json_path, "append one JSON object per trial and per search")->capture_default_str();
  // internal: one trial
  app.add_flag("--trial", trial, "(internal) run one trial");
  app.add_option("--tier", tier, "(internal) the trial's tier");
  app.add_option("--layers", layers, "(internal) the trial's n_layer");
  app.add_option("--cap-bytes", cap_bytes, "(internal) the trial's cap in bytes");
  app.add_option("--host-cap-bytes", host_cap_bytes, "(internal) the trial's host cap in bytes");
  app.add_option("--result", result, "(internal) where the trial writes its JSON");
  std::string profile;
  app.add_option("--profile", profile,
                 "(with --trial) also the trial's step simulated on this device profile (train/step_time.h): "
                 "predicted_step_ms beside the measured");
  CLI11_PARSE(app, argc, argv);

  try {
    if (trial)
      return run_trial(tier_by_name(tier), sh, layers, cap_bytes, host_cap_bytes, steps, data, nvme_dir, threads,
                       result, profile);

    Runner run;
    run.exe = self_exe();
    run.data = fs::absolute(data).string();
    run.nvme_dir = fs::absolute(nvme_dir).string();
    run.json_path = json_path;
    run.shape = sh;
    run.cap = static_cast<int64_t>(cap_mib * 1024 * 1024);
    run.host_cap = static_cast<int64_t>(host_cap_mib * 1024 * 1024);
    run.steps = steps;
    run.ranks = ranks;
    run.threads = threads;
    run.timeout_s = timeout_s;
    run.work_dir = (fs::temp_directory_path() / ("zt_capacity_" + std::to_string(getpid()))).string();
    fs::create_directories(run.work_dir);
    fs::create_directories(run.nvme_dir);
    std::vector<Tier> ts;
    for (const std::string& n : split(tiers)) ts.push_back(tier_by_name(n));
    std::fprintf(stderr, "bench_capacity: device cap %.1f MiB, host cap %.1f MiB, gpt2 family n_embd %lld, %lld heads, T %lld, B %lld, vocab %lld, "
                 "%d steps, %d rank(s) x %d threads, activation checkpointing on\n",
                 cap_mib, host_cap_mib, static_cast<long long>(sh.n_embd), static_cast<long long>(sh.n_head),
                 static_cast<long long>(sh.seq_len), static_cast<long long>(sh.batch), static_cast<long long>(sh.vocab),
                 steps, ranks, threads);
    int64_t start = start_layers;
    for (const Tier& t : ts) {
      const nlohmann::json best = run.search(t, start, max_layers);
      const int64_t L = best["layers"].get<int64_t>();
      std::fprintf(stderr, "%-12s N = %d: largest n_layer %lld%s\n", t.name.c_str(), ranks, static_cast<long long>(L),
                   L > 0 ? "" : " (none fits)");
      if (t.name == "stage0" && L > 0) start = L;  // the other tiers start their doubling from stage 0's size
    }
    fs::remove_all(run.work_dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_capacity: %s\n", e.what());
    return 1;
  }
  return 0;
}
