#include "base/status.h"

#include <gtest/gtest.h>

namespace folio {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("x must be positive, got " + std::to_string(x));
  return x;
}

Result<int> doubled(int x) {
  FOLIO_ASSIGN_OR_RETURN(int v, parse_positive(x));
  return 2 * v;
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status().ok());
  Status s = not_found("model.safetensors: no such file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.to_string(), "not found: model.safetensors: no such file");
}

TEST(Result, PropagatesErrorsAndValues) {
  auto good = doubled(4);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("-1"), std::string::npos);
}

}  // namespace
}  // namespace folio
