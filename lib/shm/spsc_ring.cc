// The parts of the ring that need no entry type. See spsc_ring.h.
#include "shm/spsc_ring.h"

#include <new>

namespace softmrc::shm {

void format_ring(void* at, uint32_t start) {
  auto* h = new (at) RingHeader;
  h->prod.store(start, std::memory_order_relaxed);
  h->cons.store(start, std::memory_order_release);
}

// Both indices are read once, here: from then on each side trusts only its
// own private copy of its index.
void RingEnd::attach(void* at, uint32_t capacity, bool producer) {
  header_ = static_cast<RingHeader*>(at);
  entries_ = static_cast<unsigned char*>(at) + sizeof(RingHeader);
  mask_ = capacity - 1;
  corrupt_ = !valid_ring_capacity(capacity);
  const uint32_t prod = header_->prod.load(std::memory_order_acquire);
  const uint32_t cons = header_->cons.load(std::memory_order_acquire);
  corrupt_ |= prod - cons > capacity;
  own_ = producer ? prod : cons;
  other_ = producer ? cons : prod;
}

}  // namespace softmrc::shm
