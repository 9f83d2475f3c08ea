// defines: Llama — a Llama-style decoder (Touvron et al. 2023) in units: RMSNorm, RoPE,
//          grouped-query attention, SwiGLU, untied lm_head.
//
// Units in forward order (Hugging Face LlamaForCausalLM names, within the unit):
//   "embed"     embed_tokens.weight (Vp, C)
//   "layers.i"  input_layernorm.weight (C), self_attn.{q_proj (C, C), k_proj (kv, C),
//               v_proj (kv, C), o_proj (C, C)}.weight, post_attention_layernorm.weight (C),
//               mlp.{gate_proj (F, C), up_proj (F, C), down_proj (C, F)}.weight   (kv = Hkv * D)
//   "head"      norm.weight (C), lm_head.weight (Vp, C)  (no lm_head when tie_embeddings: the
//               head then reads embed_tokens, as GPT-2's does)
//
// forward (idx int32 (B, T)):
//   x = embed_tokens[idx]                                         (B, T, C)
//   x = x + attn(rmsnorm(x)); x = x + mlp(rmsnorm(x))              per layer, RoPE on q and k
//   logits = norm(x) lm_head^T                                     (B, T, Vp)
//   loss = cross_entropy over the first V columns
//
// Cached inference (TransformerLM::logits_cached): q and k rotate by RoPE at their absolute
// positions [p, p + T) (nn/kv_cache.h's rope_at); the cache keeps the rotated k and v of the
// n_kv_head heads only (grouped-query attention: the n_head / n_kv_head query heads of a group
// read the same cached rows).
#pragma once
#include <memory>
#include <vector>

#include "core/rng.h"
#include "models/init_rule.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "nn/layers.h"
#include "parallel/vocab_parallel.h"

namespace zt {

// Under tensor parallelism embed_tokens holds the rank's rows of the vocabulary (Megatron's
// vocabulary-parallel embedding, parallel/vocab_parallel.h), and so does an untied lm_head.
struct LlamaEmbed : Unit {
  LlamaEmbed(const ModelConfig& c, DType dt, const TensorParallel& tp = {});
  // int32 (B, T) -> (B, T, C). pos0 is unused: Llama's positions enter through RoPE.
  Var forward(const Tensor& idx, int64_t pos0 = 0) const;
  TensorParallel tp;
  Embedding embed_tokens;
};
// Under tensor parallelism (tp.on()) the layer holds its rank's share: q_proj's, k_proj's and
// v_proj's heads, gate_proj's and up_proj's hidden units (column-parallel), o_proj's and
// down_proj's columns (row-parallel); n_kv_head must be divisible by the degree.
struct LlamaLayer : Unit {
  LlamaLayer(int64_t i, const ModelConfig& c, DType dt, const TensorParallel& tp = {}, const SequenceParallel& sp = {});
  Var forward(const Var& x) const;  // (B, T, C) -> (B, T, C)
  // The same with the KV cache (nn/kv_cache.h): x holds positions [p, p + T) of layer `layer`.
  Var forward_cached(const Var& x, KVCache& cache, int64_t layer) const;
  TensorParallel tp;
  HeadExchange ulysses;  // sequence parallelism's exchange around attention (parts 1: none)
  RMSNorm input_layernorm;
  CausalSelfAttention self_attn;
  RMSNorm post_attention_layernorm;
  SwiGLUMLP mlp;
};
struct LlamaHead : Unit {
  LlamaHead(const ModelConfig& c, DType dt, const TensorParallel& tp = {});
  // (B, T, C) -> logits (B, T, Vp); `e` supplies the weight when the embeddings are tied. Refused
  // under tensor parallelism (each rank holds Vp / tp columns).
  Var forward(const Var& x, const LlamaEmbed& e) const;
  // (B, T, C) -> the mean cross-entropy over the first `vocab` logits against targets (B, T):
  // forward's classifier fused into the loss (linear_cross_entropy: the logits exist once).
  Var loss(const Var& x, const LlamaEmbed& e, const Tensor& targets, int64_t vocab) const;
  const Var& weight(const LlamaEmbed& e) const;  // lm_head.weight, or the tied embedding (Vp, C)
  TensorParallel tp;
  RMSNorm norm;
  int lm_head = -1;  // parameter index of lm_head.weight; -1 when tied
};

class Llama : public TransformerLM<LlamaEmbed, LlamaLayer, LlamaHead> {
 public:
  // Validates cfg (family must be "llama") and builds the units (see TransformerLM).
  explicit Llama(const ModelConfig& cfg, const ModelOptions& opt = {})
      : TransformerLM(cfg, opt, "llama", "Llama") {}
  std::string family() const override { return "llama"; }

  // Every weight matrix N(0, 0.02) except o_proj and down_proj N(0, 0.02 / sqrt(2 L)) (the
  // GPT-2 residual scaling); RMSNorm weights 1; padded vocabulary rows [V, Vp) of embed_tokens
  // and lm_head zero. Drawn in a fixed order (units forward, parameters in layout order) by
  // models/init.h's ModelInit.
  InitRule init_rule(const std::string& name) const;
};

}  // namespace zt
