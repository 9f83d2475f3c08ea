// defines: UnitSize, ModelShape, unit_sizes, model_shape, EstimateRequest, Estimate, estimate,
//          ActivationEstimate, estimate_activations, model_state_bytes_x_n, format_paper_gb,
//          paper_table1_cell, paper_table1, parse_count, CommEstimate, estimate_comm — the memory
//          estimator behind zt-estimate, and the bytes a step moves.
//
// Per-rank bytes by category (core/memory.h: params, grads, optim, activations, comm, workspace,
// secondary)
// for a model (its exact unit layout) or a bare parameter count Psi, a ZeRO stage 0-3, N ranks and
// a precision. Model states (Rajbhandari et al. 2019, arXiv:1910.02054, section 5, Figure 1):
//
//                 params          grads            optim                 total
//   fp32 (K = 8, no master copy: the parameters are the master; m and v are 8 bytes)
//     stage 0     4Psi            4Psi             8Psi                  16Psi
//     stage 1     4Psi            4Psi             8Psi/N                8Psi + 8Psi/N
//     stage 2     4Psi            4Psi/N           8Psi/N                4Psi + 12Psi/N
//     stage 3     4Psi/N          4Psi/N           8Psi/N                16Psi/N
//   bf16 / fp16 (the paper's mixed precision: K = 12, fp32 master + m + v)
//     stage 0     2Psi            2Psi             12Psi                 16Psi
//     stage 1     2Psi            2Psi             12Psi/N               4Psi + 12Psi/N
//     stage 2     2Psi            2Psi/N           12Psi/N               2Psi + 14Psi/N
//     stage 3     2Psi/N          2Psi/N           12Psi/N               16Psi/N
//
// With a model, Psi is the sum of the units' padded flat sizes (each a multiple of
// N x kShardAlignment, zero/engine_config.h), so "Psi/N" is exactly the shard a rank holds. With a bare
// Psi there is no padding (bytes rounded up per category). The table is not written out in code
// here: the model states are the policies' own answers, summed (zero/footprint.h's model_state),
// and tests/test_paper_tables.cpp checks them against the paper's printed Table 1.
//
// Peaks (what a step of our engine reaches; docs/estimator.md derives each term):
//   params       model state + stage 3: the full buffers of gathered units (persistent units
//                always; the units in use, what prefetch and stage3_max_reuse_distance keep),
//                counted along the step's acquires and releases by stage 3's own GatherSchedule
//                (zero/gather_schedule.h)
//   grads        model state + stages 2-3: the full gradient buffers alive during backward (the
//                unit being differentiated; the tied GPT-2 embedding through the whole backward;
//                the previous unit still reducing under overlap_comm)
//   activations  what our ops save for backward (estimate_activations), plus the largest
//                backward transient
//   comm         the reduce-scatter / all-gather staging buffers the stages allocate
//                (zero/pending.cpp, GradientPolicy::reduce_scatter)
//   workspace    attention backward scratch (core/kernels/attention.h); mixed precision on this
//                float32 backend also the units' float32 parameter copies and gradients
//   (mixed precision: stage 3's 2-byte gather buffers count as params, stages 2-3's 2-byte
//   gradient copies being reduced as comm)
// Construction is partitioned (zero/engine.cpp's load_initial) and stays below these peaks: it
// holds the model states of the units placed so far plus one unit being placed (stage 3: one
// shard, below the gathered units of a step; stages 0-2 mixed: one unit's float32 values, below
// the float32 compute copies of a step).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/memory.h"
#include "dist/process_group.h"  // defines: Collective, kNumCollectives, Topology
#include "nn/model.h"
#include "zero/engine_config.h"

namespace zt {

struct UnitSize {
  std::string name;
  int64_t numel = 0;         // parameters, no padding
  int64_t padded_numel = 0;  // flat buffer: a multiple of world_size x alignment
};

// What the estimator reads of a model. zero/ sits below models/ (docs/architecture.md), so it cannot
// name ModelConfig: model_shape() copies the fields from it (any struct with ModelConfig's
// field names) and the unit layout from a model built from it.
struct ModelShape {
  std::string family;  // "gpt2" | "llama"
  int64_t n_layer = 0, n_embd = 0, n_head = 0, n_kv_head = 0, ffn_hidden = 0;
  int64_t padded_vocab_size = 0;
  bool tie_embeddings = true;
  std::vector<UnitSize> units;  // forward order: embed, n_layer blocks, head
  int64_t largest_param = 0;    // elements of the largest parameter tensor
};

// The units of a model in forward order. A finalized unit reports its own padded size; a
// layout-only one (ModelOptions{allocate = false}) is padded here by ParamSet::finalize's rule:
// numel rounded up to a multiple of world_size x alignment (at least one such multiple).
std::vector<UnitSize> unit_sizes(Model& m, int64_t world_size, int64_t alignment = kShardAlignment);

// cfg: a ModelConfig; layout: make_model(cfg, ModelOptions{DType::f32, N, kShardAlignment,
// /*allocate=*/false}) — the exact padded layout for N = world_size ranks, no memory allocated.
template <class Config>
ModelShape model_shape(const Config& cfg, Model& layout, int64_t world_size) {
  ModelShape s;
  s.family = cfg.family;
  s.n_layer = cfg.n_layer;
  s.n_embd = cfg.n_embd;
  s.n_head = cfg.n_head;
  s.n_kv_head = cfg.n_kv_head;
  s.ffn_hidden = cfg.ffn_hidden;
  s.padded_vocab_size = cfg.padded_vocab_size;
  s.tie_embeddings = cfg.tie_embeddings;
  s.units = unit_sizes(layout, world_size);
  for (Unit* u : layout.units())
    for (const ParamInfo& p : u->params().infos()) s.largest_param = std::max(s.largest_param, p.numel);
  return s;
}

struct EstimateRequest {
  bool has_model = false;
  ModelShape model;      // when has_model (units padded for world_size)
  int64_t psi = 0;       // when !has_model: the parameter count
  int stage = 0;         // 0 | 1 | 2 | 3
  int64_t world_size = 1;
  Precision precision = Precision::f32;
  int64_t micro_batch = 0, seq_len = 0;  // 0: no activation estimate (needs a model too)
  bool activation_checkpointing = false;
  // activation_checkpointing.cpu_checkpointing: the blocks' checkpoints (n_layer x (B, T, C)) live in
  // the host tier (host_state's activations); the device holds at most two of them at a time
  // (zero/activation_offload.h: the one recomputing and the one coming back ahead of it).
  bool cpu_checkpointing = false;
  ZeroOptimization zero;  // bucket sizes, prefetch, persistence, reuse distance, overlap_comm
  int64_t threads = 1;    // OpenMP threads of a rank (attention backward scratch per thread)
  // Mixed precision computes in float32 on this CPU backend (zero/engine.h): activations are
  // 4 bytes, and each unit in use has float32 parameter and gradient workspaces. false: a
  // backend that computes in the 2-byte type (activations 2 bytes, no float32 copies).
  bool float32_compute = true;
  // The engine takes its initial values from a ParamSource, one unit's stage-3 shard at a time
  // (partitioned construction: zt-train's Trainer always; zero/engine.cpp's load_initial): with
  // offload_param that shard is read into a host buffer beside the unit's new shard during setup.
  // false: the engine is built from a whole model in memory (the initial values are its buffers).
  bool partitioned_construction = true;
};

struct Estimate {
  int64_t psi = 0;         // parameters (no padding)
  int64_t psi_padded = 0;  // sum of padded unit sizes (== psi without a model)
  std::array<int64_t, kNumCategories> model_state{};  // params, grads, optim: the table above
  std::array<int64_t, kNumCategories> peak{};         // per category, over a training step
  // Offload: the model states that left the device, in the host tier and in the swap file
  // (zero/offload.h; model_state above is then the device's part only); with cpu_checkpointing
  // host_state's activations are the checkpoints (zero/activation_offload.h).
  std::array<int64_t, kNumCategories> host_state{}, nvme_state{};
  bool has_activations = false;
  // What the peaks above leave out, in words ("comm: ..."), for the tools to print beside them.
  std::vector<std::string> not_counted;
  int64_t state(Category c) const { return model_state[static_cast<int>(c)]; }
  int64_t max(Category c) const { return peak[static_cast<int>(c)]; }
  int64_t model_state_total() const;
  int64_t peak_sum() const;  // sum of the category peaks: an upper bound on the peak of the total
};

// Validates the request (an error names the field and the allowed values) and estimates.
Estimate estimate(const EstimateRequest& req);

// The bytes rank t.rank moves in one steady training step (one after the first, which records
// stage 3's order) of gradient_accumulation_steps = grad_accum micro-steps, by collective kind
// and by the link class they cross, exactly as its process group counts them (dist/
// process_group.h: the ring convention, each all-to-all block on its own link, a sub-group's
// bytes in the world's): stages 0-3 with their bucket sizes, stage 3's gathers as GatherSchedule
// starts them, and ZeRO++ (qwZ's quantized gathers, hpZ's gathers inside the node, qgZ's two
// hops). zero/estimator_comm.cpp; tests/mpi/test_zeropp.cpp holds it equal to the counters.
struct CommEstimate {
  std::array<int64_t, kNumCollectives> bytes{};
  std::array<int64_t, 2> link{};  // [0] intra-node, [1] inter-node (CommCounters::link)
  int64_t total() const;
};
CommEstimate estimate_comm(const EstimateRequest& req, const Topology& t, int64_t grad_accum);

// Activation bytes of one micro-batch (B, T) through our ops (models/gpt2.cpp, models/llama.cpp,
// nn/layers.cpp, autograd/ops_*.cpp): `saved` is what the graph holds when the forward ends,
// `peak` adds the largest transient of the backward. elem: bytes per activation element.
struct ActivationEstimate {
  int64_t saved = 0, peak = 0;
};
// device_checkpoints: how many block checkpoints are on the device at once (-1: all n_layer;
// cpu_checkpointing: 2, the one being recomputed and the one brought back ahead of it).
ActivationEstimate estimate_activations(const ModelShape& m, int64_t B, int64_t T, bool checkpointing,
                                        int64_t elem = 4, int64_t device_checkpoints = -1);

// The model-state bytes of `c` (params, grads or optim) times N, exactly (an integer even where
// Psi/N is not): the formula of the table above, shared by estimate() and the paper's table.
int64_t model_state_bytes_x_n(Category c, int64_t psi, int stage, int64_t world_size, Precision p);

// num / den gigabytes (1e9 bytes) printed the way the ZeRO paper's Table 1 prints them:
// below 10 two decimals, below 100 one decimal, both rounded half up; from 100 on the integer
// part (truncated); trailing zeros dropped. (Derived from the 54 printed cells: docs/estimator.md.)
std::string format_paper_gb(int64_t num, int64_t den);
// One cell of Table 1: Psi parameters, mixed precision (K = 12), stage 1-3 (P_os, P_os+g,
// P_os+g+p), DP degree nd.
std::string paper_table1_cell(int64_t psi, int stage, int64_t nd);
// The whole of Table 1 as text (zt-estimate --paper).
std::string paper_table1();

// "7.5B", "124M", "350k", "1T", "1e9", "123456" -> a count (k/K 1e3, M 1e6, B/G 1e9, T 1e12).
// Throws zt::Error naming `what` for anything else, zero or negative.
int64_t parse_count(const std::string& s, const char* what);

}  // namespace zt
