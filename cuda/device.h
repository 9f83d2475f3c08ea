// defines: CudaDevice, cuda_devices, cuda_available, cuda_runtime_summary, DeviceGuard — which
//          GPUs this process can use, and making one current for a scope.
//
// A binary built with CUDA must run on a machine without a GPU (docs/architecture.md "Devices and
// backends"). Without a driver, cudaGetDeviceCount returns an error (cudaErrorNoDevice,
// cudaErrorInsufficientDriver, ...) and leaves the count unset, so detection looks at the error
// code, never at the count alone: any error means "no usable device", with the reason kept for
// messages. Detection runs once per process (the first call) and is cached.
#pragma once
#include <string>
#include <vector>

namespace zt {

struct CudaDevice {
  int index = 0;
  std::string name;              // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;      // compute capability (9.0 = sm_90)
  size_t total_memory = 0;       // bytes
  int multiprocessors = 0;
  bool supported() const { return major >= 8; }  // the kernels are built for sm_80 and sm_90
};

// The devices this process sees (CUDA_VISIBLE_DEVICES applies); empty when there is none or no
// driver. `reason` (optional) receives why the list is empty ("" when it is not).
const std::vector<CudaDevice>& cuda_devices(std::string* reason = nullptr);
bool cuda_available();  // at least one supported device
// One line per device plus the runtime and driver versions, or the reason there is none.
std::string cuda_runtime_summary();

// True when p points into device (or managed) memory; false for host memory, and always false
// without a usable device (no cudaPointerGetAttributes call then). The backends use it to decide
// which buffers to stage (dist/mpi_process_group.cpp, dist/nccl/).
bool is_device_pointer(const void* p);
// True when p points into page-locked host memory (cudaHostAlloc'd or cudaHostRegister'd): a
// copy from it can run asynchronously. False for pageable memory and without a usable device.
bool is_pinned_host_pointer(const void* p);

// Makes `device` current for a scope and restores the caller's device after (PyTorch's
// CUDAGuard). Throws a zt::Error naming the call if either cudaGetDevice or cudaSetDevice fails.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

}  // namespace zt
