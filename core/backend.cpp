// defines: Device (str), parse_device, f32_matmul_name, parse_f32_matmul, Backend (host_allocator,
//          copy_from_host_async, copy_to_host_async, set_f32_matmul_precision), register_backend,
//          backend_registered, backend, default_device, set_default_device and 2 more
//          (core/backend.h); file-local:
//          Registry, registry, LandedTransfer
//
// The backend registry, the default device, and Device's text form (core/backend.h, core/device.h).
#include "core/backend.h"

#include <array>
#include <atomic>
#include <map>
#include <mutex>

#include "core/cpu_backend.h"
#include "core/meta_backend.h"

namespace zt {

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  if (is_meta()) return "meta";
  return "cuda:" + std::to_string(index);
}

Device parse_device(const std::string& text, const char* what) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 8 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos)
    return Device::cuda(std::stoi(text.substr(5)));
  ZT_THROW(what, ": '", text, "' is not a device; expected cpu, cuda or cuda:N (N >= 0)");
}

const char* f32_matmul_name(F32Matmul p) { return p == F32Matmul::high ? "high" : "highest"; }

F32Matmul parse_f32_matmul(const std::string& text) {
  if (text == "highest") return F32Matmul::highest;
  if (text == "high") return F32Matmul::high;
  ZT_THROW("float32 matmul precision '", text,
           "' is not one of: highest (IEEE float32 GEMMs), high (TF32 tensor cores, GPU only)");
}

Allocator& Backend::host_allocator(bool) { return zt::host_allocator(); }

namespace {
struct LandedTransfer final : Transfer {
  void wait() override {}
};
}  // namespace

TransferPtr Backend::copy_from_host_async(const Tensor& dst, const Tensor& src_host) {
  copy_from_host(dst, src_host);
  return std::make_shared<LandedTransfer>();
}

TransferPtr Backend::copy_to_host_async(const Tensor& dst_host, const Tensor& src, const DeviceEvent* after) {
  ZT_CHECK(after == nullptr, "copy_to_host_async on ", device().str(), ": a device event to wait for, but ",
           device().str(), " has no device events");
  copy_to_host(dst_host, src);
  return std::make_shared<LandedTransfer>();
}

PackedRows swiglu_packed_rows(const char* who, const Tensor& out, const Tensor& gu) {
  ZT_CHECK(gu.dim() >= 1 && out.dim() == gu.dim() && gu.size(-1) % 2 == 0 && out.size(-1) * 2 == gu.size(-1) &&
               out.numel() * 2 == gu.numel(),
           who, ": gu ", gu.str(), " must be (..., 2F) and out ", out.str(), " (..., F)");
  const int64_t F = out.size(-1);
  return {F == 0 ? 0 : out.numel() / F, F};
}

void Backend::set_f32_matmul_precision(F32Matmul p) {
  if (p == F32Matmul::high)
    ZT_THROW("set_f32_matmul_precision(high): tf32 is a GPU matmul mode; device ", device().str(),
             " computes float32 GEMMs in IEEE fp32 (use highest)");
  f32_matmul_ = p;
}

namespace {

struct Registry {
  std::mutex mu;
  std::array<BackendFactory, 2> factories{};        // by DeviceType
  std::map<int, std::unique_ptr<Backend>> cuda;     // created backends, by index
};

// The default device, packed as (type << 16) | index: read on every Tensor::empty, so an atomic
// rather than the registry's mutex.
std::atomic<uint32_t> g_default_device{0};

Registry& registry() {
  static Registry r;  // leaked order is fine: backends live until exit
  return r;
}

}  // namespace

void register_backend(DeviceType type, BackendFactory factory) {
  ZT_CHECK(type == DeviceType::cuda, "register_backend: the cpu and meta backends are built in");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[static_cast<int>(type)] = factory;
}

bool backend_registered(DeviceType type) {
  if (type != DeviceType::cuda) return true;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.factories[static_cast<int>(type)] != nullptr;
}

Backend& backend(const Device& d) {
  if (d.is_cpu()) return cpu_backend();
  if (d.is_meta()) return meta_backend();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.cuda.find(d.index);
  if (it != r.cuda.end()) return *it->second;
  BackendFactory f = r.factories[static_cast<int>(d.type)];
  if (!f)
    ZT_THROW("no backend for device ", d.str(),
             ": this program did not register the CUDA backend (a build without CUDA, ZT_CUDA=OFF, has none; "
             "a CUDA build registers it with zt::register_cuda_backend())");
  Backend* b = f(d.index);  // throws with the reason when the device is unusable
  r.cuda.emplace(d.index, std::unique_ptr<Backend>(b));
  return *b;
}

Device default_device() {
  const uint32_t v = g_default_device.load(std::memory_order_relaxed);
  return Device{static_cast<DeviceType>(v >> 16), static_cast<int>(v & 0xffffu)};
}

void set_default_device(const Device& d) {
  backend(d);  // exists, or throws naming why not
  g_default_device.store((static_cast<uint32_t>(d.type) << 16) | static_cast<uint32_t>(d.index),
                         std::memory_order_relaxed);
}

Allocator& default_allocator() {
  const Device d = default_device();
  if (d.is_cpu()) return cpu_allocator();
  return backend(d).allocator();
}

}  // namespace zt
