// defines: shape_str, shape_numel, contiguous_strides, check_shape, check_float, Storage (constructor,
//          released, destructor, release, materialize, set_category), Tensor (empty, released, zeros, full,
//          borrow and 20 more) (core/tensor.h); file-local: tensor_bytes, load, store, for_each_index
#include "core/tensor.h"

#include "core/backend.h"
#include "core/checked.h"  // defines: checked_mul, checked_bytes

#include <algorithm>
#include <cstring>
#include <numeric>

namespace zt {

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n = checked_mul(n, d, "shape_numel");  // a shape from a file may wrap
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t s = 1;
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}

void check_shape(const Tensor& t, const Shape& shape, const char* what) {
  if (!t.defined() || t.shape() != shape)
    ZT_THROW(what, ": expected shape ", shape_str(shape), ", got ", t.defined() ? shape_str(t.shape()) : "undefined");
}

void check_float(const Tensor& t, const char* what) {
  if (!t.defined() || (t.dtype() != DType::f32 && t.dtype() != DType::f64))
    ZT_THROW(what, ": expected a float32 or float64 tensor, got ", t.defined() ? dtype_name(t.dtype()) : "undefined");
}

// ---------------------------------------------------------------------------------------------
// Storage

Storage::Storage(size_t bytes, Category c, Allocator& a)
    : data_(a.allocate(bytes, c)), bytes_(bytes), category_(c), allocator_(&a), device_(a.device()) {}

Storage::Storage(void* borrowed, size_t bytes, Device d) : data_(borrowed), bytes_(bytes), device_(d) {}

std::shared_ptr<Storage> Storage::released(size_t bytes, Category c, Allocator& a) {
  auto s = std::make_shared<Storage>(nullptr, bytes, a.device());
  s->category_ = c;
  s->allocator_ = &a;
  return s;
}

Storage::~Storage() {
  if (allocator_ && data_) allocator_->deallocate(data_, bytes_, category_);
}

void Storage::release() {
  ZT_CHECK(owned(), "release() of borrowed memory");
  if (!data_) return;
  allocator_->deallocate(data_, bytes_, category_);
  data_ = nullptr;
}

void Storage::materialize() {
  ZT_CHECK(owned(), "materialize() of borrowed memory");
  if (data_ || bytes_ == 0) return;
  data_ = allocator_->allocate(bytes_, category_);
}

void Storage::set_category(Category c) {
  ZT_CHECK(owned() && !data_, "set_category() of a storage that holds memory (release() it first)");
  category_ = c;
}

// ---------------------------------------------------------------------------------------------
// Factories

namespace {
// The bytes of a contiguous tensor of `shape`, every product checked (core/checked.h).
size_t tensor_bytes(const Shape& shape, DType dt) {
  return static_cast<size_t>(checked_bytes(shape_numel(shape), static_cast<int64_t>(dtype_size(dt)), "tensor bytes"));
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dt, Category c, Allocator& a) {
  for (int64_t d : shape) ZT_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
  Tensor t;
  t.storage_ = std::make_shared<Storage>(tensor_bytes(shape, dt), c, a);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dt;
  return t;
}

Tensor Tensor::released(const Shape& shape, DType dt, Category c, Allocator& a) {
  for (int64_t d : shape) ZT_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
  Tensor t;
  t.storage_ = Storage::released(tensor_bytes(shape, dt), c, a);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dt;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dt, Category c, Allocator& a) {
  Tensor t = empty(shape, dt, c, a);
  t.zero_();
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dt, Category c) {
  Tensor t = empty(shape, dt, c);
  t.fill_(value);
  return t;
}

Tensor Tensor::borrow(void* data, const Shape& shape, DType dt, Device d) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>(data, tensor_bytes(shape, dt), d);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dt;
  return t;
}

// ---------------------------------------------------------------------------------------------
// Element conversion: every dtype is read as double and written from double. Exact for every
// value a float32/int32/uint16 can hold; int64 beyond 2^53 is not a use we have.

namespace {

double load(const void* p, DType dt) {
  switch (dt) {
    case DType::f32: return *static_cast<const float*>(p);
    case DType::f64: return *static_cast<const double*>(p);
    case DType::bf16: return bf16_to_f32(*static_cast<const uint16_t*>(p));
    case DType::f16: return f16_to_f32(*static_cast<const uint16_t*>(p));
    case DType::i32: return *static_cast<const int32_t*>(p);
    case DType::i64: return static_cast<double>(*static_cast<const int64_t*>(p));
    case DType::u16: return *static_cast<const uint16_t*>(p);
    case DType::u8: return *static_cast<const uint8_t*>(p);
  }
  return 0;
}

void store(void* p, DType dt, double v) {
  switch (dt) {
    case DType::f32: *static_cast<float*>(p) = static_cast<float>(v); break;
    case DType::f64: *static_cast<double*>(p) = v; break;
    case DType::bf16: *static_cast<uint16_t*>(p) = f32_to_bf16(static_cast<float>(v)); break;
    case DType::f16: *static_cast<uint16_t*>(p) = f32_to_f16(static_cast<float>(v)); break;
    case DType::i32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case DType::i64: *static_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    case DType::u16: *static_cast<uint16_t*>(p) = static_cast<uint16_t>(v); break;
    case DType::u8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
  }
}

// Calls f(dst_elem_offset, src_elem_offset) for every index of `shape`, in row-major order.
// The innermost dimension is a tight loop; outer dimensions use an odometer.
template <class F>
void for_each_index(const Shape& shape, const Shape& dst_st, const Shape& src_st, F&& f) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (shape_numel(shape) == 0) return;
  if (nd == 0) { f(0, 0); return; }
  std::vector<int64_t> idx(nd, 0);
  const int64_t inner = shape[nd - 1], ds = dst_st[nd - 1], ss = src_st[nd - 1];
  int64_t d = 0, s = 0;
  while (true) {
    for (int64_t i = 0; i < inner; ++i) f(d + i * ds, s + i * ss);
    int64_t k = nd - 2;
    for (; k >= 0; --k) {
      d += dst_st[k]; s += src_st[k];
      if (++idx[k] < shape[k]) break;
      d -= dst_st[k] * shape[k]; s -= src_st[k] * shape[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Metadata and data

int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  if (d < 0) d += n;
  ZT_CHECK(d >= 0 && d < n, "dimension ", d, " out of range for ", str());
  return shape_[d];
}

Category Tensor::category() const {
  ZT_CHECK(defined(), "category() of an undefined tensor");
  return storage_->category();
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != expect) return false;
    expect *= shape_[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " strides " + shape_str(strides_);
}

void* Tensor::raw() const {
  ZT_CHECK(defined(), "data access to an undefined tensor");
  ZT_CHECK(storage_->resident(), "data access to a released storage (a ZeRO-3 parameter outside its unit's acquire/release)");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

double Tensor::item() const {
  ZT_CHECK(numel() == 1, "item() needs exactly one element, tensor is ", str());
  if (!device().is_cpu()) return to(Device::cpu(), Category::workspace).item();
  return load(raw(), dtype_);
}

std::vector<double> Tensor::to_vector() const {
  if (!device().is_cpu()) return to(Device::cpu(), Category::workspace).to_vector();
  std::vector<double> out(static_cast<size_t>(numel()));
  const char* base = static_cast<const char*>(raw());
  const size_t es = element_size();
  Shape dst_st = contiguous_strides(shape_);
  for_each_index(shape_, dst_st, strides_, [&](int64_t d, int64_t s) { out[d] = load(base + s * es, dtype_); });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Views

Tensor Tensor::view(const Shape& shape) const {
  ZT_CHECK(is_contiguous(), "view", shape_str(shape), " of non-contiguous ", str(), " (use reshape or contiguous)");
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ZT_CHECK(infer < 0, "view: only one dimension may be -1 in ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    ZT_CHECK(known > 0 && numel() % known == 0, "view: cannot infer -1 in ", shape_str(shape), " for ", str());
    s[infer] = numel() / known;
  }
  ZT_CHECK(shape_numel(s) == numel(), "view: shape ", shape_str(shape), " does not match ", numel(), " elements of ", str());
  Tensor t = *this;
  t.shape_ = s;
  t.strides_ = contiguous_strides(s);
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const { return is_contiguous() ? view(shape) : contiguous().view(shape); }

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  const int64_t n = dim();
  if (d0 < 0) d0 += n;
  if (d1 < 0) d1 += n;
  ZT_CHECK(d0 >= 0 && d0 < n && d1 >= 0 && d1 < n, "transpose(", d0, ", ", d1, ") out of range for ", str());
  Tensor t = *this;
  std::swap(t.shape_[d0], t.shape_[d1]);
  std::swap(t.strides_[d0], t.strides_[d1]);
  return t;
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  ZT_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute needs ", dim(), " dimensions, got ", dims.size());
  std::vector<bool> seen(dims.size(), false);
  Tensor t = *this;
  for (size_t i = 0; i < dims.size(); ++i) {
    ZT_CHECK(dims[i] >= 0 && dims[i] < dim() && !seen[dims[i]], "permute: invalid dims for ", str());
    seen[dims[i]] = true;
    t.shape_[i] = shape_[dims[i]];
    t.strides_[i] = strides_[dims[i]];
  }
  return t;
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  const int64_t n = dim();
  if (d < 0) d += n;
  ZT_CHECK(d >= 0 && d < n, "slice: dimension ", d, " out of range for ", str());
  ZT_CHECK(step >= 1, "slice: step must be >= 1, got ", step);
  const int64_t len = shape_[d];
  if (start < 0) start += len;
  if (end < 0) end += len;
  end = std::min(end, len);
  ZT_CHECK(start >= 0 && start <= end, "slice [", start, ", ", end, ") out of range for dimension ", d, " of ", str());
  Tensor t = *this;
  t.offset_ += start * strides_[d];
  t.shape_[d] = (end - start + step - 1) / step;
  t.strides_[d] *= step;
  return t;
}

Tensor Tensor::flat_view(int64_t offset, const Shape& shape) const {
  ZT_CHECK(is_contiguous(), "flat_view of non-contiguous ", str());
  ZT_CHECK(offset >= 0 && offset + shape_numel(shape) <= numel(), "flat_view [", offset, ", ",
           offset + shape_numel(shape), ") out of range for ", str());
  Tensor t = *this;
  t.offset_ += offset;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone(category());
}

Tensor Tensor::clone(Category c) const {
  Tensor t = empty(shape_, dtype_, c, backend_of(*this).allocator());
  t.copy_(*this);
  return t;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype_) return *this;
  Tensor t = empty(shape_, dt, category(), backend_of(*this).allocator());
  t.copy_(*this);
  return t;
}

Tensor Tensor::to(const Device& d, Category c) const {
  if (device() == d && is_contiguous()) return *this;
  Tensor t = empty(shape_, dtype_, c, backend(d).allocator());
  t.copy_(*this);
  return t;
}

void Tensor::copy_(const Tensor& src) {
  ZT_CHECK(defined() && src.defined(), "copy_ with an undefined tensor");
  ZT_CHECK(shape_ == src.shape_, "copy_: shape ", shape_str(src.shape_), " into ", shape_str(shape_));
  const Device dd = device(), sd = src.device();
  if (!dd.is_cpu() || !sd.is_cpu()) {  // a GPU on either side: the backends copy
    if (dd == sd) return backend(dd).copy(*this, src);
    ZT_CHECK(dd.is_cpu() || sd.is_cpu(), "copy_ between two devices (", sd.str(), " -> ", dd.str(),
             "): copy through the host");
    if (dd.is_cpu()) {  // device -> host: bring src over as it is, then convert on the host
      Tensor staged = src.is_contiguous() ? src : src.contiguous();
      if (dtype_ == src.dtype_ && is_contiguous()) return backend(sd).copy_to_host(*this, staged);
      Tensor host = empty(shape_, src.dtype_, Category::workspace, cpu_allocator());
      backend(sd).copy_to_host(host, staged);
      return copy_(host);
    }
    // host -> device: convert and compact on the host, then one transfer
    if (dtype_ == src.dtype_ && is_contiguous() && src.is_contiguous()) return backend(dd).copy_from_host(*this, src);
    Tensor host = empty(shape_, dtype_, Category::workspace, cpu_allocator());
    host.copy_(src);
    if (is_contiguous()) return backend(dd).copy_from_host(*this, host);
    Tensor dev = empty(shape_, dtype_, Category::workspace, backend(dd).allocator());
    backend(dd).copy_from_host(dev, host);
    return backend(dd).copy(*this, dev);
  }
  if (dtype_ == src.dtype_ && is_contiguous() && src.is_contiguous()) {
    if (nbytes()) std::memmove(raw(), src.raw(), nbytes());
    return;
  }
  char* dst = static_cast<char*>(raw());
  const char* s = static_cast<const char*>(src.raw());
  const size_t des = element_size(), ses = src.element_size();
  if (dtype_ == src.dtype_ && !shape_.empty() && strides_.back() == 1 && src.strides_.back() == 1) {
    // Rows contiguous on both sides (a column block of a wider matrix, e.g. attention's q | k | v):
    // one memcpy per row, the rows walked by for_each_index over the shape with the last dim 1.
    Shape rows = shape_;
    const size_t row_bytes = static_cast<size_t>(rows.back()) * des;
    rows.back() = 1;
    for_each_index(rows, strides_, src.strides_, [&](int64_t d, int64_t o) { std::memcpy(dst + d * des, s + o * ses, row_bytes); });
  } else if (dtype_ == src.dtype_) {
    for_each_index(shape_, strides_, src.strides_, [&](int64_t d, int64_t o) { std::memcpy(dst + d * des, s + o * ses, des); });
  } else {
    const DType dd = dtype_, sd = src.dtype_;
    for_each_index(shape_, strides_, src.strides_, [&](int64_t d, int64_t o) { store(dst + d * des, dd, load(s + o * ses, sd)); });
  }
}

void Tensor::zero_() {
  if (!device().is_cpu()) return backend_of(*this).fill(*this, 0.0);
  if (is_contiguous()) {
    if (nbytes()) std::memset(raw(), 0, nbytes());
  } else {
    fill_(0.0);
  }
}

void Tensor::fill_(double value) {
  if (!device().is_cpu()) return backend_of(*this).fill(*this, value);
  char* dst = static_cast<char*>(raw());
  const size_t es = element_size();
  const DType dt = dtype_;
  for_each_index(shape_, strides_, strides_, [&](int64_t d, int64_t) { store(dst + d * es, dt, value); });
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dt, Category c) {
  ZT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "from_vector: ", values.size(),
           " values for shape ", shape_str(shape));
  Tensor t = empty(shape, dt, c, cpu_allocator());
  char* dst = static_cast<char*>(t.raw());
  for (size_t i = 0; i < values.size(); ++i) store(dst + i * t.element_size(), dt, values[i]);
  return default_device().is_cpu() ? t : t.to(default_device(), c);
}

}  // namespace zt
