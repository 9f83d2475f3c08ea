#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace zt {

namespace {
struct DTypeName {
  DType dt;
  const char* name;
};
constexpr DTypeName kNames[] = {{DType::f32, "F32"}, {DType::bf16, "BF16"}, {DType::f64, "F64"}, {DType::f16, "F16"},
                                {DType::i32, "I32"}, {DType::i64, "I64"},   {DType::u16, "U16"}};
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

void save_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the entries in data order, which makes the header easy to read.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry& e : tensors) {
    ZT_CHECK(e.tensor.defined(), "save_safetensors '", path, "': tensor '", e.name, "' is undefined");
    if (e.name.empty() || e.name == "__metadata__" || header.contains(e.name))
      ZT_THROW("safetensors '", path, "': tensor name '", e.name, "' is empty, reserved or repeated");
    const uint64_t n = e.tensor.nbytes();
    header[e.name] = {{"dtype", safetensors_dtype(e.tensor.dtype())}, {"shape", e.tensor.shape()},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  AtomicFile f(path, "safetensors file");
  f.write(len, sizeof len);
  f.write(text.data(), text.size());
  for (const SafetensorsEntry& e : tensors) {
    Tensor c = e.tensor.to(Device::cpu(), Category::workspace);
    f.write(c.raw(), c.nbytes());
  }
  f.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  SafetensorsFile out;
  out.path = path;
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
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ZT_THROW("safetensors file '", path, "': the header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) ZT_THROW("safetensors file '", path, "': the header is not a JSON object");

  struct Item {
    std::string name;
    DType dt;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Item> items;
  const uint64_t data_size = size - 8 - n;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) ZT_THROW("safetensors file '", path, "': __metadata__ is not an object");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) ZT_THROW("safetensors file '", path, "': __metadata__ value '", k, "' is not a string");
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string where = "safetensors file '" + path + "': tensor '" + name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      ZT_THROW(where, " needs \"dtype\" (string), \"shape\" (array) and \"data_offsets\" ([begin, end]), got ", v.dump());
    Item it{name, DType::f32, {}, 0, 0};
    try {
      it.dt = dtype_from_safetensors(v["dtype"].get<std::string>());
    } catch (const Error& e) {
      ZT_THROW(where, ": ", e.what());
    }
    for (const nlohmann::json& d : v["shape"]) {
      if (!d.is_number_unsigned()) ZT_THROW(where, " has shape ", v["shape"].dump(), ": dimensions must be integers >= 0");
      it.shape.push_back(d.get<int64_t>());
    }
    for (const nlohmann::json& d : v["data_offsets"])
      if (!d.is_number_unsigned()) ZT_THROW(where, " has data_offsets ", v["data_offsets"].dump(), ": expected integers >= 0");
    it.begin = v["data_offsets"][0].get<uint64_t>();
    it.end = v["data_offsets"][1].get<uint64_t>();
    const uint64_t want = static_cast<uint64_t>(shape_numel(it.shape)) * dtype_size(it.dt);
    if (it.end < it.begin || it.end - it.begin != want)
      ZT_THROW(where, " has data_offsets [", it.begin, ", ", it.end, "], but its shape ", v["shape"].dump(), " of ",
               v["dtype"].get<std::string>(), " needs ", want, " bytes");
    if (it.end > data_size)
      ZT_THROW(where, " ends at data byte ", it.end, ", past the end of the file's ", data_size, " data bytes (truncated?)");
    items.push_back(std::move(it));
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.begin < b.begin; });
  uint64_t pos = 0;
  for (const Item& it : items) {
    if (it.begin != pos)
      ZT_THROW("safetensors file '", path, "': tensor '", it.name, "' starts at data byte ", it.begin,
               ", expected ", pos, it.begin < pos ? " (overlaps the previous tensor)" : " (a hole before it)");
    pos = it.end;
  }
  if (pos != data_size)
    ZT_THROW("safetensors file '", path, "': the tensors cover ", pos, " data bytes, the file holds ", data_size);
  for (const Item& it : items) {
    Tensor t = Tensor::empty(it.shape, it.dt, Category::workspace, cpu_allocator());
    in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    if (!in) ZT_THROW("safetensors file '", path, "': reading tensor '", it.name, "' failed");
    out.tensors.push_back({it.name, t});
  }
  return out;
}

}  // namespace zt
