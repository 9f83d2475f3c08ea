// defines: 1 Catch2 test case tagged [gpu_buffers]; helpers: device_tensor, read
//
// The MPI backend with GPU buffers (CUDA builds): device tensors are staged through pinned host
// memory, so several ranks can share one GPU. Registered by tests/gpu/tests.cmake as a `gpu`
// test that is skipped (exit 77 from tests/gpu/run_mpi.sh) where no GPU is usable; without CUDA
// the file is empty.
#ifdef ZT_HAVE_CUDA
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/allocator.h"
#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "dist/process_group.h"

using namespace zt;

namespace {
Tensor device_tensor(const std::vector<float>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::f32, Category::comm, cuda_allocator());
  ZT_CUDA_CHECK(cudaMemcpy(t.raw(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return t;
}
std::vector<float> read(const Tensor& t) {
  std::vector<float> h(static_cast<size_t>(t.numel()));
  ZT_CUDA_CHECK(cudaMemcpy(h.data(), t.raw(), t.nbytes(), cudaMemcpyDeviceToHost));
  return h;
}
}  // namespace

TEST_CASE("MPI collectives on device buffers: all_reduce, reduce_scatter, in-place all_gather", "[gpu_buffers]") {
  REQUIRE(cuda_available());
  // The MPI backend stages device buffers through their device's backend (core/backend.h; dist/
  // names no device), as zt-train --device cuda registers it (train/launch/run_device.cpp).
  register_cuda_backend();
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const int64_t S = 257;
  std::vector<float> mine(static_cast<size_t>(N * S));
  for (int64_t i = 0; i < N * S; ++i) mine[i] = static_cast<float>(r * 1000 + i % 97);
  Tensor x = device_tensor(mine);
  g.all_reduce(x);
  const std::vector<float> sum = read(x);
  for (int64_t i = 0; i < N * S; ++i) {
    float want = 0;
    for (int q = 0; q < N; ++q) want += static_cast<float>(q * 1000 + i % 97);
    REQUIRE(sum[i] == want);
  }
  Tensor in = device_tensor(mine), out = device_tensor(std::vector<float>(S, -1.0f));
  g.reduce_scatter(in, out);
  const std::vector<float> part = read(out);
  for (int64_t i = 0; i < S; ++i) REQUIRE(part[i] == sum[r * S + i]);
  // in place: this rank's shard already sits at [r*S, (r+1)*S) of the output
  Tensor full = device_tensor(std::vector<float>(static_cast<size_t>(N * S), 0.0f));
  ZT_CUDA_CHECK(cudaMemcpy(static_cast<float*>(full.raw()) + r * S, part.data(), S * sizeof(float), cudaMemcpyHostToDevice));
  g.all_gather(full.flat_view(r * S, {S}), full);
  CHECK(read(full) == sum);
}
#endif
