// The earliest timer among many QPs: an indexed binary min-heap holding at
// most one deadline per key (a QP index), so moving a QP's deadline is
// O(log n) and finding the earliest is O(1). Fixed capacity set at init();
// nothing allocates afterwards.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/path/ev_set.h"  // TimeNs, kNever

namespace softmrc::engine {

class TimerHeap {
 public:
  void init(uint32_t keys) {
    heap_.clear();
    heap_.reserve(keys);
    pos_.assign(keys, kAbsent);
    at_.assign(keys, kNever);
  }
  bool empty() const { return heap_.empty(); }
  // The earliest deadline (kNever when empty) and its key.
  TimeNs top_time() const { return heap_.empty() ? kNever : at_[heap_[0]]; }
  uint32_t top_key() const { return heap_[0]; }

  // Sets `key`'s deadline; kNever removes it.
  void set(uint32_t key, TimeNs at) {
    uint32_t i = pos_[key];
    if (at == kNever) {
      if (i != kAbsent) remove_at(i);
      return;
    }
    if (i == kAbsent) {
      i = static_cast<uint32_t>(heap_.size());
      heap_.push_back(key);
      pos_[key] = i;
      at_[key] = at;
      sift_up(i);
      return;
    }
    const TimeNs old = at_[key];
    at_[key] = at;
    if (at < old)
      sift_up(i);
    else
      sift_down(i);
  }

 private:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  void place(uint32_t i, uint32_t key) {
    heap_[i] = key;
    pos_[key] = i;
  }
  void sift_up(uint32_t i) {
    const uint32_t key = heap_[i];
    while (i > 0) {
      const uint32_t parent = (i - 1) / 2;
      if (at_[heap_[parent]] <= at_[key]) break;
      place(i, heap_[parent]);
      i = parent;
    }
    place(i, key);
  }
  void sift_down(uint32_t i) {
    const uint32_t key = heap_[i];
    const auto n = static_cast<uint32_t>(heap_.size());
    for (;;) {
      uint32_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && at_[heap_[child + 1]] < at_[heap_[child]]) ++child;
      if (at_[key] <= at_[heap_[child]]) break;
      place(i, heap_[child]);
      i = child;
    }
    place(i, key);
  }
  void remove_at(uint32_t i) {
    const uint32_t key = heap_[i];
    const uint32_t last = heap_.back();
    heap_.pop_back();
    pos_[key] = kAbsent;
    at_[key] = kNever;
    if (key == last) return;
    place(i, last);
    sift_up(i);
    sift_down(pos_[last]);
  }

  std::vector<uint32_t> heap_;  // keys, heap-ordered by at_
  std::vector<uint32_t> pos_;   // key -> index in heap_, or kAbsent
  std::vector<TimeNs> at_;      // key -> deadline
};

}  // namespace softmrc::engine
