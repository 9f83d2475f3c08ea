// defines: Var (backward); file-local: topo_order
//
// Var::backward, the backward driver of the autograd layer: topological order from the root, then
// each GradFn once, in reverse. (Not the ZeRO Engine of zero/engine.h, which the driver reaches
// only through the LeafGroup hooks of var.h.)
#include <algorithm>
#include <unordered_map>

#include "autograd/var.h"
#include "core/backend.h"

namespace zt {

namespace {

// Post-order DFS (iterative: a deep model must not overflow the stack). `order` ends with the
// root; every Var appears after all the Vars it was computed from. The order holds Vars (owning
// references), so a node stays alive while the backward may still reach it.
std::vector<Var> topo_order(const Var& root) {
  std::vector<Var> order;
  std::unordered_map<VarImpl*, bool> seen;
  std::vector<std::pair<Var, size_t>> stack{{root, 0}};
  seen[root.impl()] = true;
  while (!stack.empty()) {
    VarImpl* v = stack.back().first.impl();
    size_t& next = stack.back().second;
    if (next < v->inputs.size()) {
      const Var& in = v->inputs[next++];
      if (in.requires_grad() && !seen[in.impl()]) {
        seen[in.impl()] = true;
        stack.push_back({in, 0});
      }
    } else {
      order.push_back(stack.back().first);
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace

void Var::backward() const {
  ZT_CHECK(value().numel() == 1, "backward() without a gradient needs a scalar, got ", value().str());
  // The seed 1 on the value's device (not the default device's).
  Tensor seed = Tensor::empty(value().shape(), value().dtype(), Category::activations, backend_of(value()).allocator());
  seed.fill_(1.0);
  backward(seed);
}

void Var::backward(const Tensor& grad_out, bool retain_graph, bool run_group_hooks) const {
  ZT_CHECK(requires_grad(), "backward() of a Var that does not require grad (op '", op(), "')");
  check_shape(grad_out, shape(), "backward: grad_out");
  std::vector<Var> order = topo_order(*this);
  std::reverse(order.begin(), order.end());  // root first

  // Leaf groups: index of the first and the last node (in execution order) that reads them.
  // Hooks of groups that start (or end) at the same node fire in the order the groups were first
  // met, never in hash order: every rank must issue its ZeRO collectives in the same order.
  struct Span { LeafGroup* group; size_t first, last; };
  std::vector<Span> spans;
  std::unordered_map<LeafGroup*, size_t> span_of;
  for (size_t i = 0; i < order.size() && run_group_hooks; ++i)
    for (const Var& in : order[i].impl()->inputs)
      if (LeafGroup* g = in.impl() ? in.impl()->group.get() : nullptr) {
        auto [it, fresh] = span_of.try_emplace(g, spans.size());
        if (fresh) spans.push_back(Span{g, i, i});
        else spans[it->second].last = i;
      }
  std::vector<std::vector<LeafGroup*>> starts(order.size()), ends(order.size());
  for (const Span& s : spans) {
    starts[s.first].push_back(s.group);
    ends[s.last].push_back(s.group);
  }

  add_grad(grad_out);
  for (size_t i = 0; i < order.size(); ++i) {
    VarImpl* v = order[i].impl();
    for (LeafGroup* g : starts[i])
      if (g->before_backward) g->before_backward();
    if (v->grad_fn && v->grad.defined()) {
      v->grad_fn(v->inputs, v->grad);
    }
    if (v->grad_fn) {
      v->grad = Tensor();  // an intermediate's gradient is consumed: free it now
      if (!retain_graph) {  // and the activations its closure saved
        v->grad_fn = nullptr;
        v->inputs.clear();
      }
    }
    for (LeafGroup* g : ends[i])
      if (g->after_backward) g->after_backward();
    if (!retain_graph) order[i] = Var();  // drop our reference: the node may be freed now
  }
}

}  // namespace zt
