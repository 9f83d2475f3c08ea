// defines: kAioAlignment, SwapMode, SwapObserver, set_dry_swap_observer, SwapFile — one rank's swap
//          file of the NVMe tier (ZeRO-Infinity),
//          read and written asynchronously through io_uring (liburing) with O_DIRECT.
//
// The file is <dir>/zt-swap-rank<R>.bin. The engine (zero/offload*.h) reserves one region per swapped
// buffer at setup (reserve), allocates the whole file on disk (allocate), then moves buffers with
// write_async / read_async and waits on the returned Work. Every region, buffer and length is a
// multiple of kAioAlignment, because O_DIRECT moves whole logical blocks by DMA, bypassing the page
// cache (the point: NVMe bandwidth without polluting host memory).
//
// IO path: a request is split into aio.block_size pieces; one IO thread per file keeps up to
// aio.queue_depth of them in flight in its io_uring and marks the request's Work done when all its
// pieces completed (DeepSpeed's aio.* keys: block_size, queue_depth; one thread per rank).
// Short transfers and -EAGAIN / -EINTR are resubmitted for the remainder; any other failure is kept
// (the first one per request) and rethrown by Work::wait() — an IO error never loses data silently.
//
// Dry mode (SwapMode::dry, what the engine uses on the meta device: train/dry_run.h): the same
// regions, offsets, rounding and stats, the same argument checks on every read and write, but no
// file, no directory, no IO thread: allocate() takes no disk space and reads and writes complete at
// once without touching their buffers (a meta tensor's address has no bytes behind it).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/memory.h"         // defines: Category, MemoryStats, format_bytes
#include "core/trace.h"          // defines: Tracer
#include "dist/process_group.h"  // defines: Work, WorkPtr
#include "zero/engine_config.h"  // defines: AioConfig

namespace zt {

inline constexpr int64_t kAioAlignment = 4096;  // O_DIRECT: file offsets, lengths and buffer addresses

namespace detail {
class AioEngine;  // zero/aio_engine.h: the ring, the IO thread and its request queue
}

// disk: the real file and its IO. dry: the bookkeeping only (the dry run's NVMe tier).
enum class SwapMode { disk, dry };

// What a dry run's swap files tell the step simulator (train/step_time.h): each read or write as it
// is issued (its id returned), and each wait on one — the engine's own order of swap IO, with no IO.
class SwapObserver {
 public:
  virtual ~SwapObserver() = default;
  virtual int64_t swap_issued(bool write, int64_t bytes) { return 0; }
  virtual void swap_waited(int64_t /*id*/) {}
};
// The observer of every dry swap file's requests (null: nobody). The dry run sets it for its
// duration (train/dry_run.cpp; one dry run at a time in a process).
void set_dry_swap_observer(SwapObserver* o);

// One rank's swap file of the NVMe tier: <dir>/zt-swap-rank<R>.bin, opened O_DIRECT, read and written
// asynchronously through io_uring by one IO thread per file. Thread-safe: any thread may reserve,
// submit IO and wait; requests are served in submission order (their pieces may complete in any order).
class SwapFile {
 public:
  // Creates dir if missing. Removes stale swap files of earlier runs: any zt-swap-rank*.bin in dir whose
  // flock is not held (an earlier job that died); a file locked by a live process is an error naming it
  // ("in use by another run") when it is this rank's file; other ranks' locked files are left alone
  // (they are the other ranks of this job). Holds an flock on its own file while open. Throws zt::Error
  // naming the path and the reason (strerror) when dir cannot be created, is not a directory, is not
  // writable, the filesystem refuses O_DIRECT (e.g. tmpfs: says so and suggests a disk-backed path), or
  // io_uring is unavailable. aio.block_size must be a positive multiple of kAioAlignment, aio.queue_depth
  // in [1, 4096] (zero/engine_config.cpp's ranges).
  // SwapMode::dry checks the same arguments and touches nothing on disk: no directory is created or
  // cleaned, no file exists (path() says so).
  SwapFile(const std::string& dir, int rank, const AioConfig& aio, SwapMode mode = SwapMode::disk);
  ~SwapFile();  // waits for IO in flight and queued (never throws), closes and removes the file
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  // Reserves `bytes` (rounded up to kAioAlignment) for category c; returns the region's file offset.
  // Regions are never freed individually (the engine reserves everything at setup). Offsets are
  // consecutive: region k starts where region k-1 ends.
  int64_t reserve(int64_t bytes, Category c);
  // Allocates the reserved size on disk now (fallocate), so a full disk is a clear error before
  // training starts: zt::Error naming the file, the bytes needed and the bytes free (statvfs).
  // May be called again after more reserve() calls (allocates the new tail). Dry: takes no space.
  void allocate();

  // Asynchronous IO of `bytes` at file `offset`: buffer address, offset and bytes multiples of
  // kAioAlignment, and [offset, offset + bytes) inside the reserved size (a zt::Error otherwise).
  // Split into block_size requests, at most queue_depth in flight per file. wait() on the returned
  // Work blocks until all of it is done and rethrows an IO error as a zt::Error naming the file,
  // offset, length and strerror (ENOSPC: "no space left on the device"; EFBIG too), also for short
  // reads/writes that cannot progress (end of file). The buffer must stay alive until wait()
  // returns. wait() may be called more than once (rethrows each time). bytes == 0: already done.
  // Dry: the same checks, then already done (or, with a dry swap observer, done when the observer
  // says: its wait() is reported); the buffer is not read or written.
  WorkPtr write_async(int64_t offset, const void* src, int64_t bytes);
  WorkPtr read_async(int64_t offset, void* dst, int64_t bytes);

  // Bytes reserved per category (what the memory report shows for the "nvme" tier), current and peak
  // (equal: regions are never freed).
  MemoryStats stats() const;
  int64_t bytes_read() const;  // totals so far (bytes of completed pieces; dry: of the requests)
  int64_t bytes_written() const;
  // <dir>/zt-swap-rank<R>.bin; dry: "<dir>/zt-swap-rank<R>.bin (dry run: no file)".
  const std::string& path() const;
  bool dry() const { return mode_ == SwapMode::dry; }
  // What the engine's memory report and checks read:
  int64_t reserved_bytes() const;   // the file's size once allocate()d: the sum of the rounded regions
  int64_t allocated_bytes() const;  // what allocate() has put on disk so far
  const AioConfig& aio() const { return aio_; }
  void set_tracer(Tracer* t);  // null: off (core/trace.h; the io track); dry: no IO to trace

 private:
  void check_io(const char* what, int64_t offset, const void* buf, int64_t bytes) const;

  std::string dir_, path_;
  AioConfig aio_;
  SwapMode mode_;
  int fd_ = -1;
  mutable std::mutex mu_;  // guards end_, allocated_, stats_, dry_read_, dry_written_
  int64_t end_ = 0;        // reserved bytes (the next region's offset)
  int64_t allocated_ = 0;
  int64_t dry_read_ = 0, dry_written_ = 0;  // dry: the bytes requested
  MemoryStats stats_;
  std::unique_ptr<detail::AioEngine> engine_;
};

}  // namespace zt
