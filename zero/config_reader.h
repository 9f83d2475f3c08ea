// defines: config_reader::Reader, join, kBig, kMaxBatch, kIntPos, kIntNonNeg — the checked reads
//          of the DeepSpeed-style config (zero/engine_config.cpp): every object's keys against
//          its known keys, every value with its type, range and default, errors naming the
//          source and the key path. Private to zero/engine_config*.cpp.
#pragma once
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace zt::config_reader {

using nlohmann::json;


inline constexpr int64_t kBig = int64_t{1} << 50;    // upper bound of every element count
inline constexpr int64_t kMaxBatch = int64_t{1} << 31;

inline std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// Reads one config; `src` names it in every error.
struct Reader {
  const std::string& src;

  template <class... A>
  [[noreturn]] void fail(const A&... a) const { ZT_THROW("config '", src, "': ", a...); }

  static std::string path(const std::string& prefix, const std::string& key) {
    return prefix.empty() ? key : prefix + "." + key;
  }
  static bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

  // The object at `prefix` (the root when empty) must have only `known` keys.
  void check_keys(const json& o, const std::string& prefix, const std::vector<std::string>& known,
                  const std::string& what = "") const {
    if (!o.is_object())
      fail(prefix.empty() ? "the top level" : prefix, " must be a JSON object, got ", o.dump());
    for (const auto& [k, v] : o.items())
      if (std::find(known.begin(), known.end(), k) == known.end())
        fail("unknown key '", path(prefix, k), "' (known keys", what, ": ", known.empty() ? "none" : join(known), ")");
  }

  // The value at o[key], or nullptr when absent. "auto" is an error unless auto_ok, and then
  // also nullptr (the default applies).
  const json* get(const json& o, const std::string& prefix, const std::string& key, bool auto_ok,
                  const std::string& expected) const {
    auto it = o.find(key);
    if (it == o.end()) return nullptr;
    if (is_auto(*it)) {
      if (auto_ok) return nullptr;
      fail(path(prefix, key), " = \"auto\" is invalid: \"auto\" is not accepted for this key; expected ", expected);
    }
    return &*it;
  }

  bool boolean(const json& o, const std::string& prefix, const std::string& key, bool def) const {
    const json* v = get(o, prefix, key, false, "true or false");
    if (!v) return def;
    if (!v->is_boolean()) fail(path(prefix, key), " must be a boolean, got ", v->dump());
    return v->get<bool>();
  }

  // An integer in [lo, hi]; a float with an integral value (5e8, as DeepSpeed users write) is
  // accepted. `expected` describes the allowed values in errors.
  int64_t integer(const json& o, const std::string& prefix, const std::string& key, int64_t def,
                  int64_t lo, int64_t hi, const std::string& expected, bool auto_ok = false) const {
    const json* v = get(o, prefix, key, auto_ok, expected);
    if (!v) return def;
    int64_t x = 0;
    if (v->is_number_integer()) {
      if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
        fail(path(prefix, key), " = ", v->dump(), " is invalid: expected ", expected);
      x = v->get<int64_t>();
    } else if (v->is_number_float()) {
      const double d = v->get<double>();
      if (!(std::abs(d) < 9e18) || std::trunc(d) != d)
        fail(path(prefix, key), " must be an integer, got ", v->dump());
      x = static_cast<int64_t>(d);
    } else {
      fail(path(prefix, key), " must be an integer, got ", v->dump());
    }
    if (x < lo || x > hi) fail(path(prefix, key), " = ", v->dump(), " is invalid: expected ", expected);
    return x;
  }

  // A finite number in [lo, hi] (lo_open: lo excluded).
  double number(const json& o, const std::string& prefix, const std::string& key, double def,
                double lo, double hi, const std::string& expected, bool auto_ok = false,
                bool lo_open = false) const {
    const json* v = get(o, prefix, key, auto_ok, expected);
    if (!v) return def;
    if (!v->is_number()) fail(path(prefix, key), " must be a number, got ", v->dump());
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
      fail(path(prefix, key), " = ", v->dump(), " is invalid: expected ", expected);
    return x;
  }

  // One of `allowed` (compared with `fold`, e.g. lower-case); returns the canonical spelling.
  std::string choice(const json& o, const std::string& prefix, const std::string& key,
                     const std::string& def, const std::vector<std::string>& allowed,
                     bool case_insensitive = false) const {
    std::string expected;
    for (size_t i = 0; i < allowed.size(); ++i)
      expected += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + ("\"" + allowed[i] + "\"");
    if (case_insensitive) expected += " (case-insensitive)";
    const json* v = get(o, prefix, key, false, expected);
    if (!v) return def;
    if (!v->is_string()) fail(path(prefix, key), " must be a string, got ", v->dump());
    auto fold = [&](std::string s) {
      if (case_insensitive)
        for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    };
    const std::string s = fold(v->get<std::string>());
    for (const auto& a : allowed)
      if (fold(a) == s) return a;
    fail(path(prefix, key), " = ", v->dump(), " is invalid: expected ", expected);
  }

  // A DeepSpeed key we accept only at one value (the behaviour we implement).
  void fixed(const json& o, const std::string& prefix, const std::string& key, const json& only,
             const std::string& why) const {
    auto it = o.find(key);
    if (it == o.end()) return;
    if (it->type() != only.type() && !(it->is_number() && only.is_number()))
      fail(path(prefix, key), " must be ",
           only.is_boolean() ? "a boolean" : only.is_null() ? "null" : only.is_string() ? "a string" : "a number",
           ", got ", it->dump());
    if (*it != only)
      fail(path(prefix, key), " = ", it->dump(), " is not supported: expected ", only.dump(), " (", why, ")");
  }

  // A DeepSpeed key we do not implement at all.
  void unsupported(const json& o, const std::string& prefix, const std::string& key, const std::string& why) const {
    if (o.contains(key)) fail(path(prefix, key), " is not supported (", why, ")");
  }

  const json& section(const json& o, const std::string& key) const {
    const json& s = o.at(key);
    if (!s.is_object()) fail(key, " must be a JSON object, got ", s.dump());
    return s;
  }
};

inline const std::string kIntPos = "an integer >= 1";
inline const std::string kIntNonNeg = "an integer >= 0";

}  // namespace zt::config_reader
