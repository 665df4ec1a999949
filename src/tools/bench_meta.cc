#include "tools/bench_meta.h"

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <unistd.h>  // environ

namespace folio::tools {

std::string build_commit() {
#ifdef FOLIO_GIT_COMMIT
  std::string c = FOLIO_GIT_COMMIT;
  return c.empty() ? "unknown" : c;
#else
  return "unknown";
#endif
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~!") == std::string::npos)
    return arg;
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') out += "'\\''";
    else out.push_back(c);
  }
  return out + "'";
}

}  // namespace

std::string process_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string raw = ss.str();
  std::string out;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!out.empty()) out.push_back(' ');
    out += shell_quote(raw.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

nlohmann::json folio_environment() {
  nlohmann::json out = nlohmann::json::object();  // nlohmann's object keeps keys sorted
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || kv.compare(0, 6, "FOLIO_") != 0) continue;
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

nlohmann::json run_metadata(const std::string& gpu_name) {
  return {{"gpu_name", gpu_name},
          {"commit", build_commit()},
          {"date", utc_now_iso8601()},
          {"command", process_command_line()},
          {"environment", folio_environment()}};
}

Status write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!out) return invalid_argument("cannot write " + path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return data_loss("failed writing " + path);
  return Status();
}

nlohmann::json host_loop_json(const EngineCounters& c) {
  const double steps = c.model_steps > 0 ? static_cast<double>(c.model_steps) : 1.0;
  const double host = c.step_seconds - c.execute_seconds;
  return {{"model_steps", c.model_steps},
          {"mean_step_ms", 1e3 * c.step_seconds / steps},
          {"mean_execute_ms", 1e3 * c.execute_seconds / steps},
          {"mean_host_ms", 1e3 * host / steps},
          {"mean_schedule_ms", 1e3 * c.schedule_seconds / steps},
          {"mean_prepare_ms", 1e3 * c.prepare_seconds / steps},
          {"mean_outputs_ms", 1e3 * (host - c.schedule_seconds - c.prepare_seconds) / steps},
          {"host_share_of_execute", c.execute_seconds > 0 ? host / c.execute_seconds : 0.0},
          {"async_steps", c.async_steps}};
}

void print_host_loop(const nlohmann::json& j) {
  std::printf(
      "Host loop: %.3f ms per step beside %.3f ms in the executor (%.1f%%) over %lld steps "
      "(schedule %.3f, inputs %.3f, outputs %.3f ms)",
      j["mean_host_ms"].get<double>(), j["mean_execute_ms"].get<double>(),
      100.0 * j["host_share_of_execute"].get<double>(),
      static_cast<long long>(j["model_steps"].get<int64_t>()), j["mean_schedule_ms"].get<double>(),
      j["mean_prepare_ms"].get<double>(), j["mean_outputs_ms"].get<double>());
  // Async steps: the host loop ran while the device ran the step before (the executor's share
  // includes the wait for that step's tokens), so it is not time the device stood idle.
  if (const int64_t a = j.value("async_steps", int64_t{0}); a > 0)
    std::printf("; %lld steps launched ahead, their host loop overlapping the device",
                static_cast<long long>(a));
  std::printf("\n");
}

}  // namespace folio::tools
