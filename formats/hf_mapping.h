// defines: hf_detail::{kSingleFile, kIndexFile, config_of, Mapping, mapping} — which Hugging Face tensor each parameter
//          of a GPT2 or Llama is (the table in formats/hf_weights.h), shared by the reader
//          (formats/hf_reader.cpp) and the writer (formats/hf_weights.cpp). Private to them.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "models/gpt2.h"   // defines: GPT2
#include "models/llama.h"  // defines: Llama

namespace zt::hf_detail {

// The weight files of a checkpoint directory: one file, or an index over shards.
inline constexpr const char* kSingleFile = "model.safetensors";
inline constexpr const char* kIndexFile = "model.safetensors.index.json";

inline const ModelConfig& config_of(const Model& m, const char* what) {
  if (auto* g = dynamic_cast<const GPT2*>(&m)) return g->config();
  if (auto* l = dynamic_cast<const Llama*>(&m)) return l->config();
  ZT_THROW(what, ": model of family \"", m.family(), "\" is neither GPT2 nor Llama");
}

// One parameter of the model and its HF tensor.
struct Mapping {
  std::string hf;  // "h.0.attn.c_attn.weight"
  int unit;        // index into Model::units()
  int index;       // into that unit's params()
  bool transpose;  // GPT-2 Conv1D: HF (in, out), ZeroTensor (out, in)
  int64_t rows;    // vocabulary matrices: HF holds the first `rows` (= V) rows; else -1
  Shape hf_shape;  // the shape the HF tensor must have
};

// Every parameter of `m` (its layout: it may hold no bytes), in unit order.
inline std::vector<Mapping> mapping(Model& m, const char* what) {
  const ModelConfig& c = config_of(m, what);
  const bool gpt2 = c.family == "gpt2";
  std::vector<Mapping> out;
  const std::vector<Unit*> units = m.units();
  for (size_t u = 0; u < units.size(); ++u) {
    const ParamSet& ps = units[u]->params();
    const std::string& un = ps.unit_name();  // "embed", "h.3" / "layers.3", "head"
    const bool block = un != "embed" && un != "head";
    for (int i = 0; i < ps.size(); ++i) {
      const ParamInfo& info = ps.infos()[i];
      const std::string& p = info.name;
      Mapping mp{"", static_cast<int>(u), i, false, -1, info.shape};
      if (gpt2) {
        mp.hf = block ? un + "." + p : p;
        mp.transpose = block && info.shape.size() == 2;  // c_attn, attn.c_proj, c_fc, mlp.c_proj
      } else {
        mp.hf = p == "lm_head.weight" ? p : block ? "model." + un + "." + p : "model." + p;
      }
      if (p == "wte.weight" || p == "embed_tokens.weight" || p == "lm_head.weight") {
        mp.rows = c.vocab_size;
        mp.hf_shape[0] = c.vocab_size;
      }
      if (mp.transpose) std::swap(mp.hf_shape[0], mp.hf_shape[1]);
      out.push_back(std::move(mp));
    }
  }
  return out;
}

}  // namespace zt::hf_detail
