// defines: cuda_kernels::attention_forward, attention_backward, attention_backward_workspace_bytes,
//          kAttentionMaxHeadDim — causal grouped-query attention on the GPU (float32 or bfloat16
//          storage, float32 math), the simple, deterministic fallback and reference kernel that sits
//          beside a cuDNN / flash path: FlashAttention-2's algorithm (Dao 2023, Algorithms 1 and 2:
//          online softmax over key tiles, the row log-sum-exp saved instead of the probabilities,
//          the backward recomputing them) on CUDA cores, without tensor cores.
//
// Semantics — core/kernels/attention.h's: q, out, dq, dout (B, T, Hq, D); k, v, dk, dv
//   (B, T, Hkv, D); all contiguous. Query head h reads kv head h / (Hq / Hkv); scale = 1/sqrt(D);
//   position t attends to keys j <= t:
//     s_tj = scale q_t . k_j,  lse_t = log sum_{j<=t} exp(s_tj),  p_tj = exp(s_tj - lse_t),
//     out_t = sum_{j<=t} p_tj v_j.
//   Saved for the backward: lse (B, Hq, T) float32 (natural log) — the statistic the CPU's tiled
//   kernel (core/kernels/attention.h, the same algorithm) saves too.
//   Backward (FlashAttention-2's, as the CPU's; dS = P * (dP - rowsum(dP * P)), with
//   rowsum_j(dP_tj P_tj) = dout_t . sum_j P_tj v_j = dout_t . out_t):
//     Dl_t = dout_t . out_t,  dp_tj = dout_t . v_j,  ds_tj = p_tj (dp_tj - Dl_t),
//     dq_t = scale sum_{j<=t} ds_tj k_j,
//     dk_j = scale sum_{h in group} sum_{t>=j} ds_tj q_t,   dv_j = sum_{h in group} sum_{t>=j} p_tj dout_t.
//   With bfloat16 storage everything is computed in float32 from the stored values and each output
//   element is rounded once. Dl is NOT taken from the stored bf16 out there (FlashAttention does
//   that): its 2^-9 rounding enters dp - Dl, a cancellation, and cost ~1.5e-2 relative error in dq
//   and dk against the float32 reference (measured in a host emulation of these kernels); bf16
//   computes Dl_t = sum_j p_tj dp_tj in float32 instead (~4e-3, the outputs' own rounding).
//
// Kernels (float32 accumulators in registers, tiles converted to float32 in shared memory):
//   forward   one block of 4 warps per (query tile of 16 rows, head h, batch b); each warp owns 4
//             query rows; key tiles of 32 rows of K and V are staged in shared memory; lane j
//             computes the 4 rows' scores against key j, the warp keeps the running max m and sum
//             l per row (online softmax: on a new max, the old sum and output are scaled by
//             exp(m_old - m_new)), and lane c accumulates out[d] for d = c, c + 32, c + 64, c + 96.
//             Only key tiles up to the block's last query row are visited (causal).
//   backward  (1) float32: Dl_t = dout_t . out_t, one warp per row, (B, Hq, T) float32 into the
//                 workspace; bfloat16: done in (2) by a first sweep over the key tiles that sums
//                 p_tj dp_tj (tile by tile in order), written to the workspace for (3);
//             (2) dq: the forward's tiling, recomputing p from lse, lane j computes s and dp for key
//                 j, dq accumulates ds_tj k_j in registers; written once per row;
//             (3) dk, dv: one block per (key tile of 16 rows, kv head, batch), 4 keys per warp;
//                 for each query head of the group in order g = 0 .. G-1, query tiles of 32 rows
//                 from the key tile's first row up to T, lane i computes p and ds for query row
//                 t0 + i, and the warp accumulates dv[d] += p_i dout_i[d], dk[d] += ds_i q_i[d]
//                 over i in order. Each dk / dv row is written once by one warp: no atomics.
// Determinism: every output element is produced by one fixed sequence of float32 operations (key
// tiles in increasing order, warp reductions by a fixed __shfl_xor butterfly, which gives every
// lane the same bits because float addition is commutative), independent of the launch order of
// blocks: the same bits on every run on a given GPU. expf / logf are CUDA's full-precision
// functions (never build with --use_fast_math), so results differ from the CPU's (the same
// algorithm, with 64 x 64 tiles multiplied by OpenBLAS and a polynomial expf: other summation
// orders) by float32 rounding only (~1e-6 relative).
//
// Cost (FLOPs, counting a multiply-add as 2; causal, so about T^2 / 2 (query, key) pairs per
// (b, h)): forward 4 D per pair = 2 B Hq T^2 D; backward pass (2) 6 D and pass (3) 8 D per pair
// = 7 B Hq T^2 D, plus 2 B Hq T^2 D for bfloat16's Dl sweep (FlashAttention-2's backward does 5
// GEMMs = 5 B Hq T^2 D; the split into a dq and a dk/dv pass recomputes S and dP once more to
// avoid float atomics). Speed: CUDA-core FP32 FMAs
// fed from shared memory (about one shared-memory load per FMA, no tensor cores), so expect on the
// order of 5-15 TFLOP/s on an H100 — roughly 10-50x slower than cuDNN's or FlashAttention's
// tensor-core kernels (GPT-2 small, B = 8, T = 1024, 12 heads of 64: forward 12.9 GFLOP, a few
// milliseconds per layer). NOT MEASURED: no GPU was available when this was written. This is the
// reference and fallback, not the fast path. Memory: O(B Hq T) (lse, Dl) besides the tensors.
//
// Limits: 1 <= D <= kAttentionMaxHeadDim (the per-lane accumulators cover 4 * 32 = 128 columns),
// any T >= 0 (T = 0 or B = 0 does nothing), Hq % Hkv == 0, Hq and B <= 65535 (grid dimensions).
// Violations throw zt::Error naming the argument. Shared memory: up to ~50 KB per block (D = 128),
// above the 48 KB default: the launch opts in (cudaFuncAttributeMaxDynamicSharedMemorySize; sm_80+).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace zt::cuda_kernels {

inline constexpr int64_t kAttentionMaxHeadDim = 128;

// out (B, T, Hq, D) written; lse (B, Hq, T) float32 written, or nullptr (not kept: inference).
void attention_forward(DType t, void* out, float* lse, const void* q, const void* k, const void* v, int64_t B,
                       int64_t T, int64_t Hq, int64_t Hkv, int64_t D, cudaStream_t s);

// Bytes of device workspace attention_backward needs: Dl (B, Hq, T) float32.
int64_t attention_backward_workspace_bytes(int64_t B, int64_t T, int64_t Hq);

// dq (B, T, Hq, D), dk, dv (B, T, Hkv, D): written (not accumulated); lse from attention_forward.
// workspace: at least attention_backward_workspace_bytes device bytes, 4-byte aligned, not used by
// others until the launches complete.
void attention_backward(DType t, void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                        const void* v, const void* out, const float* lse, void* workspace, int64_t B, int64_t T,
                        int64_t Hq, int64_t Hkv, int64_t D, cudaStream_t s);

}  // namespace zt::cuda_kernels
