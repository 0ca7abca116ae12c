// What smrc-perf reports, computed from what it measured: no I/O, so the
// arithmetic is tested on its own (test/unit/perf).
#pragma once

#include <cstdint>
#include <vector>

namespace softmrc::perf {

struct BwResult {
  uint64_t size = 0;
  uint64_t total_ops = 0;
  double seconds = 0;  // first post to last completion
  double gbps() const;
  double mpps() const;
};

struct LatResult {
  uint64_t size = 0;
  uint64_t total_ops = 0;
  std::vector<double> rtt_us;  // sorted
  // Nearest rank: the smallest time that at least per_mille / 1000 of all
  // times do not exceed (1000: the largest), 0 without times. Always a
  // time that was measured; with fewer than 1000 times, p99.9 is the max.
  double percentile(uint32_t per_mille) const;
  double average() const;
};

}  // namespace softmrc::perf
