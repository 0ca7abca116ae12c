// The checks softmrcd applies to what an application sends and writes
// (lib/shm/app_protocol.h, shared_memory.h): every kind of garbage gets a
// refusal or an error status, never an access outside what was shared.
#include "shm/app_protocol.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "shm/shared_memory.h"
#include "shm/spsc_ring.h"

namespace softmrc::shm {
namespace {

Msg request(MsgType t) {
  Msg m{};
  m.magic = kAppMagic;
  m.type = uint16_t(t);
  return m;
}

int validate(const Msg& m, bool fd = false, size_t bytes = sizeof(Msg)) {
  const char* why = nullptr;
  const int st = validate_message(m, bytes, fd, &why);
  EXPECT_NE(why, nullptr);
  return st;
}

TEST(AppMessage, WrongSizeOrMagicIsAProtocolError) {
  Msg m = request(MsgType::kHello);
  EXPECT_EQ(validate(m), 0);
  EXPECT_EQ(validate(m, false, sizeof(Msg) - 1), EPROTO);
  m.magic = 0;
  EXPECT_EQ(validate(m), EPROTO);
}

TEST(AppMessage, UnknownTypesAndRepliesAreRefused) {
  for (uint16_t t : {uint16_t{0}, uint16_t(MsgType::kEvent), uint16_t{999},
                     uint16_t(uint16_t(MsgType::kHello) | kReplyBit)}) {
    Msg m = request(MsgType::kHello);
    m.type = t;
    EXPECT_EQ(validate(m), EINVAL) << t;
  }
}

TEST(AppMessage, AFileDescriptorExactlyWhereOneBelongs) {
  EXPECT_EQ(validate(request(MsgType::kHello), true), EBADF);
  Msg cq = request(MsgType::kCreateCq);
  cq.u.create_cq.capacity = 64;
  EXPECT_EQ(validate(cq, false), EBADF);
  EXPECT_EQ(validate(cq, true), 0);
  // The daemon makes a completion channel's pipe: an application's
  // descriptor (an eventfd it could block, a pipe it could close) is refused.
  EXPECT_EQ(validate(request(MsgType::kCreateChannel), true), EBADF);
  EXPECT_EQ(validate(request(MsgType::kCreateChannel), false), 0);
}

// What AppServer::serve and libsoftmrc read: a message with its descriptor
// (a completion channel's read end, say), and one that does not fit.
TEST(AppMessage, DescriptorsComeWithTheirMessageAndLongMessagesAreFlagged) {
  int sp[2], p[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
  ASSERT_EQ(::pipe(p), 0);
  Msg m = request(MsgType::kCreateChannel);
  m.seq = 7;
  ASSERT_EQ(send_message(sp[0], m, p[0], MSG_DONTWAIT), 0);
  Msg got{};
  std::vector<int> fds;
  bool truncated = true;
  ASSERT_EQ(recv_message(sp[1], &got, 0, &fds, &truncated), ssize_t(sizeof(Msg)));
  EXPECT_FALSE(truncated);
  EXPECT_EQ(got.seq, 7u);
  ASSERT_EQ(fds.size(), 1u);
  struct stat st {};
  EXPECT_EQ(::fstat(fds[0], &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ::close(fds[0]);

  char longer[sizeof(Msg) + 8] = {};
  ASSERT_EQ(::send(sp[0], longer, sizeof(longer), 0), ssize_t(sizeof(longer)));
  fds.clear();
  EXPECT_EQ(recv_message(sp[1], &got, 0, &fds, &truncated), ssize_t(sizeof(Msg)));
  EXPECT_TRUE(truncated);
  EXPECT_TRUE(fds.empty());
  EXPECT_EQ(recv_message(sp[1], &got, MSG_DONTWAIT, &fds, &truncated), -1);
  EXPECT_EQ(errno, EAGAIN);
  for (int fd : {sp[0], sp[1], p[0], p[1]}) ::close(fd);
}

// A TCP connection on loopback whose peer never reads, with unsent data,
// set to linger `seconds`: its last close() waits that long. *listener is
// the never-accepting peer (close it after).
int lingering_socket(int seconds, int* listener) {
  *listener = ::socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  (void)::setsockopt(*listener, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (::bind(*listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(*listener, 1) != 0 ||
      ::getsockname(*listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  static char chunk[4096];
  while (::send(fd, chunk, sizeof(chunk), MSG_DONTWAIT) > 0) {
  }
  const linger l{1, seconds};
  (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  return fd;
}

double seconds_to(void (*close_it)(int), int fd) {
  const auto t0 = std::chrono::steady_clock::now();
  close_it(fd);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void plain_close(int fd) {
  ::close(fd);
}

TEST(AppMessage, DescriptorsFromAnApplicationAreClosedWithoutWaiting) {
  int listener = -1;
  int fd = lingering_socket(2, &listener);
  ASSERT_GE(fd, 0);
  EXPECT_GE(seconds_to(plain_close, fd), 1.5) << "the setup: close() waits for the linger";
  ::close(listener);

  // Alone; queued in a UNIX socket; queued in a connection to a UNIX
  // socket that was never accepted.
  for (int where = 0; where < 3; ++where) {
    SCOPED_TRACE("case " + std::to_string(where));
    fd = lingering_socket(60, &listener);
    ASSERT_GE(fd, 0);
    int victim = fd;
    const Msg m = request(MsgType::kHello);
    if (where == 1) {
      int sp[2];
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
      ASSERT_EQ(send_message(sp[0], m, fd), 0);
      ::close(sp[0]);
      victim = sp[1];
    } else if (where == 2) {
      sockaddr_un u{};
      u.sun_family = AF_UNIX;
      const std::string name = "softmrc-close-test-" + std::to_string(::getpid());
      std::memcpy(u.sun_path + 1, name.data(), name.size());  // abstract
      const socklen_t ulen =
          static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
      victim = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
      ASSERT_EQ(::bind(victim, reinterpret_cast<sockaddr*>(&u), ulen), 0);
      ASSERT_EQ(::listen(victim, 4), 0);
      const int c = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
      ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&u), ulen), 0);
      ASSERT_EQ(send_message(c, m, fd), 0);
      ::close(c);
    }
    if (victim != fd) ::close(fd);  // the queued copy is the last one
    EXPECT_LT(seconds_to(close_received, victim), 30.0);
    ::close(listener);
  }
}

TEST(AppMessage, CqAndQpSizesMustBePowersOfTwoWithinLimits) {
  Msg cq = request(MsgType::kCreateCq);
  for (uint32_t cap : {0u, 1u, 3u, 100u, kMaxCqe * 2}) {
    cq.u.create_cq.capacity = cap;
    EXPECT_EQ(validate(cq, true), EINVAL) << cap;
  }
  Msg qp = request(MsgType::kCreateQp);
  qp.u.create_qp = CreateQpReq{1, 1, 16, 16, 8, 16, 0, 1};  // send ring smaller than its queue
  EXPECT_EQ(validate(qp, true), EINVAL);
  qp.u.create_qp = CreateQpReq{1, 1, 16, 16, 16, 8, 0, 1};  // receive ring smaller than its queue
  EXPECT_EQ(validate(qp, true), EINVAL);
  qp.u.create_qp = CreateQpReq{1, 1, 16, 16, 16, 24, 0, 1};  // not a power of two
  EXPECT_EQ(validate(qp, true), EINVAL);
  qp.u.create_qp = CreateQpReq{1, 1, 16, 0, 16, 1, 0, 1};  // a ring has at least two entries
  EXPECT_EQ(validate(qp, true), EINVAL);
  qp.u.create_qp = CreateQpReq{1, 1, 16, 0, 16, 2, 0, 1};
  EXPECT_EQ(validate(qp, true), 0);
  qp.u.create_qp = CreateQpReq{1, 1, 16, 16, 16, 16, 0, 1};
  EXPECT_EQ(validate(qp, true), 0);
  qp.u.create_qp.send_ring_capacity = 2 * kMaxQpWr;
  EXPECT_EQ(validate(qp, true), EINVAL);
  qp.u.create_qp.send_ring_capacity = 16;
  qp.u.create_qp.max_send_wr = kMaxQpWr + 1;
  EXPECT_EQ(validate(qp, true), EINVAL);
}

TEST(AppMessage, RegionsMustNotWrapOrBeEmpty) {
  Msg m = request(MsgType::kRegMr);
  m.u.reg_mr.addr = 4096;
  m.u.reg_mr.length = 0;
  EXPECT_EQ(validate(m, true), EINVAL);
  m.u.reg_mr.length = 4096;
  EXPECT_EQ(validate(m, true), 0);
  m.u.reg_mr.addr = std::numeric_limits<uint64_t>::max() - 10;
  EXPECT_EQ(validate(m, true), EINVAL);
  m.u.reg_mr.addr = 4096;
  m.u.reg_mr.access = 1u << 9;
  EXPECT_EQ(validate(m, true), EINVAL);
}

TEST(AppMessage, StringsMustBeTerminated) {
  Msg m = request(MsgType::kQueryProfile);
  m.u.query_profile.kind = 1;
  std::memset(m.u.query_profile.name, 'x', sizeof(m.u.query_profile.name));
  EXPECT_EQ(validate(m), EINVAL);
  m.u.query_profile.name[5] = '\0';
  EXPECT_EQ(validate(m), 0);
  m.u.query_profile.kind = 3;
  EXPECT_EQ(validate(m), EINVAL);
}

class Regions : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(table.add({0x10003, 7, 0x100000, 0x1000}));  // index 3, owner 7
    ASSERT_TRUE(table.add({0x20004, 8, 0x200000, 0x1000}));  // index 4, owner 8
  }
  WorkRequest write(uint32_t lkey, uint64_t addr, uint32_t len) {
    WorkRequest w{};
    w.opcode = uint8_t(WrOpcode::kWrite);
    w.lkey = lkey;
    w.local_addr = addr;
    w.length = len;
    return w;
  }
  std::vector<RegionEntry> slots = std::vector<RegionEntry>(16);
  RegionTable table{slots.data(), 16};
};

TEST_F(Regions, AKeyMatchesOnlyItsOwnerAndGeneration) {
  EXPECT_NE(table.find(0x10003, 7), nullptr);
  EXPECT_EQ(table.find(0x10003, 8), nullptr);  // another application's
  EXPECT_EQ(table.find(0x20003, 7), nullptr);  // a stale generation
  EXPECT_EQ(table.find(0x10099, 7), nullptr);  // an index past the table
  EXPECT_EQ(table.find(0, 7), nullptr);
  EXPECT_FALSE(table.add({0x30003, 7, 0, 1}));  // slot taken
  table.remove(0x20003);                        // wrong generation: no effect
  EXPECT_NE(table.find(0x10003, 7), nullptr);
  table.remove(0x10003);
  EXPECT_EQ(table.find(0x10003, 7), nullptr);
}

TEST_F(Regions, RangesAreCheckedWithoutOverflow) {
  const RegionEntry& r = *table.find(0x10003, 7);
  EXPECT_TRUE(range_inside(r, 0x100000, 0x1000));
  EXPECT_TRUE(range_inside(r, 0x101000, 0));
  EXPECT_FALSE(range_inside(r, 0x100001, 0x1000));
  EXPECT_FALSE(range_inside(r, 0xfffff, 2));
  EXPECT_FALSE(range_inside(r, 0x100800, std::numeric_limits<uint64_t>::max()));
  EXPECT_FALSE(range_inside(r, std::numeric_limits<uint64_t>::max(), 1));
}

TEST_F(Regions, EveryBadDescriptorGetsItsStatus) {
  EXPECT_EQ(check_work_request(write(0x10003, 0x100000, 64), 7, table, kMaxMsgBytes),
            WcStatus::kSuccess);
  EXPECT_EQ(check_work_request(write(0x10003, 0x100fc1, 64), 7, table, kMaxMsgBytes),
            WcStatus::kLocProtErr);
  EXPECT_EQ(check_work_request(write(0x20004, 0x200000, 64), 7, table, kMaxMsgBytes),
            WcStatus::kLocProtErr);  // owner 8's region
  EXPECT_EQ(check_work_request(write(0x10003, 0x100000, 64), 7, table, 32), WcStatus::kLocLenErr);
  WorkRequest wrap = write(0x10003, 0x100000, 64);
  wrap.remote_addr = std::numeric_limits<uint64_t>::max() - 8;
  EXPECT_EQ(check_work_request(wrap, 7, table, kMaxMsgBytes), WcStatus::kLocLenErr);
  for (uint8_t op : {uint8_t{3}, uint8_t{9}, uint8_t{255}}) {
    WorkRequest w = write(0x10003, 0x100000, 64);
    w.opcode = op;
    EXPECT_EQ(check_work_request(w, 7, table, kMaxMsgBytes), WcStatus::kLocQpOpErr) << int(op);
  }
  // A zero-length Write needs no region; a receive has no SGE at all, and
  // each ring takes only its own kind.
  EXPECT_EQ(check_work_request(write(0xdead, 0, 0), 7, table, kMaxMsgBytes), WcStatus::kSuccess);
  WorkRequest recv{};
  recv.opcode = uint8_t(WrOpcode::kRecv);
  recv.lkey = 0xdead;
  EXPECT_EQ(check_recv_request(recv), WcStatus::kSuccess);
  EXPECT_EQ(check_work_request(recv, 7, table, kMaxMsgBytes), WcStatus::kLocQpOpErr);
  EXPECT_EQ(check_recv_request(write(0x10003, 0x100000, 64)), WcStatus::kLocQpOpErr);
}

// The daemon's end of a QP ring, fed a garbage producer index by the
// application: it moves nothing and reads nothing outside the ring.
TEST(WorkRing, GarbageProducerIndexTurnsTheRingCorrupt) {
  constexpr uint32_t kCap = 16;
  std::vector<unsigned char> mem(qp_bytes(kCap, kCap) + 64);
  void* at = mem.data() + (64 - reinterpret_cast<uintptr_t>(mem.data()) % 64);
  format_ring(at);
  RingProducer<WorkRequest> app;
  RingConsumer<WorkRequest> daemon;
  app.attach(at, kCap);
  daemon.attach(at, kCap);
  WorkRequest w{};
  w.wr_id = 1;
  ASSERT_EQ(app.enqueue_burst(&w, 1), 1u);
  WorkRequest out[kCap];
  ASSERT_EQ(daemon.dequeue_burst(out, kCap), 1u);
  static_cast<RingHeader*>(at)->prod.store(0x7fff0000, std::memory_order_release);
  EXPECT_EQ(daemon.dequeue_burst(out, kCap), 0u);
  EXPECT_TRUE(daemon.corrupt());
  static_cast<RingHeader*>(at)->prod.store(2, std::memory_order_release);  // too late
  EXPECT_EQ(daemon.dequeue_burst(out, kCap), 0u);
}

TEST(SharedMemory, OnlySealedMemfdsOfTheRightSizeAreMapped) {
  Mapping mine;
  const int fd = create_shared(10000, false, &mine);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(mine.bytes % static_cast<size_t>(sysconf(_SC_PAGESIZE)), 0u);
  EXPECT_GE(mine.bytes, 10000u);
  const char* why = nullptr;
  Mapping theirs;
  EXPECT_EQ(map_shared(fd, mine.bytes + 1, &theirs, &why), EINVAL);
  EXPECT_STREQ(why, "shared memory shorter than the request says");
  // A page or more beyond the request: the daemon would map, check and
  // back memory nothing uses.
  EXPECT_EQ(map_shared(fd, mine.bytes - 4096, &theirs, &why), EINVAL);
  EXPECT_STREQ(why, "shared memory longer than the request says");
  ASSERT_EQ(map_shared(fd, 10000, &theirs, &why), 0) << why;
  static_cast<char*>(mine.addr)[9999] = 42;
  EXPECT_EQ(static_cast<char*>(theirs.addr)[9999], 42);
  EXPECT_NE(ftruncate(fd, 4096), 0);  // sealed: it cannot shrink under the daemon
  unmap_shared(&theirs);
  unmap_shared(&mine);
  close(fd);

  const int unsealed = memfd_create("unsealed", 0);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  EXPECT_EQ(map_shared(unsealed, 4096, &theirs, &why), EBADF);
  close(unsealed);
  EXPECT_EQ(map_shared(-1, 1, &theirs, &why), EBADF);
}

// A memfd of `bytes` sealed by its creator with `seals`, never touched: all
// of it a hole.
int sparse_memfd(size_t bytes, int seals) {
  const int fd = memfd_create("sparse", MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fcntl(fd, F_ADD_SEALS, seals) != 0)
    ADD_FAILURE() << "cannot make a sealed memfd";
  return fd;
}

bool punch_hole(int fd, size_t bytes) {
  return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) ==
         0;
}

TEST(SharedMemory, TheDaemonSealsAgainstHolesAndTakesNoneBefore) {
  Mapping mine;
  const int fd = create_shared(1 << 16, false, &mine);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(lseek(fd, 0, SEEK_HOLE), 1 << 16);  // the creator backed every page
  const char* why = nullptr;
  Mapping theirs;
  ASSERT_EQ(map_shared(fd, 1 << 16, &theirs, &why), 0) << why;
  EXPECT_FALSE(punch_hole(fd, 1 << 16));
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(madvise(mine.addr, mine.bytes, MADV_REMOVE), 0);
  EXPECT_EQ(errno, EPERM);
  static_cast<char*>(mine.addr)[100] = 5;  // both mappings stay writable
  EXPECT_EQ(static_cast<char*>(theirs.addr)[100], 5);
  static_cast<char*>(theirs.addr)[(1 << 16) - 1] = 6;
  EXPECT_EQ(static_cast<char*>(mine.addr)[(1 << 16) - 1], 6);
  // Mapped once: a second daemon mapping of the same memfd is refused.
  Mapping again;
  EXPECT_EQ(map_shared(fd, 1 << 16, &again, &why), EBADF);
  unmap_shared(&theirs);
  unmap_shared(&mine);
  close(fd);

  for (const int seals : {F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL,
                          F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE}) {
    const int sealed = sparse_memfd(4096, seals);
    EXPECT_EQ(map_shared(sealed, 4096, &theirs, &why), EBADF) << seals;
    EXPECT_STREQ(why, "a memfd sealed against writing or against the daemon's own seals");
    close(sealed);
  }
  // Pages the application did not back would be the daemon's to allocate.
  const int sparse = sparse_memfd(1 << 20, F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_EQ(map_shared(sparse, 1 << 20, &theirs, &why), EINVAL);
  EXPECT_STREQ(why,
               "shared memory with pages nobody backed (holes): its creator must back every page");
  close(sparse);
  const int holed = create_shared(1 << 16, false, &mine);
  ASSERT_GE(holed, 0);
  ASSERT_TRUE(punch_hole(holed, 4096));
  EXPECT_EQ(map_shared(holed, 1 << 16, &theirs, &why), EINVAL);
  unmap_shared(&mine);
  close(holed);
}

// The kernel's pool of 2 MiB pages, grown by `pages` for one test (root
// only) and given back after.
class HugePagePool {
 public:
  explicit HugePagePool(long pages) {
    before_ = read();
    if (before_ < 0 || !write(before_ + pages)) return;
    total_ = read();
    granted_ = total_ - before_ >= pages;
  }
  ~HugePagePool() {
    if (before_ >= 0) write(before_);
  }
  bool granted() const { return granted_; }
  long total() const { return total_; }

 private:
  static constexpr const char* kPath = "/proc/sys/vm/nr_hugepages";
  static long read() {
    FILE* f = fopen(kPath, "r");
    long n = -1;
    if (f != nullptr) {
      if (fscanf(f, "%ld", &n) != 1) n = -1;
      fclose(f);
    }
    return n;
  }
  static bool write(long n) {
    FILE* f = fopen(kPath, "w");
    if (f == nullptr) return false;
    const bool ok = fprintf(f, "%ld", n) > 0;
    return fclose(f) == 0 && ok;
  }
  long before_ = -1;
  long total_ = -1;
  bool granted_ = false;
};

TEST(SharedMemory, HugepagesBackTheRegionWhereTheKernelHasThem) {
  HugePagePool pool(2);
  if (!pool.granted()) GTEST_SKIP() << "cannot reserve 2 hugepages (needs root)";
  Mapping mine;
  const int fd = create_shared(3 << 20, true, &mine);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(mine.hugepages);
  EXPECT_EQ(mine.bytes, size_t{4} << 20);  // whole 2 MiB pages
  const char* why = nullptr;
  Mapping theirs;
  ASSERT_EQ(map_shared(fd, 3 << 20, &theirs, &why), 0) << why;
  static_cast<char*>(mine.addr)[(3 << 20) - 1] = 7;
  EXPECT_EQ(static_cast<char*>(theirs.addr)[(3 << 20) - 1], 7);
  EXPECT_NE(ftruncate(fd, 2 << 20), 0);  // sealed like any other region
  // Without the daemon's seal this would free a hugepage that another
  // mapping could take, and the daemon's next write here would die of
  // SIGBUS instead of finding a page.
  EXPECT_FALSE(punch_hole(fd, 2 << 20));
  EXPECT_EQ(errno, EPERM);
  static_cast<char*>(theirs.addr)[0] = 8;
  EXPECT_EQ(static_cast<char*>(mine.addr)[0], 8);
  unmap_shared(&theirs);
  unmap_shared(&mine);
  close(fd);

  // More than the whole pool: normal pages instead, not a failure.
  if (pool.total() > 64) return;  // too much memory to ask for in a test
  const size_t beyond = size_t(pool.total() + 1) << 21;
  const int normal = create_shared(beyond, true, &mine);
  ASSERT_GE(normal, 0);
  EXPECT_FALSE(mine.hugepages);
  EXPECT_EQ(mine.bytes, beyond);
  unmap_shared(&mine);
  close(normal);
}

}  // namespace
}  // namespace softmrc::shm
