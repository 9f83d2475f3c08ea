// defines: estimate_request — the estimator's request (zero/estimator.h) for a run: the one place
//          an EstimateRequest is filled from the engine's settings (EngineConfig) and a model.
//
// zt-train (its end-of-run table), zt-estimate, bench_capacity and the Trainer's host-tier check
// ask the estimator the same question; each gives its settings as an EngineConfig:
//   stage, zero_optimization      <- e.zero (the request's stage is e.zero.stage)
//   precision                     <- e.precision
//   micro_batch                   <- e.train_micro_batch_size_per_gpu
//   activation / cpu checkpointing <- e.activation_checkpointing, e.cpu_checkpointing
//   float32_compute               <- the model's dtype (a layout built in bf16: bf16 compute)
// seq_len 0: the model states only, no activation estimate.
#pragma once
#include <cstdint>

#include "models/model_config.h"
#include "nn/model.h"
#include "zero/engine_config.h"
#include "zero/estimator.h"

namespace zt {

// A parameter count without a shape: set the request's psi; micro_batch and seq_len must then be 0.
EstimateRequest estimate_request(const EngineConfig& e, int64_t world_size, int64_t seq_len, int64_t threads);

// A model: `layout` is built from `m` for `world_size` ranks (a training model, or a layout-only
// one: make_model(m, ModelOptions{DType::f32, world_size, kShardAlignment, /*allocate=*/false})).
EstimateRequest estimate_request(const ModelConfig& m, Model& layout, const EngineConfig& e, int64_t world_size,
                                 int64_t seq_len, int64_t threads);

}  // namespace zt
