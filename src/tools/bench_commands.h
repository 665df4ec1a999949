// The sub-subcommands of `folio bench`, each in its own cmd_bench_*.cc; register_bench
// (tools/commands.h) creates the `bench` subcommand and calls these on it.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "tools/engine_flags.h"

namespace folio::tools {

void register_bench_throughput(CLI::App* bench, int& exit_code);
void register_bench_latency(CLI::App* bench, int& exit_code);
void register_bench_serve(CLI::App* bench, int& exit_code);

}  // namespace folio::tools
