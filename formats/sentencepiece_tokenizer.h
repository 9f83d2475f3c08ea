// defines: SentencePieceTokenizer — Llama-style SentencePiece models (.model files, BPE or
//          unigram) through Debian's libsentencepiece (Kudo & Richardson 2018). Layer formats/.
//
// encode / decode are SentencePiece's own (its normalizer, the "▁" word marker, byte fallback
// when the model was trained with it). No BOS is added: the caller places <s> where it wants.
// eot_id() is the model's </s> (eos_id; -1 when the model has none).
// decode_token(id) for streaming: the piece with "▁" as a space, a byte piece <0xNN> as its
// byte, a control piece (<s>, </s>, <pad>) as nothing, <unk> as SentencePiece decodes it.
// Round trip: decode(encode(s)) == s for text the model's normalizer leaves unchanged (the
// default nmt_nfkc rule changes, e.g., full-width letters and runs of spaces); invalid UTF-8
// is not preserved (SentencePiece replaces it). Tested on data/corpus with a model trained by
// spm_train (tests/test_sentencepiece.cpp).
#pragma once
#include <memory>
#include <string>

#include "formats/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace zt {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads the model; a file SentencePiece cannot read is a zt::Error naming the path and
  // SentencePiece's message.
  explicit SentencePieceTokenizer(const std::string& path);
  ~SentencePieceTokenizer() override;

  std::string kind() const override { return "sentencepiece"; }
  std::string source() const override { return path_; }
  int32_t vocab_size() const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string decode_token(int32_t id) const override;
  int32_t eot_id() const override;

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace zt
