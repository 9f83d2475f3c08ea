// defines: LLVMFuzzerTestOneInput
//
// Fuzz target: a token file (formats/token_data.h): an llm.c token shard or raw text, as
// load_tokens reads either. Seeds: shards written by write_token_shard, and text.
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "formats/token_data.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = zt::fuzz::input_file(data, size, ".tokens");
  try {
    const auto tokens = zt::load_tokens(path);
    (void)zt::max_token_id(tokens);
  } catch (const zt::Error&) {
  }
  return 0;
}
