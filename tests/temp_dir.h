// defines: zt::test::TempDir — a fresh scratch directory per test case, removed at the end;
//          zt::test::remove_live_temp_dirs.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

namespace zt::test {

// The TempDirs alive in this process: a skipped test case exits without unwinding its stack
// (tests/skip.h), so the skip removes them itself.
inline std::set<std::filesystem::path>& live_temp_dirs() {
  static std::set<std::filesystem::path> dirs;
  return dirs;
}
inline void remove_live_temp_dirs() {
  std::error_code ec;
  for (const auto& d : live_temp_dirs()) std::filesystem::remove_all(d, ec);
  live_temp_dirs().clear();
}

struct TempDir {
  std::filesystem::path dir;
  // tag: names the directory (e.g. the test), so a leftover of a crashed run is recognizable.
  explicit TempDir(const std::string& tag) {
    dir = std::filesystem::temp_directory_path() / ("zt_test_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    live_temp_dirs().insert(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    live_temp_dirs().erase(dir);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

}  // namespace zt::test
