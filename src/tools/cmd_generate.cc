#include "tools/commands.h"

namespace folio::tools {

void register_generate(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Offline generation over a JSONL file of requests");
  cmd->callback([&exit_code] { exit_code = 1; });
}

}  // namespace folio::tools
