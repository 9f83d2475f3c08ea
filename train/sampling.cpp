// defines: sample_next, context_start, generate (train/sampling.h); file-local: seconds_since, last_row,
//          id_batch
#include "train/sampling.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace zt {

int32_t sample_next(const std::vector<double>& logits, double temperature, int64_t top_k, double top_p, Rng& rng) {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (V == 0) ZT_THROW("sample_next: empty logits row");
  if (!(temperature >= 0) || !std::isfinite(temperature))
    ZT_THROW("sample_next: temperature must be a finite number >= 0, got ", temperature);
  if (!(top_p > 0 && top_p <= 1)) ZT_THROW("sample_next: top_p must be in (0, 1], got ", top_p);
  for (int64_t i = 0; i < V; ++i)
    if (!std::isfinite(logits[i])) ZT_THROW("sample_next: logit ", i, " is not finite (", logits[i], ")");

  if (temperature == 0) {  // greedy
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // "a before b": the larger logit, ties to the lower id (the order of top-k and of the nucleus).
  auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  // 1. top-k: the kept ids, then back in id order so the inverse CDF walks a fixed order.
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  if (top_k > 0 && top_k < V) {
    std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(), before);
    ids.resize(static_cast<size_t>(top_k));
    std::sort(ids.begin(), ids.end());
  }
  double mx = -INFINITY;
  for (int32_t i : ids) mx = std::max(mx, logits[i]);
  auto weight = [&](int32_t i) { return std::exp((logits[i] - mx) / temperature); };  // unnormalized p
  // 2. top-p: walk the kept ids from the most likely; keep each one while the mass before it is
  // still < top_p of the total.
  if (top_p < 1) {
    double total = 0;
    for (int32_t i : ids) total += weight(i);
    std::vector<int32_t> by_p = ids;
    std::sort(by_p.begin(), by_p.end(), before);  // decreasing logit = decreasing p
    size_t keep = 0;
    for (double mass = 0; keep < by_p.size() && mass < top_p * total; ++keep) mass += weight(by_p[keep]);
    by_p.resize(keep);
    std::sort(by_p.begin(), by_p.end());
    ids = std::move(by_p);
  }
  std::vector<double> p(ids.size());
  double total = 0;
  for (size_t j = 0; j < ids.size(); ++j) total += p[j] = weight(ids[j]);
  const double u = static_cast<double>(rng.uniform()) * total;  // [0, total)
  double cdf = 0;
  for (size_t j = 0; j < ids.size(); ++j) {
    cdf += p[j];
    if (u < cdf) return ids[j];
  }
  return ids.back();  // u within rounding of total
}

int64_t context_start(int64_t n, int64_t start, int64_t max_seq_len) {
  if (start < 0) return std::max<int64_t>(0, n - max_seq_len);  // the first window: the prompt's newest
  if (n - start <= max_seq_len) return start;
  return n - std::max<int64_t>(1, max_seq_len / 2);
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The last position's first V logits of a (1, T, Vp) logits tensor, on the host.
std::vector<double> last_row(const Var& logits, int64_t V) {
  const Tensor& lg = logits.value();
  const int64_t T = lg.size(1);
  return lg.slice(1, T - 1, T).slice(2, 0, V).to_vector();
}

// (1, T) int32 ids on the host: seq[start, end).
Tensor id_batch(const std::vector<int32_t>& seq, int64_t start) {
  const int64_t T = static_cast<int64_t>(seq.size()) - start;
  Tensor idx = Tensor::empty({1, T}, DType::i32, Category::activations, cpu_allocator());
  std::copy(seq.begin() + start, seq.end(), idx.data<int32_t>());
  return idx;
}

}  // namespace

GenerationResult generate(Model& model, const std::vector<int32_t>& prompt, const GenerationOptions& opts, Rng& rng,
                          const TokenCallback& on_token) {
  if (prompt.empty()) ZT_THROW("generate: the prompt is empty (give at least one token)");
  if (opts.max_new_tokens < 0) ZT_THROW("generate: max_new_tokens must be >= 0, got ", opts.max_new_tokens);
  if (!(opts.temperature >= 0) || !std::isfinite(opts.temperature))
    ZT_THROW("generate: temperature must be a finite number >= 0, got ", opts.temperature);
  if (!(opts.top_p > 0 && opts.top_p <= 1)) ZT_THROW("generate: top_p must be in (0, 1], got ", opts.top_p);
  const int64_t V = model.vocab_size(), maxT = model.max_seq_len();
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= V)
      ZT_THROW("generate: prompt token ", prompt[i], " at position ", i, " is outside the vocabulary [0, ", V, ")");
  for (int32_t s : opts.stop_ids)
    if (s < 0 || s >= V) ZT_THROW("generate: stop id ", s, " is outside the vocabulary [0, ", V, ")");

  NoGradGuard no_grad;
  GenerationResult res;
  GenerationStats& st = res.stats;
  std::vector<int32_t>& seq = res.tokens;
  seq = prompt;
  st.prompt_tokens = static_cast<int64_t>(prompt.size());
  if (opts.max_new_tokens == 0) return res;

  // The model over the window seq[start, end): with the cache, a prefill (from an empty cache) or
  // one decode step of the newest token; without, the whole window every time.
  KVCache cache = model.make_kv_cache();
  auto window_logits = [&](int64_t start, bool prefill) {
    if (!opts.use_cache) return model.logits(id_batch(seq, start));
    if (prefill) {
      cache.reset();
      return model.logits_cached(id_batch(seq, start), cache);
    }
    return model.logits_cached(id_batch(seq, static_cast<int64_t>(seq.size()) - 1), cache);
  };

  auto t0 = Clock::now();
  int64_t start = context_start(static_cast<int64_t>(seq.size()), -1, maxT);
  std::vector<double> row = last_row(window_logits(start, /*prefill=*/true), V);
  st.prefill_s = seconds_since(t0);
  t0 = Clock::now();
  for (int64_t step = 0; step < opts.max_new_tokens; ++step) {
    const int32_t tok = sample_next(row, opts.temperature, opts.top_k, opts.top_p, rng);
    seq.push_back(tok);
    ++st.generated_tokens;
    if (on_token) on_token(tok);
    if (std::find(opts.stop_ids.begin(), opts.stop_ids.end(), tok) != opts.stop_ids.end()) {
      st.stopped_by_stop_id = true;
      break;
    }
    if (step + 1 == opts.max_new_tokens) break;  // no forward for a token nobody samples
    const int64_t next = context_start(static_cast<int64_t>(seq.size()), start, maxT);
    const bool slide = next != start;
    st.context_slides += slide ? 1 : 0;
    start = next;
    row = last_row(window_logits(start, /*prefill=*/slide), V);
  }
  st.decode_s = seconds_since(t0);
  st.kv_cache_bytes = opts.use_cache ? cache.bytes() : 0;
  return res;
}

GenerationResult generate(Model& model, const std::vector<int32_t>& prompt, const GenerationOptions& opts,
                          const TokenCallback& on_token) {
  Rng rng(opts.seed);
  return generate(model, prompt, opts, rng, on_token);
}

std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, int64_t n_new, double temperature,
                              int64_t top_k, Rng& rng) {
  if (n_new < 0) ZT_THROW("generate: n_new must be >= 0, got ", n_new);
  GenerationOptions opts;
  opts.max_new_tokens = n_new;
  opts.temperature = temperature;
  opts.top_k = top_k;
  return generate(model, prompt, opts, rng).tokens;
}

}  // namespace zt
