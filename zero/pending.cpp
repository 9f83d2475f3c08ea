#include "zero/pending.h"

#include <algorithm>

namespace zt {

void Pending::finish() {
  work->wait();
  if (then) then();
  then = nullptr;
}

void drain(std::deque<Pending>& q) {
  while (!q.empty()) {
    q.front().finish();
    q.pop_front();
  }
}

void all_gather_chunked(ProcessGroup& g, const Tensor& src, const Tensor& dst, int64_t chunk,
                        std::deque<Pending>& out) {
  const int64_t S = src.numel(), N = g.size();
  if (chunk >= S) {
    out.push_back({g.all_gather_async(src, dst), nullptr});
    return;
  }
  for (int64_t a = 0; a < S; a += chunk) {
    const int64_t n = std::min(chunk, S - a);
    Tensor buf = Tensor::empty({N * n}, src.dtype(), Category::comm);
    WorkPtr w = g.all_gather_async(range(src, a, n), buf);
    out.push_back({w, [buf, dst, a, n, S, N] {
                     for (int64_t q = 0; q < N; ++q) range(dst, q * S + a, n).copy_(range(buf, q * n, n));
                   }});
  }
}

}  // namespace zt
