// defines: StateServer, ProbeOutcome, ProbeResult, probe_peer, local_ipv4_addresses, outcome_text —
//          a rank's state asked over TCP by a rank on another machine, for the collective
//          timeout's report.
//
// The collective watchdog (dist/mpi_watchdog.h) reads the ranks of its own machine from a
// shared-memory board. A rank on another machine is not on that board, and MPI cannot be asked
// about it either: the communication thread is blocked inside the very collective that timed out
// (MPI_THREAD_SERIALIZED: one thread in MPI at a time). So each rank also answers a plain TCP
// connection with one line of its state, served by a thread of its own, and the timed-out rank
// connects to every rank off its board. What the connection does is itself the diagnosis:
//   answered     the process runs: the line says whether it reached the collective;
//   silent       the kernel accepted the connection but nothing answered in time: the process
//                exists and does not run (SIGSTOP, swapped out, wedged);
//   refused      the machine answered, nothing listens: the process is gone;
//   unreachable  no connection in time: the machine or its link is down.
// The server binds every IPv4 address (port chosen by the kernel); a rank advertises its
// addresses (local_ipv4_addresses, loopback excluded) and the prober tries them in order.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace zt {

// Answers every connection with answer() (one line), then closes it.
class StateServer {
 public:
  explicit StateServer(std::function<std::string()> answer);  // binds 0.0.0.0:0; errors name the call
  ~StateServer();                                             // stops the thread, closes the socket
  StateServer(const StateServer&) = delete;
  StateServer& operator=(const StateServer&) = delete;
  uint16_t port() const { return port_; }  // host byte order

 private:
  void loop();
  std::function<std::string()> answer_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

enum class ProbeOutcome { answered, silent, refused, unreachable };

struct ProbeResult {
  ProbeOutcome outcome = ProbeOutcome::unreachable;
  std::string answer;   // the line (answered), without its newline
  std::string address;  // the address that answered, refused or accepted ("10.77.0.2:41234")
};

// Connects to port at each address in turn (IPv4, network byte order) and reads one line, all
// within timeout_s seconds.
ProbeResult probe_peer(const std::vector<uint32_t>& addresses, uint16_t port, double timeout_s);

// This machine's IPv4 addresses on interfaces that are up, loopback excluded (a rank probed from
// another machine is never behind that machine's loopback), network byte order.
std::vector<uint32_t> local_ipv4_addresses();

// "does not answer (stopped or hung)" and so on, for a report: the outcome in words, with the
// seconds waited where that is the finding.
std::string outcome_text(const ProbeResult& r, double timeout_s);

}  // namespace zt
