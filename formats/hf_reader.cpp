// defines: read_hf_config, load_hf_weights, hf_weights_source; file-local: is_float, shape_dtype,
//          check_config_matches, TensorMatch, tied_differs, match_tensors and 2 more
//
// Reading Hugging Face weights (formats/hf_weights.h), streamed: the safetensors headers are
// read (formats/hf_headers.h), config.json's sizes held against them, and every name, shape and
// dtype checked before any data; then each unit's tensors are read when the unit is asked for
// (nn/param_source.h's UnitReader: one unit held at a time). The whole-model load_hf_weights is
// the same reader filling every unit of a model in memory.
#include <memory>
#include <string>
#include <vector>

#include "formats/hf_headers.h"  // defines: HfHeaders, Stored, read_hf_headers, check_hf_claims
#include "formats/hf_mapping.h"  // defines: Mapping, mapping, config_of
#include "formats/hf_weights.h"
#include "formats/safetensors.h"  // defines: SafetensorsReader
#include "formats/stream_read.h"  // defines: read_stored_tensor, same_stored_values
#include "models/init.h"          // defines: make_model

namespace zt {

using namespace hf_detail;

namespace {

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

// ---- every tensor against a layout -----------------------------------------------------------

// Which stored tensor fills each parameter of a layout, and the tied head a file may carry.
struct TensorMatch {
  std::vector<Mapping> maps;
  std::vector<std::vector<std::pair<size_t, const Stored*>>> by_unit;  // per unit: (mapping, its tensor)
  const Stored* embedding = nullptr;
  Stored* tied_head = nullptr;  // a tied lm_head the file holds anyway; compared when head_unit is read
  const char* tied_text = "";
  int head_unit = -1;
};

[[noreturn]] void tied_differs(const HfHeaders& h, const TensorMatch& tm) {
  ZT_THROW(h.where, ": tensor 'lm_head.weight' in '", h.file(*tm.tied_head), "' (", shape_dtype(h.info(*tm.tied_head)),
           ") differs from the input embedding, but the model ties them (", tm.tied_text, ")");
}

// Every parameter of `layout` (it may hold no bytes) against the headers: present, a float dtype,
// HF's shape; then every stored tensor must be used. Marks h's tensors used.
TensorMatch match_tensors(HfHeaders& h, Model& layout, const char* what) {
  const ModelConfig& mc = config_of(layout, what);
  const std::vector<Unit*> units = layout.units();
  TensorMatch tm;
  tm.maps = mapping(layout, what);
  tm.by_unit.resize(units.size());
  for (size_t m = 0; m < tm.maps.size(); ++m) {
    const Mapping& mp = tm.maps[m];
    const ParamSet& ps = units[mp.unit]->params();
    auto it = h.stored.find(mp.hf);
    if (it == h.stored.end())
      ZT_THROW(h.where, ": tensor '", mp.hf, "' (", shape_str(mp.hf_shape), ", for ", ps.unit_name(), ".",
               ps.infos()[mp.index].name, ") is missing",
               h.files.index.empty() ? " from '" + h.files.files[0] + "'" : "");
    Stored& s = it->second;
    const SafetensorsTensorInfo& t = h.info(s);
    if (!is_float(t.dtype) || t.shape != mp.hf_shape)
      ZT_THROW(h.where, ": tensor '", s.original, "' in '", h.file(s), "' is ", shape_dtype(t), ", expected ",
               shape_str(mp.hf_shape), " F32, BF16, F16 or F64", mp.transpose ? " (HF's Conv1D layout (in, out))" : "");
    s.used = true;
    tm.by_unit[mp.unit].push_back({m, &s});
    if (mp.hf == "wte.weight" || mp.hf == "model.embed_tokens.weight") tm.embedding = &s;
  }
  // A tied head written out anyway (GPT2LMHeadModel's state_dict, some Llama exports): it must be
  // the embedding, or the file holds a model ZeroTensor cannot represent. Its shape is checked
  // here, its values when the head unit is read (tensor by tensor, a bounded buffer at a time).
  if (auto it = h.stored.find("lm_head.weight"); it != h.stored.end() && !it->second.used) {
    tm.tied_head = &it->second;
    tm.tied_text = mc.family == "gpt2" ? "GPT-2 always does" : "tie_word_embeddings is true in config.json";
    if (!tm.embedding || h.info(*tm.embedding).shape != h.info(*tm.tied_head).shape) tied_differs(h, tm);
    tm.tied_head->used = true;
    tm.head_unit = static_cast<int>(units.size()) - 1;
    for (size_t u = 0; u < units.size(); ++u)
      if (units[u]->params().unit_name() == "head") tm.head_unit = static_cast<int>(u);
  }
  for (const auto& [name, s] : h.stored)
    if (!s.used)
      ZT_THROW(h.where, ": tensor '", s.original, "' in '", h.file(s), "' (", shape_dtype(h.info(s)),
               ") is not a parameter of ", "this ", mc.family, " model (", mc.n_layer, " layers)");
  return tm;
}

// A checkpoint's headers, read and held against config.json (formats/hf_headers.h).
HfHeaders checked_headers(const std::string& path) {
  HfHeaders h = read_hf_headers(path);
  check_hf_claims(h);
  return h;
}

// ---- the streaming reader ------------------------------------------------------------------

// The weights at `path` for a model's layout. The constructor reads only headers (config.json,
// the index, each safetensors header), holds config.json against them (check_hf_claims) and
// throws for every mismatch of names, shapes, dtypes and shards; read_unit reads one unit's
// tensors (pread, through read_stored_tensor's bounded buffer).
class HfReader final : public UnitReader {
 public:
  HfReader(const std::string& path, Model& model, const char* what) : UnitReader(model), h_(checked_headers(path)) {
    check_config_matches(h_.config, config_of(model, what), "'" + path + "'");
    for (Unit* u : units_)
      ZT_CHECK(u->params().finalized(), what, ": the model was built with allocate = false");
    tm_ = match_tensors(h_, model, what);
  }

 protected:
  void read_unit(int unit, const Tensor& flat) override {
    const ParamSet& ps = units_[unit]->params();
    for (const auto& [m, s] : tm_.by_unit[unit]) {
      const Mapping& mp = tm_.maps[m];
      const ParamInfo& p = ps.infos()[mp.index];
      Tensor dst = flat.flat_view(p.offset, p.shape);  // (model dtype), a view into the unit's buffer
      if (mp.rows >= 0) {
        if (dst.size(0) > mp.rows) dst.slice(0, mp.rows, dst.size(0)).zero_();  // padded vocabulary rows
        dst = dst.slice(0, 0, mp.rows);
      }
      read_stored_tensor(h_.info(*s).shape, h_.info(*s).dtype, mp.transpose, dst, bytes_of(*s));
    }
    if (unit == tm_.head_unit && tm_.tied_head) {
      const SafetensorsTensorInfo &hd = h_.info(*tm_.tied_head), &e = h_.info(*tm_.embedding);
      if (!same_stored_values(hd.shape, hd.dtype, bytes_of(*tm_.tied_head), e.dtype, bytes_of(*tm_.embedding)))
        tied_differs(h_, tm_);
    }
  }

 private:
  ByteRange bytes_of(const Stored& s) const {
    return [this, &s](uint64_t lo, uint64_t n, void* dst) { h_.readers[s.file].read_bytes(s.index, lo, n, dst); };
  }

  HfHeaders h_;
  TensorMatch tm_;
};

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  // The config is only returned once the files back it: every claim against the headers, then
  // every tensor against a layout without bytes (a caller builds and allocates the model next).
  HfHeaders h = checked_headers(path);
  ModelOptions layout_only;
  layout_only.allocate = false;
  const std::unique_ptr<Model> layout = make_model(h.config, layout_only);
  match_tensors(h, *layout, "read_hf_config");
  return h.config;
}

void load_hf_weights(const std::string& path, Model& model) {
  HfReader(path, model, "load_hf_weights").fill_model();
}

std::unique_ptr<UnitReader> hf_weights_source(const std::string& path, Model& model) {
  return std::make_unique<HfReader>(path, model, "pretrained_source");
}

}  // namespace zt
