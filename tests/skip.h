// defines: ZT_SKIP(reason) — a Catch2 test case that cannot run on this machine says why and is
//          reported as skipped, never as passed; zt::test::skip_exit_code.
//
// Catch2 v2 has no "skipped" result. Under CTest every test case is its own process
// (catch_discover_tests in tests/CMakeLists.txt), started with ZT_TEST_SKIP_EXIT=77 in its
// environment and registered with SKIP_RETURN_CODE 77: ZT_SKIP prints "SKIP: <reason>" and the
// process exits 77, which CTest lists under "The following tests did not run" (Skipped). Run by
// hand (the whole binary, no such variable), the reason becomes a Catch2 WARN and the case returns,
// so the other cases still run. Stack objects are not destroyed on the exit path; the case's
// TempDirs (tests/temp_dir.h) are removed before it. tests/check_skip_codes.py checks that every CTest test that can skip is
// registered with SKIP_RETURN_CODE 77.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "tests/temp_dir.h"  // defines: zt::test::remove_live_temp_dirs

namespace zt::test {

// The exit code that means "skipped" when this process runs one test case for CTest; 0 when the
// binary was started some other way.
inline int skip_exit_code() {
  const char* v = std::getenv("ZT_TEST_SKIP_EXIT");
  return v ? std::atoi(v) : 0;
}

inline void exit_if_skipping(const std::string& reason) {
  if (const int code = skip_exit_code(); code != 0) {
    remove_live_temp_dirs();
    std::printf("SKIP: %s\n", reason.c_str());
    std::fflush(stdout);
    std::_Exit(code);
  }
}

}  // namespace zt::test

#define ZT_SKIP(reason)                           \
  do {                                            \
    std::ostringstream zt_skip_reason_;           \
    zt_skip_reason_ << reason;                    \
    zt::test::exit_if_skipping(zt_skip_reason_.str()); \
    WARN("SKIP: " << zt_skip_reason_.str());      \
    return;                                       \
  } while (0)
