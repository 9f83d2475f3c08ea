#include "models/gpt2.h"

#include <cmath>

#include "models/init.h"

namespace zt {

void check_token_batch(const Tensor& idx, int64_t vocab_size, int64_t max_seq_len, const char* what) {
  if (!idx.defined()) ZT_THROW(what, ": token ids are undefined");
  if (idx.dtype() != DType::i32) ZT_THROW(what, ": token ids must be int32, got ", dtype_name(idx.dtype()));
  if (idx.dim() != 2) ZT_THROW(what, ": token ids must have shape (B, T), got ", shape_str(idx.shape()));
  if (idx.size(1) < 1 || idx.size(1) > max_seq_len)
    ZT_THROW(what, ": sequence length T = ", idx.size(1), " must be in [1, max_seq_len = ", max_seq_len, "]");
  const Tensor c = idx.contiguous();
  const int32_t* p = c.data<int32_t>();
  for (int64_t i = 0; i < c.numel(); ++i)
    if (p[i] < 0 || p[i] >= vocab_size)
      ZT_THROW(what, ": token id ", p[i], " at flat index ", i, " is outside the vocabulary [0, ", vocab_size, ")");
}

// ---- units ----------------------------------------------------------------------------------

GPT2::Embed::Embed(const ModelConfig& c, DType dt)
    : Unit("embed", dt), wte(params_, "wte", c.padded_vocab_size, c.n_embd), wpe(params_, "wpe", c.max_seq_len, c.n_embd) {}

Var GPT2::Embed::forward(const Tensor& idx) const {
  const int64_t B = idx.size(0), T = idx.size(1);
  // Positions as a (B, T) id tensor, so wpe's rows add to wte's without a broadcast op.
  Tensor pos = Tensor::empty({B, T}, DType::i32, Category::activations);
  int32_t* pp = pos.data<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) pp[b * T + t] = static_cast<int32_t>(t);
  return add(wte.forward(idx), wpe.forward(pos));  // (B, T, C)
}

GPT2::Block::Block(int64_t i, const ModelConfig& c, DType dt)
    : Unit("h." + std::to_string(i), dt),
      ln_1(params_, "ln_1", c.n_embd, c.norm_eps),
      attn(params_, "attn",
           AttentionConfig{.n_embd = c.n_embd, .n_head = c.n_head, .n_kv_head = c.n_head, .fused_qkv = true,
                           .bias = true, .use_rope = false}),
      ln_2(params_, "ln_2", c.n_embd, c.norm_eps),
      mlp(params_, "mlp", c.n_embd, c.ffn_hidden) {}

Var GPT2::Block::forward(const Var& x) const {
  Var h = add(x, attn.forward(ln_1.forward(x)));  // (B, T, C)
  return add(h, mlp.forward(ln_2.forward(h)));
}

GPT2::Head::Head(const ModelConfig& c, DType dt) : Unit("head", dt), ln_f(params_, "ln_f", c.n_embd, c.norm_eps) {}

Var GPT2::Head::forward(const Var& x, const Embed& e) const {
  // Tied lm_head: logits (B, T, Vp) = ln_f(x) (B, T, C) @ wte^T, wte (Vp, C) read from the embed unit.
  return linear(ln_f.forward(x), e.params().var(e.wte.weight), Var());
}

// ---- model ----------------------------------------------------------------------------------

GPT2::GPT2(const ModelConfig& cfg, const ModelOptions& opt) : cfg_(cfg), opt_(opt) {
  cfg_.validate();
  if (cfg_.family != "gpt2") ZT_THROW("GPT2: config family is \"", cfg_.family, "\", expected \"gpt2\"");
  embed_ = std::make_unique<Embed>(cfg_, opt.dtype);
  for (int64_t i = 0; i < cfg_.n_layer; ++i) blocks_.push_back(std::make_unique<Block>(i, cfg_, opt.dtype));
  head_ = std::make_unique<Head>(cfg_, opt.dtype);
  if (opt.allocate) finalize_params(opt.world_size, opt.alignment);
}

std::vector<Unit*> GPT2::units() {
  std::vector<Unit*> u{embed_.get()};
  for (auto& b : blocks_) u.push_back(b.get());
  u.push_back(head_.get());
  return u;
}

Var GPT2::forward_logits(const Tensor& idx) {
  check_token_batch(idx, cfg_.vocab_size, cfg_.max_seq_len, "GPT2");
  ZT_CHECK(embed_->params().finalized(), "GPT2 built with allocate = false (layout only) cannot run forward");
  Residency& r = *residency_;
  Embed& e = *embed_;
  Var x = run_unit(r, e, Var(), [&e, idx](const Var&) { return e.forward(idx); });
  for (auto& bp : blocks_) {
    Block* b = bp.get();  // the closure outlives this loop under activation checkpointing
    x = run_unit(r, *b, x, [b](const Var& in) { return b->forward(in); });
  }
  Head* h = head_.get();
  Embed* ep = embed_.get();
  return run_unit(r, *h, x, [h, ep](const Var& in) { return h->forward(in, *ep); }, {ep});
}

Var GPT2::logits(const Tensor& idx) { return forward_logits(idx); }

Var GPT2::loss(const Tensor& idx, const Tensor& targets) {
  if (!targets.defined() || targets.shape() != idx.shape())
    ZT_THROW("GPT2::loss: targets must have the shape of idx ", shape_str(idx.shape()), ", got ",
             targets.defined() ? shape_str(targets.shape()) : std::string("undefined"));
  return cross_entropy(forward_logits(idx), targets, cfg_.vocab_size);
}

void GPT2::init(Rng& rng) {
  ZT_CHECK(embed_->params().finalized(), "GPT2::init: the model was built with allocate = false");
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layer));
  for (Unit* u : units()) {
    ParamSet& ps = u->params();
    for (int i = 0; i < ps.size(); ++i) {
      const std::string& name = ps.infos()[i].name;
      Tensor w = ps.value(i);
      if (name == "wte.weight") {
        init_normal_rows(w, std, rng, cfg_.vocab_size);  // padded rows stay zero
      } else if (name.ends_with(".bias")) {
        w.zero_();
      } else if (name.rfind("ln_", 0) == 0) {  // ln_1 / ln_2 / ln_f gains
        w.fill_(1.0);
      } else if (name.ends_with("c_proj.weight")) {
        init_normal_rows(w, proj_std, rng);
      } else {  // wpe, c_attn, c_fc
        init_normal_rows(w, std, rng);
      }
    }
  }
}

}  // namespace zt
