#include "models/train_checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/file_io.h"

namespace fs = std::filesystem;

namespace zt {

namespace {

constexpr const char* kFormat = "zerotensor-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kRankFile = "rank_00000.bin";

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A small file written atomically (core/file_io.h).
void write_file(const fs::path& p, const std::string& bytes) {
  AtomicFile f(p.string(), "checkpoint");
  f.write(bytes.data(), bytes.size());
  f.commit();
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) ZT_THROW("checkpoint: cannot open '", p.string(), "'");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

const Tensor& SavedCheckpoint::get(const std::string& name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return t.tensor;
  ZT_THROW("checkpoint '", path, "' has no tensor '", name, "'");
}

std::string save_checkpoint(const std::string& dir, int64_t step, const nlohmann::json& meta_in,
                            const std::vector<NamedTensor>& tensors) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  const fs::path root(dir), final_dir = root / name, tmp_dir = root / (std::string(name) + ".tmp");
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) ZT_THROW("checkpoint: cannot create directory '", root.string(), "': ", ec.message());
  // Leftovers of a crashed save (a step_*.tmp directory, latest.tmp) are never loaded: remove them.
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.path().extension() == ".tmp") fs::remove_all(e.path(), ec);
  // The directory `latest` names is the one thing a save must never touch.
  if (fs::exists(root / "latest") && fs::equivalent(latest_checkpoint(dir), final_dir, ec))
    ZT_THROW("checkpoint: refusing to overwrite '", final_dir.string(), "', the checkpoint '",
             (root / "latest").string(), "' names");
  fs::create_directories(tmp_dir, ec);
  if (ec) ZT_THROW("checkpoint: cannot create directory '", tmp_dir.string(), "': ", ec.message());

  // The rank file: every tensor's bytes back to back, checksummed as written.
  nlohmann::json list = nlohmann::json::array();
  uint64_t hash = fnv1a64(nullptr, 0);
  int64_t offset = 0;
  {
    AtomicFile f((tmp_dir / kRankFile).string(), "checkpoint");
    for (const NamedTensor& nt : tensors) {
      Tensor t = nt.tensor.contiguous();
      f.write(t.raw(), t.nbytes());
      hash = fnv1a64(t.raw(), t.nbytes(), hash);
      list.push_back({{"name", nt.name}, {"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"offset", offset}});
      offset += static_cast<int64_t>(t.nbytes());
    }
    f.commit();
  }
  nlohmann::json meta = meta_in;
  meta["format"] = kFormat;
  meta["version"] = kVersion;
  meta["world_size"] = 1;
  meta["step"] = step;
  meta["files"] = {{{"name", kRankFile}, {"bytes", offset}, {"fnv1a64", hex64(hash)}}};
  meta["tensors"] = list;
  write_file(tmp_dir / "meta.json", meta.dump(2) + "\n");

  // Publish: the step directory, then `latest`. Each rename is atomic; fsync makes it durable.
  fs::remove_all(final_dir, ec);
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) ZT_THROW("checkpoint: cannot rename '", tmp_dir.string(), "' to '", final_dir.string(), "': ", ec.message());
  fsync_directory(root.string(), "checkpoint");
  write_file(root / "latest", std::string(name) + "\n");  // latest.tmp, fsync, rename, fsync dir
  return final_dir.string();
}

std::string latest_checkpoint(const std::string& dir) {
  const fs::path p = fs::path(dir) / "latest";
  if (!fs::exists(p)) ZT_THROW("checkpoint: no '", p.string(), "' (no checkpoint has been saved in '", dir, "')");
  std::string name = read_text(p);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  if (name.rfind("step_", 0) != 0 || name.find_first_not_of("0123456789", 5) != std::string::npos || name.size() == 5)
    ZT_THROW("checkpoint: '", p.string(), "' does not name a step directory (holds '", name, "')");
  const fs::path step = fs::path(dir) / name;
  if (!fs::is_directory(step)) ZT_THROW("checkpoint: '", p.string(), "' names '", name, "', which does not exist");
  return step.string();
}

namespace {
// Reads the rank file that meta.json describes into ck.tensors (see load_checkpoint).
void read_rank_file(SavedCheckpoint& ck) {
  const std::string& path = ck.path;
  const nlohmann::json& file = ck.meta.at("files").at(0);
  const fs::path rank_path = fs::path(path) / file.at("name").get<std::string>();
  if (!fs::exists(rank_path)) ZT_THROW("checkpoint: rank file '", rank_path.string(), "' is missing");
  const int64_t expect = file.at("bytes").get<int64_t>();
  const auto size = static_cast<int64_t>(fs::file_size(rank_path));
  if (size != expect)
    ZT_THROW("checkpoint: rank file '", rank_path.string(), "' holds ", size, " bytes, meta.json says ", expect,
             " (truncated or replaced)");

  // One pass: each tensor is read straight into its own buffer and hashed on the way, so loading
  // needs the state's size once (no second copy of the file). The tensors cover the file back to
  // back in order (as save_checkpoint writes it); the checksum is judged before any is returned.
  std::ifstream in(rank_path, std::ios::binary);
  if (!in) ZT_THROW("checkpoint: cannot open rank file '", rank_path.string(), "'");
  uint64_t hash = fnv1a64(nullptr, 0);
  int64_t pos = 0;
  for (const nlohmann::json& t : ck.meta.at("tensors")) {
    const std::string name = t.at("name").get<std::string>();
    Tensor x = Tensor::empty(t.at("shape").get<Shape>(), dtype_from_name(t.at("dtype").get<std::string>()),
                             Category::workspace);
    if (t.at("offset").get<int64_t>() != pos || pos + static_cast<int64_t>(x.nbytes()) > expect)
      ZT_THROW("checkpoint: tensor '", name, "' does not follow the previous one inside '", rank_path.string(), "'");
    in.read(static_cast<char*>(x.raw()), static_cast<std::streamsize>(x.nbytes()));
    if (!in) ZT_THROW("checkpoint: reading tensor '", name, "' from '", rank_path.string(), "' failed");
    hash = fnv1a64(x.raw(), x.nbytes(), hash);
    pos += static_cast<int64_t>(x.nbytes());
    ck.tensors.push_back({name, x});
  }
  if (pos != expect)
    ZT_THROW("checkpoint: the tensors of meta.json cover ", pos, " bytes of '", rank_path.string(), "', which holds ", expect);
  const std::string sum = hex64(hash);
  if (sum != file.at("fnv1a64").get<std::string>())
    ZT_THROW("checkpoint: rank file '", rank_path.string(), "' is corrupted: FNV-1a 64 checksum ", sum,
             ", meta.json says ", file.at("fnv1a64").get<std::string>());
}
}  // namespace

SavedCheckpoint load_checkpoint(const std::string& path_in) {
  std::string path = path_in;
  if (fs::exists(fs::path(path) / "latest")) path = latest_checkpoint(path);
  const fs::path meta_path = fs::path(path) / "meta.json";
  if (!fs::exists(meta_path)) ZT_THROW("checkpoint: '", path, "' is not a checkpoint directory (no meta.json)");
  SavedCheckpoint ck;
  ck.path = path;
  try {
    ck.meta = nlohmann::json::parse(read_text(meta_path));
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint: '", meta_path.string(), "' is not valid JSON: ", e.what());
  }
  if (ck.meta.value("format", "") != kFormat)
    ZT_THROW("checkpoint: '", meta_path.string(), "' has format '", ck.meta.value("format", "(missing)"),
             "', expected '", kFormat, "'");
  if (ck.meta.value("version", -1) != kVersion)
    ZT_THROW("checkpoint: '", meta_path.string(), "' has version ", ck.meta.value("version", -1), ", this build reads ", kVersion);
  if (ck.meta.value("world_size", -1) != 1)
    ZT_THROW("checkpoint: '", path, "' was saved by ", ck.meta.value("world_size", -1),
             " ranks; this single-process build loads world_size 1 only");

  try {
    read_rank_file(ck);
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint '", path, "': meta.json lacks or mistypes a field: ", e.what());
  }
  return ck;
}

}  // namespace zt
