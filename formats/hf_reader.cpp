// defines: read_hf_config, load_hf_weights, hf_weights_source; file-local: HfFiles, locate, read_json,
//          is_float, shape_dtype, check_config_matches and 1 more
//
// Reading Hugging Face weights (formats/hf_weights.h), streamed: the safetensors headers are
// read and every name, shape and dtype checked before any data; then each unit's tensors are read
// when the unit is asked for (nn/param_source.h's UnitReader: one unit held at a time). The
// whole-model load_hf_weights is the same reader filling every unit of a model in memory.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json.h"  // defines: parse_json
#include "core/file_io.h"          // defines: errno_message
#include "formats/hf_config.h"     // defines: hf_config_from_json
#include "formats/hf_mapping.h"    // defines: Mapping, mapping, config_of
#include "formats/hf_weights.h"
#include "formats/safetensors.h"   // defines: SafetensorsReader
#include "formats/stream_read.h"   // defines: read_stored_tensor, same_stored_values

namespace zt {

namespace fs = std::filesystem;
using namespace hf_detail;

namespace {

// ---- locating the files -------------------------------------------------------------------

struct HfFiles {
  std::string config;                             // config.json
  std::string index;                              // the .index.json, or empty
  std::vector<std::string> files;                 // safetensors files (shards in index order)
  std::map<std::string, std::string> weight_map;  // index: tensor -> shard path
};

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
    if (path.ends_with(".index.json"))
      f.index = path;
    else
      f.files.push_back(path);
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

nlohmann::json read_json(const std::string& path) {
  return read_json_file(path, "HF config '" + path + "'");
}

bool is_float(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16 || d == DType::f64; }

std::string shape_dtype(const SafetensorsTensorInfo& t) { return shape_str(t.shape) + " " + safetensors_dtype(t.dtype); }

void check_config_matches(const ModelConfig& file, const ModelConfig& model, const std::string& where) {
  const struct {
    const char* field;
    double f, m;
  } fields[] = {
      {"n_layer", double(file.n_layer), double(model.n_layer)},
      {"n_embd", double(file.n_embd), double(model.n_embd)},
      {"n_head", double(file.n_head), double(model.n_head)},
      {"n_kv_head", double(file.n_kv_head), double(model.n_kv_head)},
      {"vocab_size", double(file.vocab_size), double(model.vocab_size)},
      {"max_seq_len", double(file.max_seq_len), double(model.max_seq_len)},
      {"ffn_hidden", double(file.ffn_hidden), double(model.ffn_hidden)},
      {"norm_eps", file.norm_eps, model.norm_eps},
      {"rope_theta", file.family == "llama" ? file.rope_theta : 0, model.family == "llama" ? model.rope_theta : 0},
      {"tie_embeddings", double(file.tie_embeddings), double(model.tie_embeddings)},
      {"rope_scaling.factor", file.rope_scaling.factor, model.rope_scaling.factor},
      {"rope_scaling.low_freq_factor", file.rope_scaling.low_freq_factor, model.rope_scaling.low_freq_factor},
      {"rope_scaling.high_freq_factor", file.rope_scaling.high_freq_factor, model.rope_scaling.high_freq_factor},
      {"rope_scaling.original_max_position_embeddings", double(file.rope_scaling.original_max_position),
       double(model.rope_scaling.original_max_position)}};
  if (file.family != model.family)
    ZT_THROW("HF checkpoint ", where, " holds a ", file.family, " model, the model is ", model.family);
  if (file.rope_scaling.type != model.rope_scaling.type)
    ZT_THROW("HF checkpoint ", where, " does not match the model: rope_scaling is ",
             file.rope_scaling.type == RopeScaling::Type::none ? "none" : "llama3", " in config.json but ",
             model.rope_scaling.type == RopeScaling::Type::none ? "none" : "llama3", " in the model");
  for (const auto& f : fields)
    if (f.f != f.m)
      ZT_THROW("HF checkpoint ", where, " does not match the model: ", f.field, " is ", f.f, " in config.json but ",
               f.m, " in the model");
}

// ---- the streaming reader ------------------------------------------------------------------

// The weights at `path` for a model's layout. The constructor reads only headers (config.json,
// the index, each safetensors header) and throws for every mismatch of names, shapes, dtypes and
// shards; read_unit reads one unit's tensors (pread, through read_stored_tensor's bounded buffer).
class HfReader final : public UnitReader {
 public:
  HfReader(const std::string& path, Model& model, const char* what) : UnitReader(model), where_("HF checkpoint '" + path + "'") {
    files_ = locate(path);
    const ModelConfig& mc = config_of(model, what);
    check_config_matches(hf_config_from_json(read_json(files_.config), "'" + files_.config + "'"), mc, "'" + path + "'");
    maps_ = mapping(model, what);
    for (Unit* u : units_)
      ZT_CHECK(u->params().finalized(), what, ": the model was built with allocate = false");
    index_tensors(mc.family);
    by_unit_.resize(units_.size());
    for (size_t m = 0; m < maps_.size(); ++m) {
      const Mapping& mp = maps_[m];
      const ParamSet& ps = units_[mp.unit]->params();
      auto it = stored_.find(mp.hf);
      if (it == stored_.end())
        ZT_THROW(where_, ": tensor '", mp.hf, "' (", shape_str(mp.hf_shape), ", for ", ps.unit_name(), ".",
                 ps.infos()[mp.index].name, ") is missing", files_.index.empty() ? " from '" + files_.files[0] + "'" : "");
      Stored& s = it->second;
      const SafetensorsTensorInfo& t = info(s);
      if (!is_float(t.dtype) || t.shape != mp.hf_shape)
        ZT_THROW(where_, ": tensor '", s.original, "' in '", file(s), "' is ", shape_dtype(t), ", expected ",
                 shape_str(mp.hf_shape), " F32, BF16, F16 or F64", mp.transpose ? " (HF's Conv1D layout (in, out))" : "");
      s.used = true;
      by_unit_[mp.unit].push_back({m, &s});
      if (mp.hf == "wte.weight" || mp.hf == "model.embed_tokens.weight") embedding_ = &s;
    }
    // A tied head written out anyway (GPT2LMHeadModel's state_dict, some Llama exports): it must be
    // the embedding, or the file holds a model ZeroTensor cannot represent. Its shape is checked
    // here, its values when the head unit is read (tensor by tensor, a bounded buffer at a time).
    if (auto it = stored_.find("lm_head.weight"); it != stored_.end() && !it->second.used) {
      tied_head_ = &it->second;
      tied_text_ = mc.family == "gpt2" ? "GPT-2 always does" : "tie_word_embeddings is true in config.json";
      if (!embedding_ || info(*embedding_).shape != info(*tied_head_).shape) tied_differs();
      tied_head_->used = true;
      head_unit_ = static_cast<int>(units_.size()) - 1;
      for (size_t u = 0; u < units_.size(); ++u)
        if (units_[u]->params().unit_name() == "head") head_unit_ = static_cast<int>(u);
    }
    for (const auto& [name, s] : stored_)
      if (!s.used)
        ZT_THROW(where_, ": tensor '", s.original, "' in '", file(s), "' (", shape_dtype(info(s)),
                 ") is not a parameter of ", "this ", mc.family, " model (", mc.n_layer, " layers)");
  }

 protected:
  void read_unit(int unit, const Tensor& flat) override {
    const ParamSet& ps = units_[unit]->params();
    for (const auto& [m, s] : by_unit_[unit]) {
      const Mapping& mp = maps_[m];
      const ParamInfo& p = ps.infos()[mp.index];
      Tensor dst = flat.flat_view(p.offset, p.shape);  // (model dtype), a view into the unit's buffer
      if (mp.rows >= 0) {
        if (dst.size(0) > mp.rows) dst.slice(0, mp.rows, dst.size(0)).zero_();  // padded vocabulary rows
        dst = dst.slice(0, 0, mp.rows);
      }
      read_stored_tensor(info(*s).shape, info(*s).dtype, mp.transpose, dst, bytes_of(*s));
    }
    if (unit == head_unit_ && tied_head_) {
      const SafetensorsTensorInfo &h = info(*tied_head_), &e = info(*embedding_);
      if (!same_stored_values(h.shape, h.dtype, bytes_of(*tied_head_), e.dtype, bytes_of(*embedding_))) tied_differs();
    }
  }

 private:
  // One tensor of the files, under its normalized name (prefixes as `mapping` writes them).
  struct Stored {
    int file, index;       // readers_[file].tensors()[index]
    std::string original;  // the name in the file
    bool used = false;
  };
  const SafetensorsTensorInfo& info(const Stored& s) const { return readers_[s.file].tensors()[s.index]; }
  const std::string& file(const Stored& s) const { return readers_[s.file].path(); }
  ByteRange bytes_of(const Stored& s) const {
    return [this, &s](uint64_t lo, uint64_t n, void* dst) { readers_[s.file].read_bytes(s.index, lo, n, dst); };
  }
  [[noreturn]] void tied_differs() const {
    ZT_THROW(where_, ": tensor 'lm_head.weight' in '", file(*tied_head_), "' (", shape_dtype(info(*tied_head_)),
             ") differs from the input embedding, but the model ties them (", tied_text_, ")");
  }

  // Opens every file (headers only), checks it against the index, and names its tensors; known
  // buffers are dropped.
  void index_tensors(const std::string& family) {
    std::set<std::string> originals;
    for (const std::string& path : files_.files) {
      if (!files_.index.empty() && !fs::exists(path))
        ZT_THROW("HF checkpoint index '", files_.index, "' names shard '", path, "', which does not exist");
      readers_.emplace_back(path);
      const SafetensorsReader& r = readers_.back();
      for (size_t i = 0; i < r.tensors().size(); ++i) {
        const std::string& orig = r.tensors()[i].name;
        if (!files_.index.empty()) {
          auto it = files_.weight_map.find(orig);
          if (it == files_.weight_map.end())
            ZT_THROW("HF shard '", path, "' holds tensor '", orig, "', which the index '", files_.index, "' does not list");
          if (it->second != path)
            ZT_THROW("HF shard '", path, "' holds tensor '", orig, "', which the index '", files_.index, "' puts in '",
                     it->second, "'");
        }
        originals.insert(orig);
        std::string name = orig;
        if (family == "gpt2") {
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
        if (auto it = stored_.find(name); it != stored_.end())
          ZT_THROW("HF checkpoint: tensor '", orig, "' in '", path, "' and '", it->second.original, "' in '",
                   file(it->second), "' are the same parameter '", name, "'");
        stored_.emplace(name, Stored{static_cast<int>(readers_.size()) - 1, static_cast<int>(i), orig});
      }
    }
    if (!files_.index.empty())
      for (const auto& [name, path] : files_.weight_map)
        if (!originals.count(name))
          ZT_THROW("HF checkpoint index '", files_.index, "' lists tensor '", name, "' in '", path,
                   "', which does not hold it");
  }

  std::string where_;
  HfFiles files_;
  std::vector<SafetensorsReader> readers_;
  std::map<std::string, Stored> stored_;                                // node-based: Stored* stay valid
  std::vector<Mapping> maps_;
  std::vector<std::vector<std::pair<size_t, const Stored*>>> by_unit_;  // per unit: (mapping, its tensor)
  const Stored* embedding_ = nullptr;
  Stored* tied_head_ = nullptr;  // a tied lm_head the file holds anyway; compared when head_unit_ is read
  const char* tied_text_ = "";
  int head_unit_ = -1;
};

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  const HfFiles f = locate(path);
  return hf_config_from_json(read_json(f.config), "'" + f.config + "'");
}

void load_hf_weights(const std::string& path, Model& model) {
  HfReader(path, model, "load_hf_weights").fill_model();
}

std::unique_ptr<UnitReader> hf_weights_source(const std::string& path, Model& model) {
  return std::make_unique<HfReader>(path, model, "pretrained_source");
}

}  // namespace zt
