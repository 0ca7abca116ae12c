#include "cli/number.h"

#include <charconv>

namespace softmrc::cli {

bool parse_uint(std::string_view s, uint64_t lo, uint64_t hi, uint64_t* out) {
  uint64_t v = 0;
  const char* end = s.data() + s.size();
  const auto [at, ec] = std::from_chars(s.data(), end, v, 10);
  if (s.empty() || ec != std::errc() || at != end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace softmrc::cli
