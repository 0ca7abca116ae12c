// A single-producer single-consumer ring of fixed-size entries in memory
// that two processes share: an application and softmrcd, one ring per
// direction (work requests in, completions out). No locks, no system calls.
//
// Layout in the shared region (ring_bytes() in all):
//
//   RingHeader  the producer's index, then the consumer's, each alone on
//               its cache line so the two sides never write the same line
//   T[capacity] the entries; capacity a power of two
//
// Indices run free as 32-bit counters (entry i lives at i & (capacity - 1)),
// so the ring is empty when they are equal and full when they differ by the
// capacity, across the wrap at 2^32 too.
//
// Memory ordering. The producer writes entries, then publishes them with a
// release store of `prod`; the consumer loads `prod` with acquire before it
// reads them, and hands their slots back with a release store of `cons`
// after it has copied them out; the producer loads `cons` with acquire
// before it overwrites a slot. Each side keeps its own index privately (the
// shared copy is only ever written by its owner) and a cached copy of the
// other's, re-read only when the cache says empty or full: one cache-line
// transfer per burst instead of one per entry.
//
// Trust. The two sides may distrust each other: softmrcd must survive an
// application that writes garbage into the ring. So a side never reads its
// own index back from shared memory, entries are copied out before anyone
// looks at them (a later scribble cannot change what was validated), and an
// index of the other side that cannot be right (more than `capacity` from
// ours, in either direction) marks the ring corrupt: from then on it moves
// nothing, and the owner of this end decides what to do (softmrcd fails the
// application's QPs). Nothing outside the entries is ever read or written.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace softmrc::shm {

inline constexpr size_t kCacheLine = 64;

struct RingHeader {
  alignas(kCacheLine) std::atomic<uint32_t> prod;
  alignas(kCacheLine) std::atomic<uint32_t> cons;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "an index must be usable across processes");
static_assert(sizeof(RingHeader) == 2 * kCacheLine);

// Bytes of a ring of `capacity` entries of `entry_bytes` each, header included.
constexpr size_t ring_bytes(uint32_t capacity, size_t entry_bytes) {
  return sizeof(RingHeader) + size_t{capacity} * entry_bytes;
}

// Capacities are powers of two from 2 to 2^24.
inline constexpr uint32_t kMaxRingCapacity = 1u << 24;
constexpr bool valid_ring_capacity(uint32_t capacity) {
  return capacity >= 2 && capacity <= kMaxRingCapacity && std::has_single_bit(capacity);
}

// The creator of the region (softmrcd) formats each ring once, before the
// other side maps it. `start` is where both indices begin (tests start near
// the wrap).
void format_ring(void* at, uint32_t start = 0);

// What a side does with the other's index. Shared by both ends.
class RingEnd {
 public:
  bool corrupt() const { return corrupt_; }
  uint32_t capacity() const { return mask_ + 1; }

 protected:
  // `at` is a formatted ring of `capacity` entries; both ends must agree.
  void attach(void* at, uint32_t capacity, bool producer);

  RingHeader* header_ = nullptr;
  unsigned char* entries_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t own_ = 0;    // our index, private
  uint32_t other_ = 0;  // the other side's, as last read
  bool corrupt_ = false;
};

template <typename T>
class RingProducer : public RingEnd {
  static_assert(std::is_trivially_copyable_v<T>, "entries are copied byte for byte");

 public:
  void attach(void* at, uint32_t capacity) { RingEnd::attach(at, capacity, true); }

  // Appends up to n entries; returns how many went in (0 when full or
  // corrupt). The consumer sees all of them at once.
  uint32_t enqueue_burst(const T* in, uint32_t n) {
    if (corrupt_) return 0;
    uint32_t room = capacity() - (own_ - other_);
    if (room < n) {
      if (!refresh()) return 0;
      room = capacity() - (own_ - other_);
    }
    n = n < room ? n : room;
    for (uint32_t i = 0; i < n; ++i)
      std::memcpy(entries_ + size_t{(own_ + i) & mask_} * sizeof(T), &in[i], sizeof(T));
    own_ += n;
    header_->prod.store(own_, std::memory_order_release);
    return n;
  }

  // Entries the consumer has not taken yet, as far as this side knows.
  uint32_t in_flight() const { return own_ - other_; }

 private:
  bool refresh() {
    const uint32_t cons = header_->cons.load(std::memory_order_acquire);
    // The consumer can only have moved forward, and not past what was
    // published: cons in [other_, own_].
    if (cons - other_ > own_ - other_) {
      corrupt_ = true;
      return false;
    }
    other_ = cons;
    return true;
  }
};

template <typename T>
class RingConsumer : public RingEnd {
  static_assert(std::is_trivially_copyable_v<T>, "entries are copied byte for byte");

 public:
  void attach(void* at, uint32_t capacity) { RingEnd::attach(at, capacity, false); }

  // Copies out up to n entries, oldest first, and frees their slots;
  // returns how many (0 when empty or corrupt).
  uint32_t dequeue_burst(T* out, uint32_t n) {
    if (corrupt_) return 0;
    uint32_t avail = other_ - own_;
    if (avail < n) {
      if (!refresh()) return 0;
      avail = other_ - own_;
    }
    n = n < avail ? n : avail;
    if (n == 0) return 0;
    for (uint32_t i = 0; i < n; ++i)
      std::memcpy(&out[i], entries_ + size_t{(own_ + i) & mask_} * sizeof(T), sizeof(T));
    own_ += n;
    header_->cons.store(own_, std::memory_order_release);
    return n;
  }

 private:
  bool refresh() {
    const uint32_t prod = header_->prod.load(std::memory_order_acquire);
    // The producer can only have moved forward, and not past the slots
    // this side has freed: prod in [other_, own_ + capacity].
    if (prod - own_ > capacity() || prod - own_ < other_ - own_) {
      corrupt_ = true;
      return false;
    }
    other_ = prod;
    return true;
  }
};

}  // namespace softmrc::shm
