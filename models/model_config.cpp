// defines: default_ffn_hidden, ModelConfig (validate, num_params), model_config_names, model_config,
//          to_json, from_json, rope_scaling_error, rope_scaling_to_json, rope_scaling_from_json
//          (models/model_config.h); file-local: gpt2_shape, llama_shape, llama3_shape, Named, named_configs
#include "models/model_config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <initializer_list>
#include <sstream>

#include "core/check.h"
#include "core/checked.h"  // defines: checked_mul, checked_add
#include "core/json.h"     // defines: read_json_file

namespace zt {

int64_t default_ffn_hidden(const std::string& family, int64_t n_embd) {
  if (family == "llama") {
    const int64_t h = 8 * n_embd / 3;  // Llama: int(2 * 4C / 3), rounded up to a multiple of 256
    return (h + 255) / 256 * 256;
  }
  return 4 * n_embd;
}

void ModelConfig::validate() const {
  auto positive = [](const char* key, int64_t v) {
    if (v <= 0) ZT_THROW("model config: ", key, " must be > 0, got ", v);
  };
  if (family != "gpt2" && family != "llama")
    ZT_THROW("model config: family must be \"gpt2\" or \"llama\", got \"", family, "\"");
  positive("n_layer", n_layer);
  positive("n_embd", n_embd);
  positive("n_head", n_head);
  positive("n_kv_head", n_kv_head);
  positive("vocab_size", vocab_size);
  positive("padded_vocab_size", padded_vocab_size);
  positive("max_seq_len", max_seq_len);
  positive("ffn_hidden", ffn_hidden);
  if (n_embd % n_head != 0)
    ZT_THROW("model config: n_embd ", n_embd, " is not divisible by n_head ", n_head);
  if (n_head % n_kv_head != 0)
    ZT_THROW("model config: n_head ", n_head, " is not a multiple of n_kv_head ", n_kv_head);
  if (padded_vocab_size < vocab_size)
    ZT_THROW("model config: padded_vocab_size ", padded_vocab_size, " is smaller than vocab_size ", vocab_size);
  if (!(norm_eps > 0)) ZT_THROW("model config: norm_eps must be > 0, got ", norm_eps);
  if (family == "gpt2") {
    if (n_kv_head != n_head)
      ZT_THROW("model config: gpt2 has no grouped-query attention: n_kv_head ", n_kv_head, " must equal n_head ",
               n_head);
    if (!tie_embeddings) ZT_THROW("model config: gpt2 ties lm_head to wte: tie_embeddings must be true");
    if (!(rope_scaling == RopeScaling{}))
      ZT_THROW("model config: gpt2 has learned positions, no RoPE: rope_scaling must be none");
  } else {
    if (head_dim() % 2 != 0)
      ZT_THROW("model config: RoPE needs an even head dimension, got n_embd / n_head = ", n_embd, " / ", n_head,
               " = ", head_dim());
    if (!(rope_theta > 0)) ZT_THROW("model config: rope_theta must be > 0, got ", rope_theta);
    if (const std::string e = rope_scaling_error(rope_scaling); !e.empty()) ZT_THROW("model config: rope_scaling: ", e);
  }
}

int64_t ModelConfig::num_params() const {
  const int64_t C = n_embd, F = ffn_hidden, L = n_layer, Vp = padded_vocab_size;
  // Checked (core/checked.h): the dimensions may come from a file header, and a product that
  // wraps must fail here rather than size an allocation or a file check.
  const char* what = "model config: the parameter count";
  auto mul = [&](int64_t a, int64_t b) { return checked_mul(a, b, what); };
  auto add = [&](std::initializer_list<int64_t> xs) {
    int64_t s = 0;
    for (int64_t x : xs) s = checked_add(s, x, what);
    return s;
  };
  if (family == "gpt2") {
    // wte + wpe; per block: ln_1, c_attn (3C, C) + 3C, c_proj (C, C) + C, ln_2, c_fc (F, C) + F,
    // c_proj (C, F) + C; ln_f. With F = 4C a block is 12C^2 + 13C.
    const int64_t CC = mul(C, C), FC = mul(F, C);
    const int64_t block = add({mul(2, C), mul(3, CC), mul(3, C), CC, C, mul(2, C), FC, F, FC, C});
    return add({mul(Vp, C), mul(max_seq_len, C), mul(L, block), mul(2, C)});
  }
  // embed_tokens; per layer: two RMSNorm gains, q (C, C), k and v (kv, C), o (C, C), gate/up (F, C),
  // down (C, F); final norm; lm_head (Vp, C) unless tied.
  const int64_t kv = mul(n_kv_head, head_dim());
  const int64_t layer = add({mul(2, C), mul(2, mul(C, C)), mul(2, mul(kv, C)), mul(3, mul(C, F))});
  return add({mul(Vp, C), mul(L, layer), C, tie_embeddings ? 0 : mul(Vp, C)});
}

namespace {

ModelConfig gpt2_shape(int64_t L, int64_t C, int64_t H, int64_t T, int64_t V, int64_t Vp) {
  ModelConfig c;
  c.family = "gpt2";
  c.n_layer = L;
  c.n_embd = C;
  c.n_head = c.n_kv_head = H;
  c.max_seq_len = T;
  c.vocab_size = V;
  c.padded_vocab_size = Vp;
  c.ffn_hidden = 4 * C;
  c.tie_embeddings = true;
  return c;
}

ModelConfig llama_shape(int64_t L, int64_t C, int64_t H, int64_t Hkv, int64_t F, int64_t T, int64_t V) {
  ModelConfig c;
  c.family = "llama";
  c.n_layer = L;
  c.n_embd = C;
  c.n_head = H;
  c.n_kv_head = Hkv;
  c.ffn_hidden = F;
  c.max_seq_len = T;
  c.vocab_size = c.padded_vocab_size = V;
  c.rope_theta = 10000.0;
  c.norm_eps = 1e-5;
  c.tie_embeddings = false;
  return c;
}

// Llama 3.x: rope_theta 500000 with Llama 3's scaling (factor 32, low 1, high 4, original 8192
// positions), tied embeddings (the 1B and 3B), RMSNorm eps 1e-5.
ModelConfig llama3_shape(int64_t L, int64_t C, int64_t H, int64_t Hkv, int64_t F, int64_t T, int64_t V) {
  ModelConfig c = llama_shape(L, C, H, Hkv, F, T, V);
  c.rope_theta = 500000.0;
  c.rope_scaling = RopeScaling{.type = RopeScaling::Type::llama3,
                               .factor = 32.0,
                               .low_freq_factor = 1.0,
                               .high_freq_factor = 4.0,
                               .original_max_position = 8192};
  c.tie_embeddings = true;
  return c;
}

struct Named {
  const char* name;
  ModelConfig cfg;
};

const std::vector<Named>& named_configs() {
  static const std::vector<Named> v = {
      {"gpt2-nano", gpt2_shape(2, 32, 4, 64, 256, 256)},
      // The demo's model: small enough to learn the bundled corpus in minutes on 2 cores.
      {"gpt-micro", gpt2_shape(4, 256, 4, 128, 256, 256)},
      // nanoGPT's config/train_shakespeare_char.py shape: 10,844,160 parameters (with wpe).
      {"gpt-mini", gpt2_shape(6, 384, 6, 256, 256, 256)},
      // GPT-2 small as llm.c builds it: 124,475,904 parameters with the padded vocab
      // (124,439,808 in Hugging Face's unpadded count).
      {"gpt2-124m", gpt2_shape(12, 768, 12, 1024, 50257, 50304)},
      {"llama-nano", llama_shape(2, 32, 4, 2, 96, 64, 256)},  // SwiGLU 96 = 8C/3 rounded up to 32
      // gpt-mini's Llama twin for CPU speed (bench/train_step.sh): 6 layers, 384 wide, 6 heads over
      // 2 KV heads, SwiGLU 1024 (8C/3 rounded up to 256), T 256, byte vocab.
      {"llama-mini", llama_shape(6, 384, 6, 2, 1024, 256, 256)},
      // 99,496,704 parameters = embed 24,576,000 + 8 layers x 6,292,992 + norm 768 + lm_head
      // 24,576,000. (12 layers of this width would be 124,668,672: half of a 768-wide model
      // with an untied 32000 vocabulary is its two embedding matrices.)
      {"llama-100m", llama_shape(8, 768, 12, 4, 2048, 1024, 32000)},
      // meta-llama/Llama-3.2-1B's config.json: 1,235,814,400 parameters = embed 262,668,288
      // (tied to lm_head) + 16 layers x 60,821,504 + norm 2,048.
      {"llama3.2-1b", llama3_shape(16, 2048, 32, 8, 8192, 131072, 128256)},
  };
  return v;
}

}  // namespace

std::vector<std::string> model_config_names() {
  std::vector<std::string> names;
  for (const Named& n : named_configs()) names.push_back(n.name);
  return names;
}

ModelConfig model_config(const std::string& name) {
  // A path to a model config file: every key as from_json reads it (configs/models/ has a few).
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
    const nlohmann::json j = read_json_file(name, "model config '" + name + "'");
    try {
      return j.get<ModelConfig>();
    } catch (const Error& e) {
      ZT_THROW("model config '", name, "': ", e.what());
    }
  }
  std::string known;
  for (const Named& n : named_configs()) {
    if (name == n.name) {
      n.cfg.validate();
      return n.cfg;
    }
    known += (known.empty() ? "" : ", ") + std::string(n.name);
  }
  ZT_THROW("unknown model name \"", name, "\"; known models: ", known, ", or a model config file (*.json)");
}

void to_json(nlohmann::json& j, const ModelConfig& c) {
  j = nlohmann::json{{"family", c.family},
                     {"n_layer", c.n_layer},
                     {"n_embd", c.n_embd},
                     {"n_head", c.n_head},
                     {"n_kv_head", c.n_kv_head},
                     {"vocab_size", c.vocab_size},
                     {"padded_vocab_size", c.padded_vocab_size},
                     {"max_seq_len", c.max_seq_len},
                     {"ffn_hidden", c.ffn_hidden},
                     {"rope_theta", c.rope_theta},
                     {"rope_scaling", rope_scaling_to_json(c.rope_scaling)},
                     {"norm_eps", c.norm_eps},
                     {"tie_embeddings", c.tie_embeddings}};
}

void from_json(const nlohmann::json& j, ModelConfig& out) {
  if (!j.is_object()) ZT_THROW("model config: expected a JSON object, got ", j.type_name());
  static const char* const kKeys[] = {"family",     "n_layer",           "n_embd",      "n_head",
                                      "n_kv_head",  "vocab_size",        "padded_vocab_size",
                                      "max_seq_len", "ffn_hidden",       "rope_theta",  "norm_eps",
                                      "tie_embeddings", "rope_scaling"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : kKeys) known = known || it.key() == k;
    if (!known) {
      std::string list;
      for (const char* k : kKeys) list += (list.empty() ? "" : ", ") + std::string(k);
      ZT_THROW("model config: unknown key \"", it.key(), "\" (known keys: ", list, ")");
    }
  }
  auto get_int = [&](const char* key, bool required, int64_t def) -> int64_t {
    if (!j.contains(key)) {
      if (required) ZT_THROW("model config: missing required key \"", key, "\"");
      return def;
    }
    const nlohmann::json& v = j.at(key);
    if (!v.is_number_integer()) ZT_THROW("model config: \"", key, "\" must be an integer, got ", v.dump());
    return v.get<int64_t>();
  };
  auto get_num = [&](const char* key, double def) -> double {
    if (!j.contains(key)) return def;
    const nlohmann::json& v = j.at(key);
    if (!v.is_number()) ZT_THROW("model config: \"", key, "\" must be a number, got ", v.dump());
    return v.get<double>();
  };
  ModelConfig c;
  if (!j.contains("family")) ZT_THROW("model config: missing required key \"family\"");
  if (!j.at("family").is_string())
    ZT_THROW("model config: \"family\" must be a string, got ", j.at("family").dump());
  c.family = j.at("family").get<std::string>();
  c.n_layer = get_int("n_layer", true, 0);
  c.n_embd = get_int("n_embd", true, 0);
  c.n_head = get_int("n_head", true, 0);
  c.vocab_size = get_int("vocab_size", true, 0);
  c.max_seq_len = get_int("max_seq_len", true, 0);
  c.n_kv_head = get_int("n_kv_head", false, c.n_head);
  c.padded_vocab_size = get_int("padded_vocab_size", false, c.vocab_size);
  c.ffn_hidden = get_int("ffn_hidden", false, default_ffn_hidden(c.family, c.n_embd));
  c.rope_theta = get_num("rope_theta", 10000.0);
  if (j.contains("rope_scaling")) c.rope_scaling = rope_scaling_from_json(j.at("rope_scaling"), "model config");
  c.norm_eps = get_num("norm_eps", 1e-5);
  c.tie_embeddings = c.family == "gpt2";
  if (j.contains("tie_embeddings")) {
    if (!j.at("tie_embeddings").is_boolean())
      ZT_THROW("model config: \"tie_embeddings\" must be true or false, got ", j.at("tie_embeddings").dump());
    c.tie_embeddings = j.at("tie_embeddings").get<bool>();
  }
  c.validate();
  out = c;
}

// ---- rope_scaling ----

std::string rope_scaling_error(const RopeScaling& s) {
  if (s.type == RopeScaling::Type::none) return "";
  std::ostringstream o;
  if (!(s.factor >= 1.0) || !std::isfinite(s.factor)) o << "factor " << s.factor << " must be a finite number >= 1";
  else if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) || !std::isfinite(s.high_freq_factor))
    o << "low_freq_factor " << s.low_freq_factor << " and high_freq_factor " << s.high_freq_factor
      << " must satisfy 0 < low_freq_factor < high_freq_factor";
  else if (s.original_max_position < 1)
    o << "original_max_position_embeddings " << s.original_max_position << " must be >= 1";
  return o.str();
}

nlohmann::ordered_json rope_scaling_to_json(const RopeScaling& s) {
  if (s.type == RopeScaling::Type::none) return nullptr;
  nlohmann::ordered_json j;
  j["rope_type"] = "llama3";
  j["factor"] = s.factor;
  j["low_freq_factor"] = s.low_freq_factor;
  j["high_freq_factor"] = s.high_freq_factor;
  j["original_max_position_embeddings"] = s.original_max_position;
  return j;
}

RopeScaling rope_scaling_from_json(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return {};
  if (!j.is_object()) ZT_THROW(where, ": \"rope_scaling\" must be null or an object, got ", j.dump());
  const char* type_key = j.contains("rope_type") ? "rope_type" : "type";
  if (!j.contains(type_key) || !j.at(type_key).is_string())
    ZT_THROW(where, ": \"rope_scaling\" ", j.dump(), " has no string \"rope_type\"");
  const std::string type = j.at(type_key).get<std::string>();
  if (type == "default") return {};
  if (type != "llama3")
    ZT_THROW(where, ": rope_scaling.", type_key, " \"", type,
             "\" is not supported (ZeroTensor builds \"llama3\"; linear, dynamic, yarn, longrope and the others are "
             "not built yet)");
  auto num = [&](const char* key) {
    if (!j.contains(key) || !j.at(key).is_number())
      ZT_THROW(where, ": rope_scaling (llama3) needs a number \"", key, "\", got ",
               j.contains(key) ? j.at(key).dump() : std::string("nothing"));
    return j.at(key).get<double>();
  };
  RopeScaling s{.type = RopeScaling::Type::llama3,
                .factor = num("factor"),
                .low_freq_factor = num("low_freq_factor"),
                .high_freq_factor = num("high_freq_factor"),
                .original_max_position = 0};
  const double L = num("original_max_position_embeddings");
  if (L != std::floor(L) || L < 1 || L > 1e15)
    ZT_THROW(where, ": rope_scaling.original_max_position_embeddings ", L, " must be a positive integer");
  s.original_max_position = static_cast<int64_t>(L);
  if (const std::string e = rope_scaling_error(s); !e.empty()) ZT_THROW(where, ": rope_scaling: ", e);
  for (auto it = j.begin(); it != j.end(); ++it) {
    static const char* const kKnown[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                         "original_max_position_embeddings"};
    bool known = false;
    for (const char* k : kKnown) known = known || it.key() == k;
    if (!known)
      ZT_THROW(where, ": rope_scaling (llama3) key \"", it.key(), "\" is not supported (would change the frequencies "
               "in a way ZeroTensor does not compute)");
  }
  return s;
}

}  // namespace zt
