// defines: zt::test::RawTensor, write_raw_safetensors, hf_gpt2_raw, hf_llama_raw, small HF model
//          configs and their config.json text — Hugging Face files written byte by byte the way
//          other tools lay them out, independently of formats/safetensors.cpp and formats/hf_weights.cpp
//          (the names, Conv1D transposes and encodings are spelled out here by hand).
#pragma once
#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/gpt2.h"
#include "models/llama.h"

namespace zt::test {

struct RawTensor {
  std::string name, dtype;  // dtype: "F32", "BF16", "F16", or anything (for bad files)
  Shape shape;
  std::vector<char> bytes;
};

inline std::string shape_json(const Shape& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) o += ",";
    o += std::to_string(s[i]);
  }
  return o + "]";
}

// F32 / BF16 / F16 little-endian bytes of `v`. BF16 here truncates (the values the caller
// compares against must be read back with decode()); F16 uses IEEE round to nearest even.
inline std::vector<char> encode(const std::vector<double>& v, const std::string& dt) {
  std::vector<char> b;
  for (double d : v) {
    const float f = static_cast<float>(d);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (dt == "F32") {
      b.insert(b.end(), reinterpret_cast<const char*>(&u), reinterpret_cast<const char*>(&u) + 4);
    } else {
      const uint16_t h = dt == "BF16" ? static_cast<uint16_t>(u >> 16) : f32_to_f16(f);
      b.push_back(static_cast<char>(h & 0xff));
      b.push_back(static_cast<char>(h >> 8));
    }
  }
  return b;
}
inline std::vector<double> decode(const std::vector<char>& b, const std::string& dt) {
  std::vector<double> v;
  const size_t es = dt == "F32" ? 4 : 2;
  for (size_t i = 0; i + es <= b.size(); i += es) {
    if (dt == "F32") {
      float f;
      std::memcpy(&f, b.data() + i, 4);
      v.push_back(f);
    } else {
      uint16_t h;
      std::memcpy(&h, b.data() + i, 2);
      v.push_back(dt == "BF16" ? bf16_to_f32(h) : f16_to_f32(h));
    }
  }
  return v;
}

struct RawLayout {
  std::vector<size_t> data_order;  // tensor indices in data order (empty: header order)
  bool metadata = true;            // {"__metadata__": {"format": "pt"}} first in the header
  bool pad = true;                 // pad the header with spaces to a multiple of 8
};

// Writes `ts` with its header in the given order; returns the header text.
inline std::string write_raw_safetensors(const std::string& path, const std::vector<RawTensor>& ts,
                                         const RawLayout& lay = {}) {
  std::vector<size_t> order = lay.data_order;
  if (order.empty())
    for (size_t i = 0; i < ts.size(); ++i) order.push_back(i);
  std::vector<uint64_t> begin(ts.size());
  uint64_t off = 0;
  for (size_t i : order) {
    begin[i] = off;
    off += ts[i].bytes.size();
  }
  std::string h = "{";
  if (lay.metadata) h += "\"__metadata__\":{\"format\":\"pt\"}";
  for (size_t i = 0; i < ts.size(); ++i) {
    if (h.size() > 1) h += ",";
    h += "\"" + ts[i].name + "\":{\"dtype\":\"" + ts[i].dtype + "\",\"shape\":" + shape_json(ts[i].shape) +
         ",\"data_offsets\":[" + std::to_string(begin[i]) + "," + std::to_string(begin[i] + ts[i].bytes.size()) + "]}";
  }
  h += "}";
  if (lay.pad) h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (size_t i : order) f.write(ts[i].bytes.data(), static_cast<std::streamsize>(ts[i].bytes.size()));
  return h;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Values of parameter `name` of unit `u`, row-major; rows < 0: all rows, else the first `rows`;
// transpose: a 2-D (out, in) matrix written as (in, out) (HF's Conv1D).
inline std::vector<double> values(Unit& u, const std::string& name, int64_t rows = -1, bool transpose = false) {
  const int i = u.params().find(name);
  if (i < 0) throw std::runtime_error("test: no parameter " + name);
  Tensor t = u.params().value(i);
  if (rows >= 0) t = t.slice(0, 0, rows);
  std::vector<double> v = t.contiguous().to_vector();
  if (!transpose) return v;
  const int64_t R = t.size(0), C = t.size(1);
  std::vector<double> o(v.size());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) o[c * R + r] = v[r * C + c];
  return o;
}

// The tensors openai-community/gpt2's model.safetensors holds for `m`, under `prefix`
// ("" or "transformer."), in dtype `dt`; with_buffers adds h.i.attn.bias (1, 1, T, T) lower
// triangular ones and h.i.attn.masked_bias () = -1e4 as older transformers wrote them.
inline std::vector<RawTensor> hf_gpt2_raw(GPT2& m, const std::string& dt, const std::string& prefix = "",
                                          bool with_buffers = false) {
  const ModelConfig& c = m.config();
  std::vector<RawTensor> out;
  auto add = [&](const std::string& name, Shape shape, std::vector<double> v) {
    out.push_back({prefix + name, dt, shape, encode(v, dt)});
  };
  add("wte.weight", {c.vocab_size, c.n_embd}, values(m.embed(), "wte.weight", c.vocab_size));
  add("wpe.weight", {c.max_seq_len, c.n_embd}, values(m.embed(), "wpe.weight"));
  const int64_t C = c.n_embd, F = c.ffn_hidden, T = c.max_seq_len;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Unit& b = m.block(l);
    const std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {C}, values(b, "ln_1.weight"));
    add(h + "ln_1.bias", {C}, values(b, "ln_1.bias"));
    add(h + "attn.c_attn.weight", {C, 3 * C}, values(b, "attn.c_attn.weight", -1, true));
    add(h + "attn.c_attn.bias", {3 * C}, values(b, "attn.c_attn.bias"));
    add(h + "attn.c_proj.weight", {C, C}, values(b, "attn.c_proj.weight", -1, true));
    add(h + "attn.c_proj.bias", {C}, values(b, "attn.c_proj.bias"));
    add(h + "ln_2.weight", {C}, values(b, "ln_2.weight"));
    add(h + "ln_2.bias", {C}, values(b, "ln_2.bias"));
    add(h + "mlp.c_fc.weight", {C, F}, values(b, "mlp.c_fc.weight", -1, true));
    add(h + "mlp.c_fc.bias", {F}, values(b, "mlp.c_fc.bias"));
    add(h + "mlp.c_proj.weight", {F, C}, values(b, "mlp.c_proj.weight", -1, true));
    add(h + "mlp.c_proj.bias", {C}, values(b, "mlp.c_proj.bias"));
    if (with_buffers) {
      std::vector<double> mask(static_cast<size_t>(T * T));
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j <= i; ++j) mask[i * T + j] = 1.0;
      out.push_back({prefix + h + "attn.bias", "F32", {1, 1, T, T}, encode(mask, "F32")});
      out.push_back({prefix + h + "attn.masked_bias", "F32", {}, encode({-1e4}, "F32")});
    }
  }
  add("ln_f.weight", {C}, values(m.head(), "ln_f.weight"));
  add("ln_f.bias", {C}, values(m.head(), "ln_f.bias"));
  return out;
}

// LlamaForCausalLM's tensors for `m` (lm_head.weight only when untied).
inline std::vector<RawTensor> hf_llama_raw(Llama& m, const std::string& dt) {
  const ModelConfig& c = m.config();
  std::vector<RawTensor> out;
  auto add = [&](const std::string& name, Shape shape, std::vector<double> v) {
    out.push_back({name, dt, shape, encode(v, dt)});
  };
  const int64_t C = c.n_embd, F = c.ffn_hidden, kv = c.n_kv_head * c.head_dim();
  add("model.embed_tokens.weight", {c.vocab_size, C}, values(m.embed(), "embed_tokens.weight", c.vocab_size));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Unit& b = m.block(l);
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {C}, values(b, "input_layernorm.weight"));
    add(p + "self_attn.q_proj.weight", {C, C}, values(b, "self_attn.q_proj.weight"));
    add(p + "self_attn.k_proj.weight", {kv, C}, values(b, "self_attn.k_proj.weight"));
    add(p + "self_attn.v_proj.weight", {kv, C}, values(b, "self_attn.v_proj.weight"));
    add(p + "self_attn.o_proj.weight", {C, C}, values(b, "self_attn.o_proj.weight"));
    add(p + "post_attention_layernorm.weight", {C}, values(b, "post_attention_layernorm.weight"));
    add(p + "mlp.gate_proj.weight", {F, C}, values(b, "mlp.gate_proj.weight"));
    add(p + "mlp.up_proj.weight", {F, C}, values(b, "mlp.up_proj.weight"));
    add(p + "mlp.down_proj.weight", {C, F}, values(b, "mlp.down_proj.weight"));
  }
  add("model.norm.weight", {C}, values(m.head(), "norm.weight"));
  if (!c.tie_embeddings) add("lm_head.weight", {c.vocab_size, C}, values(m.head(), "lm_head.weight", c.vocab_size));
  return out;
}

inline ModelConfig small_hf_gpt2() {
  ModelConfig c = model_config("gpt2-nano");
  c.n_layer = 2, c.n_embd = 16, c.n_head = c.n_kv_head = 2, c.ffn_hidden = 64;
  c.max_seq_len = 12, c.vocab_size = 50, c.padded_vocab_size = 64;
  return c;
}
inline ModelConfig small_hf_llama(bool tied) {
  ModelConfig c = model_config("llama-nano");
  c.n_layer = 2, c.n_embd = 16, c.n_head = 4, c.n_kv_head = 2, c.ffn_hidden = 40;
  c.max_seq_len = 12, c.vocab_size = 50, c.padded_vocab_size = 56;
  c.norm_eps = 1e-6, c.rope_theta = 500.0, c.tie_embeddings = tied;
  return c;
}

// config.json as transformers writes it (a subset of the keys, in its style).
inline std::string gpt2_config_json(const ModelConfig& c) {
  return "{\n  \"activation_function\": \"gelu_new\",\n  \"architectures\": [\"GPT2LMHeadModel\"],\n"
         "  \"attn_pdrop\": 0.1,\n  \"bos_token_id\": 50256,\n  \"embd_pdrop\": 0.1,\n"
         "  \"layer_norm_epsilon\": 1e-05,\n  \"model_type\": \"gpt2\",\n  \"n_ctx\": " +
         std::to_string(c.max_seq_len) + ",\n  \"n_embd\": " + std::to_string(c.n_embd) +
         ",\n  \"n_head\": " + std::to_string(c.n_head) +
         ",\n  \"n_inner\": null,\n  \"n_layer\": " + std::to_string(c.n_layer) +
         ",\n  \"n_positions\": " + std::to_string(c.max_seq_len) +
         ",\n  \"task_specific_params\": {\"text-generation\": {\"do_sample\": true}},\n  \"vocab_size\": " +
         std::to_string(c.vocab_size) + "\n}\n";
}
inline std::string llama_config_json(const ModelConfig& c, const std::string& extra = "") {
  return "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_act\": \"silu\", " + extra +
         "\"hidden_size\": " + std::to_string(c.n_embd) + ", \"intermediate_size\": " + std::to_string(c.ffn_hidden) +
         ", \"num_hidden_layers\": " + std::to_string(c.n_layer) +
         ", \"num_attention_heads\": " + std::to_string(c.n_head) +
         ", \"num_key_value_heads\": " + std::to_string(c.n_kv_head) +
         ", \"max_position_embeddings\": " + std::to_string(c.max_seq_len) + ", \"rms_norm_eps\": 1e-06" +
         ", \"rope_theta\": " + std::to_string(c.rope_theta) +
         ", \"rope_scaling\": null, \"vocab_size\": " + std::to_string(c.vocab_size) +
         ", \"tie_word_embeddings\": " + (c.tie_embeddings ? "true" : "false") +
         ", \"torch_dtype\": \"bfloat16\", \"pretraining_tp\": 1, \"use_cache\": true}";
}

}  // namespace zt::test
