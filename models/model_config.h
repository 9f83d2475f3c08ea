// defines: ModelConfig (the shape of a GPT-2 or Llama model), model_config (named configs),
//          model_config_names, to_json / from_json (nlohmann), default_ffn_hidden, ModelOptions,
//          rope_scaling_error, rope_scaling_to_json, rope_scaling_from_json.
//
// One struct describes both families:
//   gpt2:  learned positions (wpe), LayerNorm, fused c_attn with biases, GELU MLP (hidden 4C),
//          lm_head tied to wte, vocabulary padded (llm.c pads 50257 -> 50304, a multiple of 128).
//   llama: RoPE, RMSNorm, q/k/v/o without biases, grouped-query attention (n_kv_head), SwiGLU
//          MLP (hidden ffn_hidden), untied lm_head (or tied when tie_embeddings).
// Logits span the padded vocabulary; columns [vocab_size, padded_vocab_size) are ignored by
// the loss and never sampled.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"
#include "core/rope.h"  // RopeScaling, RopeParams

namespace zt {

class ProcessGroup;

struct ModelConfig {
  std::string family = "gpt2";  // "gpt2" | "llama"
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;  // == n_head for GPT-2; a divisor of n_head for Llama (GQA)
  int64_t vocab_size = 0;
  int64_t padded_vocab_size = 0;  // >= vocab_size; rows of wte / lm_head
  int64_t max_seq_len = 0;
  int64_t ffn_hidden = 0;  // MLP hidden width (GPT-2: 4C)
  double rope_theta = 10000.0;  // Llama only
  RopeScaling rope_scaling;     // Llama only: none, or Llama 3's (a Hugging Face "rope_scaling")
  double norm_eps = 1e-5;
  bool tie_embeddings = true;  // GPT-2: always

  int64_t head_dim() const { return n_head > 0 ? n_embd / n_head : 0; }
  RopeParams rope() const { return {rope_theta, rope_scaling}; }
  // Throws zt::Error naming the first field that is impossible and why.
  void validate() const;
  // The exact parameter count of the model this config builds (no flat-buffer padding),
  // from the formula in model_config.cpp; checked against the built models in tests/test_models.cpp.
  int64_t num_params() const;
  bool operator==(const ModelConfig&) const = default;
};

// What is wrong with a Llama 3 scaling (factor >= 1, 0 < low_freq_factor < high_freq_factor,
// original_max_position >= 1), or "" when it is usable (type none always is).
std::string rope_scaling_error(const RopeScaling& s);
// A Hugging Face config's "rope_scaling": null for none, else {"rope_type": "llama3", "factor",
// "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}. The reader takes
// the older key "type" too, "default" as none, and refuses the types not built ("linear",
// "dynamic", "yarn", "longrope", ...) by name; `where` starts its errors.
nlohmann::ordered_json rope_scaling_to_json(const RopeScaling& s);
RopeScaling rope_scaling_from_json(const nlohmann::json& j, const std::string& where);

// How a model's units are built (not part of its shape).
struct ModelOptions {
  DType dtype = DType::f32;   // parameter dtype: f32, f64 for gradient checks, bf16 (bf16 compute)
  int64_t world_size = 1;     // each unit's flat buffer is padded to a multiple of
  int64_t alignment = 1;      //   world_size * alignment (ParamSet::finalize; ZeRO passes these)
  // false: layout only — names, shapes and counts, no flat buffers (the estimator's view of a
  // model too big to allocate). Such a model cannot run forward or be initialized.
  bool allocate = true;
  // false (with allocate): the flat buffers are laid out but hold no bytes (ZeRO's partitioned
  // construction, DeepSpeed's zero.Init): the engine creates only what this rank's stage keeps,
  // filled from a ParamSource (nn/param_source.h) such as models/init.h's ModelInit. Such a
  // model runs only inside an engine.
  bool materialize = true;
  // The group each block is split over (Megatron's tensor parallelism, parallel/tensor_parallel.h):
  // every unit then holds this rank's slice of the blocks' weights (ParamInfo::slice). Null: whole.
  ProcessGroup* tensor_parallel = nullptr;
  // Megatron's sequence parallelism over that group (parallel/tensor_parallel.h): between the
  // sub-layers each rank holds T / tp of every sequence's tokens. Needs a tensor group of 2 or more.
  bool megatron_sequence_parallel = false;
  // The group each sequence is split over (Ulysses, parallel/sequence_parallel.h): the model then
  // takes this rank's T / P tokens of every sequence, and attention exchanges them for heads.
  ProcessGroup* sequence_parallel = nullptr;
};

// The MLP width a family uses when a config does not give one: GPT-2 4C; Llama
// 256 * ceil((8C/3) / 256) (Llama's multiple_of rule), e.g. C = 768 -> 2048.
int64_t default_ffn_hidden(const std::string& family, int64_t n_embd);

// Named configs (validated). Throws zt::Error listing the known names for an unknown one. A name
// ending in ".json" is a model config file instead: read with from_json below (errors name the
// file and the key), e.g. configs/models/llama3-8b.json.
//   gpt2-nano   2 layers,  32 wide,  4 heads, context   64, vocab   256 (tests)
//   gpt-micro   4 layers, 256 wide,  4 heads, context  128, vocab   256 (the demo)
//   gpt-mini    6 layers, 384 wide,  6 heads, context  256, vocab   256 (nanoGPT shakespeare-char shape)
//   gpt2-124m  12 layers, 768 wide, 12 heads, context 1024, vocab 50257 padded to 50304
//   llama-nano  2 layers,  32 wide,  4 heads, 2 kv heads, SwiGLU 96, context 64, vocab 256 (tests)
//   llama-100m  8 layers, 768 wide, 12 heads, 4 kv heads, SwiGLU 2048, context 1024, vocab 32000
ModelConfig model_config(const std::string& name);
std::vector<std::string> model_config_names();

// JSON: every field by name. from_json requires family, n_layer, n_embd, n_head, vocab_size and
// max_seq_len; the others default to the family's (n_kv_head = n_head, padded_vocab_size =
// vocab_size, ffn_hidden = default_ffn_hidden, tie_embeddings = family == "gpt2"). An unknown key
// or a wrong type is an error naming the key. The result is validated.
void to_json(nlohmann::json& j, const ModelConfig& c);
void from_json(const nlohmann::json& j, ModelConfig& c);

}  // namespace zt
