// 24-bit PSN arithmetic, in particular at the 2^24 wrap.
#include <gtest/gtest.h>

#include "engine/psn.h"

namespace softmrc::engine {
namespace {

TEST(Psn, AddWrapsAtTwoToTheTwentyFour) {
  EXPECT_EQ(psn_add(0xfffffe, 1), 0xffffffu);
  EXPECT_EQ(psn_add(0xffffff, 1), 0u);
  EXPECT_EQ(psn_add(0xfffff0, 0x20), 0x10u);
}

TEST(Psn, DiffIsSignedAndContinuousAcrossTheWrap) {
  EXPECT_EQ(psn_diff(0, 0xffffff), 1);
  EXPECT_EQ(psn_diff(0xffffff, 0), -1);
  EXPECT_EQ(psn_diff(5, 0xfffffb), 10);
  EXPECT_EQ(psn_diff(0x7fffff, 0), 0x7fffff);
  EXPECT_EQ(psn_diff(0x800000, 0), -0x800000);
}

TEST(Psn, BeforeOrdersPsnsAcrossTheWrap) {
  EXPECT_TRUE(psn_before(0xfffff0, 3));
  EXPECT_FALSE(psn_before(3, 0xfffff0));
  EXPECT_FALSE(psn_before(7, 7));
}

TEST(Psn, DiffIgnoresBitsAboveTwentyFour) {
  EXPECT_EQ(psn_diff(0x1000005, 3), 2);
}

}  // namespace
}  // namespace softmrc::engine
