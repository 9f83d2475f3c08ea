// defines: main (bench_generate); helpers: bench_config
//
// bench_generate — generation with the KV cache against full recomputation per token
// (train/sampling.h's generate, use_cache true / false), on the CPU.
//
//   bench_generate [--models gpt-mini@1024,gpt-mini,llama-mini@1024] [--tokens 512]
//                  [--prompt 16] [--threads 0] [--out table.md] [--cache-only]
//
// A model is a named config (models/model_config.cpp) or llama-mini (gpt-mini's shape as a Llama
// with grouped-query attention: 6 layers, C 384, 6 query heads over 2 kv heads, SwiGLU 1024,
// vocabulary 256), optionally @T to set max_seq_len (gpt-mini's 256 would make 512 tokens slide
// the window: gpt-mini@1024 measures decoding alone, plain gpt-mini the window rule too). The
// weights are random (init_model, seed 1): speed does not depend on them.
//
// Per model: greedy (temperature 0) generation of --tokens tokens after a prompt of --prompt
// byte ids, first with the cache, then without; one untimed warmup generation of 8 tokens each.
// Reported: prefill ms, total s, tokens/s (generated / total), decode tokens/s (tokens after the
// first / the time after the prefill), the cache's bytes, the speedup (no-cache total / cache
// total), and how many generated tokens the two runs share before they first differ (greedy
// on random weights has near-ties, where float rounding of the two summation orders may pick
// another token: the tests check equality on models where ties are not that close).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "models/init.h"
#include "models/model_config.h"
#include "train/sampling.h"

using namespace zt;

namespace {

ModelConfig bench_config(const std::string& spec) {
  const size_t at = spec.find('@');
  const std::string name = spec.substr(0, at);
  ModelConfig c;
  if (name == "llama-mini") {
    c = model_config("llama-nano");
    c.n_layer = 6, c.n_embd = 384, c.n_head = 6, c.n_kv_head = 2, c.ffn_hidden = 1024;
    c.max_seq_len = 256, c.vocab_size = c.padded_vocab_size = 256;
  } else {
    c = model_config(name);
  }
  if (at != std::string::npos) {
    try {
      c.max_seq_len = std::stoll(spec.substr(at + 1));
    } catch (const std::exception&) {
      ZT_THROW("--models: '", spec, "': expected NAME@MAX_SEQ_LEN with an integer length");
    }
  }
  c.validate();
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_generate: generation with and without the KV cache"};
  std::string models = "gpt-mini@1024,gpt-mini,llama-mini@1024", out;
  int64_t tokens = 512, prompt_len = 16;
  int threads = 0;
  bool cache_only = false;
  app.add_flag("--cache-only", cache_only, "only the cached run (for profiling the decode step)");
  app.add_option("--models", models, "comma-separated NAME[@MAX_SEQ_LEN]")->capture_default_str();
  app.add_option("--tokens", tokens, "tokens to generate")->capture_default_str();
  app.add_option("--prompt", prompt_len, "prompt length (byte ids)")->capture_default_str();
  app.add_option("--threads", threads, "threads (0 = all cores)")->capture_default_str();
  app.add_option("--out", out, "write the markdown table here too");
  CLI11_PARSE(app, argc, argv);
  try {
    set_num_threads(threads);
    std::ostringstream t;
    t << "| model | max_seq_len | params | mode | prompt | generated | prefill ms | total s | tokens/s | decode tokens/s "
         "| KV cache MiB | window slides | speedup | same tokens |\n"
         "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    std::stringstream ss(models);
    for (std::string spec; std::getline(ss, spec, ',');) {
      const ModelConfig c = bench_config(spec);
      auto m = make_model(c);
      Rng init(1);
      init_model(*m, init);
      std::vector<int32_t> prompt;
      for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 11) % c.vocab_size));
      GenerationOptions o;
      o.temperature = 0;
      GenerationResult r[2];
      for (int mode = 0; mode < (cache_only ? 1 : 2); ++mode) {
        o.use_cache = mode == 0;
        o.max_new_tokens = 8;
        generate(*m, prompt, o);  // warmup
        o.max_new_tokens = tokens;
        std::fprintf(stderr, "%s: %s ...\n", spec.c_str(), o.use_cache ? "KV cache" : "no cache");
        r[mode] = generate(*m, prompt, o);
        const GenerationStats& s = r[mode].stats;
        std::fprintf(stderr, "  %.2f s, %.1f tokens/s\n", s.total_s(), s.tokens_per_s());
      }
      if (cache_only) continue;
      size_t same = 0;
      while (prompt.size() + same < r[0].tokens.size() && prompt.size() + same < r[1].tokens.size() &&
             r[0].tokens[prompt.size() + same] == r[1].tokens[prompt.size() + same])
        ++same;
      char speedup[32];  // no-cache total / cache total
      std::snprintf(speedup, sizeof speedup, "%.1fx", r[1].stats.total_s() / r[0].stats.total_s());
      const std::string agree = std::to_string(same) + " / " + std::to_string(tokens);
      for (int mode = 0; mode < 2; ++mode) {
        const GenerationStats& s = r[mode].stats;
        char line[512];
        std::snprintf(line, sizeof line, "| %s | %lld | %.2fM | %s | %lld | %lld | %.1f | %.2f | %.1f | %.1f | %.2f | %lld | %s | %s |\n",
                      spec.c_str(), static_cast<long long>(c.max_seq_len), static_cast<double>(m->num_params()) / 1e6,
                      mode == 0 ? "KV cache" : "no cache", static_cast<long long>(s.prompt_tokens),
                      static_cast<long long>(s.generated_tokens), s.prefill_s * 1e3, s.total_s(), s.tokens_per_s(),
                      s.decode_tokens_per_s(), static_cast<double>(s.kv_cache_bytes) / (1 << 20),
                      static_cast<long long>(s.context_slides),
                      mode == 0 ? speedup : "1x", agree.c_str());
        t << line;
      }
    }
    std::cout << t.str();
    if (!out.empty()) std::ofstream(out) << t.str();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_generate: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
