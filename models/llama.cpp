#include "models/llama.h"

#include <cmath>

#include "models/gpt2.h"  // check_token_batch
#include "models/init.h"

namespace zt {

// ---- units ----------------------------------------------------------------------------------

Llama::Embed::Embed(const ModelConfig& c, DType dt)
    : Unit("embed", dt), embed_tokens(params_, "embed_tokens", c.padded_vocab_size, c.n_embd) {}

Var Llama::Embed::forward(const Tensor& idx) const { return embed_tokens.forward(idx); }  // (B, T, C)

Llama::Layer::Layer(int64_t i, const ModelConfig& c, DType dt)
    : Unit("layers." + std::to_string(i), dt),
      input_layernorm(params_, "input_layernorm", c.n_embd, c.norm_eps),
      self_attn(params_, "self_attn",
                AttentionConfig{.n_embd = c.n_embd, .n_head = c.n_head, .n_kv_head = c.n_kv_head,
                                .fused_qkv = false, .bias = false, .use_rope = true, .rope_theta = c.rope_theta}),
      post_attention_layernorm(params_, "post_attention_layernorm", c.n_embd, c.norm_eps),
      mlp(params_, "mlp", c.n_embd, c.ffn_hidden) {}

Var Llama::Layer::forward(const Var& x) const {
  Var h = add(x, self_attn.forward(input_layernorm.forward(x)));  // (B, T, C)
  return add(h, mlp.forward(post_attention_layernorm.forward(h)));
}

Llama::Head::Head(const ModelConfig& c, DType dt) : Unit("head", dt), norm(params_, "norm", c.n_embd, c.norm_eps) {
  if (!c.tie_embeddings) lm_head = params_.add("lm_head.weight", {c.padded_vocab_size, c.n_embd}, /*decay=*/true);
}

Var Llama::Head::forward(const Var& x, const Embed& e) const {
  const Var& w = lm_head >= 0 ? params_.var(lm_head) : e.params().var(e.embed_tokens.weight);  // (Vp, C)
  return linear(norm.forward(x), w, Var());  // (B, T, Vp)
}

// ---- model ----------------------------------------------------------------------------------

Llama::Llama(const ModelConfig& cfg, const ModelOptions& opt) : cfg_(cfg), opt_(opt) {
  cfg_.validate();
  if (cfg_.family != "llama") ZT_THROW("Llama: config family is \"", cfg_.family, "\", expected \"llama\"");
  embed_ = std::make_unique<Embed>(cfg_, opt.dtype);
  for (int64_t i = 0; i < cfg_.n_layer; ++i) layers_.push_back(std::make_unique<Layer>(i, cfg_, opt.dtype));
  head_ = std::make_unique<Head>(cfg_, opt.dtype);
  if (opt.allocate) finalize_params(opt.world_size, opt.alignment);
}

std::vector<Unit*> Llama::units() {
  std::vector<Unit*> u{embed_.get()};
  for (auto& l : layers_) u.push_back(l.get());
  u.push_back(head_.get());
  return u;
}

Var Llama::forward_logits(const Tensor& idx) {
  check_token_batch(idx, cfg_.vocab_size, cfg_.max_seq_len, "Llama");
  ZT_CHECK(embed_->params().finalized(), "Llama built with allocate = false (layout only) cannot run forward");
  Residency& r = *residency_;
  Embed* e = embed_.get();
  Var x = run_unit(r, *e, Var(), [e, idx](const Var&) { return e->forward(idx); });
  for (auto& lp : layers_) {
    Layer* l = lp.get();
    x = run_unit(r, *l, x, [l](const Var& in) { return l->forward(in); });
  }
  Head* h = head_.get();
  std::vector<Unit*> also;
  if (h->lm_head < 0) also.push_back(e);  // tied: the head reads embed_tokens
  return run_unit(r, *h, x, [h, e](const Var& in) { return h->forward(in, *e); }, also);
}

Var Llama::logits(const Tensor& idx) { return forward_logits(idx); }

Var Llama::loss(const Tensor& idx, const Tensor& targets) {
  if (!targets.defined() || targets.shape() != idx.shape())
    ZT_THROW("Llama::loss: targets must have the shape of idx ", shape_str(idx.shape()), ", got ",
             targets.defined() ? shape_str(targets.shape()) : std::string("undefined"));
  return cross_entropy(forward_logits(idx), targets, cfg_.vocab_size);
}

void Llama::init(Rng& rng) {
  ZT_CHECK(embed_->params().finalized(), "Llama::init: the model was built with allocate = false");
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layer));
  for (Unit* u : units()) {
    ParamSet& ps = u->params();
    for (int i = 0; i < ps.size(); ++i) {
      const std::string& name = ps.infos()[i].name;
      Tensor w = ps.value(i);
      if (name.ends_with("layernorm.weight") || name == "norm.weight") {
        w.fill_(1.0);
      } else if (name == "embed_tokens.weight" || name == "lm_head.weight") {
        init_normal_rows(w, std, rng, cfg_.vocab_size);  // padded rows stay zero
      } else if (name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight")) {
        init_normal_rows(w, proj_std, rng);
      } else {  // q/k/v, gate/up
        init_normal_rows(w, std, rng);
      }
    }
  }
}

}  // namespace zt
