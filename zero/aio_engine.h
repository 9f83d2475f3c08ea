// defines: detail::AioEngine, AioRequest, AioWork, errno_text — the io_uring ring of one swap
//          file, its IO thread and its request queue (zero/aio.h's SwapFile owns one). Private to
//          zero/aio.cpp; in a header of its own so that file holds the SwapFile alone.
#pragma once
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

inline std::string errno_text(int e) {
  std::string s = std::strerror(e);
  if (e == ENOSPC) s += " (ENOSPC: no space left on the device; free space or point nvme_path to a larger disk)";
  if (e == EFBIG) s += " (EFBIG: the file size limit was reached: RLIMIT_FSIZE (ulimit -f) or the filesystem's maximum file size)";
  if (e == EINVAL) s += " (EINVAL: with O_DIRECT, usually a misaligned buffer, offset or length, or a filesystem without direct IO)";
  return s;
}

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

}  // namespace zt
