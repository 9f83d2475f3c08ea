// defines: main — the memory estimator (zero/estimator.h) called as a library: the bytes each
//          rank needs for a bundled model at ZeRO stages 0-3, bf16 mixed precision.
//
//   ./estimate [model] [ranks]          (default: gpt2-124m on 8 ranks)
//
// The model-state column is the ZeRO paper's (Rajbhandari et al. 2019, Figure 1: 16 Psi bytes
// at stage 0 down to 16 Psi / N at stage 3) on our exact padded layout; the peaks add what a
// training step of micro-batch 4 x 1024 tokens holds beside it. zt-estimate prints the same.
#include <cstdio>
#include <memory>
#include <string>

#include <zt/core/memory.h>
#include <zt/models/init.h>
#include <zt/zero/estimator.h>

int main(int argc, char** argv) {
  try {
    const std::string name = argc > 1 ? argv[1] : "gpt2-124m";
    const int64_t ranks = argc > 2 ? std::stoll(argv[2]) : 8;
    const zt::ModelConfig cfg = zt::model_config(name);  // throws naming the known models
    // The model's exact layout padded for `ranks`, without allocating a byte of it.
    zt::ModelOptions layout_only;
    layout_only.world_size = ranks;
    layout_only.alignment = zt::kShardAlignment;
    layout_only.allocate = false;
    const std::unique_ptr<zt::Model> layout = zt::make_model(cfg, layout_only);

    zt::EstimateRequest req;
    req.has_model = true;
    req.model = zt::model_shape(cfg, *layout, ranks);
    req.world_size = ranks;
    req.precision = zt::Precision::bf16;
    req.micro_batch = 4;
    req.seq_len = 1024;
    std::printf("%s, %lld ranks, bf16, micro-batch 4 x 1024\n", name.c_str(), static_cast<long long>(ranks));
    for (int stage = 0; stage <= 3; ++stage) {
      req.stage = stage;
      const zt::Estimate e = zt::estimate(req);
      std::printf("stage %d: model states %lld bytes (%s), step peak at most %s\n", stage,
                  static_cast<long long>(e.model_state_total()), zt::format_bytes(e.model_state_total()).c_str(),
                  zt::format_bytes(e.peak_sum()).c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "estimate: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
