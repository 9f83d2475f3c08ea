// defines: quantized_code_bytes, quantized_blocks, quantize_blocks, dequantize_blocks, quantize_,
//          dequantize_ (core/kernels/quantize.h); file-local: check_format, qmax_of, scale_of, code_of,
//          put_code, get_code, check_tensors
#include "core/kernels/quantize.h"

#include <cmath>

#include "core/backend.h"
#include "core/check.h"

namespace zt {

namespace {

void check_format(const char* who, int64_t n, int bits, int64_t block) {
  ZT_CHECK(bits == 4 || bits == 8, who, ": bits = ", bits, ", expected 4 or 8");
  ZT_CHECK(block >= 1, who, ": block = ", block, ", expected >= 1 element");
  ZT_CHECK(n >= 0, who, ": n = ", n, ", expected >= 0");
}

int qmax_of(int bits) { return (1 << (bits - 1)) - 1; }

// The block's scale from its max |x| (quantize.h's two schemes): in double for symmetric; m / 2^(bits-1) is exact.
float scale_of(float amax, int bits, QuantScheme scheme) {
  return scheme == QuantScheme::deepspeed ? std::ldexp(amax, -(bits - 1))
                                          : static_cast<float>(static_cast<double>(amax) / qmax_of(bits));
}

// x / s to an integer, in double so that the only rounding before the integer is the division's
// (2^-53 relative): symmetric rounds half away from zero into [-qmax, qmax]; deepspeed half to
// even (nearbyint in the default rounding mode) into [-qmax - 1, qmax].
int code_of(float x, float s, int bits, QuantScheme scheme) {
  if (s == 0.0f) return 0;
  const int hi = qmax_of(bits), lo = scheme == QuantScheme::deepspeed ? -hi - 1 : -hi;
  const double r = static_cast<double>(x) / static_cast<double>(s);
  const double q = scheme == QuantScheme::deepspeed ? std::nearbyint(r) : std::round(r);
  return static_cast<int>(q > hi ? hi : q < lo ? lo : q);
}

void put_code(uint8_t* codes, int bits, int64_t i, int q) {
  if (bits == 8) {
    codes[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    return;
  }
  const uint8_t nib = static_cast<uint8_t>(q & 0xf);  // two's complement in 4 bits
  uint8_t& b = codes[i / 2];
  // elements in order: the low nibble first (which clears the byte), then the high one
  b = (i % 2 == 0) ? nib : static_cast<uint8_t>((b & 0x0f) | (nib << 4));
}

int get_code(const uint8_t* codes, int bits, int64_t i) {
  if (bits == 8) return static_cast<int8_t>(codes[i]);
  const int nib = (i % 2 == 0) ? (codes[i / 2] & 0xf) : (codes[i / 2] >> 4);
  return nib >= 8 ? nib - 16 : nib;  // sign-extend
}

}  // namespace

int64_t quantized_code_bytes(int64_t n, int bits) {
  check_format("quantized_code_bytes", n, bits, 1);
  return bits == 8 ? n : (n + 1) / 2;
}

int64_t quantized_blocks(int64_t n, int64_t block) {
  check_format("quantized_blocks", n, 8, block);
  return (n + block - 1) / block;
}

void quantize_blocks(const float* x, int64_t n, int bits, int64_t block, uint8_t* codes, float* scales,
                     QuantScheme scheme) {
  check_format("quantize_blocks", n, bits, block);
  if (n == 0) return;
  ZT_CHECK(x && codes && scales, "quantize_blocks: a null buffer for n = ", n);
  const int64_t nb = quantized_blocks(n, block);
  // Threads over blocks. With 4 bits and an odd block size two blocks share a byte: one thread.
  const bool parallel = bits == 8 || block % 2 == 0;
#pragma omp parallel for schedule(static) if (parallel && nb > 1)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t i0 = b * block, i1 = i0 + block < n ? i0 + block : n;
    float amax = 0.0f;
    bool finite = true;
    for (int64_t i = i0; i < i1; ++i) {
      finite = finite && std::isfinite(x[i]);
      amax = std::fabs(x[i]) > amax ? std::fabs(x[i]) : amax;
    }
    // A NaN or an infinity: the block's scale is NaN and its codes 0 (never converted: a NaN's
    // integer is undefined), so every element of it dequantizes to NaN.
    const float s = finite ? scale_of(amax, bits, scheme) : std::nanf("");
    scales[b] = s;
    for (int64_t i = i0; i < i1; ++i) put_code(codes, bits, i, finite ? code_of(x[i], s, bits, scheme) : 0);
  }
}

void dequantize_blocks(const uint8_t* codes, const float* scales, int64_t n, int bits, int64_t block, float* out) {
  check_format("dequantize_blocks", n, bits, block);
  if (n == 0) return;
  ZT_CHECK(codes && scales && out, "dequantize_blocks: a null buffer for n = ", n);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(get_code(codes, bits, i)) * scales[i / block];
}

namespace {
// The tensors of one (de)quantization of n = values.numel() elements, as quantize_ / dequantize_ take them.
void check_tensors(const char* who, const Tensor& values, const Tensor& codes, const Tensor& scales, int bits,
                   int64_t block) {
  for (const Tensor* t : {&values, &codes, &scales})
    ZT_CHECK(t->defined() && t->is_contiguous(), who, ": every tensor must be defined and contiguous, got ",
             t->defined() ? t->str() : std::string("undefined"));
  const int64_t n = values.numel();
  ZT_CHECK(values.dtype() == DType::f32, who, ": values ", values.str(), ": expected float32");
  ZT_CHECK(codes.dtype() == DType::u8 && codes.numel() == quantized_code_bytes(n, bits), who, ": codes ", codes.str(),
           ": expected uint8 of ", quantized_code_bytes(n, bits), " bytes (", n, " values at ", bits, " bits)");
  ZT_CHECK(scales.dtype() == DType::f32 && scales.numel() == quantized_blocks(n, block), who, ": scales ", scales.str(),
           ": expected float32 of ", quantized_blocks(n, block), " (blocks of ", block, ")");
  ZT_CHECK(codes.device() == values.device() && scales.device() == values.device(), who,
           ": values, codes and scales must be on one device");
}
}  // namespace

void quantize_(const Tensor& codes, const Tensor& scales, const Tensor& x, int bits, int64_t block,
               QuantScheme scheme) {
  check_tensors("quantize_", x, codes, scales, bits, block);
  if (!x.device().is_cpu()) return backend_of(x).quantize(codes, scales, x, bits, block, scheme);
  quantize_blocks(x.data<float>(), x.numel(), bits, block, codes.data<uint8_t>(), scales.data<float>(), scheme);
}

void dequantize_(const Tensor& out, const Tensor& codes, const Tensor& scales, int bits, int64_t block) {
  check_tensors("dequantize_", out, codes, scales, bits, block);
  if (!out.device().is_cpu()) return backend_of(out).dequantize(out, codes, scales, bits, block);
  dequantize_blocks(codes.data<uint8_t>(), scales.data<float>(), out.numel(), bits, block, out.data<float>());
}

}  // namespace zt
