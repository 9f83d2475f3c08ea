// defines: MetaOp, Row, op_class, TensorSpec, spec, replay_fill_value, make_filled, make_varied, make,
//          key_part, numel_of, flops_of, causal_attention, record_of — what each row of the meta
//          device is, for the step simulator (train/step_time.h): its class, its arithmetic, its
//          bytes, its key, and its replay on a real backend (core/meta_backend.h's MetaOpRecord).
//          Included by core/meta_backend.cpp, which reports the outermost row of each op (and its
//          test).
#pragma once
#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>

#include "core/backend.h"
#include "core/meta_backend.h"
#include "core/rng.h"

namespace zt::meta {

// One enumerator per row of core/backend_ops.def, and a tag type per row (the rules' overloads).
enum class MetaOp {
#define ZT_BACKEND_OP(ret, name, params, args) name,
#include "core/backend_ops.def"
};
template <MetaOp op> struct Row {};

constexpr OpClass op_class(MetaOp op) {
  switch (op) {
    case MetaOp::gemm:
    case MetaOp::linear:
    case MetaOp::linear_backward:
    case MetaOp::linear_gelu:
    case MetaOp::linear_dgelu_backward: return OpClass::gemm;
    case MetaOp::attention:
    case MetaOp::attention_backward:
    case MetaOp::attention_packed:
    case MetaOp::attention_packed_backward: return OpClass::attention;
    case MetaOp::layernorm:
    case MetaOp::layernorm_backward:
    case MetaOp::rmsnorm:
    case MetaOp::rmsnorm_backward:
    case MetaOp::residual_layernorm:
    case MetaOp::residual_rmsnorm: return OpClass::norm;
    case MetaOp::softmax:
    case MetaOp::softmax_backward:
    case MetaOp::cross_entropy:
    case MetaOp::cross_entropy_backward:
    case MetaOp::cross_entropy_and_grad: return OpClass::loss;
    case MetaOp::adamw_step:
    case MetaOp::sgd_step: return OpClass::optimizer;
    case MetaOp::copy_from_host:
    case MetaOp::copy_to_host: return OpClass::transfer;
    default: return OpClass::elementwise;
  }
}

// A tensor argument as the replay remakes it: its shape and dtype (undefined stays undefined),
// whether it is the row's host argument (copy_from_host's source, copy_to_host's destination: made
// in the backend's pinned host memory), and, for a contiguous one, where it lies in its meta
// allocation (the key of the buffer a shared replay gives it: core/meta_backend.h's ReplayBuffers).
struct TensorSpec {
  bool defined = false;
  Shape shape;
  DType dtype = DType::f32;
  bool host = false;
  const void* allocation = nullptr;  // the meta storage's address; null: never shared
  size_t allocation_bytes = 0;
  int64_t offset = 0;  // in elements of dtype
};
template <class A> A spec(const A& a) { return a; }
inline TensorSpec spec(const Tensor& t) {
  if (!t.defined()) return {};
  TensorSpec s{true, t.shape(), t.dtype()};
  if (t.numel() > 0 && t.is_contiguous() && t.storage()->owned()) {
    s.allocation = t.storage()->data();
    s.allocation_bytes = t.storage()->bytes();
    s.offset = t.offset();
  }
  return s;
}
template <class A> const A& make(Backend&, const A& a, ReplayBuffers*) { return a; }
// The values it is filled with: 0.5 in a floating-point tensor, so that a kernel whose work depends
// on its data takes its general path (a block of zeros quantizes without dividing or rounding: a
// replay on zeros timed ZeRO++'s quantization at a quarter of its cost in training); 0 in an
// integer one, which is a valid index, token or code for every row.
inline double replay_fill_value(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16 ? 0.5 : 0.0;
}
inline Tensor make_filled(Backend& be, const Shape& shape, DType dt, bool host) {
  Tensor t = Tensor::empty(shape, dt, Category::workspace, host ? be.host_allocator(true) : be.allocator());
  if (t.numel() == 0) return t;
  if (host) t.fill_(replay_fill_value(dt));  // host memory: written by the CPU
  else be.fill(t, replay_fill_value(dt));
  return t;
}
// The same with values like a step's weights and gradients: N(0, 1) draws (a fixed seed), so
// that a row whose time depends on its values takes every path it takes in training. A block of
// 0.5s is one code, and its rounding takes one branch every time; a block of normal values has one
// outlier for its scale and most values far below it, so its codes spread over the whole range and
// rounding takes each of its branches (bench/results/simulate.md says what it changed). Floating-
// point tensors of float32 and float64, which the rows that need it take (Rng's fill); others as
// make_filled makes them.
inline Tensor make_varied(Backend& be, const Shape& shape, DType dt, bool host) {
  if (dt != DType::f32 && dt != DType::f64) return make_filled(be, shape, dt, host);
  Tensor h = Tensor::empty(shape, dt, Category::workspace, be.host_allocator(true));
  if (h.numel() == 0) return h;
  Rng(0x5eed).fill_normal(h, 0, 1);
  if (host) return h;
  Tensor t = Tensor::empty(shape, dt, Category::workspace, be.allocator());
  be.copy_from_host(t, h);
  be.synchronize();  // h is freed on return
  return t;
}
// The argument's tensor: with `shared`, a view of its allocation's buffer there (the first use
// makes the whole allocation's buffer, on its own device and tier, and fills it, while the
// buffers stay within shared->max_bytes); else its own.
inline Tensor make(Backend& be, const TensorSpec& s, ReplayBuffers* shared) {
  if (!s.defined) return Tensor();
  if (!shared || !s.allocation) return make_filled(be, s.shape, s.dtype, s.host);
  const std::tuple<const void*, size_t, DType> key{s.allocation, s.allocation_bytes, s.dtype};
  auto it = shared->by_allocation.find(key);
  if (it == shared->by_allocation.end()) {
    const int64_t bytes = static_cast<int64_t>(s.allocation_bytes);
    if (shared->bytes + bytes > shared->max_bytes) return make_filled(be, s.shape, s.dtype, s.host);
    it = shared->by_allocation
             .emplace(key, make_filled(be, {bytes / static_cast<int64_t>(dtype_size(s.dtype))}, s.dtype, s.host))
             .first;
    shared->bytes += bytes;
  }
  return it->second.flat_view(s.offset, s.shape);
}

// The key's part of one argument: a tensor's dtype and shape, a number, a GEMM's shape; the
// hyperparameters of an update and RoPE's tables change nothing of the work.
template <class A> void key_part(std::ostream&, const A&) {}
inline void key_part(std::ostream& o, const Tensor& t) {
  o << ' ' << (t.defined() ? std::string(dtype_name(t.dtype())) + shape_str(t.shape()) : std::string("-"));
}
inline void key_part(std::ostream& o, bool v) { o << ' ' << v; }
inline void key_part(std::ostream& o, int v) { o << ' ' << v; }
inline void key_part(std::ostream& o, int64_t v) { o << ' ' << v; }
inline void key_part(std::ostream& o, BinaryOp v) { o << " op" << static_cast<int>(v); }
inline void key_part(std::ostream& o, const GemmShape& g) {
  o << " gemm(" << g.trans_a << g.trans_b << ' ' << g.M << 'x' << g.N << 'x' << g.K << " batch " << g.batch << " beta "
    << g.beta << ')';
}

// The rows' arithmetic (MetaOpRecord::flops). The generic rule: a few operations per element of
// the largest tensor (elementwise 1, the others by what they compute per element).
template <class A> int64_t numel_of(const A&) { return 0; }
inline int64_t numel_of(const Tensor& t) { return t.defined() ? t.numel() : 0; }
template <MetaOp op, class... A> double flops_of(Row<op>, const A&... a) {
  int64_t n = 0;
  ((n = std::max(n, numel_of(a))), ...);
  constexpr OpClass c = op_class(op);
  const double per = c == OpClass::norm ? 8 : c == OpClass::loss ? 6 : c == OpClass::optimizer ? 12 : 1;
  return per * static_cast<double>(n);
}
inline double causal_attention(int64_t B, int64_t T, int64_t H, int64_t D) {  // one product over the causal half
  return static_cast<double>(B) * H * T * T * D;
}
inline double flops_of(Row<MetaOp::gemm>, const GemmShape& g, const Tensor&, const Tensor&, const Tensor&) {
  return 2.0 * g.M * g.N * g.K * g.batch;
}
inline double flops_of(Row<MetaOp::linear>, const Tensor& y, const Tensor& x, const Tensor&, const Tensor&) {
  return 2.0 * y.numel() * x.size(-1);
}
inline double flops_of(Row<MetaOp::linear_backward>, const Tensor& dx, const Tensor& dw, const Tensor&,
                       const Tensor& dy, const Tensor&, const Tensor& w, bool) {
  const double in = dy.size(-1) ? static_cast<double>(w.numel()) / dy.size(-1) : 0;
  return (dx.defined() + dw.defined()) * 2.0 * dy.numel() * in;
}
inline double flops_of(Row<MetaOp::linear_gelu>, const Tensor& y, const Tensor&, const Tensor& x, const Tensor&,
                       const Tensor&) {
  return 2.0 * y.numel() * x.size(-1);
}
inline double flops_of(Row<MetaOp::linear_dgelu_backward>, const Tensor& dpre, const Tensor&, const Tensor& dy,
                       const Tensor&, const Tensor&, bool) {
  return 2.0 * dpre.numel() * dy.size(-1);
}
inline double flops_of(Row<MetaOp::attention>, const Tensor&, const Tensor& q, const Tensor&, const Tensor&, bool) {
  return 2 * causal_attention(q.size(0), q.size(1), q.size(2), q.size(3));
}
inline double flops_of(Row<MetaOp::attention_backward>, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor& q, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  return 5 * causal_attention(q.size(0), q.size(1), q.size(2), q.size(3));
}
inline double flops_of(Row<MetaOp::attention_packed>, const Tensor&, const Tensor& qkv, int64_t Hq, int64_t Hkv, bool) {
  return 2 * causal_attention(qkv.size(0), qkv.size(1), Hq, qkv.size(2) / (Hq + 2 * Hkv));
}
inline double flops_of(Row<MetaOp::attention_packed_backward>, const Tensor&, const Tensor&, const Tensor& qkv,
                       const Tensor&, const Tensor&, int64_t Hq, int64_t Hkv) {
  return 5 * causal_attention(qkv.size(0), qkv.size(1), Hq, qkv.size(2) / (Hq + 2 * Hkv));
}

template <MetaOp op, class R, class... P, class... A>
MetaOpRecord record_of(const char* name, R (Backend::*row)(P...), const A&... a) {
  MetaOpRecord r;
  r.row = name;
  r.cls = op_class(op);
  r.flops = flops_of(Row<op>{}, a...);
  auto bytes = [](const auto& x) -> int64_t {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Tensor>) return x.defined() ? x.nbytes() : 0;
    else return 0;
  };
  ((r.bytes += bytes(a)), ...);
  if constexpr (op_class(op) != OpClass::transfer) {
    int tensors = 0, on_host = 0;
    Allocator* host = &meta_backend().host_allocator(false);
    auto count = [&](const auto& x) {
      if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Tensor>)
        if (x.defined() && x.numel() > 0) ++tensors, on_host += x.storage()->allocator() == host;
    };
    (count(a), ...);
    r.host = tensors > 0 && on_host == tensors;
    if (on_host > 0 && on_host < tensors) r.cls = OpClass::transfer;  // it moves bytes between the tiers
  }
  std::ostringstream key;
  key << (r.host ? "host " : "") << name;
  (key_part(key, a), ...);
  r.key = key.str();
  auto specs = std::make_tuple(spec(a)...);
  if constexpr (op == MetaOp::copy_from_host) std::get<1>(specs).host = true;
  if constexpr (op == MetaOp::copy_to_host) std::get<0>(specs).host = true;
  // Rows whose time depends on their values keep buffers of their own, filled with values like a
  // step's (make_varied), where a shared replay would hand them whatever its rows left (a
  // constant's layernorm is 0, and zeros quantize without dividing; a NaN ends all_finite's scan).
  constexpr bool own = op == MetaOp::quantize || op == MetaOp::dequantize || op == MetaOp::all_finite;
  r.prepare = [row, specs](Backend& be, ReplayBuffers* shared) -> std::function<void()> {
    auto one = [&](const auto& s) {
      if constexpr (own && std::is_same_v<std::decay_t<decltype(s)>, TensorSpec>)
        return s.defined ? make_varied(be, s.shape, s.dtype, s.host) : Tensor();
      else return make(be, s, shared);
    };
    auto made = std::apply([&](const auto&... s) { return std::make_tuple(one(s)...); }, specs);
    return [row, &be, made]() { std::apply([&](const auto&... t) { (be.*row)(t...); }, made); };
  };
  return r;
}

}  // namespace zt::meta
