// defines: local_residency, run_unit (nn/unit.h)
#include "nn/unit.h"

namespace zt {

LocalResidency& local_residency() {
  static LocalResidency r;
  return r;
}

Var run_unit(Residency& r, Unit& u, const Var& x, const std::function<Var(const Var&)>& fn,
             const std::vector<Unit*>& also) {
  for (Unit* a : also) r.acquire(*a);
  r.acquire(u);
  Var y;
  if (u.recompute_forward && grad_enabled() && x.defined()) {  // (the embedding unit has no input Var)
    std::vector<Var> params = u.params().vars();
    for (Unit* a : also) params.insert(params.end(), a->params().vars().begin(), a->params().vars().end());
    // The recompute in backward must see the unit resident again: ZeRO's before_backward hook
    // on the unit's LeafGroup re-acquires it, as it does for an ordinary backward.
    y = recompute(fn, x, params, r.checkpoint_store(), u.name());
  } else {
    y = fn(x);
  }
  r.release(u);
  for (Unit* a : also) r.release(*a);
  return y;
}

}  // namespace zt
