// defines: 3 Catch2 test cases tagged [act_offload_equivalence], [act_offload_memory], [act_offload_trace];
//          helpers: ckpt_run, Run, train
//
// Activation checkpoint offload (activation_checkpointing.cpu_checkpointing,
// zero/activation_offload.h): the checkpoints' round trip through the host tier changes no bit
// of training, and moves exactly the checkpoints' bytes from the device to the host.
#include <catch2/catch.hpp>

#include <cstring>

#include "core/trace.h"
#include "train/trainer.h"

using namespace zt;

namespace {

const std::string kCorpus = std::string(ZT_SOURCE_DIR) + "/data/corpus/train.txt";

// gpt2-nano with activation checkpointing, a global batch of 8 x 32 tokens over the ranks.
RunConfig ckpt_run(int world_size, int stage, bool cpu_checkpointing) {
  RunConfig c;
  c.model = "gpt2-nano";
  c.train_data = kCorpus;
  c.engine.train_micro_batch_size_per_gpu = 8 / world_size;
  c.seq_len = 32;
  c.steps = 4;
  c.engine.optimizer.lr = 3e-3;
  c.engine.scheduler = SchedulerConfig::defaults(SchedulerType::cosine);  // llm.c\'s, floor 0.1
  c.engine.scheduler.warmup_num_steps = 1;
  c.engine.zero.stage = stage;
  c.engine.zero.overlap_comm = true;
  c.engine.zero.stage3_param_persistence_threshold = 100;
  c.engine.zero.stage3_prefetch_bucket_size = 20000;
  c.engine.activation_checkpointing = true;
  c.engine.cpu_checkpointing = cpu_checkpointing;
  return c;
}

struct Run {
  std::vector<double> losses;
  std::vector<std::vector<char>> params;  // this rank's parameter shard of each unit, raw bytes
};

Run train(const RunConfig& c, ProcessGroup& g) {
  Trainer t(c, g);
  Run r;
  while (!t.done()) r.losses.push_back(t.step().loss);
  for (const CheckpointShard& u : t.engine().shards())
    for (const auto& [name, tensor] : u.tensors)
      if (name == "param") {
        const Tensor host = tensor.to(Device::cpu(), Category::workspace);
        const char* p = static_cast<const char*>(host.raw());
        r.params.emplace_back(p, p + host.nbytes());
      }
  return r;
}

}  // namespace

TEST_CASE("cpu_checkpointing: losses and final weights bitwise equal to checkpoints on the device",
          "[act_offload_equivalence]") {
  ProcessGroup& g = init_process_group();
  for (int stage : {0, 3}) {
    INFO("stage " << stage << ", " << g.size() << " ranks");
    const Run device = train(ckpt_run(g.size(), stage, false), g);
    const Run host = train(ckpt_run(g.size(), stage, true), g);
    REQUIRE(host.losses.size() == device.losses.size());
    for (size_t k = 0; k < device.losses.size(); ++k) {
      INFO("step " << k + 1);
      CHECK(std::memcmp(&host.losses[k], &device.losses[k], sizeof(double)) == 0);
    }
    REQUIRE(host.params.size() == device.params.size());
    REQUIRE(!device.params.empty());
    for (size_t u = 0; u < device.params.size(); ++u) {
      INFO("unit " << u);
      CHECK(host.params[u] == device.params[u]);
    }
  }
}

TEST_CASE("cpu_checkpointing: the device's activations fall and the host tier holds the checkpoints' bytes",
          "[act_offload_memory]") {
  ProcessGroup& g = init_process_group();
  for (int stage : {0, 3}) {
    INFO("stage " << stage << ", " << g.size() << " ranks");
    // After one forward: each block's input is a checkpoint, (B, T, C) float32.
    auto after_forward = [&](bool cpu_checkpointing, int64_t* checkpoint_bytes) {
      Trainer t(ckpt_run(g.size(), stage, cpu_checkpointing), g);
      const RunConfig& c = t.config();
      const ModelConfig& m = t.model_config();
      *checkpoint_bytes = m.n_layer * c.engine.train_micro_batch_size_per_gpu * c.seq_len * m.n_embd * 4;
      Tensor idx = Tensor::zeros({c.engine.train_micro_batch_size_per_gpu, c.seq_len}, DType::i32,
                                 Category::activations);
      Tensor targets = Tensor::zeros({c.engine.train_micro_batch_size_per_gpu, c.seq_len}, DType::i32,
                                     Category::activations);
      for (int64_t i = 0; i < idx.numel(); ++i) {
        idx.data<int32_t>()[i] = static_cast<int32_t>((7 * i) % m.vocab_size);
        targets.data<int32_t>()[i] = static_cast<int32_t>((7 * i + 1) % m.vocab_size);
      }
      const int64_t host0 = t.engine().memory_report().host.cur(Category::activations);
      Var loss = t.engine().forward(idx, targets);
      const MemoryReport fwd = t.engine().memory_report();  // waits for the copies in flight
      t.engine().backward(loss);
      loss = Var();
      const MemoryReport bwd = t.engine().memory_report();
      t.engine().step(1e-3);
      return std::array<int64_t, 4>{fwd.measured.cur(Category::activations),
                                    fwd.host.cur(Category::activations) - host0,
                                    bwd.host.cur(Category::activations) - host0, fwd.host_name.empty() ? 0 : 1};
    };
    int64_t ckpt = 0;
    const auto on_device = after_forward(false, &ckpt);
    const auto on_host = after_forward(true, &ckpt);
    REQUIRE(ckpt > 0);
    CHECK(on_device[1] == 0);             // without it the host tier holds no activations
    CHECK(on_device[3] == 0);             // and is not in the report
    CHECK(on_host[3] == 1);               // with it the report shows the host tier
    CHECK(on_host[1] == ckpt);            // the host holds exactly the checkpoints
    CHECK(on_device[0] - on_host[0] == ckpt);  // which left the device
    CHECK(on_host[2] == 0);               // and every one came back for its recompute
  }
}

// The trace (core/trace.h): every move is a span on the io track (category "offload"), and the
// checkpoint of block i-1 is asked back during block i's backward — the prefetch
// one recompute ahead that keeps the backward from waiting.
TEST_CASE("cpu_checkpointing: the moves on the trace's io track, prefetched one recompute ahead", "[act_offload_trace]") {
  ProcessGroup& g = init_process_group();
  RunConfig c = ckpt_run(g.size(), 3, true);
  c.steps = 1;
  Trainer t(c, g);
  Tracer tracer(g.rank());
  t.engine().set_tracer(&tracer);
  t.step();
  t.engine().set_tracer(nullptr);
  const int n_layer = static_cast<int>(t.model_config().n_layer);
  REQUIRE(n_layer >= 2);
  auto event = [&](const char* ph, const std::string& name, int tid) -> nlohmann::json {
    for (const nlohmann::json& e : tracer.events())
      if (e.value("ph", "") == ph && e.value("name", "") == name && e.value("tid", -1) == tid) return e;
    return nullptr;
  };
  auto span = [&](const std::string& name, int tid) { return event("X", name, tid); };
  const int io = static_cast<int>(TraceTrack::io), compute = static_cast<int>(TraceTrack::compute);
  for (int i = 0; i < n_layer; ++i) {
    const std::string b = "h." + std::to_string(i);
    INFO(b);
    const nlohmann::json out = span("checkpoint to host " + b, io), back = span("checkpoint to device " + b, io);
    REQUIRE(out.is_object());
    REQUIRE(back.is_object());
    CHECK(out.at("cat") == "offload");
    CHECK(out.at("args").at("bytes") ==
          c.engine.train_micro_batch_size_per_gpu * c.seq_len * t.model_config().n_embd * 4);
    CHECK(back.at("ts").get<double>() >= out.at("ts").get<double>() + out.at("dur").get<double>());
    // Requested on the compute thread (the copy runs when the worker gets to it): block i's
    // checkpoint is asked back during block i+1's backward (its recompute inside); the last
    // block's during the head's, so inside the backward pass and before the last block's own.
    const nlohmann::json asked = event("i", "fetch checkpoint " + b, io);
    REQUIRE(asked.is_object());
    const double at = asked.at("ts").get<double>();
    CHECK(at <= back.at("ts").get<double>());
    const nlohmann::json pass = span("backward pass", compute), own = span("backward " + b, compute);
    REQUIRE(pass.is_object());
    REQUIRE(own.is_object());
    CHECK(at >= pass.at("ts").get<double>());
    CHECK(at < own.at("ts").get<double>());
    if (i + 1 < n_layer) {
      const nlohmann::json next = span("backward h." + std::to_string(i + 1), compute);
      REQUIRE(next.is_object());
      CHECK(at >= next.at("ts").get<double>());
      CHECK(at < next.at("ts").get<double>() + next.at("dur").get<double>());
    }
  }
}
