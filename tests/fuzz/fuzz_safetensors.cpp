// defines: LLVMFuzzerTestOneInput
//
// Fuzz target: a safetensors file (formats/safetensors.h): the header, then every tensor read.
// Seeds: files written by save_safetensors (tests/fuzz/make_seeds.cpp).
#include <cstddef>
#include <cstdint>

#include "core/check.h"
#include "formats/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = zt::fuzz::input_file(data, size, ".safetensors");
  try {
    (void)zt::load_safetensors(path);
  } catch (const zt::Error&) {
  }
  return 0;
}
