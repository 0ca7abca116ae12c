// The unmap guard: no memory a burst may be reading is unmapped under it.
//
// DPDK 22.11's net_memif unmaps the memory a link shares from EAL's
// interrupt thread as soon as the peer disconnects (memif_disconnect), with
// no lock against the threads polling the port: a burst that found the
// link connected just before, and was preempted, then reads unmapped
// memory. The farewell (farewell.h) keeps the bursts off a link whose peer
// closes it in order; a peer that is killed gives no warning. So this
// process interposes munmap: called on the interrupt thread, it first waits
// for the bursts in progress to end. memif marks the link down before it
// unmaps, and a burst that begins after that touches nothing of its memory.
//
// Each burst on an ethdev port is a Burst in scope (EthdevPort's are). A
// burst that outlasts kWaitLimitUs (its thread preempted that long) is not
// waited for any longer: the unmap goes ahead, and counts.
#pragma once

#include <atomic>
#include <cstdint>

namespace softmrc::port::unmap_guard {

inline constexpr uint64_t kWaitLimitUs = 1'000'000;

namespace detail {
// A thread's bursts, written by that thread only: odd while one is in progress.
struct alignas(64) Slot {
  std::atomic<uint64_t> seq{0};
};
extern thread_local Slot* slot;
Slot* claim_slot();  // nullptr once every slot is taken: the thread is not guarded
}  // namespace detail

// One burst, from construction to destruction.
class Burst {
 public:
  Burst() : slot_(detail::slot ? detail::slot : detail::claim_slot()) {
    if (slot_ == nullptr) return;
    const uint64_t seq = slot_->seq.load(std::memory_order_relaxed);
    if (seq % 2 == 1) {  // inside a burst already (an RX callback's TX): that one covers it
      slot_ = nullptr;
      return;
    }
    // seq_cst: the unmapping thread sees this burst begin, or this burst
    // sees the link down (the PMD's store before the unmap).
    slot_->seq.store(seq + 1);
  }
  ~Burst() {
    if (slot_)
      slot_->seq.store(slot_->seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  Burst(const Burst&) = delete;
  Burst& operator=(const Burst&) = delete;

 private:
  detail::Slot* slot_;
};

// Waits until every burst in progress when it was called has ended, or
// kWaitLimitUs. The interposed munmap calls it on the interrupt thread;
// public for the tests.
void wait_for_bursts();

// Unmaps that went ahead without waiting to the end (kWaitLimitUs).
uint64_t wait_timeouts();

}  // namespace softmrc::port::unmap_guard
