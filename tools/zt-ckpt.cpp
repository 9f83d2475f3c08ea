// zt-ckpt — look into ZeRO sharded checkpoints and turn them into one file (zero/checkpoint.h,
// docs/formats.md).
//
//   zt-ckpt inspect runs/gpt2                      format, step, world size, stage, model, units,
//                                                  per-rank files (bytes, checksum verified?)
//   zt-ckpt consolidate runs/gpt2 --out model.safetensors [--dtype bf16]
//   zt-ckpt consolidate runs/gpt2 --out gpt2.bin --format llmc [--dtype bf16]   (GPT-2 only)
//   zt-ckpt consolidate runs/gpt2 --out gpt2-hf --format hf [--dtype bf16]      (Hugging Face directory)
//
// PATH is a checkpoint root (its `latest` is used) or a step directory. Consolidation gathers the
// "param" tensor of every unit from every rank file (each verified first) and writes every
// parameter of the model: safetensors names are "<unit>.<param>" ("block0.attn.c_attn.weight")
// with the layout's shapes; llmc is llm.c's GPT-2 file (version 3 fp32, 5 bf16); hf is a directory
// of config.json + model.safetensors with Hugging Face's names (formats/hf_weights.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "models/gpt2.h"              // defines: GPT2
#include "formats/hf_weights.h"       // defines: save_hf_weights
#include "models/init.h"              // defines: make_model
#include "formats/llmc_checkpoint.h"  // defines: save_llmc_checkpoint
#include "formats/safetensors.h"      // defines: save_safetensors
#include "zero/checkpoint.h"          // defines: read_sharded_meta, consolidate_params

using namespace zt;
namespace fs = std::filesystem;

namespace {

std::string str_or(const nlohmann::json& j, const std::string& fallback) {
  if (j.is_null()) return fallback;
  return j.is_string() ? j.get<std::string>() : j.dump();
}

// The ZeRO stage, wherever the writer recorded it (the DeepSpeed config, or a plain field).
std::string stage_of(const nlohmann::json& meta) {
  for (const char* key : {"/zero_stage", "/training/zero_stage", "/config/zero_optimization/stage",
                          "/zero_optimization/stage", "/stage"}) {
    const nlohmann::json::json_pointer p(key);
    if (meta.contains(p)) return meta.at(p).dump();
  }
  return "(not recorded)";
}

// Returns the number of rank files that failed verification.
int inspect(const std::string& path) {
  const ShardedMeta m = read_sharded_meta(path);
  const nlohmann::json& j = m.meta;
  const int N = j.at("world_size").get<int>();
  std::printf("checkpoint:  %s\n", m.dir.c_str());
  std::printf("format:      %s version %d\n", j.at("format").get<std::string>().c_str(), j.at("version").get<int>());
  std::printf("step:        %s\n", j.at("step").dump().c_str());
  std::printf("world size:  %d\n", N);
  std::printf("stage:       %s\n", stage_of(j).c_str());
  std::printf("model:       %s\n", str_or(j.value("model", nlohmann::json()), "(not recorded)").c_str());

  int64_t numel = 0, padded = 0, per_rank = 0;
  for (const nlohmann::json& u : j.at("units")) {
    numel += u.at("numel").get<int64_t>();
    padded += u.at("padded_numel").get<int64_t>();
    per_rank += u.at("padded_numel").get<int64_t>() / N;
  }
  std::printf("units:       %zu, %lld parameters (%lld with padding)\n", j.at("units").size(),
              static_cast<long long>(numel), static_cast<long long>(padded));
  std::printf("  %-24s %14s %14s %14s %7s\n", "unit", "numel", "padded_numel", "per rank", "params");
  for (const nlohmann::json& u : j.at("units"))
    std::printf("  %-24s %14lld %14lld %14lld %7s\n", u.at("name").get<std::string>().c_str(),
                static_cast<long long>(u.at("numel").get<int64_t>()),
                static_cast<long long>(u.at("padded_numel").get<int64_t>()),
                static_cast<long long>(u.at("padded_numel").get<int64_t>() / N),
                u.contains("params") ? std::to_string(u.at("params").size()).c_str() : "-");
  std::printf("tensors per rank (each rank file, unit by unit):\n");
  for (const nlohmann::json& t : j.at("tensors")) {
    const std::string name = t.get<std::string>(), dt = j.at("dtype").at(name).get<std::string>();
    std::printf("  %-24s %14lld elements %s\n", name.c_str(), static_cast<long long>(per_rank), dt.c_str());
  }
  std::printf("files:\n");
  int bad = 0;
  for (const nlohmann::json& f : j.at("files")) {
    const std::string name = f.at("name").get<std::string>(), file = (fs::path(m.dir) / name).string();
    const int64_t expect = f.at("bytes").get<int64_t>();
    std::string status;
    if (!fs::exists(file)) {
      status = "MISSING";
    } else if (const auto size = static_cast<int64_t>(fs::file_size(file)); size != expect) {
      status = "SIZE MISMATCH: holds " + std::to_string(size) + " bytes (truncated or replaced)";
    } else {
      char sum[17];
      std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(checkpoint_file_hash(file)));
      status = sum == f.at("fnv1a64").get<std::string>() ? "checksum ok" : std::string("CORRUPTED: fnv1a64 ") + sum;
    }
    if (status != "checksum ok") ++bad;
    std::printf("  rank %-4d %-16s %14lld bytes  fnv1a64 %s  %s\n", f.at("rank").get<int>(), name.c_str(),
                static_cast<long long>(expect), f.at("fnv1a64").get<std::string>().c_str(), status.c_str());
  }
  if (bad > 0) std::fprintf(stderr, "zt-ckpt: %d of %d rank files failed verification\n", bad, N);
  return bad;
}

// The params layout of each unit: from meta.json, or (older writers) from the model it records.
void fill_layouts(const nlohmann::json& meta, std::vector<ConsolidatedUnit>& units) {
  bool all = true;
  for (const ConsolidatedUnit& u : units) all = all && !u.params.is_null();
  if (all) return;
  if (!meta.contains("model"))
    ZT_THROW("checkpoint has no parameter layout (units[].params) and no \"model\" to derive it from");
  ModelOptions opt;
  opt.allocate = false;
  std::unique_ptr<Model> model = make_model(meta.at("model").get<ModelConfig>(), opt);
  nlohmann::json layout = units_meta(*model);
  if (layout.size() != units.size())
    ZT_THROW("checkpoint holds ", units.size(), " units, its model config builds ", layout.size());
  for (size_t i = 0; i < units.size(); ++i) {
    if (layout[i].at("name") != units[i].name || layout[i].at("numel") != units[i].numel)
      ZT_THROW("checkpoint holds unit '", units[i].name, "' with ", units[i].numel, " parameters, its model config has '",
               layout[i].at("name").get<std::string>(), "' with ", layout[i].at("numel").get<int64_t>());
    if (units[i].params.is_null()) units[i].params = layout[i].at("params");
  }
}

void consolidate(const std::string& path, const std::string& out, const std::string& format, const std::string& dtype) {
  const ShardedMeta m = read_sharded_meta(path);
  std::vector<ConsolidatedUnit> units = consolidate_params(m.dir);
  int64_t total = 0;
  if (format == "llmc" || format == "hf") {
    if (!m.meta.contains("model"))
      ZT_THROW("checkpoint '", m.dir, "' records no \"model\": --format ", format, " needs the model config");
    const ModelConfig cfg = m.meta.at("model").get<ModelConfig>();
    if (format == "llmc" && cfg.family != "gpt2")
      ZT_THROW("--format llmc writes GPT-2 models only; checkpoint '", m.dir, "' holds a ", cfg.family,
               " model (use --format safetensors or hf)");
    std::unique_ptr<Model> model = make_model(cfg);
    std::vector<Unit*> mu = model->units();
    if (mu.size() != units.size())
      ZT_THROW("checkpoint '", m.dir, "' holds ", units.size(), " units, its ", cfg.family, " config builds ", mu.size());
    for (size_t i = 0; i < mu.size(); ++i) {
      ParamSet& ps = mu[i]->params();
      if (ps.unit_name() != units[i].name || ps.numel() != units[i].numel)
        ZT_THROW("checkpoint '", m.dir, "' holds unit '", units[i].name, "' with ", units[i].numel,
                 " parameters, its ", cfg.family, " config builds '", ps.unit_name(), "' with ", ps.numel());
      ps.flat().flat_view(0, {ps.numel()}).copy_(units[i].flat);
      total += ps.numel();
    }
    if (format == "hf")
      save_hf_weights(out, *model, dtype == "bf16" ? DType::bf16 : DType::f32);
    else
      save_llmc_checkpoint(out, dynamic_cast<GPT2&>(*model), dtype == "bf16" ? kLlmcVersionBF16 : kLlmcVersionF32);
  } else {
    fill_layouts(m.meta, units);
    std::vector<SafetensorsEntry> entries;
    for (const ConsolidatedUnit& u : units) {
      for (const nlohmann::json& p : u.params) {
        const std::string name = p.at("name").get<std::string>();
        const Shape shape = p.at("shape").get<Shape>();
        const int64_t off = p.at("offset").get<int64_t>();
        if (off < 0 || off + shape_numel(shape) > u.numel)
          ZT_THROW("checkpoint '", m.dir, "': parameter '", u.name, ".", name, "' at offset ", off, " with shape ",
                   shape_str(shape), " lies outside the unit's ", u.numel, " elements");
        Tensor t = u.flat.flat_view(off, shape);
        entries.push_back({u.name + "." + name, dtype == "bf16" ? t.to(DType::bf16) : t});
        total += shape_numel(shape);
      }
    }
    std::map<std::string, std::string> md = {{"format", "pt"},
                                             {"zerotensor_checkpoint", m.dir},
                                             {"step", m.meta.at("step").dump()}};
    if (m.meta.contains("model")) md["model"] = m.meta.at("model").dump();
    save_safetensors(out, entries, md);
  }
  std::printf("wrote %s: %s %s, %lld parameters from %zu units of %s (world size %d)\n", out.c_str(), format.c_str(),
              dtype.c_str(), static_cast<long long>(total), units.size(), m.dir.c_str(),
              m.meta.at("world_size").get<int>());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zt-ckpt: inspect and consolidate ZeroTensor ZeRO sharded checkpoints"};
  app.require_subcommand(1);
  std::string path, out, format = "safetensors", dtype = "fp32";
  CLI::App* ins = app.add_subcommand("inspect", "print a checkpoint's layout and verify every rank file");
  ins->add_option("path", path, "checkpoint root (uses its latest) or step directory")->required();
  CLI::App* con = app.add_subcommand("consolidate", "write every parameter into one file");
  con->add_option("path", path, "checkpoint root (uses its latest) or step directory")->required();
  con->add_option("--out", out, "output file (--format hf: output directory)")->required();
  con->add_option("--format", format, "safetensors | llmc (llm.c GPT-2) | hf (Hugging Face directory)")
      ->check(CLI::IsMember({"safetensors", "llmc", "hf"}))
      ->capture_default_str();
  con->add_option("--dtype", dtype, "fp32 | bf16")->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    if (ins->parsed()) return inspect(path) == 0 ? 0 : 1;
    consolidate(path, out, format, dtype);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt-ckpt: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
