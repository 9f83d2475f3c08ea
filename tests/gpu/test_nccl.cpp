// The NCCL process group on the GPUs of this machine. With one GPU the group has one rank
// (bootstrapped by a SingleProcessGroup): the collectives are identities that still go through
// NCCL, the streams, the events and the host staging. Multi-GPU runs (one rank per GPU under
// mpirun) are tests/gpu's zero tests' job once a machine with several GPUs is lent.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/check.h"
#include "dist/nccl/nccl_process_group.h"

using namespace zt;

namespace {
// n float32 on the device, filled from `host`; freed at scope exit.
struct DeviceFloats {
  void* p = nullptr;
  int64_t n = 0;
  explicit DeviceFloats(const std::vector<float>& host) : n(static_cast<int64_t>(host.size())) {
    ZT_CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(float)));
    ZT_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceFloats() { cudaFree(p); }
  Tensor tensor() const { return Tensor::borrow(p, {n}, DType::f32); }
  std::vector<float> read() const {
    std::vector<float> h(static_cast<size_t>(n));
    ZT_CUDA_CHECK(cudaMemcpy(h.data(), p, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
};
}  // namespace

TEST_CASE("NCCL group of one rank: collectives, host staging, byte counters", "[nccl]") {
  SingleProcessGroup boot;
  NcclProcessGroup g(boot, 0);
  CHECK(g.backend() == "nccl");
  CHECK(g.size() == 1);
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
  DeviceFloats x(v);
  g.all_reduce(x.tensor());
  CHECK(x.read() == v);
  DeviceFloats out(std::vector<float>(v.size(), -7.0f));
  g.reduce_scatter(x.tensor(), out.tensor());
  CHECK(out.read() == v);
  DeviceFloats gathered(std::vector<float>(v.size(), -7.0f));
  g.all_gather(out.tensor(), gathered.tensor());
  CHECK(gathered.read() == v);
  g.broadcast(x.tensor(), 0);
  g.barrier();
  // a host tensor goes through a device copy and comes back
  CHECK(g.all_reduce_sum(2.5) == 2.5);
  Tensor host = Tensor::from_vector({1.0, 2.0, 3.0}, {3}, DType::bf16, Category::comm);
  g.all_reduce(host);
  CHECK(host.to_vector() == std::vector<double>{1.0, 2.0, 3.0});
  CHECK(g.counters().total() == 0);  // one rank moves nothing (ring convention)
}
