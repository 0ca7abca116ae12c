// JSON for the control socket: values survive a round trip, and untrusted
// text is refused with the byte where it went wrong.
#include "control/json.h"

#include <gtest/gtest.h>

namespace softmrc::control {
namespace {

TEST(Json, RoundTripKeepsIntegersAndOrder) {
  Json j;
  std::string err;
  ASSERT_TRUE(parse_json(R"( {"b":18446744073709551615,"a":[1,-2,0.5,true,null,"x\"\n\u00e9"]} )",
                         &j, &err))
      << err;
  uint64_t v = 0;
  ASSERT_TRUE(j.find("b")->as_uint(&v));
  EXPECT_EQ(v, UINT64_MAX);
  EXPECT_EQ(j.key(0), "b");
  EXPECT_EQ(j.dump(),
            "{\"b\":18446744073709551615,\"a\":[1,-2,0.5,true,null,\"x\\\"\\n\xc3\xa9\"]}");
}

// Found by test/fuzz/json_fuzz: -0.0 was written "-0", which reads back
// as the integer 0 and is then written "0".
TEST(Json, WritesNegativeZeroAsZero) {
  Json j;
  std::string err;
  ASSERT_TRUE(parse_json("[-0.0,0.0,-0]", &j, &err)) << err;
  EXPECT_EQ(j.dump(), "[0,0,0]");
  EXPECT_EQ(Json(-0.0).dump(), "0");
}

TEST(Json, RefusesBadText) {
  Json j;
  std::string err;
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "1 2", "{\"a\":01x}", "-", "\"\\q\""})
    EXPECT_FALSE(parse_json(bad, &j, &err)) << bad;
  EXPECT_FALSE(parse_json("[1,]", &j, &err));
  EXPECT_EQ(err, "at byte 3: not a JSON value");
}

TEST(Json, BoundsTheNesting) {
  Json j;
  std::string err;
  EXPECT_TRUE(
      parse_json(std::string(kJsonMaxDepth, '[') + std::string(kJsonMaxDepth, ']'), &j, &err));
  EXPECT_FALSE(parse_json(std::string(100000, '['), &j, &err));
  EXPECT_NE(err.find("nested too deeply"), std::string::npos);
}

}  // namespace
}  // namespace softmrc::control
