// defines: TransformerLM — what GPT2 and Llama share: an embedding unit, a stack of blocks and a
//          head, and the forward loop through them, each in its residency scope.
//
//   x = embed(idx)                    (B, T, C)    unit "embed"
//   x = block_i(x), i = 0..L-1        (B, T, C)    one unit each
//   logits = head(x)                  (B, T, Vp)   unit "head" (also reads "embed" when tied)
//   loss = cross_entropy over the first V columns (llm.c: padded columns take no part)
// loss() runs the last two as one op inside the head unit (Head::loss, linear_cross_entropy):
// the (B, T, Vp) logits exist once, and hold their own gradient from the forward on.
//
// A family supplies the three unit types, each built with tp, the tensor-parallel group it is split
// over (parallel/tensor_parallel.h; none: whole): Embed(cfg, dtype, tp) with forward(idx, pos0 = 0)
// (the tokens at positions [pos0, pos0 + T)), Block(i, cfg, dtype, tp, sp) with forward(x) (sp: the
// sequence group, parallel/sequence_parallel.h) and, for cached
// inference, forward_cached(x, cache, i) (nn/kv_cache.h; what differs for decode is written in
// the family's file), Head(cfg, dtype, tp) with forward(x, const Embed&) and loss(x, const Embed&,
// targets, V).
//
// Cached inference (logits_cached) walks the same units in the same residency scopes:
//   x = embed(idx, p)                 (B, T, C)    positions [p, p + T), p = cache.length()
//   x = block_i.forward_cached(x)     (B, T, C)    appends block i's K, V to the cache
//   logits = head(x)                  (B, T, Vp);  then cache.advance(T)
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "models/model_config.h"
#include "nn/model.h"
#include "parallel/sequence_parallel.h"
#include "parallel/tensor_parallel.h"

namespace zt {

// Checks a batch of token ids against a model (boundary errors, named by `what`): int32, shape
// (B, T) with 1 <= T <= max_seq_len, every id in [0, vocab_size).
void check_token_batch(const Tensor& idx, int64_t vocab_size, int64_t max_seq_len, const char* what);

template <class EmbedT, class BlockT, class HeadT>
class TransformerLM : public Model {
 public:
  using Embed = EmbedT;
  using Block = BlockT;
  using Head = HeadT;

  std::vector<Unit*> units() override {
    std::vector<Unit*> u{embed_.get()};
    for (auto& b : blocks_) u.push_back(b.get());
    u.push_back(head_.get());
    return u;
  }
  Var logits(const Tensor& idx) override { return forward_logits(idx); }
  Var loss(const Tensor& idx, const Tensor& targets) override {
    if (!targets.defined() || targets.shape() != idx.shape())
      ZT_THROW(name_, "::loss: targets must have the shape of idx ", shape_str(idx.shape()), ", got ",
               targets.defined() ? shape_str(targets.shape()) : std::string("undefined"));
    Head* h = head_.get();
    Embed* e = embed_.get();
    const int64_t V = cfg_.vocab_size;
    return run_head(forward_hidden(idx), [h, e, targets, V](const Var& in) { return h->loss(in, *e, targets, V); });
  }
  KVCache make_kv_cache() const override {
    if (tp_.on() || sp_.on())
      ZT_THROW(name_, ": cached inference with tensor parallelism is not built (each rank holds ",
               cfg_.n_head / tp_.size(), " of ", cfg_.n_head, " heads", sp_.on() ? ", a share of each sequence" : "",
               "): generate on one rank");
    return KVCache(cfg_.n_layer, cfg_.n_kv_head, cfg_.n_embd / cfg_.n_head, cfg_.max_seq_len);
  }
  Var logits_cached(const Tensor& idx, KVCache& cache) override {
    NoGradGuard no_grad;
    check_token_batch(idx, cfg_.vocab_size, cfg_.max_seq_len, name_);
    ZT_CHECK(embed_->params().finalized(), name_, " built with allocate = false (layout only) cannot run forward");
    if (cache.n_layer() != cfg_.n_layer || cache.n_kv_head() != cfg_.n_kv_head ||
        cache.head_dim() != cfg_.n_embd / cfg_.n_head || cache.capacity() > cfg_.max_seq_len)
      ZT_THROW(name_, "::logits_cached: the KV cache (", cache.n_layer(), " layers, ", cache.n_kv_head(), " kv heads, head dim ",
               cache.head_dim(), ", capacity ", cache.capacity(), ") was not made for this model (", cfg_.n_layer,
               ", ", cfg_.n_kv_head, ", ", cfg_.n_embd / cfg_.n_head, ", <= ", cfg_.max_seq_len, "): use make_kv_cache()");
    const int64_t T = idx.size(1), p = cache.length();
    if (p + T > cache.capacity())
      ZT_THROW(name_, "::logits_cached: ", T, " new token(s) after ", p, " cached positions exceed max_seq_len ",
               cache.capacity(), ": reset() the cache and prefill a shorter context");
    Residency& r = *residency_;
    Embed* e = embed_.get();
    Var x = run_unit(r, *e, Var(), [e, idx, p](const Var&) { return e->forward(idx, p); });
    for (size_t i = 0; i < blocks_.size(); ++i) {
      Block* b = blocks_[i].get();
      const int64_t li = static_cast<int64_t>(i);
      x = run_unit(r, *b, x, [b, &cache, li](const Var& in) { return b->forward_cached(in, cache, li); });
    }
    Head* h = head_.get();
    Var logits = run_head(x, [h, e](const Var& in) { return h->forward(in, *e); });
    cache.advance(T);
    return logits;
  }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  int64_t max_seq_len() const override { return cfg_.max_seq_len; }

  const ModelConfig& config() const { return cfg_; }
  Embed& embed() { return *embed_; }
  Block& block(int64_t i) { return *blocks_.at(static_cast<size_t>(i)); }
  Head& head() { return *head_; }

 protected:
  // Validates cfg (its family must be `family`) and builds the units; with opt.allocate each
  // ParamSet is finalized with opt.world_size / opt.alignment (zero-filled, or without bytes when
  // !opt.materialize).
  TransformerLM(const ModelConfig& cfg, const ModelOptions& opt, const char* family, const char* name)
      : cfg_(cfg), name_(name) {
    cfg_.validate();
    if (cfg_.family != family) ZT_THROW(name_, ": config family is \"", cfg_.family, "\", expected \"", family, "\"");
    tp_ = TensorParallel{opt.tensor_parallel, opt.megatron_sequence_parallel};
    if (opt.megatron_sequence_parallel && !tp_.on())
      ZT_THROW(name_, ": Megatron's sequence parallelism splits the tokens over the tensor-parallel group: it needs ",
               "tensor parallelism over 2 or more ranks");
    sp_ = SequenceParallel{opt.sequence_parallel};
    embed_ = std::make_unique<Embed>(cfg_, opt.dtype, tp_);
    for (int64_t i = 0; i < cfg_.n_layer; ++i) blocks_.push_back(std::make_unique<Block>(i, cfg_, opt.dtype, tp_, sp_));
    head_ = std::make_unique<Head>(cfg_, opt.dtype, tp_);
    if (opt.allocate) finalize_params(opt.world_size, opt.alignment, opt.materialize);
  }

  ModelConfig cfg_;
  TensorParallel tp_;
  SequenceParallel sp_;  // idx holds this rank's share of each sequence: positions from rank * T
  std::unique_ptr<Embed> embed_;
  std::vector<std::unique_ptr<Block>> blocks_;
  std::unique_ptr<Head> head_;

 private:
  // x (B, T, C) after the last block (T: this rank's tokens under sequence parallelism, those at
  // positions [pos0, pos0 + T) of the whole sequence).
  Var forward_hidden(const Tensor& idx) {
    check_token_batch(idx, cfg_.vocab_size, cfg_.max_seq_len / sp_.size(), name_);
    ZT_CHECK(embed_->params().finalized(), name_, " built with allocate = false (layout only) cannot run forward");
    Residency& r = *residency_;
    Embed* e = embed_.get();  // raw pointers: the closures outlive this call under recompute()
    const int64_t pos0 = sp_.rank() * idx.size(1);
    Var x = run_unit(r, *e, Var(), [e, idx, pos0](const Var&) { return e->forward(idx, pos0); });
    for (auto& bp : blocks_) {
      Block* b = bp.get();
      x = run_unit(r, *b, x, [b](const Var& in) { return b->forward(in); });
    }
    return x;
  }
  // fn(x) inside the head unit's residency scope (tied: the embedding's too, for its weight).
  Var run_head(const Var& x, const std::function<Var(const Var&)>& fn) {
    std::vector<Unit*> also;
    if (cfg_.tie_embeddings) also.push_back(embed_.get());
    return run_unit(*residency_, *head_, x, fn, also);
  }
  Var forward_logits(const Tensor& idx) {
    Head* h = head_.get();
    Embed* e = embed_.get();
    return run_head(forward_hidden(idx), [h, e](const Var& in) { return h->forward(in, *e); });
  }

  const char* name_;
};

}  // namespace zt
