// defines: Footprint::operator+=, model_state — the policies' answers put together (zero/footprint.h).
#include "zero/footprint.h"

#include "zero/precision.h"        // defines: PrecisionPolicy::working_bytes
#include "zero/shard_optimizer.h"  // defines: optimizer_keeps, grad_shard_keeps
#include "zero/stage.h"            // defines: StageKeeps
#include "zero/tiers.h"            // defines: param_shard_tier

namespace zt {

Footprint& Footprint::operator+=(const Footprint& o) {
  for (int t = 0; t < kNumMemoryTiers; ++t)
    for (int c = 0; c < kNumCategories; ++c) x_n[t][c] += o.x_n[t][c];
  return *this;
}

Footprint model_state(int64_t P, int64_t N, const StageKeeps& k, Precision p, const ZeroOptimization& z,
                      const OptimizerConfig& o) {
  const int64_t e = PrecisionPolicy::working_bytes(p);
  const int64_t full = P * N, shard = P;  // elements x N: every rank's whole unit, or its S
  Footprint f;
  // the parameters: full on the device (stages 0-2), or the shard in its tier (stage 3)
  if (k.params_sharded) f.add(param_shard_tier(z), Category::params, e * shard);
  else f.add(MemoryTier::device, Category::params, e * full);
  // the gradient: full on the device (stages 0-1), or the shard where the optimizer puts it
  if (k.grads_sharded) grad_shard_keeps(z, e * shard, f);
  else f.add(MemoryTier::device, Category::grads, e * full);
  // the optimizer's state over its slice (stage 0: the whole unit)
  optimizer_keeps(o, z, p, k.optimizer_sharded ? shard : full, shard, e, f);
  return f;
}

}  // namespace zt
