// defines: Tokenizer (the interface every tokenizer implements), ByteTokenizer (vocabulary 256,
//          token id = byte value), load_tokenizer (a tokenizer file or directory, its kind
//          detected). Layer formats/.
//
// A tokenizer turns bytes into token ids in [0, vocab_size()) and back. Three kinds:
//   ByteTokenizer          one token per byte; decode(encode(s)) == s for every byte string s.
//                          The tokenizer of plain-text token sources when none is given
//                          (formats/token_data.h: load_tokens).
//   BpeTokenizer           byte-level BPE (formats/bpe_tokenizer.h): GPT-2's vocab.json +
//                          merges.txt, or a Hugging Face tokenizer.json of GPT-2's shape or the
//                          tiktoken family's (Llama 3, cl100k_base: the file's own split regex).
//   SentencePieceTokenizer Llama-style SentencePiece .model files (formats/sentencepiece_tokenizer.h).
//
// decode_token(id) gives the bytes of one token, for streaming output: concatenating
// decode_token over ids equals decode(ids) for the byte and BPE tokenizers (a token may end in
// the middle of a UTF-8 character; the bytes are exact). SentencePiece's decode drops the
// leading space of the first piece (its "▁" convention), so its streamed pieces differ from
// decode() there.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // "byte", "bpe" or "sentencepiece" (what load_tokenizer detected).
  virtual std::string kind() const = 0;
  // Where it came from (a path, or "bytes" for ByteTokenizer): error messages name it.
  virtual std::string source() const = 0;
  virtual int32_t vocab_size() const = 0;
  // Text (any bytes) -> ids in [0, vocab_size()). Special tokens written out in the text (such as
  // "<|endoftext|>") become their one id where the kind supports them (BPE: see its header).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids -> text. Throws zt::Error naming the first id outside [0, vocab_size()) and its position.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The bytes of one token (throws like decode).
  virtual std::string decode_token(int32_t id) const = 0;
  // The end-of-text id that separates documents (GPT-2's <|endoftext|>, SentencePiece's </s>),
  // or -1 when the tokenizer has none (ByteTokenizer).
  virtual int32_t eot_id() const { return -1; }
  // The id every sequence starts with (Llama 3's <|begin_of_text|>, named by tokenizer_config.json
  // or generation_config.json beside a tiktoken-family tokenizer.json), or -1 when the tokenizer
  // places none (GPT-2, SentencePiece as loaded here). encode() never adds it: zt-tokenize puts it
  // before each document and zt-generate before the prompt, as transformers' add_special_tokens.
  virtual int32_t bos_id() const { return -1; }
};

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kVocabSize = 256;
  std::string kind() const override { return "byte"; }
  std::string source() const override { return "bytes"; }
  int32_t vocab_size() const override { return kVocabSize; }

  // One token per byte: ids in [0, 256).
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  std::string decode_token(int32_t id) const override;
};

// The tokenizer at `path`, its kind detected from what is there:
//   "bytes"                                    ByteTokenizer (the default tokenizer, by name)
//   a file named *.json (not vocab.json)       a Hugging Face tokenizer.json (BPE models only)
//   vocab.json (a file named so)               with merges.txt beside it (GPT-2's files)
//   a directory                                its tokenizer.json, else its vocab.json + merges.txt,
//                                              else its tokenizer.model (SentencePiece)
//   a file named *.model                       SentencePiece
// Anything else is a zt::Error naming the path and the kinds it accepts; a file of a detected
// kind that is malformed is an error from that kind's reader, naming the file and the problem.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// Throws zt::Error unless tok.vocab_size() <= model_vocab_size, naming the tokenizer's source,
// both sizes and `model_what` (how the caller names the model). A tokenizer smaller than the
// model is accepted (padded or reserved ids are never produced by encode).
void check_tokenizer_fits_model(const Tokenizer& tok, int64_t model_vocab_size, const std::string& model_what);

}  // namespace zt
