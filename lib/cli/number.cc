#include "cli/number.h"

#include <charconv>
#include <cmath>

namespace softmrc::cli {

bool parse_uint(std::string_view s, uint64_t lo, uint64_t hi, uint64_t* out) {
  uint64_t v = 0;
  const char* end = s.data() + s.size();
  const auto [at, ec] = std::from_chars(s.data(), end, v, 10);
  if (s.empty() || ec != std::errc() || at != end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_decimal(std::string_view s, double* out) {
  double v = 0;
  const char* end = s.data() + s.size();
  // Unlike strtod, from_chars takes no space, '+', hex or locale's comma.
  const auto [at, ec] = std::from_chars(s.data(), end, v, std::chars_format::general);
  if (s.empty() || ec != std::errc() || at != end || !std::isfinite(v)) return false;
  *out = v + 0.0;  // -0 is 0, and is printed so
  return true;
}

}  // namespace softmrc::cli
