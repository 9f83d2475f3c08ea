// defines: 8 Catch2 test cases tagged [aio]; helpers: AlignedBuf, fill_random, fnv1a, supports_odirect,
//          FileSizeLimit, file_size
//
// Tests of zero/aio.h: the NVMe tier's swap file (O_DIRECT, io_uring). Round trips through several
// block sizes and queue depths, alignment errors, a disk that fills (RLIMIT_FSIZE -> EFBIG; fallocate
// beyond the free space), directory errors, stale / live swap files, removal, stats; the dry mode
// (no file, no IO, the same books and checks).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "tests/skip.h"      // defines: ZT_SKIP
#include "tests/temp_dir.h"  // defines: zt::test::TempDir
#include "zero/aio.h"        // defines: SwapFile, kAioAlignment

using namespace zt;
namespace fs = std::filesystem;

namespace {

// A kAioAlignment-aligned host buffer (what host_allocator() gives the engine).
struct AlignedBuf {
  explicit AlignedBuf(int64_t n) : bytes(n) {
    p = static_cast<char*>(std::aligned_alloc(kAioAlignment, static_cast<size_t>(std::max<int64_t>(n, kAioAlignment))));
    if (p == nullptr) throw std::bad_alloc();  // no REQUIRE: also used from worker threads (Catch2 is not thread-safe)
  }
  ~AlignedBuf() { std::free(p); }
  AlignedBuf(const AlignedBuf&) = delete;
  char* p = nullptr;
  int64_t bytes;
};

void fill_random(char* p, int64_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  for (int64_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = g();
    std::memcpy(p + i, &v, 8);
  }
}

// FNV-1a, 64-bit (http://www.isthe.com/chongo/tech/comp/fnv/), over bytes.
uint64_t fnv1a(const char* p, int64_t n) {
  uint64_t h = 14695981039346656037ull;
  for (int64_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// True when `dir`'s filesystem accepts O_DIRECT (the tests need a disk-backed temp directory).
bool supports_odirect(const fs::path& dir) {
  const std::string probe = (dir / "odirect-probe").string();
  const int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  if (fd < 0) return false;
  void* b = std::aligned_alloc(kAioAlignment, kAioAlignment);
  std::memset(b, 0, kAioAlignment);
  const bool ok = ::pwrite(fd, b, kAioAlignment, 0) == kAioAlignment;
  std::free(b);
  ::close(fd);
  ::unlink(probe.c_str());
  return ok;
}

// A case that needs O_DIRECT is skipped (tests/skip.h) where the temp directory lacks it (tmpfs).
#define REQUIRE_ODIRECT(tmp)                                                                      \
  if (!supports_odirect((tmp).dir)) {                                                             \
    ZT_SKIP("the temp directory " << (tmp).dir                                                    \
                                  << " does not support O_DIRECT (set TMPDIR to a disk-backed directory)"); \
  }

// Sets RLIMIT_FSIZE and ignores SIGXFSZ (so an oversized write fails with EFBIG instead of killing
// the process); restores both at scope exit, also when a check fails.
struct FileSizeLimit {
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    old_handler = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old;
    lim.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
  }
  rlimit old{};
  sighandler_t old_handler{};
};

int64_t file_size(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

}  // namespace

TEST_CASE("aio round trip through several block sizes and queue depths", "[aio]") {
  test::TempDir tmp("aio_roundtrip");
  REQUIRE_ODIRECT(tmp);
  const int64_t MiB = 1 << 20;
  // Region sizes: together more than block_size x queue_depth of the largest setting (8 MiB), with
  // lengths that are not multiples of the block size.
  const std::vector<int64_t> sizes = {6 * MiB + 8192, 3 * MiB, 12288, 1 * MiB + 4096 * 5};
  struct Setting { int64_t block, depth; };
  for (Setting s : {Setting{1 << 20, 8}, Setting{8192, 1}, Setting{8192, 32}, Setting{65536 + 4096, 3}}) {
    INFO("block_size " << s.block << ", queue_depth " << s.depth);
    SwapFile f(tmp.dir.string(), 0, AioConfig{s.block, s.depth});
    std::vector<int64_t> offs;
    int64_t total = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      offs.push_back(f.reserve(sizes[i], i % 2 ? Category::optim : Category::params));
      total += sizes[i];
    }
    f.allocate();
    REQUIRE(file_size(f.path()) == f.reserved_bytes());
    std::vector<std::unique_ptr<AlignedBuf>> src, dst;
    std::vector<uint64_t> hashes;
    for (size_t i = 0; i < sizes.size(); ++i) {
      src.push_back(std::make_unique<AlignedBuf>(sizes[i]));
      dst.push_back(std::make_unique<AlignedBuf>(sizes[i]));
      fill_random(src[i]->p, sizes[i], 1000 + i);
      std::memset(dst[i]->p, 0xAB, static_cast<size_t>(sizes[i]));
      hashes.push_back(fnv1a(src[i]->p, sizes[i]));
    }
    // All writes in flight together, then all reads.
    std::vector<WorkPtr> w;
    for (size_t i = 0; i < sizes.size(); ++i) w.push_back(f.write_async(offs[i], src[i]->p, sizes[i]));
    for (auto& x : w) x->wait();
    CHECK(f.bytes_written() == total);
    w.clear();
    for (size_t i = 0; i < sizes.size(); ++i) w.push_back(f.read_async(offs[i], dst[i]->p, sizes[i]));
    for (auto& x : w) x->wait();
    CHECK(f.bytes_read() == total);
    for (size_t i = 0; i < sizes.size(); ++i) {
      CHECK(fnv1a(dst[i]->p, sizes[i]) == hashes[i]);
      CHECK(std::memcmp(dst[i]->p, src[i]->p, static_cast<size_t>(sizes[i])) == 0);
    }
    // A piece from the middle of region 0, and an overwrite of region 1 read back (no stale data).
    AlignedBuf part(2 * MiB);
    f.read_async(offs[0] + 3 * 4096, part.p, 2 * MiB)->wait();
    CHECK(std::memcmp(part.p, src[0]->p + 3 * 4096, 2 * MiB) == 0);
    fill_random(src[1]->p, sizes[1], 77);
    f.write_async(offs[1], src[1]->p, sizes[1])->wait();
    f.read_async(offs[1], dst[1]->p, sizes[1])->wait();
    CHECK(std::memcmp(dst[1]->p, src[1]->p, static_cast<size_t>(sizes[1])) == 0);
    CHECK(f.write_async(offs[2], src[2]->p, 0) != nullptr);  // zero bytes: already done
  }
}

TEST_CASE("aio requests from several threads at once", "[aio]") {
  test::TempDir tmp("aio_threads");
  REQUIRE_ODIRECT(tmp);
  SwapFile f(tmp.dir.string(), 0, AioConfig{16384, 4});
  const int n = 4;
  const int64_t bytes = 1 << 20;
  std::vector<int64_t> offs;
  for (int i = 0; i < n; ++i) offs.push_back(f.reserve(bytes, Category::params));
  f.allocate();
  std::vector<int> ok(n, 0);
  std::vector<std::thread> th;
  for (int i = 0; i < n; ++i)
    th.emplace_back([&, i] {
      AlignedBuf a(bytes), b(bytes);
      fill_random(a.p, bytes, 10 + i);
      for (int rep = 0; rep < 3; ++rep) {
        f.write_async(offs[i], a.p, bytes)->wait();
        f.read_async(offs[i], b.p, bytes)->wait();
      }
      ok[i] = std::memcmp(a.p, b.p, bytes) == 0;
    });
  for (auto& t : th) t.join();
  for (int i = 0; i < n; ++i) CHECK(ok[i] == 1);
  CHECK(f.bytes_written() == 3 * n * bytes);
}

TEST_CASE("aio refuses misaligned buffers offsets and lengths and bad settings", "[aio]") {
  test::TempDir tmp("aio_align");
  REQUIRE_ODIRECT(tmp);
  SwapFile f(tmp.dir.string(), 0, AioConfig{});
  const int64_t off = f.reserve(1 << 20, Category::params);
  AlignedBuf b(1 << 20);
  CHECK_THROWS_WITH(f.write_async(off, b.p + 512, 4096), Catch::Contains("misaligned") && Catch::Contains("buffer % 4096 = 512"));
  CHECK_THROWS_WITH(f.read_async(off + 100, b.p, 4096), Catch::Contains("misaligned") && Catch::Contains(f.path()));
  CHECK_THROWS_WITH(f.write_async(off, b.p, 1000), Catch::Contains("bytes % 4096 = 1000"));
  CHECK_THROWS_WITH(f.read_async(-4096, b.p, 4096), Catch::Contains(">= 0"));
  CHECK_THROWS_WITH(f.write_async(off + 4096, b.p, 1 << 20), Catch::Contains("past the reserved size"));
  CHECK_THROWS_WITH(SwapFile(tmp.dir.string(), 1, AioConfig{1000, 8}), Catch::Contains("aio.block_size = 1000"));
  CHECK_THROWS_WITH(SwapFile(tmp.dir.string(), 1, AioConfig{4096, 0}), Catch::Contains("aio.queue_depth = 0"));
  CHECK_THROWS_WITH(f.reserve(-1, Category::grads), Catch::Contains("reserve(-1 bytes)"));
}

TEST_CASE("aio disk full errors name the file and the sizes", "[aio]") {
  test::TempDir tmp("aio_full");
  REQUIRE_ODIRECT(tmp);
  const int64_t MiB = 1 << 20;
  SECTION("a write past RLIMIT_FSIZE fails with EFBIG, data before it is intact") {
    SwapFile f(tmp.dir.string(), 0, AioConfig{MiB, 4});
    const int64_t off = f.reserve(4 * MiB, Category::optim);  // not allocate()d: the writes grow the file
    AlignedBuf a(4 * MiB), b(MiB);
    fill_random(a.p, 4 * MiB, 5);
    {
      FileSizeLimit limit(static_cast<rlim_t>(MiB + MiB / 2));  // the second piece is cut short, then EFBIG
      WorkPtr w = f.write_async(off, a.p, 4 * MiB);
      CHECK_THROWS_WITH(w->wait(), Catch::Contains(f.path()) && Catch::Contains("EFBIG") &&
                                       Catch::Contains("write of") && Catch::Contains("at file offset"));
      CHECK_THROWS_WITH(w->wait(), Catch::Contains("EFBIG"));  // rethrown on every wait()
    }
    // The piece at 1 MiB was written short (to the limit), its remainder resubmitted and refused.
    CHECK(f.bytes_written() == MiB + MiB / 2);
    AlignedBuf c(MiB + MiB / 2);
    f.read_async(off, c.p, MiB + MiB / 2)->wait();
    CHECK(std::memcmp(a.p, c.p, MiB + MiB / 2) == 0);
    // Reading what was never written is a short read, not silent garbage.
    CHECK_THROWS_WITH(f.read_async(off + 3 * MiB, b.p, MiB)->wait(), Catch::Contains("end of file"));
    // The file still works after the errors.
    f.write_async(off, a.p, 4 * MiB)->wait();
  }
  SECTION("allocate() beyond the free space fails before any IO") {
    SwapFile f(tmp.dir.string(), 0, AioConfig{});
    f.reserve(int64_t(1) << 50, Category::optim);  // 1 PiB
    CHECK_THROWS_WITH(f.allocate(), Catch::Contains(f.path()) && Catch::Contains("1125899906842624 bytes) needed") &&
                                        Catch::Contains("free on the device"));
    CHECK(file_size(f.path()) == 0);
    CHECK(f.bytes_written() == 0);
  }
  SECTION("allocate() puts the reserved size on disk") {
    SwapFile f(tmp.dir.string(), 0, AioConfig{});
    f.reserve(3 * MiB, Category::params);
    f.allocate();
    struct stat st;
    REQUIRE(::stat(f.path().c_str(), &st) == 0);
    CHECK(st.st_size == 3 * MiB);
    CHECK(static_cast<int64_t>(st.st_blocks) * 512 >= 3 * MiB);
    f.reserve(MiB, Category::grads);  // a second allocate() adds the tail
    f.allocate();
    CHECK(file_size(f.path()) == 4 * MiB);
    CHECK(f.allocated_bytes() == 4 * MiB);
  }
}

TEST_CASE("aio swap directory errors", "[aio]") {
  test::TempDir tmp("aio_dir");
  const std::string file = tmp.file("plain");
  std::ofstream(file) << "x";
  CHECK_THROWS_WITH(SwapFile(file, 0, AioConfig{}), Catch::Contains(file) && Catch::Contains("is not a directory"));
  CHECK_THROWS_WITH(SwapFile(file + "/sub", 0, AioConfig{}),
                    Catch::Contains("cannot create the swap directory") && Catch::Contains("Not a directory"));
  const std::string ro = tmp.file("readonly");
  fs::create_directories(ro);
  ::chmod(ro.c_str(), 0500);
  if (::geteuid() == 0) {
    WARN("skipped the read-only directory check: running as root, which bypasses permission bits");
  } else {
    CHECK_THROWS_WITH(SwapFile(ro, 0, AioConfig{}), Catch::Contains(ro) && Catch::Contains("is not writable"));
  }
  ::chmod(ro.c_str(), 0700);
  // A directory that does not exist yet is created.
  REQUIRE_ODIRECT(tmp);
  const std::string fresh = tmp.file("a/b/c");
  SwapFile f(fresh, 2, AioConfig{});
  CHECK(fs::is_directory(fresh));
  CHECK(f.path() == fresh + "/zt-swap-rank2.bin");
  // tmpfs refused O_DIRECT before Linux 6.6; where it still does, the message says so.
  if (fs::is_directory("/dev/shm") && !supports_odirect("/dev/shm")) {
    const std::string shm = "/dev/shm/zt_test_aio_" + std::to_string(::getpid());
    CHECK_THROWS_WITH(SwapFile(shm, 0, AioConfig{}), Catch::Contains("refuses O_DIRECT") && Catch::Contains("disk-backed"));
    fs::remove_all(shm);
  }
}

TEST_CASE("aio stale swap files are removed and live ones refused", "[aio]") {
  test::TempDir tmp("aio_stale");
  REQUIRE_ODIRECT(tmp);
  const std::string dir = tmp.dir.string();
  std::ofstream(tmp.file("zt-swap-rank0.bin")) << std::string(8192, 'z');  // a dead run's files
  std::ofstream(tmp.file("zt-swap-rank5.bin")) << "old";
  std::ofstream(tmp.file("zt-swap-rankX.bin")) << "not ours";
  std::ofstream(tmp.file("notes.txt")) << "keep";
  {
    SwapFile f(dir, 0, AioConfig{});
    CHECK(file_size(f.path()) == 0);  // a fresh file, not the stale one
    CHECK_FALSE(fs::exists(tmp.file("zt-swap-rank5.bin")));
    CHECK(fs::exists(tmp.file("zt-swap-rankX.bin")));
    CHECK(fs::exists(tmp.file("notes.txt")));
    // Live: a second SwapFile of the same rank (its flock is held by f) is refused...
    CHECK_THROWS_WITH(SwapFile(dir, 0, AioConfig{}), Catch::Contains(f.path()) && Catch::Contains("in use by another run"));
    CHECK(fs::exists(f.path()));  // ...and f's file survives the attempt
    // ...while another rank of the same job shares the directory.
    SwapFile g(dir, 1, AioConfig{});
    CHECK(fs::exists(f.path()));
    CHECK(fs::exists(g.path()));
  }
  // Removed at destruction.
  CHECK_FALSE(fs::exists(tmp.file("zt-swap-rank0.bin")));
  CHECK_FALSE(fs::exists(tmp.file("zt-swap-rank1.bin")));
  // A lock held through another open file description (another process's, as far as flock goes).
  const std::string p0 = tmp.file("zt-swap-rank0.bin"), p3 = tmp.file("zt-swap-rank3.bin");
  const int h0 = ::open(p0.c_str(), O_RDWR | O_CREAT, 0600), h3 = ::open(p3.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(h0 >= 0);
  REQUIRE(h3 >= 0);
  REQUIRE(::flock(h0, LOCK_EX | LOCK_NB) == 0);
  REQUIRE(::flock(h3, LOCK_EX | LOCK_NB) == 0);
  CHECK_THROWS_WITH(SwapFile(dir, 0, AioConfig{}), Catch::Contains(p0) && Catch::Contains("in use by another run"));
  {
    SwapFile f(dir, 1, AioConfig{});  // rank 3's live file is left alone
    CHECK(fs::exists(p3));
  }
  CHECK(fs::exists(p0));
  ::close(h0);
  ::close(h3);
  {
    SwapFile f(dir, 1, AioConfig{});  // now both are stale
    CHECK_FALSE(fs::exists(p0));
    CHECK_FALSE(fs::exists(p3));
  }
}

TEST_CASE("aio destruction waits for queued IO and stats count reserved bytes per category", "[aio]") {
  test::TempDir tmp("aio_stats");
  REQUIRE_ODIRECT(tmp);
  const int64_t bytes = 4 << 20;
  AlignedBuf a(bytes), b(bytes);
  fill_random(a.p, bytes, 9);
  WorkPtr w;
  std::string path;
  {
    SwapFile f(tmp.dir.string(), 0, AioConfig{65536, 2});
    CHECK(f.reserve(100, Category::params) == 0);  // rounded up to 4096
    CHECK(f.reserve(8192, Category::optim) == 4096);
    CHECK(f.reserve(0, Category::grads) == 12288);
    const int64_t off = f.reserve(bytes, Category::optim);
    CHECK(off == 12288);
    const MemoryStats s = f.stats();
    CHECK(s.cur(Category::params) == 4096);
    CHECK(s.cur(Category::optim) == 8192 + bytes);
    CHECK(s.cur(Category::grads) == 0);
    CHECK(s.max(Category::optim) == 8192 + bytes);
    CHECK(s.total() == 12288 + bytes);
    CHECK(s.peak_total == s.total());
    CHECK(f.reserved_bytes() == 12288 + bytes);
    f.allocate();
    f.write_async(off, a.p, bytes)->wait();
    w = f.read_async(off, b.p, bytes);  // not waited on before the destructor
    path = f.path();
  }
  w->wait();  // completed by the destructor, successfully
  CHECK(std::memcmp(a.p, b.p, bytes) == 0);
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("aio dry swap file keeps the books and the checks, creates nothing and touches no buffer", "[aio]") {
  test::TempDir tmp("aio_dry");
  const std::string missing = tmp.file("not-yet");  // a dry swap file does not create its directory
  const int64_t MiB = 1 << 20;
  {
    SwapFile f(missing, 3, AioConfig{MiB, 4}, SwapMode::dry);
    CHECK(f.dry());
    CHECK_THAT(f.path(), Catch::Contains("zt-swap-rank3.bin") && Catch::Contains("dry run"));
    // Regions as the real file reserves them: rounded to kAioAlignment, consecutive.
    CHECK(f.reserve(1, Category::params) == 0);
    CHECK(f.reserve(3 * MiB + 5, Category::optim) == kAioAlignment);
    const int64_t end = kAioAlignment + (3 * MiB + kAioAlignment);
    CHECK(f.reserved_bytes() == end);
    f.allocate();
    CHECK(f.allocated_bytes() == end);
    const MemoryStats st = f.stats();
    CHECK(st.cur(Category::params) == kAioAlignment);
    CHECK(st.cur(Category::optim) == 3 * MiB + kAioAlignment);
    CHECK(st.max(Category::optim) == st.cur(Category::optim));
    CHECK(st.peak_total == end);
    // Reads and writes complete at once without touching the buffer: an address with no access
    // (as a meta tensor's) would fault on any byte read or written.
    void* none = ::mmap(nullptr, 4 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(none != MAP_FAILED);
    f.write_async(kAioAlignment, none, 3 * MiB + kAioAlignment)->wait();
    f.read_async(0, none, kAioAlignment)->wait();
    CHECK(f.bytes_written() == 3 * MiB + kAioAlignment);
    CHECK(f.bytes_read() == kAioAlignment);
    // The real file's argument checks.
    char* p = static_cast<char*>(none);
    CHECK_THROWS_WITH(f.write_async(0, p + 512, 4096), Catch::Contains("misaligned") && Catch::Contains(f.path()));
    CHECK_THROWS_WITH(f.read_async(0, p, 1000), Catch::Contains("bytes % 4096 = 1000"));
    CHECK_THROWS_WITH(f.read_async(end, p, 4096), Catch::Contains("past the reserved size"));
    CHECK_THROWS_WITH(f.write_async(0, nullptr, 4096), Catch::Contains("null buffer"));
    CHECK_THROWS_WITH(SwapFile(missing, 0, AioConfig{1000, 8}, SwapMode::dry),
                      Catch::Contains("aio.block_size = 1000"));
    ::munmap(none, 4 * MiB);
    f.set_tracer(nullptr);
  }
  CHECK_FALSE(fs::exists(missing));
  {  // In an existing directory: nothing is created, and a stale file there is left alone.
    const std::string stale = tmp.file("zt-swap-rank1.bin");
    std::ofstream(stale) << "left by an earlier run";
    SwapFile f(tmp.dir.string(), 0, AioConfig{}, SwapMode::dry);
    f.reserve(10 * MiB, Category::optim);
    f.allocate();
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(tmp.dir)) names.push_back(e.path().filename().string());
    CHECK(names == std::vector<std::string>{"zt-swap-rank1.bin"});
  }
}
