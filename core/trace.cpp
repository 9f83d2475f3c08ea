// defines: Tracer (constructor, us, add, span, instant and 4 more) (core/trace.h); file-local: track_name
#include "core/trace.h"

namespace zt {

namespace {
const char* track_name(TraceTrack t) {
  switch (t) {
    case TraceTrack::compute: return "compute (training thread)";
    case TraceTrack::comm: return "communication (collectives as they run)";
    case TraceTrack::io: return "nvme io (swap-file reads and writes)";
  }
  return "?";
}
}  // namespace

Tracer::Tracer(int rank) : rank_(rank), origin_(Clock::now()) {}

double Tracer::us(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Tracer::add(nlohmann::json e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

void Tracer::span(TraceTrack track, std::string name, const char* cat, Clock::time_point t0, Clock::time_point t1,
                  nlohmann::json args) {
  if (!recording_) return;
  nlohmann::json e = {{"ph", "X"}, {"name", std::move(name)}, {"cat", cat}, {"pid", rank_},
                      {"tid", static_cast<int>(track)}, {"ts", us(t0)}, {"dur", us(t1) - us(t0)}};
  if (!args.is_null()) e["args"] = std::move(args);
  add(std::move(e));
}

void Tracer::instant(TraceTrack track, std::string name, const char* cat, nlohmann::json args) {
  if (!recording_) return;
  nlohmann::json e = {{"ph", "i"}, {"s", "t"}, {"name", std::move(name)}, {"cat", cat}, {"pid", rank_},
                      {"tid", static_cast<int>(track)}, {"ts", us(Clock::now())}};
  if (!args.is_null()) e["args"] = std::move(args);
  add(std::move(e));
}

void Tracer::counter(const std::string& name, Clock::time_point t, nlohmann::json series) {
  if (!recording_) return;
  add({{"ph", "C"}, {"name", name}, {"pid", rank_}, {"ts", us(t)}, {"args", std::move(series)}});
}

void Tracer::memory(const std::string& name, const MemoryStats& m) {
  nlohmann::json series = nlohmann::json::object();
  for (Category c : kAllCategories) series[category_name(c)] = m.cur(c);
  counter(name, Clock::now(), std::move(series));
}

size_t Tracer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

nlohmann::json Tracer::events() const {
  nlohmann::json out = nlohmann::json::array();
  out.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank_}, {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  out.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", rank_}, {"args", {{"sort_index", rank_}}}});
  for (TraceTrack t : {TraceTrack::compute, TraceTrack::comm, TraceTrack::io})
    out.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank_}, {"tid", static_cast<int>(t)},
                   {"args", {{"name", track_name(t)}}}});
  std::lock_guard<std::mutex> lock(mu_);
  for (const nlohmann::json& e : events_) out.push_back(e);
  return out;
}

}  // namespace zt
