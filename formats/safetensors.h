// defines: SafetensorsEntry, SafetensorsFile, save_safetensors, load_safetensors,
//          safetensors_dtype — the safetensors format (Hugging Face, https://huggingface.co/docs/safetensors),
//          both ways. Layer formats/.
//
// File layout:
//   bytes [0, 8)        N: the header length, uint64 little-endian
//   bytes [8, 8+N)      JSON header: {"<name>": {"dtype": "F32"|"BF16"|..., "shape": [...],
//                       "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "string"...}},
//                       padded with spaces so that N is a multiple of 8
//   bytes [8+N, EOF)    the tensors' data, row-major little-endian, back to back; data_offsets are
//                       relative to 8+N, and the tensors cover this region exactly (no holes).
#pragma once
#include <map>
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

// Reads a whole file. Throws zt::Error naming the file and the problem: cannot open, shorter than
// 8 bytes, a header length beyond the file, a header that is not a JSON object, a tensor entry
// without a valid dtype / shape / data_offsets, offsets that disagree with the shape, overlap,
// leave holes or run past the end of the file, a non-string metadata value.
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace zt
