// defines: zt::FmaCeiling, fma_ceiling — the measured float32 FMA peak of this CPU.
//
// Every benchmark that reports "% of peak" or MFU divides by this number, so it is measured,
// not taken from a spec sheet (clocks under KVM, turbo and SMT make spec numbers fiction).
//
// Method: each thread runs kChains independent dependency chains acc_j = acc_j * a + b of
// vector FMAs (AVX-512: _mm512_fmadd_ps, AVX2+FMA: _mm256_fmadd_ps; otherwise a plain loop the
// compiler contracts to whatever it can). kChains = 12 exceeds latency x throughput of every
// current x86 core (Zen 3: 4-cycle latency x 2 FMA pipes = 8 chains in flight; Intel SKX/ICL:
// 4 x 2 = 8), so the loop is throughput-bound. a = 1 - 2^-20 and b = 2^-20 keep every
// accumulator near 1: no overflow, no denormals. Flops counted as 2 per FMA lane.
// Wall time of the whole parallel region (all threads start together and the slowest counts),
// best of `reps`.
#pragma once
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace zt {

struct FmaCeiling {
  int threads = 1;
  double gflops = 0;  // best measured float32 GFLOP/s over all `threads` together
  const char* isa = "";
};

namespace detail {

inline constexpr int kChains = 12;

// Runs `iters` rounds of kChains vector FMAs; returns a value that depends on every chain (so
// the compiler cannot drop the work). Sets *lanes to the floats per vector.
inline float fma_chains(int64_t iters, int* lanes, const char** isa) {
  const float a = 1.0f - 1.0f / (1 << 20), b = 1.0f / (1 << 20);
#if defined(__AVX512F__)
  *lanes = 16;
  *isa = "AVX-512 _mm512_fmadd_ps";
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(1.0f + j * 1e-3f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], va, vb);
  __m512 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
#elif defined(__AVX2__) && defined(__FMA__)
  *lanes = 8;
  *isa = "AVX2 _mm256_fmadd_ps";
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(1.0f + j * 1e-3f);
  for (int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], va, vb);
  __m256 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  float r = 0;
  for (float x : out) r += x;
  return r;
#else
  // Portable fallback: 8 lanes x kChains scalars; the compiler vectorizes and contracts what
  // the target allows. The ISA string says so, so a table never passes this off as AVX2.
  *lanes = 8;
  *isa = "portable (no AVX2/FMA at compile time)";
  float acc[kChains][8];
  for (int j = 0; j < kChains; ++j)
    for (int l = 0; l < 8; ++l) acc[j][l] = 1.0f + j * 1e-3f + l * 1e-4f;
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kChains; ++j)
#pragma omp simd
      for (int l = 0; l < 8; ++l) acc[j][l] = acc[j][l] * a + b;
  float r = 0;
  for (int j = 0; j < kChains; ++j)
    for (int l = 0; l < 8; ++l) r += acc[j][l];
  return r;
#endif
}

}  // namespace detail

// Measures the float32 FMA ceiling of `threads` threads (OpenMP, one chain set per thread).
// `iters` rounds per thread per repetition (default: ~0.05-0.1 s on a 3 GHz core with AVX2).
inline FmaCeiling fma_ceiling(int threads, int reps = 5, int64_t iters = int64_t(1) << 23) {
  FmaCeiling r;
  r.threads = threads;
  double best = 1e300;
  volatile float sink = 0;
  int lanes = 8;
  const char* isa = "";
  for (int rep = 0; rep < reps + 1; ++rep) {  // the first repetition is a warmup (clock ramp)
    float partial[256] = {};
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      int l = 8;
      const char* s = "";
      const float v = detail::fma_chains(iters, &l, &s);
      partial[omp_get_thread_num() & 255] = v;
#pragma omp master
      {
        lanes = l;
        isa = s;
      }
    }
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int t = 0; t < threads && t < 256; ++t) sink = sink + partial[t];
    if (rep > 0) best = std::min(best, dt);
  }
  r.isa = isa;
  const double flops = 2.0 * lanes * detail::kChains * static_cast<double>(iters) * threads;
  r.gflops = flops / best * 1e-9;
  return r;
}

}  // namespace zt
