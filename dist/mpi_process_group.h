// defines: MpiProcessGroup, launched_by_mpirun — the OpenMPI backend of ProcessGroup.
//
// One process per rank (mpirun -np N). Collectives run on a communication thread of their own,
// in the order they were issued (every rank issues the same sequence), so a Work returned by an
// async collective completes while the caller computes: ZeRO's overlap_comm. Only that thread
// calls MPI after initialization (MPI_THREAD_SERIALIZED is all we ask for), apart from the
// MPI_Abort of abort() and of the watchdog, which end the job. Sub-groups (split) are
// communicators of their own served by the same thread, so every collective of the process, of
// whichever group, runs in issue order; the watchdog's sequence numbers count them all.
//
// Failure: MPI's default handler (MPI_ERRORS_ARE_FATAL) stops the whole job on a communication
// error, and mpirun kills every rank when one of them dies, printing which rank it was. abort()
// is the path for a rank that raises an error: it prints the message with the rank and calls
// MPI_Abort, so the others never wait in a collective for it. A rank that stops answering
// without dying is the watchdog's (dist/mpi_watchdog.h): a collective that waits longer than the
// collective timeout aborts the job, naming the collective and the ranks it waits for.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "dist/process_group.h"

namespace zt {

// True when this process was started by mpirun/mpiexec (OpenMPI sets OMPI_COMM_WORLD_SIZE).
bool launched_by_mpirun();

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup();   // the world: MPI_Init_thread, then starts the communication thread
  ~MpiProcessGroup();  // drains its collectives; the last group of the process stops the thread, MPI_Finalize
  MpiProcessGroup(const MpiProcessGroup&) = delete;
  MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  // The nodes as MPI finds them (MPI_Comm_split_type: the ranks that share memory), numbered by
  // their lowest rank; a launcher's local rank that disagrees is reported on stderr. A sub-group
  // (split) has the world's restricted to its ranks.
  const Topology& topology() const override { return topology_; }
  [[noreturn]] void abort(const std::string& message, int code) override;
  bool set_collective_timeout(double seconds) override;

 protected:
  WorkPtr do_all_reduce(const Tensor& x) override;
  WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out) override;
  WorkPtr do_all_gather(const Tensor& in, const Tensor& out) override;
  WorkPtr do_broadcast(const Tensor& x, int root) override;
  WorkPtr do_barrier() override;
  WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) override;
  // MPI_Comm_split on the communication thread; the new group shares that thread (and the
  // watchdog), so its collectives and this group's run in the order they were issued.
  std::unique_ptr<ProcessGroup> do_split(int color, const std::vector<int>& members) override;

 private:
  struct Runtime;  // the communication thread, its queue, the watchdog (mpi_process_group.cpp)
  struct Comm;     // this group's MPI_Comm (mpi.h stays out of this header)
  MpiProcessGroup(std::shared_ptr<Runtime> rt, std::unique_ptr<Comm> comm, Topology topology);  // a sub-group

  // Queues fn (which makes blocking MPI calls on this group's communicator) for the communication
  // thread. The returned Work keeps `keep` alive (the tensors) until the collective is done.
  WorkPtr submit(std::function<void()> fn, std::vector<Tensor> keep);

  std::shared_ptr<Runtime> rt_;  // shared by the world and its sub-groups; the last one ends MPI
  std::unique_ptr<Comm> comm_;
  int rank_ = 0, size_ = 1;
  Topology topology_;
};

}  // namespace zt
