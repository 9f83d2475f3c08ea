// defines: GPT2Embed (constructor, forward), GPT2Block (constructor, forward, forward_cached), GPT2Head
//          (constructor, forward), GPT2 (init_rule) (models/gpt2.h)
#include "models/gpt2.h"

#include <cmath>

#include "models/init.h"

namespace zt {

// ---- units ----------------------------------------------------------------------------------

GPT2Embed::GPT2Embed(const ModelConfig& c, DType dt, const TensorParallel& tp_)
    : Unit("embed", dt),
      tp(tp_),
      wte(params_, "wte", tp_share(c.padded_vocab_size, tp_, "padded_vocab_size"), c.n_embd),
      wpe(params_, "wpe", c.max_seq_len, c.n_embd) {
  if (tp.on()) params_.set_slice(wte.weight, column_slice(tp));  // rows: the rank's vocabulary ids
  wpe.read = partial_grad_read(tp);  // sequence parallelism: a rank adds the rows of its tokens only
}

Var GPT2Embed::forward(const Tensor& idx, int64_t pos0) const {
  const int64_t B = idx.size(0);
  // Under Megatron's sequence parallelism the lookup comes back as this rank's T / tp tokens.
  const int64_t T = tp.splits_sequence() ? tp_share(idx.size(1), tp, "the sequence length") : idx.size(1);
  if (tp.splits_sequence()) pos0 += tp.rank() * T;
  // Positions as a (B, T) id tensor, so wpe's rows add to wte's without a broadcast op. Built on
  // the host, like the token ids: embedding() moves ids to the table's device.
  Tensor pos = Tensor::empty({B, T}, DType::i32, Category::activations, cpu_allocator());
  int32_t* pp = pos.data<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) pp[b * T + t] = static_cast<int32_t>(pos0 + t);
  return add(vocab_parallel_embedding(idx, params_.var(wte.weight), tp), wpe.forward(pos));  // (B, T, C)
}

GPT2Block::GPT2Block(int64_t i, const ModelConfig& c, DType dt, const TensorParallel& tp_, const SequenceParallel& sp)
    : Unit("h." + std::to_string(i), dt),
      tp(tp_),
      ulysses(ulysses_exchange(sp, tp_share(c.n_head, tp_, "n_head"), tp_share(c.n_head, tp_, "n_head"), c.head_dim())),
      ln_1(params_, "ln_1", c.n_embd, c.norm_eps),
      attn(params_, "attn",
           AttentionConfig{.n_embd = c.n_embd,
                           .n_head = tp_share(c.n_head, tp_, "n_head"),
                           .n_kv_head = tp_share(c.n_head, tp_, "n_head"),
                           .fused_qkv = true,
                           .bias = true,
                           .use_rope = false,
                           .rope = {},
                           .head_dim = c.head_dim(),
                           .defer_out_bias = tp_.on()}),
      ln_2(params_, "ln_2", c.n_embd, c.norm_eps),
      mlp(params_, "mlp", c.n_embd, tp_share(c.ffn_hidden, tp_, "ffn_hidden"), tp_.on()) {
  if (!tp.on()) return;
  ln_1.read = ln_2.read = partial_grad_read(tp);
  params_.set_slice(attn.c_attn_w, column_slice(tp, 3));  // q; k; v, each cut by heads
  params_.set_slice(attn.c_attn_b, column_slice(tp, 3));
  params_.set_slice(attn.c_proj_w, row_slice(tp));
  params_.set_slice(mlp.c_fc.weight, column_slice(tp));
  params_.set_slice(mlp.c_fc.bias, column_slice(tp));
  params_.set_slice(mlp.c_proj.weight, row_slice(tp));
}

// h = x + attn(ln_1(x)) and ln_2(h) in one pass (residual_layernorm); the block's output add
// stays a plain add (the next block is another unit: no fusing across the boundary). Under tensor
// parallelism each sub-layer runs between the two ends of a ParallelSubLayer (f and g);
// without it both are the identity. Under sequence parallelism x, h and n are this rank's tokens.
Var GPT2Block::forward(const Var& x) const {
  const Var attn_bias = attn.cfg.defer_out_bias ? params_.var(attn.c_proj_b) : Var();
  const Var mlp_bias = mlp.defer_out_bias ? params_.var(mlp.c_proj.bias) : Var();
  ParallelSubLayer attn_ends(tp), mlp_ends(tp);
  const Var a = attn_ends.exit(attn.forward(attn_ends.enter(ln_1.forward(x)), ulysses.parts > 1 ? &ulysses : nullptr),
                               attn_bias);
  auto [h, n] = ln_2.forward_residual(x, a);  // (B, T, C) each
  return add(h, mlp_ends.exit(mlp.forward(mlp_ends.enter(n)), mlp_bias));
}

Var GPT2Block::forward_cached(const Var& x, KVCache& cache, int64_t layer) const {
  auto [h, n] = ln_2.forward_residual(x, attn.forward_cached(ln_1.forward(x), cache, layer));  // (B, T, C)
  return add(h, mlp.forward(n));
}

GPT2Head::GPT2Head(const ModelConfig& c, DType dt, const TensorParallel& tp_)
    : Unit("head", dt), tp(tp_), ln_f(params_, "ln_f", c.n_embd, c.norm_eps) {
  ln_f.read = partial_grad_read(tp);
}

Var GPT2Head::forward(const Var& x, const GPT2Embed& e) const {
  if (tp.on())
    ZT_THROW("GPT2: logits of a tensor-parallel model are cut by vocabulary over ", tp.size(),
             " ranks (the loss never gathers them): generate from the consolidated checkpoint on one rank");
  // Tied lm_head: logits (B, T, Vp) = ln_f(x) (B, T, C) @ wte^T, wte (Vp, C) read from the embed unit.
  return linear(ln_f.forward(x), e.params().var(e.wte.weight), Var());
}

Var GPT2Head::loss(const Var& x, const GPT2Embed& e, const Tensor& targets, int64_t vocab) const {
  return vocab_parallel_cross_entropy(ln_f.forward(x), e.params().var(e.wte.weight), targets, vocab, tp);
}

// ---- model ----------------------------------------------------------------------------------

InitRule GPT2::init_rule(const std::string& name) const {
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layer));
  if (name == "wte.weight") return {InitRule::normal, std, cfg_.vocab_size};  // padded rows stay zero
  if (name.ends_with(".bias")) return {InitRule::constant, 0.0};
  if (name.rfind("ln_", 0) == 0) return {InitRule::constant, 1.0};  // ln_1 / ln_2 / ln_f gains
  if (name.ends_with("c_proj.weight")) return {InitRule::normal, proj_std};
  return {InitRule::normal, std};  // wpe, c_attn, c_fc
}

}  // namespace zt
