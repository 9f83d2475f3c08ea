// defines: 7 Catch2 test cases tagged [hf], [llmc], [reference]; helpers: some_ids, logits_of,
//          check_params_equal, fresh, Where, where_is and 1 more
//
// formats: Hugging Face weights (formats/hf_weights.h): round trips for GPT-2 and Llama in float32
// and bfloat16, files laid out as other tools write them (written byte by byte here), sharded
// checkpoints, an independent cross-check against the llm.c mapping and PyTorch's numbers, and
// the RoPE convention checked numerically (HF's rotate_half; Meta's interleaved + permutation).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "formats/hf_config.h"
#include "formats/hf_weights.h"
#include "models/init.h"
#include "formats/llmc_checkpoint.h"
#include "formats/safetensors.h"
#include "formats/token_data.h"
#include "tests/bitwise.h"
#include "tests/hf_test_util.h"
#include "tests/temp_dir.h"

using namespace zt;
using namespace zt::test;
namespace fs = std::filesystem;

namespace {

Tensor some_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  Tensor idx = Tensor::empty({B, T}, DType::i32);
  uint64_t s = seed;
  for (int64_t i = 0; i < B * T; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    idx.data<int32_t>()[i] = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(V));
  }
  return idx;
}

// Logits (B, T, V) in float32 over the real vocabulary.
Tensor logits_of(Model& m, const Tensor& idx) {
  NoGradGuard ng;
  Tensor l = m.logits(idx).value();
  return l.slice(2, 0, m.vocab_size()).to(DType::f32).contiguous();
}

using test::bitwise_equal;

// Every parameter of a and b (same family and layout) bitwise equal.
void check_params_equal(Model& a, Model& b) {
  std::vector<Unit*> ua = a.units(), ub = b.units();
  REQUIRE(ua.size() == ub.size());
  for (size_t u = 0; u < ua.size(); ++u)
    for (int i = 0; i < ua[u]->params().size(); ++i) {
      INFO(ua[u]->params().unit_name() << "." << ua[u]->params().infos()[i].name);
      CHECK(bitwise_equal(ua[u]->params().value(i), ub[u]->params().value(i)));
    }
}

std::unique_ptr<Model> fresh(const ModelConfig& c, uint64_t seed, DType dt = DType::f32) {
  ModelOptions o;
  o.dtype = dt;
  std::unique_ptr<Model> m = make_model(c, o);
  Rng rng(seed);
  init_model(*m, rng);
  // Norm gains and biases away from 1 / 0, so a swapped or dropped one shows.
  for (Unit* u : m->units())
    for (int i = 0; i < u->params().size(); ++i)
      if (u->params().infos()[i].shape.size() == 1) {
        Tensor v = u->params().value(i);
        rng.fill_normal(v, 0.5, 0.1);
      }
  return m;
}

// The unit and parameter an HF tensor name stands for, spelled out here by hand (independent of
// the table in formats/hf_weights.cpp): GPT-2 block matrices are Conv1D (transposed), vocabulary
// matrices hold the first V rows.
struct Where {
  Unit* unit = nullptr;
  std::string param;
  bool transpose = false;
  int64_t rows = -1;
};
Where where_is(Model& m, std::string hf) {
  Where w;
  std::string unit;
  if (m.family() == "gpt2") {
    if (hf.starts_with("h.")) {
      const size_t dot = hf.find('.', 2);
      unit = hf.substr(0, dot), w.param = hf.substr(dot + 1);
      w.transpose = w.param.ends_with(".weight") && !w.param.starts_with("ln_");
    } else {
      unit = hf.starts_with("ln_f.") ? "head" : "embed", w.param = hf;
    }
    if (hf == "wte.weight") w.rows = m.vocab_size();
  } else {
    if (hf.starts_with("model.")) hf = hf.substr(6);
    if (hf.starts_with("layers.")) {
      const size_t dot = hf.find('.', 7);
      unit = hf.substr(0, dot), w.param = hf.substr(dot + 1);
    } else {
      unit = hf.starts_with("embed_tokens.") ? "embed" : "head", w.param = hf;
    }
    if (hf == "embed_tokens.weight" || hf == "lm_head.weight") w.rows = m.vocab_size();
  }
  for (Unit* u : m.units())
    if (u->params().unit_name() == unit) w.unit = u;
  if (!w.unit) throw std::runtime_error("test: no unit for " + hf);
  return w;
}

// Every tensor of `raw` (HF names, any encoding) is in `m` with exactly the file's values.
void check_holds(Model& m, const std::vector<RawTensor>& raw) {
  for (const RawTensor& t : raw) {
    INFO(t.name << " " << t.dtype);
    const Where w = where_is(m, t.name);
    CHECK(values(*w.unit, w.param, w.rows, w.transpose) == decode(t.bytes, t.dtype));
  }
}

}  // namespace

TEST_CASE("HF weights: export then import is lossless (float32, bfloat16)", "[hf]") {
  TempDir tmp("hf_roundtrip");
  for (const ModelConfig& c : {small_hf_gpt2(), small_hf_llama(false), small_hf_llama(true)}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      INFO(c.family << " tied " << c.tie_embeddings << " " << dtype_name(dt));
      const std::string dir = tmp.file(c.family + (c.tie_embeddings ? "_tied_" : "_") + dtype_name(dt));
      std::unique_ptr<Model> a = fresh(c, 7, dt);  // a bf16 model exported as bf16 loses nothing
      save_hf_weights(dir, *a, dt);
      REQUIRE(fs::exists(dir + "/config.json"));
      REQUIRE(fs::exists(dir + "/model.safetensors"));
      CHECK_FALSE(fs::exists(dir + "/model.safetensors.tmp"));

      // The config reads back as the model's, except the vocabulary padding (HF has none).
      ModelConfig back = read_hf_config(dir);
      CHECK(back.padded_vocab_size == c.vocab_size);
      back.padded_vocab_size = c.padded_vocab_size;
      CHECK(back == c);

      ModelOptions o;
      o.dtype = dt;
      std::unique_ptr<Model> b = make_model(c, o);  // same padding: every parameter bitwise
      load_hf_weights(dir, *b);
      check_params_equal(*a, *b);
      const Tensor idx = some_ids(2, c.max_seq_len, c.vocab_size, 3);
      CHECK(bitwise_equal(logits_of(*a, idx), logits_of(*b, idx)));

      std::unique_ptr<Model> u = make_model(read_hf_config(dir), o);  // unpadded, as HF builds it
      load_hf_weights(dir, *u);
      const Tensor la = logits_of(*a, idx), lu = logits_of(*u, idx);
      REQUIRE(la.shape() == lu.shape());
      const std::vector<double> va = la.to_vector(), vu = lu.to_vector();
      double worst = 0;
      for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(va[i] - vu[i]));
      CHECK(worst <= (dt == DType::f32 ? 1e-5 : 3e-2));
    }
  }
}

// --save-hf's sharded layout (transformers' save_pretrained past max_shard_size): shards of whole
// tensors in order, an index, read back bitwise; one layout replacing the other leaves no stale
// weight file; the Llama carries Llama 3's RoPE scaling through config.json.
TEST_CASE("HF weights: sharded export - shards, index, bitwise round trip, no stale files", "[hf]") {
  TempDir tmp("hf_sharded");
  ModelConfig c = small_hf_llama(true);
  c.rope_theta = 500.0;
  c.rope_scaling = RopeScaling{RopeScaling::Type::llama3, 8.0, 1.0, 4.0, 4};
  std::unique_ptr<Model> a = fresh(c, 11, DType::f32);
  const std::string dir = tmp.file("llama3");
  const int64_t limit = 4096;  // bytes: several shards for this model
  save_hf_weights(dir, *a, DType::f32, limit);
  CHECK_FALSE(fs::exists(dir + "/model.safetensors"));
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(dir + "/model.safetensors.index.json"));
  std::set<std::string> files;
  int64_t total = 0;
  for (const auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
  REQUIRE(files.size() > 2);
  char last[64];
  std::snprintf(last, sizeof last, "model-%05zu-of-%05zu.safetensors", files.size(), files.size());
  CHECK(files.contains(last));
  for (const std::string& f : files) {
    const SafetensorsFile s = load_safetensors(dir + "/" + f);
    int64_t bytes = 0;
    for (const auto& t : s.tensors) bytes += t.tensor.numel() * static_cast<int64_t>(dtype_size(t.tensor.dtype()));
    CHECK((bytes <= limit || s.tensors.size() == 1));  // a tensor past the limit stands alone
    total += bytes;
  }
  CHECK(index["metadata"]["total_size"].get<int64_t>() == total);
  CHECK(read_hf_config(dir).rope_scaling == c.rope_scaling);
  std::unique_ptr<Model> b = make_model(c);
  load_hf_weights(dir, *b);
  check_params_equal(*a, *b);
  // one file again: the shards and the index go (the reader would take either)
  save_hf_weights(dir, *a, DType::f32);
  CHECK(fs::exists(dir + "/model.safetensors"));
  CHECK_FALSE(fs::exists(dir + "/model.safetensors.index.json"));
  for (const auto& e : fs::directory_iterator(dir)) CHECK_FALSE(e.path().filename().string().starts_with("model-"));
  std::unique_ptr<Model> d = make_model(c);
  load_hf_weights(dir, *d);
  check_params_equal(*a, *d);
  // and sharded over a single file: model.safetensors goes
  save_hf_weights(dir, *a, DType::f32, limit);
  CHECK_FALSE(fs::exists(dir + "/model.safetensors"));
  CHECK(parse_shard_size("5GB", "s") == 5000000000);
  CHECK(parse_shard_size("2GiB", "s") == 2147483648);
  CHECK(parse_shard_size("4096", "s") == 4096);
  CHECK_THROWS_WITH(parse_shard_size("5 parsecs", "--save-hf-shard-size"),
                    Catch::Contains("--save-hf-shard-size = \"5 parsecs\""));
}

TEST_CASE("HF weights: a float32 model exported as bfloat16 rounds to nearest even", "[hf]") {
  TempDir tmp("hf_bf16");
  std::unique_ptr<Model> a = fresh(small_hf_llama(false), 9);
  save_hf_weights(tmp.file("d"), *a, DType::bf16);
  const SafetensorsFile st = load_safetensors(tmp.file("d/model.safetensors"));
  CHECK(st.get("model.layers.1.mlp.up_proj.weight").dtype() == DType::bf16);
  CHECK(st.metadata.at("format") == "pt");
  std::unique_ptr<Model> b = make_model(small_hf_llama(false));
  load_hf_weights(tmp.file("d"), *b);
  std::vector<Unit*> ua = a->units(), ub = b->units();
  for (size_t u = 0; u < ua.size(); ++u)
    for (int i = 0; i < ua[u]->params().size(); ++i)
      CHECK(bitwise_equal(ua[u]->params().value(i).to(DType::bf16).to(DType::f32), ub[u]->params().value(i)));
  CHECK_THROWS_WITH(save_hf_weights(tmp.file("e"), *a, DType::f16), Catch::Contains("float32 or bfloat16"));
}

TEST_CASE("HF weights: exported names, shapes and Conv1D transposes are HF's", "[hf]") {
  TempDir tmp("hf_names");
  std::unique_ptr<Model> g = fresh(small_hf_gpt2(), 1);
  save_hf_weights(tmp.file("g"), *g);
  const SafetensorsFile st = load_safetensors(tmp.file("g/model.safetensors"));
  // Compare with the hand-written list (hf_test_util.h), which transposes by itself.
  const std::vector<RawTensor> want = hf_gpt2_raw(dynamic_cast<GPT2&>(*g), "F32");
  REQUIRE(st.tensors.size() == want.size());
  for (const RawTensor& w : want) {
    INFO(w.name);
    const Tensor& t = st.get(w.name);
    CHECK(t.shape() == w.shape);
    CHECK(t.to_vector() == decode(w.bytes, "F32"));
  }
  CHECK(st.get("h.0.attn.c_attn.weight").shape() == Shape{16, 48});  // Conv1D (in, out)
  CHECK(st.get("wte.weight").shape() == Shape{50, 16});              // V rows, not Vp = 64
  const nlohmann::json cj = nlohmann::json::parse(std::ifstream(tmp.file("g/config.json")));
  CHECK(cj["model_type"] == "gpt2");
  CHECK(cj["n_positions"] == 12);
  CHECK(cj["architectures"][0] == "GPT2LMHeadModel");

  for (bool tied : {false, true}) {
    std::unique_ptr<Model> l = fresh(small_hf_llama(tied), 2);
    const std::string d = tmp.file(tied ? "lt" : "l");
    save_hf_weights(d, *l);
    const SafetensorsFile s = load_safetensors(d + "/model.safetensors");
    const std::vector<RawTensor> lw = hf_llama_raw(dynamic_cast<Llama&>(*l), "F32");
    REQUIRE(s.tensors.size() == lw.size());
    for (const RawTensor& w : lw) {
      INFO(w.name);
      CHECK(s.get(w.name).shape() == w.shape);
      CHECK(s.get(w.name).to_vector() == decode(w.bytes, "F32"));
    }
    const nlohmann::json lj = nlohmann::json::parse(std::ifstream(d + "/config.json"));
    CHECK(lj["tie_word_embeddings"] == tied);
    CHECK(lj["num_key_value_heads"] == 2);
    CHECK(hf_config_from_json(lj, "x") == read_hf_config(d));
  }
}

TEST_CASE("HF weights: GPT-2 files as transformers writes them load with the right values", "[hf]") {
  TempDir tmp("hf_foreign_gpt2");
  const ModelConfig c = small_hf_gpt2();
  std::unique_ptr<Model> src = fresh(c, 11);
  GPT2& g = dynamic_cast<GPT2&>(*src);
  ModelConfig hc = c;
  hc.padded_vocab_size = c.vocab_size;
  struct Variant {
    std::string name, dtype, prefix;
    bool buffers, metadata, pad, lm_head, shuffled;
  };
  const std::vector<Variant> variants = {
      {"plain f32, padded header, no metadata", "F32", "", false, false, true, false, false},
      {"GPT2LMHeadModel: transformer. prefix, mask buffers, tied lm_head, metadata", "F32", "transformer.", true, true,
       false, true, true},
      {"bf16, header not padded, data order not the header's", "BF16", "", true, true, false, false, true},
      {"f16, padded", "F16", "transformer.", false, true, true, true, true}};
  for (const Variant& v : variants) {
    INFO(v.name);
    const std::string dir = tmp.file(std::string("d").append(std::to_string(&v - variants.data())));
    fs::create_directories(dir);
    std::vector<RawTensor> ts = hf_gpt2_raw(g, v.dtype, v.prefix, v.buffers);
    if (v.lm_head) ts.push_back({"lm_head.weight", v.dtype, ts[0].shape, ts[0].bytes});
    RawLayout lay;
    lay.metadata = v.metadata;
    lay.pad = v.pad;
    if (v.shuffled) {  // header reversed; data: odd indices descending, then even ascending
      std::reverse(ts.begin(), ts.end());
      for (size_t i = ts.size(); i-- > 0;)
        if (i % 2) lay.data_order.push_back(i);
      for (size_t i = 0; i < ts.size(); i += 2) lay.data_order.push_back(i);
    }
    const std::string header = write_raw_safetensors(dir + "/model.safetensors", ts, lay);
    if (v.pad) CHECK(header.size() % 8 == 0);
    write_text(dir + "/config.json", gpt2_config_json(hc));

    GPT2 m(read_hf_config(dir));
    load_hf_weights(dir, m);
    check_holds(m, hf_gpt2_raw(g, v.dtype));  // the source's values as the file encodes them
  }
}

TEST_CASE("HF weights: Llama files as transformers writes them load with the right values", "[hf]") {
  TempDir tmp("hf_foreign_llama");
  const ModelConfig c = small_hf_llama(false);
  std::unique_ptr<Model> src = fresh(c, 12);
  Llama& l = dynamic_cast<Llama&>(*src);
  ModelConfig hc = c;
  hc.padded_vocab_size = c.vocab_size;
  std::vector<RawTensor> ts = hf_llama_raw(l, "BF16");
  ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, encode({1, 0.1, 0.01, 0.001}, "F32")});
  std::reverse(ts.begin(), ts.end());
  write_raw_safetensors(tmp.file("model.safetensors"), ts, {{}, true, false});
  write_text(tmp.file("config.json"), llama_config_json(hc));
  // A bare .safetensors path: config.json is read beside it.
  Llama m(read_hf_config(tmp.file("model.safetensors")));
  load_hf_weights(tmp.file("model.safetensors"), m);
  check_holds(m, hf_llama_raw(l, "BF16"));

  // LlamaModel (no "model." prefix), F16, tied, with the tied head written out anyway.
  ModelConfig tc = small_hf_llama(true);
  std::unique_ptr<Model> tsrc = fresh(tc, 14);
  std::vector<RawTensor> tt = hf_llama_raw(dynamic_cast<Llama&>(*tsrc), "F16");
  for (RawTensor& t : tt) t.name = t.name.substr(6);
  tt.push_back({"lm_head.weight", "F16", tt[0].shape, tt[0].bytes});
  tc.padded_vocab_size = tc.vocab_size;
  fs::create_directories(tmp.file("tied"));
  write_raw_safetensors(tmp.file("tied/model.safetensors"), tt);
  write_text(tmp.file("tied/config.json"), llama_config_json(tc));
  Llama t(read_hf_config(tmp.file("tied")));
  load_hf_weights(tmp.file("tied"), t);
  tt.pop_back();
  for (RawTensor& x : tt) x.name = "model." + x.name;
  check_holds(t, tt);
}

TEST_CASE("HF weights: sharded checkpoints (model.safetensors.index.json)", "[hf]") {
  TempDir tmp("hf_sharded");
  const ModelConfig c = small_hf_llama(false);
  std::unique_ptr<Model> src = fresh(c, 13);
  std::vector<RawTensor> ts = hf_llama_raw(dynamic_cast<Llama&>(*src), "F32");
  ModelConfig hc = c;
  hc.padded_vocab_size = c.vocab_size;
  const size_t half = ts.size() / 2;
  std::vector<RawTensor> s1(ts.begin(), ts.begin() + half), s2(ts.begin() + half, ts.end());
  write_raw_safetensors(tmp.file("model-00001-of-00002.safetensors"), s1);
  write_raw_safetensors(tmp.file("model-00002-of-00002.safetensors"), s2);
  write_text(tmp.file("config.json"), llama_config_json(hc));
  auto write_index = [&](const std::string& moved) {
    nlohmann::json wm;
    for (size_t i = 0; i < ts.size(); ++i)
      wm[ts[i].name] =
          (i < half) != (ts[i].name == moved) ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    write_text(tmp.file("model.safetensors.index.json"),
               nlohmann::json{{"metadata", {{"total_size", 1234}}}, {"weight_map", wm}}.dump(2));
  };
  write_index("");
  std::unique_ptr<Model> m = make_model(c);
  load_hf_weights(tmp.dir.string(), *m);
  check_params_equal(*src, *m);
  // The index path itself works too.
  std::unique_ptr<Model> m2 = make_model(c);
  load_hf_weights(tmp.file("model.safetensors.index.json"), *m2);
  check_params_equal(*src, *m2);

  write_index(ts[1].name);  // the index puts a tensor in the other shard
  CHECK_THROWS_WITH(load_hf_weights(tmp.dir.string(), *m),
                    Catch::Contains("holds tensor '" + ts[1].name + "', which the index") &&
                        Catch::Contains("puts in '") && Catch::Contains("model-00002-of-00002.safetensors"));
  write_index("");
  fs::remove(tmp.file("model-00002-of-00002.safetensors"));
  CHECK_THROWS_WITH(load_hf_weights(tmp.dir.string(), *m), Catch::Contains("names shard") &&
                                                               Catch::Contains("model-00002-of-00002.safetensors") &&
                                                               Catch::Contains("does not exist"));
}

TEST_CASE("HF weights: GPT-2 through the HF mapping and the llm.c mapping give the same logits",
          "[hf][llmc][reference]") {
  // gpt2_tiny.bin (PyTorch-made, tests/data/make_gpt2_reference.py) turned into an HF directory by
  // hand here: llm.c's tensors are (out, in) and layer-major; HF's Conv1D wants (in, out).
  TempDir tmp("hf_vs_llmc");
  const std::string data = std::string(ZT_SOURCE_DIR) + "/tests/data/";
  std::ifstream f(data + "gpt2_tiny.bin", std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
  REQUIRE(b.size() > 1024);
  int32_t h[8];
  std::memcpy(h, b.data(), sizeof h);
  const int64_t T = h[2], V = h[3], L = h[4], C = h[6], Vp = h[7];
  size_t pos = 1024;
  auto take = [&](int64_t n) {  // next n float32 values of the file
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, b.data() + pos + 4 * i, 4);
      v[i] = x;
    }
    pos += 4 * n;
    return v;
  };
  auto transposed = [](const std::vector<double>& v, int64_t R, int64_t Cc) {
    std::vector<double> o(v.size());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < Cc; ++c) o[c * R + r] = v[r * Cc + c];
    return o;
  };
  std::vector<RawTensor> ts;
  std::vector<double> wte = take(Vp * C);
  wte.resize(static_cast<size_t>(V * C));
  ts.push_back({"wte.weight", "F32", {V, C}, encode(wte, "F32")});
  ts.push_back({"wpe.weight", "F32", {T, C}, encode(take(T * C), "F32")});
  const struct {
    const char* name;
    int64_t out, in;  // in == 0: a vector
  } per_layer[] = {{"ln_1.weight", C, 0},
                   {"ln_1.bias", C, 0},
                   {"attn.c_attn.weight", 3 * C, C},
                   {"attn.c_attn.bias", 3 * C, 0},
                   {"attn.c_proj.weight", C, C},
                   {"attn.c_proj.bias", C, 0},
                   {"ln_2.weight", C, 0},
                   {"ln_2.bias", C, 0},
                   {"mlp.c_fc.weight", 4 * C, C},
                   {"mlp.c_fc.bias", 4 * C, 0},
                   {"mlp.c_proj.weight", C, 4 * C},
                   {"mlp.c_proj.bias", C, 0}};
  for (const auto& p : per_layer)
    for (int64_t l = 0; l < L; ++l) {
      const std::string name = "h." + std::to_string(l) + "." + p.name;
      if (p.in == 0)
        ts.push_back({name, "F32", {p.out}, encode(take(p.out), "F32")});
      else
        ts.push_back({name, "F32", {p.in, p.out}, encode(transposed(take(p.out * p.in), p.out, p.in), "F32")});
    }
  ts.push_back({"ln_f.weight", "F32", {C}, encode(take(C), "F32")});
  ts.push_back({"ln_f.bias", "F32", {C}, encode(take(C), "F32")});
  REQUIRE(pos == b.size());
  write_raw_safetensors(tmp.file("model.safetensors"), ts);
  write_text(tmp.file("config.json"), nlohmann::json{{"model_type", "gpt2"},
                                                     {"n_layer", L},
                                                     {"n_embd", C},
                                                     {"n_head", h[5]},
                                                     {"n_positions", T},
                                                     {"vocab_size", V},
                                                     {"layer_norm_epsilon", 1e-5}}
                                          .dump());

  GPT2 via_hf(read_hf_config(tmp.dir.string()));
  load_hf_weights(tmp.dir.string(), via_hf);
  GPT2 via_llmc(read_llmc_header(data + "gpt2_tiny.bin"));
  load_llmc_checkpoint(data + "gpt2_tiny.bin", via_llmc);
  const nlohmann::json ref = nlohmann::json::parse(std::ifstream(data + "gpt2_tiny_reference.json"));
  const TokenIds tokens = read_token_shard(data + "tiny_tokens.bin");
  const int64_t B = ref["train"]["B"].get<int64_t>(), TT = ref["train"]["T"].get<int64_t>();
  Tensor idx = Tensor::empty({B, TT}, DType::i32);
  for (int64_t i = 0; i < B * TT; ++i) idx.data<int32_t>()[i] = tokens[i];
  const std::vector<double> a = logits_of(via_hf, idx).to_vector(), c = logits_of(via_llmc, idx).to_vector();
  REQUIRE(a.size() == c.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - c[i]));
  CHECK(worst <= 1e-5);
  const auto want = ref["logits_step0_b0_t0_first8"].get<std::vector<double>>();  // PyTorch's
  for (int k = 0; k < 8; ++k) CHECK(std::abs(a[k] - want[k]) <= 1e-5);
}
