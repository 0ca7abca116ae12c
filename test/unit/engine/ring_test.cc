// The engine's fixed-capacity FIFO.
#include "engine/ring.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace softmrc::engine {
namespace {

TEST(Ring, KeepsOrderAcrossTheWrapAndRefusesWhenFull) {
  Ring<uint32_t> r;
  r.init(3);  // rounded up to 4
  ASSERT_EQ(r.capacity(), 4u);
  for (uint32_t round = 0; round < 3; ++round) {
    for (uint32_t v = 0; v < 4; ++v) ASSERT_TRUE(r.push(round * 10 + v));
    EXPECT_FALSE(r.push(99));
    for (uint32_t v = 0; v < 4; ++v, r.pop()) ASSERT_EQ(r.front(), round * 10 + v);
    EXPECT_TRUE(r.empty());
  }
}

TEST(Ring, RestartIfEmptyReusesTheFirstSlotOnlyWhenEmpty) {
  Ring<uint32_t> r;
  r.init(8);
  r.push(1);
  r.push(2);
  r.pop();
  r.restart_if_empty();  // one entry left: nothing moves
  EXPECT_EQ(r.head(), 1u);
  EXPECT_EQ(r.front(), 2u);
  r.pop();
  r.restart_if_empty();
  EXPECT_EQ(r.head(), 0u);
  EXPECT_EQ(r.tail(), 0u);
  uint32_t* slot = r.emplace();
  EXPECT_EQ(slot, &r.at(0));  // the slot a drained queue used first, still in the cache
  *slot = 7;
  EXPECT_EQ(r.front(), 7u);
}

TEST(Ring, RestartAtContinuesFromAnyPositionThroughTheWrapOf32Bits) {
  Ring<uint32_t> r;
  r.init(4);
  r.push(1);
  r.restart_at(UINT32_MAX - 1);  // not empty: nothing moves
  EXPECT_EQ(r.head(), 0u);
  r.pop();
  r.restart_at(UINT32_MAX - 1);
  EXPECT_EQ(r.head(), UINT32_MAX - 1);
  EXPECT_TRUE(r.empty());
  for (uint32_t v = 10; v < 14; ++v) ASSERT_TRUE(r.push(v));
  EXPECT_TRUE(r.full());
  EXPECT_EQ(r.tail(), 2u);
  EXPECT_EQ(r.at(UINT32_MAX), 11u);
  EXPECT_EQ(r.at(0), 12u);
  for (uint32_t v = 10; v < 14; ++v, r.pop()) ASSERT_EQ(r.front(), v);
  EXPECT_TRUE(r.empty());
}

}  // namespace
}  // namespace softmrc::engine
