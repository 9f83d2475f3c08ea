// defines: 2 Catch2 test cases tagged [stream_load]; helpers: six_blocks, stage3, same_bytes, slurp, Sizes,
//          sizes_of and 1 more
//
// Streaming (docs/formats.md "Streaming"): pretrained weights go into a stage-3 engine one unit
// at a time (formats/hf_weights.h's pretrained_source), and zt-ckpt consolidation writes one
// parameter at a time (train/consolidate.h). Each rank's peak is measured with the CPU
// allocator's per-category peaks (every read buffer is a Tensor of Category::workspace), and the
// values are bitwise those of the whole-model paths.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "formats/hf_weights.h"       // defines: pretrained_source, load_pretrained, save_hf_weights
#include "formats/llmc_checkpoint.h"  // defines: save_llmc_checkpoint
#include "formats/safetensors.h"      // defines: load_safetensors
#include "formats/stream_read.h"      // defines: kStreamChunkBytes
#include "models/init.h"
#include "train/consolidate.h"        // defines: consolidate_checkpoint
#include "train/trainer.h"
#include "zero/checkpoint.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

const std::string kCorpus = std::string(ZT_SOURCE_DIR) + "/data/corpus/train.txt";

// 6 blocks, so that the whole model is far above a shard plus one unit.
ModelConfig six_blocks(const std::string& name) {
  ModelConfig c = model_config(name);
  c.n_layer = 6;
  return c;
}

EngineConfig stage3() {
  RunConfig c;
  c.model = "gpt2-nano";
  c.train_data = kCorpus;
  c.engine.train_micro_batch_size_per_gpu = 1;
  c.seq_len = 16;
  c.engine.zero.stage = 3;
  c.engine.zero.stage3_param_persistence_threshold = 0;
  return c.engine;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu()).contiguous(), hb = b.to(Device::cpu()).contiguous();
  return ha.numel() == hb.numel() && ha.dtype() == hb.dtype() && std::memcmp(ha.raw(), hb.raw(), ha.nbytes()) == 0;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct Sizes {
  int64_t padded = 0, largest_unit = 0, largest_param = 0;  // elements
};
Sizes sizes_of(Model& m) {
  Sizes s;
  for (Unit* u : m.units()) {
    s.padded += u->params().padded_numel();
    s.largest_unit = std::max(s.largest_unit, u->params().padded_numel());
    for (const ParamInfo& p : u->params().infos()) s.largest_param = std::max(s.largest_param, p.numel);
  }
  return s;
}

// A seeded model (world size 1) for rank 0 to write files from.
std::unique_ptr<Model> seeded(const ModelConfig& c) {
  auto m = make_model(c);
  Rng rng(42);
  init_model(*m, rng);
  return m;
}

}  // namespace

TEST_CASE("stream load: pretrained_source into a stage-3 engine holds its shards plus one unit", "[stream_load]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size();
  const fs::path dir = fs::temp_directory_path() / ("zt_stream_load_np" + std::to_string(N));
  struct Case {
    const char* what;
    const char* model;
    std::string file;
    bool converts;  // the file's dtype or layout differs from the model's: read through the bounded buffer
    bool llama3_sharded = false;  // Llama 3's RoPE scaling, written as transformers' shards + index
  };
  const Case cases[] = {
      {"llm.c float32", "gpt2-nano", (dir / "f32.bin").string(), false},
      {"llm.c bfloat16", "gpt2-nano", (dir / "bf16.bin").string(), true},
      {"HF GPT-2 float32 (Conv1D transposes)", "gpt2-nano", (dir / "gpt2-hf").string(), true},
      {"HF Llama float32", "llama-nano", (dir / "llama-hf").string(), false},
      {"HF Llama bfloat16", "llama-nano", (dir / "llama-hf-bf16").string(), true},
      {"HF Llama 3 float32, sharded", "llama-nano", (dir / "llama3-hf-sharded").string(), false, true}};
  // The Llama 3 case: llama3.2-1b's RoPE scaling on the small shape, shards of at most 16 KiB.
  const auto config_of = [](const Case& k) {
    ModelConfig c = six_blocks(k.model);
    if (k.llama3_sharded) {
      c.rope_theta = 500000.0;
      c.rope_scaling = model_config("llama3.2-1b").rope_scaling;
    }
    return c;
  };
  if (g.rank() == 0) {
    fs::create_directories(dir);
    auto gpt = seeded(six_blocks("gpt2-nano"));
    save_llmc_checkpoint(cases[0].file, dynamic_cast<GPT2&>(*gpt), kLlmcVersionF32);
    save_llmc_checkpoint(cases[1].file, dynamic_cast<GPT2&>(*gpt), kLlmcVersionBF16);
    save_hf_weights(cases[2].file, *gpt);
    auto llama = seeded(six_blocks("llama-nano"));
    save_hf_weights(cases[3].file, *llama);
    save_hf_weights(cases[4].file, *llama, DType::bf16);
    save_hf_weights(cases[5].file, *seeded(config_of(cases[5])), DType::f32, 16 * 1024);
    REQUIRE(fs::exists(fs::path(cases[5].file) / "model.safetensors.index.json"));
  }
  g.barrier();
  for (const Case& k : cases) {
    INFO(k.what << ", " << N << " ranks");
    const ModelConfig cfg = config_of(k);
    ModelOptions o;
    o.world_size = N;
    o.alignment = kShardAlignment;
    auto whole = make_model(cfg, o);  // the reference: the whole model loaded, then sharded
    load_pretrained(k.file, *whole);
    auto a = initialize(*whole, stage3(), g);

    o.materialize = false;
    auto lazy = make_model(cfg, o);
    const Sizes s = sizes_of(*lazy);
    cpu_allocator().reset_peaks();
    const int64_t p0 = cpu_allocator().stats().cur(Category::params);
    const int64_t w0 = cpu_allocator().stats().cur(Category::workspace);
    std::unique_ptr<Engine> b;
    {
      std::unique_ptr<ParamSource> src = pretrained_source(k.file, *lazy);
      b = initialize(*lazy, stage3(), g, src.get());
    }
    const int64_t params_peak = cpu_allocator().stats().max(Category::params) - p0;
    const int64_t read_peak = cpu_allocator().stats().max(Category::workspace) - w0;
    const int64_t shards = s.padded / N * 4, unit = s.largest_unit * 4;  // bytes, float32
    const int64_t io = k.converts ? std::min<int64_t>(kStreamChunkBytes, s.largest_param * 4) : 0;
    INFO("params peak " << params_peak << " B (shards " << shards << " B), read peak " << read_peak
                        << " B (largest unit " << unit << " B, I/O buffer <= " << io << " B), whole model "
                        << s.padded * 4 << " B");
    CHECK(params_peak <= shards + unit / N);  // the shards + the one being made
    CHECK(read_peak <= unit + io);            // one unit read from the file (+ a conversion buffer)
    CHECK(read_peak > 0);                     // it was read through the allocator's eyes
    if (N > 1) CHECK(params_peak + read_peak < s.padded * 4);

    const std::vector<CheckpointShard> sa = a->shards(), sb = b->shards();
    REQUIRE(sa.size() == sb.size());
    for (size_t u = 0; u < sa.size(); ++u)
      for (size_t t = 0; t < sa[u].tensors.size(); ++t) {
        INFO("unit " << sa[u].unit << " tensor " << sa[u].tensors[t].first);
        CHECK(same_bytes(sa[u].tensors[t].second, sb[u].tensors[t].second));
      }
  }
  g.barrier();
  if (g.rank() == 0) fs::remove_all(dir);
}

TEST_CASE("stream load: consolidation holds one parameter at a time, and writes the same bytes", "[stream_load]") {
  ProcessGroup& g = init_process_group();
  const int N = g.size(), r = g.rank();
  const fs::path dir = fs::temp_directory_path() / ("zt_stream_consolidate_np" + std::to_string(N));
  for (const char* name : {"gpt2-nano", "llama-nano"}) {
    INFO(name << ", " << N << " ranks");
    const ModelConfig cfg = six_blocks(name);
    ModelOptions o;
    o.world_size = N;
    o.alignment = kShardAlignment;
    auto m = make_model(cfg, o);
    Rng rng(5);
    init_model(*m, rng);
    std::vector<CheckpointShard> shards;  // this rank's "param" shards, views into the model
    for (Unit* u : m->units()) {
      const ParamSet& ps = u->params();
      const int64_t S = ps.padded_numel() / N;
      shards.push_back(
          {ps.unit_name(), ps.numel(), ps.padded_numel(), {{"param", ps.flat().flat_view(r * S, {S})}}, {}});
    }
    const nlohmann::json meta = {{"model", cfg}, {"units", units_meta(*m)}};
    save_sharded_checkpoint(g, (dir / "ck").string(), 7, meta, shards);
    if (r == 0) {
      const Sizes s = sizes_of(*m);
      struct Out {
        const char* format;
        DType dt;
        std::string path, reference;  // reference: the whole model written directly ("" = compare values)
      };
      std::vector<Out> outs = {{"safetensors", DType::f32, (dir / "c.safetensors").string(), ""},
                               {"safetensors", DType::bf16, (dir / "c-bf16.safetensors").string(), ""},
                               {"hf", DType::f32, (dir / "c-hf").string(), (dir / "ref-hf").string()},
                               {"hf", DType::bf16, (dir / "c-hf-bf16").string(), (dir / "ref-hf-bf16").string()}};
      if (cfg.family == "gpt2") {
        outs.push_back({"llmc", DType::f32, (dir / "c.bin").string(), (dir / "ref.bin").string()});
        outs.push_back({"llmc", DType::bf16, (dir / "c-bf16.bin").string(), (dir / "ref-bf16.bin").string()});
      }
      for (const Out& out : outs) {
        INFO(out.format << " " << dtype_name(out.dt));
        cpu_allocator().reset_peaks();
        const int64_t w0 = cpu_allocator().stats().cur(Category::workspace);
        const ConsolidateResult res = consolidate_checkpoint((dir / "ck").string(), out.path, out.format, out.dt);
        const int64_t peak = cpu_allocator().stats().max(Category::workspace) - w0;
        INFO("consolidation peak " << peak << " B; largest parameter " << s.largest_param * 4 << " B, largest unit "
                                   << s.largest_unit * 4 << " B, whole model " << s.padded * 4 << " B");
        CHECK(res.params == m->num_params());
        CHECK(peak > 0);
        CHECK(peak <= 2 * s.largest_param * 4);                   // one parameter (float32) + its converted copy
        CHECK(peak <= s.largest_unit * 4 + s.largest_param * 4);  // below the largest unit + an I/O buffer
        CHECK(peak < s.padded * 4 / 2);
        if (!out.reference.empty()) {
          if (std::string(out.format) == "hf") {
            save_hf_weights(out.reference, *m, out.dt);
            for (const char* f : {"model.safetensors", "config.json"})
              CHECK(slurp(out.path + "/" + f) == slurp(out.reference + "/" + f));
          } else {
            save_llmc_checkpoint(out.reference, dynamic_cast<GPT2&>(*m),
                                 out.dt == DType::bf16 ? kLlmcVersionBF16 : kLlmcVersionF32);
            CHECK(slurp(out.path) == slurp(out.reference));
          }
        } else {
          const SafetensorsFile f = load_safetensors(out.path);
          for (Unit* u : m->units())
            for (int i = 0; i < u->params().size(); ++i) {
              const std::string n = u->params().unit_name() + "." + u->params().infos()[i].name;
              INFO(n);
              CHECK(same_bytes(f.get(n), u->params().value(i).to(out.dt)));
            }
        }
      }
    }
    g.barrier();
    if (r == 0) fs::remove_all(dir);
  }
}
