// defines: read_llmc_header, read_llmc_version, load_llmc_checkpoint, llmc_checkpoint_source,
//          save_llmc_checkpoint (formats/llmc_checkpoint.h); file-local: Header, read_header, config_of,
//          Piece, file_order, check_file_size and 2 more
#include "formats/llmc_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/checked.h"  // defines: checked_mul, checked_add
#include "core/file_io.h"
#include "formats/stream_read.h"  // defines: read_stored_tensor

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

// One parameter of the model: unit (index into Model::units()) and parameter index.
struct Piece {
  int unit, index;
};

// The parameters of `m` in the file's order: the embedding's two, each per-layer tensor of every
// layer (layer-major), the final norm's two.
std::vector<Piece> file_order(GPT2& m) {
  const std::vector<Unit*> units = m.units();
  auto piece = [&](Unit& u, const std::string& name) {
    const int i = u.params().find(name);
    ZT_CHECK(i >= 0, "GPT2 unit '", u.name(), "' has no parameter '", name, "'");
    const auto at = std::find(units.begin(), units.end(), &u);
    ZT_CHECK(at != units.end(), "GPT2 unit '", u.name(), "' is not among the model's units");
    return Piece{static_cast<int>(at - units.begin()), i};
  };
  std::vector<Piece> out;
  out.push_back(piece(m.embed(), "wte.weight"));
  out.push_back(piece(m.embed(), "wpe.weight"));
  static const char* const kPerLayer[] = {
      "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
      "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
  for (const char* name : kPerLayer)
    for (int64_t l = 0; l < m.config().n_layer; ++l) out.push_back(piece(m.block(l), name));
  out.push_back(piece(m.head(), "ln_f.weight"));
  out.push_back(piece(m.head(), "ln_f.bias"));
  return out;
}

// The file's size against the header: 256 ints + num_params() values of the version's dtype, all
// arithmetic checked (config_of has validated the dimensions; num_params() checks its products).
void check_file_size(const Header& hd, const ModelConfig& fc, const std::string& path) {
  const int32_t version = hd.h[1];
  const int64_t es = version == kLlmcVersionBF16 ? 2 : 4;
  int64_t n = 0, expected = 0;
  try {
    n = fc.num_params();
    expected = checked_add(kHeaderBytes, checked_mul(n, es, "parameter bytes"), "file bytes");
  } catch (const Error& e) {
    ZT_THROW("llm.c checkpoint '", path, "': impossible header: ", e.what());
  }
  std::error_code ec;
  const int64_t found = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) ZT_THROW("llm.c checkpoint '", path, "': cannot stat: ", ec.message());
  // The sizes that make up the count are named: which of them is wrong, the file cannot say.
  if (found != expected)
    ZT_THROW("llm.c checkpoint '", path, "' ", found < expected ? "is truncated" : "has the wrong size", ": expected ",
             expected, " bytes (", kHeaderBytes, "-byte header + ", n, " parameters x ", es, " bytes, version ",
             version, "), found ", found, "; the header's n_layer = ", fc.n_layer, " (header[4]), n_embd = ", fc.n_embd,
             " (header[6]), padded_vocab_size = ", fc.padded_vocab_size, " (header[7]), max_seq_len = ", fc.max_seq_len,
             " (header[2]) make the ", n, " parameters, the file has room for ", (found - kHeaderBytes) / es);
}

void check_model_supported(const GPT2& m, const char* what) {
  const ModelConfig& c = m.config();
  if (c.ffn_hidden != 4 * c.n_embd)
    ZT_THROW(what, ": the llm.c format fixes the MLP width at 4 n_embd = ", 4 * c.n_embd, ", the model has ffn_hidden ",
             c.ffn_hidden);
}

}  // namespace

// The header's model, checked against the file: a header that asks for more (or fewer) bytes
// than the file holds is refused here, before any caller builds the model it describes.
ModelConfig read_llmc_header(const std::string& path) {
  const Header hd = read_header(path);
  ModelConfig c = config_of(hd, path);
  check_file_size(hd, c, path);
  return c;
}

int32_t read_llmc_version(const std::string& path) { return read_header(path).h[1]; }

namespace {

// The checkpoint at `path` for a GPT2's layout: the header and the file size are checked here;
// read_unit reads one unit's tensors (pread at their offsets: a block's 12 tensors lie in 12
// places, the file being layer-major), straight into the unit's buffer for a float32 file, through
// read_stored_tensor's bounded buffer for bfloat16.
class LlmcReader final : public UnitReader {
 public:
  LlmcReader(const std::string& path, GPT2& model, const char* what) : UnitReader(model), path_(path) {
    const Header hd = read_header(path);
    const ModelConfig fc = config_of(hd, path);
    check_file_size(hd, fc, path);  // the file against its own header first, then against the model
    const ModelConfig& mc = model.config();
    check_model_supported(model, what);
    ZT_CHECK(model.embed().params().finalized(), what, ": the model was built with allocate = false");
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

    fdt_ = hd.h[1] == kLlmcVersionBF16 ? DType::bf16 : DType::f32;
    const int64_t es = static_cast<int64_t>(dtype_size(fdt_));
    // Each parameter's byte offset: the tensors lie back to back in file_order.
    by_unit_.resize(units_.size());
    int64_t offset = kHeaderBytes;
    for (const Piece& p : file_order(model)) {
      by_unit_[p.unit].push_back({p, offset});
      offset += units_[p.unit]->params().infos()[p.index].numel * es;
    }
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) ZT_THROW("llm.c checkpoint '", path, "': cannot open: ", errno_message());
  }
  ~LlmcReader() override { ::close(fd_); }
  LlmcReader(const LlmcReader&) = delete;
  LlmcReader& operator=(const LlmcReader&) = delete;

 protected:
  void read_unit(int unit, const Tensor& flat) override {
    const ParamSet& ps = units_[unit]->params();
    for (const auto& [p, offset] : by_unit_[unit]) {
      const ParamInfo& info = ps.infos()[p.index];
      read_stored_tensor(info.shape, fdt_, false, flat.flat_view(info.offset, info.shape),  // bf16 -> f32 is exact
                         [&, at = offset](uint64_t lo, uint64_t n, void* dst) { pread_all(at + lo, n, dst); });
    }
  }

 private:
  void pread_all(uint64_t offset, uint64_t n, void* dst) const {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        ZT_THROW("llm.c checkpoint '", path_, "': read failed at byte ", offset,
                 r < 0 ? ": " + errno_message() : std::string(" (unexpected end of file)"));
      p += r;
      offset += static_cast<uint64_t>(r);
      n -= static_cast<uint64_t>(r);
    }
  }

  std::string path_;
  int fd_ = -1;
  DType fdt_ = DType::f32;
  std::vector<std::vector<std::pair<Piece, int64_t>>> by_unit_;  // per unit: (parameter, file byte offset)
};

}  // namespace

void load_llmc_checkpoint(const std::string& path, GPT2& model) {
  LlmcReader(path, model, "load_llmc_checkpoint").fill_model();
}

std::unique_ptr<UnitReader> llmc_checkpoint_source(const std::string& path, GPT2& model) {
  return std::make_unique<LlmcReader>(path, model, "pretrained_source");
}

void save_llmc_checkpoint(const std::string& path, GPT2& model, int version) {
  ZT_CHECK(model.embed().params().finalized(), "save_llmc_checkpoint: the model was built with allocate = false");
  ResidentParams values(model);
  save_llmc_checkpoint(path, model, values, version);
}

void save_llmc_checkpoint(const std::string& path, GPT2& model, ParamSource& values, int version) {
  if (version != kLlmcVersionF32 && version != kLlmcVersionBF16)
    ZT_THROW("save_llmc_checkpoint '", path, "': unknown version ", version, " (supported: ", kLlmcVersionF32,
             " = float32, ", kLlmcVersionBF16, " = bfloat16)");
  check_model_supported(model, "save_llmc_checkpoint");
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
  const std::vector<Unit*> units = model.units();
  for (const Piece& p : file_order(model)) {  // one parameter in memory at a time
    const ParamSet& ps = units[p.unit]->params();
    const ParamInfo& info = ps.infos()[p.index];
    Tensor t = Tensor::empty({info.numel}, ps.dtype(), Category::workspace, cpu_allocator());
    values.fill(p.unit, info.offset, t);
    const Tensor out = t.to(fdt);  // f32 -> bf16 rounds to nearest even
    f.write(out.raw(), out.nbytes());
  }
  f.commit();
}

}  // namespace zt
