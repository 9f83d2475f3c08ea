// defines: save_sharded_checkpoint, load_sharded_checkpoint, read_sharded_meta, units_meta,
//          checkpoint_file_hash — ZeRO sharded checkpoints
//          (docs/architecture.md "Formats", step 7 of "The life of one parameter"; docs/formats.md).
//
//   <dir>/
//     latest                       "step_00000100\n", replaced atomically after all else is durable
//     step_00000100/
//       meta.json                  written by rank 0: {"format": "zerotensor-zero-checkpoint",
//                                  "version": 1, "world_size": N, "step": 100, ...caller fields,
//                                  "units": [{"name", "numel", "padded_numel", "params"?}],
//                                  "tensors": ["param", "exp_avg", "exp_avg_sq"],
//                                  "dtype": {"param": "float32", ...},
//                                  "files": [{"rank": r, "name": "rank_0000r.bin", "bytes", "fnv1a64"}]}
//       rank_0000r.bin             rank r's shards back to back: for each unit in order, for each
//                                  tensor in order, S_u = padded_numel_u / N elements — elements
//                                  [r*S_u, (r+1)*S_u) of that unit's flat space.
//
// So every rank file has the same layout and size: sum over units of S_u * sum(tensor sizes).
// A load with another world size N' (resharding) reads, for rank r', the elements
// [r'*S'_u, (r'+1)*S'_u) of each unit from whichever old files hold them (pread at the right
// offsets); elements >= numel (padding of either layout) are zero. Every file read is first
// verified whole (size and FNV-1a 64) against meta.json.
//
// Crash safety: a save writes step_X.tmp/ completely (every file fsynced), renames it to step_X
// (swapping atomically with an existing step_X), fsyncs the root, then replaces `latest`
// (AtomicFile). kill -9 at any instant leaves the previous checkpoint and `latest` loadable.
// All ranks must see the same directory (one machine, or a shared file system).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "dist/process_group.h"
#include "nn/model.h"
#include "zero/engine.h"

namespace zt {

inline constexpr const char* kShardedCheckpointFormat = "zerotensor-zero-checkpoint";
inline constexpr int kShardedCheckpointVersion = 1;

// The unit layout of a model for meta.json: [{"name", "numel", "padded_numel",
// "params": [{"name", "shape", "offset", "decay", "slice"?}]}] ("slice": {"dim", "groups",
// "parts"} for a tensor-parallel cut, nn/param_set.h's TensorSlice). Pass it as caller_meta["units"] so that
// consolidation can name and shape every parameter.
nlohmann::json units_meta(Model& m);

// Collective (every rank calls, with its own shards in the same unit/tensor order). Writes
// <dir>/step_%08lld and switches <dir>/latest to it; returns the step directory. caller_meta:
// any fields (model, config, training, rng, data position...); the format fields are added, and
// a caller "units" array (same units, same order) contributes each unit's "params". An error on
// any rank throws on every rank (none is left waiting in a collective).
// tensor_parallel_size tp > 1: the model is cut in tp slices (parallel/tensor_parallel.h), g's
// rank d * tp + t holding data shard d of slice t (dist/process_grid.h's order); meta.json records
// "tensor_parallel_size" and each parameter's cut (units_meta), and the load reassembles any
// other cut, or the whole model, from them.
std::string save_sharded_checkpoint(ProcessGroup& g, const std::string& dir, int64_t step,
                                    const nlohmann::json& caller_meta, const std::vector<CheckpointShard>& shards,
                                    int tensor_parallel_size = 1);

// Collective. path: a step directory or a root holding `latest`. Copies this rank's part
// (g.rank() of g.size()) of every tensor of every unit into `shards` (the engine's views: their
// layout for g.size(), tensors must exist in the checkpoint with the same dtype) from a
// checkpoint of any world size. Returns meta.json. Throws zt::Error naming the path, file,
// unit or tensor for: no meta.json, another format or version, a missing or truncated rank file,
// a checksum mismatch, a unit that differs from the model's (another model), a missing tensor.
// A failure on any rank throws on every rank.
// shard / shards: which part of each unit this rank loads (default: g.rank() of g.size()); under
// tensor parallelism its data index and degree, each unit in its own slice's layout
// (CheckpointShard::params), whatever cut the checkpoint was saved with.
nlohmann::json load_sharded_checkpoint(ProcessGroup& g, const std::string& path, std::vector<CheckpointShard>& shards,
                                       int shard = -1, int shards_count = -1);

// The step directory `path` denotes (itself, or what its `latest` names) and its checked
// meta.json (format, version, consistent units/tensors/files). Single process.
struct ShardedMeta {
  std::string dir;      // the step directory
  nlohmann::json meta;
};
ShardedMeta read_sharded_meta(const std::string& path);

// FNV-1a 64 of a whole file, read in chunks; throws naming the file if it cannot be read.
uint64_t checkpoint_file_hash(const std::string& file);

// Keeps the `keep_last` (>= 1) newest step directories of `dir` (by step number) and the one
// `latest` names, and removes the other step_<digits>/ directories; a step_X.tmp/ being written
// is never touched (zt-train --keep-last, HF Trainer's save_total_limit). Single process: rank 0
// after a save (the others never read old steps). Returns the removed directories' names, oldest
// first. Throws naming the directory if one cannot be removed.
std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep_last);

}  // namespace zt
