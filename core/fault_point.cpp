// defines: fault_point (core/fault_point.h); file-local: KillAt, kill_at
#include "core/fault_point.h"

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/check.h"

namespace zt {

namespace {

struct KillAt {
  bool set = false;
  std::string point;
  long count = 1;  // the passage that kills
  long rank = -1;  // -1: any
};

// Parses ZT_FAULT_KILL_AT once: "<point>[:<n>][@<rank>]".
const KillAt& kill_at() {
  static const KillAt k = [] {
    KillAt r;
    const char* env = std::getenv("ZT_FAULT_KILL_AT");
    if (!env || !*env) return r;
    std::string s = env;
    auto number = [&](std::string text, const char* what) {
      char* end = nullptr;
      const long v = std::strtol(text.c_str(), &end, 10);
      ZT_CHECK(!text.empty() && *end == '\0' && v >= 0, "ZT_FAULT_KILL_AT = '", env, "': the ", what, " '", text,
               "' is not a number >= 0 (expected <point>[:<n>][@<rank>])");
      return v;
    };
    if (const size_t at = s.find('@'); at != std::string::npos) {
      r.rank = number(s.substr(at + 1), "rank");
      s.resize(at);
    }
    if (const size_t colon = s.find(':'); colon != std::string::npos) {
      r.count = number(s.substr(colon + 1), "passage count");
      ZT_CHECK(r.count >= 1, "ZT_FAULT_KILL_AT = '", env, "': passages count from 1");
      s.resize(colon);
    }
    ZT_CHECK(!s.empty(), "ZT_FAULT_KILL_AT = '", env, "': no point named (expected <point>[:<n>][@<rank>])");
    r.point = s;
    r.set = true;
    return r;
  }();
  return k;
}

std::atomic<long> g_passages{0};  // passages of the armed point so far

}  // namespace

void fault_point(const char* point, int rank) {
  const KillAt& k = kill_at();
  if (!k.set || k.point != point || (k.rank >= 0 && k.rank != rank)) return;
  if (g_passages.fetch_add(1) + 1 == k.count) ::raise(SIGKILL);
}

}  // namespace zt
