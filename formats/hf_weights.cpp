// defines: save_hf_weights, parse_shard_size, is_hf_path, pretrained_config, load_pretrained, pretrained_source
//          (formats/hf_weights.h); file-local: pretrained_reader
//
// Writing Hugging Face weights and the "start from these weights" entry points
// (formats/hf_weights.h); the reader is formats/hf_reader.cpp.
#include "formats/hf_weights.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/file_io.h"             // defines: AtomicFile
#include "formats/hf_config.h"        // defines: hf_config_to_json
#include "formats/hf_mapping.h"       // defines: Mapping, mapping, config_of
#include "formats/llmc_checkpoint.h"  // defines: read_llmc_header, load_llmc_checkpoint, llmc_checkpoint_source
#include "formats/safetensors.h"      // defines: SafetensorsWriter

namespace zt {

namespace fs = std::filesystem;
using namespace hf_detail;

void save_hf_weights(const std::string& dir, Model& model, DType dt, int64_t max_shard_bytes) {
  for (Unit* u : model.units())
    ZT_CHECK(u->params().finalized(), "save_hf_weights: the model was built with allocate = false");
  ResidentParams values(model);
  save_hf_weights(dir, model, values, dt, max_shard_bytes);
}

void save_hf_weights(const std::string& dir, Model& layout, ParamSource& values, DType dt, int64_t max_shard_bytes) {
  if (dt != DType::f32 && dt != DType::bf16)
    ZT_THROW("save_hf_weights '", dir, "': dtype ", dtype_name(dt), " is not supported (float32 or bfloat16)");
  if (max_shard_bytes < 1) ZT_THROW("save_hf_weights '", dir, "': max_shard_bytes ", max_shard_bytes, " must be >= 1");
  const ModelConfig& c = config_of(layout, "save_hf_weights");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) ZT_THROW("save_hf_weights: cannot create directory '", dir, "': ", ec.message());
  const std::vector<Mapping> maps = mapping(layout, "save_hf_weights");

  // The shards: consecutive runs of tensors, each under max_shard_bytes unless one tensor is larger.
  std::vector<std::vector<size_t>> shards;
  int64_t in_shard = 0, total = 0;
  for (size_t i = 0; i < maps.size(); ++i) {
    const int64_t bytes = shape_numel(maps[i].hf_shape) * static_cast<int64_t>(dtype_size(dt));
    if (shards.empty() || (in_shard > 0 && in_shard + bytes > max_shard_bytes)) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
    total += bytes;
  }
  const bool single = shards.size() <= 1;
  const auto shard_name = [&](size_t k) {
    if (single) return std::string(kSingleFile);
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    return std::string(name);
  };

  const std::vector<Unit*> units = layout.units();
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    std::vector<SafetensorsTensorInfo> header;
    for (size_t i : shards[k]) header.push_back({maps[i].hf, dt, maps[i].hf_shape});
    SafetensorsWriter out((fs::path(dir) / shard_name(k)).string(), std::move(header), {{"format", "pt"}});
    for (size_t i : shards[k]) {  // one parameter in memory at a time
      const Mapping& mp = maps[i];
      const ParamSet& ps = units[mp.unit]->params();
      const ParamInfo& p = ps.infos()[mp.index];
      Tensor v = Tensor::empty(p.shape, ps.dtype(), Category::workspace, cpu_allocator());
      values.fill(mp.unit, p.offset, v.view({v.numel()}));
      if (mp.rows >= 0) v = v.slice(0, 0, mp.rows);  // padded vocabulary rows are not HF's
      if (mp.transpose) v = v.transpose(0, 1);       // (out, in) -> Conv1D (in, out)
      out.append(v.to(dt));                          // written row-major
      weight_map[mp.hf] = shard_name(k);
    }
    out.commit();
  }
  if (!single) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = std::move(weight_map);
    const std::string text = index.dump(2) + "\n";
    AtomicFile f((fs::path(dir) / kIndexFile).string(), "HF checkpoint index");
    f.write(text.data(), text.size());
    f.commit();
  }
  const std::string text = hf_config_to_json(c, dt).dump(2) + "\n";
  AtomicFile cf((fs::path(dir) / "config.json").string(), "HF config");
  cf.write(text.data(), text.size());
  cf.commit();
  // A previous export of the other layout would shadow this one (the reader takes
  // model.safetensors first) or leave shards nobody indexes: removed now that the new files are in.
  std::set<std::string> written;
  for (size_t k = 0; k < shards.size(); ++k) written.insert(shard_name(k));
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool weights = name == kSingleFile || (name.starts_with("model-") && name.ends_with(".safetensors"));
    if ((weights && !written.contains(name)) || (single && name == kIndexFile)) stale.push_back(entry.path());
  }
  for (const fs::path& p : stale) fs::remove(p, ec);
}

int64_t parse_shard_size(const std::string& s, const char* what) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  const std::string unit = s.substr(end);
  const struct {
    const char* name;
    double mul;
  } units[] = {{"", 1},     {"B", 1},        {"KB", 1e3},        {"MB", 1e6},
               {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  for (const auto& u : units)
    if (end > 0 && unit == u.name) {
      const double bytes = std::floor(v * u.mul);
      if (!(bytes >= 1) || bytes > 9e15) break;
      return static_cast<int64_t>(bytes);
    }
  ZT_THROW(what, " = \"", s, "\": expected a size such as 5GB, 500MB, 2GiB or a byte count >= 1");
}

bool is_hf_path(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) || path.ends_with(".safetensors") || path.ends_with(".index.json");
}

ModelConfig pretrained_config(const std::string& path) {
  return is_hf_path(path) ? read_hf_config(path) : read_llmc_header(path);
}

namespace {
std::unique_ptr<UnitReader> pretrained_reader(const std::string& path, Model& model) {
  if (is_hf_path(path)) return hf_weights_source(path, model);
  auto* gpt = dynamic_cast<GPT2*>(&model);
  if (!gpt)
    ZT_THROW("'", path, "' is read as an llm.c checkpoint, which holds GPT-2 models; the model is ", model.family());
  return llmc_checkpoint_source(path, *gpt);
}
}  // namespace

void load_pretrained(const std::string& path, Model& model) { pretrained_reader(path, model)->fill_model(); }

std::unique_ptr<ParamSource> pretrained_source(const std::string& path, Model& model) {
  return pretrained_reader(path, model);
}

}  // namespace zt
