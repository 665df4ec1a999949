// Small file helpers returning Result with messages that name the file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace folio {

Result<std::string> read_file(const std::string& path);
// Parses a JSON file; errors name the file and the parser's position.
Result<nlohmann::json> read_json_file(const std::string& path);
bool file_exists(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace folio
