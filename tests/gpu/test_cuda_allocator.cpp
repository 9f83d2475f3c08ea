// defines: 12 Catch2 test cases tagged [cuda_allocator]; helpers: StreamGate, to_host, all_equal
//
// The caching device allocator, streams and events, and pinned host memory, on a real GPU.
//
// Cross-stream cases must be deterministic, so no test relies on a kernel "taking long enough":
// a StreamGate enqueues a host function that blocks its stream until the test opens the gate.
// While a gate is closed, the test makes no call that may synchronize the device (cudaMalloc,
// cudaFree, cudaMemcpy), or it would wait for the gate forever; cached blocks are prepared
// beforehand so the allocations inside the gated section are cache hits.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/stream.h"

using namespace zt;
using Catch::Contains;

namespace {

constexpr size_t MiB = size_t(1) << 20;

// Blocks `stream` (everything queued on it after construction) until open(). The destructor
// opens the gate and waits for the stream, so a failing REQUIRE cannot leave the stream blocked
// on a dead object.
class StreamGate {
 public:
  explicit StreamGate(cudaStream_t s) : stream_(s) {
    ZT_CUDA_CHECK(cudaLaunchHostFunc(stream_, &StreamGate::wait, this));
  }
  ~StreamGate() {
    open();
    (void)cudaStreamSynchronize(stream_);
  }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  void open() { open_.store(true, std::memory_order_release); }

 private:
  // Runs on the CUDA runtime's callback thread; makes no CUDA call (host functions must not).
  static void CUDART_CB wait(void* self) {
    auto* g = static_cast<StreamGate*>(self);
    while (!g->open_.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cudaStream_t stream_;
  std::atomic<bool> open_{false};
};

std::vector<unsigned char> to_host(const void* d, size_t n) {
  std::vector<unsigned char> h(n);
  ZT_CUDA_CHECK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
  return h;
}

bool all_equal(const std::vector<unsigned char>& v, unsigned char x) {
  for (unsigned char b : v)
    if (b != x) return false;
  return true;
}

}  // namespace

TEST_CASE("cuda allocator size classes are 512 B up to 1 MiB and 2 MiB above", "[cuda_allocator]") {
  CHECK(CudaAllocator::round_size(0) == 0);
  CHECK(CudaAllocator::round_size(1) == 512);
  CHECK(CudaAllocator::round_size(512) == 512);
  CHECK(CudaAllocator::round_size(513) == 1024);
  CHECK(CudaAllocator::round_size(MiB) == MiB);
  CHECK(CudaAllocator::round_size(MiB + 1) == 2 * MiB);
  CHECK(CudaAllocator::round_size(3 * MiB) == 4 * MiB);
  CHECK(CudaAllocator::round_size(4 * MiB) == 4 * MiB);
}

TEST_CASE("cuda allocator reuses a freed block of the same size class on the same stream", "[cuda_allocator]") {
  CudaAllocator a(0);
  CudaStream s = CudaStream::create();
  CudaStream other = CudaStream::create();

  void* p = a.allocate(1000, Category::activations, s.get());  // class 1024
  REQUIRE(p != nullptr);
  CHECK(a.allocate(0, Category::activations, s.get()) == nullptr);
  a.deallocate(p, 1000, Category::activations);
  CHECK(a.cached_bytes() == 1024);
  CHECK(a.reserved_bytes() == 1024);

  void* q = a.allocate(900, Category::activations, s.get());  // same class: the cached block
  CHECK(q == p);
  CHECK(a.malloc_count() == 1);
  CHECK(a.cached_bytes() == 0);
  void* r = a.allocate(1100, Category::activations, s.get());  // class 1536: a new block
  CHECK(r != p);
  CHECK(a.malloc_count() == 2);
  a.deallocate(q, 900, Category::activations);

  // The cached block belongs to stream s: another stream gets a new one.
  void* t = a.allocate(1000, Category::activations, other.get());
  CHECK(t != p);
  CHECK(a.malloc_count() == 3);
  // allocate(bytes, c) takes the current stream.
  a.set_stream(s.get());
  CHECK(a.stream() == s.get());
  void* u = a.allocate(1000, Category::activations);
  CHECK(u == p);
  CHECK(a.malloc_count() == 3);

  for (void* x : {r, t, u}) {
    const size_t bytes = x == r ? 1100 : 1000;
    a.deallocate(x, bytes, Category::activations);
  }
  CHECK(a.stats().total() == 0);
  CHECK(a.cached_bytes() == 1024 + 1536 + 1024);
  CHECK(a.empty_cache() == 1024 + 1536 + 1024);
  CHECK(a.reserved_bytes() == 0);
}

TEST_CASE("cuda allocator counts size classes per category, current and peak", "[cuda_allocator]") {
  CudaAllocator a(0);
  void* p = a.allocate(1000, Category::params);    // 1024
  void* g = a.allocate(3 * MiB, Category::grads);  // 4 MiB
  void* o = a.allocate(100, Category::optim);      // 512
  MemoryStats st = a.stats();
  CHECK(st.cur(Category::params) == 1024);
  CHECK(st.cur(Category::grads) == int64_t(4 * MiB));
  CHECK(st.cur(Category::optim) == 512);
  CHECK(st.cur(Category::activations) == 0);
  CHECK(st.total() == int64_t(1024 + 4 * MiB + 512));
  CHECK(st.peak_total == st.total());

  a.deallocate(g, 3 * MiB, Category::grads);
  st = a.stats();
  CHECK(st.cur(Category::grads) == 0);
  CHECK(st.max(Category::grads) == int64_t(4 * MiB));
  CHECK(st.total() == 1024 + 512);
  CHECK(st.peak_total == int64_t(1024 + 4 * MiB + 512));
  CHECK(a.cached_bytes() == 4 * MiB);
  CHECK(a.reserved_bytes() == 4 * MiB + 1024 + 512);
  CHECK_THAT(a.memory_report(), Contains("cuda:0") && Contains("cached 4.00 MiB"));

  // 3.5 MiB is the same 4 MiB class: a cache hit, counted as 4 MiB again.
  g = a.allocate(3 * MiB + MiB / 2, Category::grads);
  CHECK(a.malloc_count() == 3);
  CHECK(a.stats().cur(Category::grads) == int64_t(4 * MiB));

  // Freeing with the wrong size class or category is refused, and changes nothing.
  CHECK_THROWS_WITH(a.deallocate(g, 100, Category::grads), Contains("was allocated as"));
  CHECK_THROWS_WITH(a.deallocate(g, 3 * MiB, Category::optim), Contains("category 'grads'"));
  CHECK_THROWS_WITH(a.deallocate(reinterpret_cast<void*>(uintptr_t(0x1000)), 8, Category::grads),
                    Contains("not a block in use"));
  CHECK(a.stats().cur(Category::grads) == int64_t(4 * MiB));

  a.deallocate(g, 3 * MiB + MiB / 2, Category::grads);
  a.deallocate(p, 1000, Category::params);
  a.deallocate(o, 100, Category::optim);
  CHECK(a.stats().total() == 0);
  CHECK(a.stats().max(Category::params) == 1024);
  CHECK(a.cached_bytes() == a.reserved_bytes());
  CHECK(a.empty_cache() == 4 * MiB + 1024 + 512);
  CHECK(a.cached_bytes() == 0);
  CHECK(a.reserved_bytes() == 0);
}

TEST_CASE("cuda allocator cap throws OutOfMemory naming the category", "[cuda_allocator]") {
  CudaAllocator a(0);
  a.set_limit(int64_t(4 * MiB));
  void* p = a.allocate(3 * MiB, Category::params);  // counted as its class, 4 MiB: at the cap
  CHECK_THROWS_AS(a.allocate(100, Category::grads), OutOfMemory);
  CHECK_THROWS_WITH(a.allocate(100, Category::grads),
                    Contains("cuda:0") && Contains("'grads'") && Contains("limit") && Contains("params 4.00 MiB"));
  CHECK(a.stats().cur(Category::grads) == 0);
  CHECK(a.malloc_count() == 1);

  // Under the cap the device footprint stays near it: the 4 MiB cached block goes back to the
  // driver before a new cudaMalloc would pass the cap.
  a.deallocate(p, 3 * MiB, Category::params);
  CHECK(a.cached_bytes() == 4 * MiB);
  void* q = a.allocate(100, Category::grads);
  CHECK(a.cached_bytes() == 0);
  CHECK(a.reserved_bytes() == 512);
  a.deallocate(q, 100, Category::grads);
  a.empty_cache();
}

TEST_CASE("cuda allocator empties its cache and retries when cudaMalloc fails, then names the category",
          "[cuda_allocator]") {
  CudaAllocator a(0);
  void* w = a.allocate(2 * MiB, Category::workspace);
  a.deallocate(w, 2 * MiB, Category::workspace);
  REQUIRE(a.cached_bytes() == 2 * MiB);

  const size_t huge = size_t(1) << 40;  // 1 TiB: more than any GPU holds
  std::string message;
  try {
    a.allocate(huge, Category::activations);
  } catch (const OutOfMemory& e) {
    message = e.what();
  }
  CHECK_THAT(message, Contains("cuda:0") && Contains("'activations'") && Contains("cudaMalloc") &&
                          Contains("cudaErrorMemoryAllocation") && Contains("emptying the cache") &&
                          Contains("held 2.00 MiB"));
  CHECK(a.cached_bytes() == 0);  // the retry emptied it
  CHECK(a.reserved_bytes() == 0);
  CHECK(a.stats().total() == 0);  // nothing stays counted for the failed request

  // The failure leaves no error behind: the device works on.
  void* p = a.allocate(1000, Category::workspace);
  REQUIRE(p != nullptr);
  ZT_CUDA_CHECK(cudaMemset(p, 3, 1000));
  CHECK(all_equal(to_host(p, 1000), 3));
  ZT_CUDA_CHECK(cudaGetLastError());
  a.deallocate(p, 1000, Category::workspace);
}

TEST_CASE("cuda allocator does not hand out a block another stream still uses", "[cuda_allocator]") {
  CudaAllocator a(0);
  CudaStream A = CudaStream::create();
  CudaStream B = CudaStream::create();
  const size_t n = 64 * 1024;  // exactly a small size class

  // A second block of the same class cached on A, so the gated section makes no cudaMalloc.
  void* spare = a.allocate(n, Category::activations, A.get());
  void* p = a.allocate(n, Category::activations, A.get());
  a.deallocate(spare, n, Category::activations);
  REQUIRE(a.malloc_count() == 2);

  void* q = nullptr;
  {
    StreamGate gate(B.get());  // B is stopped here until gate.open()
    ZT_CUDA_CHECK(cudaMemsetAsync(p, 0x5A, n, B.get()));  // B writes p, once the gate opens
    a.record_stream(p, B.get());
    a.record_stream(p, A.get());  // its own stream: a no-op
    a.deallocate(p, n, Category::activations);
    CHECK(a.pending_blocks() == 1);
    CHECK(a.stats().cur(Category::activations) == 0);  // both freed: pending bytes count as cached
    CHECK(a.cached_bytes() == 2 * n);

    q = a.allocate(n, Category::activations, A.get());
    CHECK(q == spare);  // never p: B's write to it has not even started
    CHECK(q != p);
    CHECK(a.pending_blocks() == 1);
    CHECK(a.malloc_count() == 2);

    gate.open();
    B.synchronize();
  }
  // B is past the event recorded at free time: p joins A's free list at the next allocation.
  void* r = a.allocate(n, Category::activations, A.get());
  CHECK(r == p);
  CHECK(a.pending_blocks() == 0);
  CHECK(a.malloc_count() == 2);
  CHECK(all_equal(to_host(r, n), 0x5A));  // B's write landed before the block came back

  a.deallocate(q, n, Category::activations);
  a.deallocate(r, n, Category::activations);
  CHECK_THROWS_WITH(a.record_stream(r, B.get()), Contains("not a block in use"));
  CHECK(a.empty_cache() == 2 * n);
}

TEST_CASE("cuda allocator empty_cache waits for pending blocks and releases every cached byte",
          "[cuda_allocator]") {
  CudaAllocator a(0);
  CudaStream A = CudaStream::create();
  CudaStream B = CudaStream::create();
  void* x = a.allocate(5 * MiB, Category::optim, A.get());
  void* y = a.allocate(700, Category::comm, A.get());
  void* z = a.allocate(700, Category::comm, A.get());
  ZT_CUDA_CHECK(cudaMemsetAsync(x, 1, 5 * MiB, B.get()));
  a.record_stream(x, B.get());
  a.deallocate(x, 5 * MiB, Category::optim);
  a.deallocate(y, 700, Category::comm);
  CHECK(a.cached_bytes() == 6 * MiB + 1024);
  CHECK(a.reserved_bytes() == 6 * MiB + 1024 + 1024);

  CHECK(a.empty_cache() == 6 * MiB + 1024);
  CHECK(a.cached_bytes() == 0);
  CHECK(a.pending_blocks() == 0);
  CHECK(a.reserved_bytes() == 1024);  // z, still in use, is untouched
  ZT_CUDA_CHECK(cudaMemset(z, 9, 700));
  CHECK(all_equal(to_host(z, 700), 9));
  a.deallocate(z, 700, Category::comm);
  CHECK(a.empty_cache() == 1024);
  CHECK(a.reserved_bytes() == 0);
}

TEST_CASE("cuda allocator memory round-trips and backs tensors", "[cuda_allocator]") {
  CudaAllocator& a = cuda_allocator(0);
  CHECK(&a == &cuda_allocator());
  CHECK(std::string(a.name()) == "cuda:0");
  CHECK_THROWS_WITH(cuda_allocator(99), Contains("cuda_allocator(99)") && Contains("no such device"));

  const int64_t before = a.stats().cur(Category::activations);
  std::vector<float> host(10000), back(10000, -1.0f);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.25f * static_cast<float>(i) - 7.0f;
  const size_t bytes = host.size() * sizeof(float);
  void* d = a.allocate(bytes, Category::activations);
  ZT_CUDA_CHECK(cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice));
  ZT_CUDA_CHECK(cudaMemcpy(back.data(), d, bytes, cudaMemcpyDeviceToHost));
  CHECK(back == host);
  CHECK(a.stats().cur(Category::activations) == before + int64_t(CudaAllocator::round_size(bytes)));
  a.deallocate(d, bytes, Category::activations);
  CHECK(a.stats().cur(Category::activations) == before);

  {  // a Storage on the device: counted while the tensor lives, released with it
    Tensor t = Tensor::empty({256, 300}, DType::f32, Category::activations, a);
    CHECK(a.stats().cur(Category::activations) == before + int64_t(CudaAllocator::round_size(256 * 300 * 4)));
    ZT_CUDA_CHECK(cudaMemset(t.raw(), 0, 256 * 300 * 4));
  }
  CHECK(a.stats().cur(Category::activations) == before);
}

TEST_CASE("cuda allocator may be used from several threads", "[cuda_allocator]") {
  CudaAllocator a(0);
  auto work = [&a](int seed) {
    std::vector<std::pair<void*, size_t>> held;
    for (int i = 0; i < 200; ++i) {
      const size_t bytes = 256 + size_t((i * 7 + seed * 13) % 20) * 1000;
      held.emplace_back(a.allocate(bytes, Category::comm), bytes);
      if (i % 3 == 2) {
        for (auto& [p, b] : held) a.deallocate(p, b, Category::comm);
        held.clear();
      }
    }
    for (auto& [p, b] : held) a.deallocate(p, b, Category::comm);
  };
  std::thread t1(work, 1), t2(work, 2);
  work(3);
  t1.join();
  t2.join();
  CHECK(a.stats().total() == 0);
  CHECK(a.cached_bytes() == a.reserved_bytes());
  a.empty_cache();
  CHECK(a.reserved_bytes() == 0);
}

TEST_CASE("cuda streams and events order work without blocking the host", "[cuda_allocator]") {
  CudaStream s = CudaStream::create();
  CHECK(!s.is_default());
  CudaStream moved = std::move(s);
  CHECK(s.is_default());  // NOLINT(bugprone-use-after-move): a moved-from stream is the default one
  CHECK(!moved.is_default());
  CudaStream legacy = CudaStream::legacy_default();
  CHECK(legacy.get() == nullptr);
  legacy.synchronize();

  CudaAllocator a(0);
  const size_t n = 8 * MiB;
  void* d = a.allocate(n, Category::workspace, moved.get());

  // Timing events around a memset.
  CudaEvent start(true), end(true);
  CHECK(start.timing());
  start.record(moved.get());
  ZT_CUDA_CHECK(cudaMemsetAsync(d, 1, n, moved.get()));
  end.record(moved.get());
  end.synchronize();
  CHECK(end.query());
  CHECK(CudaEvent::elapsed_ms(start, end) >= 0.0f);
  CudaEvent plain;
  CHECK_FALSE(plain.timing());
  CHECK_THROWS_WITH(CudaEvent::elapsed_ms(plain, end), Contains("timing"));

  // wait_on: stream y waits for an event of stream x, which is held by a gate.
  CudaStream x = CudaStream::create(), y = CudaStream::create();
  CudaEvent ev;
  {
    StreamGate gate(x.get());
    ev.record(x.get());
    ev.wait_on(y.get());
    ZT_CUDA_CHECK(cudaMemsetAsync(d, 7, n, y.get()));
    CHECK_FALSE(ev.query());
    CHECK_FALSE(y.query());
    ZT_CUDA_CHECK(cudaGetLastError());  // "not ready" left no error behind
    gate.open();
    y.synchronize();
  }
  CHECK(ev.query());
  CHECK(y.query());
  CHECK(all_equal(to_host(d, n), 7));

  CudaEvent moved_ev = std::move(ev);
  CHECK(moved_ev.query());
  CHECK(ev.get() == nullptr);  // NOLINT(bugprone-use-after-move)
  a.deallocate(d, n, Category::workspace);
}

TEST_CASE("pinned host allocator gives page-locked memory, counted and capped", "[cuda_allocator]") {
  PinnedHostAllocator pa;
  CHECK(std::string(pa.name()) == "pinned");
  CHECK(&pinned_allocator() == &pinned_allocator());

  const size_t n = 1 << 18;  // floats: 1 MiB
  const size_t bytes = n * sizeof(float);
  auto* src = static_cast<float*>(pa.allocate(bytes, Category::comm));
  auto* dst = static_cast<float*>(pa.allocate(bytes, Category::comm));
  REQUIRE(src != nullptr);
  REQUIRE(dst != nullptr);
  CHECK(pa.allocate(0, Category::comm) == nullptr);
  cudaPointerAttributes attr{};
  ZT_CUDA_CHECK(cudaPointerGetAttributes(&attr, src));
  CHECK(attr.type == cudaMemoryTypeHost);
  // each block is 4096 bytes larger than asked, so the pointers are 4096-byte aligned (O_DIRECT)
  CHECK(pa.stats().cur(Category::comm) == int64_t(2 * (bytes + 4096)));
  CHECK(reinterpret_cast<uintptr_t>(src) % 4096 == 0);
  CHECK(reinterpret_cast<uintptr_t>(dst) % 4096 == 0);

  // Async copies host -> device -> host on a stream, as staging does.
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<float>(i % 1000) * 0.5f;
  CudaAllocator a(0);
  CudaStream s = CudaStream::create();
  void* d = a.allocate(bytes, Category::comm, s.get());
  ZT_CUDA_CHECK(cudaMemcpyAsync(d, src, bytes, cudaMemcpyHostToDevice, s.get()));
  ZT_CUDA_CHECK(cudaMemcpyAsync(dst, d, bytes, cudaMemcpyDeviceToHost, s.get()));
  s.synchronize();
  bool same = true;
  for (size_t i = 0; i < n; ++i) same = same && dst[i] == src[i];
  CHECK(same);
  a.deallocate(d, bytes, Category::comm);

  pa.set_limit(int64_t(2 * (bytes + 4096) + bytes / 2));
  CHECK_THROWS_AS(pa.allocate(bytes, Category::optim), OutOfMemory);
  CHECK_THROWS_WITH(pa.allocate(bytes, Category::optim), Contains("pinned") && Contains("'optim'"));
  pa.deallocate(src, bytes, Category::comm);
  pa.deallocate(dst, bytes, Category::comm);
  CHECK(pa.stats().total() == 0);
  CHECK(pa.stats().max(Category::comm) == int64_t(2 * (bytes + 4096)));

  // small blocks too: cudaHostAlloc gave one of 120 KiB at 1024 mod 4096 on an H100 machine
  for (size_t small : {size_t(1), size_t(1000), size_t(122880)}) {
    void* q = pa.allocate(small, Category::comm);
    CHECK(reinterpret_cast<uintptr_t>(q) % 4096 == 0);
    static_cast<char*>(q)[small - 1] = 1;  // the whole request is usable
    pa.deallocate(q, small, Category::comm);
  }
  CHECK(pa.stats().total() == 0);
}

TEST_CASE("pinned host allocator caches freed blocks by size, and returns them under the cap", "[cuda_allocator]") {
  PinnedHostAllocator pa;
  const size_t bytes = size_t{1} << 20, block = bytes + 4096;
  void* a = pa.allocate(bytes, Category::comm);
  pa.deallocate(a, bytes, Category::comm);
  CHECK(pa.stats().total() == 0);  // the counters hold what is in use
  CHECK(pa.cached_bytes() == int64_t(block));
  void* again = pa.allocate(bytes - 100, Category::optim);  // the same rounded block, any category
  CHECK(again == a);
  CHECK(pa.cached_bytes() == 0);
  CHECK(pa.stats().cur(Category::optim) == int64_t(block));
  void* other = pa.allocate(bytes / 2, Category::comm);  // another size: a new block
  CHECK(other != a);
  pa.deallocate(again, bytes - 100, Category::optim);
  pa.deallocate(other, bytes / 2, Category::comm);
  CHECK(pa.cached_bytes() == int64_t(block + bytes / 2 + 4096));
  pa.empty_cache();
  CHECK(pa.cached_bytes() == 0);

  // Under a cap, a new block that would not fit beside the cached ones empties the cache first.
  void* c = pa.allocate(bytes, Category::comm);
  pa.deallocate(c, bytes, Category::comm);
  pa.set_limit(int64_t(block + bytes / 4));
  void* d = pa.allocate(bytes / 2, Category::comm);  // in use 0.5 MiB + cached 1 MiB > the cap
  CHECK(pa.cached_bytes() == 0);
  pa.deallocate(d, bytes / 2, Category::comm);
  pa.empty_cache();
}
