// defines: detail::AioEngine, AioRequest, AioWork, errno_text — the io_uring ring of one swap
//          file, its IO thread and its request queue (zero/aio.h's SwapFile owns one). Declared
//          here, defined in zero/aio_engine.cpp; used only by zero/aio.cpp.
//
// Namespace: these stay in zt::detail. They are a component of their own (this header and its
// .cpp), but not part of the API: only SwapFile uses them (zero/aio.h forward-declares
// detail::AioEngine), and detail:: is what says "not for callers" in this tree, whatever the file.
//
// <liburing.h> is included here, not only in the .cpp, because AioEngine holds its `io_uring ring_`
// by value (a member needs the complete type; a pointer would cost an allocation and an indirection
// only to hide a header) and its private sqe() returns an io_uring_sqe*.
#pragma once
#include "zero/aio.h"

#include <liburing.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zt {

namespace detail {

// strerror(e), with a hint for the errors a swap file meets (ENOSPC, EFBIG, EINVAL under O_DIRECT).
std::string errno_text(int e);

// One asynchronous read or write of the caller's buffer: split into pieces of at most block_size.
// Fields above `mu` belong to the IO thread; done / error are published under mu.
struct AioRequest {
  bool write = false;
  char* buf = nullptr;
  int64_t offset = 0, bytes = 0;
  int64_t issued = 0;  // bytes handed out as pieces so far (pieces are issued in order)
  int pieces_in_flight = 0;
  bool failed = false;                              // after the first error no further piece is issued
  std::string first_error;                          // the first error's message (IO thread), published as `error`
  std::chrono::steady_clock::time_point submitted;  // the trace's span begins here

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string error;  // empty: success
};

// The Work of one AioRequest: wait() blocks until the request is done and throws its error, if any.
class AioWork final : public Work {
 public:
  explicit AioWork(std::shared_ptr<AioRequest> r) : r_(std::move(r)) {}
  void wait() override;

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
  // Sets up the ring and the doorbell and starts the IO thread; throws zt::Error naming the path when
  // io_uring or eventfd is unavailable.
  AioEngine(int fd, std::string path, const AioConfig& aio);
  // Every queued request is served before the thread stops (their Works complete normally).
  ~AioEngine();

  // Queues a read (write = false) or write of `bytes` at file `offset` from / into buf; returns its Work.
  WorkPtr submit(bool write, int64_t offset, void* buf, int64_t bytes);

  std::atomic<int64_t> bytes_read{0}, bytes_written{0};
  std::atomic<Tracer*> tracer{nullptr};  // each request a span on the io track, submission to completion

 private:
  static constexpr uint64_t kDoorbell = 0;  // user_data of the doorbell poll; piece p has p + 1

  struct Piece {
    std::shared_ptr<AioRequest> req;
    int64_t off = 0;  // within the request
    int64_t len = 0;
    int64_t done = 0;  // bytes transferred so far (short transfers resubmit the rest)
  };

  void ring_doorbell();
  io_uring_sqe* sqe();
  void prep(int slot);
  void arm_doorbell();
  void complete(AioRequest& r);
  void fail(AioRequest& r, const Piece& p, const std::string& why);
  // One completion: a piece finished, progressed (short transfer: resubmit the rest) or failed.
  void on_cqe(uint64_t data, int res);
  void loop();
  void run();

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
