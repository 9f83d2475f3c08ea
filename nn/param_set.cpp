// defines: ParamSet (constructor, add, finalize, find, value and 6 more) (nn/param_set.h)
#include "nn/param_set.h"

#include <algorithm>

namespace zt {

ParamSet::ParamSet(std::string unit_name, DType dtype)
    : unit_name_(std::move(unit_name)), dtype_(dtype), group_(std::make_shared<LeafGroup>()) {
  ZT_CHECK(dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16, "ParamSet '", unit_name_,
           "': parameters are float32, float64 or bfloat16, got ", dtype_name(dtype));
  group_->name = unit_name_;
}

int ParamSet::add(const std::string& name, const Shape& shape, bool decay) {
  ZT_CHECK(!finalized(), "ParamSet '", unit_name_, "': add('", name, "') after finalize()");
  ZT_CHECK(find(name) < 0, "ParamSet '", unit_name_, "': duplicate parameter '", name, "'");
  ParamInfo p{name, shape, numel_, shape_numel(shape), decay, {}};
  numel_ += p.numel;
  infos_.push_back(std::move(p));
  return static_cast<int>(infos_.size()) - 1;
}

void ParamSet::set_slice(int i, const TensorSlice& t) {
  ZT_CHECK(!finalized(), "ParamSet '", unit_name_, "': set_slice after finalize()");
  ZT_CHECK(i >= 0 && i < size(), "ParamSet '", unit_name_, "': no parameter ", i);
  const ParamInfo& p = infos_[static_cast<size_t>(i)];
  ZT_CHECK(t.whole() || (t.dim < static_cast<int>(p.shape.size()) && t.groups >= 1 && t.parts >= 1 && t.part >= 0 &&
                         t.part < t.parts && t.replicas >= 1 && p.shape[static_cast<size_t>(t.dim)] % t.groups == 0),
           "ParamSet '", unit_name_, "': '", p.name, "' ", shape_str(p.shape), " cannot be piece ", t.part, " of ",
           t.parts, " of ", t.groups, " block(s) along dim ", t.dim);
  infos_[static_cast<size_t>(i)].slice = t;
}

Shape TensorSlice::full_shape(const Shape& local) const {
  Shape s = local;
  if (!whole()) s[static_cast<size_t>(dim)] *= parts;
  return s;
}

namespace {
// local viewed as (outer, L, inner) around dim d, L = groups * Lb.
struct SliceDims {
  int64_t L = 1, Lb = 1, inner = 1;
};
SliceDims slice_dims(const TensorSlice& t, const Shape& local) {
  SliceDims s;
  s.L = local[static_cast<size_t>(t.dim)];
  s.Lb = s.L / t.groups;
  for (size_t d = static_cast<size_t>(t.dim) + 1; d < local.size(); ++d) s.inner *= local[d];
  return s;
}
}  // namespace

int64_t TensorSlice::full_index(const Shape& local, int64_t k) const {
  if (whole()) return k;
  const SliceDims s = slice_dims(*this, local);
  const int64_t c = k % s.inner, j = (k / s.inner) % s.L, a = k / (s.inner * s.L);
  const int64_t jf = (j / s.Lb) * s.Lb * parts + part * s.Lb + j % s.Lb;
  return (a * s.L * parts + jf) * s.inner + c;
}

int64_t TensorSlice::run_length(const Shape& local, int64_t k) const {
  if (whole()) return shape_numel(local) - k;
  const SliceDims s = slice_dims(*this, local);
  const int64_t seg = s.Lb * s.inner;  // one block's piece of one outer index: consecutive in both
  return seg - k % seg;
}

TensorSlice::Place TensorSlice::locate(const Shape& local, int64_t g) const {
  if (whole()) return {0, g, shape_numel(local) - g};
  const SliceDims s = slice_dims(*this, local);
  const int64_t Lf = s.L * parts;  // the full dim
  const int64_t c = g % s.inner, jf = (g / s.inner) % Lf, a = g / (s.inner * Lf);
  const int64_t block = jf / (s.Lb * parts), within = jf % (s.Lb * parts);
  const int64_t o = within % s.Lb, j = block * s.Lb + o;
  return {within / s.Lb, (a * s.L + j) * s.inner + c, (s.Lb - o) * s.inner - c};
}

void ParamSet::finalize(int64_t world_size, int64_t alignment, bool materialize) {
  ZT_CHECK(!finalized(), "ParamSet '", unit_name_, "': finalize() twice");
  ZT_CHECK(world_size >= 1 && alignment >= 1, "ParamSet::finalize: world_size and alignment must be >= 1");
  const int64_t m = world_size * alignment;
  padded_numel_ = (numel_ + m - 1) / m * m;
  if (padded_numel_ == 0) padded_numel_ = m;  // every rank owns a non-empty shard
  built_with_bytes_ = materialize;
  if (materialize) {
    flat_ = Tensor::zeros({padded_numel_}, dtype_, Category::params);
    flat_grad_ = Tensor::zeros({padded_numel_}, dtype_, Category::grads);
  } else {
    flat_ = Tensor::released({padded_numel_}, dtype_, Category::params);
    flat_grad_ = Tensor::released({padded_numel_}, dtype_, Category::grads);
  }
  build_vars();
}

int ParamSet::find(const std::string& name) const {
  for (size_t i = 0; i < infos_.size(); ++i)
    if (infos_[i].name == name) return static_cast<int>(i);
  return -1;
}

Tensor ParamSet::value(int i) const {
  ZT_CHECK(finalized() && i >= 0 && i < size(), "ParamSet '", unit_name_, "': no parameter ", i);
  return flat_.flat_view(infos_[i].offset, infos_[i].shape);
}

Tensor ParamSet::grad(int i) const {
  ZT_CHECK(finalized() && i >= 0 && i < size(), "ParamSet '", unit_name_, "': no parameter ", i);
  return flat_grad_.flat_view(infos_[i].offset, infos_[i].shape);
}

const Var& ParamSet::var(int i) const {
  ZT_CHECK(finalized() && i >= 0 && i < size(), "ParamSet '", unit_name_, "': no parameter ", i);
  return vars_[i];
}

Var ParamSet::var_rows(int i, int64_t row0, int64_t rows) const {
  const ParamInfo& p = infos_.at(i);
  ZT_CHECK(!p.shape.empty() && row0 >= 0 && row0 + rows <= p.shape[0], "ParamSet '", unit_name_,
           "': rows [", row0, ", ", row0 + rows, ") of '", p.name, "' ", shape_str(p.shape));
  Shape s = p.shape;
  s[0] = rows;
  const int64_t off = p.offset + row0 * (p.numel / p.shape[0]);
  return Var::parameter(flat_.flat_view(off, s), flat_grad_.flat_view(off, s), group_);
}

Var ParamSet::var_span(int i, int count) const {
  ZT_CHECK(count >= 1 && i >= 0 && i + count <= size(), "ParamSet '", unit_name_, "': parameters [", i, ", ", i + count,
           ") of ", size());
  const ParamInfo& first = infos_[i];
  ZT_CHECK(!first.shape.empty(), "ParamSet '", unit_name_, "': '", first.name, "' is a scalar: no rows to stack");
  Shape s = first.shape;
  for (int j = i + 1; j < i + count; ++j) {
    const ParamInfo& p = infos_[j];
    ZT_CHECK(p.shape.size() == s.size() && std::equal(s.begin() + 1, s.end(), p.shape.begin() + 1), "ParamSet '",
             unit_name_, "': '", p.name, "' ", shape_str(p.shape), " does not stack under '", first.name, "' ",
             shape_str(first.shape), " (every dimension after the first must match)");
    ZT_CHECK(p.offset == infos_[j - 1].offset + infos_[j - 1].numel, "ParamSet '", unit_name_, "': '", p.name,
             "' does not follow '", infos_[j - 1].name, "' in the flat buffer");
    s[0] += p.shape[0];
  }
  return Var::parameter(flat_.flat_view(first.offset, s), flat_grad_.flat_view(first.offset, s), group_);
}

void ParamSet::build_vars() {
  vars_.clear();
  for (int i = 0; i < size(); ++i) vars_.push_back(Var::parameter(value(i), grad(i), group_));
}

void ParamSet::fresh_grad() {
  flat_grad_.storage()->materialize();
  flat_grad_.zero_();
}

void ParamSet::zero_grad() {
  if (flat_grad_.defined() && flat_grad_.storage()->resident()) flat_grad_.zero_();
}

}  // namespace zt
