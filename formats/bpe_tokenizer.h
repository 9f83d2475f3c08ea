// defines: BpeModel (a byte-level BPE vocabulary: tokens, merges by rank, special tokens),
//          BpeTokenizer (GPT-2's byte-level BPE: encode / decode), readers of GPT-2's
//          vocab.json + merges.txt and of Hugging Face's tokenizer.json (BPE models), and their
//          writers (save_gpt2_files, save_tokenizer_json). Layer formats/.
//
// Encoding text (GPT-2's encoder.py; Hugging Face tokenizers' ByteLevel + BPE):
//   1. the text is cut at special tokens written out in it ("<|endoftext|>" -> its one id; at a
//      position where two specials start, the longer wins);
//   2. each other stretch is split into pieces by GPT-2's pattern (formats/gpt2_pretokenizer.h);
//   3. each piece starts as its bytes, one token per byte, and adjacent pairs are merged by rank:
//      repeatedly the adjacent pair with the lowest merge rank (leftmost among equals) becomes the
//      merged token, until no adjacent pair has a merge (Hugging Face's word merge; the same as
//      GPT-2's bpe() for every vocabulary a trainer makes). Pieces are cached.
// Decoding concatenates the tokens' bytes (a special token's bytes are its text).
//
// Files. Token strings in vocab.json / merges.txt / tokenizer.json are GPT-2's byte-level form:
// each byte written as one printable character (gpt2_byte_to_unicode; ' ' is 'Ġ'). A valid
// vocabulary: ids 0..N-1 each used once; all 256 one-byte tokens present (byte-level BPE encodes
// any input); every merge "a b" names two tokens of the vocabulary whose concatenation is one too.
// vocab.json + merges.txt carry no special-token list: "<|endoftext|>" is special there by GPT-2's
// convention. tokenizer.json lists its specials (added_tokens) and must be GPT-2's kind of BPE:
// no normalizer, a ByteLevel pre-tokenizer with add_prefix_space false and use_regex true, a
// ByteLevel decoder (or none), no byte_fallback, dropout, subword prefix or suffix. Anything else
// is refused naming the file and the field (Llama's SentencePiece-style tokenizer.json: use its
// tokenizer.model).
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
  std::vector<std::string> tokens;                  // id -> the token's bytes (raw, not GPT-2's form)
  std::vector<std::pair<int32_t, int32_t>> merges;  // rank -> (left id, right id)
  std::vector<int32_t> specials;                    // ids whose tokens are special (matched as text)
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

  const BpeModel& model() const { return model_; }
  bool jit() const { return pre_.jit(); }  // the pre-tokenizer's pattern runs JIT-compiled
  // The merge rank of (left, right), or -1 when they do not merge.
  int32_t merge_rank(int32_t left, int32_t right) const;

 private:
  // One piece of ordinary text (no specials) -> ids, through the merges.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  BpeModel model_;
  std::string source_;
  Gpt2Pretokenizer pre_;
  int32_t byte_id_[256];  // byte -> its one-byte token
  // (left << 32 | right) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merge_of_;
  std::vector<std::pair<std::string, int32_t>> special_text_;  // specials' text and id
  int32_t eot_ = -1;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // piece -> ids
};

// GPT-2's files: vocab.json (token -> id) and merges.txt ("#version" line, then "a b" by rank).
std::unique_ptr<BpeTokenizer> read_gpt2_bpe(const std::string& vocab_json, const std::string& merges_txt);
// A Hugging Face tokenizer.json whose model is GPT-2's kind of BPE.
std::unique_ptr<BpeTokenizer> read_tokenizer_json(const std::string& path);

// Writes dir/vocab.json (ids in order) and dir/merges.txt ("#version: 0.2" then one merge a line).
void save_gpt2_files(const BpeModel& model, const std::string& dir);
// Writes a tokenizer.json that Hugging Face tokenizers loads as GPT-2's kind (and read_tokenizer_json reads).
void save_tokenizer_json(const BpeModel& model, const std::string& path);

}  // namespace zt
