// defines: 2 Catch2 test cases tagged [cuda_quantize]
//
// ZeRO++'s block quantization on the GPU (cuda/kernels/quantize.cu, through CudaBackend::quantize
// / dequantize) against the CPU's (core/kernels/quantize.h): the same bytes. The scale and the
// code are the same double divisions on both sides and the dequantized value the same float32
// product, so the codes, the scales' bits and the dequantized floats must be equal, exactly
// (a NaN scale compared as NaN). Sizes cover one element, an odd count (a half-filled last byte at
// 4 bits), odd blocks (two blocks sharing a byte at 4 bits) and more blocks than one launch row,
// in both rounding schemes (symmetric; DeepSpeed's, half to even into [-2^(b-1), 2^(b-1) - 1]).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/quantize.h"
#include "tests/gpu/backend_compare.h"  // gpu, values, host, host_empty, device_from

using namespace zt;
using namespace zt::test;

namespace {

// An uninitialized GPU tensor poisoned with a byte pattern (0xAB bytes, or NaN floats).
Tensor poisoned(int64_t n, DType t) {
  Backend& g = gpu();
  Tensor d = Tensor::empty({n}, t, Category::comm, g.allocator());
  g.fill(d, t == DType::u8 ? 171.0 : kNaN);
  return d;
}

template <class T> std::vector<T> to_host(const Tensor& d) {
  Tensor h = host_empty(d.shape(), d.dtype());
  h.copy_(d);
  const T* p = h.data<T>();
  return std::vector<T>(p, p + h.numel());
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

void compare(int64_t n, int bits, int64_t block, std::vector<double> v, QuantScheme scheme) {
  CAPTURE(n, bits, block, static_cast<int>(scheme));
  const Tensor x = host(v, {n});
  const int64_t cb = quantized_code_bytes(n, bits), nb = quantized_blocks(n, block);
  Tensor codes = host_empty({cb}, DType::u8), scales = host_empty({nb}), y = host_empty({n});
  quantize_(codes, scales, x, bits, block, scheme);
  dequantize_(y, codes, scales, bits, block);

  Tensor dcodes = poisoned(cb, DType::u8), dscales = poisoned(nb, DType::f32), dy = poisoned(n, DType::f32);
  quantize_(dcodes, dscales, device_from(x, DType::f32), bits, block, scheme);
  dequantize_(dy, dcodes, dscales, bits, block);

  const auto gc = to_host<uint8_t>(dcodes);
  const auto gs = to_host<float>(dscales);
  const auto gy = to_host<float>(dy);
  int64_t bad_codes = 0, bad_scales = 0, bad_values = 0;
  for (int64_t j = 0; j < cb; ++j) bad_codes += gc[j] != codes.data<uint8_t>()[j];
  for (int64_t b = 0; b < nb; ++b) bad_scales += !same_bits(gs[b], scales.data<float>()[b]);
  for (int64_t i = 0; i < n; ++i) bad_values += !same_bits(gy[i], y.data<float>()[i]);
  CHECK(bad_codes == 0);
  CHECK(bad_scales == 0);
  CHECK(bad_values == 0);
}

}  // namespace

TEST_CASE("cuda quantize: codes and scales and dequantized values are the cpu's bytes", "[cuda_quantize]") {
  for (QuantScheme scheme : {QuantScheme::symmetric, QuantScheme::deepspeed})
    for (int bits : {4, 8})
      for (int64_t block : {int64_t(1), int64_t(7), int64_t(256), kQuantBlockDefault})
        for (int64_t n : {int64_t(1), int64_t(37), int64_t(8193), int64_t(300001)})
          compare(n, bits, block, values(n, static_cast<uint32_t>(n + bits + block), DType::f32, 0.0, 3.0), scheme);
}

TEST_CASE("cuda quantize: a block with a NaN or infinity is NaN after the trip as on the cpu", "[cuda_quantize]") {
  for (int bits : {4, 8}) {
    std::vector<double> v = values(1000, 7, DType::f32);
    v[10] = std::nan("");
    v[500] = -INFINITY;
    compare(1000, bits, 64, v, QuantScheme::symmetric);
    compare(1000, bits, 64, v, QuantScheme::deepspeed);
  }
}
