#include "train/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace zt {

int32_t sample_next(const std::vector<double>& logits, double temperature, int64_t top_k, Rng& rng) {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (V == 0) ZT_THROW("sample_next: empty logits row");
  if (!(temperature >= 0) || !std::isfinite(temperature))
    ZT_THROW("sample_next: temperature must be a finite number >= 0, got ", temperature);
  for (int64_t i = 0; i < V; ++i)
    if (!std::isfinite(logits[i])) ZT_THROW("sample_next: logit ", i, " is not finite (", logits[i], ")");

  if (temperature == 0) {  // greedy
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // The kept ids: the top_k largest logits (ties: lower id first), then back in id order so the
  // inverse CDF walks a fixed order.
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  if (top_k > 0 && top_k < V) {
    std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    ids.resize(static_cast<size_t>(top_k));
    std::sort(ids.begin(), ids.end());
  }
  double mx = -INFINITY;
  for (int32_t i : ids) mx = std::max(mx, logits[i]);
  std::vector<double> p(ids.size());
  double total = 0;
  for (size_t j = 0; j < ids.size(); ++j) total += p[j] = std::exp((logits[ids[j]] - mx) / temperature);
  const double u = static_cast<double>(rng.uniform()) * total;  // [0, total)
  double cdf = 0;
  for (size_t j = 0; j < ids.size(); ++j) {
    cdf += p[j];
    if (u < cdf) return ids[j];
  }
  return ids.back();  // u within rounding of total
}

std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, int64_t n_new, double temperature,
                              int64_t top_k, Rng& rng) {
  if (prompt.empty()) ZT_THROW("generate: the prompt is empty (give at least one token)");
  if (n_new < 0) ZT_THROW("generate: n_new must be >= 0, got ", n_new);
  const int64_t V = model.vocab_size(), maxT = model.max_seq_len();
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= V)
      ZT_THROW("generate: prompt token ", prompt[i], " at position ", i, " is outside the vocabulary [0, ", V, ")");
  NoGradGuard no_grad;
  std::vector<int32_t> seq = prompt;
  for (int64_t step = 0; step < n_new; ++step) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(seq.size()), maxT);
    Tensor idx = Tensor::empty({1, T}, DType::i32, Category::activations, cpu_allocator());
    std::copy(seq.end() - T, seq.end(), idx.data<int32_t>());
    Tensor lg = model.logits(idx).value();  // (1, T, Vp)
    std::vector<double> row = lg.slice(1, T - 1, T).slice(2, 0, V).to_vector();  // last position, V valid
    seq.push_back(sample_next(row, temperature, top_k, rng));
  }
  return seq;
}

}  // namespace zt
