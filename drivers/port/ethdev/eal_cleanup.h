// rte_eal_cleanup() with EAL's interrupt thread parked first.
//
// DPDK 22.11's rte_eal_cleanup() unmaps EAL's memory while the interrupt
// thread runs on, and interrupt handles that live in that memory stay in
// the thread's list: memif frees a server socket's handle without
// unregistering it. An event, or the rebuild of the thread's epoll set
// that a port's close asks for, then has the thread read unmapped memory
// (SIGSEGV in rte_intr_fd_get(), seen in 6 of 15 runs of a two-daemon
// test). Parked in an interrupt callback that never returns, it reads
// nothing more.
#pragma once

#include <chrono>

namespace softmrc::port {

// Has EAL's interrupt thread run a callback that never returns:
// true once it does, false if it did not within `wait` (it still may,
// later). Alarms, link events and memif's control channels stop with it:
// for the end of a process.
bool park_interrupt_thread(std::chrono::milliseconds wait);

// A process's last EAL call: parks the interrupt thread (logging if it is
// not free within 2 s; a callback may be waiting for a burst, at most 1 s:
// unmap_guard.h), then rte_eal_cleanup().
void eal_cleanup();

}  // namespace softmrc::port
