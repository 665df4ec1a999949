// env_int: unset and empty give the fallback; whole integers in range are read; anything else
// is an error that names the variable and its value.
#include "base/env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace folio {
namespace {

constexpr const char* kVar = "FOLIO_ENV_INT_TEST";

TEST(EnvInt, UnsetOrEmptyGivesTheFallback) {
  unsetenv(kVar);
  auto r = env_int(kVar, 7, 0, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
  setenv(kVar, "", 1);
  r = env_int(kVar, 3, 0, 10);
  unsetenv(kVar);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 3);
}

TEST(EnvInt, ReadsWholeIntegersInRange) {
  for (auto [text, want] : {std::pair{"0", 0}, std::pair{"10", 10}, std::pair{"-2", -2}}) {
    setenv(kVar, text, 1);
    auto r = env_int(kVar, 5, -2, 10);
    ASSERT_TRUE(r.ok()) << text;
    EXPECT_EQ(*r, want) << text;
  }
  unsetenv(kVar);
}

TEST(EnvInt, RejectsMalformedAndOutOfRangeValuesByName) {
  for (const char* bad : {"four", "3x", "11", "-3", "1.5"}) {
    setenv(kVar, bad, 1);
    auto r = env_int(kVar, 5, -2, 10);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().to_string().find(std::string(kVar) + "=" + bad), std::string::npos)
        << r.status().to_string();
    EXPECT_NE(r.status().to_string().find("[-2, 10]"), std::string::npos);
  }
  unsetenv(kVar);
}

}  // namespace
}  // namespace folio
