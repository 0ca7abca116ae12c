// EV expansion, validation and generation against the OCP controller API.
//
// The reference vectors come from running the OCP example program
// examples/ev_expansion/ev_expansion.c (seeded with srandom(0)): each pairs
// the stored EV bytes it printed with the expanded EV it printed.
#include "wire/ev_expansion.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace softmrc::wire {
namespace {

// Hex digits, most significant byte first, zero-filled to 32 bytes.
EvValue value_from_hex(const std::string& hex) {
  EvValue v;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    v.bytes[i / 2] = static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16));
  }
  return v;
}

std::string hex_of(const uint8_t* bytes, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kDigits[bytes[i] >> 4];
    s += kDigits[bytes[i] & 0xf];
  }
  return s;
}

EvFormat format_of(EvMode mode, std::vector<uint8_t> widths) {
  EvFormat f;
  f.mode = mode;
  f.field_count = static_cast<uint8_t>(widths.size());
  for (size_t i = 0; i < widths.size(); ++i) f.widths[i] = widths[i];
  return f;
}

EvProfile profile_of(std::vector<EvField> fields) {
  EvProfile p;
  p.field_count = static_cast<uint8_t>(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) p.fields[i] = fields[i];
  return p;
}

// Expands `stored_hex` and returns the wire EV as 64 hex digits.
std::string expand_hex(const EvFormat& fmt, const EvProfile& prof, const std::string& stored_hex) {
  WireEv wire;
  const EvExpansionError e = expand_ev(fmt, prof, value_from_hex(stored_hex), &wire);
  EXPECT_EQ(e, EvExpansionError::kOk) << ev_expansion_error_name(e);
  return hex_of(wire.bytes, sizeof(wire.bytes));
}

std::string padded(const std::string& hex) {
  return hex + std::string(64 - hex.size(), '0');
}

EvFormat weird_mask_format() {
  return format_of(EvMode::kStev, {16, 16});
}
EvProfile weird_mask_profile() {
  return profile_of({{16, 0x1000, 1, 0xff, 0x0f0f}, {16, 0x2000, 1, 0xff, 0x0f0f}});
}

EvFormat srv6_format() {
  return format_of(EvMode::kSrv6, {32, 16, 16, 16, 16});
}
EvProfile srv6_fixed_locator_profile() {
  std::vector<EvField> fields = {{32, 0x13131313, 0, 0, 0}};
  for (uint32_t i = 1; i < 5; ++i) fields.push_back({16, i << 8, 1, 0xf, 0xf});
  return profile_of(fields);
}

TEST(EvExpansion, StevWeirdMaskScattersEvBitsOntoMaskBitsInOrder) {
  // MRC-NOTES 4.3, first worked example: byte 0x33 fills field 0's mask
  // 0x0f0f (high nibble to bits 11..8), byte 0x12 fills field 1's.
  EXPECT_EQ(expand_hex(weird_mask_format(), weird_mask_profile(), "3312"), padded("13032102"));
  EXPECT_EQ(expand_hex(weird_mask_format(), weird_mask_profile(), "e33e"), padded("1e03230e"));
  EXPECT_EQ(expand_hex(weird_mask_format(), weird_mask_profile(), "b5b5"), padded("1b052b05"));
  EXPECT_EQ(expand_hex(weird_mask_format(), weird_mask_profile(), "97fa"), padded("19072f0a"));
}

TEST(EvExpansion, Srv6FixedLocatorAndTierBytesMatchReference) {
  // MRC-NOTES 4.3, second worked example: DA 1313:1313:0109:020b:0307:0409::
  EXPECT_EQ(expand_hex(srv6_format(), srv6_fixed_locator_profile(), "9b79"),
            padded("131313130109020b03070409"));
  EXPECT_EQ(expand_hex(srv6_format(), srv6_fixed_locator_profile(), "26c7"),
            padded("1313131301020206030c0407"));
  EXPECT_FALSE(ev_format_needs_srh(srv6_format()));
}

TEST(EvExpansion, StevTwoFullFieldsCopyTheStoredValue) {
  const EvFormat fmt = format_of(EvMode::kStev, {16, 16});
  const EvProfile prof = profile_of({{16, 0, 0, 0, 0xffff}, {16, 0, 0, 0, 0xffff}});
  EXPECT_EQ(expand_hex(fmt, prof, "f3b04256"), padded("f3b04256"));
  EXPECT_EQ(expand_hex(fmt, prof, "32250009"), padded("32250009"));
}

TEST(EvExpansion, StevOne32BitFieldCopiesTheStoredValue) {
  const EvFormat fmt = format_of(EvMode::kStev, {32});
  const EvProfile prof = profile_of({{32, 0, 0, 0, 0xffffffff}});
  EXPECT_EQ(expand_hex(fmt, prof, "67fb6a4e"), padded("67fb6a4e"));
}

TEST(EvExpansion, StevLowNibbleMaskKeepsInitValAbove) {
  const EvFormat fmt = format_of(EvMode::kStev, {16, 16});
  const EvProfile prof = profile_of({{16, 0x100, 1, 0xf, 0xf}, {16, 0x200, 1, 0xf, 0xf}});
  EXPECT_EQ(expand_hex(fmt, prof, "a4"), padded("010a0204"));
  EXPECT_EQ(expand_hex(fmt, prof, "c4"), padded("010c0204"));
}

TEST(EvExpansion, Srv6FewerProfileFieldsThanFormatLeavesTheRestZero) {
  const EvProfile prof =
      profile_of({{32, 0xdeaddead, 0, 0, 0}, {16, 0, 0, 0, 0xffff}, {16, 0, 0, 0, 0xffff}});
  EXPECT_EQ(expand_hex(srv6_format(), prof, "e298f115"), padded("deaddeade298f115"));
}

TEST(EvExpansion, Srv6NarrowFieldIsRightAlignedInItsFormatField) {
  std::vector<EvField> fields = {{32, 0x42424242, 0, 0, 0}};
  for (int i = 0; i < 4; ++i) fields.push_back({4, 0, 1, 0xf, 0xf});
  EXPECT_EQ(expand_hex(srv6_format(), profile_of(fields), "78ba"),
            padded("4242424200070008000b000a"));
}

TEST(EvExpansion, Srv6WithSrhFillsTheSegmentFromByte16) {
  const EvFormat fmt = format_of(EvMode::kSrv6, {32, 16, 16, 16, 16, 16, 16, 32, 16, 16});
  std::vector<EvField> fields = {{32, 0xcafecafe, 0, 0, 0}};
  for (int i = 0; i < 6; ++i) fields.push_back({16, 0, 0, 0, 0xffff});
  fields.push_back({32, 0xdecafbad, 0, 0, 0});
  for (int i = 0; i < 2; ++i) fields.push_back({16, 0, 0, 0, 0xffff});
  const EvProfile prof = profile_of(fields);
  EXPECT_TRUE(ev_format_needs_srh(fmt));
  EXPECT_EQ(expand_hex(fmt, prof, "b8a7310e14c80962ae4b9dd6587a4c16"),
            padded("cafecafeb8a7310e14c80962ae4b9dd6decafbad587a4c16"));
}

TEST(EvExpansion, Srv6FullWidthUsesAll256Bits) {
  // Eight 32-bit fields: DA from the first four, SRH segment from the rest.
  const EvFormat fmt = format_of(EvMode::kSrv6, {32, 32, 32, 32, 32, 32, 32, 32});
  std::vector<EvField> fields;
  for (int i = 0; i < 8; ++i) fields.push_back({32, 0, 0, 0, 0xffffffff});
  const std::string all = "00112233445566778899aabbccddeeff0123456789abcdeffedcba9876543210";
  EXPECT_EQ(expand_hex(fmt, profile_of(fields), all), all);
}

TEST(EvExpansion, FormatFieldWiderThan32BitsIsZeroFilledAbove) {
  const EvFormat fmt = format_of(EvMode::kSrv6, {64, 64});
  const EvProfile prof = profile_of({{32, 0xfc000000, 0, 0, 0}, {16, 0, 0, 0, 0xffff}});
  EXPECT_EQ(expand_hex(fmt, prof, "abcd"), padded("00000000fc000000000000000000abcd"));
}

TEST(EvExpansion, UdpTiersFillTheSourcePortMsbFirst) {
  // The three-tier layout of examples/mrc_ctl_gen_ev.md: T0 8 | T1 4 | T2 4 bits.
  const EvFormat fmt = format_of(EvMode::kUdp, {8, 4, 4});
  const EvProfile prof = profile_of({{8, 0, 0, 179, 0xff}, {4, 0, 0, 15, 0xf}, {4, 0, 0, 15, 0xf}});
  WireEv wire;
  ASSERT_EQ(expand_ev(fmt, prof, value_from_hex("b3a5"), &wire), EvExpansionError::kOk);
  EXPECT_EQ(wire.bytes[0], 0xb3);
  EXPECT_EQ(wire.bytes[1], 0xa5);
  EXPECT_EQ(hex_of(wire.bytes + 2, 30), std::string(60, '0'));
}

TEST(EvExpansion, UdpNarrowFormatOccupiesTheHighBitsOfThePort) {
  const EvFormat fmt = format_of(EvMode::kUdp, {8});
  const EvProfile prof = profile_of({{8, 0x80, 0, 0x7f, 0x7f}});
  EXPECT_EQ(expand_hex(fmt, prof, "0a"), padded("85"));  // 0x80 | 0x05 (7 EV bits: 0000101)
}

TEST(EvExpansion, MaskBitsOverwriteInitValBitsUnderThem) {
  const EvFormat fmt = format_of(EvMode::kUdp, {16});
  const EvProfile prof = profile_of({{16, 0xffff, 0, 0xf, 0x00f0}});
  EXPECT_EQ(expand_hex(fmt, prof, "00"), padded("ff0f"));
  EXPECT_EQ(expand_hex(fmt, prof, "a0"), padded("ffaf"));
}

TEST(EvExpansion, FixedFieldsConsumeNoEvBits) {
  const EvFormat fmt = format_of(EvMode::kStev, {8, 8, 16});
  const EvProfile prof =
      profile_of({{8, 0x5a, 0, 0, 0}, {8, 0, 0, 0, 0xff}, {16, 0xbeef, 0, 0, 0}});
  EXPECT_EQ(expand_hex(fmt, prof, "c3"), padded("5ac3beef"));
}

TEST(EvExpansion, SetBitPastTheConsumedBitsIsRejected) {
  const EvFormat fmt = format_of(EvMode::kUdp, {16});
  const EvProfile prof = profile_of({{16, 0, 0, 0, 0xffff}});
  WireEv wire;
  wire.bytes[0] = 0x77;
  EXPECT_EQ(expand_ev(fmt, prof, value_from_hex("ffff80"), &wire),
            EvExpansionError::kEvBitsBeyondFields);
  EXPECT_EQ(wire.bytes[0], 0x77) << "output must be untouched on error";
  EvValue last_byte;
  last_byte.bytes[31] = 1;
  EXPECT_EQ(expand_ev(fmt, prof, last_byte, &wire), EvExpansionError::kEvBitsBeyondFields);
  EXPECT_EQ(expand_ev(fmt, prof, value_from_hex("ffff"), &wire), EvExpansionError::kOk);
}

TEST(EvExpansion, ModeWidthLimitsAreUdp16Stev32Srv6256) {
  EXPECT_EQ(ev_mode_max_width_bits(EvMode::kUdp), 16u);
  EXPECT_EQ(ev_mode_max_width_bits(EvMode::kStev), 32u);
  EXPECT_EQ(ev_mode_max_width_bits(EvMode::kSrv6), 256u);
  EXPECT_EQ(check_ev_format(format_of(EvMode::kUdp, {8, 8})), EvExpansionError::kOk);
  EXPECT_EQ(check_ev_format(format_of(EvMode::kUdp, {8, 9})),
            EvExpansionError::kFormatTooWideForMode);
  EXPECT_EQ(check_ev_format(format_of(EvMode::kStev, {16, 16})), EvExpansionError::kOk);
  EXPECT_EQ(check_ev_format(format_of(EvMode::kStev, {16, 17})),
            EvExpansionError::kFormatTooWideForMode);
  EXPECT_EQ(check_ev_format(format_of(EvMode::kSrv6, {128, 128})), EvExpansionError::kOk);
  EXPECT_EQ(check_ev_format(format_of(EvMode::kSrv6, {128, 128, 1})),
            EvExpansionError::kFormatTooWideForMode);
}

TEST(EvExpansion, SrhIsNeededOnlyPast128Srv6Bits) {
  EXPECT_FALSE(ev_format_needs_srh(format_of(EvMode::kSrv6, {128})));
  EXPECT_TRUE(ev_format_needs_srh(format_of(EvMode::kSrv6, {128, 1})));
  EXPECT_FALSE(ev_format_needs_srh(format_of(EvMode::kStev, {32})));
}

TEST(EvExpansionCheck, FormatNeedsOneTo32FieldsOfNonZeroWidth) {
  EXPECT_EQ(check_ev_format(format_of(EvMode::kStev, {})), EvExpansionError::kFormatNoFields);
  EXPECT_EQ(check_ev_format(format_of(EvMode::kStev, {16, 0})),
            EvExpansionError::kFormatFieldWidthZero);
  EvFormat many = format_of(EvMode::kSrv6, std::vector<uint8_t>(kMaxEvFields, 1));
  EXPECT_EQ(check_ev_format(many), EvExpansionError::kOk);
  many.field_count = kMaxEvFields + 1;
  EXPECT_EQ(check_ev_format(many), EvExpansionError::kFormatTooManyFields);
}

TEST(EvExpansionCheck, ProfileErrorsEachNameTheBrokenRule) {
  const EvFormat fmt = format_of(EvMode::kStev, {16, 16});
  struct Case {
    std::vector<EvField> fields;
    EvExpansionError want;
  };
  const Case cases[] = {
      {{}, EvExpansionError::kProfileNoFields},
      {{{16, 0, 0, 0, 0}, {8, 0, 0, 0, 0}, {8, 0, 0, 0, 0}},
       EvExpansionError::kProfileTooManyFields},
      {{{33, 0, 0, 0, 0}}, EvExpansionError::kFieldWidthTooWide},
      {{{8, 0x100, 0, 0, 0}}, EvExpansionError::kInitValWiderThanField},
      {{{8, 0, 0, 0, 0x1f0}}, EvExpansionError::kMaskOutsideField},
      {{{8, 0, 0, 0x10, 0x0f}}, EvExpansionError::kMaxValWiderThanMask},
      {{{8, 0, 0, 1, 0}}, EvExpansionError::kMaxValWiderThanMask},  // fixed field, max 0
      {{{8, 0, 5, 4, 0x0f}}, EvExpansionError::kMinValAboveMaxVal},
      {{{32, 0, 0, 0, 0}, {8, 0, 0, 0, 0}}, EvExpansionError::kTotalWidthExceedsFormat},
      {{{24, 0, 0, 0, 0}, {8, 0, 0, 0, 0}}, EvExpansionError::kFieldWiderThanFormat},
      {{{16, 0xffff, 0, 0xffff, 0xffff}, {16, 0, 0, 0, 0}}, EvExpansionError::kOk},
  };
  for (const Case& c : cases) {
    const EvProfile prof = profile_of(c.fields);
    EXPECT_EQ(check_ev_profile(fmt, prof), c.want)
        << "got " << ev_expansion_error_name(check_ev_profile(fmt, prof)) << ", want "
        << ev_expansion_error_name(c.want);
    WireEv wire;
    if (c.want != EvExpansionError::kOk) {
      EXPECT_EQ(expand_ev(fmt, prof, EvValue{}, &wire), c.want);
    }
  }
}

TEST(EvExpansionCheck, ProfileCheckRejectsABadFormatFirst) {
  EXPECT_EQ(check_ev_profile(format_of(EvMode::kUdp, {32}), profile_of({{16, 0, 0, 0, 0}})),
            EvExpansionError::kFormatTooWideForMode);
}

TEST(EvExpansionCheck, Full32BitFieldAcceptsEveryValue) {
  const EvFormat fmt = format_of(EvMode::kStev, {32});
  EXPECT_EQ(check_ev_profile(fmt, profile_of({{32, 0xffffffff, 0, 0xffffffff, 0xffffffff}})),
            EvExpansionError::kOk);
}

TEST(EvExpansionCheck, EveryErrorHasADistinctNameAndAnErrnoClass) {
  std::set<std::string> names;
  for (size_t i = 0; i < static_cast<size_t>(EvExpansionError::kCount); ++i) {
    const auto e = static_cast<EvExpansionError>(i);
    const std::string name = ev_expansion_error_name(e);
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
    const int err = ev_expansion_errno(e);
    if (e == EvExpansionError::kOk) {
      EXPECT_EQ(err, 0);
    } else {
      EXPECT_TRUE(err == EINVAL || err == E2BIG) << name;
    }
  }
  EXPECT_EQ(ev_expansion_errno(EvExpansionError::kFormatTooManyFields), E2BIG);
  EXPECT_EQ(ev_expansion_errno(EvExpansionError::kTotalWidthExceedsFormat), E2BIG);
  EXPECT_EQ(ev_expansion_errno(EvExpansionError::kMaskOutsideField), EINVAL);
  EXPECT_EQ(ev_expansion_errno(EvExpansionError::kEvBitsBeyondFields), EINVAL);
  EXPECT_STREQ(ev_expansion_error_name(EvExpansionError::kCount), "unknown");
}

// --- Generated mode -------------------------------------------------------

uint64_t count_of(const EvFormat& fmt, const EvProfile& prof, uint64_t cap) {
  uint64_t n = 0;
  EXPECT_EQ(ev_generated_count(fmt, prof, cap, &n), EvExpansionError::kOk);
  return n;
}

TEST(EvGeneration, CountIsTheProductOfMaskedRangesCappedByTheDevice) {
  // examples/mrc_ctl_gen_ev.md: 256 * 16 * 16 = 65536 EVs.
  const EvFormat fmt = format_of(EvMode::kStev, {8, 4, 4});
  const EvProfile prof = profile_of({{8, 0, 0, 255, 0xff}, {4, 0, 0, 15, 0xf}, {4, 0, 0, 15, 0xf}});
  EXPECT_EQ(count_of(fmt, prof, UINT64_MAX), 65536u);
  EXPECT_EQ(count_of(fmt, prof, 4096), 4096u);
  EXPECT_EQ(count_of(fmt, prof, 0), 0u);
  // max_val = 179 instead of denying 180..255 afterwards
  const EvProfile capped =
      profile_of({{8, 0, 0, 179, 0xff}, {4, 0, 0, 15, 0xf}, {4, 0, 0, 15, 0xf}});
  EXPECT_EQ(count_of(fmt, capped, UINT64_MAX), 180u * 16 * 16);
}

TEST(EvGeneration, FixedFieldsAndSingleValueRangesCountOnce) {
  EXPECT_EQ(count_of(srv6_format(), srv6_fixed_locator_profile(), UINT64_MAX), 15u * 15 * 15 * 15);
  const EvFormat fmt = format_of(EvMode::kStev, {16, 16});
  EXPECT_EQ(count_of(fmt, profile_of({{16, 0xabcd, 0, 0, 0}}), UINT64_MAX), 1u);
  EXPECT_EQ(count_of(fmt, profile_of({{16, 0, 7, 7, 0xff}}), UINT64_MAX), 1u);
}

TEST(EvGeneration, CountSaturatesAtTheCapInsteadOfOverflowing) {
  const EvFormat fmt = format_of(EvMode::kSrv6, {32, 32, 32, 32, 32, 32, 32, 32});
  std::vector<EvField> fields;
  for (int i = 0; i < 8; ++i) fields.push_back({32, 0, 0, 0xffffffff, 0xffffffff});
  EXPECT_EQ(count_of(fmt, profile_of(fields), UINT64_MAX), UINT64_MAX);
  EXPECT_EQ(count_of(fmt, profile_of({fields[0]}), UINT64_MAX), uint64_t{1} << 32);
  EXPECT_EQ(count_of(fmt, profile_of({fields[0], fields[1]}), UINT64_MAX - 1), UINT64_MAX - 1);
}

TEST(EvGeneration, LastMaskedFieldVariesFastest) {
  const EvFormat fmt = srv6_format();
  const EvProfile prof = srv6_fixed_locator_profile();  // four tiers, values 1..15
  auto wire_hex = [&](uint64_t index) {
    EvValue stored;
    EXPECT_EQ(generate_ev(fmt, prof, index, &stored), EvExpansionError::kOk);
    WireEv wire;
    EXPECT_EQ(expand_ev(fmt, prof, stored, &wire), EvExpansionError::kOk);
    return hex_of(wire.bytes, 12);
  };
  EXPECT_EQ(wire_hex(0), "131313130101020103010401");
  EXPECT_EQ(wire_hex(1), "131313130101020103010402");
  EXPECT_EQ(wire_hex(14), "13131313010102010301040f");
  EXPECT_EQ(wire_hex(15), "131313130101020103020401");
  EXPECT_EQ(wire_hex(15 * 15 * 15), "131313130102020103010401");
  EXPECT_EQ(wire_hex(15 * 15 * 15 * 15 - 1), "13131313010f020f030f040f");
  EvValue stored;
  EXPECT_EQ(generate_ev(fmt, prof, 15 * 15 * 15 * 15, &stored),
            EvExpansionError::kGenIndexOutOfRange);
}

TEST(EvGeneration, StoredValuesPackMaskedFieldsMsbFirst) {
  // Field values 0x1 and 0x2 in 4-bit masks pack into stored byte 0x12.
  const EvFormat fmt = format_of(EvMode::kStev, {16, 16});
  const EvProfile prof = profile_of({{16, 0x100, 1, 0xf, 0xf}, {16, 0x200, 2, 0xf, 0xf}});
  EvValue stored;
  ASSERT_EQ(generate_ev(fmt, prof, 0, &stored), EvExpansionError::kOk);
  EXPECT_EQ(hex_of(stored.bytes, 32), padded("12"));
}

TEST(EvGeneration, EveryGeneratedEvIsDistinctAscendingAndExpands) {
  const EvFormat fmt = format_of(EvMode::kUdp, {4, 8, 4});
  const EvProfile prof =
      profile_of({{4, 0x8, 0, 5, 0x7}, {8, 0xa0, 2, 9, 0x0f}, {4, 0, 3, 3, 0xc}});
  const uint64_t n = count_of(fmt, prof, UINT64_MAX);
  ASSERT_EQ(n, 6u * 8 * 1);
  std::string previous;
  std::set<std::string> wires;
  for (uint64_t i = 0; i < n; ++i) {
    EvValue stored;
    ASSERT_EQ(generate_ev(fmt, prof, i, &stored), EvExpansionError::kOk);
    const std::string s = hex_of(stored.bytes, 32);
    EXPECT_GT(s, previous) << "index " << i;
    previous = s;
    WireEv wire;
    ASSERT_EQ(expand_ev(fmt, prof, stored, &wire), EvExpansionError::kOk);
    EXPECT_TRUE(wires.insert(hex_of(wire.bytes, 32)).second) << "index " << i;
  }
}

TEST(EvGeneration, IndexOutOfRangeBeyondAFull64BitProductIsStillDetected) {
  const EvFormat fmt = format_of(EvMode::kStev, {32});
  const EvProfile prof = profile_of({{32, 0, 0, 0xffffffff, 0xffffffff}});
  EvValue stored;
  EXPECT_EQ(generate_ev(fmt, prof, 0xffffffffu, &stored), EvExpansionError::kOk);
  EXPECT_EQ(hex_of(stored.bytes, 4), "ffffffff");
  EXPECT_EQ(generate_ev(fmt, prof, uint64_t{1} << 32, &stored),
            EvExpansionError::kGenIndexOutOfRange);
}

// Reads the format slot of field `i` back out of a wire EV (slots <= 32 bits).
uint32_t slot_value(const WireEv& wire, const EvFormat& fmt, size_t i) {
  uint32_t offset = 0;
  for (size_t k = 0; k < i; ++k) offset += fmt.widths[k];
  uint32_t v = 0;
  for (uint32_t b = offset; b < offset + fmt.widths[i]; ++b) {
    v = (v << 1) | ((wire.bytes[b / 8] >> (7 - b % 8)) & 1u);
  }
  return v;
}

// Gathers the bits of `v` under `mask` into the low bits (inverse of the
// overlay step), written independently of the library.
uint32_t gather(uint32_t v, uint32_t mask) {
  uint32_t out = 0;
  int k = 0;
  for (int bit = 0; bit < 32; ++bit) {
    if ((mask >> bit) & 1u) out |= ((v >> bit) & 1u) << k++;
  }
  return out;
}

// A random UDP, STEV or SRv6 format and profile, a random generated EV of it,
// and its expansion checked field by field. Everything comes from `seed`, so
// a failing seed replays alone.
void check_random_generated_ev(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto below = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  // 1..8 format fields of 1..32 bits, as many as the mode has room for.
  const EvMode modes[] = {EvMode::kUdp, EvMode::kStev, EvMode::kSrv6};
  const EvMode mode = modes[below(3)];
  std::vector<uint8_t> widths;
  uint32_t total = 0;
  const uint32_t limit = ev_mode_max_width_bits(mode);
  for (uint32_t i = 0, n = 1 + below(8); i < n; ++i) {
    const uint32_t w = 1 + below(32);
    if (total + w > limit) break;
    widths.push_back(static_cast<uint8_t>(w));
    total += w;
  }
  if (widths.empty()) widths.push_back(static_cast<uint8_t>(std::min<uint32_t>(limit, 32)));
  const EvFormat fmt = format_of(mode, widths);
  std::vector<EvField> fields;
  for (size_t i = 0, n = 1 + below(static_cast<uint32_t>(widths.size())); i < n; ++i) {
    EvField f;
    f.width = 1 + below(widths[i]);
    const uint32_t wmask = f.width == 32 ? ~0u : (1u << f.width) - 1;
    f.init_val = static_cast<uint32_t>(rng()) & wmask;
    f.mask = below(4) ? static_cast<uint32_t>(rng()) & wmask : 0;
    const int bits = std::popcount(f.mask);
    const uint32_t vmax = bits == 32 ? ~0u : (1u << bits) - 1;
    const uint32_t a = static_cast<uint32_t>(rng()) & vmax;
    const uint32_t b = static_cast<uint32_t>(rng()) & vmax;
    f.min_val = std::min(a, b);
    f.max_val = std::max(a, b);
    fields.push_back(f);
  }
  const EvProfile prof = profile_of(fields);
  ASSERT_EQ(check_ev_profile(fmt, prof), EvExpansionError::kOk);

  const uint64_t n = count_of(fmt, prof, UINT64_MAX);
  ASSERT_GE(n, 1u);
  const uint64_t index = rng() % n;
  EvValue stored;
  ASSERT_EQ(generate_ev(fmt, prof, index, &stored), EvExpansionError::kOk);
  WireEv wire;
  ASSERT_EQ(expand_ev(fmt, prof, stored, &wire), EvExpansionError::kOk);

  uint64_t rest = index;
  for (size_t i = fields.size(); i-- > 0;) {
    const EvField& f = fields[i];
    const uint32_t v = slot_value(wire, fmt, i);
    EXPECT_EQ(v & ~f.mask, f.init_val & ~f.mask) << "field " << i;
    if (f.mask == 0) continue;
    const uint64_t range = uint64_t{f.max_val} - f.min_val + 1;
    EXPECT_EQ(gather(v, f.mask), f.min_val + rest % range) << "field " << i;
    rest /= range;
  }
  EXPECT_EQ(rest, 0u);
}

TEST(EvGeneration, RandomProfilesRoundTripEveryFieldThroughTheWire) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    check_random_generated_ev(seed);
  }
}

}  // namespace
}  // namespace softmrc::wire
