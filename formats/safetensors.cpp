// defines: safetensors_dtype, dtype_from_safetensors, SafetensorsFile (get), SafetensorsWriter
//          (constructor, append, commit), save_safetensors, SafetensorsReader (constructor, destructor,
//          find, read_bytes, read), load_safetensors (formats/safetensors.h); file-local: DTypeName
#include "formats/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/checked.h"  // defines: checked_bytes
#include "core/json.h"  // defines: parse_json
#include "core/file_io.h"

namespace zt {

namespace {
struct DTypeName {
  DType dt;
  const char* name;
};
constexpr DTypeName kNames[] = {{DType::f32, "F32"}, {DType::bf16, "BF16"}, {DType::f64, "F64"}, {DType::f16, "F16"},
                                {DType::i32, "I32"}, {DType::i64, "I64"},   {DType::u16, "U16"}, {DType::u8, "U8"}};
}  // namespace

const char* safetensors_dtype(DType t) {
  for (const DTypeName& n : kNames)
    if (n.dt == t) return n.name;
  ZT_THROW("safetensors: dtype ", dtype_name(t), " has no safetensors name");
}

DType dtype_from_safetensors(const std::string& name) {
  for (const DTypeName& n : kNames)
    if (name == n.name) return n.dt;
  ZT_THROW("safetensors: unknown dtype '", name, "' (known: F32, BF16, F64, F16, I32, I64, U16)");
}

const Tensor& SafetensorsFile::get(const std::string& name) const {
  for (const SafetensorsEntry& e : tensors)
    if (e.name == name) return e.tensor;
  ZT_THROW("safetensors file '", path, "' has no tensor '", name, "'");
}

// ---- writing ---------------------------------------------------------------------------------

struct SafetensorsWriter::Impl {
  Impl(const std::string& path, std::vector<SafetensorsTensorInfo> t) : file(path, "safetensors file"), tensors(std::move(t)) {}
  AtomicFile file;
  std::vector<SafetensorsTensorInfo> tensors;
  size_t next = 0;  // the entry append() writes next
};

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafetensorsTensorInfo> tensors,
                                     const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the entries in data order, which makes the header easy to read.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (SafetensorsTensorInfo& e : tensors) {
    if (e.name.empty() || e.name == "__metadata__" || header.contains(e.name))
      ZT_THROW("safetensors '", path, "': tensor name '", e.name, "' is empty, reserved or repeated");
    const uint64_t n = static_cast<uint64_t>(shape_numel(e.shape)) * dtype_size(e.dtype);
    e.begin = offset;
    e.end = offset + n;
    header[e.name] = {{"dtype", safetensors_dtype(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  impl_ = std::make_unique<Impl>(path, std::move(tensors));
  impl_->file.write(len, sizeof len);
  impl_->file.write(text.data(), text.size());
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::append(const Tensor& t) {
  const std::string& path = impl_->file.path();
  ZT_CHECK(impl_->next < impl_->tensors.size(), "safetensors '", path, "': append() past the ",
           impl_->tensors.size(), " tensors of the header");
  const SafetensorsTensorInfo& e = impl_->tensors[impl_->next];
  ZT_CHECK(t.defined(), "save_safetensors '", path, "': tensor '", e.name, "' is undefined");
  ZT_CHECK(t.dtype() == e.dtype && t.shape() == e.shape, "safetensors '", path, "': tensor '", e.name, "' is ",
           shape_str(t.shape()), " ", safetensors_dtype(t.dtype()), ", the header says ", shape_str(e.shape), " ",
           safetensors_dtype(e.dtype));
  Tensor c = t.to(Device::cpu(), Category::workspace);  // row-major on the host (a copy only when needed)
  impl_->file.write(c.raw(), c.nbytes());
  ++impl_->next;
}

void SafetensorsWriter::commit() {
  ZT_CHECK(impl_->next == impl_->tensors.size(), "safetensors '", impl_->file.path(), "': ", impl_->next, " of ",
           impl_->tensors.size(), " tensors appended before commit()");
  impl_->file.commit();
}

void save_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsTensorInfo> infos;
  for (const SafetensorsEntry& e : tensors) {
    ZT_CHECK(e.tensor.defined(), "save_safetensors '", path, "': tensor '", e.name, "' is undefined");
    infos.push_back({e.name, e.tensor.dtype(), e.tensor.shape()});
  }
  SafetensorsWriter w(path, std::move(infos), metadata);
  for (const SafetensorsEntry& e : tensors) w.append(e.tensor);
  w.commit();
}

// ---- reading ---------------------------------------------------------------------------------

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ZT_THROW("safetensors: cannot open '", path, "'");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) ZT_THROW("safetensors: cannot read the size of '", path, "': ", ec.message());
  if (size < 8) ZT_THROW("safetensors file '", path, "' holds ", size, " bytes, less than the 8-byte header length");
  uint8_t len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (n > size - 8)
    ZT_THROW("safetensors file '", path, "': header length ", n, " runs past the end of the file (", size, " bytes)");
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) ZT_THROW("safetensors file '", path, "': reading the ", n, "-byte header failed");
  const nlohmann::json header = parse_json(text, "safetensors file '" + path + "': the header");
  if (!header.is_object()) ZT_THROW("safetensors file '", path, "': the header is not a JSON object");

  const uint64_t data_size = size - 8 - n;
  data_start_ = 8 + n;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) ZT_THROW("safetensors file '", path, "': __metadata__ is not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) ZT_THROW("safetensors file '", path, "': __metadata__ value '", k, "' is not a string");
        metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string where = "safetensors file '" + path + "': tensor '" + name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      ZT_THROW(where, " needs \"dtype\" (string), \"shape\" (array) and \"data_offsets\" ([begin, end]), got ", v.dump());
    SafetensorsTensorInfo it{name, DType::f32, {}, 0, 0};
    try {
      it.dtype = dtype_from_safetensors(v["dtype"].get<std::string>());
    } catch (const Error& e) {
      ZT_THROW(where, ": ", e.what());
    }
    for (const nlohmann::json& d : v["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        ZT_THROW(where, " has shape ", v["shape"].dump(), ": dimensions must be integers in [0, 2^63)");
      it.shape.push_back(d.get<int64_t>());
    }
    for (const nlohmann::json& d : v["data_offsets"])
      if (!d.is_number_unsigned()) ZT_THROW(where, " has data_offsets ", v["data_offsets"].dump(), ": expected integers >= 0");
    it.begin = v["data_offsets"][0].get<uint64_t>();
    it.end = v["data_offsets"][1].get<uint64_t>();
    uint64_t want = 0;  // the shape's bytes, every product checked (core/checked.h)
    try {
      want = static_cast<uint64_t>(checked_bytes(shape_numel(it.shape), static_cast<int64_t>(dtype_size(it.dtype)), "bytes"));
    } catch (const Error& e) {
      ZT_THROW(where, " has shape ", v["shape"].dump(), ": ", e.what());
    }
    if (it.end < it.begin || it.end - it.begin != want)
      ZT_THROW(where, " has data_offsets [", it.begin, ", ", it.end, "], but its shape ", v["shape"].dump(), " of ",
               v["dtype"].get<std::string>(), " needs ", want, " bytes");
    if (it.end > data_size)
      ZT_THROW(where, " ends at data byte ", it.end, ", past the end of the file's ", data_size, " data bytes (truncated?)");
    tensors_.push_back(std::move(it));
  }
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) { return a.begin < b.begin; });
  uint64_t pos = 0;
  for (const SafetensorsTensorInfo& it : tensors_) {
    if (it.begin != pos)
      ZT_THROW("safetensors file '", path, "': tensor '", it.name, "' starts at data byte ", it.begin,
               ", expected ", pos, it.begin < pos ? " (overlaps the previous tensor)" : " (a hole before it)");
    pos = it.end;
  }
  if (pos != data_size)
    ZT_THROW("safetensors file '", path, "': the tensors cover ", pos, " data bytes, the file holds ", data_size);
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) ZT_THROW("safetensors: cannot open '", path, "': ", errno_message());
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& o) noexcept
    : path_(std::move(o.path_)), fd_(std::exchange(o.fd_, -1)), data_start_(o.data_start_),
      metadata_(std::move(o.metadata_)), tensors_(std::move(o.tensors_)) {}

SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    data_start_ = o.data_start_;
    metadata_ = std::move(o.metadata_);
    tensors_ = std::move(o.tensors_);
  }
  return *this;
}

int SafetensorsReader::find(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].name == name) return static_cast<int>(i);
  return -1;
}

void SafetensorsReader::read_bytes(int i, uint64_t lo, uint64_t n, void* dst) const {
  const SafetensorsTensorInfo& t = tensors_.at(static_cast<size_t>(i));
  ZT_CHECK(lo + n <= t.end - t.begin, "safetensors file '", path_, "': bytes [", lo, ", ", lo + n, ") of tensor '",
           t.name, "', which holds ", t.end - t.begin);
  char* p = static_cast<char*>(dst);
  uint64_t off = data_start_ + t.begin + lo;
  while (n > 0) {
    const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      ZT_THROW("safetensors file '", path_, "': reading tensor '", t.name, "' failed",
               r < 0 ? ": " + errno_message() : std::string(" (unexpected end of file)"));
    p += r;
    off += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
}

Tensor SafetensorsReader::read(int i, Category c) const {
  const SafetensorsTensorInfo& info = tensors_.at(static_cast<size_t>(i));
  Tensor t = Tensor::empty(info.shape, info.dtype, c, cpu_allocator());
  read_bytes(i, 0, t.nbytes(), t.raw());
  return t;
}

SafetensorsFile load_safetensors(const std::string& path) {
  const SafetensorsReader r(path);
  SafetensorsFile out;
  out.path = path;
  out.metadata = r.metadata();
  for (size_t i = 0; i < r.tensors().size(); ++i)
    out.tensors.push_back({r.tensors()[i].name, r.read(static_cast<int>(i))});
  return out;
}

}  // namespace zt
