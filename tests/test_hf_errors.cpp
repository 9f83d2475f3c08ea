// defines: 5 Catch2 test cases tagged [hf]; helpers: Good, good_gpt2, read_bytes, write_bytes,
//          write_with_header
//
// formats: every bad Hugging Face checkpoint ZeroTensor refuses, through load_hf_weights /
// read_hf_config, with a message naming the file, the tensor and what was expected and found.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "core/json.h"  // read_json_file
#include "formats/hf_config.h"
#include "formats/hf_weights.h"
#include "models/init.h"
#include "tests/hf_test_util.h"
#include "tests/temp_dir.h"

using namespace zt;
using namespace zt::test;
namespace fs = std::filesystem;

namespace {

// A valid GPT-2 HF directory of `m` in `dir` (tensors `ts`, config.json), the raw file bytes.
struct Good {
  ModelConfig cfg;
  std::unique_ptr<GPT2> model;
  std::vector<RawTensor> ts;
};
Good good_gpt2() {
  Good g;
  g.cfg = small_hf_gpt2();
  g.cfg.padded_vocab_size = g.cfg.vocab_size;
  g.model = std::make_unique<GPT2>(g.cfg);
  Rng rng(3);
  init_model(*g.model, rng);
  g.ts = hf_gpt2_raw(*g.model, "F32");
  return g;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}
void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}
// A file of an 8-byte length + `header` + `data` bytes.
void write_with_header(const std::string& path, const std::string& header, size_t data_bytes, uint64_t len = 0) {
  std::vector<char> b(8);
  const uint64_t n = len ? len : header.size();
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  write_bytes(path, b);
}

}  // namespace

TEST_CASE("HF weights: malformed safetensors files are refused through the HF path", "[hf]") {
  TempDir tmp("hf_malformed");
  Good g = good_gpt2();
  const std::string dir = tmp.dir.string(), file = tmp.file("model.safetensors");
  write_text(tmp.file("config.json"), gpt2_config_json(g.cfg));
  GPT2 m(g.cfg);
  auto load = [&] { load_hf_weights(dir, m); };

  write_raw_safetensors(file, g.ts);
  REQUIRE_NOTHROW(load());

  write_with_header(file, "this is not json", 16);
  CHECK_THROWS_WITH(load(), Catch::Contains(file) && Catch::Contains("not valid JSON"));
  write_with_header(file, "[1, 2]  ", 0);
  CHECK_THROWS_WITH(load(), Catch::Contains("not a JSON object"));
  write_with_header(file, "{}", 0, 1u << 20);
  CHECK_THROWS_WITH(load(), Catch::Contains("header length 1048576 runs past the end of the file"));
  write_bytes(file, {1, 0, 0});
  CHECK_THROWS_WITH(load(), Catch::Contains("less than the 8-byte header length"));
  write_with_header(file, R"({"wte.weight": {"dtype": "F32", "shape": [2]}})", 8);
  CHECK_THROWS_WITH(load(), Catch::Contains("tensor 'wte.weight'") && Catch::Contains("data_offsets"));
  write_with_header(file, R"({"wte.weight": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 8]}})", 8);
  CHECK_THROWS_WITH(load(), Catch::Contains("tensor 'wte.weight'") && Catch::Contains("unknown dtype 'Q4_K'"));
  write_with_header(file,
                    R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                    R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                    12);
  CHECK_THROWS_WITH(load(), Catch::Contains("tensor 'b' starts at data byte 4") && Catch::Contains("overlaps"));
  write_with_header(file, R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [64, 72]}})", 8);
  CHECK_THROWS_WITH(load(), Catch::Contains("tensor 'a' ends at data byte 72, past the end"));
  write_with_header(file, R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8);
  CHECK_THROWS_WITH(load(), Catch::Contains("tensor 'a'") && Catch::Contains("needs 12 bytes"));

  write_raw_safetensors(file, g.ts);  // a good file cut short: the last tensor runs past the end
  std::vector<char> b = read_bytes(file);
  b.resize(b.size() - 10);
  write_bytes(file, b);
  CHECK_THROWS_WITH(load(), Catch::Contains("tensor 'ln_f.bias' ends at data byte") && Catch::Contains("truncated"));
}

TEST_CASE("HF weights: wrong, missing and extra tensors are named", "[hf]") {
  TempDir tmp("hf_tensors");
  Good g = good_gpt2();
  const std::string dir = tmp.dir.string(), file = tmp.file("model.safetensors");
  write_text(tmp.file("config.json"), gpt2_config_json(g.cfg));
  GPT2 m(g.cfg);
  auto load_with = [&](std::vector<RawTensor> ts) {
    write_raw_safetensors(file, ts);
    load_hf_weights(dir, m);
  };
  auto find = [](std::vector<RawTensor>& ts, const std::string& name) -> RawTensor& {
    for (RawTensor& t : ts)
      if (t.name == name) return t;
    throw std::runtime_error("test: no " + name);
  };

  {  // our layout (out, in) instead of Conv1D's (in, out)
    std::vector<RawTensor> ts = g.ts;
    find(ts, "h.1.attn.c_attn.weight").shape = {48, 16};
    CHECK_THROWS_WITH(load_with(ts), Catch::Contains(file) && Catch::Contains("tensor 'h.1.attn.c_attn.weight'") &&
                                         Catch::Contains("is (48, 16) F32, expected (16, 48)") &&
                                         Catch::Contains("Conv1D"));
  }
  {  // an integer tensor where a weight belongs
    std::vector<RawTensor> ts = g.ts;
    find(ts, "ln_f.weight").dtype = "I32";
    CHECK_THROWS_WITH(load_with(ts), Catch::Contains("tensor 'ln_f.weight'") && Catch::Contains("(16,) I32") &&
                                         Catch::Contains("expected (16,) F32, BF16, F16 or F64"));
  }
  {  // a missing parameter
    std::vector<RawTensor> ts = g.ts;
    ts.erase(ts.begin() + 5);
    const std::string missing = "tensor '" + g.ts[5].name + "'", from = "is missing from '" + file + "'";
    CHECK_THROWS_WITH(load_with(ts), Catch::Contains(missing) && Catch::Contains(from));
  }
  {  // an extra tensor that is not a parameter of this model (a third layer)
    std::vector<RawTensor> ts = g.ts;
    ts.push_back({"transformer.h.2.ln_1.weight", "F32", {16}, encode(std::vector<double>(16, 1.0), "F32")});
    CHECK_THROWS_WITH(load_with(ts), Catch::Contains("tensor 'transformer.h.2.ln_1.weight'") &&
                                         Catch::Contains("is not a parameter of this gpt2 model (2 layers)"));
  }
  {  // an untied lm_head: our GPT-2 ties it
    std::vector<RawTensor> ts = g.ts;
    std::vector<double> w = decode(ts[0].bytes, "F32");
    w[7] += 1.0;
    ts.push_back({"lm_head.weight", "F32", ts[0].shape, encode(w, "F32")});
    CHECK_THROWS_WITH(load_with(ts),
                      Catch::Contains("'lm_head.weight'") && Catch::Contains("differs from the input embedding"));
  }
  {  // the same parameter twice (with and without the prefix)
    std::vector<RawTensor> ts = g.ts;
    ts.push_back(ts[1]);
    ts.back().name.insert(0, "transformer.");
    CHECK_THROWS_WITH(load_with(ts), Catch::Contains("are the same parameter 'wpe.weight'"));
  }
}

TEST_CASE("HF weights: config.json problems and a model that does not match", "[hf]") {
  TempDir tmp("hf_config");
  Good g = good_gpt2();
  const std::string dir = tmp.dir.string();
  write_raw_safetensors(tmp.file("model.safetensors"), g.ts);
  // The Llama configs below that parse are read as config.json alone (parsed): read_hf_config
  // also holds a config against the weights, which here are GPT-2's.
  auto parsed = [&] {
    return hf_config_from_json(read_json_file(tmp.file("config.json"), "test config"), "'config.json'");
  };
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("no config.json") && Catch::Contains("head count"));
  CHECK_THROWS_WITH(read_hf_config(tmp.file("model.safetensors")), Catch::Contains("no config.json"));
  write_text(tmp.file("config.json"), "{\"model_type\": \"gpt2\", ");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("config.json' is not valid JSON"));
  write_text(tmp.file("config.json"), R"({"model_type": "bert", "hidden_size": 16})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("model_type \"bert\" is not supported"));
  write_text(tmp.file("config.json"),
             R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 16, "vocab_size": 50, "n_positions": 12})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("missing key \"n_head\""));
  write_text(
      tmp.file("config.json"),
      R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 16, "n_head": "2", "vocab_size": 50, "n_positions": 12})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("\"n_head\" must be a positive integer, got \"2\""));
  write_text(tmp.file("config.json"),
             R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 16, "n_head": 3, "vocab_size": 50, "n_positions": 12})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("n_embd 16 is not divisible by n_head 3"));
  write_text(
      tmp.file("config.json"),
      R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 16, "n_head": 2, "vocab_size": 50, "n_positions": 12, "activation_function": "relu"})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("\"activation_function\" = \"relu\" is not supported"));
  write_text(
      tmp.file("config.json"),
      R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 12, "vocab_size": 50, "rope_scaling": {"type": "linear", "factor": 2.0}})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("rope_scaling.type \"linear\" is not supported"));
  // Llama 3's scaling loads (the keys of meta-llama/Llama-3.2-1B's config.json); the other types
  // are refused by name, a llama3 scaling with a bad or unknown key names it.
  const std::string l3_head =
      R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 12, "vocab_size": 50, "rope_scaling": )";
  write_text(
      tmp.file("config.json"),
      l3_head +
          R"({"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  const ModelConfig l3 = parsed();
  CHECK(l3.rope_scaling == RopeScaling{RopeScaling::Type::llama3, 32.0, 1.0, 4.0, 8192});
  CHECK(hf_config_from_json(hf_config_to_json(l3, DType::bf16), "round trip") == l3);
  write_text(tmp.file("config.json"), l3_head + R"({"rope_type": "yarn", "factor": 4.0}})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("rope_scaling.rope_type \"yarn\" is not supported"));
  write_text(tmp.file("config.json"), l3_head + R"({"rope_type": "default"}})");
  CHECK(parsed().rope_scaling == RopeScaling{});
  write_text(
      tmp.file("config.json"),
      l3_head +
          R"({"rope_type": "llama3", "factor": 0.5, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("factor 0.5 must be a finite number >= 1"));
  write_text(tmp.file("config.json"),
             l3_head + R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("needs a number \"original_max_position_embeddings\""));
  write_text(
      tmp.file("config.json"),
      l3_head +
          R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64, "mscale": 2.0}})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("key \"mscale\" is not supported"));
  // transformers 5's one object, "rope_parameters" (theta inside); 4.x keys beside it must agree
  const std::string v5 = R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 12, "vocab_size": 50, )";
  write_text(tmp.file("config.json"), v5 + R"("rope_parameters": {"rope_type": "default", "rope_theta": 500.0}})");
  CHECK(parsed().rope_theta == 500.0);
  CHECK(parsed().rope_scaling == RopeScaling{});
  write_text(tmp.file("config.json"), v5 + R"("rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
  CHECK(parsed().rope_theta == 500000.0);
  CHECK(parsed().rope_scaling == RopeScaling{RopeScaling::Type::llama3, 32.0, 1.0, 4.0, 8192});
  write_text(tmp.file("config.json"), v5 + R"("rope_theta": 10000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("\"rope_theta\" = 10000 but rope_parameters.rope_theta = 500"));
  write_text(tmp.file("config.json"), v5 + R"("rope_parameters": {"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0}})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("rope_type \"yarn\" is not supported"));
  write_text(
      tmp.file("config.json"),
      R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 12, "vocab_size": 50, "attention_bias": true})");
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("\"attention_bias\" = true is not supported"));

  // A model whose shape differs from config.json (heads do not show in the tensor shapes).
  write_text(tmp.file("config.json"), gpt2_config_json(g.cfg));
  ModelConfig four = g.cfg;
  four.n_head = four.n_kv_head = 4;
  GPT2 m4(four);
  CHECK_THROWS_WITH(load_hf_weights(dir, m4),
                    Catch::Contains("does not match the model: n_head is 2 in config.json but 4"));
  std::unique_ptr<Model> llama = make_model(small_hf_llama(false));
  CHECK_THROWS_WITH(load_hf_weights(dir, *llama), Catch::Contains("holds a gpt2 model, the model is llama"));

  fs::remove(tmp.file("model.safetensors"));
  GPT2 m(g.cfg);
  CHECK_THROWS_WITH(load_hf_weights(dir, m),
                    Catch::Contains("neither model.safetensors nor model.safetensors.index.json"));
  write_text(tmp.file("pytorch_model.bin"), "pickle");
  CHECK_THROWS_WITH(load_hf_weights(dir, m), Catch::Contains("pytorch_model.bin, a pickle"));
  CHECK_THROWS_WITH(load_hf_weights(tmp.file("nothing.safetensors"), m), Catch::Contains("no such file"));
  CHECK_THROWS_WITH(load_hf_weights(tmp.file("weights.pt"), m), Catch::Contains("expected a directory"));
  write_text(tmp.file("model.safetensors.index.json"), R"({"weight_map": []})");
  CHECK_THROWS_WITH(load_hf_weights(dir, m), Catch::Contains("index.json': expected {\"weight_map\""));
}

TEST_CASE("HF weights: sizes config.json claims beyond the files are refused before a model is built", "[hf]") {
  // read_hf_config returns a config only once the files back it (a caller builds and allocates
  // the model next): the layers named in the tensors, then each width against the tensor that
  // carries it. Every error names config.json, the key, the value, the tensor or layers the files
  // hold and the file. The same errors come from load_hf_weights and pretrained_config.
  TempDir tmp("hf_claims");
  Good g = good_gpt2();  // 2 layers, n_embd 16, n_head 2, n_inner 64, n_positions 12, vocab 50
  const std::string dir = tmp.dir.string(), cfg = tmp.file("config.json"), file = tmp.file("model.safetensors");
  write_raw_safetensors(file, g.ts);
  auto refused = [&](const std::string& config_text, const std::vector<std::string>& named) {
    write_text(cfg, config_text);
    auto all_named = Catch::Contains("'" + cfg + "' has ");
    for (const std::string& n : named) CHECK_THROWS_WITH(read_hf_config(dir), all_named && Catch::Contains(n));
    CHECK_THROWS_WITH(pretrained_config(dir), all_named && Catch::Contains(named[0]));
    CHECK_THROWS_WITH(load_hf_weights(dir, *g.model), all_named && Catch::Contains(named[0]));
  };
  auto gpt2_with = [&](auto change) {
    ModelConfig c = g.cfg;
    change(c);
    return gpt2_config_json(c);
  };

  refused(gpt2_with([](ModelConfig& c) { c.n_layer = 1000000; }),
          {"n_layer = 1000000, but '" + file + "' holds layers 0..1 (999998 layers missing: 2..999999)"});
  refused(gpt2_with([](ModelConfig& c) { c.n_embd = 1 << 20; }),
          {"n_embd = 1048576, but tensor 'wte.weight' in '" + file + "' is (50, 16) F32, which holds n_embd = 16"});
  refused(gpt2_with([](ModelConfig& c) { c.vocab_size = 1000000000; }),
          {"vocab_size = 1000000000, but tensor 'wte.weight'", "which holds vocab_size = 50"});
  refused(gpt2_with([](ModelConfig& c) { c.max_seq_len = 1 << 24; }),
          {"n_positions = 16777216, but tensor 'wpe.weight'", "is (12, 16) F32, which holds n_positions = 12"});
  std::string inner = gpt2_config_json(g.cfg);
  inner.replace(inner.find("\"n_inner\": null"), 15, "\"n_inner\": 1000000");
  refused(inner, {"n_inner = 1000000, but tensor 'h.0.mlp.c_fc.weight'", "(16, 64) F32, which holds n_inner = 64"});

  // transformers' own prefix ("transformer.h.0..."): the layers are found the same, and the
  // error gives the name the file uses.
  write_raw_safetensors(file, hf_gpt2_raw(*g.model, "F32", "transformer."));
  refused(gpt2_with([](ModelConfig& c) { c.n_layer = 7; }), {"n_layer = 7, but '" + file + "' holds layers 0..1"});
  refused(gpt2_with([](ModelConfig& c) { c.vocab_size = 64; }),
          {"vocab_size = 64, but tensor 'transformer.wte.weight'"});
  fs::remove(file);

  // Llama: 3 layers written, layer 1 left out; then every width key.
  ModelConfig lc = small_hf_llama(false);  // hidden 16, 4 heads, 2 kv heads, intermediate 40, vocab 50
  lc.n_layer = 3;
  lc.padded_vocab_size = lc.vocab_size;
  Llama lm(lc);
  Rng rng(9);
  init_model(lm, rng);
  std::vector<RawTensor> lts;
  for (RawTensor& t : hf_llama_raw(lm, "BF16"))
    if (!t.name.starts_with("model.layers.1.")) lts.push_back(std::move(t));
  write_raw_safetensors(file, lts);
  auto llama_with = [&](auto change) {
    ModelConfig c = lc;
    change(c);
    return llama_config_json(c);
  };
  refused(llama_config_json(lc), {"num_hidden_layers = 3, but '" + file + "' holds layers 0, 2 (1 layer missing: 1)"});
  refused(llama_with([](ModelConfig& c) { c.n_layer = 1000000; }),
          {"num_hidden_layers = 1000000, but '" + file + "' holds layers 0, 2 (999998 layers missing: 1, 3..999999)"});
  lts = hf_llama_raw(lm, "BF16");  // all three layers
  write_raw_safetensors(file, lts);
  write_text(cfg, llama_config_json(lc));
  REQUIRE(read_hf_config(dir).n_layer == 3);
  refused(llama_with([](ModelConfig& c) { c.n_embd = 1 << 16; }),
          {"hidden_size = 65536, but tensor 'model.embed_tokens.weight' in '" + file +
           "' is (50, 16) BF16, which holds hidden_size = 16"});
  refused(llama_with([](ModelConfig& c) { c.vocab_size = c.padded_vocab_size = 1 << 30; }),
          {"vocab_size = 1073741824, but tensor 'model.embed_tokens.weight'", "which holds vocab_size = 50"});
  refused(llama_with([](ModelConfig& c) { c.ffn_hidden = 100000000; }),
          {"intermediate_size = 100000000, but tensor 'model.layers.0.mlp.gate_proj.weight'",
           "is (40, 16) BF16, which holds intermediate_size = 40"});
  refused(llama_with([](ModelConfig& c) { c.n_kv_head = 4; }),
          {"num_key_value_heads = 4, but tensor 'model.layers.0.self_attn.k_proj.weight'",
           "is (8, 16) BF16, which holds 2 kv heads of head_dim 4 = hidden_size / num_attention_heads"});
  refused(llama_with([](ModelConfig& c) { c.n_head = c.n_kv_head = 2; }),  // head_dim 8: k_proj would be (16, 16)
          {"num_key_value_heads = 2, but tensor 'model.layers.0.self_attn.k_proj.weight'",
           "which holds 1 kv head of head_dim 8"});
  fs::remove(file);

  // Sharded: the layers of every shard together; a shard cut short is named with its file.
  ModelConfig two = lc;
  two.n_layer = 2;
  Llama l2(two);
  init_model(l2, rng);
  save_hf_weights(dir, l2, DType::f32, 4000);
  const std::string index = tmp.file("model.safetensors.index.json");
  REQUIRE(fs::exists(index));
  std::vector<std::string> shards;
  for (const auto& e : fs::directory_iterator(tmp.dir))
    if (e.path().filename().string().starts_with("model-")) shards.push_back(e.path().string());
  std::sort(shards.begin(), shards.end());
  REQUIRE(shards.size() > 2);
  const std::string shard = shards[1];
  refused(llama_config_json(lc), {"num_hidden_layers = 3, but the " + std::to_string(shards.size()) + " shards of '" +
                                  index + "' hold layers 0..1 (1 layer missing: 2)"});
  write_text(cfg, llama_config_json(two));
  REQUIRE(read_hf_config(dir) == two);
  std::vector<char> b = read_bytes(shard);
  b.resize(b.size() - 4);
  write_bytes(shard, b);
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Contains("safetensors file '" + shard + "': tensor '") &&
                                             Catch::Contains("past the end of the file's") &&
                                             Catch::Contains("(truncated?)"));
}

TEST_CASE("HF weights: pretrained_config / load_pretrained dispatch HF and llm.c", "[hf]") {
  const std::string bin = std::string(ZT_SOURCE_DIR) + "/tests/data/gpt2_tiny.bin";
  CHECK_FALSE(is_hf_path(bin));
  CHECK(is_hf_path("x/model.safetensors"));
  CHECK(is_hf_path("x/model.safetensors.index.json"));
  const ModelConfig c = pretrained_config(bin);
  CHECK(c.padded_vocab_size == 256);
  std::unique_ptr<Model> m = make_model(c);
  load_pretrained(bin, *m);
  std::unique_ptr<Model> l = make_model(small_hf_llama(false));
  CHECK_THROWS_WITH(load_pretrained(bin, *l), Catch::Contains("llm.c checkpoint, which holds GPT-2 models"));
}
