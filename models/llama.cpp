// defines: LlamaEmbed (constructor), LlamaLayer (constructor, forward, forward_cached), LlamaHead
//          (constructor, forward), Llama (init_rule) (models/llama.h)
#include "models/llama.h"

#include <cmath>

#include "models/init.h"

namespace zt {

// ---- units ----------------------------------------------------------------------------------

LlamaEmbed::LlamaEmbed(const ModelConfig& c, DType dt, const TensorParallel& tp_)
    : Unit("embed", dt),
      tp(tp_),
      embed_tokens(params_, "embed_tokens", tp_share(c.padded_vocab_size, tp_, "padded_vocab_size"), c.n_embd) {
  if (tp.on()) params_.set_slice(embed_tokens.weight, column_slice(tp));  // rows: the rank's vocabulary ids
}

Var LlamaEmbed::forward(const Tensor& idx, int64_t) const {
  return vocab_parallel_embedding(idx, params_.var(embed_tokens.weight), tp);  // (B, T, C)
}

LlamaLayer::LlamaLayer(int64_t i, const ModelConfig& c, DType dt, const TensorParallel& tp_, const SequenceParallel& sp)
    : Unit("layers." + std::to_string(i), dt),
      tp(tp_),
      ulysses(
          ulysses_exchange(sp, tp_share(c.n_head, tp_, "n_head"), kv_heads_per_rank(c.n_kv_head, tp_), c.head_dim())),
      input_layernorm(params_, "input_layernorm", c.n_embd, c.norm_eps),
      self_attn(params_, "self_attn",
                AttentionConfig{.n_embd = c.n_embd,
                                .n_head = tp_share(c.n_head, tp_, "n_head"),
                                .n_kv_head = kv_heads_per_rank(c.n_kv_head, tp_),
                                .fused_qkv = false,
                                .bias = false,
                                .use_rope = true,
                                .rope = c.rope(),
                                .head_dim = c.head_dim()}),
      post_attention_layernorm(params_, "post_attention_layernorm", c.n_embd, c.norm_eps),
      mlp(params_, "mlp", c.n_embd, tp_share(c.ffn_hidden, tp_, "ffn_hidden")) {
  if (!tp.on()) return;
  input_layernorm.read = post_attention_layernorm.read = partial_grad_read(tp);
  for (int w : {self_attn.q_w, mlp.gate_proj.weight, mlp.up_proj.weight}) params_.set_slice(w, column_slice(tp));
  for (int w : {self_attn.k_w, self_attn.v_w}) params_.set_slice(w, kv_slice(c.n_kv_head, tp));  // maybe shared
  const int64_t D = c.head_dim();
  self_attn.read_qkv = shared_kv_read(c.n_kv_head, self_attn.cfg.n_head * D, self_attn.cfg.n_kv_head * D, tp);
  for (int w : {self_attn.o_w, mlp.down_proj.weight}) params_.set_slice(w, row_slice(tp));
}

// h = x + self_attn(input_layernorm(x)) and post_attention_layernorm(h) in one pass
// (residual_rmsnorm); the layer's output add stays a plain add (unit boundary). Each sub-layer
// runs between the two ends of a ParallelSubLayer (f and g): both the identity without
// tensor parallelism. Under sequence parallelism x, h and n are this rank's tokens.
Var LlamaLayer::forward(const Var& x) const {
  ParallelSubLayer attn_ends(tp), mlp_ends(tp);
  const Var a = attn_ends.exit(
      self_attn.forward(attn_ends.enter(input_layernorm.forward(x)), ulysses.parts > 1 ? &ulysses : nullptr));
  auto [h, n] = post_attention_layernorm.forward_residual(x, a);
  return add(h, mlp_ends.exit(mlp.forward(mlp_ends.enter(n))));  // (B, T, C)
}

Var LlamaLayer::forward_cached(const Var& x, KVCache& cache, int64_t layer) const {
  auto [h, n] = post_attention_layernorm.forward_residual(
      x, self_attn.forward_cached(input_layernorm.forward(x), cache, layer));
  return add(h, mlp.forward(n));  // (B, T, C)
}

LlamaHead::LlamaHead(const ModelConfig& c, DType dt, const TensorParallel& tp_)
    : Unit("head", dt), tp(tp_), norm(params_, "norm", c.n_embd, c.norm_eps) {
  norm.read = partial_grad_read(tp);
  if (c.tie_embeddings) return;
  lm_head = params_.add("lm_head.weight", {tp_share(c.padded_vocab_size, tp, "padded_vocab_size"), c.n_embd},
                        /*decay=*/true);
  if (tp.on()) params_.set_slice(lm_head, column_slice(tp));
}

const Var& LlamaHead::weight(const LlamaEmbed& e) const {
  return lm_head >= 0 ? params_.var(lm_head) : e.params().var(e.embed_tokens.weight);
}

Var LlamaHead::forward(const Var& x, const LlamaEmbed& e) const {
  if (tp.on())
    ZT_THROW("Llama: logits of a tensor-parallel model are cut by vocabulary over ", tp.size(),
             " ranks (the loss never gathers them): generate from the consolidated checkpoint on one rank");
  return linear(norm.forward(x), weight(e), Var());  // (B, T, Vp)
}

Var LlamaHead::loss(const Var& x, const LlamaEmbed& e, const Tensor& targets, int64_t vocab) const {
  return vocab_parallel_cross_entropy(norm.forward(x), weight(e), targets, vocab, tp);
}

// ---- model ----------------------------------------------------------------------------------

InitRule Llama::init_rule(const std::string& name) const {
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layer));
  if (name.ends_with("layernorm.weight") || name == "norm.weight") return {InitRule::constant, 1.0};
  if (name == "embed_tokens.weight" || name == "lm_head.weight")
    return {InitRule::normal, std, cfg_.vocab_size};  // padded rows stay zero
  if (name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight")) return {InitRule::normal, proj_std};
  return {InitRule::normal, std};  // q/k/v, gate/up
}

}  // namespace zt
