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

}  // namespace zt
