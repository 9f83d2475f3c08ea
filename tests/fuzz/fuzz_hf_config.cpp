// defines: LLVMFuzzerTestOneInput
//
// Fuzz target: a Hugging Face config.json (formats/hf_config.h) for GPT-2 and Llama, from JSON
// text. Seeds: configs written by hf_config_to_json.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/json.h"
#include "formats/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const zt::ModelConfig c = zt::hf_config_from_json(zt::parse_json(text, "config.json 'fuzz'"), "fuzz");
    (void)c.num_params();
  } catch (const zt::Error&) {
  }
  return 0;
}
