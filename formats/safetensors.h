// defines: SafetensorsEntry, SafetensorsFile, SafetensorsTensorInfo, SafetensorsReader,
//          SafetensorsWriter, save_safetensors, load_safetensors, safetensors_dtype — the
//          safetensors format (Hugging Face, https://huggingface.co/docs/safetensors),
//          both ways. Layer formats/.
//
// File layout:
//   bytes [0, 8)        N: the header length, uint64 little-endian
//   bytes [8, 8+N)      JSON header: {"<name>": {"dtype": "F32"|"BF16"|..., "shape": [...],
//                       "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "string"...}},
//                       padded with spaces so that N is a multiple of 8
//   bytes [8+N, EOF)    the tensors' data, row-major little-endian, back to back; data_offsets are
//                       relative to 8+N, and the tensors cover this region exactly (no holes).
//
// Streaming: SafetensorsReader parses the header alone (names, dtypes, shapes, offsets: a few KiB)
// and reads one tensor's bytes, or a byte range of one, on demand (pread); SafetensorsWriter
// writes the header first (every name, shape and offset is known before any data) and then
// appends the tensors one at a time. load_safetensors and save_safetensors are these two applied
// to every tensor, so a streamed file and a whole one are byte-identical.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zt {

struct SafetensorsEntry {
  std::string name;  // "block0.attn.c_attn.weight"
  Tensor tensor;     // any supported dtype, contiguous or not (written row-major)
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<SafetensorsEntry> tensors;        // in data order, each a fresh contiguous tensor
  // Throws zt::Error naming the file and the tensor when absent.
  const Tensor& get(const std::string& name) const;
  std::string path;
};

// "F32", "BF16", "F64", "F16", "I32", "I64", "U16" <-> DType. Throws for an unknown name.
const char* safetensors_dtype(DType t);
DType dtype_from_safetensors(const std::string& name);

// Writes `tensors` in the given order (names unique, not "__metadata__"). Atomic: path.tmp,
// fsync, rename (core/file_io.h AtomicFile).
void save_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// One tensor of a file: what the header says about it. begin/end: byte offsets relative to the
// data region (8 + header length), end - begin = numel x dtype size.
struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// An open safetensors file whose header is parsed and checked (every check of load_safetensors
// below) and whose data is read only when asked. Movable, not copyable (it holds the descriptor).
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&& o) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&& o) noexcept;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }  // in data order
  int find(const std::string& name) const;  // index into tensors(), -1 when absent

  // Bytes [lo, lo + n) of tensor i's data (row-major) into dst. Throws naming the file and tensor.
  void read_bytes(int i, uint64_t lo, uint64_t n, void* dst) const;
  // Tensor i whole, as a fresh contiguous CPU tensor of category c.
  Tensor read(int i, Category c = Category::workspace) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // 8 + header length
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensorInfo> tensors_;
};

// Writes a safetensors file tensor by tensor: the constructor writes the header of `tensors`
// (their begin/end are computed here, in the given order; names unique, not "__metadata__"),
// append() writes the next tensor's data (its dtype and shape must be the next entry's; any
// device, contiguous or not), commit() checks all were appended and makes the file visible
// (AtomicFile: path.tmp, fsync, rename; destroyed uncommitted, the .tmp goes).
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, std::vector<SafetensorsTensorInfo> tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  void append(const Tensor& t);
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads a whole file. Throws zt::Error naming the file and the problem: cannot open, shorter than
// 8 bytes, a header length beyond the file, a header that is not a JSON object, a tensor entry
// without a valid dtype / shape / data_offsets, offsets that disagree with the shape, overlap,
// leave holes or run past the end of the file, a non-string metadata value.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace zt
