// defines: main (bench_cpu_adam); helpers: seconds_since, Buf, hash_uniform, fill_state, Bandwidth,
//          measure_bandwidth, args_of, make_torch_adamw and 1 more
//
// bench_cpu_adam — the CPU AdamW kernel (core/kernels/adamw.h) on one large float32 shard (the
// ZeRO-Offload setting: the optimizer step of a whole partition on the host), against
//   - libtorch's torch::optim::AdamW stepping a tensor of the same size in the same process (the
//     default optimizer a libtorch user gets; same hyperparameters; .grad set once, step() timed
//     alone, after one warmup step that also creates its state), when built with Torch
//     (ZT_HAVE_TORCH; bench/CMakeLists.txt finds it optionally);
//   - the memory bandwidth measured in the same run over the same arrays: STREAM-style copy
//     (a = b, 8 bytes/element counted) and triad (a = b + s c, 12 bytes), and "adam-traffic"
//     (p += s g, m += s g, v += s g: reads p, g, m, v and writes p, m, v, the 28 bytes/element that
//     AdamW moves, with no write-allocate traffic on top). adam-traffic GB/s / 28 is the element
//     rate a memory-bound AdamW can reach.
// Each of our paths (portable, avx2_fma where the CPU has it) and libtorch step in turn, `steps`
// rounds after the warmup; median seconds per step. A 1M-element side check runs 3 steps of ours
// and of libtorch from the same data and reports the largest difference relative to the terms.
// The last line of stdout is one JSON object, for bench/cpu_adam.sh.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_util.h"  // defines: bench::median, bench::loadavg
#include "core/kernels/adamw.h"
#include "core/parallel.h"
#include "optim/adamw.h"  // defines: AdamWHyper, adamw_args

#if defined(ZT_HAVE_TORCH)
#include <torch/torch.h>
#endif

using namespace zt;

namespace {
using bench::median;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Uninitialised float storage (first-touched by the parallel fills below, not by the allocator).
struct Buf {
  std::unique_ptr<float[]> d;
  explicit Buf(int64_t n) : d(new float[n]) {}
  float* get() const { return d.get(); }
};

// A reproducible value in [-1, 1) from (seed, i): splitmix64.
inline float hash_uniform(uint64_t seed, int64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 40) / 8388608.0 - 1.0);
}

// p ~ U(-1, 1), g ~ U(-1e-2, 1e-2), m = v = 0 (a fresh optimizer).
void fill_state(float* p, float* g, float* m, float* v, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    p[i] = hash_uniform(1, i);
    g[i] = 1e-2f * hash_uniform(2, i);
    m[i] = 0.0f;
    v[i] = 0.0f;
  }
}

struct Bandwidth {
  std::vector<double> copy, triad, adam;  // GB/s samples
};

// One sample of each kernel over the arrays (static split: each thread streams its own block).
void measure_bandwidth(float* p, float* g, float* m, float* v, int64_t n, Bandwidth& bw) {
  const float s = 0.5f;
  auto t0 = Clock::now();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) m[i] = g[i];
  bw.copy.push_back(8.0 * n / seconds_since(t0) / 1e9);
  t0 = Clock::now();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) v[i] = g[i] + s * p[i];
  bw.triad.push_back(12.0 * n / seconds_since(t0) / 1e9);
  t0 = Clock::now();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = s * g[i];
    p[i] += gi;
    m[i] += gi;
    v[i] += gi;
  }
  bw.adam.push_back(28.0 * n / seconds_since(t0) / 1e9);
}

// torch's AdamW defaults (optim/adamw.h's AdamWHyper); every element decayed.
AdamWArgs args_of(const AdamWHyper& h, int64_t step) { return adamw_args(h, step, /*decay=*/true); }

#if defined(ZT_HAVE_TORCH)
std::unique_ptr<torch::optim::AdamW> make_torch_adamw(torch::Tensor& p, const torch::Tensor& g, const AdamWHyper& h) {
  p.set_requires_grad(true);
  p.mutable_grad() = g;
  return std::make_unique<torch::optim::AdamW>(
      std::vector<torch::Tensor>{p}, torch::optim::AdamWOptions(h.lr)
                                         .betas(std::make_tuple(h.beta1, h.beta2))
                                         .eps(h.eps)
                                         .weight_decay(h.weight_decay)
                                         .amsgrad(false));
}

// 3 steps of ours (current path) and of torch from the same 1M elements; the largest
// |ours - torch| / (|p| + lr) over the elements (lr: the size of one step's update).
double torch_check(const AdamWHyper& h) {
  const int64_t n = 1 << 20;
  std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) p[i] = hash_uniform(3, i), g[i] = 1e-2f * hash_uniform(4, i);
  torch::Tensor tp = torch::from_blob(p.data(), {n}, torch::kFloat32).clone();
  torch::Tensor tg = torch::from_blob(g.data(), {n}, torch::kFloat32).clone();
  auto opt = make_torch_adamw(tp, tg, h);
  for (int64_t t = 1; t <= 3; ++t) {
    adamw_update<float>(p.data(), g.data(), m.data(), v.data(), n, args_of(h, t));
    opt->step();
  }
  const float* q = tp.data_ptr<float>();
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(double(p[i]) - q[i]) / (std::abs(p[i]) + h.lr));
  return worst;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_cpu_adam: CPU AdamW elements/s vs libtorch's torch::optim::AdamW and memory bandwidth"};
  int64_t n = 100'000'000, steps = 5;
  int threads = 2;
  bool no_torch = false;
  app.add_option("--n", n, "elements of the float32 shard")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "timed rounds (after one warmup step each)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "OpenMP threads (ours, the bandwidth loops and libtorch)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--no-torch", no_torch, "skip libtorch even when built with it");
  CLI11_PARSE(app, argc, argv);

  set_num_threads(threads);
  const AdamWHyper h;
  std::vector<CpuAdamIsa> paths{CpuAdamIsa::portable};
  if (cpu_adam_isa_available(CpuAdamIsa::avx2_fma)) paths.push_back(CpuAdamIsa::avx2_fma);
  const CpuAdamIsa default_path = cpu_adam_isa();

#if defined(ZT_HAVE_TORCH)
  const bool with_torch = !no_torch;
  const std::string torch_status = no_torch ? "skipped (--no-torch)" : "libtorch " TORCH_VERSION;
  if (with_torch) at::set_num_threads(threads);
#else
  const bool with_torch = false;
  const std::string torch_status =
      "unavailable: bench_cpu_adam was built without libtorch (no Torch CMake package found; bench/cpu_adam.sh installs libtorch-dev)";
#endif
  std::fprintf(stderr, "bench_cpu_adam: n = %lld, %d thread(s), %lld rounds; paths:", static_cast<long long>(n), threads,
               static_cast<long long>(steps));
  for (CpuAdamIsa p : paths) std::fprintf(stderr, " %s", cpu_adam_isa_name(p));
  std::fprintf(stderr, " (default %s); libtorch column: %s\n", cpu_adam_isa_name(default_path), torch_status.c_str());

  Buf p(n), g(n), m(n), v(n);
  fill_state(p.get(), g.get(), m.get(), v.get(), n);  // first touch, by the threads that stream them
  Bandwidth bw;
  for (int64_t r = 0; r < steps; ++r) measure_bandwidth(p.get(), g.get(), m.get(), v.get(), n, bw);
  fill_state(p.get(), g.get(), m.get(), v.get(), n);

#if defined(ZT_HAVE_TORCH)
  torch::Tensor tp, tg;
  std::unique_ptr<torch::optim::AdamW> topt;
  if (with_torch) {
    tp = torch::from_blob(p.get(), {n}, torch::kFloat32).clone();
    tg = torch::from_blob(g.get(), {n}, torch::kFloat32).clone();
    topt = make_torch_adamw(tp, tg, h);
  }
#endif

  // Warmup: one step of each (ours per path continue the same trajectory; torch creates its state).
  int64_t step = 1;
  for (CpuAdamIsa path : paths) {
    set_cpu_adam_isa(path);
    adamw_update<float>(p.get(), g.get(), m.get(), v.get(), n, args_of(h, step++));
  }
#if defined(ZT_HAVE_TORCH)
  if (with_torch) topt->step();
#endif
  std::map<std::string, std::vector<double>> secs;
  for (int64_t r = 0; r < steps; ++r) {
    for (CpuAdamIsa path : paths) {
      set_cpu_adam_isa(path);
      const auto t0 = Clock::now();
      adamw_update<float>(p.get(), g.get(), m.get(), v.get(), n, args_of(h, step++));
      secs[cpu_adam_isa_name(path)].push_back(seconds_since(t0));
    }
#if defined(ZT_HAVE_TORCH)
    if (with_torch) {
      const auto t0 = Clock::now();
      topt->step();
      secs["libtorch"].push_back(seconds_since(t0));
    }
#endif
  }
  for (int64_t r = 0; r < steps; ++r) measure_bandwidth(p.get(), g.get(), m.get(), v.get(), n, bw);
  set_cpu_adam_isa(default_path);
  double check = -1;
#if defined(ZT_HAVE_TORCH)
  if (with_torch) {
    topt.reset();
    tp = tg = torch::Tensor();
    check = torch_check(h);
  }
#endif

  const double adam_gbs = median(bw.adam), elem_bound = adam_gbs * 1e9 / 28.0;
  nlohmann::json out = {{"bench", "cpu_adam"},
                        {"n", n},
                        {"threads", threads},
                        {"steps", steps},
                        {"default_path", cpu_adam_isa_name(default_path)},
                        {"torch", torch_status},
                        {"bandwidth_gbs", {{"copy", median(bw.copy)}, {"triad", median(bw.triad)}, {"adam_traffic", adam_gbs}}},
                        {"adam_traffic_bound_elems_per_s", elem_bound}};
  if (check >= 0) out["torch_check_max_rel_diff"] = check;
  std::printf("\nbench_cpu_adam: n = %lld float32, %d thread(s), median of %lld steps\n\n", static_cast<long long>(n),
              threads, static_cast<long long>(steps));
  std::printf("| implementation | s/step | Melem/s | GB/s (28 B/elem) | %% of adam-traffic bandwidth |\n|---|---:|---:|---:|---:|\n");
  std::vector<std::string> rows;
  for (CpuAdamIsa path : paths) rows.push_back(cpu_adam_isa_name(path));
  if (with_torch) rows.push_back("libtorch");
  for (const std::string& name : rows) {
    const double s = median(secs[name]), eps = n / s;
    out["impl"][name] = {{"s_per_step_median", s}, {"elems_per_s", eps}, {"gbs_28", 28.0 * eps / 1e9}};
    std::printf("| %s | %.4f | %.1f | %.2f | %.1f%% |\n", name == "libtorch" ? "libtorch torch::optim::AdamW" : ("ours, " + name).c_str(),
                s, eps / 1e6, 28.0 * eps / 1e9, 100.0 * eps / elem_bound);
  }
  if (!with_torch) std::printf("| libtorch torch::optim::AdamW | - | - | - | - |  (%s)\n", torch_status.c_str());
  std::printf("\nmemory bandwidth (median of %zu samples, same arrays): copy %.2f GB/s, triad %.2f GB/s, adam-traffic %.2f GB/s"
              " -> AdamW bound %.1f Melem/s\n",
              bw.adam.size(), median(bw.copy), median(bw.triad), adam_gbs, elem_bound / 1e6);
  if (with_torch) {
    const std::string ours = cpu_adam_isa_name(paths.back());  // avx2_fma where the CPU has it
    const double ratio = median(secs["libtorch"]) / median(secs[ours]);
    out["ratio_ours_over_libtorch"] = ratio;
    out["ratio_path"] = ours;
    std::printf("ours (%s) / libtorch, elements/s: %.2fx (issue target >= 5x)\n", ours.c_str(), ratio);
    std::printf("check: 3 steps of ours vs libtorch on 1M elements, max |diff| / (|p| + lr) = %.2e\n", check);
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
