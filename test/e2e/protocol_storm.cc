// A hostile application, drawn from a seed (api_test.py --case
// protocol_storm):
//
//   protocol_storm SOCKET PEER_IPV6 SEED ROUNDS
//
// It speaks softmrcd's application protocol itself (no libsoftmrc) and takes
// ROUNDS steps chosen at random, mostly near-valid requests: PDs, regions,
// channels, CQs and QPs created and destroyed in any order, QPs moved
// through their states and back, file descriptors of the wrong kind or size
// (an unsealed memfd, a pipe, two at once), ids of nothing or of another
// application, malformed and truncated messages; it writes descriptors into
// its own rings, arms its CQs, closes its channels' read ends or never reads
// them, scribbles over ring indices, and reconnects. Meanwhile a
// well-behaved libsoftmrc application (the bystander) holds a QP and a
// region on the same daemon.
//
// What it checks, request by request against a model of what it owns:
//  - every request gets its reply (type and seq echoed) within 10 s: the
//    daemon neither dies nor hangs;
//  - a well-formed request on what it owns succeeds (ENOMEM allowed where a
//    table may be full); a malformed one, or one naming what it does not
//    own, is refused with an errno value and a reason;
//  - a QP's state is the one its last successful modify set, or ERR when
//    it may have failed since (in RTS, or a descriptor it was given failed);
//  - every completion is for a work request of that QP and CQ, once, and one that
//    breaks docs/api.md's rules never succeeds; every event names a QP or
//    plane of its own;
//  - at the end the bystander's QP, region and bytes are untouched.
// Rings or CQs it scribbled over are exempt from the completion checks.
// Exit 0 with "ok:" lines, or "FAIL: ... (seed N)" and exit 1.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <softmrc/softmrc.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "shm/app_protocol.h"
#include "shm/shared_memory.h"
#include "shm/spsc_ring.h"

namespace {

namespace s = softmrc::shm;

uint64_t seed = 0;
uint64_t round_no = 0;

[[noreturn]] void fail(const std::string& what) {
  std::printf("FAIL: round %" PRIu64 ": %s (seed %" PRIu64 ")\n", round_no, what.c_str(), seed);
  std::fflush(stdout);
  std::exit(1);
}

struct Rng {
  std::mt19937_64 g;
  uint64_t below(uint64_t n) { return n ? g() % n : 0; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; }
  // A power of two 2^lo..2^hi.
  uint32_t pow2(uint32_t lo, uint32_t hi) {
    return 1u << (lo + static_cast<uint32_t>(below(hi - lo + 1)));
  }
} rng;

template <typename Map>
uint32_t any_key(const Map& m) {
  auto it = m.begin();
  std::advance(it, static_cast<long>(rng.below(m.size())));
  return it->first;
}

// An id that is not in `own`: the bystander's (when it has one of this
// kind), 0, or any other.
template <typename Map>
uint32_t foreign_id(const Map& own, uint32_t bystander) {
  for (;;) {
    const uint64_t pick = rng.below(4);
    const uint32_t id = pick == 0 && bystander != 0 ? bystander
                        : pick == 1                 ? 0
                        : pick == 2                 ? static_cast<uint32_t>(1 + rng.below(64))
                                                    : static_cast<uint32_t>(rng.g());
    if (!own.count(id)) return id;
  }
}

// The descriptors a request carries, as the script chose them.
enum class FdKind {
  kMemfd,       // a sealed memfd of the size asked, or a page larger
  kHoles,       // the same with a hole punched in it (the daemon backs no page)
  kTooSmall,    // a sealed memfd shorter than asked
  kUnsealed,    // a memfd that could shrink under the daemon
  kSealedShut,  // a memfd the daemon cannot seal against holes
  kEventfd,
  kPipe,  // a pipe's write end
  kTwo,   // a memfd and an eventfd
  kNone,
  kCount
};

struct Fds {
  std::vector<int> fds;
  Fds() = default;
  Fds(const Fds&) = delete;
  Fds& operator=(const Fds&) = delete;
  ~Fds() {
    for (int fd : fds) ::close(fd);
  }
};

class Conn {
 public:
  explicit Conn(const char* path) : path_(path) {}
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() { close(); }
  bool open() {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_);
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Sends the first `bytes` of m (zero-padded past it) with `fds`, its seq
  // set (and its magic unless `raw`), then waits for its reply; the events
  // that come first go to on_event. The reply's descriptor, if any, goes to
  // *reply_fd; only kCreateChannel's reply may have one.
  template <typename OnEvent>
  s::Msg call(s::Msg m, const std::vector<int>& fds, OnEvent on_event, size_t bytes, bool raw,
              int* reply_fd) {
    if (!raw) m.magic = s::kAppMagic;
    m.seq = ++seq_;
    std::vector<unsigned char> buf(std::max(bytes, sizeof(m)));
    std::memcpy(buf.data(), &m, sizeof(m));
    iovec iov{buf.data(), bytes};
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)];
    if (!fds.empty()) {
      h.msg_control = control;
      h.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    if (::sendmsg(fd_, &h, MSG_NOSIGNAL) != static_cast<ssize_t>(bytes))
      fail(std::string("sendmsg: ") + std::strerror(errno) + " (the daemon went away?)");
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10000) != 1) fail("no reply within 10 s: the daemon hangs");
      s::Msg r{};
      Fds got;
      bool truncated = false;
      const ssize_t n = s::recv_message(fd_, &r, 0, &got.fds, &truncated);
      if (n <= 0) fail("the daemon closed the connection (it died?)");
      if (n != sizeof(r) || truncated) fail("a short or long message from the daemon");
      const bool channel = r.type == (uint16_t(s::MsgType::kCreateChannel) | s::kReplyBit);
      if (got.fds.size() != (channel && r.status == 0 ? 1u : 0u))
        fail("a reply with a descriptor where none belongs, or without its own");
      if (r.magic != s::kAppMagic) fail("a message from the daemon without the magic");
      if (r.type == uint16_t(s::MsgType::kEvent)) {
        on_event(r.u.event);
        continue;
      }
      if (r.seq != m.seq) fail("a reply with another seq");
      if (r.type != (m.type | s::kReplyBit)) fail("a reply of another type");
      if (r.status < 0 || r.status >= 4096) fail("a reply status that is no errno value");
      if (r.status != 0 &&
          (r.detail[0] == '\0' || std::memchr(r.detail, 0, sizeof(r.detail)) == nullptr))
        fail("a refusal without a reason");
      if (!got.fds.empty()) *reply_fd = got.fds[0];
      got.fds.clear();
      return r;
    }
  }

 private:
  const char* path_;
  int fd_ = -1;
  uint32_t seq_ = 0;
};

// What the storm holds of each thing it owns; release() lets go of our
// side once the daemon has freed it (or the connection is gone).
struct Pd {
  void release() {}
};
struct Region {
  s::Mapping mem;  // when the script kept a mapping of it
  uint32_t pd = 0;
  uint64_t va = 0, length = 0;
  void release() { s::unmap_shared(&mem); }
};
struct Channel {
  int read_end = -1;  // -1: closed at once, so wake-ups meet a pipe without a reader
  void release() {
    if (read_end >= 0) ::close(read_end);
  }
};
struct Cq {
  uint32_t channel = 0;
  s::Mapping mem;
  s::RingConsumer<s::Cqe> ring;
  bool scribbled = false;
  void release() { s::unmap_shared(&mem); }
};
struct Qp {
  uint32_t pd = 0;
  uint32_t send_cq = 0, recv_cq = 0;
  uint32_t state = SMRC_QPS_RESET;  // as the last modify or query left it
  // Given, since then, a descriptor that fails (and takes it to ERR) in
  // that state: a bad one, or a Write before RTS.
  bool given_failing = false;
  s::Mapping mem;
  s::RingProducer<s::WorkRequest> sq, rq;
  void release() { s::unmap_shared(&mem); }
};
// A work request in a ring, until its completion.
struct Posted {
  uint32_t qpn, cq;
  bool recv;
  bool invalid;  // breaks docs/api.md's rules: must not succeed
};

class Storm {
 public:
  Storm(const char* sock, const uint8_t* peer_gid, uint32_t bystander_qpn, uint32_t bystander_key)
      : conn_(sock), bystander_qpn_(bystander_qpn), bystander_key_(bystander_key) {
    std::memcpy(peer_gid_, peer_gid, 16);
  }
  Storm(const Storm&) = delete;
  Storm& operator=(const Storm&) = delete;
  ~Storm() { forget(); }

  void run(uint64_t rounds);

 private:
  void connect();
  void on_event(const s::EventMsg& e);
  s::Msg call(const s::Msg& m, const std::vector<int>& fds = {}, size_t bytes = sizeof(s::Msg),
              bool raw = false, int* reply_fd = nullptr) {
    ++requests_;
    const s::Msg r = conn_.call(
        m, fds, [this](const s::EventMsg& e) { on_event(e); }, bytes, raw, reply_fd);
    if (r.status != 0) ++refused_;
    return r;
  }
  // must_ok: the request is well-formed and names what we own, so it must
  // succeed (or fail only with `allowed`); must_fail: it must be refused.
  static void expect(bool must_ok, bool must_fail, const s::Msg& r, const char* what,
                     int allowed = 0) {
    if (must_ok && r.status != 0 && r.status != allowed)
      fail(std::string(what) + ": refused (" + std::strerror(r.status) + ": " + r.detail + ")");
    if (must_fail && r.status == 0) fail(std::string(what) + ": accepted");
  }
  static FdKind fd_kind() {
    return rng.chance(0.75) ? FdKind::kMemfd
                            : static_cast<FdKind>(rng.below(uint64_t(FdKind::kCount)));
  }
  // Attaches descriptors of `kind` to `out` for a request that asks for a
  // memfd of `bytes` (mapped into *mem); returns the size of the one sealed
  // memfd attached, 0 if that is not what was attached.
  size_t attach(FdKind kind, size_t bytes, Fds* out, s::Mapping* mem);
  void try_holes(const s::Mapping& mem);
  bool scribbled(uint32_t qpn) const { return scribbled_qpns_.count(qpn) != 0; }
  bool may_have_failed(uint32_t qpn, const Qp& q) const;
  void forget();

  template <typename Map, typename InUse>
  void free_one(Map& own, s::MsgType type, uint32_t bystander, const std::string& what,
                InUse in_use);
  // A PD of ours, or (sometimes, and always without one) an id that is not:
  // *good says which.
  uint32_t pd_id(bool* good);
  void alloc_pd();
  void dealloc_pd();
  void reg_mr();
  void dereg_mr();
  void create_channel();
  void destroy_channel();
  void create_cq();
  void destroy_cq();
  void create_qp();
  void destroy_qp();
  void modify_qp();
  void query_qp();
  void query_profile();
  void junk();
  void post();
  void arm();
  void drain();
  void scribble();
  void reconnect();

  Conn conn_;
  uint8_t peer_gid_[16];
  const uint32_t bystander_qpn_, bystander_key_;
  uint32_t num_planes_ = 0, max_wr_ = 0;
  std::map<uint32_t, Pd> pds_;
  std::map<uint32_t, Region> regions_;
  std::map<uint32_t, Channel> channels_;
  std::map<uint32_t, Cq> cqs_;
  std::map<uint32_t, Qp> qps_;
  std::set<uint32_t> ever_qpns_, scribbled_qpns_;
  std::map<uint64_t, Posted> posted_;
  uint64_t next_wr_id_ = 1;
  uint64_t requests_ = 0, refused_ = 0, completions_ = 0, events_ = 0, posts_ = 0;
  uint64_t wakeups_ = 0, deaf_wakeups_ = 0;
  uint64_t holes_refused_ = 0;
};

void Storm::connect() {
  if (!conn_.open()) fail(std::string("connect: ") + std::strerror(errno));
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kHello);
  m.u.hello = {s::kAppProtocolVersion, SMRC_API_VERSION};
  const s::Msg r = call(m);
  expect(true, false, r, "hello");
  num_planes_ = r.u.hello_rep.num_planes;
  max_wr_ = std::min(r.u.hello_rep.max_qp_wr, 64u);
}

void Storm::on_event(const s::EventMsg& e) {
  ++events_;
  switch (static_cast<s::EventKind>(e.kind)) {
    case s::EventKind::kQpFatal:
      if (e.qpn == bystander_qpn_) fail("the bystander's QP-fatal event came to us");
      if (ever_qpns_.count(e.qpn) == 0) fail("a QP-fatal event for a QP never ours");
      break;
    case s::EventKind::kPortActive:
    case s::EventKind::kPortErr:
      if (e.plane >= num_planes_) fail("a port event for a plane the endpoint does not have");
      break;
    case s::EventKind::kCqErr:
      break;
    default:
      fail("an event of an unknown kind");
  }
}

// Once the daemon holds a memfd, it is sealed against holes: a page taken
// from under the daemon's mapping could fault it dead (hugepages).
void Storm::try_holes(const s::Mapping& mem) {
  if (!rng.chance(0.25)) return;
  const size_t pages = mem.bytes / 4096;
  const size_t first = rng.below(pages);
  if (::madvise(static_cast<char*>(mem.addr) + 4096 * first, 4096 * (1 + rng.below(pages - first)),
                MADV_REMOVE) == 0 ||
      errno != EPERM)
    fail("a hole punched into a memfd the daemon holds");
  ++holes_refused_;
}

// Whether a memfd of `given` bytes backs a request for `need`: at least
// that, and less than a page more (shm::map_shared()).
bool backs(size_t given, size_t need) {
  return given >= need && given - need < 4096;
}

size_t Storm::attach(FdKind kind, size_t bytes, Fds* out, s::Mapping* mem) {
  size_t memfd_bytes = 0;
  const auto memfd = [&](size_t b) {
    const int fd = s::create_shared(b, false, mem);
    if (fd < 0) fail("create_shared");
    memfd_bytes = mem->bytes;
    return fd;
  };
  switch (kind) {
    case FdKind::kMemfd:
      out->fds.push_back(memfd(bytes + (rng.chance(0.5) ? 0 : 4096)));
      break;
    case FdKind::kHoles: {
      s::Mapping scratch;
      const int fd = s::create_shared(bytes, false, &scratch);
      s::unmap_shared(&scratch);
      if (fd < 0 ||
          ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      static_cast<off_t>(4096 * rng.below((bytes + 4095) / 4096)), 4096) != 0)
        fail("punching a hole before registering");
      out->fds.push_back(fd);
      break;
    }
    case FdKind::kSealedShut: {
      s::Mapping scratch;
      const int fd = s::create_shared(bytes, false, &scratch);
      s::unmap_shared(&scratch);
      if (fd < 0 || ::fcntl(fd, F_ADD_SEALS, rng.chance(0.5) ? F_SEAL_SEAL : F_SEAL_FUTURE_WRITE))
        fail("sealing a memfd shut");
      out->fds.push_back(fd);
      break;
    }
    case FdKind::kTooSmall:
      if (bytes > 4096) {
        out->fds.push_back(memfd(bytes - 4096));
      } else {  // a sealed memfd of no bytes at all
        out->fds.push_back(::memfd_create("empty", MFD_CLOEXEC | MFD_ALLOW_SEALING));
        (void)!::fcntl(out->fds.back(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
      }
      break;
    case FdKind::kUnsealed: {
      const int fd = ::memfd_create("unsealed", MFD_CLOEXEC);
      (void)!::ftruncate(fd, static_cast<off_t>(bytes + 4096));
      out->fds.push_back(fd);
      break;
    }
    case FdKind::kEventfd:
      out->fds.push_back(::eventfd(0, EFD_CLOEXEC));
      break;
    case FdKind::kPipe: {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) fail("pipe2");
      ::close(p[0]);
      out->fds.push_back(p[1]);
      break;
    }
    case FdKind::kTwo: {
      s::Mapping scratch;
      out->fds.push_back(s::create_shared(bytes, false, &scratch));
      s::unmap_shared(&scratch);
      out->fds.push_back(::eventfd(0, EFD_CLOEXEC));
      break;
    }
    case FdKind::kNone:
    case FdKind::kCount:
      break;
  }
  return memfd_bytes;
}

// Everything this connection had, on our side (its socket closed or the
// storm over: the daemon reclaims its side).
void Storm::forget() {
  const auto release_all = [](auto& own) {
    for (auto& [id, v] : own) v.release();
    own.clear();
  };
  release_all(pds_);
  release_all(regions_);
  release_all(channels_);
  release_all(cqs_);
  release_all(qps_);
  posted_.clear();
}

uint32_t Storm::pd_id(bool* good) {
  if (!pds_.empty() && rng.chance(0.95)) return any_key(pds_);
  *good = false;
  return foreign_id(pds_, 0);
}

void Storm::alloc_pd() {
  if (pds_.size() >= 4) return dealloc_pd();
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kAllocPd);
  const s::Msg r = call(m);
  expect(true, false, r, "alloc_pd");
  if (!pds_.emplace(r.u.id_rep.id, Pd{}).second) fail("alloc_pd: an id already in use");
}

void Storm::dealloc_pd() {
  free_one(pds_, s::MsgType::kDeallocPd, 0, "dealloc_pd", [&](uint32_t id) {
    return std::any_of(regions_.begin(), regions_.end(),
                       [&](const auto& r) { return r.second.pd == id; }) ||
           std::any_of(qps_.begin(), qps_.end(), [&](const auto& q) { return q.second.pd == id; });
  });
}

void Storm::reg_mr() {
  if (regions_.size() >= 12) return dereg_mr();
  const size_t bytes = 4096 * (1 + rng.below(16));
  Fds fds;
  Region reg;
  const size_t given = attach(fd_kind(), bytes, &fds, &reg.mem);
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kRegMr);
  auto& r = m.u.reg_mr;
  const uint64_t v = rng.below(10);
  r.length = v == 0   ? 0
             : v == 1 ? bytes + 1 + rng.below(3 * 4096)
             : v == 2 ? s::kMaxMrBytes + 1
             : v == 3 ? 1 + rng.below(bytes)
                      : bytes;
  r.addr = rng.chance(0.9) && reg.mem.addr ? reinterpret_cast<uint64_t>(reg.mem.addr)
                                           : ~uint64_t{0} - rng.below(1 << 20);
  r.access = static_cast<uint32_t>(rng.below(8)) | (rng.chance(0.2) ? 1u << 20 : 0);
  const bool bad_access = rng.chance(0.05);
  if (bad_access) r.access |= 1u << (3 + rng.below(16));
  bool good_pd = true;
  r.pd = pd_id(&good_pd);
  const bool ok = backs(given, r.length) && r.length != 0 && r.length <= s::kMaxMrBytes &&
                  r.addr + r.length >= r.addr && !bad_access && good_pd;
  const s::Msg rep = call(m, fds.fds);
  expect(ok, !ok, rep, "reg_mr", ENOMEM);
  if (rep.status != 0) return reg.release();
  try_holes(reg.mem);
  const uint32_t key = rep.u.reg_mr_rep.key;
  if (key == bystander_key_ || regions_.count(key)) fail("reg_mr: a key that is already in use");
  reg.pd = r.pd;
  reg.va = r.addr;
  reg.length = r.length;
  regions_[key] = reg;
}

// Frees one of `own` with `type`: it must succeed, or fail with EBUSY if
// `in_use` says so. Or names an id that is not ours: it must be refused.
template <typename Map, typename InUse>
void Storm::free_one(Map& own, s::MsgType type, uint32_t bystander, const std::string& what,
                     InUse in_use) {
  const bool mine = !own.empty() && rng.chance(0.8);
  s::Msg m{};
  m.type = uint16_t(type);
  m.u.key.id = mine ? any_key(own) : foreign_id(own, bystander);
  if (!mine) return expect(false, true, call(m), (what + " not ours").c_str());
  const bool used = in_use(m.u.key.id);
  const s::Msg r = call(m);
  if (used && r.status != EBUSY) fail(what + " of ours in use: not EBUSY");
  expect(!used, used, r, (what + " of ours").c_str());
  if (used) return;
  own[m.u.key.id].release();
  own.erase(m.u.key.id);
}

void Storm::dereg_mr() {
  free_one(regions_, s::MsgType::kDeregMr, bystander_key_, "dereg_mr",
           [](uint32_t) { return false; });
}

// The daemon makes the channel's pipe and sends its read end: a request
// with a descriptor of its own is refused. The read end is then closed at
// once (wake-ups meet a pipe without a reader) or kept and never read (the
// pipe fills): neither may stop the daemon's lcore.
void Storm::create_channel() {
  if (channels_.size() >= 6) return destroy_channel();
  Fds fds;
  s::Mapping mem;
  if (rng.chance(0.2))
    attach(static_cast<FdKind>(rng.below(uint64_t(FdKind::kNone))), 4096, &fds, &mem);
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kCreateChannel);
  int read_end = -1;
  const s::Msg r = call(m, fds.fds, sizeof(m), false, &read_end);
  s::unmap_shared(&mem);
  expect(fds.fds.empty(), !fds.fds.empty(), r, "create_channel");
  if (r.status != 0) return;
  struct stat st {};
  if (::fstat(read_end, &st) != 0 || !S_ISFIFO(st.st_mode) ||
      (::fcntl(read_end, F_GETFL) & O_ACCMODE) != O_RDONLY)
    fail("create_channel: the descriptor is not a pipe's read end");
  if (rng.chance(0.3)) {
    ::close(read_end);
    read_end = -1;
  }
  if (!channels_.emplace(r.u.id_rep.id, Channel{read_end}).second)
    fail("create_channel: an id already in use");
}

void Storm::destroy_channel() {
  free_one(channels_, s::MsgType::kDestroyChannel, 0, "destroy_channel", [&](uint32_t id) {
    return std::any_of(cqs_.begin(), cqs_.end(),
                       [&](const auto& c) { return c.second.channel == id; });
  });
}

void Storm::create_cq() {
  if (cqs_.size() >= 8) return destroy_cq();
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kCreateCq);
  auto& r = m.u.create_cq;
  const bool good_capacity = rng.chance(0.9);
  static constexpr uint32_t kBad[] = {0, 1, 3, 100, s::kMaxCqe * 2};
  r.capacity = good_capacity ? rng.pow2(1, 8) : kBad[rng.below(5)];
  bool good_channel = true;
  if (rng.chance(0.6)) {
    if (!channels_.empty() && rng.chance(0.8)) {
      r.channel = any_key(channels_);
    } else {
      r.channel = static_cast<uint32_t>(1 + rng.below(1000));
      good_channel = channels_.count(r.channel) != 0;
    }
  }
  Fds fds;
  Cq cq;
  const size_t bytes = s::cq_bytes(good_capacity ? r.capacity : 64);
  const size_t given = attach(fd_kind(), bytes, &fds, &cq.mem);
  const bool ok = good_capacity && good_channel && backs(given, bytes);
  const s::Msg rep = call(m, fds.fds);
  expect(ok, !ok, rep, "create_cq");
  if (rep.status != 0) return cq.release();
  try_holes(cq.mem);
  const uint32_t id = rep.u.id_rep.id;
  if (cqs_.count(id)) fail("create_cq: an id already in use");
  cq.channel = r.channel;
  cq.ring.attach(static_cast<char*>(cq.mem.addr) + s::cq_ring_offset(), r.capacity);
  cqs_[id] = std::move(cq);
}

void Storm::destroy_cq() {
  free_one(cqs_, s::MsgType::kDestroyCq, 0, "destroy_cq", [&](uint32_t id) {
    return std::any_of(qps_.begin(), qps_.end(), [&](const auto& q) {
      return q.second.send_cq == id || q.second.recv_cq == id;
    });
  });
}

void Storm::create_qp() {
  if (qps_.size() >= 10) return destroy_qp();
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kCreateQp);
  auto& r = m.u.create_qp;
  const auto cq_id = [&](bool* good) {
    if (!cqs_.empty() && rng.chance(0.95)) return any_key(cqs_);
    *good = false;
    return foreign_id(cqs_, 0);
  };
  bool good = true;
  r.send_cq = cq_id(&good);
  r.recv_cq = cq_id(&good);
  r.max_send_wr = static_cast<uint32_t>(1 + rng.below(max_wr_));
  r.max_recv_wr = static_cast<uint32_t>(rng.below(max_wr_ + 1));
  r.send_ring_capacity = std::bit_ceil(std::max(r.max_send_wr, 2u)) << rng.below(2);
  r.recv_ring_capacity = std::bit_ceil(std::max(r.max_recv_wr, 2u)) << rng.below(2);
  r.sq_sig_all = rng.chance(0.2);
  r.pd = pd_id(&good);
  switch (rng.below(12)) {
    case 0:
      r.max_send_wr = 0;
      good = false;
      break;
    case 1:
      r.send_ring_capacity = r.max_send_wr > 2 ? r.send_ring_capacity / 4 : 3;
      good = false;
      break;
    case 2:
      r.max_recv_wr = s::kMaxQpWr + 1;
      good = false;
      break;
    default:
      break;
  }
  Fds fds;
  Qp q;
  const size_t bytes = good ? s::qp_bytes(r.send_ring_capacity, r.recv_ring_capacity) : 4096;
  const size_t given = attach(fd_kind(), bytes, &fds, &q.mem);
  const bool ok = good && backs(given, bytes);
  const s::Msg rep = call(m, fds.fds);
  expect(ok, !ok, rep, "create_qp", ENOMEM);
  if (rep.status != 0) return q.release();
  try_holes(q.mem);
  const uint32_t qpn = rep.u.create_qp_rep.qpn;
  if (qpn == bystander_qpn_ || qps_.count(qpn)) fail("create_qp: a QPN already in use");
  ever_qpns_.insert(qpn);
  scribbled_qpns_.erase(qpn);
  q.pd = r.pd;
  q.send_cq = r.send_cq;
  q.recv_cq = r.recv_cq;
  q.sq.attach(q.mem.addr, r.send_ring_capacity);
  q.rq.attach(static_cast<char*>(q.mem.addr) + s::qp_recv_ring_offset(r.send_ring_capacity),
              r.recv_ring_capacity);
  qps_[qpn] = std::move(q);
}

void Storm::destroy_qp() {
  free_one(qps_, s::MsgType::kDestroyQp, bystander_qpn_, "destroy_qp",
           [](uint32_t) { return false; });
}

void Storm::modify_qp() {
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kModifyQp);
  auto& r = m.u.modify_qp;
  if (qps_.empty() || rng.chance(0.1)) {
    r.qpn = foreign_id(qps_, bystander_qpn_);
    r.mask = SMRC_QP_STATE;
    r.attr.qp_state = SMRC_QPS_ERR;
    return expect(false, true, call(m), "modify_qp of a QP not ours");
  }
  r.qpn = any_key(qps_);
  Qp& q = qps_[r.qpn];
  const bool settled = !may_have_failed(r.qpn, q);
  bool must_ok = false;
  const uint64_t pick = rng.below(20);
  if (pick == 0 || pick == 1) {  // any -> ERR, any -> RESET
    r.mask = SMRC_QP_STATE;
    r.attr.qp_state = pick == 0 ? SMRC_QPS_ERR : SMRC_QPS_RESET;
    must_ok = true;
  } else if (pick < 13) {  // the next step of a well-behaved application
    must_ok = settled;
    switch (q.state) {
      case SMRC_QPS_RESET:
        r.attr.qp_state = SMRC_QPS_INIT;
        r.mask = SMRC_QP_STATE | SMRC_QP_EV_PROFILE | SMRC_QP_CC_PROFILE;
        break;
      case SMRC_QPS_INIT:
        r.attr.qp_state = SMRC_QPS_RTR;
        r.mask = SMRC_QP_STATE | SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN;
        std::memcpy(r.attr.dgid, peer_gid_, 16);
        r.attr.dest_qp_num = static_cast<uint32_t>(1 + rng.below(1u << 24));
        r.attr.rq_psn = static_cast<uint32_t>(rng.below(1u << 24));
        break;
      case SMRC_QPS_RTR:
      case SMRC_QPS_RTS:
        r.attr.qp_state = SMRC_QPS_RTS;
        r.mask = SMRC_QP_STATE | SMRC_QP_TIMEOUT | SMRC_QP_RETRY_CNT |
                 (q.state == SMRC_QPS_RTR ? SMRC_QP_SQ_PSN : 0);
        r.attr.sq_psn = static_cast<uint32_t>(rng.below(1u << 24));
        r.attr.timeout = static_cast<uint8_t>(8 + rng.below(5));
        r.attr.retry_linear = static_cast<uint8_t>(rng.below(3));
        r.attr.retry_exp = static_cast<uint8_t>(rng.below(3));
        break;
      default:
        r.attr.qp_state = SMRC_QPS_RESET;
        r.mask = SMRC_QP_STATE;
        must_ok = true;
        break;
    }
  } else {  // anything at all
    r.mask = static_cast<uint32_t>(rng.g()) & (rng.chance(0.5) ? 0x7fffu : ~0u);
    const auto bytes = reinterpret_cast<unsigned char*>(&r.attr);
    for (size_t i = 0; i < sizeof(r.attr); ++i) bytes[i] = static_cast<unsigned char>(rng.g());
    r.attr.qp_state = static_cast<uint32_t>(rng.below(6));
    if (rng.chance(0.5)) std::memcpy(r.attr.dgid, peer_gid_, 16);
  }
  const s::Msg rep = call(m);
  expect(must_ok, r.attr.qp_state > SMRC_QPS_ERR && (r.mask & SMRC_QP_STATE), rep, "modify_qp");
  if (rep.status == 0 && (r.mask & SMRC_QP_STATE)) {
    q.state = r.attr.qp_state;
    q.given_failing = false;  // the daemon took what was posted before the modify
  }
}

// A QP goes to ERR by itself in RTS (retries exhausted), when it was given
// a descriptor that fails, or when its rings were scribbled over.
bool Storm::may_have_failed(uint32_t qpn, const Qp& q) const {
  return q.state == SMRC_QPS_RTS || q.state == SMRC_QPS_ERR || q.given_failing || scribbled(qpn);
}

void Storm::query_qp() {
  const bool own = !qps_.empty() && rng.chance(0.85);
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kQueryQp);
  m.u.key.id = own ? any_key(qps_) : foreign_id(qps_, bystander_qpn_);
  const s::Msg r = call(m);
  expect(own, !own, r, own ? "query_qp of our QP" : "query_qp of a QP not ours");
  if (!own) return;
  Qp& q = qps_[m.u.key.id];
  const uint32_t now = r.u.query_qp_rep.attr.qp_state;
  if (now != q.state && !(now == SMRC_QPS_ERR && may_have_failed(m.u.key.id, q)))
    fail("query_qp of QP " + std::to_string(m.u.key.id) + ": state " + std::to_string(now) +
         ", the last modify set " + std::to_string(q.state));
  q.state = now;
}

void Storm::query_profile() {
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kQueryProfile);
  auto& r = m.u.query_profile;
  r.kind = static_cast<uint32_t>(rng.below(4));
  const uint64_t v = rng.below(4);
  if (v == 0) {
    std::memset(r.name, 'x', sizeof(r.name));  // not terminated
  } else if (v == 1) {
    std::snprintf(r.name, sizeof(r.name), "p%u", static_cast<unsigned>(rng.below(100)));
  } else {
    std::snprintf(r.name, sizeof(r.name), "default");
  }
  const bool bad = v == 0 || r.kind == 0 || r.kind == 3;
  expect(!bad && v >= 2 && r.kind == SMRC_PROFILE_EV, bad, call(m), "query_profile");
}

void Storm::junk() {
  s::Msg m{};
  m.type = uint16_t(s::MsgType::kQueryQp);
  m.u.key.id = qps_.empty() ? 1 : any_key(qps_);
  switch (rng.below(7)) {
    case 0:
      m.magic = static_cast<uint32_t>(rng.g());
      return expect(false, m.magic != s::kAppMagic, call(m, {}, sizeof(m), true), "bad magic");
    case 1:
      return expect(false, true, call(m, {}, 16 + rng.below(sizeof(m) - 16)), "a short message");
    case 2:
      return expect(false, true, call(m, {}, sizeof(m) + 1 + rng.below(64)), "a long message");
    case 3: {
      // None, the daemon's own event, the first type past it, a far one, a reply.
      static constexpr uint16_t kTypes[] = {0, uint16_t(s::MsgType::kEvent),
                                            uint16_t(s::MsgType::kEvent) + 1, 77,
                                            uint16_t(s::MsgType::kQueryQp) | s::kReplyBit};
      m.type = kTypes[rng.below(5)];
      return expect(false, true, call(m), "an unknown message type");
    }
    case 4: {
      Fds fds;
      fds.fds.push_back(::eventfd(0, EFD_CLOEXEC));
      return expect(false, true, call(m, fds.fds), "a descriptor on a message that takes none");
    }
    case 5:
      m.type = uint16_t(rng.chance(0.5) ? s::MsgType::kRegMr : s::MsgType::kCreateCq);
      m.u.reg_mr = {0x10000, 4096, 0, 0};
      m.u.create_cq.capacity = 64;
      return expect(false, true, call(m), "a request without its descriptor");
    default:
      m.type = uint16_t(s::MsgType::kHello);
      m.u.hello = {s::kAppProtocolVersion + 1 + static_cast<uint32_t>(rng.below(3)),
                   SMRC_API_VERSION};
      if (rng.chance(0.5)) m.u.hello = {s::kAppProtocolVersion, (SMRC_API_VERSION_MAJOR + 1) << 16};
      return expect(false, true, call(m), "hello of another version");
  }
}

void Storm::post() {
  if (qps_.empty()) return create_qp();
  const uint32_t qpn = any_key(qps_);
  if (scribbled(qpn)) return;
  Qp& q = qps_[qpn];
  const bool recv_ring = rng.chance(0.25);
  // Some batches break no rule, most of those given a QP in RTS: any bad
  // descriptor takes the QP to ERR, and Writes must reach the wire too.
  const bool clean = rng.chance(q.state == SMRC_QPS_RTS ? 0.8 : 0.5);
  s::WorkRequest wr[8]{};
  Posted what[8]{};
  const uint32_t n = static_cast<uint32_t>(1 + rng.below(8));
  for (uint32_t i = 0; i < n; ++i) {
    s::WorkRequest& w = wr[i];
    w.wr_id = next_wr_id_ + i;
    w.flags = rng.chance(0.5) ? s::kWrSignaled : 0;
    w.remote_addr = rng.g();
    w.rkey = static_cast<uint32_t>(rng.g());
    w.imm = static_cast<uint32_t>(rng.g());
    bool invalid = false;
    const uint64_t op = clean ? 2 + rng.below(18) : rng.below(20);
    if (recv_ring) {
      w.opcode = uint8_t(op == 0 ? s::WrOpcode::kWrite : s::WrOpcode::kRecv);
      invalid = op == 0;
    } else {
      w.opcode = op == 0   ? uint8_t(s::WrOpcode::kRecv)
                 : op == 1 ? uint8_t{9}
                           : uint8_t(op < 10 ? s::WrOpcode::kWrite : s::WrOpcode::kWriteImm);
      invalid = op <= 1;
      const uint64_t k = clean ? 0 : rng.below(10);
      if (k < 7 && !regions_.empty()) {
        const Region& reg = regions_[w.lkey = any_key(regions_)];
        w.length = static_cast<uint32_t>(rng.below(std::min<uint64_t>(reg.length, 1 << 16) + 1));
        if (clean && reg.pd != q.pd) w.length = 0;
        w.local_addr = reg.va + rng.below(reg.length - w.length + 1);
        invalid |= reg.pd != q.pd && w.length > 0;  // another PD's region
        if (!clean && rng.chance(0.1)) {            // past the region's end
          w.local_addr = reg.va + reg.length - w.length + 1 + rng.below(4096);
          invalid |= w.length > 0;
        }
      } else if (clean) {  // no region yet: a zero-length Write reads none
        w.length = 0;
      } else {  // the bystander's key, or any
        w.lkey = k == 7 ? bystander_key_ : foreign_id(regions_, bystander_key_);
        w.length = static_cast<uint32_t>(1 + rng.below(4096));
        w.local_addr = rng.g();
        invalid = true;
      }
      if (!clean && rng.chance(0.03)) {
        w.length = 0x90000000u;  // over any message limit
        invalid = true;
      }
      if (w.remote_addr + w.length < w.remote_addr) invalid = true;
    }
    what[i] = Posted{qpn, recv_ring ? q.recv_cq : q.send_cq, recv_ring, invalid};
  }
  const uint32_t in = (recv_ring ? q.rq : q.sq).enqueue_burst(wr, n);
  const bool takes = q.state == SMRC_QPS_INIT || q.state == SMRC_QPS_RTR;  // or RTS
  for (uint32_t i = 0; i < in; ++i) {
    posted_[next_wr_id_ + i] = what[i];
    q.given_failing = q.given_failing || (takes && (what[i].invalid || !recv_ring));
  }
  next_wr_id_ += n;
  posts_ += in;
}

void Storm::arm() {
  if (cqs_.empty()) return create_cq();
  Cq& cq = cqs_[any_key(cqs_)];
  if (cq.scribbled) return;
  auto* ctrl = static_cast<s::CqControl*>(cq.mem.addr);
  ctrl->armed.store(1, std::memory_order_seq_cst);
}

void Storm::drain() {
  for (auto& [id, cq] : cqs_) {
    if (cq.scribbled) continue;
    s::Cqe got[32];
    uint32_t n;
    while ((n = cq.ring.dequeue_burst(got, 32)) > 0) {
      for (uint32_t i = 0; i < n; ++i) {
        const s::Cqe& c = got[i];
        ++completions_;
        if (c.qpn == bystander_qpn_) fail("a completion of the bystander's QP in our CQ");
        if (ever_qpns_.count(c.qpn) == 0) fail("a completion for a QP never ours");
        if (scribbled(c.qpn)) continue;
        auto p = posted_.find(c.wr_id);
        if (p == posted_.end())
          fail("a completion for a work request never posted, or completed twice");
        if (p->second.qpn != c.qpn) fail("a completion names another QP than its request's");
        if (p->second.cq != id) fail("a completion in another CQ than its QP's");
        if (p->second.recv != (c.opcode == uint8_t(s::CqeOpcode::kRecvWriteImm)))
          fail("a completion of another kind than its request");
        if (p->second.invalid && c.status == uint8_t(s::WcStatus::kSuccess))
          fail("a work request that breaks the rules completed with SUCCESS");
        posted_.erase(p);
      }
    }
    if (cq.ring.corrupt()) fail("the daemon's producer index of a CQ is out of range");
    if (static_cast<s::CqControl*>(cq.mem.addr)->fired.exchange(0) != 0) {
      ++wakeups_;
      auto ch = channels_.find(cq.channel);
      deaf_wakeups_ += ch != channels_.end() && ch->second.read_end < 0;
    }
  }
}

void Storm::scribble() {
  if (!qps_.empty() && rng.chance(0.7)) {
    const uint32_t qpn = any_key(qps_);
    Qp& q = qps_[qpn];
    const size_t at = rng.chance(0.5) ? 0 : s::qp_recv_ring_offset(q.sq.capacity());
    auto* hdr = reinterpret_cast<s::RingHeader*>(static_cast<char*>(q.mem.addr) + at);
    hdr->prod.store(static_cast<uint32_t>(rng.g()), std::memory_order_release);
    scribbled_qpns_.insert(qpn);
  } else if (!cqs_.empty()) {
    Cq& cq = cqs_[any_key(cqs_)];
    auto* hdr =
        reinterpret_cast<s::RingHeader*>(static_cast<char*>(cq.mem.addr) + s::cq_ring_offset());
    hdr->cons.store(static_cast<uint32_t>(rng.g()), std::memory_order_release);
    cq.scribbled = true;
  }
}

// Goes away with everything it had, and comes back: the daemon reclaims it.
void Storm::reconnect() {
  conn_.close();
  forget();
  connect();
}

void Storm::run(uint64_t rounds) {
  using Step = void (Storm::*)();
  static constexpr struct {
    Step step;
    uint32_t weight;
  } kSteps[] = {
      {&Storm::reg_mr, 8},          {&Storm::dereg_mr, 4},      {&Storm::create_channel, 4},
      {&Storm::destroy_channel, 2}, {&Storm::create_cq, 6},     {&Storm::destroy_cq, 3},
      {&Storm::create_qp, 8},       {&Storm::destroy_qp, 3},    {&Storm::modify_qp, 14},
      {&Storm::query_qp, 6},        {&Storm::query_profile, 3}, {&Storm::junk, 6},
      {&Storm::post, 14},           {&Storm::arm, 6},           {&Storm::drain, 10},
      {&Storm::scribble, 1},        {&Storm::alloc_pd, 4},      {&Storm::dealloc_pd, 2},
  };
  uint32_t total = 0;
  for (const auto& s : kSteps) total += s.weight;
  connect();
  for (round_no = 1; round_no <= rounds; ++round_no) {
    if (rng.below(1000) == 0) {
      reconnect();
      continue;
    }
    uint64_t pick = rng.below(total);
    for (const auto& s : kSteps) {
      if (pick < s.weight) {
        (this->*s.step)();
        break;
      }
      pick -= s.weight;
    }
  }
  drain();
  std::printf(
      "ok: %" PRIu64 " requests (%" PRIu64 " refused), %" PRIu64 " work requests posted, %" PRIu64
      " completions and %" PRIu64 " events checked, %" PRIu64 " wake-ups (%" PRIu64
      " into a closed pipe), %" PRIu64 " holes refused\n",
      requests_, refused_, posts_, completions_, events_, wakeups_, deaf_wakeups_, holes_refused_);
}

}  // namespace

int main(int argc, char** argv) {
  uint8_t peer[16];
  if (argc != 5 || inet_pton(AF_INET6, argv[2], peer) != 1) {
    std::fprintf(stderr, "usage: %s SOCKET PEER_IPV6 SEED ROUNDS\n", argv[0]);
    return 2;
  }
  seed = std::strtoull(argv[3], nullptr, 0);
  rng.g.seed(seed);
  std::printf("storm: seed %" PRIu64 "\n", seed);

  // The bystander: a well-behaved application on the same daemon.
  smrc_context* ctx = smrc_open_device(argv[1]);
  if (ctx == nullptr) fail(std::string("open_device: ") + std::strerror(errno));
  smrc_pd* pd = smrc_alloc_pd(ctx);
  smrc_cq* cq = smrc_create_cq(ctx, 64, nullptr, nullptr);
  smrc_mr* mr = smrc_alloc_mr(pd, 1 << 16, SMRC_ACCESS_LOCAL_WRITE | SMRC_ACCESS_REMOTE_WRITE);
  smrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
  smrc_qp* qp = pd && cq && mr ? smrc_create_qp(pd, &ia) : nullptr;
  if (qp == nullptr) fail("the bystander's resources");
  smrc_qp_attr a{};
  a.qp_state = SMRC_QPS_INIT;
  if (smrc_modify_qp(qp, &a, SMRC_QP_STATE) != 0) fail("the bystander's QP to INIT");
  auto* bytes = static_cast<unsigned char*>(mr->addr);
  for (size_t i = 0; i < mr->length; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 1);

  {
    Storm storm(argv[1], peer, smrc_qp_num(qp), mr->lkey);
    storm.run(std::strtoull(argv[4], nullptr, 0));
  }

  smrc_qp_init_attr init{};
  a = smrc_qp_attr{};
  if (smrc_query_qp(qp, &a, SMRC_QP_STATE, &init) != 0 || a.qp_state != SMRC_QPS_INIT)
    fail("the bystander's QP left INIT");
  for (size_t i = 0; i < mr->length; ++i)
    if (bytes[i] != static_cast<unsigned char>(i * 7 + 1)) fail("the bystander's region changed");
  smrc_wc wc;
  if (smrc_poll_cq(cq, 1, &wc) != 0) fail("a completion in the bystander's CQ");
  if (smrc_destroy_qp(qp) != 0 || smrc_free_mr(mr) != 0 || smrc_destroy_cq(cq) != 0 ||
      smrc_dealloc_pd(pd) != 0 || smrc_close_device(ctx) != 0)
    fail("freeing the bystander's resources");
  std::printf("ok: the bystander's QP, region and CQ are untouched\n");
  return 0;
}
