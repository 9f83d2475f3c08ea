// defines: hf_detail::read_hf_headers, hf_detail::check_hf_claims, HfHeaders::files_hold
//          (formats/hf_headers.h); file-local: locate, index_tensors, layer_of, ranges,
//          check_layers, Width and 1 more
#include "formats/hf_headers.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/json.h"           // defines: read_json_file
#include "formats/hf_config.h"   // defines: hf_config_from_json
#include "formats/hf_mapping.h"  // defines: kSingleFile, kIndexFile

namespace zt::hf_detail {

namespace fs = std::filesystem;

namespace {

HfFiles locate(const std::string& path) {
  HfFiles f;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path d(path);
    f.config = (d / "config.json").string();
    if (fs::exists(d / kSingleFile)) {
      f.files.push_back((d / kSingleFile).string());
    } else if (fs::exists(d / kIndexFile)) {
      f.index = (d / kIndexFile).string();
    } else {
      ZT_THROW("HF checkpoint '", path, "': the directory has neither ", kSingleFile, " nor ", kIndexFile,
               fs::exists(d / "pytorch_model.bin")
                   ? " (it has pytorch_model.bin, a pickle, which ZeroTensor does not read: re-save it with "
                     "save_pretrained(..., safe_serialization=True))"
                   : "");
    }
  } else if (path.ends_with(".index.json") || path.ends_with(".safetensors")) {
    if (!fs::exists(path, ec)) ZT_THROW("HF checkpoint '", path, "': no such file");
    f.config = (fs::path(path).parent_path() / "config.json").string();
    if (path.ends_with(".index.json")) f.index = path;
    else f.files.push_back(path);
  } else {
    ZT_THROW("HF checkpoint '", path, "': expected a directory (config.json + ", kSingleFile, " or ", kIndexFile,
             "), a .safetensors file or an .index.json");
  }
  if (!fs::exists(f.config, ec))
    ZT_THROW("HF checkpoint '", path, "': no config.json ('", f.config, "'): the model's shape (its head count ",
             "above all) cannot be read from the tensors alone; put Hugging Face's config.json there");
  if (f.index.empty()) return f;

  nlohmann::json j = read_json_file(f.index, "HF checkpoint index '" + f.index + "'");
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
    ZT_THROW("HF checkpoint index '", f.index, "': expected {\"weight_map\": {\"<tensor>\": \"<shard file>\", ...}}");
  const fs::path dir = fs::path(f.index).parent_path();
  for (const auto& [name, shard] : j["weight_map"].items()) {
    if (!shard.is_string() || shard.get<std::string>().empty())
      ZT_THROW("HF checkpoint index '", f.index, "': tensor '", name, "' maps to ", shard.dump(), ", not a file name");
    const std::string file = (dir / shard.get<std::string>()).string();
    f.weight_map[name] = file;
    if (std::find(f.files.begin(), f.files.end(), file) == f.files.end()) f.files.push_back(file);
  }
  return f;
}

// Opens every file (headers only), checks it against the index, and names its tensors; known
// buffers are dropped.
void index_tensors(HfHeaders& h) {
  const HfFiles& files = h.files;
  const bool gpt2 = h.config.family == "gpt2";
  std::set<std::string> originals;
  for (const std::string& path : files.files) {
    if (!files.index.empty() && !fs::exists(path))
      ZT_THROW("HF checkpoint index '", files.index, "' names shard '", path, "', which does not exist");
    h.readers.emplace_back(path);
    const SafetensorsReader& r = h.readers.back();
    for (size_t i = 0; i < r.tensors().size(); ++i) {
      const std::string& orig = r.tensors()[i].name;
      if (!files.index.empty()) {
        auto it = files.weight_map.find(orig);
        if (it == files.weight_map.end())
          ZT_THROW("HF shard '", path, "' holds tensor '", orig, "', which the index '", files.index,
                   "' does not list");
        if (it->second != path)
          ZT_THROW("HF shard '", path, "' holds tensor '", orig, "', which the index '", files.index, "' puts in '",
                   it->second, "'");
      }
      originals.insert(orig);
      std::string name = orig;
      if (gpt2) {
        if (name.starts_with("transformer.")) name = name.substr(12);
        // h.<i>.attn.bias / .masked_bias: GPT2Attention's causal-mask buffers, not parameters.
        if (name.starts_with("h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"))) {
          const std::string mid = name.substr(2, name.find('.', 2) - 2);
          if (!mid.empty() && mid.find_first_not_of("0123456789") == std::string::npos) continue;
        }
      } else {
        if (name.ends_with(".rotary_emb.inv_freq")) continue;  // older transformers saved RoPE's buffer
        if (name != "lm_head.weight" && !name.starts_with("model.")) name = "model." + name;
      }
      if (auto it = h.stored.find(name); it != h.stored.end())
        ZT_THROW("HF checkpoint: tensor '", orig, "' in '", path, "' and '", it->second.original, "' in '",
                 h.file(it->second), "' are the same parameter '", name, "'");
      h.stored.emplace(name, Stored{static_cast<int>(h.readers.size()) - 1, static_cast<int>(i), orig});
    }
  }
  if (!files.index.empty())
    for (const auto& [name, path] : files.weight_map)
      if (!originals.count(name))
        ZT_THROW("HF checkpoint index '", files.index, "' lists tensor '", name, "' in '", path,
                 "', which does not hold it");
}

// The layer index of a normalized tensor name ("h.3.ln_1.weight" / "model.layers.3.mlp..." -> 3),
// or -1 for a tensor outside the layers (or an index too long to be one).
int64_t layer_of(const std::string& name, bool gpt2) {
  const std::string prefix = gpt2 ? "h." : "model.layers.";
  if (!name.starts_with(prefix)) return -1;
  const size_t dot = name.find('.', prefix.size());
  const std::string digits = name.substr(prefix.size(), dot == std::string::npos ? dot : dot - prefix.size());
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

// "0..1, 3, 5..7" for sorted [lo, hi] pairs; at most 6 ranges, then ", ...".
std::string ranges(const std::vector<std::pair<int64_t, int64_t>>& rs) {
  std::string out;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (i == 6) return out + ", ...";
    if (i) out += ", ";
    out += std::to_string(rs[i].first);
    if (rs[i].second > rs[i].first) out += ".." + std::to_string(rs[i].second);
  }
  return out;
}

// Step 1: every layer the config claims must appear in the tensor names. Cheap (one pass over
// the names) and the one that matters most: the layer count multiplies everything else.
void check_layers(const HfHeaders& h) {
  const bool gpt2 = h.config.family == "gpt2";
  const int64_t n = h.config.n_layer;
  std::set<int64_t> held;
  for (const auto& [name, s] : h.stored)
    if (const int64_t l = layer_of(name, gpt2); l >= 0) held.insert(l);
  std::vector<std::pair<int64_t, int64_t>> have, missing;
  int64_t next = 0;  // the first layer index not yet accounted for
  for (int64_t l : held) {
    if (!have.empty() && have.back().second + 1 == l) have.back().second = l;
    else have.push_back({l, l});
    if (l < n && l > next) missing.push_back({next, l - 1});
    if (l < n) next = l + 1;
  }
  if (next < n) missing.push_back({next, n - 1});
  if (missing.empty()) return;
  const char* key = gpt2 ? "n_layer" : "num_hidden_layers";
  int64_t count = 0;
  for (const auto& [lo, hi] : missing) count += hi - lo + 1;
  if (have.empty())
    ZT_THROW(h.where, ": '", h.files.config, "' has ", key, " = ", n, ", but ", h.files_hold(),
             " no layer's tensors (no name ", gpt2 ? "h.<i>.*" : "model.layers.<i>.*", ")");
  ZT_THROW(h.where, ": '", h.files.config, "' has ", key, " = ", n, ", but ", h.files_hold(), " layer",
           have.size() == 1 && have[0].first == have[0].second ? " " : "s ", ranges(have), " (", count, " layer",
           count == 1 ? "" : "s", " missing: ", ranges(missing), ")");
}

// One width config.json claims and the dimension of one tensor that carries it.
struct Width {
  std::string key;     // "vocab_size"
  std::string value;   // as config.json gives it: "1000000000", "null (4 x n_embd = 64)"
  std::string tensor;  // normalized name: "wte.weight"
  size_t dim;          // which dimension carries it
  int64_t expected;    // that dimension's size under the config
  // What the tensor's size means in the config's terms ("vocab_size = 256").
  std::string (*means)(const Width&, int64_t held, const ModelConfig& c);
};

std::string plain(const Width& w, int64_t held, const ModelConfig&) { return w.key + " = " + std::to_string(held); }
std::string kv_heads(const Width&, int64_t held, const ModelConfig& c) {
  const std::string hd = "head_dim " + std::to_string(c.head_dim()) + " = hidden_size / num_attention_heads";
  if (held % c.head_dim() != 0) return "no whole number of kv heads of " + hd;
  const int64_t heads = held / c.head_dim();
  return std::to_string(heads) + (heads == 1 ? " kv head of " : " kv heads of ") + hd;
}

// Step 2: each width against the tensor that carries it. An absent tensor, or one of too low a
// rank, is left to the per-tensor check, which names it.
void check_widths(const HfHeaders& h) {
  const ModelConfig& c = h.config;
  const nlohmann::json& j = h.config_json;
  auto given = [&](const char* key) { return j.contains(key) && !j.at(key).is_null(); };
  auto text = [&](const char* key, int64_t v) { return given(key) ? j.at(key).dump() : std::to_string(v); };
  std::vector<Width> widths;
  if (c.family == "gpt2") {
    const char* pos = given("n_positions") ? "n_positions" : "n_ctx";
    widths = {{"n_embd", text("n_embd", c.n_embd), "wte.weight", 1, c.n_embd, plain},
              {"vocab_size", text("vocab_size", c.vocab_size), "wte.weight", 0, c.vocab_size, plain},
              {pos, text(pos, c.max_seq_len), "wpe.weight", 0, c.max_seq_len, plain},
              {"n_inner",
               given("n_inner") ? j.at("n_inner").dump() : "null (4 x n_embd = " + std::to_string(c.ffn_hidden) + ")",
               "h.0.mlp.c_fc.weight", 1, c.ffn_hidden, plain}};  // Conv1D: (C, F)
  } else {
    const std::string kv = given("num_key_value_heads")
                               ? j.at("num_key_value_heads").dump()
                               : "absent (num_attention_heads = " + std::to_string(c.n_head) + ")";
    widths = {
        {"hidden_size", text("hidden_size", c.n_embd), "model.embed_tokens.weight", 1, c.n_embd, plain},
        {"vocab_size", text("vocab_size", c.vocab_size), "model.embed_tokens.weight", 0, c.vocab_size, plain},
        {"intermediate_size", text("intermediate_size", c.ffn_hidden), "model.layers.0.mlp.gate_proj.weight", 0,
         c.ffn_hidden, plain},
        {"num_key_value_heads", kv, "model.layers.0.self_attn.k_proj.weight", 0, c.n_kv_head * c.head_dim(), kv_heads}};
  }
  for (const Width& w : widths) {
    auto it = h.stored.find(w.tensor);
    if (it == h.stored.end()) continue;
    const SafetensorsTensorInfo& t = h.info(it->second);
    if (t.shape.size() <= w.dim || t.shape[w.dim] == w.expected) continue;
    ZT_THROW(h.where, ": '", h.files.config, "' has ", w.key, " = ", w.value, ", but tensor '", it->second.original,
             "' in '", h.file(it->second), "' is ", shape_str(t.shape), " ", safetensors_dtype(t.dtype),
             ", which holds ", w.means(w, t.shape[w.dim], c));
  }
}

}  // namespace

std::string HfHeaders::files_hold() const {
  if (files.index.empty()) return "'" + files.files[0] + "' holds";
  return "the " + std::to_string(files.files.size()) + " shard" + (files.files.size() == 1 ? "" : "s") + " of '" +
         files.index + "' hold";
}

HfHeaders read_hf_headers(const std::string& path) {
  HfHeaders h;
  h.where = "HF checkpoint '" + path + "'";
  h.files = locate(path);
  h.config_json = read_json_file(h.files.config, "HF config '" + h.files.config + "'");
  h.config = hf_config_from_json(h.config_json, "'" + h.files.config + "'");
  index_tensors(h);
  return h;
}

void check_hf_claims(const HfHeaders& h) {
  check_layers(h);
  check_widths(h);
  try {
    (void)h.config.num_params();  // step 3: every product checked
  } catch (const Error& e) {
    ZT_THROW(h.where, ": '", h.files.config, "': ", e.what());
  }
}

}  // namespace zt::hf_detail
