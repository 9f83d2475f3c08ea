// defines: SwapFile (zero/aio.h): reserve, allocate, read_async / write_async, stats; stale-file cleanup;
//          the dry mode, set_dry_swap_observer; file-local: g_dry_swap_observer, dry_request
//
// The NVMe tier's swap file (zero/aio.h): one file per rank, regions reserved, allocated at once, read
// and written asynchronously through its io_uring engine (zero/aio_engine.h).
#include "zero/aio.h"
#include "zero/aio_engine.h"  // defines: detail::AioEngine, errno_text

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

namespace zt {

// ---- SwapFile ----

namespace {

namespace fs = std::filesystem;

bool is_swap_file_name(const std::string& n) {  // zt-swap-rank<digits>.bin
  const std::string pre = "zt-swap-rank", suf = ".bin";
  if (n.size() <= pre.size() + suf.size() || n.compare(0, pre.size(), pre) != 0 ||
      n.compare(n.size() - suf.size(), suf.size(), suf) != 0)
    return false;
  for (size_t i = pre.size(); i < n.size() - suf.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return false;
  return true;
}

bool same_file(int fd, const std::string& path) {
  struct stat a, b;
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

[[noreturn]] void throw_in_use(const std::string& path) {
  ZT_THROW("swap file ", path, " is in use by another run (a live process holds its flock); stop that run or "
           "point nvme_path to another directory");
}

// Removes every zt-swap-rank*.bin in dir whose flock nobody holds (left by a job that died). A held
// lock on `own` (this rank's file) is an error; other ranks' held files belong to this job's other
// ranks (or to another job using other rank numbers) and are left alone.
void remove_stale(const std::string& dir, const std::string& own) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_swap_file_name(name)) continue;
    const std::string p = it->path().string();
    const int f = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (f < 0) continue;  // vanished meanwhile (another rank cleaned it), or unreadable: judged at open below
    if (::flock(f, LOCK_EX | LOCK_NB) == 0) {
      // Unlocked: stale. Unlink while holding the lock, and only if the path is still this file.
      if (same_file(f, p) && ::unlink(p.c_str()) != 0 && errno != ENOENT) {
        const int e = errno;
        ::close(f);
        ZT_THROW("cannot remove the stale swap file ", p, " (left by an earlier run): ", std::strerror(e));
      }
      ::close(f);
    } else {
      ::close(f);
      if (p == own) throw_in_use(p);
    }
  }
  if (ec) ZT_THROW("cannot list the swap directory ", dir, ": ", ec.message());
}

}  // namespace

SwapFile::SwapFile(const std::string& dir, int rank, const AioConfig& aio, SwapMode mode)
    : dir_(dir), aio_(aio), mode_(mode) {
  if (aio.block_size <= 0 || aio.block_size % kAioAlignment != 0 || aio.block_size > (int64_t(1) << 30))
    ZT_THROW("SwapFile: aio.block_size = ", aio.block_size, " is invalid: expected a multiple of ", kAioAlignment,
             " (O_DIRECT alignment) in [4096, 2^30]");
  if (aio.queue_depth < 1 || aio.queue_depth > 4096)
    ZT_THROW("SwapFile: aio.queue_depth = ", aio.queue_depth, " is invalid: expected an integer in [1, 4096]");
  if (rank < 0) ZT_THROW("SwapFile: rank = ", rank, " is invalid: expected >= 0");
  if (dir.empty()) ZT_THROW("SwapFile: the swap directory (nvme_path) is empty");
  const std::string name = "zt-swap-rank" + std::to_string(rank) + ".bin";
  if (mode_ == SwapMode::dry) {
    path_ = (fs::path(dir) / name).string() + " (dry run: no file)";
    return;
  }

  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) ZT_THROW("swap directory ", dir, " is not a directory");
  } else {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) ZT_THROW("cannot create the swap directory ", dir, ": ", ec.message());
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    ZT_THROW("swap directory ", dir, " is not writable: ", std::strerror(errno));
  path_ = (fs::path(dir) / name).string();

  remove_stale(dir, path_);

  // Create and lock our file. A rank cleaning stale files may lock (and unlink) it for an instant
  // between our open and flock: retry briefly, and make sure the locked inode is still the path's.
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      const int e = errno;
      if (e == EINVAL)
        ZT_THROW("swap file ", path_, ": the filesystem of ", dir, " refuses O_DIRECT (", std::strerror(e),
                 "); tmpfs and some network or overlay filesystems do: point nvme_path to a directory on a "
                 "disk-backed filesystem (ext4, xfs) on the NVMe drive");
      ZT_THROW("cannot open the swap file ", path_, ": ", std::strerror(e));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0 && same_file(fd_, path_)) break;
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    if (attempt >= 100) {
      if (e == EWOULDBLOCK) throw_in_use(path_);
      ZT_THROW("cannot lock the swap file ", path_, ": ", std::strerror(e));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  auto fail = [&](const std::string& msg) {
    ::unlink(path_.c_str());
    ::close(fd_);
    fd_ = -1;
    throw Error(msg);
  };
  if (::ftruncate(fd_, 0) != 0) fail(detail::concat("cannot truncate the swap file ", path_, ": ", std::strerror(errno)));
  // Some filesystems accept O_DIRECT at open and refuse it at the first IO: probe one aligned block.
  {
    void* probe = std::aligned_alloc(kAioAlignment, kAioAlignment);
    std::memset(probe, 0, kAioAlignment);
    const ssize_t n = ::pwrite(fd_, probe, kAioAlignment, 0);
    const int e = errno;
    std::free(probe);
    if (n != kAioAlignment)
      fail(detail::concat("swap file ", path_, ": a direct (O_DIRECT) write of one block failed: ",
                  n < 0 ? detail::errno_text(e) : "short write",
                  "; point nvme_path to a directory on a disk-backed filesystem (ext4, xfs) with free space"));
    if (::ftruncate(fd_, 0) != 0) fail(detail::concat("cannot truncate the swap file ", path_, ": ", std::strerror(errno)));
  }
  try {
    engine_ = std::make_unique<detail::AioEngine>(fd_, path_, aio_);
  } catch (const Error& e) {
    fail(e.what());
  }
}

SwapFile::~SwapFile() {
  if (mode_ == SwapMode::dry) return;
  engine_.reset();  // serves what is queued and in flight, then stops the IO thread
  ::unlink(path_.c_str());
  ::close(fd_);  // releases the flock
}

int64_t SwapFile::reserve(int64_t bytes, Category c) {
  if (bytes < 0 || bytes > (int64_t(1) << 60))
    ZT_THROW("SwapFile ", path_, ": reserve(", bytes, " bytes) for ", category_name(c), " is invalid: expected [0, 2^60]");
  const int64_t rounded = (bytes + kAioAlignment - 1) / kAioAlignment * kAioAlignment;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t at = end_;
  end_ += rounded;
  const int i = static_cast<int>(c);
  stats_.current[i] += rounded;
  stats_.peak[i] = std::max(stats_.peak[i], stats_.current[i]);
  stats_.peak_total = std::max(stats_.peak_total, stats_.total());
  return at;
}

void SwapFile::allocate() {
  std::lock_guard<std::mutex> lock(mu_);
  if (end_ <= allocated_) return;
  if (mode_ == SwapMode::dry) {
    allocated_ = end_;
    return;
  }
  const int64_t need = end_ - allocated_;
  struct statvfs sv;
  if (::fstatvfs(fd_, &sv) != 0) ZT_THROW("SwapFile ", path_, ": statvfs failed: ", std::strerror(errno));
  const int64_t free_bytes = static_cast<int64_t>(sv.f_bavail) * static_cast<int64_t>(sv.f_frsize);
  auto too_small = [&](const std::string& why) {
    ZT_THROW("SwapFile ", path_, ": cannot allocate the NVMe tier's swap space: ", format_bytes(need), " (", need,
             " bytes) needed, ", format_bytes(free_bytes), " (", free_bytes, " bytes) free on the device", why,
             "; free space or point nvme_path to a larger disk");
  };
  if (need > free_bytes) too_small("");
  if (::fallocate(fd_, 0, allocated_, need) != 0) {
    const int e = errno;
    if (e != EOPNOTSUPP) too_small(detail::concat(" (fallocate: ", detail::errno_text(e), ")"));
    // The filesystem cannot preallocate: size the file instead (a full disk then shows at the first
    // write, as an IO error). Said once, loudly.
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr, "warning: SwapFile %s: the filesystem does not support fallocate; the swap file is "
                   "sized but not preallocated, so a full disk shows only at the first write\n", path_.c_str());
    });
    if (::ftruncate(fd_, end_) != 0) too_small(detail::concat(" (ftruncate: ", detail::errno_text(errno), ")"));
  }
  allocated_ = end_;
}

void SwapFile::check_io(const char* what, int64_t offset, const void* buf, int64_t bytes) const {
  const auto addr = reinterpret_cast<uintptr_t>(buf);
  if (offset < 0 || bytes < 0)
    ZT_THROW("SwapFile ", path_, ": ", what, "(offset ", offset, ", ", bytes, " bytes): expected offset and bytes >= 0");
  if (addr % kAioAlignment || offset % kAioAlignment || bytes % kAioAlignment)
    ZT_THROW("SwapFile ", path_, ": ", what, "(offset ", offset, ", buffer ", buf, ", ", bytes,
             " bytes) is misaligned: O_DIRECT needs the buffer address, the file offset and the length to be "
             "multiples of ", kAioAlignment, " (buffer % 4096 = ", addr % kAioAlignment, ", offset % 4096 = ",
             offset % kAioAlignment, ", bytes % 4096 = ", bytes % kAioAlignment, ")");
  if (bytes > 0 && buf == nullptr) ZT_THROW("SwapFile ", path_, ": ", what, ": null buffer");
  std::lock_guard<std::mutex> lock(mu_);
  if (offset + bytes > end_)
    ZT_THROW("SwapFile ", path_, ": ", what, "(offset ", offset, ", ", bytes, " bytes) ends at ", offset + bytes,
             ", past the reserved size ", end_, " (reserve() the region first)");
}

namespace {

std::atomic<SwapObserver*> g_dry_swap_observer{nullptr};

// A dry request's Work: done at once, its wait() reported when someone watches.
WorkPtr dry_request(bool write, int64_t bytes) {
  SwapObserver* o = g_dry_swap_observer.load();
  if (!o) return completed_work();
  const int64_t id = o->swap_issued(write, bytes);
  return reported_work([o, id] { o->swap_waited(id); });
}

}  // namespace

void set_dry_swap_observer(SwapObserver* o) { g_dry_swap_observer.store(o); }

WorkPtr SwapFile::write_async(int64_t offset, const void* src, int64_t bytes) {
  check_io("write_async", offset, src, bytes);
  if (bytes == 0) return completed_work();
  if (mode_ == SwapMode::dry) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      dry_written_ += bytes;
    }
    return dry_request(true, bytes);
  }
  return engine_->submit(true, offset, const_cast<void*>(src), bytes);  // the engine only reads it
}

WorkPtr SwapFile::read_async(int64_t offset, void* dst, int64_t bytes) {
  check_io("read_async", offset, dst, bytes);
  if (bytes == 0) return completed_work();
  if (mode_ == SwapMode::dry) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      dry_read_ += bytes;
    }
    return dry_request(false, bytes);
  }
  return engine_->submit(false, offset, dst, bytes);
}

MemoryStats SwapFile::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void SwapFile::set_tracer(Tracer* t) {
  if (engine_) engine_->tracer.store(t);
}

int64_t SwapFile::bytes_read() const {
  if (engine_) return engine_->bytes_read.load();
  std::lock_guard<std::mutex> lock(mu_);
  return dry_read_;
}
int64_t SwapFile::bytes_written() const {
  if (engine_) return engine_->bytes_written.load();
  std::lock_guard<std::mutex> lock(mu_);
  return dry_written_;
}
const std::string& SwapFile::path() const { return path_; }

int64_t SwapFile::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return end_;
}

int64_t SwapFile::allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_;
}

}  // namespace zt
