// EV expansion: turning a controller's compact EV value into the on-wire EV.
//
// Mirrors the OCP controller API (mrc_ctl.h, "EV Profile attributes"): an
// EV Format profile fixes the wire layout (a mode and an ordered list of
// field widths), an EV profile says how each field is filled (init_val,
// overlaid on the mask bits by bits taken MSB-first from the stored EV), and
// the generated mode enumerates every stored EV a field set allows.
// docs/ev-expansion.md gives the algorithm, the errors and worked examples.
//
// Everything here is pure and allocation-free; it runs when a profile is
// loaded, never per packet.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/packet.h"

namespace softmrc::wire {

inline constexpr size_t kEvValueBytes = 32;  // MRC_CTL_EV_MAX_BYTES
inline constexpr uint32_t kEvValueBits = kEvValueBytes * 8;
inline constexpr size_t kMaxEvFields = 32;            // per format and per profile
inline constexpr uint32_t kMaxEvFieldWidthBits = 32;  // a profile field is a uint32_t

// Widest expanded EV per mode: UDP source port 16, STEV 32, SRv6 256 (128
// in the destination address, 128 more in the one-segment SRH).
uint32_t ev_mode_max_width_bits(EvMode mode);
inline constexpr uint32_t kSrv6DaWidthBits = 128;  // SRv6 bits before the SRH

// A stored EV value as the controller supplies it (explicit mode) or the
// device generates it: bits are consumed MSB-first from bytes[0].
struct EvValue {
  uint8_t bytes[kEvValueBytes] = {};
};

// EV Format profile: the expanded EV is the concatenation of these fields,
// MSB-first from WireEv byte 0.
struct EvFormat {
  EvMode mode = EvMode::kUdp;
  uint8_t field_count = 0;
  uint8_t widths[kMaxEvFields] = {};  // bits, each >= 1
};

// One EV profile field (mrc_ctl_ev_field).
struct EvField {
  uint32_t width = 0;     // bits, <= the format field's width
  uint32_t init_val = 0;  // value before the mask bits are overlaid
  uint32_t min_val = 0;   // generated mode: smallest value of the mask bits
  uint32_t max_val = 0;   // generated mode: largest value of the mask bits
  uint32_t mask = 0;      // where EV bits go; 0 = a fixed field
};

struct EvProfile {
  uint8_t field_count = 0;
  EvField fields[kMaxEvFields] = {};
};

// What is wrong with a format, a profile or a stored EV. The errno class
// each maps to (ev_expansion_errno) is the one mrc_ctl.h documents.
enum class EvExpansionError : uint8_t {
  kOk,
  kFormatNoFields,           // EINVAL: a format needs at least one field
  kFormatTooManyFields,      // E2BIG: more than kMaxEvFields
  kFormatFieldWidthZero,     // EINVAL
  kFormatTooWideForMode,     // E2BIG: sum of widths over ev_mode_max_width_bits
  kProfileNoFields,          // EINVAL
  kProfileTooManyFields,     // E2BIG: more fields than the format has
  kFieldWidthTooWide,        // E2BIG: a field over kMaxEvFieldWidthBits
  kInitValWiderThanField,    // EINVAL: init_val has bits at or above width
  kMaskOutsideField,         // EINVAL: mask has bits at or above width
  kMaxValWiderThanMask,      // EINVAL: max_val > 2^popcount(mask) - 1
  kMinValAboveMaxVal,        // EINVAL
  kTotalWidthExceedsFormat,  // E2BIG: sum of field widths > sum of format widths
  kFieldWiderThanFormat,     // E2BIG: a field wider than its format field
  kEvBitsBeyondFields,       // EINVAL: stored EV has a 1 past the last consumed bit
  kGenIndexOutOfRange,       // EINVAL: index >= the number of generated EVs
  kCount,
};
const char* ev_expansion_error_name(EvExpansionError error);
// EINVAL or E2BIG (0 for kOk), as the controller API reports the error.
int ev_expansion_errno(EvExpansionError error);

EvExpansionError check_ev_format(const EvFormat& format);
// Checks the format, then the profile against it.
EvExpansionError check_ev_profile(const EvFormat& format, const EvProfile& profile);

// Whether an SRv6 format reaches past the destination address, so that
// packets need the one-segment SRH (FrameSpec::srv6_srh).
bool ev_format_needs_srh(const EvFormat& format);

// Expands `value` into `*out` (zero past the format's total width). Checks
// the profile first; on an error `*out` is left unchanged.
EvExpansionError expand_ev(const EvFormat& format, const EvProfile& profile, const EvValue& value,
                           WireEv* out);

// Generated mode. Each masked field takes every value in [min_val, max_val]
// independently; fixed fields (mask 0) take none. The EVs are numbered in
// odometer order: index 0 has every field at min_val and the LAST masked
// field varies fastest, so the stored values ascend with the index.
//
// The number of generated EVs (the product of max_val - min_val + 1 over
// the masked fields), capped at `cap` (e.g. ev_max_count_profile).
EvExpansionError ev_generated_count(const EvFormat& format, const EvProfile& profile, uint64_t cap,
                                    uint64_t* count);
// The stored value of generated EV number `index`; expand it with expand_ev.
EvExpansionError generate_ev(const EvFormat& format, const EvProfile& profile, uint64_t index,
                             EvValue* out);

}  // namespace softmrc::wire
