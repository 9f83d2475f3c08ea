// defines: checkpoint_detail::{FileLayout, layout_of, RankFiles, read_elements, on_every_rank,
//          step_name, is_step_name, latest_name, rank_file_name, read_text, hex64} — the layout of a sharded checkpoint's
//          rank files and their verified reading, shared by the save (zero/checkpoint.cpp) and
//          the load (zero/checkpoint_load.cpp, zero/checkpoint_source.cpp). Private to those files.
//          Declared here (on_every_rank, a template, defined here too), defined in zero/checkpoint_files.cpp.
#pragma once
#include "zero/checkpoint.h"

#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace zt::checkpoint_detail {

namespace fs = std::filesystem;

std::string hex64(uint64_t v);
std::string step_name(int64_t step);
std::string rank_file_name(int r);
std::string read_text(const fs::path& p);

// "step_<digits>": the name of a complete step directory (not step_X.tmp, not anything else).
bool is_step_name(const std::string& name);

// What <root>/latest names, trailing whitespace cut ("" when there is no `latest`).
std::string latest_name(const fs::path& root);

// Runs fn on this rank; then every rank learns whether any rank failed, and why
// (ProcessGroup::first_error), so a failure never leaves the others waiting in the next
// collective. This rank's own error is rethrown as is; a rank that succeeded throws with the
// first failing rank's message.
template <class F> inline void on_every_rank(ProcessGroup& g, const std::string& what, F&& fn) {
  std::exception_ptr err;
  std::string mine;
  try {
    fn();
  } catch (const std::exception& e) {
    err = std::current_exception();
    mine = e.what();
  } catch (...) {
    err = std::current_exception();
    mine = "unknown error";
  }
  const std::string first = g.first_error(mine);
  if (err) std::rethrow_exception(err);
  if (!first.empty()) ZT_THROW(what, ": failed on ", first);
}

// The geometry of one checkpoint's rank files (all files share it).
struct FileLayout {
  struct U {
    std::string name;
    int64_t numel = 0, padded = 0, S = 0;
  };
  int N = 1;
  std::vector<U> units;
  std::vector<std::string> tensors;
  std::vector<DType> dtypes;       // per tensor
  std::vector<int64_t> unit_base;  // byte offset of each unit's block in every file
  int64_t file_bytes = 0;

  // unit_base and file_bytes from units and dtypes.
  void finish();
  // Byte offset in every rank file of element `local` of tensor t of unit u.
  int64_t offset(size_t u, size_t t, int64_t local) const;
  int tensor_index(const std::string& n) const;  // -1 when there is no tensor n
};

// The layout of this rank's shards; checks that they are consistent (same tensors and dtypes on
// every unit, S = padded / N elements each).
FileLayout layout_of(const std::vector<CheckpointShard>& shards, int N, const char* what);

// The rank files of one checkpoint, opened on first use; each is verified whole (size and
// FNV-1a 64 against meta.json) before any byte of it is trusted.
class RankFiles {
 public:
  RankFiles(const ShardedMeta& m, const FileLayout& L);
  ~RankFiles();
  RankFiles(const RankFiles&) = delete;
  RankFiles& operator=(const RankFiles&) = delete;

  // n bytes at `offset` of rank q's file into dst.
  void read(int q, int64_t offset, void* dst, int64_t n);

 private:
  std::string path(int q) const;
  int open(int q);

  const ShardedMeta& m_;
  const FileLayout& L_;
  std::vector<int> fds_;
};

// Elements [begin, begin + count) of tensor t of unit u's flat space, from whichever rank files
// hold them, into dst (count elements of the tensor's dtype). Elements >= numel are zero.
void read_elements(RankFiles& files, const FileLayout& L, size_t u, size_t t, int64_t begin, int64_t count, void* dst);

// The checkpoint's FileLayout from its (already format-checked) meta.json.
FileLayout layout_of(const ShardedMeta& m);

}  // namespace zt::checkpoint_detail
