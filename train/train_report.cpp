// defines: flops_per_token, peak_flops, print_memory_table, print_offload_table, print_run_summary
//          (train/train_report.h); file-local: gather_rows
#include "train/train_report.h"

#include <algorithm>
#include <cstdio>

#include "core/fma_ceiling.h"  // defines: fma_ceiling

namespace zt {

nlohmann::json memory_stats_json(const MemoryStats& m) {
  nlohmann::json cur, peak;
  for (Category c : kAllCategories) {
    cur[category_name(c)] = m.cur(c);
    peak[category_name(c)] = m.max(c);
  }
  return {{"current", cur}, {"peak", peak}, {"current_total", m.total()}, {"peak_total", m.peak_total}};
}

double flops_per_token(const ModelConfig& m, int64_t num_params, int64_t seq_len) {
  return 6.0 * static_cast<double>(num_params) +
         6.0 * static_cast<double>(m.n_layer) * static_cast<double>(m.n_embd) * static_cast<double>(seq_len);
}

PeakFlops peak_flops(const Device& d, int threads, double peak_tflops) {
  char buf[96];
  if (peak_tflops > 0) {
    std::snprintf(buf, sizeof buf, "--peak-tflops %g", peak_tflops);
    return {peak_tflops * 1e12, buf};
  }
  if (!d.is_cpu()) return {989e12, "989 TFLOP/s: H100 / H200 SXM dense bf16 (set --peak-tflops for another GPU)"};
  const FmaCeiling c = fma_ceiling(threads, /*reps=*/2, /*iters=*/int64_t(1) << 22);
  std::snprintf(buf, sizeof buf, "the measured float32 FMA ceiling of %d thread%s (%.0f GFLOP/s, %s)", threads,
                threads > 1 ? "s" : "", c.gflops, c.isa);
  return {c.gflops * 1e9, buf};
}

// Every rank's current and run-peak bytes per category, each beside its own dry run's peak over
// the training steps (train/dry_run.h), printed by rank 0 (collective).
void print_memory_table(ProcessGroup& g, const MemoryStats& run_peaks, const DryRun& dry) {
  const MemoryStats m = default_allocator().stats();
  MemoryStats predicted;  // the dry run's peaks over its steps (each step starts from reset peaks, as zt-train's)
  for (const DryRunStep& s : dry.steps) {
    for (Category c : kAllCategories) {
      const int i = static_cast<int>(c);
      predicted.peak[i] = std::max(predicted.peak[i], s.device.peak[i]);
    }
    predicted.peak_total = std::max(predicted.peak_total, s.device.peak_total);
  }
  const int64_t K = kNumCategories + 1;                                               // categories + total
  Tensor mine = Tensor::empty({3 * K}, DType::f64, Category::comm, cpu_allocator());  // written here
  double* v = mine.data<double>();
  for (Category c : kAllCategories) {
    v[static_cast<int>(c)] = static_cast<double>(m.cur(c));
    v[K + static_cast<int>(c)] = static_cast<double>(run_peaks.max(c));
    v[2 * K + static_cast<int>(c)] = static_cast<double>(predicted.max(c));
  }
  v[K - 1] = static_cast<double>(m.total());
  v[2 * K - 1] = static_cast<double>(run_peaks.peak_total);
  v[3 * K - 1] = static_cast<double>(predicted.peak_total);
  Tensor all = Tensor::empty({3 * K * g.size()}, DType::f64, Category::comm, cpu_allocator());
  g.all_gather(mine, all);
  if (g.rank() != 0) return;
  const double* a = all.data<double>();
  std::fprintf(stderr, "\nmemory by category per rank (%s allocator, the device): current / peak over the run\n",
               default_allocator().name());
  std::fprintf(stderr, "  %-8s", "rank");
  for (Category c : kAllCategories) std::fprintf(stderr, " %23s", category_name(c));
  std::fprintf(stderr, " %23s\n", "total");
  for (int r = 0; r < g.size(); ++r) {
    const double* x = a + r * 3 * K;
    std::fprintf(stderr, "  %-8d", r);
    for (int64_t k = 0; k < K; ++k) {
      const std::string cell = format_bytes(static_cast<int64_t>(x[k])) + " / " +
                               format_bytes(static_cast<int64_t>(x[K + k]));
      std::fprintf(stderr, " %23s", cell.c_str());
    }
    std::fprintf(stderr, "\n  %-8s", "dry run");
    for (int64_t k = 0; k < K; ++k)
      std::fprintf(stderr, " %23s", ("peak " + format_bytes(static_cast<int64_t>(x[2 * K + k]))).c_str());
    std::fprintf(stderr, "\n");
  }
  std::fprintf(stderr,
               "  (dry run = the rank's training step run on the meta device, as zt-estimate --model runs it: "
               "train/dry_run.h; it models the CPU backend's kernels)\n");
}

// Offload: every rank's model states in the host tier and the swap file (current / peak), each
// beside its own dry run's (collective; rank 0 prints).
void print_offload_table(ProcessGroup& g, const MemoryReport& m, const DryRun& dry) {
  const Category cats[3] = {Category::params, Category::grads, Category::optim};
  Tensor mine = Tensor::empty({24}, DType::f64, Category::comm, cpu_allocator());  // written here
  double* v = mine.data<double>();
  const MemoryStats* tiers[4] = {&m.host, &m.nvme, &dry.host, &dry.nvme};  // measured, then predicted
  for (int t = 0; t < 4; ++t)
    for (int k = 0; k < 3; ++k) {
      v[6 * t + k] = static_cast<double>(tiers[t]->cur(cats[k]));
      v[6 * t + 3 + k] = static_cast<double>(tiers[t]->max(cats[k]));
    }
  Tensor all = Tensor::empty({24 * g.size()}, DType::f64, Category::comm, cpu_allocator());
  g.all_gather(mine, all);
  if (g.rank() != 0) return;
  const double* a = all.data<double>();
  std::fprintf(stderr, "\noffloaded model states per rank (%s memory, nvme swap file): current / peak\n",
               m.host_name.c_str());
  std::fprintf(stderr, "  %-5s %-13s  %25s  %25s  %25s\n", "rank", "tier", "params", "grads", "optim");
  static const char* kRow[4] = {"host", "nvme", "host dry run", "nvme dry run"};
  for (int r = 0; r < g.size(); ++r)
    for (int t = 0; t < 4; ++t) {
      std::fprintf(stderr, "  %-5d %-13s", r, kRow[t]);
      for (int k = 0; k < 3; ++k) {
        const double* x = a + 24 * r + 6 * t;
        const std::string cell = format_bytes(static_cast<int64_t>(x[k])) + " / " +
                                 format_bytes(static_cast<int64_t>(x[3 + k]));
        std::fprintf(stderr, "  %25s", cell.c_str());
      }
      std::fprintf(stderr, "\n");
    }
}

namespace {
// Gathers `mine` (the same length on every rank) from every rank: (N, K) row-major, in host
// memory (after training; not under --memory-limit-mib).
std::vector<double> gather_rows(ProcessGroup& g, const std::vector<double>& mine) {
  const int64_t K = static_cast<int64_t>(mine.size()), N = g.size();
  Tensor in = Tensor::empty({K}, DType::f64, Category::comm, host_allocator());
  for (int64_t i = 0; i < K; ++i) in.data<double>()[i] = mine[i];
  Tensor out = Tensor::empty({N * K}, DType::f64, Category::comm, host_allocator());
  g.all_gather(in, out);
  return std::vector<double>(out.data<double>(), out.data<double>() + N * K);
}
}  // namespace

void print_run_summary(ProcessGroup& g, const RunTotals& t) {
  constexpr int C = kNumCollectives;
  // Per rank: bytes and calls per collective, then step, comm busy, comm wait, offload seconds.
  std::vector<double> mine;
  for (int k = 0; k < C; ++k) mine.push_back(static_cast<double>(t.comm.bytes[k]));
  for (int k = 0; k < C; ++k) mine.push_back(static_cast<double>(t.comm.calls[k]));
  const double offload = t.engine.offload_step_s + t.engine.offload_fetch_s + t.engine.offload_grads_s;
  mine.insert(mine.end(),
              {t.step_s, t.comm_times.busy_total(), t.comm_times.wait_total(), offload, t.engine.offload_step_s,
               t.engine.offload_fetch_s, t.engine.offload_grads_s, static_cast<double>(t.comm.inter_node())});
  const int64_t K = static_cast<int64_t>(mine.size());
  const std::vector<double> all = gather_rows(g, mine);
  if (g.rank() != 0) return;
  std::fprintf(stderr,
               "\nbytes moved per rank over %lld steps, by collective (ring convention, dist/process_group.h; calls in "
               "brackets)\n",
               static_cast<long long>(t.steps));
  std::fprintf(stderr, "  %-5s", "rank");
  for (int k = 0; k < C; ++k) std::fprintf(stderr, " %22s", collective_name(static_cast<Collective>(k)));
  const bool nodes = g.topology().num_nodes() > 1;
  std::fprintf(stderr, " %14s%s\n", "total", nodes ? "   inter-node (ring model)" : "");
  for (int r = 0; r < g.size(); ++r) {
    const double* a = all.data() + r * K;
    std::fprintf(stderr, "  %-5d", r);
    double total = 0;
    for (int k = 0; k < C; ++k) {
      const std::string cell = format_bytes(static_cast<int64_t>(a[k])) + " (" +
                               std::to_string(static_cast<long long>(a[C + k])) + ")";
      std::fprintf(stderr, " %22s", cell.c_str());
      total += a[k];
    }
    std::fprintf(stderr, " %14s", format_bytes(static_cast<int64_t>(total)).c_str());
    if (nodes) std::fprintf(stderr, " %25s", format_bytes(static_cast<int64_t>(a[2 * C + 7])).c_str());
    std::fprintf(stderr, "\n");
  }
  if (nodes)
    std::fprintf(stderr, "  on %s; inter-node: the bytes sent to the next rank when it is on another node\n",
                 g.topology().summary().c_str());
  std::fprintf(
      stderr, "\ntime per rank over the steps (s): compute = step - comm wait - offload; comm busy overlaps compute\n");
  std::fprintf(stderr, "  %-5s %10s %10s %10s %10s %10s %30s\n", "rank", "step", "compute", "comm busy", "comm wait",
               "offload", "(host optimizer/fetch/grads)");
  for (int r = 0; r < g.size(); ++r) {
    const double* a = all.data() + r * K + 2 * C;
    const double step = a[0], busy = a[1], wait = a[2], off = a[3];
    char split[64];
    std::snprintf(split, sizeof split, "%.3f / %.3f / %.3f", a[4], a[5], a[6]);
    std::fprintf(stderr, "  %-5d %10.3f %10.3f %10.3f %10.3f %10.3f %30s\n", r, step, step - wait - off, busy, wait,
                 off, split);
  }
}

}  // namespace zt
