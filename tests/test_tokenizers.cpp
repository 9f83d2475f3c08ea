// defines: 10 Catch2 test cases tagged [tokenizer]; helpers: split, write_text, read_text, ascii,
//          hug_model, corpus
//
// formats/bpe_tokenizer.h, formats/bpe_trainer.h, formats/gpt2_pretokenizer.h, formats/tokenizer.h's
// load_tokenizer, and the uint32 token shards of formats/token_data.h: GPT-2's byte-level BPE
// with expectations worked out by hand (the reasoning beside each), its files, and bad input.
// (tests/cli/test_zt_tokenize.sh compares training and encoding on data/corpus with an
// independent Python reference, tests/bpe_reference.py.)
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats/bpe_tokenizer.h"
#include "formats/bpe_trainer.h"
#include "formats/gpt2_pretokenizer.h"
#include "formats/token_data.h"
#include "formats/tokenizer.h"
#include "tests/temp_dir.h"

using namespace zt;
using zt::test::TempDir;
using Ids = std::vector<int32_t>;

namespace {

std::vector<std::string> split(std::string_view text) {
  Pretokenizer pre;
  std::vector<std::string> out;
  for (auto p : pre.split(text)) out.emplace_back(p);
  return out;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// GPT-2's id of an ASCII printable byte: '!' (33) is id 0, so c -> c - 33 (gpt2_byte_order).
int32_t ascii(char c) { return c - 33; }
constexpr int32_t kSpace = 220;  // ' ' is 'Ġ': GPT-2's id 220

// The hand-checked corpus (the reasoning is in "BPE training: merges worked out by hand").
BpeModel hug_model(int32_t vocab_size) {
  BpeTrainOptions opt;
  opt.vocab_size = vocab_size;
  return train_bpe({"hug hug hug pug pug bun"}, opt);
}

std::string corpus(const char* name) {
  return read_text(std::string(ZT_SOURCE_DIR) + "/data/corpus/" + name);
}

}  // namespace

TEST_CASE("GPT-2 byte map: GPT-2's ids of the bytes and its printable characters", "[tokenizer]") {
  // GPT-2's vocabulary: '!' is 0, '\n' ('Ċ') is 198, ' ' ('Ġ') is 220, byte 0 ('Ā') is 188.
  const auto& order = gpt2_byte_order();
  REQUIRE(order.size() == 256);
  CHECK(order[0] == '!');
  CHECK(order[198] == '\n');
  CHECK(order[220] == ' ');
  CHECK(order[188] == 0);
  CHECK(gpt2_byte_to_unicode(' ') == "\xC4\xA0");   // U+0120 'Ġ'
  CHECK(gpt2_byte_to_unicode('\n') == "\xC4\x8A");  // U+010A 'Ċ'
  CHECK(gpt2_byte_to_unicode('a') == "a");
  std::string bytes;
  CHECK(gpt2_unicode_to_bytes("\xC4\xA0hello", bytes));
  CHECK(bytes == " hello");
  CHECK_FALSE(gpt2_unicode_to_bytes("\xE2\x96\x81x", bytes));  // '▁' (U+2581) is not in the map
  CHECK_FALSE(gpt2_unicode_to_bytes(" ", bytes));              // a raw space is not either ('Ġ' is)
  CHECK_FALSE(gpt2_unicode_to_bytes("\xC1\x81", bytes));       // overlong 'A': not valid UTF-8
}

TEST_CASE("GPT-2 pre-tokenization: the pattern's pieces", "[tokenizer]") {
  // Contractions and letters; the last space before a word joins it; whitespace before a space
  // that starts a word is its own piece ("  \n" then " x": \s+(?!\S) backs off one space).
  CHECK(split("Hello world's 123  \n x") == std::vector<std::string>{"Hello", " world", "'s", " 123", "  \n", " x"});
  // Unicode letters and numbers by property (\p{L}, \p{N}): accents, CJK, digits split from letters.
  CHECK(split("h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC abc123") ==
        std::vector<std::string>{"h\xC3\xA9llo", " w\xC3\xB6rld", " \xE6\x97\xA5\xE6\x9C\xAC", " abc", "123"});
  // Punctuation runs with one optional leading space; trailing whitespace at the end is one piece.
  CHECK(split("a+=b;  ") == std::vector<std::string>{"a", "+=", "b", ";", "  "});
  CHECK(split("").empty());
}

// U+180E MONGOLIAN VOWEL SEPARATOR (E1 A0 8E) is white space to PCRE2 but not to Unicode 6.3 and
// later, tiktoken or transformers. tiktoken 1.0.22's gpt2 (npm `tiktoken`, `get_encoding("gpt2")`)
// encodes "x \u180Ey" as [87, 28053, 254, 236, 88] — 28053 is " \xE1": the space and the separator
// in one piece, which the pattern without the fix splits (" " then "\u180E"); " \u180E\u180E x"
// as [28053, 254, 236, 157, 254, 236, 2124] (2124 is " x"); "hello \u180E world" as
// [31373, 28053, 254, 236, 995]. The pieces below are what those ids say.
TEST_CASE("GPT-2 pre-tokenization: U+180E is not white space - tiktoken's pieces", "[tokenizer]") {
  const std::string mvs = "\xE1\xA0\x8E";
  CHECK(split("x " + mvs + "y") == std::vector<std::string>{"x", " " + mvs, "y"});
  CHECK(split(" " + mvs + mvs + " x") == std::vector<std::string>{" " + mvs + mvs, " x"});
  CHECK(split("hello " + mvs + " world") == std::vector<std::string>{"hello", " " + mvs, " world"});
  CHECK(split("a" + mvs + "b") == std::vector<std::string>{"a", mvs, "b"});
  // the other white space is unchanged: U+00A0 and U+3000 still split as \s (tiktoken: "a \u00a0 b"
  // [64, 5624, 275], 5624 = " \xC2\xA0"; "a\u3000b" [64, 5099, 222, 65])
  CHECK(split("a \xC2\xA0 b") == std::vector<std::string>{"a", " \xC2\xA0", " b"});
  CHECK(split("a\xE3\x80\x80"
              "b") == std::vector<std::string>{"a", "\xE3\x80\x80", "b"});
}

TEST_CASE("GPT-2 pre-tokenization: invalid UTF-8 is kept, as pieces of its own", "[tokenizer]") {
  // PCRE2_MATCH_INVALID_UTF: \xff matches nothing, so it is the gap between "a" and "b".
  CHECK(split("a\xFF" "b c") == std::vector<std::string>{"a", "\xFF", "b", " c"});
  // A truncated sequence at the end (the first byte of 'é'), and a lone continuation byte.
  CHECK(split("x\xC3") == std::vector<std::string>{"x", "\xC3"});
  const std::string junk = "\x80\x80 ok \xF0\x28\x8C\x28 fin";
  std::string joined;
  for (const auto& p : split(junk)) joined += p;
  CHECK(joined == junk);  // the pieces tile the input whatever it holds
}

TEST_CASE("BPE training: merges worked out by hand", "[tokenizer]") {
  // Corpus "hug hug hug pug pug bun": pieces "hug" x1, " hug" x2, " pug" x2, " bun" x1.
  // Round 1 pair counts: (u,g) 1+2+2 = 5, (h,u) 3, (Ġ,h) 2, (Ġ,p) 2, (p,u) 2, (Ġ,b) (b,u) (u,n) 1
  //   -> merge "u g" = id 256.
  // Round 2: (h,ug) 1+2 = 3 is the most -> "h ug" = 257 ("hug" alone is now one token).
  // Round 3: (Ġ,hug) 2, (Ġ,p) 2, (p,ug) 2: a tie at 2, broken by the smallest (left id, right id):
  //   'p' is id 79 < 'Ġ' 220 -> "p ug" = 258.
  // Round 4: (Ġ,hug) = (220,257) 2 and (Ġ,pug) = (220,258) 2: the smaller right id -> "Ġ hug" = 259.
  // Round 5: (Ġ,pug) 2 -> "Ġ pug" = 260.
  // Round 6: only " bun"'s pairs remain, each seen once < min_frequency 2: training stops, and
  // <|endoftext|> takes the next id, 261, though 300 tokens were asked for.
  const BpeModel m = hug_model(300);
  const int32_t u = ascii('u'), g = ascii('g'), h = ascii('h'), p = ascii('p');
  REQUIRE(m.merges.size() == 5);
  CHECK(m.merges[0] == std::make_pair(u, g));
  CHECK(m.merges[1] == std::make_pair(h, 256));
  CHECK(m.merges[2] == std::make_pair(p, 256));
  CHECK(m.merges[3] == std::make_pair(kSpace, 257));
  CHECK(m.merges[4] == std::make_pair(kSpace, 258));
  REQUIRE(m.tokens.size() == 262);
  CHECK(m.tokens[256] == "ug");
  CHECK(m.tokens[257] == "hug");
  CHECK(m.tokens[258] == "pug");
  CHECK(m.tokens[259] == " hug");
  CHECK(m.tokens[260] == " pug");
  CHECK(m.tokens[261] == "<|endoftext|>");
  CHECK(m.specials == std::vector<int32_t>{261});
  // A smaller vocabulary stops after its merges: 256 + 3 + 1 = 260 -> ug, hug, pug; <|endoftext|> 259.
  const BpeModel small = hug_model(260);
  CHECK(small.merges.size() == 3);
  CHECK(small.tokens.size() == 260);
  CHECK(small.tokens[259] == "<|endoftext|>");
  CHECK_THROWS_WITH(hug_model(256), Catch::Contains("vocab_size 256 is too small") && Catch::Contains("257"));
}

TEST_CASE("BPE encoding: ids worked out by hand, specials kept whole, round trip", "[tokenizer]") {
  const BpeTokenizer tok(hug_model(300), "hug");
  CHECK(tok.vocab_size() == 262);
  CHECK(tok.eot_id() == 261);
  // "hug": h u g -> (u,g) rank 0 -> h ug -> (h,ug) rank 1 -> hug (257).
  CHECK(tok.encode("hug") == Ids{257});
  // " pug": Ġ p u g -> Ġ p ug -> Ġ pug (rank 2) -> Ġpug (rank 4) = 260.
  CHECK(tok.encode(" pug") == Ids{260});
  // " bun": no merge applies: Ġ b u n.
  CHECK(tok.encode(" bun") == Ids{kSpace, ascii('b'), ascii('u'), ascii('n')});
  // " hugs": Ġ h u g s -> Ġhug (259) s.
  CHECK(tok.encode(" hugs") == Ids{259, ascii('s')});
  // The special token is matched as text, whole, between ordinary pieces.
  const std::string text = "hug pug bun hugs<|endoftext|>hug";
  const Ids ids = tok.encode(text);
  CHECK(ids == Ids{257, 260, kSpace, ascii('b'), ascii('u'), ascii('n'), 259, ascii('s'), 261, 257});
  CHECK(tok.decode(ids) == text);
  std::string streamed;
  for (int32_t id : ids) streamed += tok.decode_token(id);
  CHECK(streamed == text);
  // Invalid UTF-8 and NUL-free binary bytes encode and decode back exactly (byte-level BPE).
  const std::string bytes = "hug\xFF\xFE pug \xC3\x28\x01\x7F";
  CHECK(tok.decode(tok.encode(bytes)) == bytes);
  CHECK_THROWS_WITH(tok.decode({1, 262}), Catch::Contains("262") && Catch::Contains("position 1"));
  CHECK_THROWS_WITH(tok.decode_token(-1), Catch::Contains("-1"));
}

TEST_CASE("BPE merge order: lowest rank first, whatever the position", "[tokenizer]") {
  // A vocabulary where "bc" (rank 0) beats "ab" (rank 1): "abc" -> a bc -> (a,bc) is no merge.
  BpeModel m;
  for (uint8_t b : gpt2_byte_order()) m.tokens.emplace_back(1, static_cast<char>(b));
  const int32_t a = ascii('a'), b = ascii('b'), c = ascii('c');
  m.tokens.push_back("bc");  // 256
  m.tokens.push_back("ab");  // 257
  m.merges = {{b, c}, {a, b}};
  const BpeTokenizer tok(m, "order");
  CHECK(tok.encode("abc") == Ids{a, 256});
  CHECK(tok.encode("abab") == Ids{257, 257});  // both occurrences of the one merge that applies
  CHECK(tok.merge_rank(b, c) == 0);
  CHECK(tok.merge_rank(c, b) == -1);
}

TEST_CASE("BPE on data/corpus: round trip and chunked encoding equal to one encode", "[tokenizer]") {
  const std::string train = corpus("train.txt"), val = corpus("val.txt");
  BpeTrainOptions opt;
  opt.vocab_size = 512;
  const BpeTokenizer tok(train_bpe({train}, opt), "corpus");
  REQUIRE(tok.vocab_size() == 512);
  for (const std::string* text : {&train, &val}) {
    const Ids ids = tok.encode(*text);
    CHECK(tok.decode(ids) == *text);
    CHECK(ids.size() < text->size() * 6 / 10);  // the merges compress: < 0.6 tokens per byte
    Ids chunked;
    for (auto c : gpt2_safe_chunks(*text, 4096)) {
      const Ids part = tok.encode(c);
      chunked.insert(chunked.end(), part.begin(), part.end());
    }
    CHECK(chunked == ids);
  }
  CHECK(gpt2_safe_chunks(val, 4096).size() > 5);
  // The training data never yields a special: "<|endoftext|>" is cut out of it before counting.
  const BpeTokenizer tok2(train_bpe({"ab<|endoftext|>ab<|endoftext|>ab"}, opt), "eot");
  CHECK(tok2.vocab_size() == 258);  // bytes + "ab" + <|endoftext|>
  CHECK(tok2.encode("ab<|endoftext|>") == Ids{256, 257});
}

TEST_CASE("BPE files: vocab.json + merges.txt and tokenizer.json written, read back, detected", "[tokenizer]") {
  TempDir tmp("bpe_files");
  BpeTrainOptions opt;
  opt.vocab_size = 300;
  const BpeModel m = train_bpe({corpus("val.txt")}, opt);
  const std::string dir = tmp.file("tok");
  save_gpt2_files(m, dir);
  save_tokenizer_json(m, dir + "/tokenizer.json");
  CHECK(read_text(dir + "/merges.txt").rfind("#version: 0.2\n", 0) == 0);
  const auto a = read_gpt2_bpe(dir + "/vocab.json", dir + "/merges.txt");
  const auto b = read_tokenizer_json(dir + "/tokenizer.json");
  for (const BpeTokenizer* t : {a.get(), b.get()}) {
    CHECK(t->model().tokens == m.tokens);
    CHECK(t->model().merges == m.merges);
    CHECK(t->model().specials == m.specials);
    CHECK(t->eot_id() == 299);
  }
  // load_tokenizer: the directory (tokenizer.json first), vocab.json by name, tokenizer.json by name.
  CHECK(load_tokenizer(dir)->source() == dir + "/tokenizer.json");
  CHECK(load_tokenizer(dir + "/vocab.json")->kind() == "bpe");
  CHECK(load_tokenizer(dir + "/tokenizer.json")->vocab_size() == 300);
  CHECK(load_tokenizer("bytes")->kind() == "byte");
  // Newer tokenizers write merges as pairs: ["a", "b"].
  nlohmann::json j = nlohmann::json::parse(read_text(dir + "/tokenizer.json"));
  for (auto& e : j["model"]["merges"]) {
    const std::string s = e.get<std::string>();
    e = nlohmann::json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  write_text(tmp.file("pairs.json"), j.dump());
  CHECK(read_tokenizer_json(tmp.file("pairs.json"))->model().merges == m.merges);
  // An added token absent from model.vocab takes its id from added_tokens (as Hugging Face's do).
  j["model"]["vocab"].erase("<|endoftext|>");
  write_text(tmp.file("added.json"), j.dump());
  const auto c = read_tokenizer_json(tmp.file("added.json"));
  CHECK(c->vocab_size() == 300);
  CHECK(c->eot_id() == 299);
  CHECK(c->encode("<|endoftext|>") == Ids{299});
}

TEST_CASE("BPE files: malformed, wrong kind and too large are refused naming the file and the problem", "[tokenizer]") {
  TempDir tmp("bpe_bad");
  BpeTrainOptions opt;
  opt.vocab_size = 260;
  const BpeModel m = hug_model(260);
  const std::string dir = tmp.file("tok");
  save_gpt2_files(m, dir);
  save_tokenizer_json(m, dir + "/tokenizer.json");
  const nlohmann::json good = nlohmann::json::parse(read_text(dir + "/tokenizer.json"));
  auto bad_json = [&](const char* name, auto edit) {
    nlohmann::json j = good;
    edit(j);
    write_text(tmp.file(name), j.dump());
    return tmp.file(name);
  };
  auto throws = [](const std::string& path, const std::string& needle) {
    CHECK_THROWS_WITH(load_tokenizer(path), Catch::Contains(path) && Catch::Contains(needle));
  };
  throws(bad_json("wordpiece.json", [](auto& j) { j["model"]["type"] = "WordPiece"; }), "only BPE models");
  throws(bad_json("norm.json", [](auto& j) { j["normalizer"] = {{"type", "NFC"}}; }), "normalizer");
  throws(bad_json("meta.json", [](auto& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }), "pre_tokenizer");
  throws(bad_json("prefix.json", [](auto& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }), "add_prefix_space");
  throws(bad_json("fallback.json", [](auto& j) { j["model"]["byte_fallback"] = true; }), "byte_fallback");
  throws(bad_json("gap.json", [](auto& j) { j["model"]["vocab"]["ug"] = 7000; }), "7000");
  throws(bad_json("float.json", [](auto& j) { j["model"]["vocab"]["ug"] = 1e46; }), "ug");
  throws(bad_json("merge.json", [](auto& j) { j["model"]["merges"][0] = "u zz"; }), "'zz' is not a token");
  throws(bad_json("merge3.json", [](auto& j) { j["model"]["merges"][0] = "u g h"; }), "not a merge");
  throws(bad_json("dup.json", [](auto& j) { j["model"]["merges"][1] = j["model"]["merges"][0]; }), "repeats merge 0");
  throws(bad_json("nobyte.json", [](auto& j) { j["model"]["vocab"].erase("a"); }), "no token has id");
  throws(bad_json("char.json", [](auto& j) { j["model"]["vocab"]["\xE2\x96\x81x"] = j["model"]["vocab"]["ug"]; j["model"]["vocab"].erase("ug"); }),
         "not one of GPT-2's 256 byte-level characters");
  throws(bad_json("added.json", [](auto& j) { j["added_tokens"][0]["id"] = "x"; }), "added_tokens[0].id");
  // Hugging Face's added-token flags that would change the ids are refused, not ignored.
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    const std::string name = std::string(flag) + ".json";
    throws(bad_json(name.c_str(), [flag](auto& j) { j["added_tokens"][0][flag] = true; }),
           std::string("added_tokens[0].") + flag + " is true: not supported");
  }
  // One text, one id: an added token repeating a vocabulary token, or another added token, under
  // another id is refused naming both ids.
  throws(bad_json("twice.json",
                  [](auto& j) {
                    const int64_t id = static_cast<int64_t>(j["model"]["vocab"].size());
                    j["added_tokens"].push_back({{"id", id}, {"content", "ug"}, {"special", false}});
                  }),
         "the text 'ug' has two ids");
  throws(bad_json("twice_added.json",
                  [](auto& j) {
                    const int64_t id = static_cast<int64_t>(j["model"]["vocab"].size());
                    j["added_tokens"].push_back({{"id", id}, {"content", "<|x|>"}, {"special", true}});
                    j["added_tokens"].push_back({{"id", id + 1}, {"content", "<|x|>"}, {"special", true}});
                  }),
         "the text '<|x|>' has two ids");
  throws(bad_json("normalized.json", [](auto& j) { j["added_tokens"][0]["normalized"] = "yes"; }),
         "added_tokens[0].normalized");
  write_text(tmp.file("notjson.json"), "{\"model\": ");
  throws(tmp.file("notjson.json"), "not valid JSON");
  write_text(tmp.file("array.json"), "[1, 2]");
  throws(tmp.file("array.json"), "expected a Hugging Face tokenizer.json");
  // vocab.json without merges.txt beside it; a malformed merges line names file and line.
  std::filesystem::create_directories(tmp.file("alone"));
  std::filesystem::copy_file(dir + "/vocab.json", tmp.file("alone/vocab.json"));
  throws(tmp.file("alone/vocab.json"), "merges.txt");
  write_text(tmp.file("alone/merges.txt"), "#version: 0.2\nu g\nug\n");
  CHECK_THROWS_WITH(load_tokenizer(tmp.file("alone/vocab.json")),
                    Catch::Contains(tmp.file("alone/merges.txt")) && Catch::Contains("line 3") && Catch::Contains("'ug'"));
  // Unknown kinds, missing paths, an empty directory.
  write_text(tmp.file("tok.txt"), "hello");
  throws(tmp.file("tok.txt"), "cannot tell its kind");
  throws(tmp.file("missing"), "no such file");
  std::filesystem::create_directories(tmp.file("empty"));
  throws(tmp.file("empty"), "holds no tokenizer.json");
  // Too large for the model: 260 tokens against a 256-token model.
  const auto tok = load_tokenizer(dir);
  CHECK_THROWS_WITH(check_tokenizer_fits_model(*tok, 256, "the model 'm'"),
                    Catch::Contains(dir) && Catch::Contains("260 tokens") && Catch::Contains("vocabulary of 256"));
  CHECK_NOTHROW(check_tokenizer_fits_model(*tok, 260, "m"));
}

TEST_CASE("token shards: uint32 (llm.c's llama-3 header) for vocabularies past 65536", "[tokenizer]") {
  TempDir tmp("shard32");
  const Ids ids = {0, 5, 65535, 7};
  CHECK(write_token_shard_for_vocab(tmp.file("a.bin"), ids, 65536) == 2);
  CHECK(std::filesystem::file_size(tmp.file("a.bin")) == 1024 + 2 * 4);
  CHECK(write_token_shard_for_vocab(tmp.file("b.bin"), ids, 128256) == 4);
  CHECK(std::filesystem::file_size(tmp.file("b.bin")) == 1024 + 4 * 4);
  const std::string b = read_text(tmp.file("b.bin"));
  int32_t header[3];
  std::memcpy(header, b.data(), sizeof(header));
  CHECK(header[0] == 20240801);
  CHECK(header[1] == 7);
  CHECK(header[2] == 4);
  CHECK(is_token_shard(tmp.file("b.bin")));
  CHECK(read_token_shard(tmp.file("b.bin")) == std::vector<uint16_t>{0, 5, 65535, 7});
  CHECK(load_tokens(tmp.file("b.bin")) == std::vector<uint16_t>{0, 5, 65535, 7});
  // held at the header's width: 2 bytes a token from a uint16 shard, 4 from a uint32 one
  CHECK(read_token_shard(tmp.file("a.bin")).bytes_per_token() == 2);
  CHECK(read_token_shard(tmp.file("b.bin")).bytes_per_token() == 4);
  CHECK(write_token_shard_for_vocab(tmp.file("c.bin"), {70000, 128255, 3}, 128256) == 4);
  const TokenIds wide = read_token_shard(tmp.file("c.bin"));
  CHECK(wide == TokenIds(std::vector<uint32_t>{70000, 128255, 3}));
  CHECK(max_token_id(wide) == 128255);
  CHECK_NOTHROW(check_tokens_fit_vocab(wide, 128256, "c.bin"));
  CHECK_THROWS_WITH(check_tokens_fit_vocab(wide, 100000, "c.bin"),
                    Catch::Contains("c.bin") && Catch::Contains("128255") && Catch::Contains("index 1"));
  CHECK_THROWS_WITH(write_token_shard_for_vocab(tmp.file("d.bin"), {3, 600}, 512),
                    Catch::Contains("600") && Catch::Contains("index 1") && Catch::Contains("[0, 512)"));
  // load_tokens of text through a tokenizer
  write_text(tmp.file("t.txt"), "hug pug");
  const BpeTokenizer tok(hug_model(300), "hug");
  CHECK(load_tokens(tmp.file("t.txt"), &tok) == std::vector<uint16_t>{257, 260});
}
