// --max-num-batched-tokens and --max-num-seqs: unset they stay 0 in the config, for load_engine
// to fill by device and use (engine/batch_defaults.h); given, they pass through; 0 or less on
// the command line is an error, not a request for the defaults.
#include <gtest/gtest.h>

#include <string>

#include "tools/engine_flags.h"

namespace folio {
namespace {

Result<EngineConfig> config_of(const std::string& args) {
  CLI::App app;
  tools::EngineFlags f;
  tools::add_engine_flags(&app, f, /*model_required=*/false);
  app.parse(args, /*program_name_included=*/false);
  return tools::to_engine_config(f);
}

TEST(BatchLimitFlags, UnsetStaysZeroForTheEngineToFill) {
  auto c = config_of("");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->sched.max_num_batched_tokens, 0);
  EXPECT_EQ(c->sched.max_num_seqs, 0);
  EXPECT_EQ(c->usage, UsageContext::kOffline);  // `serve` sets kServer itself
}

TEST(BatchLimitFlags, GivenValuesPassThrough) {
  auto c = config_of("--max-num-batched-tokens 4096 --max-num-seqs 48");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->sched.max_num_batched_tokens, 4096);
  EXPECT_EQ(c->sched.max_num_seqs, 48);
}

TEST(BatchLimitFlags, ZeroOrNegativeIsAnError) {
  for (const char* args : {"--max-num-seqs 0", "--max-num-batched-tokens 0", "--max-num-seqs -4"})
    EXPECT_THROW((void)config_of(args), CLI::ValidationError) << args;
}

}  // namespace
}  // namespace folio
