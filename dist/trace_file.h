// defines: write_trace — every rank's trace events (core/trace.h) in one Chrome trace-event file.
//
// Collective: every rank of `g` calls it; rank 0 writes `path` atomically (path.tmp, fsync,
// rename). The file is a JSON object {"traceEvents": [...], "displayTimeUnit": "ms",
// "otherData": {...}} with each rank a process (pid = rank) — open it in https://ui.perfetto.dev
// or chrome://tracing. Each rank's events travel to rank 0 as text (dist/gather_json.h: in host
// memory, after training, not under --memory-limit-mib).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/trace.h"
#include "dist/process_group.h"

namespace zt {

// `other`: what the file records about the run (model, stage, world size, ...).
void write_trace(const Tracer& t, ProcessGroup& g, const std::string& path, const nlohmann::json& other = {});

}  // namespace zt
