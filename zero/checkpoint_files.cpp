// defines: checkpoint_detail::{FileLayout (finish, offset, tensor_index), layout_of, RankFiles,
//          read_elements, step_name, is_step_name, latest_name, rank_file_name, read_text, hex64}
//          (zero/checkpoint_files.h): a sharded checkpoint's file layout and its verified reading.
#include "zero/checkpoint_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/checked.h"
#include "core/file_io.h"
#include "core/json.h"  // defines: json_integer

namespace zt::checkpoint_detail {

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

bool is_step_name(const std::string& name) {
  return name.rfind("step_", 0) == 0 && name.size() > 5 && name.size() <= 24 &&
         name.find_first_not_of("0123456789", 5) == std::string::npos;
}

std::string latest_name(const fs::path& root) {
  const fs::path latest = root / "latest";
  if (!fs::exists(latest)) return "";
  std::string name = read_text(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  return name;
}

// ---- FileLayout ----

void FileLayout::finish() {
  int64_t elem_bytes = 0;  // bytes of one element across all tensors
  for (DType d : dtypes) elem_bytes += static_cast<int64_t>(dtype_size(d));
  unit_base.clear();
  file_bytes = 0;
  for (U& u : units) {  // sizes from a meta.json: checked (core/checked.h)
    unit_base.push_back(file_bytes);
    file_bytes = checked_add(file_bytes, checked_mul(u.S, elem_bytes, "checkpoint unit bytes"),
                             "checkpoint rank file bytes");
  }
}

int64_t FileLayout::offset(size_t u, size_t t, int64_t local) const {
  int64_t off = unit_base[u];
  for (size_t i = 0; i < t; ++i) off += units[u].S * static_cast<int64_t>(dtype_size(dtypes[i]));
  return off + local * static_cast<int64_t>(dtype_size(dtypes[t]));
}

int FileLayout::tensor_index(const std::string& n) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i] == n) return static_cast<int>(i);
  return -1;
}

FileLayout layout_of(const std::vector<CheckpointShard>& shards, int N, int tp, const char* what) {
  FileLayout L;
  L.N = N;
  L.tp = tp;
  for (size_t i = 0; i < shards.size(); ++i) {
    const CheckpointShard& s = shards[i];
    ZT_CHECK(s.padded_numel % N == 0 && s.numel <= s.padded_numel && s.numel >= 0, what, ": unit '", s.unit,
             "' has numel ", s.numel, " and padded_numel ", s.padded_numel, ", not a multiple of the world size ", N);
    L.units.push_back({s.unit, s.numel, s.padded_numel, s.padded_numel / N, s.params});
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

// ---- RankFiles ----

RankFiles::RankFiles(const ShardedMeta& m, const FileLayout& L) : m_(m), L_(L), fds_(L.files(), -1) {}

RankFiles::~RankFiles() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

void RankFiles::read(int q, int64_t offset, void* dst, int64_t n) {
  const int fd = open(q);
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, static_cast<size_t>(n), offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      ZT_THROW("checkpoint: reading '", path(q), "' at byte ", offset,
               " failed: ", r < 0 ? errno_message() : std::string("unexpected end of file"));
    p += r;
    offset += r;
    n -= r;
  }
}

std::string RankFiles::path(int q) const {
  return (fs::path(m_.dir) / m_.meta.at("files").at(q).at("name").get<std::string>()).string();
}

int RankFiles::open(int q) {
  if (fds_[q] >= 0) return fds_[q];
  const std::string p = path(q);
  const nlohmann::json& f = m_.meta.at("files").at(q);
  if (!fs::exists(p)) ZT_THROW("checkpoint: rank file '", p, "' is missing (rank ", q, " of ", L_.files(), ")");
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

// ---- Reading ----

void read_elements(RankFiles& files, const FileLayout& L, size_t u, size_t t, int64_t begin, int64_t count, void* dst,
                   int slice) {
  const FileLayout::U& U = L.units[u];
  const auto es = static_cast<int64_t>(dtype_size(L.dtypes[t]));
  char* out = static_cast<char*>(dst);
  const int64_t real_end = std::min(begin + count, U.numel);
  int64_t e = begin;
  while (e < real_end) {
    const int d = static_cast<int>(e / U.S);  // the old data shard holding element e
    const int64_t upto = std::min(real_end, (d + 1) * U.S);
    files.read(d * L.tp + slice, L.offset(u, t, e - d * U.S), out + (e - begin) * es, (upto - e) * es);
    e = upto;
  }
  const int64_t filled = std::max<int64_t>(0, real_end - begin);
  std::memset(out + filled * es, 0, static_cast<size_t>((count - filled) * es));
}

void read_elements_as(RankFiles& files, const FileLayout& L, size_t u, size_t t, const std::vector<ParamInfo>& target,
                      int64_t begin, int64_t count, void* dst) {
  const std::vector<ParamInfo>& src = L.units[u].params;
  const auto es = static_cast<int64_t>(dtype_size(L.dtypes[t]));
  char* out = static_cast<char*>(dst);
  std::memset(out, 0, static_cast<size_t>(count * es));
  const int64_t end = begin + count;
  for (size_t i = 0; i < target.size(); ++i) {
    const ParamInfo &p = target[i], &q = src[i];
    for (int64_t k = std::max(begin, p.offset) - p.offset, k1 = std::min(end, p.offset + p.numel) - p.offset; k < k1;) {
      // element k of the target's part -> its place g in the whole tensor -> where the checkpoint keeps g
      const int64_t g = p.slice.full_index(p.shape, k);
      const TensorSlice::Place at = q.slice.locate(q.shape, g);
      const int64_t len = std::min({k1 - k, p.slice.run_length(p.shape, k), at.run});
      // piece at.part is in the file of the first tensor rank holding it
      read_elements(files, L, u, t, q.offset + at.index, len, out + (p.offset + k - begin) * es,
                    static_cast<int>(at.part * q.slice.replicas));
      k += len;
    }
  }
}

std::string same_parameters(const FileLayout& L, size_t u, const std::vector<ParamInfo>& target) {
  const std::vector<ParamInfo>& src = L.units[u].params;
  if (src.size() != target.size())
    return "unit '" + L.units[u].name + "' holds " + std::to_string(src.size()) + " parameters, the model's " +
           std::to_string(target.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const Shape a = src[i].slice.full_shape(src[i].shape), b = target[i].slice.full_shape(target[i].shape);
    if (src[i].name != target[i].name || a != b)
      return "parameter " + std::to_string(i) + " of unit '" + L.units[u].name + "' is '" + src[i].name + "' " +
             shape_str(a) + ", the model's '" + target[i].name + "' " + shape_str(b);
  }
  return "";
}

std::vector<ParamInfo> whole_parameters(const std::vector<ParamInfo>& params) {
  std::vector<ParamInfo> out;
  int64_t offset = 0;
  for (const ParamInfo& p : params) {
    ParamInfo w = p;
    w.shape = p.slice.full_shape(p.shape);
    w.numel = shape_numel(w.shape);
    w.offset = offset;
    w.slice = {};
    offset += w.numel;
    out.push_back(std::move(w));
  }
  return out;
}

namespace {
// A unit's "params" from meta.json: name, shape, offset, decay, and for a tensor-parallel slice
// {"dim", "groups", "parts"} (which part a rank file holds is its place in the grid).
std::vector<ParamInfo> params_of(const nlohmann::json& ps, const std::string& where) {
  std::vector<ParamInfo> out;
  for (const nlohmann::json& p : ps) {
    ParamInfo info;
    info.name = p.at("name").get<std::string>();
    const std::string pw = where + " parameter '" + info.name + "'";
    info.shape = json_shape(p.at("shape"), pw + " shape");
    info.numel = shape_numel(info.shape);
    info.offset = json_integer(p.at("offset"), pw + " offset", 0);
    info.decay = p.value("decay", true);
    if (p.contains("slice")) {
      const nlohmann::json& t = p.at("slice");
      info.slice.dim = static_cast<int>(
          json_integer(t.at("dim"), pw + " slice.dim", 0, int64_t(info.shape.size()) - 1));
      info.slice.groups = json_integer(t.at("groups"), pw + " slice.groups", 1);
      info.slice.parts = json_integer(t.at("parts"), pw + " slice.parts", 1);
      info.slice.replicas = t.contains("replicas") ? json_integer(t.at("replicas"), pw + " slice.replicas", 1) : 1;
      if (info.shape[static_cast<size_t>(info.slice.dim)] % info.slice.groups != 0)
        ZT_THROW(pw, " slice: ", info.slice.groups, " blocks do not divide dim ", info.slice.dim, " of ",
                 shape_str(info.shape));
    }
    out.push_back(std::move(info));
  }
  return out;
}
}  // namespace

FileLayout layout_of(const ShardedMeta& m) {
  const nlohmann::json& j = m.meta;
  const std::string where = "checkpoint '" + m.dir + "': meta.json";
  FileLayout L;
  // Every integer through json_integer (core/json.h): a float where an integer belongs is refused.
  const int W = static_cast<int>(json_integer(j.at("world_size"), where + " world_size", 1, INT32_MAX));
  L.tp = j.contains("tensor_parallel_size")
             ? static_cast<int>(json_integer(j.at("tensor_parallel_size"), where + " tensor_parallel_size", 1, W))
             : 1;
  if (W % L.tp != 0) ZT_THROW(where, " world_size ", W, " is not a multiple of tensor_parallel_size ", L.tp);
  L.N = W / L.tp;
  for (const nlohmann::json& t : j.at("tensors")) {
    const std::string name = t.get<std::string>();
    if (!j.at("dtype").contains(name)) ZT_THROW(where, " gives no dtype for tensor '", name, "'");
    if (L.tensor_index(name) >= 0) ZT_THROW(where, " lists tensor '", name, "' twice");
    L.tensors.push_back(name);
    L.dtypes.push_back(dtype_from_name(j.at("dtype").at(name).get<std::string>()));
  }
  for (const nlohmann::json& u : j.at("units")) {
    const std::string uw = where + " unit '" + u.at("name").get<std::string>() + "'";
    FileLayout::U U{u.at("name").get<std::string>(),
                    json_integer(u.at("numel"), uw + " numel", 0),
                    json_integer(u.at("padded_numel"), uw + " padded_numel", 0),
                    0,
                    {}};
    if (U.numel < 0 || U.numel > U.padded || U.padded % L.N != 0)
      ZT_THROW(where, " unit '", U.name, "' has numel ", U.numel, " and padded_numel ", U.padded, ", which world_size ",
               L.N, " cannot shard");
    U.S = U.padded / L.N;
    if (u.contains("params")) U.params = params_of(u.at("params"), uw);
    if (L.tp > 1 && U.params.empty())
      ZT_THROW(uw, " gives no \"params\": a tensor-parallel checkpoint needs them to place its slices");
    L.units.push_back(U);
  }
  const nlohmann::json& files = j.at("files");
  if (static_cast<int>(files.size()) != W) ZT_THROW(where, " lists ", files.size(), " rank files for world_size ", W);
  L.finish();
  for (int q = 0; q < W; ++q) {
    const std::string name = files.at(q).at("name").get<std::string>();
    if (json_integer(files.at(q).at("rank"), where + " files[" + std::to_string(q) + "].rank") != q || name.empty() ||
        name.find('/') != std::string::npos)
      ZT_THROW(where, " files[", q, "] is rank ", files.at(q).at("rank").dump(), " '", name, "', expected rank ", q,
               " with a plain file name");
    const int64_t bytes = json_integer(files.at(q).at("bytes"), where + " files[" + std::to_string(q) + "].bytes");
    if (bytes != L.file_bytes)
      ZT_THROW(where, " says rank file '", name, "' holds ", bytes, " bytes, but its units and tensors need ",
               L.file_bytes);
    files.at(q).at("fnv1a64").get<std::string>();
  }
  return L;
}

}  // namespace zt::checkpoint_detail
