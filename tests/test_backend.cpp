// defines: 8 Catch2 test cases tagged [backend]; helpers: fake_cuda
//
// core/backend.h, core/device.h: devices and their text form, the registry's errors, the default
// device, Tensor::to(Device), and the ops' device and dtype checks (a borrowed tensor that claims
// to be on cuda:0 stands in for a GPU tensor: the checks must fire before any data access).
// Every CpuBackend entry against a float64 reference: tests/test_backend_cpu.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "autograd/ops.h"
#include "core/backend.h"
#include "core/cpu_backend.h"
#include "core/kernels/accumulate.h"
#include "core/kernels/cast.h"
#include "tests/backend_test_util.h"

using namespace zt;
using namespace zt::test;

namespace {

// A tensor that says it is on cuda:0, with no memory behind it: any data access throws ("released
// storage"), so an error about devices proves the check came first.
Tensor fake_cuda(const Shape& s, DType dt = DType::f32) { return Tensor::borrow(nullptr, s, dt, Device::cuda(0)); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// devices, registry, default device

TEST_CASE("Device and parse_device", "[backend]") {
  CHECK(parse_device("cpu") == Device::cpu());
  CHECK(parse_device("cuda") == Device::cuda(0));
  CHECK(parse_device("cuda:3") == Device::cuda(3));
  CHECK(parse_device("cuda:0").is_cuda());
  CHECK(Device::cpu().str() == "cpu");
  CHECK(Device::cuda(2).str() == "cuda:2");
  CHECK(parse_device(Device::cuda(7).str()) == Device::cuda(7));
  CHECK(Device::cuda(1) != Device::cuda(0));
  for (const char* bad : {"gpu", "CPU", "cuda:", "cuda:-1", "cuda:x", "cuda:1a", "cuda0", "", "cuda:123456789"}) {
    INFO("text '" << bad << "'");
    CHECK_THROWS_WITH(parse_device(bad, "--device"),
                      Catch::Contains("--device") && Catch::Contains(std::string("'") + bad + "'") &&
                          Catch::Contains("expected cpu, cuda or cuda:N"));
  }
}

TEST_CASE("backend registry: cpu always, cuda only once registered", "[backend]") {
  CHECK(&backend(Device::cpu()) == &cpu_backend());
  CHECK(backend_registered(DeviceType::cpu));
  Tensor t = Tensor::zeros({2});
  CHECK(&backend_of(t) == &cpu_backend());
  CHECK(cpu_backend().device() == Device::cpu());
  CHECK(&cpu_backend().allocator() == &cpu_allocator());
  CHECK(cpu_backend().computes(DType::f32));
  CHECK(cpu_backend().computes(DType::f64));
  CHECK(cpu_backend().computes(DType::bf16));  // float32 stand-ins (core/cpu_bf16.h)
  CHECK_FALSE(cpu_backend().computes(DType::f16));
  CHECK_FALSE(cpu_backend().computes(DType::i32));
  CHECK(cpu_backend().stats_dtype(DType::bf16) == DType::f32);
  CHECK(cpu_backend().stats_dtype(DType::f64) == DType::f64);
  if (!backend_registered(DeviceType::cuda)) {
    CHECK_THROWS_WITH(backend(Device::cuda()), Catch::Contains("no backend for device cuda:0") &&
                                                   Catch::Contains("did not register the CUDA backend"));
    CHECK_THROWS_WITH(set_default_device(Device::cuda(1)), Catch::Contains("no backend for device cuda:1"));
    CHECK(default_device() == Device::cpu());  // unchanged by the failed set
  }
}

TEST_CASE("default device scope", "[backend]") {
  CHECK(default_device() == Device::cpu());
  CHECK(&default_allocator() == &cpu_allocator());
  {
    DefaultDeviceScope scope(Device::cpu());
    CHECK(default_device() == Device::cpu());
    Tensor t = Tensor::zeros({3});
    CHECK(t.device() == Device::cpu());
    CHECK(t.storage()->allocator() == &cpu_allocator());
    if (!backend_registered(DeviceType::cuda)) {
      CHECK_THROWS(DefaultDeviceScope(Device::cuda()));
      CHECK(default_device() == Device::cpu());  // a scope that failed to start restores nothing wrongly
    }
  }
  CHECK(default_device() == Device::cpu());
}

TEST_CASE("Tensor::to(Device) on the cpu", "[backend]") {
  Tensor a = rnd({3, 4}, 1);
  Tensor same = a.to(Device::cpu());
  CHECK(same.storage() == a.storage());  // already there and contiguous: no copy
  Tensor at = a.transpose(0, 1);
  Tensor c = at.to(Device::cpu(), Category::workspace);
  CHECK(c.storage() != a.storage());
  CHECK(c.is_contiguous());
  CHECK(c.category() == Category::workspace);
  CHECK(c.device() == Device::cpu());
  CHECK(c.shape() == Shape{4, 3});
  CHECK(c.to_vector() == at.to_vector());
  CHECK(Tensor::borrow(nullptr, {2}, DType::f32, Device::cuda(1)).device() == Device::cuda(1));
}

// ---------------------------------------------------------------------------------------------
// CpuBackend: memory, casts, shard norms, AdamW

TEST_CASE("ops refuse tensors on two devices before touching memory", "[backend]") {
  Var a(rnd({2, 3}, 40)), d(fake_cuda({2, 3}));
  CHECK_THROWS_WITH(add(a, d), Catch::Contains("add: b is on cuda:0 but a is on cpu"));
  CHECK_THROWS_WITH(mul(d, a), Catch::Contains("mul: b is on cpu but a is on cuda:0"));
  Var w(rnd({4, 3}, 41)), wd(fake_cuda({4, 3})), bd(fake_cuda({4}));
  CHECK_THROWS_WITH(linear(a, wd, Var()), Catch::Contains("linear: w is on cuda:0 but x is on cpu"));
  CHECK_THROWS_WITH(linear(a, w, bd), Catch::Contains("linear: b is on cuda:0 but x is on cpu"));
  CHECK_THROWS_WITH(matmul(a, Var(fake_cuda({3, 2}))), Catch::Contains("matmul: b is on cuda:0"));
  CHECK_THROWS_WITH(swiglu(a, d), Catch::Contains("swiglu: up is on cuda:0 but gate is on cpu"));
  CHECK_THROWS_WITH(layernorm(a, Var(fake_cuda({3})), Var()),
                    Catch::Contains("layernorm: weight is on cuda:0 but x is on cpu"));
  CHECK_THROWS_WITH(layernorm(a, Var(rnd({3}, 42)), Var(fake_cuda({3}))),
                    Catch::Contains("layernorm: bias is on cuda:0 but x is on cpu"));
  CHECK_THROWS_WITH(rmsnorm(a, Var(fake_cuda({3}))), Catch::Contains("rmsnorm: weight is on cuda:0"));
  Var q(rnd({1, 2, 2, 4}, 43)), kd(fake_cuda({1, 2, 2, 4}));
  CHECK_THROWS_WITH(causal_attention(q, kd, q), Catch::Contains("causal_attention: k is on cuda:0 but q is on cpu"));
  CHECK_THROWS_WITH(causal_attention(q, q, kd), Catch::Contains("causal_attention: v is on cuda:0 but q is on cpu"));
  if (!backend_registered(DeviceType::cuda)) {  // one device, but it has no backend here
    CHECK_THROWS_WITH(gelu(d), Catch::Contains("no backend for device cuda:0"));
    CHECK_THROWS_WITH(embedding(ids_tensor({0}, {1}), wd), Catch::Contains("no backend for device cuda:0"));
    CHECK_THROWS_WITH(cross_entropy(wd, ids_tensor({0, 1, 2, 3}, {4})),
                      Catch::Contains("no backend for device cuda:0"));
  }
}

TEST_CASE("gradients must live on their value's device", "[backend]") {
  Var x(rnd({2, 3}, 44), true);
  CHECK_THROWS_WITH(x.add_grad(fake_cuda({2, 3})), Catch::Contains("gradient on cuda:0 for a value on cpu"));
  CHECK_THROWS_WITH(Var::parameter(rnd({2}, 45), fake_cuda({2})), Catch::Contains("gradient on cuda:0"));
  Tensor dst = rnd({2, 3}, 46);
  CHECK_THROWS_WITH(accumulate_(dst, fake_cuda({2, 3})), Catch::Contains("both must be on one device"));
  CHECK_THROWS_WITH(cast_(Tensor::zeros({4}, DType::bf16), fake_cuda({4})), Catch::Contains("expected one device"));
}

TEST_CASE("ops name the compute dtypes of the device", "[backend]") {
  Var h(Tensor::zeros({2, 3}, DType::f16)), w(rnd({3}, 47));
  const std::string names = "float32, float64 or bfloat16";
  CHECK_THROWS_WITH(layernorm(h, w, Var()),
                    Catch::Equals("layernorm: x: expected a " + names + " tensor on cpu, got float16(2, 3)"));
  CHECK_THROWS_WITH(gelu(h), Catch::Equals("gelu: x: expected a " + names + " tensor on cpu, got float16(2, 3)"));
  CHECK_THROWS_WITH(add(Var(rnd({2, 3}, 48)), h), Catch::Contains("add: b: expected a " + names + " tensor on cpu"));
  CHECK_THROWS_WITH(embedding(ids_tensor({0}, {1}), Var(Tensor::zeros({2, 3}, DType::f16))),
                    Catch::Contains("embedding: table: expected a " + names + " tensor on cpu, got float16(2, 3)"));
  CHECK_THROWS_WITH(sum(Var(Tensor::zeros({4}, DType::i32))), Catch::Contains("sum: x: expected a " + names));
  // bfloat16 computes, but one op's inputs share one dtype
  Var bf(Tensor::zeros({2, 3}, DType::bf16));
  CHECK_THROWS_WITH(layernorm(bf, w, Var()), Catch::Contains("layernorm: weight: expected bfloat16"));
}

TEST_CASE("ops through the backend: ids and dloss stay consistent", "[backend]") {
  // embedding + cross-entropy + mean through autograd, against the entries called directly
  Tensor table = rnd({6, 4}, 49);
  Var tv(table.clone(), true);
  Tensor ids = ids_tensor({1, 5, 1}, {3});
  Var e = embedding(ids, tv);
  Var loss = mean(e);
  loss.backward();
  Vec want(24, 0.0);
  for (int i : {1, 5, 1})
    for (int c = 0; c < 4; ++c) want[i * 4 + c] += 1.0 / 12;
  check_close(tv.grad().to_vector(), want, 1e-7, 1e-6);
  CHECK(tv.grad().device() == Device::cpu());
}
