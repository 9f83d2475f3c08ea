// defines: ByteTokenizer — the byte-level tokenizer (vocabulary 256, token id = byte value).
//          Layer formats/.
//
// Any byte string, UTF-8 or not, encodes losslessly: each byte becomes one token, so
// decode(encode(s)) == s for every s. This is the tokenizer of the bundled corpus (data/) and of
// plain-text token sources (formats/token_data.h: load_tokens).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

class ByteTokenizer {
 public:
  static constexpr int32_t kVocabSize = 256;
  int32_t vocab_size() const { return kVocabSize; }

  // One token per byte: ids in [0, 256).
  std::vector<int32_t> encode(std::string_view text) const;
  // Inverse of encode. Throws zt::Error naming the first id outside [0, 256) and its position.
  std::string decode(const std::vector<int32_t>& ids) const;
  // The bytes of one token (throws like decode).
  std::string decode_token(int32_t id) const;
};

}  // namespace zt
