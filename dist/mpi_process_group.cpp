#include "dist/mpi_process_group.h"

#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings are deprecated and warn)
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>

namespace zt {

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

namespace {

// bfloat16 and float16 travel as 2-byte words (MPI has no such types); their sums go through the
// user-defined operations below, which add in float32 and round once per addition (as NCCL's bf16
// reductions do), so an N-rank sum of 2-byte values rounds N - 1 times.
MPI_Datatype mpi_type(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;
    default: return MPI_FLOAT;
  }
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

void f16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = f32_to_f16(f16_to_f32(a[i]) + f16_to_f32(b[i]));
}

// The sum operation for a tensor's dtype (the 2-byte ops are created once, in the constructor).
MPI_Op g_bf16_sum = MPI_OP_NULL, g_f16_sum = MPI_OP_NULL;
MPI_Op mpi_sum(const Tensor& t) {
  if (t.dtype() == DType::bf16) return g_bf16_sum;
  if (t.dtype() == DType::f16) return g_f16_sum;
  return MPI_SUM;
}

// MPI counts are int: one collective moves at most 2^31 - 1 elements.
int mpi_count(const Tensor& t) {
  ZT_CHECK(t.numel() <= INT32_MAX, "MPI collective of ", t.numel(), " elements: at most 2^31 - 1 per call");
  return static_cast<int>(t.numel());
}

// A collective handed to the communication thread: done when its promise is set.
struct QueuedWork final : Work {
  std::shared_future<void> done;
  std::vector<Tensor> keep;  // the buffers stay alive while MPI may touch them
  void wait() override {
    done.get();  // rethrows
    keep.clear();
  }
};

}  // namespace

MpiProcessGroup::MpiProcessGroup() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      std::fprintf(stderr, "error: the MPI library offers thread level %d, ZeroTensor needs MPI_THREAD_SERIALIZED (%d)\n",
                   provided, MPI_THREAD_SERIALIZED);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (g_bf16_sum == MPI_OP_NULL) {
    MPI_Op_create(&bf16_sum, /*commute=*/1, &g_bf16_sum);
    MPI_Op_create(&f16_sum, /*commute=*/1, &g_f16_sum);
  }
  thread_ = std::thread([this] { loop(); });
}

MpiProcessGroup::~MpiProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Op_free(&g_bf16_sum);
    MPI_Op_free(&g_f16_sum);
    MPI_Finalize();
  }
}

void MpiProcessGroup::loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

WorkPtr MpiProcessGroup::submit(std::function<void()> fn, std::vector<Tensor> keep) {
  auto promise = std::make_shared<std::promise<void>>();
  auto w = std::make_shared<QueuedWork>();
  w->done = promise->get_future().share();
  w->keep = std::move(keep);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back([fn = std::move(fn), promise]() mutable {
      try {
        fn();
        fn = nullptr;  // drop the captured buffers before the waiter wakes (memory is exact then)
        promise->set_value();
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
  }
  cv_.notify_one();
  return w;
}

WorkPtr MpiProcessGroup::do_all_reduce(const Tensor& x) {
  return submit([x] { MPI_Allreduce(MPI_IN_PLACE, x.raw(), mpi_count(x), mpi_type(x), mpi_sum(x), MPI_COMM_WORLD); },
                {x});
}

WorkPtr MpiProcessGroup::do_reduce_scatter(const Tensor& in, const Tensor& out) {
  return submit([in, out] {
    MPI_Reduce_scatter_block(in.raw(), out.raw(), mpi_count(out), mpi_type(in), mpi_sum(in), MPI_COMM_WORLD);
  }, {in, out});
}

WorkPtr MpiProcessGroup::do_all_gather(const Tensor& in, const Tensor& out) {
  // This rank's input already at its place in the output (ZeRO stages 1-2 publishing a shard of
  // the full buffer): MPI_IN_PLACE, since MPI forbids overlapping send and receive buffers.
  const bool in_place = in.raw() == static_cast<char*>(out.raw()) + static_cast<size_t>(rank_) * in.nbytes();
  return submit([in, out, in_place] {
    MPI_Allgather(in_place ? MPI_IN_PLACE : in.raw(), mpi_count(in), mpi_type(in), out.raw(), mpi_count(in),
                  mpi_type(out), MPI_COMM_WORLD);
  }, {in, out});
}

WorkPtr MpiProcessGroup::do_broadcast(const Tensor& x, int root) {
  return submit([x, root] { MPI_Bcast(x.raw(), mpi_count(x), mpi_type(x), root, MPI_COMM_WORLD); }, {x});
}

WorkPtr MpiProcessGroup::do_barrier() {
  return submit([] { MPI_Barrier(MPI_COMM_WORLD); }, {});
}

void MpiProcessGroup::abort(const std::string& message, int code) {
  std::fprintf(stderr, "error on rank %d of %d: %s\n", rank_, size_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // MPI_Abort does not return; this line is for the compiler
}

}  // namespace zt
