// What the port driver's interposers (connect_guard.h, hangup_guard.h,
// unmap_guard.h) call on to: the next definition of a libc function after
// the process's own.
#pragma once

#include <dlfcn.h>

#include <atomic>

namespace softmrc::port {

// `name`'s next definition (dlsym RTLD_NEXT), looked up once into `slot`;
// nullptr if there is none, when the caller makes the system call itself.
template <typename Fn>
Fn libc_next(std::atomic<Fn>& slot, const char* name) {
  Fn fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}

}  // namespace softmrc::port
