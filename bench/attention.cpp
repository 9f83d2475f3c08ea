// defines: main (bench_attention); helpers: forward, backward, ints, seconds_since, max_rel_diff, Row
//
// bench_attention — causal attention on the CPU, forward + backward: the P-saving algorithm this
// project used until the tiled kernel replaced it (a copy below, namespace p_saving: the measured
// baseline, used nowhere else) against FlashAttention-2's tiled algorithm
// (core/kernels/attention.h), at gpt-mini's heads (Hq = Hkv = 6, D = 64) and T = 256, 1024, 4096.
//
//   bench_attention [--T 256,1024,4096] [--B 8,8,2] [--threads 1,2] [--reps 3]
//                   [--tiles 64x64] [--out bench/results/attention.md]
//
// --B gives one batch size per T (the same count, or one for all): B shrinks as T grows so the
// baseline's P (B, H, T, T) stays within a laptop's memory (B = 2 at T = 4096: P is 805 MB).
// For each (T, threads, algorithm): one warmup forward + backward, then --reps timed ones; the
// best forward and the best backward are reported (best-of, on a shared machine). Both algorithms
// run on the same inputs and their outputs and gradients are compared (max |diff| / max |ref|),
// so a fast row cannot come from a broken kernel.
//
// Peak bytes: measured, the CPU allocator's (core/memory.h) peak_total over forward + backward
// minus what was live before the forward (q, k, v, out, dout, dq, dk, dv are allocated before):
// the saved tensor (P or lse) plus every scratch buffer the kernels allocate. "saved" is that
// saved tensor alone (computed: elements x 4 bytes).
//
// --tiles lists tile shapes (Br x Bc) for the tiled kernel: several give one row per shape (the
// tuning runs behind AttentionTiles' defaults).
#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/kernels/attention.h"
#include "core/kernels/gemm.h"
#include "core/kernels/softmax.h"
#include "core/kernels/vec_math.h"
#include "core/memory.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "bench/bench_util.h"  // defines: bench::median, bench::loadavg

namespace p_saving {
// The P-saving kernel as it was in core/kernels/attention.cpp before the tiled one (commit
// 7aaec4c), shortened only in comments: per (b, h), per row block of 64 query rows,
// S = scale Q K^T against keys [0, i1) (one GEMM), a causal softmax per row written into
// P (B, Hq, T, T), O = P V; the backward reads P: dP = dO V^T, dS = P * (dP - rowsum(dP * P)) *
// scale, dQ = dS K, dK = dS^T Q, dV = P^T dO, with a (T, T) scratch per thread for dS. Memory
// O(B H T^2). Only its multi-head path is kept (the bench's shapes): the backward's GQA branch
// (per-head dK, dV scratch summed per group) is left out and refused.
using namespace zt;
constexpr int64_t kBlock = 64;

template <class T>
void forward(T* out, T* P, const T* q, const T* k, const T* v, int64_t B, int64_t T_len, int64_t Hq, int64_t Hkv,
             int64_t D) {
  const int64_t group = Hq / Hkv, ldq = Hq * D, ldk = Hkv * D;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;
      const T* Q = q + b * T_len * ldq + h * D;
      const T* K = k + b * T_len * ldk + hk * D;
      const T* V = v + b * T_len * ldk + hk * D;
      T* O = out + b * T_len * ldq + h * D;
      T* S = P + (b * Hq + h) * T_len * T_len;
      for (int64_t i0 = 0; i0 < T_len; i0 += kBlock) {
        const int64_t i1 = std::min(T_len, i0 + kBlock), m = i1 - i0;
        T* Sb = S + i0 * T_len;
        gemm<T>(false, true, m, i1, D, scale, Q + i0 * ldq, ldq, K, ldk, T(0), Sb, T_len);
        for (int64_t i = i0; i < i1; ++i) {
          T* s = Sb + (i - i0) * T_len;
          softmax_row(s, s, i + 1);
          for (int64_t j = i + 1; j < i1; ++j) s[j] = T(0);
        }
        gemm<T>(false, false, m, D, i1, T(1), Sb, T_len, V, ldk, T(0), O + i0 * ldq, ldq);
      }
    }
}

template <class T>
void backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* P, int64_t B,
              int64_t T_len, int64_t Hq, int64_t Hkv, int64_t D) {
  ZT_CHECK(Hq == Hkv, "p_saving::backward: multi-head only in this copy");
  const int64_t group = 1, ldq = Hq * D, ldk = Hkv * D;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
  Tensor scratch = Tensor::empty({omp_get_max_threads(), T_len, T_len}, dtype_of<T>::value, Category::workspace);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;
      const T* Q = q + b * T_len * ldq + h * D;
      const T* K = k + b * T_len * ldk + hk * D;
      const T* V = v + b * T_len * ldk + hk * D;
      const T* dO = dout + b * T_len * ldq + h * D;
      T* dQ = dq + b * T_len * ldq + h * D;
      T* dK = dk + b * T_len * ldk + hk * D;
      T* dV = dv + b * T_len * ldk + hk * D;
      const int64_t ldkv = ldk;
      const T* Pb = P + (b * Hq + h) * T_len * T_len;
      T* dS = scratch.data<T>() + static_cast<int64_t>(omp_get_thread_num()) * T_len * T_len;
      for (int64_t i0 = 0; i0 < T_len; i0 += kBlock) {
        const int64_t i1 = std::min(T_len, i0 + kBlock), m = i1 - i0;
        gemm<T>(false, true, m, i1, D, T(1), dO + i0 * ldq, ldq, V, ldk, T(0), dS + i0 * T_len, T_len);
        for (int64_t i = i0; i < i1; ++i) {
          const T* pr = Pb + i * T_len;
          T* sr = dS + i * T_len;
          const int64_t n = i + 1;
          const T c = vm::lane_dot(sr, pr, n);
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) sr[j] = pr[j] * (sr[j] - c) * scale;
          for (int64_t j = n; j < i1; ++j) sr[j] = T(0);
        }
        gemm<T>(false, false, m, D, i1, T(1), dS + i0 * T_len, T_len, K, ldk, T(0), dQ + i0 * ldq, ldq);
      }
      for (int64_t j0 = 0; j0 < T_len; j0 += kBlock) {
        const int64_t j1 = std::min(T_len, j0 + kBlock), m = j1 - j0, r = T_len - j0;
        gemm<T>(true, false, m, D, r, T(1), Pb + j0 * T_len + j0, T_len, dO + j0 * ldq, ldq, T(0), dV + j0 * ldkv,
                ldkv);
        gemm<T>(true, false, m, D, r, T(1), dS + j0 * T_len + j0, T_len, Q + j0 * ldq, ldq, T(0), dK + j0 * ldkv,
                ldkv);
      }
    }
}
}  // namespace p_saving

namespace {
using bench::loadavg;

using namespace zt;

std::vector<int64_t> ints(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) v.push_back(std::stoll(x));
  return v;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double max_rel_diff(const Tensor& a, const Tensor& ref) {
  const float* x = a.data<float>();
  const float* y = ref.data<float>();
  double diff = 0, mag = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(x[i]) - y[i]));
    mag = std::max(mag, std::abs(static_cast<double>(y[i])));
  }
  return diff / std::max(mag, 1e-30);
}

struct Row {
  std::string algo;
  int64_t B, T, threads;
  double fwd_ms, bwd_ms;
  int64_t peak_bytes, saved_bytes;
  double diff;  // max |x - baseline| / max |baseline| over out, dq, dk, dv (0 for the baseline)
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_attention: P-saving vs tiled (FlashAttention-2) causal attention on the CPU"};
  std::string Ts = "256,1024,4096", Bs = "8,8,2", threads_s = "1,2", tiles_s = "64x64", out_path;
  int reps = 3;
  int64_t H = 6, D = 64;
  app.add_option("--T", Ts, "sequence lengths, comma-separated");
  app.add_option("--B", Bs, "batch size per T (or one for all)");
  app.add_option("--threads", threads_s, "thread counts");
  app.add_option("--reps", reps, "timed repetitions (best reported)");
  app.add_option("--heads", H, "heads (Hq = Hkv)");
  app.add_option("--head-dim", D, "head dimension D");
  app.add_option("--tiles", tiles_s, "tile shapes BrxBc (AttentionTiles q, k) for the tiled kernel, comma-separated");
  app.add_option("--out", out_path, "write a markdown table here");
  CLI11_PARSE(app, argc, argv);

  const std::vector<int64_t> Tv = ints(Ts), Bv0 = ints(Bs), thv = ints(threads_s);
  std::vector<int64_t> Bv = Bv0.size() == 1 ? std::vector<int64_t>(Tv.size(), Bv0[0]) : Bv0;
  if (Bv.size() != Tv.size()) {
    std::cerr << "--B: one value, or one per --T\n";
    return 2;
  }
  std::vector<AttentionTiles> tiles;
  {
    std::stringstream ss(tiles_s);
    for (std::string x; std::getline(ss, x, ',');) {
      const auto pos = x.find('x');
      tiles.push_back({std::stoll(x.substr(0, pos)), std::stoll(x.substr(pos + 1))});
    }
  }
  const std::string load_before = loadavg();
  Allocator& alloc = cpu_allocator();
  std::vector<Row> rows;

  for (size_t ti = 0; ti < Tv.size(); ++ti) {
    const int64_t T = Tv[ti], B = Bv[ti];
    const Shape s{B, T, H, D};
    Rng rng(42 + T);
    Tensor q = Tensor::empty(s, DType::f32), k = Tensor::empty(s, DType::f32), v = Tensor::empty(s, DType::f32),
           dout = Tensor::empty(s, DType::f32);
    for (Tensor* t : {&q, &k, &v, &dout}) rng.fill_normal(*t, 0.0, 1.0);
    Tensor ref_out = Tensor::empty(s, DType::f32), ref_dq = Tensor::empty(s, DType::f32),
           ref_dk = Tensor::empty(s, DType::f32), ref_dv = Tensor::empty(s, DType::f32);
    Tensor out = Tensor::empty(s, DType::f32), dq = Tensor::empty(s, DType::f32), dk = Tensor::empty(s, DType::f32),
           dv = Tensor::empty(s, DType::f32);

    for (int64_t th : thv) {
      set_num_threads(static_cast<int>(th));
      // One run of an algorithm: fwd and bwd timed separately; peak bytes measured on the first.
      auto measure = [&](const std::string& name, int64_t saved_elems, auto&& fwd, auto&& bwd, Tensor& o,
                         Tensor& gq, Tensor& gk, Tensor& gv, bool is_ref) {
        double best_f = 1e300, best_b = 1e300;
        int64_t peak = 0;
        for (int r = 0; r <= reps; ++r) {  // r = 0: warmup, and the memory measurement
          const int64_t live = alloc.stats().total();
          alloc.reset_peaks();
          auto t0 = std::chrono::steady_clock::now();
          Tensor saved = fwd(o);
          const double tf = seconds_since(t0);
          t0 = std::chrono::steady_clock::now();
          bwd(gq, gk, gv, o, saved);
          const double tb = seconds_since(t0);
          if (r == 0) {
            peak = alloc.stats().peak_total - live;
          } else {
            best_f = std::min(best_f, tf);
            best_b = std::min(best_b, tb);
          }
        }
        double diff = 0;
        if (!is_ref)
          for (auto [x, y] : {std::pair{&o, &ref_out}, {&gq, &ref_dq}, {&gk, &ref_dk}, {&gv, &ref_dv}})
            diff = std::max(diff, max_rel_diff(*x, *y));
        rows.push_back({name, B, T, th, best_f * 1e3, best_b * 1e3, peak, saved_elems * 4, diff});
        const Row& w = rows.back();
        std::printf("%-14s B %2lld T %5lld threads %lld: fwd %9.2f ms  bwd %9.2f ms  total %9.2f ms  peak %10.2f MiB"
                    "  saved %9.3f MiB  diff %.1e\n",
                    w.algo.c_str(), (long long)B, (long long)T, (long long)th, w.fwd_ms, w.bwd_ms, w.fwd_ms + w.bwd_ms,
                    w.peak_bytes / 1048576.0, w.saved_bytes / 1048576.0, w.diff);
        std::fflush(stdout);
      };
      measure(
          "P-saving", B * H * T * T,
          [&](Tensor& o) {
            Tensor P = Tensor::empty({B, H, T, T}, DType::f32, Category::activations);
            p_saving::forward<float>(o.data<float>(), P.data<float>(), q.data<float>(), k.data<float>(),
                                     v.data<float>(), B, T, H, H, D);
            return P;
          },
          [&](Tensor& gq, Tensor& gk, Tensor& gv, Tensor&, const Tensor& P) {
            p_saving::backward<float>(gq.data<float>(), gk.data<float>(), gv.data<float>(), dout.data<float>(),
                                      q.data<float>(), k.data<float>(), v.data<float>(), P.data<float>(), B, T, H, H,
                                      D);
          },
          ref_out, ref_dq, ref_dk, ref_dv, true);
      for (AttentionTiles tl : tiles)
        measure(
            "tiled " + std::to_string(tl.q) + "x" + std::to_string(tl.k), B * H * T,
            [&](Tensor& o) {
              Tensor lse = Tensor::empty({B, H, T}, DType::f32, Category::activations);
              attention_forward<float>(o.data<float>(), lse.data<float>(), q.data<float>(), k.data<float>(),
                                       v.data<float>(), B, T, H, H, D, tl);
              return lse;
            },
            [&](Tensor& gq, Tensor& gk, Tensor& gv, Tensor& o, const Tensor& lse) {
              attention_backward<float>(gq.data<float>(), gk.data<float>(), gv.data<float>(), dout.data<float>(),
                                        q.data<float>(), k.data<float>(), v.data<float>(), o.data<float>(),
                                        lse.data<float>(), B, T, H, H, D, tl);
            },
            out, dq, dk, dv, false);
    }
  }
  const std::string load_after = loadavg();

  std::ostringstream md;
  md << "| T | B | threads | algorithm | fwd ms | bwd ms | fwd+bwd ms | vs P-saving | peak MiB | saved MiB | "
        "max diff |\n|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Row& r : rows) {
    double base = 0;
    for (const Row& b : rows)
      if (b.algo == "P-saving" && b.T == r.T && b.threads == r.threads) base = b.fwd_ms + b.bwd_ms;
    char line[512];
    std::snprintf(line, sizeof line, "| %lld | %lld | %lld | %s | %.2f | %.2f | %.2f | %.2fx | %.2f | %.3f | %.1e |\n",
                  (long long)r.T, (long long)r.B, (long long)r.threads, r.algo.c_str(), r.fwd_ms, r.bwd_ms,
                  r.fwd_ms + r.bwd_ms, base / (r.fwd_ms + r.bwd_ms), r.peak_bytes / 1048576.0,
                  r.saved_bytes / 1048576.0, r.diff);
    md << line;
  }
  md << "\nHq = Hkv = " << H << ", D = " << D << ", float32; best of " << reps
     << " after one warmup. 'vs P-saving' = P-saving's fwd+bwd time / this row's (> 1: faster). "
        "Load average (1/5/15 min) before: "
     << load_before << ", after: " << load_after << "\n";
  std::cout << "\n" << md.str();
  if (!out_path.empty()) {
    std::ofstream f(out_path);
    f << md.str();
  }
  return 0;
}
