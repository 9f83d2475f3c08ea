#include "zero/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28)
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>

#include "core/file_io.h"

namespace fs = std::filesystem;

namespace zt {

namespace {

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string step_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

std::string rank_file_name(int r) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05d.bin", r);
  return name;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) ZT_THROW("checkpoint: cannot open '", p.string(), "'");
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Runs fn on this rank; then every rank learns whether any rank failed (one all-reduce), so a
// failure never leaves the others waiting in the next collective. This rank's own error is
// rethrown as is; a rank that succeeded throws naming how many others failed.
template <class F>
void on_every_rank(ProcessGroup& g, const std::string& what, F&& fn) {
  std::exception_ptr err;
  try {
    fn();
  } catch (...) {
    err = std::current_exception();
  }
  const double failed = g.all_reduce_sum(err ? 1.0 : 0.0);
  if (err) std::rethrow_exception(err);
  if (failed > 0) ZT_THROW(what, ": failed on ", static_cast<int64_t>(failed), " other rank(s); see their errors");
}

// The geometry of one checkpoint's rank files (all files share it).
struct FileLayout {
  struct U {
    std::string name;
    int64_t numel = 0, padded = 0, S = 0;
  };
  int N = 1;
  std::vector<U> units;
  std::vector<std::string> tensors;
  std::vector<DType> dtypes;       // per tensor
  std::vector<int64_t> unit_base;  // byte offset of each unit's block in every file
  int64_t file_bytes = 0;

  void finish() {
    int64_t elem_bytes = 0;  // bytes of one element across all tensors
    for (DType d : dtypes) elem_bytes += static_cast<int64_t>(dtype_size(d));
    unit_base.clear();
    file_bytes = 0;
    for (U& u : units) {
      unit_base.push_back(file_bytes);
      file_bytes += u.S * elem_bytes;
    }
  }
  // Byte offset in every rank file of element `local` of tensor t of unit u.
  int64_t offset(size_t u, size_t t, int64_t local) const {
    int64_t off = unit_base[u];
    for (size_t i = 0; i < t; ++i) off += units[u].S * static_cast<int64_t>(dtype_size(dtypes[i]));
    return off + local * static_cast<int64_t>(dtype_size(dtypes[t]));
  }
  int tensor_index(const std::string& n) const {
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i] == n) return static_cast<int>(i);
    return -1;
  }
};

// The layout of this rank's shards; checks that they are consistent (same tensors and dtypes on
// every unit, S = padded / N elements each).
FileLayout layout_of(const std::vector<UnitShard>& shards, int N, const char* what) {
  FileLayout L;
  L.N = N;
  for (size_t i = 0; i < shards.size(); ++i) {
    const UnitShard& s = shards[i];
    ZT_CHECK(s.padded_numel % N == 0 && s.numel <= s.padded_numel && s.numel >= 0, what, ": unit '", s.unit,
             "' has numel ", s.numel, " and padded_numel ", s.padded_numel, ", not a multiple of the world size ", N);
    L.units.push_back({s.unit, s.numel, s.padded_numel, s.padded_numel / N});
    if (i == 0) {
      for (const auto& [name, t] : s.tensors) {
        ZT_CHECK(L.tensor_index(name) < 0, what, ": unit '", s.unit, "' lists tensor '", name, "' twice");
        L.tensors.push_back(name);
        L.dtypes.push_back(t.dtype());
      }
    }
    ZT_CHECK(s.tensors.size() == L.tensors.size(), what, ": unit '", s.unit, "' has ", s.tensors.size(),
             " tensors, unit '", shards[0].unit, "' has ", L.tensors.size());
    for (size_t t = 0; t < s.tensors.size(); ++t) {
      const auto& [name, x] = s.tensors[t];
      ZT_CHECK(name == L.tensors[t] && x.dtype() == L.dtypes[t], what, ": unit '", s.unit, "' tensor ", t, " is '",
               name, "' ", dtype_name(x.dtype()), ", unit '", shards[0].unit, "' has '", L.tensors[t], "' ",
               dtype_name(L.dtypes[t]));
      ZT_CHECK(x.defined() && x.numel() == s.padded_numel / N, what, ": unit '", s.unit, "' tensor '", name, "' has ",
               x.defined() ? x.str() : std::string("undefined"), ", expected ", s.padded_numel / N,
               " elements (padded_numel / world size)");
    }
  }
  L.finish();
  return L;
}

// Writes this rank's file; returns its FNV-1a 64.
uint64_t write_rank_file(const std::string& file, const std::vector<UnitShard>& shards) {
  AtomicFile f(file, "checkpoint rank file");
  uint64_t hash = fnv1a64(nullptr, 0);
  for (const UnitShard& s : shards)
    for (const auto& [name, t] : s.tensors) {
      Tensor c = t.to(Device::cpu(), Category::workspace);  // a GPU shard is copied to the host
      f.write(c.raw(), c.nbytes());
      hash = fnv1a64(c.raw(), c.nbytes(), hash);
    }
  f.commit();
  return hash;
}

// Makes `tmp` the step directory `final_dir`. An existing final_dir is swapped out atomically
// (renameat2 RENAME_EXCHANGE) so `latest`, which may name it, never points at nothing; where the
// file system cannot exchange, an existing final_dir that `latest` names is refused.
void publish_step_dir(const fs::path& root, const fs::path& tmp, const fs::path& final_dir) {
  std::error_code ec;
  if (!fs::exists(final_dir)) {
    fs::rename(tmp, final_dir, ec);
    if (ec) ZT_THROW("checkpoint: cannot rename '", tmp.string(), "' to '", final_dir.string(), "': ", ec.message());
    return;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    fsync_directory(root.string(), "checkpoint");
    fs::remove_all(tmp, ec);  // now the old step directory
    return;
  }
  const std::string why = errno_message();
  const fs::path latest = root / "latest";
  if (fs::exists(latest)) {
    std::string name = read_text(latest);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    if (name == final_dir.filename().string())
      ZT_THROW("checkpoint: '", final_dir.string(), "' exists and '", latest.string(),
               "' names it; this file system cannot swap directories atomically (", why,
               "), so it is not replaced: save into another directory or remove it");
  }
  fs::remove_all(final_dir, ec);
  if (ec) ZT_THROW("checkpoint: cannot remove the old '", final_dir.string(), "': ", ec.message());
  fs::rename(tmp, final_dir, ec);
  if (ec) ZT_THROW("checkpoint: cannot rename '", tmp.string(), "' to '", final_dir.string(), "': ", ec.message());
}

// The rank files of one checkpoint, opened on first use; each is verified whole (size and
// FNV-1a 64 against meta.json) before any byte of it is trusted.
class RankFiles {
 public:
  RankFiles(const ShardedMeta& m, const FileLayout& L) : m_(m), L_(L), fds_(L.N, -1) {}
  ~RankFiles() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  RankFiles(const RankFiles&) = delete;
  RankFiles& operator=(const RankFiles&) = delete;

  // n bytes at `offset` of rank q's file into dst.
  void read(int q, int64_t offset, void* dst, int64_t n) {
    const int fd = open(q);
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t r = ::pread(fd, p, static_cast<size_t>(n), offset);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) ZT_THROW("checkpoint: reading '", path(q), "' at byte ", offset, " failed: ",
                           r < 0 ? errno_message() : std::string("unexpected end of file"));
      p += r;
      offset += r;
      n -= r;
    }
  }

 private:
  std::string path(int q) const {
    return (fs::path(m_.dir) / m_.meta.at("files").at(q).at("name").get<std::string>()).string();
  }
  int open(int q) {
    if (fds_[q] >= 0) return fds_[q];
    const std::string p = path(q);
    const nlohmann::json& f = m_.meta.at("files").at(q);
    if (!fs::exists(p)) ZT_THROW("checkpoint: rank file '", p, "' is missing (rank ", q, " of ", L_.N, ")");
    const auto size = static_cast<int64_t>(fs::file_size(p));
    if (size != L_.file_bytes)
      ZT_THROW("checkpoint: rank file '", p, "' holds ", size, " bytes, meta.json says ", L_.file_bytes,
               " (truncated or replaced)");
    const std::string sum = hex64(checkpoint_file_hash(p));
    if (sum != f.at("fnv1a64").get<std::string>())
      ZT_THROW("checkpoint: rank file '", p, "' is corrupted: FNV-1a 64 checksum ", sum, ", meta.json says ",
               f.at("fnv1a64").get<std::string>());
    fds_[q] = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fds_[q] < 0) ZT_THROW("checkpoint: cannot open rank file '", p, "': ", errno_message());
    return fds_[q];
  }

  const ShardedMeta& m_;
  const FileLayout& L_;
  std::vector<int> fds_;
};

// Elements [begin, begin + count) of tensor t of unit u's flat space, from whichever rank files
// hold them, into dst (count elements of the tensor's dtype). Elements >= numel are zero.
void read_elements(RankFiles& files, const FileLayout& L, size_t u, size_t t, int64_t begin, int64_t count,
                   void* dst) {
  const FileLayout::U& U = L.units[u];
  const auto es = static_cast<int64_t>(dtype_size(L.dtypes[t]));
  char* out = static_cast<char*>(dst);
  const int64_t real_end = std::min(begin + count, U.numel);
  int64_t e = begin;
  while (e < real_end) {
    const int q = static_cast<int>(e / U.S);  // the old rank holding element e
    const int64_t upto = std::min(real_end, (q + 1) * U.S);
    files.read(q, L.offset(u, t, e - q * U.S), out + (e - begin) * es, (upto - e) * es);
    e = upto;
  }
  const int64_t filled = std::max<int64_t>(0, real_end - begin);
  std::memset(out + filled * es, 0, static_cast<size_t>((count - filled) * es));
}

// The checkpoint's FileLayout from its (already format-checked) meta.json.
FileLayout layout_of(const ShardedMeta& m) {
  const nlohmann::json& j = m.meta;
  const std::string where = "checkpoint '" + m.dir + "': meta.json";
  FileLayout L;
  L.N = j.at("world_size").get<int>();
  if (L.N < 1) ZT_THROW(where, " has world_size ", L.N, ", expected >= 1");
  for (const nlohmann::json& t : j.at("tensors")) {
    const std::string name = t.get<std::string>();
    if (!j.at("dtype").contains(name)) ZT_THROW(where, " gives no dtype for tensor '", name, "'");
    if (L.tensor_index(name) >= 0) ZT_THROW(where, " lists tensor '", name, "' twice");
    L.tensors.push_back(name);
    L.dtypes.push_back(dtype_from_name(j.at("dtype").at(name).get<std::string>()));
  }
  for (const nlohmann::json& u : j.at("units")) {
    FileLayout::U U{u.at("name").get<std::string>(), u.at("numel").get<int64_t>(), u.at("padded_numel").get<int64_t>(), 0};
    if (U.numel < 0 || U.numel > U.padded || U.padded % L.N != 0)
      ZT_THROW(where, " unit '", U.name, "' has numel ", U.numel, " and padded_numel ", U.padded,
               ", which world_size ", L.N, " cannot shard");
    U.S = U.padded / L.N;
    L.units.push_back(U);
  }
  const nlohmann::json& files = j.at("files");
  if (static_cast<int>(files.size()) != L.N)
    ZT_THROW(where, " lists ", files.size(), " rank files for world_size ", L.N);
  L.finish();
  for (int q = 0; q < L.N; ++q) {
    const std::string name = files.at(q).at("name").get<std::string>();
    if (files.at(q).at("rank").get<int>() != q || name.empty() || name.find('/') != std::string::npos)
      ZT_THROW(where, " files[", q, "] is rank ", files.at(q).at("rank").dump(), " '", name,
               "', expected rank ", q, " with a plain file name");
    if (files.at(q).at("bytes").get<int64_t>() != L.file_bytes)
      ZT_THROW(where, " says rank file '", name, "' holds ", files.at(q).at("bytes").get<int64_t>(),
               " bytes, but its units and tensors need ", L.file_bytes);
    files.at(q).at("fnv1a64").get<std::string>();
  }
  return L;
}

}  // namespace

nlohmann::json units_meta(Model& m) {
  nlohmann::json units = nlohmann::json::array();
  for (Unit* u : m.units()) {
    const ParamSet& ps = u->params();
    nlohmann::json params = nlohmann::json::array();
    for (const ParamInfo& p : ps.infos())
      params.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"decay", p.decay}});
    units.push_back({{"name", ps.unit_name()}, {"numel", ps.numel()}, {"padded_numel", ps.padded_numel()},
                     {"params", params}});
  }
  return units;
}

uint64_t checkpoint_file_hash(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ZT_THROW("checkpoint: cannot open '", file, "': ", errno_message());
  std::vector<char> buf(size_t{8} << 20);
  uint64_t h = fnv1a64(nullptr, 0);
  for (;;) {
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const std::string e = errno_message();
      ::close(fd);
      ZT_THROW("checkpoint: reading '", file, "' failed: ", e);
    }
    if (r == 0) break;
    h = fnv1a64(buf.data(), static_cast<size_t>(r), h);
  }
  ::close(fd);
  return h;
}

std::string save_sharded_checkpoint(ProcessGroup& g, const std::string& dir, int64_t step,
                                    const nlohmann::json& caller_meta, const std::vector<UnitShard>& shards) {
  const int N = g.size(), r = g.rank();
  const std::string name = step_name(step);
  const fs::path root(dir), final_dir = root / name, tmp_dir = root / (name + ".tmp");
  const std::string what = "checkpoint save '" + final_dir.string() + "'";

  FileLayout L;
  on_every_rank(g, what, [&] {
    L = layout_of(shards, N, "save_sharded_checkpoint");
    if (r != 0) return;
    if (!caller_meta.is_object() && !caller_meta.is_null())
      ZT_THROW(what, ": the caller's meta must be a JSON object, got ", caller_meta.type_name());
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) ZT_THROW("checkpoint: cannot create directory '", root.string(), "': ", ec.message());
    // Leftovers of crashed saves (step_*.tmp/, latest.tmp) are never loaded: remove them.
    for (const auto& e : fs::directory_iterator(root, ec))
      if (e.path().extension() == ".tmp" && e.path().filename().string().rfind("step_", 0) == 0)
        fs::remove_all(e.path(), ec);
    fs::create_directories(tmp_dir, ec);
    if (ec) ZT_THROW("checkpoint: cannot create directory '", tmp_dir.string(), "': ", ec.message());
  });

  // Every rank writes and fsyncs its file; (ok, bytes, hash halves) reach every rank. Each
  // 32-bit half of the hash and the byte count (< 2^53) are exact in a double.
  uint64_t hash = 0;
  std::exception_ptr err;
  try {
    hash = write_rank_file((tmp_dir / rank_file_name(r)).string(), shards);
  } catch (...) {
    err = std::current_exception();
  }
  Tensor mine = Tensor::from_vector({err ? 0.0 : 1.0, static_cast<double>(L.file_bytes),
                                     static_cast<double>(hash >> 32), static_cast<double>(hash & 0xffffffffull)},
                                    {4}, DType::f64, Category::workspace);
  Tensor all = Tensor::empty({4 * N}, DType::f64, Category::workspace);
  g.all_gather(mine, all);
  const Tensor all_host = all.to(Device::cpu(), Category::workspace);
  const double* a = all_host.data<double>();
  if (err) std::rethrow_exception(err);
  for (int q = 0; q < N; ++q)
    if (a[4 * q] != 1.0) ZT_THROW(what, ": rank ", q, " could not write its file; see its error");

  on_every_rank(g, what, [&] {
    if (r != 0) return;
    nlohmann::json meta = caller_meta.is_null() ? nlohmann::json::object() : caller_meta;
    nlohmann::json units = nlohmann::json::array();
    const bool has_layout = meta.contains("units");
    if (has_layout && (!caller_meta.at("units").is_array() || caller_meta.at("units").size() != L.units.size()))
      ZT_THROW(what, ": the caller's \"units\" must be an array of ", L.units.size(), " units (one per shard)");
    for (size_t u = 0; u < L.units.size(); ++u) {
      nlohmann::json ju = {{"name", L.units[u].name}, {"numel", L.units[u].numel}, {"padded_numel", L.units[u].padded}};
      if (has_layout) {
        const nlohmann::json& cu = caller_meta.at("units").at(u);
        if (cu.value("name", std::string()) != L.units[u].name || cu.value("numel", L.units[u].numel) != L.units[u].numel)
          ZT_THROW(what, ": the caller's units[", u, "] is ", cu.value("name", std::string("(no name)")), " with ",
                   cu.value("numel", int64_t{-1}), " parameters, the shards have '", L.units[u].name, "' with ",
                   L.units[u].numel);
        if (cu.contains("params")) ju["params"] = cu.at("params");
      }
      units.push_back(ju);
    }
    nlohmann::json dtypes = nlohmann::json::object(), files = nlohmann::json::array();
    for (size_t t = 0; t < L.tensors.size(); ++t) dtypes[L.tensors[t]] = dtype_name(L.dtypes[t]);
    for (int q = 0; q < N; ++q) {
      if (static_cast<int64_t>(a[4 * q + 1]) != L.file_bytes)
        ZT_THROW(what, ": rank ", q, " wrote ", static_cast<int64_t>(a[4 * q + 1]), " bytes, rank 0 expected ",
                 L.file_bytes, " (the ranks' unit layouts differ)");
      const uint64_t h = (static_cast<uint64_t>(a[4 * q + 2]) << 32) | static_cast<uint64_t>(a[4 * q + 3]);
      files.push_back({{"rank", q}, {"name", rank_file_name(q)}, {"bytes", L.file_bytes}, {"fnv1a64", hex64(h)}});
    }
    meta["format"] = kShardedCheckpointFormat;
    meta["version"] = kShardedCheckpointVersion;
    meta["world_size"] = N;
    meta["step"] = step;
    meta["units"] = units;
    meta["tensors"] = L.tensors;
    meta["dtype"] = dtypes;
    meta["files"] = files;
    {
      AtomicFile f((tmp_dir / "meta.json").string(), "checkpoint meta.json");
      const std::string text = meta.dump(2) + "\n";
      f.write(text.data(), text.size());
      f.commit();  // fsyncs step_X.tmp/, which also holds every rank file
    }
    // Publish: the step directory, then `latest`. Each rename is atomic; fsync makes it durable.
    publish_step_dir(root, tmp_dir, final_dir);
    fsync_directory(root.string(), "checkpoint");
    AtomicFile latest((root / "latest").string(), "checkpoint latest");
    const std::string line = name + "\n";
    latest.write(line.data(), line.size());
    latest.commit();
  });
  return final_dir.string();
}

ShardedMeta read_sharded_meta(const std::string& path) {
  ShardedMeta m;
  m.dir = path;
  const fs::path latest = fs::path(path) / "latest";
  if (fs::exists(latest)) {
    std::string name = read_text(latest);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
    if (name.rfind("step_", 0) != 0 || name.size() == 5 || name.find_first_not_of("0123456789", 5) != std::string::npos)
      ZT_THROW("checkpoint: '", latest.string(), "' does not name a step directory (holds '", name, "')");
    m.dir = (fs::path(path) / name).string();
    if (!fs::is_directory(m.dir)) ZT_THROW("checkpoint: '", latest.string(), "' names '", name, "', which does not exist");
  }
  const fs::path meta_path = fs::path(m.dir) / "meta.json";
  if (!fs::exists(meta_path))
    ZT_THROW("checkpoint: '", m.dir, "' is not a checkpoint directory (no meta.json, no latest)");
  try {
    m.meta = nlohmann::json::parse(read_text(meta_path));
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint: '", meta_path.string(), "' is not valid JSON: ", e.what());
  }
  if (!m.meta.is_object() || m.meta.value("format", "") != kShardedCheckpointFormat)
    ZT_THROW("checkpoint: '", meta_path.string(), "' has format '",
             m.meta.is_object() ? m.meta.value("format", "(missing)") : "(not an object)", "', expected '",
             kShardedCheckpointFormat, "'");
  if (m.meta.value("version", -1) != kShardedCheckpointVersion)
    ZT_THROW("checkpoint: '", meta_path.string(), "' has version ", m.meta.value("version", -1), ", this build reads ",
             kShardedCheckpointVersion);
  try {
    layout_of(m);  // every field the files need is present and consistent
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint: '", meta_path.string(), "' lacks or mistypes a field: ", e.what());
  }
  return m;
}

nlohmann::json load_sharded_checkpoint(ProcessGroup& g, const std::string& path, std::vector<UnitShard>& shards) {
  const int N = g.size(), r = g.rank();
  ShardedMeta m;
  on_every_rank(g, "checkpoint load '" + path + "'", [&] {
    m = read_sharded_meta(path);
    const FileLayout L = layout_of(m);
    const std::string where = "checkpoint '" + m.dir + "'";
    if (L.units.size() != shards.size())
      ZT_THROW(where, " holds ", L.units.size(), " units, the model has ", shards.size());
    for (size_t u = 0; u < shards.size(); ++u) {
      const UnitShard& s = shards[u];
      if (L.units[u].name != s.unit || L.units[u].numel != s.numel)
        ZT_THROW(where, " holds unit '", L.units[u].name, "' with ", L.units[u].numel, " parameters, the model has '",
                 s.unit, "' with ", s.numel, " (a checkpoint of another model?)");
      ZT_CHECK(s.padded_numel % N == 0, "load_sharded_checkpoint: unit '", s.unit, "' padded_numel ", s.padded_numel,
               " is not a multiple of the world size ", N);
    }
    RankFiles files(m, L);
    for (size_t u = 0; u < shards.size(); ++u) {
      const int64_t S = shards[u].padded_numel / N;
      for (const auto& [name, dst] : shards[u].tensors) {
        const int t = L.tensor_index(name);
        if (t < 0) {
          std::string have;
          for (const std::string& n : L.tensors) have += (have.empty() ? "" : ", ") + n;
          ZT_THROW(where, " has no tensor '", name, "' (it holds: ", have, ")");
        }
        if (dst.dtype() != L.dtypes[t])
          ZT_THROW(where, " holds tensor '", name, "' as ", dtype_name(L.dtypes[t]), ", the model's is ",
                   dtype_name(dst.dtype()));
        ZT_CHECK(dst.numel() == S, "load_sharded_checkpoint: unit '", shards[u].unit, "' tensor '", name, "' has ",
                 dst.str(), ", expected ", S, " elements");
        const bool direct = dst.is_contiguous() && dst.device().is_cpu();  // else through a host buffer
        Tensor buf = direct ? dst : Tensor::empty({S}, dst.dtype(), Category::workspace, cpu_allocator());
        read_elements(files, L, u, static_cast<size_t>(t), r * S, S, buf.raw());
        if (!direct) {
          Tensor d = dst;
          d.copy_(buf.view(dst.shape()));
        }
      }
    }
  });
  return m.meta;
}

std::vector<ConsolidatedUnit> consolidate_params(const std::string& path, const std::string& tensor) {
  const ShardedMeta m = read_sharded_meta(path);
  const FileLayout L = layout_of(m);
  const int t = L.tensor_index(tensor);
  if (t < 0) ZT_THROW("checkpoint '", m.dir, "' has no tensor '", tensor, "'");
  RankFiles files(m, L);
  std::vector<ConsolidatedUnit> out;
  for (size_t u = 0; u < L.units.size(); ++u) {
    Tensor raw = Tensor::empty({L.units[u].numel}, L.dtypes[t], Category::workspace, cpu_allocator());
    read_elements(files, L, u, static_cast<size_t>(t), 0, L.units[u].numel, raw.raw());
    const nlohmann::json& ju = m.meta.at("units").at(u);
    out.push_back({L.units[u].name, L.units[u].numel, raw.to(DType::f32),
                   ju.contains("params") ? ju.at("params") : nlohmann::json()});
  }
  return out;
}

}  // namespace zt
