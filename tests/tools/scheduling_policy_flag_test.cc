// --scheduling-policy as users type it: fcfs, priority (vLLM's) and lof (SGLang's longest output
// first) map to SchedulePolicy; any other value fails the command line and the config. And the
// scheduler's measuring switches read from the environment (FOLIO_DECODE_ROWS,
// FOLIO_ADMISSION_RATIO).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tools/engine_flags.h"

namespace folio {
namespace {

TEST(SchedulingPolicyFlag, NamesMapToThePolicy) {
  EXPECT_EQ(tools::EngineFlags{}.scheduling_policy, "fcfs");
  for (const auto& [name, want] : std::vector<std::pair<std::string, SchedulePolicy>>{
           {"fcfs", SchedulePolicy::kFcfs},
           {"priority", SchedulePolicy::kPriority},
           {"lof", SchedulePolicy::kLongestOutputFirst}}) {
    CLI::App app;
    tools::EngineFlags f;
    tools::add_engine_flags(&app, f);
    app.parse("--scheduling-policy " + name, /*program_name_included=*/false);
    auto c = tools::to_engine_config(f);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().to_string();
    EXPECT_EQ(c->sched.policy, want) << name;
  }
}

TEST(SchedulingPolicyFlag, OtherNamesAreErrors) {
  CLI::App app;
  tools::EngineFlags f;
  tools::add_engine_flags(&app, f);
  EXPECT_THROW(app.parse("--scheduling-policy sjf", /*program_name_included=*/false),
               CLI::ValidationError);
  tools::EngineFlags g;
  g.scheduling_policy = "LOF";  // set without the command line: the config still refuses it
  auto c = tools::to_engine_config(g);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--scheduling-policy"), std::string::npos);
}

// The default flags' config with the environment variable `name` set to `value` (nullptr:
// unset), and unset again after: the scheduler's measuring switches are read from it.
Result<EngineConfig> config_with_env(const char* name, const char* value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  auto c = tools::to_engine_config(tools::EngineFlags{});
  unsetenv(name);
  return c;
}

// FOLIO_DECODE_ROWS, the measuring switch of SchedulerConfig::decode_rows_longest_first.
TEST(SchedulingPolicyFlag, DecodeRowsFromTheEnvironment) {
  auto rows = [](const char* v) { return config_with_env("FOLIO_DECODE_ROWS", v); };
  auto unset = rows(nullptr);
  ASSERT_TRUE(unset.ok());
  EXPECT_TRUE(unset->sched.decode_rows_longest_first);  // the default since session 42
  auto on = rows("longest-first");
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->sched.decode_rows_longest_first);
  auto queue = rows("queue");
  ASSERT_TRUE(queue.ok());
  EXPECT_FALSE(queue->sched.decode_rows_longest_first);
  auto bad = rows("longest");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("FOLIO_DECODE_ROWS"), std::string::npos);
}

// FOLIO_ADMISSION_RATIO, the measuring switch of SchedulerConfig::reactive_headroom: reactive
// unless it says sglang; anything else is an error naming it.
TEST(SchedulingPolicyFlag, AdmissionRatioFromTheEnvironment) {
  auto with = [](const char* v) { return config_with_env("FOLIO_ADMISSION_RATIO", v); };
  auto unset = with(nullptr);
  ASSERT_TRUE(unset.ok());
  EXPECT_TRUE(unset->sched.reactive_headroom);
  auto sglang = with("sglang");
  ASSERT_TRUE(sglang.ok());
  EXPECT_FALSE(sglang->sched.reactive_headroom);
  auto reactive = with("reactive");
  ASSERT_TRUE(reactive.ok());
  EXPECT_TRUE(reactive->sched.reactive_headroom);
  auto bad = with("SGLang");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("FOLIO_ADMISSION_RATIO"), std::string::npos);
}

}  // namespace
}  // namespace folio
