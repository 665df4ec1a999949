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
  tools::add_engine_flags(&app, f);
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

// vLLM's --long-prefill-token-threshold: off (0) unless given; negative fails the command line,
// and without chunked prefill the config refuses it.
TEST(BatchLimitFlags, LongPrefillTokenThreshold) {
  auto unset = config_of("");
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(unset->sched.long_prefill_token_threshold, 0);
  auto given = config_of("--long-prefill-token-threshold 512");
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->sched.long_prefill_token_threshold, 512);
  EXPECT_THROW((void)config_of("--long-prefill-token-threshold -1"), CLI::ValidationError);
  auto unchunked = config_of(
      "--long-prefill-token-threshold 512 --no-enable-chunked-prefill --max-num-batched-tokens 8192"
      " --max-num-seqs 8 --max-model-len 4096");
  ASSERT_TRUE(unchunked.ok());
  const Status st = unchunked->validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chunked prefill"), std::string::npos) << st.message();
}

// SGLang's --schedule-conservativeness: 0.3 unless given (the admission headroom on), 0 turns it
// off (vLLM's admission), a negative value or one past 100 fails the command line.
TEST(BatchLimitFlags, ScheduleConservativeness) {
  auto unset = config_of("");
  ASSERT_TRUE(unset.ok());
  EXPECT_EQ(unset->sched.schedule_conservativeness, 0.3);
  auto off = config_of("--schedule-conservativeness 0");
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->sched.schedule_conservativeness, 0.0);
  auto more = config_of("--schedule-conservativeness 1.5");
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->sched.schedule_conservativeness, 1.5);
  EXPECT_THROW((void)config_of("--schedule-conservativeness -0.5"), CLI::ValidationError);
  EXPECT_THROW((void)config_of("--schedule-conservativeness 101"), CLI::ValidationError);
  EXPECT_THROW((void)config_of("--schedule-conservativeness lots"), CLI::ValidationError);
}

}  // namespace
}  // namespace folio
