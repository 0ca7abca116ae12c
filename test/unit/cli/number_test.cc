#include "cli/number.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace softmrc::cli {
namespace {

TEST(ParseUint, AcceptsDecimalIntegersWithinTheRange) {
  uint64_t v = 7;
  EXPECT_TRUE(parse_uint("0", 0, 10, &v));
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(parse_uint("10", 0, 10, &v));
  EXPECT_EQ(v, 10u);
  EXPECT_TRUE(parse_uint("18446744073709551615", 0, UINT64_MAX, &v));
  EXPECT_EQ(v, UINT64_MAX);
}

TEST(ParseUint, RefusesEverythingElseAndLeavesTheOutputAlone) {
  for (const char* bad :
       {"", "-1", "+1", " 1", "1 ", "1x", "0x10", "1.5", "11", "18446744073709551616"}) {
    uint64_t v = 7;
    EXPECT_FALSE(parse_uint(bad, 0, 10, &v)) << "'" << bad << "'";
    EXPECT_EQ(v, 7u) << "'" << bad << "'";
  }
  uint64_t v = 7;
  EXPECT_FALSE(parse_uint("0", 1, 10, &v));  // below the range
  EXPECT_EQ(v, 7u);
}

TEST(ParseDecimal, AcceptsDecimalNotation) {
  const auto read = [](const char* text) {
    double v = 7;
    EXPECT_TRUE(parse_decimal(text, &v)) << "'" << text << "'";
    return v;
  };
  EXPECT_DOUBLE_EQ(read("1.25"), 1.25);
  EXPECT_DOUBLE_EQ(read(".5"), 0.5);
  EXPECT_DOUBLE_EQ(read("-2"), -2);
  EXPECT_DOUBLE_EQ(read("1e-3"), 0.001);
  EXPECT_FALSE(std::signbit(read("-0")));  // printed as 0, not -0
}

TEST(ParseDecimal, RefusesEverythingElseAndLeavesTheOutputAlone) {
  for (const char* bad : {"", "+1", " 1", "1 ", "0x10", "0x1p3", "inf", "nan", "1,5", "1e400"}) {
    double v = 7;
    EXPECT_FALSE(parse_decimal(bad, &v)) << "'" << bad << "'";
    EXPECT_EQ(v, 7) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace softmrc::cli
