// defines: Rng (seed_, next_u32, jump, uniform, normal and 2 more) (core/rng.h); file-local:
//          check_init_dtype, via_dtype, BitMatrix, jump_powers
#include "core/rng.h"

#include <array>
#include <cmath>
#include <vector>

namespace zt {

namespace {
// The dtypes a tensor is initialized in: float32 and float64, and bfloat16 — drawn as float32
// and rounded, so a bfloat16 model is exactly its float32 twin rounded (models built in bf16).
void check_init_dtype(const Tensor& t, const char* what) {
  if (t.dtype() != DType::bf16) check_float(t, what);
}
DType via_dtype(const Tensor& t) { return t.dtype() == DType::bf16 ? DType::f32 : t.dtype(); }
}  // namespace

void Rng::seed_(uint64_t seed) {
  // splitmix64 of the seed, so that small seeds (0, 1, 2) give unrelated, non-zero states.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  state_ = (z ^ (z >> 31)) | 1ull;
}

uint32_t Rng::next_u32() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
}

namespace {
// A 64x64 matrix over GF(2) as its columns: col[j] = M e_j, so M x = XOR of col[j] over the set
// bits j of x.
struct BitMatrix {
  std::array<uint64_t, 64> col{};
  uint64_t apply(uint64_t x) const {
    uint64_t y = 0;
    for (int j = 0; x != 0; ++j, x >>= 1)
      if (x & 1) y ^= col[j];
    return y;
  }
  BitMatrix then(const BitMatrix& b) const {  // b after this: (b * this)
    BitMatrix m;
    for (int j = 0; j < 64; ++j) m.col[j] = b.apply(col[j]);
    return m;
  }
};

uint64_t step_state(uint64_t s) {  // next_u32()'s state update
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s;
}

// T^(2^k) for k = 0..63, T the state update.
const std::array<BitMatrix, 64>& jump_powers() {
  static const std::array<BitMatrix, 64> powers = [] {
    std::array<BitMatrix, 64> p;
    for (int j = 0; j < 64; ++j) p[0].col[j] = step_state(1ull << j);
    for (int k = 1; k < 64; ++k) p[k] = p[k - 1].then(p[k - 1]);
    return p;
  }();
  return powers;
}
}  // namespace

void Rng::jump(uint64_t draws) {
  const auto& p = jump_powers();
  for (int k = 0; draws != 0; ++k, draws >>= 1)
    if (draws & 1) state_ = p[k].apply(state_);
}

float Rng::uniform() { return static_cast<float>(next_u32() >> 8) / 16777216.0f; }

float Rng::normal() {
  const double u1 = (static_cast<double>(next_u32() >> 8) + 1.0) / 16777217.0;  // (0, 1]
  const double u2 = static_cast<double>(next_u32() >> 8) / 16777216.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

void Rng::fill_normal(Tensor& t, double mean, double std) {
  check_init_dtype(t, "Rng::fill_normal");
  const int64_t n = t.numel();
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += 2) {  // Box-Muller: both samples of each pair are used
    const double u1 = (static_cast<double>(next_u32() >> 8) + 1.0) / 16777217.0;
    const double u2 = static_cast<double>(next_u32() >> 8) / 16777216.0;
    const double r = std::sqrt(-2.0 * std::log(u1));
    v[i] = mean + std * r * std::cos(2.0 * M_PI * u2);
    if (i + 1 < n) v[i + 1] = mean + std * r * std::sin(2.0 * M_PI * u2);
  }
  t.copy_(Tensor::from_vector(v, t.shape(), via_dtype(t), Category::workspace));
}

void Rng::fill_uniform(Tensor& t, double lo, double hi) {
  check_init_dtype(t, "Rng::fill_uniform");
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (double& x : v) x = lo + (hi - lo) * uniform();
  t.copy_(Tensor::from_vector(v, t.shape(), via_dtype(t), Category::workspace));
}

}  // namespace zt
