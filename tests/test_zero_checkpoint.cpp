// defines: 10 Catch2 test cases tagged [zero_checkpoint], [.zt_ckpt_fixture], [safetensors]; helpers: Hub,
//          ThreadGroup, run_ranks, require_ok, Toy, slurp and 5 more
//
// ZeRO sharded checkpoints (zero/checkpoint.h) and safetensors (formats/safetensors.h).
// Several ranks run in one process as threads (ThreadGroup below), so saving on N ranks and
// loading on N' ranks (resharding) is tested without mpirun; tests/mpi/test_checkpoint.cpp runs
// the same paths under real MPI ranks.
#include <algorithm>
#include <barrier>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/rng.h"
#include "models/gpt2.h"
#include "models/init.h"
#include "formats/llmc_checkpoint.h"
#include "formats/safetensors.h"
#include "temp_dir.h"
#include "tests/bitwise.h"
#include "zero/checkpoint.h"
#include "zero/checkpoint_source.h"

using namespace zt;
namespace fs = std::filesystem;

namespace {

// ---- N ranks as N threads: every collective meets at a barrier, then reads the others' buffers.
struct Hub {
  explicit Hub(int n) : bar(n), slot(n) {}
  std::barrier<> bar;
  std::vector<Tensor> slot;
};

class ThreadGroup final : public ProcessGroup {
 public:
  ThreadGroup(Hub& h, int r)
      : h_(h), r_(r), topo_(topology_of_nodes(std::vector<int>(h.slot.size(), 0), r, "threads of one process")) {}
  int rank() const override { return r_; }
  int size() const override { return static_cast<int>(h_.slot.size()); }
  std::string backend() const override { return "threads"; }
  const Topology& topology() const override { return topo_; }
  [[noreturn]] void abort(const std::string& message, int) override { throw Error(message); }

 protected:
  WorkPtr do_all_reduce(const Tensor& x) override {
    std::vector<double> sum(static_cast<size_t>(x.numel()), 0.0);
    meet(x, [&] {
      for (const Tensor& s : h_.slot) {
        std::vector<double> v = s.to_vector();
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
      }
    });
    Tensor(x).copy_(Tensor::from_vector(sum, x.shape(), x.dtype()));
    return completed_work();
  }
  WorkPtr do_reduce_scatter(const Tensor& in, const Tensor& out) override {
    const int64_t S = out.numel();
    std::vector<double> sum(static_cast<size_t>(S), 0.0);
    meet(in, [&] {
      for (const Tensor& s : h_.slot) {
        std::vector<double> v = s.flat_view(r_ * S, {S}).to_vector();
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
      }
    });
    Tensor(out).copy_(Tensor::from_vector(sum, out.shape(), out.dtype()));
    return completed_work();
  }
  WorkPtr do_all_gather(const Tensor& in, const Tensor& out) override {
    meet(in, [&] {
      for (int q = 0; q < size(); ++q) out.flat_view(q * in.numel(), {in.numel()}).copy_(h_.slot[q]);
    });
    return completed_work();
  }
  WorkPtr do_broadcast(const Tensor& x, int root) override {
    Tensor copy = Tensor::empty(x.shape(), x.dtype());
    meet(x, [&] { copy.copy_(h_.slot[root]); });
    Tensor(x).copy_(copy);
    return completed_work();
  }
  WorkPtr do_barrier() override {
    h_.bar.arrive_and_wait();
    return completed_work();
  }
  WorkPtr do_all_to_all(const Tensor& in, const Tensor& out) override {
    const int64_t S = in.numel() / size();
    meet(in, [&] {
      for (int q = 0; q < size(); ++q) out.flat_view(q * S, {S}).copy_(h_.slot[q].flat_view(r_ * S, {S}));
    });
    return completed_work();
  }
  // These tests never split: the thread ranks share one hub, with no sub-hubs to give.
  std::unique_ptr<ProcessGroup> do_split(int, const std::vector<int>&) override {
    throw Error("ThreadGroup (a test helper): split is not supported");
  }

 private:
  // Publish `mine`, run `read` while every rank's buffer is published and unchanged, meet again.
  template <class F>
  void meet(const Tensor& mine, F&& read) {
    h_.slot[r_] = mine;
    h_.bar.arrive_and_wait();
    read();
    h_.bar.arrive_and_wait();
  }
  Hub& h_;
  int r_;
  Topology topo_;
};

// Runs fn(group) on N thread ranks; returns each rank's error message ("" when it succeeded).
std::vector<std::string> run_ranks(int N, const std::function<void(ProcessGroup&)>& fn) {
  Hub hub(N);
  std::vector<std::string> err(N);
  std::vector<std::thread> ts;
  for (int r = 0; r < N; ++r)
    ts.emplace_back([&, r] {
      ThreadGroup g(hub, r);
      try {
        fn(g);
      } catch (const std::exception& e) {
        err[r] = e.what();
        if (err[r].empty()) err[r] = "(empty error)";
      }
    });
  for (std::thread& t : ts) t.join();
  return err;
}
void require_ok(const std::vector<std::string>& errs) {
  for (size_t r = 0; r < errs.size(); ++r) {
    INFO("rank " << r << ": " << errs[r]);
    REQUIRE(errs[r].empty());
  }
}

// ---- a toy model: units with full flat values for three tensors, sharded for any N.
const std::vector<std::string> kTensors = {"param", "exp_avg", "exp_avg_sq"};
struct Toy {
  std::vector<std::pair<std::string, int64_t>> units;  // name, numel
  std::vector<std::vector<std::vector<float>>> full;   // [unit][tensor][element]
  Toy(std::vector<std::pair<std::string, int64_t>> us, uint64_t seed) : units(std::move(us)) {
    Rng rng(seed);
    for (const auto& [name, n] : units) {
      full.emplace_back();
      for (size_t t = 0; t < kTensors.size(); ++t) {
        full.back().emplace_back(static_cast<size_t>(n));
        for (float& v : full.back().back()) v = rng.normal();
      }
    }
  }
  static int64_t padded(int64_t numel, int N) { return (numel + 16 * N - 1) / (16 * N) * (16 * N); }
  // Rank r of N's shards; zeros=true gives the same layout filled with zeros (a load target).
  std::vector<CheckpointShard> shards(int N, int r, bool zeros = false) const {
    std::vector<CheckpointShard> out;
    for (size_t u = 0; u < units.size(); ++u) {
      const int64_t P = padded(units[u].second, N), S = P / N;
      CheckpointShard s{units[u].first, units[u].second, P, {}, {}};
      for (size_t t = 0; t < kTensors.size(); ++t) {
        Tensor x = Tensor::zeros({S}, DType::f32, Category::optim);
        if (!zeros)
          for (int64_t i = 0; i < S; ++i)
            if (r * S + i < units[u].second) x.data<float>()[i] = full[u][t][static_cast<size_t>(r * S + i)];
        s.tensors.emplace_back(kTensors[t], x);
      }
      out.push_back(std::move(s));
    }
    return out;
  }
};
using test::bitwise_equal;
std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

const Toy kToy({{"embed", 1000}, {"h.0", 37}, {"head", 5}}, 7);

}  // namespace

TEST_CASE("zero checkpoint: one rank round trip is bitwise, latest follows the saves", "[zero_checkpoint]") {
  test::TempDir tmp("zckpt_single");
  SingleProcessGroup g;
  const std::string dir = tmp.file("ck");
  const std::string step_dir = save_sharded_checkpoint(g, dir, 100, {{"model", "toy"}, {"rng", "123"}}, kToy.shards(1, 0));
  CHECK(fs::path(step_dir).filename() == "step_00000100");
  CHECK(slurp(fs::path(dir) / "latest") == "step_00000100\n");
  const nlohmann::json meta = nlohmann::json::parse(slurp(fs::path(step_dir) / "meta.json"));
  CHECK(meta["format"] == "zerotensor-zero-checkpoint");
  CHECK(meta["world_size"] == 1);
  CHECK(meta["step"] == 100);
  CHECK(meta["tensors"] == nlohmann::json(kTensors));
  CHECK(meta["dtype"]["exp_avg"] == "float32");
  CHECK(meta["units"][1]["name"] == "h.0");
  CHECK(meta["units"][1]["numel"] == 37);
  CHECK(meta["units"][1]["padded_numel"] == 48);
  // 3 tensors x (1008 + 48 + 16) float32 elements
  CHECK(meta["files"][0]["bytes"] == 3 * (1008 + 48 + 16) * 4);
  CHECK(fs::file_size(fs::path(step_dir) / "rank_00000.bin") == 3 * (1008 + 48 + 16) * 4);

  std::vector<CheckpointShard> back = kToy.shards(1, 0, true);
  const nlohmann::json m2 = load_sharded_checkpoint(g, dir, back);
  CHECK(m2["rng"] == "123");
  CHECK(bitwise_equal(back, kToy.shards(1, 0)));

  // A later step becomes `latest`; the earlier one stays loadable by its directory.
  const Toy other({{"embed", 1000}, {"h.0", 37}, {"head", 5}}, 8);
  save_sharded_checkpoint(g, dir, 200, {}, other.shards(1, 0));
  CHECK(slurp(fs::path(dir) / "latest") == "step_00000200\n");
  load_sharded_checkpoint(g, dir, back);
  CHECK(bitwise_equal(back, other.shards(1, 0)));
  load_sharded_checkpoint(g, step_dir, back);
  CHECK(bitwise_equal(back, kToy.shards(1, 0)));

  // Saving over the step `latest` names swaps the directories atomically.
  save_sharded_checkpoint(g, dir, 200, {}, kToy.shards(1, 0));
  CHECK(load_sharded_checkpoint(g, dir, back)["step"] == 200);
  CHECK(bitwise_equal(back, kToy.shards(1, 0)));
  for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().extension() != ".tmp");
}

TEST_CASE("zero checkpoint: resharding between world sizes 1 to 4", "[zero_checkpoint]") {
  test::TempDir tmp("zckpt_reshard");
  for (int n_save : {4, 1, 3}) {
    const std::string dir = tmp.file("ck" + std::to_string(n_save));
    require_ok(run_ranks(n_save, [&](ProcessGroup& g) {
      save_sharded_checkpoint(g, dir, 5, {{"saved_by", n_save}}, kToy.shards(n_save, g.rank()));
    }));
    CHECK(nlohmann::json::parse(slurp(fs::path(dir) / "step_00000005" / "meta.json"))["files"].size() ==
          static_cast<size_t>(n_save));
    for (int n_load : {1, 2, 3, 4}) {
      std::vector<int> equal(n_load, 0);
      require_ok(run_ranks(n_load, [&](ProcessGroup& g) {
        std::vector<CheckpointShard> back = kToy.shards(n_load, g.rank(), true);
        // Garbage where padding must come back as zero.
        for (CheckpointShard& s : back)
          for (auto& [name, t] : s.tensors) t.fill_(42.0);
        load_sharded_checkpoint(g, dir, back);
        equal[g.rank()] = bitwise_equal(back, kToy.shards(n_load, g.rank()));
      }));
      for (int r = 0; r < n_load; ++r) {
        INFO("saved on " << n_save << " ranks, loaded on " << n_load << ", rank " << r);
        CHECK(equal[r] == 1);
      }
    }
  }
}

namespace {
// One unit's full tensor of a checkpoint, float32, read through the streaming source.
Tensor unit_values(CheckpointParams& src, int u) {
  Tensor flat = Tensor::empty({src.unit_numel(u)}, DType::f32, Category::workspace, cpu_allocator());
  src.fill(u, 0, flat);
  return flat;
}
const nlohmann::json& unit_params(const CheckpointParams& src, int u) {
  return src.meta().meta.at("units").at(u).at("params");
}
}  // namespace

TEST_CASE("zero checkpoint: CheckpointParams reads every unit in full", "[zero_checkpoint]") {
  test::TempDir tmp("zckpt_consolidate");
  const std::string dir = tmp.file("ck");
  nlohmann::json caller = {{"units", nlohmann::json::array()}};
  for (const auto& [name, n] : kToy.units)
    caller["units"].push_back({{"name", name}, {"numel", n}, {"params", {{{"name", "w"}, {"shape", {n}}, {"offset", 0}}}}});
  require_ok(run_ranks(3, [&](ProcessGroup& g) { save_sharded_checkpoint(g, dir, 9, caller, kToy.shards(3, g.rank())); }));
  for (const std::string tensor : {"param", "exp_avg_sq"}) {
    const size_t t = tensor == "param" ? 0 : 2;
    CheckpointParams src(dir, tensor);
    REQUIRE(src.units() == static_cast<int>(kToy.units.size()));
    for (int u = 0; u < src.units(); ++u) {
      CHECK(src.unit_name(u) == kToy.units[u].first);
      const Tensor flat = unit_values(src, u);
      REQUIRE(flat.numel() == kToy.units[u].second);
      CHECK(std::memcmp(flat.raw(), kToy.full[u][t].data(), flat.nbytes()) == 0);
      CHECK(unit_params(src, u)[0]["shape"][0] == kToy.units[u].second);
    }
  }
  CHECK_THROWS_WITH(CheckpointParams(dir, "momentum"), Catch::Contains("has no tensor 'momentum'"));
  // A caller layout that does not match the shards is refused before anything is published.
  caller["units"][1]["numel"] = 36;
  std::vector<std::string> errs = run_ranks(3, [&](ProcessGroup& g) {
    save_sharded_checkpoint(g, dir, 10, caller, kToy.shards(3, g.rank()));
  });
  CHECK_THAT(errs[0], Catch::Contains("units[1] is h.0 with 36 parameters"));
  CHECK_THAT(errs[2], Catch::Contains("failed on rank 0: ") && Catch::Contains("units[1] is h.0 with 36 parameters"));
  CHECK(slurp(fs::path(dir) / "latest") == "step_00000009\n");
}

TEST_CASE("zero checkpoint: damaged or foreign checkpoints are refused naming the file", "[zero_checkpoint]") {
  test::TempDir tmp("zckpt_damage");
  const std::string dir = tmp.file("ck");
  require_ok(run_ranks(2, [&](ProcessGroup& g) { save_sharded_checkpoint(g, dir, 3, {}, kToy.shards(2, g.rank())); }));
  const fs::path step = fs::path(dir) / "step_00000003", f1 = step / "rank_00001.bin";
  const std::string good = slurp(f1);
  SingleProcessGroup one;
  std::vector<CheckpointShard> back = kToy.shards(1, 0, true);
  load_sharded_checkpoint(one, dir, back);  // both files
  CHECK(bitwise_equal(back, kToy.shards(1, 0)));

  std::string bad = good;
  bad[bad.size() / 2] ^= 0x10;
  spit(f1, bad);
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, back),
                    Catch::Contains("rank_00001.bin") && Catch::Contains("is corrupted: FNV-1a 64 checksum"));
  // Two ranks: rank 1 finds its file corrupted, rank 0 (whose file is fine) fails with it.
  std::vector<std::string> errs = run_ranks(2, [&](ProcessGroup& g) {
    std::vector<CheckpointShard> b = kToy.shards(2, g.rank(), true);
    load_sharded_checkpoint(g, dir, b);
  });
  CHECK_THAT(errs[1], Catch::Contains("corrupted"));
  CHECK_THAT(errs[0], Catch::Contains("failed on rank 1: ") && Catch::Contains("rank_00001.bin") && Catch::Contains("corrupted"));

  spit(f1, good.substr(0, good.size() - 4));
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, back),
                    Catch::Contains("rank_00001.bin") && Catch::Contains("truncated"));
  fs::remove(f1);
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, back),
                    Catch::Contains("rank_00001.bin") && Catch::Contains("is missing"));
  spit(f1, good);
  load_sharded_checkpoint(one, step.string(), back);

  // Another model: a unit of another size, or another number of units.
  const Toy smaller({{"embed", 999}, {"h.0", 37}, {"head", 5}}, 7);
  std::vector<CheckpointShard> s = smaller.shards(1, 0, true);
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, s),
                    Catch::Contains("holds unit 'embed' with 1000 parameters, the model has 'embed' with 999"));
  const Toy fewer({{"embed", 1000}, {"h.0", 37}}, 7);
  s = fewer.shards(1, 0, true);
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, s), Catch::Contains("holds 3 units, the model has 2"));
  // A tensor the checkpoint lacks, or holds in another dtype.
  s = kToy.shards(1, 0, true);
  s[0].tensors[1].first = "momentum";
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, s),
                    Catch::Contains("has no tensor 'momentum' (it holds: param, exp_avg, exp_avg_sq)"));
  s = kToy.shards(1, 0, true);
  s[0].tensors[2].second = Tensor::zeros({1008}, DType::f64);
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, s), Catch::Contains("holds tensor 'exp_avg_sq' as float32"));

  // Not a checkpoint; another format; a meta.json without a field.
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, tmp.file("nothing"), back), Catch::Contains("no meta.json"));
  const std::string meta_text = slurp(step / "meta.json");
  nlohmann::json meta = nlohmann::json::parse(meta_text);
  meta["format"] = "zerotensor-checkpoint";
  spit(step / "meta.json", meta.dump());
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, back), Catch::Contains("has format \"zerotensor-checkpoint\", expected \"zerotensor-zero-checkpoint\""));
  meta = nlohmann::json::parse(meta_text);
  meta.erase("dtype");
  spit(step / "meta.json", meta.dump());
  CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, back), Catch::Contains("lacks or mistypes a field"));
  // fuzz_ckpt_meta's finding (UBSan: a float out of int's range converted by get<int>): every
  // integer of meta.json is checked as an integer first.
  for (const char* key : {"world_size", "numel"}) {
    meta = nlohmann::json::parse(meta_text);
    (std::string(key) == "world_size" ? meta["world_size"] : meta["units"][0]["numel"]) = 1.66667e46;
    spit(step / "meta.json", meta.dump());
    CHECK_THROWS_WITH(load_sharded_checkpoint(one, dir, back),
                      Catch::Contains(std::string(key) + " = 1.66667e+46 is invalid: expected an integer"));
  }
}

TEST_CASE("zero checkpoint: an interrupted or failed save leaves the previous one loadable", "[zero_checkpoint]") {
  test::TempDir tmp("zckpt_crash");
  const std::string dir = tmp.file("ck");
  SingleProcessGroup one;
  save_sharded_checkpoint(one, dir, 1, {}, kToy.shards(1, 0));
  // What kill -9 leaves at various points: a half-written step_2.tmp/, a latest.tmp, or a
  // complete step_3/ that `latest` does not name yet.
  fs::create_directories(fs::path(dir) / "step_00000002.tmp");
  spit(fs::path(dir) / "step_00000002.tmp" / "rank_00000.bin", "half");
  spit(fs::path(dir) / "latest.tmp", "step_00000002\n");
  fs::copy(fs::path(dir) / "step_00000001", fs::path(dir) / "step_00000003");
  std::vector<CheckpointShard> back = kToy.shards(1, 0, true);
  CHECK(load_sharded_checkpoint(one, dir, back)["step"] == 1);
  CHECK(bitwise_equal(back, kToy.shards(1, 0)));

  // A rank that cannot write its shards makes every rank fail, and `latest` stays.
  std::vector<std::string> errs = run_ranks(2, [&](ProcessGroup& g) {
    std::vector<CheckpointShard> s = kToy.shards(2, g.rank());
    if (g.rank() == 1) s[1].tensors[0].second = Tensor::zeros({3});
    save_sharded_checkpoint(g, dir, 2, {}, s);
  });
  CHECK_THAT(errs[1], Catch::Contains("unit 'h.0' tensor 'param' has"));
  CHECK_THAT(errs[0], Catch::Contains("failed on rank 1: ") && Catch::Contains("unit 'h.0' tensor 'param' has"));
  CHECK(slurp(fs::path(dir) / "latest") == "step_00000001\n");
  CHECK(load_sharded_checkpoint(one, dir, back)["step"] == 1);

  // The next save cleans the leftovers and moves on.
  save_sharded_checkpoint(one, dir, 2, {}, kToy.shards(1, 0));
  CHECK(slurp(fs::path(dir) / "latest") == "step_00000002\n");
  CHECK(!fs::exists(fs::path(dir) / "step_00000002.tmp"));
  CHECK(load_sharded_checkpoint(one, dir, back)["step"] == 2);
}

namespace {
// A gpt2-nano model's shards on rank r of N (its flats; exp_avg = param / 2 as a stand-in).
std::vector<CheckpointShard> model_shards(Model& m, int N, int r) {
  std::vector<CheckpointShard> out;
  for (Unit* u : m.units()) {
    const ParamSet& ps = u->params();
    const int64_t S = ps.padded_numel() / N;
    Tensor p = ps.flat().flat_view(r * S, {S}), half = p.clone();
    half.copy_(Tensor::from_vector([&] {
      std::vector<double> v = p.to_vector();
      for (double& x : v) x /= 2;
      return v;
    }(), {S}));
    out.push_back({ps.unit_name(), ps.numel(), ps.padded_numel(), {{"param", p}, {"exp_avg", half}}, {}});
  }
  return out;
}
// Saves a gpt2-nano (or llama-nano) model on N thread ranks; returns the model (world size N).
std::unique_ptr<Model> save_model(const std::string& name, const std::string& dir, int N) {
  ModelOptions opt;
  opt.world_size = N;
  opt.alignment = 16;
  std::unique_ptr<Model> m = make_model(model_config(name), opt);
  Rng rng(11);
  init_model(*m, rng);
  const nlohmann::json caller = {{"model", model_config(name)}, {"config", {{"zero_optimization", {{"stage", 2}}}}},
                                 {"units", units_meta(*m)}};
  require_ok(run_ranks(N, [&](ProcessGroup& g) { save_sharded_checkpoint(g, dir, 20, caller, model_shards(*m, N, g.rank())); }));
  return m;
}
}  // namespace

TEST_CASE("zero checkpoint: a GPT-2 model consolidates with its layout", "[zero_checkpoint]") {
  test::TempDir tmp("zckpt_gpt2");
  std::unique_ptr<Model> m = save_model("gpt2-nano", tmp.file("ck"), 2);
  CheckpointParams src(tmp.file("ck"));
  std::vector<Unit*> units = m->units();
  REQUIRE(src.units() == static_cast<int>(units.size()));
  for (int i = 0; i < src.units(); ++i) {
    const ParamSet& ps = units[i]->params();
    CHECK(src.unit_name(i) == ps.unit_name());
    REQUIRE(src.unit_numel(i) == ps.numel());
    const Tensor flat = unit_values(src, i);
    CHECK(std::memcmp(flat.raw(), ps.flat().raw(), static_cast<size_t>(ps.numel()) * 4) == 0);
    const nlohmann::json& params = unit_params(src, i);
    REQUIRE(params.size() == ps.infos().size());
    CHECK(params[0]["name"] == ps.infos()[0].name);
    CHECK(params[0]["shape"] == nlohmann::json(ps.infos()[0].shape));
  }
}

// Not run by default: writes the files tests/cli/test_zt_ckpt.sh checks zt-ckpt against into
// $ZT_CKPT_FIXTURE_DIR: ck/ (gpt2-nano on 2 ranks), llama/ (llama-nano on 3 ranks), and the
// llm.c files of the gpt2 model written directly (ref_f32.bin, ref_bf16.bin).
TEST_CASE("zero checkpoint: CLI fixture", "[.zt_ckpt_fixture]") {
  const char* out = std::getenv("ZT_CKPT_FIXTURE_DIR");
  REQUIRE(out != nullptr);
  const fs::path dir(out);
  std::unique_ptr<Model> m = save_model("gpt2-nano", (dir / "ck").string(), 2);
  save_llmc_checkpoint((dir / "ref_f32.bin").string(), dynamic_cast<GPT2&>(*m), kLlmcVersionF32);
  save_llmc_checkpoint((dir / "ref_bf16.bin").string(), dynamic_cast<GPT2&>(*m), kLlmcVersionBF16);
  save_model("llama-nano", (dir / "llama").string(), 3);
}

// ---- safetensors ----

TEST_CASE("safetensors: round trip keeps names, shapes, dtypes, bytes and metadata", "[safetensors]") {
  test::TempDir tmp("safetensors_rt");
  Tensor a = Tensor::from_vector({1, -2, 3.5, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector({0.1, 0.2, 0.3, 0.4}, {4}).to(DType::bf16);
  Tensor c = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {3, 2}).transpose(0, 1);  // not contiguous
  save_safetensors(tmp.file("x.safetensors"), {{"h.0.w", a}, {"b", b}, {"c", c}}, {{"step", "7"}});
  const std::string bytes = slurp(tmp.file("x.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  const nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(h["h.0.w"]["dtype"] == "F32");
  CHECK(h["h.0.w"]["data_offsets"] == nlohmann::json({0, 24}));
  CHECK(h["b"]["dtype"] == "BF16");
  CHECK(h["b"]["data_offsets"] == nlohmann::json({24, 32}));
  CHECK(h["c"]["shape"] == nlohmann::json({2, 3}));
  CHECK(h["__metadata__"]["step"] == "7");
  CHECK(bytes.size() == 8 + n + 24 + 8 + 24);

  SafetensorsFile f = load_safetensors(tmp.file("x.safetensors"));
  CHECK(f.metadata.at("step") == "7");
  CHECK(f.get("h.0.w").to_vector() == a.to_vector());
  CHECK(f.get("b").dtype() == DType::bf16);
  CHECK(std::memcmp(f.get("b").raw(), b.raw(), 8) == 0);
  CHECK(f.get("c").to_vector() == std::vector<double>{1, 3, 5, 2, 4, 6});
  CHECK_THROWS_WITH(f.get("nope"), Catch::Contains("has no tensor 'nope'"));
  CHECK_THROWS_WITH(save_safetensors(tmp.file("y"), {{"a", a}, {"a", a}}), Catch::Contains("'a' is empty, reserved or repeated"));
}

TEST_CASE("safetensors: malformed files are errors naming the file and the problem", "[safetensors]") {
  test::TempDir tmp("safetensors_bad");
  const std::string p = tmp.file("bad.safetensors");
  auto write = [&](const std::string& header, size_t data_bytes) {
    std::string s(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(s.data(), &n, 8);
    spit(p, s + header + std::string(data_bytes, '\0'));
  };
  spit(p, "abc");
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains(p) && Catch::Contains("less than the 8-byte header length"));
  write(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8);
  CHECK(load_safetensors(p).get("a").numel() == 2);
  spit(p, std::string("\xff\xff\0\0\0\0\0\0{}", 10));
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("runs past the end of the file"));
  write("{not json", 0);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains(p) && Catch::Contains("not valid JSON"));
  write("{\"a\": " + std::string(50000, '[') + std::string(50000, ']') + "}", 0);  // bounded nesting
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains(p) && Catch::Contains("nests JSON deeper than 64 levels"));
  // a shape whose byte count wraps 64 bits, and a dimension past int64: refused by name
  write(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", 8);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("tensor 'a' has shape") && Catch::Contains("overflows"));
  write(R"({"a": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 8]}})", 8);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("tensor 'a' has shape") && Catch::Contains("[0, 2^63)"));
  write(R"({"a": {"dtype": "Q8", "shape": [2], "data_offsets": [0, 2]}})", 2);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("tensor 'a'") && Catch::Contains("unknown dtype 'Q8'"));
  write(R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 8]}})", 8);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("tensor 'a'") && Catch::Contains("needs 24 bytes"));
  write(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("past the end of the file's 4 data bytes"));
  write(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("starts at data byte 4, expected 0 (a hole"));
  write(R"({"a": {"dtype": "F32", "shape": [1]}})", 4);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("needs \"dtype\""));
  write(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "__metadata__": {"k": 1}})", 4);
  CHECK_THROWS_WITH(load_safetensors(p), Catch::Contains("__metadata__ value 'k' is not a string"));
}

TEST_CASE("zero checkpoint: prune keeps the newest, latest's and saves in progress", "[zero_checkpoint]") {
  test::TempDir tmp("zckpt_prune");
  const fs::path root = tmp.file("ck");
  for (const char* d : {"step_00000001", "step_00000002", "step_00000003", "step_00000010", "step_00000004",
                        "step_00000011.tmp", "notes"})
    fs::create_directories(root / d);
  std::ofstream(root / "latest") << "step_00000002\n";
  // Newest two by step number (10 and 4, not by name order), latest's 2; 11.tmp and notes untouched.
  CHECK(prune_checkpoints(root.string(), 2) == std::vector<std::string>{"step_00000001", "step_00000003"});
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(root)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"latest", "notes", "step_00000002", "step_00000004", "step_00000010",
                                         "step_00000011.tmp"});
  CHECK(prune_checkpoints(root.string(), 5).empty());
  CHECK_THROWS_WITH(prune_checkpoints(root.string(), 0), Catch::Contains("keep_last = 0 is invalid"));
}
