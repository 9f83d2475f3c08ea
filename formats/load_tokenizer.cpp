// defines: load_tokenizer (formats/tokenizer.h) — which kind of tokenizer a path holds.
//          Layer formats/.
#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "formats/bpe_tokenizer.h"
#include "formats/sentencepiece_tokenizer.h"
#include "formats/tokenizer.h"

namespace zt {

namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::unique_ptr<Tokenizer> gpt2_pair(const fs::path& vocab) {
  const fs::path merges = vocab.parent_path() / "merges.txt";
  if (!is_file(merges))
    ZT_THROW("tokenizer '", vocab.string(), "': a vocab.json needs merges.txt beside it (GPT-2's two files), and '",
             merges.string(), "' is not there");
  return read_gpt2_bpe(vocab.string(), merges.string());
}

const char* kAccepted =
    "expected 'bytes', a tokenizer.json (Hugging Face, BPE), a vocab.json with merges.txt beside it (GPT-2), "
    "a SentencePiece .model, or a directory holding one of them";

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (path == "bytes") return std::make_unique<ByteTokenizer>();
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (is_file(p / "tokenizer.json")) return read_tokenizer_json((p / "tokenizer.json").string());
    if (is_file(p / "vocab.json")) return gpt2_pair(p / "vocab.json");
    if (is_file(p / "tokenizer.model")) return std::make_unique<SentencePieceTokenizer>((p / "tokenizer.model").string());
    ZT_THROW("tokenizer directory '", path, "' holds no tokenizer.json, vocab.json or tokenizer.model: ", kAccepted);
  }
  if (!fs::exists(p, ec)) ZT_THROW("tokenizer '", path, "': no such file or directory (", kAccepted, ")");
  if (!is_file(p)) ZT_THROW("tokenizer '", path, "': not a regular file or directory");
  const std::string name = p.filename().string();
  if (name == "vocab.json") return gpt2_pair(p);
  if (p.extension() == ".json") return read_tokenizer_json(path);
  if (p.extension() == ".model") return std::make_unique<SentencePieceTokenizer>(path);
  ZT_THROW("tokenizer '", path, "': cannot tell its kind from the name: ", kAccepted);
}

}  // namespace zt
