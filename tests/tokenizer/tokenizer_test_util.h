// Shared helpers for the tokenizer tests: where the tokenizer files and goldens live, and a
// loader for the golden JSONL files (one line per text, produced with HF `tokenizers`).
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "tokenizer/tokenizer.h"

namespace folio::testing {

inline std::string tokenizer_dir(const std::string& name) {
  return std::string(FOLIO_SOURCE_DIR) + "/data/tokenizers/" + name;
}

struct GoldenLine {
  std::string text;
  std::vector<int32_t> ids, ids_with_special;
  std::string decoded, decoded_skip_special;
};

inline std::vector<GoldenLine> load_goldens(const std::string& name) {
  std::vector<GoldenLine> out;
  std::ifstream in(std::string(FOLIO_TEST_DATA_DIR) + "/tokenizers/" + name + ".jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    out.push_back({j["text"].get<std::string>(), j["ids"].get<std::vector<int32_t>>(),
                   j["ids_with_special"].get<std::vector<int32_t>>(),
                   j["decoded"].get<std::string>(), j["decoded_skip_special"].get<std::string>()});
  }
  return out;
}

// Loads (once per process) the tokenizer `name`, or nullptr if its files are missing.
inline const Tokenizer* shared_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Tokenizer> t;
  if (file_exists(tokenizer_dir(name) + "/tokenizer.json")) {
    auto r = Tokenizer::load(tokenizer_dir(name));
    if (r.ok()) t = std::make_unique<Tokenizer>(std::move(r).value());
  }
  return cache.emplace(name, std::move(t)).first->second.get();
}

}  // namespace folio::testing

// Skips the current test when the tokenizer files were not fetched.
#define FOLIO_REQUIRE_TOKENIZER(var, name)                                                   \
  const ::folio::Tokenizer* var = ::folio::testing::shared_tokenizer(name);                  \
  if (var == nullptr) {                                                                      \
    GTEST_SKIP() << "tokenizer files missing under " << ::folio::testing::tokenizer_dir(name) \
                 << " (run scripts/fetch_tokenizers.sh)";                                    \
  }
