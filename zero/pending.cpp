// defines: Pending::finish, drain, timed_wait, transfer_work, all_gather_chunked (zero/pending.h);
//          file-local: TimedWait, TransferWork.
#include "zero/pending.h"

#include <algorithm>
#include <chrono>

namespace zt {

void Pending::finish() {
  work->wait();
  if (then) then();
  then = nullptr;
}

namespace {
struct TimedWait final : Work {
  TimedWait(WorkPtr w, double* seconds, Tracer* t, std::string name)
      : w(std::move(w)), seconds(seconds), t(t), name(std::move(name)) {}
  bool outputs_queued() const override { return w->outputs_queued(); }
  DeviceEventPtr done_event() const override { return w->done_event(); }
  void wait() override {
    const auto t0 = Tracer::Clock::now();
    w->wait();
    const auto t1 = Tracer::Clock::now();
    *seconds += std::chrono::duration<double>(t1 - t0).count();
    if (t && t->recording()) t->span(TraceTrack::compute, name, "wait", t0, t1);
  }
  WorkPtr w;
  double* seconds;
  Tracer* t;
  std::string name;
};
}  // namespace

WorkPtr timed_wait(WorkPtr w, double* seconds, Tracer* t, std::string name) {
  return std::make_shared<TimedWait>(std::move(w), seconds, t, std::move(name));
}

namespace {
struct TransferWork final : Work {
  explicit TransferWork(TransferPtr t) : t(std::move(t)) {}
  void wait() override { t->wait(); }
  TransferPtr t;
};
}  // namespace

WorkPtr transfer_work(TransferPtr t) { return std::make_shared<TransferWork>(std::move(t)); }

void drain(std::deque<Pending>& q) {
  while (!q.empty()) {
    q.front().finish();
    q.pop_front();
  }
}

void all_gather_chunked(ProcessGroup& g, const Tensor& src, const Tensor& dst, int64_t chunk,
                        std::deque<Pending>& out) {
  const int64_t S = src.numel(), N = g.size();
  if (chunk >= S) {
    out.push_back({g.all_gather_async(src, dst), nullptr});
    return;
  }
  for (int64_t a = 0; a < S; a += chunk) {
    const int64_t n = std::min(chunk, S - a);
    Tensor buf = Tensor::empty({N * n}, src.dtype(), Category::comm);
    WorkPtr w = g.all_gather_async(range(src, a, n), buf);
    out.push_back({w, [buf, dst, a, n, S, N] {
                     for (int64_t q = 0; q < N; ++q) range(dst, q * S + a, n).copy_(range(buf, q * n, n));
                   }});
  }
}

}  // namespace zt
