// defines: ring_reduce_scatter, ring_all_gather, ring_all_reduce (dist/mpi_ring.h);
//          file-local: Chunks, wrap, add, sendrecv, at, segment_elements, scratch_for
#include "dist/mpi_ring.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>

#include "core/check.h"  // defines: ZT_CHECK, ZT_THROW
#include "core/dtype.h"  // defines: f32_to_bf16, bf16_to_f32, f32_to_f16, f16_to_f32

namespace zt {

namespace {

// n elements cut into `size` chunks: chunk c is [begin(c), begin(c + 1)); the first n mod size
// chunks are one element longer.
struct Chunks {
  int64_t n;
  int size;
  int64_t begin(int c) const {
    const int64_t base = n / size, extra = n % size;
    return c * base + std::min<int64_t>(c, extra);
  }
  int64_t length(int c) const { return begin(c + 1) - begin(c); }
};

int wrap(int c, int size) { return ((c % size) + size) % size; }

// dst[i] = received[i] + own[i] for n elements of dtype dt (dst may be own).
void add(void* dst, const void* received, const void* own, int64_t n, DType dt) {
  switch (dt) {
    case DType::f64: {
      auto* a = static_cast<double*>(dst);
      const auto *b = static_cast<const double*>(received), *c = static_cast<const double*>(own);
      for (int64_t i = 0; i < n; ++i) a[i] = b[i] + c[i];
      return;
    }
    case DType::f32: {
      auto* a = static_cast<float*>(dst);
      const auto *b = static_cast<const float*>(received), *c = static_cast<const float*>(own);
      for (int64_t i = 0; i < n; ++i) a[i] = b[i] + c[i];
      return;
    }
    case DType::bf16: {
      auto* a = static_cast<uint16_t*>(dst);
      const auto *b = static_cast<const uint16_t*>(received), *c = static_cast<const uint16_t*>(own);
      for (int64_t i = 0; i < n; ++i) a[i] = f32_to_bf16(bf16_to_f32(b[i]) + bf16_to_f32(c[i]));
      return;
    }
    case DType::f16: {
      auto* a = static_cast<uint16_t*>(dst);
      const auto *b = static_cast<const uint16_t*>(received), *c = static_cast<const uint16_t*>(own);
      for (int64_t i = 0; i < n; ++i) a[i] = f32_to_f16(f16_to_f32(b[i]) + f16_to_f32(c[i]));
      return;
    }
    default: ZT_THROW("ring reduction: cannot add ", dtype_name(dt), " (float32, float64, bfloat16, float16 only)");
  }
}

// One ring step: `send_count` elements to rank + 1 while `recv_count` arrive from rank - 1.
void sendrecv(const void* send, int64_t send_count, void* recv, int64_t recv_count, MPI_Datatype type, MPI_Comm comm,
              int rank, int size) {
  ZT_CHECK(send_count <= INT32_MAX && recv_count <= INT32_MAX, "ring step of ", std::max(send_count, recv_count),
           " elements: MPI counts are int (at most 2^31 - 1)");
  MPI_Sendrecv(send, static_cast<int>(send_count), type, (rank + 1) % size, /*tag=*/0, recv,
               static_cast<int>(recv_count), type, (rank - 1 + size) % size, /*tag=*/0, comm, MPI_STATUS_IGNORE);
}

char* at(const Tensor& t, int64_t element) { return static_cast<char*>(t.raw()) + element * t.element_size(); }

// A reduction runs one ring per segment of kRingSegmentBytes of each chunk, so the receive buffer
// is one segment, not one chunk (a 154 MiB embedding gradient over 4 ranks would need 38 MiB).
int64_t segment_elements(const Tensor& t) {
  return std::max<int64_t>(1, static_cast<int64_t>(kRingSegmentBytes / t.element_size()));
}

char* scratch_for(RingScratch& scratch, size_t bytes) {
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch.data();
}

}  // namespace

void ring_reduce_scatter(const Tensor& in, const Tensor& out, MPI_Datatype type, MPI_Comm comm, int rank, int size,
                         RingScratch& scratch) {
  const int64_t S = out.numel(), seg = segment_elements(out);
  if (size == 1) {
    std::memcpy(out.raw(), in.raw(), static_cast<size_t>(S) * out.element_size());
    return;
  }
  char* received = scratch_for(scratch, static_cast<size_t>(std::min(S, seg)) * out.element_size());
  for (int64_t a = 0; a < S; a += seg) {  // one ring per segment [a, a + n) of every chunk
    const int64_t n = std::min(seg, S - a);
    // out[a, a + n) carries the partial sum between steps: the one sent at step k is the one made
    // at step k - 1 (step 0 sends our own part), and it is overwritten only after MPI_Sendrecv
    // returned.
    for (int k = 0; k < size - 1; ++k) {
      const int send_chunk = wrap(rank - k - 1, size), recv_chunk = wrap(rank - k - 2, size);
      const void* send = k == 0 ? at(in, send_chunk * S + a) : at(out, a);
      sendrecv(send, n, received, n, type, comm, rank, size);
      add(at(out, a), received, at(in, recv_chunk * S + a), n, out.dtype());
    }
  }
}

void ring_all_gather(const Tensor& in, const Tensor& out, MPI_Datatype type, MPI_Comm comm, int rank, int size) {
  const int64_t S = in.numel();
  if (in.raw() != at(out, rank * S))
    std::memcpy(at(out, rank * S), in.raw(), static_cast<size_t>(S) * in.element_size());
  for (int k = 0; k < size - 1; ++k) {
    const int send_chunk = wrap(rank - k, size), recv_chunk = wrap(rank - k - 1, size);
    sendrecv(at(out, send_chunk * S), S, at(out, recv_chunk * S), S, type, comm, rank, size);
  }
}

void ring_all_reduce(const Tensor& x, MPI_Datatype type, MPI_Comm comm, int rank, int size, RingScratch& scratch) {
  if (size == 1) return;
  const Chunks ch{x.numel(), size};
  const int64_t seg = segment_elements(x), longest = ch.length(0);
  char* received = scratch_for(scratch, static_cast<size_t>(std::min(longest, seg)) * x.element_size());
  // segment [a, a + seg) of chunk c, clipped to the chunk (empty past its end)
  auto part = [&](int c, int64_t a) { return std::clamp<int64_t>(ch.length(c) - a, 0, seg); };
  // reduce-scatter in place, a segment at a time: the partial sum of a chunk accumulates in that
  // chunk of x
  for (int64_t a = 0; a < longest; a += seg)
    for (int k = 0; k < size - 1; ++k) {
      const int send_chunk = wrap(rank - k - 1, size), recv_chunk = wrap(rank - k - 2, size);
      sendrecv(at(x, ch.begin(send_chunk) + a), part(send_chunk, a), received, part(recv_chunk, a), type, comm, rank,
               size);
      char* mine = at(x, ch.begin(recv_chunk) + a);
      add(mine, received, mine, part(recv_chunk, a), x.dtype());
    }
  // all-gather: chunk r is complete on rank r
  for (int k = 0; k < size - 1; ++k) {
    const int send_chunk = wrap(rank - k, size), recv_chunk = wrap(rank - k - 1, size);
    sendrecv(at(x, ch.begin(send_chunk)), ch.length(send_chunk), at(x, ch.begin(recv_chunk)), ch.length(recv_chunk),
             type, comm, rank, size);
  }
}

}  // namespace zt
