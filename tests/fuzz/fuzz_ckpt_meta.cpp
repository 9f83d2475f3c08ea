// defines: LLVMFuzzerTestOneInput; file-local: step_dir
//
// Fuzz target: a ZeRO sharded checkpoint's meta.json (zero/checkpoint.h) over a real rank file:
// read_sharded_meta's checks (format, version, world size, units, tensors, dtypes, files), then
// CheckpointParams reading every element of every unit of every tensor the meta names, as
// consolidation does. Seeds: the real meta.json (tests/fuzz/fuzz_checkpoint.h, via make_seeds).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "core/check.h"
#include "tests/fuzz/fuzz_checkpoint.h"
#include "zero/checkpoint_source.h"

namespace {
const std::string& step_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    const std::string root = std::string(tmp && *tmp ? tmp : "/tmp") + "/zt-fuzz-ckpt-" + std::to_string(::getpid());
    std::filesystem::remove_all(root);
    return zt::fuzz::write_toy_checkpoint(root);
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string meta = step_dir() + "/meta.json";
  std::FILE* f = std::fopen(meta.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    for (const char* tensor : {"param", "exp_avg_sq"}) {
      zt::CheckpointParams src(step_dir(), tensor);
      for (int u = 0; u < src.units(); ++u) {
        // The first 4096 elements at most: a meta may promise a huge unit (the reads must refuse it).
        const int64_t n = std::min<int64_t>(src.unit_numel(u), 4096);
        if (n > 0) src.fill(u, 0, zt::Tensor::empty({n}, zt::DType::f32, zt::Category::workspace));
      }
    }
  } catch (const zt::Error&) {
  }
  return 0;
}
