// defines: BpeModel (a byte-level BPE vocabulary: tokens, merges by rank, special tokens),
//          BpeTokenizer (GPT-2's byte-level BPE: encode / decode), readers of GPT-2's
//          vocab.json + merges.txt and of Hugging Face's tokenizer.json (BPE models), and their
//          writers (save_gpt2_files, save_tokenizer_json). Layer formats/.
//
// Encoding text (GPT-2's encoder.py; Hugging Face tokenizers' ByteLevel + BPE):
//   1. the text is cut at special tokens written out in it ("<|endoftext|>" -> its one id; at a
//      position where two specials start, the longer wins);
//   2. each other stretch is split into pieces by the model's pattern: GPT-2's, or the split regex
//      of a tiktoken-family tokenizer.json (formats/gpt2_pretokenizer.h);
//   3. with ignore_merges (Llama 3's files), a piece that is itself a token is that token's id;
//   4. otherwise the piece starts as its bytes, one token per byte, and adjacent pairs are merged
//      by rank: repeatedly the adjacent pair with the lowest merge rank (leftmost among equals)
//      becomes the merged token, until no adjacent pair has a merge (Hugging Face's word merge;
//      the same as GPT-2's bpe() for every vocabulary a trainer makes). Pieces are cached.
// Decoding concatenates the tokens' bytes (a special token's bytes are its text).
//
// Files. Token strings in vocab.json / merges.txt / tokenizer.json are GPT-2's byte-level form:
// each byte written as one printable character (gpt2_byte_to_unicode; ' ' is 'Ġ'). A valid
// vocabulary: all 256 one-byte tokens present (byte-level BPE encodes any input); every merge
// "a b" names two tokens of the vocabulary whose concatenation is one too; ids 0..N-1 each used
// once, except that a tiktoken-family tokenizer.json may leave ids unused (cl100k_base has no
// 100256 and 100261..100275): vocab_size() is then the largest id + 1 (Hugging Face's
// len(tokenizer)), encode never gives an unused id and decode refuses one naming it.
// vocab.json + merges.txt carry no special-token list: "<|endoftext|>" is special there by GPT-2's
// convention. tokenizer.json lists its specials (added_tokens) and is one of two shapes
// (formats/tokenizer_json.cpp says what each key may hold; anything else is refused naming the
// file, the key and the value, never read as something else):
//   GPT-2's:         a ByteLevel pre-tokenizer with use_regex true (GPT-2's pattern);
//   tiktoken's:      a Sequence of a Split (its own regex, Isolated) and a ByteLevel with
//                    use_regex false (Llama 3, cl100k_base and o200k_base converted by transformers).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "formats/gpt2_pretokenizer.h"
#include "formats/tokenizer.h"

namespace zt {

inline constexpr const char* kGpt2EndOfText = "<|endoftext|>";

struct BpeModel {
  std::vector<std::string> tokens;                  // id -> the token's bytes (raw, not GPT-2's form);
                                                    // empty: an unused id (tiktoken-family files only)
  std::vector<std::pair<int32_t, int32_t>> merges;  // rank -> (left id, right id)
  std::vector<int32_t> specials;                    // ids whose tokens are special (matched as text)
  std::string pattern;                              // the split regex, tiktoken's dialect; empty: GPT-2's pattern
  bool ignore_merges = false;                       // a piece that is itself a token is its id, unmerged (Llama 3)
  int32_t bos = -1, eos = -1;  // from tokenizer_config.json / generation_config.json; -1: not given
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Validates `model` (the rules at the top of this file); errors name `source`.
  BpeTokenizer(BpeModel model, std::string source);

  std::string kind() const override { return "bpe"; }
  std::string source() const override { return source_; }
  int32_t vocab_size() const override { return static_cast<int32_t>(model_.tokens.size()); }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string decode_token(int32_t id) const override;
  int32_t eot_id() const override { return eot_; }
  int32_t bos_id() const override { return model_.bos; }

  const BpeModel& model() const { return model_; }
  bool jit() const { return pre_->jit(); }  // the pre-tokenizer's pattern runs JIT-compiled
  // true: GPT-2's pattern, which gpt2_safe_chunks' cuts are proven for.
  bool gpt2_pattern() const { return model_.pattern.empty(); }
  // The merge rank of (left, right), or -1 when they do not merge.
  int32_t merge_rank(int32_t left, int32_t right) const;

 private:
  // One piece of ordinary text (no specials) -> ids, through the merges.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  BpeModel model_;
  std::string source_;
  std::unique_ptr<Pretokenizer> pre_;
  int32_t byte_id_[256];                            // byte -> its one-byte token
  std::unordered_map<std::string, int32_t> id_of_;  // an ordinary token's bytes -> its id
  // (left << 32 | right) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merge_of_;
  std::vector<std::pair<std::string, int32_t>> special_text_;  // specials' text and id
  int32_t eot_ = -1;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // piece -> ids
};

// GPT-2's files: vocab.json (token -> id) and merges.txt ("#version" line, then "a b" by rank).
std::unique_ptr<BpeTokenizer> read_gpt2_bpe(const std::string& vocab_json, const std::string& merges_txt);
// A Hugging Face tokenizer.json of a byte-level BPE: GPT-2's shape or the tiktoken family's
// (formats/tokenizer_json.cpp). For the tiktoken family, a tokenizer_config.json and a
// generation_config.json beside it give the BOS and EOS tokens (eot_id() is the EOS), and must agree.
std::unique_ptr<BpeTokenizer> read_tokenizer_json(const std::string& path);

// Writes dir/vocab.json (ids in order) and dir/merges.txt ("#version: 0.2" then one merge a line).
// GPT-2's shape only: a model with its own pattern, ignore_merges or unused ids is refused.
void save_gpt2_files(const BpeModel& model, const std::string& dir);
// Writes a tokenizer.json that Hugging Face tokenizers loads as GPT-2's kind (and read_tokenizer_json
// reads); refuses what save_gpt2_files refuses.
void save_tokenizer_json(const BpeModel& model, const std::string& path);

}  // namespace zt
