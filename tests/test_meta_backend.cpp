// defines: the meta device's tests — its allocator counts and holds nothing, its rows check their
//          arguments, and each row's scratch equals the CPU backend's measured scratch (per op,
//          per category, to the byte; float32 and bfloat16's stand-ins), and the tensors a replay
//          makes hold values every kernel takes its general path on.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/kernels/quantize.h"  // defines: quantize_
#include "core/meta_backend.h"
#include "core/meta_op_record.h"  // defines: meta::make, meta::TensorSpec (the replay's tensors)
#include "core/tensor.h"

using namespace zt;

namespace {

// One op: `make` builds its arguments on `be` (zeros: valid ids, finite statistics) and returns the
// call; the test measures the call alone.
struct OpCase {
  std::string name;
  std::function<std::function<void()>(Backend& be, DType dt)> make;
};

struct Peaks {
  std::array<int64_t, kNumCategories> above{};  // peak during the call minus the bytes held before
  std::array<int64_t, kNumCategories> after{};  // held after the call minus before (a kept result)
};

Peaks measure(Backend& be, DType dt, const OpCase& c) {
  Allocator& a = be.allocator();
  std::function<void()> call = c.make(be, dt);
  const MemoryStats before = a.stats();
  a.reset_peaks();
  call();
  const MemoryStats s = a.stats();
  Peaks p;
  for (Category k : kAllCategories) {
    p.above[static_cast<int>(k)] = s.max(k) - before.cur(k);
    p.after[static_cast<int>(k)] = s.cur(k) - before.cur(k);
  }
  return p;
}

Tensor z(Backend& be, const Shape& s, DType dt) {
  Tensor t = Tensor::empty(s, dt, Category::activations, be.allocator());
  t.zero_();
  return t;
}

const int64_t B = 2, T = 8, Hq = 4, Hkv = 2, D = 4, C = 16, V = 32, N = B * T;

std::vector<OpCase> cases() {
  std::vector<OpCase> v;
  auto add = [&](std::string name, std::function<std::function<void()>(Backend&, DType)> make) {
    v.push_back({std::move(name), std::move(make)});
  };
  add("attention (kept for backward)", [](Backend& be, DType dt) {
    Tensor q = z(be, {B, T, Hq, D}, dt), k = z(be, {B, T, Hkv, D}, dt), vv = z(be, {B, T, Hkv, D}, dt);
    Tensor out = z(be, {B, T, Hq, D}, dt);
    return [=, &be] { Tensor saved = be.attention(out, q, k, vv, true); };
  });
  add("attention_backward (grouped query heads)", [](Backend& be, DType dt) {
    Tensor q = z(be, {B, T, Hq, D}, dt), k = z(be, {B, T, Hkv, D}, dt), vv = z(be, {B, T, Hkv, D}, dt);
    Tensor out = z(be, {B, T, Hq, D}, dt), dout = z(be, {B, T, Hq, D}, dt);
    Tensor saved = be.attention(out, q, k, vv, true);
    Tensor dq = z(be, q.shape(), dt), dk = z(be, k.shape(), dt), dv = z(be, vv.shape(), dt);
    return [=, &be] { be.attention_backward(dq, dk, dv, dout, q, k, vv, out, saved); };
  });
  add("attention_packed + backward", [](Backend& be, DType dt) {
    Tensor qkv = z(be, {B, T, (Hq + 2 * Hkv) * D}, dt), out = z(be, {B, T, Hq, D}, dt);
    Tensor dqkv = z(be, qkv.shape(), dt), dout = z(be, out.shape(), dt);
    return [=, &be] {
      Tensor saved = be.attention_packed(out, qkv, Hq, Hkv, true);
      be.attention_packed_backward(dqkv, dout, qkv, out, saved, Hq, Hkv);
    };
  });
  add("layernorm_backward (dw, db)", [](Backend& be, DType dt) {
    Tensor x = z(be, {N, C}, dt), w = z(be, {C}, dt), dout = z(be, {N, C}, dt), dx = z(be, {N, C}, dt);
    Tensor mean = z(be, {N}, be.stats_dtype(dt)), rstd = z(be, {N}, be.stats_dtype(dt));
    Tensor dw = z(be, {C}, dt), db = z(be, {C}, dt);
    return [=, &be] { be.layernorm_backward(dx, dw, db, dout, x, w, mean, rstd); };
  });
  add("layernorm_backward with dres", [](Backend& be, DType dt) {
    Tensor x = z(be, {N, C}, dt), w = z(be, {C}, dt), dout = z(be, {N, C}, dt), dx = z(be, {N, C}, dt);
    Tensor mean = z(be, {N}, be.stats_dtype(dt)), rstd = z(be, {N}, be.stats_dtype(dt));
    Tensor dw = z(be, {C}, dt), db = z(be, {C}, dt), dres = z(be, {N, C}, dt);
    return [=, &be] { be.layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, dres); };
  });
  add("rmsnorm_backward with dres", [](Backend& be, DType dt) {
    Tensor x = z(be, {N, C}, dt), w = z(be, {C}, dt), dout = z(be, {N, C}, dt), dx = z(be, {N, C}, dt);
    Tensor rstd = z(be, {N}, be.stats_dtype(dt)), dw = z(be, {C}, dt), dres = z(be, {N, C}, dt);
    return [=, &be] { be.rmsnorm_backward(dx, dw, dout, x, w, rstd, dres); };
  });
  add("cross_entropy_and_grad", [](Backend& be, DType dt) {
    Tensor logits = z(be, {N, V}, dt), loss = z(be, {}, dt), tg = z(be, {N}, DType::i32);
    return [=, &be] { be.cross_entropy_and_grad(loss, logits, tg, V - 3, N); };
  });
  add("cross_entropy + backward", [](Backend& be, DType dt) {
    Tensor logits = z(be, {N, V}, dt), loss = z(be, {}, dt), tg = z(be, {N}, DType::i32);
    Tensor lse = z(be, {N}, be.stats_dtype(dt)), dl = z(be, {N, V}, dt), one = z(be, {}, dt);
    return [=, &be] {
      be.cross_entropy(loss, lse, logits, tg, V, N);
      be.cross_entropy_backward(dl, logits, lse, tg, one, V, N);
    };
  });
  add("linear_gelu + linear_dgelu_backward", [](Backend& be, DType dt) {
    Tensor x = z(be, {N, C}, dt), w = z(be, {4 * C, C}, dt), b = z(be, {4 * C}, dt);
    Tensor pre = z(be, {N, 4 * C}, dt), y = z(be, {N, 4 * C}, dt), w2 = z(be, {C, 4 * C}, dt);
    Tensor dy = z(be, {N, C}, dt), dpre = z(be, {N, 4 * C}, dt), db = z(be, {4 * C}, dt);
    return [=, &be] {
      be.linear_gelu(y, pre, x, w, b);
      be.linear_dgelu_backward(dpre, db, dy, w2, pre, false);
    };
  });
  add("residual_layernorm, residual_rmsnorm", [](Backend& be, DType dt) {
    Tensor x = z(be, {N, C}, dt), y = z(be, {N, C}, dt), h = z(be, {N, C}, dt), out = z(be, {N, C}, dt);
    Tensor w = z(be, {C}, dt), b = z(be, {C}, dt);
    Tensor mean = z(be, {N}, be.stats_dtype(dt)), rstd = z(be, {N}, be.stats_dtype(dt));
    return [=, &be] {
      be.residual_layernorm(h, out, mean, rstd, x, y, w, b, 1e-5);
      be.residual_rmsnorm(h, out, rstd, x, y, w, 1e-5);
    };
  });
  add("linear + linear_backward", [](Backend& be, DType dt) {
    Tensor x = z(be, {N, C}, dt), w = z(be, {2 * C, C}, dt), b = z(be, {2 * C}, dt), y = z(be, {N, 2 * C}, dt);
    Tensor dx = z(be, {N, C}, dt), dw = z(be, w.shape(), dt), db = z(be, b.shape(), dt);
    return [=, &be] {
      be.linear(y, x, w, b);
      be.linear_backward(dx, dw, db, y, x, w, false);
    };
  });
  add("swiglu_packed + backward, softmax + backward", [](Backend& be, DType dt) {
    Tensor gu = z(be, {N, 2 * C}, dt), out = z(be, {N, C}, dt), dgu = z(be, gu.shape(), dt);
    Tensor s = z(be, {N, C}, dt), ds = z(be, {N, C}, dt);
    return [=, &be] {
      be.swiglu_packed(out, gu);
      be.swiglu_packed_backward(dgu, out, gu);
      be.softmax(s, out);
      be.softmax_backward(ds, out, s);
    };
  });
  add("embedding + backward, binary, sum_all", [](Backend& be, DType dt) {
    Tensor table = z(be, {V, C}, dt), ids = z(be, {N}, DType::i32), out = z(be, {N, C}, dt);
    Tensor dtable = z(be, {V, C}, dt), sum = z(be, {}, dt);
    return [=, &be] {
      be.embedding(out, ids, table);
      be.embedding_backward(dtable, out, ids);
      be.binary(BinaryOp::mul, out, out, out);
      be.sum_all(sum, out, 0.5);
    };
  });
  return v;
}

}  // namespace

TEST_CASE("meta allocator: counts by category, holds no memory, distinct addresses", "[meta]") {
  Allocator& a = backend(Device::meta()).allocator();
  const MemoryStats before = a.stats();
  {
    // 64 GiB, more than this machine's memory: only address space is taken.
    Tensor big = Tensor::empty({int64_t{16} << 30}, DType::f32, Category::optim, a);
    Tensor small = Tensor::empty({3}, DType::bf16, Category::comm, a);
    CHECK(big.device() == Device::meta());
    CHECK(a.stats().cur(Category::optim) - before.cur(Category::optim) == int64_t{64} << 30);
    CHECK(a.stats().cur(Category::comm) - before.cur(Category::comm) == 6);
    CHECK(big.raw() != small.raw());
    unsigned char resident = 1;  // the pages are not in memory (reserved, never committed)
    CHECK(mincore(big.raw(), 4096, &resident) == 0);
    CHECK((resident & 1) == 0);
  }
  CHECK(a.stats().cur(Category::optim) == before.cur(Category::optim));
  // The host tier is its own device and counter.
  Allocator& h = backend(Device::meta()).host_allocator(true);
  CHECK(h.device() == Device::meta());  // the host tier is the device's own memory, as on the CPU
  CHECK(&h != &a);
  // A cap throws as the real allocator's does, naming the category.
  a.set_limit(a.stats().total() + 100);
  CHECK_THROWS_WITH(Tensor::empty({1000}, DType::f32, Category::grads, a), Catch::Contains("'grads'"));
  a.set_limit(0);
}

TEST_CASE("meta rows check their arguments and answer without computing", "[meta]") {
  Backend& m = backend(Device::meta());
  Tensor x = Tensor::empty({4, 8}, DType::f32, Category::activations, m.allocator());
  Tensor host = Tensor::zeros({4, 8}, DType::f32, Category::activations, cpu_allocator());
  // a cpu tensor where the row wants the device: refused by name, before anything is touched
  CHECK_THROWS_WITH(m.gelu(x, host), Catch::Contains("gelu") && Catch::Contains("not on a meta device"));
  CHECK_THROWS_WITH(m.gelu(x, x.transpose(0, 1)), Catch::Contains("not contiguous"));
  CHECK(m.all_finite(x));
  CHECK(m.sum_of_squares(x) == 0.0);
  // into real host memory: zeros, the documented answer
  Tensor filled = Tensor::full({4, 8}, 3.0);  // the default device: cpu
  filled.copy_(x);
  CHECK(filled.to_vector() == std::vector<double>(32, 0.0));
  // device <-> host tier copies go through the meta backend
  Tensor h = Tensor::empty({4, 8}, DType::f32, Category::optim, m.host_allocator(false));
  h.copy_(x);
  x.copy_(h);
  CHECK(x.to_vector() == std::vector<double>(32, 0.0));
}

TEST_CASE("meta rows allocate exactly what the CPU backend's kernels allocate", "[meta]") {
  for (DType dt : {DType::f32, DType::bf16})
    for (const OpCase& c : cases()) {
      INFO(c.name << ", " << dtype_name(dt));
      const Peaks cpu = measure(backend(Device::cpu()), dt, c);
      const Peaks meta = measure(backend(Device::meta()), dt, c);
      for (Category k : kAllCategories) {
        INFO(category_name(k));
        CHECK(meta.above[static_cast<int>(k)] == cpu.above[static_cast<int>(k)]);
        CHECK(meta.after[static_cast<int>(k)] == cpu.after[static_cast<int>(k)]);
      }
    }
}

TEST_CASE("the scratch rules are exercised: some rows allocate inside the op", "[meta]") {
  // So that the equality above is not an equality of zeros.
  for (const OpCase& c : cases()) {
    if (c.name.rfind("attention_backward", 0) != 0 && c.name != "layernorm_backward with dres") continue;
    const Peaks p = measure(backend(Device::meta()), DType::f32, c);
    INFO(c.name);
    CHECK(p.above[static_cast<int>(Category::workspace)] + p.above[static_cast<int>(Category::activations)] > 0);
  }
}

TEST_CASE("the replay fills floating-point tensors with 0.5 and integer ones with 0", "[meta]") {
  // A kernel whose work depends on its data must take its general path when zt-profile times it: a
  // block of zeros quantizes without dividing or rounding (scale 0), at a quarter of its real cost.
  Backend& be = backend(Device::cpu());
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    const Tensor x = meta::make(be, meta::TensorSpec{true, {3, 5}, t}, nullptr);
    for (double v : x.to_vector()) CHECK(v == 0.5);
  }
  for (DType t : {DType::i32, DType::i64, DType::u8}) {
    const Tensor x = meta::make(be, meta::TensorSpec{true, {7}, t}, nullptr);
    for (double v : x.to_vector()) CHECK(v == 0);
  }
  CHECK(!meta::make(be, meta::TensorSpec{}, nullptr).defined());
}

TEST_CASE("the quantization's rows are replayed on values like a step's, in buffers of their own", "[meta]") {
  // A block of 0.5s is one code: the replay must spread its codes over the range as a weight's or
  // a gradient's block does, or it times rounding on one path only.
  Backend& be = backend(Device::cpu());
  const int64_t n = 4096, block = 64;
  const Tensor x = meta::make_varied(be, {n}, DType::f32, false);
  const std::vector<double> v = x.to_vector();
  double sum = 0, sq = 0;
  for (double e : v) sum += e, sq += e * e;
  CHECK(std::abs(sum / n) < 0.1);  // N(0, 1) draws
  CHECK(std::sqrt(sq / n) == Approx(1).epsilon(0.1));
  CHECK(meta::make_varied(be, {n}, DType::f32, false).to_vector() == v);  // the same draws each time
  Tensor codes = Tensor::empty({n / 2}, DType::u8, Category::workspace);
  Tensor scales = Tensor::empty({n / block}, DType::f32, Category::workspace);
  quantize_(codes, scales, x, 4, block, QuantScheme::deepspeed);
  std::set<int> seen;
  for (double c : codes.to_vector()) seen.insert(static_cast<int>(c) & 0xf), seen.insert(static_cast<int>(c) >> 4);
  CHECK(seen.size() == 16);                                                                         // every 4-bit code
  CHECK(meta::make_varied(be, {3}, DType::i32, false).to_vector() == std::vector<double>(3, 0.0));  // integers: 0

  // The recorded row keeps buffers of its own under a shared replay.
  struct Recorder final : MetaOpObserver {
    std::vector<MetaOpRecord> ops;
    void on_op(const MetaOpRecord& op) override { ops.push_back(op); }
  } rec;
  MetaBackend& mb = meta_backend();
  auto meta_tensor = [&](Shape s, DType t) { return Tensor::empty(s, t, Category::workspace, mb.allocator()); };
  const Tensor mx = meta_tensor({n}, DType::f32), mc = meta_tensor({n / 2}, DType::u8),
               ms = meta_tensor({n / block}, DType::f32);
  mb.set_observer(&rec);
  mb.quantize(mc, ms, mx, 4, block, QuantScheme::deepspeed);
  mb.set_observer(nullptr);
  REQUIRE(rec.ops.size() == 1);
  ReplayBuffers shared;
  rec.ops[0].prepare(be, &shared)();
  CHECK(shared.by_allocation.empty());
}
