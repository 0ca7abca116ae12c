// Numbers from the command line and from operators' commands, checked
// strictly: decimal digits only (no sign, no spaces, no trailing text),
// within a range the caller names in its message.
#pragma once

#include <cstdint>
#include <string_view>

namespace softmrc::cli {

// False, leaving *out alone, unless `s` is a decimal integer in [lo, hi].
bool parse_uint(std::string_view s, uint64_t lo, uint64_t hi, uint64_t* out);

}  // namespace softmrc::cli
