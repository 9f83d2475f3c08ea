// defines: ConsolidateResult, consolidate_checkpoint — a ZeRO sharded checkpoint (zero/checkpoint.h)
//          written as one file, streamed (zt-ckpt consolidate; docs/formats.md "Streaming").
//
// Formats: "safetensors" (names "<unit>.<param>", the layout's shapes), "llmc" (llm.c's GPT-2
// file, version 3 fp32 / 5 bf16), "hf" (a Hugging Face directory, formats/hf_weights.h). The
// output's header is known from the layout before any data, so it is written first; then each
// parameter is read from every rank file that holds a piece of it (zero/checkpoint_source.h),
// converted, written and freed. Peak: one parameter (float32) and its converted copy; the model
// (and even one whole unit list) is never in memory. Writes are atomic (core/file_io.h).
#pragma once
#include <string>

#include "core/dtype.h"
#include "formats/hf_weights.h"  // defines: kHfMaxShardBytes

namespace zt {

struct ConsolidateResult {
  std::string dir;     // the step directory read
  int64_t params = 0;  // parameters written
  int units = 0;
  int world_size = 0;  // of the checkpoint
};

// path: a checkpoint root (its `latest`) or a step directory; dt: f32 or bf16. Throws zt::Error
// naming the checkpoint: a format that needs the model config ("llmc", "hf") when meta.json
// records none, llmc of a non-GPT-2 model, units that differ from the config's, a parameter
// outside its unit, and every error of reading the rank files (missing, truncated, corrupted).
// max_shard_bytes: "hf" only, the largest weight file (formats/hf_weights.h: sharded past it).
ConsolidateResult consolidate_checkpoint(const std::string& path, const std::string& out, const std::string& format,
                                         DType dt = DType::f32, int64_t max_shard_bytes = kHfMaxShardBytes);

}  // namespace zt
