// defines: CommEstimate::total, estimate_comm (zero/estimator.h); file-local: GatherLog, Counts
//
// The bytes one rank moves in a steady training step, counted the way dist/process_group.cpp
// counts them, from what the stage's policies issue (zero/stage.h, zero/zeropp.cpp): per collective
// call, the ring convention factor * n * b * (N - 1) / N over the call's group, on the link to the
// rank's ring successor in that group; an all-to-all's blocks each on the link to their rank; a
// sub-group's bytes in the world's. Chunks: reduce_bucket_size / allgather_bucket_size elements
// per call, as the stages cut them. Stage 3's gathers are the ones GatherSchedule starts in the
// replayed micro-steps (zero/estimator_events.h), each from the world (qwZ: quantized codes and
// scales) or, with hpZ, from the secondary shards a training forward's release left (kept until
// the unit's backward begins).
#include <algorithm>

#include "core/check.h"
#include "core/kernels/quantize.h"  // defines: quantized_code_bytes, quantized_blocks
#include "dist/process_group.h"     // defines: ring_bytes
#include "zero/estimator.h"
#include "zero/estimator_events.h"  // defines: Event, step_events
#include "zero/gather_schedule.h"   // defines: GatherSchedule
#include "zero/precision.h"         // defines: PrecisionPolicy::working_bytes
#include "zero/stage.h"             // defines: stage_keeps

namespace zt {

namespace {

// Stage 3's gathers of the replayed step, in order: the unit, and whether from its secondary.
class GatherLog final : public GatherSchedule::Actions {
 public:
  GatherLog(const std::vector<UnitSize>& units, const ZeroOptimization& z) : schedule_(z, *this) {
    for (const UnitSize& u : units) {
      const bool persistent = GatherSchedule::persistent(u.numel, z);
      schedule_.add_unit(static_cast<int>(secondary_.size()), u.padded_numel, persistent, persistent);
      secondary_.push_back(false);
    }
  }
  GatherSchedule& schedule() { return schedule_; }
  bool keep_secondary = false;  // the release being replayed is a training forward's (hpZ)
  bool logging = false;
  std::vector<std::pair<int, bool>> gathers;
  void stale() { std::fill(secondary_.begin(), secondary_.end(), false); }  // the update published
  void backward_acquired(int i) { secondary_[i] = false; }  // its backward begins: the secondary has served

 private:
  void start(int i, bool) override {
    if (logging) gathers.push_back({i, secondary_[i]});
  }
  void finish(int) override {}
  void drop(int i) override { secondary_[i] = secondary_[i] || keep_secondary; }
  GatherSchedule schedule_;
  std::vector<bool> secondary_;
};

// A rank's counters, as ProcessGroup keeps them.
struct Counts {
  CommEstimate e;
  // One call of `c` whose ring bytes are factor * n * b * (G - 1) / G on a group of G ranks.
  void ring(Collective c, int64_t factor, int64_t n, int64_t b, int64_t G, bool inter) {
    const int64_t bytes = ring_bytes(factor, n, b, G);
    e.bytes[static_cast<int>(c)] += bytes;
    e.link[inter ? 1 : 0] += bytes;
  }
  // One all-to-all of `block` bytes per peer over `peers` other ranks, all on one link class.
  void all_to_all(int64_t block, int64_t peers, bool inter) {
    e.bytes[static_cast<int>(Collective::all_to_all)] += block * peers;
    e.link[inter ? 1 : 0] += block * peers;
  }
};

}  // namespace

int64_t CommEstimate::total() const {
  int64_t s = 0;
  for (int64_t b : bytes) s += b;
  return s;
}

CommEstimate estimate_comm(const EstimateRequest& r, const Topology& t, int64_t grad_accum) {
  using estimator_detail::Event;
  ZT_CHECK(r.has_model, "estimate_comm: needs a model (its units), not a bare parameter count");
  const int64_t N = t.size(), rank = t.rank;
  ZT_CHECK(r.world_size == N, "estimate_comm: the request is for ", r.world_size, " ranks, the topology has ", N);
  ZT_CHECK(grad_accum >= 1, "estimate_comm: gradient_accumulation_steps = ", grad_accum, ", expected >= 1");
  const ZeroOptimization& z = r.zero;
  const StageKeeps keeps = stage_keeps(r.stage);
  const std::vector<UnitSize>& units = r.model.units;
  const int64_t b = PrecisionPolicy::working_bytes(r.precision);  // parameters and gradients as they travel
  const bool world_inter = !t.same_node(static_cast<int>(rank), static_cast<int>((rank + 1) % N));
  const int64_t gather_chunk = std::max<int64_t>(1, z.allgather_bucket_size);
  const int64_t reduce_chunk = std::max<int64_t>(1, z.reduce_bucket_size);
  Counts c;

  // A primary gather of unit i (stage 3's fill, stages 1-2's publish): plain or qwZ's.
  const bool qw = z.zero_quantized_weights && N > 1;
  auto gather_primary = [&](size_t i) {
    const int64_t S = units[i].padded_numel / N;
    for (int64_t a = 0; a < S; a += gather_chunk) {
      const int64_t n = std::min(gather_chunk, S - a);
      if (!qw) {
        c.ring(Collective::all_gather, 1, N * n, b, N, world_inter);
        continue;
      }
      c.ring(Collective::all_gather, 1, N * quantized_code_bytes(n, 8), 1, N, world_inter);
      c.ring(Collective::all_gather, 1, N * quantized_blocks(n, z.zero_quantization_block_size), 4, N, world_inter);
    }
  };
  // hpZ: unit i gathered from the secondary shards of its H ranks (one node: an intra-node ring).
  const int64_t H = z.zero_hpz_partition_size;
  auto gather_secondary = [&](size_t i) {
    const int64_t m = units[i].padded_numel / H;
    for (int64_t a = 0; a < m; a += gather_chunk)
      c.ring(Collective::all_gather, 1, H * std::min(gather_chunk, m - a), b, H, false);
  };
  // One reduction of unit i's gradient (stages 1-3): the reduce-scatter, or qgZ's two hops.
  const int64_t K = t.num_nodes(), M = t.local_size();
  auto reduce = [&](size_t i) {
    const int64_t S = units[i].padded_numel / N;
    for (int64_t a = 0; a < S; a += reduce_chunk) {
      const int64_t n = std::min(reduce_chunk, S - a);
      if (!(z.zero_quantized_gradients && keeps.grads_sharded)) {
        c.ring(Collective::reduce_scatter, 1, N * n, b, N, world_inter);
        continue;
      }
      const int bits = z.zero_quantized_gradients_bits;
      const int64_t blk = z.zero_quantization_block_size;
      if (M > 1) {
        c.all_to_all(quantized_code_bytes(K * n, bits), M - 1, false);
        c.all_to_all(quantized_blocks(K * n, blk) * 4, M - 1, false);
      }
      if (K > 1) {
        c.all_to_all(quantized_code_bytes(n, bits), K - 1, true);
        c.all_to_all(quantized_blocks(n, blk) * 4, K - 1, true);
      }
    }
  };

  // The loss (one double, every stage) and, once the optimizer is sharded, the gradient norm.
  c.ring(Collective::all_reduce, 2, 1, 8, N, world_inter);
  if (keeps.optimizer_sharded) c.ring(Collective::all_reduce, 2, 1, 8, N, world_inter);

  if (!keeps.optimizer_sharded) {  // stage 0: each unit's gradient all-reduced at the boundary
    for (const UnitSize& u : units)
      for (int64_t a = 0; a < u.padded_numel; a += reduce_chunk)
        c.ring(Collective::all_reduce, 2, std::min(reduce_chunk, u.padded_numel - a), b, N, world_inter);
    return c.e;
  }
  for (size_t i = 0; i < units.size(); ++i)  // stage 1 at the boundary; stages 2-3 every micro-step
    for (int64_t m = 0; m < (keeps.grads_sharded ? grad_accum : 1); ++m) reduce(i);
  if (!keeps.params_sharded) {  // stages 1-2: the updated shards all-gathered into the full parameters
    for (size_t i = 0; i < units.size(); ++i) gather_primary(i);
    return c.e;
  }
  // Stage 3: replay the recording step, then log the gathers of a steady one.
  GatherLog log(units, z);
  GatherSchedule& schedule = log.schedule();
  const std::vector<Event> ev = estimator_detail::step_events(units.size(), r.model.tie_embeddings);
  for (int step = 0; step < 2; ++step) {
    log.logging = step == 1;
    for (int64_t m = 0; m < grad_accum; ++m) {
      schedule.forward_begins();
      bool backward = false;
      for (const Event& e : ev) {
        backward = backward || e.backward;
        const int i = static_cast<int>(e.unit);
        if (e.acquire) {
          schedule.acquire(i, false);
          if (e.backward) log.backward_acquired(i);
        } else {
          log.keep_secondary = H > 1 && !backward;
          schedule.release(i, false);
          log.keep_secondary = false;
        }
      }
      schedule.micro_step_done();
    }
    // the publish: persistent units gathered again (primary), the others freed, secondaries stale
    for (size_t i = 0; i < units.size(); ++i) {
      if (schedule.persistent(static_cast<int>(i))) {
        if (log.logging) log.gathers.push_back({static_cast<int>(i), false});
      } else {
        schedule.free_unit(static_cast<int>(i));
      }
    }
    log.stale();
  }
  for (const auto& [i, from_secondary] : log.gathers)
    from_secondary ? gather_secondary(static_cast<size_t>(i)) : gather_primary(static_cast<size_t>(i));
  return c.e;
}

}  // namespace zt
