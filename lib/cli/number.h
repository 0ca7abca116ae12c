// Numbers from the command line, operators' commands and configuration
// files, checked strictly: decimal only (no spaces, '+', hex or trailing
// text); the caller names the range in its message.
#pragma once

#include <cstdint>
#include <string_view>

namespace softmrc::cli {

// False, leaving *out alone, unless `s` is a decimal integer in [lo, hi].
bool parse_uint(std::string_view s, uint64_t lo, uint64_t hi, uint64_t* out);

// False, leaving *out alone, unless `s` is a finite number in decimal
// notation ("1.25", ".5", "-2", "1e-3"); "-0" reads as 0.
bool parse_decimal(std::string_view s, double* out);

}  // namespace softmrc::cli
