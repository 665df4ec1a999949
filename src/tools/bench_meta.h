// What every benchmark result carries besides its figures, so a number can be traced to the
// machine, the code and the command that produced it (docs/performance.md): gpu_name, commit,
// date, command and the FOLIO_* environment; and writing a result file.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/engine_core.h"

namespace folio::tools {

// The git commit the binary was built from: the FOLIO_GIT_COMMIT compile definition, or
// "unknown" when the build did not bake one in.
std::string build_commit();

// UTC now, ISO 8601: "2026-11-22T02:30:05Z".
std::string utc_now_iso8601();

// This process's command line (Linux /proc/self/cmdline), arguments joined by spaces and
// single-quoted when they hold shell metacharacters; "" when unavailable.
std::string process_command_line();

// The FOLIO_* environment variables set in this process, {name: value} (sorted by name): the
// measuring switches (FOLIO_DECODE_ROWS, FOLIO_TC_RING, ...) that an A/B run's command line
// does not show.
nlohmann::json folio_environment();

// {"gpu_name", "commit", "date", "command", "environment"}.
nlohmann::json run_metadata(const std::string& gpu_name);

// The host loop's share, from the engine's step timers: {"model_steps", "mean_step_ms",
// "mean_execute_ms", "mean_host_ms", "host_share_of_execute"} (host time per step over the time
// inside the executor; the performance target is under 5% at batch 256).
nlohmann::json host_loop_json(const EngineCounters& c);
// One line for the console from host_loop_json's fields.
void print_host_loop(const nlohmann::json& j);

// Writes `j` pretty-printed (2 spaces) plus a newline; errors name the path.
Status write_json_file(const std::string& path, const nlohmann::json& j);

}  // namespace folio::tools
