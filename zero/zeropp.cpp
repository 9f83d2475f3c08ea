// defines: quantized_bytes, quantized_all_gather, hpz_secondary_group, qgz_runs, qgz_summary,
//          qgz_exact_ranges, QuantizedReduceScatter (zero/zeropp.h); file-local: ranks_by_node,
//          quantize_any, dequantize_into, sum_dequantized
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
  quantize_(codes, scales, x32, f.bits, f.block);
}

// codes, scales -> dst (n, any float dtype).
void dequantize_into(const Tensor& dst, const Tensor& codes, const Tensor& scales, QuantFormat f) {
  if (dst.dtype() == DType::f32) return dequantize_(dst, codes, scales, f.bits, f.block);
  Tensor tmp = Tensor::empty({dst.numel()}, DType::f32, Category::comm);
  dequantize_(tmp, codes, scales, f.bits, f.block);
  cast_(dst, tmp);
}

// The sum over `count` received payloads of n values each (payload j: codes [j cb, (j+1) cb),
// scales [j nb, (j+1) nb)), dequantized and added in float32 in payload order.
Tensor sum_dequantized(const Tensor& codes, const Tensor& scales, int count, int64_t n, QuantFormat f) {
  const int64_t cb = quantized_code_bytes(n, f.bits), nb = quantized_blocks(n, f.block);
  Tensor sum = Tensor::zeros({n}, DType::f32, Category::comm);
  Tensor part = Tensor::empty({n}, DType::f32, Category::comm);
  for (int j = 0; j < count; ++j) {
    dequantize_(part, range(codes, j * cb, cb), range(scales, j * nb, nb), f.bits, f.block);
    accumulate_(sum, part, 1.0);
  }
  return sum;
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
  const std::string f = "int" + std::to_string(z.zero_quantized_gradients_bits);
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
  intra_ = intra_node_group(world);
  inter_ = inter_node_group(world);
  ZT_CHECK(intra_->rank() == l && inter_->rank() == t.node(), "ZeRO++ qgZ: the node groups' ranks (", intra_->rank(),
           ", ", inter_->rank(), ") are not this rank's local rank and node (", l, ", ", t.node(), ")");
}

ExactRanges qgz_exact_ranges(const std::vector<ParamInfo>& params, int world_size) {
  ExactRanges r;
  for (const ParamInfo& p : params)
    if (p.shape.size() < 2 || p.numel % (2 * static_cast<int64_t>(world_size)) != 0)
      r.emplace_back(p.offset, p.offset + p.numel);
  std::sort(r.begin(), r.end());
  return r;
}

void QuantizedReduceScatter::reduce_scatter(const Tensor& grad, int64_t S, int64_t chunk, const ExactRanges& exact,
                                            const Land& land, std::deque<Pending>& out) const {
  const int M = intra_->size(), K = inter_->size(), N = M * K, me = world_.rank();
  const QuantFormat f{z_.zero_quantized_gradients_bits, z_.zero_quantization_block_size};
  ZT_CHECK(grad.numel() == static_cast<int64_t>(M) * K * S, "ZeRO++ qgZ: gradient ", grad.str(), " is not ", M * K,
           " x ", S);
  for (int64_t a = 0; a < S; a += chunk) {
    const int64_t n = std::min(chunk, S - a);
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
      if (M == 1) {
        node = send;
      } else {
        const int64_t cb = quantized_code_bytes(K * n, f.bits), nb = quantized_blocks(K * n, f.block);
        Tensor codes = Tensor::empty({M * cb}, DType::u8, Category::comm);
        Tensor scales = Tensor::empty({M * nb}, DType::f32, Category::comm);
        for (int lp = 0; lp < M; ++lp)
          quantize_any(range(codes, lp * cb, cb), range(scales, lp * nb, nb), range(send, lp * K * n, K * n), f);
        Tensor got_codes = Tensor::empty({M * cb}, DType::u8, Category::comm);
        Tensor got_scales = Tensor::empty({M * nb}, DType::f32, Category::comm);
        CommLabel label(*intra_, world_.label() + " (qgZ " + f.name() + ", in the node)");
        WorkPtr wc = intra_->all_to_all_async(codes, got_codes);
        WorkPtr ws = intra_->all_to_all_async(scales, got_scales);
        wc->wait();
        ws->wait();
        node = sum_dequantized(got_codes, got_scales, M, K * n, f);
      }
    }
    // Hop 2, across the nodes: block k' = node[k' n, (k'+1) n) goes to node k' (inter rank k').
    if (K == 1) {
      put_exact(node);
      land(a, node);
      continue;
    }
    const int64_t cb = quantized_code_bytes(n, f.bits), nb = quantized_blocks(n, f.block);
    Tensor codes = Tensor::empty({K * cb}, DType::u8, Category::comm);
    Tensor scales = Tensor::empty({K * nb}, DType::f32, Category::comm);
    for (int kp = 0; kp < K; ++kp)
      quantize_any(range(codes, kp * cb, cb), range(scales, kp * nb, nb), range(node, kp * n, n), f);
    Tensor got_codes = Tensor::empty({K * cb}, DType::u8, Category::comm);
    Tensor got_scales = Tensor::empty({K * nb}, DType::f32, Category::comm);
    CommLabel label(*inter_, world_.label() + " (qgZ " + f.name() + ", across nodes)");
    out.push_back({inter_->all_to_all_async(codes, got_codes), nullptr});
    out.push_back({inter_->all_to_all_async(scales, got_scales), [=] {
                     (void)codes, (void)scales;  // alive until both collectives are done
                     const Tensor sum = sum_dequantized(got_codes, got_scales, K, n, f);
                     put_exact(sum);
                     land(a, sum);
                   }});
  }
}

}  // namespace zt
