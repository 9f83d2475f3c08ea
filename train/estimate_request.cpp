// defines: estimate_request, both forms (train/estimate_request.h).
#include "train/estimate_request.h"

namespace zt {

EstimateRequest estimate_request(const EngineConfig& e, int64_t world_size, int64_t seq_len, int64_t threads) {
  EstimateRequest r;
  r.stage = e.zero.stage;
  r.world_size = world_size;
  r.precision = e.precision;
  r.micro_batch = e.train_micro_batch_size_per_gpu;
  r.seq_len = seq_len;
  r.activation_checkpointing = e.activation_checkpointing;
  r.cpu_checkpointing = e.cpu_checkpointing;
  r.zero = e.zero;
  r.threads = threads;
  return r;
}

EstimateRequest estimate_request(const ModelConfig& m, Model& layout, const EngineConfig& e, int64_t world_size,
                                 int64_t seq_len, int64_t threads) {
  EstimateRequest r = estimate_request(e, world_size, seq_len, threads);
  r.has_model = true;
  r.model = model_shape(m, layout, world_size);
  // The model's dtype is the compute dtype: a model built in the precision's 2-byte type (bf16
  // compute, a GPU's default) has no float32 copies and 2-byte activations (on the CPU that mode
  // runs through float32 stand-ins this estimate does not count: it is the GPU's).
  const std::vector<Unit*> units = layout.units();
  const DType half = e.precision == Precision::bf16 ? DType::bf16 : DType::f16;
  r.float32_compute = !(e.precision != Precision::f32 && !units.empty() && units[0]->params().dtype() == half);
  return r;
}

}  // namespace zt
