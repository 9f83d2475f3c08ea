// defines: the differentiable ops — every layer of every model is built from these.
//
// Each op checks its inputs (shape; dtype: a compute dtype of their device's backend — cpu:
// float32 or float64, cuda: float32 or bfloat16 — unless noted; all tensor inputs on one
// device) with a message naming the op, the argument and what it expected, allocates its output
// on that device, computes it with one entry of the device's Backend (core/backend.h; the cpu's
// runs the kernels of core/kernels: OpenMP across cores, GEMMs in OpenBLAS), and records a GradFn
// that computes the input gradients the same way. Outputs are contiguous. Every op has a float64
// finite-difference gradient check in tests/test_ops_*.cpp.
//
// Index tensors (embedding ids, cross-entropy targets) are checked on the host: keep token
// batches on the host (cpu tensors). Cpu ids for a table on a device are validated, then copied
// to the device; ids already on the device are first copied to the host to be validated (a
// host sync each call).
//
// Implementations: ops_basic.cpp (shape, elementwise, reductions, matmul/linear, activations
// with bias_gelu, softmax, embedding), ops_loss.cpp (cross-entropy, and with the classifier
// fused in front) and ops_nn.cpp (norms with the residual norms, RoPE, attention).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "autograd/var.h"
#include "core/rope.h"  // RopeParams

namespace zt {

// ---- shape (views of the value; the gradient is reshaped back) ----
Var reshape(const Var& x, const Shape& shape);
Var transpose(const Var& x, int64_t d0, int64_t d1);  // output made contiguous

// ---- elementwise; a and b have the same shape ----
Var add(const Var& a, const Var& b);
Var sub(const Var& a, const Var& b);
Var mul(const Var& a, const Var& b);
Var scale(const Var& x, double s);  // s * x

// ---- reductions ----
Var sum(const Var& x);   // all elements -> shape ()
Var mean(const Var& x);  // all elements -> shape ()
Var sum_last(const Var& x);  // (..., N) -> (...)

// ---- matrix products ----
// a (..., M, K) @ b (K, N) -> (..., M, N), or batched: a (..., M, K) @ b (..., K, N) with the
// same leading dims.
Var matmul(const Var& a, const Var& b);
// PyTorch's nn.Linear: x (..., in), w (out, in), optional b (out) -> (..., out) = x w^T + b.
// Pass an undefined Var for no bias.
Var linear(const Var& x, const Var& w, const Var& b);

// ---- activations ----
Var gelu(const Var& x);  // tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
Var silu(const Var& x);  // x * sigmoid(x)
Var swiglu(const Var& gate, const Var& up);  // silu(gate) * up, same shapes
// gu (..., 2F) = [gate | up] (one GEMM of the stacked gate_proj | up_proj) -> silu(gate) * up (..., F)
Var swiglu_packed(const Var& gu);
Var softmax(const Var& x);  // over the last dimension
// Fused bias + GELU: x (..., C), b (C) broadcast over the rows -> (..., C) = gelu(x + b), one
// pass (Backend::bias_gelu). GPT-2's MLP runs c_fc as linear(x, w, Var()) then this with c_fc's
// bias: the GEMM writes without a bias fill, and the backward's one pass gives dx and the bias
// gradient (column sums of dx, accumulated straight into a parameter's gradient buffer).
Var bias_gelu(const Var& x, const Var& b);

// GPT-2's MLP as one op: x (..., C) -> (..., out) = c_proj(gelu(c_fc(x))) with c_fc's weight
// w_fc (H, C) and bias b_fc (H), c_proj's w_proj (out, H) and b_proj (out; undefined: none).
// The GELU rides on c_fc's GEMM (Backend::linear_gelu: cuBLASLt's GELU_AUX_BIAS epilogue on a
// GPU), and its derivative and c_fc's bias gradient are one in-place pass over c_proj's input
// gradient (Backend::linear_dgelu_backward), so the GELU output's gradient never exists apart; it saves
// c_fc's output before and after the GELU, (M, H) each, as the three separate ops would.
Var gelu_mlp(const Var& x, const Var& w_fc, const Var& b_fc, const Var& w_proj, const Var& b_proj);

// ---- embedding and loss ----
// ids: int32 tensor of any shape (no gradient), values in [0, V) or -1 (a zero row and no
// gradient: another rank's id under vocabulary parallelism); table (V, C) -> (ids..., C).
Var embedding(const Tensor& ids, const Var& table);
// Fused softmax + cross-entropy. logits (..., V), targets int32 (...) with values in [0, V) or
// -1 (ignored). Returns the mean over non-ignored positions, shape (). Only the first
// `valid_vocab` (default V) logits take part: llm.c pads the vocabulary. The loss has the
// statistics dtype (Backend::stats_dtype): float32 for bfloat16 logits.
Var cross_entropy(const Var& logits, const Tensor& targets, int64_t valid_vocab = -1);
// The classifier and the loss in one op: cross_entropy(linear(x, w), targets, valid_vocab) with x
// (..., C), w (V, C), the same value — and the same bits as the two ops on a CPU, and for a loss
// gradient of 1 on a GPU — but the logits (..., V) exist once: with a backward to feed, the
// forward writes their gradient over them (Backend::cross_entropy_and_grad, llm.c's fused
// classifier), so no second (N, V) buffer is made and the backward does not read the logits
// again. It holds that buffer until the backward (as the two ops hold the logits); the backward
// applies the loss gradient g on the small side: dx = g (dlogits w), dw += dlogits^T (g x).
// Without gradients (no_grad, or neither x nor w requires one) it runs the two ops.
Var linear_cross_entropy(const Var& x, const Var& w, const Tensor& targets, int64_t valid_vocab = -1);

// ---- normalization ----
// LayerNorm over the last dim C: x (..., C), weight (C), bias (C) (bias may be undefined).
Var layernorm(const Var& x, const Var& weight, const Var& bias, double eps = 1e-5);
// RMSNorm over the last dim: x (..., C), weight (C): x / sqrt(mean(x^2) + eps) * weight.
Var rmsnorm(const Var& x, const Var& weight, double eps = 1e-5);
// Fused residual + norm (llm.c's fused_residual_forward): x, y (..., C) of one shape, weight and
// bias (C) -> {h, n}: h = x + y (..., C), n = layernorm(h, weight, bias) (..., C), written in one
// pass over the rows (Backend::residual_layernorm). h's gradient goes to x and y as it is (no
// copy); n's backward is layernorm's, with h as its input. A pre-norm block's
// `h = x + attn(ln_1(x)); out = h + mlp(ln_2(h))` becomes
// `auto [h, n] = residual_layernorm(x, attn(ln_1(x)), w2, b2); out = h + mlp(n)`.
std::pair<Var, Var> residual_layernorm(const Var& x, const Var& y, const Var& weight, const Var& bias,
                                       double eps = 1e-5);
// The same with RMSNorm: {h = x + y, n = rmsnorm(h, weight)}.
std::pair<Var, Var> residual_rmsnorm(const Var& x, const Var& y, const Var& weight, double eps = 1e-5);

// ---- attention ----
// Rotary position embedding, Hugging Face Llama convention (rotate_half): for each head,
// pairs (d, d + D/2) at position t rotate by angle t * theta^(-2d/D).  x (B, T, H, D), D even.
// p: the base theta (a double converts) and the frequency scaling (core/rope.h: llama3).
Var rope(const Var& x, const RopeParams& p = {});
// The same on a packed projection qkv (B, T, (Hq + 2 Hkv) D) = [q | k | v] (one GEMM of the
// stacked q_proj | k_proj | v_proj): q's and k's heads rotate, v's pass unchanged; the result
// has qkv's layout, for causal_attention_packed.
Var rope_packed(const Var& qkv, int64_t Hq, int64_t Hkv, const RopeParams& p = {});
// Causal scaled-dot-product attention with grouped-query heads.
// q (B, T, Hq, D), k and v (B, T, Hkv, D), Hq % Hkv == 0 (query head h reads kv head
// h / (Hq / Hkv)); scale 1/sqrt(D). Returns (B, T, Hq, D).
Var causal_attention(const Var& q, const Var& k, const Var& v);
// The same on one fused projection (llm.c's layout): qkv (B, T, (Hq + 2 Hkv) D) holds per row the
// query heads, then the key heads, then the value heads. Returns (B, T, Hq, D). One GEMM of
// width (Hq + 2 Hkv) D feeds it instead of three narrower ones; the op copies the three column
// blocks out (and the gradients back in), the attention itself is causal_attention's.
Var causal_attention_packed(const Var& qkv, int64_t Hq, int64_t Hkv);

}  // namespace zt
