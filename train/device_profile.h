// defines: ClassRate, LinkCost, NvmeCost, DeviceProfile, read_device_profile, device_profile_json — what one
//          machine's ops and links cost: the numbers the step simulator (train/step_time.h) turns a
//          dry run's ops and collectives into time with.
//
// A profile says, for one rank of one machine:
//   ops      measured seconds per op signature (core/meta_backend.h's MetaOpRecord::key): the
//            kernels of a real step, each timed on this machine (zt-profile replays every op of a
//            dry run on the real backend). An op found here costs what was measured.
//   classes  per op class, a roofline for the ops not measured: an op bound by arithmetic (gemm,
//            attention) costs flops / flops_per_s, one bound by memory (the rest) bytes /
//            bytes_per_s, plus overhead_s per op (a launch, a dispatch). zt-profile fits each class's
//            rate to its own measured ops (the sum of their flops or bytes over the sum of their
//            times); a profile written from a datasheet gives the sustained rates directly.
//   host_classes  the same rooflines for the ops that run on the host tier's memory (core/
//            meta_backend.h's MetaOpRecord::host: the offloaded optimizer's AdamW on the CPU, its
//            casts), when the device is not the host (a GPU); zt-profile on a CPU writes the same
//            rates as `classes`, for the host tier is the CPU's own memory there.
//   links    per link class (intra-node: shared memory or NVLink; inter-node: the network), the
//            alpha-beta model of one hop (Hockney 1994): a message of b bytes takes
//            alpha_s + b / bytes_per_s, and "loaded": the same while compute runs beside it.
//            Collectives are costed by their algorithm over these hops (train/step_time.h's
//            collective_seconds).
//   nvme     the NVMe tier's swap files, one rank's share with the node's ranks_per_node ranks
//            swapping at once: a read of b bytes takes alpha_s + b / read_bytes_per_s, a write
//            alpha_s + b / write_bytes_per_s, one request after another (the rank's IO thread).
// And where the numbers come from (`source`: the command and machine that measured them, or the
// datasheet), which every table that quotes a prediction prints beside it; a profile written by
// hand (configs/devices/) also says where each number comes from (`sources`: the field's path,
// "classes.gemm", "links.inter_node", -> the datasheet, paper or record it was read from).
//
// The JSON file (zt-profile writes it; the keys are these fields' names):
//   {"name": "...", "source": "...", "threads": 1, "ranks_per_node": 4, "nodes": 1,
//    "peak_flops_per_s": 1.2e11, "compute_pace": 0.2,
//    "device_memory_bytes": 85520809984, "host_memory_bytes": 274877906944, "host_shared": true,
//    "classes": {"gemm": {"flops_per_s": 3.1e10, "bytes_per_s": 0, "overhead_s": 0}, ...},
//    "links": {"intra_node": {"alpha_s": 2e-5, "bytes_per_s": 2e9,
//                             "loaded": {"alpha_s": 4e-3, "bytes_per_s": 1e9}}, "inter_node": {...}},
//    "host_classes": {"optimizer": {"bytes_per_s": 2e10}, ...},
//    "nvme": {"alpha_s": 1e-4, "read_bytes_per_s": 2e9, "write_bytes_per_s": 1e9},
//    "ops": {"linear float32(4, 128, 256) ...": 1.2e-4, ...},
//    "sources": {"classes.gemm": "...", ...}}
// A class or link may be missing (a one-node profile has no inter-node link); using it is then an
// error that names the profile and what it lacks.
#pragma once
#include <array>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/meta_backend.h"  // defines: OpClass, kNumOpClasses, MetaOpRecord

namespace zt {

struct ClassRate {
  double flops_per_s = 0;  // the sustained rate of an op bound by arithmetic (0: not this bound)
  double bytes_per_s = 0;  // the sustained rate of an op bound by memory (0: not this bound)
  double overhead_s = 0;   // per op
};

struct LinkCost {
  double alpha_s = 0;      // per message: latency and software overhead
  double bytes_per_s = 0;  // one hop's bandwidth
  // The same hop while the rank's compute runs beside the collective (0: as above). On a CPU rank
  // the progress thread competes with the kernels for the cores, and a ring step waits until the
  // neighbour's thread is scheduled again; on a GPU, NCCL's kernels share the memory bandwidth.
  double loaded_alpha_s = 0, loaded_bytes_per_s = 0;
  LinkCost hop(bool loaded) const {
    return loaded && loaded_bytes_per_s > 0 ? LinkCost{loaded_alpha_s, loaded_bytes_per_s} : *this;
  }
};

struct NvmeCost {
  double alpha_s = 0;                                  // per request
  double read_bytes_per_s = 0, write_bytes_per_s = 0;  // one rank's, > 0
};

struct DeviceProfile {
  std::string name;             // "this machine (zt-profile)", "H100 SXM (datasheet)"
  std::string source;           // the command, machine and date, or the datasheet
  int threads = 1;              // the OpenMP threads per rank the ops were timed with
  int ranks_per_node = 1;       // ranks timing at once on one machine when they were measured
  int nodes = 1;                // nodes the links were measured between
  double peak_flops_per_s = 0;  // the device's peak for MFU (0: unknown)
  // What one rank may hold (0: unknown): the device's memory as a program sees it (nvidia-smi's
  // total), and the host's memory shared by the node's ranks_per_node ranks. zt-estimate --compare
  // holds each choice's peaks against them unless --device-mib / --host-mib say otherwise.
  int64_t device_memory_bytes = 0, host_memory_bytes = 0;
  // Whether the host is the node's, shared evenly by the ranks on it: its memory and its classes'
  // rates (host_classes) are then one rank's share with ranks_per_node ranks on the node, and a job
  // with another count gets its own share (for_ranks_per_node). A datasheet profile's host (a
  // DGX's sockets and memory channels, DeepSpeed's CPU Adam using every core it is given) is
  // shared; zt-profile's is not (each rank timed with its fixed `threads`: a rank alone on the box
  // gets no more cores).
  bool host_shared = false;
  // The compute clock's pace while a collective runs beside it, in (0, 1]: 1 where communication
  // has resources of its own (a GPU's copy engines and NCCL's few SMs), less where it takes the
  // cores the kernels run on (a CPU rank whose MPI progress thread spins on them). zt-profile
  // measures it: a GEMM loop alone, then with an all-gather in flight beside it.
  double compute_pace = 1;
  // The rate at which the kernel fills a fresh mapping at first touch, beyond the write itself
  // (zeroing the pages, the faults): the model-state blocks the CPU allocator maps anew at every
  // allocation (core/memory.h's cpu_maps: stage 3's gathered parameters, the gradients' buckets)
  // cost bytes / this on the compute clock. 0: not charged (a GPU's caching allocator reuses its
  // blocks). zt-profile measures it on a CPU device, every rank at once.
  double first_touch_bytes_per_s = 0;
  std::array<std::optional<ClassRate>, kNumOpClasses> classes;
  std::array<std::optional<ClassRate>, kNumOpClasses> host_classes;  // the ops on the host tier
  std::optional<LinkCost> intra_node, inter_node;
  std::optional<NvmeCost> nvme;                // the swap files' reads and writes (none: not measured)
  std::map<std::string, double> ops;           // op key -> measured seconds
  std::map<std::string, std::string> sources;  // a field's path -> where its number comes from

  // The op's time: measured when its key is in `ops`, else its class's roofline (host_classes'
  // for an op on the host tier); `timed`, when given, is told which. Throws naming the profile and
  // the class when neither is there.
  double op_seconds(const MetaOpRecord& op, bool* timed = nullptr) const;
  // The link of that class (0 intra-node, 1 inter-node); throws naming what is missing.
  const LinkCost& link(int inter) const;
  // The NVMe tier's costs; throws naming the profile when it has none.
  const NvmeCost& nvme_cost() const;
  // The profile as one rank sees it in a job with `ranks` ranks on its node: where the host is
  // shared, its memory and its host_classes' rates times ranks_per_node / ranks (a ZeRO-Offload run
  // on one GPU of a DGX gets the whole host); otherwise the profile as it is.
  DeviceProfile for_ranks_per_node(int ranks) const;
};

// Reads and checks a profile file: every rate positive or zero, a class with neither rate refused,
// errors naming the file and the key.
DeviceProfile read_device_profile(const std::string& path);
nlohmann::json device_profile_json(const DeviceProfile& p);
// The same from JSON already parsed (`what` names the source in errors).
DeviceProfile device_profile_from_json(const nlohmann::json& j, const std::string& what);

}  // namespace zt
