// The shared-memory SPSC ring: empty and full, order across the 2^32 index
// wrap, bursts, an index scribbled by the other side (the ring turns
// corrupt and moves nothing), and two threads passing a numbered stream
// with random burst sizes (seeded; SHM_SEED replays a failure).
#include "shm/spsc_ring.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace softmrc::shm::test {
namespace {

struct Entry {
  uint64_t seq;
  uint32_t payload[6];
};

// A ring in its own aligned buffer, as a shared region would hold it.
class Region {
 public:
  explicit Region(uint32_t capacity, uint32_t start = 0)
      : bytes_(ring_bytes(capacity, sizeof(Entry)) / kCacheLine + 1) {
    format_ring(at(), start);
  }
  void* at() { return bytes_.data(); }
  RingHeader& header() { return *static_cast<RingHeader*>(at()); }

 private:
  struct alignas(kCacheLine) Line {
    unsigned char b[kCacheLine];
  };
  std::vector<Line> bytes_;
};

Entry entry(uint64_t seq) {
  Entry e{};
  e.seq = seq;
  for (uint32_t i = 0; i < 6; ++i) e.payload[i] = static_cast<uint32_t>(seq * 7 + i);
  return e;
}

TEST(SpscRing, EmptyRingGivesNothingAndAFullRingTakesNothingMore) {
  Region r(8);
  RingProducer<Entry> p;
  RingConsumer<Entry> c;
  p.attach(r.at(), 8);
  c.attach(r.at(), 8);
  Entry out[16];
  EXPECT_EQ(c.dequeue_burst(out, 16), 0u);
  Entry in[16];
  for (uint32_t i = 0; i < 16; ++i) in[i] = entry(i);
  EXPECT_EQ(p.enqueue_burst(in, 16), 8u) << "as many as fit";
  EXPECT_EQ(p.enqueue_burst(in, 1), 0u);
  EXPECT_EQ(p.in_flight(), 8u);
  EXPECT_EQ(c.dequeue_burst(out, 3), 3u);
  EXPECT_EQ(p.enqueue_burst(in + 8, 16), 3u) << "the freed slots";
  EXPECT_EQ(c.dequeue_burst(out + 3, 16), 8u);
  for (uint32_t i = 0; i < 11; ++i) EXPECT_EQ(out[i].seq, i);
  EXPECT_FALSE(p.corrupt());
  EXPECT_FALSE(c.corrupt());
}

TEST(SpscRing, EntriesComeOutInOrderAcrossTheIndexWrap) {
  Region r(4, UINT32_MAX - 5);
  RingProducer<Entry> p;
  RingConsumer<Entry> c;
  p.attach(r.at(), 4);
  c.attach(r.at(), 4);
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 10; ++round) {
    Entry in[3] = {entry(next_in), entry(next_in + 1), entry(next_in + 2)};
    ASSERT_EQ(p.enqueue_burst(in, 3), 3u);
    next_in += 3;
    Entry out[4];
    ASSERT_EQ(c.dequeue_burst(out, 4), 3u);
    for (uint32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(out[i].seq, next_out);
      EXPECT_EQ(out[i].payload[5], entry(next_out).payload[5]);
      ++next_out;
    }
  }
  EXPECT_LT(r.header().prod.load(), 100u) << "the indices wrapped";
}

TEST(SpscRing, AProducerIndexBeyondTheFreeSlotsMakesTheConsumerCorrupt) {
  Region r(8);
  RingConsumer<Entry> c;
  c.attach(r.at(), 8);
  r.header().prod.store(9);  // a scribble: more entries than the ring holds
  Entry out[16];
  EXPECT_EQ(c.dequeue_burst(out, 16), 0u);
  EXPECT_TRUE(c.corrupt());
  r.header().prod.store(2);  // even a plausible value later is not trusted
  EXPECT_EQ(c.dequeue_burst(out, 16), 0u);
}

TEST(SpscRing, AProducerIndexThatMovesBackMakesTheConsumerCorrupt) {
  Region r(8);
  RingProducer<Entry> p;
  RingConsumer<Entry> c;
  p.attach(r.at(), 8);
  c.attach(r.at(), 8);
  Entry in[4] = {entry(0), entry(1), entry(2), entry(3)};
  ASSERT_EQ(p.enqueue_burst(in, 4), 4u);
  Entry out[8];
  ASSERT_EQ(c.dequeue_burst(out, 1), 1u);  // sees prod = 4
  r.header().prod.store(2);                // takes back published entries
  EXPECT_EQ(c.dequeue_burst(out, 8), 0u) << "from then on the ring moves nothing";
  EXPECT_TRUE(c.corrupt());
}

TEST(SpscRing, AConsumerIndexPastWhatWasPublishedMakesTheProducerCorrupt) {
  Region r(4);
  RingProducer<Entry> p;
  p.attach(r.at(), 4);
  Entry in[4] = {entry(0), entry(1), entry(2), entry(3)};
  ASSERT_EQ(p.enqueue_burst(in, 4), 4u);
  r.header().cons.store(6);  // freed more than was ever published
  EXPECT_EQ(p.enqueue_burst(in, 1), 0u);
  EXPECT_TRUE(p.corrupt());
}

TEST(SpscRing, AttachingToAnImpossibleRingGivesACorruptEnd) {
  Region r(8);
  r.header().prod.store(100);
  RingConsumer<Entry> c;
  c.attach(r.at(), 8);
  EXPECT_TRUE(c.corrupt());
  Entry out[4];
  EXPECT_EQ(c.dequeue_burst(out, 4), 0u);
  Region other(8);
  RingProducer<Entry> p;
  p.attach(other.at(), 6);  // not a power of two
  EXPECT_TRUE(p.corrupt());
  EXPECT_EQ(p.enqueue_burst(out, 1), 0u);
}

uint64_t seed_or_env(uint64_t fallback) {
  const char* s = std::getenv("SHM_SEED");
  return s ? std::strtoull(s, nullptr, 0) : fallback;
}

TEST(SpscRing, TwoThreadsPassANumberedStreamInOrderWithRandomBursts) {
  constexpr uint64_t kEntries = 20'000;
  for (uint64_t seed = seed_or_env(1), end = seed + 3; seed < end; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: SHM_SEED=" + std::to_string(seed) +
                 ")");
    Region r(64, static_cast<uint32_t>(seed * 0x9e3779b9u));
    RingProducer<Entry> p;
    RingConsumer<Entry> c;
    p.attach(r.at(), 64);
    c.attach(r.at(), 64);
    std::thread producer([&] {
      std::mt19937_64 rng(seed);
      Entry in[32];
      for (uint64_t next = 0; next < kEntries;) {
        const uint32_t want =
            static_cast<uint32_t>(std::min<uint64_t>(1 + rng() % 32, kEntries - next));
        for (uint32_t i = 0; i < want; ++i) in[i] = entry(next + i);
        const uint32_t put = p.enqueue_burst(in, want);
        if (p.corrupt()) return;
        if (put == 0) std::this_thread::yield();  // a busy test machine may have one core
        next += put;
      }
    });
    std::mt19937_64 rng(seed ^ 0xabcdef);
    uint64_t expected = 0, mismatches = 0;
    Entry out[32];
    while (expected < kEntries && !c.corrupt()) {
      const uint32_t got = c.dequeue_burst(out, 1 + rng() % 32);
      if (got == 0) std::this_thread::yield();
      for (uint32_t i = 0; i < got; ++i) {
        const Entry want = entry(expected++);
        mismatches += out[i].seq != want.seq || out[i].payload[3] != want.payload[3];
      }
    }
    producer.join();
    EXPECT_FALSE(c.corrupt());
    EXPECT_FALSE(p.corrupt());
    EXPECT_EQ(expected, kEntries);
    EXPECT_EQ(mismatches, 0u);
  }
}

}  // namespace
}  // namespace softmrc::shm::test
