// defines: ulysses_exchange, sequence_shard (parallel/sequence_parallel.h); file-local: Groups,
//          block, pack_heads, unpack_heads, exchange
#include "parallel/sequence_parallel.h"

#include <memory>
#include <vector>

#include "core/check.h"

namespace zt {

namespace {

// The column groups of a packed projection (q | k | v, or the attention output's q): group g holds
// heads[g] heads of D columns; share j of P holds heads [j H/P, (j + 1) H/P) of every group.
struct Groups {
  std::vector<int64_t> heads;
  int64_t D = 0, P = 1;
  int64_t wide() const {  // columns of all heads
    int64_t w = 0;
    for (int64_t h : heads) w += h * D;
    return w;
  }
  int64_t narrow() const { return wide() / P; }  // columns of one share
};

// Block j of a contiguous (P, ...) buffer, as a (...) view.
Tensor block(const Tensor& t, int64_t j) {
  Shape inner(t.shape().begin() + 1, t.shape().end());
  return t.slice(0, j, j + 1).view(inner);
}

// x (B, Tl, wide) -> send (P, B, Tl, narrow): block j holds share j of every group (to rank j).
Tensor pack_heads(const Tensor& x, const Groups& g) {
  const int64_t B = x.size(0), Tl = x.size(1);
  Tensor send = Tensor::empty({g.P, B, Tl, g.narrow()}, x.dtype(), Category::comm);
  for (int64_t j = 0; j < g.P; ++j) {
    int64_t wide0 = 0, narrow0 = 0;
    for (int64_t h : g.heads) {
      const int64_t w = h / g.P * g.D;
      block(send, j).slice(2, narrow0, narrow0 + w).copy_(x.slice(2, wide0 + j * w, wide0 + (j + 1) * w));
      wide0 += h * g.D, narrow0 += w;
    }
  }
  return send;
}

// recv (P, B, Tl, narrow), block j share j of every group -> (B, Tl, wide): pack_heads' inverse,
// written into `into` when given (contiguous, that shape), else into a new tensor.
Tensor unpack_heads(const Tensor& recv, const Groups& g, Tensor into = Tensor()) {
  const int64_t B = recv.size(1), Tl = recv.size(2);
  Tensor x = into.defined() ? into : Tensor::empty({B, Tl, g.wide()}, recv.dtype(), Category::activations);
  for (int64_t j = 0; j < g.P; ++j) {
    int64_t wide0 = 0, narrow0 = 0;
    for (int64_t h : g.heads) {
      const int64_t w = h / g.P * g.D;
      x.slice(2, wide0 + j * w, wide0 + (j + 1) * w).copy_(block(recv, j).slice(2, narrow0, narrow0 + w));
      wide0 += h * g.D, narrow0 += w;
    }
  }
  return x;
}

// send (P, ...) block j to rank j; the blocks received, block q from rank q.
Tensor exchange(const Tensor& send, const SequenceParallel& sp) {
  Tensor recv = Tensor::empty(send.shape(), send.dtype(), Category::comm);
  sp.group->all_to_all(send.view({send.numel()}), recv.view({recv.numel()}));
  return recv;
}

}  // namespace

HeadExchange ulysses_exchange(const SequenceParallel& sp, int64_t Hq, int64_t Hkv, int64_t D) {
  HeadExchange ex;
  if (!sp.on()) return ex;
  const int64_t P = sp.size();
  if (Hq % P != 0 || Hkv % P != 0)
    ZT_THROW("sequence parallelism (Ulysses): ", Hq % P != 0 ? "the query heads (" : "the key/value heads (",
             Hq % P != 0 ? Hq : Hkv, " on this rank) are not divisible by sequence_parallel_size ", P,
             ": each rank attends over a whole sequence for a share of the heads");
  ex.parts = P;
  const Groups qkv{{Hq, Hkv, Hkv}, D, P}, out{{Hq}, D, P};
  ex.to_heads = [sp, qkv](const Var& x) {  // (B, Tl, wide) -> (B, T, narrow)
    Tensor y = join_tokens(exchange(pack_heads(x.value().contiguous(), qkv), sp));
    Var out = Var::make(
        y, {x},
        [sp, qkv](std::vector<Var>& in, const Tensor& g) {
          in[0].add_grad(unpack_heads(exchange(split_tokens(g.contiguous(), qkv.P), sp), qkv));
        },
        "ulysses_to_heads");
    // The projection's output is read by nothing else (its GEMM's backward needs its input): one
    // layout of q, k, v is kept, not two.
    if (out.requires_grad()) free_bytes(x.value());
    return out;
  };
  // The attention output is kept in one layout: attention's backward reads it by heads, the output
  // projection's by tokens. to_sequence's result is freed once projected (after_projection) and
  // exchanged again from the heads' layout when the backward reaches the projection: one more
  // all-to-all per layer in the backward. `last` carries one forward's pair from the first to the second.
  auto last = std::make_shared<std::pair<Tensor, Tensor>>();  // {by heads (B, T, Hq/P, D), by tokens}
  ex.to_sequence = [sp, out, last](const Var& y) {            // (B, T, Hq/P, D) -> (B, Tl, Hq D)
    const Shape shape = y.shape();
    const Tensor flat = y.value().contiguous().view({shape[0], shape[1], shape[2] * shape[3]});
    Tensor x = unpack_heads(exchange(split_tokens(flat, out.P), sp), out);
    *last = {flat, x};
    return Var::make(
        x, {y},
        [sp, out, shape](std::vector<Var>& in, const Tensor& g) {
          in[0].add_grad(join_tokens(exchange(pack_heads(g.contiguous(), out), sp)).view(shape));
        },
        "ulysses_to_sequence");
  };
  ex.after_projection = [sp, out, last](const Var& projected) {
    const Tensor heads = last->first, tokens = last->second;  // (clang 14 cannot capture a structured binding)
    *last = {};
    if (!projected.requires_grad() || !heads.defined()) return projected;
    Var y = Var::make(
        projected.value(), {projected},
        [sp, out, heads, tokens](std::vector<Var>& in, const Tensor& g) {
          tokens.storage()->materialize();  // the projection's input again, before its backward reads it
          unpack_heads(exchange(split_tokens(heads, out.P), sp), out, tokens);
          in[0].add_grad(g);
        },
        "ulysses_again");
    free_bytes(tokens);
    return y;
  };
  return ex;
}

Tensor sequence_shard(const Tensor& ids, const SequenceParallel& sp) {
  if (!sp.on()) return ids;
  const int64_t T = ids.size(1), P = sp.size();
  if (T % P != 0)
    ZT_THROW("sequence parallelism (Ulysses): the sequence length ", T, " is not divisible by sequence_parallel_size ",
             P, " (each rank keeps T / P tokens)");
  const int64_t Tl = T / P;
  return ids.slice(1, sp.rank() * Tl, (sp.rank() + 1) * Tl).contiguous();
}

}  // namespace zt
