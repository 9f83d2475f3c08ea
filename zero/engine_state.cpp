// The engine's state beyond one step (zero/engine.h "state"): the shards a checkpoint saves and
// loads, the optimizer step count and the fp16 loss scaler for meta.json, and the memory report.
#include <algorithm>

#include "core/kernels/cast.h"   // defines: cast_
#include "optim/loss_scaler.h"   // defines: LossScaler
#include "zero/aio.h"               // defines: SwapFile
#include "zero/offload.h"           // defines: OffloadedAdamW
#include "zero/engine.h"
#include "zero/engine_unit.h"    // defines: Engine::UnitState

namespace zt {

// ---------------------------------------------------------------------------------------------
// State

std::vector<UnitShard> Engine::shards() {
  std::vector<UnitShard> out;
  for (int i = 0; i < static_cast<int>(units_.size()); ++i) {
    UnitState& s = *units_[i];
    UnitShard us;
    us.unit = s.unit->name();
    us.numel = s.ps->numel();
    us.padded_numel = s.P;
    if (offload_) {  // master, m, v of the host tier (views), or read from the swap file (copies)
      us.tensors = offload_->state(i);
      out.push_back(std::move(us));
      continue;
    }
    // "param" is what the optimizer updates: the parameters themselves (fp32) or the float32
    // master (mixed precision), so a checkpoint holds float32 parameters either way.
    const Tensor& param = mixed_ ? s.master : s.param_shard;
    us.tensors.push_back({"param", param.numel() == s.S ? param : range(param, r_ * s.S, s.S)});
    for (auto& [name, t] : opt_->state()) {  // "<unit>/exp_avg" -> this rank's part
      const std::string prefix = us.unit + "/";
      if (name.rfind(prefix, 0) != 0) continue;
      const Tensor part = t.numel() == s.S ? t : range(t, r_ * s.S, s.S);  // stage 0 holds it whole
      us.tensors.push_back({name.substr(prefix.size()), part});
    }
    out.push_back(std::move(us));
  }
  return out;
}

// The shards() views were filled in place (a checkpoint load): rebuild whatever each stage holds beyond
// this rank's shard. Stage 0 holds every optimizer tensor whole: all-gather each. Mixed precision:
// round the master into the 2-byte parameters. Then stages 0-2 gather the full parameters and
// stage 3 refreshes its persistent units.
void Engine::shards_loaded(const std::vector<UnitShard>& filled) {
  const int stage = cfg_.zero.stage;
  ZT_CHECK(filled.size() == units_.size(), "shards_loaded: ", filled.size(), " shards for ", units_.size(), " units");
  if (offload_) {  // nvme: the loaded state to the swap file; then the working parameters from the master
    for (int i = 0; i < static_cast<int>(units_.size()); ++i) offload_->store(i, filled[i].tensors);
    offload_->publish_all([this](int i, int64_t a, const Tensor& master, bool last) {
      publish_piece(*units_[i], a, master, last);
    });
  }
  std::deque<Pending> pending;
  const int64_t bucket = cfg_.zero.allgather_bucket_size;
  if (stage == 0) {
    for (auto& s : units_) {
      const Tensor whole = mixed_ ? s->master : s->ps->flat();
      all_gather_chunked(group_, range(whole, r_ * s->S, s->S), whole, bucket, pending);
    }
    for (auto& [name, t] : opt_->state()) {
      const int64_t S = t.numel() / N_;
      all_gather_chunked(group_, range(t, r_ * S, S), t, bucket, pending);
    }
    drain(pending);
    if (mixed_)
      for (auto& s : units_) cast_(s->half, s->master);
    return;
  }
  for (auto& s : units_) {
    if (mixed_ && !offload_) cast_(s->param_shard, s->master);
    if (stage == 3 && !s->persistent) free_full_params(*s);
    else if (stage == 3) fill_compute_copy(*s, pending);
    else all_gather_chunked(group_, s->param_shard, mixed_ ? s->half : s->ps->flat(), bucket, pending);
  }
  drain(pending);
}

int64_t Engine::optimizer_steps() const { return offload_ ? offload_->step_count() : opt_->step_count(); }

void Engine::set_optimizer_steps(int64_t n) {
  if (offload_) offload_->set_step_count(n);
  else opt_->set_step_count(n);
}

double Engine::loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }

nlohmann::json Engine::state_meta() const {
  nlohmann::json j = nlohmann::json::object();
  if (scaler_) {
    const LossScaler::State st = scaler_->state();
    j["loss_scaler"] = {{"scale", st.scale}, {"iter", st.iter}, {"last_overflow_iter", st.last_overflow_iter},
                        {"hysteresis_left", st.hysteresis_left}, {"skipped", st.skipped}};
  }
  return j;
}

void Engine::load_state_meta(const nlohmann::json& j) {
  if (!scaler_ || !j.contains("loss_scaler")) return;
  const nlohmann::json& l = j.at("loss_scaler");
  LossScaler::State st;
  st.scale = l.at("scale").get<double>();
  st.iter = l.at("iter").get<int64_t>();
  st.last_overflow_iter = l.at("last_overflow_iter").get<int64_t>();
  st.hysteresis_left = l.at("hysteresis_left").get<int>();
  st.skipped = l.at("skipped").get<int64_t>();
  scaler_->load_state(st);
}

MemoryReport Engine::memory_report() const {
  MemoryReport m;
  m.measured = default_allocator().stats();
  if (host_) {
    m.host = host_->stats();
    m.host_name = host_->name();
  }
  for (const SwapFile* f : {opt_swap_.get(), own_param_swap_.get()}) {
    if (!f) continue;
    const MemoryStats st = f->stats();
    for (int c = 0; c < kNumCategories; ++c) {
      m.nvme.current[c] += st.current[c];
      m.nvme.peak[c] += st.peak[c];
    }
    m.nvme.peak_total += st.peak_total;
  }
  for (auto& s : units_) {
    m.psi += s->ps->numel();
    m.psi_padded += s->P;
  }
  return m;
}

void Engine::set_tracer(Tracer* t) {
  tracer_ = t;
  group_.set_tracer(t);
  for (SwapFile* f : {opt_swap_.get(), own_param_swap_.get()})
    if (f) f->set_tracer(t);
}

// The counter tracks: the device allocator by category; with offload the host tier, and the
// swap files' reserved bytes (what memory_report() holds, sampled as the run goes).
void Engine::trace_memory() {
  Tracer* t = active_tracer();
  if (!t) return;
  t->memory(std::string("memory: device (") + default_allocator().name() + ")", default_allocator().stats());
  if (host_) t->memory(std::string("memory: host (") + host_->name() + ")", host_->stats());
  if (opt_swap_ || own_param_swap_) t->memory("memory: nvme (swap files)", memory_report().nvme);
}

}  // namespace zt
