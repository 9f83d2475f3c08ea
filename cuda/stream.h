// defines: CudaStream, CudaEvent — RAII owners of a CUDA stream and a CUDA event.
//
// A stream is a queue of device work that runs in order; two streams may run concurrently. An
// event is a marker recorded into a stream: it completes when all work queued on that stream
// before the record has completed. The caching allocator (cuda/allocator.h) uses events to know
// when a block used on another stream may be reused; compute/communication overlap uses them to
// order one stream after another without blocking the host (CudaEvent::wait_on).
//
// Invariants:
//  - CudaStream owns its handle iff it was made by create(); the legacy default stream (handle
//    nullptr, what a default-constructed or moved-from CudaStream holds) is never destroyed.
//  - CudaEvent always owns its handle (nullptr only when moved from); without `timing` it is
//    created with cudaEventDisableTiming, the cheap kind (no timestamp), as the CUDA best
//    practices guide recommends for pure synchronization.
//  - Both are non-copyable and movable; their destructors never throw (errors there are ignored:
//    a destructor may run during unwinding or at process exit, when the runtime may be gone).
// Errors are zt::Error from ZT_CUDA_CHECK, naming the call (cuda/check.h).
#pragma once
#include <cuda_runtime_api.h>

namespace zt {

class CudaStream {
 public:
  // The legacy default stream (handle nullptr, "stream 0"): synchronizes with every blocking
  // stream. Not owned.
  CudaStream() = default;
  static CudaStream legacy_default() { return CudaStream(); }
  // A new stream on the current device, created with cudaStreamNonBlocking: it does not
  // synchronize implicitly with the legacy default stream.
  static CudaStream create();

  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  CudaStream(CudaStream&& o) noexcept;
  CudaStream& operator=(CudaStream&& o) noexcept;

  cudaStream_t get() const { return stream_; }
  bool is_default() const { return stream_ == nullptr; }
  void synchronize() const;  // cudaStreamSynchronize: the host waits for all queued work
  bool query() const;        // cudaStreamQuery: true when all queued work has completed

 private:
  explicit CudaStream(cudaStream_t s, bool owned) : stream_(s), owned_(owned) {}
  void destroy() noexcept;
  cudaStream_t stream_ = nullptr;
  bool owned_ = false;
};

class CudaEvent {
 public:
  // timing = false: cudaEventDisableTiming (synchronization only; elapsed_ms refuses it).
  explicit CudaEvent(bool timing = false);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  CudaEvent(CudaEvent&& o) noexcept;
  CudaEvent& operator=(CudaEvent&& o) noexcept;

  cudaEvent_t get() const { return event_; }
  bool timing() const { return timing_; }

  // cudaEventRecord: the event now captures all work queued on `stream` so far (re-recording
  // replaces what it captured before).
  void record(cudaStream_t stream);
  // cudaEventQuery: true when the captured work has completed (also true for an event never
  // recorded); false on cudaErrorNotReady; any other error throws.
  bool query() const;
  // cudaEventSynchronize: the host waits for the captured work.
  void synchronize() const;
  // cudaStreamWaitEvent: work queued on `stream` after this call starts only once the captured
  // work has completed. The host does not wait.
  void wait_on(cudaStream_t stream) const;
  // cudaEventElapsedTime: milliseconds between two completed timing events (both created with
  // timing = true and recorded; end after start).
  static float elapsed_ms(const CudaEvent& start, const CudaEvent& end);

 private:
  void destroy() noexcept;
  cudaEvent_t event_ = nullptr;
  bool timing_ = false;
};

}  // namespace zt
