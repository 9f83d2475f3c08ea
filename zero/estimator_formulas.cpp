// defines: estimate_activations, format_paper_gb, paper_table1_cell, paper_table1, parse_count
//          (zero/estimator.h).
//
// The estimator's closed forms (zero/estimator.h): the activations a model holds per token and
// at the backward's peak, the ZeRO paper's Table 1 as printed, and counts such as "7.5B".
#include "zero/estimator.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/check.h"

namespace zt {

// ---- activations -------------------------------------------------------------------------
//
// Per token (B*T rows), in elements, what the graph holds when the forward ends: every op
// output that a later op (or its own backward) reads, plus the statistics the ops save
// (docs/estimator.md walks through each op). C width, F MLP hidden, kv = n_kv_head * D, Vp
// padded vocabulary, H query heads:
//   gpt2   embed  wte row, wpe row, their sum: 3C (+ the int32 position ids, 4 bytes)
//          block  ln_1, q, k, v, attention out, c_proj, residual, ln_2, mlp c_proj, residual:
//                 10C; c_fc's output before and after the GELU (gelu_mlp): 2F; LayerNorm mean +
//                 rstd x 2: 4; attention's row
//                 log-sum-exp: H (float32, 4 bytes each whatever e: core/kernels/attention.h's
//                 tiled kernel keeps it instead of the (B, H, T, T) probabilities)
//   llama  embed  C
//          block  norm, attention out, o_proj, residual, norm, down, residual: 7C; the packed
//                 projection q | k | v and its RoPE'd copy (v passed through): 2C + 4kv; the
//                 packed gate | up and swiglu: 3F; RMSNorm rstd x 2: 2; attention's log-sum-exp:
//                 H (float32); and per block (not per token) RoPE's cos/sin tables: T*D
//   head   final norm C (+ its statistics: 2 gpt2, 1 llama), the logits Vp (which the fused
//          classifier + loss, linear_cross_entropy, overwrites with their gradient: one buffer,
//          no row statistics kept); and the scalar loss.
// Checkpointed blocks hold only their output (C per token); the block's graph is rebuilt in
// its backward.
//
// The backward's largest transient, over the state at the end of the forward:
//   head      the seed gradient, the head's g x and dx (2C; dlogits is the logits' own buffer),
//             with all of the forward held
//   last block (its full graph held; the logits already freed):
//             gpt2 mlp: gelu_mlp's dpre (F; the GELU's derivative is taken in place on c_proj's dX, so
//             no separate gradient of the GELU's output) with c_fc's dx and the MLP output's
//             gradient (2C), after the residual and c_proj outputs (2C) went: F - Vp; llama:
//             down's dx (F), swiglu_packed's d(gate | up) (2F): 3F - 2C - Vp. Checkpointed: the
//             block's recomputed graph plus F + C (gpt2) or 3F - C (llama) (its output stays held
//             by the recompute), less the logits Vp. (The final LayerNorm's statistics and the
//             scalar loss are gone by then too: 2 elements a token and one more that the estimate
//             keeps, 0.02% of a gpt-mini step's peak.)
ActivationEstimate estimate_activations(const ModelShape& m, int64_t B, int64_t T, bool ckpt, int64_t e,
                                        int64_t device_checkpoints) {
  ZT_CHECK(m.family == "gpt2" || m.family == "llama", "estimate_activations: family ", m.family);
  ZT_CHECK(B >= 1 && T >= 1 && e >= 1, "estimate_activations: B = ", B, ", T = ", T, ", elem = ", e);
  const int64_t C = m.n_embd, F = m.ffn_hidden, H = m.n_head, D = C / H, kv = m.n_kv_head * D;
  const int64_t Vp = m.padded_vocab_size, L = m.n_layer, BT = B * T;
  const bool gpt2 = m.family == "gpt2";
  const int64_t embed = gpt2 ? BT * 3 * C * e + BT * 4 : BT * C * e;
  const int64_t lse = BT * H * 4;  // attention's saved row log-sum-exp (B, H, T), float32
  const int64_t block = gpt2 ? BT * (10 * C + 2 * F + 4) * e + lse
                             : BT * (9 * C + 4 * kv + 3 * F + 2) * e + lse + T * D * e;
  const int64_t head = BT * (C + (gpt2 ? 2 : 1) + Vp) * e + e;
  // the gradients alive at once in the MLP's backward: gpt2 dpre (F) + 2C, llama 3F
  const int64_t mlp = gpt2 ? F + 2 * C : 3 * F;
  ActivationEstimate a;
  const int64_t head_transient = e + BT * 2 * C * e;  // the seed gradient, g x, dx
  if (!ckpt) {
    a.saved = embed + L * block + head;
    a.peak = a.saved + std::max({int64_t{0}, head_transient, BT * (mlp - 2 * C - Vp) * e});
  } else {
    const int64_t on_device = device_checkpoints < 0 ? L : std::min(L, device_checkpoints);
    a.saved = embed + on_device * BT * C * e + head;
    a.peak = a.saved + std::max(head_transient, block + BT * (mlp - C - Vp) * e);
  }
  return a;
}

// ---- the ZeRO paper's Table 1 --------------------------------------------------------------

std::string format_paper_gb(int64_t num, int64_t den) {
  ZT_CHECK(num >= 0 && den > 0, "format_paper_gb: ", num, " / ", den);
  if (num >= 100 * den) return std::to_string(num / den);  // the paper truncates: 513.5 -> 513
  const int d = num >= 10 * den ? 1 : 2;
  const int64_t scale = d == 1 ? 10 : 100;
  const int64_t q = (2 * num * scale + den) / (2 * den);  // round half up at d decimals
  std::string s = std::to_string(q / scale);
  std::string frac = std::to_string(q % scale);
  frac.insert(0, static_cast<size_t>(d) - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return frac.empty() ? s : s + "." + frac;
}

std::string paper_table1_cell(int64_t psi, int stage, int64_t nd) {
  ZT_CHECK(stage >= 0 && stage <= 3 && nd >= 1, "paper_table1_cell: stage ", stage, ", nd ", nd);
  int64_t bytes_x_n = 0;  // mixed precision, K = 12: exact, in bytes times nd
  for (Category c : {Category::params, Category::grads, Category::optim})
    bytes_x_n += model_state_bytes_x_n(c, psi, stage, nd, Precision::bf16);
  return format_paper_gb(bytes_x_n, nd * 1000000000LL);
}

std::string paper_table1() {
  const int64_t psis[3] = {7500000000LL, 128000000000LL, 1000000000000LL};
  const char* names[3] = {"7.5B", "128B", "1T"};
  const int64_t nds[6] = {1, 4, 16, 64, 256, 1024};
  std::ostringstream o;
  o << "Table 1 of Rajbhandari et al. 2019 (ZeRO, arXiv:1910.02054): per-device memory of model states\n"
       "in GB (1e9 bytes), mixed-precision Adam (K = 12), as a function of the DP degree, from the formulas\n"
       "  P_os 4Psi + 12Psi/Nd    P_os+g 2Psi + 14Psi/Nd    P_os+g+p 16Psi/Nd\n"
       "printed with the paper's rounding (below 10: 2 decimals, below 100: 1 decimal, else the integer part).\n"
       "Baseline DP (no ZeRO) needs 16Psi at every Nd: 120, 2048 and 16000 GB.\n\n";
  char buf[64];
  o << "      ";
  for (const char* n : names) {
    std::snprintf(buf, sizeof buf, "| %-27s", (std::string(n) + " Model (GB)").c_str());
    o << buf;
  }
  o << "\n  DP  ";
  for (int m = 0; m < 3; ++m) o << "| P_os     P_os+g   P_os+g+p ";
  o << "\n";
  for (int64_t nd : nds) {
    std::snprintf(buf, sizeof buf, "%4lld  ", static_cast<long long>(nd));
    o << buf;
    for (int m = 0; m < 3; ++m) {
      o << "| ";
      for (int stage = 1; stage <= 3; ++stage) {
        std::snprintf(buf, sizeof buf, "%-9s", paper_table1_cell(psis[m], stage, nd).c_str());
        o << buf;
      }
    }
    o << "\n";
  }
  return o.str();
}

int64_t parse_count(const std::string& s, const char* what) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (const std::exception&) {
    ZT_THROW(what, " = \"", s, "\": expected a count such as 124000000, 124M, 7.5B or 1T");
  }
  std::string suffix = s.substr(end);
  double mul = 1;
  if (suffix == "k" || suffix == "K") mul = 1e3;
  else if (suffix == "M" || suffix == "m") mul = 1e6;
  else if (suffix == "B" || suffix == "b" || suffix == "G" || suffix == "g") mul = 1e9;
  else if (suffix == "T" || suffix == "t") mul = 1e12;
  else if (!suffix.empty())
    ZT_THROW(what, " = \"", s, "\": unknown suffix \"", suffix, "\" (expected k, M, B or T)");
  const double n = std::round(v * mul);
  if (!(n >= 1) || n > 9e15) ZT_THROW(what, " = \"", s, "\": expected a count between 1 and 9e15");
  return static_cast<int64_t>(n);
}

}  // namespace zt
