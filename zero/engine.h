// defines: UnitShard, StepResult, MemoryReport, Engine, initialize — the ZeRO engine, stages 0-3
//          (Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training Trillion
//          Parameter Models", sections 5 and 7).
//
// The engine owns everything of a model that ZeRO shards, per unit (ARCHITECTURE.md "The life of
// one parameter"). With N ranks, rank r, a unit's flat buffers of P elements (padded so N | P)
// and S = P / N:
//
//              parameters (params)       gradients (grads)          optimizer state (optim)
//   stage 0    full P, all ranks          full P, all-reduced        full (m, v): 2P
//   stage 1    full P                     full P, reduce-scattered   shard: 2S
//   stage 2    full P                     shard S (+ the full P of   shard: 2S
//                                         one unit during its backward)
//   stage 3    shard S (+ the full P of   shard S (as stage 2)       shard: 2S
//              units between acquire and release)
//
// float32 counts 4 bytes each, so the model states per rank are 16Psi, 8Psi + 8Psi/N,
// 4Psi + 12Psi/N and 16Psi/N (the paper's fp32 counterpart of 2Psi+2Psi+K*Psi, K = 8 without a
// master copy).
//
// Mixed precision (bf16 / fp16, section 3.1 and Table 1 with K = 12): parameters and gradients
// are 2-byte tensors (params, grads) with the layout above, and the optimizer state holds a
// float32 master copy beside m and v (optim: 12 bytes per element of the shard; stage 0 whole).
// Per rank: stage 0 2Psi+2Psi+12Psi, stage 1 2Psi+2Psi+12Psi/N, stage 2 2Psi+14Psi/N, stage 3
// 16Psi/N. Two ways to compute, chosen by the dtype the model was built in:
//   float32 model (float32 compute): while a unit computes (between acquire and release, and
//     during its backward) the ParamSet's float32 buffers exist as Category::workspace — the
//     2-byte parameters converted exactly, and the unit's float32 gradient, which is rounded to 2
//     bytes as soon as the unit's backward ends and freed. Activations are float32; only
//     parameters and gradients are rounded. The fast path on the cpu.
//   model built in the 2-byte dtype (bf16 compute; ModelOptions::dtype = bf16): the ParamSet's
//     flat buffer IS the 2-byte parameters (stages 0-2: `half`; stage 3: the gathered buffer,
//     all-gathered straight into it), the kernels compute in bf16 (float32 math, bf16 storage:
//     activations are bf16), and the unit's gradient comes out of the backward in bf16. No
//     float32 copies of parameters exist outside the master. The GPU's path (llm.c, DeepSpeed's
//     bf16 mode); on the cpu it runs on float32 stand-ins (core/cpu_bf16.h), slower but the same
//     arithmetic. Checkpoints are the same in both (the float32 master).
// A unit's gradient is divided by N before it is rounded (PyTorch DDP's pre-division, so an fp16 sum over
// ranks cannot overflow where the average would not); reductions sum 2-byte values
// (dist/process_group.h); the fp16 unscale and the clipping factor are applied once, when a
// gradient shard is converted to float32 for the update.
// fp16 scales the loss by a dynamic factor (optim/loss_scaler.h); a step whose gradients
// overflow is skipped on every rank (StepResult::skipped) and the scale drops. Communication per step (ring convention, dist/process_group.h): stage 0 an
// all-reduce of the gradients (2Psi); stages 1-2 a reduce-scatter of the gradients and an
// all-gather of the updated parameters (Psi + Psi); stage 3 an all-gather per unit in forward and
// again in backward and a reduce-scatter of the gradients (3Psi) — section 7.2.
//
// Stage 3 frees a unit's full buffer with Storage::release(), so the views that autograd saved
// stay valid and see the next gather (PyTorch FSDP's storage resize). Its backward re-gathers the
// unit from LeafGroup::before_backward and reduces from after_backward; the order of acquires in
// the first step is recorded and later steps prefetch ahead along it.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/process_group.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "zero/engine_config.h"
#include "zero/pending.h"
#include "core/trace.h"

namespace zt {

// What this rank holds of one unit, in the checkpoint's terms: each tensor is elements
// [rank*S, (rank+1)*S) of the unit's flat space (P = padded_numel, numel real elements).
struct UnitShard {
  std::string unit;
  int64_t numel = 0, padded_numel = 0;
  std::vector<std::pair<std::string, Tensor>> tensors;  // "param", "exp_avg", ... -> S elements
};

struct StepResult {
  double loss = 0;       // mean over the global batch (all ranks, all micro-steps)
  double grad_norm = 0;  // global L2 norm before clipping
  bool skipped = false;  // fp16: overflow, step skipped
  double loss_scale = 1;  // fp16: the scale this step's gradients were computed with
};

// Per-rank bytes by category: now, the peak since the last reset, and the engine's model-state
// accounting (what the ZeRO formulas predict).
struct MemoryReport {
  MemoryStats measured;      // the device's allocator: current and peak per category
  MemoryStats host;          // offload: the host tier's allocator (zero/offload.h); zeros otherwise
  MemoryStats nvme;          // offload to nvme: bytes reserved in this rank's swap files
  std::string host_name;     // that allocator's name ("host", "pinned"); empty without offload
  int64_t psi = 0;           // parameters (no padding)
  int64_t psi_padded = 0;    // sum of the units' padded flat sizes
  int64_t model_state_bytes(Category c) const { return measured.cur(c); }
};

// Seconds the training thread spent in the engine's offload work (zero/engine_offload.cpp):
// the CPU optimizer's step (with its swap-file reads and writes) and bringing offloaded
// parameter shards in (waiting for their reads, copying them to the device).
struct EngineTimes {
  double offload_step_s = 0;
  double offload_fetch_s = 0;
};

class LossScaler;
class OffloadedAdamW;
class SwapFile;

class Engine final : public Residency {
 public:
  Engine(Model& model, const EngineConfig& cfg, ProcessGroup& group);
  ~Engine() override;

  // Micro-step: the loss of this rank's micro-batch (mean over its B*T tokens), graph attached.
  Var forward(const Tensor& idx, const Tensor& targets);
  // Backpropagates loss / gradient_accumulation_steps; reductions start as units finish.
  void backward(const Var& loss);
  // After gradient_accumulation_steps forward/backward pairs: finish the reductions, clip by the
  // global norm, one optimizer update of this rank's shards at `lr`, publish the parameters.
  StepResult step(double lr);

  // Evaluation forward (no graph): the loss of one batch on this rank.
  double eval_loss(const Tensor& idx, const Tensor& targets);

  // ---- Residency: the unit scopes the model opens (stage 3 gathers and frees) ----
  void acquire(Unit& u) override;
  void release(Unit& u) override;

  // ---- state ----
  std::vector<UnitShard> shards();                 // this rank's shards (views), for checkpoints
  // After the tensors of shards() were written in place (a checkpoint load), given them back:
  // rebuild what the stage holds beyond this rank's shard (stage 0: every tensor whole; stages
  // 1-2: the full parameters; offload: the working parameters, and the swap file on nvme).
  void shards_loaded(const std::vector<UnitShard>& filled);
  int64_t optimizer_steps() const;
  void set_optimizer_steps(int64_t n);
  // What a checkpoint's meta.json keeps of the engine beyond the shards: the fp16 loss scaler's
  // state ({} otherwise). load_state_meta restores it (a missing entry keeps the initial scale).
  nlohmann::json state_meta() const;
  void load_state_meta(const nlohmann::json& j);
  double loss_scale() const;  // 1 unless fp16
  MemoryReport memory_report() const;
  EngineTimes times() const { return times_; }

  // Tracing (core/trace.h; null: off): each unit's forward / recompute / backward on the compute
  // track, "gather <unit>" / "release <unit>" instants where a unit's full parameters are issued
  // and freed, the optimizer step and the offload work, memory counters of the device allocator
  // (and of the host tier and the swap file with offload) after every unit and step. Hands the
  // tracer to the group and the swap files too.
  void set_tracer(Tracer* t);
  Tracer* tracer() const { return active_tracer(); }  // null unless set and recording
  const EngineConfig& config() const { return cfg_; }
  ProcessGroup& group() { return group_; }
  Model& model() { return model_; }
  int64_t micro_steps_done() const { return micro_; }

 private:
  struct UnitState;
  UnitState& state_of(Unit& u);
  void gather(UnitState& s, bool wait);        // make the full compute params resident (and current)
  void fill_compute_copy(UnitState& s, std::deque<Pending>& q);  // issue what fills them
  void free_full_params(UnitState& s);         // release the full compute buffer
  void before_backward(UnitState& s);
  void after_backward(UnitState& s);
  void reduce_gradients(UnitState& s, const Tensor& grad);  // start (or run) the reduction of `grad` (P)
  void finish_reductions();                    // wait for every pending reduction
  void update_mixed(double factor);            // mixed precision: the optimizer step unit by unit
  void publish_parameters();                   // stages 1-2: all-gather the updated shards
  void zero_gradients();
  void prefetch_after(size_t trace_pos);
  void release_params(UnitState& s);           // free the full parameters at the end of a scope
  StepResult step_inner(double lr);
  // ---- offload (zero/engine_offload.cpp) ----
  void setup_offload();                        // the host tier, swap files, the offloaded optimizer
  Tensor new_param_shard(UnitState& s);        // stage 3: this rank's S-element shard (device or host)
  void park_param_shard(UnitState& s);         // offload_param nvme: the shard to its file region
  void gather_from(UnitState& s, const Tensor& src, std::deque<Pending>& q);  // the shard -> full params
  void fetch_offloaded_params(UnitState& s, std::deque<Pending>& q);  // offload_param: bring the shard in
  void grad_to_host(UnitState& s);             // offload: the reduced gradient shard -> host
  void publish_piece(UnitState& s, int64_t a, const Tensor& master, bool last);  // new params of [a, a+n)
  int param_reads_in_flight() const;
  void finish_param_write(UnitState& s);       // offload_param nvme: wait for s's write, drop its buffer
  void finish_param_writes();

  Model& model_;
  EngineConfig cfg_;
  ProcessGroup& group_;
  int N_ = 1, r_ = 0;
  bool mixed_ = false;         // bf16 / fp16: 2-byte params and grads, float32 master in optim
  DType half_ = DType::f32;    // the 2-byte dtype when mixed_
  bool compute_half_ = false;  // mixed_ with a model built in half_: compute in the 2-byte dtype
  bool gathers_ = false;       // the full compute params come and go (stage 3, or float32 compute of mixed_)
  std::unique_ptr<LossScaler> scaler_;  // fp16 only
  std::vector<std::unique_ptr<UnitState>> units_;
  std::unique_ptr<Optimizer> opt_;              // the device optimizer (null when offloaded)
  std::unique_ptr<SwapFile> opt_swap_, own_param_swap_;  // nvme: this rank's swap files (outlive offload_)
  std::unique_ptr<OffloadedAdamW> offload_;     // offload_optimizer: the CPU AdamW (zero/offload.h)
  SwapFile* param_swap_ = nullptr;              // offload_param nvme: opt_swap_ when the paths agree
  Allocator* host_ = nullptr;                   // offload: the host tier's allocator
  bool param_offload_ = false;                  // offload_param cpu or nvme (stage 3)
  std::vector<std::pair<int64_t, int64_t>> param_regions_;  // offload_param nvme: (offset, bytes) per unit
  std::deque<UnitState*> param_writes_;         // offload_param nvme: units whose shard write is in flight
  int64_t micro_ = 0;         // micro-steps since the last step()
  double loss_sum_ = 0;       // this rank's micro-batch losses since the last step()
  bool in_backward_ = false;
  bool backward_scope_ = false;  // acquire/release called by before/after_backward (not a forward)
  // stage 3 acquire trace (unit indices) recorded in the first training step, and the position
  std::vector<int> trace_;
  bool tracing_ = true;
  bool evaluating_ = false;
  size_t trace_pos_ = 0;
  int64_t live_elements_ = 0;  // stage 3: elements of full buffers currently gathered
  Tracer* tracer_ = nullptr;
  EngineTimes times_;
  Tracer* active_tracer() const { return tracer_ && tracer_->recording() ? tracer_ : nullptr; }
  void trace_memory();         // one sample of each memory counter
};

// DeepSpeed's entry point: model + config + group -> engine. The model must have been built with
// ModelOptions{world_size = group.size()} so its flat buffers shard evenly.
std::unique_ptr<Engine> initialize(Model& model, const EngineConfig& cfg, ProcessGroup& group);

}  // namespace zt
