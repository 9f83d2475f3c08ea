// defines: LLVMFuzzerTestOneInput
//
// Fuzz target: an llm.c checkpoint (formats/llmc_checkpoint.h): the header against the file, then,
// for a model small enough to build here (<= 2^20 parameters), the whole load.
// Seeds: v3 (float32) and v5 (bfloat16) files of a tiny GPT-2 written by save_llmc_checkpoint.
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "formats/llmc_checkpoint.h"
#include "models/gpt2.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = zt::fuzz::input_file(data, size, ".bin");
  try {
    const zt::ModelConfig c = zt::read_llmc_header(path);
    if (c.num_params() <= (int64_t(1) << 20)) {
      zt::GPT2 m(c);
      zt::load_llmc_checkpoint(path, m);
    }
  } catch (const zt::Error&) {
  }
  return 0;
}
