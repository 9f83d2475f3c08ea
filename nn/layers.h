// defines: Linear, Embedding, LayerNorm, RMSNorm, CausalSelfAttention, GeluMLP, SwiGLUMLP.
//
// Each layer adds its parameters to the enclosing unit's ParamSet when constructed (so the
// flat layout follows construction order) and reads them back as leaf Vars in forward.
// Weights use PyTorch nn.Linear's layout (out, in), as llm.c's checkpoint does.
#pragma once
#include "autograd/ops.h"
#include "nn/kv_cache.h"
#include "nn/unit.h"

namespace zt {

class Linear : public Module {
 public:
  Linear(ParamSet& ps, const std::string& prefix, int64_t in, int64_t out, bool bias);
  Var forward(const Var& x) const;  // (..., in) -> (..., out)
  int weight = -1, bias = -1;       // parameter indices (bias -1 when absent)
  int64_t in, out;
};

class Embedding : public Module {
 public:
  Embedding(ParamSet& ps, const std::string& prefix, int64_t num, int64_t dim);
  Var forward(const Tensor& ids) const;  // int32 (...) -> (..., dim)
  int weight = -1;
};

class LayerNorm : public Module {
 public:
  LayerNorm(ParamSet& ps, const std::string& prefix, int64_t dim, double eps = 1e-5);
  Var forward(const Var& x) const;
  // {h = x + y, this norm of h}, one pass (residual_layernorm): a pre-norm block's residual add
  // and the next sub-layer's norm. x, y (..., dim).
  std::pair<Var, Var> forward_residual(const Var& x, const Var& y) const;
  int weight = -1, bias = -1;
  double eps;
};

class RMSNorm : public Module {
 public:
  RMSNorm(ParamSet& ps, const std::string& prefix, int64_t dim, double eps = 1e-5);
  Var forward(const Var& x) const;
  std::pair<Var, Var> forward_residual(const Var& x, const Var& y) const;  // {x + y, rmsnorm(x + y)}
  int weight = -1;
  double eps;
};

struct AttentionConfig {
  int64_t n_embd = 0, n_head = 0, n_kv_head = 0;  // n_kv_head < n_head: grouped-query attention
  bool fused_qkv = true;   // GPT-2: one c_attn (q;k;v rows) + c_proj; else q/k/v/o_proj (Llama)
  bool bias = true;        // GPT-2 has biases, Llama none
  bool use_rope = false;  // needs fused_qkv = false (the constructor refuses both)
  RopeParams rope;        // base theta and frequency scaling (core/rope.h)
  // Tensor parallelism (parallel/tensor_parallel.h) builds a rank's share of the heads: n_head and
  // n_kv_head are this rank's, head_dim the model's (0: n_embd / n_head), so q is n_head * head_dim
  // wide and c_proj / o_proj is (n_embd, n_head * head_dim): Megatron's row-parallel slice.
  int64_t head_dim = 0;
  // c_proj.bias is still this layer's parameter (same name, same place in the layout) but forward
  // leaves it out: the caller adds it once after summing the ranks' partial outputs.
  bool defer_out_bias = false;
};

// Sequence parallelism's exchange around attention (Ulysses: parallel/sequence_parallel.h). The
// layer hands its packed projection of this rank's tokens to to_heads, which returns the whole
// sequence for a 1/parts share of the heads: (B, T/parts, (Hq + 2 Hkv) D) -> (B, T, (Hq + 2 Hkv) D
// / parts). Attention runs there, and to_sequence takes its output back: (B, T, Hq/parts, D) ->
// (B, T/parts, Hq D). The output projection's result then goes through after_projection (when
// set): the projection's backward reads to_sequence's output, which the exchange may free there and
// make again when the backward reaches it. nn knows nothing of ranks: the exchange is the caller's.
struct HeadExchange {
  int64_t parts = 1;
  std::function<Var(const Var&)> to_heads, to_sequence, after_projection;
};

// Multi-head causal self-attention: x (B, T, C) -> (B, T, C).
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(ParamSet& ps, const std::string& prefix, const AttentionConfig& cfg);
  // exchange: null, or sequence parallelism's (above): x then holds this rank's share of the
  // sequence, and RoPE's positions are the whole sequence's (applied after to_heads).
  Var forward(const Var& x, const HeadExchange* exchange = nullptr) const;
  // Inference with a KV cache (nn/kv_cache.h), under no_grad: x (B, T, C) holds the tokens at
  // positions [p, p + T), p = cache.length(); RoPE at those positions; k, v appended to the
  // cache's layer `layer`; attention over positions [0, p + T). The caller advances the cache.
  Var forward_cached(const Var& x, KVCache& cache, int64_t layer) const;
  AttentionConfig cfg;
  int64_t head_dim;
  // How the layer reads q_proj | k_proj | v_proj stacked (Llama, (Hq D + 2 Hkv D, C)): as it is
  // (empty), or through the caller's op. Tensor parallelism with fewer kv heads than ranks gives
  // ranks the same kv head, each with a partial gradient the op sums (parallel/). No ranks in nn.
  std::function<Var(const Var&)> read_qkv;
  // fused_qkv: c_attn (3C, C) [+ (3C)], c_proj. Otherwise q_proj, k_proj, v_proj, o_proj.
  int c_attn_w = -1, c_attn_b = -1, c_proj_w = -1, c_proj_b = -1;
  int q_w = -1, k_w = -1, v_w = -1, o_w = -1;

 private:
  void project_qkv(const Var& x, Var& q, Var& k, Var& v) const;    // (B, T, C) -> q, k, v by head (no grad)
  Var fused_qkv(const Var& x) const;                               // (B, T, C) -> (B, T, C + 2 kv)
  Var project_out(const Var& y) const;                            // (B, T, Hq, D) -> (B, T, C)
};

// GPT-2 MLP: c_proj(gelu(c_fc(x))), hidden 4C, as one op (gelu_mlp: the GELU in the GEMMs'
// epilogues on a GPU); the parameters, their names and layout are c_fc's and c_proj's. With
// defer_out_bias forward leaves c_proj.bias out, as CausalSelfAttention's (tensor parallelism:
// hidden is this rank's share).
class GeluMLP : public Module {
 public:
  GeluMLP(ParamSet& ps, const std::string& prefix, int64_t dim, int64_t hidden, bool defer_out_bias = false);
  Var forward(const Var& x) const;
  Linear c_fc, c_proj;
  bool defer_out_bias;
};

// Llama MLP: down_proj(silu(gate_proj(x)) * up_proj(x)), no biases.
class SwiGLUMLP : public Module {
 public:
  SwiGLUMLP(ParamSet& ps, const std::string& prefix, int64_t dim, int64_t hidden);
  Var forward(const Var& x) const;
  Linear gate_proj, up_proj, down_proj;
};

}  // namespace zt
