#include "base/log.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <utility>

namespace folio {
namespace {
// -1 until first read: then FOLIO_LOG_LEVEL's level (every binary, tests too; a bad value leaves
// info here and the folio executable reports it), unless set_log_level came first. Constant-
// initialized, so logging during another file's static initialization sees it too.
std::atomic<int> g_level{-1};
std::mutex g_mutex;
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
    default:
      return "";
  }
}
int current_level() {
  int l = g_level.load();
  if (l >= 0) return l;
  LogLevel level = LogLevel::kInfo;
  if (const char* e = std::getenv("FOLIO_LOG_LEVEL")) (void)parse_log_level(e, &level);
  g_level.compare_exchange_strong(l, static_cast<int>(level));  // a racing setter wins
  return g_level.load();
}
}  // namespace

void set_log_level(LogLevel level) {
  g_level = static_cast<int>(level);
}
LogLevel log_level() {
  return static_cast<LogLevel>(current_level());
}

bool parse_log_level(std::string_view name, LogLevel* level) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, LogLevel> kNames[] = {
      {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},   {"warning", LogLevel::kWarn},
      {"warn", LogLevel::kWarn},   {"error", LogLevel::kError}, {"off", LogLevel::kOff}};
  for (const auto& [n, l] : kNames)
    if (lower == n) {
      *level = l;
      return true;
    }
  return false;
}

void log_line(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) < current_level()) return;
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[16];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "[folio %s %s] %.*s\n", level_name(level), stamp,
               static_cast<int>(message.size()), message.data());
}

}  // namespace folio
