// defines: 3 Catch2 test cases tagged [tokenizer], [sentencepiece]; helpers: read_text, train_spm, pb_bytes, charsmap
//
// formats/sentencepiece_tokenizer.h: a Llama-style SentencePiece model (BPE, byte fallback) trained
// at test time by spm_train (Debian's sentencepiece package, installed by scripts/install-deps.sh)
// on data/corpus, loaded through load_tokenizer, round-tripping the corpus.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
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

namespace {

// A protobuf length-delimited field: key (field, wire type 2), varint length, bytes.
std::string pb_bytes(int field, const std::string& payload) {
  std::string out(1, static_cast<char>(field << 3 | 2));
  for (size_t n = payload.size();; n >>= 7) {
    out += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    if (n < 0x80) break;
  }
  return out + payload;
}

// A precompiled_charsmap of 256 zero units, unit 0 set to u, then `strings`.
std::string charsmap(uint32_t u0, const std::string& strings) {
  std::string blob(4 + 1024, '\0');
  const uint32_t trie_bytes = 1024;
  std::memcpy(blob.data(), &trie_bytes, 4);
  std::memcpy(blob.data() + 4, &u0, 4);
  return blob + strings;
}

}  // namespace

// libsentencepiece walks a model's precompiled_charsmap (a double-array trie) without bounds
// checks: a unit pointing past the trie, or at a replacement string outside the table, crashed it
// (SIGSEGV in Normalizer::NormalizePrefix). The loader checks every unit the walk can reach first,
// for the normalizer and the denormalizer, and names the file, the map and the unit.
TEST_CASE("SentencePiece: a corrupt precompiled_charsmap is refused before the library walks it",
          "[tokenizer][sentencepiece]") {
  TempDir tmp("spm_charsmap");
  auto write_model = [&](const std::string& name, int spec_field, const std::string& map) {
    std::ofstream(tmp.file(name), std::ios::binary) << pb_bytes(spec_field, pb_bytes(2, map));
    return tmp.file(name);
  };
  // unit 0 sends the walk to units 768..1023 of a 256-unit trie
  const std::string far = write_model("far.model", 3, charsmap(1000u << 10, std::string("a\0", 2)));
  CHECK_THROWS_WITH(load_tokenizer(far), Catch::Contains(far) &&
                                             Catch::Contains("normalizer_spec.precompiled_charsmap is corrupt") &&
                                             Catch::Contains("trie unit 0 points to units 768..1023"));
  // unit 0 has a leaf whose value (256) is past the 2 bytes of strings
  const std::string leaf = write_model("leaf.model", 5, charsmap(1u << 8, std::string("a\0", 2)));
  CHECK_THROWS_WITH(load_tokenizer(leaf), Catch::Contains("denormalizer_spec.precompiled_charsmap is corrupt") &&
                                              Catch::Contains("replacement string offset 256"));
  // a trie size past the blob
  std::string short_map = charsmap(0, "");
  short_map.resize(100);
  const std::string trunc = write_model("trunc.model", 3, short_map);
  CHECK_THROWS_WITH(load_tokenizer(trunc), Catch::Contains("trie size 1024"));
  // spm_train's own maps (nmt_nfkc: 44,288 units) pass: the round-trip test above loads one.
}
