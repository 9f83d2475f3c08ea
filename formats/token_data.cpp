// defines: write_token_shard, write_token_shard_for_vocab, read_token_shard, is_token_shard, load_tokens,
//          TokenIds (from_ids, copy_to, operator==), max_token_id, check_tokens_fit_vocab, DataLoader
//          (constructor, set_position, next_batch)
//          (formats/token_data.h); file-local: InFile, file_size, write_shard_bytes
#include "formats/token_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <string_view>

#include "core/check.h"
#include "core/file_io.h"
#include "formats/tokenizer.h"

namespace zt {

static_assert(std::endian::native == std::endian::little,
              "token shards are little-endian; a big-endian host would need byte swapping");

namespace {

// RAII FILE* for reading.
struct InFile {
  std::FILE* f = nullptr;
  explicit InFile(const std::string& path) {
    f = std::fopen(path.c_str(), "rb");
    if (!f) ZT_THROW("token file '", path, "': cannot open: ", errno_message());
  }
  ~InFile() {
    if (f) std::fclose(f);
  }
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
};

int64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) ZT_THROW("token file '", path, "': cannot stat: ", errno_message());
  if (!S_ISREG(st.st_mode)) ZT_THROW("token file '", path, "': not a regular file");
  return static_cast<int64_t>(st.st_size);
}

// Header + tokens (uint16 or uint32: the header kind follows), written atomically (core/file_io.h).
template <class T>
void write_shard_bytes(const std::string& path, const T* tokens, size_t n) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4);
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    ZT_THROW("token file '", path, "': ", n, " tokens do not fit the shard header's int32 count");
  int32_t header[kTokenShardHeaderInts] = {};
  header[0] = sizeof(T) == 2 ? kTokenShardMagic : kTokenShardMagic32;
  header[1] = sizeof(T) == 2 ? kTokenShardVersion : kTokenShardVersion32;
  header[2] = static_cast<int32_t>(n);
  AtomicFile f(path, "token file");
  f.write(header, sizeof(header));
  f.write(tokens, n * sizeof(T));
  f.commit();
}

}  // namespace

void write_token_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  write_shard_bytes(path, tokens.data(), tokens.size());
}

void write_token_shard(const std::string& path, const std::vector<int32_t>& tokens) {
  std::vector<uint16_t> t(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > 65535)
      ZT_THROW("token file '", path, "': token id ", tokens[i], " at index ", i,
               " does not fit a uint16 shard (ids must be in [0, 65535])");
    t[i] = static_cast<uint16_t>(tokens[i]);
  }
  write_shard_bytes(path, t.data(), t.size());
}

int write_token_shard_for_vocab(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      ZT_THROW("token file '", path, "': token id ", tokens[i], " at index ", i, " is outside the vocabulary [0, ", vocab_size, ")");
  if (vocab_size <= 65536) {
    write_token_shard(path, tokens);
    return 2;
  }
  std::vector<uint32_t> t(tokens.begin(), tokens.end());
  write_shard_bytes(path, t.data(), t.size());
  return 4;
}

TokenIds read_token_shard(const std::string& path) {
  InFile in(path);
  const int64_t size = file_size(path);
  if (size < kTokenShardHeaderBytes)
    ZT_THROW("token file '", path, "': truncated header: the file has ", size, " bytes, a shard header needs ",
             kTokenShardHeaderBytes);
  int32_t header[kTokenShardHeaderInts];
  if (std::fread(header, 1, sizeof(header), in.f) != sizeof(header))
    ZT_THROW("token file '", path, "': truncated header: could not read ", kTokenShardHeaderBytes, " bytes");
  if (header[0] != kTokenShardMagic && header[0] != kTokenShardMagic32)
    ZT_THROW("token file '", path, "': bad magic ", header[0], " (expected ", kTokenShardMagic, " for uint16 tokens or ",
             kTokenShardMagic32, " for uint32): not an llm.c token shard");
  const bool wide = header[0] == kTokenShardMagic32;
  const int32_t version = wide ? kTokenShardVersion32 : kTokenShardVersion;
  if (header[1] != version)
    ZT_THROW("token file '", path, "': unsupported version ", header[1], " (expected ", version, " with magic ", header[0], ")");
  const int64_t width = wide ? 4 : 2;
  const int64_t count = header[2];
  if (count < 0) ZT_THROW("token file '", path, "': negative token count ", count, " in the header");
  const int64_t expected = kTokenShardHeaderBytes + width * count;
  if (size != expected)
    ZT_THROW("token file '", path, "': the header says ", count, " tokens of ", width, " bytes (file size ", expected,
             " bytes) but the file has ", size, " bytes (", (size - kTokenShardHeaderBytes) / width,
             " tokens): truncated or corrupt");
  const auto read_all = [&](auto& v) {
    if (count > 0 && std::fread(v.data(), sizeof(v[0]), v.size(), in.f) != v.size())
      ZT_THROW("token file '", path, "': read of ", count, " tokens failed");
  };
  if (!wide) {
    std::vector<uint16_t> tokens(static_cast<size_t>(count));
    read_all(tokens);
    return TokenIds(std::move(tokens));
  }
  std::vector<uint32_t> tokens(static_cast<size_t>(count));
  read_all(tokens);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] > 0x7fffffffu)
      ZT_THROW("token file '", path, "': token id ", tokens[i], " at index ", i,
               " is past 2^31 - 1: no vocabulary is that large (a corrupt shard?)");
  return TokenIds(std::move(tokens));
}

bool is_token_shard(const std::string& path) {
  InFile in(path);
  int32_t magic = 0;
  if (std::fread(&magic, 1, sizeof(magic), in.f) != sizeof(magic)) return false;  // < 4 bytes: text
  return magic == kTokenShardMagic || magic == kTokenShardMagic32;
}

TokenIds load_tokens(const std::string& path, const Tokenizer* tokenizer) {
  // A ".bin" file is a shard (llm.c's extension): read it as one, so a wrong magic is an error
  // naming the value found, never a silent fall-back to training on its raw bytes.
  if (is_token_shard(path) || std::string_view(path).ends_with(".bin")) return read_token_shard(path);
  InFile in(path);
  const int64_t size = file_size(path);
  std::string text(static_cast<size_t>(size), '\0');
  if (size > 0 && std::fread(text.data(), 1, text.size(), in.f) != text.size())
    ZT_THROW("token file '", path, "': read of ", size, " bytes of text failed");
  const size_t nul = text.find('\0');
  if (nul != std::string::npos)
    ZT_THROW("token file '", path, "': neither a token shard (its first 4 bytes are not the magic ", kTokenShardMagic,
             ") nor text (a NUL byte at offset ", nul, ")");
  const ByteTokenizer bytes;
  const Tokenizer& tok = tokenizer ? *tokenizer : bytes;
  return TokenIds::from_ids(tok.encode(text), tok.vocab_size(),
                            "token file '" + path + "' (tokenizer '" + tok.source() + "')");
}

TokenIds TokenIds::from_ids(const std::vector<int32_t>& ids, int64_t vocab_size, const std::string& source) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      ZT_THROW(source, ": id ", ids[i], " at index ", i, " is outside the vocabulary [0, ", vocab_size, ")");
  if (vocab_size <= 65536) return TokenIds(std::vector<uint16_t>(ids.begin(), ids.end()));
  return TokenIds(std::vector<uint32_t>(ids.begin(), ids.end()));
}

void TokenIds::copy_to(int32_t* dst, int64_t pos, int64_t n) const {
  if (is_wide_) std::copy_n(wide_.begin() + pos, n, dst);
  else std::copy_n(narrow_.begin() + pos, n, dst);
}

bool TokenIds::operator==(const TokenIds& o) const {
  if (is_wide_ == o.is_wide_) return is_wide_ ? wide_ == o.wide_ : narrow_ == o.narrow_;
  if (size() != o.size()) return false;
  for (int64_t i = 0; i < size(); ++i)
    if ((*this)[i] != o[i]) return false;
  return true;
}

int64_t max_token_id(const TokenIds& tokens) {
  int64_t m = -1;
  for (int64_t i = 0; i < tokens.size(); ++i) m = std::max<int64_t>(m, tokens[i]);
  return m;
}

void check_tokens_fit_vocab(const TokenIds& tokens, int64_t vocab_size, const std::string& source) {
  const int64_t m = max_token_id(tokens);
  if (m >= vocab_size) {
    int64_t at = 0;
    while (tokens[at] != m) ++at;
    ZT_THROW("token source '", source, "': token id ", m, " (first at index ", at,
             ") does not fit the model's vocabulary of ", vocab_size,
             " (ids must be < vocab_size; was the data made with another tokenizer?)");
  }
}

DataLoader::DataLoader(TokenIds tokens, int64_t B, int64_t T, int process_rank, int num_processes)
    : tokens_(std::move(tokens)), B_(B), T_(T), process_rank_(process_rank), num_processes_(num_processes) {
  if (B < 1 || T < 1) ZT_THROW("DataLoader: batch size B=", B, " and sequence length T=", T, " must be >= 1");
  if (num_processes < 1 || process_rank < 0 || process_rank >= num_processes)
    ZT_THROW("DataLoader: process_rank ", process_rank, " must be in [0, num_processes=", num_processes, ")");
  const int64_t per_step = static_cast<int64_t>(num_processes) * B * T;  // tokens per global batch
  const int64_t n = num_tokens();
  if (n < per_step + 1)
    ZT_THROW("DataLoader: the data holds ", n, " tokens but one batch needs num_processes*B*T + 1 = ",
             num_processes, "*", B, "*", T, " + 1 = ", per_step + 1, " tokens");
  num_batches_ = (n - 1) / per_step;  // llm.c: shard_num_samples, -1 for the shifted targets
}

void DataLoader::set_position(int64_t position) {
  if (position < 0 || position > num_batches_)
    ZT_THROW("DataLoader::set_position: position ", position, " is outside [0, ", num_batches_,
             "] (the batches in one pass over ", num_tokens(), " tokens with B=", B_, ", T=", T_,
             ", num_processes=", num_processes_, ")");
  position_ = position;
}

void DataLoader::next_batch(Tensor& inputs, Tensor& targets) {
  const Shape shape{B_, T_};
  for (Tensor* t : {&inputs, &targets}) {
    if (!t->defined()) {
      *t = Tensor::empty(shape, DType::i32, Category::activations, cpu_allocator());  // batches stay on the host
    } else {
      check_shape(*t, shape, t == &inputs ? "DataLoader inputs" : "DataLoader targets");
      ZT_CHECK(t->dtype() == DType::i32 && t->is_contiguous() && t->device().is_cpu(),
               "DataLoader::next_batch needs contiguous int32 host tensors, got ", t->str(), " on ", t->device().str());
    }
  }
  if (position_ >= num_batches_) position_ = 0;  // llm.c dataloader_advance_: wrap to the start
  const int64_t BT = B_ * T_;
  const int64_t pos = (position_ * num_processes_ + process_rank_) * BT;
  // pos + BT + 1 <= N by the choice of num_batches_
  tokens_.copy_to(inputs.data<int32_t>(), pos, BT);
  tokens_.copy_to(targets.data<int32_t>(), pos + 1, BT);
  ++position_;
}

}  // namespace zt
