// defines: load_sharded_checkpoint, read_sharded_meta (zero/checkpoint.h).
//
// Reading a sharded checkpoint (zero/checkpoint.h): meta.json, this rank's shards (resharded
// from any world size), and one tensor of every unit consolidated.
#include "zero/checkpoint.h"
#include "core/json.h"  // defines: parse_json
#include "zero/checkpoint_files.h"   // defines: FileLayout, RankFiles, read_elements, ...

namespace fs = std::filesystem;

namespace zt {

using namespace checkpoint_detail;

ShardedMeta read_sharded_meta(const std::string& path) {
  ShardedMeta m;
  m.dir = path;
  const fs::path latest = fs::path(path) / "latest";
  if (fs::exists(latest)) {
    const std::string name = latest_name(path);
    if (!is_step_name(name))
      ZT_THROW("checkpoint: '", latest.string(), "' does not name a step directory (holds '", name, "')");
    m.dir = (fs::path(path) / name).string();
    if (!fs::is_directory(m.dir)) ZT_THROW("checkpoint: '", latest.string(), "' names '", name, "', which does not exist");
  }
  const fs::path meta_path = fs::path(m.dir) / "meta.json";
  if (!fs::exists(meta_path))
    ZT_THROW("checkpoint: '", m.dir, "' is not a checkpoint directory (no meta.json, no latest)");
  m.meta = parse_json(read_text(meta_path), "checkpoint: '" + meta_path.string() + "'");
  // json == value compares type and value and never throws (value() would, for another type).
  const auto field = [&](const char* key) { return m.meta.contains(key) ? m.meta.at(key).dump() : "(missing)"; };
  if (!m.meta.is_object())
    ZT_THROW("checkpoint: '", meta_path.string(), "' holds ", m.meta.type_name(), ", expected an object");
  if (!m.meta.contains("format") || m.meta.at("format") != kShardedCheckpointFormat)
    ZT_THROW("checkpoint: '", meta_path.string(), "' has format ", field("format"), ", expected \"",
             kShardedCheckpointFormat, "\"");
  if (!m.meta.contains("version") || m.meta.at("version") != kShardedCheckpointVersion)
    ZT_THROW("checkpoint: '", meta_path.string(), "' has version ", field("version"), ", this build reads ",
             kShardedCheckpointVersion);
  try {
    layout_of(m);  // every field the files need is present and consistent
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("checkpoint: '", meta_path.string(), "' lacks or mistypes a field: ", e.what());
  }
  return m;
}

nlohmann::json load_sharded_checkpoint(ProcessGroup& g, const std::string& path, std::vector<CheckpointShard>& shards,
                                       int shard, int shards_count) {
  const int N = shards_count > 0 ? shards_count : g.size(), r = shard >= 0 ? shard : g.rank();
  ShardedMeta m;
  on_every_rank(g, "checkpoint load '" + path + "'", [&] {
    m = read_sharded_meta(path);
    const FileLayout L = layout_of(m);
    const std::string where = "checkpoint '" + m.dir + "'";
    if (L.units.size() != shards.size())
      ZT_THROW(where, " holds ", L.units.size(), " units, the model has ", shards.size());
    // Each unit element by element as the checkpoint holds it, or, when either side is cut for
    // tensor parallelism, each parameter's elements from their places in the whole tensors.
    std::vector<bool> placed(shards.size(), false);
    for (size_t u = 0; u < shards.size(); ++u) {
      const CheckpointShard& s = shards[u];
      bool cut = L.tp > 1;
      for (const ParamInfo& p : s.params) cut = cut || !p.slice.whole();
      placed[u] = cut;
      if (L.units[u].name != s.unit || (!cut && L.units[u].numel != s.numel))
        ZT_THROW(where, " holds unit '", L.units[u].name, "' with ", L.units[u].numel, " parameters, the model has '",
                 s.unit, "' with ", s.numel, " (a checkpoint of another model?)");
      if (cut) {
        if (s.params.empty() || L.units[u].params.empty())
          ZT_THROW(where, ": unit '", s.unit, "' is cut for tensor parallelism, and its parameter layout is missing");
        const std::string differ = same_parameters(L, u, s.params);
        if (!differ.empty()) ZT_THROW(where, ": ", differ, " (a checkpoint of another model?)");
      }
      ZT_CHECK(s.padded_numel % N == 0, "load_sharded_checkpoint: unit '", s.unit, "' padded_numel ", s.padded_numel,
               " is not a multiple of the ", N, " shards");
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
        if (placed[u]) read_elements_as(files, L, u, static_cast<size_t>(t), shards[u].params, r * S, S, buf.raw());
        else read_elements(files, L, u, static_cast<size_t>(t), r * S, S, buf.raw());
        if (!direct) {
          Tensor d = dst;
          d.copy_(buf.view(dst.shape()));
        }
      }
    }
  });
  return m.meta;
}

}  // namespace zt
