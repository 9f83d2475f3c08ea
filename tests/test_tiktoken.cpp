// defines: 6 Catch2 test cases tagged [tokenizer][tiktoken]; helpers: write_text, read_text,
//          kCl100kPattern, tiktoken_shaped, throws_naming, Reference, unassigned_here,
//          run_reference, first_difference, check_against
//
// The tiktoken family's tokenizer.json (formats/tokenizer_json.cpp): Llama 3's shape, with the
// split regex from the file, ignore_merges, unused ids and the BOS / EOS of the config files
// beside it. The ids are checked against an independent implementation, OpenAI's tiktoken (npm
// `tiktoken` 1.0.22, tests/tiktoken_reference.mjs), which converts its cl100k_base, o200k_base and gpt2
// encodings to tokenizer.json and encodes the same texts: the corpus, hard cases, every code point.
// node and the package come from scripts/install-deps.sh (CMake's ZT_NODE and ZT_TIKTOKEN_DIR find
// them, the environment's ZT_TIKTOKEN_DIR overrides); a machine without them fails these cases
// saying how to install them, since install-deps is every machine's first step.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats/bpe_tokenizer.h"
#include "formats/bpe_trainer.h"
#include "formats/gpt2_pretokenizer.h"
#include "formats/tokenizer.h"
#include "tests/temp_dir.h"

using namespace zt;
using zt::test::TempDir;
using Ids = std::vector<int32_t>;
using json = nlohmann::json;

namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A small tiktoken-family tokenizer.json: a vocabulary trained here (GPT-2's shape, written by
// save_tokenizer_json) given cl100k_base's pattern and ignore_merges, its <|endoftext|> moved to
// id N + 5 and a <|begin|> at N + 1, so ids N, N + 2..N + 4 are unused (N: the trained tokens).
json tiktoken_shaped(const std::string& dir, int32_t& n) {
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  opt.specials = {};
  const BpeModel m = train_bpe({"hug hug hug pug pug bun 123 12345 don't DON'T"}, opt);
  n = static_cast<int32_t>(m.tokens.size());
  save_tokenizer_json(m, dir + "/base.json");
  json j = json::parse(read_text(dir + "/base.json"));
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", kCl100kPattern}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  j["model"]["ignore_merges"] = true;
  j["added_tokens"] = json::array();
  for (const auto& [text, id] : {std::pair{"<|begin|>", n + 1}, std::pair{"<|endoftext|>", n + 5}})
    j["added_tokens"].push_back({{"id", id},
                                 {"content", text},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  return j;
}

void throws_naming(const std::string& path, const std::vector<std::string>& needles) {
  try {
    load_tokenizer(path);
    FAIL("loaded '" << path << "', expected an error naming " << needles[0]);
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains(path));
    for (const auto& n : needles) CHECK_THAT(msg, Catch::Contains(n));
  }
}

struct Reference {
  std::string tokenizer_json;
  json cases;  // [{"name", "text", "ids"}]
};

// The code points PCRE2's Unicode tables leave unassigned (\p{Cn}) in the sweep's ranges. PCRE2
// 10.42 (Debian 12) knows Unicode 14, tiktoken 1.0.22 Unicode 16: a letter assigned since (U+1C89
// CYRILLIC CAPITAL LETTER TJE, Unicode 16) is a letter to tiktoken and an unassigned character,
// split like a symbol, here. The sweep leaves these out; what they do is docs/formats.md's.
std::vector<int32_t> unassigned_here() {
  const Pretokenizer assigned(R"(\P{Cn}+)", "test");  // "<cp>x" is one piece exactly when cp is assigned
  std::vector<int32_t> out;
  auto utf8 = [](int32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12)), s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
          s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18)), s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  for (int32_t cp = 0; cp < 0xE1000; ++cp) {
    if ((cp >= 0xD800 && cp < 0xE000) || (cp >= 0x32400 && cp < 0xE0000)) continue;
    if (assigned.split(utf8(cp) + "x").size() != 1) out.push_back(cp);
  }
  return out;
}

// Runs tests/tiktoken_reference.mjs for `encoding` into `tmp`; FAILs saying how to install node and
// the package when they are missing.
Reference run_reference(const std::string& encoding, const TempDir& tmp) {
  const std::string node = ZT_NODE;
  const char* env_dir = std::getenv("ZT_TIKTOKEN_DIR");
  const std::string pkg = env_dir && *env_dir ? env_dir : ZT_TIKTOKEN_DIR;
  const std::string how =
      "scripts/install-deps.sh installs Debian's nodejs and npm and the pinned npm tiktoken 1.0.22 into "
      "third_party/npm/ "
      "(then reconfigure CMake so it finds node), or set ZT_TIKTOKEN_DIR to a node_modules/tiktoken directory";
  if (node.empty() || node.find("NOTFOUND") != std::string::npos)
    FAIL("node was not found when CMake configured (ZT_NODE): " << how);
  if (!std::filesystem::is_regular_file(pkg + "/package.json")) FAIL("npm tiktoken is not at '" << pkg << "': " << how);
  const std::string src = ZT_SOURCE_DIR;
  write_text(tmp.file("skip.json"), json(unassigned_here()).dump());
  const std::string cmd = "'" + node + "' '" + src + "/tests/tiktoken_reference.mjs' --tiktoken '" + pkg +
                          "' --encoding " + encoding + " --out '" + tmp.dir.string() + "' --corpus '" + src +
                          "/data/corpus/train.txt' --corpus '" + src + "/data/corpus/val.txt' --skip '" +
                          tmp.file("skip.json") + "' > '" + tmp.file("node.log") + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(read_text(tmp.file("node.log")));
  REQUIRE(rc == 0);
  Reference ref{tmp.file("tokenizer.json"), json::parse(read_text(tmp.file("cases.json")))};
  REQUIRE(ref.cases.size() >= 70);  // the corpus, the hard cases, the specials and the sweep's texts
  return ref;
}

// Where two id lists first differ (their common length when one is a prefix of the other).
size_t first_difference(const Ids& a, const Ids& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

// Every case: our ids equal tiktoken's, and decode gives the text back. Returns the cases that differ.
int check_against(const Tokenizer& tok, const json& cases) {
  int differ = 0;
  for (const json& c : cases) {
    const std::string name = c["name"], text = c["text"];
    const Ids want = c["ids"].get<Ids>();
    const Ids got = tok.encode(text);
    if (got != want) {
      const size_t at = first_difference(got, want);
      std::ostringstream ctx;
      for (size_t k = at; k < std::min(at + 6, std::max(got.size(), want.size())); ++k)
        ctx << " [" << (k < got.size() ? std::to_string(got[k]) + " '" + tok.decode_token(got[k]) + "'" : "-") << " vs "
            << (k < want.size() ? std::to_string(want[k]) : "-") << "]";
      // the text's line there (a sweep's line is one code point's), bytes past ASCII in hex
      const size_t byte_at = tok.decode(Ids(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(at))).size();
      const size_t line = byte_at == 0 ? 0 : text.rfind('\n', byte_at - 1) + 1;
      std::ostringstream shown;
      for (unsigned char ch : text.substr(line, 24)) {
        if (ch >= 0x20 && ch < 0x7F) shown << ch;
        else shown << "\\x" << std::hex << static_cast<int>(ch) << std::dec;
      }
      if (++differ <= 5)
        FAIL_CHECK("'" << name << "': ids differ from tiktoken's at " << at << " (byte " << byte_at << ", in the line '"
                       << shown.str() << "'; ours vs tiktoken's):" << ctx.str());
    }
    CHECK(tok.decode(got) == text);
  }
  return differ;
}

}  // namespace

TEST_CASE("tiktoken-family tokenizer.json: the file's pattern - unused ids - BOS and EOS", "[tokenizer][tiktoken]") {
  TempDir tmp("tiktoken_shape");
  int32_t n = 0;
  const json j = tiktoken_shaped(tmp.dir.string(), n);
  const std::string path = tmp.file("tokenizer.json");
  write_text(path, j.dump());
  auto tok = load_tokenizer(path);
  CHECK(tok->kind() == "bpe");
  CHECK(tok->vocab_size() == n + 6);  // the largest id + 1, as Hugging Face's len(tokenizer)
  CHECK(tok->eot_id() == n + 5);
  // cl100k's pattern, not GPT-2's: digits in groups of at most three, case-insensitive contractions
  const Pretokenizer cl(kCl100kPattern, "test");
  std::vector<std::string> pieces;
  for (auto p : cl.split("12345 DON'T don't")) pieces.emplace_back(p);
  CHECK(pieces == std::vector<std::string>{"123", "45", " DON", "'T", " don", "'t"});
  const std::string text = "<|begin|>hug 12345 DON'T<|endoftext|>pug\xFF";
  const Ids ids = tok->encode(text);
  CHECK(ids.front() == n + 1);
  CHECK(tok->decode(ids) == text);
  for (int32_t unused : {n, n + 2, n + 4}) {
    CHECK_THROWS_WITH(tok->decode({5, unused}),
                      Catch::Contains("token id " + std::to_string(unused)) && Catch::Contains("unused"));
    CHECK_THROWS_WITH(tok->decode_token(unused), Catch::Contains(std::to_string(unused)) && Catch::Contains("unused"));
  }
  for (int32_t id : ids) CHECK(!tok->decode_token(id).empty());
  // GPT-2's writers refuse what they cannot write
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(tok.get());
  REQUIRE(bpe);
  CHECK_THROWS_WITH(save_tokenizer_json(bpe->model(), tmp.file("out.json")), Catch::Contains("own split pattern"));

  // BOS / EOS from the files beside it: tokenizer_config.json names them, generation_config.json's
  // ids must agree.
  write_text(tmp.file("tokenizer_config.json"),
             R"({"bos_token": "<|begin|>", "eos_token": {"content": "<|endoftext|>"}})");
  write_text(tmp.file("generation_config.json"),
             "{\"bos_token_id\": " + std::to_string(n + 1) + ", \"eos_token_id\": [7, " + std::to_string(n + 5) + "]}");
  auto with_cfg = read_tokenizer_json(path);
  CHECK(with_cfg->model().bos == n + 1);
  CHECK(with_cfg->bos_id() == n + 1);  // what zt-tokenize and zt-generate put first
  CHECK(with_cfg->eot_id() == n + 5);
  CHECK(tok->bos_id() == -1);  // without the configs: none
  // Llama 3's post-processor and decoder as its file has them: taken, and encode adds no BOS
  json llama = j;
  llama["post_processor"] = json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin|>", "type_id": 0}},
                                                {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [], "special_tokens": {}}]})");
  llama["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  write_text(tmp.file("llama3_shape.json"), llama.dump());
  auto llama_tok = load_tokenizer(tmp.file("llama3_shape.json"));
  CHECK(llama_tok->encode("hug") == tok->encode("hug"));
  CHECK(llama_tok->eot_id() == n + 5);  // the EOS tokenizer_config.json beside it names
  write_text(tmp.file("generation_config.json"), R"({"eos_token_id": 7})");
  throws_naming(path, {"generation_config.json", "eos_token_id", "7", "disagrees", "<|endoftext|>"});
  write_text(tmp.file("generation_config.json"), "{}");
  write_text(tmp.file("tokenizer_config.json"), R"({"eos_token": "</s>"})");
  throws_naming(path, {"tokenizer_config.json", "eos_token", "'</s>'", "added tokens"});
}

TEST_CASE("tiktoken-family tokenizer.json: what the reader does not implement is refused by name",
          "[tokenizer][tiktoken]") {
  TempDir tmp("tiktoken_refused");
  int32_t n = 0;
  const json good = tiktoken_shaped(tmp.dir.string(), n);
  int k = 0;
  auto bad = [&](auto edit, const std::vector<std::string>& needles) {
    json j = good;
    edit(j);
    const std::string path = tmp.file("bad" + std::to_string(k++) + ".json");
    write_text(path, j.dump());
    INFO(j["pre_tokenizer"].dump());
    throws_naming(path, needles);
  };
  auto split = [](json& j) -> json& { return j["pre_tokenizer"]["pretokenizers"][0]; };
  auto byte_level = [](json& j) -> json& { return j["pre_tokenizer"]["pretokenizers"][1]; };
  bad([&](json& j) { split(j)["behavior"] = "Removed"; }, {"pretokenizers[0].behavior", "'Removed'", "Isolated"});
  bad([&](json& j) { split(j)["invert"] = true; }, {"pretokenizers[0].invert", "true", "only false"});
  bad([&](json& j) { split(j)["pattern"] = {{"String", " "}}; }, {"pretokenizers[0].pattern", "String", "Regex"});
  bad([&](json& j) { split(j)["extra"] = 1; }, {"pretokenizers[0].extra", "does not implement"});
  bad([&](json& j) { byte_level(j)["use_regex"] = true; }, {"pretokenizers[1].use_regex", "true", "expected false"});
  bad([&](json& j) { byte_level(j)["add_prefix_space"] = true; }, {"pretokenizers[1].add_prefix_space", "true"});
  bad([&](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["type"] = "Digits"; },
      {"pre_tokenizer.pretokenizers", "Split", "ByteLevel"});
  bad([&](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }, {"pre_tokenizer.pretokenizers", "two"});
  bad([&](json& j) { j["normalizer"] = {{"type", "NFC"}}; }, {"normalizer", "NFC", "only null"});
  bad([&](json& j) { j["truncation"] = {{"max_length", 8}}; }, {"truncation", "max_length"});
  bad([&](json& j) { j["decoder"] = {{"type", "Metaspace"}}; }, {"decoder", "Metaspace", "ByteLevel"});
  bad([&](json& j) { j["post_processor"] = {{"type", "BertProcessing"}}; }, {"post_processor", "BertProcessing"});
  bad([&](json& j) { j["model"]["byte_fallback"] = true; }, {"model.byte_fallback", "true"});
  bad([&](json& j) { j["model"]["unk_token"] = "<unk>"; }, {"model.unk_token", "'<unk>'"});
  bad([&](json& j) { j["model"]["ignore_merges"] = "yes"; }, {"model.ignore_merges", "'yes'"});
  bad([&](json& j) { j["model"]["new_option"] = 1; }, {"model.new_option", "does not implement"});
  bad([&](json& j) { j["extra_top_level"] = 1; }, {"tokenizer.extra_top_level"});
  bad([&](json& j) { j["added_tokens"][0]["lstrip"] = true; }, {"added_tokens[0].lstrip"});
  bad([&](json& j) { j["added_tokens"][0]["id"] = 4 * n; }, {"added_tokens[0].id"});  // past 2 x the tokens named
  // the pattern: escapes whose meaning differs between PCRE2 and tiktoken, and PCRE2's own errors
  bad([&](json& j) { split(j)["pattern"]["Regex"] = R"(\w+|\s+)"; }, {"split pattern", "'\\w'", "offset 0"});
  bad([&](json& j) { split(j)["pattern"]["Regex"] = R"(\p{L}+$)"; }, {"split pattern", "'$'"});
  bad([&](json& j) { split(j)["pattern"]["Regex"] = R"([[:alpha:]]+)"; }, {"split pattern", "'['", "POSIX"});
  bad([&](json& j) { split(j)["pattern"]["Regex"] = R"(\p{L}+|(\s)"; }, {"split pattern", "PCRE2 cannot compile"});
}

TEST_CASE("tiktoken-family patterns: white space is Unicode's White_Space - as tiktoken's", "[tokenizer][tiktoken]") {
  CHECK(file_pattern_for_pcre2(R"(a\s+[^\s\p{L}]\S[\]\s])", "p") ==
        R"(a\p{White_Space}+[^\p{White_Space}\p{L}]\P{White_Space}[\]\p{White_Space}])");
  CHECK(file_pattern_for_pcre2(R"([]\s]|[^]a])", "p") == R"([]\p{White_Space}]|[^]a])");
  CHECK_THROWS_WITH(file_pattern_for_pcre2(R"(\1)", "the pattern of X"),
                    Catch::Contains("the pattern of X") && Catch::Contains("'\\1'"));
  CHECK_THROWS_WITH(file_pattern_for_pcre2(R"([a-z)", "p"), Catch::Contains("never closes"));
  // A pattern that backtracks deeply (a lookahead per character) runs past PCRE2's default 32 KiB
  // JIT stack on a long run: matched again with a larger stack, not an error.
  const Pretokenizer deep(R"((?:(?!x)\s)+|\S+)", "test");
  const std::string spaces(100000, ' ');
  CHECK(deep.split(spaces + "ab") == std::vector<std::string_view>{spaces, "ab"});
  // An empty match makes no piece, and nothing is lost around it.
  const Pretokenizer empty_ok(R"(\p{L}*)", "test");
  CHECK(empty_ok.split("ab12cd") == std::vector<std::string_view>{"ab", "12", "cd"});
  // U+180E MONGOLIAN VOWEL SEPARATOR is not white space for tiktoken (Unicode 6.3 on): with
  // cl100k's pattern " \u180E" is one piece of punctuation-like characters, as GPT-2's fixed pattern has it.
  const Pretokenizer cl(kCl100kPattern, "test");
  std::vector<std::string> pieces;
  for (auto p : cl.split("x \xE1\xA0\x8Ey \xC2\xA0 z")) pieces.emplace_back(p);
  CHECK(pieces == std::vector<std::string>{"x", " \xE1\xA0\x8E", "y", " \xC2\xA0", " z"});
}

TEST_CASE("tiktoken cl100k_base: our ids equal tiktoken's on the corpus - hard text - every code point",
          "[tokenizer][tiktoken]") {
  TempDir tmp("tiktoken_cl100k");
  const Reference ref = run_reference("cl100k_base", tmp);
  auto tok = load_tokenizer(ref.tokenizer_json);
  CHECK(tok->vocab_size() == 100277);  // ranks 0..100255, specials up to <|endofprompt|> 100276
  CHECK(tok->eot_id() == 100257);
  CHECK(check_against(*tok, ref.cases) == 0);
  // the unused ids between the ranks and the specials
  for (int32_t unused : {100256, 100261, 100275})
    CHECK_THROWS_WITH(tok->decode({unused}), Catch::Contains(std::to_string(unused)) && Catch::Contains("unused"));
  // Invalid UTF-8 (which tiktoken, taking strings, never sees): not an error; each invalid run is a
  // piece of its own between the valid text's pieces, and the bytes come back exactly.
  const Ids hello = tok->encode("hello"), world = tok->encode("world");
  Ids want = hello;
  want.push_back(tok->encode(std::string("\xFF"))[0]);
  want.insert(want.end(), world.begin(), world.end());
  CHECK(tok->encode("hello\xFFworld") == want);
  for (const std::string bad :
       {"\xFF\xFE", "abc\xC3", "\xED\xA0\x80 surrogate", "\xC0\xAF overlong", "x\x80\x80y", "\xF4\x90\x80\x80"})
    CHECK(tok->decode(tok->encode(bad)) == bad);
}

TEST_CASE("tiktoken gpt2: our ids equal tiktoken's with GPT-2's real vocabulary", "[tokenizer][tiktoken]") {
  TempDir tmp("tiktoken_gpt2");
  const Reference ref = run_reference("gpt2", tmp);
  auto tok = load_tokenizer(ref.tokenizer_json);
  CHECK(tok->vocab_size() == 50257);
  CHECK(tok->eot_id() == 50256);
  CHECK(check_against(*tok, ref.cases) == 0);
  // The same vocabulary in GPT-2's shape (ByteLevel with use_regex: GPT-2's pattern built in, merges
  // always applied) gives tiktoken's ids too: GPT-2's own path, on its real vocabulary.
  json j = json::parse(read_text(ref.tokenizer_json));
  j["pre_tokenizer"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"].erase("ignore_merges");
  write_text(tmp.file("gpt2_shape.json"), j.dump());
  auto gpt2_shape = load_tokenizer(tmp.file("gpt2_shape.json"));
  CHECK(check_against(*gpt2_shape, ref.cases) == 0);
}

TEST_CASE("tiktoken o200k_base: our ids equal tiktoken's with its 200k vocabulary and case-aware pattern",
          "[tokenizer][tiktoken]") {
  TempDir tmp("tiktoken_o200k");
  const Reference ref = run_reference("o200k_base", tmp);
  auto tok = load_tokenizer(ref.tokenizer_json);
  CHECK(tok->vocab_size() == 200019);  // ranks 0..199997, specials 199999 and 200018
  CHECK(tok->eot_id() == 199999);
  CHECK(check_against(*tok, ref.cases) == 0);
  CHECK_THROWS_WITH(tok->decode({199998}), Catch::Contains("199998") && Catch::Contains("unused"));
}
