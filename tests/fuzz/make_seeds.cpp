// defines: main (make_seeds)
//
// make_seeds OUT: the fuzz targets' seed corpora, written by ZeroTensor's own writers (so the
// seeds are files our readers must accept), one folder per target: OUT/<target>/...
// (fuzz_config's seeds are configs/*.json, copied by scripts/fuzz.sh.) SentencePiece has no
// writer here: its seeds are models trained by spm_train (Debian's sentencepiece, which
// scripts/install-deps.sh installs).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/rng.h"
#include "core/tensor.h"
#include "formats/bpe_tokenizer.h"
#include "formats/bpe_trainer.h"
#include "formats/hf_config.h"
#include "formats/llmc_checkpoint.h"
#include "formats/safetensors.h"
#include "formats/token_data.h"
#include "models/gpt2.h"
#include "models/init.h"
#include "models/model_config.h"
#include "tests/fuzz/fuzz_checkpoint.h"

namespace fs = std::filesystem;
using namespace zt;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT\n");
    return 2;
  }
  const fs::path out = argv[1];
  for (const char* t :
       {"safetensors", "llmc", "tokens", "hf_config", "ckpt_meta", "tokenizer", "tiktoken_json", "sentencepiece"})
    fs::create_directories(out / t);

  // safetensors: float32 and bfloat16 tensors, metadata
  Rng rng(1);
  Tensor a = Tensor::from_vector({1.0, -2.0, 3.5, 0.25, 8.0, -1.0}, {2, 3}, DType::f32, Category::workspace);
  Tensor b = a.to(DType::bf16);
  save_safetensors((out / "safetensors" / "two.safetensors").string(), {{"a", a}, {"b.weight", b}}, {{"format", "pt"}});
  save_safetensors((out / "safetensors" / "one.safetensors").string(), {{"x", a.view({6})}});

  // llm.c: a tiny GPT-2 in float32 (v3) and bfloat16 (v5)
  ModelConfig c = model_config("gpt2-nano");
  GPT2 m(c);
  init_model(m, rng);
  save_llmc_checkpoint((out / "llmc" / "nano_v3.bin").string(), m, kLlmcVersionF32);
  save_llmc_checkpoint((out / "llmc" / "nano_v5.bin").string(), m, kLlmcVersionBF16);

  // tokens: a shard and a text file
  std::vector<uint16_t> toks;
  for (int i = 0; i < 200; ++i) toks.push_back(static_cast<uint16_t>((i * 37) % 256));
  write_token_shard((out / "tokens" / "shard.bin").string(), toks);
  std::ofstream((out / "tokens" / "text.txt").string()) << "The quick brown fox jumps over the lazy dog.\n";

  // Hugging Face config.json for GPT-2 and Llama
  for (const char* name : {"gpt2-nano", "llama-nano"}) {
    const auto names = model_config_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    std::ofstream((out / "hf_config" / (std::string(name) + ".json")).string())
        << hf_config_to_json(model_config(name), DType::f32).dump(2);
  }
  // tokenizer: byte-level BPE vocabularies trained here, as tokenizer.json and as
  // "vocab.json NUL merges.txt" (fuzz_tokenizer reads both from one input)
  for (int vocab : {260, 320}) {
    BpeTrainOptions opt;
    opt.vocab_size = vocab;
    const BpeModel bpe = train_bpe({"hug hug hug pug pug bun", "int main() {\n  return 0;\n}\n// it's 1234 \xC3\xA9t\xC3\xA9\n"}, opt);
    const fs::path dir = out / ("tokenizer_files_" + std::to_string(vocab));
    save_gpt2_files(bpe, dir.string());
    save_tokenizer_json(bpe, (out / "tokenizer" / ("tokenizer_" + std::to_string(vocab) + ".json")).string());
    std::ifstream v(dir / "vocab.json", std::ios::binary), m(dir / "merges.txt", std::ios::binary);
    std::ofstream pair((out / "tokenizer" / ("vocab_merges_" + std::to_string(vocab))).string(), std::ios::binary);
    pair << v.rdbuf() << '\0' << m.rdbuf();
    fs::remove_all(dir);
  }
  // tiktoken_json: the tiktoken family's shape (formats/tokenizer_json.cpp) over a vocabulary
  // trained here: a Split with cl100k_base's, o200k_base's or GPT-2's pattern, ignore_merges, and
  // specials that leave ids unused
  {
    BpeTrainOptions opt;
    opt.vocab_size = 300;
    opt.specials = {};
    const BpeModel bpe = train_bpe({"hug hug hug pug pug bun 12345 DON'T don't", "int main() {\n  return 0;\n}\n"},
                                   opt);
    const std::string base = (out / "tiktoken_json" / "base.json").string();
    save_tokenizer_json(bpe, base);
    std::ifstream in(base);
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json gpt2_shape = nlohmann::json::parse(ss.str());
    fs::remove(base);
    const auto n = static_cast<int32_t>(bpe.tokens.size());
    const std::pair<const char*, const char*> patterns[] = {
        {"cl100k",
         R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
        {"o200k",
         R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
        {"gpt2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}};
    for (const auto& [name, pattern] : patterns) {
      nlohmann::json j = gpt2_shape;
      j["pre_tokenizer"] = {
          {"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
      j["model"]["ignore_merges"] = true;
      j["added_tokens"] = nlohmann::json::array();
      for (const auto& [text, id] : {std::pair{"<|begin_of_text|>", n + 1}, std::pair{"<|endoftext|>", n + 4}})
        j["added_tokens"].push_back({{"id", id},
                                     {"content", text},
                                     {"single_word", false},
                                     {"lstrip", false},
                                     {"rstrip", false},
                                     {"normalized", false},
                                     {"special", true}});
      std::ofstream((out / "tiktoken_json" / (std::string(name) + ".json")).string()) << j.dump();
    }
  }
  // sentencepiece: models spm_train makes from a small text (BPE and unigram; identity and nmt_nfkc)
  {
    const fs::path text = out / "sentencepiece" / "text.txt";
    {
      std::ofstream t(text.string());
      for (int i = 0; i < 40; ++i)
        t << "hug hug pug bun " << i << " int main() { return 0; } \xE4\xBD\xA0\xE5\xA5\xBD caf\xC3\xA9 \xEF\xBC\xA1\n";
    }
    for (const char* type : {"bpe", "unigram"}) {
      for (const char* rule : {"identity", "nmt_nfkc"}) {
        const std::string prefix = (out / "sentencepiece" / (std::string(type) + "_" + rule)).string();
        const std::string cmd =
            "spm_train --input='" + text.string() + "' --model_prefix='" + prefix + "' --model_type=" + type +
            " --normalization_rule_name=" + rule +
            " --vocab_size=300 --hard_vocab_limit=false --byte_fallback=true --minloglevel=2 >/dev/null 2>&1";
        if (std::system(cmd.c_str()) != 0) {
          std::fprintf(
              stderr,
              "make_seeds: '%s' failed (spm_train comes with Debian's sentencepiece: scripts/install-deps.sh)\n",
              cmd.c_str());
          return 1;
        }
        fs::remove(prefix + ".vocab");
      }
    }
    fs::remove(text);
  }
  // ZeRO sharded checkpoint: the meta.json of the fixture fuzz_ckpt_meta reads beside its rank file
  const std::string step = fuzz::write_toy_checkpoint((out / "ckpt_fixture").string());
  fs::copy_file(fs::path(step) / "meta.json", out / "ckpt_meta" / "meta.json", fs::copy_options::overwrite_existing);
  fs::remove_all(out / "ckpt_fixture");
  std::printf("seeds written under %s\n", out.string().c_str());
  return 0;
}
