// defines: consolidate_checkpoint (train/consolidate.h); file-local: unit_layouts, write_safetensors
#include "train/consolidate.h"

#include <map>

#include "core/json.h"                 // defines: json_shape, json_integer
#include "formats/hf_weights.h"       // defines: save_hf_weights
#include "formats/llmc_checkpoint.h"  // defines: save_llmc_checkpoint
#include "formats/safetensors.h"      // defines: SafetensorsWriter
#include "models/init.h"              // defines: make_model
#include "zero/checkpoint_source.h"   // defines: CheckpointParams

namespace zt {

namespace {

// The "params" layout of each unit: from meta.json, or (older writers) from the model it records.
std::vector<nlohmann::json> unit_layouts(const CheckpointParams& src) {
  const nlohmann::json& meta = src.meta().meta;
  std::vector<nlohmann::json> out;
  bool all = true;
  for (const nlohmann::json& u : meta.at("units")) {
    out.push_back(u.contains("params") ? u.at("params") : nlohmann::json());
    all = all && !out.back().is_null();
  }
  if (all) return out;
  if (!meta.contains("model"))
    ZT_THROW("checkpoint has no parameter layout (units[].params) and no \"model\" to derive it from");
  ModelOptions opt;
  opt.allocate = false;
  std::unique_ptr<Model> model = make_model(meta.at("model").get<ModelConfig>(), opt);
  nlohmann::json layout = units_meta(*model);
  if (static_cast<int>(layout.size()) != src.units())
    ZT_THROW("checkpoint holds ", src.units(), " units, its model config builds ", layout.size());
  for (int i = 0; i < src.units(); ++i) {
    if (layout[i].at("name") != src.unit_name(i) || layout[i].at("numel") != src.unit_numel(i))
      ZT_THROW("checkpoint holds unit '", src.unit_name(i), "' with ", src.unit_numel(i),
               " parameters, its model config has '", layout[i].at("name").get<std::string>(), "' with ",
               layout[i].at("numel").get<int64_t>());
    if (out[i].is_null()) out[i] = layout[i].at("params");
  }
  return out;
}

// "<unit>.<param>" for every parameter, header first, then one parameter at a time.
int64_t write_safetensors(CheckpointParams& src, const std::string& out, DType dt) {
  const ShardedMeta& m = src.meta();
  const std::vector<nlohmann::json> layouts = unit_layouts(src);
  struct Param {
    int unit;
    int64_t offset;
  };
  std::vector<SafetensorsTensorInfo> header;
  std::vector<Param> params;
  int64_t total = 0;
  for (int u = 0; u < src.units(); ++u)
    for (const nlohmann::json& p : layouts[u]) {
      const std::string name = p.at("name").get<std::string>();
      const std::string pw = "checkpoint '" + m.dir + "': parameter '" + src.unit_name(u) + "." + name + "'";
      const Shape shape = json_shape(p.at("shape"), pw + " shape");
      const int64_t off = json_integer(p.at("offset"), pw + " offset", 0);
      if (off < 0 || off + shape_numel(shape) > src.unit_numel(u))
        ZT_THROW("checkpoint '", m.dir, "': parameter '", src.unit_name(u), ".", name, "' at offset ", off,
                 " with shape ", shape_str(shape), " lies outside the unit's ", src.unit_numel(u), " elements");
      header.push_back({src.unit_name(u) + "." + name, dt, shape});
      params.push_back({u, off});
      total += shape_numel(shape);
    }
  std::map<std::string, std::string> md = {
      {"format", "pt"}, {"zerotensor_checkpoint", m.dir}, {"step", m.meta.at("step").dump()}};
  if (m.meta.contains("model")) md["model"] = m.meta.at("model").dump();
  std::vector<Shape> shapes;
  for (const SafetensorsTensorInfo& h : header) shapes.push_back(h.shape);
  SafetensorsWriter w(out, std::move(header), md);
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor t = Tensor::empty(shapes[i], DType::f32, Category::workspace, cpu_allocator());
    src.fill(params[i].unit, params[i].offset, t);
    w.append(t.to(dt));  // bf16: rounds to nearest even
  }
  w.commit();
  return total;
}

}  // namespace

ConsolidateResult consolidate_checkpoint(const std::string& path, const std::string& out, const std::string& format,
                                         DType dt, int64_t max_shard_bytes) {
  if (dt != DType::f32 && dt != DType::bf16)
    ZT_THROW("consolidate '", path, "': dtype ", dtype_name(dt), " is not supported (float32 or bfloat16)");
  CheckpointParams src(path);
  const ShardedMeta& m = src.meta();
  ConsolidateResult r{m.dir, 0, src.units(), m.meta.at("world_size").get<int>()};
  if (format == "safetensors") {
    r.params = write_safetensors(src, out, dt);
    return r;
  }
  if (format != "llmc" && format != "hf")
    ZT_THROW("consolidate '", path, "': unknown format '", format, "' (safetensors, llmc or hf)");
  if (!m.meta.contains("model"))
    ZT_THROW("checkpoint '", m.dir, "' records no \"model\": --format ", format, " needs the model config");
  const ModelConfig cfg = m.meta.at("model").get<ModelConfig>();
  if (format == "llmc" && cfg.family != "gpt2")
    ZT_THROW("--format llmc writes GPT-2 models only; checkpoint '", m.dir, "' holds a ", cfg.family,
             " model (use --format safetensors or hf)");
  ModelOptions opt;
  opt.materialize = false;  // the layout alone: the values come from the rank files, a parameter at a time
  std::unique_ptr<Model> layout = make_model(cfg, opt);
  const std::vector<Unit*> mu = layout->units();
  if (static_cast<int>(mu.size()) != src.units())
    ZT_THROW("checkpoint '", m.dir, "' holds ", src.units(), " units, its ", cfg.family, " config builds ", mu.size());
  for (int i = 0; i < src.units(); ++i) {
    const ParamSet& ps = mu[i]->params();
    if (ps.unit_name() != src.unit_name(i) || ps.numel() != src.unit_numel(i))
      ZT_THROW("checkpoint '", m.dir, "' holds unit '", src.unit_name(i), "' with ", src.unit_numel(i),
               " parameters, its ", cfg.family, " config builds '", ps.unit_name(), "' with ", ps.numel());
    r.params += ps.numel();
  }
  if (format == "hf") save_hf_weights(out, *layout, src, dt, max_shard_bytes);
  else
    save_llmc_checkpoint(out, dynamic_cast<GPT2&>(*layout), src, dt == DType::bf16 ? kLlmcVersionBF16 : kLlmcVersionF32);
  return r;
}

}  // namespace zt
