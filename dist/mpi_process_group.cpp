// defines: launched_by_mpirun, MpiProcessGroup (constructors, set_collective_timeout, destructor, submit,
//          do_split and 7 more), MpiProcessGroup::Runtime, MpiProcessGroup::Comm (dist/mpi_process_group.h);
//          file-local: mpi_type, mpi_count, QueuedWork and 5 more
#include "dist/mpi_process_group.h"

#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings are deprecated and warn)
#include <mpi.h>

#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"       // defines: backend_of, Backend (host_allocator, synchronize, copies)
#include "dist/mpi_ring.h"      // defines: ring_reduce_scatter, ring_all_gather, ring_all_reduce
#include "dist/mpi_watchdog.h"  // defines: CollectiveWatchdog

namespace zt {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

namespace {

// bfloat16 and float16 travel as 2-byte words (MPI has no such types); their sums are the rings'
// (dist/mpi_ring.h), which add in float32 and round once per addition.
MPI_Datatype mpi_type(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;
    case DType::u8: return MPI_UINT8_T;  // quantized payloads: moved, never added
    default: return MPI_FLOAT;
  }
}

// MPI counts are int: one collective moves at most 2^31 - 1 elements.
int mpi_count(const Tensor& t) {
  ZT_CHECK(t.numel() <= INT32_MAX, "MPI collective of ", t.numel(), " elements: at most 2^31 - 1 per call");
  return static_cast<int>(t.numel());
}

// A collective handed to the communication thread: done when its promise is set.
struct QueuedWork final : Work {
  std::shared_future<void> done;
  std::vector<Tensor> keep;  // the buffers stay alive while MPI may touch them
  void wait() override {
    done.get();  // rethrows
    keep.clear();
  }
};

// Device buffers (GPU tensors in a CUDA build): MPI here is not CUDA-aware, so a device
// buffer is copied into a pinned host mirror before the collective and back after it, on the
// communication thread. The caller's device work must be finished before the copy in: the
// device's backend is synchronized first (the ZeRO engine on the GPU will use the NCCL backend;
// this path lets several ranks share one GPU in tests).
// dist/ names no device: a buffer's device is its Tensor's (core/device.h), and the pinned host
// memory, the synchronization and the copies are its backend's entries (core/backend.h:
// host_allocator(true), synchronize, copy_to_host, copy_from_host; each makes its device
// current). A CPU build has no device tensors, so the path is never taken there.
struct Staged {
  std::vector<Tensor> host;                          // what MPI sees, one per buffer
  std::vector<std::pair<Tensor, Tensor>> copy_back;  // (device buffer, host mirror) to copy back
};

bool on_device(const Tensor& t) { return !t.device().is_cpu(); }

// bufs[0..]: the collective's buffers; `written`: which of them the collective writes.
// in_place_of: -1, or the index of the buffer that bufs[0] is a view of (all-gather in place).
Staged stage(const std::vector<Tensor>& bufs, const std::vector<bool>& written, int in_place_of, int rank) {
  Staged st;
  st.host = bufs;
  const Tensor* dev = nullptr;  // the last device buffer: whose backend is synchronized
  for (const Tensor& t : bufs)
    if (on_device(t)) dev = &t;
  if (!dev) return st;
  backend_of(*dev).synchronize();  // the caller's kernels wrote the buffers
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (static_cast<int>(i) == 0 && in_place_of >= 0) continue;  // a view of its output's mirror, below
    if (!on_device(bufs[i])) continue;
    Backend& be = backend_of(bufs[i]);
    Tensor h = Tensor::empty({bufs[i].numel()}, bufs[i].dtype(), Category::comm, be.host_allocator(/*pinned=*/true));
    be.copy_to_host(h, bufs[i]);
    st.host[i] = h;
    if (written[i]) st.copy_back.emplace_back(bufs[i], h);
  }
  if (in_place_of >= 0 && st.host[in_place_of].raw() != bufs[in_place_of].raw())
    st.host[0] = st.host[in_place_of].flat_view(static_cast<int64_t>(rank) * bufs[0].numel(), {bufs[0].numel()});
  return st;
}

// On the communication thread. The backend's entries make the buffer's device current for their
// calls (so no context is created on GPU 0 in a rank that trains on another GPU).
void unstage(const Staged& st) {
  for (const auto& [dev, host] : st.copy_back) backend_of(dev).copy_from_host(dev, host);
}

// Collective over MPI_COMM_WORLD: the ranks that share memory form a node (MPI_COMM_TYPE_SHARED);
// each node's lowest rank leads it, and the leaders, in rank order, number the nodes.
Topology find_topology(int rank, int size) {
  MPI_Comm local = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank = 0, node = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_split(MPI_COMM_WORLD, local_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
  if (leaders != MPI_COMM_NULL) {
    MPI_Comm_rank(leaders, &node);
    MPI_Comm_free(&leaders);
  }
  MPI_Bcast(&node, 1, MPI_INT, 0, local);
  MPI_Comm_free(&local);
  std::vector<int> node_of(static_cast<size_t>(size));
  MPI_Allgather(&node, 1, MPI_INT, node_of.data(), 1, MPI_INT, MPI_COMM_WORLD);
  Topology t = topology_of_nodes(std::move(node_of), rank, "MPI_Comm_split_type");
  const LauncherRanks l = launcher_ranks();
  if (l.local_rank >= 0 && (l.local_rank != t.local_rank() || (l.node >= 0 && l.node != t.node())))
    std::fprintf(stderr,
                 "zt: note: rank %d: %s says local rank %d%s, MPI finds local rank %d on node %d (%s); "
                 "ZeroTensor uses MPI's\n",
                 rank, l.launcher.c_str(), l.local_rank,
                 l.node >= 0 ? (", node " + std::to_string(l.node)).c_str() : "", t.local_rank(), t.node(),
                 t.summary().c_str());
  return t;
}

}  // namespace

// The communication thread and what it serves: one per process, shared by the world group and
// its sub-groups. Made by the world's constructor (MPI_Init_thread first); the last group to go
// destroys it, which stops the thread, frees the watchdog's board and finalizes MPI.
struct MpiProcessGroup::Runtime {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool stop = false;
  std::thread thread;
  std::unique_ptr<CollectiveWatchdog> watchdog;  // created before the thread, destroyed after it
  int64_t seq = 0;                               // collectives run so far (the thread's count)
  RingScratch ring_scratch;                      // the rings' receive buffer (the thread's alone)

  void loop() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [this] { return stop || !queue.empty(); });
        if (queue.empty()) return;  // stop and drained
        fn = std::move(queue.front());
        queue.pop_front();
      }
      fn();
    }
  }
  void push(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(fn));
    }
    cv.notify_one();
  }
  // Runs fn on the communication thread and waits for it (the group's own MPI calls: splits, frees).
  void run_now(std::function<void()> fn) {
    std::promise<void> done;
    push([&] {
      try {
        fn();
        done.set_value();
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
    done.get_future().get();
  }
  ~Runtime() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      watchdog.reset();  // collective: frees the progress board
      MPI_Finalize();
    }
  }
};

struct MpiProcessGroup::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
};

MpiProcessGroup::MpiProcessGroup() : rt_(std::make_shared<Runtime>()), comm_(std::make_unique<Comm>()) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Waiting ranks yield their core (OpenMPI's mpi_yield_when_idle), unless the user chose: a
    // rank's blocking collective runs on the communication thread beside the compute threads, and
    // by default OpenMPI spins while it waits for the slower ranks, taking a core's share from the
    // kernels (it yields only when it counts more ranks than slots, not knowing of the threads).
    // What it is worth, measured with ranks sharing cores: bench/results/mpi_yield.md. Read by
    // OpenMPI at MPI_Init; other MPI libraries ignore the variable.
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      std::fprintf(stderr, "error: the MPI library offers thread level %d, ZeroTensor needs MPI_THREAD_SERIALIZED (%d)\n",
                   provided, MPI_THREAD_SERIALIZED);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  comm_->comm = MPI_COMM_WORLD;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  topology_ = find_topology(rank_, size_);
  rt_->watchdog = std::make_unique<CollectiveWatchdog>(rank_, size_);
  Runtime* rt = rt_.get();
  rt_->thread = std::thread([rt] { rt->loop(); });
}

MpiProcessGroup::MpiProcessGroup(std::shared_ptr<Runtime> rt, std::unique_ptr<Comm> comm, Topology topology)
    : rt_(std::move(rt)), comm_(std::move(comm)), topology_(std::move(topology)) {
  rank_ = topology_.rank;
  size_ = topology_.size();
}

bool MpiProcessGroup::set_collective_timeout(double seconds) {
  ProcessGroup::set_collective_timeout(seconds);  // checks the value
  rt_->watchdog->set_timeout(seconds);            // the process's one watchdog: every group's collectives
  return true;
}

MpiProcessGroup::~MpiProcessGroup() {
  // The queue runs in order: what this group queued (a Work dropped without wait) runs before the
  // group goes. A sub-group then frees its communicator there too; the world's is MPI_COMM_WORLD.
  // The runtime (the thread, MPI itself) goes with the last group.
  const bool sub = comm_->comm != MPI_COMM_WORLD && comm_->comm != MPI_COMM_NULL;
  rt_->run_now([c = comm_.get(), sub] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (sub && !finalized) MPI_Comm_free(&c->comm);
  });
}

WorkPtr MpiProcessGroup::submit(std::function<void()> fn, std::vector<Tensor> keep) {
  auto promise = std::make_shared<std::promise<void>>();
  auto w = std::make_shared<QueuedWork>();
  w->done = promise->get_future().share();
  w->keep = std::move(keep);
  // The collective's run is timed here, on this thread, not at the call (ProcessGroup::CommOp).
  std::shared_ptr<CommOp> op;
  Collective kind = Collective::barrier;
  if (issuing_) {
    op = std::make_shared<CommOp>(*issuing_);
    issuing_->claimed = true;
    kind = issuing_->kind;
  }
  Runtime* rt = rt_.get();
  rt->push([this, rt, fn = std::move(fn), promise, op, kind, label = label()]() mutable {
    const int64_t seq = ++rt->seq;
    rt->watchdog->started(seq, kind, label);  // from here the collective timeout runs
    try {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      fn = nullptr;  // drop the captured buffers before the waiter wakes (memory is exact then)
      rt->watchdog->finished(seq);
      if (op) record_run(*op, t0, std::chrono::steady_clock::now());
      promise->set_value();
    } catch (...) {
      rt->watchdog->finished(seq);
      promise->set_exception(std::current_exception());
    }
  });
  return w;
}

WorkPtr MpiProcessGroup::do_all_reduce(const Tensor& x) {
  Staged st = stage({x}, {true}, -1, rank_);
  const Tensor h = st.host[0];
  mpi_count(h);  // at most 2^31 - 1 elements
  return submit(
      [h, st, c = comm_->comm, rank = rank_, size = size_, rt = rt_.get()] {
        ring_all_reduce(h, mpi_type(h), c, rank, size, rt->ring_scratch);
        unstage(st);
      },
      {x, h});
}

WorkPtr MpiProcessGroup::do_reduce_scatter(const Tensor& in, const Tensor& out) {
  const char *in_lo = static_cast<const char*>(in.raw()), *out_lo = static_cast<const char*>(out.raw());
  ZT_CHECK(out_lo + out.nbytes() <= in_lo || out_lo >= in_lo + in.nbytes(),
           "reduce_scatter on MPI: the output overlaps the input (the ring reads every chunk of the input "
           "after it has written the output); pass separate buffers");
  Staged st = stage({in, out}, {false, true}, -1, rank_);
  const Tensor hi = st.host[0], ho = st.host[1];
  mpi_count(ho);  // at most 2^31 - 1 elements per chunk
  return submit(
      [hi, ho, st, c = comm_->comm, rank = rank_, size = size_, rt = rt_.get()] {
        ring_reduce_scatter(hi, ho, mpi_type(hi), c, rank, size, rt->ring_scratch);
        unstage(st);
      },
      {in, out, hi, ho});
}

WorkPtr MpiProcessGroup::do_all_gather(const Tensor& in, const Tensor& out) {
  // This rank's input already at its place in the output (ZeRO stages 1-2 publishing a shard of
  // the full buffer): a device buffer's host mirror is then a view of the output's mirror too.
  const bool in_place = in.raw() == static_cast<char*>(out.raw()) + static_cast<size_t>(rank_) * in.nbytes();
  Staged st = stage({in, out}, {false, true}, in_place ? 1 : -1, rank_);
  const Tensor hi = st.host[0], ho = st.host[1];
  mpi_count(hi);  // at most 2^31 - 1 elements per chunk
  return submit(
      [hi, ho, st, c = comm_->comm, rank = rank_, size = size_] {
        ring_all_gather(hi, ho, mpi_type(hi), c, rank, size);
        unstage(st);
      },
      {in, out, hi, ho});
}

WorkPtr MpiProcessGroup::do_broadcast(const Tensor& x, int root) {
  Staged st = stage({x}, {true}, -1, rank_);
  const Tensor h = st.host[0];
  return submit(
      [h, root, st, c = comm_->comm] {
        MPI_Bcast(h.raw(), mpi_count(h), mpi_type(h), root, c);
        unstage(st);
      },
      {x, h});
}

WorkPtr MpiProcessGroup::do_barrier() {
  return submit([c = comm_->comm] { MPI_Barrier(c); }, {});
}

WorkPtr MpiProcessGroup::do_all_to_all(const Tensor& in, const Tensor& out) {
  Staged st = stage({in, out}, {false, true}, -1, rank_);
  const Tensor hi = st.host[0], ho = st.host[1];
  mpi_count(in);  // at most 2^31 - 1 elements
  const int block = static_cast<int>(in.numel() / size_);
  return submit(
      [hi, ho, block, st, c = comm_->comm] {
        MPI_Alltoall(hi.raw(), block, mpi_type(hi), ho.raw(), block, mpi_type(ho), c);
        unstage(st);
      },
      {in, out, hi, ho});
}

std::unique_ptr<ProcessGroup> MpiProcessGroup::do_split(int color, const std::vector<int>& members) {
  // Collective on this communicator, so queued behind this group's collectives; key = the place
  // in `members` (the order ProcessGroup::split agreed on).
  int key = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == rank_) key = static_cast<int>(i);
  auto comm = std::make_unique<Comm>();
  rt_->run_now(
      [&, parent = comm_->comm] { MPI_Comm_split(parent, color < 0 ? MPI_UNDEFINED : color, key, &comm->comm); });
  if (color < 0) return nullptr;
  Topology t = sub_topology(topology_, members, key);
  return std::unique_ptr<ProcessGroup>(new MpiProcessGroup(rt_, std::move(comm), std::move(t)));
}

void MpiProcessGroup::abort(const std::string& message, int code) {
  std::fprintf(stderr, "error on rank %d of %d: %s\n", rank_, size_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);  // the whole job, whichever group failed
  std::exit(code);  // MPI_Abort does not return; this line is for the compiler
}

}  // namespace zt
