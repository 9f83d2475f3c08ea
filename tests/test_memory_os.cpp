// defines: 4 Catch2 test cases tagged [memory]; helpers: mapped
//
// What the operating system sees of our memory: large model-state blocks go back to the OS when
// freed (core/memory.h's CpuAllocator: mmap / munmap from kMapBytes on), and a CUDA build does not map
// cuBLASLt until a GEMM on a GPU asks for it (cuda/cublaslt_api.h). Both were found measuring
// peak RSS (bench/results/rss.md). Each TEST_CASE runs in its own process under CTest.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/tensor.h"
#include "tests/skip.h"  // defines: ZT_SKIP
#ifdef ZT_HAVE_CUDA
#include "cuda/cublaslt_api.h"
#endif

using namespace zt;

namespace {

int64_t resident_bytes() {  // /proc/self/statm: size resident ... (pages)
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

#ifdef ZT_HAVE_CUDA
bool mapped(const std::string& needle) {
  std::ifstream f("/proc/self/maps");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str().find(needle) != std::string::npos;
}
#endif

}  // namespace

TEST_CASE("a large model-state block leaves the resident set when it is freed", "[memory]") {
  // First make the C library keep such blocks: glibc raises its mmap threshold to the size of a
  // freed mapping (here 30 MiB), after which a 16 MiB malloc comes from its heap and stays
  // resident when freed. Our allocator maps a gradient block itself, so it goes back.
  void* q = std::malloc(size_t{30} << 20);
  REQUIRE(q != nullptr);
  static_cast<volatile char*>(q)[0] = 1;
  std::free(q);
  const int64_t n = (int64_t{16} << 20) / 4;  // 16 MiB of float32, above kMapBytes
  const int64_t before = resident_bytes();
  {
    Tensor t = Tensor::empty({n}, DType::f32, Category::grads, cpu_allocator());
    float* p = t.data<float>();
    for (int64_t i = 0; i < n; i += 1024) p[i] = 1.0f;  // touch every page
    const int64_t held = resident_bytes();
    INFO("resident before " << before << ", while held " << held);
    CHECK(held - before >= (int64_t{15} << 20));
    CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  }
  const int64_t after = resident_bytes();
  INFO("resident before " << before << ", after the free " << after);
  // The 16 MiB are gone: less than a quarter of them stays. (Not less than 2 MiB: in the
  // sanitizer build ASan's shadow of the mapping, 1/8 of it, may stay resident, and it did once,
  // at 2.4 MiB on a loaded machine.)
  CHECK(after - before < (int64_t{4} << 20));
}

// Under AddressSanitizer its allocator quarantines freed blocks: a page-fault count says nothing.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

TEST_CASE("freed activations are reused without a page fault", "[memory]") {
  // A step's activations, freed at its end and allocated again by the next step, come back from
  // the C library's heap (core/memory.h: glibc told to keep what is freed) without new pages.
  // What it guards: the two settings go together. Told never to trim alone, glibc stops raising
  // its mmap threshold, and every block here (256 KiB) is a mapping of its own: 6144 faults a
  // step. glibc's default trimming itself shows with the training step's pattern (the A/B in
  // core/memory.h: ~6k faults a gpt-mini step), not with this one.
  if (kAsan) ZT_SKIP("AddressSanitizer's allocator quarantines freed blocks");
  cpu_allocator();  // constructed: the C library's heap told to keep what is freed
  auto minor_faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<int64_t>(u.ru_minflt);
  };
  // A step: a forward that allocates blocks of 256 KiB (24 MiB in all), and a backward that frees
  // them last first, as autograd does.
  auto step = [] {
    std::vector<Tensor> acts;
    int64_t pages = 0;
    for (int i = 0; pages < 6144; ++i) {
      const int64_t n = int64_t{1} << 16;  // float32: 256 KiB
      acts.push_back(Tensor::empty({n}, DType::f32, Category::activations, cpu_allocator()));
      float* p = acts.back().data<float>();
      for (int64_t k = 0; k < n; k += 1024) p[k] = 1.0f;  // touch every page
      pages += n / 1024;
    }
    while (!acts.empty()) acts.pop_back();
  };
  // The heap reaches its steady layout in a few steps (aligned_alloc's small remainders sit between
  // the blocks at first; seen with blocks of 1 MiB); then a step takes no new memory.
  for (int i = 0; i < 4; ++i) step();
  const int64_t before = minor_faults();
  step();
  const int64_t faults = minor_faults() - before;
  INFO("minor page faults in a step of 24 MiB of activations: " << faults << " (6144 pages)");
  CHECK(faults < 256);
}

TEST_CASE("small and large CPU blocks keep the allocator's alignment and accounting", "[memory]") {
  CpuAllocator host("host-test", 4096);
  for (size_t bytes : {size_t{1}, size_t{4095}, CpuAllocator::kMapBytes - 1, CpuAllocator::kMapBytes,
                       CpuAllocator::kMapBytes + 1}) {
    void* p = host.allocate(bytes, Category::optim);
    CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
    static_cast<char*>(p)[bytes - 1] = 1;
    CHECK(host.stats().cur(Category::optim) == static_cast<int64_t>(bytes));
    host.deallocate(p, bytes, Category::optim);
    CHECK(host.stats().cur(Category::optim) == 0);
  }
  CHECK_THROWS_WITH(CpuAllocator("odd", 48), Catch::Contains("alignment 48"));
}

#ifdef ZT_HAVE_CUDA
TEST_CASE("cuBLASLt is mapped only once a GPU GEMM asks for it", "[memory]") {
  CHECK_FALSE(mapped("libcublasLt"));  // linked at build time it would be here from the start
  const CublasLtApi& lt = cublaslt();  // dlopen needs no GPU, only the library
  CHECK(mapped(cublaslt_library_name()));
  for (const void* fn : {reinterpret_cast<const void*>(lt.Create), reinterpret_cast<const void*>(lt.Matmul),
                         reinterpret_cast<const void*>(lt.MatmulAlgoGetHeuristic),
                         reinterpret_cast<const void*>(lt.MatrixLayoutSetAttribute)})
    CHECK(fn != nullptr);
  CHECK(std::string(lt.GetStatusName(CUBLAS_STATUS_SUCCESS)) == "CUBLAS_STATUS_SUCCESS");
}
#endif
