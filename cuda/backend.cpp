// defines: CudaBackend (constructor, destructor, host_allocator, synchronize, host_waits and 14 more),
//          register_cuda_backend (cuda/backend.h); file-local: checked_allocator, need_here,
//          need_contiguous, layout, CudaTransfer
//
// CudaBackend (cuda/backend.h): construction, registration, and the memory entries of the table —
// copies (device <-> device through cuda/kernels/copy.h, host <-> device through cudaMemcpyAsync),
// fills, accumulate, casts, the shard norms (all_finite, sum_of_squares), ZeRO++'s block
// quantization, scale_, AdamW and SGD.
//
// Every entry makes the backend's device current for its CUDA calls (DeviceGuard: the caller's
// device is restored after) and queues its work on stream(), the allocator's stream; argument
// errors are ZT_CHECKs that throw before anything is queued.
//
// Host transfers: copy_from_host and copy_to_host wait for their copy (on the compute stream),
// pinned or not: the table promises that the host buffer may be reused (or read) at once.
// copy_from_host_async from page-locked memory (cudaHostAlloc'd, e.g. pinned_allocator(), or
// cudaHostRegister'd — asked through cudaPointerGetAttributes) runs on the transfer stream and
// returns at once; from pageable memory it is copy_from_host (the runtime may still read a
// pageable buffer through its staging path after cudaMemcpyAsync returns). copy_to_host_async
// into page-locked memory likewise, on a stream of its own (the two directions use different
// copy engines, so a parameter coming in and a gradient going out overlap).
#include "cuda/backend.h"

#include <algorithm>
#include <chrono>

#include "cuda/allocator.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/gemm.h"
#include "cuda/kernels/adamw.h"
#include "cuda/kernels/cast.h"
#include "cuda/kernels/copy.h"
#include "cuda/kernels/elementwise.h"
#include "cuda/kernels/quantize.h"
#include "cuda/kernels/reduce.h"
#include "cuda/kernels/sgd.h"

namespace zt {

namespace {

// The allocator of device `index`, after checking that the device exists and is supported: a
// zt::Error with cuda_runtime_summary()'s account of the machine otherwise.
CudaAllocator& checked_allocator(int index) {
  const std::vector<CudaDevice>& devs = cuda_devices();
  const CudaDevice* dev = nullptr;
  for (const CudaDevice& d : devs)
    if (d.index == index) dev = &d;
  if (!dev)
    ZT_THROW("no backend for device cuda:", index, ": ",
             devs.empty() ? std::string("no usable CUDA device")
                          : "no such device (" + std::to_string(devs.size()) + " visible)",
             "; ", cuda_runtime_summary());
  if (!dev->supported())
    ZT_THROW("no backend for device cuda:", index, ": ", dev->name, " is sm_", dev->major, dev->minor,
             ", ZeroTensor's kernels need sm_80 or newer; ", cuda_runtime_summary());
  return cuda_allocator(index);
}

void need_here(const CudaBackend& b, const Tensor& t, const char* op, const char* name) {
  ZT_CHECK(t.defined(), "cuda ", op, ": ", name, " is undefined");
  ZT_CHECK(t.device() == b.device(), "cuda ", op, ": ", name, " ", t.str(), " is on ", t.device().str(),
           ", expected ", b.device().str());
}

void need_contiguous(const Tensor& t, const char* op, const char* name) {
  ZT_CHECK(t.is_contiguous(), "cuda ", op, ": ", name, " ", t.str(), " is not contiguous");
}

cuda_kernels::StridedPair layout(const Tensor& dst, const Tensor& src) {
  return cuda_kernels::make_strided_pair(static_cast<int>(dst.dim()), dst.shape().data(), dst.strides().data(),
                                         src.strides().data());
}

}  // namespace

CudaBackend::CudaBackend(int index) : index_(index), alloc_(checked_allocator(index)) {}

CudaBackend::~CudaBackend() = default;  // CudaGemm is complete here (cuda/gemm.h)

Allocator& CudaBackend::host_allocator(bool pinned) {
  if (pinned) return pinned_allocator();
  return zt::host_allocator();
}

void CudaBackend::synchronize() {
  DeviceGuard g(index_);
  wait_for_stream();
}

void CudaBackend::wait_for_stream() {
  const auto t0 = std::chrono::steady_clock::now();
  ZT_CUDA_CHECK(cudaStreamSynchronize(stream()));
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
  waits_.fetch_add(1, std::memory_order_relaxed);
  waited_ns_.fetch_add(ns.count(), std::memory_order_relaxed);
}

CudaBackend::HostWaits CudaBackend::host_waits() const {
  return {waits_.load(std::memory_order_relaxed),
          1e-9 * static_cast<double>(waited_ns_.load(std::memory_order_relaxed))};
}

CudaGemm& CudaBackend::gemm_engine() {
  // Created once even if two host threads ask at once. The backend's kernels are launched from
  // one host thread (the training loop; the engine's communication threads only move bytes).
  std::call_once(gemm_once_, [this] {
    DeviceGuard g(index_);
    gemm_ = std::make_unique<CudaGemm>(alloc_);
  });
  return *gemm_;
}

Tensor CudaBackend::scratch(size_t bytes) {
  // int64 elements: 8-byte alignment for double partials (the allocator's blocks are 512-aligned)
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>((bytes + 7) / 8));
  return Tensor::empty({n}, DType::i64, Category::workspace, alloc_);
}

// ---- copies --------------------------------------------------------------------------------

void CudaBackend::copy(const Tensor& dst, const Tensor& src) {
  need_here(*this, dst, "copy", "dst");
  need_here(*this, src, "copy", "src");
  ZT_CHECK(dst.shape() == src.shape(), "cuda copy: shape ", shape_str(src.shape()), " into ", shape_str(dst.shape()));
  if (dst.numel() == 0) return;
  DeviceGuard g(index_);
  cuda_kernels::copy(dst.dtype(), dst.raw(), src.dtype(), src.raw(), layout(dst, src), stream());
}

void CudaBackend::copy_from_host(const Tensor& dst, const Tensor& src_host) {
  need_here(*this, dst, "copy_from_host", "dst");
  ZT_CHECK(src_host.defined() && src_host.device().is_cpu(), "cuda copy_from_host: src ", src_host.str(),
           " must be a cpu tensor");
  ZT_CHECK(dst.dtype() == src_host.dtype() && dst.numel() == src_host.numel(), "cuda copy_from_host: ",
           src_host.str(), " into ", dst.str(), ": expected the same dtype and number of elements");
  need_contiguous(dst, "copy_from_host", "dst");
  need_contiguous(src_host, "copy_from_host", "src");
  if (dst.nbytes() == 0) return;
  DeviceGuard g(index_);
  ZT_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src_host.raw(), dst.nbytes(), cudaMemcpyHostToDevice, stream()));
  // The table promises the host buffer may be reused on return: wait, pinned or not (a pinned
  // source would otherwise still be read by the DMA after we return).
  wait_for_stream();
}

namespace {
// A copy between page-locked host memory and the device on one of the transfer streams;
// `landed` is recorded after it there. It holds both buffers until wait(). Dropped without
// wait() (an exception path), the device buffer would go back to the caching allocator, whose
// free lists follow the compute stream, while the copy may still use it: so the destructor makes
// the compute stream wait for `landed` first. The page-locked host buffer, if this held its last
// reference, would go back to the pinned allocator's cache (cuda/allocator.h) and be handed out
// again while the copy may still read or write it: so the host waits for `landed` too. A host
// wait in a destructor, then, but only on that path; its error is dropped (a destructor does not
// throw; a broken context is named by the next call that can throw).
struct CudaTransfer final : Transfer {
  CudaEvent landed;
  cudaStream_t compute = nullptr;
  Tensor host, device;
  ~CudaTransfer() override {
    if (device.defined()) (void)cudaStreamWaitEvent(compute, landed.get(), 0);
    if (host.defined()) (void)cudaEventSynchronize(landed.get());
  }
  void wait() override {
    if (!host.defined()) return;
    landed.synchronize();
    host = Tensor();
    device = Tensor();
  }
};
}  // namespace

cudaStream_t CudaBackend::transfer_stream() {
  std::call_once(transfer_once_, [this] {
    DeviceGuard g(index_);
    transfer_ = CudaStream::create();
  });
  return transfer_.get();
}

cudaStream_t CudaBackend::to_host_stream() {
  std::call_once(to_host_once_, [this] {
    DeviceGuard g(index_);
    to_host_ = CudaStream::create();
  });
  return to_host_.get();
}

// The copy on `t`, after the work queued so far on the compute stream: for a copy to the device,
// dst's block comes from the caching allocator, which reuses a block as soon as the host frees
// it, in the compute stream's order (cuda/allocator.h), so kernels queued before this call may
// still use it; for a copy to the host, those kernels write src. What is queued after this call
// runs beside the copy (PyTorch FSDP's all-gather stream does the same).
TransferPtr CudaBackend::copy_async(cudaStream_t t, const Tensor& host, const Tensor& device, cudaMemcpyKind kind,
                                    const CudaEvent* after) {
  DeviceGuard g(index_);
  CudaEvent queued;
  queued.record(stream());
  queued.wait_on(t);
  if (after) after->wait_on(t);
  auto tr = std::make_shared<CudaTransfer>();
  if (kind == cudaMemcpyHostToDevice)
    ZT_CUDA_CHECK(cudaMemcpyAsync(device.raw(), host.raw(), device.nbytes(), kind, t));
  else ZT_CUDA_CHECK(cudaMemcpyAsync(host.raw(), device.raw(), device.nbytes(), kind, t));
  tr->landed.record(t);
  tr->compute = stream();
  tr->host = host;
  tr->device = device;
  return tr;
}

// From pageable memory the runtime copies through its own staging buffer, and its return would
// not mean the source may be reused: copy_from_host, done on return.
TransferPtr CudaBackend::copy_from_host_async(const Tensor& dst, const Tensor& src_host) {
  if (dst.nbytes() == 0 || !is_pinned_host_pointer(src_host.raw())) return Backend::copy_from_host_async(dst, src_host);
  need_here(*this, dst, "copy_from_host_async", "dst");
  ZT_CHECK(src_host.device().is_cpu(), "cuda copy_from_host_async: src ", src_host.str(), " must be a cpu tensor");
  ZT_CHECK(dst.dtype() == src_host.dtype() && dst.numel() == src_host.numel(),
           "cuda copy_from_host_async: ", src_host.str(), " into ", dst.str(),
           ": expected the same dtype and number of elements");
  need_contiguous(dst, "copy_from_host_async", "dst");
  need_contiguous(src_host, "copy_from_host_async", "src");
  return copy_async(transfer_stream(), src_host, dst, cudaMemcpyHostToDevice);
}

// Into pageable memory a device-to-host cudaMemcpyAsync is synchronous with the host anyway:
// copy_to_host, done on return (after `after`, waited for on the host).
TransferPtr CudaBackend::copy_to_host_async(const Tensor& dst_host, const Tensor& src, const DeviceEvent* after) {
  const CudaDeviceEvent* ev = nullptr;
  if (after) {
    ev = dynamic_cast<const CudaDeviceEvent*>(after);
    ZT_CHECK(ev, "cuda copy_to_host_async: the event to wait for is not a CUDA event");
  }
  if (src.nbytes() == 0 || !is_pinned_host_pointer(dst_host.raw())) {
    if (ev) ev->event.synchronize();
    return Backend::copy_to_host_async(dst_host, src);
  }
  need_here(*this, src, "copy_to_host_async", "src");
  ZT_CHECK(dst_host.device().is_cpu(), "cuda copy_to_host_async: dst ", dst_host.str(), " must be a cpu tensor");
  ZT_CHECK(dst_host.dtype() == src.dtype() && dst_host.numel() == src.numel(), "cuda copy_to_host_async: ", src.str(),
           " into ", dst_host.str(), ": expected the same dtype and number of elements");
  need_contiguous(dst_host, "copy_to_host_async", "dst");
  need_contiguous(src, "copy_to_host_async", "src");
  return copy_async(to_host_stream(), dst_host, src, cudaMemcpyDeviceToHost, ev ? &ev->event : nullptr);
}

bool CudaBackend::copies_to_host_async(const Tensor& dst_host) const {
  return dst_host.nbytes() > 0 && is_pinned_host_pointer(dst_host.raw());
}

void CudaBackend::copy_to_host(const Tensor& dst_host, const Tensor& src) {
  need_here(*this, src, "copy_to_host", "src");
  ZT_CHECK(dst_host.defined() && dst_host.device().is_cpu(), "cuda copy_to_host: dst ", dst_host.str(),
           " must be a cpu tensor");
  ZT_CHECK(dst_host.dtype() == src.dtype() && dst_host.numel() == src.numel(), "cuda copy_to_host: ", src.str(),
           " into ", dst_host.str(), ": expected the same dtype and number of elements");
  need_contiguous(dst_host, "copy_to_host", "dst");
  need_contiguous(src, "copy_to_host", "src");
  if (src.nbytes() == 0) return;
  DeviceGuard g(index_);
  ZT_CUDA_CHECK(cudaMemcpyAsync(dst_host.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, stream()));
  wait_for_stream();
}

void CudaBackend::fill(const Tensor& dst, double value) {
  need_here(*this, dst, "fill", "dst");
  if (dst.numel() == 0) return;
  DeviceGuard g(index_);
  cuda_kernels::fill(dst.dtype(), dst.raw(), layout(dst, dst), value, stream());
}

void CudaBackend::accumulate(const Tensor& dst, const Tensor& src, double alpha) {
  need_here(*this, dst, "accumulate", "dst");
  need_here(*this, src, "accumulate", "src");
  ZT_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "cuda accumulate: ", src.str(), " into ",
           dst.str(), ": expected the same shape and dtype");
  ZT_CHECK(computes(dst.dtype()), "cuda accumulate: dtype ", dtype_name(dst.dtype()), ", expected float32 or bfloat16");
  for (int64_t d = 0; d < dst.dim(); ++d)  // every dst element written by one thread only
    ZT_CHECK(dst.shape()[d] <= 1 || dst.strides()[d] != 0, "cuda accumulate: dst ", dst.str(),
             " repeats elements (stride 0), expected distinct elements");
  if (dst.numel() == 0) return;
  DeviceGuard g(index_);
  cuda_kernels::accumulate(dst.dtype(), dst.raw(), src.raw(), layout(dst, src), alpha, stream());
}

void CudaBackend::cast(const Tensor& dst, const Tensor& src, double factor) {
  need_here(*this, dst, "cast", "dst");
  need_here(*this, src, "cast", "src");
  ZT_CHECK(dst.numel() == src.numel(), "cuda cast: ", src.str(), " into ", dst.str(), ": expected the same numel");
  need_contiguous(dst, "cast", "dst");
  need_contiguous(src, "cast", "src");
  DeviceGuard g(index_);
  cuda_kernels::cast(dst.dtype(), dst.raw(), src.dtype(), src.raw(), dst.numel(), static_cast<float>(factor), stream());
}

void CudaBackend::accumulate_cast(const Tensor& dst, const Tensor& src) {
  need_here(*this, dst, "accumulate_cast", "dst");
  need_here(*this, src, "accumulate_cast", "src");
  ZT_CHECK(dst.numel() == src.numel(), "cuda accumulate_cast: ", src.str(), " into ", dst.str(),
           ": expected the same numel");
  need_contiguous(dst, "accumulate_cast", "dst");
  need_contiguous(src, "accumulate_cast", "src");
  DeviceGuard g(index_);
  cuda_kernels::accumulate_cast(dst.dtype(), dst.raw(), src.dtype(), src.raw(), dst.numel(), stream());
}

// ---- shard norms ---------------------------------------------------------------------------

bool CudaBackend::all_finite(const Tensor& t) {
  need_here(*this, t, "all_finite", "t");
  need_contiguous(t, "all_finite", "t");
  if (t.numel() == 0) return true;
  DeviceGuard g(index_);
  Tensor flag = scratch(sizeof(int));
  int* f = static_cast<int*>(flag.raw());
  ZT_CUDA_CHECK(cudaMemsetAsync(f, 0, sizeof(int), stream()));
  cuda_kernels::all_finite_async(t.dtype(), t.raw(), t.numel(), f, stream());
  int host = 0;
  ZT_CUDA_CHECK(cudaMemcpyAsync(&host, f, sizeof(int), cudaMemcpyDeviceToHost, stream()));
  wait_for_stream();
  return host == 0;
}

double CudaBackend::sum_of_squares(const Tensor& t) {
  need_here(*this, t, "sum_of_squares", "t");
  need_contiguous(t, "sum_of_squares", "t");
  ZT_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16 || t.dtype() == DType::f16, "cuda sum_of_squares: ",
           t.str(), ": expected float32, bfloat16 or float16 (float64 is not a GPU dtype here)");
  DeviceGuard g(index_);
  const int64_t ws = cuda_kernels::sum_of_squares_workspace_bytes(t.numel());
  Tensor buf = scratch(static_cast<size_t>(ws) + sizeof(double));  // [result | chunk partials]
  auto* result = static_cast<double*>(buf.raw());
  cuda_kernels::sum_of_squares_async(t.raw(), t.dtype(), t.numel(), result, result + 1, stream());
  double host = 0;
  ZT_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof(double), cudaMemcpyDeviceToHost, stream()));
  wait_for_stream();
  return host;
}

// ---- ZeRO++'s block quantization -------------------------------------------------------------

void CudaBackend::quantize(const Tensor& codes, const Tensor& scales, const Tensor& x, int bits, int64_t block,
                           QuantScheme scheme) {
  const Tensor* ts[] = {&codes, &scales, &x};
  for (const Tensor* t : ts) {
    need_here(*this, *t, "quantize", "codes, scales and x");
    need_contiguous(*t, "quantize", "codes, scales and x");
  }
  DeviceGuard g(index_);
  cuda_kernels::quantize_blocks(x.data<float>(), x.numel(), bits, block, codes.data<uint8_t>(), scales.data<float>(),
                                scheme == QuantScheme::deepspeed, stream());
}

void CudaBackend::dequantize(const Tensor& out, const Tensor& codes, const Tensor& scales, int bits, int64_t block) {
  const Tensor* ts[] = {&out, &codes, &scales};
  for (const Tensor* t : ts) {
    need_here(*this, *t, "dequantize", "out, codes and scales");
    need_contiguous(*t, "dequantize", "out, codes and scales");
  }
  DeviceGuard g(index_);
  cuda_kernels::dequantize_blocks(codes.data<uint8_t>(), scales.data<float>(), out.numel(), bits, block,
                                  out.data<float>(), stream());
}

void CudaBackend::scale_(const Tensor& t, double factor) {
  need_here(*this, t, "scale_", "t");
  need_contiguous(t, "scale_", "t");
  DeviceGuard g(index_);
  cuda_kernels::scale(t.dtype(), t.raw(), t.raw(), factor, t.numel(), stream());
}

// ---- AdamW ---------------------------------------------------------------------------------

void CudaBackend::adamw_step(const Tensor& master, const Tensor& grad, const Tensor& m, const Tensor& v,
                             const AdamWArgs& h, const Tensor& out_lowp) {
  const Tensor* ts[] = {&master, &grad, &m, &v};
  const char* names[] = {"master", "grad", "m", "v"};
  for (int k = 0; k < 4; ++k) {
    need_here(*this, *ts[k], "adamw_step", names[k]);
    need_contiguous(*ts[k], "adamw_step", names[k]);
    ZT_CHECK(ts[k]->dtype() == DType::f32, "cuda adamw_step: ", names[k], " ", ts[k]->str(),
             ", expected float32 (the GPU keeps float32 master weights and moments)");
    ZT_CHECK(ts[k]->numel() == master.numel(), "cuda adamw_step: ", names[k], " ", ts[k]->str(), " has ",
             ts[k]->numel(), " elements, master ", master.numel());
  }
  uint16_t* lowp = nullptr;
  if (out_lowp.defined()) {
    need_here(*this, out_lowp, "adamw_step", "out_lowp");
    need_contiguous(out_lowp, "adamw_step", "out_lowp");
    if (out_lowp.dtype() != DType::bf16)
      ZT_THROW("cuda adamw_step: out_lowp ", out_lowp.str(), ": the GPU kernel writes a bfloat16 copy only "
               "(cuda/kernels/adamw.h); float16 parameters are not supported on the GPU");
    ZT_CHECK(out_lowp.numel() == master.numel(), "cuda adamw_step: out_lowp ", out_lowp.str(), " has ",
             out_lowp.numel(), " elements, master ", master.numel());
    lowp = static_cast<uint16_t*>(out_lowp.raw());
  }
  if (master.numel() == 0) return;
  ZT_CHECK(h.step >= 1, "cuda adamw_step: step ", h.step, ", expected >= 1");
  cuda_kernels::AdamWConfig c;
  c.lr = h.lr, c.beta1 = h.beta1, c.beta2 = h.beta2, c.eps = h.eps, c.weight_decay = h.weight_decay;
  DeviceGuard g(index_);
  cuda_kernels::adamw_step(master.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), master.numel(),
                           c, h.step, h.decay, lowp, stream());
}

// ---- SGD -----------------------------------------------------------------------------------

void CudaBackend::sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdArgs& h) {
  ZT_CHECK(buf.defined() == (h.momentum > 0), "cuda sgd_step: momentum ", h.momentum, " with ",
           buf.defined() ? "a" : "no", " momentum buffer (one expected exactly when momentum > 0)");
  const Tensor* ts[] = {&param, &grad, &buf};
  const char* names[] = {"param", "grad", "buf"};
  for (int k = 0; k < (buf.defined() ? 3 : 2); ++k) {
    need_here(*this, *ts[k], "sgd_step", names[k]);
    need_contiguous(*ts[k], "sgd_step", names[k]);
    ZT_CHECK(ts[k]->dtype() == DType::f32, "cuda sgd_step: ", names[k], " ", ts[k]->str(),
             ", expected float32 (the GPU keeps float32 master weights and momentum)");
    ZT_CHECK(ts[k]->numel() == param.numel(), "cuda sgd_step: ", names[k], " ", ts[k]->str(), " has ", ts[k]->numel(),
             " elements, param ", param.numel());
  }
  if (param.numel() == 0) return;
  cuda_kernels::SgdConfig c;
  c.lr = h.lr, c.momentum = h.momentum, c.weight_decay = h.weight_decay, c.nesterov = h.nesterov;
  DeviceGuard g(index_);
  cuda_kernels::sgd_step(param.data<float>(), grad.data<float>(), buf.defined() ? buf.data<float>() : nullptr,
                         param.numel(), c, h.decay, stream());
}

// ---- registration --------------------------------------------------------------------------

void register_cuda_backend() {
  register_backend(DeviceType::cuda, [](int index) -> Backend* { return new CudaBackend(index); });
}

}  // namespace zt
