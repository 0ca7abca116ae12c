// libsoftmrc: the application side of the softmrc API (softmrc.h).
//
// Slow path: one request and one reply at a time on the context's
// SOCK_SEQPACKET socket, under the context's mutex; event messages that
// arrive meanwhile are queued for smrc_get_async_event. Data path: a QP's
// sends and receives go straight into its two shared rings, a CQ's polls
// come straight out of its shared ring; no system call, no lock (one
// thread per queue: a QP's sends, its receives, a CQ). No DPDK here: the
// daemon does the transport.
#include "softmrc/softmrc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "cli/release.h"
#include "shm/app_protocol.h"
#include "shm/shared_memory.h"
#include "shm/spsc_ring.h"

using namespace softmrc::shm;

// Empty polls of a CQ between two checks that the daemon is still there.
static constexpr uint32_t kAliveCheckPolls = 256;
static constexpr uint32_t kPostBurst = 32;
static constexpr int kMaxReplyTimeoutMs = 3600000;

struct MrBox;

struct smrc_context {
  int fd = -1;
  // smrc_async_fd(): an epoll set of the socket and `queued_fd`, an eventfd
  // that is readable while `events` holds any, so that events a slow-path
  // call took off the socket keep it readable.
  int async_fd = -1;
  int queued_fd = -1;
  std::mutex mu;  // the socket's request/reply exchange, the tables below
  uint32_t seq = 0;
  int reply_timeout_ms = SMRC_DEFAULT_REPLY_TIMEOUT_MS;
  std::atomic<bool> dead{false};
  bool fatal_reported = false;
  HelloRep hello{};
  std::deque<EventMsg> events;
  // Everything made through the context and not destroyed yet: what
  // smrc_close_device() frees.
  std::map<uint32_t, smrc_qp*> qps;  // by QPN, for events
  std::map<uint32_t, smrc_cq*> cqs;  // by id
  std::set<MrBox*> mrs;
  std::set<smrc_pd*> pds;
  std::set<smrc_comp_channel*> channels;
};

struct smrc_pd {
  smrc_context* ctx = nullptr;
  uint32_t id = 0;  // the daemon's
  std::atomic<uint32_t> users{0};
};

struct smrc_comp_channel {
  smrc_context* ctx = nullptr;
  uint32_t id = 0;
  int fd = -1;  // the read end of the pipe the daemon wakes us through
  std::mutex mu;
  std::vector<smrc_cq*> cqs;
};

struct smrc_cq {
  smrc_context* ctx = nullptr;
  uint32_t id = 0;
  uint32_t capacity = 0;
  void* cq_context = nullptr;
  smrc_comp_channel* channel = nullptr;
  Mapping mem;
  CqControl* ctrl = nullptr;
  RingConsumer<Cqe> ring;
  uint32_t empty_polls = 0;
  uint32_t seen_overflow = 0;
  std::atomic<uint32_t> users{0};
};

// An MR and the mapping under it (whole pages, or whole hugepages).
struct MrBox {
  smrc_mr mr;
  Mapping mem;
};

struct smrc_qp {
  smrc_context* ctx = nullptr;
  smrc_pd* pd = nullptr;
  uint32_t qpn = 0;
  smrc_qp_init_attr init{};
  std::atomic<uint32_t> state{SMRC_QPS_RESET};
  Mapping mem;
  RingProducer<WorkRequest> send_ring;
  RingProducer<WorkRequest> recv_ring;
};

namespace {

bool debug_enabled() {
  static const bool on = std::getenv("SOFTMRC_DEBUG") != nullptr;
  return on;
}

void mark_dead(smrc_context* ctx) {
  ctx->dead.store(true, std::memory_order_release);
}

// The daemon took longer than the reply timeout: the context is dead, and
// the daemon, once it runs again, finds the hang-up and frees what it had.
int give_up(smrc_context* ctx) {
  mark_dead(ctx);
  ::shutdown(ctx->fd, SHUT_RDWR);
  return ETIMEDOUT;
}

// Whether a call's status says the daemon is gone.
bool daemon_gone(int status) {
  return status == ENOTCONN || status == ETIMEDOUT;
}

// Whether the daemon hung up (a poll() that consumes nothing).
bool peer_gone(smrc_context* ctx) {
  if (ctx->dead.load(std::memory_order_acquire)) return true;
  pollfd p{ctx->fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR))) {
    mark_dead(ctx);
    return true;
  }
  return false;
}

// What *fd says when the descriptor a reply came with did not fit the
// process's descriptor table (the kernel dropped it).
constexpr int kFdLost = -2;

// One message from the daemon: 0, EAGAIN (flags has MSG_DONTWAIT and
// nothing is there) or ENOTCONN. The descriptor that came with a reply
// goes to *fd if fd is not null (kFdLost if it was dropped); any other is
// closed.
int recv_msg(smrc_context* ctx, Msg* m, int flags, int* fd = nullptr) {
  std::vector<int> fds;
  bool truncated = false, fds_lost = false;
  const ssize_t n = recv_message(ctx->fd, m, flags, &fds, &truncated, &fds_lost);
  const int err = n < 0 ? errno : 0;
  const bool whole =
      n == static_cast<ssize_t>(sizeof(*m)) && (!truncated || fds_lost) && m->magic == kAppMagic;
  if (whole && fd != nullptr && m->type != uint16_t(MsgType::kEvent)) {
    if (fds.size() == 1) *fd = fds[0];
    if (fds_lost) *fd = kFdLost;
  }
  for (int f : fds)
    if (fd == nullptr || f != *fd) ::close(f);
  if (whole) return 0;
  if (err == EAGAIN || err == EWOULDBLOCK) return EAGAIN;
  mark_dead(ctx);  // EOF, an error, or a message we cannot read
  return ENOTCONN;
}

// The event queue, under ctx->mu: queued_fd is readable while it holds
// any. Each change of the queue ends here, told whether it was empty.
void queue_changed(smrc_context* ctx, bool was_empty) {
  eventfd_t drained;
  if (was_empty && !ctx->events.empty()) (void)!::eventfd_write(ctx->queued_fd, 1);
  if (!was_empty && ctx->events.empty()) (void)!::eventfd_read(ctx->queued_fd, &drained);
}

void push_event(smrc_context* ctx, const EventMsg& e) {
  const bool was_empty = ctx->events.empty();
  ctx->events.push_back(e);
  queue_changed(ctx, was_empty);
}

EventMsg pop_event(smrc_context* ctx) {
  const EventMsg e = ctx->events.front();
  ctx->events.pop_front();
  queue_changed(ctx, false);
  return e;
}

// A timeout_ms argument (-1: for ever) as what is left of it at each wait,
// so that signals and wake-ups that bring nothing do not restart it.
class Deadline {
 public:
  explicit Deadline(int timeout_ms)
      : forever_(timeout_ms < 0),
        at_(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms)) {}
  // For poll(): -1, or the milliseconds left (0 once passed), rounded up.
  int left_ms() const {
    if (forever_) return -1;
    const auto left = at_ - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return 0;
    return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
  }

 private:
  bool forever_;
  std::chrono::steady_clock::time_point at_;
};

// A request and its reply, under ctx->mu. Returns the reply's status.
// `got_fd` (left -1 if none comes): where the descriptor that comes with
// the reply goes, for the one request whose reply has one.
int call_locked(smrc_context* ctx, Msg& m, int pass_fd, Msg* reply, int* got_fd = nullptr) {
  if (ctx->dead.load(std::memory_order_acquire)) return ENOTCONN;
  m.magic = kAppMagic;
  m.seq = ++ctx->seq;
  // The socket's send timeout is the reply timeout: EAGAIN if the daemon
  // has not read for that long.
  if (const int e = send_message(ctx->fd, m, pass_fd); e != 0) {
    if (e == EAGAIN || e == EWOULDBLOCK) return give_up(ctx);
    mark_dead(ctx);
    return ENOTCONN;
  }
  // One deadline for the reply, however many events come before it.
  const Deadline deadline(ctx->reply_timeout_ms);
  for (;;) {
    pollfd p{ctx->fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, deadline.left_ms());
    if (ready == 0) return give_up(ctx);
    if (ready < 0 && errno == EINTR) continue;
    if (const int e = recv_msg(ctx, reply, 0, got_fd); e != 0) return ENOTCONN;
    if (reply->type == uint16_t(MsgType::kEvent)) {
      push_event(ctx, reply->u.event);
      continue;
    }
    if (reply->type != (m.type | kReplyBit) || reply->seq != m.seq) {
      mark_dead(ctx);  // the daemon and we disagree: nothing more can be trusted
      return ENOTCONN;
    }
    if (reply->status != 0 && debug_enabled()) {
      reply->detail[sizeof(reply->detail) - 1] = '\0';
      std::fprintf(stderr, "softmrc: request %u refused: %s (%s)\n", m.type,
                   std::strerror(reply->status), reply->detail);
    }
    return reply->status;
  }
}

int call(smrc_context* ctx, Msg& m, int pass_fd, Msg* reply, int* got_fd = nullptr) {
  std::lock_guard<std::mutex> g(ctx->mu);
  return call_locked(ctx, m, pass_fd, reply, got_fd);
}

Msg request(MsgType t) {
  Msg m{};
  m.type = uint16_t(t);
  return m;
}

template <typename T>
T* fail(int e) {
  errno = e;
  return nullptr;
}

// SMRC_REPLY_TIMEOUT_ENV's milliseconds (the default where it is unset or
// empty), or 0 if it is not a number in 1..kMaxReplyTimeoutMs.
int reply_timeout_ms() {
  const char* v = std::getenv(SMRC_REPLY_TIMEOUT_ENV);
  if (v == nullptr || *v == '\0') return SMRC_DEFAULT_REPLY_TIMEOUT_MS;
  const char* end = v + std::strlen(v);
  int ms = 0;
  const auto [stop, ec] = std::from_chars(v, end, ms);
  return ec == std::errc{} && stop == end && ms >= 1 && ms <= kMaxReplyTimeoutMs ? ms : 0;
}

uint32_t mtu_bytes(uint32_t mtu) {
  return mtu >= SMRC_MTU_256 && mtu <= SMRC_MTU_4096 ? 256u << (mtu - SMRC_MTU_256) : 0;
}

uint32_t mtu_enum(uint32_t bytes) {
  for (uint32_t e = SMRC_MTU_256; e <= SMRC_MTU_4096; ++e)
    if (mtu_bytes(e) == bytes) return e;
  return 0;
}

constexpr uint32_t kOwnMask =
    SMRC_QP_STATE | SMRC_QP_EV_PROFILE | SMRC_QP_CC_PROFILE | SMRC_QP_AV | SMRC_QP_DEST_QPN |
    SMRC_QP_PATH_MTU | SMRC_QP_RQ_PSN | SMRC_QP_MPR_DEST | SMRC_QP_MAX_WIMM_DEST | SMRC_QP_SQ_PSN |
    SMRC_QP_MPR | SMRC_QP_MAX_WIMM | SMRC_QP_TIMEOUT | SMRC_QP_RETRY_CNT | SMRC_QP_CAPS;
constexpr uint32_t kIgnoredMask = SMRC_QP_PKEY_INDEX | SMRC_QP_PORT | SMRC_QP_ACCESS_FLAGS |
                                  SMRC_QP_VERBS_TIMEOUT | SMRC_QP_VERBS_RETRY_CNT |
                                  SMRC_QP_RNR_RETRY | SMRC_QP_MIN_RNR_TIMER |
                                  SMRC_QP_MAX_QP_RD_ATOMIC | SMRC_QP_MAX_DEST_RD_ATOMIC;

}  // namespace

extern "C" {

uint32_t smrc_api_version(void) {
  return SMRC_API_VERSION;
}

const char* smrc_version_string(void) {
  static const std::string s = "softmrc " SOFTMRC_RELEASE " (api " +
                               std::to_string(SMRC_API_VERSION_MAJOR) + "." +
                               std::to_string(SMRC_API_VERSION_MINOR) + ", protocol " +
                               std::to_string(kAppProtocolVersion) + ")";
  return s.c_str();
}

struct smrc_context* smrc_open_device(const char* path) {
  if (path == nullptr) path = std::getenv(SMRC_SOCKET_ENV);
  if (path == nullptr || *path == '\0') path = SMRC_DEFAULT_SOCKET;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (std::strlen(path) >= sizeof(addr.sun_path)) return fail<smrc_context>(ENAMETOOLONG);
  std::strcpy(addr.sun_path, path);
  const int timeout_ms = reply_timeout_ms();
  if (timeout_ms == 0) return fail<smrc_context>(EINVAL);
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  // A daemon that is stopped takes no connection once its backlog is full:
  // the send timeout bounds connect() too (EAGAIN).
  const timeval send_timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno == EAGAIN ? ETIMEDOUT : errno;
    ::close(fd);
    return fail<smrc_context>(e);
  }
  auto* ctx = new (std::nothrow) smrc_context;
  if (ctx == nullptr) {
    ::close(fd);
    return fail<smrc_context>(ENOMEM);
  }
  ctx->fd = fd;
  ctx->reply_timeout_ms = timeout_ms;
  ctx->async_fd = ::epoll_create1(EPOLL_CLOEXEC);
  ctx->queued_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event on_socket{EPOLLIN | EPOLLRDHUP, {}}, on_queue{EPOLLIN, {}};
  if (ctx->async_fd < 0 || ctx->queued_fd < 0 ||
      ::epoll_ctl(ctx->async_fd, EPOLL_CTL_ADD, fd, &on_socket) != 0 ||
      ::epoll_ctl(ctx->async_fd, EPOLL_CTL_ADD, ctx->queued_fd, &on_queue) != 0) {
    const int e = errno;
    smrc_close_device(ctx);
    return fail<smrc_context>(e);
  }
  Msg m = request(MsgType::kHello), r;
  m.u.hello.protocol_version = kAppProtocolVersion;
  m.u.hello.api_version = SMRC_API_VERSION;
  // Tests pretend to be a library of another protocol version.
  if (const char* v = std::getenv("SOFTMRC_TEST_PROTOCOL_VERSION"))
    m.u.hello.protocol_version = static_cast<uint32_t>(std::atoi(v));
  const int st = call(ctx, m, -1, &r);
  if (st != 0) {
    smrc_close_device(ctx);
    return fail<smrc_context>(st);
  }
  ctx->hello = r.u.hello_rep;
  ctx->hello.name[sizeof(ctx->hello.name) - 1] = '\0';
  return ctx;
}

int smrc_close_device(struct smrc_context* ctx) {
  if (ctx == nullptr) return EINVAL;
  // The daemon destroys what is left once the socket closes; the library's
  // side of it goes here.
  ::close(ctx->fd);
  for (auto& [qpn, qp] : ctx->qps) {
    unmap_shared(&qp->mem);
    delete qp;
  }
  for (auto& [id, cq] : ctx->cqs) {
    unmap_shared(&cq->mem);
    delete cq;
  }
  for (MrBox* box : ctx->mrs) {
    unmap_shared(&box->mem);
    delete box;
  }
  for (smrc_comp_channel* ch : ctx->channels) {
    ::close(ch->fd);
    delete ch;
  }
  for (smrc_pd* pd : ctx->pds) delete pd;
  if (ctx->async_fd >= 0) ::close(ctx->async_fd);
  if (ctx->queued_fd >= 0) ::close(ctx->queued_fd);
  delete ctx;
  return 0;
}

int smrc_query_device(struct smrc_context* ctx, struct smrc_device_attr* a) {
  if (ctx == nullptr || a == nullptr) return EINVAL;
  if (peer_gone(ctx)) return ENOTCONN;
  const HelloRep& h = ctx->hello;
  *a = smrc_device_attr{};
  std::memcpy(a->name, h.name, sizeof(a->name));
  a->api_version = h.api_version;
  a->num_planes = h.num_planes;
  a->max_qp = h.max_qp;
  a->max_mr = h.max_mr;
  a->max_cq = h.max_cq;
  a->max_cqe = h.max_cqe;
  a->max_qp_wr = h.max_qp_wr;
  a->max_mr_size = h.max_mr_size;
  a->max_msg_size = h.max_msg_size;
  a->max_wimm = h.max_wimm;
  a->max_mpr = h.max_mpr;
  a->max_timeout = h.max_timeout;
  a->path_mtu = h.path_mtu;
  a->device_cap_flags = h.device_cap_flags;
  a->num_ev_profiles = h.num_ev_profiles;
  a->num_cc_profiles = h.num_cc_profiles;
  return 0;
}

int smrc_query_gid(struct smrc_context* ctx, int index, union smrc_gid* gid) {
  if (ctx == nullptr || gid == nullptr || index != 0) return EINVAL;
  if (peer_gone(ctx)) return ENOTCONN;
  std::memcpy(gid->raw, ctx->hello.gid, 16);
  return 0;
}

int smrc_query_profile(struct smrc_context* ctx, enum smrc_profile_kind kind, const char* name,
                       uint64_t* id) {
  if (ctx == nullptr || name == nullptr || id == nullptr) return EINVAL;
  if (kind != SMRC_PROFILE_EV && kind != SMRC_PROFILE_CC) return EINVAL;
  Msg m = request(MsgType::kQueryProfile), r;
  m.u.query_profile.kind = kind;
  if (std::strlen(name) >= sizeof(m.u.query_profile.name)) return ENOENT;
  std::strcpy(m.u.query_profile.name, name);
  const int st = call(ctx, m, -1, &r);
  if (st == 0) *id = r.u.query_profile_rep.id;
  return st;
}

struct smrc_pd* smrc_alloc_pd(struct smrc_context* ctx) {
  if (ctx == nullptr) return fail<smrc_pd>(EINVAL);
  if (peer_gone(ctx)) return fail<smrc_pd>(ENOTCONN);
  auto* pd = new (std::nothrow) smrc_pd;
  if (pd == nullptr) return fail<smrc_pd>(ENOMEM);
  Msg m = request(MsgType::kAllocPd), r;
  if (const int st = call(ctx, m, -1, &r); st != 0) {
    delete pd;
    return fail<smrc_pd>(st);
  }
  pd->ctx = ctx;
  pd->id = r.u.id_rep.id;
  std::lock_guard<std::mutex> g(ctx->mu);
  ctx->pds.insert(pd);
  return pd;
}

int smrc_dealloc_pd(struct smrc_pd* pd) {
  if (pd == nullptr) return EINVAL;
  if (pd->users.load() != 0) return EBUSY;
  Msg m = request(MsgType::kDeallocPd), r;
  m.u.key.id = pd->id;
  std::lock_guard<std::mutex> g(pd->ctx->mu);
  if (const int st = call_locked(pd->ctx, m, -1, &r); st != 0 && !daemon_gone(st)) return st;
  pd->ctx->pds.erase(pd);
  delete pd;
  return 0;
}

struct smrc_mr* smrc_alloc_mr(struct smrc_pd* pd, size_t length, uint32_t access) {
  if (pd == nullptr || length == 0) return fail<smrc_mr>(EINVAL);
  smrc_context* ctx = pd->ctx;
  if (length > ctx->hello.max_mr_size) return fail<smrc_mr>(EINVAL);
  constexpr uint32_t kKnown = SMRC_ACCESS_LOCAL_WRITE | SMRC_ACCESS_REMOTE_WRITE |
                              SMRC_ACCESS_REMOTE_READ | SMRC_ACCESS_RELAXED_ORDERING;
  if (access & ~kKnown) return fail<smrc_mr>(EINVAL);
  if (peer_gone(ctx)) return fail<smrc_mr>(ENOTCONN);
  auto* box = new (std::nothrow) MrBox;
  if (box == nullptr) return fail<smrc_mr>(ENOMEM);
  Mapping mem;
  const int fd = create_shared(length, true, &mem);
  if (fd < 0) {
    delete box;
    return fail<smrc_mr>(ENOMEM);
  }
  Msg m = request(MsgType::kRegMr), r;
  m.u.reg_mr.addr = reinterpret_cast<uint64_t>(mem.addr);
  m.u.reg_mr.length = length;
  m.u.reg_mr.access = access;
  m.u.reg_mr.pd = pd->id;
  std::lock_guard<std::mutex> g(ctx->mu);
  const int st = call_locked(ctx, m, fd, &r);
  ::close(fd);
  if (st != 0) {
    unmap_shared(&mem);
    delete box;
    return fail<smrc_mr>(st);
  }
  box->mr = smrc_mr{ctx, pd, mem.addr, length, r.u.reg_mr_rep.key, r.u.reg_mr_rep.key, access};
  box->mem = mem;
  pd->users.fetch_add(1);
  ctx->mrs.insert(box);
  return &box->mr;
}

int smrc_free_mr(struct smrc_mr* mr) {
  if (mr == nullptr) return EINVAL;
  Msg m = request(MsgType::kDeregMr), r;
  m.u.key.id = mr->lkey;
  auto* box = reinterpret_cast<MrBox*>(mr);
  std::lock_guard<std::mutex> g(mr->context->mu);
  const int st = call_locked(mr->context, m, -1, &r);
  // The daemon has unmapped it (or is gone): ours goes too.
  mr->context->mrs.erase(box);
  unmap_shared(&box->mem);
  mr->pd->users.fetch_sub(1);
  delete box;
  return st;
}

struct smrc_comp_channel* smrc_create_comp_channel(struct smrc_context* ctx) {
  if (ctx == nullptr) return fail<smrc_comp_channel>(EINVAL);
  auto* ch = new (std::nothrow) smrc_comp_channel;
  if (ch == nullptr) return fail<smrc_comp_channel>(ENOMEM);
  // The daemon makes the channel: a pipe whose read end comes with the reply.
  Msg m = request(MsgType::kCreateChannel), r;
  int fd = -1;
  std::lock_guard<std::mutex> g(ctx->mu);
  int st = call_locked(ctx, m, -1, &r, &fd);
  if (st == 0 && fd == kFdLost) {
    // Our descriptor table is full: the daemon's channel goes again.
    Msg d = request(MsgType::kDestroyChannel), dr;
    d.u.key.id = r.u.id_rep.id;
    const int destroyed = call_locked(ctx, d, -1, &dr);
    st = daemon_gone(destroyed) ? destroyed : EMFILE;
  } else if (st == 0 && fd < 0) {
    st = EPROTO;
  }
  if (st != 0) {
    delete ch;
    return fail<smrc_comp_channel>(st);
  }
  // smrc_get_cq_event() empties it without blocking.
  (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  ch->ctx = ctx;
  ch->id = r.u.id_rep.id;
  ch->fd = fd;
  ctx->channels.insert(ch);
  return ch;
}

int smrc_destroy_comp_channel(struct smrc_comp_channel* ch) {
  if (ch == nullptr) return EINVAL;
  {
    std::lock_guard<std::mutex> g(ch->mu);
    if (!ch->cqs.empty()) return EBUSY;
  }
  Msg m = request(MsgType::kDestroyChannel), r;
  m.u.key.id = ch->id;
  std::lock_guard<std::mutex> g(ch->ctx->mu);
  const int st = call_locked(ch->ctx, m, -1, &r);
  if (st != 0 && !daemon_gone(st)) return st;  // still the application's
  ch->ctx->channels.erase(ch);
  ::close(ch->fd);
  delete ch;
  return 0;
}

int smrc_comp_channel_fd(const struct smrc_comp_channel* ch) {
  return ch == nullptr ? -1 : ch->fd;
}

struct smrc_cq* smrc_create_cq(struct smrc_context* ctx, int cqe, void* cq_context,
                               struct smrc_comp_channel* channel) {
  if (ctx == nullptr || cqe <= 0 || static_cast<uint32_t>(cqe) > ctx->hello.max_cqe ||
      (channel != nullptr && channel->ctx != ctx))
    return fail<smrc_cq>(EINVAL);
  const uint32_t cap = std::bit_ceil(std::max<uint32_t>(static_cast<uint32_t>(cqe), 2));
  auto* cq = new (std::nothrow) smrc_cq;
  if (cq == nullptr) return fail<smrc_cq>(ENOMEM);
  Mapping mem;
  const int fd = create_shared(cq_bytes(cap), false, &mem);
  if (fd < 0) {
    delete cq;
    return fail<smrc_cq>(ENOMEM);
  }
  Msg m = request(MsgType::kCreateCq), r;
  m.u.create_cq.capacity = cap;
  m.u.create_cq.channel = channel ? channel->id : 0;
  int st;
  {
    std::lock_guard<std::mutex> g(ctx->mu);
    st = call_locked(ctx, m, fd, &r);
  }
  ::close(fd);
  if (st != 0) {
    unmap_shared(&mem);
    delete cq;
    return fail<smrc_cq>(st);
  }
  cq->ctx = ctx;
  cq->id = r.u.id_rep.id;
  cq->capacity = cap;
  cq->cq_context = cq_context;
  cq->channel = channel;
  cq->mem = mem;
  cq->ctrl = static_cast<CqControl*>(mem.addr);
  cq->ring.attach(static_cast<char*>(mem.addr) + cq_ring_offset(), cap);
  {
    std::lock_guard<std::mutex> g(ctx->mu);
    ctx->cqs[cq->id] = cq;
  }
  if (channel) {
    std::lock_guard<std::mutex> g(channel->mu);
    channel->cqs.push_back(cq);
  }
  return cq;
}

int smrc_destroy_cq(struct smrc_cq* cq) {
  if (cq == nullptr) return EINVAL;
  if (cq->users.load() != 0) return EBUSY;
  Msg m = request(MsgType::kDestroyCq), r;
  m.u.key.id = cq->id;
  int st;
  {
    std::lock_guard<std::mutex> g(cq->ctx->mu);
    st = call_locked(cq->ctx, m, -1, &r);
    if (st != 0 && !daemon_gone(st)) return st;
    cq->ctx->cqs.erase(cq->id);
  }
  if (cq->channel) {
    std::lock_guard<std::mutex> g(cq->channel->mu);
    auto& v = cq->channel->cqs;
    v.erase(std::remove(v.begin(), v.end(), cq), v.end());
  }
  unmap_shared(&cq->mem);
  delete cq;
  return 0;
}

int smrc_cq_size(const struct smrc_cq* cq) {
  return cq == nullptr ? -EINVAL : static_cast<int>(cq->capacity);
}

int smrc_poll_cq(struct smrc_cq* cq, int num_entries, struct smrc_wc* wc) {
  if (cq == nullptr || num_entries < 0 || (num_entries > 0 && wc == nullptr)) return -EINVAL;
  int done = 0;
  Cqe e[kPostBurst];
  while (done < num_entries) {
    const uint32_t want = std::min<uint32_t>(kPostBurst, static_cast<uint32_t>(num_entries - done));
    const uint32_t n = cq->ring.dequeue_burst(e, want);
    for (uint32_t i = 0; i < n; ++i) {
      smrc_wc& w = wc[done + i];
      w = smrc_wc{};
      w.wr_id = e[i].wr_id;
      w.status = e[i].status;
      w.opcode = e[i].opcode;
      w.qp_num = e[i].qpn;
      w.byte_len = e[i].byte_len;
      w.imm_data = e[i].imm;
      w.wc_flags = e[i].opcode == uint8_t(CqeOpcode::kRecvWriteImm) ? SMRC_WC_WITH_IMM : 0;
      w.vendor_err = e[i].vendor_err;
    }
    done += static_cast<int>(n);
    if (n < want) break;
  }
  if (done > 0) {
    cq->empty_polls = 0;
    return done;
  }
  if (cq->ring.corrupt()) return -EIO;
  const uint32_t overflow = cq->ctrl->overflow.load(std::memory_order_relaxed);
  if (overflow != cq->seen_overflow) {
    cq->seen_overflow = overflow;
    return -EIO;
  }
  if (cq->ctx->dead.load(std::memory_order_acquire)) return -ENOTCONN;
  if (++cq->empty_polls >= kAliveCheckPolls) {
    cq->empty_polls = 0;
    if (peer_gone(cq->ctx)) return -ENOTCONN;
  }
  return 0;
}

int smrc_req_notify_cq(struct smrc_cq* cq, int /*solicited_only*/) {
  if (cq == nullptr || cq->channel == nullptr) return EINVAL;
  if (cq->ctx->dead.load(std::memory_order_acquire)) return ENOTCONN;
  cq->ctrl->armed.store(1, std::memory_order_seq_cst);
  return 0;
}

namespace {

// A CQ of the channel with a notification, which it takes; null if none.
smrc_cq* take_fired(smrc_comp_channel* ch) {
  std::lock_guard<std::mutex> g(ch->mu);
  for (smrc_cq* c : ch->cqs)
    if (c->ctrl->fired.exchange(0, std::memory_order_acq_rel) != 0) return c;
  return nullptr;
}

}  // namespace

int smrc_get_cq_event(struct smrc_comp_channel* ch, struct smrc_cq** cq, void** cq_context,
                      int timeout_ms) {
  if (ch == nullptr || cq == nullptr) return EINVAL;
  const Deadline deadline(timeout_ms);
  for (;;) {
    // The pipe is emptied only once no CQ has a notification left, so that
    // its fd stays readable while one has, and stops being readable after.
    smrc_cq* c = take_fired(ch);
    if (c == nullptr) {
      char wakes[256];
      while (::read(ch->fd, wakes, sizeof(wakes)) > 0) {
      }
      c = take_fired(ch);  // one that fired between the look and the read
    }
    if (c != nullptr) {
      *cq = c;
      if (cq_context) *cq_context = c->cq_context;
      return 0;
    }
    if (peer_gone(ch->ctx)) return ENOTCONN;
    const int left = deadline.left_ms();
    if (left == 0) return ETIMEDOUT;
    // Wait on the channel and the socket (for the daemon's end) at once.
    pollfd p[2] = {{ch->fd, POLLIN, 0}, {ch->ctx->fd, POLLRDHUP, 0}};
    if (::poll(p, 2, left) < 0 && errno != EINTR) return errno;
    if (p[1].revents & (POLLHUP | POLLRDHUP | POLLERR)) mark_dead(ch->ctx);
  }
}

void smrc_ack_cq_events(struct smrc_cq* /*cq*/, unsigned int /*nevents*/) {}

struct smrc_qp* smrc_create_qp(struct smrc_pd* pd, struct smrc_qp_init_attr* ia) {
  if (pd == nullptr || ia == nullptr || ia->send_cq == nullptr || ia->recv_cq == nullptr)
    return fail<smrc_qp>(EINVAL);
  smrc_context* ctx = pd->ctx;
  const smrc_qp_cap& cap = ia->cap;
  if (ia->send_cq->ctx != ctx || ia->recv_cq->ctx != ctx || cap.max_send_wr == 0 ||
      cap.max_send_wr > ctx->hello.max_qp_wr || cap.max_recv_wr > ctx->hello.max_qp_wr ||
      cap.max_send_sge > 1 || cap.max_inline_data != 0)
    return fail<smrc_qp>(EINVAL);
  const uint32_t send_ring = std::bit_ceil(std::max<uint32_t>(cap.max_send_wr, 2));
  const uint32_t recv_ring = std::bit_ceil(std::max<uint32_t>(cap.max_recv_wr, 2));
  Mapping mem;
  const int fd = create_shared(qp_bytes(send_ring, recv_ring), false, &mem);
  if (fd < 0) return fail<smrc_qp>(ENOMEM);
  Msg m = request(MsgType::kCreateQp), r;
  m.u.create_qp =
      CreateQpReq{ia->send_cq->id, ia->recv_cq->id, cap.max_send_wr,          cap.max_recv_wr,
                  send_ring,       recv_ring,       ia->sq_sig_all ? 1u : 0u, pd->id};
  auto* qp = new (std::nothrow) smrc_qp;
  if (qp == nullptr) {
    ::close(fd);
    unmap_shared(&mem);
    return fail<smrc_qp>(ENOMEM);
  }
  std::lock_guard<std::mutex> g(ctx->mu);
  const int st = call_locked(ctx, m, fd, &r);
  ::close(fd);
  if (st != 0) {
    unmap_shared(&mem);
    delete qp;
    return fail<smrc_qp>(st);
  }
  qp->ctx = ctx;
  qp->pd = pd;
  qp->qpn = r.u.create_qp_rep.qpn;
  qp->init = *ia;
  qp->init.cap.max_send_sge = 1;
  qp->mem = mem;
  qp->send_ring.attach(mem.addr, send_ring);
  qp->recv_ring.attach(static_cast<char*>(mem.addr) + qp_recv_ring_offset(send_ring), recv_ring);
  pd->users.fetch_add(1);
  ia->send_cq->users.fetch_add(1);
  ia->recv_cq->users.fetch_add(1);
  ctx->qps[qp->qpn] = qp;  // complete before an event can name it
  return qp;
}

int smrc_destroy_qp(struct smrc_qp* qp) {
  if (qp == nullptr) return EINVAL;
  smrc_context* ctx = qp->ctx;
  Msg m = request(MsgType::kDestroyQp), r;
  m.u.key.id = qp->qpn;
  int st;
  {
    std::lock_guard<std::mutex> g(ctx->mu);
    st = call_locked(ctx, m, -1, &r);
    if (st != 0 && !daemon_gone(st)) return st;
    ctx->qps.erase(qp->qpn);
    // The daemon sent any event of this QP before its reply: a queued one
    // must not be pinned on a later QP that gets the same number.
    const bool was_empty = ctx->events.empty();
    std::erase_if(ctx->events, [&](const EventMsg& e) {
      return e.kind == uint32_t(EventKind::kQpFatal) && e.qpn == qp->qpn;
    });
    queue_changed(ctx, was_empty);
  }
  unmap_shared(&qp->mem);
  qp->pd->users.fetch_sub(1);
  qp->init.send_cq->users.fetch_sub(1);
  qp->init.recv_cq->users.fetch_sub(1);
  delete qp;
  return st;
}

uint32_t smrc_qp_num(const struct smrc_qp* qp) {
  return qp == nullptr ? 0 : qp->qpn;
}

const char* smrc_qp_state_str(enum smrc_qp_state s) {
  switch (s) {
    case SMRC_QPS_RESET:
      return "RESET";
    case SMRC_QPS_INIT:
      return "INIT";
    case SMRC_QPS_RTR:
      return "RTR";
    case SMRC_QPS_RTS:
      return "RTS";
    case SMRC_QPS_ERR:
      return "ERR";
  }
  return "unknown";
}

int smrc_modify_qp(struct smrc_qp* qp, struct smrc_qp_attr* attr, uint32_t mask) {
  if (qp == nullptr || attr == nullptr) return EINVAL;
  if (mask & ~(kOwnMask | kIgnoredMask)) return EINVAL;
  mask &= kOwnMask;
  Msg m = request(MsgType::kModifyQp), r;
  ModifyQpReq& q = m.u.modify_qp;
  q.qpn = qp->qpn;
  q.mask = mask;
  WireQpAttr& w = q.attr;
  w.qp_state = attr->qp_state;
  if (mask & SMRC_QP_PATH_MTU) {
    w.path_mtu = mtu_bytes(attr->path_mtu);
    if (w.path_mtu == 0) return EINVAL;
  }
  w.ev_profile_id = attr->ev_profile_id;
  w.cc_profile_id = attr->cc_profile_id;
  std::memcpy(w.dgid, attr->dgid.raw, 16);
  w.dest_qp_num = attr->dest_qp_num;
  w.rq_psn = attr->rq_psn;
  w.sq_psn = attr->sq_psn;
  w.caps = attr->caps;
  w.max_wimm_dest = attr->max_wimm_dest;
  w.max_wimm = attr->max_wimm;
  w.mpr_dest = attr->mpr_dest;
  w.mpr = attr->mpr;
  w.timeout = attr->timeout;
  w.retry_linear = attr->retry_linear;
  w.retry_exp = attr->retry_exp;
  const int st = call(qp->ctx, m, -1, &r);
  if (st == 0 && (mask & SMRC_QP_STATE)) qp->state.store(attr->qp_state);
  return st;
}

int smrc_query_qp(struct smrc_qp* qp, struct smrc_qp_attr* attr, uint32_t /*mask*/,
                  struct smrc_qp_init_attr* init_attr) {
  if (qp == nullptr || attr == nullptr) return EINVAL;
  Msg m = request(MsgType::kQueryQp), r;
  m.u.key.id = qp->qpn;
  const int st = call(qp->ctx, m, -1, &r);
  if (st != 0) return st;
  const WireQpAttr& w = r.u.query_qp_rep.attr;
  *attr = smrc_qp_attr{};
  attr->qp_state = w.qp_state;
  attr->path_mtu = mtu_enum(w.path_mtu);
  attr->ev_profile_id = w.ev_profile_id;
  attr->cc_profile_id = w.cc_profile_id;
  std::memcpy(attr->dgid.raw, w.dgid, 16);
  attr->dest_qp_num = w.dest_qp_num;
  attr->rq_psn = w.rq_psn;
  attr->sq_psn = w.sq_psn;
  attr->caps = w.caps;
  attr->max_wimm_dest = w.max_wimm_dest;
  attr->max_wimm = w.max_wimm;
  attr->mpr_dest = w.mpr_dest;
  attr->mpr = w.mpr;
  attr->timeout = w.timeout;
  attr->retry_linear = w.retry_linear;
  attr->retry_exp = w.retry_exp;
  qp->state.store(w.qp_state);
  if (init_attr) *init_attr = qp->init;
  return 0;
}

int smrc_post_send(struct smrc_qp* qp, struct smrc_send_wr* wr, struct smrc_send_wr** bad_wr) {
  if (bad_wr) *bad_wr = wr;
  if (qp == nullptr || wr == nullptr) return EINVAL;
  if (qp->ctx->dead.load(std::memory_order_acquire)) return ENOTCONN;
  // In ERR the daemon flushes what is posted, as verbs does: the library
  // may not know yet that the QP failed, and the answer must not depend on it.
  const uint32_t s = qp->state.load(std::memory_order_relaxed);
  if (s != SMRC_QPS_RTS && s != SMRC_QPS_ERR) return EINVAL;
  const bool sig_all = qp->init.sq_sig_all != 0;
  WorkRequest batch[kPostBurst];
  smrc_send_wr* first[kPostBurst];
  while (wr != nullptr) {
    uint32_t n = 0;
    int refused = 0;
    for (; wr != nullptr && n < kPostBurst; wr = wr->next) {
      if (wr->opcode != SMRC_WR_RDMA_WRITE && wr->opcode != SMRC_WR_RDMA_WRITE_WITH_IMM) {
        refused = EOPNOTSUPP;
        break;
      }
      if (wr->num_sge < 0 || wr->num_sge > 1 || (wr->num_sge == 1 && wr->sg_list == nullptr) ||
          (wr->send_flags & SMRC_SEND_INLINE)) {
        refused = EINVAL;
        break;
      }
      WorkRequest& w = batch[n];
      w = WorkRequest{};
      w.wr_id = wr->wr_id;
      if (wr->num_sge == 1) {
        w.local_addr = wr->sg_list[0].addr;
        w.length = wr->sg_list[0].length;
        w.lkey = wr->sg_list[0].lkey;
      }
      w.remote_addr = wr->rdma.remote_addr;
      w.rkey = wr->rdma.rkey;
      w.imm = wr->imm_data;
      w.opcode = uint8_t(wr->opcode == SMRC_WR_RDMA_WRITE ? WrOpcode::kWrite : WrOpcode::kWriteImm);
      w.flags = (sig_all || (wr->send_flags & SMRC_SEND_SIGNALED)) ? kWrSignaled : 0;
      first[n++] = wr;
    }
    const uint32_t in = n ? qp->send_ring.enqueue_burst(batch, n) : 0;
    if (in < n) {
      if (bad_wr) *bad_wr = first[in];
      return qp->send_ring.corrupt() ? EIO : ENOMEM;
    }
    if (refused != 0) {
      if (bad_wr) *bad_wr = wr;
      return refused;
    }
  }
  if (bad_wr) *bad_wr = nullptr;
  return 0;
}

int smrc_post_recv(struct smrc_qp* qp, struct smrc_recv_wr* wr, struct smrc_recv_wr** bad_wr) {
  if (bad_wr) *bad_wr = wr;
  if (qp == nullptr || wr == nullptr) return EINVAL;
  if (qp->ctx->dead.load(std::memory_order_acquire)) return ENOTCONN;
  if (qp->state.load(std::memory_order_relaxed) == SMRC_QPS_RESET) return EINVAL;
  if (qp->init.cap.max_recv_wr == 0) return ENOMEM;  // the daemon would take none
  WorkRequest batch[kPostBurst];
  smrc_recv_wr* first[kPostBurst];
  while (wr != nullptr) {
    uint32_t n = 0;
    for (; wr != nullptr && n < kPostBurst; wr = wr->next) {
      batch[n] = WorkRequest{};
      batch[n].wr_id = wr->wr_id;
      batch[n].opcode = uint8_t(WrOpcode::kRecv);
      first[n++] = wr;
    }
    const uint32_t in = qp->recv_ring.enqueue_burst(batch, n);
    if (in < n) {
      if (bad_wr) *bad_wr = first[in];
      return qp->recv_ring.corrupt() ? EIO : ENOMEM;
    }
  }
  if (bad_wr) *bad_wr = nullptr;
  return 0;
}

const char* smrc_wc_status_str(enum smrc_wc_status s) {
  switch (s) {
    case SMRC_WC_SUCCESS:
      return "success";
    case SMRC_WC_LOC_LEN_ERR:
      return "local length error";
    case SMRC_WC_LOC_QP_OP_ERR:
      return "local QP operation error";
    case SMRC_WC_LOC_PROT_ERR:
      return "local protection error";
    case SMRC_WC_WR_FLUSH_ERR:
      return "work request flushed";
    case SMRC_WC_BAD_RESP_ERR:
      return "bad work request";
    case SMRC_WC_REM_ACCESS_ERR:
      return "remote access error";
    case SMRC_WC_REM_INV_REQ_ERR:
      return "remote invalid request";
    case SMRC_WC_RETRY_EXC_ERR:
      return "retry exceeded";
    case SMRC_WC_FATAL_ERR:
      return "fatal error (daemon gone)";
    case SMRC_WC_GENERAL_ERR:
      return "general error";
    case SMRC_WC_REM_OP_ERR:
      return "remote operation error";
  }
  return "unknown status";
}

const char* smrc_event_type_str(enum smrc_event_type t) {
  switch (t) {
    case SMRC_EVENT_QP_FATAL:
      return "QP fatal";
    case SMRC_EVENT_PORT_ACTIVE:
      return "port active";
    case SMRC_EVENT_PORT_ERR:
      return "port error";
    case SMRC_EVENT_CQ_ERR:
      return "CQ error";
    case SMRC_EVENT_DEVICE_FATAL:
      return "device fatal";
  }
  return "unknown event";
}

int smrc_async_fd(const struct smrc_context* ctx) {
  return ctx == nullptr ? -1 : ctx->async_fd;
}

int smrc_get_async_event(struct smrc_context* ctx, struct smrc_async_event* ev, int timeout_ms) {
  if (ctx == nullptr || ev == nullptr) return EINVAL;
  const Deadline deadline(timeout_ms);
  for (;;) {
    {
      std::lock_guard<std::mutex> g(ctx->mu);
      // Whatever is already in the socket, without waiting.
      Msg m;
      while (!ctx->dead.load() && recv_msg(ctx, &m, MSG_DONTWAIT) == 0)
        if (m.type == uint16_t(MsgType::kEvent)) push_event(ctx, m.u.event);
      if (!ctx->events.empty()) {
        const EventMsg e = pop_event(ctx);
        *ev = smrc_async_event{};
        ev->event_type = e.kind;
        ev->plane = e.plane;
        ev->qp_num = e.qpn;
        ev->status = e.status;
        if (auto it = ctx->qps.find(e.qpn);
            e.kind == uint32_t(EventKind::kQpFatal) && it != ctx->qps.end()) {
          ev->qp = it->second;
          it->second->state.store(SMRC_QPS_ERR);
        }
        if (auto it = ctx->cqs.find(e.cq);
            e.kind == uint32_t(EventKind::kCqErr) && it != ctx->cqs.end())
          ev->cq = it->second;
        return 0;
      }
      if (ctx->dead.load()) {
        if (ctx->fatal_reported) return ENOTCONN;
        ctx->fatal_reported = true;
        *ev = smrc_async_event{};
        ev->event_type = SMRC_EVENT_DEVICE_FATAL;
        ev->status = SMRC_WC_FATAL_ERR;
        return 0;
      }
    }
    const int left = deadline.left_ms();
    if (left == 0) return ETIMEDOUT;
    pollfd p{ctx->fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, left) < 0 && errno != EINTR) return errno;
  }
}

}  // extern "C"
