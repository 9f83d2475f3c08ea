// defines: write_trace (dist/trace_file.h); file-local: pack
#include "dist/trace_file.h"

#include <cstring>

#include "core/json.h"  // defines: parse_json
#include "core/file_io.h"  // defines: AtomicFile

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

void write_trace(const Tracer& t, ProcessGroup& g, const std::string& path, const nlohmann::json& other) {
  const std::string mine = t.events().dump();
  const int N = g.size();
  Tensor len = Tensor::empty({1}, DType::f64, Category::workspace, host_allocator());
  len.data<double>()[0] = static_cast<double>(mine.size());
  Tensor lens = Tensor::empty({N}, DType::f64, Category::workspace, host_allocator());
  g.all_gather(len, lens);
  int64_t most = 0;
  for (int r = 0; r < N; ++r) most = std::max(most, static_cast<int64_t>(lens.data<double>()[r]));
  const int64_t words = (most + 1) / 2;
  Tensor all = Tensor::empty({words * N}, DType::bf16, Category::workspace, host_allocator());
  g.all_gather(pack(mine, words), all);
  if (g.rank() != 0) return;

  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < N; ++r) {
    const char* at = static_cast<const char*>(all.raw()) + static_cast<size_t>(r) * static_cast<size_t>(words) * 2;
    const std::string text(at, static_cast<size_t>(lens.data<double>()[r]));
    nlohmann::json rank_events =
        parse_json(text, "write_trace '" + path + "': rank " + std::to_string(r) + "'s events");
    for (nlohmann::json& e : rank_events) events.push_back(std::move(e));
  }
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  doc["otherData"] = other.is_null() ? nlohmann::json::object() : other;
  doc["otherData"]["world_size"] = N;
  const std::string text = doc.dump();
  AtomicFile f(path, "trace file");
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace zt
