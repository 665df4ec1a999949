// Log levels by name (FOLIO_LOG_LEVEL's values) and the level filter.
#include "base/log.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace folio {
namespace {

TEST(LogLevel, ParsesVllmNamesInAnyCase) {
  struct Case {
    const char* name;
    LogLevel want;
  };
  for (const Case& c : {Case{"debug", LogLevel::kDebug}, Case{"DEBUG", LogLevel::kDebug},
                        Case{"Info", LogLevel::kInfo}, Case{"warning", LogLevel::kWarn},
                        Case{"WARN", LogLevel::kWarn}, Case{"error", LogLevel::kError},
                        Case{"off", LogLevel::kOff}}) {
    LogLevel got = LogLevel::kInfo;
    EXPECT_TRUE(parse_log_level(c.name, &got)) << c.name;
    EXPECT_EQ(got, c.want) << c.name;
  }
}

TEST(LogLevel, RejectsOtherNames) {
  for (const char* bad : {"", "verbose", "10", "debug ", "critical"}) {
    LogLevel got = LogLevel::kWarn;
    EXPECT_FALSE(parse_log_level(bad, &got)) << "'" << bad << "'";
    EXPECT_EQ(got, LogLevel::kWarn) << "unchanged on failure";
  }
}

TEST(LogLevel, LinesBelowTheLevelAreDropped) {
  const LogLevel before = log_level();
  testing::internal::CaptureStderr();
  set_log_level(LogLevel::kWarn);
  log_info("hidden info line");
  log_warn("shown warning line");
  set_log_level(LogLevel::kDebug);
  log_debug("shown debug line");
  set_log_level(before);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("hidden info line"), std::string::npos) << err;
  EXPECT_NE(err.find("WARN"), std::string::npos) << err;
  EXPECT_NE(err.find("shown warning line"), std::string::npos) << err;
  EXPECT_NE(err.find("shown debug line"), std::string::npos) << err;
}

}  // namespace
}  // namespace folio
