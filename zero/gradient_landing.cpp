// defines: HowToLand::into, land_now, land_after (zero/gradient_landing.h); file-local: ThenCopy.
#include "zero/gradient_landing.h"

#include <chrono>

#include "core/backend.h"

namespace zt {

namespace {
// The collective, then the copy it feeds: one Work, so that abandoning the queue (Pending's work
// waited, its follow-up not run) still waits for the copy into host memory.
struct ThenCopy final : Work {
  ThenCopy(WorkPtr collective, WorkPtr copy) : collective(std::move(collective)), copy(std::move(copy)) {}
  void wait() override {
    collective->wait();
    copy->wait();
  }
  WorkPtr collective, copy;
};
}  // namespace

void HowToLand::into(const Tensor& dst, const Tensor& got) const {
  if (precision) precision->land(dst, got, accumulate, scale);
  else Tensor(dst).copy_(got);
}

void land_now(ZeroContext& cx, const Tensor& dst, const Tensor& got, const HowToLand& how, const std::string& unit) {
  if (got.device() == dst.device()) return how.into(dst, got);
  const auto t0 = Tracer::Clock::now();
  {
    TraceScope scope(cx.active_tracer(), TraceTrack::compute, "gradient to host " + unit, "offload");
    how.into(dst, got.to(dst.device(), Category::comm));
  }
  cx.times.offload_grads_s += std::chrono::duration<double>(Tracer::Clock::now() - t0).count();
}

Pending land_after(ZeroContext& cx, WorkPtr w, const Tensor& dst, const Tensor& got, const HowToLand& how,
                   const std::string& unit) {
  const bool to_host = dst.device().is_cpu() && !got.device().is_cpu();
  const DeviceEventPtr written = w->done_event();
  if (to_host && (w->outputs_queued() || written) && how.plain_copy() && dst.dtype() == got.dtype() &&
      dst.is_contiguous() && backend_of(got).copies_to_host_async(dst)) {
    WorkPtr copy = timed_wait(transfer_work(backend_of(got).copy_to_host_async(dst, got, written.get())),
                              &cx.times.offload_grads_s, cx.active_tracer(), "wait gradient to host " + unit);
    return {std::make_shared<ThenCopy>(std::move(w), std::move(copy)), nullptr};
  }
  ZeroContext* c = &cx;
  return {std::move(w), [c, dst, got, how, unit] { land_now(*c, dst, got, how, unit); }};
}

}  // namespace zt
