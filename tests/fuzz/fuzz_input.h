// defines: input_file (the fuzz input as a file, for readers that take a path).
//
// The fuzz targets' shared pieces (tests/fuzz/): the input as a file for readers that
// take a path, and the rule every target follows.
//
// The rule: a reader may refuse any input, but only with zt::Error (a message naming the file and
// the problem). Anything else — another exception type escaping, a sanitizer report (out-of-bounds
// read, overflow, leak), a crash, a hang past -timeout, memory past -rss_limit_mb — is a finding.
// So targets catch zt::Error and nothing else.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace zt::fuzz {

// The input written to one file per process (under $TMPDIR or /tmp), overwritten each run.
inline const std::string& input_file(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string path = [&] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/zt-fuzz-" + std::to_string(::getpid()) + suffix;
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();  // the harness itself failed: not a finding about the reader
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace zt::fuzz
