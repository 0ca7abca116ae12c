// EV expansion and generation (see ev_expansion.h and docs/ev-expansion.md).
//
// Both the stored EV and the wire EV are 256-bit strings read and written
// MSB-first from byte 0; every field moves at most 32 bits at a time.
#include "wire/ev_expansion.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <iterator>

namespace softmrc::wire {
namespace {

// `n` (<= 32) bits starting at bit `offset` of `bytes`, first bit highest.
uint32_t read_bits(const uint8_t* bytes, uint32_t offset, uint32_t n) {
  uint32_t value = 0;
  for (uint32_t i = offset; i < offset + n; ++i) {
    value = (value << 1) | ((bytes[i / 8] >> (7 - i % 8)) & 1u);
  }
  return value;
}

// Writes the low `n` (<= 32) bits of `value` at bit `offset`, highest first.
void write_bits(uint8_t* bytes, uint32_t offset, uint32_t n, uint32_t value) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t pos = offset + i;
    const uint8_t bit = static_cast<uint8_t>(1u << (7 - pos % 8));
    if ((value >> (n - 1 - i)) & 1u) {
      bytes[pos / 8] |= bit;
    } else {
      bytes[pos / 8] &= static_cast<uint8_t>(~bit);
    }
  }
}

// Places the low popcount(mask) bits of `bits` on the set bits of `mask`,
// lowest bit to lowest mask bit (so the first EV bit lands on the highest).
uint32_t deposit(uint32_t bits, uint32_t mask) {
  uint32_t out = 0;
  for (uint32_t m = mask; m != 0; m &= m - 1) {
    if (bits & 1u) out |= m & (~m + 1);  // lowest set bit of m
    bits >>= 1;
  }
  return out;
}

uint32_t width_mask(uint32_t width) {
  return width >= 32 ? ~0u : (1u << width) - 1;
}

EvExpansionError check_field(const EvField& f) {
  if (f.width > kMaxEvFieldWidthBits) return EvExpansionError::kFieldWidthTooWide;
  const uint32_t limit = width_mask(f.width);
  if (f.init_val & ~limit) return EvExpansionError::kInitValWiderThanField;
  if (f.mask & ~limit) return EvExpansionError::kMaskOutsideField;
  // A fixed field (mask 0) therefore needs max_val = min_val = 0.
  if (f.max_val > width_mask(static_cast<uint32_t>(std::popcount(f.mask)))) {
    return EvExpansionError::kMaxValWiderThanMask;
  }
  if (f.min_val > f.max_val) return EvExpansionError::kMinValAboveMaxVal;
  return EvExpansionError::kOk;
}

constexpr const char* kErrorNames[] = {
    "ok",
    "format_no_fields",
    "format_too_many_fields",
    "format_field_width_zero",
    "format_too_wide_for_mode",
    "profile_no_fields",
    "profile_too_many_fields",
    "field_width_too_wide",
    "init_val_wider_than_field",
    "mask_outside_field",
    "max_val_wider_than_mask",
    "min_val_above_max_val",
    "total_width_exceeds_format",
    "field_wider_than_format",
    "ev_bits_beyond_fields",
    "gen_index_out_of_range",
};
static_assert(std::size(kErrorNames) == static_cast<size_t>(EvExpansionError::kCount));

}  // namespace

uint32_t ev_mode_max_width_bits(EvMode mode) {
  switch (mode) {
    case EvMode::kUdp:
      return 16;
    case EvMode::kStev:
      return 32;
    case EvMode::kSrv6:
      return kEvValueBits;
  }
  return 0;
}

const char* ev_expansion_error_name(EvExpansionError error) {
  const auto i = static_cast<size_t>(error);
  return i < std::size(kErrorNames) ? kErrorNames[i] : "unknown";
}

int ev_expansion_errno(EvExpansionError error) {
  switch (error) {
    case EvExpansionError::kOk:
      return 0;
    case EvExpansionError::kFormatTooManyFields:
    case EvExpansionError::kFormatTooWideForMode:
    case EvExpansionError::kProfileTooManyFields:
    case EvExpansionError::kFieldWidthTooWide:
    case EvExpansionError::kTotalWidthExceedsFormat:
    case EvExpansionError::kFieldWiderThanFormat:
      return E2BIG;
    default:
      return EINVAL;
  }
}

EvExpansionError check_ev_format(const EvFormat& format) {
  if (format.field_count == 0) return EvExpansionError::kFormatNoFields;
  if (format.field_count > kMaxEvFields) return EvExpansionError::kFormatTooManyFields;
  uint32_t total = 0;
  for (size_t i = 0; i < format.field_count; ++i) {
    if (format.widths[i] == 0) return EvExpansionError::kFormatFieldWidthZero;
    total += format.widths[i];
  }
  if (total > ev_mode_max_width_bits(format.mode)) return EvExpansionError::kFormatTooWideForMode;
  return EvExpansionError::kOk;
}

EvExpansionError check_ev_profile(const EvFormat& format, const EvProfile& profile) {
  if (const auto e = check_ev_format(format); e != EvExpansionError::kOk) return e;
  if (profile.field_count == 0) return EvExpansionError::kProfileNoFields;
  if (profile.field_count > format.field_count) return EvExpansionError::kProfileTooManyFields;
  uint32_t field_total = 0;
  for (size_t i = 0; i < profile.field_count; ++i) {
    if (const auto e = check_field(profile.fields[i]); e != EvExpansionError::kOk) return e;
    field_total += profile.fields[i].width;
  }
  uint32_t format_total = 0;
  for (size_t i = 0; i < format.field_count; ++i) format_total += format.widths[i];
  if (field_total > format_total) return EvExpansionError::kTotalWidthExceedsFormat;
  // The format limits each field too: a wider field would lose its high bits.
  for (size_t i = 0; i < profile.field_count; ++i) {
    if (profile.fields[i].width > format.widths[i]) return EvExpansionError::kFieldWiderThanFormat;
  }
  return EvExpansionError::kOk;
}

bool ev_format_needs_srh(const EvFormat& format) {
  if (format.mode != EvMode::kSrv6) return false;
  uint32_t total = 0;
  for (size_t i = 0; i < std::min<size_t>(format.field_count, kMaxEvFields); ++i) {
    total += format.widths[i];
  }
  return total > kSrv6DaWidthBits;
}

EvExpansionError expand_ev(const EvFormat& format, const EvProfile& profile, const EvValue& value,
                           WireEv* out) {
  if (const auto e = check_ev_profile(format, profile); e != EvExpansionError::kOk) return e;
  WireEv wire;
  uint32_t src_bit = 0;
  uint32_t dst_bit = 0;
  for (size_t i = 0; i < profile.field_count; ++i) {
    const EvField& f = profile.fields[i];
    uint32_t v = f.init_val;
    if (f.mask != 0) {
      const auto n = static_cast<uint32_t>(std::popcount(f.mask));
      v = (v & ~f.mask) | deposit(read_bits(value.bytes, src_bit, n), f.mask);
      src_bit += n;
    }
    // Right-aligned in the format field; bits above the value stay zero.
    const uint32_t fmt_width = format.widths[i];
    const uint32_t n = std::min(fmt_width, kMaxEvFieldWidthBits);
    write_bits(wire.bytes, dst_bit + fmt_width - n, n, v);
    dst_bit += fmt_width;
  }
  for (uint32_t bit = src_bit; bit < kEvValueBits; ++bit) {
    if ((value.bytes[bit / 8] >> (7 - bit % 8)) & 1u) return EvExpansionError::kEvBitsBeyondFields;
  }
  *out = wire;
  return EvExpansionError::kOk;
}

EvExpansionError ev_generated_count(const EvFormat& format, const EvProfile& profile, uint64_t cap,
                                    uint64_t* count) {
  if (const auto e = check_ev_profile(format, profile); e != EvExpansionError::kOk) return e;
  uint64_t product = 1;
  for (size_t i = 0; i < profile.field_count; ++i) {
    const EvField& f = profile.fields[i];
    if (f.mask == 0) continue;
    const uint64_t range = uint64_t{f.max_val} - f.min_val + 1;
    if (product > cap / range) {  // product * range > cap, without overflowing
      *count = cap;
      return EvExpansionError::kOk;
    }
    product *= range;
  }
  *count = std::min(product, cap);
  return EvExpansionError::kOk;
}

EvExpansionError generate_ev(const EvFormat& format, const EvProfile& profile, uint64_t index,
                             EvValue* out) {
  if (const auto e = check_ev_profile(format, profile); e != EvExpansionError::kOk) return e;
  uint32_t offsets[kMaxEvFields];
  uint32_t bit = 0;
  for (size_t i = 0; i < profile.field_count; ++i) {
    offsets[i] = bit;
    bit += static_cast<uint32_t>(std::popcount(profile.fields[i].mask));
  }
  // Mixed-radix digits of `index`, least significant in the last field.
  EvValue value;
  uint64_t rest = index;
  for (size_t i = profile.field_count; i-- > 0;) {
    const EvField& f = profile.fields[i];
    if (f.mask == 0) continue;
    const uint64_t range = uint64_t{f.max_val} - f.min_val + 1;
    const auto digit = static_cast<uint32_t>(rest % range);
    rest /= range;
    write_bits(value.bytes, offsets[i], static_cast<uint32_t>(std::popcount(f.mask)),
               f.min_val + digit);
  }
  if (rest != 0) return EvExpansionError::kGenIndexOutOfRange;
  *out = value;
  return EvExpansionError::kOk;
}

}  // namespace softmrc::wire
