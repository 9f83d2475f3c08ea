// defines: CudaStream (create, destroy, destructor, constructor, synchronize, query), CudaEvent
//          (constructor, destroy, destructor, record, query and 3 more) (cuda/stream.h)
#include "cuda/stream.h"

#include <utility>

#include "cuda/check.h"

namespace zt {

// ---------------------------------------------------------------------------------------------
// CudaStream

CudaStream CudaStream::create() {
  cudaStream_t s = nullptr;
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return CudaStream(s, true);
}

void CudaStream::destroy() noexcept {
  // cudaStreamDestroy returns at once; the stream's queued work still completes, and its
  // resources are released after that (CUDA runtime API reference).
  if (owned_ && stream_) (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
  owned_ = false;
}

CudaStream::~CudaStream() { destroy(); }

CudaStream::CudaStream(CudaStream&& o) noexcept
    : stream_(std::exchange(o.stream_, nullptr)), owned_(std::exchange(o.owned_, false)) {}

CudaStream& CudaStream::operator=(CudaStream&& o) noexcept {
  if (this != &o) {
    destroy();
    stream_ = std::exchange(o.stream_, nullptr);
    owned_ = std::exchange(o.owned_, false);
  }
  return *this;
}

void CudaStream::synchronize() const { ZT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

bool CudaStream::query() const {
  const cudaError_t e = cudaStreamQuery(stream_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // "not ready" is a status, not an error: keep the last error clean
    return false;
  }
  ZT_CUDA_CHECK(e);
  return true;
}

// ---------------------------------------------------------------------------------------------
// CudaEvent

CudaEvent::CudaEvent(bool timing) : timing_(timing) {
  ZT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

void CudaEvent::destroy() noexcept {
  // Destroying an event whose work has not completed is allowed: the runtime releases it later.
  if (event_) (void)cudaEventDestroy(event_);
  event_ = nullptr;
}

CudaEvent::~CudaEvent() { destroy(); }

CudaEvent::CudaEvent(CudaEvent&& o) noexcept
    : event_(std::exchange(o.event_, nullptr)), timing_(o.timing_) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  if (this != &o) {
    destroy();
    event_ = std::exchange(o.event_, nullptr);
    timing_ = o.timing_;
  }
  return *this;
}

void CudaEvent::record(cudaStream_t stream) {
  ZT_CHECK(event_ != nullptr, "CudaEvent::record on a moved-from event");
  ZT_CUDA_CHECK(cudaEventRecord(event_, stream));
}

bool CudaEvent::query() const {
  ZT_CHECK(event_ != nullptr, "CudaEvent::query on a moved-from event");
  const cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // as PyTorch's allocator does: "not ready" must not linger
    return false;
  }
  ZT_CUDA_CHECK(e);
  return true;
}

void CudaEvent::synchronize() const {
  ZT_CHECK(event_ != nullptr, "CudaEvent::synchronize on a moved-from event");
  ZT_CUDA_CHECK(cudaEventSynchronize(event_));
}

void CudaEvent::wait_on(cudaStream_t stream) const {
  ZT_CHECK(event_ != nullptr, "CudaEvent::wait_on on a moved-from event");
  ZT_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

float CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  ZT_CHECK(start.event_ && end.event_, "CudaEvent::elapsed_ms on a moved-from event");
  if (!start.timing_ || !end.timing_)
    ZT_THROW("CudaEvent::elapsed_ms needs two timing events (CudaEvent(true)); got start timing=",
             start.timing_, ", end timing=", end.timing_);
  float ms = 0.0f;
  ZT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

}  // namespace zt
