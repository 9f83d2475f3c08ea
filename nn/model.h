// defines: Model — what the trainer, the ZeRO engine and generation see of a language model.
#pragma once
#include <string>
#include <vector>

#include "nn/kv_cache.h"
#include "nn/unit.h"

namespace zt {

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string family() const = 0;  // "gpt2" or "llama"
  // The units in forward order: the embedding, the blocks, the head. Their ParamSets hold every
  // parameter exactly once.
  virtual std::vector<Unit*> units() = 0;
  // idx, targets: int32 (B, T). Returns the mean cross-entropy loss, shape ().
  virtual Var loss(const Tensor& idx, const Tensor& targets) = 0;
  // idx: int32 (B, T). Returns logits (B, T, V) over the model's (padded) vocabulary.
  virtual Var logits(const Tensor& idx) = 0;
  // ---- cached inference (generation; nn/kv_cache.h) ----
  // The bundled families (models/transformer.h) implement both; a model of your own may leave
  // them, and then generates without a cache (GenerationOptions::use_cache = false): the
  // defaults throw zt::Error saying so.
  // An empty cache for this model: n_layer layers of (B, n_kv_head, max_seq_len, head_dim),
  // allocated by the first step (B, dtype and device from it).
  virtual KVCache make_kv_cache() const { no_cache(); }
  // Runs under no_grad. idx: int32 (B, T), the tokens at positions [cache.length(),
  // cache.length() + T); each block appends its keys and values, then the cache advances by T.
  // Returns logits (B, T, V) over the padded vocabulary, equal (to float rounding) to the last T
  // positions of logits() over the whole context. Units run in their residency scopes as in
  // logits(), so a ZeRO-3 sharded model gathers each unit for each step.
  virtual Var logits_cached(const Tensor& idx, KVCache& cache) {
    (void)idx, (void)cache;
    no_cache();
  }
  virtual int64_t vocab_size() const = 0;  // real vocabulary (logits beyond it are padding)
  virtual int64_t max_seq_len() const = 0;

  void set_residency(Residency& r) { residency_ = &r; }
  // Checkpoints the blocks (as DeepSpeed and Megatron do): the embedding has no input activation
  // to keep, and recomputing the head would redo the largest GEMM to save one (B, T, C) tensor.
  void set_activation_checkpointing(bool on) {
    std::vector<Unit*> us = units();
    for (size_t i = 0; i < us.size(); ++i) us[i]->recompute_forward = on && i > 0 && i + 1 < us.size();
  }
  int64_t num_params();  // sum over units, no padding
  void zero_grad() {
    for (Unit* u : units()) u->params().zero_grad();
  }

 protected:
  [[noreturn]] void no_cache() const {
    ZT_THROW("model family '", family(), "' has no cached inference path (Model::make_kv_cache / logits_cached): ",
             "generate without the KV cache (GenerationOptions::use_cache = false, zt-generate --no-cache)");
  }
  // Lays out every unit's flat buffers (ParamSet::finalize) once the units are built.
  void finalize_params(int64_t world_size, int64_t alignment, bool materialize) {
    for (Unit* u : units()) u->params().finalize(world_size, alignment, materialize);
  }
  Residency* residency_ = &local_residency();
};

inline int64_t Model::num_params() {
  int64_t n = 0;
  for (Unit* u : units()) n += u->params().numel();
  return n;
}

}  // namespace zt
