// defines: detail::AioEngine (zero/aio_engine.h): its ring setup and teardown, submit, and the IO
//          thread's loop (pieces, short transfers, the doorbell); AioWork::wait, errno_text.
#include "zero/aio_engine.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace zt {

namespace detail {

std::string errno_text(int e) {
  std::string s = std::strerror(e);
  if (e == ENOSPC) s += " (ENOSPC: no space left on the device; free space or point nvme_path to a larger disk)";
  if (e == EFBIG)
    s += " (EFBIG: the file size limit was reached: RLIMIT_FSIZE (ulimit -f) or the filesystem's maximum file size)";
  if (e == EINVAL)
    s += " (EINVAL: with O_DIRECT, usually a misaligned buffer, offset or length, or a filesystem without direct IO)";
  return s;
}

void AioWork::wait() {
  std::unique_lock<std::mutex> lock(r_->mu);
  r_->cv.wait(lock, [&] { return r_->done; });
  if (!r_->error.empty()) throw Error(r_->error);
}

AioEngine::AioEngine(int fd, std::string path, const AioConfig& aio)
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

AioEngine::~AioEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  ring_doorbell();
  thread_.join();
  io_uring_queue_exit(&ring_);
  ::close(efd_);
}

WorkPtr AioEngine::submit(bool write, int64_t offset, void* buf, int64_t bytes) {
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

void AioEngine::ring_doorbell() {
  const uint64_t one = 1;
  // Never fails short of a counter overflow (2^64 - 2 unread rings); EAGAIN would mean exactly that,
  // and the IO thread is then awake anyway.
  [[maybe_unused]] ssize_t n = ::write(efd_, &one, sizeof one);
}

io_uring_sqe* AioEngine::sqe() {
  io_uring_sqe* s = io_uring_get_sqe(&ring_);
  // Cannot happen: at most queue_depth pieces + 1 doorbell are prepared between two submissions.
  ZT_CHECK(s != nullptr, "SwapFile ", path_, ": io_uring submission queue full");
  return s;
}

void AioEngine::prep(int slot) {
  Piece& p = pieces_[static_cast<size_t>(slot)];
  AioRequest& r = *p.req;
  const int64_t at = p.off + p.done;
  const auto len = static_cast<unsigned>(p.len - p.done);
  io_uring_sqe* s = sqe();
  if (r.write) io_uring_prep_write(s, fd_, r.buf + at, len, static_cast<uint64_t>(r.offset + at));
  else io_uring_prep_read(s, fd_, r.buf + at, len, static_cast<uint64_t>(r.offset + at));
  io_uring_sqe_set_data64(s, static_cast<uint64_t>(slot) + 1);
}

void AioEngine::arm_doorbell() {
  io_uring_sqe* s = sqe();
  io_uring_prep_poll_add(s, efd_, POLLIN);
  io_uring_sqe_set_data64(s, kDoorbell);
  doorbell_armed_ = true;
}

void AioEngine::complete(AioRequest& r) {
  if (Tracer* t = tracer.load(); t && t->recording())
    t->span(TraceTrack::io, std::string(r.write ? "nvme write " : "nvme read ") + format_bytes(r.bytes), "io",
            r.submitted, std::chrono::steady_clock::now(), {{"offset", r.offset}, {"bytes", r.bytes}, {"file", path_}});
  std::lock_guard<std::mutex> lock(r.mu);
  r.error = r.first_error;
  r.done = true;
  r.cv.notify_all();
}

void AioEngine::fail(AioRequest& r, const Piece& p, const std::string& why) {
  if (r.failed) return;  // keep the first error
  r.failed = true;
  const int64_t at = r.offset + p.off + p.done;
  const char* op = r.write ? "write" : "read";
  r.first_error = detail::concat("SwapFile ", path_, ": ", op, " of ", p.len - p.done, " bytes at file offset ", at,
                                 " failed (part of a ", op, " of ", r.bytes, " bytes at offset ", r.offset, "): ", why);
}

void AioEngine::on_cqe(uint64_t data, int res) {
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
    fail(r, p,
         r.write ? "short write: the device accepted 0 bytes"
                 : "short read: end of file (the region was never written)");
  } else {
    fail(r, p, errno_text(-res));
  }
  // the piece is finished
  --in_flight_;
  free_.push_back(slot);
  std::shared_ptr<AioRequest> req = std::move(p.req);
  if (--req->pieces_in_flight == 0 && (req->failed || req->issued == req->bytes)) complete(*req);
}

void AioEngine::loop() {
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
      if (ret == -EINTR) continue;            // unsubmitted entries stay in the SQ and go with the next call
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

void AioEngine::run() {
  pthread_setname_np(pthread_self(), "zt-aio");
  try {
    loop();
  } catch (const std::exception& e) {  // only a broken invariant (ZT_CHECK) gets here
    std::fprintf(stderr, "fatal: SwapFile IO thread: %s\n", e.what());
    std::abort();
  }
}

}  // namespace detail

}  // namespace zt
