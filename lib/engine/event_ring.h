// The endpoint's event queue: a Ring<Event> whose last slots only a QP's
// move to ERROR may take.
//
// Events wait until the caller polls them, and a full queue refuses the
// newcomer (counted in events_lost). For most events that costs a
// notification; for kQpError it would cost the caller its only word that
// the QP failed (softmrcd's application would never get QP_FATAL). So the
// queue keeps a slot per QP beyond its size for them: a QP raises one
// each time it enters ERROR, and leaves ERROR only by a reset, so only a
// caller that resets and fails a QP again without polling between could
// need more, and that one is counted too.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "engine/ring.h"
#include "engine/types.h"

namespace softmrc::engine {

class EventRing {
 public:
  // `size` (rounded up to a power of two) for any event, and `max_qps`
  // more for kQpError. Allocates.
  void init(uint32_t size, uint32_t max_qps) {
    limit_ = std::bit_ceil(std::max(size, 1u));
    ring_.init(limit_ + max_qps);
  }
  bool push(const Event& e) {
    if (e.type != EventType::kQpError && ring_.size() >= limit_) return false;
    return ring_.push(e);
  }
  bool empty() const { return ring_.empty(); }
  const Event& front() { return ring_.front(); }
  void pop() { ring_.pop(); }
  void restart_if_empty() { ring_.restart_if_empty(); }

 private:
  Ring<Event> ring_;
  uint32_t limit_ = 0;
};

}  // namespace softmrc::engine
