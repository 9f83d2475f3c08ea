// defines: read_llmc_header, load_llmc_checkpoint, save_llmc_checkpoint — llm.c's GPT-2
//          checkpoint format (train_gpt2.c gpt2_build_from_checkpoint / write_checkpoint), both ways.
//          Layer formats/.
//
// File layout (little-endian):
//   header: 256 x int32: [0] magic 20240326, [1] version (3 = float32, 5 = bfloat16),
//           [2] max_seq_len, [3] vocab_size, [4] n_layer, [5] n_head, [6] n_embd,
//           [7] padded_vocab_size, the rest 0
//   then the 16 parameter tensors in this order, each (L, ...) one layer-major:
//     wte (Vp, C), wpe (maxT, C), ln1w (L, C), ln1b (L, C), qkvw (L, 3C, C), qkvb (L, 3C),
//     attprojw (L, C, C), attprojb (L, C), ln2w (L, C), ln2b (L, C), fcw (L, 4C, C),
//     fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw (C), lnfb (C)
//   file size = 1024 + num_params * (4 or 2) bytes, num_params = Vp C + maxT C + L (12C^2 + 13C) + 2C.
// Weights are PyTorch nn.Linear's (out, in), as GPT2's ParamSets hold them, so each tensor maps
// to one parameter of one unit (qkvw of layer l -> "h.l" attn.c_attn.weight, ...).
#pragma once
#include <memory>
#include <string>

#include "models/model_config.h"
#include "models/gpt2.h"
#include "nn/param_source.h"

namespace zt {

inline constexpr int32_t kLlmcCheckpointMagic = 20240326;
inline constexpr int32_t kLlmcVersionF32 = 3;
inline constexpr int32_t kLlmcVersionBF16 = 5;

// The header as a gpt2 ModelConfig (n_kv_head = n_head, ffn_hidden = 4C, tied, norm_eps 1e-5).
// Throws zt::Error naming the file: cannot open, shorter than the 1024-byte header, wrong magic
// (found and expected), unknown version, impossible sizes, or a file size other than the header's
// sizes need (the error names n_layer, n_embd, padded_vocab_size and max_seq_len with their
// values, the bytes expected and found, and the parameters the file has room for). The size is
// checked here, before a caller builds the model the header describes: a header claiming a
// million layers beside a small file is refused in microseconds, without allocating.
ModelConfig read_llmc_header(const std::string& path);
// The header's version field (3 or 5), with the checks of read_llmc_header.
int32_t read_llmc_version(const std::string& path);

// Loads every parameter of `model` from `path` (either version; bfloat16 widens exactly).
// Throws zt::Error naming the file for every read_llmc_header error (the file size against the
// header first) and for a header field that differs from the model's config (naming the field,
// the file's value and the model's).
void load_llmc_checkpoint(const std::string& path, GPT2& model);
// The same checkpoint as a ParamSource for `model`'s layout (it may hold no bytes; it must outlive
// the source), streamed: the header and the file size are checked here, and a unit's tensors are
// read (at their offsets, known from the header) only when the unit is asked for; one unit is
// held at a time. load_llmc_checkpoint is this source filling every unit of a model in memory.
std::unique_ptr<UnitReader> llmc_checkpoint_source(const std::string& path, GPT2& model);

// Writes `model` to `path` as version 3 (float32) or 5 (bfloat16, round to nearest even).
// Atomic: the bytes go to path + ".tmp", which is fsynced and renamed over `path`.
// The model must have ffn_hidden == 4 n_embd (the format has no field for it).
void save_llmc_checkpoint(const std::string& path, GPT2& model, int version = kLlmcVersionF32);
// The same, with the values of `model`'s parameters (its layout: it may hold no bytes) from
// `values`, asked for one parameter at a time in the file's order (zt-ckpt consolidate).
void save_llmc_checkpoint(const std::string& path, GPT2& model, ParamSource& values, int version);

}  // namespace zt
