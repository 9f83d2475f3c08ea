// defines: main (zt-tokenize); helpers: read_file, seconds_since, draw_bar, printable, cmd_train,
//          cmd_encode, cmd_show
//
// zt-tokenize — tokenizers for ZeroTensor: train a byte-level BPE vocabulary on text, and turn
// text files into llm.c token shards.
//
//   zt-tokenize train --vocab-size 512 --out runs/tok data/corpus/train.txt
//       -> runs/tok/vocab.json + merges.txt (GPT-2's files) and tokenizer.json (Hugging Face)
//   zt-tokenize encode --tokenizer runs/tok --out runs/train.bin data/corpus/train.txt
//       -> an llm.c shard: uint16 tokens (magic 20240520) for vocabularies up to 65536, else uint32
//          (20240801, llm.c's llama-3 header); each file one document, preceded by the tokenizer's
//          end-of-text when it has one (llm.c's convention)
//   zt-tokenize show --tokenizer runs/tok "int main("   -> the ids and each token's bytes
//
// encode prints a progress bar on stderr when stderr is a terminal (or with --progress), and the
// throughput (MB/s, tokens/s) at the end.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "formats/bpe_tokenizer.h"
#include "formats/bpe_trainer.h"
#include "formats/token_data.h"
#include "formats/tokenizer.h"

using namespace zt;
using Clock = std::chrono::steady_clock;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) ZT_THROW("input '", path, "': cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One line on stderr, redrawn in place: [#####     ]  42%  3.1 MB/s  812k tokens/s
void draw_bar(double frac, double mb_s, double tok_s) {
  constexpr int kWidth = 30;
  const int full = static_cast<int>(frac * kWidth);
  std::string bar(full, '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r[%s] %5.1f%%  %6.2f MB/s  %9.0f tokens/s", bar.c_str(), 100.0 * frac, mb_s, tok_s);
  std::fflush(stderr);
}

// A string for the terminal: control bytes and bytes >= 0x80 as \xNN, the rest as is.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

int cmd_train(const std::vector<std::string>& files, const std::string& out, int32_t vocab_size,
              const std::vector<std::string>& specials, int64_t min_frequency) {
  std::vector<std::string> texts;
  std::vector<std::string_view> views;
  int64_t bytes = 0;
  for (const auto& f : files) {
    texts.push_back(read_file(f));
    bytes += static_cast<int64_t>(texts.back().size());
  }
  for (const auto& t : texts) views.emplace_back(t);
  BpeTrainOptions opt;
  opt.vocab_size = vocab_size;
  opt.specials = specials;
  opt.min_frequency = min_frequency;
  const auto t0 = Clock::now();
  const bool tty = ::isatty(2);
  BpeModel m = train_bpe(views, opt, [&](int64_t done, int64_t wanted) {
    if (tty && (done % 16 == 0 || done == wanted)) {
      std::fprintf(stderr, "\rzt-tokenize train: merge %lld / %lld", static_cast<long long>(done), static_cast<long long>(wanted));
      std::fflush(stderr);
    }
  });
  if (tty) std::fprintf(stderr, "\n");
  const double secs = seconds_since(t0);
  BpeTokenizer check(m, out);  // the model is valid before anything is written
  save_gpt2_files(m, out);
  save_tokenizer_json(m, out + "/tokenizer.json");
  std::printf("zt-tokenize train: %zu file(s), %lld bytes -> %zu tokens (256 bytes + %zu merges + %zu special) in %.2f s\n",
              files.size(), static_cast<long long>(bytes), m.tokens.size(), m.merges.size(), m.specials.size(), secs);
  if (static_cast<int32_t>(m.tokens.size()) < vocab_size)
    std::printf("zt-tokenize train: stopped at %zu tokens, not %d: no pair occurs %lld times any more\n", m.tokens.size(),
                vocab_size, static_cast<long long>(min_frequency));
  std::printf("zt-tokenize train: wrote %s/vocab.json, %s/merges.txt, %s/tokenizer.json\n", out.c_str(), out.c_str(), out.c_str());
  return 0;
}

int cmd_encode(const std::vector<std::string>& files, const std::string& tok_path, const std::string& out, bool progress) {
  std::unique_ptr<Tokenizer> tok = load_tokenizer(tok_path);
  const bool bar = progress || ::isatty(2);
  int64_t total = 0;
  for (const auto& f : files) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(f, ec);
    if (ec) ZT_THROW("input '", f, "': cannot read its size: ", ec.message());
    total += static_cast<int64_t>(n);
  }
  std::vector<int32_t> ids;
  int64_t done = 0;
  const auto t0 = Clock::now();
  for (const auto& f : files) {
    const std::string text = read_file(f);
    if (text.find('\0') != std::string::npos)
      ZT_THROW("input '", f, "': holds a NUL byte at offset ", text.find('\0'), ": not text");
    // A document's layout: with a BOS (Llama 3) <|begin_of_text|> text <|end_of_text|>, as Llama 3
    // was pretrained; else llm.c's, every document after <|endoftext|> (the EOS, if any).
    const int32_t bos = tok->bos_id(), eos = tok->eot_id();
    if (bos >= 0) ids.push_back(bos);
    else if (eos >= 0) ids.push_back(eos);
    // Byte-level kinds with GPT-2's pattern encode in chunks that tokenize exactly as the whole
    // (gpt2_safe_chunks), so the bar moves within a large file; SentencePiece (its word marker at
    // the start of each call would differ if cut) and a file's own pattern (no cut is proven safe
    // for it) encode each file in one call.
    const auto* bpe = dynamic_cast<const BpeTokenizer*>(tok.get());
    std::vector<std::string_view> chunks;
    if (tok->kind() == "sentencepiece" || (bpe && !bpe->gpt2_pattern())) {
      chunks.push_back(text);
    } else {
      chunks = gpt2_safe_chunks(text, 1 << 20);
    }
    for (std::string_view c : chunks) {
      const std::vector<int32_t> part = tok->encode(c);
      ids.insert(ids.end(), part.begin(), part.end());
      done += static_cast<int64_t>(c.size());
      if (bar) {
        const double s = std::max(seconds_since(t0), 1e-9);
        draw_bar(total ? static_cast<double>(done) / static_cast<double>(total) : 1.0, done / s / 1e6, ids.size() / s);
      }
    }
    if (bos >= 0 && eos >= 0) ids.push_back(eos);
  }
  const double secs = std::max(seconds_since(t0), 1e-9);
  if (bar) std::fprintf(stderr, "\n");
  const int width = write_token_shard_for_vocab(out, ids, tok->vocab_size());
  std::printf("zt-tokenize encode: %zu file(s), %lld bytes -> %zu tokens (%.3f bytes/token) with %s '%s' (%d tokens)\n",
              files.size(), static_cast<long long>(total), ids.size(), ids.empty() ? 0.0 : static_cast<double>(total) / ids.size(),
              tok->kind().c_str(), tok->source().c_str(), tok->vocab_size());
  std::printf("zt-tokenize encode: %.3f s, %.2f MB/s, %.0f tokens/s; wrote %s (uint%d tokens)\n", secs, total / secs / 1e6,
              ids.size() / secs, out.c_str(), width * 8);
  return 0;
}

int cmd_show(const std::string& tok_path, const std::string& text) {
  std::unique_ptr<Tokenizer> tok = load_tokenizer(tok_path);
  const std::vector<int32_t> ids = tok->encode(text);
  std::printf("%s '%s': %d tokens; %zu ids:", tok->kind().c_str(), tok->source().c_str(), tok->vocab_size(), ids.size());
  for (int32_t id : ids) std::printf(" %d", id);
  std::printf("\n");
  for (int32_t id : ids) std::printf("%8d  '%s'\n", id, printable(tok->decode_token(id)).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zt-tokenize: train a byte-level BPE tokenizer; text files -> llm.c token shards"};
  app.require_subcommand(1);

  std::vector<std::string> train_files, encode_files;
  std::string train_out, encode_out, tok_path, show_tok, show_text;
  int32_t vocab_size = 512;
  int64_t min_frequency = 2;
  std::vector<std::string> specials = {kGpt2EndOfText};
  bool progress = false;

  CLI::App* train = app.add_subcommand("train", "learn a byte-level BPE vocabulary (GPT-2's kind) from text files");
  train->add_option("files", train_files, "text files")->required()->check(CLI::ExistingFile);
  train->add_option("--out", train_out, "directory for vocab.json, merges.txt and tokenizer.json")->required();
  train->add_option("--vocab-size", vocab_size, "tokens in all: 256 bytes + merges + specials")->capture_default_str()
      ->check(CLI::Range(257, 1 << 20));
  train->add_option("--special", specials, "special tokens (last ids, in order)")->capture_default_str();
  train->add_option("--min-frequency", min_frequency, "a pair seen fewer times is never merged")->capture_default_str()
      ->check(CLI::PositiveNumber);

  CLI::App* encode = app.add_subcommand("encode", "text files -> one llm.c token shard (each file a document)");
  encode->add_option("files", encode_files, "text files")->required()->check(CLI::ExistingFile);
  encode->add_option("--tokenizer", tok_path, "tokenizer.json, vocab.json (merges.txt beside it), .model, a directory, or 'bytes'")
      ->required();
  encode->add_option("--out", encode_out, "the shard to write (.bin)")->required();
  encode->add_flag("--progress", progress, "draw the progress bar even when stderr is not a terminal");

  CLI::App* show = app.add_subcommand("show", "encode a text and print its ids and tokens");
  show->add_option("--tokenizer", show_tok, "the tokenizer (as for encode)")->required();
  show->add_option("text", show_text, "the text")->required();

  CLI11_PARSE(app, argc, argv);
  try {
    if (train->parsed()) return cmd_train(train_files, train_out, vocab_size, specials, min_frequency);
    if (encode->parsed()) return cmd_encode(encode_files, tok_path, encode_out, progress);
    return cmd_show(show_tok, show_text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt-tokenize: error: %s\n", e.what());
    return 1;
  }
}
