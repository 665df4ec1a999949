// folio: one executable, one subcommand per job (generate, tokenize, serve, bench, ...).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/log.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

int main(int argc, char** argv) {
  // FOLIO_LOG_LEVEL=debug|info|warning|error|off (default info), like vLLM's VLLM_LOGGING_LEVEL:
  // base/log.cc starts at that level; here a value it cannot read is bad input.
  if (const char* e = std::getenv("FOLIO_LOG_LEVEL")) {
    folio::LogLevel level;
    if (!folio::parse_log_level(e, &level)) {
      std::fprintf(stderr, "folio: FOLIO_LOG_LEVEL=%s: expected debug, info, warning, error or off\n",
                   e);
      return 2;
    }
  }
  CLI::App app{"folio: an LLM inference and serving engine (PagedAttention, TokenAttention)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "folio 0.1.0");
  int exit_code = 0;
  folio::tools::register_generate(app, exit_code);
  folio::tools::register_tokenize(app, exit_code);
  folio::tools::register_detokenize(app, exit_code);
  folio::tools::register_serve(app, exit_code);
  folio::tools::register_render_chat(app, exit_code);
  folio::tools::register_bench(app, exit_code);
  try {
    // CLI11 parses a reversed vector of arguments (without the program name).
    std::vector<std::string> args = folio::tools::expand_short_aliases(argc, argv);
    args.erase(args.begin());
    std::reverse(args.begin(), args.end());
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // bad flags are bad input: exit code 2
  }
  return exit_code;
}
