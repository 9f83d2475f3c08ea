// defines: CudnnAttention — causal scaled-dot-product attention (forward and backward) through
//          cuDNN's graph (backend) API, with a per-shape cache of finalized execution plans;
//          CudnnAttnShape. Built only when CMake found cuDNN (ZT_HAVE_CUDNN); CudaBackend's
//          attention entries choose between this and our own kernel (cuda/backend_attention.cpp).
//
// STATUS: run on an H100 on 2026-11-25, tests passing (bench/results/gpu.md). The graphs follow
// cudnn-frontend's lowering of SDPA (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h,
// softmax.h, and the causal "sliding_window_mask" with right bound 0), written here directly on
// the backend API (cudnn_graph.h); nothing of the frontend is used or copied.
//
// Semantics: exactly cuda/kernels/attention.h's (and core/kernels/attention.h's): q, out, dq,
// dout (B, T, Hq, D); k, v, dk, dv (B, T, Hkv, D), contiguous; scale 1/sqrt(D); position t
// attends to keys j <= t; Hq % Hkv == 0 (query head h reads kv head h / (Hq / Hkv)).
// In cuDNN's terms every such tensor is the 4-d [B, H, T, D] with strides [T H D, D, H D, 1]
// (our row-major (B, T, H, D) read with heads second): no copy, no transpose. With a packed
// projection (CudnnAttnShape::qkv_row = R) q, k, v, dq, dk, dv are [T R, D, R, 1] at their column
// offsets in the packed rows: still no copy.
//
// Saved statistics: `stats` (B, Hq, T) float32 = lse_t = max_j s_tj + log sum_j exp(s_tj - max),
// the natural-log row log-sum-exp of the scaled, masked scores — exactly what our kernel saves,
// so one `saved` tensor format serves both implementations (a forward through one may be
// followed by a backward through the other). cuDNN's "Stats" is this quantity: the frontend's
// composite softmax builds it as reduce_max(S) + log(reduce_add(exp(S - max))) and the backward
// recomputes P = exp(S - Stats); cuDNN's stats tensor is [B, H, T, 1], i.e. our (B, Hq, T).
//
// Forward graph (ops of the operation graph; V = virtual, float32 unless said otherwise):
//   S  = matmul(Q [B,Hq,T,D], K^T [B,Hkv,D,T])          K^T: K's memory with strides [.., D, 1, Hkv D]
//   S1 = S * scale                                       scale: by-value float [1,1,1,1]
//   r  = GEN_INDEX(S1, axis 2), c = GEN_INDEX(S1, axis 3) (int32);  m = CMP_GE(r, c) (boolean)
//   S2 = BINARY_SELECT(S1, lowest, m)                    keeps s_tj where t >= j, else -FLT_MAX
//   M  = reduce_max(S2) [B,Hq,T,1];  E = exp(S2 - M);  L = reduce_add(E) [B,Hq,T,1]
//   Stats = M + log(L)  (non-virtual, float32)           P = E / L  (bfloat16, the second matmul's A)
//   O  = matmul(P [B,Hq,T,T], V [B,Hkv,T,D])             (bfloat16)
// GQA: K^T and V keep Hkv heads; cuDNN broadcasts them over the Hq / Hkv query heads of a group
// (the frontend passes them the same way).
//
// Backward graph (the frontend's composite lowering for cuDNN 9, deterministic variant):
//   Dsum = reduce_add(dO * O) * 1  -> softmax_sum [B,Hq,T,1] float32, NON-virtual (our workspace)
//   S = matmul(Q, K^T) * scale;  S2 = causal select(S - Stats, lowest);  P = exp(S2)
//   dV = matmul(P^T [B,Hq,T,T] (a RESHAPE with swapped strides, bfloat16), dO)
//   dP = matmul(dO, V^T);  dS = (dP - Dsum) * P * scale
//   dK = matmul(dS^T (RESHAPE, bfloat16), Q);  dQ = matmul(dS, K (RESHAPE of K^T back to [B,Hkv,T,D]))
//   GQA: dK and dV come out per query head ([B,Hq,T,D] virtual) and a reduce_add over each
//   group of Hq / Hkv heads writes [B,Hkv,T,D] (the frontend's dK_fullhead / dV_fullhead).
// Determinism: the frontend, for cuDNN 9, writes dQ straight from the dS K matmul when the
//   caller asks for a deterministic algorithm ("use_dp_workspace"; cuDNN then reduces through a
//   dP workspace of B Hq ceil64(T)^2 bf16 elements) and otherwise through a float32 dQ_accum
//   tensor that the kernels accumulate into with atomics. We always build the first form, leave
//   the reductions' IS_DETERMINISTIC attribute at its default (as the frontend does), and take the first
//   heuristic engine config whose engine carries no CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC note;
//   none: the shape is unsupported (our deterministic kernel runs instead). The frontend on
//   Blackwell (sm_100+) additionally pins an engine id and knobs for determinism; we do not, and
//   rely on the numerical-note filter there. Bitwise repeatability is a GPU test.
// Engine choice: CUDNN_HEUR_MODE_A (then CUDNN_HEUR_MODE_FALLBACK), every returned config tried
//   in order; the first deterministic one that finalizes becomes the plan. Workspace: the plan's CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE
//   (plus softmax_sum for the backward), allocated per call from the CudaAllocator (Category::
//   workspace) on the call's stream and freed after the launch (stream-ordered reuse).
//
// supported(): bfloat16 only (cuDNN's fused flash attention has no float32 path), D % 8 == 0 and
// D <= 128, Hq % Hkv == 0, cuDNN >= 9.0 at run time; then both plans are built once per shape and
// any cuDNN failure (no engine config, finalization errors) makes the shape unsupported with
// cuDNN's message, cached. forward/backward on an unsupported shape throw that reason. Pointers
// must be 16-byte aligned (aligned16()). Not thread safe: one CudnnAttention per device, used
// from the thread that runs that device's kernels (as CudaGemm).
#pragma once
#include <cuda_runtime_api.h>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "cuda/allocator.h"

namespace zt {

struct CudnnAttnShape {
  int64_t B = 0, T = 0, Hq = 0, Hkv = 0, D = 0;
  DType dtype = DType::bf16;
  // Elements from one token's row of q, k, v (and dq, dk, dv) to the next: 0 = each contiguous
  // (Hq D for q, Hkv D for k and v). (Hq + 2 Hkv) D reads them in place from one packed
  // projection (B, T, (Hq + 2 Hkv) D) = [q heads | k heads | v heads] per token, and writes the
  // gradients into one such buffer (GPT-2's c_attn; llm.c hands cuDNN the same strides).
  // out, dout and stats are contiguous either way.
  int64_t qkv_row = 0;
  auto operator<=>(const CudnnAttnShape&) const = default;
  std::string str() const;  // "bfloat16 B 8 T 1024 Hq 12 Hkv 12 D 64" (+ " packed row 2304")
  int64_t row(int64_t H) const { return qkv_row ? qkv_row : H * D; }  // the token stride of an H-head tensor
};

class CudnnAttention {
 public:
  // Nothing touches the device here: the cuDNN handle is created at the first plan build.
  explicit CudnnAttention(CudaAllocator& alloc);
  ~CudnnAttention();  // destroys the plans and the handle; never throws
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether cuDNN runs forward AND backward for `s`; false with the reason in *why (when given).
  // The first call for a shape builds (and caches) both plans; may throw only for CUDA runtime
  // errors unrelated to the shape (e.g. no device).
  bool supported(const CudnnAttnShape& s, std::string* why = nullptr);

  // out (B, T, Hq, D) and stats (B, Hq, T) float32 written. Throws zt::Error (with supported()'s
  // reason) when the shape is unsupported. Asynchronous on `stream`.
  void forward(const CudnnAttnShape& s, void* out, float* stats, const void* q, const void* k, const void* v,
               cudaStream_t stream);
  // dq (B, T, Hq, D), dk, dv (B, T, Hkv, D) written (not accumulated). stats from forward (or from
  // cuda_kernels::attention_forward: the same quantity).
  void backward(const CudnnAttnShape& s, void* dq, void* dk, void* dv, const void* dout, const void* q,
                const void* k, const void* v, const void* out, const float* stats, cudaStream_t stream);

  // cuDNN's version at run time (cudnnGetVersion), e.g. 91900, and as text "9.19.0".
  static int64_t runtime_version();
  static std::string version_string();
  // Every pointer cuDNN reads or writes must be 16-byte aligned (CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT).
  static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

  struct Plan;   // one finalized execution plan and every descriptor it was built from (.cpp)
  struct Entry;  // per shape: supported or why not, the forward and backward plans (.cpp)

 private:
  Entry& entry_for(const CudnnAttnShape& s);
  void* handle();  // cudnnHandle_t, created on first use on the allocator's device

  CudaAllocator& alloc_;
  void* handle_ = nullptr;
  std::map<CudnnAttnShape, std::unique_ptr<Entry>> entries_;
};

}  // namespace zt
