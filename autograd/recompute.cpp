// defines: recompute (autograd/recompute.h)
#include "autograd/recompute.h"

namespace zt {

Var recompute(const std::function<Var(const Var&)>& fn, const Var& input, const std::vector<Var>& params,
              CheckpointStore* store, const std::string& name) {
  if (!grad_enabled()) return fn(input);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = fn(input.detach()).value();
  }
  // The input leaves the device now if a store takes it (its bytes return before the recompute).
  std::shared_ptr<CheckpointStore::Stashed> held = store ? store->stash(input.value(), name) : nullptr;
  // The output's GradFn owns a copy of `fn` (and whatever fn captured: the unit) until backward.
  std::vector<Var> inputs{input};
  inputs.insert(inputs.end(), params.begin(), params.end());
  return Var::make(out, std::move(inputs), [fn, held, input_requires = input.requires_grad()](std::vector<Var>& in, const Tensor& g) {
    if (held) held->restore();  // in[0]'s bytes are back on the device (waits for the prefetch)
    EnableGradGuard grad_on;
    Var x(in[0].value(), input_requires);  // a fresh leaf: the recomputed graph ends here
    Var y = fn(x);
    // Parameter gradients accumulate into their flat buffers. Group hooks already fired
    // around this node in the outer backward, so the nested one must not fire them again.
    if (y.requires_grad()) y.backward(g, /*retain_graph=*/false, /*run_group_hooks=*/false);
    if (input_requires && x.grad().defined()) in[0].add_grad(x.grad());
  }, "recompute");
}

}  // namespace zt
