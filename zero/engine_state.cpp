// defines: Engine's state beyond one step (zero/engine.h): shards, shards_loaded, the step count,
//          state_meta, memory_report, set_tracer.
//
// The engine's state beyond one step (zero/engine.h "state"): the shards a checkpoint saves and
// loads, the optimizer step count and the fp16 loss scaler for meta.json, the memory report and
// the tracer.
#include "zero/engine.h"

#include "zero/activation_offload.h"  // defines: ActivationOffload (wait_idle)
#include "zero/precision.h"        // defines: PrecisionPolicy
#include "zero/shard_optimizer.h"  // defines: ShardOptimizer
#include "zero/stage.h"            // defines: ZeroStage
#include "zero/tiers.h"            // defines: StorageTiers

namespace zt {

std::vector<CheckpointShard> Engine::shards() {
  std::vector<CheckpointShard> out;
  for (auto& s : units_) {
    CheckpointShard us;
    us.unit = s->unit->name();
    us.numel = s->ps->numel();
    us.padded_numel = s->P;
    us.tensors = optimizer_->state(*s);
    us.params = s->ps->infos();
    out.push_back(std::move(us));
  }
  return out;
}

// The shards() views were filled in place (a checkpoint load): the optimizer takes them (nvme:
// to the swap file; offload: the working parameters from the master), then the stage rebuilds
// whatever it holds beyond this rank's shard.
void Engine::shards_loaded(const std::vector<CheckpointShard>& filled) {
  ZT_CHECK(filled.size() == units_.size(), "shards_loaded: ", filled.size(), " shards for ", units_.size(), " units");
  std::vector<std::vector<std::pair<std::string, Tensor>>> tensors;
  for (const CheckpointShard& us : filled) tensors.push_back(us.tensors);
  optimizer_->loaded(tensors);
  stage_->parameters().loaded(/*round_master=*/!optimizer_->offloaded());
}

int64_t Engine::optimizer_steps() const { return optimizer_->step_count(); }
void Engine::set_optimizer_steps(int64_t n) { optimizer_->set_step_count(n); }
double Engine::loss_scale() const { return precision_->loss_scale(); }
nlohmann::json Engine::state_meta() const { return precision_->state_meta(); }
void Engine::load_state_meta(const nlohmann::json& j) { precision_->load_state_meta(j); }

MemoryReport Engine::memory_report() const {
  MemoryReport m;
  if (checkpoints_) checkpoints_->wait_idle();  // the checkpoints' copies landed: settled counters
  m.measured = tiers_->device().stats();
  if (Allocator* host = tiers_->host_tier()) {
    m.host = host->stats();
    m.host_name = host->name();
  }
  m.nvme = tiers_->nvme_stats();
  m.world_size = cx_.N;
  for (auto& s : units_) {
    m.psi += s->ps->numel();
    m.psi_padded += s->P;
  }
  m.model_state = model_state_;
  return m;
}

void Engine::set_tracer(Tracer* t) {
  cx_.tracer = t;
  cx_.group.set_tracer(t);
  tiers_->set_tracer(t);
}

void Engine::trace_memory() { tiers_->trace_memory(cx_.active_tracer()); }

}  // namespace zt
