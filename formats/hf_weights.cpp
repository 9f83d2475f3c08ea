// defines: save_hf_weights, is_hf_path, pretrained_config, load_pretrained, pretrained_source
//          (formats/hf_weights.h); file-local: pretrained_reader
//
// Writing Hugging Face weights and the "start from these weights" entry points
// (formats/hf_weights.h); the reader is formats/hf_reader.cpp.
#include "formats/hf_weights.h"

#include <filesystem>

#include "core/file_io.h"             // defines: AtomicFile
#include "formats/hf_config.h"        // defines: hf_config_to_json
#include "formats/hf_mapping.h"       // defines: Mapping, mapping, config_of
#include "formats/llmc_checkpoint.h"  // defines: read_llmc_header, load_llmc_checkpoint, llmc_checkpoint_source
#include "formats/safetensors.h"      // defines: SafetensorsWriter

namespace zt {

namespace fs = std::filesystem;
using namespace hf_detail;

void save_hf_weights(const std::string& dir, Model& model, DType dt) {
  for (Unit* u : model.units())
    ZT_CHECK(u->params().finalized(), "save_hf_weights: the model was built with allocate = false");
  ResidentParams values(model);
  save_hf_weights(dir, model, values, dt);
}

void save_hf_weights(const std::string& dir, Model& layout, ParamSource& values, DType dt) {
  if (dt != DType::f32 && dt != DType::bf16)
    ZT_THROW("save_hf_weights '", dir, "': dtype ", dtype_name(dt), " is not supported (float32 or bfloat16)");
  const ModelConfig& c = config_of(layout, "save_hf_weights");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) ZT_THROW("save_hf_weights: cannot create directory '", dir, "': ", ec.message());
  const std::vector<Mapping> maps = mapping(layout, "save_hf_weights");
  std::vector<SafetensorsTensorInfo> header;
  for (const Mapping& mp : maps) header.push_back({mp.hf, dt, mp.hf_shape});
  SafetensorsWriter out((fs::path(dir) / "model.safetensors").string(), std::move(header), {{"format", "pt"}});
  const std::vector<Unit*> units = layout.units();
  for (const Mapping& mp : maps) {  // one parameter in memory at a time
    const ParamSet& ps = units[mp.unit]->params();
    const ParamInfo& p = ps.infos()[mp.index];
    Tensor v = Tensor::empty(p.shape, ps.dtype(), Category::workspace, cpu_allocator());
    values.fill(mp.unit, p.offset, v.view({v.numel()}));
    if (mp.rows >= 0) v = v.slice(0, 0, mp.rows);  // padded vocabulary rows are not HF's
    if (mp.transpose) v = v.transpose(0, 1);       // (out, in) -> Conv1D (in, out)
    out.append(v.to(dt));                          // written row-major
  }
  out.commit();
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
