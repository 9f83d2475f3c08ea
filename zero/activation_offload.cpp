// defines: ActivationOffload (zero/activation_offload.h): stash, prefetch, restore, fetch, prune, wait_idle;
//          file-local: CopyWork, run_job, ActivationOffload::Worker.
//
// Activation checkpoints in the host tier (zero/activation_offload.h): the stash, the prefetch
// one recompute ahead, and the worker thread that does the copies in order.
#include "zero/activation_offload.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "core/backend.h"  // defines: backend_of (copy_to_host_async, copy_from_host_async)
#include "zero/pending.h"  // defines: timed_wait

namespace zt {

// ---------------------------------------------------------------------------------------------
// The worker: one thread running queued copies in submission order. A job's exception is kept
// and rethrown by its Work's wait() on the caller's thread.

namespace {

struct CopyWork final : Work {
  void wait() override {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    if (error) std::rethrow_exception(error);
  }
  void finish(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      error = e;
      done = true;
    }
    cv.notify_all();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
};

// Runs a job and says it is done: its exception, if any, kept for the waiter; its captures (the
// tensors) released before the Work says done.
void run_job(std::function<void()>& job, CopyWork& w) {
  std::exception_ptr error;
  try {
    job();
  } catch (...) {
    error = std::current_exception();
  }
  job = nullptr;
  w.finish(error);
}

}  // namespace

class ActivationOffload::Worker {
 public:
  Worker() : thread_([this] { run(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // the queue is run to its end first
  }
  // Queues `job` behind every job before it; `now`: runs it on the caller's thread instead. The
  // meta device's dry run copies no bytes, and a copy landed at once keeps its peaks the same from
  // run to run (a worker's lag would be the scheduler's: the dry run's forward outruns any thread).
  WorkPtr submit(std::function<void()> job, bool now = false) {
    auto w = std::make_shared<CopyWork>();
    if (now) {
      run_job(job, *w);
      return w;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back({std::move(job), w});
      last_ = w;
    }
    cv_.notify_all();
    return w;
  }
  void wait_idle() {
    WorkPtr last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last = last_;
    }
    if (last) last->wait();  // FIFO: the last job done means every job done
  }

 private:
  void run() {
    for (;;) {
      std::pair<std::function<void()>, std::shared_ptr<CopyWork>> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stop_, and nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      run_job(job.first, *job.second);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<CopyWork>>> jobs_;
  WorkPtr last_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

// ---------------------------------------------------------------------------------------------
// One checkpoint: the unit's input on the device (its Storage released while on the host) and
// its host copy. Owned by the recompute node's closure; the store keeps a weak reference.

struct ActivationOffload::Entry final : CheckpointStore::Stashed {
  Entry(ActivationOffload& o, Tensor x, Tensor h, std::string n)
      : owner(o), device(std::move(x)), host(std::move(h)), name(std::move(n)) {}
  void restore() override { owner.restore(*this); }
  ActivationOffload& owner;
  Tensor device;  // x itself: the views of autograd see its Storage filled again by the fetch
  Tensor host;    // the host copy; undefined once restored
  std::string name;
  WorkPtr to_host, to_device;  // the queued copies (to_device null until fetched)
  bool restored = false;
};

ActivationOffload::ActivationOffload(ZeroContext& cx, Allocator& host)
    : cx_(cx), host_(host), worker_(std::make_unique<Worker>()) {}

ActivationOffload::~ActivationOffload() {
  try {
    worker_->wait_idle();
  } catch (const std::exception&) {  // a destructor does not throw; the failed copy was reported by its wait
  }
}

std::shared_ptr<CheckpointStore::Stashed> ActivationOffload::stash(const Tensor& x, const std::string& name) {
  const std::shared_ptr<Storage>& st = x.storage();
  if (!x.is_contiguous() || x.offset() != 0 || !st || !st->owned() || st->bytes() != x.nbytes())
    ZT_THROW("activation_checkpointing.cpu_checkpointing: the input of unit '", name, "' (", x.str(),
             ") is not the whole of its own buffer, so its device bytes cannot be released while it is on the host");
  // The host buffer is taken now, on the caller's thread: a host cap fails here, in the forward,
  // as an OutOfMemory naming `activations` (core/memory.h).
  Tensor h = Tensor::empty(x.shape(), x.dtype(), Category::activations, host_);
  auto e = std::make_shared<Entry>(*this, x, h, name);
  Tracer* t = cx_.active_tracer();
  e->to_host = worker_->submit(
      [x, h, name, t] {
        TraceScope io(t, TraceTrack::io, "checkpoint to host " + name, "offload", {{"bytes", x.nbytes()}});
        if (x.device().is_cpu()) Tensor(h).copy_(x);
        else backend_of(x).copy_to_host_async(h, x)->wait();  // a GPU: on its to-host stream
        x.storage()->release();                               // the device's `activations` fall by x's bytes
      },
      x.device().is_meta());
  prune();  // a forward whose graph was dropped unused leaves expired entries behind
  live_.push_back(e);
  return e;
}

void ActivationOffload::fetch(Entry& e) {
  Tracer* t = cx_.active_tracer();
  // The request, on the caller's thread (the copy's span below starts when the worker gets to it).
  if (t) t->instant(TraceTrack::io, "fetch checkpoint " + e.name, "offload");
  e.to_device = worker_->submit(
      [x = e.device, h = e.host, name = e.name, t] {
        TraceScope io(t, TraceTrack::io, "checkpoint to device " + name, "offload", {{"bytes", x.nbytes()}});
        x.storage()->materialize();  // a device cap fails here, rethrown by the restore's wait
        if (x.device().is_cpu()) Tensor(x).copy_(h);
        else backend_of(x).copy_from_host_async(x, h)->wait();  // a GPU: on its to-device stream
      },
      e.device.device().is_meta());
}

// Checkpoints restored, or freed with a graph that never ran backward, leave the list.
void ActivationOffload::prune() {
  std::erase_if(live_, [](const std::weak_ptr<Entry>& w) {
    const std::shared_ptr<Entry> e = w.lock();
    return !e || e->restored;
  });
}

void ActivationOffload::prefetch() {
  prune();
  if (live_.empty()) return;
  const std::shared_ptr<Entry> next = live_.back().lock();  // the next recompute's (reverse order)
  if (!next->to_device) fetch(*next);
}

void ActivationOffload::restore(Entry& e) {
  if (e.restored) return;
  if (!e.to_device) fetch(e);  // not prefetched (a backward that skipped the engine's hook): fetch now
  e.to_host->wait();           // landed long ago (the worker is FIFO); rethrows a failed copy
  timed_wait(e.to_device, &cx_.times.checkpoint_wait_s, cx_.active_tracer(), "wait checkpoint " + e.name)->wait();
  e.restored = true;
  e.host = Tensor();  // the host tier's `activations` fall by x's bytes
  prefetch();         // the next recompute's checkpoint starts back while this unit recomputes
}

void ActivationOffload::wait_idle() { worker_->wait_idle(); }

}  // namespace zt
