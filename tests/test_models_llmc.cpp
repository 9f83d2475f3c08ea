// defines: 5 Catch2 test cases tagged [models], [llmc], [reference]; helpers: small_gpt2, read_bytes,
//          write_bytes, param
//
// formats: llm.c GPT-2 checkpoints (save / load both versions, byte layout, every bad input) and
// the forward pass against PyTorch's nanoGPT on tests/data/gpt2_tiny.bin.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "models/gpt2.h"
#include "models/init.h"
#include "formats/llmc_checkpoint.h"
#include "formats/token_data.h"
#include "tests/temp_dir.h"

using namespace zt;
namespace fs = std::filesystem;
using zt::test::TempDir;

namespace {

ModelConfig small_gpt2() {
  ModelConfig c = model_config("gpt2-nano");
  c.n_layer = 2, c.n_embd = 16, c.n_head = c.n_kv_head = 2, c.ffn_hidden = 64;
  c.max_seq_len = 12, c.vocab_size = 50, c.padded_vocab_size = 64;
  return c;
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}
void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}
float float_at(const std::vector<char>& b, int64_t index) {  // float32 parameter `index` after the header
  float v;
  std::memcpy(&v, b.data() + 1024 + 4 * index, 4);
  return v;
}
double param(GPT2& m, Unit& u, const std::string& name, int64_t k) {
  return u.params().value(u.params().find(name)).contiguous().to_vector().at(static_cast<size_t>(k));
}

}  // namespace

TEST_CASE("llm.c checkpoint: float32 round trip is exact and the layout is llm.c's", "[models][llmc]") {
  TempDir tmp("f32");
  const ModelConfig c = small_gpt2();
  GPT2 a(c);
  Rng rng(1);
  init_model(a, rng);
  const std::string path = tmp.file("model.bin");
  save_llmc_checkpoint(path, a, 3);
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const int64_t n = c.num_params();
  REQUIRE(static_cast<int64_t>(fs::file_size(path)) == 1024 + 4 * n);

  // The byte layout, computed here from the format independently of the writer.
  const std::vector<char> b = read_bytes(path);
  int32_t hdr[8];
  std::memcpy(hdr, b.data(), sizeof(hdr));
  CHECK(std::vector<int32_t>(hdr, hdr + 8) == std::vector<int32_t>{20240326, 3, 12, 50, 2, 2, 16, 64});
  const int64_t C = 16, L = 2, Vp = 64, T = 12;
  int64_t off = 0;
  CHECK(float_at(b, off + 3 * C + 5) == param(a, a.embed(), "wte.weight", 3 * C + 5));
  off += Vp * C;
  CHECK(float_at(b, off + 7) == param(a, a.embed(), "wpe.weight", 7));
  off += T * C + 2 * L * C;  // wpe, ln1w, ln1b
  CHECK(float_at(b, off + 3 * C * C + 17) == param(a, a.block(1), "attn.c_attn.weight", 17));  // qkvw, layer 1
  off += L * 3 * C * C + L * 3 * C + L * C * C + L * C + 2 * L * C;  // qkvw qkvb attprojw attprojb ln2w ln2b
  CHECK(float_at(b, off + 4 * C * C + 33) == param(a, a.block(1), "mlp.c_fc.weight", 33));  // fcw, layer 1
  off += L * 4 * C * C + L * 4 * C;  // fcw fcb
  CHECK(float_at(b, off + 40) == param(a, a.block(0), "mlp.c_proj.weight", 40));  // fcprojw, layer 0
  off += L * C * 4 * C + L * C + 2 * C;  // fcprojw fcprojb lnfw lnfb
  CHECK(off == n);

  CHECK(read_llmc_header(path) == c);
  CHECK(read_llmc_version(path) == 3);
  GPT2 m(c);
  Rng other(2);
  init_model(m, other);
  load_llmc_checkpoint(path, m);
  for (size_t u = 0; u < a.units().size(); ++u)
    CHECK(m.units()[u]->params().flat().to_vector() == a.units()[u]->params().flat().to_vector());
  // A float64 model loads the same values.
  GPT2 d(c, ModelOptions{.dtype = DType::f64});
  load_llmc_checkpoint(path, d);
  CHECK(d.block(1).params().flat().to_vector() == a.block(1).params().flat().to_vector());
}

TEST_CASE("llm.c checkpoint: bfloat16 round trip rounds to nearest even", "[models][llmc]") {
  TempDir tmp("bf16");
  const ModelConfig c = small_gpt2();
  GPT2 a(c);
  Rng rng(3);
  init_model(a, rng);
  const std::string path = tmp.file("model_bf16.bin");
  save_llmc_checkpoint(path, a, 5);
  REQUIRE(static_cast<int64_t>(fs::file_size(path)) == 1024 + 2 * c.num_params());
  CHECK(read_llmc_version(path) == 5);
  GPT2 m(c);
  load_llmc_checkpoint(path, m);
  int64_t changed = 0;
  for (size_t u = 0; u < a.units().size(); ++u) {
    const auto orig = a.units()[u]->params().flat().to_vector();
    const auto got = m.units()[u]->params().flat().to_vector();
    for (size_t k = 0; k < orig.size(); ++k) {
      const float want = bf16_to_f32(f32_to_bf16(static_cast<float>(orig[k])));
      REQUIRE(got[k] == want);
      REQUIRE(std::abs(got[k] - orig[k]) <= std::abs(orig[k]) * (1.0 / 256));  // half an ulp of 8 bits
      changed += got[k] != orig[k];
    }
  }
  CHECK(changed > 0);
  // Saving the loaded model again gives the same bytes: bf16 values are fixed points.
  save_llmc_checkpoint(tmp.file("again.bin"), m, 5);
  CHECK(read_bytes(tmp.file("again.bin")) == read_bytes(path));
}

TEST_CASE("llm.c checkpoint: bad files give errors naming the file and the fact", "[models][llmc]") {
  TempDir tmp("bad");
  const ModelConfig c = small_gpt2();
  GPT2 m(c);
  Rng rng(4);
  init_model(m, rng);
  const std::string good = tmp.file("good.bin");
  save_llmc_checkpoint(good, m, 3);
  const std::vector<char> bytes = read_bytes(good);

  const std::string missing = tmp.file("missing.bin");
  CHECK_THROWS_WITH(load_llmc_checkpoint(missing, m), Catch::Contains(missing) && Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(read_llmc_header(missing), Catch::Contains("cannot open"));

  auto patched = [&](const std::string& name, int index, int32_t value) {
    std::vector<char> b = bytes;
    std::memcpy(b.data() + 4 * index, &value, 4);
    write_bytes(tmp.file(name), b);
    return tmp.file(name);
  };
  const std::string magic = patched("magic.bin", 0, 12345);
  CHECK_THROWS_WITH(load_llmc_checkpoint(magic, m),
                    Catch::Contains("magic.bin") && Catch::Contains("bad magic number 12345 (expected 20240326"));
  CHECK_THROWS_WITH(read_llmc_header(patched("shard.bin", 0, 20240520)), Catch::Contains("token shard"));
  CHECK_THROWS_WITH(load_llmc_checkpoint(patched("version.bin", 1, 4), m),
                    Catch::Contains("unknown version 4") && Catch::Contains("3 = float32, 5 = bfloat16"));
  CHECK_THROWS_WITH(read_llmc_header(patched("heads.bin", 5, 3)), Catch::Contains("impossible header") &&
                                                                      Catch::Contains("not divisible by n_head 3"));

  std::vector<char> cut(bytes.begin(), bytes.end() - 100);
  write_bytes(tmp.file("trunc.bin"), cut);
  const int64_t expected = 1024 + 4 * c.num_params();
  CHECK_THROWS_WITH(load_llmc_checkpoint(tmp.file("trunc.bin"), m),
                    Catch::Contains("trunc.bin' is truncated") && Catch::Contains("expected " + std::to_string(expected)) &&
                        Catch::Contains("found " + std::to_string(expected - 100)));
  std::vector<char> longer = bytes;
  longer.resize(bytes.size() + 8);
  write_bytes(tmp.file("long.bin"), longer);
  CHECK_THROWS_WITH(load_llmc_checkpoint(tmp.file("long.bin"), m), Catch::Contains("has the wrong size"));
  write_bytes(tmp.file("short.bin"), std::vector<char>(bytes.begin(), bytes.begin() + 10));
  CHECK_THROWS_WITH(read_llmc_header(tmp.file("short.bin")),
                    Catch::Contains("truncated: expected at least 1024 bytes (the header), found 10"));
  // Sizes from the header are checked against the file before anything is built: a
  // header whose parameter count wraps 64 bits, and one asking for ~3 TB from this small file.
  {
    std::vector<char> b = bytes;
    const int32_t huge[] = {1 << 30, 1 << 10, 1 << 30};  // n_layer, n_head, n_embd (header[4..6])
    std::memcpy(b.data() + 16, huge, sizeof huge);
    write_bytes(tmp.file("wrap.bin"), b);
    CHECK_THROWS_WITH(read_llmc_header(tmp.file("wrap.bin")),
                      Catch::Contains("wrap.bin': impossible header") && Catch::Contains("overflows a 64-bit size"));
    const int32_t big[] = {4096, 64, 8192};
    std::memcpy(b.data() + 16, big, sizeof big);
    write_bytes(tmp.file("big.bin"), b);
    CHECK_THROWS_WITH(read_llmc_header(tmp.file("big.bin")),
                      Catch::Contains("big.bin' is truncated") && Catch::Contains("parameters x 4 bytes"));
  }
  // A float32 file whose header says version 5 (bfloat16): the size disagrees.
  CHECK_THROWS_WITH(load_llmc_checkpoint(patched("v3.bin", 1, 5), m), Catch::Contains("has the wrong size"));

  // Shape mismatches against the model's config name the field and both values.
  ModelConfig deeper = c;
  deeper.n_layer = 3;
  GPT2 m3(deeper);
  CHECK_THROWS_WITH(load_llmc_checkpoint(good, m3),
                    Catch::Contains("n_layer (header[4]) is 2 in the file but 3 in the model"));
  ModelConfig wider_vocab = c;
  wider_vocab.padded_vocab_size = 128;
  GPT2 mv(wider_vocab);
  CHECK_THROWS_WITH(load_llmc_checkpoint(good, mv),
                    Catch::Contains("padded_vocab_size (header[7]) is 64 in the file but 128 in the model"));
  CHECK_THROWS_WITH(save_llmc_checkpoint(tmp.file("x.bin"), m, 4), Catch::Contains("unknown version 4"));
  ModelConfig odd = c;
  odd.ffn_hidden = 48;
  GPT2 mo(odd);
  CHECK_THROWS_WITH(save_llmc_checkpoint(tmp.file("y.bin"), mo, 3), Catch::Contains("ffn_hidden 48"));
  CHECK_THROWS_WITH(save_llmc_checkpoint(tmp.file("nodir/z.bin"), m, 3), Catch::Contains("nodir/z.bin.tmp"));
}

TEST_CASE("llm.c checkpoint: a header claiming more than the file holds is refused before a model is built",
          "[models][llmc]") {
  // The header's sizes against the file's size, in read_llmc_header: a caller builds the model
  // from the header next, so a header claiming a million layers must not get that far. The error
  // names the file, every size field with its value and slot, and what the file has room for.
  TempDir tmp("claims");
  const ModelConfig c = small_gpt2();
  GPT2 m(c);
  Rng rng(5);
  init_model(m, rng);
  save_llmc_checkpoint(tmp.file("good.bin"), m, 3);
  const std::vector<char> bytes = read_bytes(tmp.file("good.bin"));
  const int64_t room = c.num_params();  // parameters the good file holds, float32
  auto lie = [&](const std::string& name, int slot, int32_t value) {
    std::vector<char> b = bytes;
    std::memcpy(b.data() + 4 * slot, &value, 4);
    write_bytes(tmp.file(name), b);
    return tmp.file(name);
  };
  const struct {
    const char* file;
    int slot;
    int32_t value;
    const char* named;
  } lies[] = {{"layers.bin", 4, 1000000, "n_layer = 1000000 (header[4])"},
              {"width.bin", 6, 4096, "n_embd = 4096 (header[6])"},
              {"vocab.bin", 7, 1 << 24, "padded_vocab_size = 16777216 (header[7])"},
              {"context.bin", 2, 1 << 20, "max_seq_len = 1048576 (header[2])"}};
  for (const auto& l : lies) {
    const std::string path = lie(l.file, l.slot, l.value);
    for (auto read : {std::function<void()>([&] { read_llmc_header(path); }),
                      std::function<void()>([&] { load_llmc_checkpoint(path, m); })}) {
      CHECK_THROWS_WITH(read(), Catch::Contains(path + "' is truncated") && Catch::Contains(l.named) &&
                                    Catch::Contains("the file has room for " + std::to_string(room)));
    }
  }
  // A file cut short of a correct header: the same message, the fields all true.
  write_bytes(tmp.file("cut.bin"), std::vector<char>(bytes.begin(), bytes.end() - 4 * 16));
  CHECK_THROWS_WITH(read_llmc_header(tmp.file("cut.bin")),
                    Catch::Contains("cut.bin' is truncated") && Catch::Contains("n_layer = 2 (header[4])") &&
                        Catch::Contains("the file has room for " + std::to_string(room - 16)));
}

TEST_CASE("GPT-2 forward matches PyTorch nanoGPT on gpt2_tiny.bin", "[models][llmc][reference]") {
  const std::string dir = std::string(ZT_SOURCE_DIR) + "/tests/data/";
  std::ifstream jf(dir + "gpt2_tiny_reference.json");
  REQUIRE(jf.good());
  const nlohmann::json ref = nlohmann::json::parse(jf);
  const ModelConfig c = read_llmc_header(dir + "gpt2_tiny.bin");
  CHECK(c.n_layer == ref["config"]["n_layer"].get<int64_t>());
  CHECK(c.n_embd == ref["config"]["n_embd"].get<int64_t>());
  CHECK(c.padded_vocab_size == ref["config"]["padded_vocab_size"].get<int64_t>());
  GPT2 m(c);
  load_llmc_checkpoint(dir + "gpt2_tiny.bin", m);
  CHECK(m.num_params() == ref["num_parameters_in_checkpoint"].get<int64_t>());

  const TokenIds tokens = read_token_shard(dir + "tiny_tokens.bin");
  const int64_t B = ref["train"]["B"].get<int64_t>(), T = ref["train"]["T"].get<int64_t>();
  REQUIRE(static_cast<int64_t>(tokens.size()) > B * T);
  Tensor idx = Tensor::empty({B, T}, DType::i32), tgt = Tensor::empty({B, T}, DType::i32);
  for (int64_t i = 0; i < B * T; ++i) {  // batch 0: tokens [0, B*T + 1)
    idx.data<int32_t>()[i] = tokens[i];
    tgt.data<int32_t>()[i] = tokens[i + 1];
  }
  NoGradGuard ng;
  Tensor logits = m.logits(idx).value();  // (B, T, Vp)
  REQUIRE(logits.shape() == Shape{B, T, c.padded_vocab_size});
  const auto first = logits.slice(0, 0, 1).slice(1, 0, 1).slice(2, 0, 8).to_vector();
  const auto last = logits.slice(0, 0, 1).slice(1, T - 1, T).slice(2, 0, 8).to_vector();
  const auto want_first = ref["logits_step0_b0_t0_first8"].get<std::vector<double>>();
  const auto want_last = ref["logits_step0_b0_tlast_first8"].get<std::vector<double>>();
  for (int k = 0; k < 8; ++k) {
    INFO("logit " << k);
    CHECK(std::abs(first[k] - want_first[k]) <= 1e-5);
    CHECK(std::abs(last[k] - want_last[k]) <= 1e-5);
  }
  const double loss0 = ref["losses"][0].get<double>();  // before the first update
  CHECK(std::abs(m.loss(idx, tgt).value().item() - loss0) <= 1e-5);
}
