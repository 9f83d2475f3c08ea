// defines: 6 Catch2 test cases tagged [generation], [sampling]; helpers: small_gpt2, random_model, batch,
//          check_close, family_name
//
// Generation: the KV cache against full recomputation (logits at every step,
// greedy tokens), the window at max_seq_len, top-k / top-p / temperature on hand-built logits,
// seeds, stop ids, streaming and the statistics.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "models/init.h"
#include "models/model_config.h"
#include "train/sampling.h"

using namespace zt;

namespace {

// Small random models, moved away from init (std 0.02 makes logits nearly uniform, and greedy
// then hangs on near-ties): every parameter += N(0, 0.3).
ModelConfig small_gpt2() {
  ModelConfig c = model_config("gpt2-nano");
  c.n_layer = 2, c.n_embd = 16, c.n_head = c.n_kv_head = 4, c.ffn_hidden = 64;
  c.max_seq_len = 12, c.vocab_size = 11, c.padded_vocab_size = 16;
  return c;
}
ModelConfig small_llama() {  // grouped-query: 4 query heads share 2 kv heads
  ModelConfig c = model_config("llama-nano");
  c.n_layer = 2, c.n_embd = 16, c.n_head = 4, c.n_kv_head = 2, c.ffn_hidden = 24;
  c.max_seq_len = 12, c.vocab_size = 11, c.padded_vocab_size = 16;
  return c;
}

std::unique_ptr<Model> random_model(const ModelConfig& c, uint64_t seed) {
  auto m = make_model(c);
  Rng init(seed);
  init_model(*m, init);
  Rng rng(seed + 100);
  for (Unit* u : m->units())
    for (int i = 0; i < u->params().size(); ++i) {
      Tensor w = u->params().value(i);
      Tensor noise = Tensor::empty(w.shape(), w.dtype());
      rng.fill_normal(noise, 0.0, 0.3);
      std::vector<double> a = w.to_vector(), b = noise.to_vector();
      for (size_t k = 0; k < a.size(); ++k) a[k] += b[k];
      w.copy_(Tensor::from_vector(a, w.shape(), w.dtype()));
    }
  return m;
}

Tensor batch(const std::vector<int32_t>& ids, int64_t B = 1) {
  const int64_t T = static_cast<int64_t>(ids.size()) / B;
  Tensor t = Tensor::empty({B, T}, DType::i32);
  std::copy(ids.begin(), ids.end(), t.data<int32_t>());
  return t;
}

// |a - b| <= tol (1 + |b|) everywhere: float32 rounding of two orders of summation.
void check_close(const std::vector<double>& a, const std::vector<double>& b, double tol = 2e-5) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  CHECK(worst <= tol);
}

// The same Llama with Llama 3's RoPE scaling over an original context of 4 positions, so most of
// the 12-position window lies past it (D = 4, theta 5: both frequencies are divided by 8).
ModelConfig small_llama3() {
  ModelConfig c = small_llama();
  c.rope_theta = 5.0;
  c.rope_scaling = RopeScaling{.type = RopeScaling::Type::llama3,
                               .factor = 8.0,
                               .low_freq_factor = 1.0,
                               .high_freq_factor = 4.0,
                               .original_max_position = 4};
  return c;
}

const char* family_name(const ModelConfig& c) {
  return c.family == "gpt2" ? "gpt2" : c.rope_scaling.type == RopeScaling::Type::llama3 ? "llama3 RoPE" : "llama (GQA)";
}

}  // namespace

TEST_CASE("kv cache: cached logits equal full recomputation at every step", "[generation]") {
  for (const ModelConfig& c : {small_gpt2(), small_llama(), small_llama3()}) {
    auto m = random_model(c, 3);
    for (size_t P : {1, 4, 11}) {
      INFO(family_name(c) << ", prompt of " << P << " tokens");
      std::vector<int32_t> seq;
      for (size_t i = 0; i < P; ++i) seq.push_back(static_cast<int32_t>((3 * i + 1) % 11));
      NoGradGuard ng;
      KVCache cache = m->make_kv_cache();
      // Prefill: every prompt position's logits, not only the last.
      check_close(m->logits_cached(batch(seq), cache).value().to_vector(), m->logits(batch(seq)).value().to_vector());
      CHECK(cache.length() == static_cast<int64_t>(P));
      // Decode to the end of the window, one token per step, feeding the argmax back.
      while (static_cast<int64_t>(seq.size()) < c.max_seq_len) {
        const Tensor full = m->logits(batch(seq)).value();
        const int64_t T = full.size(1);
        std::vector<double> last = full.slice(1, T - 1, T).to_vector();
        seq.push_back(static_cast<int32_t>(std::max_element(last.begin(), last.begin() + c.vocab_size) - last.begin()));
        const Tensor step = m->logits_cached(batch({seq.back()}), cache).value();  // (1, 1, Vp)
        const Tensor want = m->logits(batch(seq)).value();
        check_close(step.to_vector(), want.slice(1, want.size(1) - 1, want.size(1)).to_vector());
      }
      CHECK(cache.length() == c.max_seq_len);
      CHECK(cache.bytes() == static_cast<size_t>(2 * c.n_layer * c.n_kv_head * c.max_seq_len * (c.n_embd / c.n_head) * 4));
    }
  }
}

TEST_CASE("kv cache: a batch of two rows decodes as two single rows", "[generation]") {
  auto m = random_model(small_llama(), 5);
  const std::vector<int32_t> a = {1, 2, 3}, b = {7, 0, 9};
  NoGradGuard ng;
  KVCache c2 = m->make_kv_cache();
  std::vector<int32_t> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  m->logits_cached(batch(ab, 2), c2);
  const std::vector<double> two = m->logits_cached(batch({4, 5}, 2), c2).value().to_vector();  // (2, 1, Vp)
  for (int r = 0; r < 2; ++r) {
    std::vector<int32_t> row = r ? b : a;
    row.push_back(r ? 5 : 4);
    const Tensor want = m->logits(batch(row)).value();
    std::vector<double> got(two.begin() + r * 16, two.begin() + (r + 1) * 16);
    check_close(got, want.slice(1, 3, 4).to_vector());
  }
}

TEST_CASE("generate: greedy output is identical with and without the cache", "[generation]") {
  for (const ModelConfig& c : {small_gpt2(), small_llama()}) {
    auto m = random_model(c, 7);
    // Prompts of 1, 5 and 11 tokens; 30 new tokens cross max_seq_len = 12 (the window slides).
    for (size_t P : {1, 5, 11}) {
      INFO(family_name(c) << ", prompt of " << P << " tokens");
      std::vector<int32_t> prompt;
      for (size_t i = 0; i < P; ++i) prompt.push_back(static_cast<int32_t>((5 * i + 2) % 11));
      GenerationOptions o;
      o.max_new_tokens = 30;
      o.temperature = 0;
      const GenerationResult with = generate(*m, prompt, o);
      o.use_cache = false;
      const GenerationResult without = generate(*m, prompt, o);
      CHECK(with.tokens == without.tokens);
      CHECK(with.tokens.size() == P + 30);
      CHECK(with.stats.context_slides > 0);
      CHECK(with.stats.context_slides == without.stats.context_slides);
      CHECK(with.stats.kv_cache_bytes > 0);
      CHECK(without.stats.kv_cache_bytes == 0);
      // Greedy on a random GPT-2 often repeats one token; seeded sampling (the same draws) gives
      // a varied stream, and must agree as well.
      o.temperature = 0.8;
      o.seed = 17;
      const GenerationResult sampled = generate(*m, prompt, o);
      o.use_cache = true;
      CHECK(generate(*m, prompt, o).tokens == sampled.tokens);
      CHECK(std::set<int32_t>(sampled.tokens.begin() + static_cast<long>(P), sampled.tokens.end()).size() >= 3);
    }
  }
}

TEST_CASE("generate: the window at max_seq_len slides to the newest half and rebuilds the cache", "[generation]") {
  // context_start: unchanged while the window fits; else the newest max(1, maxT / 2) tokens.
  CHECK(context_start(5, -1, 12) == 0);  // start -1: the first window (the prompt's)
  CHECK(context_start(20, -1, 12) == 8);  // a prompt of 20: its newest 12
  CHECK(context_start(12, 0, 12) == 0);
  CHECK(context_start(13, 0, 12) == 7);   // 6 tokens kept
  CHECK(context_start(18, 7, 12) == 7);   // 11 tokens: fits
  CHECK(context_start(20, 7, 12) == 14);  // 13 would not
  CHECK(context_start(2, 1, 1) == 1);     // maxT 1: the newest token only
  CHECK(context_start(3, 1, 1) == 2);
  // 30 tokens after a prompt of 1 with maxT = 12: the window slides (to the newest 6) when the
  // sequence reaches 13 tokens, then each time it grows back past 12: at lengths 13, 20, 27. The
  // 31st token is the last one sampled: no forward follows it.
  auto m = random_model(small_gpt2(), 9);
  GenerationOptions o;
  o.max_new_tokens = 30;
  o.temperature = 0;
  const GenerationResult r = generate(*m, {3}, o);
  CHECK(r.stats.context_slides == 3);
  // Each token is the argmax over the window the rule gives (full recomputation as the reference).
  int64_t start = -1;
  NoGradGuard ng;
  for (size_t n = 1; n < r.tokens.size(); ++n) {
    start = context_start(static_cast<int64_t>(n), start, 12);
    std::vector<int32_t> w(r.tokens.begin() + start, r.tokens.begin() + static_cast<long>(n));
    REQUIRE(w.size() <= 12);
    const Tensor lg = m->logits(batch(w)).value();
    std::vector<double> last = lg.slice(1, lg.size(1) - 1, lg.size(1)).to_vector();
    CHECK(r.tokens[n] == std::max_element(last.begin(), last.begin() + 11) - last.begin());
  }
  // The cache itself refuses to grow past max_seq_len, and a multi-token step after a prefill.
  KVCache cache = m->make_kv_cache();
  m->logits_cached(batch(std::vector<int32_t>(12, 1)), cache);
  CHECK_THROWS_WITH(m->logits_cached(batch({1}), cache), Catch::Contains("exceed max_seq_len 12"));
  cache.reset();
  m->logits_cached(batch({1, 2}), cache);
  CHECK_THROWS_WITH(m->logits_cached(batch({1, 2}), cache), Catch::Contains("decodes one token per step"));
  KVCache other = random_model(small_llama(), 1)->make_kv_cache();
  CHECK_THROWS_WITH(m->logits_cached(batch({1}), other), Catch::Contains("was not made for this model"));
}

TEST_CASE("sample_next: top-p keeps exactly the nucleus - hand-checked", "[generation][sampling]") {
  // p = (0.5, 0.3, 0.15, 0.05) in a shuffled id order: ids 2, 0, 3, 1 hold 0.5, 0.3, 0.15, 0.05.
  const std::vector<double> p = {0.3, 0.05, 0.5, 0.15};
  std::vector<double> lg;
  for (double x : p) lg.push_back(std::log(x) - 1.0);
  auto support = [&](int64_t top_k, double top_p, std::vector<int>* count = nullptr) {
    Rng rng(11);
    std::set<int32_t> seen;
    for (int i = 0; i < 4000; ++i) {
      const int32_t t = sample_next(lg, 1.0, top_k, top_p, rng);
      seen.insert(t);
      if (count) ++(*count)[static_cast<size_t>(t)];
    }
    return seen;
  };
  // Mass before each token, most likely first: 0 (id 2), 0.5 (id 0), 0.8 (id 3), 0.95 (id 1).
  CHECK(support(0, 0.4) == std::set<int32_t>{2});           // 0.5 already reaches 0.4
  CHECK(support(0, 0.75) == std::set<int32_t>{0, 2});       // 0.5 < 0.75 <= 0.8
  CHECK(support(0, 0.85) == std::set<int32_t>{0, 2, 3});    // 0.8 < 0.85 <= 0.95
  CHECK(support(0, 0.97) == std::set<int32_t>{0, 1, 2, 3});
  CHECK(support(0, 1.0) == std::set<int32_t>{0, 1, 2, 3});
  // After top-k = 3 the masses renormalize over 0.95: before id 3 the mass is 0.8 / 0.95 = 0.842.
  CHECK(support(3, 0.83) == std::set<int32_t>{0, 2});     // 0.842 >= 0.83 (unrenormalized 0.8 would keep id 3)
  CHECK(support(3, 0.85) == std::set<int32_t>{0, 2, 3});  // 0.842 < 0.85
  CHECK(support(3, 0.6) == std::set<int32_t>{0, 2});
  CHECK(support(2, 0.9) == std::set<int32_t>{0, 2});  // top-k alone decides
  // Within the nucleus, sampling follows the renormalized p: 0.5 / 0.8 and 0.3 / 0.8.
  std::vector<int> count(4, 0);
  support(0, 0.75, &count);
  CHECK(std::abs(count[2] / 4000.0 - 0.625) < 0.03);
  CHECK(std::abs(count[0] / 4000.0 - 0.375) < 0.03);
  Rng rng(1);
  CHECK_THROWS_WITH(sample_next(lg, 1.0, 0, 0.0, rng), Catch::Contains("top_p must be in (0, 1]"));
  CHECK_THROWS_WITH(sample_next(lg, 1.0, 0, 1.5, rng), Catch::Contains("top_p must be in (0, 1]"));
  // Greedy ignores top-p; a low temperature concentrates on the argmax.
  CHECK(sample_next(lg, 0.0, 0, 0.1, rng) == 2);
  for (int i = 0; i < 100; ++i) CHECK(sample_next(lg, 0.05, 0, 1.0, rng) == 2);
}

TEST_CASE("generate: seeds, stop ids, streaming and statistics", "[generation][sampling]") {
  auto m = random_model(small_llama(), 13);
  GenerationOptions o;
  o.max_new_tokens = 20;
  o.temperature = 1.0;
  o.top_k = 6;
  o.top_p = 0.9;
  o.seed = 42;
  const GenerationResult a = generate(*m, {1, 2}, o), b = generate(*m, {1, 2}, o);
  CHECK(a.tokens == b.tokens);  // same seed, same tokens
  o.seed = 43;
  CHECK(generate(*m, {1, 2}, o).tokens != a.tokens);
  o.seed = 42;
  o.use_cache = false;
  CHECK(generate(*m, {1, 2}, o).tokens == a.tokens);  // sampling too: the same draws, the same logits
  o.use_cache = true;

  // Streaming: the callback sees each generated token, in order, and nothing else.
  std::vector<int32_t> streamed;
  const GenerationResult s = generate(*m, {1, 2}, o, [&](int32_t t) { streamed.push_back(t); });
  CHECK(streamed == std::vector<int32_t>(s.tokens.begin() + 2, s.tokens.end()));
  CHECK(s.stats.prompt_tokens == 2);
  CHECK(s.stats.generated_tokens == 20);
  CHECK(s.stats.prefill_s > 0);
  CHECK(s.stats.tokens_per_s() > 0);
  CHECK_FALSE(s.stats.stopped_by_stop_id);

  // Stop ids: the generation ends at the first one generated, which is kept and streamed.
  const int32_t stop = a.tokens[2 + 5];
  const auto first = std::find(a.tokens.begin() + 2, a.tokens.end(), stop);
  o.stop_ids = {stop};
  streamed.clear();
  const GenerationResult st = generate(*m, {1, 2}, o, [&](int32_t t) { streamed.push_back(t); });
  CHECK(st.tokens == std::vector<int32_t>(a.tokens.begin(), first + 1));
  CHECK(st.stats.stopped_by_stop_id);
  CHECK(streamed.back() == stop);
  CHECK(st.stats.generated_tokens == static_cast<int64_t>(streamed.size()));

  o.stop_ids = {11};
  CHECK_THROWS_WITH(generate(*m, {1}, o), Catch::Contains("stop id 11 is outside the vocabulary"));
  o.stop_ids = {};
  o.top_p = 0;
  CHECK_THROWS_WITH(generate(*m, {1}, o), Catch::Contains("top_p must be in (0, 1]"));
  o.top_p = 1;
  o.max_new_tokens = 0;
  CHECK(generate(*m, {4}, o).tokens == std::vector<int32_t>{4});
}
