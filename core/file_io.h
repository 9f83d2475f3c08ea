// defines: AtomicFile (write, fsync, rename), fsync_directory, errno_message, fnv1a64 — durable
//          file writes shared by every format that must never be seen half-written, and the
//          checksum the checkpoint formats record.
//
// A crash at any instant leaves either the old file or the complete new one:
//   bytes -> "<path>.tmp";  commit(): fsync, close, rename over <path>, fsync the directory.
// An AtomicFile destroyed without commit() (an exception on the way) removes its .tmp file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace zt {

class AtomicFile {
 public:
  // `what` names the kind of file in error messages: "token file", "llm.c checkpoint", ...
  AtomicFile(std::string path, std::string what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Throws naming the file, the bytes and the offset (disk full: "... (ENOSPC: the disk is full)";
  // a file-size limit: EFBIG); the unfinished file is removed when the AtomicFile goes.
  void write(const void* data, size_t n);
  void commit();                           // makes the file visible under its final name
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_, what_;
  int fd_ = -1;
  uint64_t written_ = 0;  // bytes in the file so far
};

// fsync of a directory, so that a rename inside it survives a crash. Throws naming `what`.
void fsync_directory(const std::string& dir, const std::string& what);

// strerror(errno) as a string.
std::string errno_message();

// FNV-1a 64 (Fowler, Noll, Vo) of a byte range, continuing from `h` (pass the default to start).
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace zt
