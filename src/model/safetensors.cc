#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "base/file_util.h"

namespace folio {
namespace {

using nlohmann::json;

Result<DType> parse_dtype(const std::string& s, const std::string& where) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  return unimplemented(where + ": unsupported dtype \"" + s + "\" (F32, F16, BF16)");
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

size_t dtype_size(DType d) {
  return d == DType::kF32 ? 4 : 2;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, map_size_);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return not_found(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  fstat(fd, &st);
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return data_loss(path + ": truncated (" + std::to_string(size) + " bytes, no header)");
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return data_loss(path + ": mmap failed");
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = map;
  f->map_size_ = size;

  const auto* bytes = static_cast<const std::byte*>(map);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian on every platform we build for
  if (header_len > size - 8)
    return data_loss(path + ": truncated or corrupted header (header length " +
                     std::to_string(header_len) + " exceeds file size " + std::to_string(size) +
                     ")");
  const char* hdr = reinterpret_cast<const char*>(bytes + 8);
  json h = json::parse(hdr, hdr + header_len, nullptr, false);
  if (h.is_discarded() || !h.is_object())
    return data_loss(path + ": corrupted header (not a JSON object)");
  const std::byte* data = bytes + 8 + header_len;
  size_t data_size = size - 8 - header_len;
  for (auto& [name, info] : h.items()) {
    if (name == "__metadata__") continue;
    std::string where = path + ": tensor \"" + name + "\"";
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets") || !info["dtype"].is_string() || !info["shape"].is_array() ||
        !info["data_offsets"].is_array() || info["data_offsets"].size() != 2)
      return data_loss(where + ": malformed header entry");
    TensorView t;
    t.name = name;
    t.file = path;
    FOLIO_ASSIGN_OR_RETURN(t.dtype, parse_dtype(info["dtype"].get<std::string>(), where));
    for (const auto& d : info["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return data_loss(where + ": bad shape");
      t.shape.push_back(d.get<int64_t>());
    }
    const auto& off = info["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return data_loss(where + ": bad data_offsets");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      return data_loss(where + ": data_offsets [" + std::to_string(begin) + ", " +
                       std::to_string(end) + ") outside the file's data (" +
                       std::to_string(data_size) + " bytes): truncated file?");
    if (end - begin != static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype))
      return data_loss(where + ": byte size " + std::to_string(end - begin) +
                       " does not match dtype " + dtype_name(t.dtype) + " and shape " +
                       shape_str(t.shape));
    t.data = data + begin;
    t.num_bytes = end - begin;
    f->tensors_.emplace(name, std::move(t));
  }
  return f;
}

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  Checkpoint ck;
  ck.dir_ = dir;
  std::vector<std::string> shard_names;
  std::string index_path = join_path(dir, "model.safetensors.index.json");
  if (file_exists(index_path)) {
    FOLIO_ASSIGN_OR_RETURN(json idx, read_json_file(index_path));
    if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
      return data_loss(index_path + ": missing \"weight_map\" object");
    std::set<std::string> names;
    for (auto& [tensor, file] : idx["weight_map"].items()) {
      if (!file.is_string()) return data_loss(index_path + ": weight_map values must be strings");
      std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        return data_loss(index_path + ": shard name \"" + f + "\" must be a plain file name");
      names.insert(f);
    }
    shard_names.assign(names.begin(), names.end());
  } else if (file_exists(join_path(dir, "model.safetensors"))) {
    shard_names.push_back("model.safetensors");
  } else {
    return not_found(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const auto& s : shard_names) {
    FOLIO_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(join_path(dir, s)));
    ck.files_.push_back(std::move(file));
    for (const auto& [name, view] : ck.files_.back()->tensors()) {
      if (ck.index_.count(name))
        return data_loss(join_path(dir, s) + ": tensor \"" + name + "\" appears in two shards");
      ck.index_[name] = &view;
    }
  }
  return ck;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(index_.size());
  for (const auto& [name, view] : index_) names.push_back(name);
  return names;
}

Result<const TensorView*> Checkpoint::get(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return not_found(dir_ + ": checkpoint has no tensor \"" + name + "\"");
  return it->second;
}

Status tensor_to_f32(const TensorView& t, const std::vector<int64_t>& expected_shape,
                     std::vector<float>& out) {
  if (t.shape != expected_shape)
    return data_loss(t.file + ": tensor \"" + t.name + "\" has shape " + shape_str(t.shape) +
                     ", expected " + shape_str(expected_shape));
  size_t n = static_cast<size_t>(t.numel());
  out.resize(n);
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(out.data(), t.data, n * 4);
      break;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, t.data + 2 * i, 2);
        uint32_t bits = static_cast<uint32_t>(v) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
      break;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, t.data + 2 * i, 2);
        out[i] = half_to_float(v);
      }
      break;
  }
  return Status();
}

}  // namespace folio
