// defines: sample_next (one token from a row of logits: temperature, top-k, top-p),
//          GenerationOptions, GenerationStats, GenerationResult, TokenCallback,
//          context_start (the window rule at max_seq_len), generate (autoregressive sampling,
//          with a KV cache by default, tokens streamed to a callback).
//
// Layer train/ (the run: the loop, its config, and sampling from what it trained). Why here:
// generation needs only a Model (nn/model.h), so it could sit lower, but it is neither a model
// definition (models/ holds only those) nor a file format (formats/); it is the other way a tool
// runs a model, beside the training loop, and zt-generate reads its model through the trainer's
// load_trained_model (train/trainer.h). A folder of its own for two files would add a layer with
// no second concern.
//
// A generation (generate):
//   prefill   one forward over the prompt's context window, filling the KV cache (the model's
//             Model::logits_cached; nn/kv_cache.h), whose last row gives the first token;
//   decode    per token: sample, stream it (callback), stop on a stop id or the length, else one
//             forward of that single token at the next position, appending to the cache.
// With use_cache = false every token recomputes the whole window (Model::logits): the same
// tokens (the same window rule below), to float rounding, at a cost that grows with the window.
//
// The context limit (context_start): the model sees at most max_seq_len tokens. When one more
// would not fit, the window slides: it restarts at the newest max(1, max_seq_len / 2) tokens and
// the cache is rebuilt by a prefill over them (GPT-2's positions are learned and absolute, so a
// cache cannot be shifted; llama.cpp's "context shift" keeps half the same way). Each slide costs
// one prefill of max_seq_len / 2 tokens, so cached decoding stays O(window) per token across the
// limit. The no-cache path follows the same window, so both produce the same tokens.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "nn/model.h"

namespace zt {

// One token id from `logits` (the V valid entries of one row; padding already cut off).
//   temperature == 0: argmax (the lowest id among ties), no random number drawn; top_k, top_p
//                     are then irrelevant.
//   temperature  > 0: p = softmax(logits / temperature), restricted to
//                     1. the top_k largest logits (top_k <= 0 or >= V: all; ties: lower id first),
//                     2. then the nucleus (Holtzman et al. 2019): in order of decreasing p (ties:
//                        lower id first), the smallest prefix whose mass, renormalized over step
//                        1's set, reaches top_p (a token is kept when the mass before it is
//                        < top_p; the most likely token is always kept; top_p >= 1: all),
//                     sampled with exactly one rng.uniform() (inverse CDF in id order over the
//                     kept set). The order temperature -> top-k -> top-p is Hugging Face's.
// Throws zt::Error for an empty row, a negative or non-finite temperature, top_p outside (0, 1],
// or a non-finite logit.
int32_t sample_next(const std::vector<double>& logits, double temperature, int64_t top_k, double top_p, Rng& rng);
inline int32_t sample_next(const std::vector<double>& logits, double temperature, int64_t top_k, Rng& rng) {
  return sample_next(logits, temperature, top_k, 1.0, rng);
}

struct GenerationOptions {
  int64_t max_new_tokens = 200;  // stop after this many new tokens
  double temperature = 1.0;      // 0: greedy
  int64_t top_k = 0;             // 0: every token
  double top_p = 1.0;            // nucleus mass in (0, 1]; 1: every token
  uint64_t seed = 1337;          // the sampler's Rng (unused by the overload that takes an Rng)
  // Stop as soon as one of these ids is generated (it is kept in the output and streamed, as
  // Hugging Face keeps the eos token). Empty: stop only at max_new_tokens.
  std::vector<int32_t> stop_ids;
  bool use_cache = true;  // false: recompute the whole window for every token (to compare)
};

struct GenerationStats {
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double prefill_s = 0;  // the first forward, over the prompt's window (gives the first token)
  double decode_s = 0;   // everything after it: the other tokens, slides included
  int64_t context_slides = 0;  // times the window slid at max_seq_len (each one re-prefills)
  bool stopped_by_stop_id = false;
  size_t kv_cache_bytes = 0;  // K and V of every layer (0 without the cache)
  double total_s() const { return prefill_s + decode_s; }
  // Generated tokens per second over the whole generation (prefill included).
  double tokens_per_s() const { return total_s() > 0 ? static_cast<double>(generated_tokens) / total_s() : 0; }
  // The tokens after the first per second of decoding (llama.cpp's "eval" rate); 0 with < 2 tokens.
  double decode_tokens_per_s() const {
    return decode_s > 0 && generated_tokens > 1 ? static_cast<double>(generated_tokens - 1) / decode_s : 0;
  }
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // the prompt followed by the generated tokens
  GenerationStats stats;
};

// Called with each new token as soon as it is sampled (before the next forward).
using TokenCallback = std::function<void(int32_t)>;

// Where the window starts (the first context position) once the sequence holds n tokens, given
// that it started at `start`: unchanged while n - start <= max_seq_len, else n - max(1,
// max_seq_len / 2). start < 0 asks for the first window (the prompt's): max(0, n - max_seq_len).
int64_t context_start(int64_t n, int64_t start, int64_t max_seq_len);

// Generates up to opts.max_new_tokens tokens after `prompt` with a batch of one. Runs under
// no_grad. Throws for an empty prompt, an id outside the vocabulary, or bad options (each named).
GenerationResult generate(Model& model, const std::vector<int32_t>& prompt, const GenerationOptions& opts,
                          const TokenCallback& on_token = {});
// The same, sampling from the caller's rng (opts.seed is not used).
GenerationResult generate(Model& model, const std::vector<int32_t>& prompt, const GenerationOptions& opts, Rng& rng,
                          const TokenCallback& on_token = {});

// The short form: n_new tokens, temperature, top_k (top_p 1, no stop id, the KV cache); returns
// the prompt followed by the generated tokens.
std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, int64_t n_new, double temperature,
                              int64_t top_k, Rng& rng);

}  // namespace zt
