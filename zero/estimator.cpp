#include "zero/estimator.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/check.h"
#include "core/kernels/attention.h"
#include "zero/aio.h"  // defines: kAioAlignment

namespace zt {

namespace {

int idx(Category c) { return static_cast<int>(c); }
int64_t param_elem(Precision p) { return p == Precision::f32 ? 4 : 2; }  // parameters and gradients
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- stage 3 residency: the acquire / release rules of zero/stage3_parameter_sharded.cpp, replayed on sizes ----
//
// Units start gathered only if persistent (numel <= stage3_param_persistence_threshold). The
// first step records the order of acquires (the trace) and frees each unit at its release; later
// steps prefetch along the trace (bounded by stage3_max_live_parameters and
// stage3_prefetch_bucket_size) and keep a released unit gathered when the trace uses it again
// within stage3_max_reuse_distance elements. The step's end frees every non-persistent unit.
// Also tracks the all-gather staging buffers (comm) of prefetches still in flight.
struct Stage3Sim {
  std::vector<int64_t> P;
  std::vector<bool> persistent, gathered, in_flight;
  std::vector<int> refs;
  const ZeroOptimization& z;
  int64_t live = 0, peak_live = 0;     // elements of gathered non-persistent full buffers
  int64_t comm = 0, peak_comm = 0;     // elements of all-gather staging buffers in flight
  int64_t S_of(size_t i) const { return P[i] / n; }
  int64_t n = 1;
  std::vector<int> trace;
  size_t pos = 0;
  bool tracing = true;

  Stage3Sim(const std::vector<UnitSize>& units, const ZeroOptimization& zo, int64_t world) : z(zo), n(world) {
    for (const UnitSize& u : units) {
      P.push_back(u.padded_numel);
      persistent.push_back(u.numel <= z.stage3_param_persistence_threshold);
    }
    gathered = persistent;
    in_flight.assign(P.size(), false);
    refs.assign(P.size(), 0);
  }
  bool chunked(size_t i) const { return std::max<int64_t>(1, z.allgather_bucket_size) < S_of(i); }
  void gather(size_t i, bool wait) {
    if (!gathered[i]) {
      gathered[i] = true;
      live += P[i];
      peak_live = std::max(peak_live, live);
      if (chunked(i)) {  // N x chunk staging buffers, one per chunk, all issued at once
        in_flight[i] = true;
        comm += P[i];
        peak_comm = std::max(peak_comm, comm);
      }
      if (!z.overlap_comm) wait = true;
    }
    if (wait) finish(i);
  }
  void finish(size_t i) {
    if (in_flight[i]) comm -= P[i];
    in_flight[i] = false;
  }
  void free_full(size_t i) {
    if (persistent[i] || !gathered[i] || refs[i] > 0) return;
    finish(i);
    gathered[i] = false;
    live -= P[i];
  }
  void prefetch_after(size_t p) {  // Engine::prefetch_after's rule
    int64_t ahead = 0;
    for (size_t j = p + 1; j < trace.size(); ++j) {
      const size_t t = static_cast<size_t>(trace[j]);
      if (ahead > 0 && ahead + P[t] > z.stage3_prefetch_bucket_size) break;
      if (!gathered[t]) {
        if (live + P[t] > z.stage3_max_live_parameters) break;
        gather(t, false);
      }
      ahead += P[t];
    }
  }
  // ParameterSharded::acquire's order: this unit's own gather is issued first, then the
  // prefetches (bounded by what is gathered, this unit included), then this one is waited for.
  void acquire(size_t i) {
    bool prefetch = false;
    size_t at = 0;
    if (tracing) trace.push_back(static_cast<int>(i));
    else if (pos < trace.size() && trace[pos] == static_cast<int>(i)) prefetch = true, at = pos++;
    else pos = trace.size();
    ++refs[i];
    gather(i, false);
    if (prefetch) prefetch_after(at);
    gather(i, true);
  }
  void release(size_t i) {
    --refs[i];
    if (!tracing && pos < trace.size()) {
      int64_t distance = 0;
      for (size_t j = pos; j < trace.size(); ++j) {
        if (trace[j] == static_cast<int>(i)) {
          if (distance <= z.stage3_max_reuse_distance && z.stage3_max_reuse_distance > 0) return;
          break;
        }
        distance += P[static_cast<size_t>(trace[j])];
      }
    }
    free_full(i);
  }
  void end_step() {
    for (size_t i = 0; i < P.size(); ++i) free_full(i);
    tracing = false;
  }
};

// The residency events of one training micro-step in order (models/transformer.h's forward loop,
// autograd/backward.cpp's before/after_backward hooks): +1 acquire unit i, -1 release unit i.
// Units: 0 = embed, 1..L = blocks, L+1 = head. Tied: the head's forward also holds the embedding,
// and in backward the embedding's span runs from the head's matmul to the token lookup.
struct Event { bool acquire; size_t unit; bool backward; };
std::vector<Event> step_events(size_t n_units, bool tied) {
  const size_t E = 0, H = n_units - 1;
  std::vector<Event> ev;
  for (size_t i = 0; i < H; ++i) ev.insert(ev.end(), {{true, i, false}, {false, i, false}});
  if (tied) ev.push_back({true, E, false});
  ev.insert(ev.end(), {{true, H, false}, {false, H, false}});
  if (tied) ev.push_back({false, E, false});
  if (tied) ev.push_back({true, E, true});
  ev.insert(ev.end(), {{true, H, true}, {false, H, true}});
  for (size_t i = H - 1; i >= 1; --i) ev.insert(ev.end(), {{true, i, true}, {false, i, true}});
  if (!tied) ev.push_back({true, E, true});
  ev.push_back({false, E, true});
  return ev;
}

// Stages 2-3: full gradient buffers (elements) alive during backward, and the reduce-scatter
// staging buffers (comm elements). A unit's buffer appears at its before_backward and goes when
// its reduction finishes: at once, or with overlap_comm when the next unit's reduction starts.
// Chunks of reduce_bucket_size: one chunk covering the shard reduces from the buffer itself into
// an S-element output; smaller chunks pack N x chunk inputs plus chunk outputs (P + S in all).
void grad_and_reduce_peaks(const std::vector<UnitSize>& units, const std::vector<Event>& ev, int stage,
                           const ZeroOptimization& z, int64_t N, int64_t* grad_peak, int64_t* comm_peak) {
  std::vector<int64_t> live_grad(units.size(), 0), live_comm(units.size(), 0);
  std::vector<bool> pending(units.size(), false);  // reduction started, not finished
  int64_t g = 0, c = 0;
  *grad_peak = 0;
  *comm_peak = 0;
  const int64_t chunk = std::max<int64_t>(1, z.reduce_bucket_size);
  for (const Event& e : ev) {
    if (!e.backward) continue;
    const size_t i = e.unit;
    const int64_t P = units[i].padded_numel, S = P / N;
    if (e.acquire) {
      if (stage >= 2) live_grad[i] = P, g += P;
      *grad_peak = std::max(*grad_peak, g);
      continue;
    }
    if (stage == 0) continue;  // all-reduce in place
    auto finish = [&](size_t j) {  // the reduction's last chunk frees the full gradient (stages 2-3)
      g -= live_grad[j], c -= live_comm[j], live_grad[j] = live_comm[j] = 0, pending[j] = false;
    };
    if (z.overlap_comm)  // this unit's reduction first finishes every other one still in flight
      for (size_t j = 0; j < units.size(); ++j)
        if (j != i && pending[j]) finish(j);
    live_comm[i] = chunk >= S ? S : P + S;
    c += live_comm[i];
    pending[i] = true;
    *comm_peak = std::max(*comm_peak, c);
    if (!z.overlap_comm) finish(i);
  }
}

void check_request(const EstimateRequest& r) {
  if (r.stage < 0 || r.stage > 3)
    ZT_THROW("estimate: stage = ", r.stage, ": expected 0, 1, 2 or 3 (zero_optimization.stage)");
  if (r.world_size < 1) ZT_THROW("estimate: world_size = ", r.world_size, ": expected >= 1");
  if (r.micro_batch < 0 || r.seq_len < 0)
    ZT_THROW("estimate: micro_batch = ", r.micro_batch, ", seq_len = ", r.seq_len, ": expected >= 0");
  if (r.threads < 1) ZT_THROW("estimate: threads = ", r.threads, ": expected >= 1");
  if (!r.has_model) {
    if (r.psi < 1) ZT_THROW("estimate: psi = ", r.psi, ": expected a parameter count >= 1 (or a model)");
    if (r.micro_batch > 0 || r.seq_len > 0)
      ZT_THROW("estimate: activations (micro_batch, seq_len) need a model shape, not only a parameter count");
    return;
  }
  const ModelShape& m = r.model;
  if (m.family != "gpt2" && m.family != "llama")
    ZT_THROW("estimate: model family \"", m.family, "\": expected \"gpt2\" or \"llama\"");
  if (m.units.size() != static_cast<size_t>(m.n_layer) + 2 || m.n_layer < 1)
    ZT_THROW("estimate: the model shape has ", m.units.size(), " units for n_layer = ", m.n_layer,
             ": expected embed, n_layer blocks, head");
  if (m.n_head < 1 || m.n_kv_head < 1 || m.n_embd % m.n_head != 0)
    ZT_THROW("estimate: n_embd = ", m.n_embd, ", n_head = ", m.n_head, ", n_kv_head = ", m.n_kv_head,
             ": expected n_head | n_embd and n_kv_head >= 1");
  for (const UnitSize& u : m.units)
    if (u.padded_numel % r.world_size != 0 || u.padded_numel < u.numel)
      ZT_THROW("estimate: unit '", u.name, "' is padded to ", u.padded_numel, " elements, not a multiple of world_size ",
               r.world_size, ": build the layout with ModelOptions{world_size = ", r.world_size, "}");
}

}  // namespace

std::vector<UnitSize> unit_sizes(Model& m, int64_t world_size, int64_t alignment) {
  ZT_CHECK(world_size >= 1 && alignment >= 1, "unit_sizes: world_size ", world_size, ", alignment ", alignment);
  const int64_t mult = world_size * alignment;
  std::vector<UnitSize> out;
  for (Unit* u : m.units()) {
    const ParamSet& ps = u->params();
    int64_t padded = ps.padded_numel();
    if (!ps.finalized()) padded = std::max<int64_t>(1, ceil_div(ps.numel(), mult)) * mult;  // ParamSet::finalize
    out.push_back({u->name(), ps.numel(), padded});
  }
  return out;
}

int64_t Estimate::model_state_total() const {
  int64_t s = 0;
  for (int64_t b : model_state) s += b;
  return s;
}

int64_t Estimate::peak_sum() const {
  int64_t s = 0;
  for (int64_t b : peak) s += b;
  return s;
}

int64_t model_state_bytes_x_n(Category c, int64_t psi, int stage, int64_t N, Precision p) {
  const int64_t e = param_elem(p), k = p == Precision::f32 ? 8 : 12;  // K: fp32 m + v; mixed master + m + v
  switch (c) {
    case Category::params: return stage == 3 ? e * psi : e * psi * N;
    case Category::grads: return stage >= 2 ? e * psi : e * psi * N;
    case Category::optim: return stage >= 1 ? k * psi : k * psi * N;
    default: return 0;
  }
}

// ---- the estimate --------------------------------------------------------------------------

Estimate estimate(const EstimateRequest& r) {
  check_request(r);
  Estimate est;
  const int64_t N = r.world_size;
  if (r.has_model) {
    for (const UnitSize& u : r.model.units) est.psi += u.numel, est.psi_padded += u.padded_numel;
  } else {
    est.psi = est.psi_padded = r.psi;
  }
  for (Category c : {Category::params, Category::grads, Category::optim})
    est.model_state[idx(c)] = ceil_div(model_state_bytes_x_n(c, est.psi_padded, r.stage, N, r.precision), N);
  const int64_t pe = param_elem(r.precision);
  // Offload (zero/offload.h, zero/tiers.cpp, zero/shard_optimizer.cpp): the moved model states leave the device.
  // optimizer: master + m + v, 12 bytes per shard element, to the host (or the swap file); the
  // gradient shard to the host (stages 2-3 reduce into it: none stays on the device; stage 1
  // copies it, the full gradient stays). parameters (stage 3): the shard to the host or the file.
  const int64_t shard = ceil_div(est.psi_padded, N);
  const OffloadConfig& oo = r.zero.offload_optimizer;
  const OffloadConfig& op = r.zero.offload_param;
  if (oo.enabled()) {
    est.model_state[idx(Category::optim)] = 0;
    (oo.device == "nvme" ? est.nvme_state : est.host_state)[idx(Category::optim)] = 12 * shard;
    est.host_state[idx(Category::grads)] = pe * shard;
    if (r.stage >= 2) est.model_state[idx(Category::grads)] = 0;
  }
  if (op.enabled()) {
    est.model_state[idx(Category::params)] = 0;
    (op.device == "nvme" ? est.nvme_state : est.host_state)[idx(Category::params)] = pe * shard;
  }
  // The nvme tier's host buffers (zero/offload.cpp, zero/tiers.cpp's NvmeParams), sized from the
  // largest unit shard: the optimizer's min(buffer_count, sub-groups) sub-group buffers (master,
  // m, v: 12 bytes per element, rounded up to O_DIRECT's 4096); the parameters' staging buffers
  // of the writes in flight (at most buffer_count) plus the bounce buffer of a read (measured:
  // bench/results/capacity.md). Upper bounds of what a step holds at once.
  if (r.has_model && (oo.device == "nvme" || op.device == "nvme")) {
    int64_t largest = 0, sub_groups = 0;
    const int64_t sg = std::max<int64_t>(1, r.zero.sub_group_size);
    for (const UnitSize& u : r.model.units) {
      largest = std::max(largest, u.padded_numel / N);
      sub_groups += ceil_div(u.padded_numel / N, sg);
    }
    const auto aio = [](int64_t bytes) { return ceil_div(bytes, kAioAlignment) * kAioAlignment; };
    const int64_t n_units = static_cast<int64_t>(r.model.units.size());
    if (oo.device == "nvme")
      est.host_state[idx(Category::optim)] = std::min(oo.buffer_count, sub_groups) * aio(12 * std::min(sg, largest));
    if (op.device == "nvme")
      est.host_state[idx(Category::params)] = (std::min(op.buffer_count, n_units) + 1) * aio(pe * largest);
  }
  est.peak = est.model_state;
  int64_t mixed_workspace = 0, mixed_workspace_in_backward = 0;
  int64_t comm = 8;  // the step's scalar all-reduces (loss, gradient norm): one float64 at a time
  if (r.has_model) {
    const std::vector<UnitSize>& units = r.model.units;
    const std::vector<Event> ev = step_events(units.size(), r.model.tie_embeddings);
    const bool mixed = r.precision != Precision::f32;
    int64_t grad_live = 0, reduce_comm = 0, gather_comm = 0, publish_comm = 0;
    grad_and_reduce_peaks(units, ev, r.stage, r.zero, N, &grad_live, &reduce_comm);
    // fp32 stages 2-3: the full float32 gradient of the units in backward (grads). Mixed stages
    // 2-3: the same spans hold the unit's 2-byte gradient copy that is being reduced (comm).
    if (!mixed) est.peak[idx(Category::grads)] += grad_live * pe;
    else reduce_comm += grad_live;
    int64_t gathered = 0;  // elements of float32 full parameters resident at once (stage 3 / mixed)
    if (r.stage == 3) {
      Stage3Sim sim(units, r.zero, N);
      for (int step = 0; step < 2; ++step) {  // the tracing step, then a steady one
        for (const Event& e : ev) e.acquire ? sim.acquire(e.unit) : sim.release(e.unit);
        sim.end_step();
      }
      int64_t persistent = 0;
      for (size_t i = 0; i < units.size(); ++i)
        if (sim.persistent[i]) persistent += units[i].padded_numel;
      gathered = persistent + sim.peak_live;
      gather_comm = sim.peak_comm;
      // offload_param: a unit's shard reaches the device in a shard-sized buffer that lives until
      // its gather landed (zero/tiers.cpp's HostParams). cpu: one per gathered non-persistent unit
      // (a prefetch issues its copy with its gather); nvme: one at a time (a unit's copy is issued
      // when its read lands, which is processed at its acquire, after the unit before landed).
      // The persistent units' copies come at the step's end, outside the blocks' peak.
      if (op.enabled()) {
        int64_t largest_shard = 0;
        for (size_t i = 0; i < units.size(); ++i)
          if (!sim.persistent[i]) largest_shard = std::max(largest_shard, units[i].padded_numel / N);
        est.peak[idx(Category::params)] += (op.device == "nvme" ? largest_shard : ceil_div(sim.peak_live, N)) * pe;
      }
      if (!mixed) {
        est.peak[idx(Category::params)] += gathered * pe;
      } else {
        // the 2-byte full buffer a gather lands in lives until the gather is waited for: one
        // unit at a time without overlap_comm, at most every gathered unit with prefetch
        int64_t largest = 0;
        for (const UnitSize& u : units) largest = std::max(largest, u.padded_numel);
        est.peak[idx(Category::params)] += (r.zero.overlap_comm ? gathered : largest) * pe;
      }
    }
    if (mixed && r.float32_compute) {
      // This CPU backend computes in float32 (zero/engine.h): between acquire and release each
      // unit has a float32 copy of its parameters, and during its backward a float32 gradient
      // (both workspace). Replayed along the step's events; stage 3 adds what prefetch and
      // persistence keep gathered (an upper bound: their peaks are added).
      int64_t copies = 0, grads32 = 0, joint = 0;
      std::vector<int> refs(units.size(), 0);
      for (const Event& e : ev) {
        const int64_t P = units[e.unit].padded_numel;
        if (e.acquire && refs[e.unit]++ == 0) copies += P;
        if (!e.acquire && --refs[e.unit] == 0) copies -= P;
        if (e.backward) grads32 += e.acquire ? P : -P;
        joint = std::max(joint, (r.stage == 3 ? gathered : copies) + grads32);
      }
      int64_t largest_shard = 0;  // the step converts one unit's gradient shard at a time
      for (const UnitSize& u : units) largest_shard = std::max(largest_shard, r.stage == 0 ? u.padded_numel : u.padded_numel / N);
      mixed_workspace = std::max(4 * joint, 4 * largest_shard);
      mixed_workspace_in_backward = 4 * joint;
    }
    // Stages 1-2 publish every unit after the update (stage 3: the persistent ones), all
    // chunked all-gathers issued before any is waited for.
    for (const UnitSize& u : units) {
      const bool publishes = r.stage == 1 || r.stage == 2 || (r.stage == 3 && u.numel <= r.zero.stage3_param_persistence_threshold);
      if (publishes && std::max<int64_t>(1, r.zero.allgather_bucket_size) < u.padded_numel / N) publish_comm += u.padded_numel;
    }
    // Gathers and reductions are in flight together only under overlap_comm (else each is
    // waited for where it is issued).
    const int64_t backward_comm = r.zero.overlap_comm ? reduce_comm + gather_comm : std::max(reduce_comm, gather_comm);
    comm = std::max({comm, backward_comm * pe, publish_comm * pe});
    // Activations and the attention scratch are float32 on this backend whatever the precision.
    const int64_t ae = r.precision == Precision::f32 || r.float32_compute ? 4 : 2;
    if (r.micro_batch > 0 && r.seq_len > 0) {
      const bool cpu_ckpt = r.activation_checkpointing && r.cpu_checkpointing;
      est.peak[idx(Category::activations)] =
          estimate_activations(r.model, r.micro_batch, r.seq_len, r.activation_checkpointing, ae, cpu_ckpt ? 2 : -1).peak;
      if (cpu_ckpt)  // every block's input (B, T, C), between its forward and its recompute
        est.host_state[idx(Category::activations)] = r.model.n_layer * r.micro_batch * r.seq_len * r.model.n_embd * ae;
      est.has_activations = true;
      // The largest scratch of one op's backward: attention's tiles per thread, the P and dS
      // tiles (Br, Bc) and the row vector Dl (T) (core/kernels/attention.h; tiles no larger
      // than T; GQA adds (B, H, T, D) for dK and dV), or LayerNorm's / RMSNorm's per-chunk
      // partial sums of the gain (and bias) gradients, (min(B*T, 64), C) each
      // (core/kernels/norm.cpp).
      const int64_t T = r.seq_len, H = r.model.n_head, D = r.model.n_embd / H;
      const AttentionTiles tiles;
      const int64_t br = std::min(tiles.q, T), bc = std::min(tiles.k, T);
      int64_t attn = r.threads * (2 * br * bc + T) * ae;
      if (r.model.n_kv_head < H) attn += 2 * r.micro_batch * H * T * D * ae;
      const int64_t norm = (r.model.family == "gpt2" ? 2 : 1) * std::min<int64_t>(r.micro_batch * T, 64) * r.model.n_embd * ae;
      est.peak[idx(Category::workspace)] = std::max(attn, norm);
    }
    // the attention scratch exists inside a unit's backward, beside that unit's float32 buffers
    if (mixed_workspace > 0)
      est.peak[idx(Category::workspace)] =
          std::max(mixed_workspace, est.peak[idx(Category::workspace)] + mixed_workspace_in_backward);
  }
  est.peak[idx(Category::comm)] = comm;
  return est;
}

}  // namespace zt
