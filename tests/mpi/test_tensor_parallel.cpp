// defines: 6 Catch2 test cases tagged [tensor_parallel]; helpers: Batch, batch, run_step, Pair, build_pair,
//          check_family, check_ulysses
//
// Megatron's tensor parallelism (parallel/tensor_parallel.h) over every rank of the job against
// the one-rank model, which every rank also builds: gpt2-nano and llama-nano split over tp = N
// ranks start from the one-rank model's values, bit for bit (each slice takes its places in the
// whole tensors, models/init.h), and one step's loss and every parameter's gradient equal the
// one-rank model's:
//   - float64: within 1e-12 of the gradient's largest magnitude (only the order of additions
//     differs: the row-parallel GEMMs' K sums split in N partial sums, f's all-reduced input
//     gradients, N-way instead of one GEMM; float64's 2^-53 times the few hundred terms of these
//     sums is ~1e-14, so 1e-12 leaves a factor of 100 and any wrong slice or missed term is O(1));
//   - float32 (the models' training dtype): within 1e-4 of the largest magnitude (the same
//     reorderings at 2^-24, ~1e-5 after two layers of GEMMs; measured 3-5e-7 on 2 and 4 ranks,
//     where a missed all-reduce in f or g is 0.3-1.2);
//   - with activation checkpointing (the sub-layers' collectives run again in the recompute).
// The collectives are Megatron's: per block, two all-reduces of (B, T, C) forward (g) and two
// backward (f); the vocabulary-parallel embedding and head one each; the loss one all-gather of
// a float per position and rank and one double (Shoeybi et al. 2019, section 3).
//
//
// Ulysses at the model level (check_ulysses) and the TensorSlice map are here too; zt-train on a
// grid (the Trainer, ZeRO) is tests/mpi/test_grid_training.cpp, its checkpoints tests/mpi/test_grid_checkpoint.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "dist/process_group.h"
#include "models/init.h"
#include "parallel/sequence_parallel.h"
#include "tests/mpi/model_compare.h"  // defines: worst_relative

using namespace zt;
using zt::test::worst_relative;

namespace {

struct Batch {
  Tensor idx, targets;
};
Batch batch(const ModelConfig& c, int64_t B, int64_t T) {
  std::vector<double> idx, tg;
  for (int64_t i = 0; i < B * T; ++i) {
    idx.push_back(static_cast<double>((i * 7 + 3) % c.vocab_size));
    tg.push_back(static_cast<double>((i * 11 + 5) % c.vocab_size));
  }
  return {Tensor::from_vector(idx, {B, T}, DType::i32), Tensor::from_vector(tg, {B, T}, DType::i32)};
}

double run_step(Model& m, const Batch& b) {
  m.zero_grad();
  Var loss = m.loss(b.idx, b.targets);
  loss.backward();
  return loss.value().item();
}

// bound: on every gradient (relative to the largest magnitude of that tensor); the loss, a mean of
// a few hundred terms, is held to bound / 100 (measured equal, bit for bit, on 2 and 4 ranks).
// `name` built whole and built with `split` (a tensor or sequence group set), both in dtype dt and
// initialized from one seed.
struct Pair {
  std::unique_ptr<Model> full, split;
};
Pair build_pair(const std::string& name, DType dt, ModelOptions split, uint64_t seed) {
  ModelOptions whole;
  whole.dtype = split.dtype = dt;
  Pair p{make_model(model_config(name), whole), make_model(model_config(name), split)};
  Rng r1(seed), r2(seed);
  init_model(*p.full, r1);
  init_model(*p.split, r2);
  return p;
}

// Llama's kv heads shared by tp / Hkv ranks when there are fewer of them than ranks: one
// all-reduce per block of a (Hkv, 2 D C) buffer, the k and v rows' gradients (shared_kv_read).
int64_t shared_kv_calls(const ModelConfig& c, int64_t N) {
  return c.family == "llama" && c.n_kv_head % N != 0 ? c.n_layer : 0;
}
int64_t shared_kv_bytes(const ModelConfig& c, DType dt, int64_t N) {
  return shared_kv_calls(c, N) * ring_bytes(2, c.n_kv_head * 2 * c.head_dim() * c.n_embd, dtype_size(dt), N);
}

void check_family(const std::string& name, DType dt, double bound, bool checkpointing, bool megatron_sp = false) {
  ProcessGroup& g = init_process_group();
  const ModelConfig cfg = model_config(name);
  ModelOptions split;
  split.tensor_parallel = &g;
  split.megatron_sequence_parallel = megatron_sp && g.size() > 1;
  auto [full, tp] = build_pair(name, dt, split, 7);
  CHECK(worst_relative(*full, *tp, true) == 0.0);  // the same values, bit for bit
  full->set_activation_checkpointing(checkpointing);
  tp->set_activation_checkpointing(checkpointing);

  const Batch b = batch(cfg, 2, 16);
  const double lf = run_step(*full, b);
  g.reset_counters();
  const double lt = run_step(*tp, b);
  const CommCounters c = g.counters();
  INFO(name << " " << dtype_name(dt) << " tp " << g.size() << (megatron_sp ? " sequence-parallel" : "") << ": loss "
            << lf << " vs " << lt);
  CHECK(std::abs(lt - lf) <= bound / 100 * std::abs(lf));
  const double worst = worst_relative(*full, *tp, false);
  INFO("worst gradient difference / the gradient's largest magnitude: " << worst);
  CHECK(worst <= bound);
  if (g.size() > 1 && !checkpointing && !megatron_sp) {
    // Megatron's count: 4 all-reduces of (B, T, C) per block, 2 more for the vocabulary-parallel
    // embedding (g) and head (f backward); the loss's all-gather of every position's lse (stats
    // dtype: float64 for a float64 model, else float32) and one double (the ranks' loss parts).
    const int64_t positions = 2 * 16, n = positions * cfg.n_embd, L = cfg.n_layer, N = g.size();
    const int64_t stats = dt == DType::f64 ? 8 : 4;
    CHECK(c.calls[static_cast<int>(Collective::all_reduce)] == 4 * L + 3 + shared_kv_calls(cfg, N));
    CHECK(c.of(Collective::all_reduce) ==
          (4 * L + 2) * ring_bytes(2, n, dtype_size(dt), N) + ring_bytes(2, 1, 8, N) + shared_kv_bytes(cfg, dt, N));
    CHECK(c.calls[static_cast<int>(Collective::all_gather)] == 1);
    CHECK(c.of(Collective::all_gather) == ring_bytes(1, N * positions, stats, N));
    CHECK(c.total() == c.of(Collective::all_reduce) + c.of(Collective::all_gather));
  }
  if (g.size() > 1 && !checkpointing && megatron_sp) {
    // Megatron's sequence parallelism (Korthikanti et al. 2022, section 4.2.2): each all-reduce of
    // (B, T, C) becomes a reduce-scatter and an all-gather (forward: the embedding's and each
    // sub-layer's g scatter, each sub-layer's and the head's f gather; backward the other way),
    // the same bytes. Each sub-layer gathers its input again in the backward (its weight's gradient
    // reads it; the forward freed it): 2 more all-gathers per block. The whole parameters read on
    // one rank's tokens add one all-reduce of their gradient each: GPT-2's ln_1, ln_2 (gain, bias) and the two row-parallel biases per block,
    // ln_f's two and wpe (maxT, C); Llama's two norms per block and the final one.
    const int64_t positions = 2 * 16, n = positions * cfg.n_embd, L = cfg.n_layer, N = g.size(), C = cfg.n_embd;
    const int64_t stats = dt == DType::f64 ? 8 : 4, b = dtype_size(dt);
    const bool gpt2 = cfg.family == "gpt2";
    const int64_t vectors = gpt2 ? 6 * L + 2 : 2 * L + 1;  // whole (C) parameters read on one rank's tokens
    const int64_t grads = vectors * ring_bytes(2, C, b, N) + (gpt2 ? ring_bytes(2, cfg.max_seq_len * C, b, N) : 0);
    CHECK(c.calls[static_cast<int>(Collective::reduce_scatter)] == 4 * L + 2);
    CHECK(c.of(Collective::reduce_scatter) == (4 * L + 2) * ring_bytes(1, n, b, N));
    CHECK(c.calls[static_cast<int>(Collective::all_gather)] == 6 * L + 3);
    CHECK(c.of(Collective::all_gather) ==
          (6 * L + 2) * ring_bytes(1, n, b, N) + ring_bytes(1, N * positions, stats, N));
    CHECK(c.calls[static_cast<int>(Collective::all_reduce)] == vectors + (gpt2 ? 1 : 0) + 1 + shared_kv_calls(cfg, N));
    CHECK(c.of(Collective::all_reduce) == grads + ring_bytes(2, 1, 8, N) + shared_kv_bytes(cfg, dt, N));
    CHECK(c.total() == c.of(Collective::all_reduce) + c.of(Collective::all_gather) + c.of(Collective::reduce_scatter));
  }
}

}  // namespace

TEST_CASE("tensor parallel gpt2-nano: the one-rank model's init, loss and gradients", "[tensor_parallel]") {
  check_family("gpt2-nano", DType::f64, 1e-12, false);
  check_family("gpt2-nano", DType::f32, 1e-4, false);
  check_family("gpt2-nano", DType::f32, 1e-4, true);
}

TEST_CASE("Megatron's sequence parallelism: the one-rank model's loss and gradients", "[tensor_parallel]") {
  ProcessGroup& g = init_process_group();
  for (const bool checkpointing : {false, true}) {
    check_family("gpt2-nano", DType::f64, 1e-12, checkpointing, true);
    check_family("gpt2-nano", DType::f32, 1e-4, checkpointing, true);
    check_family("llama-nano", DType::f64, 1e-12, checkpointing, true);
    check_family("llama-nano", DType::f32, 1e-4, checkpointing, true);
  }
  if (g.size() == 1) return;
  ModelOptions off;  // a tensor group of one rank has no tokens to split
  off.megatron_sequence_parallel = true;
  CHECK_THROWS_WITH(make_model(model_config("gpt2-nano"), off),
                    Catch::Contains("sequence parallelism splits the tokens over the tensor-parallel group"));
  ModelOptions split;
  split.tensor_parallel = &g;
  split.megatron_sequence_parallel = true;
  auto m = make_model(model_config("gpt2-nano"), split);
  Rng r(3);
  init_model(*m, r);
  const Batch odd = batch(model_config("gpt2-nano"), 1, 2 * g.size() + 1);  // T not divisible by tp
  CHECK_THROWS_WITH(m->loss(odd.idx, odd.targets), Catch::Contains("is not divisible by tensor_parallel_size"));
}

// On 4 ranks llama-nano's 2 kv heads are each shared by 2 ranks (kv_slice, shared_kv_read).
TEST_CASE("tensor parallel llama-nano: the one-rank model's init, loss and gradients", "[tensor_parallel]") {
  check_family("llama-nano", DType::f64, 1e-12, false);
  check_family("llama-nano", DType::f32, 1e-4, false);
  check_family("llama-nano", DType::f32, 1e-4, true);
}

// Ulysses at the model level: every rank holds the whole model and T / P tokens of each sequence
// (sequence_shard); its loss is the mean over its tokens and its gradient that mean's. The mean
// of the P ranks' losses and of their gradients (all-reduced / P, what ZeRO's averaging over the
// replica group does) equal the one-rank model's over the whole sequences, within the tensor
// cases' bounds (only the order of additions differs: attention's, over the exchanged heads).
void check_ulysses(const std::string& name, DType dt, double bound) {
  ProcessGroup& g = init_process_group();
  const ModelConfig cfg = model_config(name);
  ModelOptions split;
  split.sequence_parallel = &g;
  auto [full, sp] = build_pair(name, dt, split, 11);
  const Batch b = batch(cfg, 2, 16);
  const double lf = run_step(*full, b);
  const SequenceParallel group{&g};
  const Batch mine{sequence_shard(b.idx, group), sequence_shard(b.targets, group)};
  const double lt = g.all_reduce_sum(run_step(*sp, mine)) / g.size();
  for (Unit* u : sp->units()) {  // the ranks' mean gradient, in place
    const Tensor& gr = u->params().flat_grad();
    g.all_reduce(gr);
    std::vector<double> v = gr.to_vector();
    for (double& x : v) x /= g.size();
    Tensor(gr).copy_(Tensor::from_vector(v, gr.shape(), gr.dtype()));
  }
  INFO(name << " " << dtype_name(dt) << " sp " << g.size() << ": loss " << lf << " vs " << lt);
  CHECK(std::abs(lt - lf) <= bound * std::abs(lf));
  const double worst = worst_relative(*full, *sp, false);
  INFO("worst gradient difference / the gradient's largest magnitude: " << worst);
  CHECK(worst <= bound);
}

TEST_CASE("Ulysses: the ranks' mean loss and gradient are the one-rank model's", "[tensor_parallel]") {
  ProcessGroup& g = init_process_group();
  check_ulysses("gpt2-nano", DType::f64, 1e-12);
  check_ulysses("gpt2-nano", DType::f32, 1e-4);
  if (model_config("llama-nano").n_kv_head % g.size() == 0) {
    check_ulysses("llama-nano", DType::f64, 1e-12);
    check_ulysses("llama-nano", DType::f32, 1e-4);
  }
}

TEST_CASE("tensor parallel: a width the degree does not divide is refused by name", "[tensor_parallel]") {
  ProcessGroup& g = init_process_group();
  if (g.size() == 1) return;
  ModelConfig c = model_config("gpt2-nano");
  c.n_head = 1, c.n_kv_head = 1;  // one head cannot be split
  ModelOptions split;
  split.tensor_parallel = &g;
  CHECK_THROWS_WITH(make_model(c, split), Catch::Contains("n_head (1) is not divisible by tensor_parallel_size"));
  if (g.size() == 4) {  // 3 kv heads neither divide 4 ranks nor are divided by them
    ModelConfig l = model_config("llama-nano");
    l.n_head = 12, l.n_kv_head = 3, l.n_embd = 48;
    CHECK_THROWS_WITH(make_model(l, split), Catch::Contains("n_kv_head (3) is not divisible by tensor_parallel_size 4, "
                                                            "nor a divisor of it"));
  }
  CHECK_THROWS_WITH(make_model(model_config("gpt2-nano"), split)->make_kv_cache(),
                    Catch::Contains("cached inference with tensor parallelism is not built"));
}

TEST_CASE("TensorSlice maps a slice's elements to their places in the whole tensor", "[tensor_parallel]") {
  // (6, 2) cut along dim 0 into 2 parts of 3 blocks (c_attn's q; k; v): part 1 holds rows 1, 3, 5.
  const TensorSlice s{.dim = 0, .groups = 3, .part = 1, .parts = 2};
  const Shape local{3, 2};
  CHECK(s.full_shape(local) == Shape{6, 2});
  const int64_t want[] = {2, 3, 6, 7, 10, 11};
  for (int64_t k = 0; k < 6; ++k) CHECK(s.full_index(local, k) == want[k]);
  CHECK(s.run_length(local, 0) == 2);
  CHECK(s.run_length(local, 3) == 1);
  // (2, 6) cut along dim 1 into 3 parts: part 2 holds columns 4, 5 of each row.
  const TensorSlice r{.dim = 1, .groups = 1, .part = 2, .parts = 3};
  const int64_t want_r[] = {4, 5, 10, 11};
  for (int64_t k = 0; k < 4; ++k) CHECK(r.full_index({2, 2}, k) == want_r[k]);
  CHECK(r.run_length({2, 2}, 1) == 1);
  CHECK(TensorSlice{}.full_index({4}, 3) == 3);
  // locate is full_index's inverse over every part, with runs that stay inside one part
  for (const auto& [cut, shape] : {std::pair{s, local}, std::pair{r, Shape{2, 2}}}) {
    std::vector<int> seen(static_cast<size_t>(shape_numel(cut.full_shape(shape))), 0);
    for (int64_t part = 0; part < cut.parts; ++part) {
      TensorSlice p = cut;
      p.part = part;
      for (int64_t k = 0; k < shape_numel(shape); ++k) {
        const int64_t g = p.full_index(shape, k);
        ++seen[static_cast<size_t>(g)];
        const TensorSlice::Place at = cut.locate(shape, g);
        CHECK(at.part == part);
        CHECK(at.index == k);
        CHECK(at.run >= 1);
        if (at.run > 1) CHECK(cut.locate(shape, g + at.run - 1).index == k + at.run - 1);
      }
    }
    for (int c : seen) CHECK(c == 1);  // the parts cover the whole tensor once
  }
}
