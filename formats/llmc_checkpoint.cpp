#include "formats/llmc_checkpoint.h"

#include <bit>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/file_io.h"

namespace zt {

static_assert(std::endian::native == std::endian::little, "llm.c checkpoints are little-endian");

namespace {

constexpr int64_t kHeaderInts = 256;
constexpr int64_t kHeaderBytes = kHeaderInts * 4;

struct Header {
  int32_t h[kHeaderInts];
};

Header read_header(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) ZT_THROW("llm.c checkpoint '", path, "': cannot open: ", errno_message());
  Header hd{};
  f.read(reinterpret_cast<char*>(hd.h), kHeaderBytes);
  const int64_t got = f.gcount();
  if (got < kHeaderBytes)
    ZT_THROW("llm.c checkpoint '", path, "' is truncated: expected at least ", kHeaderBytes,
             " bytes (the header), found ", got);
  if (hd.h[0] != kLlmcCheckpointMagic)
    ZT_THROW("llm.c checkpoint '", path, "': bad magic number ", hd.h[0], " (expected ", kLlmcCheckpointMagic,
             hd.h[0] == 20240520 ? "; this is an llm.c token shard, not a model checkpoint" : "", ")");
  if (hd.h[1] != kLlmcVersionF32 && hd.h[1] != kLlmcVersionBF16)
    ZT_THROW("llm.c checkpoint '", path, "': unknown version ", hd.h[1], " (supported: ", kLlmcVersionF32,
             " = float32, ", kLlmcVersionBF16, " = bfloat16)");
  return hd;
}

ModelConfig config_of(const Header& hd, const std::string& path) {
  ModelConfig c;
  c.family = "gpt2";
  c.max_seq_len = hd.h[2];
  c.vocab_size = hd.h[3];
  c.n_layer = hd.h[4];
  c.n_head = c.n_kv_head = hd.h[5];
  c.n_embd = hd.h[6];
  c.padded_vocab_size = hd.h[7];
  c.ffn_hidden = 4 * c.n_embd;
  c.norm_eps = 1e-5;
  c.tie_embeddings = true;
  try {
    c.validate();
  } catch (const Error& e) {
    ZT_THROW("llm.c checkpoint '", path, "': impossible header: ", e.what());
  }
  return c;
}

// The parameter tensors of `m` in the file's order (views into the units' flat buffers).
std::vector<Tensor> file_order(GPT2& m) {
  auto param = [](Unit& u, const std::string& name) {
    const int i = u.params().find(name);
    ZT_CHECK(i >= 0, "GPT2 unit '", u.name(), "' has no parameter '", name, "'");
    return u.params().value(i);
  };
  std::vector<Tensor> out;
  out.push_back(param(m.embed(), "wte.weight"));
  out.push_back(param(m.embed(), "wpe.weight"));
  static const char* const kPerLayer[] = {
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  for (const char* name : kPerLayer)
    for (int64_t l = 0; l < m.config().n_layer; ++l) out.push_back(param(m.block(l), name));
  out.push_back(param(m.head(), "ln_f.weight"));
  out.push_back(param(m.head(), "ln_f.bias"));
  return out;
}

void check_model_supported(const GPT2& m, const char* what) {
  const ModelConfig& c = m.config();
  if (c.ffn_hidden != 4 * c.n_embd)
    ZT_THROW(what, ": the llm.c format fixes the MLP width at 4 n_embd = ", 4 * c.n_embd, ", the model has ffn_hidden ",
             c.ffn_hidden);
}

}  // namespace

ModelConfig read_llmc_header(const std::string& path) { return config_of(read_header(path), path); }

int32_t read_llmc_version(const std::string& path) { return read_header(path).h[1]; }

void load_llmc_checkpoint(const std::string& path, GPT2& model) {
  const Header hd = read_header(path);
  const ModelConfig fc = config_of(hd, path);
  const ModelConfig& mc = model.config();
  check_model_supported(model, "load_llmc_checkpoint");
  ZT_CHECK(model.embed().params().finalized(), "load_llmc_checkpoint: the model was built with allocate = false");
  const struct {
    const char* field;
    int64_t file, model;
  } fields[] = {{"max_seq_len (header[2])", fc.max_seq_len, mc.max_seq_len},
                {"vocab_size (header[3])", fc.vocab_size, mc.vocab_size},
                {"n_layer (header[4])", fc.n_layer, mc.n_layer},
                {"n_head (header[5])", fc.n_head, mc.n_head},
                {"n_embd (header[6])", fc.n_embd, mc.n_embd},
                {"padded_vocab_size (header[7])", fc.padded_vocab_size, mc.padded_vocab_size}};
  for (const auto& f : fields)
    if (f.file != f.model)
      ZT_THROW("llm.c checkpoint '", path, "' does not match the model: ", f.field, " is ", f.file,
               " in the file but ", f.model, " in the model");

  const int32_t version = hd.h[1];
  const DType fdt = version == kLlmcVersionBF16 ? DType::bf16 : DType::f32;
  const int64_t es = static_cast<int64_t>(dtype_size(fdt));
  const int64_t n = fc.num_params();
  const int64_t expected = kHeaderBytes + n * es;
  std::error_code ec;
  const int64_t found = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) ZT_THROW("llm.c checkpoint '", path, "': cannot stat: ", ec.message());
  if (found != expected)
    ZT_THROW("llm.c checkpoint '", path, "' ", found < expected ? "is truncated" : "has the wrong size", ": expected ",
             expected, " bytes (", kHeaderBytes, "-byte header + ", n, " parameters x ", es, " bytes, version ", version,
             "), found ", found);

  std::ifstream f(path, std::ios::binary);
  if (!f) ZT_THROW("llm.c checkpoint '", path, "': cannot open: ", errno_message());
  f.seekg(kHeaderBytes);
  std::vector<char> buf;
  for (Tensor& dst : file_order(model)) {
    buf.resize(static_cast<size_t>(dst.numel() * es));
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (f.gcount() != static_cast<std::streamsize>(buf.size()))
      ZT_THROW("llm.c checkpoint '", path, "': read failed at byte ", static_cast<int64_t>(f.tellg()));
    dst.copy_(Tensor::borrow(buf.data(), dst.shape(), fdt));  // bf16 -> f32/f64 is exact
  }
}

void save_llmc_checkpoint(const std::string& path, GPT2& model, int version) {
  if (version != kLlmcVersionF32 && version != kLlmcVersionBF16)
    ZT_THROW("save_llmc_checkpoint '", path, "': unknown version ", version, " (supported: ", kLlmcVersionF32,
             " = float32, ", kLlmcVersionBF16, " = bfloat16)");
  check_model_supported(model, "save_llmc_checkpoint");
  ZT_CHECK(model.embed().params().finalized(), "save_llmc_checkpoint: the model was built with allocate = false");
  const ModelConfig& c = model.config();
  auto as_i32 = [&](const char* field, int64_t v) {
    if (v > INT32_MAX) ZT_THROW("save_llmc_checkpoint '", path, "': ", field, " ", v, " does not fit the int32 header");
    return static_cast<int32_t>(v);
  };
  int32_t header[kHeaderInts] = {};
  header[0] = kLlmcCheckpointMagic;
  header[1] = version;
  header[2] = as_i32("max_seq_len", c.max_seq_len);
  header[3] = as_i32("vocab_size", c.vocab_size);
  header[4] = as_i32("n_layer", c.n_layer);
  header[5] = as_i32("n_head", c.n_head);
  header[6] = as_i32("n_embd", c.n_embd);
  header[7] = as_i32("padded_vocab_size", c.padded_vocab_size);
  const DType fdt = version == kLlmcVersionBF16 ? DType::bf16 : DType::f32;

  AtomicFile f(path, "llm.c checkpoint");
  f.write(header, sizeof(header));
  for (const Tensor& t : file_order(model)) {
    const Tensor out = t.to(fdt).to(Device::cpu(), Category::workspace);  // f32 -> bf16 rounds to nearest even
    f.write(out.raw(), out.nbytes());
  }
  f.commit();
}

}  // namespace zt
