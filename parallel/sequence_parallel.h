// defines: ulysses_exchange, sequence_shard — DeepSpeed-Ulysses' sequence parallelism (Jacobs et
//          al. 2023): each rank of a sequence group holds T / P of every sequence, and attention,
//          the one layer that mixes positions, runs on the whole sequence for P-th of the heads.
//
//   tokens t in [s Tl, (s + 1) Tl), Tl = T / P, all heads   (B, Tl, (Hq + 2 Hkv) D)  q | k | v
//     --all-to-all-->  every token, heads share s            (B, T, (Hq + 2 Hkv) D / P)
//     attention (causal, RoPE at the whole sequence's positions)  (B, T, Hq / P, D)
//     --all-to-all-->  tokens t in [s Tl, (s + 1) Tl), all heads  (B, Tl, Hq D)
//
// Everything else (the embedding, the norms, the MLP, the head and its loss) is per token and runs
// on the rank's Tl tokens; the parameters are the same on every rank of the group, so ZeRO shards
// and averages them over the replica group, which spans data x sequence ranks (dist/process_grid.h).
// A step moves per block two all-to-alls forward and two backward, each (P - 1) / P of the rank's
// B Tl (Hq + 2 Hkv) D (the first) or B Tl Hq D (the second) elements: the same for any P, where
// Megatron's sequence parallelism moves more as P grows (the paper's section 3.2). One more of the
// second kind in the backward makes the attention output's token layout again (it is freed once
// projected, so a rank keeps one layout of it), and the projection sent by the first is freed.
#pragma once
#include <cstdint>

#include "nn/layers.h"  // defines: HeadExchange
#include "parallel/tensor_parallel.h"

namespace zt {

// A sequence group's handle: the same as a tensor group's (null or one rank: off).
using SequenceParallel = TensorParallel;

// The exchange for an attention layer of Hq query and Hkv key/value heads of size D on this rank
// (after any tensor-parallel split), over the sequence group sp; both must be divisible by its size
// (a zt::Error names the one that is not). sp of one rank: no exchange (parts 1, null functions).
HeadExchange ulysses_exchange(const SequenceParallel& sp, int64_t Hq, int64_t Hkv, int64_t D);

// This rank's columns [s T / P, (s + 1) T / P) of a (B, T) batch of ids (the data loader reads the
// whole sequences; each rank of the sequence group keeps its share). T must be divisible by P.
Tensor sequence_shard(const Tensor& ids, const SequenceParallel& sp);

}  // namespace zt
