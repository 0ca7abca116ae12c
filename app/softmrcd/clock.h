// Time on the lcores: the TSC, read once per loop iteration and turned
// into the engine's nanoseconds since the daemon started. One Clock is
// shared by every lcore, so times (the fabric's schedule, the engine's
// timers, the log) are comparable across them.
#pragma once

#include <rte_cycles.h>

#include <cstdint>

namespace softmrc::softmrcd {

class Clock {
 public:
  void start() {
    start_tsc_ = rte_rdtsc();
    // ns = ticks * mult >> 32, exact enough for days of uptime.
    mult_ = (uint64_t{1'000'000'000} << 32) / rte_get_tsc_hz();
  }
  uint64_t ns(uint64_t tsc) const {
    const uint64_t ticks = tsc > start_tsc_ ? tsc - start_tsc_ : 0;
    return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * mult_) >> 32);
  }
  uint64_t now_ns() const { return ns(rte_rdtsc()); }

 private:
  uint64_t start_tsc_ = 0;
  uint64_t mult_ = 0;
};

}  // namespace softmrc::softmrcd
