// GemmTuneCache: a file of tuned GEMM kernel choices, so a timed choice is made once per GPU and
// library version and then reused by every later process (PyTorch's TunableOp results file and
// TensorRT-LLM's timing cache serve the same end). Host-only data; backend/cuda stores cuBLASLt's
// algorithm descriptor in it (an opaque 64-byte struct that cuBLASLt documents as serializable for
// reuse with the same cuBLAS version).
//
// File (JSON): {"version": 1, "entries": [{"device": "NVIDIA H200", "library": 120804,
//   "dtype": "bf16", "n": 6144, "k": 4096, "accumulate": false, "algo": "<128 hex digits>",
//   "config": "algo 66 tile 201 ...", "us": 1131.5, "first_us": 1186.8}, ...]}
// An entry is found by (device, library, dtype, n, k, accumulate); "config", "us" and
// "first_us" are for the reader. A missing file is an empty cache; an unreadable or malformed one
// is an error naming the file (never silently retuned over). save() writes a temporary file of its
// own and renames it over the old one, so a reader never sees half a file. Several processes writing one
// file (tensor-parallel ranks) each write what they loaded plus their own entries: the last write
// wins, and an entry lost that way is only timed again by the next run. An entry is timed at the
// first m of its product that a process met (the profiling forward's, usually) and serves every m.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace folio {

struct GemmTuneKey {
  std::string device;   // the GPU's name
  int64_t library = 0;  // the GEMM library's version (cublasLtGetVersion)
  std::string dtype;    // "bf16" or "fp16"
  int n = 0, k = 0;
  bool accumulate = false;
  bool operator==(const GemmTuneKey&) const = default;
};

struct GemmTuneEntry {
  GemmTuneKey key;
  std::array<uint64_t, 8> algo{};  // the library's descriptor, bit for bit
  std::string config;              // human-readable kernel description
  double us = 0, first_us = 0;     // the chosen kernel's and the heuristic's first's timing
};

class GemmTuneCache {
 public:
  // Reads `path` (an empty cache when it does not exist).
  static Result<GemmTuneCache> load(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<GemmTuneEntry>& entries() const { return entries_; }
  std::optional<GemmTuneEntry> find(const GemmTuneKey& key) const;
  // Adds or replaces the entry of e.key and writes the file.
  Status put(const GemmTuneEntry& e);

 private:
  Status save() const;
  std::string path_;
  std::vector<GemmTuneEntry> entries_;
};

}  // namespace folio
