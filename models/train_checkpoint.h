// defines: NamedTensor, SavedCheckpoint, save_checkpoint, load_checkpoint, latest_checkpoint —
//          the training checkpoint directory (single-process form of ARCHITECTURE.md "Formats").
//
//   <dir>/
//     latest                 one line: "step_00000100"; replaced atomically (write, fsync, rename)
//     step_00000100/
//       meta.json            {"format": "zerotensor-checkpoint", "version": 1, "world_size": 1,
//                             "step": 100, ...caller's fields (model, training, rng, data),
//                             "files": [{"name": "rank_00000.bin", "bytes": N, "fnv1a64": "..."}],
//                             "tensors": [{"name", "dtype", "shape", "offset"}...]}
//       rank_00000.bin       the tensors' bytes, back to back, in "tensors" order
//
// A save writes step_<8 digits>.tmp/ first (every file fsynced), renames it into place, fsyncs
// the directory, and only then replaces `latest`: a crash at any point leaves the previous
// checkpoint and its `latest` intact. A load checks the file size and FNV-1a 64 checksum of
// every rank file before reading a byte of it, so a truncated or corrupted file is an error
// naming the file, never a silently different model.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace zt {

struct NamedTensor {
  std::string name;  // "embed/param", "embed/exp_avg", ...
  Tensor tensor;     // any dtype, contiguous or not (written row-major)
};

struct SavedCheckpoint {
  std::string path;  // the step directory
  nlohmann::json meta;
  std::vector<NamedTensor> tensors;  // in file order, each a fresh contiguous tensor
  const Tensor& get(const std::string& name) const;  // throws naming the checkpoint and tensor
};

// Saves into <dir>/step_%08lld (dir created if needed). `meta` holds the caller's fields; the
// format fields above are added. Returns the step directory.
std::string save_checkpoint(const std::string& dir, int64_t step, const nlohmann::json& meta,
                            const std::vector<NamedTensor>& tensors);

// The step directory that <dir>/latest names. Throws if there is none, naming `dir`.
std::string latest_checkpoint(const std::string& dir);

// Loads a step directory (or, given a checkpoint root holding `latest`, the latest step).
SavedCheckpoint load_checkpoint(const std::string& path);

// FNV-1a 64 of a byte range, continuing from `h` (pass the default to start).
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace zt
