#include "backend/gemm_tune_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace folio {
namespace {

constexpr int kVersion = 1;

std::string to_hex(const std::array<uint64_t, 8>& a) {
  std::string s;
  char buf[17];
  for (uint64_t w : a) {
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(w));
    s += buf;
  }
  return s;
}

bool from_hex(const std::string& s, std::array<uint64_t, 8>& a) {
  if (s.size() != 128) return false;
  for (size_t i = 0; i < 8; ++i) {
    uint64_t w = 0;
    for (size_t j = 0; j < 16; ++j) {
      const char c = s[16 * i + j];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      w = (w << 4) | static_cast<uint64_t>(d);
    }
    a[i] = w;
  }
  return true;
}

Result<GemmTuneEntry> parse_entry(const nlohmann::json& j) {
  GemmTuneEntry e;
  e.key.device = j.at("device").get<std::string>();
  e.key.library = j.at("library").get<int64_t>();
  e.key.dtype = j.at("dtype").get<std::string>();
  e.key.n = j.at("n").get<int>();
  e.key.k = j.at("k").get<int>();
  e.key.accumulate = j.at("accumulate").get<bool>();
  if (!from_hex(j.at("algo").get<std::string>(), e.algo))
    return invalid_argument("\"algo\" is not 128 lowercase hex digits");
  e.config = j.value("config", "");
  e.us = j.value("us", 0.0);
  e.first_us = j.value("first_us", 0.0);
  return e;
}

}  // namespace

Result<GemmTuneCache> GemmTuneCache::load(const std::string& path) {
  GemmTuneCache c;
  c.path_ = path;
  if (path.empty()) return invalid_argument("GEMM tuning cache: empty path");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return c;
  std::ifstream in(path);
  if (!in) return invalid_argument("GEMM tuning cache " + path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const auto j = nlohmann::json::parse(ss.str());
    if (j.at("version").get<int>() != kVersion)
      return invalid_argument("GEMM tuning cache " + path + ": version " + j.at("version").dump() +
                              ", expected " + std::to_string(kVersion));
    for (const auto& ej : j.at("entries")) {
      auto e = parse_entry(ej);
      if (!e.ok())
        return invalid_argument("GEMM tuning cache " + path + ": " + e.status().message());
      c.entries_.push_back(std::move(*e));
    }
  } catch (const nlohmann::json::exception& ex) {
    return invalid_argument("GEMM tuning cache " + path + ": malformed (" + ex.what() +
                            "); fix or delete it");
  }
  return c;
}

std::optional<GemmTuneEntry> GemmTuneCache::find(const GemmTuneKey& key) const {
  for (const auto& e : entries_)
    if (e.key == key) return e;
  return std::nullopt;
}

Status GemmTuneCache::put(const GemmTuneEntry& e) {
  bool replaced = false;
  for (auto& old : entries_)
    if (old.key == e.key) {
      old = e;
      replaced = true;
    }
  if (!replaced) entries_.push_back(e);
  return save();
}

Status GemmTuneCache::save() const {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : entries_)
    entries.push_back({{"device", e.key.device},
                       {"library", e.key.library},
                       {"dtype", e.key.dtype},
                       {"n", e.key.n},
                       {"k", e.key.k},
                       {"accumulate", e.key.accumulate},
                       {"algo", to_hex(e.algo)},
                       {"config", e.config},
                       {"us", e.us},
                       {"first_us", e.first_us}});
  const nlohmann::json j = {{"version", kVersion}, {"entries", entries}};
  // A temporary name of this writer's own: tensor-parallel ranks are threads of one process, each
  // with its own cache object, and may save at the same moment.
  static std::atomic<uint64_t> next_writer{0};
  const std::string tmp =
      path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(next_writer.fetch_add(1));
  {
    std::ofstream out(tmp);
    if (!out) return invalid_argument("GEMM tuning cache: cannot write " + tmp);
    out << j.dump(2) << "\n";
    if (!out) return data_loss("GEMM tuning cache: failed writing " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path_, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return data_loss("GEMM tuning cache: cannot rename " + tmp + " to " + path_);
  }
  return Status();
}

}  // namespace folio
