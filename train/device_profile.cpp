// defines: DeviceProfile (op_seconds, link, nvme_cost, for_ranks_per_node), read_device_profile, device_profile_json,
//          device_profile_from_json (train/device_profile.h); file-local: number
#include "train/device_profile.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/json.h"

namespace zt {

double DeviceProfile::op_seconds(const MetaOpRecord& op, bool* timed) const {
  const auto it = ops.find(op.key);
  if (timed) *timed = it != ops.end();
  if (it != ops.end()) return it->second;
  const std::optional<ClassRate>& c = (op.host ? host_classes : classes)[static_cast<int>(op.cls)];
  if (!c)
    ZT_THROW("profile '", name, "': no ", op.host ? "host " : "", "rate for the op class '", op_class_name(op.cls),
             "' and no measured time for the op '", op.key, "' (profile it with zt-profile on this model",
             op.host ? ", with --offload" : "", ")");
  double t = 0;
  if (c->flops_per_s > 0) t = std::max(t, op.flops / c->flops_per_s);
  if (c->bytes_per_s > 0) t = std::max(t, static_cast<double>(op.bytes) / c->bytes_per_s);
  return t + c->overhead_s;
}

const LinkCost& DeviceProfile::link(int inter) const {
  const std::optional<LinkCost>& l = inter ? inter_node : intra_node;
  if (!l)
    ZT_THROW("profile '", name, "' has no ", inter ? "inter-node" : "intra-node", " link (measured on ", nodes, " node",
             nodes == 1 ? "" : "s", " with ", ranks_per_node, " rank(s) each: run zt-profile on a layout with ",
             inter ? "two nodes or more" : "two ranks on a node", ")");
  return *l;
}

const NvmeCost& DeviceProfile::nvme_cost() const {
  if (!nvme)
    ZT_THROW("profile '", name, "' has no nvme costs (the swap files' reads and writes: zt-profile --nvme-path DIR ",
             "measures them on the disk the job will swap to)");
  return *nvme;
}

DeviceProfile DeviceProfile::for_ranks_per_node(int ranks) const {
  ZT_CHECK(ranks >= 1, "for_ranks_per_node: ", ranks, " ranks on a node");
  DeviceProfile p = *this;
  if (!host_shared || ranks == ranks_per_node) return p;
  const double share = static_cast<double>(ranks_per_node) / ranks;
  p.host_memory_bytes = static_cast<int64_t>(static_cast<double>(host_memory_bytes) * share);
  for (std::optional<ClassRate>& c : p.host_classes)
    if (c) c->flops_per_s *= share, c->bytes_per_s *= share;
  p.ranks_per_node = ranks;
  return p;
}

namespace {

double number(const nlohmann::json& j, const char* key, const std::string& where, bool required = true) {
  if (!j.contains(key)) {
    if (required) ZT_THROW(where, ": the key '", key, "' is missing (expected a number >= 0)");
    return 0;
  }
  const nlohmann::json& v = j.at(key);
  if (!(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0))
    ZT_THROW(where, ": '", key, "' is ", v.dump(), " (expected a finite number >= 0)");
  return v.get<double>();
}

}  // namespace

DeviceProfile device_profile_from_json(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) ZT_THROW(what, ": expected a JSON object, got ", j.type_name());
  DeviceProfile p;
  p.name = j.value("name", what);
  p.source = j.value("source", "");
  p.threads = static_cast<int>(json_integer(j.value("threads", nlohmann::json(1)), what + ": 'threads'", 1, 1 << 16));
  p.ranks_per_node = static_cast<int>(
      json_integer(j.value("ranks_per_node", nlohmann::json(1)), what + ": 'ranks_per_node'", 1, 1 << 20));
  p.nodes = static_cast<int>(json_integer(j.value("nodes", nlohmann::json(1)), what + ": 'nodes'", 1, 1 << 20));
  p.peak_flops_per_s = number(j, "peak_flops_per_s", what, false);
  p.device_memory_bytes = static_cast<int64_t>(number(j, "device_memory_bytes", what, false));
  p.host_memory_bytes = static_cast<int64_t>(number(j, "host_memory_bytes", what, false));
  if (j.contains("host_shared")) {
    if (!j.at("host_shared").is_boolean())
      ZT_THROW(what, ": 'host_shared' is ", j.at("host_shared").dump(), " (expected true or false)");
    p.host_shared = j.at("host_shared").get<bool>();
  }
  p.compute_pace = j.contains("compute_pace") ? number(j, "compute_pace", what) : 1.0;
  if (p.compute_pace <= 0 || p.compute_pace > 1)
    ZT_THROW(what, ": 'compute_pace' is ", p.compute_pace, " (expected a pace in (0, 1])");
  p.first_touch_bytes_per_s = number(j, "first_touch_bytes_per_s", what, false);
  for (auto [field, rates] : {std::pair{"classes", &p.classes}, std::pair{"host_classes", &p.host_classes}}) {
    if (!j.contains(field)) continue;
    const nlohmann::json& cs = j.at(field);
    if (!cs.is_object()) ZT_THROW(what, ": '", field, "' is ", cs.dump(), " (expected an object of op classes)");
    for (auto it = cs.begin(); it != cs.end(); ++it) {
      int k = 0;
      while (k < kNumOpClasses && it.key() != op_class_name(static_cast<OpClass>(k))) ++k;
      std::string known;
      for (int c = 0; c < kNumOpClasses; ++c)
        known += std::string(c ? ", " : "") + op_class_name(static_cast<OpClass>(c));
      if (k == kNumOpClasses)
        ZT_THROW(what, ": '", field, "' has an unknown op class '", it.key(), "' (expected ", known, ")");
      const std::string where = what + ": " + field + "." + it.key();
      if (!it.value().is_object()) ZT_THROW(where, " is ", it.value().dump(), " (expected an object)");
      ClassRate r{number(it.value(), "flops_per_s", where, false), number(it.value(), "bytes_per_s", where, false),
                  number(it.value(), "overhead_s", where, false)};
      if (!(r.flops_per_s > 0 || r.bytes_per_s > 0))
        ZT_THROW(where, ": neither 'flops_per_s' nor 'bytes_per_s' is > 0 (an op of this class would take no time)");
      (*rates)[k] = r;
    }
  }
  if (j.contains("links")) {
    const nlohmann::json& ls = j.at("links");
    if (!ls.is_object()) ZT_THROW(what, ": 'links' is ", ls.dump(), " (expected an object)");
    for (auto it = ls.begin(); it != ls.end(); ++it) {
      if (!(it.key() == "intra_node" || it.key() == "inter_node"))
        ZT_THROW(what, ": 'links' has an unknown link '", it.key(), "' (expected intra_node, inter_node)");
      const std::string where = what + ": links." + it.key();
      if (!it.value().is_object()) ZT_THROW(where, " is ", it.value().dump(), " (expected an object)");
      LinkCost l{number(it.value(), "alpha_s", where), number(it.value(), "bytes_per_s", where)};
      if (l.bytes_per_s <= 0) ZT_THROW(where, ": 'bytes_per_s' is 0 (expected the link's bandwidth, > 0)");
      if (it.value().contains("loaded")) {
        const nlohmann::json& ld = it.value().at("loaded");
        if (!ld.is_object()) ZT_THROW(where, ".loaded is ", ld.dump(), " (expected an object)");
        l.loaded_alpha_s = number(ld, "alpha_s", where + ".loaded");
        l.loaded_bytes_per_s = number(ld, "bytes_per_s", where + ".loaded");
        if (l.loaded_bytes_per_s <= 0)
          ZT_THROW(where, ".loaded: 'bytes_per_s' is 0 (expected the link's bandwidth, > 0)");
      }
      (it.key() == "inter_node" ? p.inter_node : p.intra_node) = l;
    }
  }
  if (j.contains("nvme")) {
    const nlohmann::json& n = j.at("nvme");
    const std::string where = what + ": nvme";
    if (!n.is_object()) ZT_THROW(where, " is ", n.dump(), " (expected an object)");
    NvmeCost c{number(n, "alpha_s", where), number(n, "read_bytes_per_s", where),
               number(n, "write_bytes_per_s", where)};
    if (c.read_bytes_per_s <= 0 || c.write_bytes_per_s <= 0)
      ZT_THROW(where, ": 'read_bytes_per_s' and 'write_bytes_per_s' must be > 0 (got ", c.read_bytes_per_s, ", ",
               c.write_bytes_per_s, ")");
    p.nvme = c;
  }
  if (j.contains("ops")) {
    const nlohmann::json& os = j.at("ops");
    if (!os.is_object())
      ZT_THROW(what, ": 'ops' is ", os.dump().substr(0, 80), " (expected an object: op key -> seconds)");
    for (auto it = os.begin(); it != os.end(); ++it) {
      if (!(it.value().is_number() && std::isfinite(it.value().get<double>()) && it.value().get<double>() >= 0))
        ZT_THROW(what, ": ops['", it.key(), "'] is ", it.value().dump(), " (expected seconds, a finite number >= 0)");
      p.ops[it.key()] = it.value().get<double>();
    }
  }
  if (j.contains("sources")) {
    const nlohmann::json& ss = j.at("sources");
    if (!ss.is_object())
      ZT_THROW(what, ": 'sources' is ", ss.dump().substr(0, 80), " (expected an object: field -> text)");
    for (auto it = ss.begin(); it != ss.end(); ++it) {
      if (!it.value().is_string())
        ZT_THROW(what, ": sources['", it.key(), "'] is ", it.value().dump(), " (expected a string)");
      p.sources[it.key()] = it.value().get<std::string>();
    }
  }
  return p;
}

DeviceProfile read_device_profile(const std::string& path) {
  const std::string what = "profile '" + path + "'";
  return device_profile_from_json(read_json_file(path, what), what);
}

nlohmann::json device_profile_json(const DeviceProfile& p) {
  nlohmann::json j = {{"name", p.name},
                      {"source", p.source},
                      {"threads", p.threads},
                      {"ranks_per_node", p.ranks_per_node},
                      {"nodes", p.nodes},
                      {"peak_flops_per_s", p.peak_flops_per_s},
                      {"compute_pace", p.compute_pace}};
  if (p.device_memory_bytes > 0) j["device_memory_bytes"] = p.device_memory_bytes;
  if (p.host_memory_bytes > 0) j["host_memory_bytes"] = p.host_memory_bytes;
  if (p.host_shared) j["host_shared"] = true;
  if (p.first_touch_bytes_per_s > 0) j["first_touch_bytes_per_s"] = p.first_touch_bytes_per_s;
  for (auto [field, rates] : {std::pair{"classes", &p.classes}, std::pair{"host_classes", &p.host_classes}}) {
    j[field] = nlohmann::json::object();
    for (int k = 0; k < kNumOpClasses; ++k)
      if (const auto& c = (*rates)[k])
        j[field][op_class_name(static_cast<OpClass>(k))] = {
            {"flops_per_s", c->flops_per_s}, {"bytes_per_s", c->bytes_per_s}, {"overhead_s", c->overhead_s}};
  }
  j["links"] = nlohmann::json::object();
  for (int inter = 0; inter < 2; ++inter) {
    const std::optional<LinkCost>& l = inter ? p.inter_node : p.intra_node;
    if (!l) continue;
    nlohmann::json& o = j["links"][inter ? "inter_node" : "intra_node"];
    o = {{"alpha_s", l->alpha_s}, {"bytes_per_s", l->bytes_per_s}};
    if (l->loaded_bytes_per_s > 0)
      o["loaded"] = {{"alpha_s", l->loaded_alpha_s}, {"bytes_per_s", l->loaded_bytes_per_s}};
  }
  if (p.nvme)
    j["nvme"] = {{"alpha_s", p.nvme->alpha_s},
                 {"read_bytes_per_s", p.nvme->read_bytes_per_s},
                 {"write_bytes_per_s", p.nvme->write_bytes_per_s}};
  j["ops"] = p.ops;
  if (!p.sources.empty()) j["sources"] = p.sources;
  return j;
}

}  // namespace zt
