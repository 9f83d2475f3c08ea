// defines: embedding_forward / embedding_backward (row gather and its deterministic scatter-add).
//
// ids (n) int32 in [0, V) (the caller checks the range) or -1, table (V, C), out (n, C):
//   out[i, :] = table[ids[i], :], a zero row for -1 (another rank's id under vocabulary
//   parallelism: parallel/vocab_parallel.h), which the backward skips
// Backward: dtable[ids[i], :] += dout[i, :] for i = 0..n-1 in order. Threads split the C
// columns (never the tokens), so a row that several tokens hit receives its additions in token
// order: bitwise identical for any thread count, no atomics. dtable is accumulated into, not
// overwritten (zero it first for a fresh gradient).
#pragma once
#include <cstdint>

namespace zt {

template <class T> void embedding_forward(T* out, const int32_t* ids, const T* table, int64_t n, int64_t C);
template <class T> void embedding_backward(T* dtable, const T* dout, const int32_t* ids, int64_t n, int64_t C);

}  // namespace zt
