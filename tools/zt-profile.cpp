// defines: main (zt-profile); file-local: Clock, median, OpCollector, kWindowBytes, time_in_order,
//          merge_ranks_ops, fit_hop, RankBench, measure_link, measure_compute_pace, measure_first_touch,
//          measure_nvme, hostname
//
// zt-profile: what this machine's ops and links cost, written as a device profile
// (train/device_profile.h) for the step simulator (zt-estimate --time, train/step_time.h).
//
//   ops    the training step of --model (micro-batch -b, sequence -t) is dry-run for each ZeRO
//          stage in --stages (and with ZeRO++'s quantization with --zeropp, offloaded to the host
//          with --offload), on this rank of this
//          job; every distinct op (core/meta_backend.h's MetaOpRecord: row, shapes, dtypes) is run
//          on the real backend (--device) on tensors of its shapes (filled as core/meta_op_record.h's
//          replay_fill_value says: 0.5, or 0 in an integer one; the quantization's rows, whose
//          time depends on their values, with normal draws: make_varied), in the step's order and
//          with its data flow (time_in_order), once to warm up and --repeats times timed; the median is the
//          op's time. With --activation-checkpointing the step recomputes, and with
//          --cpu-checkpointing its checkpoints are copied to the host and back, as the job's are.
//          Every rank of the job times its ops at the same moment (a barrier first), so the times
//          include what ranks sharing a machine cost each other, as they do in training. Each
//          class's roofline rate is fitted to its own measured ops (the sum of their flops or
//          bytes over the sum of times).
//          The ops on the host tier (--offload's optimizer step and its casts) run on the cpu
//          backend, where the engine runs them, and are fitted apart (host_classes).
//   links  under mpirun with 2 ranks or more: ring all-gathers of 1 KiB to 16 MiB per rank on the
//          world group (inter-node when the ranks are on several nodes, else intra-node) and on
//          each node's group (intra-node, when nodes hold 2 ranks or more); alpha and beta are the
//          least-squares fit of time = (N - 1) alpha + bytes / beta to the medians, alone and beside
//          a GEMM loop; and compute's pace beside a collective (compute_pace: measure_compute_pace).
//   fill   on a CPU device: what the kernel's fill of a fresh mapping costs beyond the write
//          (first_touch_bytes_per_s: measure_first_touch), every rank at once.
//   nvme   with --nvme-path DIR: each rank's swap file there, written and read back by every rank at
//          once (measure_nvme): a request's alpha and the read and write rates.
//
// Run it the way the training will run: the same launcher, ranks, nodes, threads and device
// (`mpirun -np 4 zt-profile ...`; on the cluster in a box, inside the box). Rank 0 writes --out,
// with the op times of every rank (merge_ranks_ops).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/memory.h"  // defines: cpu_maps, cpu_allocator
#include "core/meta_backend.h"
#include "dist/gather_json.h"
#include "models/model_config.h"
#include "train/device_profile.h"
#include "train/dry_run.h"
#include "train/launch/run_device.h"
#include "zero/aio.h"  // defines: SwapFile, kAioAlignment
#include "zero/engine_config.h"

using namespace zt;

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The ops of a dry run's last step, in the order it ran them (collectives ignored).
class OpCollector final : public DryRunObserver {
 public:
  explicit OpCollector(int timed_step) : timed_(timed_step) {}
  void on_op(const MetaOpRecord& op) override {  // also from the activation checkpoints' worker thread
    std::lock_guard<std::mutex> lock(mu_);
    if (on_) seq.push_back(op);
  }
  int64_t issued(const SimulatedCollective&) override { return 0; }
  void waited(int64_t) override {}
  void phase(int step, Phase p) override {
    std::lock_guard<std::mutex> lock(mu_);
    on_ = step == timed_ && p != Phase::end;
  }
  std::vector<MetaOpRecord> seq;

 private:
  std::mutex mu_;
  int timed_;
  bool on_ = false;
};

// The step's ops timed in the step's order, with the step's data flow, so that each finds the
// caches as the step leaves them for it: windows of ops up to kWindowBytes are made at once, their
// tensors views of one buffer per meta allocation (core/meta_backend.h's ReplayBuffers: an op reads
// what the op before it wrote, from the cache where the step finds it there; a weight read once per
// step comes from memory, not from the previous repeat of the same op), run once to warm up and
// then `repeats` times in order; every run of every occurrence of a key is one sample of that key.
// A rank sharing its cores with others (the CPU target's ranks, each beside its communication
// thread) is preempted now and then in mid-op: an op's median drops those waits, which the step
// pays. So each window is timed end to end too, and its ops' samples are scaled by the window's
// median over the sum of their medians: the ops add up to what the window took (a scale of about
// 1 where nothing shares the device).
constexpr int64_t kWindowBytes = int64_t{512} << 20;
// An op on the host tier (MetaOpRecord::host: the offloaded optimizer's step) runs on the cpu
// backend, where the engine runs it; the others on the device's.
void time_in_order(const std::vector<MetaOpRecord>& seq, ProcessGroup& g, Backend& be, int repeats,
                   std::map<std::string, std::vector<double>>& samples) {
  Backend& host = backend(Device::cpu());
  for (size_t a = 0; a < seq.size();) {
    size_t b = a;
    int64_t bytes = 0;
    std::vector<std::function<void()>> runs;
    ReplayBuffers shared;
    shared.max_bytes = kWindowBytes;  // the buffers of one window hold no more than its ops' bytes
    while (b < seq.size() && (b == a || bytes + seq[b].bytes <= kWindowBytes)) {
      bytes += seq[b].bytes;
      runs.push_back(seq[b].prepare(seq[b].host ? host : be, &shared));
      ++b;
    }
    for (auto& r : runs) r();
    be.synchronize();
    std::vector<std::vector<double>> t(runs.size());
    std::vector<double> whole;  // the window end to end, per repeat
    for (int i = 0; i < repeats; ++i) {
      g.barrier();  // every rank runs the same window at once, as the ranks of a step do
      const auto w0 = Clock::now();
      for (size_t k = 0; k < runs.size(); ++k) {
        const auto t0 = Clock::now();
        runs[k]();
        if (!seq[a + k].host) be.synchronize();
        t[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      whole.push_back(std::chrono::duration<double>(Clock::now() - w0).count());
    }
    double sum = 0;
    for (const std::vector<double>& v : t) sum += median(v);
    const double scale = sum > 0 ? median(whole) / sum : 1.0;
    for (size_t k = 0; k < runs.size(); ++k)
      for (double x : t[k]) samples[seq[a + k].key].push_back(x * scale);
    a = b;
  }
}

// Every rank times its own step's ops (time_in_order), and the ranks' steps differ: the last
// rank's shards are padded (zt-estimate simulates rank 0 and the last rank, train/dry_run.h). So
// the profile holds the op times of every rank: each rank's map goes to rank 0
// (dist/gather_json.h), which adds the keys it has not measured itself (its own time stays for a
// key both have).
void merge_ranks_ops(ProcessGroup& world, std::map<std::string, double>& ops) {
  const std::vector<nlohmann::json> ranks = gather_json(world, ops, "zt-profile: the op times");
  for (size_t r = 1; r < ranks.size(); ++r)
    for (const auto& [key, t] : ranks[r].items()) ops.emplace(key, t.get<double>());
}

// alpha and beta of time = (N - 1) alpha + bytes / beta, least squares over (bytes, time); none
// when the times do not grow with the bytes (no bandwidth to fit).
std::optional<LinkCost> fit_hop(const std::vector<double>& xs, const std::vector<double>& ys, int N) {
  const double n = static_cast<double>(xs.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < xs.size(); ++i) sx += xs[i], sy += ys[i], sxx += xs[i] * xs[i], sxy += xs[i] * ys[i];
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double intercept = (sy - slope * sx) / n;
  if (slope <= 0) return std::nullopt;
  return LinkCost{std::max(0.0, intercept) / (N - 1), 1.0 / slope};
}

// What both link measures need: a compute load (a loop of 512^3 float32 GEMMs on the backend) and
// a timer that runs a piece of work `repeats` times on every rank at once (a barrier first) and
// keeps the median of the ranks' mean time.
struct RankBench {
  ProcessGroup& g;
  Backend& be;
  int repeats;
  GemmShape gs;
  Tensor a, b, c;
  RankBench(ProcessGroup& g_, Backend& be_, int repeats_) : g(g_), be(be_), repeats(repeats_) {
    const int64_t n = 512;
    gs.M = gs.N = gs.K = n;
    for (Tensor* t : {&a, &b, &c}) *t = Tensor::zeros({n, n}, DType::f32, Category::workspace, be.allocator());
    gemms(1);  // warm-up
  }
  void gemms(int k) {
    for (int i = 0; i < k; ++i) be.gemm(gs, a, b, c);
    be.synchronize();
  }
  double mean(double mine) { return g.all_reduce_sum(mine) / g.size(); }
  double timed(const std::function<void()>& f) {
    std::vector<double> t;
    for (int i = 0; i < repeats; ++i) {
      g.barrier();
      const auto t0 = Clock::now();
      f();
      t.push_back(mean(std::chrono::duration<double>(Clock::now() - t0).count()));
    }
    return median(t);
  }
  // The GEMMs in about `seconds` alone.
  int gemms_for(double seconds) {
    return 1 + static_cast<int>(seconds / std::max(timed([&] { gemms(1); }), 1e-9));
  }
  // The all-gathers `issue` starts, with `k` GEMMs beside them, `repeats` times: the medians of the
  // ranks' mean wall time (issue to the last wait) and of the all-gathers' own time then (the
  // communication thread's busy time).
  struct Beside {
    double wall, comm;
  };
  Beside beside_gemms(const std::function<std::vector<WorkPtr>()>& issue, int k) {
    const int kind = static_cast<int>(Collective::all_gather);
    std::vector<double> wall, comm;
    for (int i = 0; i < repeats; ++i) {
      g.barrier();
      const double busy0 = g.times().busy_s[kind];
      const auto t0 = Clock::now();
      std::vector<WorkPtr> w = issue();
      gemms(k);
      for (WorkPtr& done : w) done->wait();
      wall.push_back(mean(std::chrono::duration<double>(Clock::now() - t0).count()));
      comm.push_back(mean(g.times().busy_s[kind] - busy0));
    }
    return {median(wall), median(comm)};
  }
};

// One link class: ring all-gathers of several sizes on g, every rank at once, fitted (fit_hop).
// Twice: with the ranks idle, and loaded: issued while a GEMM loop about twice as long runs on
// the compute thread, timed by the communication thread itself (ProcessGroup's busy time).
// Where ranks share the cores, a ring step waits until the neighbour's thread is scheduled, and
// the smallest all-gathers can take longer than the largest: then the group measures again, up
// to kLinkAttempts times, before it gives up. (Each rank of the group fits the group's mean
// times, so all of them decide alike.)
constexpr int kLinkAttempts = 3;
LinkCost measure_link(ProcessGroup& g, Backend& be, int repeats, std::vector<std::string>& log) {
  const int N = g.size();
  RankBench rb(g, be, repeats);
  std::string why;
  for (int attempt = 1; attempt <= kLinkAttempts; ++attempt) {
    std::vector<double> xs, idle, loaded;
    for (int64_t shard : {256, 65536, 1048576, 4194304}) {  // float32 elements per rank: 1 KiB to 16 MiB
      Tensor in = Tensor::zeros({shard}, DType::f32, Category::comm, be.allocator());
      Tensor out = Tensor::zeros({shard * N}, DType::f32, Category::comm, be.allocator());
      g.all_gather(in, out);  // warm-up (connections, buffers)
      xs.push_back(static_cast<double>(ring_bytes(1, shard * N, 4, N)));
      idle.push_back(rb.timed([&] { g.all_gather(in, out); }));
      loaded.push_back(rb.beside_gemms([&] { return std::vector<WorkPtr>{g.all_gather_async(in, out)}; },
                                       rb.gemms_for(2 * idle.back()))
                           .comm);
      log.push_back("  all_gather " + format_bytes(shard * 4) + " per rank on " + std::to_string(N) +
                    " ranks: " + std::to_string(idle.back() * 1e3) + " ms, " + std::to_string(loaded.back() * 1e3) +
                    " ms beside compute");
    }
    const std::optional<LinkCost> l = fit_hop(xs, idle, N), ld = fit_hop(xs, loaded, N);
    if (l && ld) return LinkCost{l->alpha_s, l->bytes_per_s, ld->alpha_s, ld->bytes_per_s};
    const std::vector<double>& ys = l ? loaded : idle;
    why = std::string("the all-gathers ") + (l ? "beside compute" : "alone") +
          " did not take longer with more bytes (" + std::to_string(ys.front() * 1e3) + " ms for the smallest, " +
          std::to_string(ys.back() * 1e3) + " ms for the largest): no bandwidth to fit";
    log.push_back("  attempt " + std::to_string(attempt) + " of " + std::to_string(kLinkAttempts) + ": " + why);
  }
  ZT_THROW(why, ", ", kLinkAttempts, " times on ", N, " ranks (too much else running on these cores?)");
}

// compute_pace (train/device_profile.h): m all-gathers of 4 MiB per rank back to back, m enough
// for about 50 ms alone (Y, so that the measure stands above the timer's and the scheduler's
// noise); a GEMM loop about twice as long alone (X), then with the m all-gathers in flight beside
// it (T, and L: the all-gathers' own time then, from the communication thread). Compute did X of
// work in T, L of it beside the collectives: X = pace L + (T - L), so pace = (X - T + L) / L,
// clamped to [0.01, 1]. Every rank at once.
double measure_compute_pace(ProcessGroup& g, Backend& be, int repeats, std::vector<std::string>& log) {
  const int64_t shard = int64_t{1} << 20;
  RankBench rb(g, be, repeats);
  Tensor in = Tensor::zeros({shard}, DType::f32, Category::comm, be.allocator());
  Tensor out = Tensor::zeros({shard * g.size()}, DType::f32, Category::comm, be.allocator());
  g.all_gather(in, out);
  const int m = std::clamp(static_cast<int>(0.05 / std::max(rb.timed([&] { g.all_gather(in, out); }), 1e-6)) + 1, 1,
                           64);
  auto gathers = [&] {
    std::vector<WorkPtr> w;
    for (int i = 0; i < m; ++i) w.push_back(g.all_gather_async(in, out));
    return w;
  };
  const double y = rb.timed([&] {
    for (WorkPtr& w : gathers()) w->wait();
  });
  const int k = rb.gemms_for(2 * y);
  const double x = rb.timed([&] { rb.gemms(k); });
  const RankBench::Beside both = rb.beside_gemms(gathers, k);
  const double t = both.wall, l = std::min(both.wall, both.comm);
  log.push_back("  compute beside " + std::to_string(m) + " all-gathers of 4.00 MiB per rank: the gathers alone " +
                std::to_string(y * 1e3) + " ms, the compute alone " + std::to_string(x * 1e3) + " ms, both " +
                std::to_string(t * 1e3) + " ms (the gathers " + std::to_string(both.comm * 1e3) + " ms of it)");
  return std::clamp((x - t + l) / std::max(l, 1e-9), 0.01, 1.0);
}

// first_touch_bytes_per_s (train/device_profile.h): blocks of gradients the CPU allocator maps anew
// (8 MiB: core/memory.h's cpu_maps), each written once and freed, against the same writes into a
// block held; every rank at once. The difference is the kernel's fill (faults, zeroing, unmapping).
double measure_first_touch(ProcessGroup& g, Backend& be, int repeats, std::vector<std::string>& log) {
  constexpr int64_t kBytes = int64_t{8} << 20, kBlocks = 4;
  ZT_CHECK(cpu_maps(kBytes, Category::grads), "zt-profile: ", kBytes, " bytes of gradients are not mapped");
  RankBench rb(g, be, repeats);
  Tensor held = Tensor::empty({kBytes / 4}, DType::f32, Category::grads, cpu_allocator());
  std::memset(held.data<float>(), 0, kBytes);
  const double warm = rb.timed([&] {
    for (int i = 0; i < kBlocks; ++i) std::memset(held.data<float>(), 1, kBytes);
  });
  const double fresh = rb.timed([&] {
    for (int i = 0; i < kBlocks; ++i) {
      Tensor t = Tensor::empty({kBytes / 4}, DType::f32, Category::grads, cpu_allocator());
      std::memset(t.data<float>(), 1, kBytes);
    }
  });
  log.push_back("  first touch: " + std::to_string(kBlocks) + " fresh mappings of 8.00 MiB written in " +
                std::to_string(fresh * 1e3) + " ms, the same writes into a block held " + std::to_string(warm * 1e3) +
                " ms");
  return fresh > warm ? static_cast<double>(kBlocks * kBytes) / (fresh - warm) : 0.0;  // 0: no fill to charge
}

// The NVMe tier (--nvme-path): this rank's swap file there (zero/aio.h: O_DIRECT through io_uring,
// DeepSpeed's default aio block size and queue depth), every rank at once as the job swaps: 64 MiB
// written and read back in requests of 1 MiB and of 16 MiB, one after another as the engine's IO
// thread serves them, `repeats` times; from the medians (the ranks' mean), a request's alpha and
// the read and write rates: n (alpha + b / rate) for n requests of b bytes, two sizes, two unknowns.
NvmeCost measure_nvme(ProcessGroup& g, const std::string& dir, int repeats, std::vector<std::string>& log) {
  constexpr int64_t kTotal = int64_t{64} << 20, kSmall = int64_t{1} << 20, kLarge = int64_t{16} << 20;
  SwapFile f(dir, g.rank(), AioConfig{});
  const int64_t base = f.reserve(kTotal, Category::optim);
  f.allocate();
  std::unique_ptr<void, decltype(&std::free)> buf(std::aligned_alloc(kAioAlignment, kTotal), &std::free);
  ZT_CHECK(buf, "zt-profile: cannot allocate ", kTotal, " bytes for the NVMe measure");
  std::memset(buf.get(), 1, kTotal);
  auto timed = [&](bool write, int64_t request) {
    std::vector<double> t;
    for (int i = 0; i < repeats; ++i) {
      g.barrier();
      const auto t0 = Clock::now();
      for (int64_t off = 0; off < kTotal; off += request) {
        char* p = static_cast<char*>(buf.get()) + off;
        (write ? f.write_async(base + off, p, request) : f.read_async(base + off, p, request))->wait();
      }
      t.push_back(g.all_reduce_sum(std::chrono::duration<double>(Clock::now() - t0).count()) / g.size());
    }
    return median(t);
  };
  timed(true, kLarge);  // warm-up: the file's blocks written once
  NvmeCost c;
  for (bool write : {true, false}) {
    const double ts = timed(write, kSmall), tl = timed(write, kLarge);
    const double ns = static_cast<double>(kTotal / kSmall), nl = static_cast<double>(kTotal / kLarge);
    // ts = ns alpha + T / rate, tl = nl alpha + T / rate: alpha from the difference
    const double alpha = std::max(0.0, (ts - tl) / (ns - nl));
    const double rate = static_cast<double>(kTotal) / std::max(tl - nl * alpha, 1e-9);
    (write ? c.write_bytes_per_s : c.read_bytes_per_s) = rate;
    c.alpha_s = std::max(c.alpha_s, alpha);
    log.push_back(std::string("  nvme ") + (write ? "writes" : "reads ") + ": 64 MiB in 1 MiB requests " +
                  std::to_string(ts * 1e3) + " ms, in 16 MiB requests " + std::to_string(tl * 1e3) + " ms");
  }
  return c;
}

std::string hostname() {
  char h[256] = {};
  return ::gethostname(h, sizeof h - 1) == 0 ? h : "?";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "zt-profile: time this machine's ops (on the shapes of a model's training step) and links "
      "(ring all-gathers between the ranks), and write a device profile for zt-estimate --time"};
  std::string model_name, out_path, precision = "fp32", compute_dtype = "f32", stages_text = "0,1,2,3";
  std::string device_text = "cpu", dist_text = "auto";
  int64_t batch = 1, seq_len = 0;
  int threads = omp_get_max_threads(), repeats = 5;
  bool zeropp = false, ckpt = false, cpu_ckpt = false, offload = false;
  app.add_option("--model", model_name, "a named model config or a model config file (*.json)")->required();
  app.add_option("--out,-o", out_path, "the profile JSON to write (rank 0)")->required();
  app.add_option("--batch,-b", batch, "micro batch per rank")->capture_default_str();
  app.add_option("--seq-len,-t", seq_len, "sequence length (default: the model's context)");
  app.add_option("--precision", precision, "fp32 | bf16 | fp16")->capture_default_str();
  app.add_option("--compute-dtype", compute_dtype, "f32 | bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  app.add_option("--stages", stages_text, "the ZeRO stages whose ops are timed (comma-separated)")
      ->capture_default_str();
  app.add_flag("--zeropp", zeropp, "also the ops of ZeRO++'s quantized gathers and reductions (qwZ, qgZ)");
  app.add_flag(
      "--offload", offload,
      "also the ops of offload to the host (stage 2: the optimizer; stage 3: the optimizer and the parameters)");
  app.add_flag("--activation-checkpointing", ckpt, "the ops of a checkpointed step");
  app.add_flag("--cpu-checkpointing", cpu_ckpt,
               "with --activation-checkpointing: the checkpoints in host memory (DeepSpeed's "
               "activation_checkpointing.cpu_checkpointing), so their copies to the host and back are timed");
  app.add_option("--threads", threads, "OpenMP threads per rank")->capture_default_str();
  app.add_option("--repeats", repeats, "timed runs per op and per link size (the median is kept)")
      ->capture_default_str();
  app.add_option("--device", device_text, "cpu | cuda | cuda:N (train/launch/run_device.h)")->capture_default_str();
  app.add_option("--dist", dist_text, "auto | mpi | nccl")->capture_default_str();
  std::string nvme_path;
  app.add_option("--nvme-path", nvme_path,
                 "also the NVMe tier: each rank's swap file in this directory (the job's nvme_path), written and "
                 "read back at once by every rank");
  CLI11_PARSE(app, argc, argv);

  ProcessGroup& world = init_process_group();
  int rc = 0;
  try {
    if (cpu_ckpt && !ckpt) ZT_THROW("--cpu-checkpointing needs --activation-checkpointing (the checkpoints it moves)");
    if (!(threads >= 1 && repeats >= 1 && batch >= 1 && seq_len >= 0))
      ZT_THROW("--threads ", threads, ", --repeats ", repeats, ", --batch ", batch, ", --seq-len ", seq_len,
               ": expected >= 1, >= 1, >= 1, >= 0");
    omp_set_num_threads(threads);
    RunDevice rd = select_run_device(device_text, dist_text, world);
    ProcessGroup& g = *rd.group;
    const ModelConfig mc = model_config(model_name);
    if (seq_len == 0) seq_len = mc.max_seq_len;
    if (seq_len > mc.max_seq_len) ZT_THROW("--seq-len ", seq_len, ": ", model_name, "'s context is ", mc.max_seq_len);

    // The ops: this rank's steady step at each stage, in order.
    std::vector<std::vector<MetaOpRecord>> steps;
    std::vector<int> stages;
    for (size_t a = 0; a <= stages_text.size();) {
      const size_t b = std::min(stages_text.find(',', a), stages_text.size());
      const std::string s = stages_text.substr(a, b - a);
      if (!(s == "0" || s == "1" || s == "2" || s == "3"))
        ZT_THROW("--stages '", stages_text, "': '", s,
                 "' is not a ZeRO stage (expected 0, 1, 2 or 3, comma-separated)");
      stages.push_back(s[0] - '0');
      a = b + 1;
    }
    // per stage: plain, then with ZeRO++ (stage 3, --zeropp), then offloaded (stages 2-3, --offload)
    for (int st : stages)
      for (int v = 0; v < 3; ++v) {
        if ((v == 1 && !(zeropp && st == 3)) || (v == 2 && !(offload && st >= 2))) continue;
        RunConfig run;
        run.model = model_name;
        run.seq_len = seq_len;
        run.compute_dtype = compute_dtype == "bf16" ? DType::bf16 : DType::f32;
        run.engine.precision = precision == "bf16"   ? Precision::bf16
                               : precision == "fp16" ? Precision::f16
                                                     : Precision::f32;
        if (!(precision == "fp32" || precision == "bf16" || precision == "fp16"))
          ZT_THROW("--precision '", precision, "': expected fp32, bf16 or fp16");
        run.engine.zero.stage = st;
        run.engine.zero.overlap_comm = default_overlap_comm(st);
        run.engine.train_micro_batch_size_per_gpu = batch;
        run.engine.activation_checkpointing = ckpt;
        run.engine.cpu_checkpointing = cpu_ckpt;
        if (v == 1) {
          run.engine.zero.zero_quantized_weights = true;
          run.engine.zero.zero_quantized_gradients = true;
          // the costs of qgZ's ops, wherever the profile is measured: on one node too
          run.engine.zero.zero_quantized_gradients_one_node = true;
        }
        if (v == 2) {
          run.engine.zero.offload_optimizer.device = OffloadDevice::cpu;
          if (st == 3) run.engine.zero.offload_param.device = OffloadDevice::cpu;
        }
        DryRunRequest req = dry_run_of_rank(run, mc, g, threads);
        OpCollector ops(req.steps - 1);
        req.observer = &ops;
        dry_run(req);
        steps.push_back(std::move(ops.seq));
      }

    // Time them, every rank at once.
    Backend& be = backend(rd.device);
    DeviceProfile p;
    p.threads = threads;
    p.ranks_per_node = static_cast<int>(g.topology().local_size());
    p.nodes = g.topology().num_nodes();
    std::map<std::string, std::vector<double>> samples;
    g.barrier();
    for (const std::vector<MetaOpRecord>& seq : steps) time_in_order(seq, g, be, repeats, samples);
    for (auto& [key, v] : samples) p.ops[key] = median(v);
    merge_ranks_ops(world, p.ops);  // the classes' rates below: this rank's own ops (`distinct`)
    // each class's rate: over the distinct ops of the class, their flops or bytes over their times
    std::map<std::string, const MetaOpRecord*> distinct;
    for (const std::vector<MetaOpRecord>& seq : steps)
      for (const MetaOpRecord& op : seq) distinct.emplace(op.key, &op);
    // (the host tier's ops apart: host_classes)
    std::array<std::array<double, kNumOpClasses>, 2> t_sum{}, flops_sum{}, bytes_sum{};
    for (const auto& [key, op] : distinct) {
      const int c = static_cast<int>(op->cls), h = op->host;
      t_sum[h][c] += p.ops[key];
      flops_sum[h][c] += op->flops;
      bytes_sum[h][c] += static_cast<double>(op->bytes);
    }
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < kNumOpClasses; ++c) {
        if (t_sum[h][c] <= 0) continue;
        const OpClass cls = static_cast<OpClass>(c);
        const bool arithmetic = cls == OpClass::gemm || cls == OpClass::attention;
        (h ? p.host_classes : p.classes)[c] = arithmetic ? ClassRate{flops_sum[h][c] / t_sum[h][c], 0, 0}
                                                         : ClassRate{0, bytes_sum[h][c] / t_sum[h][c], 0};
      }
    // On the CPU the host tier is the device's own memory: a class not timed on the host costs there
    // what it costs on the device.
    if (rd.device.is_cpu())
      for (int c = 0; c < kNumOpClasses; ++c)
        if (!p.host_classes[c]) p.host_classes[c] = p.classes[c];

    // The links.
    std::vector<std::string> log;
    if (g.size() > 1) {
      g.barrier();
      (p.nodes > 1 ? p.inter_node : p.intra_node) = measure_link(g, be, repeats, log);
      if (p.nodes > 1 && p.ranks_per_node > 1) {
        std::unique_ptr<ProcessGroup> node = intra_node_group(g);
        p.intra_node = measure_link(*node, be, repeats, log);
      }
      p.compute_pace = measure_compute_pace(g, be, repeats, log);
    }
    if (rd.device.is_cpu()) p.first_touch_bytes_per_s = measure_first_touch(g, be, repeats, log);
    if (!nvme_path.empty()) p.nvme = measure_nvme(g, nvme_path, repeats, log);

    std::string cmd;
    for (int i = 0; i < argc; ++i) cmd += std::string(i ? " " : "") + argv[i];
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    p.name = "zt-profile on " + hostname() + " (" + rd.device.str() + ")";
    p.source = "measured by `" + cmd + "` on " + hostname() + ", " + std::to_string(g.size()) + " rank(s) over " +
               std::to_string(p.nodes) + " node(s), " + std::to_string(threads) + " thread(s) each, " + date;
    if (g.rank() == 0) {
      std::ofstream f(out_path);
      if (!f.good()) ZT_THROW("cannot write --out '", out_path, "'");
      f << device_profile_json(p).dump(1) << "\n";
      if (!f.good()) ZT_THROW("writing --out '", out_path, "' failed");
      std::fprintf(stderr, "zt-profile: %zu ops of %s (b %lld, t %lld) timed on %s, %d rank(s) over %d node(s)\n",
                   distinct.size(), model_name.c_str(), static_cast<long long>(batch), static_cast<long long>(seq_len),
                   rd.device.str().c_str(), g.size(), p.nodes);
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < kNumOpClasses; ++c)
          if (const auto& r = (h ? p.host_classes : p.classes)[c]; r && t_sum[h][c] > 0)
            std::fprintf(stderr, "  %-5s%-12s %8.3f ms in the step's ops  %s\n", h ? "host " : "",
                         op_class_name(static_cast<OpClass>(c)), t_sum[h][c] * 1e3,
                         r->flops_per_s > 0 ? (std::to_string(r->flops_per_s / 1e9) + " GFLOP/s").c_str()
                                            : (std::to_string(r->bytes_per_s / 1e9) + " GB/s").c_str());
      for (const std::string& l : log) std::fprintf(stderr, "%s\n", l.c_str());
      for (int inter = 0; inter < 2; ++inter)
        if (const auto& l = inter ? p.inter_node : p.intra_node)
          std::fprintf(stderr, "  %s link: alpha %.1f us, %.3f GB/s; beside compute %.1f us, %.3f GB/s\n",
                       inter ? "inter-node" : "intra-node", l->alpha_s * 1e6, l->bytes_per_s / 1e9,
                       l->loaded_alpha_s * 1e6, l->loaded_bytes_per_s / 1e9);
      if (g.size() > 1)
        std::fprintf(stderr, "  compute_pace %.2f (compute's pace beside an all-gather)\n", p.compute_pace);
      if (p.first_touch_bytes_per_s > 0)
        std::fprintf(stderr, "  first_touch %.3f GB/s (the kernel's fill of a fresh mapping)\n",
                     p.first_touch_bytes_per_s / 1e9);
      if (p.nvme)
        std::fprintf(stderr, "  nvme: alpha %.1f us, reads %.3f GB/s, writes %.3f GB/s a rank\n", p.nvme->alpha_s * 1e6,
                     p.nvme->read_bytes_per_s / 1e9, p.nvme->write_bytes_per_s / 1e9);
      std::fprintf(stderr, "zt-profile: wrote %s\n", out_path.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt-profile: error: %s\n", e.what());
    rc = 1;
    if (world.size() > 1) world.abort(std::string("zt-profile: ") + e.what(), 1);
  }
  finalize_process_group();
  return rc;
}
