// Registered memory: translation stays inside regions, whatever the input.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "engine/memory_table.h"

namespace softmrc::engine {
namespace {

class MemoryTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    table.init(4);
    ASSERT_TRUE(
        table.register_region(Region{0x1000, buf.size(), buf.data(), kAccessRemoteWrite}, &key)
            .ok());
  }
  std::vector<uint8_t> buf = std::vector<uint8_t>(256);
  MemoryTable table;
  uint32_t key = 0;
};

TEST_F(MemoryTableTest, TranslatesAnAddressInsideTheRegion) {
  EXPECT_EQ(table.translate(key, 0x1000, 256, kAccessRemoteWrite, kDefaultDomain), buf.data());
  EXPECT_EQ(table.translate(key, 0x1010, 16, kAccessRemoteWrite, kDefaultDomain),
            buf.data() + 0x10);
  EXPECT_EQ(table.translate(key, 0x1100, 0, kAccessRemoteWrite, kDefaultDomain), buf.data() + 256);
}

TEST_F(MemoryTableTest, RefusesAnyByteOutsideTheRegion) {
  EXPECT_EQ(table.translate(key, 0xfff, 1, kAccessRemoteWrite, kDefaultDomain), nullptr);
  EXPECT_EQ(table.translate(key, 0x1000, 257, kAccessRemoteWrite, kDefaultDomain), nullptr);
  EXPECT_EQ(table.translate(key, 0x10ff, 2, kAccessRemoteWrite, kDefaultDomain), nullptr);
  EXPECT_EQ(table.translate(key, 0x1101, 0, kAccessRemoteWrite, kDefaultDomain), nullptr);
  EXPECT_EQ(table.translate(key, UINT64_MAX, 2, kAccessRemoteWrite, kDefaultDomain), nullptr);
  EXPECT_EQ(table.translate(key, 0x1010, UINT64_MAX, kAccessRemoteWrite, kDefaultDomain), nullptr);
}

TEST_F(MemoryTableTest, RefusesAnAccessTheRegionDoesNotGrant) {
  EXPECT_EQ(table.translate(key, 0x1000, 1, kAccessLocalWrite, kDefaultDomain), nullptr);
}

TEST_F(MemoryTableTest, KeyOfADeregisteredRegionNeverMatchesAgain) {
  ASSERT_TRUE(table.deregister_region(key).ok());
  EXPECT_EQ(table.translate(key, 0x1000, 1, kAccessRemoteWrite, kDefaultDomain), nullptr);
  uint32_t key2 = 0;
  ASSERT_TRUE(
      table.register_region(Region{0x1000, buf.size(), buf.data(), kAccessRemoteWrite}, &key2)
          .ok());
  EXPECT_NE(key2, key);
  EXPECT_EQ(table.translate(key, 0x1000, 1, kAccessRemoteWrite, kDefaultDomain), nullptr);
  EXPECT_NE(table.translate(key2, 0x1000, 1, kAccessRemoteWrite, kDefaultDomain), nullptr);
  EXPECT_FALSE(table.deregister_region(key).ok());
}

// A slot's key generation (16 bits) wraps past 65535 to 1, never to 0: in
// a one-slot table a key is never 0, and a zeroed key (an rkey field nobody
// filled in) never reaches a region, however often the slot is reused.
TEST(MemoryTable, GenerationWrapsPastZeroSoAZeroedKeyNeverMatches) {
  std::vector<uint8_t> buf(64);
  MemoryTable table;
  table.init(1);
  std::set<uint32_t> keys;
  for (uint32_t cycle = 0; cycle < UINT16_MAX + 2; ++cycle) {
    uint32_t k = 0;
    ASSERT_TRUE(
        table.register_region(Region{0, buf.size(), buf.data(), kAccessRemoteWrite}, &k).ok());
    ASSERT_NE(k, 0u) << "cycle " << cycle;
    ASSERT_EQ(table.translate(0, 0, 1, kAccessRemoteWrite, kDefaultDomain), nullptr)
        << "cycle " << cycle;
    ASSERT_EQ(table.translate(k, 0, 1, kAccessRemoteWrite, kDefaultDomain), buf.data());
    ASSERT_TRUE(table.deregister_region(k).ok());
    keys.insert(k);
  }
  // 65535 generations, each handed out once before the first comes back.
  EXPECT_EQ(keys.size(), size_t{UINT16_MAX});
}

TEST_F(MemoryTableTest, AKeyReachesItsRegionOnlyFromTheRegionsDomain) {
  uint32_t other = 0;
  ASSERT_TRUE(table
                  .register_region(Region{0x1000, buf.size(), buf.data(),
                                          kAccessLocalWrite | kAccessRemoteWrite, 7},
                                   &other)
                  .ok());
  EXPECT_EQ(table.translate(other, 0x1000, 1, kAccessRemoteWrite, 7), buf.data());
  EXPECT_EQ(table.translate(other, 0x1000, 1, 0, 7), buf.data());
  EXPECT_EQ(table.translate(other, 0x1000, 1, kAccessRemoteWrite, 8), nullptr);
  EXPECT_EQ(table.translate(other, 0x1000, 1, 0, kDefaultDomain), nullptr);
  EXPECT_EQ(table.translate(key, 0x1000, 1, kAccessRemoteWrite, 7), nullptr);
}

TEST_F(MemoryTableTest, UnknownKeysAndBadRegionsAreRefused) {
  EXPECT_EQ(table.translate(0xdead, 0x1000, 1, kAccessRemoteWrite, kDefaultDomain), nullptr);
  uint32_t k = 0;
  EXPECT_FALSE(table.register_region(Region{0x10, 16, nullptr, 0}, &k).ok());
  EXPECT_FALSE(table.register_region(Region{UINT64_MAX - 4, 16, buf.data(), 0}, &k).ok());
  EXPECT_FALSE(table.register_region(Region{0x10, 16, buf.data(), 0x80}, &k).ok());
}

TEST_F(MemoryTableTest, TableFullIsRefused) {
  uint32_t k = 0;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(table.register_region(Region{0, 1, buf.data(), 0}, &k).ok());
  EXPECT_FALSE(table.register_region(Region{0, 1, buf.data(), 0}, &k).ok());
}

}  // namespace
}  // namespace softmrc::engine
