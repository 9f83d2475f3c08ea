// defines: cuda_error_message, cuda_devices, cuda_available, cuda_runtime_summary, is_device_pointer,
//          DeviceGuard (constructor, destructor) (cuda/device.h); file-local: Detection, detect, detection
#include "cuda/device.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "cuda/check.h"

namespace zt {

std::string cuda_error_message(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

namespace {

struct Detection {
  std::vector<CudaDevice> devices;
  std::string reason;
};

Detection detect() {
  Detection d;
  int count = -1;  // cudaGetDeviceCount leaves it unset on error: never read it then
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    d.reason = "cudaGetDeviceCount: " + cuda_error_message(e);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return d;
  }
  if (count <= 0) {
    d.reason = "the CUDA driver reports no device";
    return d;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    const cudaError_t pe = cudaGetDeviceProperties(&p, i);
    if (pe != cudaSuccess) {
      d.reason = "cudaGetDeviceProperties(" + std::to_string(i) + "): " + cuda_error_message(pe);
      continue;
    }
    CudaDevice dev;
    dev.index = i;
    dev.name = p.name;
    dev.major = p.major;
    dev.minor = p.minor;
    dev.total_memory = p.totalGlobalMem;
    dev.multiprocessors = p.multiProcessorCount;
    d.devices.push_back(dev);
  }
  if (!d.devices.empty()) d.reason.clear();
  return d;
}

const Detection& detection() {
  static const Detection d = detect();
  return d;
}

}  // namespace

const std::vector<CudaDevice>& cuda_devices(std::string* reason) {
  const Detection& d = detection();
  if (reason) *reason = d.reason;
  return d.devices;
}

bool cuda_available() {
  for (const CudaDevice& d : cuda_devices())
    if (d.supported()) return true;
  return false;
}

std::string cuda_runtime_summary() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "CUDA runtime %d.%d, driver %s", runtime / 1000, (runtime % 1000) / 10,
                have_driver ? (std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10)).c_str()
                            : "none");
  std::string out = buf;
  std::string reason;
  const std::vector<CudaDevice>& devs = cuda_devices(&reason);
  if (devs.empty()) return out + "\n  no CUDA device: " + reason;
  for (const CudaDevice& d : devs) {
    std::snprintf(buf, sizeof buf, "\n  device %d: %s, sm_%d%d, %.1f GiB, %d SMs%s", d.index, d.name.c_str(), d.major,
                  d.minor, static_cast<double>(d.total_memory) / (1 << 30), d.multiprocessors,
                  d.supported() ? "" : " (unsupported: ZeroTensor's kernels need sm_80 or newer)");
    out += buf;
  }
  return out;
}

bool is_device_pointer(const void* p) {
  if (!p || !cuda_available()) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer may report an error on old runtimes
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

bool is_pinned_host_pointer(const void* p) {
  if (!p || !cuda_available()) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

DeviceGuard::DeviceGuard(int device) {
  ZT_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) {
    ZT_CUDA_CHECK(cudaSetDevice(device));
    switched_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_) (void)cudaSetDevice(prev_);
}

}  // namespace zt
