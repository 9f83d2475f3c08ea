// defines: Shape, Storage, Tensor (shape, strides, offset, views), shape_str.
//
// A Tensor is a view: (storage, offset, shape, strides), all in elements. Several tensors may
// share one Storage (reshape, transpose, permute, slice, and the parameter views into a unit's
// flat buffer). Storage is reference counted; the last view to go frees the bytes and the
// allocator's per-category counters drop with it. A Tensor knows nothing of autograd
// (see autograd/var.h) and nothing of ranks.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/memory.h"

namespace zt {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(2, 3, 4)"
int64_t shape_numel(const Shape& s);

// A block of bytes with an owner: allocated from an Allocator under a Category (freed in the
// destructor), or borrowed from memory someone else owns (never freed here, never counted).
class Storage {
 public:
  Storage(size_t bytes, Category c, Allocator& a);
  Storage(void* borrowed, size_t bytes, Device d = Device::cpu());
  static std::shared_ptr<Storage> released(size_t bytes, Category c, Allocator& a);  // no bytes yet
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Category category() const { return category_; }
  bool owned() const { return allocator_ != nullptr; }
  Device device() const { return device_; }
  Allocator* allocator() const { return allocator_; }  // null when borrowed

  // ZeRO-3's free-and-regather (what PyTorch FSDP does with storage.resize_(0)): release() hands
  // the bytes back to the allocator while every view keeps pointing at this Storage (autograd
  // closures included); materialize() allocates them again, contents undefined, so the same
  // views see whatever is gathered into them next. Reading a released storage is an error.
  void release();
  void materialize();
  // The category the next materialize() allocates under; only while released (mixed precision
  // turns a unit's float32 parameter buffer into a workspace that exists while the unit computes).
  void set_category(Category c);
  bool resident() const { return data_ != nullptr || bytes_ == 0; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Category category_ = Category::workspace;
  Allocator* allocator_ = nullptr;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() == false

  // ---- factories (contiguous, row-major) ----
  // Without an allocator they allocate on the default device (core/backend.h; cpu unless set).
  static Tensor empty(const Shape& shape, DType dt = DType::f32, Category c = Category::activations,
                      Allocator& a = default_allocator());
  // A tensor whose storage holds no bytes yet: materialize() allocates them (contents
  // undefined). ZeRO's partitioned construction lays out a model this way (nn/param_set.h).
  static Tensor released(const Shape& shape, DType dt, Category c, Allocator& a = default_allocator());
  static Tensor zeros(const Shape& shape, DType dt = DType::f32, Category c = Category::activations,
                      Allocator& a = default_allocator());
  static Tensor full(const Shape& shape, double value, DType dt = DType::f32,
                     Category c = Category::activations);
  // Copies `values` (converted to dt) into a new tensor; values.size() must equal numel(shape).
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dt = DType::f32,
                            Category c = Category::activations);
  // Wraps memory owned elsewhere (no copy, not counted by any allocator), on device d.
  static Tensor borrow(void* data, const Shape& shape, DType dt, Device d = Device::cpu());

  // ---- metadata ----
  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  size_t element_size() const { return dtype_size(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  Category category() const;
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  std::string str() const;  // "float32(2, 3) strides (3, 1)"

  // ---- data ----
  // data<T>() and raw() give the address of element [0, ..., 0] on the tensor's device (a device
  // pointer for a GPU tensor: only kernels may read it). item() and to_vector() work on any
  // device (a GPU tensor is copied to the host first).
  // Pointer to element [0, ..., 0]. Checks that T matches the dtype (bf16/f16: use uint16_t via raw()).
  template <class T>
  T* data() const {
    ZT_CHECK(dtype_ == dtype_of<T>::value, "tensor ", str(), " accessed as ", dtype_name(dtype_of<T>::value));
    return static_cast<T*>(raw());
  }
  void* raw() const;
  double item() const;                   // the single element, as double (numel must be 1)
  std::vector<double> to_vector() const;  // all elements in row-major order, as double

  // ---- views: share storage, no copy ----
  Tensor view(const Shape& shape) const;  // needs is_contiguous(); one dimension may be -1
  Tensor reshape(const Shape& shape) const;  // view when contiguous, else a contiguous copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  // Elements [offset, offset + numel(shape)) of a contiguous tensor, viewed with `shape`:
  // how ParamSet carves parameters out of its flat buffer.
  Tensor flat_view(int64_t offset, const Shape& shape) const;

  // ---- copies ----
  Tensor contiguous() const;  // *this if already contiguous
  Tensor clone(Category c) const;
  Tensor clone() const { return clone(category()); }
  Tensor to(DType dt) const;  // converted copy (same category, same device); *this if dt == dtype()
  // A contiguous copy on device d (same dtype, category c), allocated from d's backend allocator
  // (cpu: cpu_allocator()); *this if already there and contiguous.
  Tensor to(const Device& d, Category c) const;
  Tensor to(const Device& d) const { return to(d, category()); }
  // Same shape, any strides, any dtypes (converted), any pair of devices (through the backends:
  // core/backend.h; across host and device the values are converted on the host side).
  void copy_(const Tensor& src);
  void zero_();
  void fill_(double value);

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_, strides_;
  DType dtype_ = DType::f32;
};

Shape contiguous_strides(const Shape& shape);

// Throws a zt::Error naming `what` unless t has exactly `shape`.
void check_shape(const Tensor& t, const Shape& shape, const char* what);
// Throws unless t is float32 or float64 (the compute dtypes), naming `what`.
void check_float(const Tensor& t, const char* what);

}  // namespace zt
