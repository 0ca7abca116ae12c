// A fixed-capacity FIFO for the engine's queues (send queue, completions,
// control packets, events). Capacity is a power of two fixed at setup;
// push() on a full ring fails instead of allocating.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace softmrc::engine {

template <typename T>
class Ring {
 public:
  // Rounds `capacity` up to a power of two (at least 1). Allocates.
  void init(uint32_t capacity) {
    buf_.assign(std::bit_ceil(capacity < 1 ? 1u : capacity), T{});
    mask_ = static_cast<uint32_t>(buf_.size()) - 1;
    head_ = tail_ = 0;
  }
  uint32_t capacity() const { return static_cast<uint32_t>(buf_.size()); }
  uint32_t size() const { return tail_ - head_; }
  bool empty() const { return head_ == tail_; }
  bool full() const { return size() == capacity(); }

  // Absolute positions: head() is the oldest entry, tail() one past the newest.
  uint32_t head() const { return head_; }
  uint32_t tail() const { return tail_; }
  T& at(uint32_t pos) { return buf_[pos & mask_]; }
  const T& at(uint32_t pos) const { return buf_[pos & mask_]; }
  T& front() { return at(head_); }

  bool push(const T& v) {
    if (full()) return false;
    buf_[tail_++ & mask_] = v;
    return true;
  }
  // Reserves the next slot and returns it (nullptr when full).
  T* emplace() { return full() ? nullptr : &buf_[tail_++ & mask_]; }
  void pop() { ++head_; }
  void clear() { head_ = tail_; }
  // When empty, starts over at the first slot: a queue drained as often as
  // it fills then cycles through a few slots that stay in the cache instead
  // of walking its whole capacity (a 4096-packet control queue is 768 KiB).
  // Positions taken before are void.
  void restart_if_empty() {
    if (empty()) head_ = tail_ = 0;
  }
  // When empty, continues at absolute position `pos` (the positions wrap
  // at 2^32 like any other). Positions taken before are void.
  void restart_at(uint32_t pos) {
    if (empty()) head_ = tail_ = pos;
  }
  // Drops the entries `pred` selects, keeping the others in order. O(size).
  template <typename Pred>
  void erase_if(Pred pred) {
    for (uint32_t n = size(); n > 0; --n) {
      const T v = front();
      pop();
      if (!pred(v)) push(v);
    }
  }

 private:
  std::vector<T> buf_;
  uint32_t mask_ = 0;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

}  // namespace softmrc::engine
