// defines: 1 Catch2 test case tagged [zeropp]; helpers: qgz_shard
//
// ZeRO++'s qgZ collective alone (zero/zeropp.h's QuantizedReduceScatter), against the plain
// reduce-scatter of the same ranks: the engine-level ZeRO++ runs are tests/mpi/test_zeropp.cpp.
// On one machine the ranks are one node (the intra-node hop only); the cluster in a box
// (tests/cli/test_cluster_box.sh) runs the [zeropp] cases on 2 nodes x 2 ranks, both hops real.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <vector>

#include "dist/process_group.h"  // defines: init_process_group, ProcessGroup
#include "zero/zeropp.h"         // defines: QuantizedReduceScatter, QgzLayout

using namespace zt;

namespace {

// qgZ's collective alone (QuantizedReduceScatter) on rank `me` of g: this rank's shard of the sum
// over ranks of grad (N * S), chunk by chunk as the engine calls it.
std::vector<float> qgz_shard(const ZeroOptimization& z, ProcessGroup& g, const Tensor& grad, int64_t S, int64_t chunk,
                             const QgzLayout& layout) {
  QuantizedReduceScatter q(z, g);
  std::vector<float> got(static_cast<size_t>(S), std::nanf(""));
  std::deque<Pending> pending;
  q.reduce_scatter(
      grad, S, chunk, layout,
      [&got](int64_t a, const Tensor& sum) {
        for (int64_t i = 0; i < sum.numel(); ++i) got[static_cast<size_t>(a + i)] = sum.data<float>()[i];
      },
      pending);
  for (Pending& p : pending) p.finish();
  return got;
}

}  // namespace

// qgZ's collective against the plain reduce-scatter, every hop it has here (one node: the
// intra-node hop, with zero_quantized_gradients_one_node; the box: both), in both wire formats
// (blocks: 64-element blocks, symmetric codes, float32 sums; deepspeed: groups of 64, 32 and 128
// over three "tensors", DeepSpeed's codes, fp16 sums). Exact inputs: rank r's value for shard w,
// element i is c(r, w) v(i) s, v(i) an integer code with the scheme's largest magnitude in every
// group (qmax, or -2^(b-1) for DeepSpeed's) and s a power of two, so hop 1 quantizes rank r's
// group to the codes v(i) with scale c s, the node's sum is v(i) s (sum of c), exact in fp16 too,
// and hop 2 quantizes that exactly: the result must be the reduce-scatter's sum bit for bit (a
// halved hop, a slice sent to the wrong rank or summed twice breaks it). Random inputs: every
// element within the bound the roundings allow (core/kernels/quantize.h: half a scale per hop,
// a whole one at DeepSpeed's clamped +max; fp16's 2^-11 per value and per add), computed here from
// every rank's inputs (each rank draws them all from the same seeds).
TEST_CASE("qgZ's reduce-scatter: exact inputs bit for bit, random ones within the rounding bound", "[zeropp]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), me = g.rank();
  if (N == 1) return;
  const Topology& t = g.topology();
  if (N % t.num_nodes() != 0 || t.local_size() * t.num_nodes() != N) return;  // qgZ needs equal nodes
  const int64_t S = 512, chunk = 256;                                         // chunks and slices are whole groups
  const int K = t.num_nodes(), M = N / K;
  std::vector<std::vector<int>> nodes(static_cast<size_t>(K));  // node k's ranks, in rank order
  for (int r = 0; r < N; ++r) nodes[static_cast<size_t>(t.node_of[static_cast<size_t>(r)])].push_back(r);
  for (const bool ds : {false, true})
    for (const int bits : {4, 8}) {
      ZeroOptimization z;
      z.stage = 3;
      z.zero_quantized_gradients = z.zero_quantized_gradients_one_node = true;
      z.zero_quantized_gradients_bits = bits;
      z.zero_quantization_block_size = 64;
      z.zero_quantized_gradients_format = ds ? "deepspeed" : "blocks";
      // deepspeed's groups: three tensors over the flat gradient, cut at chunk boundaries
      QgzLayout layout;
      if (ds) layout.quantized = {{0, 256, 64}, {256, 2 * 256, 32}, {2 * 256, N * S, 128}};
      // the element's group [g0, g0 + gs) in the flat gradient
      auto group_of = [&](int64_t flat) {
        if (!ds) return std::pair<int64_t, int64_t>{(flat / 64) * 64, 64};
        for (const auto& r : layout.quantized)
          if (r.begin <= flat && flat < r.end)
            return std::pair<int64_t, int64_t>{r.begin + (flat - r.begin) / r.group * r.group, r.group};
        return std::pair<int64_t, int64_t>{flat, 1};
      };
      INFO((ds ? "deepspeed" : "blocks") << " int" << bits << ", " << t.summary() << ", rank " << me);
      const int qmax = (1 << (bits - 1)) - 1, extreme = ds ? -qmax - 1 : qmax;
      const float s = 1.0f / 64;
      auto v = [qmax, extreme](int64_t i) {
        return i % 16 == 0 ? extreme : static_cast<int>((i * 7) % (2 * qmax + 1)) - qmax;
      };
      auto c = [](int r, int64_t w) { return static_cast<float>(1 + (3 * r + 5 * w) % 4); };
      Tensor grad = Tensor::empty({N * S}, DType::f32, Category::comm);
      for (int64_t w = 0; w < N; ++w)
        for (int64_t i = 0; i < S; ++i) grad.data<float>()[w * S + i] = c(me, w) * static_cast<float>(v(i)) * s;
      Tensor want = Tensor::empty({S}, DType::f32, Category::comm);
      g.reduce_scatter(grad, want);
      const std::vector<float> got = qgz_shard(z, g, grad, S, chunk, layout);
      int64_t differ = 0;
      for (int64_t i = 0; i < S; ++i) differ += got[static_cast<size_t>(i)] != want.data<float>()[i];
      INFO("exact inputs: first element " << got[0] << " vs " << want.data<float>()[0]);
      CHECK(differ == 0);

      // random inputs: rank r's values from seed r, the same on every rank
      auto value = [](int r, int64_t k) {  // a deterministic spread of magnitudes, per rank and element
        uint64_t x = (static_cast<uint64_t>(r) << 32) ^ static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 29, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 32;
        const double u = static_cast<double>(x % 2000001) / 1e6 - 1.0;  // [-1, 1]
        return static_cast<float>(u * (1 + static_cast<double>(k % 97) / 10));
      };
      for (int64_t k = 0; k < N * S; ++k) grad.data<float>()[k] = value(me, k);
      g.reduce_scatter(grad, want);
      const std::vector<float> rnd = qgz_shard(z, g, grad, S, chunk, layout);
      // one quantization of a group with max m: half a scale (symmetric), a whole one (DeepSpeed's
      // clamp at +m), and the scale's float rounding
      auto q_err = [&](double m) { return (ds ? m / (qmax + 1) : m / (2 * qmax)) + m * 0x1p-23; };
      const double h = ds ? 0x1p-11 : 0.0;  // fp16's relative rounding per value and per add
      double worst = 0;                     // the largest error / bound
      for (int64_t i = 0; i < S; ++i) {
        const auto [g0, gs] = group_of(me * S + i);
        double bound = 0, hop2_abs = 0, abs_sum = 0;
        for (int k = 0; k < K; ++k) {
          double node_max = 0, e1 = 0, node_abs = 0;
          for (int64_t j = g0; j < g0 + gs; ++j) {
            double node_sum = 0;
            for (const int r : nodes[static_cast<size_t>(k)]) node_sum += value(r, j);
            node_max = std::max(node_max, std::abs(node_sum));
          }
          for (const int r : nodes[static_cast<size_t>(k)]) {
            double m = 0;
            for (int64_t j = g0; j < g0 + gs; ++j) m = std::max(m, std::abs(static_cast<double>(value(r, j))));
            e1 += q_err(m);  // hop 1
            node_abs += m;
            abs_sum += std::abs(static_cast<double>(value(r, me * S + i)));
          }
          if (M > 1) e1 += (M + 1) * h * (node_abs + e1);  // hop 1's fp16 values and sums
          bound += e1;
          if (K > 1) {
            const double e2 = q_err(node_max + e1);  // hop 2 quantizes the node's (rounded) sums
            bound += e2;
            hop2_abs += node_max + e1 + e2;
          }
        }
        if (K > 1) bound += (K + 1) * h * hop2_abs;  // hop 2's fp16 values and sums
        bound += abs_sum * N * 0x1p-24;              // the float32 sums
        const double err = std::abs(static_cast<double>(rnd[static_cast<size_t>(i)]) - want.data<float>()[i]);
        worst = std::max(worst, err / bound);
      }
      INFO("random inputs: largest error / bound " << worst);
      CHECK(worst <= 1.0);
      CHECK(worst > 0);  // it did quantize

      // ranges left exact (DeepSpeed's 1-D and odd-sized tensors): a range inside one shard, one
      // across a shard boundary and a chunk boundary, one at the end. Those elements are the plain
      // reduce-scatter's bit for bit, the others still quantized (deepspeed: the exact ranges cut
      // the tensors into runs that start inside groups and slices, whose payloads differ in size), and
      // every element lands.
      QgzLayout mixed_layout;
      mixed_layout.exact = {{3, 40}, {S - 10, S + chunk + 7}, {N * S - 5, N * S}};
      if (ds) {
        int64_t from = 0;
        for (const auto& [b, e] : mixed_layout.exact) {
          if (from < b) mixed_layout.quantized.push_back({from, b, from == 0 ? 24 : 37});
          from = e;
        }
      }
      const std::vector<float> mixed = qgz_shard(z, g, grad, S, chunk, mixed_layout);
      int64_t wrong = 0, inside = 0, landed = 0;
      for (int64_t i = 0; i < S; ++i) {
        const int64_t flat = me * S + i;
        const bool in = std::any_of(mixed_layout.exact.begin(), mixed_layout.exact.end(),
                                    [flat](const auto& r) { return r.first <= flat && flat < r.second; });
        inside += in;
        if (in) wrong += mixed[static_cast<size_t>(i)] != want.data<float>()[i];
        landed += std::isfinite(mixed[static_cast<size_t>(i)]);  // every element landed (they start as NaN)
      }
      INFO(inside << " elements of this rank's shard exact");
      CHECK(wrong == 0);
      CHECK(landed == S);
      // a unit of exact tensors only (deepspeed: no quantized payload at all): the reduce-scatter's
      QgzLayout all_exact;
      all_exact.exact = {{0, N * S}};
      CHECK(qgz_shard(z, g, grad, S, chunk, all_exact) ==
            std::vector<float>(want.data<float>(), want.data<float>() + S));
    }
}
