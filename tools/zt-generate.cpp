// defines: main (zt-generate); file-local: write_logits
//
// zt-generate — sample text from a trained model.
//
//   zt-generate --ckpt runs/mini --prompt "int main(" --tokens 200 --temperature 0.8 --top-k 40
//   zt-generate --llmc gpt2_124M.bin --prompt-ids 15496,11 --tokens 20
//   zt-generate --hf gpt2/ --prompt-ids 15496,11 --tokens 20 --temperature 0   (Hugging Face directory)
//   zt-generate --ckpt runs/mini --prompt "a" --top-p 0.9 --stop-id 10 --no-cache
//
//   zt-generate --ckpt runs/bpe --tokenizer runs/tok --prompt "int main(" --tokens 100
//   zt-generate --hf gpt2/ --prompt-ids 15496,11,995 --logits out.f32   (no sampling: see below)
//
// Text in, text out through --tokenizer (formats/tokenizer.h's load_tokenizer: tokenizer.json,
// vocab.json + merges.txt, a SentencePiece .model, a directory), or through the byte tokenizer
// for models with a 256-token vocabulary; otherwise give --prompt-ids and read ids back.
// The prompt is printed, then each token as soon as it is sampled (flushed); a last line on
// stderr gives the prompt and generated token counts, the prefill time and tokens/s. Generation
// uses a KV cache (train/sampling.h); --no-cache recomputes the whole window for every token.
// A tokenizer's end-of-text token (BPE's <|endoftext|>, SentencePiece's </s>) stops a generation
// (kept in the output), as does any --stop-id; the byte tokenizer has none.
// --logits FILE runs one forward pass over the prompt instead and writes its logits, float32
// little-endian, row-major (T, V) over the real vocabulary V (the padding cut off), with nothing
// else in the file: what an outside program (bench/hf_client.py: transformers) compares with.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>

#include "core/parallel.h"
#include "formats/hf_weights.h"
#include "formats/llmc_checkpoint.h"
#include "formats/tokenizer.h"
#include "models/gpt2.h"
#include "models/init.h"
#include "train/sampling.h"
#include "train/trainer.h"

using namespace zt;

namespace {

// --logits: one forward pass over ids; (T, V) float32 to path, the padded vocabulary cut off.
void write_logits(Model& model, const std::vector<int32_t>& ids, const std::string& path) {
  NoGradGuard no_grad;
  const int64_t T = static_cast<int64_t>(ids.size()), V = model.vocab_size();
  if (T > model.max_seq_len())
    ZT_THROW("--logits: the prompt has ", T, " tokens, over the model's context ", model.max_seq_len());
  Tensor idx = Tensor::empty({1, T}, DType::i32, Category::activations, cpu_allocator());
  std::copy(ids.begin(), ids.end(), idx.data<int32_t>());
  const std::vector<double> all = model.logits(idx).value().slice(2, 0, V).to_vector();  // (1, T, V)
  std::vector<float> f(all.begin(), all.end());
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) ZT_THROW("--logits: cannot open ", path, " for writing: ", std::strerror(errno));
  const size_t n = std::fwrite(f.data(), sizeof(float), f.size(), out);
  const bool closed = std::fclose(out) == 0;
  if (n != f.size() || !closed) ZT_THROW("--logits: writing ", path, " failed (disk full?): ", std::strerror(errno));
  std::fprintf(stderr, "zt-generate: wrote %s: logits (%lld, %lld) float32\n", path.c_str(), static_cast<long long>(T),
               static_cast<long long>(V));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zt-generate: sample from a ZeroTensor checkpoint, an llm.c GPT-2 checkpoint or Hugging Face weights"};
  std::string ckpt, llmc, hf, prompt = "\n", prompt_ids, logits_path;
  int64_t tokens = 200, top_k = 0;
  double temperature = 1.0, top_p = 1.0;
  std::vector<int32_t> stop_ids;
  bool no_cache = false;
  uint64_t seed = 1337;
  int threads = 0;
  auto* o1 = app.add_option("--ckpt", ckpt, "training checkpoint directory (or a step directory in it)");
  auto* o2 = app.add_option("--llmc", llmc, "llm.c GPT-2 checkpoint file");
  auto* o3 = app.add_option("--hf", hf,
                            "Hugging Face GPT-2 / Llama checkpoint: directory with config.json and model.safetensors "
                            "(or its .index.json shards), or a .safetensors file with config.json beside it");
  o1->excludes(o2)->excludes(o3);
  o2->excludes(o3);
  std::string tokenizer_path;
  app.add_option("--prompt", prompt, "prompt text (through --tokenizer, or bytes for 256-token models)");
  app.add_option("--tokenizer", tokenizer_path,
                 "tokenizer for --prompt and the output: tokenizer.json, vocab.json (merges.txt beside it), "
                 "SentencePiece .model, or a directory");
  app.add_option("--prompt-ids", prompt_ids, "prompt as comma-separated token ids (any vocabulary)");
  app.add_option("-n,--tokens", tokens, "tokens to generate")->capture_default_str();
  app.add_option("--temperature", temperature, "softmax temperature (0 = greedy)")->capture_default_str();
  app.add_option("--top-k", top_k, "sample among the k most likely tokens (0 = all)")->capture_default_str();
  app.add_option("--top-p", top_p, "nucleus sampling: the most likely tokens holding this much probability, in (0, 1]")
      ->capture_default_str();
  app.add_option("--seed", seed, "sampling seed")->capture_default_str();
  app.add_option("--stop-id", stop_ids, "stop when this token id is generated (repeat for several)");
  app.add_flag("--no-cache", no_cache, "recompute the whole context for every token (no KV cache; to compare)");
  app.add_option("--threads", threads, "threads (0 = all cores)")->capture_default_str();
  app.add_option("--logits", logits_path,
                 "write the prompt's logits (float32, T x vocab, row-major) to this file and exit (no sampling)");
  CLI11_PARSE(app, argc, argv);

  try {
    if (!ckpt.empty() + !llmc.empty() + !hf.empty() != 1)
      ZT_THROW("give exactly one of --ckpt DIR, --llmc FILE or --hf DIR");
    set_num_threads(threads);
    std::unique_ptr<Model> model;
    if (!ckpt.empty()) {
      model = load_trained_model(ckpt);
    } else if (!hf.empty()) {
      model = make_model(read_hf_config(hf));
      load_hf_weights(hf, *model);
    } else {
      model = make_model(read_llmc_header(llmc));
      load_llmc_checkpoint(llmc, dynamic_cast<GPT2&>(*model));
    }
    std::unique_ptr<Tokenizer> tok;  // null: ids in, ids out
    if (!tokenizer_path.empty()) {
      tok = load_tokenizer(tokenizer_path);
      check_tokenizer_fits_model(*tok, model->vocab_size(), "the model");
    } else if (model->vocab_size() == ByteTokenizer::kVocabSize) {
      tok = std::make_unique<ByteTokenizer>();
    }
    std::vector<int32_t> ids;
    if (!prompt_ids.empty()) {
      std::stringstream ss(prompt_ids);
      for (std::string item; std::getline(ss, item, ',');) {
        try {
          ids.push_back(std::stoi(item));
        } catch (const std::exception&) {
          ZT_THROW("--prompt-ids: '", item, "' is not an integer token id");
        }
      }
    } else {
      if (!tok)
        ZT_THROW("this model's vocabulary has ", model->vocab_size(),
                 " tokens, not 256: the byte tokenizer does not apply; give --tokenizer or --prompt-ids");
      // the tokenizer's BOS first where it has one (Llama 3: transformers' add_special_tokens)
      if (tok->bos_id() >= 0) ids.push_back(tok->bos_id());
      const std::vector<int32_t> text_ids = tok->encode(prompt);
      ids.insert(ids.end(), text_ids.begin(), text_ids.end());
    }
    for (int32_t id : ids)
      if (id < 0 || id >= model->vocab_size())
        ZT_THROW("prompt token id ", id, " is outside the vocabulary [0, ", model->vocab_size(), ")");
    if (ids.empty()) ZT_THROW("the prompt is empty");
    if (!logits_path.empty()) {
      write_logits(*model, ids, logits_path);
      return 0;
    }
    GenerationOptions opts;
    opts.max_new_tokens = tokens;
    opts.temperature = temperature;
    opts.top_k = top_k;
    opts.top_p = top_p;
    opts.seed = seed;
    opts.stop_ids = stop_ids;
    if (tok && tok->eot_id() >= 0) opts.stop_ids.push_back(tok->eot_id());
    opts.use_cache = !no_cache;
    // Streamed: the prompt, then each token as it is made (ids comma-separated without a tokenizer).
    if (tok) {
      std::cout << tok->decode(ids);
    } else {
      for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
    }
    std::cout << std::flush;
    const GenerationResult r = generate(*model, ids, opts, [&](int32_t t) {
      if (tok)
        std::cout << tok->decode_token(t);
      else
        std::cout << "," << t;
      std::cout << std::flush;
    });
    std::cout << std::endl;
    const GenerationStats& st = r.stats;
    std::fprintf(stderr,
                 "zt-generate: prompt %lld tokens, generated %lld tokens in %.3f s: prefill %.1f ms, %.1f tokens/s "
                 "(decode %.1f tokens/s), %s",
                 static_cast<long long>(st.prompt_tokens), static_cast<long long>(st.generated_tokens), st.total_s(),
                 st.prefill_s * 1e3, st.tokens_per_s(), st.decode_tokens_per_s(),
                 opts.use_cache ? "KV cache" : "no cache");
    if (opts.use_cache) std::fprintf(stderr, " %.2f MiB", static_cast<double>(st.kv_cache_bytes) / (1 << 20));
    if (st.context_slides)
      std::fprintf(stderr, ", window slid %lld times at max_seq_len %lld", static_cast<long long>(st.context_slides),
                   static_cast<long long>(model->max_seq_len()));
    if (st.stopped_by_stop_id) std::fprintf(stderr, ", stopped at stop id %d", r.tokens.back());
    std::fprintf(stderr, "\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt-generate: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
