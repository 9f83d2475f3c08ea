// defines: 1 Catch2 test case tagged [cuda_device]
//
// The device the GPU tests run on: detected, supported, and usable (a round trip through its
// memory).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/check.h"
#include "cuda/device.h"

using namespace zt;

TEST_CASE("the CUDA device is detected and holds memory", "[cuda_device]") {
  REQUIRE(cuda_available());
  const CudaDevice& d = cuda_devices().front();
  CHECK(d.major >= 8);
  CHECK(d.total_memory > (size_t(1) << 30));
  std::vector<float> host(1000), back(1000, -1.0f);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * static_cast<float>(i);
  void* p = nullptr;
  ZT_CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(float)));
  ZT_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  ZT_CUDA_CHECK(cudaMemcpy(back.data(), p, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  ZT_CUDA_CHECK(cudaFree(p));
  CHECK(back == host);
  auto bad_copy = [&] { ZT_CUDA_CHECK(cudaMemcpy(nullptr, host.data(), 4, cudaMemcpyHostToDevice)); };
  CHECK_THROWS_WITH(bad_copy(),
                    Catch::Contains("cudaMemcpy") && Catch::Contains("cudaError"));
}
