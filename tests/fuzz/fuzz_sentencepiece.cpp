// defines: LLVMFuzzerTestOneInput
//
// Fuzz target: SentencePiece .model files (formats/sentencepiece_tokenizer.h: the loader's own
// checks of the normalizer's precompiled_charsmap, then libsentencepiece's protobuf parser). A
// model that loads must encode a fixed text into ids inside its vocabulary, decode them, and give
// the bytes of every id below 512 (decode_token). Its round trip is not required: a model's
// normalizer may change the text by design. Seeds (make_seeds): models trained by spm_train, BPE
// and unigram, with the identity and the default nmt_nfkc normalizers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "formats/sentencepiece_tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = zt::fuzz::input_file(data, size, ".model");
  try {
    const zt::SentencePieceTokenizer tok(path);
    static const std::string text =
        "Hello, world's 12345 \xEF\xBC\xA1 int main() {\n\treturn 0;\n} \xE4\xBD\xA0\xE5\xA5\xBD \xFF";
    const std::vector<int32_t> ids = tok.encode(text);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    (void)tok.decode(ids);
    for (int32_t id = 0; id < tok.vocab_size() && id < 512; ++id) (void)tok.decode_token(id);
  } catch (const zt::Error&) {
  }
  return 0;
}
