// Memory that an application and softmrcd share: a sealed memfd. The
// creator (libsoftmrc) sizes it, seals its size and backs every page; the
// other side (softmrcd) maps it too and seals it against holes, so that it
// can touch it without fear of SIGBUS (a file that could shrink, or lose a
// hugepage to a punched hole, under the daemon's mapping would let an
// application crash it) and without allocating memory for the creator.
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
// against shrinking and growing (not against further seals: the daemon's
// come next), maps it shared and backs every page.
// Returns the fd (>= 0) or -errno.
int create_shared(size_t bytes, bool try_hugepages, Mapping* out);

// The receiving side: checks that `fd` is a memfd sealed against
// shrinking and growing and against nothing else, at least `min_bytes`
// long and less than one of its pages (its st_blksize: a hugepage on
// hugetlbfs) longer, and maps all of it shared, read-write. Then seals it against
// future writes and seals (mappings made so far stay writable, holes can no
// longer be punched), checks it has no holes (pages its creator did not
// back) and maps every page. 0 or an errno value (EBADF not such a memfd,
// EINVAL too short, too long or with holes, ENOMEM no mapping or pages); `*why` says
// which.
int map_shared(int fd, size_t min_bytes, Mapping* out, const char** why);

void unmap_shared(Mapping* m);

}  // namespace softmrc::shm
