// defines: hf_config_from_json, hf_config_to_json — Hugging Face's config.json (GPT2Config,
//          LlamaConfig in transformers) <-> ModelConfig. Layer formats/.
//
//   gpt2:  n_layer, n_embd, n_head, vocab_size, n_positions (or n_ctx), layer_norm_epsilon
//          (default 1e-5), n_inner (null = 4C), activation_function gelu_new | gelu_pytorch_tanh
//          (both the tanh GELU ZeroTensor computes)
//   llama: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//          num_key_value_heads (default num_attention_heads), max_position_embeddings,
//          rms_norm_eps (default 1e-6, LlamaConfig's), rope_theta (default 10000), vocab_size,
//          tie_word_embeddings (default false), hidden_act silu
// Both: padded_vocab_size = vocab_size (HF stores exactly vocab_size embedding rows).
// Anything that would change the function the weights compute and that ZeroTensor does not
// implement is an error naming the key: rope_scaling, attention_bias / mlp_bias true, another
// activation, an untied GPT-2 head, scale_attn_by_inverse_layer_idx, a head_dim other than
// hidden_size / num_attention_heads. Keys that do not change the function (dropout, token ids,
// torch_dtype, initializer_range, use_cache, pretraining_tp, ...) are ignored.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/dtype.h"
#include "models/model_config.h"

namespace zt {

// `where` names the file in errors ("'gpt2/config.json'"). The result is validated.
ModelConfig hf_config_from_json(const nlohmann::json& j, const std::string& where);

// The config.json HF's from_pretrained reads back into the same model (architectures
// GPT2LMHeadModel / LlamaForCausalLM, dropout 0, torch_dtype from `dt`).
nlohmann::ordered_json hf_config_to_json(const ModelConfig& c, DType dt);

}  // namespace zt
