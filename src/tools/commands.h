// Each subcommand of the folio executable registers itself on the CLI11 app. The callback runs
// the command and stores its exit code in `exit_code` (0 ok, 1 runtime failure, 2 bad input).
#pragma once

#include <CLI/CLI.hpp>

namespace folio::tools {

void register_generate(CLI::App& app, int& exit_code);
void register_tokenize(CLI::App&, int&);
void register_detokenize(CLI::App&, int&);
void register_serve(CLI::App& app, int& exit_code);
void register_render_chat(CLI::App& app, int& exit_code);
void register_bench(CLI::App&, int&);

}  // namespace folio::tools
