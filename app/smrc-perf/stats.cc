#include "stats.h"

#include <algorithm>

namespace softmrc::perf {

double BwResult::gbps() const {
  // In double: the bits of --iters x --qps messages of --max-size, all at
  // their limits, are 2^71 and would wrap a uint64_t.
  return static_cast<double>(total_ops) * static_cast<double>(size) * 8 / seconds / 1e9;
}

double BwResult::mpps() const {
  return static_cast<double>(total_ops) / seconds / 1e6;
}

double LatResult::percentile(uint32_t per_mille) const {
  if (rtt_us.empty()) return 0;
  // rank = ceil(per_mille / 1000 x n), at least 1; in integers, so that
  // 99.9% of 1000 is 999 exactly.
  const uint64_t rank = std::max<uint64_t>((uint64_t{per_mille} * rtt_us.size() + 999) / 1000, 1);
  return rtt_us[std::min<uint64_t>(rank, rtt_us.size()) - 1];
}

double LatResult::average() const {
  double sum = 0;
  for (double v : rtt_us) sum += v;
  return rtt_us.empty() ? 0 : sum / static_cast<double>(rtt_us.size());
}

}  // namespace softmrc::perf
