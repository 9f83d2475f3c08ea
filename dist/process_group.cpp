// defines: collective_name, CommCounters (total), CommTimes (busy_total, wait_total), ProcessGroup
//          (set_collective_timeout, count, times, record_run, issue, split, split_members and 6 more),
//          completed_work, reported_work, intra_node_group, inter_node_group, node_block_group, sub_topology,
//          SingleProcessGroup (topology, do_reduce_scatter, do_all_gather, abort), init_process_group,
//          finalize_process_group (dist/process_group.h); file-local: DoneWork, ReportedWork, Adds, check_buffer,
//          copy_whole, global_group
#include "dist/process_group.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "dist/mpi_process_group.h"  // defines: MpiProcessGroup, launched_by_mpirun

namespace zt {

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_gather: return "all_gather";
    case Collective::broadcast: return "broadcast";
    case Collective::barrier: return "barrier";
    case Collective::all_to_all: return "all_to_all";
  }
  return "?";
}

int64_t CommCounters::total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

double CommTimes::busy_total() const {
  double t = 0;
  for (double b : busy_s) t += b;
  return t;
}

double CommTimes::wait_total() const {
  double t = 0;
  for (double w : wait_s) t += w;
  return t;
}

CommCounters CommCounters::operator-(const CommCounters& o) const {
  CommCounters d;
  for (int i = 0; i < kNumCollectives; ++i) {
    d.bytes[i] = bytes[i] - o.bytes[i];
    d.calls[i] = calls[i] - o.calls[i];
  }
  for (int i = 0; i < 2; ++i) d.link[i] = link[i] - o.link[i];
  return d;
}

CommCounters& CommCounters::operator+=(const CommCounters& o) {
  for (int i = 0; i < kNumCollectives; ++i) {
    bytes[i] += o.bytes[i];
    calls[i] += o.calls[i];
  }
  for (int i = 0; i < 2; ++i) link[i] += o.link[i];
  return *this;
}

bool ProcessGroup::set_collective_timeout(double seconds) {
  ZT_CHECK(std::isfinite(seconds) && seconds >= 0, "collective_timeout_s = ", seconds,
           " is invalid: expected a number of seconds >= 0 (0 = no timeout)");
  return false;
}

namespace {
struct DoneWork final : Work {
  void wait() override {}
  bool outputs_queued() const override { return true; }
};

// A collective that only moves data (all-gather, broadcast, all-to-all) also takes uint8 bytes
// (ZeRO++'s quantized payloads); one that adds takes the float types only.
enum class Adds : bool { no, yes };
void check_buffer(const Tensor& t, const char* what, const char* op, Adds adds) {
  ZT_CHECK(t.defined() && t.dim() == 1 && t.is_contiguous(), op, ": ", what, " must be a defined contiguous 1-D tensor, got ",
           t.defined() ? t.str() : std::string("undefined"));
  const DType d = t.dtype();
  const bool float_type = d == DType::f32 || d == DType::f64 || d == DType::bf16 || d == DType::f16;
  if (adds == Adds::yes)
    ZT_CHECK(float_type, op, ": ", what, " must be float32, float64, bfloat16 or float16, got ", t.str());
  else
    ZT_CHECK(float_type || d == DType::u8, op, ": ", what,
             " must be float32, float64, bfloat16, float16 or uint8, got ", t.str());
}
}  // namespace

WorkPtr completed_work() { return std::make_shared<DoneWork>(); }

namespace {

class ReportedWork final : public Work {
 public:
  explicit ReportedWork(std::function<void()> on_wait) : on_wait_(std::move(on_wait)) {}
  void wait() override { on_wait_(); }

 private:
  std::function<void()> on_wait_;
};

}  // namespace

WorkPtr reported_work(std::function<void()> on_wait) { return std::make_shared<ReportedWork>(std::move(on_wait)); }

void ProcessGroup::count(Collective c, int64_t ring_bytes) {
  counters_.bytes[static_cast<int>(c)] += ring_bytes;
  counters_.calls[static_cast<int>(c)] += 1;
  const Topology& t = topology();  // the link to the ring successor (CommCounters::link)
  counters_.link[t.same_node(rank(), (rank() + 1) % size()) ? 0 : 1] += ring_bytes;
}

// An all-to-all sends one block to every other rank, straight to it: each block on its own link.
void ProcessGroup::count_all_to_all(int64_t block_bytes) {
  const int N = size(), r = rank();
  counters_.bytes[static_cast<int>(Collective::all_to_all)] += block_bytes * (N - 1);
  counters_.calls[static_cast<int>(Collective::all_to_all)] += 1;
  const Topology& t = topology();
  for (int q = 0; q < N; ++q)
    if (q != r) counters_.link[t.same_node(r, q) ? 0 : 1] += block_bytes;
}

// A Work whose wait() adds how long it blocked to the group's wait time (and the trace).
struct ProcessGroup::TimedWork final : Work {
  TimedWork(WorkPtr inner, ProcessGroup* g, Collective kind, std::string name)
      : inner(std::move(inner)), g(g), kind(kind), name(std::move(name)) {}
  bool outputs_queued() const override { return inner->outputs_queued(); }
  DeviceEventPtr done_event() const override { return inner->done_event(); }
  void wait() override {
    const auto t0 = std::chrono::steady_clock::now();
    inner->wait();
    const auto t1 = std::chrono::steady_clock::now();
    for (ProcessGroup* up = g; up; up = up->parent_) {  // this group's time, and its parents'
      std::lock_guard<std::mutex> lock(up->times_mu_);
      up->times_.wait_s[static_cast<int>(kind)] += std::chrono::duration<double>(t1 - t0).count();
    }
    // Waits shorter than a microsecond (the collective had landed) would only clutter the view.
    Tracer* t = g->tracer();
    if (t && t1 - t0 >= std::chrono::microseconds(1)) t->span(TraceTrack::compute, "wait " + name, "wait", t0, t1);
  }
  WorkPtr inner;
  ProcessGroup* g;
  Collective kind;
  std::string name;
};

CommTimes ProcessGroup::times() const {
  std::lock_guard<std::mutex> lock(times_mu_);
  return times_;
}

void ProcessGroup::record_run(const CommOp& op, std::chrono::steady_clock::time_point t0,
                              std::chrono::steady_clock::time_point t1) {
  for (ProcessGroup* up = this; up; up = up->parent_) {
    std::lock_guard<std::mutex> lock(up->times_mu_);
    up->times_.busy_s[static_cast<int>(op.kind)] += std::chrono::duration<double>(t1 - t0).count();
  }
  if (Tracer* t = tracer())
    t->span(TraceTrack::comm, op.name, "comm", t0, t1, {{"bytes", op.bytes}, {"inter_node_bytes", op.inter_node}});
}

// Counts (an all-to-all per link, the others by the ring model), hands the collective to the
// backend (do_it), and times its run and its wait.
template <class F> WorkPtr ProcessGroup::issue(Collective c, int64_t ring_bytes, F&& do_it) {
  const CommCounters before = counters_;
  if (c == Collective::all_to_all) count_all_to_all(size() > 1 ? ring_bytes / (size() - 1) : 0);
  else count(c, ring_bytes);
  const CommCounters moved = counters_ - before;
  for (ProcessGroup* up = parent_; up; up = up->parent_)
    up->counters_ += moved;  // a sub-group's bytes are its parent's too
  // The name is only for the trace: no string is built per collective when nobody traces.
  std::string name;
  if (tracer()) name = label().empty() ? collective_name(c) : std::string(collective_name(c)) + " " + label();
  CommOp op{c, std::move(name), ring_bytes, moved.inter_node(), false};
  const auto t0 = std::chrono::steady_clock::now();
  issuing_ = &op;
  WorkPtr w;
  try {
    w = do_it();
  } catch (...) {
    issuing_ = nullptr;
    throw;
  }
  issuing_ = nullptr;
  if (!op.claimed) record_run(op, t0, std::chrono::steady_clock::now());
  return std::make_shared<TimedWork>(std::move(w), this, c, std::move(op.name));
}

WorkPtr ProcessGroup::all_reduce_async(const Tensor& x) {
  check_buffer(x, "x", "all_reduce", Adds::yes);
  return issue(Collective::all_reduce, ring_bytes(2, x.numel(), x.element_size(), size()),
               [&] { return do_all_reduce(x); });
}

WorkPtr ProcessGroup::reduce_scatter_async(const Tensor& in, const Tensor& out) {
  check_buffer(in, "input", "reduce_scatter", Adds::yes);
  check_buffer(out, "output", "reduce_scatter", Adds::yes);
  ZT_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() * size(), "reduce_scatter: input ", in.str(),
           " must hold world size (", size(), ") x output ", out.str());
  return issue(Collective::reduce_scatter, ring_bytes(1, in.numel(), in.element_size(), size()),
               [&] { return do_reduce_scatter(in, out); });
}

WorkPtr ProcessGroup::all_gather_async(const Tensor& in, const Tensor& out) {
  check_buffer(in, "input", "all_gather", Adds::no);
  check_buffer(out, "output", "all_gather", Adds::no);
  ZT_CHECK(in.dtype() == out.dtype() && out.numel() == in.numel() * size(), "all_gather: output ", out.str(),
           " must hold world size (", size(), ") x input ", in.str());
  return issue(Collective::all_gather, ring_bytes(1, out.numel(), out.element_size(), size()),
               [&] { return do_all_gather(in, out); });
}

WorkPtr ProcessGroup::broadcast_async(const Tensor& x, int root) {
  check_buffer(x, "x", "broadcast", Adds::no);
  ZT_CHECK(root >= 0 && root < size(), "broadcast: root ", root, " is not a rank of ", size());
  return issue(Collective::broadcast, ring_bytes(1, x.numel(), x.element_size(), size()),
               [&] { return do_broadcast(x, root); });
}

WorkPtr ProcessGroup::barrier_async() { return issue(Collective::barrier, 0, [&] { return do_barrier(); }); }

WorkPtr ProcessGroup::all_to_all_async(const Tensor& in, const Tensor& out) {
  check_buffer(in, "input", "all_to_all", Adds::no);
  check_buffer(out, "output", "all_to_all", Adds::no);
  ZT_CHECK(in.dtype() == out.dtype() && in.numel() == out.numel() && in.numel() % size() == 0, "all_to_all: input ",
           in.str(), " and output ", out.str(), " must be of one dtype and size, a multiple of the world size (",
           size(), ")");
  ZT_CHECK(in.raw() != out.raw(), "all_to_all: input and output must be different buffers");
  const int64_t block = in.numel() / size() * in.element_size();
  return issue(Collective::all_to_all, block * (size() - 1), [&] { return do_all_to_all(in, out); });
}

std::unique_ptr<ProcessGroup> ProcessGroup::split(int color, int key) {
  // Every rank's (color, key), so that every rank knows its new group's members and their order.
  const int N = size();
  Tensor mine = Tensor::from_vector({static_cast<double>(color), static_cast<double>(key)}, {2}, DType::f64,
                                    Category::comm);
  Tensor all = Tensor::empty({2 * N}, DType::f64, Category::comm);
  all_gather(mine, all);
  const Tensor h = all.to(Device::cpu(), Category::comm);
  const double* a = h.data<double>();
  // A negative color still takes part in the backend's split (MPI_Comm_split is collective over
  // every rank, MPI_UNDEFINED included); the backend returns null for it.
  std::vector<int> members;
  for (int q = 0; q < N && color >= 0; ++q)
    if (static_cast<int>(a[2 * q]) == color) members.push_back(q);
  std::stable_sort(members.begin(), members.end(),
                   [&](int x, int y) { return a[2 * x + 1] < a[2 * y + 1]; });  // by key, ties by rank
  return split_members(color, members);
}

std::unique_ptr<ProcessGroup> ProcessGroup::split_members(int color, const std::vector<int>& members) {
  std::unique_ptr<ProcessGroup> g = do_split(color, members);
  if (g) g->parent_ = this;
  return g;
}

Tracer* ProcessGroup::tracer() const {
  for (const ProcessGroup* g = this; g; g = g->parent_)
    if (Tracer* t = g->tracer_.load()) return t;
  return nullptr;
}

const std::string& ProcessGroup::label() const {
  for (const ProcessGroup* g = this; g; g = g->parent_)
    if (!g->label_.empty()) return g->label_;
  return label_;
}

double ProcessGroup::all_reduce_sum(double v) {
  Tensor t = Tensor::full({1}, v, DType::f64, Category::comm);
  all_reduce(t);
  return t.item();
}

std::string ProcessGroup::first_error(const std::string& mine) {
  // Who failed: one flag per rank (an all-gather); then the lowest failing rank broadcasts its
  // text, one byte per float32 element (exact for 0..255). Nothing more moves when none failed.
  const int N = size();
  Tensor flag = Tensor::full({1}, mine.empty() ? 0.0 : 1.0, DType::f32, Category::comm);
  Tensor flags = Tensor::empty({N}, DType::f32, Category::comm);
  all_gather(flag, flags);
  const Tensor fh = flags.to(Device::cpu(), Category::comm);
  int q = -1;
  for (int r = 0; r < N && q < 0; ++r)
    if (fh.data<float>()[r] != 0.0f) q = r;
  if (q < 0) return "";
  constexpr int64_t kMax = 4000;
  // Every failing rank writes its own text; the broadcast keeps rank q's. (A simulated group's
  // broadcast leaves x as it is, "rank q held this rank's data": its answer is then this rank's
  // message, dist/simulated_process_group.h.)
  std::vector<double> text(kMax + 1, 0.0);  // [0]: the length
  if (!mine.empty()) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(mine.size()), kMax);
    text[0] = static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) text[static_cast<size_t>(i) + 1] = static_cast<unsigned char>(mine[static_cast<size_t>(i)]);
  }
  Tensor t = Tensor::from_vector(text, {kMax + 1}, DType::f32, Category::comm);  // on the default device
  broadcast(t, q);
  const Tensor th = t.to(Device::cpu(), Category::comm);
  const float* p = th.data<float>();
  std::string msg(static_cast<size_t>(p[0]), ' ');
  for (size_t i = 0; i < msg.size(); ++i) msg[i] = static_cast<char>(static_cast<unsigned char>(p[i + 1]));
  return "rank " + std::to_string(q) + ": " + msg;
}

// ---- SingleProcessGroup ----

// One rank: reduce-scatter and all-gather are copies (in and out have the same numel). Through
// Tensor::copy_, so the buffers may sit on any device (on a GPU at stages 2-3 they do; a memcpy
// there would dereference device pointers: gpu-preflight.md #2).
namespace {
void copy_whole(const Tensor& in, const Tensor& out) {
  if (in.raw() == out.raw()) return;  // in place
  Tensor dst = out;
  dst.copy_(in.view(out.shape()));
}
}  // namespace

WorkPtr SingleProcessGroup::do_reduce_scatter(const Tensor& in, const Tensor& out) {
  copy_whole(in, out);
  return completed_work();
}

WorkPtr SingleProcessGroup::do_all_gather(const Tensor& in, const Tensor& out) {
  copy_whole(in, out);
  return completed_work();
}

WorkPtr SingleProcessGroup::do_all_to_all(const Tensor& in, const Tensor& out) {
  copy_whole(in, out);  // the one block goes to this rank
  return completed_work();
}

std::unique_ptr<ProcessGroup> SingleProcessGroup::do_split(int color, const std::vector<int>&) {
  return color < 0 ? nullptr : std::make_unique<SingleProcessGroup>();
}

const Topology& SingleProcessGroup::topology() const {
  static const Topology one = topology_of_nodes({0}, 0, "one process");
  return one;
}

void SingleProcessGroup::abort(const std::string& message, int code) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::exit(code);
}

// ---- groups of the nodes ----

// Both are what split(color, key) would make with these colors and keys: every rank computes every
// other rank's color and key from the topology, so the members (in key order) are known without
// split's gather, and the backend's split gets the same colors and keys as split would give it.
std::unique_ptr<ProcessGroup> intra_node_group(ProcessGroup& g) {
  const Topology& t = g.topology();
  std::vector<int> members;  // this rank's node, by rank (color = the node, key = the rank)
  for (int q = 0; q < g.size(); ++q)
    if (t.same_node(q, g.rank())) members.push_back(q);
  return g.split_members(t.node(), members);
}

std::unique_ptr<ProcessGroup> node_block_group(ProcessGroup& g, int block) {
  const Topology& t = g.topology();
  ZT_CHECK(block >= 1, "node_block_group: block = ", block, " (expected >= 1)");
  std::vector<std::vector<int>> nodes(static_cast<size_t>(t.num_nodes()));  // every node's ranks, by rank
  for (int q = 0; q < g.size(); ++q) nodes[static_cast<size_t>(t.node_of[q])].push_back(q);
  for (size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k].size() % static_cast<size_t>(block) != 0)
      ZT_THROW("node_block_group: ", block, " does not divide node ", k, "'s ", nodes[k].size(), " ranks (",
               t.summary(), ")");
  const std::vector<int>& mine = nodes[static_cast<size_t>(t.node())];
  const size_t first = static_cast<size_t>(t.local_rank() / block * block);
  const std::vector<int> members(mine.begin() + static_cast<std::ptrdiff_t>(first),
                                 mine.begin() + static_cast<std::ptrdiff_t>(first) + block);
  return g.split_members(members.front(), members);
}

std::unique_ptr<ProcessGroup> inter_node_group(ProcessGroup& g) {
  const Topology& t = g.topology();
  // Members: the ranks with this rank's local rank (rank q's: how many ranks before q share its
  // node), one per node, by node (color = the local rank, key = the node). By node is not always
  // by rank: nodes {0, 2, 5} and {1, 3, 4} have local rank 2 on ranks 5 and 4.
  std::vector<int> seen(static_cast<size_t>(t.num_nodes()), 0);  // ranks met so far on each node
  std::vector<int> members;
  for (int q = 0; q < g.size(); ++q)
    if (seen[static_cast<size_t>(t.node_of[static_cast<size_t>(q)])]++ == t.local_rank()) members.push_back(q);
  std::stable_sort(members.begin(), members.end(),
                   [&](int x, int y) { return t.node_of[static_cast<size_t>(x)] < t.node_of[static_cast<size_t>(y)]; });
  return g.split_members(t.local_rank(), members);
}

Topology sub_topology(const Topology& parent, const std::vector<int>& members, int rank) {
  std::vector<int> ids;  // the parent's node of each member, in the sub-group's order
  for (int q : members) ids.push_back(parent.node_of[static_cast<size_t>(q)]);
  return topology_of_node_ids(ids, rank, parent.source);
}

// ---- the process-wide group ----

namespace {
std::unique_ptr<ProcessGroup>& global_group() {
  static std::unique_ptr<ProcessGroup> g;
  return g;
}
}  // namespace

ProcessGroup& init_process_group() {
  auto& g = global_group();
  if (!g) {
    if (launched_by_mpirun()) g = std::make_unique<MpiProcessGroup>();
    else g = std::make_unique<SingleProcessGroup>();
  }
  return *g;
}

void finalize_process_group() { global_group().reset(); }

}  // namespace zt
