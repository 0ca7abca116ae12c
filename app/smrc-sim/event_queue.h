// The simulator's future events, earliest first; events at the same time
// come out in the order they were pushed, so a run is deterministic.
//
// A 4-ary heap of 16-byte entries: the time, then one word holding the
// push sequence number (high bits, for the tie order), the type and the
// id. Four children share a cache line, so a sift touches half the lines a
// binary heap of 24-byte entries does; the heap is the simulator's hottest
// structure (it holds an entry per packet in flight).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace softmrc::sim {

enum class EventType : uint8_t {
  kHop,        // a packet reached the far end of a link (id: packet)
  kWake,       // a host's transport is due (id: host)
  kFault,      // the fault schedule has something due
  kRoute,      // the routing control plane has a change due
  kPort,       // a NIC notices its link state (id: index of the port change)
  kStepStart,  // the next training step begins (id: step)
};

struct Event {
  uint64_t at_ns;
  EventType type;
  uint32_t id;
};

class EventQueue {
 public:
  static constexpr uint32_t kIdBits = 26;  // ids (packets, hosts, steps) below 2^26
  static constexpr uint32_t kMaxId = (1u << kIdBits) - 1;

  void push(uint64_t at_ns, EventType type, uint32_t id) {
    const uint64_t word =
        seq_++ << (kIdBits + 3) | uint64_t{static_cast<uint8_t>(type)} << kIdBits | (id & kMaxId);
    heap_.push_back(Entry{at_ns, word});
    sift_up(heap_.size() - 1);
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  Event top() const { return decode(heap_.front()); }
  Event pop() {
    const Event e = decode(heap_.front());
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
    return e;
  }

 private:
  struct Entry {
    uint64_t at;
    uint64_t word;
    bool before(const Entry& o) const { return at != o.at ? at < o.at : word < o.word; }
  };
  static Event decode(const Entry& e) {
    return Event{e.at, static_cast<EventType>(e.word >> kIdBits & 7),
                 static_cast<uint32_t>(e.word & kMaxId)};
  }
  void sift_up(size_t i) {
    const Entry x = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!x.before(heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = x;
  }
  void sift_down(size_t i) {
    const Entry x = heap_[i];
    const size_t n = heap_.size();
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t last = first + 4 < n ? first + 4 : n;
      for (size_t c = first + 1; c < last; ++c)
        if (heap_[c].before(heap_[best])) best = c;
      if (!heap_[best].before(x)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = x;
  }

  std::vector<Entry> heap_;
  uint64_t seq_ = 0;
};

}  // namespace softmrc::sim
