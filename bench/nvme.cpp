// defines: main (bench_nvme)
//
// bench_nvme — the NVMe tier's IO path alone: write then read N MiB through a SwapFile (zero/aio.h:
// O_DIRECT, io_uring, aio.block_size pieces, aio.queue_depth in flight), GB/s each (1 GB = 1e9 bytes,
// fio's unit). bench/nvme.sh runs it beside fio with the same block size, queue depth and size.
//
//   bench_nvme --size-mib 1024 --block-size 1048576 --queue-depth 8 --dir /path/on/nvme [--reps 3]
//
// The swap file is reserve()d and allocate()d (fallocate) before the clock starts, as the engine
// does at setup. Each repetition submits the whole size as --request-mib requests (all queued at
// once, as the engine queues a sub-group's buffers), then waits for all; the time is from the first
// submission to the last wait. The median over repetitions is reported; the buffer's contents are
// checked after every read (a 64-bit FNV-1a over words).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "zero/aio.h"  // defines: SwapFile, kAioAlignment
#include "bench/bench_util.h"  // defines: bench::median, bench::loadavg

using namespace zt;
using Clock = std::chrono::steady_clock;

namespace {
using bench::median;

uint64_t hash_words(const uint64_t* p, int64_t n) {  // FNV-1a over 64-bit words
  uint64_t h = 14695981039346656037ull;
  for (int64_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_nvme: write then read through the NVMe tier's swap file (O_DIRECT, io_uring)"};
  int64_t size_mib = 1024, block_size = 1048576, queue_depth = 8, request_mib = 64;
  int reps = 3;
  std::string dir = "/tmp/zt-bench-nvme";
  app.add_option("--size-mib", size_mib, "MiB written and read per repetition")->capture_default_str();
  app.add_option("--block-size", block_size, "aio.block_size: bytes per IO piece")->capture_default_str();
  app.add_option("--queue-depth", queue_depth, "aio.queue_depth: pieces in flight")->capture_default_str();
  app.add_option("--request-mib", request_mib, "MiB per write_async / read_async call")->capture_default_str();
  app.add_option("--reps", reps, "repetitions (the median is reported)")->capture_default_str();
  app.add_option("--dir", dir, "directory of the swap file (a disk-backed filesystem)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    if (size_mib <= 0 || request_mib <= 0 || reps <= 0) ZT_THROW("--size-mib, --request-mib and --reps must be > 0");
    const int64_t bytes = size_mib << 20, req = std::min(request_mib << 20, bytes);
    SwapFile f(dir, 0, AioConfig{block_size, queue_depth});
    const int64_t off = f.reserve(bytes, Category::optim);
    const auto t_alloc = Clock::now();
    f.allocate();
    const double alloc_s = std::chrono::duration<double>(Clock::now() - t_alloc).count();

    auto* buf = static_cast<uint64_t*>(std::aligned_alloc(kAioAlignment, static_cast<size_t>(bytes)));
    if (!buf) ZT_THROW("cannot allocate a ", size_mib, " MiB buffer");
    std::mt19937_64 g(42);
    for (int64_t i = 0; i < bytes / 8; ++i) buf[i] = g();
    const uint64_t want = hash_words(buf, bytes / 8);

    auto run = [&](bool write) {
      std::vector<WorkPtr> works;
      const auto t0 = Clock::now();
      for (int64_t at = 0; at < bytes; at += req) {
        const int64_t n = std::min(req, bytes - at);
        char* p = reinterpret_cast<char*>(buf) + at;
        works.push_back(write ? f.write_async(off + at, p, n) : f.read_async(off + at, p, n));
      }
      for (auto& w : works) w->wait();
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    std::vector<double> wr, rd;
    for (int r = 0; r < reps; ++r) {
      wr.push_back(bytes / run(true) / 1e9);
      std::memset(buf, 0, static_cast<size_t>(bytes));  // the read must bring the data back
      rd.push_back(bytes / run(false) / 1e9);
      if (hash_words(buf, bytes / 8) != want) ZT_THROW("data read back differs from what was written (", f.path(), ")");
    }
    std::free(buf);
    const double w = median(wr), rdm = median(rd);
    std::fprintf(stderr, "bench_nvme: %s, %lld MiB, block %lld B, queue depth %lld, requests of %lld MiB, %d reps; "
                 "allocate %.3f s\n", f.path().c_str(), static_cast<long long>(size_mib), static_cast<long long>(block_size),
                 static_cast<long long>(queue_depth), static_cast<long long>(req >> 20), reps, alloc_s);
    for (int r = 0; r < reps; ++r) std::fprintf(stderr, "  rep %d: write %.3f GB/s, read %.3f GB/s\n", r, wr[r], rd[r]);
    std::fprintf(stderr, "median: write %.3f GB/s, read %.3f GB/s\n", w, rdm);
    nlohmann::json j = {{"impl", "zerotensor"}, {"size_mib", size_mib}, {"block_size", block_size},
                        {"queue_depth", queue_depth}, {"request_mib", req >> 20}, {"reps", reps},
                        {"write_gbps", wr}, {"read_gbps", rd}, {"write_gbps_median", w}, {"read_gbps_median", rdm},
                        {"allocate_s", alloc_s}, {"dir", dir}};
    std::printf("%s\n", j.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
