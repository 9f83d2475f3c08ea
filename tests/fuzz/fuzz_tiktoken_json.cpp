// defines: LLVMFuzzerTestOneInput; file-local: exercise
//
// Fuzz target: the tiktoken family's tokenizer.json (formats/tokenizer_json.cpp) and the split
// regex it carries (formats/gpt2_pretokenizer.h's Pretokenizer over a file's pattern). One input:
//   - whole, as a tokenizer.json (read_tokenizer_json); a tokenizer that loads must encode a
//     fixed text (specials, digits, Unicode, invalid UTF-8) into ids it can decode, and decode
//     them back exactly (byte-level BPE is lossless, unused ids are never produced);
//   - up to its first NUL (at most 4 KiB), as a split pattern: a pattern that compiles must cut
//     the text into pieces that tile it exactly.
// Seeds (make_seeds): small tiktoken-family files with cl100k_base's, o200k_base's and GPT-2's
// patterns, unused ids and specials, written from vocabularies trained here.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "formats/bpe_tokenizer.h"
#include "formats/gpt2_pretokenizer.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

const std::string kText =
    "<|begin_of_text|>Hello, world's 12345 DON'T <|endoftext|> int main() {\n\treturn 0;\n}  \r\n"
    "\xD0\x9F\xD1\x80\xD0\xB8 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\x8D \xE1\xA0\x8E\xC2\xA0\xFF\xC3";

void exercise(const zt::BpeTokenizer& tok) {
  const std::vector<int32_t> ids = tok.encode(kText);
  std::string streamed;
  for (int32_t id : ids) streamed += tok.decode_token(id);  // throws (a finding) on an unused id
  if (tok.decode(ids) != kText || streamed != kText) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = zt::fuzz::input_file(data, size, ".tokenizer.json");
  try {
    exercise(*zt::read_tokenizer_json(path));
  } catch (const zt::Error&) {
  }
  size_t cut = 0;
  while (cut < size && cut < 4096 && data[cut] != 0) ++cut;
  try {
    const zt::Pretokenizer pre(std::string(reinterpret_cast<const char*>(data), cut), "fuzz pattern");
    std::string joined;
    for (std::string_view p : pre.split(kText)) {
      if (p.empty()) std::abort();  // pieces are never empty
      joined += p;
    }
    if (joined != kText) std::abort();
  } catch (const zt::Error&) {
  }
  return 0;
}
