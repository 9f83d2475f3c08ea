// defines: LLVMFuzzerTestOneInput; file-local: write_part, exercise
//
// Fuzz target: the byte-level BPE readers (formats/bpe_tokenizer.h). One input is read twice:
//   - whole, as a Hugging Face tokenizer.json (read_tokenizer_json);
//   - cut at its first NUL byte, as vocab.json (before) + merges.txt (after) (read_gpt2_bpe).
// A tokenizer that loads must then encode a fixed text and decode it back exactly (byte-level BPE
// is lossless): a mismatch aborts, a finding like a crash. Seeds (make_seeds): tokenizer.json and
// "vocab.json NUL merges.txt" of vocabularies trained by train_bpe.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "formats/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

std::string write_part(const char* suffix, const uint8_t* data, size_t size) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/zt-fuzz-" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

void exercise(const zt::BpeTokenizer& tok) {
  static const std::string text = "Hello, world's 123 <|endoftext|> int main() {\n\treturn 0;\n}\xFF\xC3";
  if (tok.decode(tok.encode(text)) != text) std::abort();  // lossless, whatever the vocabulary
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = zt::fuzz::input_file(data, size, ".tokenizer.json");
  try {
    exercise(*zt::read_tokenizer_json(path));
  } catch (const zt::Error&) {
  }
  size_t cut = 0;
  while (cut < size && data[cut] != 0) ++cut;
  const std::string vocab = write_part(".vocab.json", data, cut);
  const std::string merges = write_part(".merges.txt", data + (cut < size ? cut + 1 : size), cut < size ? size - cut - 1 : 0);
  try {
    exercise(*zt::read_gpt2_bpe(vocab, merges));
  } catch (const zt::Error&) {
  }
  return 0;
}
