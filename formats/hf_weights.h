// defines: read_hf_config, load_hf_weights, hf_weights_source, save_hf_weights, is_hf_path,
//          pretrained_config, load_pretrained, pretrained_source — GPT-2 and Llama weights in a
//          Hugging Face directory (config.json + safetensors with HF's parameter names), both
//          ways; and the one entry point for "start from these weights" (HF or llm.c). Layer
//          formats/. Reading: formats/hf_headers.cpp (the headers; config.json held against them)
//          and formats/hf_reader.cpp (streamed, docs/formats.md "Streaming");
//          writing: formats/hf_weights.cpp.
//
// A Hugging Face checkpoint is one of (docs/formats.md "Hugging Face weights"):
//   DIR/config.json + DIR/model.safetensors
//   DIR/config.json + DIR/model.safetensors.index.json ({"weight_map": {name: shard file}}) + shards
//   a path to one .safetensors file or to an .index.json: config.json is read beside it (a
//   GPT-2's or Llama's head count cannot be read from the tensor shapes).
//
// Names (ZeroTensor unit.param -> HF):
//   gpt2   embed.wte.weight (Vp, C)         -> wte.weight (V, C)            first V rows
//          embed.wpe.weight                 -> wpe.weight
//          h.i.<p>                          -> h.i.<p>; the four 2-D block weights (attn.c_attn,
//                                              attn.c_proj, mlp.c_fc, mlp.c_proj) are transposed:
//                                              HF's Conv1D stores (in, out), ZeroTensor (out, in)
//          head.ln_f.{weight,bias}          -> ln_f.{weight,bias}
//   llama  embed.embed_tokens.weight (Vp,C) -> model.embed_tokens.weight (V, C)
//          layers.i.<p>                     -> model.layers.i.<p>   (nn.Linear (out, in): as is)
//          head.norm.weight                 -> model.norm.weight
//          head.lm_head.weight (Vp, C)      -> lm_head.weight (V, C), absent when tied
// RoPE: ZeroTensor's rope() is HF's rotate_half convention (pairs (d, d + D/2)), so q_proj and
// k_proj map unpermuted; Meta's original checkpoints (interleaved pairs (2d, 2d+1)) need the
// permutation of HF's convert_llama_weights_to_hf.py first (tests/test_hf_weights.cpp shows both).
//
// Import also accepts: GPT-2 names with the "transformer." prefix (GPT2LMHeadModel), the
// attention mask buffers h.i.attn.bias / h.i.attn.masked_bias (ignored), lm_head.weight when it
// equals wte (a tied head written out; an lm_head that differs is an error: GPT-2 ties it);
// Llama names without the "model." prefix (LlamaModel), rotary_emb.inv_freq buffers (ignored),
// a tied Llama's lm_head.weight when it equals embed_tokens. Any dtype F32, BF16, F16, F64,
// converted to the model's (F16 and BF16 -> F32 exactly).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/model_config.h"
#include "nn/model.h"
#include "nn/param_source.h"

namespace zt {

// The model config of the checkpoint at `path` (above), from its config.json, returned only once
// the weight files back it: the caller builds (and allocates) this model next, so every size the
// config claims is first held against the safetensors headers, without reading tensor data or
// allocating the model (formats/hf_headers.h: the layers named in the tensors, each width against
// the tensor that carries it, then every tensor's presence, dtype and shape against a layout
// without bytes). Throws naming the file: no config.json, not JSON, an unsupported model_type or
// key (formats/hf_config.h), a malformed weight file, and a claim the files do not hold, naming
// the key, its value and what the files hold ("'config.json' has n_layer = 1000000, but
// 'model.safetensors' holds layers 0..1 (999998 layers missing: 2..999999)").
ModelConfig read_hf_config(const std::string& path);

// Fills every parameter of `model` (a GPT2 or Llama, finalized) from the checkpoint at `path`.
// The model's config must match config.json (a padded vocabulary Vp >= V is fine: rows [V, Vp)
// become zero). Throws zt::Error naming the file and the tensor for every error of
// read_hf_config (config.json against the files, checked first), a missing tensor, an extra
// one that is no parameter and no known buffer, a shape or dtype other than the expected (both
// printed), a shard that holds a tensor the index puts elsewhere, every malformed-file error of
// load_safetensors.
void load_hf_weights(const std::string& path, Model& model);
// The same checkpoint as a ParamSource for `model`'s layout (it may hold no bytes; it must outlive
// the source), streamed: every name, shape, dtype and shard is checked from the headers here, and
// each unit's tensors are read from the file(s) only when that unit is asked for (one unit held;
// a tied lm_head is compared with the embedding when the head unit is read). load_hf_weights is
// this source filling every unit of a model in memory.
std::unique_ptr<UnitReader> hf_weights_source(const std::string& path, Model& model);

// Writes DIR/config.json and the weights (creating DIR), HF's names as above, in
// openai-community/gpt2 style for GPT-2 (no prefix, no mask buffers, no lm_head) and
// LlamaForCausalLM style for Llama; the first V vocabulary rows only; __metadata__
// {"format": "pt"}. dt: f32 or bf16 (round to nearest even). The weights are one
// DIR/model.safetensors when their bytes fit max_shard_bytes, else transformers' sharded layout:
// model-0000k-of-0000n.safetensors, tensors in order, a new shard whenever the next tensor would
// pass max_shard_bytes (a larger tensor alone in its shard), and model.safetensors.index.json
// ({"metadata": {"total_size": bytes}, "weight_map": {tensor: shard}}). Every file is written
// atomically; a previous export's weight files of the other layout are removed after the new
// ones are in place (the reader would prefer a stale model.safetensors).
inline constexpr int64_t kHfMaxShardBytes = 5'000'000'000;  // transformers' max_shard_size "5GB"
void save_hf_weights(const std::string& dir, Model& model, DType dt = DType::f32,
                     int64_t max_shard_bytes = kHfMaxShardBytes);
// The same, with the values of `layout`'s parameters (it may hold no bytes) from `values`, asked
// for one parameter at a time: peak one parameter and its converted copy (zt-ckpt consolidate).
void save_hf_weights(const std::string& dir, Model& layout, ParamSource& values, DType dt,
                     int64_t max_shard_bytes = kHfMaxShardBytes);
// "5GB", "500MB", "2GiB", "100KB", "123456": bytes (decimal KB/MB/GB as transformers' max_shard_size,
// binary KiB/MiB/GiB); `what` names the option in errors.
int64_t parse_shard_size(const std::string& s, const char* what);

// True when `path` is a directory, a .safetensors file or a .index.json (an HF checkpoint);
// false for anything else (an llm.c .bin).
bool is_hf_path(const std::string& path);

// "Start from these weights": an HF checkpoint (is_hf_path) or an llm.c GPT-2 .bin.
ModelConfig pretrained_config(const std::string& path);
void load_pretrained(const std::string& path, Model& model);
// The same weights as a ParamSource (nn/param_source.h) for the ZeRO engine's partitioned
// construction; `model` (a GPT2 or Llama, its layout: it may hold no bytes) must outlive it.
// Streamed (hf_weights_source, llmc_checkpoint_source): the file's headers are checked at once,
// a unit's tensors are read when the unit is asked for, one unit is held at a time; the whole
// file is never in memory (docs/formats.md "Streaming").
std::unique_ptr<ParamSource> pretrained_source(const std::string& path, Model& model);

}  // namespace zt
