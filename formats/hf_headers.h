// defines: hf_detail::{HfFiles, Stored, HfHeaders, read_hf_headers, check_hf_claims} — a Hugging
//          Face checkpoint's files with every header read (config.json, the index, each
//          safetensors header; no tensor data), and config.json's sizes held against what those
//          headers hold. Private to the reader (formats/hf_reader.cpp).
//
// Why before anything is built: config.json is a claim. A config that says 1,000,000 layers
// beside a file holding 2 would have the caller lay out a million units (gigabytes of C++
// objects and flat buffers) before the first tensor is looked at. check_hf_claims refuses it from
// the tensor names and shapes alone, cheapest first (docs/formats.md "Reading untrusted files").
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/safetensors.h"  // defines: SafetensorsReader
#include "models/model_config.h"

namespace zt::hf_detail {

// Where a checkpoint's files are (formats/hf_weights.h: a directory, a .safetensors or an .index.json).
struct HfFiles {
  std::string config;                             // config.json
  std::string index;                              // the .index.json, or empty
  std::vector<std::string> files;                 // safetensors files (shards in index order)
  std::map<std::string, std::string> weight_map;  // index: tensor -> shard path
};

// One tensor of the files, under its normalized name (the prefixes as hf_mapping.h's `mapping`
// writes them: GPT-2 without "transformer.", Llama with "model.").
struct Stored {
  int file, index;       // readers[file].tensors()[index]
  std::string original;  // the name in the file
  bool used = false;     // matched to a parameter (formats/hf_reader.cpp)
};

// A checkpoint with its config parsed and its headers read; no tensor data has been read.
struct HfHeaders {
  std::string where;  // "HF checkpoint '<path>'": starts the errors
  HfFiles files;
  nlohmann::json config_json;              // config.json as written
  ModelConfig config;                      // what it describes (formats/hf_config.h)
  std::vector<SafetensorsReader> readers;  // one per file, headers parsed and checked
  std::map<std::string, Stored> stored;    // node-based: Stored* stay valid

  const SafetensorsTensorInfo& info(const Stored& s) const { return readers[s.file].tensors()[s.index]; }
  const std::string& file(const Stored& s) const { return readers[s.file].path(); }
  // "'<dir>/model.safetensors' holds" or "the 3 shards of '<dir>/model.safetensors.index.json' hold".
  std::string files_hold() const;
};

// Locates the files, parses config.json (every error of hf_config_from_json), opens each
// safetensors file (its header only: every check of SafetensorsReader, the offsets against the
// file's size among them), checks the shards against the index and names the tensors; the
// attention-mask and RoPE buffers older exports carry are dropped here.
HfHeaders read_hf_headers(const std::string& path);

// config.json's sizes against the headers, before any model is laid out, cheapest first:
//   1. the layers: every index in [0, n_layer / num_hidden_layers) must appear in a tensor name
//      ("h.<i>." / "model.layers.<i>."), else the error names the key, its value, the layers the
//      files hold and those missing;
//   2. each width against the one tensor that carries it (present and of the rank to show it):
//      the hidden size and the vocabulary against the embedding, GPT-2's positions against wpe,
//      the MLP width against layer 0's first MLP weight, Llama's kv heads against layer 0's
//      k_proj; the error names the key, its value, the tensor, its shape and file;
//   3. the parameter count the config implies must be a 64-bit number (core/checked.h).
// What remains (each tensor's presence, dtype and exact shape) is checked against a layout
// without bytes (formats/hf_reader.cpp), which after 1. has no more layers than the files hold.
void check_hf_claims(const HfHeaders& h);

}  // namespace zt::hf_detail
