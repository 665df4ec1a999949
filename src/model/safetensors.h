// Safetensors checkpoints, read through mmap: one file (`model.safetensors`) or shards listed in
// `model.safetensors.index.json`. Every header is validated before any tensor is handed out: a
// truncated or corrupted file, or a tensor whose byte range does not match its dtype and shape,
// gives an error naming the file and the tensor, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace folio {

enum class DType { kF32, kF16, kBF16 };
const char* dtype_name(DType d);
size_t dtype_size(DType d);

// A tensor inside a mapped file; valid while the owning SafetensorsFile lives.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t num_bytes = 0;
  std::string file;  // for error messages

  int64_t numel() const;
};

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

// All tensors of a checkpoint folder (single file or sharded).
class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& model_dir);

  // The tensor, or an error naming it (and the folder) if it is missing.
  Result<const TensorView*> get(const std::string& name) const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  size_t num_tensors() const { return index_.size(); }
  std::vector<std::string> tensor_names() const;  // sorted
  const std::string& dir() const { return dir_; }

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
  std::string dir_;
};

// Converts a tensor of any supported dtype to fp32, after checking its shape.
Status tensor_to_f32(const TensorView& t, const std::vector<int64_t>& expected_shape,
                     std::vector<float>& out);

}  // namespace folio
