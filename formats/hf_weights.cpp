#include "formats/hf_weights.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/file_io.h"            // defines: AtomicFile
#include "models/gpt2.h"             // defines: GPT2
#include "models/llama.h"            // defines: Llama
#include "formats/hf_config.h"       // defines: hf_config_from_json, hf_config_to_json
#include "formats/llmc_checkpoint.h" // defines: read_llmc_header, load_llmc_checkpoint
#include "formats/safetensors.h"     // defines: load_safetensors, save_safetensors

namespace zt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

const ModelConfig& config_of(Model& m, const char* what) {
  if (auto* g = dynamic_cast<GPT2*>(&m)) return g->config();
  if (auto* l = dynamic_cast<Llama*>(&m)) return l->config();
  ZT_THROW(what, ": model of family \"", m.family(), "\" is neither GPT2 nor Llama");
}

// One parameter of the model and its HF tensor.
struct Mapping {
  std::string hf;  // "h.0.attn.c_attn.weight"
  Unit* unit;
  int index;       // into unit->params()
  bool transpose;  // GPT-2 Conv1D: HF (in, out), ZeroTensor (out, in)
  int64_t rows;    // vocabulary matrices: HF holds the first `rows` (= V) rows; else -1
  Shape hf_shape;  // the shape the HF tensor must have
};

std::vector<Mapping> mapping(Model& m, const char* what) {
  const ModelConfig& c = config_of(m, what);
  const bool gpt2 = c.family == "gpt2";
  std::vector<Mapping> out;
  for (Unit* u : m.units()) {
    const ParamSet& ps = u->params();
    const std::string& un = ps.unit_name();  // "embed", "h.3" / "layers.3", "head"
    const bool block = un != "embed" && un != "head";
    for (int i = 0; i < ps.size(); ++i) {
      const ParamInfo& info = ps.infos()[i];
      const std::string& p = info.name;
      Mapping mp{"", u, i, false, -1, info.shape};
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

  std::ifstream in(f.index);
  if (!in) ZT_THROW("HF checkpoint index '", f.index, "': cannot open: ", errno_message());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("HF checkpoint index '", f.index, "' is not valid JSON: ", e.what());
  }
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
  std::ifstream in(path);
  if (!in) ZT_THROW("HF config '", path, "': cannot open: ", errno_message());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("HF config '", path, "' is not valid JSON: ", e.what());
  }
}

// ---- reading the tensors ------------------------------------------------------------------

struct Found {
  std::string file, original;  // where it came from, under which name
  Tensor t;
  bool used = false;
};

bool is_float(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16 || d == DType::f64; }

// Every tensor of every file, under its normalized name (prefixes as `mapping` writes them);
// known buffers are dropped.
std::map<std::string, Found> read_tensors(const HfFiles& f, const std::string& family) {
  std::map<std::string, Found> out;
  std::set<std::string> originals;
  for (const std::string& file : f.files) {
    if (!f.index.empty() && !fs::exists(file))
      ZT_THROW("HF checkpoint index '", f.index, "' names shard '", file, "', which does not exist");
    SafetensorsFile st = load_safetensors(file);
    for (SafetensorsEntry& e : st.tensors) {
      if (!f.index.empty()) {
        auto it = f.weight_map.find(e.name);
        if (it == f.weight_map.end())
          ZT_THROW("HF shard '", file, "' holds tensor '", e.name, "', which the index '", f.index, "' does not list");
        if (it->second != file)
          ZT_THROW("HF shard '", file, "' holds tensor '", e.name, "', which the index '", f.index, "' puts in '",
                   it->second, "'");
      }
      originals.insert(e.name);
      std::string name = e.name;
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
      if (out.count(name))
        ZT_THROW("HF checkpoint: tensor '", e.name, "' in '", file, "' and '", out[name].original, "' in '",
                 out[name].file, "' are the same parameter '", name, "'");
      out[name] = Found{file, e.name, e.tensor, false};
    }
  }
  if (!f.index.empty())
    for (const auto& [name, file] : f.weight_map) {
      if (!originals.count(name))
        ZT_THROW("HF checkpoint index '", f.index, "' lists tensor '", name, "' in '", file,
                 "', which does not hold it");
    }
  return out;
}

std::string shape_dtype(const Tensor& t) { return shape_str(t.shape()) + " " + safetensors_dtype(t.dtype()); }

// Bitwise equality of two tensors' values (after conversion to float32 when the dtypes differ).
bool same_values(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  const Tensor x = a.dtype() == b.dtype() ? a.contiguous() : a.to(DType::f32).contiguous();
  const Tensor y = a.dtype() == b.dtype() ? b.contiguous() : b.to(DType::f32).contiguous();
  return std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

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
      {"tie_embeddings", double(file.tie_embeddings), double(model.tie_embeddings)}};
  if (file.family != model.family)
    ZT_THROW("HF checkpoint ", where, " holds a ", file.family, " model, the model is ", model.family);
  for (const auto& f : fields)
    if (f.f != f.m)
      ZT_THROW("HF checkpoint ", where, " does not match the model: ", f.field, " is ", f.f, " in config.json but ",
               f.m, " in the model");
}

}  // namespace

// ---- public ---------------------------------------------------------------------------------

ModelConfig read_hf_config(const std::string& path) {
  const HfFiles f = locate(path);
  return hf_config_from_json(read_json(f.config), "'" + f.config + "'");
}

void load_hf_weights(const std::string& path, Model& model) {
  const HfFiles f = locate(path);
  const ModelConfig& mc = config_of(model, "load_hf_weights");
  check_config_matches(hf_config_from_json(read_json(f.config), "'" + f.config + "'"), mc, "'" + path + "'");
  std::vector<Mapping> maps = mapping(model, "load_hf_weights");
  for (const Mapping& mp : maps)
    ZT_CHECK(mp.unit->params().finalized(), "load_hf_weights: the model was built with allocate = false");
  std::map<std::string, Found> found = read_tensors(f, mc.family);
  const std::string where = "HF checkpoint '" + path + "'";

  Tensor embedding;  // the file's embedding, to compare a tied lm_head with
  for (const Mapping& mp : maps) {
    auto it = found.find(mp.hf);
    if (it == found.end())
      ZT_THROW(where, ": tensor '", mp.hf, "' (", shape_str(mp.hf_shape), ", for ", mp.unit->params().unit_name(), ".",
               mp.unit->params().infos()[mp.index].name, ") is missing",
               f.index.empty() ? " from '" + f.files[0] + "'" : "");
    Found& fd = it->second;
    const Tensor& src = fd.t;  // (file dtype)
    if (!is_float(src.dtype()) || src.shape() != mp.hf_shape)
      ZT_THROW(where, ": tensor '", fd.original, "' in '", fd.file, "' is ", shape_dtype(src), ", expected ",
               shape_str(mp.hf_shape), " F32, BF16, F16 or F64", mp.transpose ? " (HF's Conv1D layout (in, out))" : "");
    fd.used = true;
    Tensor dst = mp.unit->params().value(mp.index);  // (model dtype), a view into the unit's flat buffer
    if (mp.transpose) {
      dst.copy_(src.transpose(0, 1));
    } else if (mp.rows >= 0) {
      dst.slice(0, 0, mp.rows).copy_(src);                                    // f16 / bf16 -> f32 widen exactly
      if (dst.size(0) > mp.rows) dst.slice(0, mp.rows, dst.size(0)).zero_();  // padded vocabulary rows
    } else {
      dst.copy_(src);
    }
    if (mp.hf == "wte.weight" || mp.hf == "model.embed_tokens.weight") embedding = src;
  }
  // A tied head written out anyway (GPT2LMHeadModel's state_dict, some Llama exports): it must be
  // the embedding, or the file holds a model ZeroTensor cannot represent.
  if (auto it = found.find("lm_head.weight"); it != found.end() && !it->second.used) {
    if (!embedding.defined() || !same_values(it->second.t, embedding))
      ZT_THROW(where, ": tensor 'lm_head.weight' in '", it->second.file, "' (", shape_dtype(it->second.t),
               ") differs from the input embedding, but the model ties them (",
               mc.family == "gpt2" ? "GPT-2 always does" : "tie_word_embeddings is true in config.json", ")");
    it->second.used = true;
  }
  for (const auto& [name, fd] : found)
    if (!fd.used)
      ZT_THROW(where, ": tensor '", fd.original, "' in '", fd.file, "' (", shape_dtype(fd.t),
               ") is not a parameter of ", "this ", mc.family, " model (", mc.n_layer, " layers)");
}

void save_hf_weights(const std::string& dir, Model& model, DType dt) {
  if (dt != DType::f32 && dt != DType::bf16)
    ZT_THROW("save_hf_weights '", dir, "': dtype ", dtype_name(dt), " is not supported (float32 or bfloat16)");
  const ModelConfig& c = config_of(model, "save_hf_weights");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) ZT_THROW("save_hf_weights: cannot create directory '", dir, "': ", ec.message());
  std::vector<SafetensorsEntry> entries;
  for (const Mapping& mp : mapping(model, "save_hf_weights")) {
    ZT_CHECK(mp.unit->params().finalized(), "save_hf_weights: the model was built with allocate = false");
    Tensor v = mp.unit->params().value(mp.index);
    if (mp.rows >= 0) v = v.slice(0, 0, mp.rows);  // padded vocabulary rows are not HF's
    if (mp.transpose) v = v.transpose(0, 1);       // (out, in) -> Conv1D (in, out)
    entries.push_back({mp.hf, v.to(dt)});          // written row-major (save_safetensors)
  }
  save_safetensors((fs::path(dir) / kSingleFile).string(), entries, {{"format", "pt"}});
  const std::string text = hf_config_to_json(c, dt).dump(2) + "\n";
  AtomicFile cf((fs::path(dir) / "config.json").string(), "HF config");
  cf.write(text.data(), text.size());
  cf.commit();
}

bool is_hf_path(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) || path.ends_with(".safetensors") || path.ends_with(".index.json");
}

ModelConfig pretrained_config(const std::string& path) {
  return is_hf_path(path) ? read_hf_config(path) : read_llmc_header(path);
}

void load_pretrained(const std::string& path, Model& model) {
  if (is_hf_path(path)) return load_hf_weights(path, model);
  auto* gpt = dynamic_cast<GPT2*>(&model);
  if (!gpt)
    ZT_THROW("'", path, "' is read as an llm.c checkpoint, which holds GPT-2 models; the model is ", model.family());
  load_llmc_checkpoint(path, *gpt);
}

namespace {
// Interim: the file is read into a whole model in memory once, and the units are served from it.
class WholeFileSource final : public ParamSource {
 public:
  WholeFileSource(const std::string& path, Model& layout) {
    const GPT2* g = dynamic_cast<const GPT2*>(&layout);
    const Llama* l = dynamic_cast<const Llama*>(&layout);
    ZT_CHECK(g || l, "pretrained_source: model of family \"", layout.family(), "\" is neither GPT2 nor Llama");
    ModelOptions opt;
    std::vector<Unit*> lu = layout.units();
    opt.dtype = lu.front()->params().dtype();
    opt.world_size = 1;
    opt.alignment = 1;
    const ModelConfig& cfg = g ? g->config() : l->config();
    model_ = g ? std::unique_ptr<Model>(std::make_unique<GPT2>(cfg, opt)) : std::make_unique<Llama>(cfg, opt);
    load_pretrained(path, *model_);
    units_ = model_->units();
  }
  void fill(int unit, int64_t lo, const Tensor& dst) override {
    const ParamSet& ps = units_.at(static_cast<size_t>(unit))->params();
    const int64_t n = dst.numel(), real = std::max<int64_t>(0, std::min(ps.numel(), lo + n) - lo);
    if (real > 0) dst.flat_view(0, {real}).copy_(ps.flat().flat_view(lo, {real}));
    if (real < n) dst.flat_view(real, {n - real}).zero_();  // the padding
  }

 private:
  std::unique_ptr<Model> model_;
  std::vector<Unit*> units_;
};
}  // namespace

std::unique_ptr<ParamSource> pretrained_source(const std::string& path, Model& model) {
  return std::make_unique<WholeFileSource>(path, model);
}

}  // namespace zt
