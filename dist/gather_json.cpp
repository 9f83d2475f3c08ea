// defines: gather_json (dist/gather_json.h); file-local: pack
#include "dist/gather_json.h"

#include <algorithm>
#include <cstring>

#include "core/json.h"  // defines: parse_json

namespace zt {

namespace {
// The group moves floating-point tensors; bytes travel as the raw 16-bit words of a bf16 tensor
// (an all-gather copies them without arithmetic). `words` elements, zero-padded.
Tensor pack(const std::string& bytes, int64_t words) {
  Tensor t = Tensor::zeros({words}, DType::bf16, Category::workspace, host_allocator());
  std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}
}  // namespace

std::vector<nlohmann::json> gather_json(ProcessGroup& g, const nlohmann::json& mine, const std::string& what) {
  const std::string text = mine.dump();
  const int N = g.size();
  // the lengths first (exact in a double), then every text padded to the longest
  Tensor len = Tensor::empty({1}, DType::f64, Category::workspace, host_allocator());
  len.data<double>()[0] = static_cast<double>(text.size());
  Tensor lens = Tensor::empty({N}, DType::f64, Category::workspace, host_allocator());
  g.all_gather(len, lens);
  int64_t most = 0;
  for (int r = 0; r < N; ++r) most = std::max(most, static_cast<int64_t>(lens.data<double>()[r]));
  const int64_t words = (most + 1) / 2;
  Tensor all = Tensor::empty({words * N}, DType::bf16, Category::workspace, host_allocator());
  g.all_gather(pack(text, words), all);
  if (g.rank() != 0) return {};

  std::vector<nlohmann::json> docs;
  for (int r = 0; r < N; ++r) {
    const char* at = static_cast<const char*>(all.raw()) + static_cast<size_t>(r) * static_cast<size_t>(words) * 2;
    docs.push_back(parse_json(std::string(at, static_cast<size_t>(lens.data<double>()[r])),
                              what + " of rank " + std::to_string(r)));
  }
  return docs;
}

}  // namespace zt
