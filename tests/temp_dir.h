// defines: zt::test::TempDir — a fresh scratch directory per test case, removed at the end.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace zt::test {

struct TempDir {
  std::filesystem::path dir;
  // tag: names the directory (e.g. the test), so a leftover of a crashed run is recognizable.
  explicit TempDir(const std::string& tag) {
    dir = std::filesystem::temp_directory_path() / ("zt_test_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

}  // namespace zt::test
