// defines: RingScratch, ring_reduce_scatter, ring_all_gather, ring_all_reduce — the MPI backend's
//          reductions and gathers as rings over point-to-point messages (dist/mpi_process_group.cpp
//          calls them on its communication thread; this header is for that file alone: it names MPI).
//
// Why our own rings: Open MPI's defaults do not move what the ring model says (dist/process_group.h,
// the ZeRO paper's convention). Its MPI_Reduce_scatter_block is basic linear (reduce everything to
// rank 0, then scatter): rank 0 receives N - 1 full buffers and holds one more, and on 2 nodes x 2
// ranks one node sends 4x the other's bytes; its all-gather on that layout sends 1.34x the model's
// bytes across nodes (bench/results/collectives.md has the measurement). The rings here send, on
// every rank, exactly n (N-1)/N elements for a reduce-scatter or an all-gather of n and twice that
// for an all-reduce, each to rank + 1 (mod N): the model's bytes on the model's links, evenly.
//
// The ring (N ranks, buffer split into N chunks; chunk c belongs to rank c):
//   reduce-scatter, N - 1 steps: at step k rank r sends its partial sum of chunk (r - k - 1) to
//     r + 1 and receives the partial sum of chunk (r - k - 2) from r - 1, to which it adds its own
//     part; after step N - 2 it holds the full sum of chunk r. Chunk c's sum starts at rank c + 1
//     and ends at rank c: (((x[c+1] + x[c+2]) + ...) + x[c]), a fixed order, so a run is bitwise
//     the same every time (the order differs between chunks and depends on N: runs at different N
//     agree to rounding, not bitwise).
//   all-gather, N - 1 steps: at step k rank r sends chunk (r - k) to r + 1 and receives chunk
//     (r - k - 1) from r - 1, straight into its place in the output.
//   all-reduce: the reduce-scatter in place, then the all-gather, on chunks of n / N elements (the
//     first n mod N chunks one longer).
// Sums: float32 and float64 add natively; bfloat16 and float16 add in float32 and round once per
// addition (as NCCL's reductions do), so an N-rank sum of 2-byte values rounds N - 1 times.
// Each step is one MPI_Sendrecv (blocking: the communication thread runs one collective at a time).
// The reductions run one ring per segment of kRingSegmentBytes of each chunk (the same sums in
// the same order, N - 1 more messages per segment), so a rank holds one segment beside its
// buffers, not one chunk.
#pragma once
#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings are deprecated and warn)
#include <mpi.h>

#include <vector>

#include "core/tensor.h"

namespace zt {

// The size of the segments a reduction's ring runs on (a ring step's message, at most).
inline constexpr size_t kRingSegmentBytes = size_t{4} << 20;

// The rings' receive buffer: at most one segment, kept between collectives (the communication
// thread's own memory, like MPI's internal buffers: outside the memory categories).
using RingScratch = std::vector<char>;

// Host tensors only (the caller stages device buffers). `type`: the MPI datatype of one element
// (2-byte floats travel as MPI_UINT16_T); rank and size: this rank's place in comm.
// in (N*S) -> out (S), out = sum over ranks of in[rank*S, (rank+1)*S); in and out must not overlap.
void ring_reduce_scatter(const Tensor& in, const Tensor& out, MPI_Datatype type, MPI_Comm comm, int rank, int size,
                         RingScratch& scratch);
// in (S) -> out (N*S); in may be out's own chunk (in place).
void ring_all_gather(const Tensor& in, const Tensor& out, MPI_Datatype type, MPI_Comm comm, int rank, int size);
// x (n) -> the sum over ranks, in place.
void ring_all_reduce(const Tensor& x, MPI_Datatype type, MPI_Comm comm, int rank, int size, RingScratch& scratch);

}  // namespace zt
