// defines: NcclProcessGroup — the NCCL backend of ProcessGroup: one GPU per rank (built only
//          with CUDA; docs/architecture.md "Devices and backends").
//
// Bootstrap: rank 0 creates an ncclUniqueId and every rank receives it through `bootstrap` (the
// MPI group of the job, or a SingleProcessGroup for one rank); then ncclCommInitRank. The unique
// id's 128 bytes travel as 128 float64 values 0..255, exact in any MPI. Without MPI, the id travels
// over TCP from rank 0 at MASTER_ADDR:MASTER_PORT (the launcher's variables), as under torchrun.
//
// Ordering: collectives run on a communication stream of their own. Before each one, an event
// recorded on the compute stream makes the communication stream wait (so the collective sees
// everything the compute stream wrote before it was issued); after it, an event on the
// communication stream marks completion. Work::wait() makes the compute stream wait for that
// event (cudaStreamWaitEvent, no host block) and then synchronizes the host on it, because the
// ZeRO engine's completion callbacks (unpack, scale, free) run on the host today. So the
// collectives of one unit overlap the compute kernels queued before the wait.
//
// Buffers: device memory (a Tensor whose storage came from a CUDA allocator) is used in place.
// Host memory (the loss and norm doubles of ProcessGroup::all_reduce_sum, a CPU tensor) is
// staged through a device buffer and copied back before the Work completes. Which one a pointer
// is comes from cudaPointerGetAttributes, not from the caller.
//
// Sums: ncclSum in the buffer's type (bf16 and fp16 add in float32 inside NCCL's kernels and
// round per step of its ring, like the MPI backend's 2-byte operations).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dist/mpi_watchdog.h"  // defines: kDefaultCollectiveTimeoutS
#include "dist/process_group.h"

namespace zt {

class NcclProcessGroup final : public ProcessGroup {
 public:
  // Collective over every rank of `bootstrap`: rank r of N drives GPU `device` (cudaSetDevice).
  // compute_stream: the stream the training kernels run on (0: the legacy default stream).
  NcclProcessGroup(ProcessGroup& bootstrap, int device, cudaStream_t compute_stream = nullptr);
  // Without MPI: the ranks as a torchrun-style launcher describes them (RANK, WORLD_SIZE,
  // MASTER_ADDR, MASTER_PORT, GROUP_RANK: launcher_ranks(), dist/topology.h), the unique id from
  // rank 0 over TCP (dist/tcp_rendezvous.h), waiting at most timeout_s for every rank. abort()
  // then ends this process only (the launcher ends the others, as torchrun does).
  NcclProcessGroup(const LauncherRanks& launcher, int device, cudaStream_t compute_stream = nullptr,
                   double timeout_s = 300.0);
  ~NcclProcessGroup() override;
  NcclProcessGroup(const NcclProcessGroup&) = delete;
  NcclProcessGroup& operator=(const NcclProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  const Topology& topology() const override { return topology_; }  // its bootstrap group's (a split: restricted)
  [[noreturn]] void abort(const std::string& message, int code) override;
  int device() const { return device_; }

  // The collective timeout: a watchdog thread looks every 100 ms at the oldest collective still
  // running on the communication stream (an event recorded after it) and at NCCL's asynchronous
  // error (ncclCommGetAsyncError). When one has run longer than the timeout, or NCCL reports an
  // error, it calls the timeout handler with a report ("NCCL collective #12 all_gather (h.3) has
  // not completed in 600.0 s ..."). The default handler prints it, aborts the communicator
  // (ncclCommAbort: NCCL's kernels return, the streams drain) and ends the job through abort().
  // 0 = no timeout. NCCL cannot say which rank is silent; the MPI group's watchdog, where there is
  // one, names it (dist/mpi_watchdog.h).
  bool set_collective_timeout(double seconds) override;
  // Replaces the default handler (tests: they check the report and let the collective finish).
  void set_timeout_handler(std::function<void(const std::string& report)> handler);

 protected:
  WorkPtr do_all_reduce(const Tensor& x) override;
  WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out) override;
  WorkPtr do_all_gather(const Tensor& in, const Tensor& out) override;
  WorkPtr do_broadcast(const Tensor& x, int root) override;
  WorkPtr do_barrier() override;
  // ncclSend / ncclRecv of every block in one NCCL group (NCCL has no all-to-all call).
  WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) override;
  // ncclCommSplit (NCCL 2.18+): the new group keeps this one's GPU and compute stream, with a
  // communication stream of its own.
  std::unique_ptr<ProcessGroup> do_split(int color, const std::vector<int>& members) override;

 private:
  NcclProcessGroup(NcclProcessGroup& parent, ncclComm_t comm, Topology topology);  // a split
  // Runs `issue` (the NCCL call on comm_) ordered after the compute stream, on device copies of
  // the host buffers among `bufs` (copied in first and back after); returns the completion Work.
  WorkPtr run(const std::vector<Tensor>& bufs, const std::function<void(const std::vector<void*>&)>& issue);

  void init_comm(const ncclUniqueId& id);  // ncclCommInitRank and the communication stream
  void start_watchdog();
  void watch(std::stop_token stop);            // the watchdog thread's loop
  void on_timeout(const std::string& report);  // the default handler

  // A collective in flight, for the watchdog: an event recorded after it on comm_.
  struct Watched {
    int64_t seq = 0;
    Collective kind = Collective::barrier;
    std::string label;
    std::chrono::steady_clock::time_point t0;
    cudaEvent_t done = nullptr;
  };

  ProcessGroup* bootstrap_ = nullptr;  // null: bootstrapped over TCP
  Topology topology_;
  int rank_ = 0, size_ = 1, device_ = 0;
  ncclComm_t comm_nccl_ = nullptr;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;

  std::atomic<double> timeout_s_{kDefaultCollectiveTimeoutS};
  std::atomic<bool> aborted_{false};  // the communicator was aborted: no more collectives
  std::mutex watch_mu_;               // guards watched_, seq_, handler_
  std::deque<Watched> watched_;
  int64_t seq_ = 0;
  std::function<void(const std::string&)> handler_;
  std::jthread watchdog_;  // last: stops (and joins) before the members it reads go
};

// NCCL's type for a tensor's dtype (float32, float64, bfloat16, float16); a zt::Error otherwise.
ncclDataType_t nccl_type(DType t);

}  // namespace zt
