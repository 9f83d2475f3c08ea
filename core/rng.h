// defines: Rng — the deterministic, seeded random number generator.
//
// One 64-bit state (xorshift64*), so a checkpoint saves and restores it exactly and a resumed
// run draws the same numbers; jump() skips ahead without drawing. Normal samples use Box-Muller in pairs. Same seed, same numbers,
// on every machine (no std::distribution, whose algorithms differ between standard libraries).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zt {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1337) { seed_(seed); }
  void seed_(uint64_t seed);
  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

  uint32_t next_u32();
  // Advances the state as `draws` calls of next_u32() would, in O(64 log draws) word operations:
  // xorshift64*'s state update is linear over GF(2), so `draws` updates are one 64x64 bit
  // matrix, the product of the precomputed squares T^(2^k) for the set bits k of `draws`
  // (Vigna 2016, "An experimental exploration of Marsaglia's xorshift generators", section 3).
  // What makes initialization addressable: a rank draws its shard alone (models/init.h).
  void jump(uint64_t draws);
  float uniform();  // [0, 1), 24 random bits
  float normal();   // N(0, 1); uses one Box-Muller pair, discards the second sample

  // In-place fills of a float32/float64 tensor (any strides).
  void fill_normal(Tensor& t, double mean, double std);
  void fill_uniform(Tensor& t, double lo, double hi);

 private:
  uint64_t state_ = 0;
};

}  // namespace zt
