// The unmap guard (see unmap_guard.h) and the munmap it interposes.
#include "port/ethdev/unmap_guard.h"

#include <rte_cycles.h>
#include <rte_interrupts.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "port/ethdev/libc_next.h"

namespace softmrc::port::unmap_guard {

namespace {

// More threads than any softmrc process makes bursts on.
constexpr unsigned kMaxThreads = 256;

detail::Slot slots[kMaxThreads];
std::atomic<unsigned> claimed{0};
std::atomic<uint64_t> timeouts{0};

}  // namespace

thread_local detail::Slot* detail::slot = nullptr;

detail::Slot* detail::claim_slot() {
  unsigned n = claimed.load(std::memory_order_relaxed);
  do {
    if (n == kMaxThreads) return nullptr;
  } while (!claimed.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  slot = &slots[n];
  return slot;
}

void wait_for_bursts() {
  // Pairs with the seq_cst store that begins a burst (Burst's comment).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint64_t deadline = rte_rdtsc() + kWaitLimitUs * rte_get_tsc_hz() / 1'000'000;
  const unsigned n = claimed.load(std::memory_order_acquire);
  for (unsigned i = 0; i < n; ++i) {
    const uint64_t seq = slots[i].seq.load(std::memory_order_acquire);
    if (seq % 2 == 0) continue;
    while (slots[i].seq.load(std::memory_order_acquire) == seq) {
      if (rte_rdtsc() >= deadline) {
        timeouts.fetch_add(1, std::memory_order_relaxed);
        std::fprintf(stderr, "softmrc: a burst outlasted %" PRIu64 " ms: unmapping under it\n",
                     kWaitLimitUs / 1000);
        return;
      }
      sched_yield();  // the thread waited for may be waiting for this CPU
    }
  }
}

uint64_t wait_timeouts() {
  return timeouts.load(std::memory_order_relaxed);
}

}  // namespace softmrc::port::unmap_guard

// Every munmap of the process that is not glibc's own comes here, PMDs'
// included: on EAL's interrupt thread it waits for the bursts first.
extern "C" int munmap(void* addr, size_t len) noexcept {
  using Munmap = int (*)(void*, size_t);
  static std::atomic<Munmap> next{nullptr};
  const Munmap real = softmrc::port::libc_next(next, "munmap");
  if (real == nullptr) return static_cast<int>(syscall(SYS_munmap, addr, len));
  if (rte_thread_is_intr()) softmrc::port::unmap_guard::wait_for_bursts();
  return real(addr, len);
}
