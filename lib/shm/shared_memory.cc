// Sealed memfds shared between an application and softmrcd (see
// shared_memory.h).
#include "shm/shared_memory.h"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace softmrc::shm {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// The creator's seals. F_SEAL_SEAL is left to the daemon, which adds its
// own first (map_shared()).
constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

int try_create(size_t bytes, unsigned flags, Mapping* out) {
  const int fd = memfd_create("softmrc", MFD_CLOEXEC | MFD_ALLOW_SEALING | flags);
  if (fd < 0) return -errno;
  void* p = MAP_FAILED;
  // Every page backed here, by the application: the daemon takes no memfd
  // with holes (map_shared()).
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fcntl(fd, F_ADD_SEALS, kSizeSeals) != 0 ||
      (p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
      madvise(p, bytes, MADV_POPULATE_WRITE) != 0) {
    const int e = errno;
    if (p != MAP_FAILED) munmap(p, bytes);
    ::close(fd);
    return -e;
  }
  out->addr = p;
  out->bytes = bytes;
  out->hugepages = (flags & MFD_HUGETLB) != 0;
  return fd;
}

}  // namespace

int create_shared(size_t bytes, bool try_hugepages, Mapping* out) {
  if (bytes == 0) return -EINVAL;
  if (try_hugepages) {
    const size_t huge = (bytes + kHugePage - 1) & ~(kHugePage - 1);
    // Without free hugepages the mapping fails: fall back.
    const int fd = try_create(huge, MFD_HUGETLB, out);
    if (fd >= 0) return fd;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return try_create((bytes + page - 1) & ~(page - 1), 0, out);
}

int map_shared(int fd, size_t min_bytes, Mapping* out, const char** why) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSizeSeals) != kSizeSeals) {
    *why = "not a memfd sealed against shrinking and growing";
    return EBADF;
  }
  if (seals & (F_SEAL_SEAL | F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
    *why = "a memfd sealed against writing or against the daemon's own seals";
    return EBADF;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = "not a regular memfd";
    return EBADF;
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes < min_bytes || bytes == 0) {
    *why = "shared memory shorter than the request says";
    return EINVAL;
  }
  // Not more than the request rounded up to the file's pages (hugepages on
  // hugetlbfs): mapping and checking a larger one would cost the daemon's
  // time and page tables for memory the request does not use.
  const size_t unit =
      std::max(static_cast<size_t>(st.st_blksize), static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  if (bytes - min_bytes >= unit) {
    *why = "shared memory longer than the request says";
    return EINVAL;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *why = "cannot map the shared memory";
    return ENOMEM;
  }
  // A hole punched into the file (fallocate, MADV_REMOVE) would be refilled
  // at the daemon's next touch, unless no page is left (hugepages): then the
  // kernel sends the daemon SIGBUS. The future-write seal forbids holes while
  // leaving the writable mappings made so far writable.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
    munmap(p, bytes);
    *why = "a memfd sealed against the daemon's own seals";
    return EBADF;
  }
  // Holes made before the seal: in an ordinary memfd the daemon's touch
  // would allocate, and be charged for, the application's memory, so such a
  // memfd must arrive whole. (hugetlbfs reports no holes: its missing pages
  // come from the pool, reserved for this mapping by mmap.)
  if (lseek(fd, 0, SEEK_HOLE) != static_cast<off_t>(bytes)) {
    munmap(p, bytes);
    *why = "shared memory with pages nobody backed (holes): its creator must back every page";
    return EINVAL;
  }
  // Page tables up front, where a missing page is an error, not SIGBUS, and
  // not a fault on the polling lcore.
  if (madvise(p, bytes, MADV_POPULATE_WRITE) != 0) {
    const int e = errno;
    munmap(p, bytes);
    *why = e == EINVAL ? "this kernel cannot back shared memory up front (needs Linux 5.14)"
                       : "no free pages (hugepages?) to back the shared memory";
    return ENOMEM;
  }
  out->addr = p;
  out->bytes = bytes;
  return 0;
}

void unmap_shared(Mapping* m) {
  if (m->addr != nullptr) munmap(m->addr, m->bytes);
  *m = Mapping{};
}

}  // namespace softmrc::shm
