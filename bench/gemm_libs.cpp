// defines: main (bench_gemm_libs); helpers: GemmCase, step_shapes, check
//
// bench_gemm_libs — the float32 GEMM libraries of core/kernels/gemm_libs.h (OpenBLAS, BLIS, oneDNN,
// Eigen) on the GEMM shapes of one training step of a model, 1 and 2 threads, against the
// measured FMA ceiling (core/fma_ceiling.h). The build's default library (CMake ZT_GEMM) is the
// winner of this table; bench/gemm_libs.sh writes bench/results/gemm_libs.md.
//
//   bench_gemm_libs [--model gpt-mini] [--batch 8] [--seq 256] [--threads 1,2] [--reps 7]
//                   [--libs openblas,blis,onednn,eigen] [--json FILE]
//
// The shapes, with M = batch x seq rows, for every linear (out, in) of a block and the head:
//   forward  y  = x w^T     (M, out, in)   NT
//   backward dx = dy w      (M, in, out)   NN
//            dw = dy^T x    (out, in, M)   TN
// and the attention tiles (core/kernels/attention.h, Br = Bc = 64, D = head_dim) that each
// thread multiplies on its own: 2 per (query tile, key tile) pair forward, 5 backward.
// Each shape is timed two ways on t threads:
//   zt::gemm  zt::gemm<float> with that library, what the training step runs: C cut into t row
//             (or column) blocks, one single-threaded library call each, or for a library that
//             threads better itself (gemm_libs.h's gemm_lib_splits: oneDNN) one threaded call;
//   native    one call threaded by the library itself.
// The per-step GEMM time of a library is the sum over shapes of count x median time (the
// zt::gemm way; the attention tiles single-threaded, as attention runs them, t at once on
// t threads, and their % is of one thread's share of the ceiling). The libraries alternate call by
// call within each shape, so a change in machine load hits all of them.
// Every library's result is checked against a float64 dot product on sampled entries: a library
// wired with a wrong transpose cannot post a fast row.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fma_ceiling.h"
#include "core/kernels/gemm.h"
#include "core/kernels/gemm_libs.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "models/model_config.h"
#include "bench/bench_util.h"  // defines: bench::median, bench::loadavg

namespace {
using bench::median;
using bench::loadavg;
using namespace zt;

struct GemmCase {
  std::string what;  // e.g. "fc fwd"
  bool ta, tb;
  int64_t M, N, K;
  int64_t count;     // GEMMs of this shape per training step
  bool tile = false; // an attention tile: run single-threaded, as attention runs it
  double flops() const { return 2.0 * M * N * K; }
};

// The GEMMs of one training step (forward + backward) of `cfg` at B x T.
std::vector<GemmCase> step_shapes(const ModelConfig& c, int64_t B, int64_t T) {
  const int64_t M = B * T, C = c.n_embd, D = c.head_dim(), kv = c.n_kv_head * D, F = c.ffn_hidden, L = c.n_layer;
  struct Lin {
    std::string name;
    int64_t out, in;
  };
  std::vector<Lin> lins;
  if (c.family == "llama")
    lins = {{"q", C, C}, {"k", kv, C}, {"v", kv, C}, {"o", C, C}, {"gate", F, C}, {"up", F, C}, {"down", C, F}};
  else  // GPT-2: c_attn is one GEMM (nn/layers.cpp: attention reads the packed q|k|v)
    lins = {{"c_attn", 3 * C, C}, {"attn proj", C, C}, {"fc", F, C}, {"mlp proj", C, F}};
  std::vector<GemmCase> out;
  auto add_linear = [&](const std::string& n, int64_t o, int64_t i, int64_t count) {
    out.push_back({n + " fwd", false, true, M, o, i, count});
    out.push_back({n + " bwd dx", false, false, M, i, o, count});
    out.push_back({n + " bwd dw", true, false, o, i, M, count});
  };
  for (const Lin& l : lins) add_linear(l.name, l.out, l.in, L);
  add_linear("lm head", c.padded_vocab_size, C, 1);
  // one row per distinct (ta, tb, M, N, K): e.g. GPT-2's q/k/v and attn proj share their shapes
  std::vector<GemmCase> merged;
  for (const GemmCase& s : out) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const GemmCase& m) {
      return m.ta == s.ta && m.tb == s.tb && m.M == s.M && m.N == s.N && m.K == s.K;
    });
    if (it == merged.end()) merged.push_back(s);
    else {
      it->count += s.count;
      it->what += " + " + s.what;
    }
  }
  // attention tiles: Br = Bc = 64 (or T), pairs (i, j <= i) per (batch, head, layer)
  const int64_t br = std::min<int64_t>(64, T), nt = (T + br - 1) / br, pairs = nt * (nt + 1) / 2;
  const int64_t n = B * c.n_head * L * pairs;
  merged.push_back({"attn S=QK^T (fwd, bwd x2)", false, true, br, br, D, 3 * n, true});
  merged.push_back({"attn O=PV, dQ=dS K (fwd, bwd)", false, false, br, D, br, 2 * n, true});
  merged.push_back({"attn dV=P^T dO, dK=dS^T Q", true, false, br, D, br, 2 * n, true});
  return merged;
}

// Max |C - reference| over sampled entries, relative to the sum of |products| (float32 rounding
// of a K-term sum stays near K * 2^-24 of it).
double check(const GemmCase& s, const float* A, int64_t lda, const float* B, int64_t ldb, const float* C, int64_t ldc) {
  double worst = 0;
  for (int64_t t = 0; t < 16; ++t) {
    const int64_t i = (t * 131 + 7) % s.M, j = (t * 197 + 5) % s.N;
    double ref = 0, mag = 0;
    for (int64_t p = 0; p < s.K; ++p) {
      const double a = s.ta ? A[p * lda + i] : A[i * lda + p], b = s.tb ? B[j * ldb + p] : B[p * ldb + j];
      ref += a * b;
      mag += std::abs(a * b);
    }
    worst = std::max(worst, std::abs(ref - C[i * ldc + j]) / std::max(mag, 1e-30));
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gemm_libs: float32 GEMM libraries on a model's training-step shapes"};
  std::string model = "gpt-mini", json_path, libs_text;
  int64_t B = 8, T = 256;
  std::vector<int> threads{1, 2};
  int reps = 7;
  app.add_option("--model", model)->capture_default_str();
  app.add_option("--batch", B)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seq", T)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--threads", threads)->delimiter(',')->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed calls per shape (median reported)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--libs", libs_text, "comma-separated subset of the built libraries (default: all built)");
  app.add_option("--json", json_path, "append one JSON line per (library, threads) to this file");
  CLI11_PARSE(app, argc, argv);

  std::vector<GemmLib> libs = gemm_libs_built();
  if (!libs_text.empty()) {
    libs.clear();
    for (size_t p = 0; p <= libs_text.size();) {
      const size_t q = std::min(libs_text.find(',', p), libs_text.size());
      const GemmLib l = parse_gemm_lib(libs_text.substr(p, q - p));
      if (!gemm_lib_built(l)) {
        std::fprintf(stderr, "bench_gemm_libs: --libs %s: not in this build\n", gemm_lib_name(l));
        return 2;
      }
      libs.push_back(l);
      p = q + 1;
    }
  }
  const ModelConfig cfg = model_config(model);
  const std::vector<GemmCase> shapes = step_shapes(cfg, B, T);
  const GemmLib build_default = gemm_lib();
  const std::string load_before = loadavg(), provider = cblas_sgemm_provider();
  std::fprintf(stderr, "cblas_sgemm from %s\n", provider.c_str());

  int64_t maxA = 0, maxB = 0, maxC = 0;
  for (const GemmCase& s : shapes) {
    maxA = std::max(maxA, s.M * s.K);
    maxB = std::max(maxB, s.K * s.N);
    maxC = std::max(maxC, s.M * s.N);
  }
  Tensor A = Tensor::empty({maxA}, DType::f32, Category::workspace), Bt = Tensor::empty({maxB}, DType::f32, Category::workspace);
  Tensor Cm = Tensor::empty({maxC}, DType::f32, Category::workspace);
  Rng rng(20261126);
  rng.fill_uniform(A, -1, 1);
  rng.fill_uniform(Bt, -1, 1);
  const float *a = A.data<float>(), *b = Bt.data<float>();
  float* c = Cm.data<float>();

  bool sane = true;
  nlohmann::json results = nlohmann::json::array();
  std::map<int, double> ceiling;
  for (int t : threads) {
    set_num_threads(t);
    ceiling[t] = fma_ceiling(t).gflops;
    // Libraries alternate call by call within each shape (a drift in machine load hits all of them).
    std::vector<nlohmann::json> row(libs.size());
    std::vector<double> step_ms(libs.size(), 0.0);
    double step_flops = 0;
    for (size_t li = 0; li < libs.size(); ++li)
      row[li] = {{"lib", gemm_lib_name(libs[li])}, {"threads", t}, {"model", model}, {"batch", B}, {"seq", T},
                 {"shapes", nlohmann::json::array()}};
    for (const GemmCase& s : shapes) {
      const int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N, ldc = s.N;
      const bool two_ways = t > 1 && !s.tile;  // tiles run single-threaded, as attention runs them
      auto call = [&](GemmLib lib, bool native) {
        if (s.tile) sgemm_serial(lib, s.ta, s.tb, s.M, s.N, s.K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
        else if (native) sgemm_threaded(lib, t, s.ta, s.tb, s.M, s.N, s.K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
        else {
          set_gemm_lib(lib);
          gemm<float>(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
        }
      };
      auto timed = [&](GemmLib lib, bool native) {
        const auto t0 = std::chrono::steady_clock::now();
        call(lib, native);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (const double err = check(s, a, lda, b, ldb, c, ldc); !(err < 1e-5)) {
          std::fprintf(stderr, "bench_gemm_libs: %s %s: relative error %g against float64\n", gemm_lib_name(lib),
                       s.what.c_str(), err);
          sane = false;
        }
        return ms;
      };
      std::vector<std::vector<double>> split(libs.size()), native(libs.size());
      for (GemmLib lib : libs)
        for (int w = 0; w < 2; ++w) {
          call(lib, false);
          if (two_ways) call(lib, true);
        }
      for (int r = 0; r < reps; ++r)
        for (size_t li = 0; li < libs.size(); ++li) {
          split[li].push_back(timed(libs[li], false));
          if (two_ways) native[li].push_back(timed(libs[li], true));
        }
      // Tiles: t threads run t of them at once (attention parallelizes over heads).
      const double per_step = static_cast<double>(s.count) / (s.tile ? t : 1);
      step_flops += s.count * s.flops();
      for (size_t li = 0; li < libs.size(); ++li) {
        const double sp = median(split[li]), nv = two_ways ? median(native[li]) : sp;
        step_ms[li] += per_step * sp;
        row[li]["shapes"].push_back({{"what", s.what}, {"ta", s.ta}, {"tb", s.tb}, {"M", s.M}, {"N", s.N},
                                     {"K", s.K}, {"count", s.count}, {"ms_zt_gemm", sp}, {"ms_native", nv},
                                     {"gflops_zt_gemm", s.flops() / sp * 1e-6}, {"gflops_native", s.flops() / nv * 1e-6}});
        std::fprintf(stderr, "%-8s t=%d %-40s %5lldx%5lldx%5lld %c%c x%-6lld zt::gemm %6.1f native %6.1f GFLOP/s\n",
                     gemm_lib_name(libs[li]), t, s.what.c_str(), static_cast<long long>(s.M),
                     static_cast<long long>(s.N), static_cast<long long>(s.K), s.ta ? 'T' : 'N', s.tb ? 'T' : 'N',
                     static_cast<long long>(s.count), s.flops() / sp * 1e-6, s.flops() / nv * 1e-6);
      }
    }
    // the ceiling again after the rows: the best seen is the one used
    ceiling[t] = std::max(ceiling[t], fma_ceiling(t, 3).gflops);
    for (size_t li = 0; li < libs.size(); ++li) {
      row[li]["step_gemm_ms"] = step_ms[li];
      row[li]["step_gemm_gflop"] = step_flops * 1e-9;
      results.push_back(row[li]);
    }
  }
  set_gemm_lib(build_default);
  const std::string load_after = loadavg();

  // Markdown: per shape GFLOP/s (% of ceiling) per library, then the per-step totals.
  std::printf("model %s, B=%lld, T=%lld; cblas_sgemm from %s; build default: %s; load before %s, after %s\n\n",
              model.c_str(), static_cast<long long>(B), static_cast<long long>(T), provider.c_str(),
              gemm_lib_name(build_default), load_before.c_str(), load_after.c_str());
  for (int t : threads) {
    std::printf("%d thread(s), FMA ceiling %.1f GFLOP/s: GFLOP/s through zt::gemm (in parentheses: the library's own "
                "threading) and %% of the ceiling\n\n", t,
                ceiling[t]);
    std::printf("| GEMM | op | M x N x K | per step |");
    for (GemmLib l : libs) std::printf(" %s |", gemm_lib_name(l));
    std::printf("\n|---|---|---|---:|");
    for (size_t i = 0; i < libs.size(); ++i) std::printf("---:|");
    std::printf("\n");
    for (size_t si = 0; si < shapes.size(); ++si) {
      const GemmCase& s = shapes[si];
      std::printf("| %s | %c%c | %lldx%lldx%lld | %lld |", s.what.c_str(), s.ta ? 'T' : 'N', s.tb ? 'T' : 'N',
                  static_cast<long long>(s.M), static_cast<long long>(s.N), static_cast<long long>(s.K),
                  static_cast<long long>(s.count));
      for (const auto& r : results) {
        if (r["threads"] != t) continue;
        const auto& x = r["shapes"][si];
        const double sp = x["gflops_zt_gemm"], nv = x["gflops_native"];
        if (t == 1 || s.tile) std::printf(" %.1f (%.0f%%) |", sp, 100 * sp / (ceiling[t] / (s.tile ? t : 1)));
        else std::printf(" %.1f (%.1f) %.0f%% |", sp, nv, 100 * sp / ceiling[t]);
      }
      std::printf("\n");
    }
    std::printf("| **step GEMM time, ms** | | | |");
    for (const auto& r : results)
      if (r["threads"] == t) std::printf(" **%.0f** |", static_cast<double>(r["step_gemm_ms"]));
    std::printf("\n| **step GEMMs, %% of ceiling** | | | |");
    for (const auto& r : results)
      if (r["threads"] == t)
        std::printf(" %.0f%% |", 100.0 * static_cast<double>(r["step_gemm_gflop"]) /
                                     static_cast<double>(r["step_gemm_ms"]) * 1e3 / ceiling[t]);
    std::printf("\n\n");
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path, std::ios::app);
    if (!f) {
      std::fprintf(stderr, "bench_gemm_libs: cannot open --json file '%s' for appending\n", json_path.c_str());
      return 1;
    }
    for (auto& r : results) {
      r["fma_ceiling_gflops"] = ceiling[r["threads"].get<int>()];
      f << r.dump() << "\n";
    }
  }
  return sane ? 0 : 2;
}
