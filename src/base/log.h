// Minimal leveled logging to stderr, thread-safe per line. The level starts at FOLIO_LOG_LEVEL
// (default info) and may be set once at start-up.
#pragma once

#include <string_view>

namespace folio {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
// "debug", "info", "warning" (or "warn"), "error", "off", in any case (vLLM's
// VLLM_LOGGING_LEVEL names); false for anything else. FOLIO_LOG_LEVEL sets the starting level of
// every binary (the folio executable rejects a bad value with exit code 2).
bool parse_log_level(std::string_view name, LogLevel* level);
// Writes "[folio <LEVEL> <HH:MM:SS>] message\n" if level >= the current level.
void log_line(LogLevel level, std::string_view message);

inline void log_info(std::string_view m) {
  log_line(LogLevel::kInfo, m);
}
inline void log_warn(std::string_view m) {
  log_line(LogLevel::kWarn, m);
}
inline void log_error(std::string_view m) {
  log_line(LogLevel::kError, m);
}
inline void log_debug(std::string_view m) {
  log_line(LogLevel::kDebug, m);
}

}  // namespace folio
