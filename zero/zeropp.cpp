// defines: quantized_bytes, quantized_all_gather, hpz_secondary_group, qgz_runs, qgz_summary,
//          qgz_layout, QuantizedReduceScatter (zero/zeropp.h); file-local: ranks_by_node,
//          quantize_any, dequantize_into, Piece, SlicePlan, plan_slice, quantize_slice,
//          round_to_fp16, add_dequantized
#include "zero/zeropp.h"

#include <algorithm>

#include "core/check.h"
#include "core/kernels/accumulate.h"  // defines: accumulate_
#include "core/kernels/cast.h"        // defines: cast_
#include "core/kernels/quantize.h"

namespace zt {

namespace {

// Every node's ranks, in rank order (node k's l-th rank: [k][l]).
std::vector<std::vector<int>> ranks_by_node(const Topology& t) {
  std::vector<std::vector<int>> nodes(static_cast<size_t>(t.num_nodes()));
  for (int r = 0; r < t.size(); ++r) nodes[static_cast<size_t>(t.node_of[r])].push_back(r);
  return nodes;
}

// x (n, any float dtype) -> codes, scales; through a float32 copy when x is not float32.
void quantize_any(const Tensor& codes, const Tensor& scales, const Tensor& x, QuantFormat f) {
  Tensor x32 = x;
  if (x.dtype() != DType::f32) {
    x32 = Tensor::empty({x.numel()}, DType::f32, Category::comm);
    cast_(x32, x);
  }
  quantize_(codes, scales, x32, f.bits, f.block, f.scheme);
}

// codes, scales -> dst (n, any float dtype).
void dequantize_into(const Tensor& dst, const Tensor& codes, const Tensor& scales, QuantFormat f) {
  if (dst.dtype() == DType::f32) return dequantize_(dst, codes, scales, f.bits, f.block);
  Tensor tmp = Tensor::empty({dst.numel()}, DType::f32, Category::comm);
  dequantize_(tmp, codes, scales, f.bits, f.block);
  cast_(dst, tmp);
}

// qgZ's payload for one slice of n gradient values (one shard's chunk), as runs quantized with
// one group size each: elements [at, at + len) of the slice in groups of `group` (the last one
// shorter), their codes from byte code_at of the slice's payload, their scales from scale_at.
struct Piece {
  int64_t at, len, group, code_at, scale_at;
};
struct SlicePlan {
  std::vector<Piece> pieces;
  int64_t code_bytes = 0, scales = 0;  // the slice's payload
};

// The plan of flat elements [lo, lo + n): blocks, one run of fixed blocks over the whole slice;
// deepspeed, the quantized tensors' elements in their groups (zero/zeropp.h), the rest not sent.
SlicePlan plan_slice(const QgzLayout& layout, int64_t lo, int64_t n, bool deepspeed, QuantFormat f) {
  SlicePlan p;
  auto add = [&p, f](int64_t at, int64_t len, int64_t group) {
    p.pieces.push_back({at, len, group, p.code_bytes, p.scales});
    p.code_bytes += quantized_code_bytes(len, f.bits);
    p.scales += quantized_blocks(len, group);
  };
  if (!deepspeed) {
    add(0, n, f.block);
    return p;
  }
  for (const QgzLayout::Run& r : layout.quantized) {
    const int64_t b = std::max(r.begin, lo), e = std::min(r.end, lo + n);
    if (b >= e) continue;
    int64_t at = b;
    if (const int64_t into = (b - r.begin) % r.group; into != 0) {  // the slice starts inside a group
      const int64_t len = std::min(r.group - into, e - b);
      add(at - lo, len, len);
      at += len;
    }
    if (at < e) add(at - lo, e - at, r.group);
  }
  return p;
}

// x (the slice's n values, float32) -> codes, scales (the slice's payload, as planned).
void quantize_slice(const Tensor& codes, const Tensor& scales, const Tensor& x, const SlicePlan& plan, QuantFormat f) {
  for (const Piece& c : plan.pieces)
    quantize_any(range(codes, c.code_at, quantized_code_bytes(c.len, f.bits)),
                 range(scales, c.scale_at, quantized_blocks(c.len, c.group)), range(x, c.at, c.len),
                 {f.bits, c.group, f.scheme});
}

// t (float32) rounded to fp16's nearest value, in place.
void round_to_fp16(const Tensor& t) {
  Tensor h = Tensor::empty({t.numel()}, DType::f16, Category::comm);
  cast_(h, t);
  cast_(t, h);
}

// sum (the slice's n values, float32) += one received payload of the slice, dequantized; with
// fp16 sums each dequantized value and each sum rounded to fp16, as DeepSpeed's __half adds.
void add_dequantized(const Tensor& sum, const Tensor& codes, const Tensor& scales, const SlicePlan& plan, QuantFormat f,
                     bool fp16) {
  for (const Piece& c : plan.pieces) {
    Tensor part = Tensor::empty({c.len}, DType::f32, Category::comm);
    dequantize_(part, range(codes, c.code_at, quantized_code_bytes(c.len, f.bits)),
                range(scales, c.scale_at, quantized_blocks(c.len, c.group)), f.bits, c.group);
    Tensor into = range(sum, c.at, c.len);
    if (fp16) round_to_fp16(part);
    accumulate_(into, part, 1.0);
    if (fp16) round_to_fp16(into);
  }
}

}  // namespace

int64_t quantized_bytes(int64_t n, QuantFormat f) {
  return quantized_code_bytes(n, f.bits) + quantized_blocks(n, f.block) * static_cast<int64_t>(sizeof(float));
}

void quantized_all_gather(ProcessGroup& g, const Tensor& src, const Tensor& dst, int64_t chunk, QuantFormat f,
                          std::deque<Pending>& out) {
  const int64_t S = src.numel(), N = g.size();
  ZT_CHECK(dst.numel() == N * S, "quantized_all_gather: dst ", dst.str(), " must hold ", N, " x src ", src.str());
  CommLabel label(g, g.label() + " (qwZ " + f.name() + ")");
  for (int64_t a = 0; a < S; a += chunk) {
    const int64_t n = std::min(chunk, S - a);
    const int64_t cb = quantized_code_bytes(n, f.bits), nb = quantized_blocks(n, f.block);
    Tensor codes = Tensor::empty({cb}, DType::u8, Category::comm);
    Tensor scales = Tensor::empty({nb}, DType::f32, Category::comm);
    quantize_any(codes, scales, range(src, a, n), f);
    Tensor all_codes = Tensor::empty({N * cb}, DType::u8, Category::comm);
    Tensor all_scales = Tensor::empty({N * nb}, DType::f32, Category::comm);
    out.push_back({g.all_gather_async(codes, all_codes), nullptr});
    out.push_back({g.all_gather_async(scales, all_scales), [=] {
                     (void)codes, (void)scales;  // alive until both collectives are done
                     for (int64_t q = 0; q < N; ++q)
                       dequantize_into(range(dst, q * S + a, n), range(all_codes, q * cb, cb),
                                       range(all_scales, q * nb, nb), f);
                   }});
  }
}

std::unique_ptr<ProcessGroup> hpz_secondary_group(const ZeroOptimization& z, ProcessGroup& world) {
  const Topology& t = world.topology();
  const std::vector<std::vector<int>> nodes = ranks_by_node(t);
  const int H = static_cast<int>(z.zero_hpz_partition_size);
  for (size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k].size() % static_cast<size_t>(H) != 0)
      ZT_THROW("zero_optimization.zero_hpz_partition_size = ", H, " does not divide node ", k, "'s ", nodes[k].size(),
               " ranks (", t.summary(), "): the secondary shards are kept by H ranks of one node");
  // The group of H consecutive ranks of this node that holds this rank, named by its first rank.
  return node_block_group(world, H);
}

bool qgz_runs(const ZeroOptimization& z, int num_nodes) {
  return z.zero_quantized_gradients && z.stage == 3 && (num_nodes > 1 || z.zero_quantized_gradients_one_node);
}

std::string qgz_summary(const ZeroOptimization& z, int num_nodes) {
  if (!z.zero_quantized_gradients) return "";
  const std::string f = "int" + std::to_string(z.zero_quantized_gradients_bits) + " (" +
                        (z.zero_quantized_gradients_format == "blocks"
                             ? "blocks of " + std::to_string(z.zero_quantization_block_size) + ", float32 sums"
                             : "DeepSpeed's groups, fp16 sums") +
                        ")";
  if (!qgz_runs(z, num_nodes))
    return "qgZ off on one node (exact reduce-scatter, as DeepSpeed; zero_quantized_gradients_one_node quantizes)";
  return num_nodes > 1 ? "qgZ " + f + " across " + std::to_string(num_nodes) + " nodes"
                       : "qgZ " + f + " on one node (zero_quantized_gradients_one_node)";
}

QuantizedReduceScatter::QuantizedReduceScatter(const ZeroOptimization& z, ProcessGroup& world) : z_(z), world_(world) {
  const Topology& t = world.topology();
  const std::vector<std::vector<int>> nodes = ranks_by_node(t);
  const std::vector<int>& mine = nodes[static_cast<size_t>(t.node())];
  const int l = t.local_rank();
  const size_t M = mine.size();
  for (size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k].size() != M)
      ZT_THROW(
          "zero_optimization.zero_quantized_gradients = true needs the same number of ranks on every node (its "
          "all-to-all pairs rank l of each node): node ",
          k, " has ", nodes[k].size(), ", node ", t.node(), " has ", M, " (", t.summary(), ")");
  for (const auto& node : nodes) world_rank_.insert(world_rank_.end(), node.begin(), node.end());
  deepspeed_ = z.zero_quantized_gradients_format != "blocks";
  intra_ = intra_node_group(world);
  inter_ = inter_node_group(world);
  ZT_CHECK(intra_->rank() == l && inter_->rank() == t.node(), "ZeRO++ qgZ: the node groups' ranks (", intra_->rank(),
           ", ", inter_->rank(), ") are not this rank's local rank and node (", l, ", ", t.node(), ")");
}

QgzLayout qgz_layout(const std::vector<ParamInfo>& params, int world_size) {
  QgzLayout l;
  for (const ParamInfo& p : params) {
    if (p.shape.size() < 2 || p.numel % (2 * static_cast<int64_t>(world_size)) != 0) {
      l.exact.emplace_back(p.offset, p.offset + p.numel);
      continue;
    }
    // DeepSpeed's intra_quant_group: the number of groups; max(d0, d1) divides numel, and so does
    // the world (numel is a multiple of 2 x world)
    const int64_t groups = std::max({p.shape[0], p.shape[1], static_cast<int64_t>(world_size)});
    l.quantized.push_back({p.offset, p.offset + p.numel, p.numel / groups});
  }
  std::sort(l.exact.begin(), l.exact.end());
  std::sort(l.quantized.begin(), l.quantized.end(),
            [](const QgzLayout::Run& x, const QgzLayout::Run& y) { return x.begin < y.begin; });
  return l;
}

void QuantizedReduceScatter::reduce_scatter(const Tensor& grad, int64_t S, int64_t chunk, const QgzLayout& layout,
                                            const Land& land, std::deque<Pending>& out) const {
  const int M = intra_->size(), K = inter_->size(), N = M * K, me = world_.rank(), l = intra_->rank();
  const QuantFormat f{z_.zero_quantized_gradients_bits, z_.zero_quantization_block_size,
                      deepspeed_ ? QuantScheme::deepspeed : QuantScheme::symmetric};
  const bool fp16 = deepspeed_;
  const ExactRanges& exact = layout.exact;
  ZT_CHECK(grad.numel() == static_cast<int64_t>(M) * K * S, "ZeRO++ qgZ: gradient ", grad.str(), " is not ", M * K,
           " x ", S);
  for (int64_t a = 0; a < S; a += chunk) {
    const int64_t n = std::min(chunk, S - a);
    // Every shard's slice of this chunk: plans[w], its quantized payload.
    std::vector<SlicePlan> plans;
    for (int w = 0; w < N; ++w) plans.push_back(plan_slice(layout, w * S + a, n, deepspeed_, f));
    // The exact elements of this chunk, shard by shard: spans[w] = [j0, j1) offsets in the chunk
    // of shard w; E, the most any shard has, is each shard's block in a plain reduce-scatter.
    std::vector<ExactRanges> spans(static_cast<size_t>(N));
    int64_t E = 0;
    for (int w = 0; w < N; ++w) {
      const int64_t lo = w * S + a, hi = lo + n;
      int64_t e = 0;
      for (const auto& [b, c] : exact)
        if (std::max(b, lo) < std::min(c, hi)) {
          spans[static_cast<size_t>(w)].emplace_back(std::max(b, lo) - lo, std::min(c, hi) - lo);
          e += std::min(c, hi) - std::max(b, lo);
        }
      E = std::max(E, e);
    }
    Tensor exact_sum;  // (E): this rank's shard's exact elements, summed over every rank, in order
    WorkPtr exact_work;
    if (E > 0) {
      Tensor packed = Tensor::zeros({N * E}, DType::f32, Category::comm);
      for (int w = 0; w < N; ++w) {
        int64_t p = w * E;
        for (const auto& [j0, j1] : spans[static_cast<size_t>(w)]) {
          range(packed, p, j1 - j0).copy_(range(grad, w * S + a + j0, j1 - j0));
          p += j1 - j0;
        }
      }
      exact_sum = Tensor::empty({E}, DType::f32, Category::comm);
      CommLabel label(world_, world_.label() + " (qgZ: exact tensors)");
      exact_work = world_.reduce_scatter_async(packed, exact_sum);
      out.push_back({exact_work, [packed] { (void)packed; }});  // alive until the collective is done
    }
    // Writes the exact sums into this rank's landed chunk, over the quantized path's zeros.
    const ExactRanges mine = spans[static_cast<size_t>(me)];
    auto put_exact = [mine, exact_sum, exact_work](const Tensor& sum) {
      if (!exact_work) return;
      exact_work->wait();
      int64_t p = 0;
      for (const auto& [j0, j1] : mine) {
        range(sum, j0, j1 - j0).copy_(range(exact_sum, p, j1 - j0));
        p += j1 - j0;
      }
    };
    // Hop 1, inside the node: block l' = [slice of shard w(k', l') for k' = 0..K-1] (K n values).
    // node[k' n + i]: this node's sum of shard w(k', l)'s element a + i.
    Tensor node;
    {
      Tensor send = Tensor::empty({static_cast<int64_t>(M) * K * n}, DType::f32, Category::comm);
      for (int lp = 0; lp < M; ++lp)
        for (int kp = 0; kp < K; ++kp) {
          const int w = world_rank_[static_cast<size_t>(kp * M + lp)];
          const int64_t at = (static_cast<int64_t>(lp) * K + kp) * n;
          range(send, at, n).copy_(range(grad, w * S + a, n));
          for (const auto& [j0, j1] : spans[static_cast<size_t>(w)]) range(send, at + j0, j1 - j0).zero_();
        }
      // Payload lp: the K slices of shards w(0, lp), ..., w(K-1, lp), each as planned, padded
      // to the longest payload (an all-to-all's blocks are one size).
      auto w_of = [this, M](int kp, int lp) { return world_rank_[static_cast<size_t>(kp * M + lp)]; };
      int64_t cb = 0, nb = 0;
      for (int lp = 0; lp < M; ++lp) {
        int64_t c = 0, s = 0;
        for (int kp = 0; kp < K; ++kp) c += plans[w_of(kp, lp)].code_bytes, s += plans[w_of(kp, lp)].scales;
        cb = std::max(cb, c), nb = std::max(nb, s);
      }
      if (M == 1) {
        node = send;
      } else if (cb == 0) {  // deepspeed: nothing of this chunk is quantized (all exact tensors)
        node = Tensor::zeros({K * n}, DType::f32, Category::comm);
      } else {
        Tensor codes = Tensor::zeros({M * cb}, DType::u8, Category::comm);
        Tensor scales = Tensor::zeros({M * nb}, DType::f32, Category::comm);
        for (int lp = 0; lp < M; ++lp) {
          int64_t c = lp * cb, s = lp * nb;
          for (int kp = 0; kp < K; ++kp) {
            const SlicePlan& p = plans[w_of(kp, lp)];
            quantize_slice(range(codes, c, p.code_bytes), range(scales, s, p.scales),
                           range(send, (static_cast<int64_t>(lp) * K + kp) * n, n), p, f);
            c += p.code_bytes, s += p.scales;
          }
        }
        Tensor got_codes = Tensor::empty({M * cb}, DType::u8, Category::comm);
        Tensor got_scales = Tensor::empty({M * nb}, DType::f32, Category::comm);
        CommLabel label(*intra_, world_.label() + " (qgZ " + f.name() + ", in the node)");
        WorkPtr wc = intra_->all_to_all_async(codes, got_codes);
        WorkPtr ws = intra_->all_to_all_async(scales, got_scales);
        wc->wait();
        ws->wait();
        // What peer j sent: this rank's K slices (shards w(k', l)), in peer order.
        node = Tensor::zeros({K * n}, DType::f32, Category::comm);
        for (int j = 0; j < M; ++j) {
          int64_t c = j * cb, s = j * nb;
          for (int kp = 0; kp < K; ++kp) {
            const SlicePlan& p = plans[w_of(kp, l)];
            add_dequantized(range(node, kp * n, n), range(got_codes, c, p.code_bytes), range(got_scales, s, p.scales),
                            p, f, fp16);
            c += p.code_bytes, s += p.scales;
          }
        }
      }
    }
    // Hop 2, across the nodes: block k' = node[k' n, (k'+1) n) goes to node k' (inter rank k').
    // Block k' is the slice of shard w(k', l); what lands from every node is shard `me`'s.
    int64_t cb = 0, nb = 0;
    for (int kp = 0; kp < K; ++kp) {
      const SlicePlan& p = plans[world_rank_[static_cast<size_t>(kp * M + l)]];
      cb = std::max(cb, p.code_bytes), nb = std::max(nb, p.scales);
    }
    if (K == 1 || cb == 0) {  // one node; or (deepspeed) nothing of this chunk quantized: its exact sums
      const Tensor sum = K == 1 ? node : Tensor::zeros({n}, DType::f32, Category::comm);
      put_exact(sum);
      land(a, sum);
      continue;
    }
    Tensor codes = Tensor::zeros({K * cb}, DType::u8, Category::comm);
    Tensor scales = Tensor::zeros({K * nb}, DType::f32, Category::comm);
    for (int kp = 0; kp < K; ++kp) {
      const SlicePlan& p = plans[world_rank_[static_cast<size_t>(kp * M + l)]];
      quantize_slice(range(codes, kp * cb, p.code_bytes), range(scales, kp * nb, p.scales), range(node, kp * n, n), p,
                     f);
    }
    Tensor got_codes = Tensor::empty({K * cb}, DType::u8, Category::comm);
    Tensor got_scales = Tensor::empty({K * nb}, DType::f32, Category::comm);
    CommLabel label(*inter_, world_.label() + " (qgZ " + f.name() + ", across nodes)");
    out.push_back({inter_->all_to_all_async(codes, got_codes), nullptr});
    out.push_back({inter_->all_to_all_async(scales, got_scales), [=, plan = plans[static_cast<size_t>(me)]] {
                     (void)codes, (void)scales;  // alive until both collectives are done
                     Tensor sum = Tensor::zeros({n}, DType::f32, Category::comm);
                     for (int j = 0; j < K; ++j)
                       add_dequantized(sum, range(got_codes, j * cb, plan.code_bytes),
                                       range(got_scales, j * nb, plan.scales), plan, f, fp16);
                     put_exact(sum);
                     land(a, sum);
                   }});
  }
}

}  // namespace zt
