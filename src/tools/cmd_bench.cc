// folio bench: throughput, latency and serving benchmarks (docs/performance.md's B1-B4, M1).
// Each writes its figures to stdout and, with --output-json, a result file carrying the GPU,
// commit, date and command line beside them.
#include "tools/bench_commands.h"
#include "tools/commands.h"

namespace folio::tools {

void register_bench(CLI::App& app, int& exit_code) {
  auto* bench = app.add_subcommand("bench", "Benchmarks: throughput, latency, serve");
  bench->require_subcommand(1);
  register_bench_throughput(bench, exit_code);
  register_bench_latency(bench, exit_code);
  register_bench_serve(bench, exit_code);
}

}  // namespace folio::tools
