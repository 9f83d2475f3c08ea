// defines: gather_json — every rank's JSON document on rank 0, through the group's all-gather.
//
// Collective: every rank of `g` calls it with its own document. Rank 0 gets the N documents in
// rank order; every other rank gets an empty vector. The documents travel as their text, in host
// memory (small things sent once: a trace's events, a profile's op times; not under
// --memory-limit-mib). `what` names the documents in a parse error ("<what> of rank r").
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dist/process_group.h"

namespace zt {

std::vector<nlohmann::json> gather_json(ProcessGroup& g, const nlohmann::json& mine, const std::string& what);

}  // namespace zt
