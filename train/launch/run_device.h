// defines: RunDevice, select_run_device — where one rank of a tool trains (cpu or a GPU) and
//          which process group its collectives go through (MPI, or NCCL between GPUs).
//
// Shared by zt-train, zt-generate, bench/train_step and the GPU tests, so every program picks
// devices the same way:
//
//   --device cpu        (default) the CPU backend; collectives over MPI.
//   --device cuda       rank r uses GPU (local rank % visible GPUs): several ranks on one machine
//                       share the GPUs round-robin (OMPI_COMM_WORLD_LOCAL_RANK says the local rank).
//   --device cuda:N     every rank uses GPU N (tests: 2 and 4 ranks sharing one GPU).
//   --dist auto|mpi|nccl
//       auto: NCCL when the device is a GPU, the build has NCCL, and no two local ranks share a
//             GPU (NCCL wants one GPU per rank); MPI otherwise (GPU buffers staged through pinned
//             host memory, dist/mpi_process_group.h).
//       mpi, nccl: as named; nccl on the cpu, in a build without NCCL, or with ranks sharing a
//             GPU is a clear error.
//
// A GPU device registers the CUDA backend, makes the GPU current (cudaSetDevice) and the default
// device (core/backend.h), so the model, the ZeRO engine and the optimizer allocate there. In a
// build without CUDA, or where the machine has no usable GPU, --device cuda is an error that
// says which (never a silent CPU run).
#pragma once
#include <memory>
#include <string>

#include "core/device.h"
#include "dist/process_group.h"

namespace zt {

struct RunDevice {
  Device device;
  ProcessGroup* group = nullptr;        // the group to train with: `world` or an owned NCCL group
  std::unique_ptr<ProcessGroup> owned;  // the NCCL group when one was made
  std::string dist = "mpi";             // "mpi" or "nccl", for the banner and logs
  std::string describe() const;         // "cuda:0 (NVIDIA H100 80GB HBM3), dist nccl"
};

// `world`: the MPI group (or the single-process group) from init_process_group().
RunDevice select_run_device(const std::string& device_text, const std::string& dist_text, ProcessGroup& world);

}  // namespace zt
