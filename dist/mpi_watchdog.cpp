// defines: SlotFields, CollectiveWatchdog (constructor, destructor, set_timeout, started, finished and 3
//          more) (dist/mpi_watchdog.h); file-local: monotonic_ns, PeerRecord, this_host, state_line,
//          parse_state
#include "dist/mpi_watchdog.h"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>  // std::_Exit
#include <cstring>
#include <ctime>
#include <future>
#include <sstream>
#include <vector>

#include "core/check.h"
#include "dist/peer_probe.h"  // StateServer, probe_peer

namespace zt {

namespace {

// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine (steady_clock is
// not promised to be machine-wide; this is).
int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

constexpr int64_t kBeatNs = 100'000'000;       // the watchdog thread wakes (and beats) every 100 ms
constexpr int64_t kSilentNs = 2'000'000'000;   // a peer that has not beaten for 2 s is not answering

// What a rank tells the others when the group is made: where it runs and where it answers.
struct PeerRecord {
  char host[64];
  uint32_t port;
  uint32_t count;       // addresses used
  uint32_t address[6];  // IPv4, network byte order
};

std::string this_host() {
  char h[64] = {};
  if (::gethostname(h, sizeof h - 1) != 0) return "?";
  return h;
}

// The state server's line: "zt-state entered=57 left=56 kind=2 pid=4242".
std::string state_line(int64_t entered, int64_t left, int64_t kind, int64_t pid) {
  return "zt-state entered=" + std::to_string(entered) + " left=" + std::to_string(left) +
         " kind=" + std::to_string(kind) + " pid=" + std::to_string(pid);
}
bool parse_state(const std::string& line, long long& entered, long long& left, long long& kind, long long& pid) {
  return std::sscanf(line.c_str(), "zt-state entered=%lld left=%lld kind=%lld pid=%lld", &entered, &left, &kind,
                     &pid) == 4;
}

}  // namespace

// One rank's line on the board. Lock-free 64-bit atomics are address-free, so they work in memory
// that several processes map (the shared window).
struct SlotFields {
  std::atomic<int64_t> world_rank{-1};
  std::atomic<int64_t> pid{0};
  std::atomic<int64_t> heartbeat_ns{0};
  std::atomic<int64_t> entered{0};  // seq of the last collective started (0: none yet)
  std::atomic<int64_t> entered_ns{0};  // CLOCK_MONOTONIC when it started
  std::atomic<int64_t> left{0};     // seq of the last collective finished
  std::atomic<int64_t> kind{0};     // the Collective of `entered`
};
static_assert(std::atomic<int64_t>::is_always_lock_free, "the progress board needs lock-free 64-bit atomics");

struct CollectiveWatchdog::Board {
  MPI_Comm node = MPI_COMM_NULL;  // the ranks of this machine
  MPI_Win win = MPI_WIN_NULL;
  int node_rank = 0;
  std::vector<SlotFields*> slots;  // node-rank order
  SlotFields* mine() const { return slots[static_cast<size_t>(node_rank)]; }
};

CollectiveWatchdog::CollectiveWatchdog(int rank, int size) : rank_(rank), size_(size), board_(std::make_unique<Board>()) {
  Board& b = *board_;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &b.node);
  int node_size = 1;
  MPI_Comm_rank(b.node, &b.node_rank);
  MPI_Comm_size(b.node, &node_size);
  void* base = nullptr;
  MPI_Win_allocate_shared(sizeof(SlotFields), 1, MPI_INFO_NULL, b.node, &base, &b.win);
  new (base) SlotFields();  // this rank's slot; the others construct theirs
  SlotFields* me = static_cast<SlotFields*>(base);
  me->world_rank.store(rank);
  me->pid.store(static_cast<int64_t>(::getpid()));
  me->heartbeat_ns.store(monotonic_ns());
  // A passive-target epoch open for the group's lifetime: loads and stores into the window need
  // no further MPI call (MPI-3.1 section 11.5.5, the unified memory model of shared windows).
  MPI_Win_lock_all(MPI_MODE_NOCHECK, b.win);
  MPI_Barrier(b.node);  // every slot is constructed before anyone reads it
  b.slots.resize(static_cast<size_t>(node_size));
  for (int q = 0; q < node_size; ++q) {
    MPI_Aint bytes = 0;
    int disp = 0;
    void* p = nullptr;
    MPI_Win_shared_query(b.win, q, &bytes, &disp, &p);
    b.slots[static_cast<size_t>(q)] = static_cast<SlotFields*>(p);
  }
  // This rank's state for the ranks of other machines, and where every rank answers.
  server_ = std::make_unique<StateServer>(
      [me] { return state_line(me->entered.load(), me->left.load(), me->kind.load(), me->pid.load()); });
  PeerRecord mine{};
  std::strncpy(mine.host, this_host().c_str(), sizeof mine.host - 1);
  mine.port = server_->port();
  for (uint32_t a : local_ipv4_addresses())
    if (mine.count < std::size(mine.address)) mine.address[mine.count++] = a;
  std::vector<PeerRecord> all(static_cast<size_t>(size));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  peers_.resize(all.size());
  for (size_t q = 0; q < all.size(); ++q) {
    all[q].host[sizeof all[q].host - 1] = 0;
    peers_[q].host = all[q].host;
    peers_[q].port = static_cast<uint16_t>(all[q].port);
    peers_[q].addresses.assign(all[q].address, all[q].address + std::min<uint32_t>(all[q].count, 6));
  }
  thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  thread_.request_stop();
  thread_.join();
  server_.reset();  // before the board it reads
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI took the window with it
  Board& b = *board_;
  MPI_Win_unlock_all(b.win);
  MPI_Win_free(&b.win);
  MPI_Comm_free(&b.node);
}

void CollectiveWatchdog::set_timeout(double seconds) { timeout_s_.store(seconds); }

void CollectiveWatchdog::started(int64_t seq, Collective kind, const std::string& label) {
  {
    std::lock_guard<std::mutex> lock(label_mu_);
    running_label_ = label;
  }
  SlotFields* me = board_->mine();
  me->kind.store(static_cast<int64_t>(kind));
  me->entered_ns.store(monotonic_ns());
  me->entered.store(seq);  // last: a reader that sees seq sees its start time and kind
}

void CollectiveWatchdog::finished(int64_t seq) { board_->mine()->left.store(seq); }

std::string CollectiveWatchdog::report(int64_t seq, double waited_s) const {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  std::string label;
  {
    std::lock_guard<std::mutex> lock(label_mu_);
    label = running_label_;
  }
  s << "collective timeout: " << collective_name(static_cast<Collective>(board_->mine()->kind.load())) << " #" << seq;
  if (!label.empty()) s << " (" << label << ")";
  s << " has waited " << waited_s << " s, longer than collective_timeout_s = " << timeout_s_.load()
    << " (zt-train --collective-timeout-s)";
  const int64_t now = monotonic_ns();
  std::vector<int> suspects, behind;  // silent (stopped, gone, cut off); alive but not in this collective
  for (const SlotFields* p : board_->slots) {
    const int q = static_cast<int>(p->world_rank.load());
    if (q == rank_) continue;
    const int64_t silent = now - p->heartbeat_ns.load(), entered = p->entered.load(), left = p->left.load();
    s << "\n  rank " << q << " (pid " << p->pid.load() << ", node " << peers_[static_cast<size_t>(q)].host << ")";
    const bool mute = silent > kSilentNs;
    if (mute) s << " has not answered for " << silent / 1e9 << " s (stopped or hung)";
    else s << " is alive";
    if (entered >= seq) {
      s << " and is in this collective too";
    } else {
      s << " and has not reached this collective: its last is #" << entered << " "
        << collective_name(static_cast<Collective>(p->kind.load())) << (left == entered ? ", finished" : ", running");
    }
    if (mute) suspects.push_back(q);
    else if (entered < seq) behind.push_back(q);
  }
  report_off_board(s, seq, suspects, behind);
  // A rank that is alive but still in an earlier collective waits, most often, on a silent one:
  // it is a suspect only when no rank is silent (then it may be stuck outside MPI, or deadlocked).
  if (suspects.empty()) suspects = behind;
  if (!suspects.empty()) {
    s << "\n  suspect: rank";
    for (size_t i = 0; i < suspects.size(); ++i)
      s << (i ? ", " : " ") << suspects[i] << " (node " << peers_[static_cast<size_t>(suspects[i])].host << ")";
  }
  return s.str();
}

void CollectiveWatchdog::report_off_board(std::ostringstream& s, int64_t seq, std::vector<int>& suspects,
                                          std::vector<int>& behind) const {
  std::vector<bool> on_board(static_cast<size_t>(size_), false);
  for (const SlotFields* p : board_->slots) on_board[static_cast<size_t>(p->world_rank.load())] = true;
  std::vector<int> off;
  for (int q = 0; q < size_; ++q)
    if (!on_board[static_cast<size_t>(q)]) off.push_back(q);
  // All at once: the report waits kProbeS seconds at most, however many machines are silent. One
  // thread per rank off this board: right for tens of machines; thousands would want one poll loop.
  std::vector<std::future<ProbeResult>> asked;
  for (int q : off) {
    const Peer& p = peers_[static_cast<size_t>(q)];
    asked.push_back(std::async(std::launch::async, [&p] { return probe_peer(p.addresses, p.port, kProbeS); }));
  }
  for (size_t i = 0; i < off.size(); ++i) {
    const int q = off[i];
    const ProbeResult r = asked[i].get();
    long long entered = 0, left = 0, kind = 0, pid = 0;
    const bool state = r.outcome == ProbeOutcome::answered && parse_state(r.answer, entered, left, kind, pid);
    s << "\n  rank " << q << " (";
    if (state) s << "pid " << pid << ", ";
    s << "node " << peers_[static_cast<size_t>(q)].host << ", another machine)";
    if (!state) {
      s << " " << outcome_text(r, kProbeS);
      if (r.outcome == ProbeOutcome::answered) s << ", but not with its state: '" << r.answer << "'";
      suspects.push_back(q);
    } else if (entered >= seq) {
      s << " is alive and is in this collective too";
    } else {
      s << " is alive and has not reached this collective: its last is #" << entered << " "
        << collective_name(static_cast<Collective>(kind)) << (left == entered ? ", finished" : ", running");
      behind.push_back(q);
    }
  }
}

void CollectiveWatchdog::loop(std::stop_token stop) {
  std::mutex mu;  // the wait's own: nothing else shares it
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> lock(mu);
  SlotFields* me = board_->mine();
  while (!cv.wait_for(lock, stop, std::chrono::nanoseconds(kBeatNs), [&stop] { return stop.stop_requested(); })) {
    const int64_t now = monotonic_ns();
    me->heartbeat_ns.store(now);
    const int64_t seq = me->entered.load();
    const double limit = timeout_s_.load();
    if (me->left.load() == seq || limit <= 0) continue;  // no collective running, or no limit
    const double waited = static_cast<double>(now - me->entered_ns.load()) / 1e9;
    if (waited <= limit || me->left.load() == seq) continue;  // in time, or it ended meanwhile
    const std::string msg = report(seq, waited);
    std::fprintf(stderr, "error on rank %d of %d: %s\n", rank_, size_, msg.c_str());
    std::fflush(stderr);
    // The other waiting ranks time out within a beat or two of this one: give their reports time
    // to get out before the abort ends them (a job then tells its story from every side).
    std::this_thread::sleep_for(std::chrono::duration<double>(kReportGraceS));
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);  // MPI_Abort does not return
  }
}

}  // namespace zt
