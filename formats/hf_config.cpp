// defines: hf_config_from_json, hf_config_to_json (formats/hf_config.h); file-local: Reader,
//          read_rope_parameters
#include "formats/hf_config.h"

#include <cmath>

#include "core/check.h"

namespace zt {

namespace {

struct Reader {
  const nlohmann::json& j;
  const std::string& where;

  bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }
  int64_t integer(const char* key) const {
    if (!has(key)) ZT_THROW("HF config ", where, ": missing key \"", key, "\"");
    const nlohmann::json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      ZT_THROW("HF config ", where, ": \"", key, "\" must be a positive integer, got ", v.dump());
    return v.get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const nlohmann::json& v = j.at(key);
    if (!v.is_number() || !(v.get<double>() > 0))
      ZT_THROW("HF config ", where, ": \"", key, "\" must be a positive number, got ", v.dump());
    return v.get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_boolean())
      ZT_THROW("HF config ", where, ": \"", key, "\" must be true or false, got ", j.at(key).dump());
    return j.at(key).get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_string())
      ZT_THROW("HF config ", where, ": \"", key, "\" must be a string, got ", j.at(key).dump());
    return j.at(key).get<std::string>();
  }
  // A key whose value ZeroTensor cannot compute: error unless absent / null / equal to `ok`.
  void require(const char* key, bool holds, const std::string& why) const {
    if (has(key) && !holds)
      ZT_THROW("HF config ", where, ": \"", key, "\" = ", j.at(key).dump(), " is not supported: ", why);
  }
};

// transformers 5 writes RoPE as one object, "rope_parameters": {"rope_type", "rope_theta", and the
// type's own keys} (4.x wrote "rope_theta" and "rope_scaling" apart; 5 reads both). Read here
// into c's theta and scaling; where the file also has the 4.x keys they must say the same.
void read_rope_parameters(const nlohmann::json& j, const std::string& where, ModelConfig& c) {
  const nlohmann::json& rp = j.at("rope_parameters");
  const std::string what = "HF config " + where + ": \"rope_parameters\"";
  if (!rp.is_object()) ZT_THROW(what, " must be an object, got ", rp.dump());
  if (!rp.contains("rope_theta") || !rp.at("rope_theta").is_number() || !(rp.at("rope_theta").get<double>() > 0))
    ZT_THROW(what, " needs a positive number \"rope_theta\", got ", rp.dump());
  const double theta = rp.at("rope_theta").get<double>();
  nlohmann::json scaling = rp;
  scaling.erase("rope_theta");
  if (!scaling.contains("rope_type") && !scaling.contains("type")) scaling["rope_type"] = "default";
  const RopeScaling s = rope_scaling_from_json(scaling, what);
  if (j.contains("rope_theta") && !j.at("rope_theta").is_null() && c.rope_theta != theta)
    ZT_THROW("HF config ", where, ": \"rope_theta\" = ", c.rope_theta, " but rope_parameters.rope_theta = ", theta);
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null() && !(c.rope_scaling == s))
    ZT_THROW("HF config ", where, ": \"rope_scaling\" and \"rope_parameters\" describe different RoPE scalings");
  c.rope_theta = theta;
  c.rope_scaling = s;
}

}  // namespace

ModelConfig hf_config_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) ZT_THROW("HF config ", where, ": not a JSON object");
  Reader r{j, where};
  if (!r.has("model_type")) ZT_THROW("HF config ", where, ": missing key \"model_type\" (\"gpt2\" or \"llama\")");
  const std::string type = r.text("model_type", "");
  ModelConfig c;
  if (type == "gpt2") {
    c.family = "gpt2";
    c.n_layer = r.integer("n_layer");
    c.n_embd = r.integer("n_embd");
    c.n_head = c.n_kv_head = r.integer("n_head");
    c.vocab_size = c.padded_vocab_size = r.integer("vocab_size");
    c.max_seq_len = r.has("n_positions") ? r.integer("n_positions") : r.integer("n_ctx");
    c.ffn_hidden = r.integer("n_inner", 4 * c.n_embd);
    c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
    c.tie_embeddings = true;
    const std::string act = r.text("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      ZT_THROW("HF config ", where, ": \"activation_function\" = \"", act,
               "\" is not supported: ZeroTensor's GPT-2 computes the tanh GELU (gelu_new / gelu_pytorch_tanh)");
    r.require("tie_word_embeddings", r.flag("tie_word_embeddings", true), "ZeroTensor's GPT-2 ties lm_head to wte");
    r.require("scale_attn_weights", r.flag("scale_attn_weights", true),
              "attention is always scaled by 1/sqrt(head_dim)");
    r.require("scale_attn_by_inverse_layer_idx", !r.flag("scale_attn_by_inverse_layer_idx", false),
              "attention is not scaled by the layer index");
  } else if (type == "llama") {
    c.family = "llama";
    c.n_layer = r.integer("num_hidden_layers");
    c.n_embd = r.integer("hidden_size");
    c.n_head = r.integer("num_attention_heads");
    c.n_kv_head = r.integer("num_key_value_heads", c.n_head);
    c.vocab_size = c.padded_vocab_size = r.integer("vocab_size");
    c.max_seq_len = r.integer("max_position_embeddings");
    c.ffn_hidden = r.integer("intermediate_size");
    c.norm_eps = r.number("rms_norm_eps", 1e-6);
    c.rope_theta = r.number("rope_theta", 10000.0);
    c.tie_embeddings = r.flag("tie_word_embeddings", false);
    const std::string act = r.text("hidden_act", "silu");
    if (act != "silu")
      ZT_THROW("HF config ", where, ": \"hidden_act\" = \"", act,
               "\" is not supported: ZeroTensor's Llama uses SwiGLU (silu)");
    if (j.contains("rope_scaling")) c.rope_scaling = rope_scaling_from_json(j.at("rope_scaling"), "HF config " + where);
    if (r.has("rope_parameters")) read_rope_parameters(j, where, c);
    r.require("attention_bias", !r.flag("attention_bias", false), "ZeroTensor's Llama has no q/k/v/o biases");
    r.require("mlp_bias", !r.flag("mlp_bias", false), "ZeroTensor's Llama has no MLP biases");
    if (r.has("head_dim") && r.integer("head_dim") * c.n_head != c.n_embd)
      ZT_THROW("HF config ", where, ": \"head_dim\" = ", r.integer("head_dim"), " is not supported: ZeroTensor's ",
               "head dimension is hidden_size / num_attention_heads = ", c.n_embd, " / ", c.n_head);
  } else {
    ZT_THROW("HF config ", where, ": model_type \"", type, "\" is not supported (\"gpt2\" or \"llama\")");
  }
  try {
    c.validate();
  } catch (const Error& e) {
    ZT_THROW("HF config ", where, ": ", e.what());
  }
  return c;
}

nlohmann::ordered_json hf_config_to_json(const ModelConfig& c, DType dt) {
  c.validate();
  const char* torch_dtype = dt == DType::bf16 ? "bfloat16" : dt == DType::f16 ? "float16" : "float32";
  nlohmann::ordered_json j;
  if (c.family == "gpt2") {
    // openai-community/gpt2's keys (its config.json), with the dropout ZeroTensor trained with (none).
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["activation_function"] = "gelu_new";
    j["n_layer"] = c.n_layer;
    j["n_embd"] = c.n_embd;
    j["n_head"] = c.n_head;
    j["n_inner"] = c.ffn_hidden == 4 * c.n_embd ? nlohmann::ordered_json() : nlohmann::ordered_json(c.ffn_hidden);
    j["n_positions"] = c.max_seq_len;
    j["n_ctx"] = c.max_seq_len;
    j["vocab_size"] = c.vocab_size;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["attn_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["resid_pdrop"] = 0.0;
    j["initializer_range"] = 0.02;
    j["scale_attn_weights"] = true;
    j["tie_word_embeddings"] = true;
  } else {
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["hidden_act"] = "silu";
    j["hidden_size"] = c.n_embd;
    j["intermediate_size"] = c.ffn_hidden;
    j["num_hidden_layers"] = c.n_layer;
    j["num_attention_heads"] = c.n_head;
    j["num_key_value_heads"] = c.n_kv_head;
    j["head_dim"] = c.head_dim();
    j["max_position_embeddings"] = c.max_seq_len;
    j["vocab_size"] = c.vocab_size;
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rope_theta;
    j["rope_scaling"] = rope_scaling_to_json(c.rope_scaling);
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["attention_dropout"] = 0.0;
    j["initializer_range"] = 0.02;
    j["tie_word_embeddings"] = c.tie_embeddings;
  }
  j["torch_dtype"] = torch_dtype;
  return j;
}

}  // namespace zt
