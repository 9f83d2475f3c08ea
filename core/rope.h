// defines: RopeScaling, RopeParams, rope_inv_freq — what RoPE's frequencies are (the base theta and
//          Llama 3's scaling): the parameters the Backend table's rope_tables entry, the layers
//          and the model configs pass around. The kernels are core/kernels/rope.h's.
//
// Hugging Face Llama's RoPE rotates the pair (x[d], x[d + D/2]) of a head of D elements at
// position t by angle(t, d) = t * inv_freq(d), inv_freq(d) = theta^(-2d/D) unscaled.
#pragma once
#include <cmath>
#include <cstdint>

// rope_inv_freq runs on the host and, compiled by nvcc, on the device (the CUDA tables kernel):
// one formula for both.
#if defined(__CUDACC__)
#define ZT_ROPE_HOST_DEVICE __host__ __device__
#else
#define ZT_ROPE_HOST_DEVICE
#endif

namespace zt {

// Frequency scaling of a Hugging Face config's "rope_scaling". llama3 (Llama 3.1 and later,
// transformers' _compute_llama3_parameters): with L = original_max_position and the wavelength
// w = 2 pi / inv_freq of each frequency,
//   w < L / high_freq_factor    (high frequencies)  kept:        inv_freq
//   w > L / low_freq_factor     (low frequencies)   divided:     inv_freq / factor
//   in between                                       interpolated: (1 - s) inv_freq / factor + s inv_freq,
//                                                    s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor)
// so positions past L keep the low frequencies' angles within what training saw. No attention
// scaling comes with it (transformers' attention_factor is 1 for llama3).
struct RopeScaling {
  enum class Type : int { none = 0, llama3 = 1 };
  Type type = Type::none;
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  bool operator==(const RopeScaling&) const = default;
};

struct RopeParams {
  double theta = 10000.0;
  RopeScaling scaling;
  RopeParams() = default;
  RopeParams(double base) : theta(base) {}  // NOLINT: implicit on purpose, plain RoPE of base theta
  RopeParams(double base, const RopeScaling& s) : theta(base), scaling(s) {}
  bool operator==(const RopeParams&) const = default;
};

// The angle per position of pair d of a head of D elements, in double.
ZT_ROPE_HOST_DEVICE inline double rope_inv_freq(int64_t d, int64_t D, const RopeParams& p) {
  const double f = pow(p.theta, -2.0 * static_cast<double>(d) / static_cast<double>(D));
  if (p.scaling.type != RopeScaling::Type::llama3) return f;
  const RopeScaling& s = p.scaling;
  const double L = static_cast<double>(s.original_max_position);
  const double wavelen = 2.0 * 3.141592653589793 / f;
  if (wavelen < L / s.high_freq_factor) return f;
  if (wavelen > L / s.low_freq_factor) return f / s.factor;
  const double smooth = (L / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

}  // namespace zt
