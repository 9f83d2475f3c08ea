// defines: Bf16StandIns — bfloat16 compute on the cpu: each bfloat16 argument of a backend
//          entry is replaced by a float32 copy, the float32 kernel runs, and the outputs are
//          rounded back once. Private to core/cpu_backend*.cpp, and to core/meta_backend.cpp,
//          which counts the same stand-ins without computing them.
//
// This is what a GPU's bf16 kernel does (load bf16, compute in float32, round each output element
// once, keep statistics in float32: Backend::stats_dtype), spelled with whole-tensor conversions:
// the same semantics, at the cost of two extra passes over memory. It is the CPU's *reference*
// for bf16 compute (the GPU ops are checked against it, tests/gpu/), and what lets a model built
// in bfloat16 — and the ZeRO engine's bf16-compute mode — train and be tested on a machine without
// a GPU. It is not a fast path: a float32 model is faster on the cpu (bench/train_step measures).
//
// Use, at the top of an entry whose arguments are t1..tn, of which o1..om are written:
//   if (Bf16StandIns f{&t1, ..., &tn}; f.active()) {
//     entry(f(t1), ..., f(tn));   // the same entry on float32 stand-ins (the float32 path)
//     return f.store({&o1, ..., &om});
//   }
// Stand-ins of written tensors start from their current values, so accumulating entries
// (linear_backward with accumulate, embedding_backward, gemm with beta) add to what they hold.
#pragma once
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace zt {

class Bf16StandIns {
 public:
  explicit Bf16StandIns(std::initializer_list<const Tensor*> args) : Bf16StandIns(std::vector<const Tensor*>(args)) {}
  // The stand-ins come from `a` (Category::workspace): the cpu's allocator unless named.
  explicit Bf16StandIns(const std::vector<const Tensor*>& args, Allocator& a = cpu_allocator()) {
    for (const Tensor* t : args) {
      if (!t->defined() || t->dtype() != DType::bf16) continue;
      Tensor f32 = Tensor::empty(t->shape(), DType::f32, Category::workspace, a);
      f32.copy_(*t);  // exact: every bfloat16 is a float32
      pairs_.emplace_back(t, std::move(f32));
    }
  }
  bool active() const { return !pairs_.empty(); }

  // The float32 stand-in of t, or t itself (not bfloat16, or undefined).
  const Tensor& operator()(const Tensor& t) const {
    for (const auto& [orig, f32] : pairs_)
      if (orig == &t) return f32;
    return t;
  }

  // Rounds the stand-ins of the written tensors back into them (nearest even, once per element).
  void store(std::initializer_list<const Tensor*> outs) const {
    for (const Tensor* t : outs) {
      if (!t->defined() || t->dtype() != DType::bf16) continue;
      Tensor dst = *t;
      dst.copy_((*this)(*t));
    }
  }

 private:
  std::vector<std::pair<const Tensor*, Tensor>> pairs_;
};

}  // namespace zt
