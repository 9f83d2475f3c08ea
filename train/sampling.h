// defines: sample_next (one token from a row of logits), generate (autoregressive sampling).
//
// Layer train/ (the run: the loop, its config, and sampling from what it trained). Why here:
// generation needs only a Model (nn/model.h), so it could sit lower, but it is neither a model
// definition (models/ holds only those) nor a file format (formats/); it is the other way a tool
// runs a model, beside the training loop, and zt-generate reads its model through the trainer's
// load_trained_model (train/trainer.h). A folder of its own for two files would add a layer with
// no second concern.
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "nn/model.h"

namespace zt {

// One token id from `logits` (the V valid entries of one row; padding already cut off).
//   temperature == 0: argmax (the lowest id among ties), no random number drawn.
//   temperature  > 0: softmax(logits / temperature) restricted to the top_k largest logits
//                     (top_k <= 0 or >= V: all of them; ties broken by lower id), sampled with
//                     exactly one rng.uniform() (inverse CDF in id order over the kept set).
// Throws zt::Error for an empty row, a negative or non-finite temperature, or a non-finite logit.
int32_t sample_next(const std::vector<double>& logits, double temperature, int64_t top_k, Rng& rng);

// Appends n_new sampled tokens to `prompt` and returns the whole sequence. Each step recomputes
// the logits of the last max_seq_len tokens (no KV cache) under no_grad and samples from the
// last position's first vocab_size() logits. Throws for an empty prompt or an id outside the vocabulary.
std::vector<int32_t> generate(Model& model, const std::vector<int32_t>& prompt, int64_t n_new, double temperature,
                              int64_t top_k, Rng& rng);

}  // namespace zt
