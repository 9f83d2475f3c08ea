// defines: MpiProcessGroup, launched_by_mpirun — the OpenMPI backend of ProcessGroup.
//
// One process per rank (mpirun -np N). Collectives run on a communication thread of their own,
// in the order they were issued (every rank issues the same sequence), so a Work returned by an
// async collective completes while the caller computes: ZeRO's overlap_comm. Only that thread
// calls MPI after initialization (MPI_THREAD_SERIALIZED is all we ask for), apart from the
// MPI_Abort of abort() and of the watchdog, which end the job.
//
// Failure: MPI's default handler (MPI_ERRORS_ARE_FATAL) stops the whole job on a communication
// error, and mpirun kills every rank when one of them dies, printing which rank it was. abort()
// is the path for a rank that raises an error: it prints the message with the rank and calls
// MPI_Abort, so the others never wait in a collective for it. A rank that stops answering
// without dying is the watchdog's (dist/mpi_watchdog.h): a collective that waits longer than the
// collective timeout aborts the job, naming the collective and the ranks it waits for.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "dist/mpi_watchdog.h"  // defines: CollectiveWatchdog
#include "dist/process_group.h"

namespace zt {

// True when this process was started by mpirun/mpiexec (OpenMPI sets OMPI_COMM_WORLD_SIZE).
bool launched_by_mpirun();

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup();   // MPI_Init_thread, then starts the communication thread
  ~MpiProcessGroup();  // drains the queue, stops the thread, MPI_Finalize
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  // The nodes as MPI finds them (MPI_Comm_split_type: the ranks that share memory), numbered by
  // their lowest rank; a launcher's local rank that disagrees is reported on stderr.
  const Topology& topology() const override { return topology_; }
  [[noreturn]] void abort(const std::string& message, int code) override;
  bool set_collective_timeout(double seconds) override;

 protected:
  WorkPtr do_all_reduce(const Tensor& x) override;
  WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out) override;
  WorkPtr do_all_gather(const Tensor& in, const Tensor& out) override;
  WorkPtr do_broadcast(const Tensor& x, int root) override;
  WorkPtr do_barrier() override;

 private:
  // Queues fn (which makes blocking MPI calls) for the communication thread. The returned Work
  // keeps `keep` alive (the tensors) until the collective is done.
  WorkPtr submit(std::function<void()> fn, std::vector<Tensor> keep);
  void loop();

  int rank_ = 0, size_ = 1;
  Topology topology_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // created before the thread, destroyed after it
  int64_t seq_ = 0;  // collectives run so far (the communication thread's count)
};

}  // namespace zt
