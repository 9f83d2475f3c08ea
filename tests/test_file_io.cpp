// defines: 4 Catch2 test cases tagged [file_io]; helpers: read_all, write_plain, sample_bytes
//
// core/file_io.h: AtomicFile (the bytes appear under the final name only on commit(); an
// abandoned one leaves neither a .tmp nor a changed final file) and fsync_directory.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "core/check.h"
#include "core/file_io.h"
#include "tests/temp_dir.h"

using namespace zt;
namespace fs = std::filesystem;
using zt::test::TempDir;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_plain(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

// Binary content with zero bytes, high bytes and no trailing newline, longer than one small write.
std::string sample_bytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + 7) % 256);
  return s;
}

}  // namespace

TEST_CASE("AtomicFile commit writes the exact bytes and leaves no tmp file", "[file_io]") {
  TempDir d("commit");
  const std::string path = d.file("out.bin"), tmp = path + ".tmp";
  const std::string bytes = sample_bytes(70000);
  {
    AtomicFile f(path, "test file");
    CHECK(f.path() == path);
    f.write(bytes.data(), 1000);  // two writes: the file is their concatenation
    f.write(bytes.data() + 1000, bytes.size() - 1000);
    CHECK(fs::exists(tmp));    // the bytes go to <path>.tmp first ...
    CHECK(!fs::exists(path));  // ... and are invisible under the final name until commit()
    f.commit();
    CHECK_THROWS_WITH(f.write("x", 1), Catch::Contains("out.bin") && Catch::Contains("write after commit"));
  }
  CHECK(read_all(path) == bytes);
  CHECK(!fs::exists(tmp));

  // Committing over an existing file replaces it entirely (shorter content: no old tail left).
  {
    AtomicFile f(path, "test file");
    f.write("new", 3);
    f.commit();
  }
  CHECK(read_all(path) == "new");
  CHECK(!fs::exists(tmp));
}

TEST_CASE("AtomicFile destroyed without commit leaves no tmp and keeps the old file", "[file_io]") {
  TempDir d("abandon");
  const std::string path = d.file("ckpt.bin"), tmp = path + ".tmp";
  const std::string old_bytes = sample_bytes(5000);
  write_plain(path, old_bytes);

  // An exception between write and commit unwinds the AtomicFile.
  bool thrown = false;
  try {
    AtomicFile f(path, "test file");
    const std::string half = sample_bytes(300);
    f.write(half.data(), half.size());
    REQUIRE(fs::exists(tmp));
    throw std::runtime_error("failure between write and commit");
  } catch (const std::runtime_error& e) {
    thrown = std::string(e.what()) == "failure between write and commit";
  }
  CHECK(thrown);
  CHECK(!fs::exists(tmp));
  CHECK(read_all(path) == old_bytes);  // untouched

  // Without an old file, nothing at all is left behind.
  const std::string fresh = d.file("fresh.bin");
  {
    AtomicFile f(fresh, "test file");
    f.write("abc", 3);
  }
  CHECK(!fs::exists(fresh));
  CHECK(!fs::exists(fresh + ".tmp"));
  CHECK(std::distance(fs::directory_iterator(d.dir), fs::directory_iterator()) == 1);  // only ckpt.bin
}

TEST_CASE("AtomicFile in a missing directory throws naming the path", "[file_io]") {
  TempDir d("missing");
  const std::string path = (d.dir / "no_such_dir" / "x.bin").string();
  CHECK_THROWS_AS(AtomicFile(path, "test file"), Error);
  CHECK_THROWS_WITH(AtomicFile(path, "test file"),
                    Catch::Contains("test file") && Catch::Contains(path) && Catch::Contains("cannot create"));
  CHECK(!fs::exists(d.dir / "no_such_dir"));
}

TEST_CASE("fsync_directory of a missing directory throws naming it", "[file_io]") {
  TempDir d("fsync");
  CHECK_NOTHROW(fsync_directory(d.dir.string(), "test dir"));
  const std::string missing = (d.dir / "gone").string();
  CHECK_THROWS_AS(fsync_directory(missing, "test dir"), Error);
  CHECK_THROWS_WITH(fsync_directory(missing, "test dir"), Catch::Contains("test dir") && Catch::Contains(missing));
}
