// defines: DeviceType, Device (where a tensor's bytes live), parse_device.
//
// A Device is named by its type and an index: "cpu", "cuda:0", "cuda:1". Every Allocator says
// which device its bytes are on (Allocator::device(), core/memory.h), so a Tensor knows its
// device from its storage; borrowed storage says so explicitly. Host memory is "cpu" whatever
// allocated it: pinned host memory (cuda/allocator.h) is a cpu tensor that DMA can read.
//
// "meta" (PyTorch's meta device) has shapes and no bytes: a model built and trained there runs
// every op's checks and every allocation's accounting, and no arithmetic (core/meta_backend.h).
#pragma once
#include <cstdint>
#include <string>

namespace zt {

enum class DeviceType : uint8_t { cpu, cuda, meta };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // which GPU; always 0 for the cpu

  static Device cpu() { return Device{}; }
  static Device cuda(int index = 0) { return Device{DeviceType::cuda, index}; }
  static Device meta() { return Device{DeviceType::meta, 0}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool is_meta() const { return type == DeviceType::meta; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0", "meta"
};

// "cpu", "cuda" (= cuda:0) or "cuda:N" with N >= 0 (the meta device is the dry run's, not a user's); anything else throws a zt::Error that quotes
// the text and lists what is accepted. `what` names where the text came from ("--device").
Device parse_device(const std::string& text, const char* what = "device");

}  // namespace zt
