// defines: Tracer, TraceTrack, TraceScope — one process's Chrome trace events (the trace-event
//          format that Perfetto and chrome://tracing open), recorded from any thread.
//
// A rank is a "process" of the trace (pid = rank) with three "threads" (tid = TraceTrack):
//   compute  the training thread: each unit's forward / backward / recompute, waits on
//            collectives ("wait all_gather block3"), the optimizer step, offload copies
//   comm     the communication thread: each collective from the moment it runs to its end
//   io       the NVMe tier's IO thread: each swap-file read / write from submission to completion
// and counter tracks (ph "C"): memory by category of the device allocator and of the host tier.
//
// Events (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):
//   {"ph":"X","name","cat","pid","tid","ts","dur","args"}  a span (microseconds, floating point)
//   {"ph":"i","s":"t", ...}                                 an instant on one track
//   {"ph":"C","name","pid","ts","args":{series: value}}     counters (one track per name)
//   {"ph":"M","name":"process_name"|"thread_name", ...}     the track names
// Times are microseconds since the origin: each rank sets it right after a barrier, so the
// ranks' clocks line up to within that barrier's skew.
//
// The tracer only collects; dist/trace_file.h gathers every rank's events into one file. It is
// never a global: the trainer owns it and hands a pointer to the engine, the process group and
// the swap files (a null pointer: no tracing, no cost beyond the check).
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/memory.h"  // defines: MemoryStats

namespace zt {

enum class TraceTrack : int { compute = 0, comm = 1, io = 2 };

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Tracer(int rank);

  int rank() const { return rank_; }
  void set_origin(Clock::time_point t0) { origin_ = t0; }
  // Recording can be paused (zt-train --trace-steps: only the first steps); events passed while
  // paused are dropped.
  void set_recording(bool on) { recording_ = on; }
  bool recording() const { return recording_; }

  void span(TraceTrack track, std::string name, const char* cat, Clock::time_point t0, Clock::time_point t1,
            nlohmann::json args = nullptr);
  void instant(TraceTrack track, std::string name, const char* cat, nlohmann::json args = nullptr);
  // One sample of a counter track: series name -> value (e.g. bytes per category).
  void counter(const std::string& name, Clock::time_point t, nlohmann::json series);
  // A memory sample of an allocator: its current bytes per category ("params", "grads", ...).
  void memory(const std::string& name, const MemoryStats& m);

  size_t size() const;
  // This rank's events, metadata first, as a JSON array.
  nlohmann::json events() const;

 private:
  double us(Clock::time_point t) const;
  void add(nlohmann::json e);

  int rank_;
  Clock::time_point origin_;
  bool recording_ = true;
  mutable std::mutex mu_;  // the comm and IO threads record too
  std::vector<nlohmann::json> events_;
};

// A span of the calling thread's scope on `track` (nothing when tracer is null or paused).
class TraceScope {
 public:
  TraceScope(Tracer* t, TraceTrack track, std::string name, const char* cat, nlohmann::json args = nullptr)
      : t_(t && t->recording() ? t : nullptr), track_(track), name_(std::move(name)), cat_(cat),
        args_(std::move(args)), t0_(Tracer::Clock::now()) {}
  ~TraceScope() {
    if (t_) t_->span(track_, std::move(name_), cat_, t0_, Tracer::Clock::now(), std::move(args_));
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  Tracer* t_;
  TraceTrack track_;
  std::string name_;
  const char* cat_;
  nlohmann::json args_;
  Tracer::Clock::time_point t0_;
};

}  // namespace zt
