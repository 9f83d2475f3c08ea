// defines: main (zt-ckpt); helpers: str_or, stage_of, inspect, consolidate
//
// zt-ckpt — look into ZeRO sharded checkpoints and turn them into one file (zero/checkpoint.h,
// docs/formats.md).
//
//   zt-ckpt inspect runs/gpt2                      format, step, world size, stage, model, units,
//                                                  per-rank files (bytes, checksum verified?)
//   zt-ckpt consolidate runs/gpt2 --out model.safetensors [--dtype bf16]
//   zt-ckpt consolidate runs/gpt2 --out gpt2.bin --format llmc [--dtype bf16]   (GPT-2 only)
//   zt-ckpt consolidate runs/gpt2 --out gpt2-hf --format hf [--dtype bf16] [--shard-size 5GB]  (Hugging Face directory)
//
// PATH is a checkpoint root (its `latest` is used) or a step directory. Consolidation
// (train/consolidate.h) streams the "param" tensor from every rank file (each verified) into the
// output one parameter at a time, and writes every parameter of the model: safetensors names are "<unit>.<param>" ("block0.attn.c_attn.weight")
// with the layout's shapes; llmc is llm.c's GPT-2 file (version 3 fp32, 5 bf16); hf is a directory
// of config.json + model.safetensors with Hugging Face's names (formats/hf_weights.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "train/consolidate.h"  // defines: consolidate_checkpoint
#include "zero/checkpoint.h"     // defines: read_sharded_meta, checkpoint_file_hash

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

void consolidate(const std::string& path, const std::string& out, const std::string& format, const std::string& dtype,
                 const std::string& shard_size) {
  const ConsolidateResult r = consolidate_checkpoint(path, out, format, dtype == "bf16" ? DType::bf16 : DType::f32,
                                                     parse_shard_size(shard_size, "--shard-size"));
  std::printf("wrote %s: %s %s, %lld parameters from %d units of %s (world size %d)\n", out.c_str(), format.c_str(),
              dtype.c_str(), static_cast<long long>(r.params), r.units, r.dir.c_str(), r.world_size);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zt-ckpt: inspect and consolidate ZeroTensor ZeRO sharded checkpoints"};
  app.require_subcommand(1);
  std::string path, out, format = "safetensors", dtype = "fp32", shard_size = "5GB";
  CLI::App* ins = app.add_subcommand("inspect", "print a checkpoint's layout and verify every rank file");
  ins->add_option("path", path, "checkpoint root (uses its latest) or step directory")->required();
  CLI::App* con = app.add_subcommand("consolidate", "write every parameter into one file");
  con->add_option("path", path, "checkpoint root (uses its latest) or step directory")->required();
  con->add_option("--out", out, "output file (--format hf: output directory)")->required();
  con->add_option("--format", format, "safetensors | llmc (llm.c GPT-2) | hf (Hugging Face directory)")
      ->check(CLI::IsMember({"safetensors", "llmc", "hf"}))
      ->capture_default_str();
  con->add_option("--dtype", dtype, "fp32 | bf16")->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  con->add_option("--shard-size", shard_size,
                  "--format hf: the largest weight file (transformers' max_shard_size); past it, shards and an index")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    if (ins->parsed()) return inspect(path) == 0 ? 0 : 1;
    consolidate(path, out, format, dtype, shard_size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt-ckpt: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
