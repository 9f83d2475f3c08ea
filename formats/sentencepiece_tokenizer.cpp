// defines: SentencePieceTokenizer (constructor, vocab_size, eot_id, encode, decode, decode_token)
//          (formats/sentencepiece_tokenizer.h)
#include "formats/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "core/check.h"

namespace zt {

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path)
    : path_(path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
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
