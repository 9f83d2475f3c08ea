// defines: parse_json, read_json_file, json_integer, json_shape, kMaxJsonDepth — every JSON document ZeroTensor reads (configs, checkpoint
//          meta.json, safetensors headers, Hugging Face config.json and index files, trace
//          events), parsed in one place with its nesting bounded.
//
// A document nested thousands of levels deep is not a config or a header anyone writes, and
// building (then destroying) such a tree can exhaust the stack: parse_json refuses depth
// > kMaxJsonDepth while parsing, before the tree exists. Errors name the source:
//   "<what> is not valid JSON: <nlohmann's message, with line and column>"
//   "<what> nests JSON deeper than 64 levels"
// `what` is how the caller names the source, e.g. "config 'run.json'".
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zt {

inline constexpr int kMaxJsonDepth = 64;

nlohmann::json parse_json(const std::string& text, const std::string& what);
// The file at `path`, read whole and parsed as parse_json does ("<what>: cannot open ..." when
// it cannot be read).
nlohmann::json read_json_file(const std::string& path, const std::string& what);

// An integer field of untrusted JSON, checked before it is converted: `j` must be an integer
// number (a float such as 1e46 is refused: converting an out-of-range float to an integer is
// undefined behaviour in nlohmann's get<int>) within [lo, hi]. Throws naming `what` and the value.
int64_t json_integer(const nlohmann::json& j, const std::string& what, int64_t lo = INT64_MIN,
                     int64_t hi = INT64_MAX);
// An array of integers in [0, 2^63) (a tensor shape), each checked as json_integer does.
std::vector<int64_t> json_shape(const nlohmann::json& j, const std::string& what);

}  // namespace zt
