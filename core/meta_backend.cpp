// defines: op_class_name, MetaAllocator (allocate, deallocate), MetaBackend (constructor, set_threads,
//          every row of core/backend_ops.def), meta_backend (core/meta_backend.h); file-local:
//          takes_strides, has_host_arg, stands_in, check_arg, add_tensor, stand_in, with_stand_ins,
//          answer, scratch, rule (the rows' scratch rules), generic_rule, g_depth, run_row
//
// Every row is generated from core/backend_ops.def: its tensor arguments are checked (on a meta
// device, contiguous unless the row takes strides), then the row's rule runs. The generic rule
// counts bfloat16's float32 stand-ins where the CPU backend makes them; a row whose CPU kernel
// allocates inside the op has its own rule below, naming the size rule it shares with the kernel.
// Composite rows (the CPU backend builds them from other rows) call the same rows here.
#include "core/meta_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <omp.h>

#include <type_traits>
#include <vector>

#include "core/attention_packed.h"
#include "core/cpu_bf16.h"
#include "core/kernels/attention.h"
#include "core/kernels/norm.h"
#include "core/meta_op_record.h"

namespace zt {

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::attention: return "attention";
    case OpClass::norm: return "norm";
    case OpClass::loss: return "loss";
    case OpClass::elementwise: return "elementwise";
    case OpClass::optimizer: return "optimizer";
    case OpClass::transfer: return "transfer";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// The allocator

void* MetaAllocator::allocate(size_t bytes, Category c) {
  account_alloc(bytes, c);  // the cap, if any, throws here exactly as the real allocator's
  if (bytes == 0) return nullptr;
  if (observer_) observer_->on_alloc(bytes, c);
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    account_free(bytes, c);
    ZT_THROW("meta allocator ", name_, ": no address space left for ", format_bytes(static_cast<int64_t>(bytes)),
             " of '", category_name(c),
             "' (the dry run reserves an address range per live allocation; held now: ", stats().to_string(), ")");
  }
  return p;
}

void MetaAllocator::deallocate(void* p, size_t bytes, Category c) {
  if (p) munmap(p, bytes);
  account_free(bytes, c);
}

// ---------------------------------------------------------------------------------------------
// The backend

MetaBackend::MetaBackend()
    : threads_(omp_get_max_threads()), alloc_("meta", Device::meta()), host_alloc_("meta host", Device::meta()) {}

void MetaBackend::set_threads(int threads) {
  ZT_CHECK(threads >= 1, "meta backend: threads = ", threads, " (expected >= 1)");
  threads_ = threads;
}

MetaBackend& meta_backend() {
  static MetaBackend b;
  return b;
}

namespace {

using namespace ::zt::meta;  // MetaOp, Row, record_of (core/meta_op_record.h)

// The rows whose tensors may be views with any strides (core/backend_ops.def says so per row).
constexpr bool takes_strides(MetaOp op) { return op == MetaOp::copy || op == MetaOp::fill || op == MetaOp::accumulate; }
// The rows with host arguments (`*_host`): a cpu tensor, or the meta host tier's.
constexpr bool has_host_arg(MetaOp op) { return op == MetaOp::copy_from_host || op == MetaOp::copy_to_host; }

// The rows the CPU backend runs on float32 stand-ins of their bfloat16 tensors (core/cpu_bf16.h).
constexpr bool stands_in(MetaOp op) {
  switch (op) {
    case MetaOp::copy:
    case MetaOp::copy_from_host:
    case MetaOp::copy_to_host:
    case MetaOp::fill:
    case MetaOp::cast:
    case MetaOp::accumulate_cast:
    case MetaOp::all_finite:
    case MetaOp::sum_of_squares:
    case MetaOp::quantize:
    case MetaOp::dequantize:
    case MetaOp::linear_gelu:
    case MetaOp::linear_dgelu_backward:
    case MetaOp::residual_layernorm:
    case MetaOp::residual_rmsnorm:
    case MetaOp::rope_tables:
    case MetaOp::attention_packed:
    case MetaOp::attention_packed_backward:
    case MetaOp::adamw_step:
    case MetaOp::sgd_step: return false;
    default: return true;
  }
}

template <class A> void check_arg(const char*, MetaOp, const A&) {}  // not a tensor

void check_arg(const char* name, MetaOp op, const Tensor& t) {
  if (!t.defined()) return;
  const Device d = t.device();
  ZT_CHECK(d.is_meta() || (has_host_arg(op) && d.is_cpu()), "meta backend ", name, ": tensor ", t.str(), " is on ",
           d.str(), ", not on a meta device");
  ZT_CHECK(takes_strides(op) || t.is_contiguous(), "meta backend ", name, ": tensor ", t.str(),
           " is not contiguous (the row takes contiguous tensors)");
}

template <class A> void add_tensor(std::vector<const Tensor*>&, const A&) {}
void add_tensor(std::vector<const Tensor*>& ts, const Tensor& t) { ts.push_back(&t); }
template <class A> const A& stand_in(const Bf16StandIns&, const A& a) { return a; }
const Tensor& stand_in(const Bf16StandIns& f, const Tensor& t) { return f(t); }

// The row again on float32 stand-ins of its bfloat16 tensors, counted on the meta device as the
// CPU backend allocates them (its own allocator: the device's); `active` false when there are none.
template <class R, class... P, class... A>
R with_stand_ins(MetaBackend& be, R (MetaBackend::*row)(P...), bool& active, const A&... a) {
  std::vector<const Tensor*> ts;
  (add_tensor(ts, a), ...);
  Bf16StandIns f(ts, be.allocator());
  active = f.active();
  if (!active) return R();
  return (be.*row)(stand_in(f, a)...);
}

template <class R> R answer() {
  if constexpr (std::is_same_v<R, bool>) return true;        // all_finite
  else if constexpr (std::is_same_v<R, double>) return 0.0;  // sum_of_squares
  else if constexpr (!std::is_void_v<R>) static_assert(!sizeof(R), "a row returning a tensor needs its own rule");
}

// A buffer of the op's own, on the meta device: the rules below hold each in a named local for
// the op's duration, as the kernel holds it, and free it on return.
Tensor scratch(MetaBackend& be, const Shape& s, DType dt, Category c = Category::workspace) {
  return Tensor::empty(s, dt, c, be.allocator());
}

// ---- the rules of the rows that allocate inside the op (the CPU backend's, line for line) ----

// attention: lse (B, Hq, T) kept for the backward, the kernel's per-thread tiles while it runs.
Tensor rule(Row<MetaOp::attention>, MetaBackend& be, const Tensor& out, const Tensor& q, const Tensor& k,
            const Tensor& v, bool keep) {
  bool bf16 = false;
  Tensor saved = with_stand_ins(be, &MetaBackend::attention, bf16, out, q, k, v, keep);
  if (bf16) return saved;
  const int64_t B = q.size(0), T = q.size(1), Hq = q.size(2), D = q.size(3);
  Tensor lse = keep ? scratch(be, {B, Hq, T}, q.dtype(), Category::activations) : Tensor();
  if (B * T * Hq * D != 0) scratch(be, {be.threads(), attention_forward_scratch(T)}, q.dtype());
  return lse;
}

void rule(Row<MetaOp::attention_backward>, MetaBackend& be, const Tensor& dq, const Tensor& dk, const Tensor& dv,
          const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
          const Tensor& saved) {
  std::vector<const Tensor*> ts = {&dq, &dk, &dv, &dout, &q, &k, &v, &out, &saved};
  if (Bf16StandIns f(ts, be.allocator()); f.active()) {  // out recomputed in float32 first
    Tensor out32 = out.dtype() == DType::bf16 ? scratch(be, q.shape(), DType::f32) : f(out);
    if (out.dtype() == DType::bf16) be.attention(out32, f(q), f(k), f(v), false);
    return be.attention_backward(f(dq), f(dk), f(dv), f(dout), f(q), f(k), f(v), out32, f(saved));
  }
  const int64_t B = q.size(0), T = q.size(1), Hq = q.size(2), D = q.size(3), Hkv = k.size(2);
  if (B * T * Hq * D == 0) return;
  Tensor tiles = scratch(be, {be.threads(), attention_backward_scratch(T)}, q.dtype());
  if (Hq > Hkv) {  // each query head's dK, dV before the group's sum
    Tensor dkh = scratch(be, {B, Hq, T, D}, q.dtype()), dvh = scratch(be, {B, Hq, T, D}, q.dtype());
  }
}

Tensor rule(Row<MetaOp::attention_packed>, MetaBackend& be, const Tensor& out, const Tensor& qkv, int64_t Hq,
            int64_t Hkv, bool keep) {
  return attention_packed_by_copies(be, out, qkv, Hq, Hkv, keep);
}

void rule(Row<MetaOp::attention_packed_backward>, MetaBackend& be, const Tensor& dqkv, const Tensor& dout,
          const Tensor& qkv, const Tensor& out, const Tensor& saved, int64_t Hq, int64_t Hkv) {
  attention_packed_backward_by_copies(be, dqkv, dout, qkv, out, saved, Hq, Hkv);
}

// The norms' backward: with dres, the norm's own dx (an activation-sized buffer) then one add;
// else the partial sums (chunks, C) for dw and for db.
void rule(Row<MetaOp::layernorm_backward>, MetaBackend& be, const Tensor& dx, const Tensor& dw, const Tensor& db,
          const Tensor& dout, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
          const Tensor& dres) {
  if (dres.defined()) {
    Tensor own = scratch(be, dx.shape(), dx.dtype(), Category::activations);
    be.layernorm_backward(own, dw, db, dout, x, w, mean, rstd);
    return be.binary(BinaryOp::add, dx, dres, own);
  }
  bool bf16 = false;
  with_stand_ins(be, &MetaBackend::layernorm_backward, bf16, dx, dw, db, dout, x, w, mean, rstd, dres);
  if (bf16 || x.numel() == 0) return;
  const int64_t C = x.size(-1), N = x.numel() / C;
  Tensor pw = dw.defined() ? scratch(be, {norm_backward_chunks(N), C}, x.dtype()) : Tensor();
  Tensor pb = db.defined() ? scratch(be, {norm_backward_chunks(N), C}, x.dtype()) : Tensor();
}

void rule(Row<MetaOp::rmsnorm_backward>, MetaBackend& be, const Tensor& dx, const Tensor& dw, const Tensor& dout,
          const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dres) {
  if (dres.defined()) {
    Tensor own = scratch(be, dx.shape(), dx.dtype(), Category::activations);
    be.rmsnorm_backward(own, dw, dout, x, w, rstd);
    return be.binary(BinaryOp::add, dx, dres, own);
  }
  bool bf16 = false;
  with_stand_ins(be, &MetaBackend::rmsnorm_backward, bf16, dx, dw, dout, x, w, rstd, dres);
  if (bf16 || x.numel() == 0) return;
  const int64_t C = x.size(-1), N = x.numel() / C;
  Tensor pw = dw.defined() ? scratch(be, {norm_backward_chunks(N), C}, x.dtype()) : Tensor();
}

// The fused classifier's per-row log-sum-exp (N).
void rule(Row<MetaOp::cross_entropy_and_grad>, MetaBackend& be, const Tensor& loss, const Tensor& logits,
          const Tensor& targets, int64_t valid_vocab, int64_t count) {
  bool bf16 = false;
  with_stand_ins(be, &MetaBackend::cross_entropy_and_grad, bf16, loss, logits, targets, valid_vocab, count);
  ZT_CHECK(logits.dim() >= 1 && logits.size(-1) >= 1, "meta backend cross_entropy_and_grad: logits ", logits.str(),
           " have no columns");
  if (!bf16) scratch(be, {logits.numel() / logits.size(-1)}, logits.dtype());  // lse (N), held while the op runs
}

// The composite rows: the rows the CPU backend builds them from, in its order.
void rule(Row<MetaOp::linear_gelu>, MetaBackend& be, const Tensor& y, const Tensor& pre, const Tensor& x,
          const Tensor& w, const Tensor& b) {
  be.linear(pre, x, w, b);
  be.gelu(y, pre);
}

void rule(Row<MetaOp::linear_dgelu_backward>, MetaBackend& be, const Tensor& dpre, const Tensor& db, const Tensor& dy,
          const Tensor& w, const Tensor& pre, bool) {
  be.linear_backward(dpre, Tensor(), Tensor(), dy, Tensor(), w, false);
  be.gelu_backward(dpre, dpre, pre);
  if (db.defined()) Bf16StandIns f({&db, &dpre}, be.allocator());  // the column sums in float32
}

void rule(Row<MetaOp::residual_layernorm>, MetaBackend& be, const Tensor& h, const Tensor& out, const Tensor& mean,
          const Tensor& rstd, const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& b, double eps) {
  if (x.dtype() != DType::bf16) return;  // one pass, no scratch
  be.binary(BinaryOp::add, h, x, y);
  be.layernorm(out, mean, rstd, h, w, b, eps);
}

void rule(Row<MetaOp::residual_rmsnorm>, MetaBackend& be, const Tensor& h, const Tensor& out, const Tensor& rstd,
          const Tensor& x, const Tensor& y, const Tensor& w, double eps) {
  if (x.dtype() != DType::bf16) return;
  be.binary(BinaryOp::add, h, x, y);
  be.rmsnorm(out, rstd, h, w, eps);
}

// copy_to_host into real host memory: zeros (the documented answer); into the meta host tier, nothing.
void rule(Row<MetaOp::copy_to_host>, MetaBackend&, const Tensor& dst_host, const Tensor&) {
  if (dst_host.device().is_cpu() && dst_host.nbytes()) Tensor(dst_host).zero_();
}

// Every other row: bfloat16's stand-ins where the CPU makes them, then the row's fixed answer.
template <MetaOp op, class R, class... P, class... A>
R generic_rule(MetaBackend& be, R (MetaBackend::*row)(P...), const A&... a) {
  if constexpr (stands_in(op)) {
    bool bf16 = false;  // with bfloat16 tensors the row ran again on their stand-ins
    with_stand_ins(be, row, bf16, a...);
  }
  return answer<R>();
}

// The generic rule is chosen when no rule above matches the row's tag exactly.
template <MetaOp op, class... A> void rule(Row<op>, MetaBackend&, const A&...) = delete;

// The depth of rows in progress on this thread: only the outermost is reported.
thread_local int g_depth = 0;

template <MetaOp op, class R, class... P, class... A>
R run_row(const char* name, MetaBackend& be, R (MetaBackend::*row)(P...), R (Backend::*base_row)(P...), const A&... a) {
  (check_arg(name, op, a), ...);
  if (g_depth == 0 && be.observer()) be.observer()->on_op(record_of<op>(name, base_row, a...));
  struct Depth {
    Depth() { ++g_depth; }
    ~Depth() { --g_depth; }
  } depth;
  if constexpr (requires { rule(Row<op>{}, be, a...); }) {
    return rule(Row<op>{}, be, a...);
  } else {
    return generic_rule<op>(be, row, a...);
  }
}

#define ZT_EXPAND_ARGS(...) __VA_ARGS__

}  // namespace

#define ZT_OP_DEFAULT(v)
#define ZT_BACKEND_OP(ret, name, params, args)                                                           \
  ret MetaBackend::name params {                                                                         \
    return run_row<MetaOp::name>(#name, *this, &MetaBackend::name, &Backend::name, ZT_EXPAND_ARGS args); \
  }
#include "core/backend_ops.def"

}  // namespace zt
