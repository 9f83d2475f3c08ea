// defines: TokenIds (ids at 2 or 4 bytes each), llm.c token shards (write_token_shard,
//          read_token_shard), load_tokens (shard or text), max_token_id / check_tokens_fit_vocab,
//          DataLoader (llm.c's dataloader, no shuffling). Layer formats/.
//
// Token shard format (llm.c, dev/data/data_common.py write_datafile): a header of 256 int32
// (little-endian) — header[0] = magic, header[1] = version, header[2] = number of tokens N, the
// rest zero — followed by N tokens. llm.c has two kinds (its HEADERS_INFO):
//   "gpt-2":   magic 20240520, version 1, tokens uint16: file size = 1024 + 2*N bytes
//   "llama-3": magic 20240801, version 7, tokens uint32: file size = 1024 + 4*N bytes
// write_token_shard_for_vocab picks uint16 for vocabularies up to 65536 tokens, else uint32.
// The training path holds the ids as the source gives them (TokenIds): a uint16 shard, or text
// through a tokenizer of at most 65536 tokens, costs 2 bytes a token in memory; a uint32 shard
// (Llama 3's 128256-token vocabulary), or a larger tokenizer's text, 4. The batches are int32.
//
// load_tokens(path[, tokenizer]) takes either kind of token source. A file whose name ends in
// ".bin" or whose first 4 bytes are a shard magic as a little-endian int32 (20240520: bytes
// 88 D8 34 01; 20240801: A1 D9 34 01) is read
// as a shard (and must then be a valid one: a wrong magic is an error, never a fallback to
// text); any other file is text, encoded with the tokenizer given (ByteTokenizer when none) — and
// must hold no NUL byte (binary data is refused rather than trained on). The whole file is one
// document: no end-of-text is added (zt-tokenize adds one before each document, as llm.c does).
// No UTF-8 text can be mistaken for a shard: it never starts with a continuation byte (88, A1).
//
// DataLoader follows llm.c's llmc/dataloader.h with shuffling off, on one token source:
//   S = num_processes * B * T tokens per global batch; batches per pass K = (N - 1) / S
//   batch k of rank r = tokens [pos, pos + B*T + 1) with pos = (k * num_processes + r) * B * T
//   inputs (B, T) = tokens[pos .. pos + B*T), targets (B, T) = tokens[pos + 1 .. pos + B*T + 1)
//   after batch K-1 the next batch is batch 0 again (llm.c's dataloader_advance_ / reset).
// Its position() (llm.c's current_sample_idx: the index of the next batch, in [0, K]) is the whole
// state; set_position(position()) on a fresh loader over the same tokens continues identically.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zt {

class Tokenizer;

// Token ids held at the width the source chose: uint16 (2 bytes a token) or uint32 (4). Values
// compare equal whatever the width (a test's std::vector<uint16_t> converts).
class TokenIds {
 public:
  TokenIds() = default;
  TokenIds(std::vector<uint16_t> ids) : narrow_(std::move(ids)) {}                // NOLINT: implicit, 2 bytes a token
  TokenIds(std::vector<uint32_t> ids) : wide_(std::move(ids)), is_wide_(true) {}  // NOLINT: 4 bytes a token
  // int32 ids (a tokenizer's output) of a vocabulary of vocab_size tokens: uint16 when
  // vocab_size <= 65536, else uint32; every id must be in [0, vocab_size) (the error names
  // `source`, the id and its index).
  static TokenIds from_ids(const std::vector<int32_t>& ids, int64_t vocab_size, const std::string& source);

  int64_t size() const { return static_cast<int64_t>(is_wide_ ? wide_.size() : narrow_.size()); }
  bool empty() const { return size() == 0; }
  int bytes_per_token() const { return is_wide_ ? 4 : 2; }
  uint32_t operator[](int64_t i) const {
    return is_wide_ ? wide_[static_cast<size_t>(i)] : narrow_[static_cast<size_t>(i)];
  }
  // ids [pos, pos + n) as int32 into dst (the batches' dtype; ids are < 2^31 by every reader's checks).
  void copy_to(int32_t* dst, int64_t pos, int64_t n) const;
  bool operator==(const TokenIds& o) const;

 private:
  std::vector<uint16_t> narrow_;
  std::vector<uint32_t> wide_;
  bool is_wide_ = false;
};

inline constexpr int32_t kTokenShardMagic = 20240520;  // llm.c "gpt-2": uint16 tokens
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr int32_t kTokenShardMagic32 = 20240801;  // llm.c "llama-3": uint32 tokens
inline constexpr int32_t kTokenShardVersion32 = 7;
inline constexpr int64_t kTokenShardHeaderInts = 256;
inline constexpr int64_t kTokenShardHeaderBytes = kTokenShardHeaderInts * 4;  // 1024

// Writes `path` atomically: the bytes go to "path.tmp", which is fsynced and renamed over `path`
// (then the directory is fsynced), so a crash leaves either the old file or the new one.
// Throws zt::Error naming the file on any I/O failure, or if there are more than 2^31-1 tokens.
void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens);
// Same, from int32 ids (the tokenizer's output); every id must be in [0, 65535] (error names the
// first one that is not, and its index).
void write_token_shard(const std::string& path, const std::vector<int32_t>& tokens);
// The shard for a tokenizer of `vocab_size` tokens: uint16 (magic 20240520, version 1) when
// vocab_size <= 65536, else uint32 (magic 20240801, version 7). Every id must be in
// [0, vocab_size) (the error names the first that is not). Returns the bytes per token (2 or 4).
int write_token_shard_for_vocab(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size);

// Reads and validates a shard of either kind, at its width (uint16 or uint32 ids, as the magic
// says). Throws zt::Error naming the file and the problem: cannot open, header shorter than 1024
// bytes, wrong magic (found vs 20240520 / 20240801), wrong version for the magic, negative count,
// a file size that disagrees with header[2] (both numbers printed), or (uint32 shards) an id
// >= 2^31, which no int32 batch can hold.
TokenIds read_token_shard(const std::string& path);

// True when the file's first 4 bytes are either shard magic (see the top of this file). Throws if
// the file cannot be opened.
bool is_token_shard(const std::string& path);

// A shard if is_token_shard(path) or path ends in ".bin", else text (no NUL bytes) through
// `tokenizer` (ByteTokenizer when null), held as TokenIds::from_ids for the tokenizer's vocabulary.
TokenIds load_tokens(const std::string& path, const Tokenizer* tokenizer = nullptr);

// The largest id in `tokens`, or -1 when empty.
int64_t max_token_id(const TokenIds& tokens);
// Throws zt::Error unless every id < vocab_size; the message names `source` (a file name), the
// largest id, its first index and vocab_size.
void check_tokens_fit_vocab(const TokenIds& tokens, int64_t vocab_size, const std::string& source);

class DataLoader {
 public:
  // Throws zt::Error unless B, T >= 1, 0 <= process_rank < num_processes, and the tokens hold at
  // least num_processes * B * T + 1 tokens (the message gives both counts).
  DataLoader(TokenIds tokens, int64_t B, int64_t T, int process_rank = 0, int num_processes = 1);

  // Fills inputs and targets, int32 (B, T), with the next batch (see the top of this file) and
  // advances. An undefined tensor is allocated (Category::activations); a defined one must be a
  // contiguous int32 (B, T) tensor and is overwritten in place.
  void next_batch(Tensor& inputs, Tensor& targets);

  // The index of the next batch in the current pass, in [0, num_batches()]; num_batches() means
  // the pass is used up and the next call starts over at batch 0.
  int64_t position() const { return position_; }
  // Restores a position saved from a loader over the same tokens with the same B, T and ranks.
  void set_position(int64_t position);
  void reset() { position_ = 0; }  // back to batch 0

  int64_t num_batches() const { return num_batches_; }  // K = (N - 1) / (num_processes*B*T)
  int64_t num_tokens() const { return tokens_.size(); }
  int64_t B() const { return B_; }
  int64_t T() const { return T_; }
  int process_rank() const { return process_rank_; }
  int num_processes() const { return num_processes_; }
  const TokenIds& tokens() const { return tokens_; }

 private:
  TokenIds tokens_;
  int64_t B_, T_;
  int process_rank_, num_processes_;
  int64_t num_batches_;
  int64_t position_ = 0;
};

}  // namespace zt
