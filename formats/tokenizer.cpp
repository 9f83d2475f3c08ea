// defines: ByteTokenizer (encode, decode, decode_token), check_tokenizer_fits_model (formats/tokenizer.h)
#include "formats/tokenizer.h"

#include "core/check.h"

namespace zt {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= kVocabSize)
      ZT_THROW("ByteTokenizer::decode: token id ", id, " at position ", i,
               " is outside the byte vocabulary [0, ", kVocabSize, ")");
    out[i] = static_cast<char>(static_cast<unsigned char>(id));
  }
  return out;
}

std::string ByteTokenizer::decode_token(int32_t id) const {
  if (id < 0 || id >= kVocabSize)
    ZT_THROW("ByteTokenizer::decode_token: token id ", id, " is outside the byte vocabulary [0, ",
             kVocabSize, ")");
  return std::string(1, static_cast<char>(static_cast<unsigned char>(id)));
}

void check_tokenizer_fits_model(const Tokenizer& tok, int64_t model_vocab_size, const std::string& model_what) {
  if (tok.vocab_size() > model_vocab_size)
    ZT_THROW("tokenizer '", tok.source(), "' (", tok.kind(), ") has ", tok.vocab_size(), " tokens but ", model_what,
             " has a vocabulary of ", model_vocab_size,
             ": its ids would not fit the model (was the model made with another tokenizer?)");
}

}  // namespace zt
