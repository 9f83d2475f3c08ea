// defines: SimulatedProcessGroup (constructor, abort, split, do_all_reduce, do_reduce_scatter,
//          do_all_gather, do_all_to_all, do_split, observed) (dist/simulated_process_group.h);
//          file-local: on_cpu, scaled_into, copy_into
#include "dist/simulated_process_group.h"

#include <algorithm>
#include <initializer_list>

namespace zt {

namespace {

// Whether the collective may touch its buffers: all of them on the cpu (a device or meta tensor is
// only counted, its memory never read).
bool on_cpu(std::initializer_list<const Tensor*> bufs) {
  return std::all_of(bufs.begin(), bufs.end(), [](const Tensor* t) { return t->device().is_cpu(); });
}

// dst := factor * src (same numel), computed in double and rounded once to dst's dtype. src is read
// whole before dst is written, so dst may be src or overlap it.
void scaled_into(const Tensor& dst, const Tensor& src, double factor) {
  std::vector<double> v = src.to_vector();
  for (double& e : v) e *= factor;
  Tensor d = dst;
  d.copy_(Tensor::from_vector(v, dst.shape(), dst.dtype(), Category::comm));
}

// dst := src (same numel and dtype); nothing when they are the same memory (an in-place block).
void copy_into(const Tensor& dst, const Tensor& src) {
  if (dst.raw() == src.raw()) return;
  Tensor d = dst;
  d.copy_(src);
}

// A collective the observer was told of: waiting for it tells the observer too.
}  // namespace

WorkPtr SimulatedProcessGroup::observed() {
  if (!observer_ || !issuing_) return completed_work();
  SimulatedCollective c;
  c.kind = issuing_->kind;
  c.bytes = issuing_->bytes;
  c.inter_node = issuing_->inter_node;
  c.group_size = size();
  c.group_nodes = topology_.num_nodes();
  c.name = label().empty() ? collective_name(c.kind) : std::string(collective_name(c.kind)) + " " + label();
  CommObserver* o = observer_;
  const int64_t id = o->issued(c);
  return reported_work([o, id] { o->waited(id); });
}

SimulatedProcessGroup::SimulatedProcessGroup(int rank, Topology topology) : topology_(std::move(topology)) {
  ZT_CHECK(rank >= 0 && rank < topology_.size(), "SimulatedProcessGroup: rank ", rank, " is not a rank of ",
           topology_.size(), " (", topology_.summary(), ")");
  topology_.rank = rank;
}

void SimulatedProcessGroup::abort(const std::string& message, int code) {
  ZT_THROW("simulated rank ", rank(), " of ", size(), " aborts (code ", code, "): ", message);
}

std::unique_ptr<ProcessGroup> SimulatedProcessGroup::split(int color, int key) {
  ZT_THROW("a simulated group splits only along its topology: split(color ", color, ", key ", key,
           ") needs every rank's color and key, which rank ", rank(), " of ", size(),
           " playing alone cannot know; intra_node_group and inter_node_group (", topology_.summary(),
           ") are computed from the topology");
}

// N equal copies summed: x := N * x.
WorkPtr SimulatedProcessGroup::do_all_reduce(const Tensor& x) {
  if (on_cpu({&x})) scaled_into(x, x, size());
  return observed();
}

// in (N*S): this rank's block of the sum of N equal copies, out (S) := N * in[r*S, (r+1)*S).
WorkPtr SimulatedProcessGroup::do_reduce_scatter(const Tensor& in, const Tensor& out) {
  if (on_cpu({&in, &out})) scaled_into(out, in.flat_view(rank() * out.numel(), {out.numel()}), size());
  return observed();
}

// out (N*S): every rank's in, and every rank's in is this one: out[q*S, (q+1)*S) := in.
WorkPtr SimulatedProcessGroup::do_all_gather(const Tensor& in, const Tensor& out) {
  if (on_cpu({&in, &out})) {
    const int64_t S = in.numel();
    for (int q = 0; q < size(); ++q) copy_into(out.flat_view(q * S, {S}), in);  // in may be block r of out
  }
  return observed();
}

// Rank q sends this rank its block r, and rank q's in is this in: out[q*S, (q+1)*S) := in[r*S, (r+1)*S).
WorkPtr SimulatedProcessGroup::do_all_to_all(const Tensor& in, const Tensor& out) {
  if (on_cpu({&in, &out})) {
    const int64_t S = in.numel() / size();
    const Tensor mine = in.flat_view(rank() * S, {S});
    for (int q = 0; q < size(); ++q) copy_into(out.flat_view(q * S, {S}), mine);
  }
  return observed();
}

std::unique_ptr<ProcessGroup> SimulatedProcessGroup::do_split(int color, const std::vector<int>& members) {
  if (color < 0) return nullptr;
  const auto me = std::find(members.begin(), members.end(), rank());
  ZT_CHECK(me != members.end(), "SimulatedProcessGroup: rank ", rank(), " split into a group without it");
  const int key = static_cast<int>(me - members.begin());  // the rank in the new group
  auto sub = std::make_unique<SimulatedProcessGroup>(key, sub_topology(topology_, members, key));
  sub->observer_ = observer_;
  return sub;
}

}  // namespace zt
