// defines: save_sharded_checkpoint, prune_checkpoints, checkpoint_file_hash (zero/checkpoint.h): writing a
//          sharded checkpoint, rank files then meta.json, published with an atomic rename.
#include "zero/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2 (glibc >= 2.28)
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/fault_point.h"
#include "core/file_io.h"
#include "zero/checkpoint_files.h"  // defines: FileLayout, layout_of, on_every_rank, ...

namespace fs = std::filesystem;

namespace zt {

namespace {

using namespace checkpoint_detail;

// Writes this rank's file; returns its FNV-1a 64.
uint64_t write_rank_file(const std::string& file, const std::vector<CheckpointShard>& shards, int rank) {
  AtomicFile f(file, "checkpoint rank file");
  uint64_t hash = fnv1a64(nullptr, 0);
  for (size_t u = 0; u < shards.size(); ++u) {
    const CheckpointShard& s = shards[u];
    if (u == shards.size() / 2) fault_point("checkpoint.mid_file", rank);  // half the units written
    for (const auto& [name, t] : s.tensors) {
      Tensor c = t.to(Device::cpu(), Category::workspace);  // a GPU shard is copied to the host
      f.write(c.raw(), c.nbytes());
      hash = fnv1a64(c.raw(), c.nbytes(), hash);
    }
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
  if (latest_name(root) == final_dir.filename().string())
    ZT_THROW("checkpoint: '", final_dir.string(), "' exists and '", (root / "latest").string(),
             "' names it; this file system cannot swap directories atomically (", why,
             "), so it is not replaced: save into another directory or remove it");
  fs::remove_all(final_dir, ec);
  if (ec) ZT_THROW("checkpoint: cannot remove the old '", final_dir.string(), "': ", ec.message());
  fs::rename(tmp, final_dir, ec);
  if (ec) ZT_THROW("checkpoint: cannot rename '", tmp.string(), "' to '", final_dir.string(), "': ", ec.message());
}

}  // namespace

nlohmann::json units_meta(Model& m) {
  nlohmann::json units = nlohmann::json::array();
  for (Unit* u : m.units()) {
    const ParamSet& ps = u->params();
    nlohmann::json params = nlohmann::json::array();
    for (const ParamInfo& p : ps.infos()) {
      params.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"decay", p.decay}});
      if (!p.slice.whole())  // a tensor-parallel slice: how the whole tensor is cut (the part is the file's)
        params.back()["slice"] = {{"dim", p.slice.dim}, {"groups", p.slice.groups}, {"parts", p.slice.parts}};
      if (p.slice.replicas > 1) params.back()["slice"]["replicas"] = p.slice.replicas;
    }
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
                                    const nlohmann::json& caller_meta, const std::vector<CheckpointShard>& shards,
                                    int tensor_parallel_size) {
  const int W = g.size(), r = g.rank(), tp = tensor_parallel_size;
  ZT_CHECK(tp >= 1 && W % tp == 0, "save_sharded_checkpoint: tensor_parallel_size ", tp, " does not divide the ", W,
           " ranks");
  const int N = W / tp;  // data shards per slice
  const std::string name = step_name(step);
  const fs::path root(dir), final_dir = root / name, tmp_dir = root / (name + ".tmp");
  const std::string what = "checkpoint save '" + final_dir.string() + "'";

  FileLayout L;
  on_every_rank(g, what, [&] {
    L = layout_of(shards, N, tp, "save_sharded_checkpoint");
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

  // Every rank writes and fsyncs its file (a failure, such as a full disk, reaches every rank
  // with its message); then (bytes, hash halves) reach every rank. Each 32-bit half of the hash
  // and the byte count (< 2^53) are exact in a double.
  uint64_t hash = 0;
  fault_point("checkpoint.before_data", r);  // step_X.tmp/ exists, no rank file yet
  on_every_rank(g, what, [&] { hash = write_rank_file((tmp_dir / rank_file_name(r)).string(), shards, r); });
  Tensor mine = Tensor::from_vector({static_cast<double>(L.file_bytes), static_cast<double>(hash >> 32),
                                     static_cast<double>(hash & 0xffffffffull)},
                                    {3}, DType::f64, Category::workspace);
  Tensor all = Tensor::empty({3 * W}, DType::f64, Category::workspace);
  g.all_gather(mine, all);
  const Tensor all_host = all.to(Device::cpu(), Category::workspace);
  const double* a = all_host.data<double>();

  fault_point("checkpoint.before_meta", r);  // every rank file is durable, meta.json is not written
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
    for (int q = 0; q < W; ++q) {
      if (static_cast<int64_t>(a[3 * q]) != L.file_bytes)
        ZT_THROW(what, ": rank ", q, " wrote ", static_cast<int64_t>(a[3 * q]), " bytes, rank 0 expected ",
                 L.file_bytes, " (the ranks' unit layouts differ)");
      const uint64_t h = (static_cast<uint64_t>(a[3 * q + 1]) << 32) | static_cast<uint64_t>(a[3 * q + 2]);
      files.push_back({{"rank", q}, {"name", rank_file_name(q)}, {"bytes", L.file_bytes}, {"fnv1a64", hex64(h)}});
    }
    meta["format"] = kShardedCheckpointFormat;
    meta["version"] = kShardedCheckpointVersion;
    meta["world_size"] = W;
    if (tp > 1) meta["tensor_parallel_size"] = tp;
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
    fault_point("checkpoint.before_latest", r);  // step_X/ is complete, `latest` still names the previous one
    AtomicFile latest((root / "latest").string(), "checkpoint latest");
    const std::string line = name + "\n";
    latest.write(line.data(), line.size());
    latest.commit();
  });
  return final_dir.string();
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep_last) {
  ZT_CHECK(keep_last >= 1, "keep_last = ", keep_last, " is invalid: expected >= 1 (0 keeps everything: do not prune)");
  const fs::path root(dir);
  const std::string latest = latest_name(root);
  std::vector<std::pair<int64_t, std::string>> steps;  // (step, name) of every complete step directory
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !is_step_name(name))
      continue;  // step_X.tmp/ (a save in progress or a crashed one) and anything else: not ours to remove
    steps.emplace_back(std::stoll(name.substr(5)), name);
  }
  if (ec) ZT_THROW("checkpoint: cannot list '", dir, "': ", ec.message());
  std::sort(steps.begin(), steps.end());
  std::vector<std::string> removed;
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < steps.size(); ++i) {
    if (steps[i].second == latest) continue;
    fs::remove_all(root / steps[i].second, ec);
    if (ec) ZT_THROW("checkpoint: cannot remove the old '", (root / steps[i].second).string(), "': ", ec.message());
    removed.push_back(steps[i].second);
  }
  return removed;
}

}  // namespace zt
