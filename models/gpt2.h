// defines: GPT2 — the GPT-2 model (Radford et al. 2019) as llm.c / nanoGPT build it, in units.
//
// Units in forward order, each owning one ParamSet (parameter names are Hugging Face's, within
// the unit):
//   "embed"  wte.weight (Vp, C), wpe.weight (maxT, C)
//   "h.i"    ln_1.{weight,bias} (C), attn.c_attn.{weight (3C, C), bias (3C)},
//            attn.c_proj.{weight (C, C), bias (C)}, ln_2.{weight,bias} (C),
//            mlp.c_fc.{weight (4C, C), bias (4C)}, mlp.c_proj.{weight (C, 4C), bias (C)}
//   "head"   ln_f.{weight,bias} (C); the lm_head is tied to wte: logits = ln_f(x) wte^T
//
// forward (idx int32 (B, T)):
//   x = wte[idx] + wpe[0..T)                          (B, T, C)      unit "embed"
//   x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))       (B, T, C)      unit "h.i", i = 0..L-1
//   logits = ln_f(x) wte^T                            (B, T, Vp)     unit "head" (reads "embed")
//   loss = cross_entropy over the first V columns (llm.c: padded columns take no part)
//
// Cached inference (TransformerLM::logits_cached): the tokens at positions [p, p + T) take wpe's
// rows p .. p + T - 1 (learned absolute positions: a cache cannot be shifted to new positions, a
// generation that slides its window recomputes it); each block appends c_attn's k, v (B, T, H, D).
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

// Under tensor parallelism wte holds the rank's rows of the vocabulary (Megatron's
// vocabulary-parallel embedding, parallel/vocab_parallel.h); wpe is whole.
struct GPT2Embed : Unit {
  GPT2Embed(const ModelConfig& c, DType dt, const TensorParallel& tp = {});
  // int32 (B, T), the tokens at positions [pos0, pos0 + T) -> (B, T, C); wpe's rows pos0 + t.
  Var forward(const Tensor& idx, int64_t pos0 = 0) const;
  TensorParallel tp;
  Embedding wte, wpe;
};
// Under tensor parallelism (tp.on()) the block holds its rank's share: c_attn's q, k and v heads
// and c_fc's hidden units by rows (column-parallel), c_proj's by columns (row-parallel), their
// biases added once after the sum (parallel/tensor_parallel.h); the norms whole.
struct GPT2Block : Unit {
  GPT2Block(int64_t i, const ModelConfig& c, DType dt, const TensorParallel& tp = {}, const SequenceParallel& sp = {});
  Var forward(const Var& x) const;  // (B, T, C) -> (B, T, C)
  // The same with the KV cache (nn/kv_cache.h): x holds positions [p, p + T) of layer `layer`.
  Var forward_cached(const Var& x, KVCache& cache, int64_t layer) const;
  TensorParallel tp;
  HeadExchange ulysses;  // sequence parallelism's exchange around attention (parts 1: none)
  LayerNorm ln_1;
  CausalSelfAttention attn;
  LayerNorm ln_2;
  GeluMLP mlp;
};
struct GPT2Head : Unit {
  GPT2Head(const ModelConfig& c, DType dt, const TensorParallel& tp = {});
  // (B, T, C) -> logits (B, T, Vp); refused under tensor parallelism (each rank holds Vp / tp columns).
  Var forward(const Var& x, const GPT2Embed& e) const;
  // (B, T, C) -> the mean cross-entropy over the first `vocab` logits against targets (B, T):
  // forward's classifier fused into the loss (linear_cross_entropy: the logits exist once; under
  // tensor parallelism vocab_parallel_cross_entropy: each rank's columns only).
  Var loss(const Var& x, const GPT2Embed& e, const Tensor& targets, int64_t vocab) const;
  TensorParallel tp;
  LayerNorm ln_f;
};

class GPT2 : public TransformerLM<GPT2Embed, GPT2Block, GPT2Head> {
 public:
  // Validates cfg (family must be "gpt2") and builds the units (see TransformerLM). Then init_model (models/init.h).
  explicit GPT2(const ModelConfig& cfg, const ModelOptions& opt = {})
      : TransformerLM(cfg, opt, "gpt2", "GPT2") {}
  std::string family() const override { return "gpt2"; }

  // nanoGPT's init: weights N(0, 0.02), every c_proj.weight N(0, 0.02 / sqrt(2 L)) (GPT-2
  // paper, section 2.3), biases 0, LayerNorm weight 1 / bias 0, wpe N(0, 0.02), wte N(0, 0.02)
  // on the first V rows and the padded rows [V, Vp) zero. Drawn in a fixed order (units forward,
  // parameters in layout order) by models/init.h's ModelInit.
  InitRule init_rule(const std::string& name) const;
};

}  // namespace zt
