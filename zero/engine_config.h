// defines: Precision, OffloadDevice, OffloadConfig, ZeroOptimization, default_overlap_comm, Fp16Config, OptimizerType,
//          OptimizerConfig, AioConfig, EngineConfig, parse_engine_config, engine_config_from_file,
//          to_json(EngineConfig), zeropp_problem — the DeepSpeed-style JSON config (docs/architecture.md "Configuration").
//
// A DeepSpeed user is at home: the keys, their meaning and their defaults are DeepSpeed's
// (https://www.deepspeed.ai/docs/config-json/), sizes in elements as DeepSpeed counts them.
// Everything is validated: an unknown key, a wrong type, a value out of range or an impossible
// combination (stage 4, offload_param below stage 3, bf16 and fp16 together, a
// train_batch_size that is not micro x accumulation x world size) is a zt::Error that names the
// key path ("zero_optimization.stage") and the allowed values. Never silently ignored: every key
// read here changes what the run does (steps_per_print and wall_clock_breakdown: what zt-train
// prints), or is accepted only at the one value this implementation has.
//
// It is the one owner of these settings: zt-train's flags write into it (tools/zt_train_options.h)
// and the run's own settings sit beside it in RunConfig (train/run_config.h). Modes are enums,
// parsed once here with an error that names the value and the choices.
// docs/config.md lists every key and every error case; configs/ holds ready files.
#pragma once
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "optim/schedule.h"  // defines: SchedulerConfig (the "scheduler" section)

namespace zt {

// Every unit's flat buffer is padded to a multiple of world_size x kShardAlignment elements
// (ModelOptions{world_size, alignment}), so each rank's shard starts on a 64-byte boundary.
inline constexpr int64_t kShardAlignment = 16;

// Working precision of parameters and gradients. f32: no master copy (the parameters are the
// master). bf16 / f16: 2-byte parameters and gradients, fp32 master weights in the optimizer
// state (the ZeRO paper's mixed-precision accounting, K = 12).
enum class Precision { f32, bf16, f16 };
const char* precision_name(Precision p);  // "fp32" | "bf16" | "fp16"

// Where offloaded state lives: "none" (the device), "cpu" (host memory), "nvme" (swap files).
enum class OffloadDevice { none, cpu, nvme };
const char* offload_device_name(OffloadDevice d);                 // "none" | "cpu" | "nvme"
OffloadDevice offload_device_from_name(const std::string& name);  // throws naming it and the choices

struct OffloadConfig {                 // zero_optimization.offload_optimizer / offload_param
  OffloadDevice device = OffloadDevice::none;
  bool pin_memory = false;
  std::string nvme_path;  // required when device is nvme
  int64_t buffer_count = 5;
  int64_t buffer_size = 100000000;     // elements
  bool enabled() const { return device != OffloadDevice::none; }
  bool nvme() const { return device == OffloadDevice::nvme; }
  bool operator==(const OffloadConfig&) const = default;
};

// aio.* — DeepSpeed's asynchronous IO settings of the NVMe tier (zero/aio.h). block_size: bytes per
// read/write request; queue_depth: requests in flight per rank. thread_count, single_submit and
// overlap_events are accepted only at the values this implementation has (one IO thread per
// rank, batched submission, completions overlapped with new submissions).
struct AioConfig {
  int64_t block_size = 1048576;
  int64_t queue_depth = 8;
  bool operator==(const AioConfig&) const = default;
};

struct ZeroOptimization {
  int stage = 0;                                  // 0 | 1 | 2 | 3
  bool overlap_comm = false;                      // DeepSpeed: false (stage 3: true): default_overlap_comm
  bool contiguous_gradients = true;               // always true here: gradients live in flat buffers
  int64_t reduce_bucket_size = 500000000;         // elements per gradient reduction call
  int64_t allgather_bucket_size = 500000000;      // elements per parameter all-gather call (stages 1-2)
  int64_t stage3_prefetch_bucket_size = 50000000; // elements prefetched ahead of use
  int64_t stage3_param_persistence_threshold = 100000;  // units with fewer params stay gathered
  int64_t stage3_max_live_parameters = 1000000000;      // bound on gathered non-persistent elements
  int64_t stage3_max_reuse_distance = 1000000000;       // keep a unit gathered if reused this soon
  int64_t sub_group_size = 1000000000;  // offload: the CPU optimizer steps in chunks of this many elements
  OffloadConfig offload_optimizer, offload_param;
  // ZeRO++ (Wang et al. 2023; zero/zeropp.h): DeepSpeed's four keys, and five of ours (the wire formats,
  // hpZ's exact secondary gather, qgZ on one node); docs/zero.md compares the two.
  bool zero_quantized_weights = false;          // qwZ: stage 3's parameter all-gathers as int8 blocks
  int64_t zero_hpz_partition_size = 1;          // hpZ: > 1, a secondary shard over this many ranks of a
                                                // node serves the backward's all-gather (0, 1: off)
  bool zero_hpz_secondary_exact = false;        // ours: under qwZ, hpZ's secondary gather at full
                                                // precision (DeepSpeed quantizes it too)
  bool zero_quantized_gradients = false;        // qgZ: the gradient reduce-scatter as a hierarchical
                                                // all-to-all of int4 (or int8) blocks; as DeepSpeed's,
                                                // at stage 3 across nodes only (qgz_runs, zero/zeropp.h)
  bool zero_quantized_gradients_one_node = false;    // ours: qgZ on one node too (its intra-node hop, lossy)
  bool zero_quantized_nontrainable_weights = false;  // DeepSpeed's: keep frozen parameters quantized; every
                                                     // parameter here trains, so it changes nothing
  int zero_quantized_gradients_bits = 4;        // ours: qgZ's code width, 4 (DeepSpeed's) or 8
  // ours: qgZ's wire format, "deepspeed" (its groups of about a row, its rounding, fp16 sums) or
  // "blocks" (ours: fixed blocks, float32 sums); zero/zeropp.h
  std::string zero_quantized_gradients_format = "deepspeed";
  int64_t zero_quantization_block_size = 4096;  // ours: elements per quantization block (one scale each)
  bool zeropp() const { return zero_quantized_weights || zero_hpz_partition_size > 1 || zero_quantized_gradients; }
  bool operator==(const ZeroOptimization&) const = default;
};

// DeepSpeed's default for overlap_comm when neither the config nor a flag sets it: on at stage 3
// only. The config reader, zt-train's flags and zt-estimate all take it from here.
inline bool default_overlap_comm(int stage) { return stage == 3; }

struct Fp16Config {             // fp16.* (DeepSpeed's dynamic loss scaling)
  bool enabled = false;
  double loss_scale = 0;        // 0: dynamic; > 0: this static scale
  int initial_scale_power = 16; // dynamic scale starts at 2^this
  int64_t loss_scale_window = 1000;  // steps without overflow before the scale doubles
  int hysteresis = 2;           // overflows tolerated before the scale halves
  double min_loss_scale = 1;
  bool operator==(const Fp16Config&) const = default;
};

// optimizer.type. "Adam" is DeepSpeed's Adam with adam_w_mode true (its default): decoupled weight
// decay, the same update as "AdamW"; the name is kept so that the config is written back as given.
enum class OptimizerType { adamw, adam, sgd };
const char* optimizer_type_name(OptimizerType t);  // "AdamW" | "Adam" | "SGD"

struct OptimizerConfig {        // optimizer: {"type": "AdamW" | "Adam" | "SGD", "params": {...}}
  OptimizerType type = OptimizerType::adamw;
  bool sgd() const { return type == OptimizerType::sgd; }
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;  // params.betas
  double eps = 1e-8;
  double weight_decay = 0.01;
  double momentum = 0;  // SGD only (torch.optim.SGD's default)
  bool operator==(const OptimizerConfig&) const = default;
};

struct EngineConfig {
  int64_t train_batch_size = 0;            // global sequences per step; 0 = micro x accum x world
  int64_t train_micro_batch_size_per_gpu = 1;
  int64_t gradient_accumulation_steps = 1;
  double gradient_clipping = 0;            // 0 = off
  Precision precision = Precision::f32;    // from bf16.enabled / fp16.enabled
  Fp16Config fp16;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;  // scheduler: {"type": ..., "params": {...}} (optim/schedule.h)
  ZeroOptimization zero;
  AioConfig aio;
  bool activation_checkpointing = false;   // activation_checkpointing.enabled (our key; see docs)
  bool cpu_checkpointing = false;          // activation_checkpointing.cpu_checkpointing: the checkpoints
                                           // in the host tier (zero/activation_offload.h); needs enabled
  int64_t steps_per_print = 10;            // zt-train prints a step's line every this many steps
  bool wall_clock_breakdown = false;       // zt-train prints each phase's time beside those lines
  bool operator==(const EngineConfig&) const = default;
};

// Parses and validates a DeepSpeed-style config for `world_size` ranks. `source` names the file
// (or "command line") in errors. Top-level keys listed in `caller_keys` belong to the caller
// (zt-train's model/data settings) and are skipped here. "auto" is accepted where DeepSpeed
// accepts it (train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps,
// gradient_clipping, optimizer params, scheduler params, zero bucket sizes) and resolves to the
// default above (train_batch_size: micro x accum x world).
EngineConfig parse_engine_config(const nlohmann::json& j, const std::string& source, int world_size,
                                 const std::set<std::string>& caller_keys = {});
// Reads a JSON file (an error names the file and the JSON parse position) and parses it.
EngineConfig engine_config_from_file(const std::string& path, int world_size,
                                     const std::set<std::string>& caller_keys = {});
// What is wrong with a ZeRO++ setting that needs no topology to tell (bits, block size, the stage it
// needs, an hpZ size that does not divide the world), naming the key; "" when nothing. The JSON
// parser and the engine (for configs made in code) both ask; the nodes are checked by
// ShardedParameters and ShardedGradient (zero/stage.h), which know them.
std::string zeropp_problem(const ZeroOptimization& z, int world_size);
// The config back as DeepSpeed JSON (every key explicit): stored in checkpoints' meta.json.
void to_json(nlohmann::json& j, const EngineConfig& c);

}  // namespace zt
