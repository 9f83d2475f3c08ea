// defines: the dry run's tests against real runs — on every rank of a real job (1, 2 or 4 ranks
//          under mpirun), the same configuration trained for real by zt-train's Trainer and dry-run
//          for that rank on the meta device: every category's peak and held bytes on the device and
//          in the host tier, at setup and in each step, and each step's bytes per collective and
//          link class, equal to the byte.
#include <catch2/catch.hpp>

#include <omp.h>

#include <sstream>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "tests/mpi/small_run.h"
#include "train/dry_run.h"

using namespace zt;

namespace {

struct Measured {
  MemoryStats setup_device, setup_host;
  std::vector<DryRunStep> steps;
};

// Bytes above what the process held before (the test process holds other things in the same
// allocators): peaks and current minus `base`'s current.
MemoryStats above(MemoryStats s, const MemoryStats& base) {
  for (Category c : kAllCategories) {
    const int i = static_cast<int>(c);
    s.current[i] -= base.current[i];
    s.peak[i] -= base.current[i];
  }
  s.peak_total -= base.total();
  return s;
}

Measured real_run(const RunConfig& c, ProcessGroup& g, int steps) {
  Allocator& dev = cpu_allocator();
  Allocator& host = zt::host_allocator();
  const MemoryStats d0 = dev.stats(), h0 = host.stats();
  dev.reset_peaks();
  host.reset_peaks();
  Measured m;
  Trainer t(c, g);
  m.setup_device = above(dev.stats(), d0);
  m.setup_host = above(host.stats(), h0);
  for (int s = 0; s < steps; ++s) {
    host.reset_peaks();  // the Trainer resets the device's at the step's start
    const CommCounters before = g.counters();
    t.step();
    m.steps.push_back({above(dev.stats(), d0), above(host.stats(), h0), g.counters() - before});
  }
  return m;
}

std::string diff(const char* what, const MemoryStats& real, const MemoryStats& dry) {
  std::ostringstream o;
  for (Category c : kAllCategories)
    if (real.max(c) != dry.max(c) || real.cur(c) != dry.cur(c))
      o << what << " " << category_name(c) << ": real peak " << real.max(c) << " held " << real.cur(c)
        << ", dry peak " << dry.max(c) << " held " << dry.cur(c) << "\n";
  return o.str();
}

std::string diff(const CommCounters& real, const CommCounters& dry) {
  std::ostringstream o;
  for (int k = 0; k < kNumCollectives; ++k)
    if (real.bytes[k] != dry.bytes[k] || real.calls[k] != dry.calls[k])
      o << collective_name(static_cast<Collective>(k)) << ": real " << real.bytes[k] << " B in " << real.calls[k]
        << " calls, dry " << dry.bytes[k] << " B in " << dry.calls[k] << "\n";
  for (int l = 0; l < 2; ++l)
    if (real.link[l] != dry.link[l]) o << "link " << l << ": real " << real.link[l] << ", dry " << dry.link[l] << "\n";
  return o.str();
}

// The real run and the dry run of `c` on this rank agree, or the differences are listed.
void check_same(const std::string& name, RunConfig c, ProcessGroup& g) {
  const int steps = 3;
  c.steps = steps;
  const Measured real = real_run(c, g, steps);
  DryRunRequest r;
  r.model = model_config(c.model);
  r.run = c;
  r.world_size = g.size();
  r.nodes = g.topology().num_nodes();
  r.rank = g.rank();
  r.threads = omp_get_max_threads();
  r.steps = steps;
  const DryRun dry = dry_run(r);
  std::string d = diff("setup device", real.setup_device, dry.setup_device) +
                  diff("setup host", real.setup_host, dry.setup_host);
  for (int s = 0; s < steps; ++s) {
    const std::string at = "step " + std::to_string(s + 1);
    d += diff((at + " device").c_str(), real.steps[s].device, dry.steps[s].device) +
         diff((at + " host").c_str(), real.steps[s].host, dry.steps[s].host) +
         diff(real.steps[s].comm, dry.steps[s].comm);
  }
  INFO(name << " on rank " << g.rank() << " of " << g.size() << ":\n" << d);
  CHECK(d.empty());
}

}  // namespace

TEST_CASE("dry run equals the real run: stages, precisions, offload", "[dry_run]") {
  ProcessGroup& g = init_process_group();
  for (int stage = 0; stage <= 3; ++stage)
    for (Precision p : {Precision::f32, Precision::bf16, Precision::f16}) {
      RunConfig c = test::small_run("gpt2-nano", g.size(), stage);
      c.engine.precision = p;
      check_same("gpt2-nano stage " + std::to_string(stage) + " " + precision_name(p), c, g);
    }
}
