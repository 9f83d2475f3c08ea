// defines: CollectiveWatchdog, kDefaultCollectiveTimeoutS, kProbeS — the MPI backend's guard
//          against a rank that stops answering, here or on another machine.
//
// A rank that dies is mpirun's business: it notices the exit and kills the job, naming the rank.
// A rank that stops answering (SIGSTOP, a deadlock, a livelock in a kernel, a swapped-out node)
// does not exit, and every other rank would wait in its next collective forever. The watchdog
// turns that wait into an error: when one collective has run longer than the collective timeout
// (config key `collective_timeout_s`, zt-train --collective-timeout-s; default 600 s, PyTorch's
// NCCL default; 0 = none), the rank prints what it waits for and which ranks it suspects, waits
// kReportGraceS (the other waiting ranks' timeouts expire meanwhile, and they print theirs), and
// calls MPI_Abort, which ends every rank of the job.
//
// Naming the culprit: the ranks of one machine share a small progress board, one slot per rank
// (MPI_Win_allocate_shared over MPI_COMM_TYPE_SHARED, plain atomic loads and stores afterwards):
//   heartbeat_ns  written every 100 ms by the rank's watchdog thread (CLOCK_MONOTONIC, which is
//                 machine-wide) — a stopped process stops writing it;
//   entered/left  the sequence number of the last collective the rank started / finished (every
//                 rank issues the same sequence, so #57 is the same collective on every rank),
//                 entered_ns when it started: the rank's own timeout reads its own slot.
// The timed-out rank reports, for every other rank of its machine, whether it still beats and
// whether it reached this collective: "rank 1 (pid 4242, node gpu-a) has not answered for 5.1 s
// (stopped or hung) and has not reached it: its last collective is #56 all_gather, finished".
// Ranks on other machines are asked over TCP (dist/peer_probe.h: each rank serves its own slot
// as one line; the addresses, ports and host names are exchanged when the group is made), in
// parallel, within kProbeS seconds: "rank 3 (node gpu-b) does not answer: its machine accepted
// the connection (...), the process said nothing in 2.0 s (stopped or hung)", "... is
// unreachable: no connection in 2.0 s (its machine or its link is down)", "... is gone: its
// machine refused the connection". The report ends with the suspects and their nodes: the ranks
// that do not answer; where every rank answers, the ones that have not reached the collective.
//
// Threads: the board is created and freed by the thread that creates the group (collective over
// MPI_COMM_WORLD); started()/finished() are called by the communication thread; the watchdog's
// own thread reads the board and, on a timeout, calls MPI_Abort — the one MPI call made outside
// the communication thread: it asks the runtime to end the job and does not touch the
// communicator the communication thread is blocked in.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dist/process_group.h"  // defines: Collective

namespace zt {

class StateServer;  // dist/peer_probe.h

inline constexpr double kDefaultCollectiveTimeoutS = 600.0;
inline constexpr double kProbeS = 2.0;  // how long the report waits for a rank on another machine
inline constexpr double kReportGraceS = 2.0;  // between a rank's report and its MPI_Abort

class CollectiveWatchdog {
 public:
  // Collective over MPI_COMM_WORLD (every rank, MPI initialized, before any collective).
  CollectiveWatchdog(int rank, int size);
  // Collective too: stops the thread and frees the board (call before MPI_Finalize, on every rank).
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  void set_timeout(double seconds);  // 0 = never time out (checked by ProcessGroup::set_collective_timeout)
  double timeout() const { return timeout_s_.load(); }

  // The communication thread, around each blocking MPI collective. `seq` counts from 1.
  void started(int64_t seq, Collective kind, const std::string& label);
  void finished(int64_t seq);

 private:
  struct Board;  // the shared window and this machine's slots (mpi_watchdog.cpp)
  void loop(std::stop_token stop);
  // The report of a timed-out collective: what this rank waits for, and every peer's state.
  std::string report(int64_t seq, double waited_s) const;

  // Where every rank runs and answers (by world rank): its host name, and its state server's
  // port and addresses (network byte order), exchanged by the constructor.
  struct Peer {
    std::string host;
    uint16_t port = 0;
    std::vector<uint32_t> addresses;
  };
  // The lines of the report for the ranks off this machine's board (probed in parallel).
  // silent ones join `suspects`, live ones that have not reached the collective `behind`.
  void report_off_board(std::ostringstream& s, int64_t seq, std::vector<int>& suspects, std::vector<int>& behind) const;

  int rank_, size_;
  std::unique_ptr<Board> board_;
  std::vector<Peer> peers_;
  std::unique_ptr<StateServer> server_;  // answers for this rank; made after the board

  std::atomic<double> timeout_s_{kDefaultCollectiveTimeoutS};
  // The running collective itself is this rank's slot on the board (entered, left, its start);
  // only its label, for the report, is kept here.
  mutable std::mutex label_mu_;
  std::string running_label_;
  std::jthread thread_;  // loop(); the destructor's request_stop() ends it
};

}  // namespace zt
