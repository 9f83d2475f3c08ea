// defines: 6 Catch2 test cases tagged [nccl]; helpers: DeviceFloats
//
// The NCCL process group on the GPUs of this machine. With one GPU the group has one rank
// (bootstrapped by a SingleProcessGroup): the collectives are identities that still go through
// NCCL, the streams, the events and the host staging. Multi-GPU runs (one rank per GPU under
// mpirun) are tests/gpu's zero tests' job once a machine with several GPUs is lent.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda/check.h"
#include "core/backend.h"
#include "cuda/backend.h"
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
  Tensor tensor() const { return Tensor::borrow(p, {n}, DType::f32, Device::cuda(0)); }
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

// Without MPI, as under torchrun: the launcher's variables and the TCP rendezvous (one rank here:
// the rendezvous opens no socket; two ranks need two GPUs). Then the same collectives, an
// all-to-all and a split through ncclCommSplit.
TEST_CASE("NCCL group bootstrapped from launcher variables, all_to_all and split", "[nccl]") {
  LauncherRanks l;
  l.launcher = "torchrun";
  l.rank = 0, l.size = 1, l.node = 0;
  l.master_addr = "127.0.0.1", l.master_port = 29500;
  NcclProcessGroup g(l, 0);
  CHECK(g.size() == 1);
  CHECK_THAT(g.topology().source, Catch::Contains("TCP rendezvous"));
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 9.5f;
  DeviceFloats x(v), y(std::vector<float>(v.size(), -1.0f));
  g.all_to_all(x.tensor(), y.tensor());  // one rank: its one block comes back
  CHECK(y.read() == v);
  std::unique_ptr<ProcessGroup> sub = g.split(0, 0);
  REQUIRE(sub);
  CHECK(sub->backend() == "nccl");
  sub->all_reduce(x.tensor());
  CHECK(x.read() == v);
  CHECK(g.split(-1, 0) == nullptr);
  LauncherRanks none;
  CHECK_THROWS_WITH(NcclProcessGroup(none, 0), Catch::Contains("no RANK / WORLD_SIZE set"));
}

// gpu-preflight.md #1: zt-train --device cuda sets the default device before it builds the group,
// so a buffer the constructor makes without naming an allocator lands on the GPU, and the host
// loop that fills the unique id from it would fault. Built here the same way.
TEST_CASE("NCCL group built while the default device is the GPU", "[nccl]") {
  register_cuda_backend();
  DefaultDeviceScope gpu_default(Device::cuda(0));
  SingleProcessGroup boot;
  NcclProcessGroup g(boot, 0);
  CHECK(g.all_reduce_sum(1.5) == 1.5);  // a default-device (GPU) tensor through NCCL
  g.barrier();
}

// gpu-preflight.md #2: with one rank, reduce-scatter and all-gather are copies. At ZeRO stages 2-3
// on one GPU both sides are device buffers; the copy must not dereference them on the host.
TEST_CASE("one-rank group: reduce-scatter and all-gather of device buffers", "[nccl]") {
  register_cuda_backend();
  SingleProcessGroup g;
  std::vector<float> v(777);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 100.0f;
  DeviceFloats x(v);
  DeviceFloats shard(std::vector<float>(v.size(), -7.0f));
  g.reduce_scatter(x.tensor(), shard.tensor());
  CHECK(shard.read() == v);
  DeviceFloats full(std::vector<float>(v.size(), -7.0f));
  g.all_gather(shard.tensor(), full.tensor());
  CHECK(full.read() == v);
}

// gpu-preflight.md #4: a Work dropped without wait() must still order the compute stream after
// the collective (its buffers go back to the compute stream's free lists). Here: many dropped
// all-reduces on buffers the caching allocator hands out again at once, then a value check.
TEST_CASE("NCCL work dropped without wait: later work on the compute stream is ordered after it", "[nccl]") {
  register_cuda_backend();
  DefaultDeviceScope gpu_default(Device::cuda(0));
  auto& cb = static_cast<CudaBackend&>(backend(Device::cuda(0)));
  SingleProcessGroup boot;
  NcclProcessGroup g(boot, 0, cb.stream());
  for (int i = 0; i < 50; ++i) {
    Tensor t = Tensor::full({1 << 16}, static_cast<double>(i), DType::f32, Category::comm);
    (void)g.all_reduce_async(t);  // dropped at once, t freed while NCCL may still run
  }
  Tensor last = Tensor::full({1 << 16}, 7.0, DType::f32, Category::comm);
  g.all_reduce(last);
  const auto v = last.to_vector();
  CHECK(v.front() == 7.0);
  CHECK(v.back() == 7.0);
}

// The collective timeout of the NCCL backend: the compute stream held by a host function for 2 s,
// so the collective ordered after it cannot start; with a 0.5 s timeout the watchdog reports it
// (to a handler here: the default one aborts the communicator and ends the job), and a collective
// that finishes in time is not reported.
TEST_CASE("NCCL collective timeout: a collective held back past the timeout is reported", "[nccl]") {
  register_cuda_backend();
  auto& cb = static_cast<CudaBackend&>(backend(Device::cuda(0)));
  SingleProcessGroup boot;
  NcclProcessGroup g(boot, 0, cb.stream());
  std::mutex mu;
  std::vector<std::string> reports;
  g.set_timeout_handler([&](const std::string& r) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(r);
  });
  CHECK(g.set_collective_timeout(0.5));
  DeviceFloats x(std::vector<float>(16, 1.0f));  // before the hold: its copy must not wait behind it
  ZT_CUDA_CHECK(cudaLaunchHostFunc(
      cb.stream(), [](void*) { std::this_thread::sleep_for(std::chrono::seconds(2)); }, nullptr));
  {
    CommLabel label(g, "held");
    g.all_reduce(x.tensor());  // returns after the hold, about 2 s
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(!reports.empty());
    CHECK_THAT(reports[0],
               Catch::Contains("collective timeout: NCCL collective #1 all_reduce (held) has not completed in") &&
                   Catch::Contains("longer than collective_timeout_s = 0.5"));
    reports.clear();
  }
  g.all_reduce(x.tensor());
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  std::lock_guard<std::mutex> lock(mu);
  CHECK(reports.empty());
  CHECK(x.read() == std::vector<float>(16, 1.0f));
}
