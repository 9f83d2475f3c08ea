// defines: the step simulator's tests — what the meta device tells of each op (flops against the
//          standard 6 N D count, bytes, keys, the outermost row only, replay on the CPU, alone and
//          with the step's data flow), the collectives' costs by algorithm, the timeline's
//          bookkeeping (every interval of the compute clock is an op, a wait or cores taken;
//          overlap from the engine's order), the device profile's file and its errors.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/meta_backend.h"
#include "models/model_config.h"
#include "tests/step_time_fixtures.h"  // defines: zt::test::simple_profile, zt::test::nano_request
#include "tests/temp_dir.h"            // defines: zt::test::TempDir
#include "train/device_profile.h"
#include "train/dry_run.h"
#include "train/step_time.h"

using namespace zt;
using Catch::Matchers::Contains;

namespace {

struct Recorder final : MetaOpObserver {
  std::vector<MetaOpRecord> ops;
  void on_op(const MetaOpRecord& op) override { ops.push_back(op); }
};

Tensor meta(const Shape& s, DType dt = DType::f32) {
  return Tensor::empty(s, dt, Category::activations, meta_backend().allocator());
}

DryRunRequest nano(int world, int stage, int nodes = 1) { return test::nano_request(world, stage, nodes); }
using test::simple_profile;

}  // namespace

TEST_CASE("the meta device reports each row once, with its flops, bytes and key", "[step_time]") {
  Recorder rec;
  MetaBackend& be = meta_backend();
  be.set_observer(&rec);
  const int64_t rows = 6, in = 8, out = 5;
  Tensor x = meta({rows, in}), w = meta({out, in}), b = meta({out}), y = meta({rows, out}), pre = meta({rows, out});
  be.linear(y, x, w, b);
  be.linear_gelu(y, pre, x, w, b);  // a composite row: its inner linear and gelu are part of it
  Tensor xb = meta({rows, in}, DType::bf16), wb = meta({out, in}, DType::bf16), yb = meta({rows, out}, DType::bf16);
  be.linear(yb, xb, wb, Tensor());  // bfloat16's float32 stand-ins run the row again inside
  be.set_observer(nullptr);
  REQUIRE(rec.ops.size() == 3);
  CHECK(std::string(rec.ops[0].row) == "linear");
  CHECK(rec.ops[0].cls == OpClass::gemm);
  CHECK(rec.ops[0].flops == 2.0 * rows * in * out);
  CHECK(rec.ops[0].bytes == 4 * (rows * out + rows * in + out * in + out));
  CHECK(rec.ops[0].key == "linear float32(6, 5) float32(6, 8) float32(5, 8) float32(5,)");
  CHECK(std::string(rec.ops[1].row) == "linear_gelu");
  CHECK(rec.ops[1].flops == 2.0 * rows * in * out);
  CHECK_THAT(rec.ops[2].key, Contains("bfloat16(6, 8)") && Contains(" -"));

  // The replay makes the row's tensors on the CPU (its bytes, held while the call lives) and runs it.
  Allocator& cpu = backend(Device::cpu()).allocator();
  const int64_t before = cpu.stats().total();
  {
    std::function<void()> run = rec.ops[0].prepare(backend(Device::cpu()), nullptr);
    CHECK(cpu.stats().total() - before == rec.ops[0].bytes);
    run();
    run();
  }
  CHECK(cpu.stats().total() == before);
}

TEST_CASE("a shared replay passes each row's output to the rows that read it, as the step does", "[step_time]") {
  Recorder rec;
  MetaBackend& be = meta_backend();
  be.set_observer(&rec);
  Tensor x = meta({4, 8}), y = meta({4, 8});
  be.fill(x, 2.0);
  be.scale(y.flat_view(8, {3, 8}), x.flat_view(0, {3, 8}), 3.0);  // views: offsets into their allocations
  be.set_observer(nullptr);
  REQUIRE(rec.ops.size() == 2);

  ReplayBuffers shared;
  std::vector<std::function<void()>> runs;
  for (const MetaOpRecord& op : rec.ops) runs.push_back(op.prepare(backend(Device::cpu()), &shared));
  REQUIRE(shared.by_allocation.size() == 2);  // one buffer for x's allocation, one for y's
  for (const std::function<void()>& run : runs) run();
  const Tensor& yb = shared.by_allocation.at({y.storage()->data(), y.storage()->bytes(), DType::f32});
  REQUIRE(yb.numel() == 32);
  const std::vector<double> v = yb.to_vector();
  for (int i = 0; i < 8; ++i) CHECK(v[i] == 0.5);   // not written: as made (the replay's fill)
  for (int i = 8; i < 32; ++i) CHECK(v[i] == 6.0);  // 3 x the fill's 2, not 3 x 0.5

  CHECK(shared.bytes == 2 * 32 * 4);

  // The buffers stay within max_bytes: an allocation that would pass it is not shared (its rows
  // get buffers of their own).
  for (int64_t cap : {64, 128}) {
    ReplayBuffers small;
    small.max_bytes = cap;
    for (const MetaOpRecord& op : rec.ops) op.prepare(backend(Device::cpu()), &small);
    CHECK(small.by_allocation.size() == static_cast<size_t>(cap / 128));  // x's 128 bytes fit in 128, not y's too
    CHECK(small.bytes <= cap);
  }
}

TEST_CASE("a step's arithmetic is the standard count: 6 N per token for the matrices, 7 B T^2 C L for attention",
          "[step_time]") {
  // GPT-2 without recomputation: every weight matrix costs 2 n flops per element forward and 4 n
  // backward (dx and dW), n = B T tokens: 6 n (12 C^2 L + C V), the tied head included; causal
  // attention 2 B T^2 C forward and 5 B T^2 C backward per layer (Kaplan et al. 2020, section 2.1,
  // with the context term taken over the causal half).
  const DryRunRequest r = nano(1, 0);
  const StepTime t = simulate_step_time(r, simple_profile());
  const ModelConfig& m = r.model;
  const double n = 2.0 * 16, B = 2, T = 16, C = m.n_embd, L = m.n_layer, V = m.padded_vocab_size;
  const double matrices = 6 * n * (12 * C * C * L + C * V), attention = 7 * B * T * T * C * L;
  CHECK(t.compute_s[static_cast<int>(OpClass::gemm)] == Approx(matrices / 1e9));
  CHECK(t.compute_s[static_cast<int>(OpClass::attention)] == Approx(attention / 1e9));
  CHECK(t.tokens == 32);
  // one rank: no collective, the step is its ops
  CHECK(t.comm_total() == 0);
  CHECK(t.step_s == Approx(t.compute_total()));
  CHECK(t.forward_s + t.backward_s + t.optimizer_s == Approx(t.step_s));
  // one rank's collectives (stage 3's gathers of itself, offloaded or not) take no time
  DryRunRequest s3 = nano(1, 3);
  s3.run.engine.zero.offload_optimizer.device = OffloadDevice::cpu;
  s3.run.engine.zero.offload_param.device = OffloadDevice::cpu;
  const StepTime t3 = simulate_step_time(s3, simple_profile(0.5));
  CHECK(t3.comm_total() == 0);
  CHECK(t3.step_s == Approx(t3.compute_total()));
}

TEST_CASE("collectives cost their algorithm's hops on the profile's links", "[step_time]") {
  const DeviceProfile p = simple_profile();
  SimulatedCollective c;
  c.bytes = 3'000'000;
  c.kind = Collective::all_gather;
  c.group_size = 4;
  c.group_nodes = 1;
  CHECK(collective_seconds(c, p, 4, 1) == Approx(3 * 1e-5 + 3e6 / 1e9));  // a ring of 3 steps, intra-node
  c.kind = Collective::all_reduce;
  CHECK(collective_seconds(c, p, 4, 1) == Approx(6 * 1e-5 + 3e6 / 1e9));  // reduce-scatter then all-gather
  c.kind = Collective::all_gather;
  c.group_nodes = 2;  // the world ring over 2 nodes: one flow on each node's link
  CHECK(collective_seconds(c, p, 4, 2) == Approx(3 * 1e-4 + 3e6 / 1e8));
  c.group_size = 2;  // one rank per node (ZeRO++'s inter-node group): the 2 such groups share the link
  CHECK(collective_seconds(c, p, 4, 2) == Approx(1e-4 + 2 * 3e6 / 1e8));
  c.kind = Collective::all_to_all;  // the world's all-to-all: 2 ranks a node send off-node at once
  c.group_size = 4;
  c.inter_node = 2'000'000;
  CHECK(collective_seconds(c, p, 4, 2) == Approx(3 * 1e-4 + std::max(1e6 / 1e9, 2 * 2e6 / 1e8)));
  c.kind = Collective::barrier;
  c.group_nodes = 1;
  CHECK(collective_seconds(c, p, 4, 1) == Approx(2 * 1e-5));
  c.group_size = 1;
  c.kind = Collective::all_reduce;
  CHECK(collective_seconds(c, p, 1, 1) == 0);

  DeviceProfile one_per_node = p;  // an all-to-all over 4 nodes of one rank needs no intra-node link
  one_per_node.intra_node.reset();
  c.kind = Collective::all_to_all;
  c.group_size = 4;
  c.group_nodes = 4;
  c.inter_node = c.bytes;
  CHECK(collective_seconds(c, one_per_node, 4, 4) == Approx(3 * 1e-4 + 3e6 / 1e8));

  DeviceProfile one_node = p;
  one_node.inter_node.reset();
  c.kind = Collective::all_gather;
  c.group_size = 4;
  c.group_nodes = 2;
  CHECK_THROWS_WITH(collective_seconds(c, one_node, 4, 2), Contains("has no inter-node link"));
}

TEST_CASE("the timeline: overlap comes from the engine's order, and every interval is accounted for", "[step_time]") {
  for (int stage : {0, 1, 2, 3}) {
    CAPTURE(stage);
    const StepTime t = simulate_step_time(nano(4, stage, 2), simple_profile());
    CHECK(t.comm_total() > 0);
    // one compute clock: ops, waits (exposed); the step ends when both clocks have
    CHECK(t.step_s >= t.compute_total() + t.exposed_total() - 1e-12);
    CHECK(t.forward_s + t.backward_s + t.optimizer_s == Approx(t.compute_total() + t.exposed_total()));
    CHECK(t.step_s <= t.compute_total() + t.comm_total() + 1e-12);  // never worse than no overlap
    double waits = 0;
    for (double w : t.wait_s) waits += w;
    CHECK(waits == Approx(t.exposed_total()).margin(1e-15));
    // where a collective slows compute beside it, and is slowed by it, the step takes longer
    DeviceProfile shared = simple_profile(0.5);
    shared.intra_node->loaded_alpha_s = 2e-5;
    shared.intra_node->loaded_bytes_per_s = 5e8;
    const StepTime s = simulate_step_time(nano(4, stage, 2), shared);
    CHECK(s.step_s >= t.step_s);
    CHECK(s.compute_total() >= t.compute_total());
    CHECK(s.forward_s + s.backward_s + s.optimizer_s == Approx(s.compute_total() + s.exposed_total()));
  }
  // stage 3 prefetches the next unit's gather while this one computes: some of it is hidden, and
  // at compute_pace 0.5 the ops it runs beside take longer
  const StepTime s3 = simulate_step_time(nano(4, 3, 2), simple_profile());
  CHECK(s3.step_s < s3.compute_total() + s3.comm_total());
  CHECK(simulate_step_time(nano(4, 3, 2), simple_profile(0.5)).compute_total() > s3.compute_total());
  // overlap_comm: the reductions run behind the backward instead of being waited for at once
  DryRunRequest off = nano(4, 2, 2), on = nano(4, 2, 2);
  off.run.engine.zero.overlap_comm = false;
  on.run.engine.zero.overlap_comm = true;
  CHECK(simulate_step_time(on, simple_profile()).exposed_total() <
        simulate_step_time(off, simple_profile()).exposed_total());
  // a measured op time wins over the class's roofline
  Recorder rec;
  DryRunRequest r = nano(1, 0);
  DeviceProfile p = simple_profile();
  const StepTime all_rates = simulate_step_time(r, p);
  const double before = all_rates.step_s;
  CHECK(all_rates.ops > 0);
  CHECK(all_rates.untimed_ops == all_rates.ops);  // no op in the profile: every one at its class's rate
  CHECK(all_rates.untimed_s == Approx(all_rates.compute_total()));
  {
    meta_backend().set_observer(&rec);
    Tensor x = meta({32, 32}), w = meta({96, 32}), b = meta({96}), y = meta({32, 96});
    meta_backend().linear(y, x, w, b);  // the qkv projection of gpt2-nano at B 2, T 16
    meta_backend().set_observer(nullptr);
  }
  p.ops[rec.ops.at(0).key] = p.op_seconds(rec.ops[0]) + 1.0;
  const StepTime timed = simulate_step_time(r, p);
  CHECK(timed.step_s == Approx(before + 2.0));  // one per layer
  CHECK(timed.untimed_ops == timed.ops - 2);    // the two timed ones are not at the class's rate
  CHECK(timed.untimed_s == Approx(timed.compute_total() - 2 * p.ops[rec.ops[0].key]));
}

TEST_CASE("a block the CPU allocator maps anew costs its first touch, at the profile's rate", "[step_time]") {
  // gpt-mini: each of its 6 layers is a unit of 12 C^2 + 13 C = 1,774,464 parameters (C 384),
  // 7,097,856 bytes in float32, above the 4 MiB from which the CPU allocator maps model states.
  const double unit_bytes = 4.0 * (12 * 384 * 384 + 13 * 384);
  REQUIRE(cpu_maps(static_cast<size_t>(unit_bytes), Category::params));
  auto mini = [](int world, int stage) {
    DryRunRequest r = nano(world, stage);
    r.model = model_config("gpt-mini");
    r.run.model = "gpt-mini";
    return r;
  };
  DeviceProfile gpu_like = simple_profile(), cpu = simple_profile();
  cpu.first_touch_bytes_per_s = 1e9;
  // stage 3: every layer's parameters are gathered into a fresh block in the forward and again in
  // the backward: at least 12 units' worth a step
  const StepTime free3 = simulate_step_time(mini(2, 3), gpu_like), paid3 = simulate_step_time(mini(2, 3), cpu);
  CHECK(free3.first_touch_s == 0);  // a profile without the rate (a GPU's caching allocator): none
  CHECK(paid3.first_touch_s >= Approx(12 * unit_bytes / 1e9));
  CHECK(paid3.step_s > free3.step_s);
  CHECK(paid3.step_s <= free3.step_s + paid3.first_touch_s + 1e-9);
  // the compute clock: the ops, the waits and the fills
  CHECK(paid3.forward_s + paid3.backward_s + paid3.optimizer_s ==
        Approx(paid3.compute_total() + paid3.exposed_total() + paid3.first_touch_s));
  // stage 0 on one rank keeps its gradients from step to step: its steady step maps nothing anew
  CHECK(simulate_step_time(mini(1, 0), cpu).first_touch_s == 0);
}

TEST_CASE("the step simulator refuses what its profile cannot cost", "[step_time]") {
  DryRunRequest r = nano(2, 3);
  for (OffloadConfig* o : {&r.run.engine.zero.offload_optimizer, &r.run.engine.zero.offload_param}) {
    o->device = OffloadDevice::nvme;
    o->nvme_path = "/tmp";
  }
  CHECK_THROWS_WITH(simulate_step_time(r, simple_profile()), Contains("has no nvme costs"));
  DeviceProfile p = simple_profile();
  p.classes[static_cast<int>(OpClass::attention)].reset();
  CHECK_THROWS_WITH(simulate_step_time(nano(1, 0), p), Contains("no rate for the op class 'attention'"));
}

TEST_CASE("a device profile's file: written, read back, and its errors name the file and the key", "[step_time]") {
  test::TempDir dir("zt_profile");
  DeviceProfile p = simple_profile(0.25);
  p.inter_node->loaded_alpha_s = 3e-3;
  p.inter_node->loaded_bytes_per_s = 5e7;
  p.source = "a test";
  p.ops["linear float32(2, 2)"] = 1.5e-6;
  p.peak_flops_per_s = 2e12;
  p.host_classes = {};
  p.host_classes[static_cast<int>(OpClass::optimizer)] = ClassRate{0, 2e8, 1e-5};
  p.sources["classes.gemm"] = "a datasheet";
  p.device_memory_bytes = int64_t{80} << 30;
  p.first_touch_bytes_per_s = 3e9;
  const std::string path = dir.file("p.json");
  std::ofstream(path) << device_profile_json(p).dump();
  const DeviceProfile q = read_device_profile(path);
  CHECK(q.name == "test");
  CHECK(q.compute_pace == 0.25);
  CHECK(q.peak_flops_per_s == 2e12);
  CHECK(q.ops.at("linear float32(2, 2)") == 1.5e-6);
  CHECK(q.inter_node->bytes_per_s == 1e8);
  CHECK(q.inter_node->hop(true).alpha_s == 3e-3);
  CHECK(q.inter_node->hop(true).bytes_per_s == 5e7);
  CHECK(q.intra_node->hop(true).bytes_per_s == 1e9);  // none measured: the idle hop
  CHECK(q.classes[static_cast<int>(OpClass::norm)]->bytes_per_s == 1e9);
  CHECK(q.host_classes[static_cast<int>(OpClass::optimizer)]->bytes_per_s == 2e8);
  CHECK(!q.host_classes[static_cast<int>(OpClass::gemm)]);
  CHECK(q.sources.at("classes.gemm") == "a datasheet");
  CHECK(q.device_memory_bytes == int64_t{80} << 30);
  CHECK(q.host_memory_bytes == 0);  // not given: unknown
  CHECK(q.first_touch_bytes_per_s == 3e9);

  auto bad = [&](const std::string& text) {
    std::ofstream(path) << text;
    return [path] { read_device_profile(path); };
  };
  CHECK_THROWS_WITH(bad(R"({"classes": {"gemmm": {"flops_per_s": 1}}})")(),
                    Contains(path) && Contains("unknown op class 'gemmm'"));
  CHECK_THROWS_WITH(bad(R"({"classes": {"gemm": {"flops_per_s": -1}}})")(),
                    Contains("classes.gemm: 'flops_per_s' is -1"));
  CHECK_THROWS_WITH(bad(R"({"classes": {"gemm": {}}})")(), Contains("neither 'flops_per_s' nor 'bytes_per_s'"));
  CHECK_THROWS_WITH(bad(R"({"links": {"inter_node": {"alpha_s": 1e-5}}})")(),
                    Contains("links.inter_node: the key 'bytes_per_s' is missing"));
  CHECK_THROWS_WITH(bad(R"({"links": {"nvlink": {}}})")(), Contains("unknown link 'nvlink'"));
  CHECK_THROWS_WITH(bad(R"({"compute_pace": 2})")(), Contains("'compute_pace' is 2 (expected a pace in (0, 1])"));
  CHECK_THROWS_WITH(bad(R"({"compute_pace": 0})")(), Contains("'compute_pace' is 0"));
  CHECK_THROWS_WITH(bad(R"({"links": {"intra_node": {"alpha_s": 0, "bytes_per_s": 1, "loaded": {"alpha_s": 0}}}})")(),
                    Contains("links.intra_node.loaded: the key 'bytes_per_s' is missing"));
  CHECK_THROWS_WITH(bad(R"({"first_touch_bytes_per_s": -2})")(), Contains("'first_touch_bytes_per_s' is -2"));
  CHECK_THROWS_WITH(bad(R"({"ops": {"x": "fast"}})")(), Contains("ops['x'] is \"fast\""));
  CHECK_THROWS_WITH(bad(R"({"host_classes": {"optimizer": {"bytes_per_s": 0}}})")(),
                    Contains("host_classes.optimizer: neither"));
  CHECK_THROWS_WITH(bad(R"({"sources": {"classes.gemm": 3}})")(), Contains("sources['classes.gemm'] is 3"));
  CHECK_THROWS_WITH(read_device_profile(dir.file("none.json")), Contains("none.json"));
}

TEST_CASE("the offloaded optimizer's ops are the host's: costed at the profile's host rates", "[step_time]") {
  // Stage 2 with the optimizer in host memory: its AdamW runs on the host tier's tensors.
  DryRunRequest r = nano(2, 2);
  r.run.engine.zero.offload_optimizer.device = OffloadDevice::cpu;
  Recorder rec;
  struct Forward final : DryRunObserver {
    Recorder& r;
    explicit Forward(Recorder& x) : r(x) {}
    void on_op(const MetaOpRecord& op) override { r.on_op(op); }
    int64_t issued(const SimulatedCollective&) override { return 0; }
    void waited(int64_t) override {}
    void phase(int, Phase) override {}
  } fwd(rec);
  r.observer = &fwd;
  dry_run(r);
  int host_adamw = 0, device_adamw = 0, host_gemm = 0, transfers = 0;
  for (const MetaOpRecord& op : rec.ops) {
    transfers += op.cls == OpClass::transfer;  // the gradients written into the host tier
    if (std::string(op.row) == "adamw_step") (op.host ? host_adamw : device_adamw)++;
    if (op.host && op.cls == OpClass::gemm) ++host_gemm;
    if (op.host) CHECK(op.key.rfind("host ", 0) == 0);
    if (op.cls == OpClass::transfer) CHECK(!op.host);
  }
  CHECK(host_adamw > 0);
  CHECK(device_adamw == 0);
  CHECK(host_gemm == 0);
  CHECK(transfers > 0);

  // A profile whose host is 10x slower than its device: the optimizer's time grows by 10x.
  const int opt = static_cast<int>(OpClass::optimizer);
  DeviceProfile p = simple_profile();
  p.host_classes[opt].reset();
  r.observer = nullptr;
  CHECK_THROWS_WITH(simulate_step_time(r, p), Contains("no host rate for the op class 'optimizer'"));
  p.host_classes[opt] = ClassRate{1e9, 1e9, 0};
  const StepTime same = simulate_step_time(r, p);
  p.host_classes[opt] = ClassRate{1e8, 1e8, 0};
  const StepTime slow = simulate_step_time(r, p);
  CHECK(same.compute_s[opt] > 0);
  CHECK(slow.compute_s[opt] == Approx(10 * same.compute_s[opt]).epsilon(1e-9));
  CHECK(slow.compute_s[static_cast<int>(OpClass::gemm)] == Approx(same.compute_s[static_cast<int>(OpClass::gemm)]));
}

TEST_CASE("a shared host is split among the ranks on the node: fewer ranks, a larger share each", "[step_time]") {
  const int opt = static_cast<int>(OpClass::optimizer), gemm = static_cast<int>(OpClass::gemm);
  DeviceProfile p = simple_profile();
  p.ranks_per_node = 8;
  p.host_memory_bytes = int64_t{8} << 30;
  p.host_shared = true;
  const DeviceProfile alone = p.for_ranks_per_node(1), crowded = p.for_ranks_per_node(16);
  CHECK(alone.ranks_per_node == 1);
  CHECK(alone.host_memory_bytes == int64_t{64} << 30);
  CHECK(alone.host_classes[opt]->bytes_per_s == Approx(8e9));
  CHECK(crowded.host_memory_bytes == int64_t{4} << 30);
  CHECK(crowded.host_classes[opt]->bytes_per_s == Approx(0.5e9));
  CHECK(alone.classes[opt]->bytes_per_s == Approx(1e9));  // the device's own rates stay
  CHECK(p.for_ranks_per_node(8).host_classes[opt]->bytes_per_s == Approx(1e9));
  DeviceProfile own = p;  // a host each rank has its own share of (zt-profile's): as it is
  own.host_shared = false;
  CHECK(own.for_ranks_per_node(1).host_classes[opt]->bytes_per_s == Approx(1e9));
  CHECK(own.for_ranks_per_node(1).host_memory_bytes == p.host_memory_bytes);

  // ZeRO-Offload on one GPU of an 8-GPU node: the simulator splits the shared host itself, so the
  // host's AdamW runs 8x faster than on an eighth of the host (the same rates, not shared).
  DryRunRequest r = nano(1, 2);
  r.run.engine.zero.offload_optimizer.device = OffloadDevice::cpu;
  const StepTime shared = simulate_step_time(r, own), whole = simulate_step_time(r, p);
  CHECK(simulate_step_time(r, alone).compute_s[opt] == Approx(whole.compute_s[opt]));  // split once
  CHECK(shared.compute_s[opt] > 0);
  CHECK(whole.compute_s[opt] == Approx(shared.compute_s[opt] / 8).epsilon(1e-9));
  CHECK(whole.compute_s[gemm] == Approx(shared.compute_s[gemm]));

  // Written and read back; a value that is not a boolean named.
  test::TempDir dir("zt_profile_shared");
  const std::string path = dir.file("p.json");
  std::ofstream(path) << device_profile_json(p).dump();
  CHECK(read_device_profile(path).host_shared);
  nlohmann::json j = device_profile_json(p);
  j["host_shared"] = "yes";
  std::ofstream(path) << j.dump();
  CHECK_THROWS_WITH(read_device_profile(path), Contains("'host_shared' is \"yes\" (expected true or false)"));
}

TEST_CASE("the bundled device profiles read, and say where every number comes from", "[step_time]") {
  for (const char* name : {"v100-dgx2", "a100-sxm-80gb", "h100-sxm", "h200-sxm"}) {
    INFO(name);
    const DeviceProfile p = read_device_profile(std::string(ZT_SOURCE_DIR) + "/configs/devices/" + name + ".json");
    CHECK(p.peak_flops_per_s > 0);
    CHECK(p.device_memory_bytes > 0);
    CHECK(p.host_memory_bytes > 0);
    CHECK(p.host_shared);  // a DGX's host, split among the ranks a job puts on it
    CHECK(p.intra_node);
    CHECK(p.inter_node);
    CHECK(p.nvme);
    for (int c = 0; c < kNumOpClasses; ++c) CHECK(p.classes[c]);
    CHECK(p.host_classes[static_cast<int>(OpClass::optimizer)]);
    CHECK(p.host_classes[static_cast<int>(OpClass::elementwise)]);
    // no class runs faster than the peak, and every number has its source
    CHECK(p.classes[static_cast<int>(OpClass::gemm)]->flops_per_s < p.peak_flops_per_s);
    CHECK(p.classes[static_cast<int>(OpClass::attention)]->flops_per_s < p.peak_flops_per_s);
    for (const char* key :
         {"peak_flops_per_s", "classes.gemm", "classes.attention", "classes.norm, loss, elementwise, optimizer",
          "classes.transfer", "host_classes", "links.intra_node", "links.inter_node", "nvme", "overhead_s",
          "compute_pace", "device_memory_bytes", "host_memory_bytes", "host_shared"})
      CHECK(p.sources.count(key) == 1);
    CHECK(!p.source.empty());
  }
}

TEST_CASE("the NVMe tier: the swap files' reads and writes on an IO queue of their own", "[step_time]") {
  // ZeRO-Infinity: the optimizer state and the parameters in swap files (the dry run's: no file).
  DryRunRequest r = nano(1, 3);
  for (OffloadConfig* o : {&r.run.engine.zero.offload_optimizer, &r.run.engine.zero.offload_param}) {
    o->device = OffloadDevice::nvme;
    o->nvme_path = "/nonexistent-dry-run-touches-nothing";
  }
  DeviceProfile p = simple_profile();
  p.nvme = NvmeCost{0, 1e9, 5e8};
  const StepTime fast = simulate_step_time(r, p);
  CHECK(fast.nvme_s[0] > 0);  // parameters and optimizer state read
  CHECK(fast.nvme_s[1] > 0);  // and written back
  // a wait on IO is in the phase it happens in: the parts still add up
  CHECK(fast.forward_s + fast.backward_s + fast.optimizer_s ==
        Approx(fast.compute_total() + fast.exposed_total() + fast.exposed_nvme_s));
  bool io_span = false;
  for (const SimSpan& s : fast.spans) io_span = io_span || s.track == TraceTrack::io;
  CHECK(io_span);
  // 100x slower disks: the reads and writes take 100x their time, and the compute clock waits on
  // them
  p.nvme = NvmeCost{0, 1e7, 5e6};
  const StepTime slow = simulate_step_time(r, p);
  CHECK(slow.step_s > fast.step_s);
  CHECK(slow.exposed_nvme_s > fast.exposed_nvme_s);
  CHECK(slow.nvme_s[0] == Approx(100 * fast.nvme_s[0]));
  CHECK(slow.nvme_s[1] == Approx(100 * fast.nvme_s[1]));
  CHECK(slow.compute_total() == Approx(fast.compute_total()));  // the ops do not change
  CHECK(slow.step_s >= slow.compute_total() + slow.exposed_nvme_s - 1e-12);
}

TEST_CASE("activation checkpoints copied to the host are timed too, and their peaks are the same every run",
          "[step_time]") {
  // cpu_checkpointing: in a real run the checkpoints go to the host tier on a worker thread of
  // their own (zero/activation_offload.h); in the dry run each copy runs at once on the caller's
  // thread, so the device's peak does not depend on how far a thread lagged.
  DryRunRequest r = nano(1, 3);
  r.run.engine.activation_checkpointing = true;
  r.run.engine.cpu_checkpointing = true;
  r.run.engine.zero.offload_optimizer.device = OffloadDevice::cpu;
  const int64_t peak = dry_run(r).device.peak_total;
  for (int i = 0; i < 5; ++i) CHECK(dry_run(r).device.peak_total == peak);
  const StepTime with = simulate_step_time(r, simple_profile());
  r.run.engine.cpu_checkpointing = false;
  const StepTime without = simulate_step_time(r, simple_profile());
  const int transfer = static_cast<int>(OpClass::transfer);
  CHECK(with.compute_s[transfer] > without.compute_s[transfer]);
  CHECK(with.forward_s + with.backward_s + with.optimizer_s == Approx(with.compute_total() + with.exposed_total()));
}
