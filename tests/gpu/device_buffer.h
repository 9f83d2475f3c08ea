// defines: DeviceBuffer — raw cudaMalloc'd bytes for the GPU tests, freed at scope exit (the
//          tests' buffers bypass the caching allocator, so a bug there cannot hide a kernel's).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/check.h"

namespace zt::test {

struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t b) : bytes(b) { ZT_CUDA_CHECK(cudaMalloc(&p, b == 0 ? 1 : b)); }
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* at(size_t elem_offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(p) + elem_offset * sizeof(T));
  }
  void poison() const { ZT_CUDA_CHECK(cudaMemset(p, 0xFF, bytes)); }  // every byte 0xFF: NaN in f32/bf16/f16
};

}  // namespace zt::test
