// defines: LLVMFuzzerTestOneInput
//
// Fuzz target: a DeepSpeed-style config (zero/engine_config.h) and the run keys beside it, from
// JSON text: parse_json (core/json.h) then parse_engine_config; and the same text as a file
// through zt-train's reader, run_config_from_json (train/run_config.h). Seeds: configs/*.json.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/json.h"
#include "tests/fuzz/fuzz_input.h"
#include "train/run_config.h"
#include "zero/engine_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json j = zt::parse_json(text, "config 'fuzz'");
    for (int world : {1, 4}) (void)zt::parse_engine_config(j, "fuzz", world, {"model", "train_data", "steps"});
  } catch (const zt::Error&) {
  }
  try {
    zt::RunConfig c;
    zt::run_config_from_json(zt::fuzz::input_file(data, size, ".json"), 2, c);
  } catch (const zt::Error&) {
  }
  return 0;
}
