// defines: main — the memory a training step needs, per rank, for a bundled model at ZeRO stages 0-3
//          in bf16: the real step dry-run on the meta device (train/dry_run.h), called as a library.
//
//   ./estimate [model] [ranks]          (default: gpt2-124m on 8 ranks)
//
// No byte of the model is allocated: the meta device lays out shapes without bytes, and the real
// ZeRO engine runs rank 0's training step over a simulated process group of `ranks` ranks, while
// the allocators count what a real run would hold. The model states are the ZeRO paper's
// (Rajbhandari et al. 2019, Figure 1) on our exact padded layout of Psi parameters: bf16 parameters
// 2 Psi, bf16 gradients 2 Psi, the fp32 master, Adam's m and v 12 Psi; stage 1 shards the 12,
// stage 2 the gradients too, stage 3 everything (16 Psi / N, plus the few small units that stay
// gathered). The step's peak adds what a micro-batch of 4 x 1024 tokens holds beside them
// (activations, scratch, and at stage 3 the units gathered in flight). zt-estimate --model prints
// the same, per category.
#include <algorithm>
#include <cstdio>
#include <string>

#include <zt/core/memory.h>
#include <zt/models/model_config.h>
#include <zt/train/dry_run.h>

int main(int argc, char** argv) {
  try {
    const std::string name = argc > 1 ? argv[1] : "gpt2-124m";
    const int ranks = argc > 2 ? std::stoi(argv[2]) : 8;

    zt::DryRunRequest req;
    req.model = zt::model_config(name);  // throws naming the known models
    req.world_size = ranks;
    req.rank = 0;  // the rank simulated (the last rank differs only by the units' padding)
    // bf16 mixed precision, the model built and computed in bf16: no float32 copies but the master
    req.run.engine.precision = zt::Precision::bf16;
    req.run.compute_dtype = zt::DType::bf16;
    req.run.engine.train_micro_batch_size_per_gpu = 4;                 // B sequences per rank
    req.run.seq_len = std::min<int64_t>(1024, req.model.max_seq_len);  // T tokens each
    std::printf("%s, %d ranks, bf16, micro-batch %lld x %lld, rank 0\n", name.c_str(), ranks,
                static_cast<long long>(req.run.batch()), static_cast<long long>(req.run.seq_len));

    for (int stage = 0; stage <= 3; ++stage) {
      req.run.engine.zero.stage = stage;
      const zt::DryRun d = zt::dry_run(req);  // the recording step, then a steady one
      if (stage == 0)
        std::printf("Psi = %lld parameters (%lld padded for %d ranks)\n", static_cast<long long>(d.psi),
                    static_cast<long long>(d.psi_padded), ranks);
      // Model states: what the device holds between steps (after the steady step) for this rank.
      const zt::MemoryStats& held = d.steady().device;
      const int64_t states = held.cur(zt::Category::params) + held.cur(zt::Category::grads) +
                             held.cur(zt::Category::optim);
      // The step's peak: the most the device held at once during the steady step, every category.
      const int64_t peak = d.steady().device.peak_total;
      std::printf("stage %d: model states %lld bytes (%s), step peak %lld bytes (%s)\n", stage,
                  static_cast<long long>(states), zt::format_bytes(states).c_str(), static_cast<long long>(peak),
                  zt::format_bytes(peak).c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "estimate: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
