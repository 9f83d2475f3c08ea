// defines: 13 Catch2 test cases tagged [models], [gradcheck], [checkpoint], [hooks], [sampling]; helpers:
//          tiny_llama, ids, perturb, grads_of, batch_idx, batch_tgt and 1 more
//
// models: configs and parameter counts, GPT-2 / Llama float64 gradient checks, activation
// checkpointing, unit hooks, init, sampling (train/sampling.h). (llm.c checkpoint I/O: test_models_llmc.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "formats/token_data.h"
#include "models/gpt2.h"
#include "models/init.h"
#include "models/llama.h"
#include "models/model_config.h"
#include "nn/layers.h"
#include "train/sampling.h"

using namespace zt;

namespace {

ModelConfig tiny_gpt2() {  // padded vocabulary: rows [11, 16) of wte are padding
  ModelConfig c = model_config("gpt2-nano");
  c.n_layer = 2, c.n_embd = 8, c.n_head = c.n_kv_head = 2, c.ffn_hidden = 32;
  c.max_seq_len = 8, c.vocab_size = 11, c.padded_vocab_size = 16;
  return c;
}

ModelConfig tiny_llama(bool tied = false) {
  ModelConfig c = model_config("llama-nano");
  c.n_layer = 2, c.n_embd = 8, c.n_head = 2, c.n_kv_head = 1, c.ffn_hidden = 12;
  c.max_seq_len = 8, c.vocab_size = 11, c.padded_vocab_size = 16, c.tie_embeddings = tied;
  return c;
}

Tensor ids(const std::vector<int>& v, int64_t B, int64_t T) {
  Tensor t = Tensor::empty({B, T}, DType::i32);
  for (int64_t i = 0; i < B * T; ++i) t.data<int32_t>()[i] = v.at(static_cast<size_t>(i));
  return t;
}

// Moves a freshly initialized model away from init (std 0.02 makes every gradient tiny), keeping
// the padded vocabulary rows zero: every parameter += N(0, 0.3).
void perturb(Model& m, int64_t V, uint64_t seed) {
  Rng rng(seed);
  for (Unit* u : m.units())
    for (int i = 0; i < u->params().size(); ++i) {
      Tensor w = u->params().value(i);
      const std::string& n = u->params().infos()[i].name;
      const bool vocab_rows = n == "wte.weight" || n == "embed_tokens.weight" || n == "lm_head.weight";
      Tensor live = vocab_rows ? w.slice(0, 0, V) : w;
      Tensor noise = Tensor::empty(live.shape(), w.dtype());
      rng.fill_normal(noise, 0.0, 0.3);
      live.copy_(Tensor::from_vector([&] {
        auto a = live.to_vector(), b = noise.to_vector();
        for (size_t k = 0; k < a.size(); ++k) a[k] += b[k];
        return a;
      }(), live.shape(), w.dtype()));
    }
}

std::vector<std::vector<double>> grads_of(Model& m) {
  std::vector<std::vector<double>> g;
  for (Unit* u : m.units()) g.push_back(u->params().flat_grad().to_vector());
  return g;
}

// One batch (B = 2, T = 6) for every test of the tiny models.
Tensor batch_idx() { return ids({1, 3, 5, 7, 9, 10, 0, 2, 4, 6, 8, 10}, 2, 6); }
Tensor batch_tgt() { return ids({3, 5, 7, 9, 10, 0, 2, 4, 6, 8, 10, 1}, 2, 6); }

// Float64 finite differences of the loss against the analytic gradient, at the first, a middle
// and the last element of every parameter (vocabulary matrices: of their valid rows); plus every
// unit's gradient is non-zero and the padded vocabulary rows get exactly zero gradient.
void check_model_gradients(Model& m, const ModelConfig& c) {
  m.zero_grad();
  Var loss = m.loss(batch_idx(), batch_tgt());
  loss.backward();
  const double h = 1e-6;
  for (Unit* u : m.units()) {
    ParamSet& ps = u->params();
    const std::vector<double> g = ps.flat_grad().to_vector();
    double gmax = 0;
    for (double x : g) gmax = std::max(gmax, std::abs(x));
    INFO("unit " << u->name());
    CHECK(gmax > 1e-6);
    double* flat = ps.flat().data<double>();
    for (const ParamInfo& p : ps.infos()) {
      const bool vocab = p.name == "wte.weight" || p.name == "embed_tokens.weight" || p.name == "lm_head.weight";
      const int64_t live = vocab ? c.vocab_size * c.n_embd : p.numel;
      if (vocab)  // padded rows: never read by a token, their logits take no part in the loss
        for (int64_t k = live; k < p.numel; ++k) REQUIRE(g[p.offset + k] == 0.0);
      for (int64_t k : {int64_t(0), live / 2 + 1, live - 1}) {
        const int64_t j = p.offset + k;
        const double orig = flat[j];
        auto eval = [&](double v) {
          flat[j] = v;
          NoGradGuard ng;
          return m.loss(batch_idx(), batch_tgt()).value().item();
        };
        const double numeric = (eval(orig + h) - eval(orig - h)) / (2 * h);
        flat[j] = orig;
        INFO(p.name << " element " << k << ": analytic " << g[j] << " numeric " << numeric);
        CHECK(std::abs(g[j] - numeric) <= 1e-7 + 1e-5 * std::abs(numeric));
      }
    }
  }
}

}  // namespace

TEST_CASE("named configs - their parameter counts and the built models agree", "[models]") {
  // GPT-2 small as llm.c counts it (padded vocabulary 50304) and as Hugging Face does (50257).
  ModelConfig g = model_config("gpt2-124m");
  CHECK(g.num_params() == 124475904);
  ModelConfig hf = g;
  hf.padded_vocab_size = hf.vocab_size;
  CHECK(hf.num_params() == 124439808);
  CHECK(model_config("gpt-mini").num_params() == 10844160);
  CHECK(model_config("llama-100m").num_params() == 99496704);
  // Llama 3.2 1B (meta-llama/Llama-3.2-1B's config.json): 1,235,814,400 with tied embeddings.
  CHECK(model_config("llama3.2-1b").num_params() == 1235814400);
  // llama-mini by hand: per layer 2 norms (2C) + q, o (C^2 each) + k, v (128 C each: 2 KV heads
  // of 64) + gate, up, down (C F each), C = 384, F = 1024; then embed + lm_head (256 C) + norm C.
  CHECK(model_config("llama-mini").num_params() ==
        6 * (2 * 384 + 2 * 384 * 384 + 2 * 128 * 384 + 3 * 384 * 1024) + 2 * 256 * 384 + 384);
  // The formula against the models themselves (layout only: no 500 MB buffers in a unit test).
  for (const std::string& name : model_config_names()) {
    INFO(name);
    const ModelConfig c = model_config(name);
    auto m = make_model(c, ModelOptions{.allocate = false});
    CHECK(m->num_params() == c.num_params());
    CHECK(m->family() == c.family);
    CHECK(m->units().size() == static_cast<size_t>(c.n_layer + 2));
  }
  // An independent per-tensor count of GPT-2 small: 12 C^2 + 13 C per block.
  const int64_t C = 768;
  CHECK(50304 * C + 1024 * C + 12 * (12 * C * C + 13 * C) + 2 * C == 124475904);
  CHECK_THROWS_WITH(model_config("gpt3"), Catch::Contains("unknown model name \"gpt3\"") &&
                                              Catch::Contains("gpt2-nano") && Catch::Contains("llama-100m"));
}

TEST_CASE("a model config file: Llama 3.1 8B's shape from configs/models, and bad files named", "[models]") {
  // Meta's Llama 3.1 8B: 8,030,261,248 parameters (its safetensors index's total_size / 2 in
  // bf16): embed 525,336,576 + 32 blocks x 218,112,000 + norm 4,096 + lm_head 525,336,576.
  const ModelConfig c = model_config(std::string(ZT_SOURCE_DIR) + "/configs/models/llama3-8b.json");
  CHECK(c.family == "llama");
  CHECK(c.num_params() == 8030261248);
  CHECK(c.num_params() ==
        2 * 128256LL * 4096 + 32LL * (4096 * (2 * 4096 + 2 * 1024) + 3 * 4096 * 14336 + 2 * 4096) + 4096);
  CHECK(c.rope_scaling.type == RopeScaling::Type::llama3);
  CHECK(c.rope_scaling.factor == 8.0);
  CHECK_FALSE(c.tie_embeddings);

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zt_models_config_file";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  const std::string missing = (dir / "none.json").string();
  CHECK_THROWS_WITH(model_config(missing),
                    Catch::Contains("model config '" + missing + "'") && Catch::Contains("cannot open"));
  const std::string bad_key = write("bad_key.json", R"({"family": "llama", "n_layer": 2, "n_embd": 32, "n_head": 4,
      "vocab_size": 256, "max_seq_len": 64, "n_layers": 3})");
  CHECK_THROWS_WITH(model_config(bad_key), Catch::Contains(bad_key) && Catch::Contains("unknown key \"n_layers\""));
  const std::string bad_value = write("bad_value.json", R"({"family": "llama", "n_layer": 0, "n_embd": 32, "n_head": 4,
      "vocab_size": 256, "max_seq_len": 64})");
  CHECK_THROWS_WITH(model_config(bad_value), Catch::Contains(bad_value) && Catch::Contains("n_layer"));
  const std::string not_json = write("not_json.json", "{\"family\": ");
  CHECK_THROWS_WITH(model_config(not_json), Catch::Contains(not_json) && Catch::Contains("not valid JSON"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("attention refuses RoPE on a fused c_attn (the packed attention takes q and k as they come)",
          "[models]") {
  ParamSet ps("h.0");
  CHECK_THROWS_WITH(
      CausalSelfAttention(ps, "attn",
                          AttentionConfig{.n_embd = 8, .n_head = 2, .fused_qkv = true, .use_rope = true, .rope = {}}),
      Catch::Contains("attention 'attn': RoPE needs separate q/k/v projections"));
}

TEST_CASE("units and parameter names follow Hugging Face and the flat layout", "[models]") {
  GPT2 g(model_config("gpt2-nano"), ModelOptions{.world_size = 4, .alignment = 16});
  auto us = g.units();
  REQUIRE(us.size() == 4);
  CHECK(us[0]->name() == "embed");
  CHECK(us[1]->name() == "h.0");
  CHECK(us[3]->name() == "head");
  std::vector<std::string> names;
  for (const ParamInfo& p : us[1]->params().infos()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                          "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"});
  CHECK(us[1]->params().infos()[2].shape == Shape{96, 32});
  CHECK(us[0]->params().find("wte.weight") == 0);
  CHECK(us[0]->params().find("wpe.weight") == 1);
  CHECK(us[3]->params().find("ln_f.bias") == 1);
  for (Unit* u : us) CHECK(u->params().padded_numel() % 64 == 0);

  Llama l(model_config("llama-nano"));
  names.clear();
  for (const ParamInfo& p : l.units()[1]->params().infos()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"input_layernorm.weight", "self_attn.q_proj.weight",
                                          "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                                          "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"});
  CHECK(l.units()[1]->params().infos()[2].shape == Shape{16, 32});  // 2 kv heads x 8
  CHECK(l.units()[1]->name() == "layers.0");
  CHECK(l.head().params().find("lm_head.weight") == 1);
  Llama tied(tiny_llama(true));
  CHECK(tied.head().params().find("lm_head.weight") == -1);
  CHECK(tied.num_params() == tiny_llama(true).num_params());
}

TEST_CASE("model config JSON round trip and validation messages", "[models]") {
  for (const std::string& name : model_config_names()) {
    const ModelConfig c = model_config(name);
    nlohmann::json j = c;
    CHECK(j.get<ModelConfig>() == c);
  }
  auto parse = [](const char* s) { return nlohmann::json::parse(s).get<ModelConfig>(); };
  ModelConfig d = parse(R"({"family":"llama","n_layer":2,"n_embd":768,"n_head":12,"vocab_size":100,"max_seq_len":16})");
  CHECK(d.n_kv_head == 12);
  CHECK(d.ffn_hidden == 2048);
  CHECK(d.padded_vocab_size == 100);
  CHECK_FALSE(d.tie_embeddings);
  CHECK_THROWS_WITH(parse(R"({"family":"gpt2","n_layer":2,"n_embd":32,"n_head":4,"vocab_size":9,"max_seq_len":8,"n_heads":4})"),
                    Catch::Contains("unknown key \"n_heads\""));
  CHECK_THROWS_WITH(parse(R"({"family":"gpt2","n_layer":"2","n_embd":32,"n_head":4,"vocab_size":9,"max_seq_len":8})"),
                    Catch::Contains("\"n_layer\" must be an integer"));
  CHECK_THROWS_WITH(parse(R"({"family":"gpt2","n_embd":32,"n_head":4,"vocab_size":9,"max_seq_len":8})"),
                    Catch::Contains("missing required key \"n_layer\""));
  CHECK_THROWS_WITH(parse(R"({"family":"gpt2","n_layer":2,"n_embd":30,"n_head":4,"vocab_size":9,"max_seq_len":8})"),
                    Catch::Contains("n_embd 30 is not divisible by n_head 4"));
  CHECK_THROWS_WITH(parse(R"({"family":"bert","n_layer":2,"n_embd":32,"n_head":4,"vocab_size":9,"max_seq_len":8})"),
                    Catch::Contains("family must be"));
  ModelConfig c = model_config("llama-nano");
  c.n_kv_head = 3;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("n_head 4 is not a multiple of n_kv_head 3"));
  c = model_config("gpt2-nano");
  c.padded_vocab_size = 200;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("padded_vocab_size 200 is smaller than vocab_size 256"));
  c = model_config("gpt2-nano");
  c.n_kv_head = 2;
  CHECK_THROWS_WITH(GPT2{c}, Catch::Contains("n_kv_head 2 must equal n_head 4"));
  CHECK_THROWS_WITH(Llama{model_config("gpt2-nano")}, Catch::Contains("expected \"llama\""));
}

TEST_CASE("init is deterministic and follows nanoGPT's scheme", "[models]") {
  ModelConfig c = tiny_gpt2();
  c.n_layer = 8, c.n_embd = 64, c.n_head = c.n_kv_head = 4, c.ffn_hidden = 256;
  GPT2 a(c), b(c), d(c);
  Rng r1(42), r2(42), r3(43);
  init_model(a, r1), init_model(b, r2), init_model(d, r3);
  for (size_t u = 0; u < a.units().size(); ++u)
    CHECK(a.units()[u]->params().flat().to_vector() == b.units()[u]->params().flat().to_vector());
  CHECK(a.embed().params().flat().to_vector() != d.embed().params().flat().to_vector());
  auto stdev = [](const Tensor& t) {
    double s = 0, s2 = 0;
    auto v = t.to_vector();
    for (double x : v) s += x, s2 += x * x;
    const double m = s / v.size();
    return std::sqrt(s2 / v.size() - m * m);
  };
  ParamSet& h3 = a.block(3).params();
  CHECK(stdev(h3.value(h3.find("mlp.c_fc.weight"))) == Approx(0.02).epsilon(0.03));
  CHECK(stdev(h3.value(h3.find("mlp.c_proj.weight"))) == Approx(0.02 / 4).epsilon(0.03));  // sqrt(2*8) = 4
  CHECK(stdev(h3.value(h3.find("attn.c_proj.weight"))) == Approx(0.02 / 4).epsilon(0.05));
  CHECK(h3.value(h3.find("ln_2.weight")).to_vector() == std::vector<double>(64, 1.0));
  CHECK(h3.value(h3.find("attn.c_attn.bias")).to_vector() == std::vector<double>(192, 0.0));
  Tensor wte = a.embed().params().value(0);
  CHECK(wte.slice(0, c.vocab_size, c.padded_vocab_size).to_vector() == std::vector<double>(5 * 64, 0.0));
  CHECK(stdev(wte.slice(0, 0, c.vocab_size)) > 0.01);

  Llama l(tiny_llama());
  Rng r4(1);
  init_model(l, r4);
  ParamSet& hp = l.head().params();
  CHECK(hp.value(hp.find("norm.weight")).to_vector() == std::vector<double>(8, 1.0));
  CHECK(hp.value(hp.find("lm_head.weight")).slice(0, 11, 16).to_vector() == std::vector<double>(40, 0.0));
}

TEST_CASE("GPT-2 float64 gradients match finite differences", "[models][gradcheck]") {
  const ModelConfig c = tiny_gpt2();
  GPT2 m(c, ModelOptions{.dtype = DType::f64});
  Rng rng(5);
  init_model(m, rng);
  perturb(m, c.vocab_size, 6);
  check_model_gradients(m, c);
}

TEST_CASE("Llama float64 gradients match finite differences (untied and tied)", "[models][gradcheck]") {
  for (bool tied : {false, true}) {
    INFO("tied " << tied);
    const ModelConfig c = tiny_llama(tied);
    Llama m(c, ModelOptions{.dtype = DType::f64});
    Rng rng(7);
    init_model(m, rng);
    perturb(m, c.vocab_size, 8);
    check_model_gradients(m, c);
  }
}

TEST_CASE("activation checkpointing gives the same loss and gradients", "[models][checkpoint]") {
  for (const ModelConfig& c : {tiny_gpt2(), tiny_llama()}) {
    INFO(c.family);
    auto m = make_model(c, ModelOptions{.dtype = DType::f64});
    Rng rng(11);
    init_model(*m, rng);
    perturb(*m, c.vocab_size, 12);
    m->zero_grad();
    Var l0 = m->loss(batch_idx(), batch_tgt());
    l0.backward();
    const auto g0 = grads_of(*m);
    m->set_activation_checkpointing(true);
    m->zero_grad();
    Var l1 = m->loss(batch_idx(), batch_tgt());
    const auto us = m->units();  // the blocks are checkpointed (nn/model.h decides which units)
    CHECK(std::any_of(us.begin(), us.end(), [](Unit* u) { return u->recompute_forward; }));
    l1.backward();
    const auto g1 = grads_of(*m);
    // The recompute runs the same kernels on the same inputs in the same order: bitwise equal.
    CHECK(l0.value().item() == l1.value().item());
    REQUIRE(g0.size() == g1.size());
    for (size_t u = 0; u < g0.size(); ++u) {
      REQUIRE(g0[u].size() == g1[u].size());
      for (size_t k = 0; k < g0[u].size(); ++k) {
        INFO("unit " << u << " element " << k);
        REQUIRE(g0[u][k] == g1[u][k]);
      }
    }
  }
}

TEST_CASE("unit hooks fire once per backward - in reverse unit order - embed last", "[models][hooks]") {
  for (const ModelConfig& c : {tiny_gpt2(), tiny_llama(), tiny_llama(true)}) {
    for (bool ckpt : {false, true}) {
      INFO(c.family << " tied " << c.tie_embeddings << " checkpointing " << ckpt);
      auto m = make_model(c);
      Rng rng(3);
      init_model(*m, rng);
      m->set_activation_checkpointing(ckpt);
      std::vector<std::string> events;
      for (Unit* u : m->units()) {
        auto& g = *u->params().group();
        const std::string n = u->name();
        g.before_backward = [&events, n] { events.push_back("before " + n); };
        g.after_backward = [&events, n] { events.push_back("after " + n); };
      }
      Var loss = m->loss(batch_idx(), batch_tgt());
      CHECK(events.empty());  // forward fires nothing
      loss.backward();
      std::vector<std::string> afters;
      std::map<std::string, int> before_pos, after_pos, before_n, after_n;
      for (int i = 0; i < static_cast<int>(events.size()); ++i) {
        const std::string& e = events[i];
        if (e.rfind("after ", 0) == 0) {
          afters.push_back(e.substr(6));
          after_pos[e.substr(6)] = i, ++after_n[e.substr(6)];
        } else {
          before_pos[e.substr(7)] = i, ++before_n[e.substr(7)];
        }
      }
      const std::string layer = c.family == "gpt2" ? "h." : "layers.";
      CHECK(afters == std::vector<std::string>{"head", layer + "1", layer + "0", "embed"});
      for (Unit* u : m->units()) {
        CHECK(before_n[u->name()] == 1);
        CHECK(after_n[u->name()] == 1);
        CHECK(before_pos[u->name()] < after_pos[u->name()]);
      }
    }
  }
}

TEST_CASE("forward refuses bad token batches with clear messages", "[models]") {
  GPT2 m(tiny_gpt2());
  CHECK_THROWS_WITH(m.logits(ids(std::vector<int>(9, 1), 1, 9)), Catch::Contains("T = 9 must be in [1, max_seq_len = 8]"));
  CHECK_THROWS_WITH(m.logits(ids({1, 11}, 1, 2)), Catch::Contains("token id 11") && Catch::Contains("[0, 11)"));
  CHECK_THROWS_WITH(m.logits(Tensor::zeros({1, 2}, DType::f32)), Catch::Contains("must be int32"));
  CHECK_THROWS_WITH(m.loss(batch_idx(), ids({1, 2}, 1, 2)), Catch::Contains("targets must have the shape"));
  GPT2 layout(tiny_gpt2(), ModelOptions{.allocate = false});
  CHECK_THROWS_WITH(layout.logits(batch_idx()), Catch::Contains("layout only"));
  CHECK(m.logits(batch_idx()).shape() == Shape{2, 6, 16});  // padded vocabulary
}

TEST_CASE("sample_next: greedy - top-k and the sampled distribution", "[models][sampling]") {
  Rng rng(9);
  const std::vector<double> lg = {0.5, 2.0, -1.0, 2.0, 1.0};
  CHECK(sample_next(lg, 0.0, 0, rng) == 1);  // argmax, lowest id among ties
  CHECK(sample_next(lg, 1.0, 1, rng) == 1);
  for (int i = 0; i < 200; ++i) {
    const int32_t t = sample_next(lg, 1.0, 3, rng);
    CHECK((t == 1 || t == 3 || t == 4));
  }
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  std::vector<double> logp;
  for (double x : p) logp.push_back(std::log(x) + 3.0);
  std::vector<int> count(4, 0);
  const int N = 20000;
  for (int i = 0; i < N; ++i) ++count[sample_next(logp, 1.0, 0, rng)];
  for (int k = 0; k < 4; ++k) CHECK(std::abs(count[k] / double(N) - p[k]) < 0.015);
  // Temperature 0.5 squares the odds: p^2 / sum p^2.
  std::fill(count.begin(), count.end(), 0);
  for (int i = 0; i < N; ++i) ++count[sample_next(logp, 0.5, 0, rng)];
  CHECK(std::abs(count[3] / double(N) - 0.16 / 0.30) < 0.015);
  Rng a(1), b(1);
  for (int i = 0; i < 50; ++i) CHECK(sample_next(logp, 1.0, 0, a) == sample_next(logp, 1.0, 0, b));
  CHECK_THROWS_WITH(sample_next({}, 1.0, 0, rng), Catch::Contains("empty"));
  CHECK_THROWS_WITH(sample_next(lg, -1.0, 0, rng), Catch::Contains("temperature"));
  CHECK_THROWS_WITH(sample_next({1.0, NAN}, 1.0, 0, rng), Catch::Contains("logit 1 is not finite"));
}

TEST_CASE("generate crops the context - is reproducible and greedy matches argmax", "[models][sampling]") {
  for (const ModelConfig& c : {tiny_gpt2(), tiny_llama()}) {
    auto m = make_model(c);
    Rng init(2);
    init_model(*m, init);
    perturb(*m, c.vocab_size, 4);
    const std::vector<int32_t> prompt = {1, 2, 3};
    Rng r1(5), r2(5);
    const auto s1 = generate(*m, prompt, 12, 1.0, 5, r1);  // 15 tokens > max_seq_len 8
    const auto s2 = generate(*m, prompt, 12, 1.0, 5, r2);
    CHECK(s1 == s2);
    REQUIRE(s1.size() == 15);
    CHECK(std::vector<int32_t>(s1.begin(), s1.begin() + 3) == prompt);
    for (int32_t t : s1) CHECK((t >= 0 && t < c.vocab_size));
    // Greedy: each new token is the argmax of the valid logits of the window context_start
    // keeps (train/sampling.h: at most 8 tokens; when a 9th would not fit, the newest 4).
    Rng r3(0);
    const auto g = generate(*m, prompt, 10, 0.0, 0, r3);
    int64_t start = -1;
    for (size_t n = 3; n < g.size(); ++n) {
      start = context_start(static_cast<int64_t>(n), start, 8);
      const size_t T = n - static_cast<size_t>(start);
      CHECK(T <= 8);
      Tensor idx = Tensor::empty({1, static_cast<int64_t>(T)}, DType::i32);
      for (size_t t = 0; t < T; ++t) idx.data<int32_t>()[t] = g[n - T + t];
      NoGradGuard ng;
      auto row = m->logits(idx).value().slice(1, T - 1, T).to_vector();
      CHECK(g[n] == std::max_element(row.begin(), row.begin() + c.vocab_size) - row.begin());
    }
    Rng r4(0);
    CHECK_THROWS_WITH(generate(*m, {}, 1, 1.0, 0, r4), Catch::Contains("prompt is empty"));
    CHECK_THROWS_WITH(generate(*m, {1, 11}, 1, 1.0, 0, r4), Catch::Contains("prompt token 11 at position 1"));
  }
}

// Llama 3's 128,256-token vocabulary end to end: ids past 65535 written to a uint32 shard (llm.c's
// llama-3 header), read back at 4 bytes a token, batched by the DataLoader into a tiny Llama of
// that vocabulary. At init (std 0.02) the logits are near uniform, so the loss is near ln V; the
// embedding's gradient lands on exactly the rows of the ids in the batch.
TEST_CASE("a 128256-token Llama reads uint32 ids past 65535 through the loader", "[models]") {
  ModelConfig c = model_config("llama-nano");
  c.n_layer = 1;
  c.vocab_size = c.padded_vocab_size = 128256;
  auto m = make_model(c);
  Rng rng(5);
  init_model(*m, rng);
  std::vector<int32_t> ids(200);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(65536 + (i * 7919) % 62720);
  const std::string shard = (std::filesystem::temp_directory_path() / "zt_models_llama3_ids.bin").string();
  REQUIRE(write_token_shard_for_vocab(shard, ids, c.vocab_size) == 4);
  const TokenIds toks = read_token_shard(shard);
  std::filesystem::remove(shard);
  REQUIRE(toks.bytes_per_token() == 4);
  DataLoader dl(toks, 2, 16);
  Tensor x, y;
  dl.next_batch(x, y);
  Var loss = m->loss(x, y);
  loss.backward();
  CHECK(std::abs(loss.value().item() - std::log(128256.0)) < 0.05);
  const ParamSet& emb = m->units()[0]->params();
  const std::vector<double> g = emb.grad(emb.find("embed_tokens.weight")).to_vector();
  const std::vector<double> xv = x.to_vector();
  auto row_abs = [&](int64_t r) {
    double s = 0;
    for (int64_t k = 0; k < c.n_embd; ++k) s += std::abs(g[static_cast<size_t>(r * c.n_embd + k)]);
    return s;
  };
  std::vector<char> seen(static_cast<size_t>(c.vocab_size), 0);
  for (double v : xv) {
    const auto r = static_cast<int64_t>(v);
    CHECK(r > 65535);
    seen[static_cast<size_t>(r)] = 1;
  }
  double inside = 0, outside = 0;
  for (int64_t r = 0; r < c.vocab_size; ++r) (seen[static_cast<size_t>(r)] ? inside : outside) += row_abs(r);
  CHECK(inside > 0);
  CHECK(outside == 0.0);
}
