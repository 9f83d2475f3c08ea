// defines: errno_message, fnv1a64, AtomicFile (constructor, destructor, write, commit), fsync_directory
//          (core/file_io.h)
#include "core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/check.h"

namespace zt {

std::string errno_message() { return std::strerror(errno); }

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

AtomicFile::AtomicFile(std::string path, std::string what)
    : path_(std::move(path)), tmp_(path_ + ".tmp"), what_(std::move(what)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) ZT_THROW(what_, " '", tmp_, "': cannot create: ", errno_message());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {  // not committed: leave no half-written file behind
    ::close(fd_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  ZT_CHECK(fd_ >= 0, what_, " '", path_, "': write after commit");
  const char* p = static_cast<const char*>(data);
  const size_t total = n;
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ZT_THROW(what_, " '", tmp_, "': writing ", total, " bytes at offset ", written_,
               " failed after ", total - n, " of them: ", std::strerror(e),
               e == ENOSPC ? " (ENOSPC: the disk is full; free space or write elsewhere)"
               : e == EFBIG ? " (EFBIG: over the file-size limit, ulimit -f)" : "");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  written_ += total;
}

void AtomicFile::commit() {
  ZT_CHECK(fd_ >= 0, what_, " '", path_, "': commit twice");
  if (::fsync(fd_) != 0) ZT_THROW(what_, " '", tmp_, "': fsync failed: ", errno_message());
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    std::remove(tmp_.c_str());
    ZT_THROW(what_, " '", tmp_, "': close failed: ", errno_message());
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string e = errno_message();
    std::remove(tmp_.c_str());
    ZT_THROW(what_, " '", path_, "': cannot rename '", tmp_, "' to it: ", e);
  }
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  fsync_directory(dir.empty() ? "." : dir.string(), what_);
}

void fsync_directory(const std::string& dir, const std::string& what) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) ZT_THROW(what, ": cannot open directory '", dir, "' to fsync it: ", errno_message());
  const int rc = ::fsync(fd);
  const std::string e = errno_message();
  ::close(fd);
  if (rc != 0) ZT_THROW(what, ": fsync of directory '", dir, "' failed: ", e);
}

}  // namespace zt
