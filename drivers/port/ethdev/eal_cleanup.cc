// EAL's clean-up with its interrupt thread parked (see eal_cleanup.h).

// rte_intr_instance_alloc() and the handle's setters are experimental in
// DPDK 22.11.
#define ALLOW_EXPERIMENTAL_API
#include "port/ethdev/eal_cleanup.h"

#include <rte_eal.h>
#include <rte_interrupts.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <thread>

namespace softmrc::port {

namespace {

std::atomic<bool> park_asked{false};
std::atomic<bool> parked{false};

void park(void*) {
  parked.store(true, std::memory_order_release);
  for (;;) ::pause();  // a signal handled on this thread returns here
}

// An interrupt source of our own whose callback parks the thread: not an
// alarm, because rte_eal_cleanup() unregisters the alarms' source and
// waits while its callback runs. Its handle is not in EAL's memory, and
// nothing unregisters it. EAL registers a copy of the handle; the
// callback's argument keeps the original reachable (LeakSanitizer).
bool ask_to_park() {
  rte_intr_handle* handle = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  const int fd = ::eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);  // readable at once
  if (handle == nullptr || fd < 0 || rte_intr_fd_set(handle, fd) != 0 ||
      rte_intr_type_set(handle, RTE_INTR_HANDLE_EXT) != 0 ||
      rte_intr_callback_register(handle, park, handle) != 0) {
    if (fd >= 0) ::close(fd);
    rte_intr_instance_free(handle);
    return false;
  }
  return true;
}

}  // namespace

bool park_interrupt_thread(std::chrono::milliseconds wait) {
  if (!park_asked.exchange(true) && !ask_to_park()) {
    park_asked.store(false);
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!parked.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void eal_cleanup() {
  constexpr std::chrono::milliseconds kWait{2000};
  if (!park_interrupt_thread(kWait))
    std::fprintf(stderr,
                 "softmrc: EAL's interrupt thread was not free within %lld ms: cleaning up "
                 "under it\n",
                 static_cast<long long>(kWait.count()));
  rte_eal_cleanup();
}

}  // namespace softmrc::port
