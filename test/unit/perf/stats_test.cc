// smrc-perf's arithmetic: nearest-rank percentiles (docs/smrc-perf.md) and
// bandwidth.
#include "smrc-perf/stats.h"

#include <gtest/gtest.h>

#include <numeric>

namespace softmrc::perf {
namespace {

// Times 1, 2, ..., n.
LatResult ramp(size_t n) {
  LatResult r;
  r.rtt_us.resize(n);
  std::iota(r.rtt_us.begin(), r.rtt_us.end(), 1.0);
  return r;
}

TEST(Percentile, NearestRankOfAThousand) {
  const LatResult r = ramp(1000);
  EXPECT_EQ(r.percentile(500), 500);
  EXPECT_EQ(r.percentile(990), 990);
  EXPECT_EQ(r.percentile(999), 999);
  EXPECT_EQ(r.percentile(1000), 1000);
}

TEST(Percentile, MedianIsTheLowerMiddleOfAnEvenCount) {
  // At least half the times are <= 2 (of 4) and <= 1 (of 2): not the 3rd
  // or the max, as rounding p x (n - 1) gave.
  EXPECT_EQ(ramp(4).percentile(500), 2);
  EXPECT_EQ(ramp(2).percentile(500), 1);
  EXPECT_EQ(ramp(10).percentile(500), 5);
  EXPECT_EQ(ramp(200).percentile(500), 100);
}

TEST(Percentile, UnderAThousandTimesP999IsTheMax) {
  for (size_t n : {1u, 7u, 200u, 999u}) EXPECT_EQ(ramp(n).percentile(999), n) << n;
  EXPECT_EQ(ramp(1001).percentile(999), 1000);
  EXPECT_EQ(ramp(200).percentile(990), 198);
}

TEST(Percentile, NoTimesGiveZero) {
  EXPECT_EQ(LatResult{}.percentile(500), 0);
  EXPECT_EQ(LatResult{}.average(), 0);
}

TEST(Bandwidth, BitsPerSecondAndMessagesPerSecond) {
  const BwResult r{.size = 4096, .total_ops = 2000, .seconds = 0.5};
  EXPECT_DOUBLE_EQ(r.gbps(), 2000 * 4096 * 8 / 0.5 / 1e9);
  EXPECT_DOUBLE_EQ(r.mpps(), 2000 / 0.5 / 1e6);
}

TEST(Bandwidth, TheLargestRunDoesNotWrap) {
  // --iters 1000000000 x --qps 4096 messages of 64 MiB: 2^71 bits.
  const BwResult r{.size = 64 << 20, .total_ops = 4096ull * 1'000'000'000, .seconds = 1};
  EXPECT_DOUBLE_EQ(r.gbps(), 4096e9 * (64 << 20) * 8 / 1e9);
}

}  // namespace
}  // namespace softmrc::perf
