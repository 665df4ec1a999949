// folio: one executable, one subcommand per job (generate, tokenize, serve, bench, ...).
#include <cstdio>

#include "tools/commands.h"

int main(int argc, char** argv) {
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
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // bad flags are bad input: exit code 2
  }
  return exit_code;
}
