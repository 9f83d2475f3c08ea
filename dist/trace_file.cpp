// defines: write_trace (dist/trace_file.h)
#include "dist/trace_file.h"

#include "core/file_io.h"  // defines: AtomicFile
#include "dist/gather_json.h"

namespace zt {

void write_trace(const Tracer& t, ProcessGroup& g, const std::string& path, const nlohmann::json& other) {
  std::vector<nlohmann::json> ranks = gather_json(g, t.events(), "write_trace '" + path + "': the events");
  if (g.rank() != 0) return;
  nlohmann::json events = nlohmann::json::array();
  for (nlohmann::json& rank_events : ranks)
    for (nlohmann::json& e : rank_events) events.push_back(std::move(e));
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  doc["otherData"] = other.is_null() ? nlohmann::json::object() : other;
  doc["otherData"]["world_size"] = g.size();
  const std::string text = doc.dump();
  AtomicFile f(path, "trace file");
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace zt
