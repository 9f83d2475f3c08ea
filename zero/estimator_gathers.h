// defines: CountedGathers, nvme_staging_peak — stage 3's gathers and offload_param's buffers
//          replayed on sizes for the memory estimate (zero/estimator.cpp), the engine's own
//          GatherSchedule driving a counter instead of collectives.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "zero/aio.h"              // defines: kAioAlignment
#include "zero/estimator.h"        // defines: UnitSize
#include "zero/gather_schedule.h"  // defines: GatherSchedule

namespace zt::estimator_detail {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- stage 3 residency: zero/gather_schedule.h's rules, driven on sizes ----
//
// The same GatherSchedule stage 3 runs decides when each unit is gathered and freed; here a gather
// is counted instead of run. Counted: the gathered elements of non-persistent units (their peak),
// and the all-gather staging buffers (comm) of gathers in flight: a unit whose shard is larger
// than allgather_bucket_size is gathered in chunks through N x chunk staging buffers, all issued
// at once (P elements in all), until it is waited for.
// ZeRO++ hpZ (zero/zeropp.h, zero/sharded_parameters.cpp): a unit freed during a training
// forward leaves a secondary shard of P/H elements, freed when the unit's backward begins (after
// its acquire); counted the same way (their peak).
// offload_param (zero/tiers.cpp): a gather is "fetching" from its start until it is waited for
// (finish) or dropped unused (drop: its queue is drained first). Each unit's own shard size S_i
// is counted, at the moment the buffer exists, so units of unequal sizes (a tied embedding far
// larger than a block) are exact:
//   cpu  (HostParams::fetch): the shard is copied into a device buffer of S_i elements when the
//        gather starts; it lives until the gather landed. Peak sampled at each start: live +
//        the shards of every unit fetching.
//   nvme (NvmeParams::fetch): a host bounce buffer of aio(pe * S_i) bytes is read into at the
//        start and lives until the read's Pending is processed, which is in finish / drop (the
//        unit's queue is drained there); that processing copies it into a device buffer of S_i
//        elements that lives until the gather landed, in the same drain. Device peak sampled at
//        each finish / drop of a fetching unit: live (still counting the unit) + S_i. Host peak:
//        the bounce buffers of the units fetching at once.
class CountedGathers final : public GatherSchedule::Actions {
 public:
  CountedGathers(const std::vector<UnitSize>& units, const ZeroOptimization& z, int64_t N, int64_t pe)
      : schedule_(z, *this), z_(z), N_(N) {
    cpu_ = z.offload_param.device == OffloadDevice::cpu;
    nvme_ = z.offload_param.device == OffloadDevice::nvme;
    for (const UnitSize& u : units) {
      const bool persistent = GatherSchedule::persistent(u.numel, z);
      schedule_.add_unit(static_cast<int>(P_.size()), u.padded_numel, persistent, /*gathered=*/persistent);
      P_.push_back(u.padded_numel);
      bounce_.push_back(ceil_div(pe * (u.padded_numel / N), kAioAlignment) * kAioAlignment);
    }
    in_flight_.assign(P_.size(), false);
    fetching_.assign(P_.size(), false);
    secondary_.assign(P_.size(), 0);
  }
  GatherSchedule& schedule() { return schedule_; }
  int64_t peak_live() const { return peak_live_; }
  // the peak of live elements plus offload_param's device shard buffers (= peak_live without it)
  int64_t peak_live_with_shards() const { return peak_with_shards_; }
  int64_t peak_bounce_bytes() const { return peak_bounce_; }  // nvme: the read buffers at once
  int64_t peak_comm() const { return peak_comm_; }
  int64_t peak_secondary() const { return peak_secondary_; }
  void forward_begins() {
    backward_ = false;
    schedule_.forward_begins();
  }
  void backward_begins() { backward_ = true; }
  void backward_acquired(int i) {  // the unit's backward begins: its secondary has served
    secondary_live_ -= secondary_[i];
    secondary_[i] = 0;
  }

 private:
  void start(int i, bool) override {
    const int64_t live = schedule_.live_elements();  // counts unit i already
    peak_live_ = std::max(peak_live_, live);
    fetching_[i] = true;
    if (cpu_) shards_fetching_ += P_[i] / N_;
    if (nvme_) bounce_live_ += bounce_[i], peak_bounce_ = std::max(peak_bounce_, bounce_live_);
    peak_with_shards_ = std::max(peak_with_shards_, live + shards_fetching_);
    if (std::max<int64_t>(1, z_.allgather_bucket_size) < P_[i] / N_) {
      in_flight_[i] = true;
      comm_ += P_[i];
      peak_comm_ = std::max(peak_comm_, comm_);
    }
  }
  void finish(int i) override {
    if (in_flight_[i]) comm_ -= P_[i];
    in_flight_[i] = false;
    if (!fetching_[i]) return;  // landed before: no buffer left
    fetching_[i] = false;
    if (cpu_) shards_fetching_ -= P_[i] / N_;
    if (nvme_) {  // the read lands: bounce -> device shard buffer -> gather, all within this drain
      peak_with_shards_ = std::max(peak_with_shards_, schedule_.live_elements() + P_[i] / N_);
      bounce_live_ -= bounce_[i];
    }
  }
  void drop(int i) override {
    finish(i);
    if (z_.zero_hpz_partition_size > 1 && !backward_ && secondary_[i] == 0) {
      secondary_[i] = P_[i] / z_.zero_hpz_partition_size;
      secondary_live_ += secondary_[i];
      peak_secondary_ = std::max(peak_secondary_, secondary_live_);
    }
  }

  GatherSchedule schedule_;
  const ZeroOptimization& z_;
  int64_t N_;
  bool cpu_ = false, nvme_ = false;  // offload_param's tier
  std::vector<int64_t> P_;
  std::vector<int64_t> bounce_;     // nvme: bytes of unit i's bounce buffer (its swap-file region)
  std::vector<bool> in_flight_;     // a chunked gather's comm staging is live
  std::vector<bool> fetching_;      // started, not yet finished or dropped
  std::vector<int64_t> secondary_;  // hpZ: elements of unit i's secondary shard (0: none)
  bool backward_ = false;
  int64_t comm_ = 0, peak_comm_ = 0, peak_live_ = 0, secondary_live_ = 0, peak_secondary_ = 0;
  int64_t shards_fetching_ = 0, peak_with_shards_ = 0, bounce_live_ = 0, peak_bounce_ = 0;
};

// offload_param nvme, the optimizer step (zero/tiers.cpp's NvmeParams::put, finish_writes): the
// new parameters of each unit are assembled in a staging buffer of the unit's region size (its
// swap-file region, aio-rounded), units in index order (zero/offload.cpp's sub-group pieces).
// When a unit is complete its write is issued; while more than buffer_count writes are in flight
// the oldest is finished and its staging freed. The step ends with every write finished, so the
// staging buffers never meet a read's bounce buffer. Returns the peak bytes held at once.
inline int64_t nvme_staging_peak(const std::vector<UnitSize>& units, int64_t N, int64_t pe, int64_t buffer_count) {
  std::deque<int64_t> writing;  // staging bytes of the units whose writes are in flight, oldest first
  int64_t live = 0, peak = 0;
  for (const UnitSize& u : units) {
    const int64_t bytes = ceil_div(pe * (u.padded_numel / N), kAioAlignment) * kAioAlignment;
    live += bytes;  // the unit being assembled beside the writes in flight
    peak = std::max(peak, live);
    writing.push_back(bytes);
    while (static_cast<int64_t>(writing.size()) > buffer_count) live -= writing.front(), writing.pop_front();
  }
  return peak;
}

}  // namespace zt::estimator_detail
