// defines: parse_json, read_json_file, json_integer, json_shape (core/json.h)
#include "core/json.h"

#include <fstream>
#include <iterator>

#include "core/check.h"
#include "core/file_io.h"  // defines: errno_message

namespace zt {

nlohmann::json parse_json(const std::string& text, const std::string& what) {
  using json = nlohmann::json;
  // The callback sees every object and array as it opens, with its depth (the top level is 0):
  // the document is refused there, before anything deeper is built.
  const json::parser_callback_t bound = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      ZT_THROW(what, " nests JSON deeper than ", kMaxJsonDepth, " levels");
    return true;
  };
  try {
    return json::parse(text, bound);
  } catch (const json::exception& e) {
    ZT_THROW(what, " is not valid JSON: ", e.what());
  }
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) ZT_THROW(what, ": cannot open the file for reading: ", errno_message());
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) ZT_THROW(what, ": reading the file failed: ", errno_message());
  return parse_json(text, what);
}

int64_t json_integer(const nlohmann::json& j, const std::string& what, int64_t lo, int64_t hi) {
  const bool too_big = j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  if (!j.is_number_integer() || too_big || j.get<int64_t>() < lo || j.get<int64_t>() > hi)
    ZT_THROW(what, " = ", j.dump(), " is invalid: expected an integer in [", lo, ", ", hi, "]");
  return j.get<int64_t>();
}

std::vector<int64_t> json_shape(const nlohmann::json& j, const std::string& what) {
  if (!j.is_array()) ZT_THROW(what, " = ", j.dump(), " is invalid: expected an array of integers (a shape)");
  std::vector<int64_t> shape;
  for (size_t i = 0; i < j.size(); ++i)
    shape.push_back(json_integer(j[i], what + "[" + std::to_string(i) + "]", 0));
  return shape;
}

}  // namespace zt
