// defines: main (zt-info)
//
// zt-info: the machine as ZeroTensor sees it — CPU threads, the memory categories, the build's
// backends and the CUDA devices (if the build has CUDA). Runs anywhere: a CUDA build on a machine
// without a GPU reports "no CUDA device" and the reason, and exits 0.
//
//   zt-info            human-readable
//   zt-info --json     one JSON object (for scripts and benchmark records)
#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/kernels/gemm_libs.h"  // defines: gemm_lib, gemm_libs_built, cblas_sgemm_provider
#include "dist/mpi_process_group.h"  // defines: launched_by_mpirun
#ifdef ZT_HAVE_CUDA
#include "cuda/device.h"  // defines: cuda_devices, cuda_runtime_summary
#endif

int main(int argc, char** argv) {
  CLI::App app{"zt-info: CPU threads, backends and CUDA devices as ZeroTensor sees them"};
  bool json = false;
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json j;
  j["cpu"] = {{"hardware_threads", std::thread::hardware_concurrency()}, {"omp_max_threads", omp_get_max_threads()}};
  nlohmann::json built = nlohmann::json::array();
  for (zt::GemmLib l : zt::gemm_libs_built()) built.push_back(zt::gemm_lib_name(l));
  j["gemm"] = {{"float32", zt::gemm_lib_name(zt::gemm_lib())}, {"built", built},
               {"cblas_sgemm_from", zt::cblas_sgemm_provider()}};
  j["mpi"] = {{"launched_by_mpirun", zt::launched_by_mpirun()}};
#ifdef ZT_HAVE_CUDA
  std::string reason;
  const auto& devs = zt::cuda_devices(&reason);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& d : devs)
    list.push_back({{"index", d.index}, {"name", d.name}, {"compute_capability", std::to_string(d.major) + "." + std::to_string(d.minor)},
                    {"total_memory", d.total_memory}, {"multiprocessors", d.multiprocessors}, {"supported", d.supported()}});
  j["cuda"] = {{"built", true}, {"devices", list}};
  if (devs.empty()) j["cuda"]["reason"] = reason;
#else
  j["cuda"] = {{"built", false}};
#endif
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("CPU: %u hardware threads, OpenMP max threads %d\n", std::thread::hardware_concurrency(),
              omp_get_max_threads());
  std::printf("GEMM: float32 through %s (built: %s); cblas_sgemm from %s\n", zt::gemm_lib_name(zt::gemm_lib()),
              [&] {
                std::string s;
                for (const auto& b : built) s += (s.empty() ? "" : ", ") + b.get<std::string>();
                return s;
              }().c_str(),
              zt::cblas_sgemm_provider().c_str());
  std::printf("MPI: %s\n", zt::launched_by_mpirun() ? "started by mpirun" : "single process (no mpirun)");
#ifdef ZT_HAVE_CUDA
  std::printf("CUDA: built (sm_80, sm_90); %s\n", zt::cuda_runtime_summary().c_str());
#else
  std::printf("CUDA: not built (no nvcc when this build was configured)\n");
#endif
  return 0;
}
