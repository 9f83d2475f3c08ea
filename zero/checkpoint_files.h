// defines: checkpoint_detail::{FileLayout, layout_of, RankFiles, read_elements, read_elements_as,
//          same_parameters, whole_parameters, on_every_rank,
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

// The geometry of one checkpoint's rank files (all files share it). A tensor-parallel checkpoint
// holds tp slices of the model, each sharded over N data-parallel ranks: rank file q = d * tp + t
// holds data shard d of slice t (every slice has the same unit layout, so every file the same size).
struct FileLayout {
  struct U {
    std::string name;
    int64_t numel = 0, padded = 0, S = 0;  // of one slice (the whole unit when tp = 1)
    std::vector<ParamInfo> params;         // meta.json's "params" (empty when it gives none)
  };
  int N = 1;   // data shards per slice
  int tp = 1;  // tensor-parallel slices
  int files() const { return N * tp; }
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
// every unit, S = padded / N elements each). tp: the tensor-parallel slices beside them.
FileLayout layout_of(const std::vector<CheckpointShard>& shards, int N, int tp, const char* what);

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

// Elements [begin, begin + count) of tensor t of unit u's flat space (of tensor slice `slice`),
// from whichever rank files hold them, into dst (count elements of the tensor's dtype). Elements
// >= numel are zero.
void read_elements(RankFiles& files, const FileLayout& L, size_t u, size_t t, int64_t begin, int64_t count, void* dst,
                   int slice = 0);
// The same elements of unit u laid out as `target` says (its parameters in the checkpoint's
// order: the whole tensors, or another tensor-parallel cut of them): each element is read from
// its place in the whole tensor, in whichever slice and rank file holds it. Elements outside
// every parameter (padding) are zero. The target's parameters must be the checkpoint's, by name
// and whole shape (checked by the caller: same_parameters).
void read_elements_as(RankFiles& files, const FileLayout& L, size_t u, size_t t, const std::vector<ParamInfo>& target,
                      int64_t begin, int64_t count, void* dst);
// "" when `target` holds unit u's parameters of the checkpoint (names and whole shapes, in order),
// else what differs.
std::string same_parameters(const FileLayout& L, size_t u, const std::vector<ParamInfo>& target);
// The unit's parameters as the whole (one-rank) model lays them out: whole shapes, offsets in order.
std::vector<ParamInfo> whole_parameters(const std::vector<ParamInfo>& params);

// The checkpoint's FileLayout from its (already format-checked) meta.json.
FileLayout layout_of(const ShardedMeta& m);

}  // namespace zt::checkpoint_detail
