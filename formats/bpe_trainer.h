// defines: BpeTrainOptions, train_bpe — learns a byte-level BPE vocabulary (GPT-2's kind) from
//          text. Layer formats/.
//
// The algorithm (Sennrich et al. 2016, byte-level as GPT-2; the counting of Hugging Face's
// BpeTrainer):
//   1. each text is cut at the special tokens written in it (never learned from) and split into
//      pieces by GPT-2's pattern (formats/gpt2_pretokenizer.h); equal pieces are counted once
//      with their number of occurrences (the "words");
//   2. the vocabulary starts as the 256 bytes, ids 0..255 in GPT-2's order (gpt2_byte_order:
//      '!' is 0, 'Ġ' (space) is 220, as in GPT-2's own vocabulary);
//   3. each round counts every adjacent pair of tokens inside every word, weighted by the word's
//      count (overlaps counted as they stand: "aaa" holds (a, a) twice), takes the pair with the
//      highest count, adds the concatenation as the next id, and replaces the pair in every word,
//      left to right, not overlapping;
//   4. until 256 + merges + specials == vocab_size, or no pair occurs min_frequency times.
// Ties (the one rule that makes training deterministic): among pairs of equal count the pair
// (left id, right id) that is smallest, comparing the left ids first, wins.
// The specials take the last ids, in the order given (GPT-2: <|endoftext|> is the last token).
// Cost: each round recounts the pairs of the distinct words: O(merges x symbols of the distinct
// words) — seconds for the bundled corpus at a few thousand tokens; not meant for gigabytes.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/bpe_tokenizer.h"

namespace zt {

struct BpeTrainOptions {
  int32_t vocab_size = 512;                           // bytes + merges + specials
  std::vector<std::string> specials = {kGpt2EndOfText};
  int64_t min_frequency = 2;                          // a pair seen fewer times is never merged
};

// `progress(merges_done, merges_wanted)` is called after each merge when given. The result may
// hold fewer tokens than asked when no pair reaches min_frequency (the caller can compare
// model.tokens.size() with vocab_size). Throws zt::Error when vocab_size < 256 + specials.size().
BpeModel train_bpe(const std::vector<std::string_view>& texts, const BpeTrainOptions& opt,
                   const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace zt
