// Seeds for randomised tests: 1..count, or only $ENGINE_SEED when set (to
// replay a failure), or 1..$ENGINE_SEEDS (a longer soak). Tests put the
// seed in a SCOPED_TRACE so that a failure prints it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace softmrc::engine::test {

inline std::vector<uint64_t> seeds(uint64_t count) {
  if (const char* one = std::getenv("ENGINE_SEED")) return {std::strtoull(one, nullptr, 10)};
  if (const char* n = std::getenv("ENGINE_SEEDS")) count = std::strtoull(n, nullptr, 10);
  std::vector<uint64_t> v(count);
  for (uint64_t i = 0; i < count; ++i) v[i] = i + 1;
  return v;
}

}  // namespace softmrc::engine::test
