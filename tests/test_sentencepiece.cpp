// defines: 2 Catch2 test cases tagged [tokenizer], [sentencepiece]; helpers: read_text, train_spm
//
// formats/sentencepiece_tokenizer.h: a Llama-style SentencePiece model (BPE, byte fallback) trained
// at test time by spm_train (Debian's sentencepiece package, installed by scripts/install-deps.sh)
// on data/corpus, loaded through load_tokenizer, round-tripping the corpus.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "formats/sentencepiece_tokenizer.h"
#include "formats/tokenizer.h"
#include "tests/temp_dir.h"

using namespace zt;
using zt::test::TempDir;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// spm_train with Llama's choices that matter here: BPE, byte fallback (any byte encodes), no
// normalization and no whitespace folding (so source code round-trips), digits split.
std::string train_spm(const TempDir& tmp, int vocab_size) {
  const std::string prefix = tmp.file("sp");
  const std::string cmd = "spm_train --input=" + std::string(ZT_SOURCE_DIR) + "/data/corpus/train.txt --model_prefix=" + prefix +
                          " --vocab_size=" + std::to_string(vocab_size) +
                          " --model_type=bpe --character_coverage=1.0 --byte_fallback=true"
                          " --normalization_rule_name=identity --remove_extra_whitespaces=false --split_digits=true"
                          " --num_threads=1 --minloglevel=2 > " + tmp.file("spm_train.log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO("spm_train (Debian package sentencepiece, scripts/install-deps.sh) failed: " << read_text(tmp.file("spm_train.log")));
  REQUIRE(rc == 0);
  return prefix + ".model";
}

}  // namespace

TEST_CASE("SentencePiece: a model trained by spm_train round-trips data/corpus", "[tokenizer][sentencepiece]") {
  TempDir tmp("spm");
  const std::string model = train_spm(tmp, 512);
  const auto tok = load_tokenizer(model);
  CHECK(tok->kind() == "sentencepiece");
  CHECK(tok->vocab_size() == 512);
  CHECK(tok->eot_id() == 2);  // spm_train's defaults: <unk> 0, <s> 1, </s> 2
  for (const char* name : {"train.txt", "val.txt"}) {
    const std::string text = read_text(std::string(ZT_SOURCE_DIR) + "/data/corpus/" + name);
    const std::vector<int32_t> ids = tok->encode(text);
    CHECK(std::all_of(ids.begin(), ids.end(), [](int32_t id) { return id >= 0 && id < 512; }));
    CHECK(ids.size() < text.size() * 7 / 10);  // the merges compress
    CHECK(tok->decode(ids) == text);
  }
  // Byte fallback: a character absent from the corpus becomes its UTF-8 bytes, and comes back.
  const std::string rare = "int \xE2\x98\x83 = 1;";  // U+2603 snowman
  CHECK(tok->decode(tok->encode(rare)) == rare);
  // Streaming: decode_token of each id, the word marker as a space; the first piece's leading
  // space is SentencePiece's dummy prefix, which decode() drops.
  std::string streamed;
  for (int32_t id : tok->encode("int main")) streamed += tok->decode_token(id);
  CHECK(streamed == " int main");
  CHECK(tok->decode_token(2) == "");  // </s>: a control piece
  CHECK_THROWS_WITH(tok->decode({5, 512}), Catch::Contains("512") && Catch::Contains("position 1"));
  // A directory holding tokenizer.model is detected too.
  std::filesystem::create_directories(tmp.file("dir"));
  std::filesystem::copy_file(model, tmp.file("dir/tokenizer.model"));
  CHECK(load_tokenizer(tmp.file("dir"))->kind() == "sentencepiece");
  // Too large for the model: 512 pieces against a 256-token vocabulary.
  CHECK_THROWS_WITH(check_tokenizer_fits_model(*tok, 256, "the model"),
                    Catch::Contains(model) && Catch::Contains("512 tokens"));
}

TEST_CASE("SentencePiece: a file that is not a model is refused naming it", "[tokenizer][sentencepiece]") {
  TempDir tmp("spm_bad");
  std::ofstream(tmp.file("bad.model")) << "this is not a protobuf";
  CHECK_THROWS_WITH(load_tokenizer(tmp.file("bad.model")),
                    Catch::Contains(tmp.file("bad.model")) && Catch::Contains("cannot be loaded"));
  std::ofstream(tmp.file("empty.model"));
  CHECK_THROWS_WITH(load_tokenizer(tmp.file("empty.model")), Catch::Contains(tmp.file("empty.model")));
}
