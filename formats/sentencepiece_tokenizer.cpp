// defines: SentencePieceTokenizer (constructor, vocab_size, eot_id, encode, decode, decode_token)
//          (formats/sentencepiece_tokenizer.h); file-local: Wire, charsmap_problem, check_charsmaps
#include "formats/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string_view>

#include "core/check.h"

namespace zt {

namespace {

// The protobuf wire format, just enough to find ModelProto's normalizer_spec (field 3) and
// denormalizer_spec (field 5) and their precompiled_charsmap (field 2, bytes). Every read is
// bounds-checked: a malformed file stops the walk (libsentencepiece then reports it).
struct Wire {
  std::string_view b;
  size_t i = 0;
  std::optional<uint64_t> varint() {
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && i < b.size(); shift += 7) {
      const auto x = static_cast<uint8_t>(b[i++]);
      r |= static_cast<uint64_t>(x & 0x7f) << shift;
      if (x < 0x80) return r;
    }
    return std::nullopt;
  }
  // The next field: its number and, for a length-delimited one, its bytes (others skipped).
  bool next(uint64_t& field, std::string_view& bytes) {
    const auto key = varint();
    if (!key) return false;
    field = *key >> 3;
    bytes = {};
    switch (*key & 7) {
      case 0: return varint().has_value();
      case 1: return (i += 8) <= b.size();
      case 5: return (i += 4) <= b.size();
      case 2: {
        const auto len = varint();
        if (!len || *len > b.size() - i) return false;
        bytes = b.substr(i, *len);
        i += *len;
        return true;
      }
      default: return false;
    }
  }
};

// What is wrong with a precompiled_charsmap — [uint32 trie bytes][darts-clone double array of
// uint32 units][NUL-terminated replacement strings] — that libsentencepiece's normalizer would
// walk out of bounds on (it never checks: a crafted table crashes it), or "" when every unit the
// walk can reach stays inside. A non-leaf unit u at index i sends the walk to (i ^ offset(u)) ^ c
// for an input byte c, so that whole 256-unit block must exist; a unit with a leaf reads the value
// at i ^ offset(u), an offset into the strings that must end in a NUL. (darts-clone's units:
// bit 31 marks a leaf's value unit, bit 8 "has a leaf", offset = (u >> 10) << ((u & 1 << 9) >> 6).)
std::string charsmap_problem(std::string_view blob) {
  if (blob.empty()) return "";
  if (blob.size() < 4) return "shorter than its 4-byte size field";
  uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, blob.data(), 4);  // little-endian, as the library reads it on x86
  if (trie_bytes == 0 || trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4)
    return "its trie size " + std::to_string(trie_bytes) + " is not a positive multiple of 4 within the " +
           std::to_string(blob.size() - 4) + " bytes after it";
  const size_t n = trie_bytes / 4;
  const std::string_view strings = blob.substr(4 + trie_bytes);
  auto unit = [&](size_t k) {
    uint32_t u = 0;
    std::memcpy(&u, blob.data() + 4 + 4 * k, 4);
    return u;
  };
  for (size_t k = 0; k < n; ++k) {
    const uint32_t u = unit(k);
    if (u >> 31) continue;  // a leaf's value unit: the walk reads its value, never its offset
    const size_t base = k ^ (static_cast<size_t>(u >> 10) << ((u & (1u << 9)) >> 6));
    if ((base | 0xff) >= n)
      return "trie unit " + std::to_string(k) + " points to units " + std::to_string(base & ~size_t{0xff}) + ".." +
             std::to_string(base | 0xff) + ", past the trie's " + std::to_string(n) + " units";
    if ((u >> 8) & 1) {
      const uint32_t value = unit(base) & 0x7fffffffu;
      if (value >= strings.size() || strings.find('\0', value) == std::string_view::npos)
        return "trie unit " + std::to_string(k) + " names replacement string offset " + std::to_string(value) +
               ", outside the " + std::to_string(strings.size()) + " NUL-terminated bytes of strings";
    }
  }
  return "";
}

// Throws naming the file and the map when either precompiled_charsmap is unsafe (see above).
void check_charsmaps(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return;  // the library's Load reports an unreadable file
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Wire top{bytes};
  uint64_t field = 0;
  std::string_view spec;
  while (top.next(field, spec)) {
    if (field != 3 && field != 5) continue;
    const char* which = field == 3 ? "normalizer_spec" : "denormalizer_spec";
    Wire inner{spec};
    std::string_view map;
    uint64_t inner_field = 0;
    while (inner.next(inner_field, map)) {
      if (inner_field != 2) continue;
      const std::string why = charsmap_problem(map);
      if (!why.empty())
        ZT_THROW("SentencePiece model '", path, "': ", which, ".precompiled_charsmap is corrupt: ", why,
                 " (libsentencepiece would read outside it; re-export the model)");
    }
  }
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path)
    : path_(path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  check_charsmaps(path);  // before the library walks them
  const auto status = sp_->Load(path);
  if (!status.ok())
    ZT_THROW("SentencePiece model '", path, "': cannot be loaded: ", status.ToString(),
             " (expected a SentencePiece .model file, as spm_train writes)");
  if (sp_->GetPieceSize() <= 0) ZT_THROW("SentencePiece model '", path, "': holds no pieces");
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int32_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

int32_t SentencePieceTokenizer::eot_id() const { return sp_->eos_id(); }

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!status.ok()) ZT_THROW("SentencePiece model '", path_, "': encode failed: ", status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size())
      ZT_THROW("SentencePiece model '", path_, "': token id ", ids[i], " at position ", i, " is outside the vocabulary [0, ",
               vocab_size(), ")");
  std::string text;
  const auto status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) ZT_THROW("SentencePiece model '", path_, "': decode failed: ", status.ToString());
  return text;
}

std::string SentencePieceTokenizer::decode_token(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    ZT_THROW("SentencePiece model '", path_, "': token id ", id, " is outside the vocabulary [0, ", vocab_size(), ")");
  if (sp_->IsControl(id)) return "";
  if (sp_->IsUnknown(id)) return decode({id});
  const std::string piece = sp_->IdToPiece(id);
  if (sp_->IsByte(id)) {  // "<0xNN>"
    if (piece.size() == 6) return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
    ZT_THROW("SentencePiece model '", path_, "': byte piece '", piece, "' (id ", id, ") is not of the form <0xNN>");
  }
  std::string out;
  static const std::string kWordMark = "\xE2\x96\x81";  // U+2581 '▁'
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kWordMark.size(), kWordMark) == 0) {
      out += ' ';
      i += kWordMark.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

}  // namespace zt
