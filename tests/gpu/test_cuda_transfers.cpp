// defines: 4 Catch2 test cases tagged [cuda_transfers]
//
// CudaBackend's copies between host memory and the device on its transfer streams
// (copy_from_host_async, copy_to_host_async; cuda/backend.cpp): each lands after the compute
// queued before it (and after a given device event), is done when its wait() returns, and leaves
// the compute queued after it running beside it; from and into pageable memory they are the
// synchronous copies. Compared bitwise with the source (copies are bits). And host_waits(): the
// host's waits for the compute stream, counted and timed.
#include <catch2/catch.hpp>

#include <cstring>

#include "core/backend.h"
#include "core/tensor.h"
#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "tests/gpu/backend_compare.h"  // gpu, cpu, values, host, device_empty

using namespace zt;
using namespace zt::test;

TEST_CASE(
    "cuda backend: copy_from_host_async lands after the compute queued before it, from pinned and pageable memory",
    "[cuda_transfers]") {
  Backend& g = gpu();
  const int64_t n = (int64_t{1} << 22) + 3;  // 16 MiB and an odd tail: the copy takes a while
  const Tensor want = host(values(n, 21, DType::f32), {n});
  for (bool pinned : {true, false}) {
    CAPTURE(pinned);
    Tensor src = Tensor::empty({n}, DType::f32, Category::comm, g.host_allocator(pinned));
    src.copy_(want);
    Tensor dst = device_empty({n}, DType::f32);
    // Queued on the compute stream before the copy: it must not land after the copy (the copy
    // waits for it), and an op queued after the transfer's wait sees the copied values.
    for (int k = 0; k < 20; ++k) g.fill(dst, -1.0 - k);
    TransferPtr t = g.copy_from_host_async(dst, src);
    t->wait();
    Tensor twice = device_empty({n}, DType::f32);
    g.copy(twice, dst);
    g.accumulate(twice, dst, 1.0);  // 2 x src, on the compute stream
    const Tensor back = dst.to(Device::cpu()), back2 = twice.to(Device::cpu());
    CHECK(std::memcmp(back.raw(), want.raw(), want.nbytes()) == 0);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += back2.data<float>()[i] != 2.0f * want.data<float>()[i];
    CHECK(bad == 0);
  }
  // Dropped without wait(), holding the last reference to its page-locked source: the block goes
  // back to the pinned allocator's cache only after the copy read it, so the next buffer of that
  // size (the same block) may be written at once.
  {
    Tensor dst = device_empty({n}, DType::f32);
    for (int k = 0; k < 20; ++k) g.fill(dst, -1.0 - k);  // the copy queues behind these
    {
      Tensor src = Tensor::empty({n}, DType::f32, Category::comm, g.host_allocator(true));
      src.copy_(want);
      TransferPtr t = g.copy_from_host_async(dst, src);
    }
    Tensor next = Tensor::empty({n}, DType::f32, Category::comm, g.host_allocator(true));
    std::memset(next.raw(), 0, next.nbytes());
    const Tensor back = dst.to(Device::cpu());
    CHECK(std::memcmp(back.raw(), want.raw(), want.nbytes()) == 0);
  }
  // Its checks are copy_from_host's.
  Tensor pinned = Tensor::empty({999}, DType::f32, Category::comm, g.host_allocator(true));
  CHECK_THROWS_WITH(g.copy_from_host_async(device_empty({1000}, DType::f32), pinned),
                    Catch::Contains("same dtype and number"));
}

TEST_CASE("cuda backend: copy_to_host_async reads what the compute queued before it, into pinned and pageable memory",
          "[cuda_transfers]") {
  Backend& g = gpu();
  const int64_t n = (int64_t{1} << 22) + 3;
  const Tensor want = host(values(n, 23, DType::f32), {n});
  const Tensor src0 = want.to(Device::cuda(0));
  for (bool pinned : {true, false}) {
    CAPTURE(pinned);
    CHECK(g.copies_to_host_async(Tensor::empty({n}, DType::f32, Category::comm, g.host_allocator(pinned))) == pinned);
    Tensor dst = Tensor::empty({n}, DType::f32, Category::comm, g.host_allocator(pinned));
    dst.fill_(-7.0);
    // Queued before the copy, on the compute stream: the copy must read its result, not src's
    // earlier values. Queued after it (on another buffer: src may not be written before wait()):
    // runs beside the copy and lands too.
    Tensor src = device_empty({n}, DType::f32), other = device_empty({n}, DType::f32);
    for (int k = 0; k < 20; ++k) g.fill(src, -1.0 - k);
    g.copy(src, src0);
    TransferPtr t = g.copy_to_host_async(dst, src);
    for (int k = 0; k < 20; ++k) g.fill(other, 3.0 + k);
    t->wait();
    CHECK(std::memcmp(dst.raw(), want.raw(), want.nbytes()) == 0);
    const Tensor after = other.to(Device::cpu());
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += after.data<float>()[i] != 22.0f ? 1 : 0;
    CHECK(bad == 0);
  }
  // Dropped without wait(): the device buffer it holds goes back to the allocator behind the copy
  // (the compute stream waits for it), so a buffer made next and filled does not change what lands.
  {
    Tensor dst = Tensor::empty({n}, DType::f32, Category::comm, g.host_allocator(true));
    {
      Tensor src = device_empty({n}, DType::f32);
      g.copy(src, src0);
      TransferPtr t = g.copy_to_host_async(dst, src);
    }
    Tensor reuse = device_empty({n}, DType::f32);
    g.fill(reuse, 5.0);
    g.synchronize();
    CHECK(std::memcmp(dst.raw(), want.raw(), want.nbytes()) == 0);
  }
  // Its checks are copy_to_host's.
  Tensor pinned = Tensor::empty({999}, DType::f32, Category::comm, g.host_allocator(true));
  CHECK_THROWS_WITH(g.copy_to_host_async(pinned, device_empty({1000}, DType::f32)),
                    Catch::Contains("same dtype and number"));
}

TEST_CASE("cuda backend: copy_to_host_async after a device event reads what another stream wrote", "[cuda_transfers]") {
  CudaBackend& g = dynamic_cast<CudaBackend&>(gpu());
  const int64_t n = (int64_t{1} << 22) + 3;
  const Tensor want = host(values(n, 29, DType::f32), {n});
  const Tensor src0 = want.to(Device::cuda(0));
  Tensor src = device_empty({n}, DType::f32);
  g.fill(src, 0.0);
  g.synchronize();
  // src written on a stream of its own, as NCCL's collectives write their outputs: the copy must
  // wait for the event recorded there, not only for the compute stream.
  CudaStream side = CudaStream::create();
  for (int k = 0; k < 20; ++k) ZT_CUDA_CHECK(cudaMemsetAsync(src.raw(), 0, src.nbytes(), side.get()));
  ZT_CUDA_CHECK(cudaMemcpyAsync(src.raw(), src0.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, side.get()));
  CudaDeviceEvent written;
  written.event.record(side.get());
  for (bool pinned : {true, false}) {
    CAPTURE(pinned);
    Tensor dst = Tensor::empty({n}, DType::f32, Category::comm, g.host_allocator(pinned));
    g.copy_to_host_async(dst, src, &written)->wait();
    CHECK(std::memcmp(dst.raw(), want.raw(), want.nbytes()) == 0);
  }
  side.synchronize();
  // the CPU has no device events, and the GPU takes only its own
  struct Foreign final : DeviceEvent {};
  Foreign foreign;
  Tensor h = Tensor::empty({n}, DType::f32);
  CHECK_THROWS_WITH(cpu().copy_to_host_async(h, want, &written), Catch::Contains("has no device events"));
  CHECK_THROWS_WITH(g.copy_to_host_async(h, src, &foreign), Catch::Contains("not a CUDA event"));
}

TEST_CASE("cuda backend: host_waits counts and times the host's waits for the compute stream", "[cuda_transfers]") {
  auto& g = dynamic_cast<CudaBackend&>(gpu());
  const int64_t n = int64_t{1} << 22;
  Tensor x = device_empty({n}, DType::f32);
  Tensor back = Tensor::empty({n}, DType::f32, Category::comm, cpu_allocator());
  g.synchronize();
  const CudaBackend::HostWaits w0 = g.host_waits();
  for (int k = 0; k < 50; ++k) g.fill(x, 1.0 + k);  // queued: nothing waits yet
  CHECK(g.host_waits().count == w0.count);
  g.synchronize();            // one wait, for the 50 fills
  g.copy_to_host(back, x);    // one more
  (void)g.sum_of_squares(x);  // and one: it returns a host value
  const CudaBackend::HostWaits w1 = g.host_waits();
  CHECK(w1.count == w0.count + 3);
  CHECK(w1.seconds > w0.seconds);
  CHECK(back.data<float>()[n - 1] == 50.0f);
}
