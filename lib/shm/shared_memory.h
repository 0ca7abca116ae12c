// Memory that an application and softmrcd share: a sealed memfd. The
// creator (libsoftmrc) sizes it and seals its size, so the other side
// (softmrcd) can map it without fear of SIGBUS: a file that could shrink
// under the daemon's mapping would let an application crash it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softmrc::shm {

struct Mapping {
  void* addr = nullptr;
  size_t bytes = 0;  // mapped (the file's size, whole pages)
  bool hugepages = false;
};

// Creates a memfd of at least `bytes` (rounded up to the page, or to 2 MiB
// when `try_hugepages` and the kernel has free hugepages), zeroed, sealed
// against shrinking, growing and further sealing, and maps it shared.
// Returns the fd (>= 0) or -errno.
int create_shared(size_t bytes, bool try_hugepages, Mapping* out);

// The receiving side: checks that `fd` is a memfd sealed against
// shrinking and growing, at least `min_bytes` long, and maps all of it
// shared, read-write. 0 or an errno value (EBADF not a sealed memfd,
// EINVAL too short, ENOMEM); `*why` says which.
int map_shared(int fd, size_t min_bytes, Mapping* out, const char** why);

void unmap_shared(Mapping* m);

}  // namespace softmrc::shm
