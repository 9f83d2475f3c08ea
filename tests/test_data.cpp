// defines: 11 Catch2 test cases tagged [data]; helpers: write_bytes, read_bytes, shard_bytes, iota_tokens,
//          as_ints
//
// formats/tokenizer.h and formats/token_data.h: llm.c token shards, text sources, DataLoader.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "formats/token_data.h"
#include "formats/tokenizer.h"
#include "tests/temp_dir.h"

using namespace zt;
namespace fs = std::filesystem;
using zt::test::TempDir;

namespace {

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// An llm.c shard built by hand (independently of write_token_shard): header ints, then tokens.
std::vector<char> shard_bytes(int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& toks) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  std::vector<char> b(1024 + 2 * toks.size());
  std::memcpy(b.data(), header.data(), 1024);
  if (!toks.empty()) std::memcpy(b.data() + 1024, toks.data(), 2 * toks.size());
  return b;
}

std::vector<uint16_t> iota_tokens(int n) {
  std::vector<uint16_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<uint16_t>(1000 + i);  // token value != index
  return t;
}

std::vector<int32_t> as_ints(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

}  // namespace

TEST_CASE("ByteTokenizer round-trips UTF-8 and refuses ids outside 0..255", "[data]") {
  ByteTokenizer tok;
  CHECK(tok.vocab_size() == 256);
  const std::string text = "héllo, wörld — ∑ 日本語 🙂\n\t\x01";
  const std::vector<int32_t> ids = tok.encode(text);
  REQUIRE(ids.size() == text.size());  // one token per byte, multi-byte characters included
  CHECK(ids[0] == 'h');
  CHECK(ids[1] == 0xC3);  // 'é' = C3 A9
  CHECK(ids[2] == 0xA9);
  for (int32_t id : ids) CHECK((id >= 0 && id < 256));
  CHECK(tok.decode(ids) == text);
  CHECK(tok.decode({}) == "");
  CHECK(tok.decode_token(65) == "A");
  CHECK_THROWS_WITH(tok.decode({72, 256, 73}), Catch::Contains("256") && Catch::Contains("position 1"));
  CHECK_THROWS_WITH(tok.decode({-3}), Catch::Contains("-3"));
  CHECK_THROWS_WITH(tok.decode_token(300), Catch::Contains("300"));
}

TEST_CASE("token shard round trip matches llm.c's byte layout", "[data]") {
  TempDir tmp("roundtrip");
  const std::string path = tmp.file("a.bin");
  std::vector<uint16_t> toks = {0, 1, 255, 256, 50256, 65535, 7};
  write_token_shard(path, toks);
  CHECK_FALSE(fs::exists(path + ".tmp"));  // renamed into place
  CHECK(read_bytes(path) == shard_bytes(20240520, 1, 7, toks));  // exact bytes: header + uint16
  CHECK(read_token_shard(path) == toks);

  // int32 overload: same file; out-of-range ids refused with the id and its index.
  write_token_shard(path, std::vector<int32_t>{0, 1, 255, 256, 50256, 65535, 7});
  CHECK(read_token_shard(path) == toks);
  CHECK_THROWS_WITH(write_token_shard(tmp.file("b.bin"), std::vector<int32_t>{1, 2, 70000}),
                    Catch::Contains("70000") && Catch::Contains("index 2"));
  CHECK_THROWS_WITH(write_token_shard(tmp.file("c.bin"), std::vector<int32_t>{-1}), Catch::Contains("-1"));

  // Overwriting replaces; an empty shard is valid.
  write_token_shard(path, std::vector<uint16_t>{});
  CHECK(read_token_shard(path).empty());
  CHECK(read_bytes(path).size() == 1024);

  // Writing into a missing directory names the file.
  CHECK_THROWS_WITH(write_token_shard(tmp.file("nodir/x.bin"), toks), Catch::Contains("nodir/x.bin.tmp"));
}

TEST_CASE("bad token shards give errors naming the file and the fact", "[data]") {
  TempDir tmp("bad");
  const std::vector<uint16_t> toks = iota_tokens(10);

  const std::string missing = tmp.file("missing.bin");
  CHECK_THROWS_WITH(read_token_shard(missing), Catch::Contains("missing.bin") && Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(load_tokens(missing), Catch::Contains("missing.bin"));

  const std::string trunc = tmp.file("trunc.bin");
  std::vector<char> b = shard_bytes(20240520, 1, 10, toks);
  b.resize(100);
  write_bytes(trunc, b);
  CHECK_THROWS_WITH(read_token_shard(trunc), Catch::Contains("trunc.bin") && Catch::Contains("truncated header") &&
                                                 Catch::Contains("100 bytes") && Catch::Contains("1024"));

  const std::string magic = tmp.file("magic.bin");
  write_bytes(magic, shard_bytes(20240326, 1, 10, toks));  // a model checkpoint's magic
  CHECK_THROWS_WITH(read_token_shard(magic), Catch::Contains("magic.bin") && Catch::Contains("20240326") &&
                                                 Catch::Contains("20240520"));

  const std::string version = tmp.file("version.bin");
  write_bytes(version, shard_bytes(20240520, 2, 10, toks));
  CHECK_THROWS_WITH(read_token_shard(version), Catch::Contains("version.bin") && Catch::Contains("version 2") &&
                                                   Catch::Contains("expected 1"));

  const std::string shortf = tmp.file("short.bin");  // header says 11, 10 present
  write_bytes(shortf, shard_bytes(20240520, 1, 11, toks));
  CHECK_THROWS_WITH(read_token_shard(shortf), Catch::Contains("short.bin") && Catch::Contains("11 tokens") &&
                                                  Catch::Contains("1044 bytes") && Catch::Contains("10 tokens"));

  const std::string longf = tmp.file("long.bin");  // header says 9, 10 present
  write_bytes(longf, shard_bytes(20240520, 1, 9, toks));
  CHECK_THROWS_WITH(read_token_shard(longf), Catch::Contains("long.bin") && Catch::Contains("9 tokens") &&
                                                 Catch::Contains("1044 bytes"));

  const std::string neg = tmp.file("neg.bin");
  write_bytes(neg, shard_bytes(20240520, 1, -5, toks));
  CHECK_THROWS_WITH(read_token_shard(neg), Catch::Contains("neg.bin") && Catch::Contains("-5"));

  // A file that starts with the magic is a shard for load_tokens too: no fallback to text.
  CHECK_THROWS_WITH(load_tokens(shortf), Catch::Contains("short.bin") && Catch::Contains("11 tokens"));
}

TEST_CASE("load_tokens reads shards as shards and anything else as byte text", "[data]") {
  TempDir tmp("load");
  const std::string shard = tmp.file("s.bin");
  const std::vector<uint16_t> toks = {20240520 & 0xffff, 300, 2, 50000};
  write_token_shard(shard, toks);
  CHECK(is_token_shard(shard));
  CHECK(load_tokens(shard) == toks);

  const std::string text = tmp.file("t.txt");
  const std::string s = "int main() { return 0; } // ü\n";
  write_bytes(text, std::vector<char>(s.begin(), s.end()));
  CHECK_FALSE(is_token_shard(text));
  const TokenIds got = load_tokens(text);
  const std::vector<int32_t> ids = ByteTokenizer().encode(s);
  CHECK(got == std::vector<uint16_t>(ids.begin(), ids.end()));

  // A text file of fewer than 4 bytes, and an empty one, are text.
  const std::string tiny = tmp.file("tiny.txt");
  write_bytes(tiny, {'h', 'i'});
  CHECK(load_tokens(tiny) == std::vector<uint16_t>{'h', 'i'});
  const std::string empty = tmp.file("empty.txt");
  write_bytes(empty, {});
  CHECK(load_tokens(empty).empty());
}

TEST_CASE("max_token_id and the vocabulary check", "[data]") {
  CHECK(max_token_id({}) == -1);
  CHECK(max_token_id(std::vector<uint16_t>{3, 9, 1}) == 9);
  CHECK_NOTHROW(check_tokens_fit_vocab(std::vector<uint16_t>{0, 249, 5}, 250, "a.bin"));
  CHECK_THROWS_WITH(check_tokens_fit_vocab(std::vector<uint16_t>{0, 250, 7, 250}, 250, "corpus.bin"),
                    Catch::Contains("corpus.bin") && Catch::Contains("token id 250") && Catch::Contains("index 1") &&
                        Catch::Contains("vocabulary of 250"));
}

// The llm.c definition, written out: batch k of rank r starts at pos = (k*P + r)*B*T;
// inputs = tok[pos + i], targets = tok[pos + i + 1], i in [0, B*T); K = (N-1)/(P*B*T) batches, then wrap.
TEST_CASE("DataLoader batches follow llm.c's index formula - with wrap-around", "[data]") {
  const int B = 2, T = 3, N = 20;
  const std::vector<uint16_t> toks = iota_tokens(N);
  DataLoader dl(toks, B, T);
  CHECK(dl.num_batches() == 3);  // (20 - 1) / 6
  Tensor x, y;
  // Expected start positions: 0, 6, 12, then wrap to 0, 6, 12, 0.
  const int starts[] = {0, 6, 12, 0, 6, 12, 0};
  for (int step = 0; step < 7; ++step) {
    dl.next_batch(x, y);
    REQUIRE(x.shape() == Shape{B, T});
    REQUIRE(y.shape() == Shape{B, T});
    REQUIRE(x.dtype() == DType::i32);
    const auto xv = as_ints(x), yv = as_ints(y);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        CHECK(xv[b * T + t] == 1000 + starts[step] + b * T + t);
        CHECK(yv[b * T + t] == 1000 + starts[step] + b * T + t + 1);
      }
  }
  // Batch 2 reads up to token 18 (its last target); token 19 is never a target in a pass.
  dl.reset();
  CHECK(dl.position() == 0);
  dl.next_batch(x, y);
  CHECK(as_ints(x)[0] == 1000);

  // Exactly B*T + 1 tokens: one batch, reused forever.
  DataLoader one(iota_tokens(7), B, T);
  CHECK(one.num_batches() == 1);
  for (int i = 0; i < 3; ++i) {
    one.next_batch(x, y);
    CHECK(as_ints(x) == std::vector<int32_t>{1000, 1001, 1002, 1003, 1004, 1005});
    CHECK(as_ints(y) == std::vector<int32_t>{1001, 1002, 1003, 1004, 1005, 1006});
  }
}

TEST_CASE("DataLoader rank 1 of 2 reads the second slice of each global batch", "[data]") {
  const int B = 2, T = 3, P = 2, N = 30;
  const std::vector<uint16_t> toks = iota_tokens(N);
  DataLoader r0(toks, B, T, 0, P), r1(toks, B, T, 1, P);
  CHECK(r1.num_batches() == 2);  // (30 - 1) / 12
  Tensor x0, y0, x1, y1;
  for (int k = 0; k < 5; ++k) {  // k = 0, 1, then wrap: 0, 1, 0
    const int kk = k % 2;
    r0.next_batch(x0, y0);
    r1.next_batch(x1, y1);
    const auto a0 = as_ints(x0), a1 = as_ints(x1), b1 = as_ints(y1);
    for (int i = 0; i < B * T; ++i) {
      CHECK(a0[i] == 1000 + (kk * P + 0) * B * T + i);
      CHECK(a1[i] == 1000 + (kk * P + 1) * B * T + i);
      CHECK(b1[i] == 1000 + (kk * P + 1) * B * T + i + 1);
    }
  }
  CHECK_THROWS_WITH(DataLoader(toks, B, T, 2, 2), Catch::Contains("process_rank 2"));
}

TEST_CASE("DataLoader position save/restore continues identically", "[data]") {
  const std::vector<uint16_t> toks = iota_tokens(50);
  DataLoader a(toks, 2, 3);  // 8 batches per pass
  Tensor x, y;
  for (int i = 0; i < 11; ++i) a.next_batch(x, y);  // past one wrap
  const int64_t saved = a.position();
  CHECK(saved == 3);
  DataLoader b(toks, 2, 3);
  b.set_position(saved);
  Tensor xa, ya, xb, yb;
  for (int i = 0; i < 20; ++i) {
    a.next_batch(xa, ya);
    b.next_batch(xb, yb);
    CHECK(as_ints(xa) == as_ints(xb));
    CHECK(as_ints(ya) == as_ints(yb));
    CHECK(a.position() == b.position());
  }
  // The end-of-pass position restores too: the next batch is batch 0.
  DataLoader c(toks, 2, 3);
  c.set_position(c.num_batches());
  c.next_batch(x, y);
  CHECK(as_ints(x)[0] == 1000);
  CHECK(c.position() == 1);
  CHECK_THROWS_WITH(c.set_position(9), Catch::Contains("position 9") && Catch::Contains("[0, 8]"));
  CHECK_THROWS_WITH(c.set_position(-1), Catch::Contains("position -1"));
}

TEST_CASE("DataLoader refuses too little data and wrong output tensors", "[data]") {
  CHECK_THROWS_WITH(DataLoader(iota_tokens(6), 2, 3),
                    Catch::Contains("6 tokens") && Catch::Contains("= 7 tokens"));
  CHECK_THROWS_WITH(DataLoader(iota_tokens(12), 2, 3, 0, 2),
                    Catch::Contains("12 tokens") && Catch::Contains("= 13 tokens"));
  CHECK_NOTHROW(DataLoader(iota_tokens(13), 2, 3, 1, 2));
  CHECK_THROWS_WITH(DataLoader(iota_tokens(100), 0, 3), Catch::Contains("B=0"));

  DataLoader dl(iota_tokens(20), 2, 3);
  Tensor x = Tensor::empty({3, 2}, DType::i32), y;
  CHECK_THROWS_WITH(dl.next_batch(x, y), Catch::Contains("DataLoader inputs"));
  Tensor xf = Tensor::empty({2, 3}, DType::f32);
  CHECK_THROWS_WITH(dl.next_batch(xf, y), Catch::Contains("int32"));
  CHECK(dl.position() == 0);  // a refused call does not advance
  // A caller-provided int32 (B, T) pair is filled in place.
  Tensor xi = Tensor::empty({2, 3}, DType::i32), yi = Tensor::empty({2, 3}, DType::i32);
  const void* before = xi.raw();
  dl.next_batch(xi, yi);
  CHECK(xi.raw() == before);
  CHECK(as_ints(yi)[5] == 1006);
}

TEST_CASE("the shipped reference data is well formed", "[data]") {
  // tests/data/make_gpt2_reference.py wrote these; the model tests compare against them.
  const std::string dir = std::string(ZT_SOURCE_DIR) + "/tests/data/";
  const TokenIds toks = load_tokens(dir + "tiny_tokens.bin");
  CHECK(toks.size() == 5000);
  CHECK_NOTHROW(check_tokens_fit_vocab(toks, 250, "tiny_tokens.bin"));
  DataLoader dl(toks, 4, 32);  // the reference's B, T: batch k = tokens [k*128, k*128 + 129)
  Tensor x, y;
  for (int k = 0; k < 10; ++k) dl.next_batch(x, y);
  CHECK(as_ints(x)[0] == static_cast<int32_t>(toks[9 * 128]));
  CHECK(as_ints(y)[127] == static_cast<int32_t>(toks[10 * 128]));
  // gpt2_tiny.bin: llm.c checkpoint header (magic 20240326, version 3) and 120576 float32s.
  const std::vector<char> ckpt = read_bytes(dir + "gpt2_tiny.bin");
  REQUIRE(ckpt.size() == 1024 + 4 * 120576);
  int32_t header[8];
  std::memcpy(header, ckpt.data(), sizeof(header));
  CHECK(std::vector<int32_t>(header, header + 8) == std::vector<int32_t>{20240326, 3, 64, 250, 2, 4, 64, 256});
}

TEST_CASE("DataLoader: uint32 ids past 65535 reach the batches whole - 4 bytes a token", "[data]") {
  std::vector<uint32_t> wide(200);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<uint32_t>(65536 + 311 * i) % 128256u;
  const TokenIds toks(wide);
  CHECK(toks.bytes_per_token() == 4);
  CHECK(toks == TokenIds(std::vector<uint32_t>(wide)));
  DataLoader dl(toks, 2, 8);
  Tensor x, y;
  dl.next_batch(x, y);
  dl.next_batch(x, y);  // batch 1: tokens [16, 33)
  for (int i = 0; i < 16; ++i) {
    CHECK(as_ints(x)[i] == static_cast<int32_t>(wide[16 + i]));
    CHECK(as_ints(y)[i] == static_cast<int32_t>(wide[17 + i]));
  }
  // a tokenizer's ids: 2 bytes a token up to 65536 tokens, else 4; an id outside is named
  CHECK(TokenIds::from_ids({1, 2, 65535}, 65536, "s").bytes_per_token() == 2);
  CHECK(TokenIds::from_ids({1, 2, 70000}, 128256, "s").bytes_per_token() == 4);
  CHECK_THROWS_WITH(TokenIds::from_ids({1, 128256}, 128256, "src"),
                    Catch::Contains("src") && Catch::Contains("128256 at index 1") && Catch::Contains("[0, 128256)"));
}
