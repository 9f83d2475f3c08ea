// defines: launcher_ranks, topology_of_node_ids, topology_of_nodes, topology_of_equal_nodes,
//          Topology (num_nodes, local_rank, local_size, summary) (dist/topology.h); file-local: Reader
#include "dist/topology.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <set>

#include "core/check.h"

namespace zt {

namespace {

// Reads integer variables; an unset one is -1, a malformed or out-of-range one an error.
struct Reader {
  const std::function<const char*(const char*)>& env;
  bool has(const char* name) const { return env(name) != nullptr; }
  int get(const char* name, int lo, int hi) const {
    const char* v = env(name);
    if (!v) return -1;
    char* end = nullptr;
    errno = 0;
    const long x = std::strtol(v, &end, 10);
    ZT_CHECK(end != v && *end == '\0' && errno == 0 && x >= lo && x <= hi, name, "='", v, "': expected an integer in [",
             lo, ", ", hi, "] (a launcher's variable: docs/multi-node.md)");
    return static_cast<int>(x);
  }
};

}  // namespace

LauncherRanks launcher_ranks(const std::function<const char*(const char*)>& env) {
  const Reader r{env};
  LauncherRanks l;
  auto fill = [&](const char* who, const char* rank, const char* size, const char* lrank, const char* lsize) {
    l.launcher = who;
    l.size = r.get(size, 1, INT_MAX);
    l.rank = r.get(rank, 0, l.size - 1);
    l.local_size = lsize ? r.get(lsize, 1, l.size) : -1;
    l.local_rank = r.get(lrank, 0, (l.local_size > 0 ? l.local_size : l.size) - 1);
  };
  if (r.has("OMPI_COMM_WORLD_RANK") && r.has("OMPI_COMM_WORLD_SIZE")) {
    fill("OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
         "OMPI_COMM_WORLD_LOCAL_SIZE");
  } else if (r.has("SLURM_PROCID") && r.has("SLURM_NTASKS")) {
    fill("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr);
    l.num_nodes = r.get("SLURM_NNODES", 1, l.size);
    l.node = r.get("SLURM_NODEID", 0, (l.num_nodes > 0 ? l.num_nodes : l.size) - 1);
  } else if (r.has("RANK") && r.has("WORLD_SIZE")) {
    fill("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
    if (l.local_size > 0 && l.size % l.local_size == 0) l.num_nodes = l.size / l.local_size;
    l.node = r.get("GROUP_RANK", 0, (l.num_nodes > 0 ? l.num_nodes : l.size) - 1);
    if (const char* a = env("MASTER_ADDR")) l.master_addr = a;
    l.master_port = r.get("MASTER_PORT", 1, 65535);
  }
  return l;
}

LauncherRanks launcher_ranks() {
  return launcher_ranks([](const char* n) -> const char* { return std::getenv(n); });
}

Topology topology_of_node_ids(const std::vector<int>& ids, int rank, std::string source) {
  std::vector<int> first, node_of;  // first: the id of node 0, 1, ... in order of appearance
  for (int id : ids) {
    auto it = std::find(first.begin(), first.end(), id);
    if (it == first.end()) it = first.insert(first.end(), id);
    node_of.push_back(static_cast<int>(it - first.begin()));
  }
  return topology_of_nodes(std::move(node_of), rank, std::move(source));
}

Topology topology_of_nodes(std::vector<int> node_of, int rank, std::string source) {
  ZT_CHECK(!node_of.empty() && rank >= 0 && rank < static_cast<int>(node_of.size()), "topology: rank ", rank, " of ",
           node_of.size());
  int next = 0;  // nodes must appear as 0, 1, 2, ... in rank order
  for (size_t r = 0; r < node_of.size(); ++r) {
    ZT_CHECK(node_of[r] >= 0 && node_of[r] <= next, "topology: rank ", r, " is on node ", node_of[r],
             ": nodes must be numbered 0, 1, ... in order of their lowest rank");
    if (node_of[r] == next) ++next;
  }
  Topology t;
  t.node_of = std::move(node_of);
  t.rank = rank;
  t.source = std::move(source);
  return t;
}

Topology topology_of_equal_nodes(int size, int num_nodes, int rank) {
  ZT_CHECK(size >= 1 && num_nodes >= 1 && size % num_nodes == 0, "topology: ", size, " ranks over ", num_nodes,
           " equal nodes: the number of ranks (", size, ") must be a positive multiple of the number of nodes (",
           num_nodes, ")");
  const int per_node = size / num_nodes;
  std::vector<int> node_of(static_cast<size_t>(size));
  for (int q = 0; q < size; ++q) node_of[static_cast<size_t>(q)] = q / per_node;  // node-major
  return topology_of_nodes(std::move(node_of), rank, "topology_of_equal_nodes");
}

int Topology::num_nodes() const { return *std::max_element(node_of.begin(), node_of.end()) + 1; }

int Topology::local_rank() const {
  return static_cast<int>(std::count(node_of.begin(), node_of.begin() + rank, node_of[rank]));
}

int Topology::local_size() const { return static_cast<int>(std::count(node_of.begin(), node_of.end(), node_of[rank])); }

std::string Topology::summary() const {
  const int n = num_nodes();
  std::set<int> sizes;
  for (int k = 0; k < n; ++k) sizes.insert(static_cast<int>(std::count(node_of.begin(), node_of.end(), k)));
  std::string s = n == 1              ? detail::concat("1 node, ", size(), size() == 1 ? " rank" : " ranks")
                  : sizes.size() == 1 ? detail::concat(n, " nodes x ", *sizes.begin(), " ranks")
                                      : detail::concat(n, " nodes, ", size(), " ranks");
  if (n == 1) return s;
  s += ":";
  for (int k = 0; k < n; ++k) {
    std::vector<int> rs;
    for (int r = 0; r < size(); ++r)
      if (node_of[r] == k) rs.push_back(r);
    const bool run = rs.back() - rs.front() + 1 == static_cast<int>(rs.size());
    std::string list;
    if (run && rs.size() > 1) {
      list = detail::concat(rs.front(), "-", rs.back());
    } else {
      for (size_t i = 0; i < rs.size(); ++i) list += detail::concat(i ? "," : "", rs[i]);
    }
    s += detail::concat(k ? ", " : " ", "node ", k, " = rank", rs.size() > 1 ? "s " : " ", list);
  }
  return s;
}

}  // namespace zt
