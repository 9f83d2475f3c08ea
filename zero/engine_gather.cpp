// The ZeRO engine's stage-3 residency (zero/engine.h): gathering a unit's full parameters,
// freeing them, prefetching along the recorded order, and the acquire / release scopes the
// model opens around each unit (with their trace spans).
#include "zero/engine.h"

#include "core/kernels/cast.h"  // defines: cast_
#include "zero/engine_unit.h"   // defines: Engine::UnitState

namespace zt {

// Issues what makes a unit's full compute parameters (resident already) current. fp32 and bf16
// compute: the all-gather of the shards into them. Mixed with float32 compute, stages 0-2: the
// conversion of the 2-byte parameters (no communication); stage 3: the all-gather of the 2-byte
// shards into a transient 2-byte buffer, converted when it lands and then freed.
void Engine::fill_compute_copy(UnitState& s, std::deque<Pending>& q) {
  if (param_offload_) return fetch_offloaded_params(s, q);  // zero/engine_offload.cpp
  if (mixed_ && !compute_half_ && cfg_.zero.stage < 3) return cast_(s.ps->flat(), s.half);
  gather_from(s, s.param_shard, q);
}

// Stage 3: all-gathers the shards (`src`, S elements of the working dtype on the device) into
// the unit's full compute parameters.
void Engine::gather_from(UnitState& s, const Tensor& src, std::deque<Pending>& q) {
  const Tensor& flat = s.ps->flat();
  if (!mixed_ || compute_half_) {
    all_gather_chunked(group_, src, flat, cfg_.zero.allgather_bucket_size, q);
  } else {
    Tensor full = Tensor::empty({s.P}, half_, Category::params);
    all_gather_chunked(group_, src, full, cfg_.zero.allgather_bucket_size, q);
    q.push_back({completed_work(), [flat, full] { cast_(flat, full); }});
  }
}

void Engine::gather(UnitState& s, bool wait) {
  if (!s.gathered) {
    s.ps->flat().storage()->materialize();
    s.gathered = true;
    live_elements_ += s.P;
    if (Tracer* t = active_tracer())
      t->instant(TraceTrack::compute, "gather " + s.unit->name(), "gather",
                 {{"unit", s.unit->name()}, {"elements", s.P}, {"prefetch", !wait}});
    CommLabel label(group_, s.unit->name());
    fill_compute_copy(s, s.gathers);
    if (!cfg_.zero.overlap_comm) wait = true;
  }
  if (wait) drain(s.gathers);
}

void Engine::free_full_params(UnitState& s) {
  if (!gathers_ || s.persistent || !s.gathered || s.refs > 0) return;
  drain(s.gathers);  // a prefetch nobody used: let it land before freeing its buffer
  s.ps->flat().storage()->release();
  s.gathered = false;
  live_elements_ -= s.P;
  if (Tracer* t = active_tracer()) t->instant(TraceTrack::compute, "release " + s.unit->name(), "gather", {{"unit", s.unit->name()}});
}

// Gathers the units after trace position `pos` ahead of use: always the next one, then more while
// the units ahead (gathered already or not) fit stage3_prefetch_bucket_size, and never past
// stage3_max_live_parameters gathered elements.
void Engine::prefetch_after(size_t pos) {
  int64_t ahead = 0;
  for (size_t j = pos + 1; j < trace_.size(); ++j) {
    UnitState& t = *units_[trace_[j]];
    if (ahead > 0 && ahead + t.P > cfg_.zero.stage3_prefetch_bucket_size) break;
    if (!t.gathered) {
      if (live_elements_ + t.P > cfg_.zero.stage3_max_live_parameters) break;
      // offload_param nvme: at most buffer_count shard reads in flight
      if (param_swap_ && param_reads_in_flight() >= cfg_.zero.offload_param.buffer_count) break;
      gather(t, /*wait=*/false);
    }
    ahead += t.P;
  }
}

void Engine::acquire(Unit& u) {
  UnitState& s = state_of(u);
  if (!backward_scope_ && !s.fwd_open) {  // the model's forward scope (a recompute inside a backward)
    s.fwd_open = true;
    s.fwd_in_backward = in_backward_;
    s.fwd_t0 = Tracer::Clock::now();
  }
  if (!gathers_) return;
  bool prefetch = false;
  size_t pos = 0;
  if (cfg_.zero.stage != 3 || evaluating_) {
    // mixed stages 0-2 convert on the spot (nothing to prefetch);
    // evaluation does not follow (or record) the training order: no prefetch
  } else if (tracing_) {
    trace_.push_back(s.index);
  } else if (trace_pos_ < trace_.size() && trace_[trace_pos_] == s.index) {
    prefetch = true;
    pos = trace_pos_++;
  } else {
    trace_pos_ = trace_.size();  // off the recorded path (an evaluation): no prefetch until the next step
  }
  ++s.refs;
  // This unit's own gather is issued before the prefetches: the communication thread runs
  // collectives in issue order, and this one is waited for now. (Found in a trace: the first
  // unit of each step waited behind the gathers of the units after it.)
  gather(s, /*wait=*/false);
  if (prefetch) prefetch_after(pos);
  gather(s, /*wait=*/true);
}

void Engine::release(Unit& u) {
  UnitState& s = state_of(u);
  const bool scope_end = !backward_scope_ && s.fwd_open;
  release_params(s);
  if (!scope_end) return;
  s.fwd_open = false;
  if (Tracer* t = active_tracer()) {
    const char* kind = evaluating_ ? "eval" : s.fwd_in_backward ? "recompute" : "forward";
    t->span(TraceTrack::compute, std::string(kind) + " " + u.name(), kind, s.fwd_t0, Tracer::Clock::now());
    trace_memory();
  }
}

// The end of a unit's scope: free its full parameters unless they are kept (stage 3 reuse).
void Engine::release_params(UnitState& s) {
  Unit& u = *s.unit;
  if (!gathers_) return;
  ZT_CHECK(s.refs > 0, "release of unit '", u.name(), "' without an acquire");
  --s.refs;
  // stage3_max_reuse_distance: keep the unit if the recorded order uses it again soon.
  if (cfg_.zero.stage == 3 && !tracing_ && !evaluating_ && trace_pos_ < trace_.size()) {
    int64_t distance = 0;
    for (size_t j = trace_pos_; j < trace_.size(); ++j) {
      if (trace_[j] == s.index) {
        if (distance <= cfg_.zero.stage3_max_reuse_distance && cfg_.zero.stage3_max_reuse_distance > 0) return;
        break;
      }
      distance += units_[trace_[j]]->P;
    }
  }
  free_full_params(s);
}

}  // namespace zt
