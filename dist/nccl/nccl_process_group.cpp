// defines: nccl_type, NcclProcessGroup (constructors, init_comm, start_watchdog, watch, on_timeout and 12
//          more) (dist/nccl/nccl_process_group.h); file-local: NcclWork
#include "dist/nccl/nccl_process_group.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

#include "cuda/backend.h"         // defines: CudaDeviceEvent
#include "cuda/check.h"           // defines: ZT_CUDA_CHECK, cuda_error_message
#include "cuda/device.h"          // defines: is_device_pointer
#include "dist/tcp_rendezvous.h"  // defines: tcp_rendezvous

#define ZT_NCCL_CHECK(call)                                                                               \
  do {                                                                                                    \
    const ncclResult_t zt_nccl_res_ = (call);                                                             \
    if (zt_nccl_res_ != ncclSuccess)                                                                      \
      ZT_THROW(#call, " failed: ", ncclGetErrorString(zt_nccl_res_), " (", ncclGetLastError(nullptr), ")"); \
  } while (0)

namespace zt {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::u8: return ncclUint8;  // quantized payloads: moved, never added
    default:
      ZT_THROW("NCCL: dtype ", dtype_name(t),
               " is not supported (expected float32, float64, bfloat16, float16, uint8)");
  }
}

namespace {

// Completion of one collective: the compute stream waits for `done`, then the host does.
// Dropped without wait() (an exception path, a barrier nobody waits on), the buffers would go
// back to the caching allocator, whose free lists belong to the compute stream, while NCCL may
// still use them on the communication stream: so the destructor makes the compute stream wait
// for `done` first, and whatever reuses those bytes is ordered after the collective
// (gpu-preflight.md #4). No host wait there: a destructor must not block or throw.
// done_event(): the same event, for a copy to the host queued after the collective on the
// device's to-host stream (zero/gradient_landing.h) while the compute stream runs on.
struct NcclWork final : Work {
  std::shared_ptr<CudaDeviceEvent> done = std::make_shared<CudaDeviceEvent>();
  cudaStream_t compute = nullptr;
  std::vector<Tensor> keep;  // the buffers stay alive while NCCL may touch them
  ~NcclWork() override {
    if (!keep.empty()) (void)cudaStreamWaitEvent(compute, done->event.get(), 0);
    keep.clear();
  }
  void wait() override {
    done->event.wait_on(compute);
    done->event.synchronize();
    keep.clear();
  }
  DeviceEventPtr done_event() const override { return done; }
};

}  // namespace

NcclProcessGroup::NcclProcessGroup(ProcessGroup& bootstrap, int device, cudaStream_t compute_stream)
    : bootstrap_(&bootstrap),
      topology_(bootstrap.topology()),
      rank_(bootstrap.rank()),
      size_(bootstrap.size()),
      device_(device),
      compute_(compute_stream) {
  ZT_CUDA_CHECK(cudaSetDevice(device_));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank_ == 0) ZT_NCCL_CHECK(ncclGetUniqueId(&id));
  // 128 bytes as 128 exact doubles 0..255 (no bit pattern games through MPI's float types).
  // On the host by name: the default device is the GPU once --device cuda is set, and the loop
  // below writes the buffer from the CPU (gpu-preflight.md #1).
  const int64_t nb = static_cast<int64_t>(sizeof id.internal);
  Tensor bytes = Tensor::zeros({nb}, DType::f64, Category::comm, cpu_allocator());
  double* b = bytes.data<double>();
  for (int64_t i = 0; i < nb; ++i) b[i] = static_cast<unsigned char>(id.internal[i]);
  bootstrap_->broadcast(bytes, 0);
  for (int64_t i = 0; i < nb; ++i) id.internal[i] = static_cast<char>(static_cast<unsigned char>(b[i]));
  init_comm(id);
}

NcclProcessGroup::NcclProcessGroup(const LauncherRanks& l, int device, cudaStream_t compute_stream, double timeout_s)
    : rank_(l.rank), size_(l.size), device_(device), compute_(compute_stream) {
  ZT_CHECK(l.rank >= 0 && l.size >= 1, "NCCL without MPI: no rank and world size from the launcher (",
           l.launcher.empty() ? std::string("no RANK / WORLD_SIZE set") : l.launcher, ")");
  ZT_CHECK(l.size == 1 || (!l.master_addr.empty() && l.master_port > 0),
           "NCCL without MPI: MASTER_ADDR and MASTER_PORT must be set (rank 0's host and a free port)");
  ZT_CUDA_CHECK(cudaSetDevice(device_));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank_ == 0) ZT_NCCL_CHECK(ncclGetUniqueId(&id));
  // the node: GROUP_RANK, else rank / LOCAL_WORLD_SIZE, else one node
  const int node = l.node >= 0 ? l.node : l.local_size > 0 ? l.rank / l.local_size : 0;
  const Rendezvous r = tcp_rendezvous(l.size == 1 ? "127.0.0.1" : l.master_addr, l.size == 1 ? 1 : l.master_port, rank_,
                                      size_, node, std::string(id.internal, sizeof id.internal), timeout_s);
  ZT_CHECK(r.payload.size() == sizeof id.internal, "NCCL without MPI: rank 0 sent ", r.payload.size(),
           " bytes, expected an ncclUniqueId of ", sizeof id.internal);
  std::memcpy(id.internal, r.payload.data(), sizeof id.internal);
  topology_ = topology_of_node_ids(r.node_of, rank_, l.launcher + " variables, TCP rendezvous");
  init_comm(id);
}

void NcclProcessGroup::init_comm(const ncclUniqueId& id) {
  ZT_NCCL_CHECK(ncclCommInitRank(&comm_nccl_, size_, id, rank_));
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  start_watchdog();
}

void NcclProcessGroup::start_watchdog() {
  watchdog_ = std::jthread([this](std::stop_token stop) { watch(stop); });
}

bool NcclProcessGroup::set_collective_timeout(double seconds) {
  ProcessGroup::set_collective_timeout(seconds);  // checks the value
  timeout_s_.store(seconds);
  return true;
}

void NcclProcessGroup::set_timeout_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  handler_ = std::move(handler);
}

void NcclProcessGroup::watch(std::stop_token stop) {
  if (cudaSetDevice(device_) != cudaSuccess) return;  // no device here: nothing to watch
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> sleep_lock(mu);
  while (!cv.wait_for(sleep_lock, stop, std::chrono::milliseconds(100), [&stop] { return stop.stop_requested(); })) {
    if (aborted_.load()) return;
    std::string report;
    std::function<void(const std::string&)> handler;
    {
      std::lock_guard<std::mutex> lock(watch_mu_);
      while (!watched_.empty() && cudaEventQuery(watched_.front().done) == cudaSuccess) {
        cudaEventDestroy(watched_.front().done);
        watched_.pop_front();
      }
      const double limit = timeout_s_.load();
      std::ostringstream s;
      s.setf(std::ios::fixed);
      s.precision(1);
      if (!watched_.empty() && limit > 0) {
        const Watched& w = watched_.front();
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - w.t0).count();
        if (waited > limit) {
          s << "collective timeout: NCCL collective #" << w.seq << " " << collective_name(w.kind);
          if (!w.label.empty()) s << " (" << w.label << ")";
          s << " has not completed in " << waited << " s, longer than collective_timeout_s = " << limit
            << " (zt-train --collective-timeout-s); " << watched_.size() << " collective(s) in flight on GPU "
            << device_ << "; NCCL cannot tell which rank is silent";
        }
      }
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_nccl_, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
        s << (s.tellp() > 0 ? "; " : "") << "NCCL reports an asynchronous error: " << ncclGetErrorString(async) << " ("
          << ncclGetLastError(comm_nccl_) << ")";
      report = s.str();
      handler = handler_;
      if (!report.empty()) watched_.front().t0 = std::chrono::steady_clock::now();  // one report per wait
    }
    if (report.empty()) continue;
    if (handler) handler(report);
    else on_timeout(report);
  }
}

void NcclProcessGroup::on_timeout(const std::string& report) {
  std::fprintf(stderr, "error on rank %d of %d (nccl, GPU %d): %s; aborting the communicator (ncclCommAbort)\n", rank_,
               size_, device_, report.c_str());
  std::fflush(stderr);
  aborted_.store(true);
  ncclCommAbort(comm_nccl_);                     // NCCL's kernels return; what waits on them wakes
  if (bootstrap_) bootstrap_->abort(report, 1);  // MPI_Abort: every rank of the job
  std::_Exit(1);                                 // bootstrapped over TCP: this process (the launcher ends the others)
}

NcclProcessGroup::NcclProcessGroup(NcclProcessGroup& parent, ncclComm_t comm, Topology topology)
    : bootstrap_(parent.bootstrap_),
      topology_(std::move(topology)),
      rank_(topology_.rank),
      size_(topology_.size()),
      device_(parent.device_),
      comm_nccl_(comm),
      compute_(parent.compute_) {
  ZT_CUDA_CHECK(cudaSetDevice(device_));
  ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  start_watchdog();
}

NcclProcessGroup::~NcclProcessGroup() {
  watchdog_.request_stop();  // first: it reads the communicator and the events below
  if (watchdog_.joinable()) watchdog_.join();
  if (comm_) cudaStreamSynchronize(comm_);
  for (Watched& w : watched_) cudaEventDestroy(w.done);
  if (comm_nccl_ && !aborted_.load()) ncclCommDestroy(comm_nccl_);
  if (comm_) cudaStreamDestroy(comm_);
}

WorkPtr NcclProcessGroup::run(const std::vector<Tensor>& bufs,
                              const std::function<void(const std::vector<void*>&)>& issue) {
  if (aborted_.load())
    ZT_THROW("NCCL group of rank ", rank_, ": the communicator was aborted by the collective timeout");
  ZT_CUDA_CHECK(cudaSetDevice(device_));
  // The communication stream starts after everything the compute stream has queued.
  cudaEvent_t ready = nullptr;
  ZT_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  ZT_CUDA_CHECK(cudaEventRecord(ready, compute_));
  ZT_CUDA_CHECK(cudaStreamWaitEvent(comm_, ready, 0));
  ZT_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait has been enqueued

  std::vector<void*> ptrs;
  std::vector<std::pair<size_t, void*>> staged;  // (index into bufs, device copy)
  for (size_t i = 0; i < bufs.size(); ++i) {
    void* p = bufs[i].raw();
    if (!is_device_pointer(p)) {
      void* d = nullptr;
      ZT_CUDA_CHECK(cudaMallocAsync(&d, bufs[i].nbytes(), comm_));
      ZT_CUDA_CHECK(cudaMemcpyAsync(d, p, bufs[i].nbytes(), cudaMemcpyHostToDevice, comm_));
      staged.emplace_back(i, d);
      p = d;
    }
    ptrs.push_back(p);
  }
  issue(ptrs);
  {  // the watchdog's view of it: done when this event is
    Watched w;
    w.kind = issuing_ ? issuing_->kind : Collective::barrier;
    w.label = label();
    w.t0 = std::chrono::steady_clock::now();
    ZT_CUDA_CHECK(cudaEventCreateWithFlags(&w.done, cudaEventDisableTiming));
    ZT_CUDA_CHECK(cudaEventRecord(w.done, comm_));
    std::lock_guard<std::mutex> lock(watch_mu_);
    w.seq = ++seq_;
    watched_.push_back(std::move(w));
  }
  if (!staged.empty()) {  // host buffers: copy back and finish before returning
    for (auto& [i, d] : staged) {
      ZT_CUDA_CHECK(cudaMemcpyAsync(bufs[i].raw(), d, bufs[i].nbytes(), cudaMemcpyDeviceToHost, comm_));
      ZT_CUDA_CHECK(cudaFreeAsync(d, comm_));
    }
    ZT_CUDA_CHECK(cudaStreamSynchronize(comm_));
    return completed_work();
  }
  auto w = std::make_shared<NcclWork>();
  w->compute = compute_;
  w->keep = bufs;
  w->done->event.record(comm_);
  return w;
}

WorkPtr NcclProcessGroup::do_all_reduce(const Tensor& x) {
  return run({x}, [&](const std::vector<void*>& p) {
    ZT_NCCL_CHECK(ncclAllReduce(p[0], p[0], static_cast<size_t>(x.numel()), nccl_type(x.dtype()), ncclSum, comm_nccl_, comm_));
  });
}

WorkPtr NcclProcessGroup::do_reduce_scatter(const Tensor& in, const Tensor& out) {
  return run({in, out}, [&](const std::vector<void*>& p) {
    ZT_NCCL_CHECK(ncclReduceScatter(p[0], p[1], static_cast<size_t>(out.numel()), nccl_type(in.dtype()), ncclSum,
                                    comm_nccl_, comm_));
  });
}

WorkPtr NcclProcessGroup::do_all_gather(const Tensor& in, const Tensor& out) {
  // NCCL allows the in-place form (sendbuff == recvbuff + rank * count), which ZeRO stages 1-2 use.
  return run({in, out}, [&](const std::vector<void*>& p) {
    ZT_NCCL_CHECK(ncclAllGather(p[0], p[1], static_cast<size_t>(in.numel()), nccl_type(in.dtype()), comm_nccl_, comm_));
  });
}

WorkPtr NcclProcessGroup::do_broadcast(const Tensor& x, int root) {
  return run({x}, [&](const std::vector<void*>& p) {
    ZT_NCCL_CHECK(ncclBroadcast(p[0], p[0], static_cast<size_t>(x.numel()), nccl_type(x.dtype()), root, comm_nccl_, comm_));
  });
}

WorkPtr NcclProcessGroup::do_barrier() {
  // NCCL has no barrier: an all-reduce of one device float orders every rank's stream, and the
  // host waits for it.
  Tensor one = Tensor::zeros({1}, DType::f32, Category::comm);
  WorkPtr w = do_all_reduce(one);
  return w;
}

WorkPtr NcclProcessGroup::do_all_to_all(const Tensor& in, const Tensor& out) {
  const size_t block = static_cast<size_t>(in.numel() / size_);
  const size_t block_bytes = block * static_cast<size_t>(in.element_size());
  return run({in, out}, [&](const std::vector<void*>& p) {
    ZT_NCCL_CHECK(ncclGroupStart());
    for (int q = 0; q < size_; ++q) {
      ZT_NCCL_CHECK(ncclSend(static_cast<const char*>(p[0]) + q * block_bytes, block, nccl_type(in.dtype()), q,
                             comm_nccl_, comm_));
      ZT_NCCL_CHECK(
          ncclRecv(static_cast<char*>(p[1]) + q * block_bytes, block, nccl_type(out.dtype()), q, comm_nccl_, comm_));
    }
    ZT_NCCL_CHECK(ncclGroupEnd());
  });
}

std::unique_ptr<ProcessGroup> NcclProcessGroup::do_split(int color, const std::vector<int>& members) {
  int key = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == rank_) key = static_cast<int>(i);
  ZT_CUDA_CHECK(cudaSetDevice(device_));
  ncclComm_t sub = nullptr;
  ZT_NCCL_CHECK(ncclCommSplit(comm_nccl_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr));
  if (color < 0) return nullptr;
  return std::unique_ptr<ProcessGroup>(new NcclProcessGroup(*this, sub, sub_topology(topology_, members, key)));
}

void NcclProcessGroup::abort(const std::string& message, int code) {
  std::fprintf(stderr, "error on rank %d of %d (nccl, GPU %d): %s\n", rank_, size_, device_, message.c_str());
  std::fflush(stderr);
  watchdog_.request_stop();  // it reads the communicator aborted below
  if (watchdog_.joinable() && watchdog_.get_id() != std::this_thread::get_id()) watchdog_.join();
  if (comm_nccl_ && !aborted_.exchange(true)) ncclCommAbort(comm_nccl_);
  if (bootstrap_) bootstrap_->abort(message, code);  // MPI_Abort, or exit for a single process
  std::exit(code);  // bootstrapped over TCP: this process; the launcher ends the others
}

}  // namespace zt
