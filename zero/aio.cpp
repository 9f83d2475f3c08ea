#include "zero/aio.h"

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <thread>
#include <vector>

namespace zt {
namespace detail {

namespace {

std::string errno_text(int e) {
  std::string s = std::strerror(e);
  if (e == ENOSPC) s += " (ENOSPC: no space left on the device; free space or point nvme_path to a larger disk)";
  if (e == EFBIG) s += " (EFBIG: the file size limit was reached: RLIMIT_FSIZE (ulimit -f) or the filesystem's maximum file size)";
  if (e == EINVAL) s += " (EINVAL: with O_DIRECT, usually a misaligned buffer, offset or length, or a filesystem without direct IO)";
  return s;
}

}  // namespace

// One asynchronous read or write of the caller's buffer: split into pieces of at most block_size.
// Fields above `mu` belong to the IO thread; done / error are published under mu.
struct AioRequest {
  bool write = false;
  char* buf = nullptr;
  int64_t offset = 0, bytes = 0;
  int64_t issued = 0;        // bytes handed out as pieces so far (pieces are issued in order)
  int pieces_in_flight = 0;
  bool failed = false;       // after the first error no further piece is issued
  std::string first_error;   // the first error's message (IO thread), published as `error`
  std::chrono::steady_clock::time_point submitted;  // the trace's span begins here

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string error;  // empty: success
};

class AioWork final : public Work {
 public:
  explicit AioWork(std::shared_ptr<AioRequest> r) : r_(std::move(r)) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(r_->mu);
    r_->cv.wait(lock, [&] { return r_->done; });
    if (!r_->error.empty()) throw Error(r_->error);
  }

 private:
  std::shared_ptr<AioRequest> r_;
};

// The ring, its IO thread and the request queue of one SwapFile.
//
// The IO thread has a single place where it blocks: io_uring_submit_and_wait(ring, 1). To be woken
// for new requests while nothing (or not enough) is in flight, it keeps a POLL_ADD on an eventfd (the
// doorbell) in the ring: submit() queues the request under mu_ and writes the eventfd, so no wakeup
// is lost (the eventfd's counter persists until the IO thread reads it, which it does before taking
// the queue). Ring size: queue_depth pieces + 1 doorbell; the CQ (twice that) cannot overflow.
class AioEngine {
 public:
  AioEngine(int fd, std::string path, const AioConfig& aio)
      : fd_(fd), path_(std::move(path)), block_(aio.block_size), depth_(static_cast<int>(aio.queue_depth)) {
    const int rc = io_uring_queue_init(static_cast<unsigned>(depth_ + 1), &ring_, 0);
    if (rc < 0)
      ZT_THROW("SwapFile ", path_, ": io_uring is unavailable (io_uring_queue_init: ", std::strerror(-rc),
               "); the NVMe tier needs Linux >= 5.6 with io_uring enabled (sysctl kernel.io_uring_disabled = 0, "
               "and not blocked by a container's seccomp profile)");
    efd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd_ < 0) {
      const int e = errno;
      io_uring_queue_exit(&ring_);
      ZT_THROW("SwapFile ", path_, ": eventfd failed: ", std::strerror(e));
    }
    pieces_.resize(static_cast<size_t>(depth_));
    for (int i = depth_ - 1; i >= 0; --i) free_.push_back(i);
    thread_ = std::thread([this] { run(); });
  }

  // Every queued request is served before the thread stops (their Works complete normally).
  ~AioEngine() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    ring_doorbell();
    thread_.join();
    io_uring_queue_exit(&ring_);
    ::close(efd_);
  }

  WorkPtr submit(bool write, int64_t offset, void* buf, int64_t bytes) {
    auto r = std::make_shared<AioRequest>();
    r->submitted = std::chrono::steady_clock::now();
    r->write = write;
    r->buf = static_cast<char*>(buf);
    r->offset = offset;
    r->bytes = bytes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(r);
    }
    ring_doorbell();
    return std::make_shared<AioWork>(std::move(r));
  }

  std::atomic<int64_t> bytes_read{0}, bytes_written{0};
  std::atomic<Tracer*> tracer{nullptr};  // each request a span on the io track, submission to completion

 private:
  static constexpr uint64_t kDoorbell = 0;  // user_data of the doorbell poll; piece p has p + 1

  struct Piece {
    std::shared_ptr<AioRequest> req;
    int64_t off = 0;   // within the request
    int64_t len = 0;
    int64_t done = 0;  // bytes transferred so far (short transfers resubmit the rest)
  };

  void ring_doorbell() {
    const uint64_t one = 1;
    // Never fails short of a counter overflow (2^64 - 2 unread rings); EAGAIN would mean exactly that,
    // and the IO thread is then awake anyway.
    [[maybe_unused]] ssize_t n = ::write(efd_, &one, sizeof one);
  }

  io_uring_sqe* sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    // Cannot happen: at most queue_depth pieces + 1 doorbell are prepared between two submissions.
    ZT_CHECK(s != nullptr, "SwapFile ", path_, ": io_uring submission queue full");
    return s;
  }

  void prep(int slot) {
    Piece& p = pieces_[static_cast<size_t>(slot)];
    AioRequest& r = *p.req;
    const int64_t at = p.off + p.done;
    const auto len = static_cast<unsigned>(p.len - p.done);
    io_uring_sqe* s = sqe();
    if (r.write) io_uring_prep_write(s, fd_, r.buf + at, len, static_cast<uint64_t>(r.offset + at));
    else io_uring_prep_read(s, fd_, r.buf + at, len, static_cast<uint64_t>(r.offset + at));
    io_uring_sqe_set_data64(s, static_cast<uint64_t>(slot) + 1);
  }

  void arm_doorbell() {
    io_uring_sqe* s = sqe();
    io_uring_prep_poll_add(s, efd_, POLLIN);
    io_uring_sqe_set_data64(s, kDoorbell);
    doorbell_armed_ = true;
  }

  void complete(AioRequest& r) {
    if (Tracer* t = tracer.load(); t && t->recording())
      t->span(TraceTrack::io, std::string(r.write ? "nvme write " : "nvme read ") + format_bytes(r.bytes), "io",
              r.submitted, std::chrono::steady_clock::now(), {{"offset", r.offset}, {"bytes", r.bytes}, {"file", path_}});
    std::lock_guard<std::mutex> lock(r.mu);
    r.error = r.first_error;
    r.done = true;
    r.cv.notify_all();
  }

  void fail(AioRequest& r, const Piece& p, const std::string& why) {
    if (r.failed) return;  // keep the first error
    r.failed = true;
    const int64_t at = r.offset + p.off + p.done;
    const char* op = r.write ? "write" : "read";
    r.first_error = detail::concat("SwapFile ", path_, ": ", op, " of ", p.len - p.done, " bytes at file offset ", at,
                           " failed (part of a ", op, " of ", r.bytes, " bytes at offset ", r.offset, "): ", why);
  }

  // One completion: a piece finished, progressed (short transfer: resubmit the rest) or failed.
  void on_cqe(uint64_t data, int res) {
    if (data == kDoorbell) {
      doorbell_armed_ = false;
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(efd_, &v, sizeof v);  // resets the counter (EAGAIN: already 0)
      return;
    }
    const int slot = static_cast<int>(data - 1);
    Piece& p = pieces_[static_cast<size_t>(slot)];
    AioRequest& r = *p.req;
    if (res == -EAGAIN || res == -EINTR) {  // transient: the same piece again
      prep(slot);
      return;
    }
    if (res > 0) {
      p.done += res;
      (r.write ? bytes_written : bytes_read) += res;
      if (p.done < p.len) {  // short transfer: the remainder, from where it stopped
        prep(slot);
        return;
      }
    } else if (res == 0) {
      fail(r, p, r.write ? "short write: the device accepted 0 bytes" : "short read: end of file (the region was never written)");
    } else {
      fail(r, p, errno_text(-res));
    }
    // the piece is finished
    --in_flight_;
    free_.push_back(slot);
    std::shared_ptr<AioRequest> req = std::move(p.req);
    if (--req->pieces_in_flight == 0 && (req->failed || req->issued == req->bytes)) complete(*req);
  }

  void loop() {
    for (;;) {
      bool stopping;
      {
        std::lock_guard<std::mutex> lock(mu_);
        while (!queue_.empty()) {
          active_.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        stopping = stop_;
      }
      // Issue pieces in request order while fewer than queue_depth are in flight.
      while (in_flight_ < depth_ && !active_.empty()) {
        AioRequest& r = *active_.front();
        if (r.failed) {  // nothing more to issue: it completes when its last piece drains (on_cqe)
          active_.pop_front();
          continue;
        }
        const int slot = free_.back();
        free_.pop_back();
        Piece& p = pieces_[static_cast<size_t>(slot)];
        p.req = active_.front();
        p.off = r.issued;
        p.len = std::min(block_, r.bytes - r.issued);
        p.done = 0;
        r.issued += p.len;
        ++r.pieces_in_flight;
        ++in_flight_;
        prep(slot);
        if (r.issued == r.bytes) active_.pop_front();
      }
      if (stopping && in_flight_ == 0 && active_.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (queue_.empty()) return;
        continue;
      }
      if (!stopping && !doorbell_armed_) arm_doorbell();
      // Invariant: something can complete here (a piece in flight, or the armed doorbell), so this
      // blocks in the kernel until it does — no spinning.
      const int ret = io_uring_submit_and_wait(&ring_, 1);
      if (ret < 0) {
        if (ret == -EINTR) continue;  // unsubmitted entries stay in the SQ and go with the next call
        if (ret == -EAGAIN || ret == -EBUSY) {  // kernel short of resources: let completions drain
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        // Anything else means the ring itself is broken while the kernel may still DMA into callers'
        // buffers: no safe way to report it to the waiters.
        std::fprintf(stderr, "fatal: SwapFile %s: io_uring_submit_and_wait failed: %s\n", path_.c_str(),
                     std::strerror(-ret));
        std::abort();
      }
      io_uring_cqe* cqe;
      unsigned head, n = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        on_cqe(io_uring_cqe_get_data64(cqe), cqe->res);
        ++n;
      }
      io_uring_cq_advance(&ring_, n);
    }
  }

  void run() {
    pthread_setname_np(pthread_self(), "zt-aio");
    try {
      loop();
    } catch (const std::exception& e) {  // only a broken invariant (ZT_CHECK) gets here
      std::fprintf(stderr, "fatal: SwapFile IO thread: %s\n", e.what());
      std::abort();
    }
  }

  const int fd_;
  const std::string path_;
  const int64_t block_;
  const int depth_;
  io_uring ring_{};
  int efd_ = -1;
  std::thread thread_;

  std::mutex mu_;  // guards queue_, stop_
  std::deque<std::shared_ptr<AioRequest>> queue_;
  bool stop_ = false;

  // IO thread only
  std::deque<std::shared_ptr<AioRequest>> active_;  // requests with pieces left to issue, in order
  std::vector<Piece> pieces_;                       // queue_depth slots
  std::vector<int> free_;                           // free slots
  int in_flight_ = 0;
  bool doorbell_armed_ = false;
};

}  // namespace detail

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

SwapFile::SwapFile(const std::string& dir, int rank, const AioConfig& aio) : dir_(dir), aio_(aio) {
  if (aio.block_size <= 0 || aio.block_size % kAioAlignment != 0 || aio.block_size > (int64_t(1) << 30))
    ZT_THROW("SwapFile: aio.block_size = ", aio.block_size, " is invalid: expected a multiple of ", kAioAlignment,
             " (O_DIRECT alignment) in [4096, 2^30]");
  if (aio.queue_depth < 1 || aio.queue_depth > 4096)
    ZT_THROW("SwapFile: aio.queue_depth = ", aio.queue_depth, " is invalid: expected an integer in [1, 4096]");
  if (rank < 0) ZT_THROW("SwapFile: rank = ", rank, " is invalid: expected >= 0");
  if (dir.empty()) ZT_THROW("SwapFile: the swap directory (nvme_path) is empty");

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
  path_ = (fs::path(dir) / ("zt-swap-rank" + std::to_string(rank) + ".bin")).string();

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

WorkPtr SwapFile::write_async(int64_t offset, const void* src, int64_t bytes) {
  check_io("write_async", offset, src, bytes);
  if (bytes == 0) return completed_work();
  return engine_->submit(true, offset, const_cast<void*>(src), bytes);  // the engine only reads it
}

WorkPtr SwapFile::read_async(int64_t offset, void* dst, int64_t bytes) {
  check_io("read_async", offset, dst, bytes);
  if (bytes == 0) return completed_work();
  return engine_->submit(false, offset, dst, bytes);
}

MemoryStats SwapFile::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void SwapFile::set_tracer(Tracer* t) { engine_->tracer.store(t); }

int64_t SwapFile::bytes_read() const { return engine_->bytes_read.load(); }
int64_t SwapFile::bytes_written() const { return engine_->bytes_written.load(); }
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
