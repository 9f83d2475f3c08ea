// defines: RunDevice (describe), select_run_device (train/launch/run_device.h); file-local: find_device,
//          local_rank, local_size
//
// select_run_device (train/launch/run_device.h).
#include "train/launch/run_device.h"

#include <cstdlib>

#include "core/backend.h"
#ifdef ZT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/device.h"
#endif
#ifdef ZT_HAVE_NCCL
#include "dist/nccl/nccl_process_group.h"
#endif

namespace zt {

namespace {

#ifdef ZT_HAVE_CUDA
// The entry of cuda_devices() for CUDA device `index` (entries carry their index: a device whose
// properties could not be read is left out, so positions and indices may differ), or null.
const CudaDevice* find_device(int index) {
  for (const CudaDevice& d : cuda_devices())
    if (d.index == index) return &d;
  return nullptr;
}

// OpenMPI's (and MPICH's / Slurm's) local rank, 0 when run without a launcher.
int local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

int local_size() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  return 1;
}
#endif

}  // namespace

std::string RunDevice::describe() const {
  std::string s = device.str();
#ifdef ZT_HAVE_CUDA
  if (device.is_cuda()) {
    if (const CudaDevice* d = find_device(device.index)) s += " (" + d->name + ")";
  }
#endif
  return s + ", dist " + dist;
}

RunDevice select_run_device(const std::string& device_text, const std::string& dist_text, ProcessGroup& world) {
  if (dist_text != "auto" && dist_text != "mpi" && dist_text != "nccl")
    ZT_THROW("--dist: '", dist_text, "' is not a communication backend; expected auto, mpi or nccl");
  RunDevice rd;
  rd.group = &world;
  rd.device = parse_device(device_text, "--device");
  if (rd.device.is_cpu()) {
    if (dist_text == "nccl") ZT_THROW("--dist nccl needs --device cuda (NCCL moves GPU buffers)");
    return rd;
  }
#ifndef ZT_HAVE_CUDA
  ZT_THROW("--device ", device_text,
           ": this build has no CUDA backend (configured without nvcc, or ZT_CUDA=OFF); "
           "rebuild on a machine with the CUDA toolkit, or use --device cpu");
#else
  const bool explicit_index = device_text.rfind("cuda:", 0) == 0;
  std::string reason;
  const auto& devs = cuda_devices(&reason);
  if (devs.empty()) ZT_THROW("--device ", device_text, ": no usable GPU on this machine (", reason, ")");
  const int count = static_cast<int>(devs.size());
  if (!explicit_index) rd.device.index = devs[static_cast<size_t>(local_rank() % count)].index;
  const CudaDevice* dev = find_device(rd.device.index);
  if (!dev)
    ZT_THROW("--device ", device_text, ": this process sees no usable GPU with index ", rd.device.index, " (",
             cuda_runtime_summary(), ")");
  if (!dev->supported())
    ZT_THROW("--device ", rd.device.str(), ": ", dev->name, " has compute capability ", dev->major, ".", dev->minor,
             "; the kernels are built for 8.0 and 9.0");
  ZT_CUDA_CHECK(cudaSetDevice(rd.device.index));
  register_cuda_backend();
  set_default_device(rd.device);
  // Ranks on one machine share a GPU when they outnumber the GPUs, or when all were pinned to one.
  [[maybe_unused]] const bool shared = local_size() > (explicit_index ? 1 : count);  // read with NCCL only
  bool want_nccl = dist_text == "nccl";
#ifdef ZT_HAVE_NCCL
  if (dist_text == "auto") want_nccl = !shared;
  if (want_nccl) {
    if (shared)
      ZT_THROW("--dist nccl: ", local_size(), " ranks on this machine share ", explicit_index ? 1 : count,
               " GPU(s); NCCL needs one GPU per rank (use --dist mpi to share a GPU)");
    auto& cb = static_cast<CudaBackend&>(backend(rd.device));
    rd.owned = std::make_unique<NcclProcessGroup>(world, rd.device.index, cb.stream());
    rd.group = rd.owned.get();
    rd.dist = "nccl";
  }
#else
  if (want_nccl) ZT_THROW("--dist nccl: this build has no NCCL (nccl.h / libnccl were not found at configure time)");
#endif
  return rd;
#endif
}

}  // namespace zt
