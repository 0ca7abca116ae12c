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

// Replies quote a client's words: whatever bytes they hold, the document
// written is UTF-8 (RFC 8259), well-formed sequences kept as they are.
TEST(Json, WritesOnlyUtf8) {
  const std::string kept = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf";
  EXPECT_EQ(Json(kept).dump(), "\"" + kept + "\"");
  struct Case {
    const char* in;
    const char* out;
  };
  for (const Case& c : {
           Case{"\xff", "\xef\xbf\xbd"},                  // never in UTF-8
           Case{"x\x80y", "x\xef\xbf\xbdy"},              // a lone continuation byte
           Case{"\xc3", "\xef\xbf\xbd"},                  // cut short at the end
           Case{"\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd"},  // cut short
           Case{"\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd"},  // overlong NUL
           Case{"\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},  // overlong '/'
           Case{"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},  // a surrogate
           Case{"\xf4\x90\x80\x80",
                "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},  // above U+10FFFF
       }) {
    EXPECT_EQ(Json(std::string(c.in)).dump(), "\"" + std::string(c.out) + "\"") << c.out;
  }
  EXPECT_TRUE(is_utf8(kept));
  EXPECT_FALSE(is_utf8("a\xc3"));
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));
  // A lone surrogate escape reads as bytes that are not UTF-8: written back
  // as U+FFFD, not as they came.
  Json j;
  std::string err;
  ASSERT_TRUE(parse_json(R"(["\ud800"])", &j, &err)) << err;
  EXPECT_EQ(j.dump(), "[\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"]");
}

TEST(Json, BoundsTheNesting) {
  Json j;
  std::string err;
  EXPECT_TRUE(
      parse_json(std::string(kJsonMaxDepth, '[') + std::string(kJsonMaxDepth, ']'), &j, &err));
  EXPECT_FALSE(parse_json(std::string(100000, '['), &j, &err));
  EXPECT_NE(err.find("nested too deeply"), std::string::npos);
}

// The limit is exact: one level more, well-formed and closed, is refused,
// for arrays and objects alike.
TEST(Json, OneLevelPastTheLimitIsRefused) {
  auto arrays = [](size_t n) { return std::string(n, '[') + std::string(n, ']'); };
  auto objects = [](size_t n) {
    std::string s;
    for (size_t i = 1; i < n; ++i) s += R"({"a":)";
    s += "{}";
    return s + std::string(n - 1, '}');
  };
  for (const bool obj : {false, true}) {
    SCOPED_TRACE(obj ? "objects" : "arrays");
    Json j;
    std::string err;
    const auto nested = obj ? objects : arrays;
    EXPECT_TRUE(parse_json(nested(kJsonMaxDepth), &j, &err)) << err;
    err.clear();
    EXPECT_FALSE(parse_json(nested(kJsonMaxDepth + 1), &j, &err));
    EXPECT_NE(err.find("nested too deeply"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace softmrc::control
