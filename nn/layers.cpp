// defines: Linear (constructor, forward), Embedding (constructor, forward), LayerNorm (constructor,
//          forward, forward_residual), RMSNorm (constructor, forward, forward_residual),
//          CausalSelfAttention (constructor, project_qkv, project_out, fused_qkv, forward, forward_cached),
//          GeluMLP (constructor, forward), SwiGLUMLP (constructor, forward) (nn/layers.h); file-local: join
#include "nn/layers.h"

namespace zt {

namespace {
std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }
}  // namespace

Linear::Linear(ParamSet& ps, const std::string& prefix, int64_t in_, int64_t out_, bool has_bias)
    : Module(ps, prefix), in(in_), out(out_) {
  weight = add_param("weight", {out, in}, /*decay=*/true);
  if (has_bias) bias = add_param("bias", {out}, /*decay=*/false);
}

Var Linear::forward(const Var& x) const { return linear(x, p(weight), bias >= 0 ? p(bias) : Var()); }

Embedding::Embedding(ParamSet& ps, const std::string& prefix, int64_t num, int64_t dim) : Module(ps, prefix) {
  weight = add_param("weight", {num, dim}, /*decay=*/true);  // 2-D: decayed, as nanoGPT does
}

Var Embedding::forward(const Tensor& ids) const { return embedding(ids, p(weight)); }

LayerNorm::LayerNorm(ParamSet& ps, const std::string& prefix, int64_t dim, double eps_) : Module(ps, prefix), eps(eps_) {
  weight = add_param("weight", {dim}, false);
  bias = add_param("bias", {dim}, false);
}

Var LayerNorm::forward(const Var& x) const { return layernorm(x, p(weight), p(bias), eps); }

std::pair<Var, Var> LayerNorm::forward_residual(const Var& x, const Var& y) const {
  return residual_layernorm(x, y, p(weight), p(bias), eps);
}

RMSNorm::RMSNorm(ParamSet& ps, const std::string& prefix, int64_t dim, double eps_) : Module(ps, prefix), eps(eps_) {
  weight = add_param("weight", {dim}, false);
}

Var RMSNorm::forward(const Var& x) const { return rmsnorm(x, p(weight), eps); }

std::pair<Var, Var> RMSNorm::forward_residual(const Var& x, const Var& y) const {
  return residual_rmsnorm(x, y, p(weight), eps);
}

CausalSelfAttention::CausalSelfAttention(ParamSet& ps, const std::string& prefix, const AttentionConfig& c)
    : Module(ps, prefix), cfg(c) {
  if (cfg.n_kv_head == 0) cfg.n_kv_head = cfg.n_head;
  ZT_CHECK(cfg.n_head > 0 && (cfg.head_dim > 0 || cfg.n_embd % cfg.n_head == 0), "attention '", prefix, "': n_embd ",
           cfg.n_embd, " is not divisible by n_head ", cfg.n_head);
  ZT_CHECK(cfg.n_head % cfg.n_kv_head == 0, "attention '", prefix, "': n_head ", cfg.n_head,
           " is not a multiple of n_kv_head ", cfg.n_kv_head);
  // RoPE goes with Llama's separate projections (their Hugging Face names); GPT-2's c_attn has none.
  ZT_CHECK(!(cfg.fused_qkv && cfg.use_rope), "attention '", prefix,
           "': RoPE needs separate q/k/v projections (fused_qkv = false)");
  head_dim = cfg.head_dim > 0 ? cfg.head_dim : cfg.n_embd / cfg.n_head;
  const int64_t C = cfg.n_embd, q = cfg.n_head * head_dim, kv = cfg.n_kv_head * head_dim;
  if (cfg.fused_qkv) {
    c_attn_w = add_param("c_attn.weight", {q + 2 * kv, C}, true);
    if (cfg.bias) c_attn_b = add_param("c_attn.bias", {q + 2 * kv}, false);
    c_proj_w = add_param("c_proj.weight", {C, q}, true);
    if (cfg.bias) c_proj_b = add_param("c_proj.bias", {C}, false);
  } else {
    q_w = add_param("q_proj.weight", {q, C}, true);
    k_w = add_param("k_proj.weight", {kv, C}, true);
    v_w = add_param("v_proj.weight", {kv, C}, true);
    o_w = add_param("o_proj.weight", {C, q}, true);
  }
}

// q (B, T, Hq, D), k and v (B, T, Hkv, D): the three projections of x (B, T, C), before RoPE.
// Inference only (forward_cached): the packed projection's column blocks [q (C) | k (kv) | v (kv)].
void CausalSelfAttention::project_qkv(const Var& x, Var& q, Var& k, Var& v) const {
  const int64_t B = x.size(0), T = x.size(1), D = head_dim;
  const int64_t Hq = cfg.n_head, Hkv = cfg.n_kv_head, C = Hq * D, kv = Hkv * D;
  const Tensor qkv = fused_qkv(x).value();  // (B, T, C + 2 kv), C = Hq D
  q = Var(qkv.slice(2, 0, C).contiguous().view({B, T, Hq, D}));
  k = Var(qkv.slice(2, C, C + kv).contiguous().view({B, T, Hkv, D}));
  v = Var(qkv.slice(2, C + kv, C + 2 * kv).contiguous().view({B, T, Hkv, D}));
}

// y (B, T, Hq, D) -> (B, T, C) through c_proj / o_proj.
Var CausalSelfAttention::project_out(const Var& y) const {
  Var yc = reshape(y, {y.size(0), y.size(1), cfg.n_head * head_dim});  // (B, T, Hq D)
  if (cfg.fused_qkv) return linear(yc, p(c_proj_w), c_proj_b >= 0 && !cfg.defer_out_bias ? p(c_proj_b) : Var());
  return linear(yc, p(o_w), Var());
}

// (B, T, C) -> (B, T, C + 2 kv) as one GEMM (one wide GEMM runs nearer the machine's peak than
// three narrow ones, and the backward's dx is one GEMM, not three and two adds:
// bench/results/gemm_libs.md): GPT-2's c_attn, or Llama's q_proj | k_proj | v_proj stacked in
// place (ParamSet::var_span: the three stay apart in checkpoints and Hugging Face files).
Var CausalSelfAttention::fused_qkv(const Var& x) const {
  if (cfg.fused_qkv) return linear(x, p(c_attn_w), c_attn_b >= 0 ? p(c_attn_b) : Var());
  return linear(x, read_qkv ? read_qkv(p_span(q_w, 3)) : p_span(q_w, 3), Var());
}

// The packed projection, RoPE on its q and k heads (Llama), attention reading it in place (cuDNN
// takes the strides; llm.c's layout), the output projection.
Var CausalSelfAttention::forward(const Var& x, const HeadExchange* exchange) const {
  const int64_t parts = exchange ? exchange->parts : 1, Hq = cfg.n_head / parts, Hkv = cfg.n_kv_head / parts;
  Var qkv = fused_qkv(x);                       // (B, T, C + 2 kv)
  if (exchange) qkv = exchange->to_heads(qkv);  // (B, T parts, (C + 2 kv) / parts): the whole sequence
  if (cfg.use_rope) qkv = rope_packed(qkv, Hq, Hkv, cfg.rope);
  Var y = causal_attention_packed(qkv, Hq, Hkv);  // (B, T', Hq, D)
  if (exchange) y = exchange->to_sequence(y);     // (B, T, C): this rank's tokens again
  Var out = project_out(y);
  if (exchange && exchange->after_projection) out = exchange->after_projection(out);
  return out;
}

Var CausalSelfAttention::forward_cached(const Var& x, KVCache& cache, int64_t layer) const {
  if (grad_enabled()) ZT_THROW("attention '", prefix_, "': forward_cached is inference only: run it under NoGradGuard");
  Var q, k, v;
  project_qkv(x, q, k, v);
  Tensor qt = q.value(), kt = k.value(), vt = v.value();
  if (cfg.use_rope) {  // at the step's absolute positions [p, p + T), p = cache.length()
    qt = rope_at(qt, cache.length(), cfg.rope, cache);
    kt = rope_at(kt, cache.length(), cfg.rope, cache);
  }
  cache.append(layer, kt, vt);  // the cache keeps Hkv heads (GQA)
  return project_out(Var(attend_cached(qt, kt, vt, cache, layer)));
}

GeluMLP::GeluMLP(ParamSet& ps, const std::string& prefix, int64_t dim, int64_t hidden, bool defer)
    : Module(ps, prefix),
      c_fc(ps, join(prefix, "c_fc"), dim, hidden, true),
      c_proj(ps, join(prefix, "c_proj"), hidden, dim, true),
      defer_out_bias(defer) {}

// One op (autograd/ops.h's gelu_mlp): the GELU rides on c_fc's GEMM, and its derivative and c_fc's
// bias gradient are one pass over c_proj's input gradient, in place.
// Both layers' parameters live in this module's ParamSet (the one they were built on): p() reads them.
Var GeluMLP::forward(const Var& x) const {
  return gelu_mlp(x, p(c_fc.weight), p(c_fc.bias), p(c_proj.weight),
                  c_proj.bias >= 0 && !defer_out_bias ? p(c_proj.bias) : Var());
}

SwiGLUMLP::SwiGLUMLP(ParamSet& ps, const std::string& prefix, int64_t dim, int64_t hidden)
    : Module(ps, prefix),
      gate_proj(ps, join(prefix, "gate_proj"), dim, hidden, false),
      up_proj(ps, join(prefix, "up_proj"), dim, hidden, false),
      down_proj(ps, join(prefix, "down_proj"), hidden, dim, false) {}

// gate_proj | up_proj stacked in place as one (2F, C) GEMM, its (B, T, 2F) output read packed by
// swiglu_packed (and its gradient written packed: one dx GEMM, no add of two).
Var SwiGLUMLP::forward(const Var& x) const {
  return down_proj.forward(swiglu_packed(linear(x, p_span(gate_proj.weight, 2), Var())));
}

}  // namespace zt
