// Test programs against the C API, driven by api_test.py. Each mode prints
// "ok: <check>" lines and exits 0, or prints "FAIL: <check>: ..." and exits 1.
//
//   api_helper misuse SOCKET PEER_IP   every misuse path returns its error
//   api_helper forge SOCKET PEER_IP    a raw client (no libsoftmrc) writes
//                                      bad descriptors straight into its ring
//   api_helper stream SOCKET [EV CC]   exchange a line like wimm_exchange,
//                                      then post Writes until killed; the
//                                      QP's INIT names EV and CC profile ids
//   api_helper stream_flush SOCKET     likewise until the daemon stops:
//                                      FLUSH_ERR completions, then ENOTCONN
//   api_helper init SOCKET EV CC       a QP to INIT with these profile ids:
//                                      prints "init: <errno>"
//   api_helper sink SOCKET             exchange a line, then print each
//                                      async event until killed
//   api_helper sink_rtr SOCKET         the same with the QP left in RTR
//   api_helper daemon_dies SOCKET      block on a completion channel; when
//                                      the daemon dies every call must fail
//   api_helper daemon_stops SOCKET MS  with a reply timeout of MS, a call
//                                      once a line on standard input says
//                                      the daemon is stopped: ETIMEDOUT
//                                      within it, then every call fails;
//                                      frees at the next line
//   api_helper two_pds SOCKET          two PDs in one application: a region
//                                      of one is out of reach of the other's
//                                      QPs, locally and from the peer
//   api_helper free_in_flight SOCKET writer|target
//                                      a region freed under a Write from it
//   api_helper init_again SOCKET OLD_EV OLD_CC NEW_EV NEW_CC OFFLINE_EV
//                                      INIT -> INIT from one pair of
//                                      profiles to the other, then linked
//   api_helper recv_behind_sends SOCKET deep|wimm
//                                      a receive posted behind a full send
//                                      queue takes the peer's immediate
//   api_helper hog SOCKET N            N contexts, each with as many
//                                      completion channels as it gets
//   api_helper contexts SOCKET         contexts until one is refused
//   (hog and contexts hold theirs until standard input closes)
#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <softmrc/softmrc.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "shm/app_protocol.h"
#include "shm/shared_memory.h"
#include "shm/spsc_ring.h"

namespace {

int failures = 0;

void expect(bool cond, const char* what, long got = 0) {
  if (cond) {
    std::printf("ok: %s\n", what);
  } else {
    std::printf("FAIL: %s (got %ld)\n", what, got);
    ++failures;
  }
  std::fflush(stdout);
}

void expect_err(int got, int want, const char* what) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s -> %s", what, std::strerror(want));
  expect(got == want, buf, got);
}

// For results that are not errno values.
void expect_value(long got, long want, const char* what) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s: %ld", what, want);
  expect(got == want, buf, got);
}

bool parse_gid(const char* ip, smrc_gid* g) {
  std::memset(g, 0, sizeof(*g));
  if (inet_pton(AF_INET6, ip, g->raw) == 1) return true;
  g->raw[10] = g->raw[11] = 0xff;
  return inet_pton(AF_INET, ip, g->raw + 12) == 1;
}

struct Basic {
  smrc_context* ctx = nullptr;
  smrc_pd* pd = nullptr;
  smrc_comp_channel* ch = nullptr;
  smrc_cq* cq = nullptr;
  smrc_mr* mr = nullptr;
  smrc_qp* qp = nullptr;

  Basic() = default;
  Basic(const Basic&) = delete;
  Basic& operator=(const Basic&) = delete;
  // What a case did not free itself (it returned early, or its daemon is
  // gone): freed here, so that the helper leaks nothing under ASan.
  ~Basic() {
    if (qp) smrc_destroy_qp(qp);
    if (mr) smrc_free_mr(mr);
    if (cq) smrc_destroy_cq(cq);
    if (ch) smrc_destroy_comp_channel(ch);
    if (pd) smrc_dealloc_pd(pd);
    if (ctx) smrc_close_device(ctx);
  }
};

bool setup(const char* sock, Basic* b, uint32_t send_wr = 16, size_t mr_bytes = 1 << 20) {
  b->ctx = smrc_open_device(sock);
  if (!b->ctx) return false;
  b->pd = smrc_alloc_pd(b->ctx);
  b->ch = smrc_create_comp_channel(b->ctx);
  b->cq = smrc_create_cq(b->ctx, 256, nullptr, b->ch);
  b->mr = smrc_alloc_mr(b->pd, mr_bytes, SMRC_ACCESS_LOCAL_WRITE | SMRC_ACCESS_REMOTE_WRITE);
  smrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = b->cq;
  ia.cap.max_send_wr = send_wr;
  ia.cap.max_recv_wr = 16;
  b->qp = b->pd && b->cq ? smrc_create_qp(b->pd, &ia) : nullptr;
  return b->pd && b->ch && b->cq && b->mr && b->qp;
}

int to_init(smrc_qp* qp, uint64_t ev_profile = 0, uint64_t cc_profile = 0) {
  smrc_qp_attr a{};
  a.qp_state = SMRC_QPS_INIT;
  a.ev_profile_id = ev_profile;
  a.cc_profile_id = cc_profile;
  return smrc_modify_qp(qp, &a, SMRC_QP_STATE | SMRC_QP_EV_PROFILE | SMRC_QP_CC_PROFILE);
}

int to_rtr(smrc_qp* qp, const smrc_gid& gid, uint32_t dest_qpn, uint64_t ev_profile = 0,
           uint64_t cc_profile = 0) {
  if (int e = to_init(qp, ev_profile, cc_profile)) return e;
  smrc_qp_attr a{};
  a.qp_state = SMRC_QPS_RTR;
  a.dgid = gid;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 1;
  return smrc_modify_qp(qp, &a, SMRC_QP_STATE | SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN);
}

int to_rts(smrc_qp* qp, const smrc_gid& gid, uint32_t dest_qpn, uint8_t timeout = 10,
           uint8_t retry_exp = 0, uint64_t ev_profile = 0, uint64_t cc_profile = 0) {
  if (int e = to_rtr(qp, gid, dest_qpn, ev_profile, cc_profile)) return e;
  smrc_qp_attr a{};
  a.qp_state = SMRC_QPS_RTS;
  a.sq_psn = 1;
  a.timeout = timeout;
  a.retry_linear = 1;
  a.retry_exp = retry_exp;
  return smrc_modify_qp(qp, &a,
                        SMRC_QP_STATE | SMRC_QP_SQ_PSN | SMRC_QP_TIMEOUT | SMRC_QP_RETRY_CNT);
}

// A signaled Write of `sge` to the peer's `remote_addr` under `rkey`.
smrc_send_wr signaled_write(smrc_sge* sge, uint64_t remote_addr, uint32_t rkey) {
  smrc_send_wr wr{};
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.opcode = SMRC_WR_RDMA_WRITE;
  wr.send_flags = SMRC_SEND_SIGNALED;
  wr.rdma.remote_addr = remote_addr;
  wr.rdma.rkey = rkey;
  return wr;
}

// Polls until a completion or `ms` pass.
int poll_one(smrc_cq* cq, smrc_wc* wc, int ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    const int n = smrc_poll_cq(cq, 1, wc);
    if (n != 0) return n;
  }
  return 0;
}

// Drains `n` completions into `got`; how many came within 5 s each.
int poll_n(smrc_cq* cq, smrc_wc* got, int n) {
  int have = 0;
  while (have < n && poll_one(cq, &got[have]) == 1) ++have;
  return have;
}

// A SOCK_SEQPACKET socket bound to `path` (whatever was there removed),
// or -1.
int bound_socket(const std::string& path) {
  ::unlink(path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

// smrc_open_device(path)'s errno, 0 if it opened (the context closed again).
int open_errno(const char* path) {
  smrc_context* ctx = smrc_open_device(path);
  const int e = ctx ? 0 : errno;
  if (ctx) smrc_close_device(ctx);
  return e;
}

// open_device's errors before any daemon answers: a socket file nobody
// listens on, and a path no socket address holds.
void open_errors(const char* sock) {
  const std::string refused = std::string(sock) + ".refused";
  const int fd = bound_socket(refused);
  expect(fd >= 0, "a socket file nobody listens on");
  expect_err(open_errno(refused.c_str()), ECONNREFUSED, "open_device with nothing listening");
  ::close(fd);
  ::unlink(refused.c_str());
  expect_err(open_errno(("/tmp/" + std::string(sizeof(sockaddr_un::sun_path), 'x')).c_str()),
             ENAMETOOLONG, "open_device with a path over sun_path");
  expect_err(open_errno("/nonexistent/softmrc.sock"), ENOENT, "open_device on no socket");
}

// The milliseconds since it was made.
class Stopwatch {
 public:
  long ms() const {
    return long(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start_)
                    .count());
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// smrc_open_device(sock) must fail with ETIMEDOUT after at least
// `timeout_ms`, and not much later.
void open_times_out(const char* sock, long timeout_ms, const char* what) {
  const Stopwatch took;
  const int e = open_errno(sock);
  const long ms = took.ms();
  expect_err(e, ETIMEDOUT, what);
  expect(ms >= timeout_ms && ms < timeout_ms + 5000, "  ...after the reply timeout (ms)", ms);
}

// SMRC_REPLY_TIMEOUT_ENV: a value that is not a number of milliseconds in
// 1..3600000 is refused; a listener that takes the connection but never
// answers the hello, and one whose backlog is full (connect() waits), each
// end the open after the timeout.
void reply_timeout_errors(const char* sock) {
  for (const char* bad : {"0", "-5", "abc", "10ms", " 10", "3600001", "99999999999"}) {
    setenv(SMRC_REPLY_TIMEOUT_ENV, bad, 1);
    expect_err(open_errno(sock), EINVAL,
               (std::string("open_device with " SMRC_REPLY_TIMEOUT_ENV "=") + bad).c_str());
  }
  setenv(SMRC_REPLY_TIMEOUT_ENV, "300", 1);
  const std::string mute = std::string(sock) + ".mute";
  const int fd = bound_socket(mute);
  // A backlog of 0 holds one connection: the first open's.
  expect(fd >= 0 && ::listen(fd, 0) == 0, "a listener that accepts nothing");
  open_times_out(mute.c_str(), 300, "open_device: the hello unanswered -> ETIMEDOUT");
  open_times_out(mute.c_str(), 300, "open_device: the backlog full -> ETIMEDOUT");
  ::close(fd);
  ::unlink(mute.c_str());
  unsetenv(SMRC_REPLY_TIMEOUT_ENV);
}

// Every destroy and free call refuses NULL; the accessors say -1/-EINVAL.
void null_handles() {
  expect_err(smrc_close_device(nullptr), EINVAL, "close_device(NULL)");
  expect_err(smrc_dealloc_pd(nullptr), EINVAL, "dealloc_pd(NULL)");
  expect_err(smrc_destroy_cq(nullptr), EINVAL, "destroy_cq(NULL)");
  expect_err(smrc_destroy_qp(nullptr), EINVAL, "destroy_qp(NULL)");
  expect_err(smrc_destroy_comp_channel(nullptr), EINVAL, "destroy_comp_channel(NULL)");
  expect_err(smrc_free_mr(nullptr), EINVAL, "free_mr(NULL)");
  smrc_qp_attr a{};
  expect_err(smrc_query_qp(nullptr, &a, 0, nullptr), EINVAL, "query_qp(NULL)");
  expect_value(smrc_cq_size(nullptr), -EINVAL, "cq_size(NULL) is -EINVAL");
  expect_value(smrc_comp_channel_fd(nullptr), -1, "comp_channel_fd(NULL)");
  expect_value(smrc_async_fd(nullptr), -1, "async_fd(NULL)");
  expect(std::strcmp(smrc_qp_state_str(SMRC_QPS_RESET), "RESET") == 0 &&
             std::strcmp(smrc_qp_state_str(SMRC_QPS_INIT), "INIT") == 0 &&
             std::strcmp(smrc_qp_state_str(SMRC_QPS_RTR), "RTR") == 0 &&
             std::strcmp(smrc_qp_state_str(SMRC_QPS_RTS), "RTS") == 0 &&
             std::strcmp(smrc_qp_state_str(SMRC_QPS_ERR), "ERR") == 0 &&
             std::strcmp(smrc_qp_state_str(static_cast<smrc_qp_state>(7)), "unknown") == 0,
         "qp_state_str names every state, 'unknown' otherwise");
  expect(
      std::strcmp(smrc_event_type_str(SMRC_EVENT_PORT_ACTIVE), "port active") == 0 &&
          std::strcmp(smrc_event_type_str(SMRC_EVENT_DEVICE_FATAL), "device fatal") == 0 &&
          std::strcmp(smrc_event_type_str(static_cast<smrc_event_type>(0)), "unknown event") == 0,
      "event_type_str");
}

// Makes objects into `made` until one more than `most` exist or `make`
// fails; the errno of the failure, 0 if none failed.
template <typename T, typename Make>
int fill(std::vector<T*>* made, size_t most, Make make) {
  while (made->size() <= most) {
    T* x = make();
    if (x == nullptr) return errno;
    made->push_back(x);
  }
  return 0;
}

// The device's tables fill: the next one is ENOMEM.
void table_limits(Basic& b, const smrc_device_attr& da) {
  std::vector<smrc_mr*> mrs{b.mr};
  const int mr_err = fill(&mrs, da.max_mr, [&] { return smrc_alloc_mr(b.pd, 4096, 0); });
  expect(mrs.size() == da.max_mr, "max_mr regions registered", static_cast<long>(mrs.size()));
  expect_err(mr_err, ENOMEM, "alloc_mr past max_mr");
  for (size_t i = 1; i < mrs.size(); ++i) smrc_free_mr(mrs[i]);

  std::vector<smrc_qp*> qps{b.qp};
  smrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = b.cq;
  ia.cap.max_send_wr = 2;
  const int qp_err = fill(&qps, da.max_qp, [&] { return smrc_create_qp(b.pd, &ia); });
  expect(qps.size() == da.max_qp, "max_qp QPs created", static_cast<long>(qps.size()));
  expect_err(qp_err, ENOMEM, "create_qp past max_qp");
  for (size_t i = 1; i < qps.size(); ++i) smrc_destroy_qp(qps[i]);

  std::vector<smrc_comp_channel*> channels{b.ch};
  const int ch_err = fill(&channels, 256, [&] { return smrc_create_comp_channel(b.ctx); });
  expect(channels.size() == 256, "256 channels on one device", static_cast<long>(channels.size()));
  expect_err(ch_err, ENOMEM, "create_comp_channel past 256");
  int destroyed = 0;
  for (size_t i = 1; i < channels.size(); ++i)
    destroyed += smrc_destroy_comp_channel(channels[i]) == 0;
  expect(destroyed == 255, "the 255 channels destroyed", destroyed);

  std::vector<smrc_pd*> pds{b.pd};
  const int pd_err = fill(&pds, 256, [&] { return smrc_alloc_pd(b.ctx); });
  expect(pds.size() == 256, "256 PDs on one device", static_cast<long>(pds.size()));
  expect_err(pd_err, ENOMEM, "alloc_pd past 256");
  int freed = 0;
  for (size_t i = 1; i < pds.size(); ++i) freed += smrc_dealloc_pd(pds[i]) == 0;
  expect(freed == 255, "the 255 PDs deallocated", freed);
}

// Waits on the channel and the context: what they return when nothing
// comes, and for bad arguments.
void waits(Basic& b) {
  smrc_cq* cq = nullptr;
  void* cq_ctx = nullptr;
  expect_err(smrc_get_cq_event(b.ch, &cq, &cq_ctx, 0), ETIMEDOUT, "get_cq_event, no wait");
  expect_err(smrc_get_cq_event(b.ch, &cq, &cq_ctx, 20), ETIMEDOUT, "get_cq_event, 20 ms");
  expect_err(smrc_get_cq_event(nullptr, &cq, &cq_ctx, 0), EINVAL, "get_cq_event(NULL)");
  expect_err(smrc_get_cq_event(b.ch, nullptr, &cq_ctx, 0), EINVAL, "get_cq_event, NULL cq");
  // Port events of planes that came up since we connected may come first.
  smrc_async_event ev{};
  int e = 0, others = 0;
  for (int i = 0; i < 64 && e == 0; ++i) {
    e = smrc_get_async_event(b.ctx, &ev, 20);
    if (e == 0) others += ev.event_type != SMRC_EVENT_PORT_ACTIVE;
  }
  expect_err(e, ETIMEDOUT, "get_async_event, nothing (after port events)");
  expect(others == 0, "only port events came before", others);
  expect_err(smrc_get_async_event(b.ctx, &ev, 0), ETIMEDOUT, "get_async_event, no wait");
  expect_err(smrc_get_async_event(nullptr, &ev, 0), EINVAL, "get_async_event(NULL)");
  expect_err(smrc_get_async_event(b.ctx, nullptr, 0), EINVAL, "get_async_event, NULL event");
  // Nothing waits: the async fd is not readable.
  pollfd async{smrc_async_fd(b.ctx), POLLIN, 0};
  expect(async.fd >= 0 && poll(&async, 1, 0) == 0, "async_fd not readable with no event");

  // Signals every 20 ms neither make a wait last for ever nor end it early.
  struct sigaction tick {};
  tick.sa_handler = [](int) {};  // no SA_RESTART: poll() returns EINTR
  sigaction(SIGALRM, &tick, nullptr);
  const itimerval every{{0, 20'000}, {0, 20'000}};
  setitimer(ITIMER_REAL, &every, nullptr);
  const auto waited = [](auto wait) {
    const auto t0 = std::chrono::steady_clock::now();
    const int e = wait();
    return std::pair{e,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  };
  auto [e1, s1] = waited([&] { return smrc_get_cq_event(b.ch, &cq, &cq_ctx, 300); });
  expect_err(e1, ETIMEDOUT, "get_cq_event under signals");
  expect(s1 >= 0.29 && s1 < 10, "get_cq_event, 300 ms under signals: its time (ms)",
         long(s1 * 1000));
  auto [e2, s2] = waited([&] { return smrc_get_async_event(b.ctx, &ev, 300); });
  expect_err(e2, ETIMEDOUT, "get_async_event under signals");
  expect(s2 >= 0.29 && s2 < 10, "get_async_event, 300 ms under signals: its time (ms)",
         long(s2 * 1000));
  const itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
}

// smrc_close_device with everything still made: the library frees its side
// (descriptors and mappings), round after round.
void close_leaves_nothing(const char* sock) {
  const auto open_fds = [] {
    long n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
      while (readdir(d)) ++n;
      closedir(d);
    }
    return n;
  };
  const auto mappings = [] {
    long n = 0;
    if (FILE* f = std::fopen("/proc/self/maps", "r")) {
      for (int c; (c = std::fgetc(f)) != EOF;) n += c == '\n';
      std::fclose(f);
    }
    return n;
  };
  long fds0 = 0, maps0 = 0;
  for (int round = 0; round < 3; ++round) {
    Basic b;
    if (!setup(sock, &b, 16, 8 << 20)) {
      expect(false, "setup for close_device");
      return;
    }
    smrc_close_device(b.ctx);
    b.ctx = nullptr;  // its handles went with the context
    b.pd = nullptr;
    b.ch = nullptr;
    b.cq = nullptr;
    b.mr = nullptr;
    b.qp = nullptr;
    const long fds = open_fds(), maps = mappings();
    if (round == 0) {
      fds0 = fds;
      maps0 = maps;
    }
    expect_value(fds, fds0, "descriptors after close_device, round after round");
    expect_value(maps, maps0, "mappings after close_device, round after round");
  }
}

// Whether an async event names `qpn` as fatal within `ms` (other events,
// such as a plane's, are passed over).
bool qp_fatal_within(smrc_context* ctx, uint32_t qpn, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  smrc_async_event ev;
  while (std::chrono::steady_clock::now() < end)
    if (smrc_get_async_event(ctx, &ev, 20) == 0 && ev.event_type == SMRC_EVENT_QP_FATAL &&
        ev.qp_num == qpn)
      return true;
  return false;
}

// A QP's work through ERR and RESET, as in verbs: receives may be posted
// from INIT, Writes only in RTS; a move to ERR flushes everything posted,
// raises no QP_FATAL (the application asked for it), and what is posted in
// ERR is accepted and flushed; a move to RESET drops the work without a
// completion, also the Writes that waited for room in the send queue, and
// the QP can be connected again. Its peer QP (number 5 on the other
// daemon) does not exist, so no Write is ever acknowledged.
void error_and_reset(Basic& b, const smrc_gid& peer) {
  smrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = b.cq;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 4;
  smrc_qp* qp = smrc_create_qp(b.pd, &ia);
  expect(qp != nullptr, "a QP whose send queue holds 4");
  if (qp == nullptr) return;
  smrc_sge sge{reinterpret_cast<uintptr_t>(b.mr->addr), 64, b.mr->lkey};
  smrc_send_wr wr = signaled_write(&sge, reinterpret_cast<uintptr_t>(b.mr->addr), b.mr->rkey);
  smrc_recv_wr rwr{};
  smrc_wc got[16];
  const auto to = [&](smrc_qp_state state, uint32_t mask) {
    smrc_qp_attr a{};
    a.qp_state = state;
    a.dgid = peer;
    a.dest_qp_num = 5;
    a.timeout = 20;  // a second: nothing times out during the case
    return smrc_modify_qp(qp, &a, SMRC_QP_STATE | mask);
  };
  // Eight Writes: the send queue takes four, the daemon keeps the rest
  // until there is room.
  const auto post_eight = [&] {
    int st = 0;
    for (int i = 0; i < 8; ++i) {
      wr.wr_id = 400 + i;
      st |= smrc_post_send(qp, &wr, nullptr);
      if (i == 3) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return st;
  };
  const uint32_t rtr = SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN;
  const uint32_t rts = SMRC_QP_SQ_PSN | SMRC_QP_TIMEOUT;

  expect_err(to(SMRC_QPS_INIT, 0), 0, "RESET -> INIT");
  rwr.wr_id = 300;
  expect_err(smrc_post_recv(qp, &rwr, nullptr), 0, "post_recv in INIT");
  expect_err(smrc_post_send(qp, &wr, nullptr), EINVAL, "post_send in INIT");
  expect_err(to(SMRC_QPS_RTR, rtr), 0, "INIT -> RTR");
  expect_err(smrc_post_send(qp, &wr, nullptr), EINVAL, "post_send in RTR");
  expect_err(to(SMRC_QPS_RTS, rts), 0, "RTR -> RTS");
  expect_err(post_eight(), 0, "eight Writes in RTS");
  expect(poll_one(b.cq, got, 50) == 0, "no Write completes unacknowledged");
  expect_err(to(SMRC_QPS_ERR, 0), 0, "RTS -> ERR");
  int n = poll_n(b.cq, got, 9), sends = 0, recvs = 0;
  for (int i = 0; i < n; ++i) {
    const bool recv = got[i].opcode == SMRC_WC_RECV_RDMA_WITH_IMM;
    // Each queue's completions in post order.
    const bool in_order = got[i].wr_id == (recv ? 300u + recvs : 400u + sends);
    if (got[i].status == SMRC_WC_WR_FLUSH_ERR && in_order) ++(recv ? recvs : sends);
  }
  expect(n == 9 && sends == 8 && recvs == 1,
         "ERR flushes the receive and the eight Writes, in order", sends * 10 + recvs);
  expect(!qp_fatal_within(b.ctx, smrc_qp_num(qp), 300), "no QP_FATAL for a move to ERR asked for");
  wr.wr_id = 500;
  expect_err(smrc_post_send(qp, &wr, nullptr), 0, "post_send in ERR");
  expect(poll_one(b.cq, got) == 1 && got[0].wr_id == 500 && got[0].status == SMRC_WC_WR_FLUSH_ERR,
         "a Write posted in ERR is flushed", got[0].status);
  rwr.wr_id = 501;
  expect_err(smrc_post_recv(qp, &rwr, nullptr), 0, "post_recv in ERR");
  expect(poll_one(b.cq, got) == 1 && got[0].wr_id == 501 && got[0].status == SMRC_WC_WR_FLUSH_ERR,
         "a receive posted in ERR is flushed", got[0].status);

  expect_err(to(SMRC_QPS_RESET, 0), 0, "ERR -> RESET");
  expect_err(smrc_post_recv(qp, &rwr, nullptr), EINVAL, "post_recv in RESET");
  expect_err(to(SMRC_QPS_INIT, 0), 0, "RESET -> INIT again");
  rwr.wr_id = 600;
  expect_err(smrc_post_recv(qp, &rwr, nullptr), 0, "a receive before RESET");
  expect_err(to(SMRC_QPS_RTR, rtr), 0, "INIT -> RTR again");
  expect_err(to(SMRC_QPS_RTS, rts), 0, "RTR -> RTS again");
  expect_err(post_eight(), 0, "eight Writes before RESET");
  expect_err(to(SMRC_QPS_RESET, 0), 0, "RTS -> RESET");
  got[0] = smrc_wc{};
  expect(poll_one(b.cq, got, 300) == 0, "RESET completes nothing",
         static_cast<long>(got[0].wr_id * 100 + got[0].status));
  smrc_qp_attr q{};
  std::memset(&q, 0xff, sizeof(q));
  static const uint8_t no_gid[16] = {};
  // A reset QP keeps none of the attributes it was given (the peer's
  // address and QP, its PSNs, its profiles).
  expect(smrc_query_qp(qp, &q, 0, nullptr) == 0 && q.qp_state == SMRC_QPS_RESET &&
             std::memcmp(&q.dgid, no_gid, 16) == 0 && q.dest_qp_num == 0 && q.sq_psn == 0 &&
             q.rq_psn == 0 && q.ev_profile_id == 0 && q.cc_profile_id == 0,
         "query_qp says RESET, with no attribute left");
  expect_err(smrc_destroy_qp(qp), 0, "destroy the QP");
}

int misuse(const char* sock, const char* peer_ip) {
  smrc_gid peer;
  if (!parse_gid(peer_ip, &peer)) return 2;
  // Version mismatch: a library of another protocol version is refused.
  setenv("SOFTMRC_TEST_PROTOCOL_VERSION", "99", 1);
  smrc_context* bad = smrc_open_device(sock);
  expect_err(bad ? 0 : errno, EPROTO, "open_device with another protocol version");
  unsetenv("SOFTMRC_TEST_PROTOCOL_VERSION");
  open_errors(sock);
  reply_timeout_errors(sock);
  null_handles();

  Basic b;
  expect(setup(sock, &b), "setup: context, PD, channel, CQ, MR, QP");
  if (failures) return 1;
  smrc_device_attr da;
  expect_err(smrc_query_device(b.ctx, &da), 0, "query_device");
  expect(da.api_version == SMRC_API_VERSION && da.num_planes >= 1, "device attributes");
  expect_err(smrc_api_version() == SMRC_API_VERSION ? 0 : 1, 0, "smrc_api_version");
  const std::string version = smrc_version_string();
  const std::string want = "(api " + std::to_string(SMRC_API_VERSION_MAJOR) + "." +
                           std::to_string(SMRC_API_VERSION_MINOR) + ", protocol " +
                           std::to_string(softmrc::shm::kAppProtocolVersion) + ")";
  expect(version.starts_with("softmrc ") && version.ends_with(want),
         ("smrc_version_string: " + version).c_str(), 0);

  // Bad handles and arguments.
  expect_err(smrc_query_device(nullptr, &da), EINVAL, "query_device(NULL)");
  smrc_gid gid;
  expect_err(smrc_query_gid(b.ctx, 1, &gid), EINVAL, "query_gid index 1");
  expect_err(smrc_query_gid(b.ctx, 0, nullptr), EINVAL, "query_gid into NULL");
  expect_err(smrc_query_gid(b.ctx, 0, &gid), 0, "query_gid index 0");
  expect(smrc_alloc_pd(nullptr) == nullptr && errno == EINVAL, "alloc_pd(NULL) -> EINVAL");
  expect(smrc_alloc_mr(b.pd, 0, 0) == nullptr && errno == EINVAL, "alloc_mr length 0 -> EINVAL");
  expect(smrc_alloc_mr(b.pd, da.max_mr_size + 1, 0) == nullptr && errno == EINVAL,
         "alloc_mr over max_mr_size -> EINVAL");
  expect(smrc_alloc_mr(b.pd, 4096, 1u << 9) == nullptr && errno == EINVAL,
         "alloc_mr unknown access -> EINVAL");
  expect(smrc_create_cq(b.ctx, 0, nullptr, nullptr) == nullptr && errno == EINVAL,
         "create_cq 0 entries -> EINVAL");
  expect(smrc_create_cq(b.ctx, 1 << 30, nullptr, nullptr) == nullptr && errno == EINVAL,
         "create_cq over max_cqe -> EINVAL");
  expect_value(smrc_cq_size(b.cq), 256, "cq_size of a CQ of 256");
  smrc_cq* lone = smrc_create_cq(b.ctx, 100, nullptr, nullptr);
  expect(lone != nullptr, "a CQ of 100 without a channel");
  expect_value(smrc_cq_size(lone), 128, "cq_size of a CQ of 100");
  expect_err(smrc_req_notify_cq(lone, 0), EINVAL, "req_notify_cq on a CQ without a channel");
  expect_err(smrc_req_notify_cq(nullptr, 0), EINVAL, "req_notify_cq(NULL)");
  smrc_qp_init_attr ia{};
  expect(smrc_create_qp(b.pd, &ia) == nullptr && errno == EINVAL,
         "create_qp without CQs -> EINVAL");
  ia.send_cq = ia.recv_cq = b.cq;
  ia.cap.max_send_wr = 1u << 30;
  expect(smrc_create_qp(b.pd, &ia) == nullptr && errno == EINVAL,
         "create_qp over max_qp_wr -> EINVAL");
  ia.cap.max_send_wr = 0;
  expect(smrc_create_qp(b.pd, &ia) == nullptr && errno == EINVAL,
         "create_qp with max_send_wr 0 -> EINVAL");
  ia.cap.max_send_wr = 4;
  ia.cap.max_send_sge = 2;
  expect(smrc_create_qp(b.pd, &ia) == nullptr && errno == EINVAL,
         "create_qp with 2 send SGEs -> EINVAL");
  ia.cap.max_send_sge = 1;
  ia.cap.max_inline_data = 64;
  expect(smrc_create_qp(b.pd, &ia) == nullptr && errno == EINVAL,
         "create_qp with inline data -> EINVAL");
  ia.cap.max_inline_data = 0;
  smrc_context* other = smrc_open_device(sock);
  smrc_cq* foreign = other ? smrc_create_cq(other, 16, nullptr, nullptr) : nullptr;
  expect(foreign != nullptr, "a CQ of another context");
  ia.recv_cq = foreign;
  expect(smrc_create_qp(b.pd, &ia) == nullptr && errno == EINVAL,
         "create_qp with a CQ of another context -> EINVAL");
  smrc_comp_channel* foreign_ch = other ? smrc_create_comp_channel(other) : nullptr;
  expect(foreign_ch && smrc_create_cq(b.ctx, 16, nullptr, foreign_ch) == nullptr && errno == EINVAL,
         "create_cq with a channel of another context -> EINVAL");
  expect_err(smrc_destroy_comp_channel(foreign_ch), 0, "destroy the other context's channel");
  ia.recv_cq = b.cq;
  expect_err(smrc_destroy_cq(foreign), 0, "destroy the other context's CQ");
  expect_err(smrc_close_device(other), 0, "close the other context");
  expect_err(smrc_destroy_cq(lone), 0, "destroy the CQ without a channel");
  expect_err(smrc_poll_cq(nullptr, 1, nullptr), -EINVAL, "poll_cq(NULL)");
  expect_err(smrc_destroy_cq(b.cq), EBUSY, "destroy_cq used by a QP");
  expect_err(smrc_dealloc_pd(b.pd), EBUSY, "dealloc_pd with MR and QP");
  expect_err(smrc_destroy_comp_channel(b.ch), EBUSY, "destroy_comp_channel with a CQ");
  uint64_t id = 0;
  expect_err(smrc_query_profile(b.ctx, SMRC_PROFILE_EV, "default", &id), 0,
             "query_profile default");
  expect(id == 1, "default EV profile id 1", static_cast<long>(id));
  expect_err(smrc_query_profile(b.ctx, SMRC_PROFILE_EV, "nope", &id), ENOENT,
             "query_profile unknown name");
  expect_err(smrc_query_profile(b.ctx, static_cast<smrc_profile_kind>(3), "default", &id), EINVAL,
             "query_profile of an unknown kind");
  expect_err(smrc_query_profile(b.ctx, SMRC_PROFILE_EV, nullptr, &id), EINVAL,
             "query_profile(NULL name)");
  expect_err(smrc_query_profile(b.ctx, SMRC_PROFILE_EV, "default", nullptr), EINVAL,
             "query_profile into NULL");
  table_limits(b, da);
  waits(b);
  close_leaves_nothing(sock);

  // Posting before RTS.
  smrc_sge sge{reinterpret_cast<uintptr_t>(b.mr->addr), 64, b.mr->lkey};
  smrc_send_wr wr = signaled_write(&sge, 0, 0);
  smrc_send_wr* bad_wr = nullptr;
  expect_err(smrc_post_send(b.qp, &wr, &bad_wr), EINVAL, "post_send in RESET");
  expect(bad_wr == &wr, "bad_wr names the refused request");
  smrc_recv_wr rwr{};
  expect_err(smrc_post_recv(b.qp, &rwr, nullptr), EINVAL, "post_recv in RESET");

  // Bad state transitions.
  smrc_qp_attr a{};
  a.qp_state = SMRC_QPS_RTS;
  a.sq_psn = 1;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_SQ_PSN), EINVAL, "RESET -> RTS");
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_INIT;
  a.ev_profile_id = 42;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_EV_PROFILE), ENOENT,
             "INIT with an unknown EV profile id");
  a.ev_profile_id = 0;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_SQ_PSN), EINVAL,
             "INIT with an RTS attribute");
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_PORT | SMRC_QP_PKEY_INDEX), 0,
             "INIT with verbs-only PORT/PKEY (ignored)");
  // INIT -> INIT, as rdma_cm does before RTR: with no profile it changes
  // nothing, it takes no field of another transition, and a profile it
  // cannot have leaves the QP on the one it had.
  const uint32_t cm_init = SMRC_QP_STATE | SMRC_QP_PKEY_INDEX | SMRC_QP_PORT | SMRC_QP_ACCESS_FLAGS;
  expect_err(smrc_modify_qp(b.qp, &a, cm_init), 0,
             "INIT -> INIT with rdma_cm's verbs-only PKEY/PORT/ACCESS_FLAGS (ignored)");
  a.sq_psn = 1;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_SQ_PSN), EINVAL,
             "INIT -> INIT with an RTS attribute");
  a.dest_qp_num = 5;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_EV_PROFILE | SMRC_QP_DEST_QPN),
             EINVAL, "INIT -> INIT with a profile and an RTR attribute");
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_INIT;
  a.ev_profile_id = 1;  // "default", named
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_EV_PROFILE), 0,
             "INIT -> INIT to EV profile 1");
  a.ev_profile_id = 42;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_EV_PROFILE), ENOENT,
             "INIT -> INIT with an unknown EV profile id");
  a.ev_profile_id = 0;
  a.cc_profile_id = 42;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_CC_PROFILE), ENOENT,
             "INIT -> INIT with an unknown CC profile id");
  smrc_qp_attr q{};
  expect(smrc_query_qp(b.qp, &q, 0, nullptr) == 0 && q.qp_state == SMRC_QPS_INIT &&
             q.ev_profile_id == 1 && q.cc_profile_id == 0,
         "query_qp: still INIT, on EV profile 1 and the default CC profile",
         static_cast<long>(q.qp_state * 10000 + q.ev_profile_id * 100 + q.cc_profile_id));
  expect_err(smrc_modify_qp(b.qp, &a, 1u << 17), EINVAL, "unknown mask bit");
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_RTR;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE), EINVAL, "RTR without AV/DEST_QPN/RQ_PSN");
  smrc_gid unknown;
  parse_gid("fd00:dead::1", &unknown);
  a.dgid = unknown;
  a.dest_qp_num = 5;
  const uint32_t rtr = SMRC_QP_STATE | SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN;
  expect_err(smrc_modify_qp(b.qp, &a, rtr), EHOSTUNREACH, "RTR to an unknown GID");
  a.dgid = peer;
  a.path_mtu = 9;
  expect_err(smrc_modify_qp(b.qp, &a, rtr | SMRC_QP_PATH_MTU), EINVAL, "RTR with a bad MTU enum");
  a.path_mtu = SMRC_MTU_4096;
  expect_err(smrc_modify_qp(b.qp, &a, rtr | SMRC_QP_PATH_MTU), EINVAL,
             "RTR with a path MTU over the endpoint's");
  // The MRC attributes of RTR, out of range and then set.
  const uint32_t rtr_mrc = rtr | SMRC_QP_MPR_DEST | SMRC_QP_MAX_WIMM_DEST | SMRC_QP_CAPS;
  a.mpr_dest = 0;
  a.max_wimm_dest = 7;
  a.caps = SMRC_QP_CAP_DYNAMIC_MPR | SMRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED;
  expect_err(smrc_modify_qp(b.qp, &a, rtr_mrc), EINVAL, "RTR with mpr_dest 0");
  a.mpr_dest = static_cast<uint8_t>(da.max_mpr + 1);
  expect_err(smrc_modify_qp(b.qp, &a, rtr_mrc), EINVAL, "RTR with mpr_dest over max_mpr");
  a.mpr_dest = da.max_mpr;
  a.max_wimm_dest = static_cast<uint16_t>(da.max_wimm + 1);
  expect(da.max_wimm < 65535, "max_wimm leaves room above it", da.max_wimm);
  expect_err(smrc_modify_qp(b.qp, &a, rtr_mrc), EINVAL, "RTR with max_wimm_dest over max_wimm");
  a.max_wimm_dest = 7;
  a.caps = 1u << 5;
  expect_err(smrc_modify_qp(b.qp, &a, rtr_mrc), EINVAL, "RTR with an unknown caps bit");
  a.caps = SMRC_QP_CAP_DYNAMIC_MPR | SMRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED;
  expect_err(smrc_modify_qp(b.qp, &a, rtr_mrc), 0,
             "INIT -> RTR with MPR_DEST, MAX_WIMM_DEST, CAPS");
  q = smrc_qp_attr{};
  expect_err(smrc_query_qp(b.qp, &q, 0, nullptr), 0, "query_qp in RTR");
  expect(q.qp_state == SMRC_QPS_RTR && q.mpr_dest == da.max_mpr && q.max_wimm_dest == 7 &&
             q.caps == (SMRC_QP_CAP_DYNAMIC_MPR | SMRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED),
         "query_qp returns RTR's mpr_dest, max_wimm_dest and caps", q.caps);
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_INIT;
  a.ev_profile_id = 42;  // no such transition comes before no such profile
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_EV_PROFILE), EINVAL,
             "RTR -> INIT naming an unknown EV profile");
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE), EINVAL, "RTR -> INIT");
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_RTS;
  a.sq_psn = 1;
  a.max_wimm = 65535;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_SQ_PSN | SMRC_QP_MAX_WIMM), EINVAL,
             "RTS with max_wimm over the device's (too many WIMMs)");
  a.max_wimm = 0;
  a.timeout = 25;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_SQ_PSN | SMRC_QP_TIMEOUT), EINVAL,
             "RTS with timeout 25");
  a.timeout = 8;
  const uint32_t rts = SMRC_QP_STATE | SMRC_QP_SQ_PSN | SMRC_QP_MAX_WIMM | SMRC_QP_TIMEOUT |
                       SMRC_QP_MPR | SMRC_QP_CAPS;
  a.mpr = 0;
  a.caps = SMRC_QP_CAP_DYNAMIC_MPR | SMRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED;
  expect_err(smrc_modify_qp(b.qp, &a, rts), EINVAL, "RTS with mpr 0");
  a.mpr = static_cast<uint8_t>(da.max_mpr + 1);
  expect_err(smrc_modify_qp(b.qp, &a, rts), EINVAL, "RTS with mpr over max_mpr");
  a.mpr = 3;
  a.caps = 1u << 5;
  expect_err(smrc_modify_qp(b.qp, &a, rts), EINVAL, "RTS with an unknown caps bit");
  a.caps = SMRC_QP_CAP_DYNAMIC_MPR | SMRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED;
  a.verbs_retry_cnt = 14;
  a.rnr_retry = 14;
  expect_err(smrc_modify_qp(b.qp, &a, rts | SMRC_QP_VERBS_RETRY_CNT | SMRC_QP_RNR_RETRY), 0,
             "RTR -> RTS with mpr 3, caps, max_wimm 0 and verbs RNR/retry 14 (ignored)");
  q = smrc_qp_attr{};
  expect_err(smrc_query_qp(b.qp, &q, 0, nullptr), 0, "query_qp");
  expect(q.qp_state == SMRC_QPS_RTS && q.timeout == 8 && q.dest_qp_num == 5, "query_qp says RTS");
  expect(q.mpr == 3 && q.max_wimm == 0 &&
             q.caps == (SMRC_QP_CAP_DYNAMIC_MPR | SMRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED) &&
             q.mpr_dest == da.max_mpr && q.max_wimm_dest == 7,
         "query_qp returns RTS's mpr, max_wimm and caps, RTR's mpr_dest and max_wimm_dest", q.mpr);

  // Unsupported opcodes are refused at post time.
  for (uint32_t op : {SMRC_WR_SEND, SMRC_WR_RDMA_READ, SMRC_WR_ATOMIC_FETCH_AND_ADD}) {
    wr.opcode = op;
    expect_err(smrc_post_send(b.qp, &wr, nullptr), EOPNOTSUPP, "post_send of a non-MRC opcode");
  }
  wr.opcode = SMRC_WR_RDMA_WRITE;
  wr.num_sge = 2;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), EINVAL, "post_send with 2 SGEs");
  wr.num_sge = -1;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), EINVAL, "post_send with num_sge -1");
  wr.num_sge = 1;
  wr.sg_list = nullptr;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), EINVAL, "post_send of 1 SGE, sg_list NULL");
  wr.sg_list = &sge;
  wr.send_flags = SMRC_SEND_INLINE;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), EINVAL, "post_send inline");
  wr.send_flags = SMRC_SEND_SIGNALED;

  // A Write that fails a check completes with its status and takes the QP
  // to ERR, as an error completion does in verbs: what is posted after it
  // is flushed, unchecked. back_to_rts() connects it again as above.
  const auto in_state = [&](smrc_qp_state state, const char* what) {
    smrc_qp_attr st{};
    expect(smrc_query_qp(b.qp, &st, 0, nullptr) == 0 && st.qp_state == state, what, st.qp_state);
  };
  const auto back_to_rts = [&] {
    smrc_qp_attr t{};
    t.qp_state = SMRC_QPS_RESET;
    int e = smrc_modify_qp(b.qp, &t, SMRC_QP_STATE);
    e = e ? e : to_rtr(b.qp, peer, 5);
    t.qp_state = SMRC_QPS_RTS;
    t.sq_psn = 1;
    t.max_wimm = 0;
    e = e ? e : smrc_modify_qp(b.qp, &t, SMRC_QP_STATE | SMRC_QP_SQ_PSN | SMRC_QP_MAX_WIMM);
    expect_err(e, 0, "RESET, then INIT, RTR and RTS again");
  };

  // An SGE outside its region: an error completion, which wakes the armed
  // CQ's channel.
  smrc_wc wc{};
  expect_err(smrc_req_notify_cq(b.cq, 0), 0, "req_notify_cq");
  sge.addr = reinterpret_cast<uintptr_t>(b.mr->addr) + b.mr->length - 8;
  sge.length = 64;
  wr.wr_id = 11;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), 0, "post_send of an out-of-region SGE");
  pollfd channel{smrc_comp_channel_fd(b.ch), POLLIN, 0};
  expect(poll(&channel, 1, 5000) == 1, "comp_channel_fd readable after a completion");
  smrc_cq* ev_cq = nullptr;
  expect(smrc_get_cq_event(b.ch, &ev_cq, nullptr, 0) == 0 && ev_cq == b.cq,
         "get_cq_event names the CQ");
  smrc_ack_cq_events(ev_cq, 1);
  // Readable until a call finds nothing left (an event loop must not spin).
  expect_err(smrc_get_cq_event(b.ch, &ev_cq, nullptr, 0), ETIMEDOUT, "get_cq_event, taken");
  expect(poll(&channel, 1, 0) == 0, "comp_channel_fd not readable once nothing is left");
  expect(poll_one(b.cq, &wc) == 1 && wc.wr_id == 11 && wc.status == SMRC_WC_LOC_PROT_ERR,
         "out-of-region SGE completes with LOC_PROT_ERR", wc.status);
  in_state(SMRC_QPS_ERR, "... and the QP is in ERR");
  sge.addr = reinterpret_cast<uintptr_t>(b.mr->addr);
  sge.lkey = b.mr->lkey ^ 0x10000;  // another generation of the same slot
  wr.wr_id = 12;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), 0, "post_send in ERR");
  expect(poll_one(b.cq, &wc) == 1 && wc.wr_id == 12 && wc.status == SMRC_WC_WR_FLUSH_ERR,
         "a Write posted in ERR is flushed, even with a stale lkey", wc.status);
  back_to_rts();
  wr.wr_id = 13;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), 0, "post_send with a stale lkey");
  expect(poll_one(b.cq, &wc) == 1 && wc.wr_id == 13 && wc.status == SMRC_WC_LOC_PROT_ERR,
         "stale lkey completes with LOC_PROT_ERR", wc.status);
  in_state(SMRC_QPS_ERR, "... and the QP is in ERR");
  back_to_rts();

  // More Writes at once than the send ring holds (16): it takes 16, the
  // rest are refused from the 17th on. The first of the 16 fails, the
  // others are flushed, in post order.
  std::vector<smrc_send_wr> chain(40, wr);
  for (size_t i = 0; i < chain.size(); ++i) {
    chain[i].wr_id = 100 + i;
    chain[i].next = i + 1 < chain.size() ? &chain[i + 1] : nullptr;
  }
  expect_err(smrc_post_send(b.qp, chain.data(), &bad_wr), ENOMEM, "post_send past the send ring");
  expect(bad_wr == &chain[16], "bad_wr names the 17th", bad_wr ? bad_wr - chain.data() : -1);
  smrc_wc got[16];
  int n = poll_n(b.cq, got, 16), in_order = 0;
  for (int i = 0; i < n; ++i)
    in_order += got[i].wr_id == 100u + i &&
                got[i].status == (i == 0 ? SMRC_WC_LOC_PROT_ERR : SMRC_WC_WR_FLUSH_ERR);
  expect(n == 16 && in_order == 16, "LOC_PROT_ERR, then 15 flushed, in post order", in_order);
  back_to_rts();

  sge.lkey = b.mr->lkey;
  wr.opcode = SMRC_WR_RDMA_WRITE_WITH_IMM;
  wr.wr_id = 14;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), 0, "post WIMM with max_wimm 0 (engine refuses)");
  expect(poll_one(b.cq, &wc) == 1 && wc.wr_id == 14 && wc.status == SMRC_WC_GENERAL_ERR,
         "WIMM with max_wimm 0 completes with GENERAL_ERR", wc.status);
  expect(wc.vendor_err == 1, "... and vendor_err 1", wc.vendor_err);
  in_state(SMRC_QPS_ERR, "... and the QP is in ERR");
  back_to_rts();
  smrc_async_event refusal_event{};
  expect_err(smrc_get_async_event(b.ctx, &refusal_event, 100), ETIMEDOUT,
             "no async event for the refusals: their completions tell");
  expect(std::strcmp(smrc_wc_status_str(SMRC_WC_LOC_PROT_ERR), "local protection error") == 0,
         "wc_status_str");

  // Receives past max_recv_wr (16): the daemon holds 16, the ring 16 more,
  // and the next post fails with ENOMEM while the QP stays in RTS, as
  // verbs refuses posts past max_recv_wr. Each ENOMEM is tried again after
  // a pause, in case the daemon had not yet taken from the ring.
  smrc_recv_wr one{};
  int accepted = 0, refusals = 0;
  while (accepted <= 40 && refusals < 3) {
    one.wr_id = 300 + accepted;
    const int e = smrc_post_recv(b.qp, &one, nullptr);
    if (e == 0) {
      ++accepted;
      refusals = 0;
    } else {
      expect_err(e, ENOMEM, "post_recv past max_recv_wr and the ring");
      ++refusals;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  expect_value(accepted, 32, "receives taken: max_recv_wr held, then a ring's worth");
  in_state(SMRC_QPS_RTS, "... and the QP still in RTS");
  expect_value(smrc_poll_cq(b.cq, 1, &wc), 0, "... with nothing completed");
  smrc_qp_attr to_err{};
  to_err.qp_state = SMRC_QPS_ERR;
  expect_err(smrc_modify_qp(b.qp, &to_err, SMRC_QP_STATE), 0, "RTS -> ERR with 32 receives");
  smrc_wc flushed32[32];
  int n32 = poll_n(b.cq, flushed32, 32), flushed_in_order = 0;
  for (int i = 0; i < n32; ++i)
    flushed_in_order +=
        flushed32[i].wr_id == 300u + i && flushed32[i].status == SMRC_WC_WR_FLUSH_ERR;
  expect(n32 == 32 && flushed_in_order == 32, "the 32 flushed in post order", flushed_in_order);
  back_to_rts();
  smrc_qp_init_attr no_recv{};
  no_recv.send_cq = no_recv.recv_cq = b.cq;
  no_recv.cap.max_send_wr = 1;
  if (smrc_qp* nr = smrc_create_qp(b.pd, &no_recv)) {
    smrc_qp_attr init{};
    init.qp_state = SMRC_QPS_INIT;
    expect_err(smrc_modify_qp(nr, &init, SMRC_QP_STATE), 0, "a QP with max_recv_wr 0 to INIT");
    expect_err(smrc_post_recv(nr, &one, nullptr), ENOMEM, "post_recv with max_recv_wr 0");
    expect_err(smrc_destroy_qp(nr), 0, "destroy_qp");
  } else {
    expect(false, "create_qp with max_recv_wr 0", errno);
  }

  // More receives than the receive ring holds (16), then the QP in ERR.
  std::vector<smrc_recv_wr> rchain(40);
  for (size_t i = 0; i < rchain.size(); ++i) {
    rchain[i].wr_id = 200 + i;
    rchain[i].next = i + 1 < rchain.size() ? &rchain[i + 1] : nullptr;
  }
  smrc_recv_wr* bad_rwr = nullptr;
  expect_err(smrc_post_recv(b.qp, rchain.data(), &bad_rwr), ENOMEM,
             "post_recv past the receive ring");
  expect(bad_rwr == &rchain[16], "bad_wr names the 17th receive",
         bad_rwr ? bad_rwr - rchain.data() : -1);
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_ERR;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE), 0, "RTS -> ERR");
  n = poll_n(b.cq, got, 16);
  int flushed = 0;
  for (int i = 0; i < n; ++i) flushed += got[i].status == SMRC_WC_WR_FLUSH_ERR;
  expect(n == 16 && flushed == 16, "the 16 receives flushed", flushed);
  error_and_reset(b, peer);

  // Freeing an MR twice is not possible; destroy in order works.
  expect_err(smrc_destroy_qp(std::exchange(b.qp, nullptr)), 0, "destroy_qp");
  expect_err(smrc_free_mr(std::exchange(b.mr, nullptr)), 0, "free_mr");
  expect_err(smrc_destroy_cq(std::exchange(b.cq, nullptr)), 0, "destroy_cq");
  expect_err(smrc_destroy_comp_channel(std::exchange(b.ch, nullptr)), 0, "destroy_comp_channel");
  expect_err(smrc_dealloc_pd(std::exchange(b.pd, nullptr)), 0, "dealloc_pd");
  expect_err(smrc_close_device(std::exchange(b.ctx, nullptr)), 0, "close_device");
  return failures ? 1 : 0;
}

// A raw client of the protocol, as a buggy or hostile application would be.
struct Raw {
  int fd = -1;
  uint32_t seq = 0;
  int call(softmrc::shm::Msg& m, int pass_fd, softmrc::shm::Msg* r) {
    m.magic = softmrc::shm::kAppMagic;
    m.seq = ++seq;
    if (softmrc::shm::send_message(fd, m, pass_fd) != 0) return -1;
    for (;;) {
      if (recv(fd, r, sizeof(*r), 0) != sizeof(*r)) return -1;
      if (r->type != uint16_t(softmrc::shm::MsgType::kEvent)) return r->status;
    }
  }
};

int forge(const char* sock, const char* peer_ip) {
  namespace s = softmrc::shm;
  smrc_gid peer;
  if (!parse_gid(peer_ip, &peer)) return 2;
  Raw raw;
  raw.fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock);
  if (connect(raw.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return 2;
  s::Msg m{}, r{};
  // Garbage before hello, a short message, then hello.
  m.type = uint16_t(s::MsgType::kCreateCq);
  expect_err(raw.call(m, -1, &r), EBADF, "create_cq without its memfd");
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kQueryProfile);
  m.u.query_profile.kind = 1;
  expect_err(raw.call(m, -1, &r), EPROTO, "a request before hello");
  m = s::Msg{};
  m.type = 77;
  expect_err(raw.call(m, -1, &r), EINVAL, "an unknown message type");
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kHello);
  m.u.hello.protocol_version = s::kAppProtocolVersion;
  m.u.hello.api_version = SMRC_API_VERSION;
  expect_err(raw.call(m, -1, &r), 0, "hello");
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kAllocPd);
  expect_err(raw.call(m, -1, &r), 0, "alloc_pd");
  const uint32_t pd = r.u.id_rep.id;

  // A memfd that is not sealed is refused: it could shrink under the daemon.
  {
    const int fd = memfd_create("unsealed", 0);
    (void)!ftruncate(fd, 1 << 16);
    m = s::Msg{};
    m.type = uint16_t(s::MsgType::kRegMr);
    m.u.reg_mr.addr = 1 << 20;
    m.u.reg_mr.length = 1 << 16;
    m.u.reg_mr.pd = pd;
    expect_err(raw.call(m, fd, &r), EBADF, "reg_mr of an unsealed memfd");
    close(fd);
  }
  // A region longer than its memfd is refused.
  s::Mapping region;
  int fd = s::create_shared(1 << 16, false, &region);
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kRegMr);
  m.u.reg_mr.addr = reinterpret_cast<uint64_t>(region.addr);
  m.u.reg_mr.length = 1 << 20;
  m.u.reg_mr.pd = pd;
  expect_err(raw.call(m, fd, &r), EINVAL, "reg_mr longer than its memfd");
  m.u.reg_mr.length = 1 << 16;
  m.u.reg_mr.access = 3;
  m.u.reg_mr.pd = pd + 1000;
  expect_err(raw.call(m, fd, &r), EINVAL, "reg_mr in a PD that is not ours");
  m.u.reg_mr.pd = pd;
  expect_err(raw.call(m, fd, &r), 0, "reg_mr");
  const uint32_t lkey = r.u.reg_mr_rep.key;
  close(fd);
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kDeallocPd);
  m.u.key.id = pd;
  expect_err(raw.call(m, -1, &r), EBUSY, "dealloc_pd with a region in it");
  m.u.key.id = pd + 1000;
  expect_err(raw.call(m, -1, &r), EINVAL, "dealloc_pd of a PD that is not ours");
  // A completion channel is the daemon's pipe: one of ours is refused.
  // Raw::call reads its reply without room for the read end, so the kernel
  // closes it: the daemon's wake-ups below meet a pipe with no reader
  // (EPIPE, not SIGPIPE).
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kCreateChannel);
  {
    int p[2];
    if (pipe(p) != 0) return 2;
    expect_err(raw.call(m, p[1], &r), EBADF, "create_channel with a descriptor of ours");
    close(p[0]);
    close(p[1]);
  }
  expect_err(raw.call(m, -1, &r), 0, "create_channel");
  const uint32_t channel = r.u.id_rep.id;
  // A CQ on that channel, armed, and a QP whose rings we write ourselves.
  s::Mapping cqmem, qpmem;
  fd = s::create_shared(s::cq_bytes(64), false, &cqmem);
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kCreateCq);
  m.u.create_cq.capacity = 64;
  m.u.create_cq.channel = channel;
  expect_err(raw.call(m, fd, &r), 0, "create_cq");
  static_cast<s::CqControl*>(cqmem.addr)->armed.store(1);
  const uint32_t cq = r.u.id_rep.id;
  close(fd);
  fd = s::create_shared(s::qp_bytes(8, 8), false, &qpmem);
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kCreateQp);
  m.u.create_qp = s::CreateQpReq{cq, cq, 8, 8, 8, 8, 0, pd + 1000};
  expect_err(raw.call(m, fd, &r), EINVAL, "create_qp in a PD that is not ours");
  m.u.create_qp.pd = pd;
  expect_err(raw.call(m, fd, &r), 0, "create_qp");
  const uint32_t qpn = r.u.create_qp_rep.qpn;
  close(fd);
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kDestroyQp);
  m.u.key.id = qpn + 1000;
  expect_err(raw.call(m, -1, &r), EINVAL, "destroy a QP that is not ours");
  // To RTS, straight through the protocol.
  const auto modify = [&](uint32_t state, uint32_t mask) {
    m = s::Msg{};
    m.type = uint16_t(s::MsgType::kModifyQp);
    m.u.modify_qp.qpn = qpn;
    m.u.modify_qp.mask = mask | SMRC_QP_STATE;
    m.u.modify_qp.attr.qp_state = state;
    std::memcpy(m.u.modify_qp.attr.dgid, peer.raw, 16);
    m.u.modify_qp.attr.dest_qp_num = 9;
    return raw.call(m, -1, &r);
  };
  const auto raw_to_rts = [&] {
    expect_err(modify(SMRC_QPS_INIT, 0), 0, "raw INIT");
    expect_err(modify(SMRC_QPS_RTR, SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN), 0, "raw RTR");
    expect_err(modify(SMRC_QPS_RTS, SMRC_QP_SQ_PSN), 0, "raw RTS");
  };
  raw_to_rts();

  s::RingProducer<s::WorkRequest> wq, rq;
  wq.attach(qpmem.addr, 8);
  void* recv_ring = static_cast<char*>(qpmem.addr) + s::qp_recv_ring_offset(8);
  rq.attach(recv_ring, 8);
  s::RingConsumer<s::Cqe> cqr;
  cqr.attach(static_cast<char*>(cqmem.addr) + s::cq_ring_offset(), 64);
  const auto next_cqe = [&](s::Cqe* got) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < end)
      if (cqr.dequeue_burst(got, 1) == 1) return true;
    return false;
  };
  const auto state = [&] {
    m = s::Msg{};
    m.type = uint16_t(s::MsgType::kQueryQp);
    m.u.key.id = qpn;
    return raw.call(m, -1, &r) == 0 ? r.u.query_qp_rep.attr.qp_state : -1u;
  };
  // Each forged descriptor gets its own status and takes the QP to ERR, as
  // an error completion does in verbs; one written behind it is flushed,
  // unchecked. Then the QP is reset and connected again.
  const uint64_t base = reinterpret_cast<uint64_t>(region.addr);
  struct Case {
    s::WorkRequest wr;
    bool recv_ring;  // written into the receive ring
    s::WcStatus status;
    const char* what;
  };
  const Case cases[] = {
      {{1, base, 0, 64, lkey, 0, 0, 9, s::kWrSignaled, {}},
       false,
       s::WcStatus::kLocQpOpErr,
       "forged opcode -> LOC_QP_OP_ERR"},
      {{2, base + 65000, 0, 4096, lkey, 0, 0, 0, s::kWrSignaled, {}},
       false,
       s::WcStatus::kLocProtErr,
       "SGE past the region -> LOC_PROT_ERR"},
      {{3, 0x1000, 0, 64, lkey + 1, 0, 0, 0, s::kWrSignaled, {}},
       false,
       s::WcStatus::kLocProtErr,
       "foreign lkey -> LOC_PROT_ERR"},
      {{4, base, 0, 0x90000000u, lkey, 0, 0, 1, s::kWrSignaled, {}},
       false,
       s::WcStatus::kLocLenErr,
       "length over the limit -> LOC_LEN_ERR"},
      // Each ring takes only its own kind.
      {{5, 0, 0, 0, 0, 0, 0, uint8_t(s::WrOpcode::kRecv), 0, {}},
       false,
       s::WcStatus::kLocQpOpErr,
       "a receive on the send ring -> LOC_QP_OP_ERR"},
      {{6, base, base, 64, lkey, lkey, 0, uint8_t(s::WrOpcode::kWrite), 0, {}},
       true,
       s::WcStatus::kLocQpOpErr,
       "a Write on the receive ring -> LOC_QP_OP_ERR"},
  };
  for (const Case& c : cases) {
    const s::WorkRequest behind =
        c.recv_ring
            ? s::WorkRequest{c.wr.wr_id + 100, 0, 0, 0, 0, 0, 0, uint8_t(s::WrOpcode::kRecv), 0, {}}
            : s::WorkRequest{c.wr.wr_id + 100, base, 0, 64, lkey, 0, 0, 0, s::kWrSignaled, {}};
    s::RingProducer<s::WorkRequest>& ring = c.recv_ring ? rq : wq;
    const s::WorkRequest both[2] = {c.wr, behind};
    expect(ring.enqueue_burst(both, 2) == 2, "a forged descriptor and a good one behind it");
    s::Cqe got[2]{};
    expect(next_cqe(&got[0]) && next_cqe(&got[1]), "two completions", c.wr.wr_id);
    const auto kind = c.recv_ring                                      ? s::CqeOpcode::kRecvWriteImm
                      : c.wr.opcode == uint8_t(s::WrOpcode::kWriteImm) ? s::CqeOpcode::kWriteImm
                                                                       : s::CqeOpcode::kWrite;
    expect(got[0].wr_id == c.wr.wr_id && got[0].status == uint8_t(c.status) &&
               got[0].opcode == uint8_t(kind),
           c.what, got[0].status);
    expect(got[1].wr_id == behind.wr_id && got[1].status == uint8_t(s::WcStatus::kWrFlushErr),
           "... the one behind it flushed", got[1].status);
    expect(state() == SMRC_QPS_ERR, "... and the QP in ERR");
    expect_err(modify(SMRC_QPS_RESET, 0), 0, "raw RESET");
    raw_to_rts();
  }

  // A garbage producer index (of the receive ring, which the daemon reads
  // every pass): the daemon must not read outside the ring; the QP fails
  // with a QP-fatal event, and the daemon keeps serving.
  auto* hdr = static_cast<s::RingHeader*>(recv_ring);
  hdr->prod.store(0x7fff1234, std::memory_order_release);
  bool fatal = false;
  pollfd p{raw.fd, POLLIN, 0};
  while (!fatal && poll(&p, 1, 5000) > 0) {
    if (recv(raw.fd, &r, sizeof(r), 0) != sizeof(r)) break;
    fatal = r.type == uint16_t(s::MsgType::kEvent) &&
            r.u.event.kind == uint32_t(s::EventKind::kQpFatal) && r.u.event.qpn == qpn;
  }
  expect(fatal, "garbage producer index -> QP fatal event");
  m = s::Msg{};
  m.type = uint16_t(s::MsgType::kQueryQp);
  m.u.key.id = qpn;
  expect(raw.call(m, -1, &r) == 0 && r.u.query_qp_rep.attr.qp_state == SMRC_QPS_ERR,
         "the QP is in ERR, the daemon still answers");
  close(raw.fd);
  return failures ? 1 : 0;
}

// Exchange a line like wimm_exchange; returns the peer's (qpn, rkey, addr, gid).
bool exchange(Basic& b, uint32_t* qpn, uint32_t* rkey, uint64_t* addr, smrc_gid* gid) {
  smrc_gid me;
  smrc_query_gid(b.ctx, 0, &me);
  std::printf("%u 1 %u %" PRIu64, smrc_qp_num(b.qp), b.mr->rkey,
              static_cast<uint64_t>(reinterpret_cast<uintptr_t>(b.mr->addr)));
  for (unsigned char c : me.raw) std::printf(" %u", c);
  std::printf("\n");
  std::fflush(stdout);
  unsigned psn, g;
  if (std::scanf("%u %u %u %" SCNu64, qpn, &psn, rkey, addr) != 4) return false;
  for (int i = 0; i < 16; ++i) {
    if (std::scanf("%u", &g) != 1) return false;
    gid->raw[i] = static_cast<uint8_t>(g);
  }
  return true;
}

// A retry budget of about half a second: no case waits for a linked QP to
// fail, and a daemon lcore descheduled for tens of ms must not fail it.
constexpr uint8_t kLinkTimeout = 14;
constexpr uint8_t kLinkRetryExp = 4;

// This program's end of a connection to its peer program (api_test.py
// crosses their exchange lines): setup() with `send_wr` and `mr_bytes`, a
// line exchanged, its QP connected to the peer's (rts false: left in RTR,
// receiving only, as verbs allows). 0, or the exit status of what failed:
// 2 the setup, 3 the exchange or the connection.
struct PeerLink {
  Basic b;
  uint32_t qpn = 0, rkey = 0;
  uint64_t addr = 0;
  smrc_gid gid{};
};

int link_to_peer(const char* sock, PeerLink* p, uint32_t send_wr = 16, size_t mr_bytes = 1 << 20,
                 bool rts = true, uint64_t ev_profile = 0, uint64_t cc_profile = 0) {
  if (!setup(sock, &p->b, send_wr, mr_bytes)) return 2;
  if (!exchange(p->b, &p->qpn, &p->rkey, &p->addr, &p->gid)) return 3;
  const int e =
      rts ? to_rts(p->b.qp, p->gid, p->qpn, kLinkTimeout, kLinkRetryExp, ev_profile, cc_profile)
          : to_rtr(p->b.qp, p->gid, p->qpn, ev_profile, cc_profile);
  return e == 0 ? 0 : 3;
}

// One end of a stream: linked with a send queue of 64, then "ready" printed.
int open_stream_end(const char* sock, PeerLink* s, bool rts, uint64_t ev_profile = 0,
                    uint64_t cc_profile = 0) {
  if (int e = link_to_peer(sock, s, 64, 1 << 20, rts, ev_profile, cc_profile)) return e;
  std::printf("ready\n");
  std::fflush(stdout);
  return 0;
}

// A receiver of stream(): says what befalls its QP, until killed.
int sink(const char* sock, bool rts) {
  PeerLink s;
  if (int e = open_stream_end(sock, &s, rts)) return e;
  for (;;) {
    smrc_async_event ev;
    if (smrc_get_async_event(s.b.ctx, &ev, -1) != 0) return 4;
    std::printf("event: %s: %s\n", smrc_event_type_str(static_cast<smrc_event_type>(ev.event_type)),
                smrc_wc_status_str(static_cast<smrc_wc_status>(ev.status)));
    std::fflush(stdout);
  }
}

// until_flush: the daemon is stopped under the stream; what was
// outstanding must complete with SMRC_WC_WR_FLUSH_ERR, then ENOTCONN.
int stream(const char* sock, bool until_flush = false, uint64_t ev_profile = 0,
           uint64_t cc_profile = 0) {
  PeerLink s;
  if (int e = open_stream_end(sock, &s, true, ev_profile, cc_profile)) return e;
  Basic& b = s.b;
  smrc_sge sge{reinterpret_cast<uintptr_t>(b.mr->addr), 65536, b.mr->lkey};
  smrc_send_wr wr = signaled_write(&sge, s.addr, s.rkey);
  uint64_t done = 0, out = 0, flushed = 0;
  smrc_wc wc[16];
  for (;;) {
    int posted = 0;
    while (out < 16 && (posted = smrc_post_send(b.qp, &wr, nullptr)) == 0) ++out;
    const int n = smrc_poll_cq(b.cq, 16, wc);
    if (until_flush && (n == -ENOTCONN || posted == ENOTCONN)) {
      std::printf("flushed %" PRIu64 " after %" PRIu64 " written, then ENOTCONN\n", flushed,
                  done - flushed);
      return flushed > 0 ? 0 : 6;
    }
    if (n < 0) return 4;
    for (int i = 0; i < n; ++i) {
      if (until_flush && wc[i].status == SMRC_WC_WR_FLUSH_ERR) {
        ++flushed;
        continue;
      }
      if (wc[i].status == SMRC_WC_REM_OP_ERR && flushed == 0) {  // the receiver exited
        std::printf("peer gone: %s after %" PRIu64 " written\n",
                    smrc_wc_status_str(SMRC_WC_REM_OP_ERR), done);
        return 0;
      }
      // Nothing succeeds after the first flushed completion.
      if (wc[i].status != SMRC_WC_SUCCESS || flushed > 0) {
        std::printf("FAIL: completion %s after %" PRIu64 " flushed\n",
                    smrc_wc_status_str(static_cast<smrc_wc_status>(wc[i].status)), flushed);
        return 5;
      }
    }
    out -= n;
    done += n;
    if (n > 0 && done % 64 < static_cast<uint64_t>(n)) {
      std::printf("written %" PRIu64 "\n", done);
      std::fflush(stdout);
    }
  }
}

// Isolation between applications: the peer of one application's QP aims a
// Write at another application's region, naming its key and address exactly.
//   victim: fills its region with a byte, prints "victim <rkey> <addr> <len>",
//           and on the line "check" prints whether the region is untouched;
//   trespass: connects (exchange), then reads the victim's line and writes
//           there; prints the completion's status.
int victim(const char* sock) {
  Basic b;
  if (!setup(sock, &b)) return 2;
  auto* mem = static_cast<uint8_t*>(b.mr->addr);
  std::memset(mem, 0x5a, b.mr->length);
  std::printf("victim %u %" PRIu64 " %zu\n", b.mr->rkey,
              static_cast<uint64_t>(reinterpret_cast<uintptr_t>(mem)), b.mr->length);
  std::fflush(stdout);
  char line[16];
  if (std::scanf("%15s", line) != 1 || std::strcmp(line, "check") != 0) return 3;
  const size_t intact =
      static_cast<size_t>(std::count(mem, mem + b.mr->length, static_cast<uint8_t>(0x5a)));
  std::printf("victim: %zu of %zu bytes intact\n", intact, b.mr->length);
  return intact == b.mr->length ? 0 : 1;
}

int trespass(const char* sock) {
  PeerLink p;
  if (int e = link_to_peer(sock, &p)) return e;
  Basic& b = p.b;
  char word[16];
  uint32_t victim_rkey;
  uint64_t victim_addr;
  size_t victim_len;
  if (std::scanf("%15s %u %" SCNu64 " %zu", word, &victim_rkey, &victim_addr, &victim_len) != 4 ||
      std::strcmp(word, "victim") != 0)
    return 3;
  const uint32_t len = static_cast<uint32_t>(std::min<size_t>(victim_len, 65536));
  std::memset(b.mr->addr, 0xa5, len);
  smrc_sge sge{reinterpret_cast<uintptr_t>(b.mr->addr), len, b.mr->lkey};
  smrc_send_wr wr = signaled_write(&sge, victim_addr, victim_rkey);
  if (smrc_post_send(b.qp, &wr, nullptr) != 0) return 4;
  smrc_wc wc;
  if (poll_one(b.cq, &wc, 10000) != 1) return 5;
  std::printf("trespass: %s\n", smrc_wc_status_str(static_cast<smrc_wc_status>(wc.status)));
  return 0;
}

// Protection domains inside one application: its QP lives in one PD, a
// second PD holds a region filled with a byte. It prints that region as
// victim() does, for trespass() on its peer; on the line "check" it says
// whether the region is untouched, then posts from a QP of the first PD a
// Write whose SGE is that region: "local: <status>". Exit 0 if the region
// is intact and the Write failed with LOC_PROT_ERR.
int two_pds(const char* sock) {
  PeerLink p;
  if (int e = link_to_peer(sock, &p)) return e;
  Basic& b = p.b;
  smrc_pd* other = smrc_alloc_pd(b.ctx);
  smrc_mr* mr =
      other ? smrc_alloc_mr(other, 65536, SMRC_ACCESS_LOCAL_WRITE | SMRC_ACCESS_REMOTE_WRITE)
            : nullptr;
  smrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = b.cq;
  ia.cap.max_send_wr = 4;
  smrc_qp* local = smrc_create_qp(b.pd, &ia);
  const auto done = [&](int status) {
    if (local) smrc_destroy_qp(local);
    if (mr) smrc_free_mr(mr);
    if (other) smrc_dealloc_pd(other);
    return status;
  };
  if (!mr || !local) return done(2);
  auto* mem = static_cast<uint8_t*>(mr->addr);
  std::memset(mem, 0x5a, mr->length);
  std::printf("victim %u %" PRIu64 " %zu\n", mr->rkey,
              static_cast<uint64_t>(reinterpret_cast<uintptr_t>(mem)), mr->length);
  std::fflush(stdout);
  char line[16];
  if (std::scanf("%15s", line) != 1 || std::strcmp(line, "check") != 0) return done(3);
  const size_t intact =
      static_cast<size_t>(std::count(mem, mem + mr->length, static_cast<uint8_t>(0x5a)));
  std::printf("victim: %zu of %zu bytes intact\n", intact, mr->length);
  // Where the Write would go does not matter: it is refused before it leaves.
  if (to_rts(local, p.gid, p.qpn + 1) != 0) return done(4);
  smrc_sge sge{reinterpret_cast<uintptr_t>(mem), 64, mr->lkey};
  smrc_send_wr wr = signaled_write(&sge, p.addr, p.rkey);
  smrc_wc wc;
  if (smrc_post_send(local, &wr, nullptr) != 0 || poll_one(b.cq, &wc, 10000) != 1) return done(5);
  std::printf("local: %s\n", smrc_wc_status_str(static_cast<smrc_wc_status>(wc.status)));
  expect_err(smrc_dealloc_pd(other), EBUSY, "dealloc_pd of the PD with the region");
  return done(intact == mr->length && wc.status == SMRC_WC_LOC_PROT_ERR ? 0 : 1);
}

// A receive posted behind more Writes than the send queue takes (a
// collective's deep send queue) must be in place for a Write-with-Immediate
// its peer sends as soon as it hears the receive was posted.
//   deep: posts kWrites Writes of 16 MiB on a QP whose send queue takes 4,
//         then the receive, prints "posted", and expects every completion
//         to succeed, the receive's with the peer's immediate, then
//         prints "done";
//   wimm: on the line "go", sends one Write-with-Immediate (kWimmImm),
//         then serves the deep side's Writes until the line "done".
constexpr uint32_t kWimmImm = 0x5eed;

int recv_behind_sends(const char* sock, bool deep) {
  constexpr uint32_t kWrites = 8;
  constexpr uint32_t kBytes = 16u << 20;
  constexpr uint32_t kImm = kWimmImm;
  PeerLink p;
  if (int e = link_to_peer(sock, &p, 4, kBytes)) return e;
  Basic& b = p.b;
  smrc_sge sge{reinterpret_cast<uintptr_t>(b.mr->addr), deep ? kBytes : 64, b.mr->lkey};
  smrc_send_wr wr = signaled_write(&sge, p.addr, p.rkey);
  smrc_wc wc;
  if (!deep) {
    char line[16];
    if (std::scanf("%15s", line) != 1 || std::strcmp(line, "go") != 0) return 4;
    wr.opcode = SMRC_WR_RDMA_WRITE_WITH_IMM;
    wr.imm_data = htonl(kImm);
    expect_err(smrc_post_send(b.qp, &wr, nullptr), 0, "post the Write-with-Immediate");
    expect(poll_one(b.cq, &wc, 20000) == 1 && wc.status == SMRC_WC_SUCCESS,
           "the Write-with-Immediate completes", wc.status);
    // The QP answers the deep side's Writes until that side is done.
    if (std::scanf("%15s", line) != 1 || std::strcmp(line, "done") != 0) return 4;
    return failures ? 1 : 0;
  }
  wr.opcode = SMRC_WR_RDMA_WRITE;
  uint32_t posted = 0;
  // The send ring holds what the send queue may: retry while it is full.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (posted < kWrites && std::chrono::steady_clock::now() < end) {
    const int e = smrc_post_send(b.qp, &wr, nullptr);
    if (e == 0)
      ++posted;
    else if (e != ENOMEM)
      break;
  }
  expect(posted == kWrites, "post 8 Writes on a send queue of 4", posted);
  smrc_recv_wr rwr{};
  rwr.wr_id = 77;
  expect_err(smrc_post_recv(b.qp, &rwr, nullptr), 0, "post the receive behind them");
  std::printf("posted\n");
  std::fflush(stdout);
  uint32_t writes = 0, recvs = 0, bad = 0;
  while (writes + recvs < kWrites + 1 && poll_one(b.cq, &wc, 20000) == 1) {
    if (wc.status != SMRC_WC_SUCCESS) {
      std::printf("completion %" PRIu64 ": %s\n", wc.wr_id,
                  smrc_wc_status_str(static_cast<smrc_wc_status>(wc.status)));
      ++bad;
      continue;
    }
    if (wc.opcode == SMRC_WC_RECV_RDMA_WITH_IMM && wc.wr_id == 77 && ntohl(wc.imm_data) == kImm)
      ++recvs;
    else if (wc.opcode == SMRC_WC_RDMA_WRITE)
      ++writes;
  }
  expect(bad == 0, "no completion fails", bad);
  expect(recvs == 1, "the receive consumed the peer's immediate", recvs);
  expect(writes == kWrites, "every Write completes", writes);
  std::printf("done\n");
  std::fflush(stdout);
  return failures ? 1 : 0;
}

// INIT -> INIT from one pair of profiles to another, as an application
// ported from rdma_cm does before RTR (api_test.py's init_again; the peer
// is recv_behind_sends' wimm side). A receive is posted in INIT first.
// Refused moves (a field of RTR, an unknown profile, an OFFLINE one) keep
// the old profiles; then "kept" is printed and the line "go" awaited while
// the test looks at them. The QP moves to the new CC profile ("half", and
// "go" awaited again), then to the new EV profile, connects, its
// Write completes ("written"), and the receive posted before the moves
// takes the peer's immediate ("done").
int init_again(const char* sock, uint64_t old_ev, uint64_t old_cc, uint64_t new_ev, uint64_t new_cc,
               uint64_t offline_ev) {
  PeerLink p;
  Basic& b = p.b;
  if (!setup(sock, &b)) return 2;
  const auto profiles_are = [&](uint64_t ev, uint64_t cc, const char* what) {
    smrc_qp_attr q{};
    expect(smrc_query_qp(b.qp, &q, 0, nullptr) == 0 && q.qp_state == SMRC_QPS_INIT &&
               q.ev_profile_id == ev && q.cc_profile_id == cc,
           what, static_cast<long>(q.ev_profile_id * 1000 + q.cc_profile_id));
  };
  expect_err(to_init(b.qp, old_ev, old_cc), 0, "RESET -> INIT on the old profiles");
  smrc_recv_wr rwr{};
  rwr.wr_id = 88;
  expect_err(smrc_post_recv(b.qp, &rwr, nullptr), 0, "a receive posted in INIT");
  smrc_qp_attr a{};
  a.qp_state = SMRC_QPS_INIT;
  const uint32_t both = SMRC_QP_STATE | SMRC_QP_EV_PROFILE | SMRC_QP_CC_PROFILE;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE), 0, "INIT -> INIT naming no profile");
  profiles_are(old_ev, old_cc, "query_qp: the old profiles, after INIT -> INIT naming none");
  // The daemon resolves the profiles before it sees the field of RTR, and
  // then goes back to the old ones; the refusals after this one leave the
  // profiles alone (the order matters: a last move back would hide them).
  a.ev_profile_id = new_ev;
  a.cc_profile_id = new_cc;
  a.rq_psn = 1;
  expect_err(smrc_modify_qp(b.qp, &a, both | SMRC_QP_RQ_PSN), EINVAL,
             "INIT -> INIT to the new profiles with an RTR attribute");
  a.rq_psn = 0;
  a.ev_profile_id = 42;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_EV_PROFILE), ENOENT,
             "INIT -> INIT to an unknown EV profile");
  a.ev_profile_id = new_ev;
  a.cc_profile_id = 42;
  expect_err(smrc_modify_qp(b.qp, &a, both), ENOENT,
             "INIT -> INIT to the new EV profile and an unknown CC profile");
  a.ev_profile_id = offline_ev;
  a.cc_profile_id = new_cc;
  expect_err(smrc_modify_qp(b.qp, &a, both), EINVAL,
             "INIT -> INIT to an OFFLINE EV profile and the new CC profile");
  profiles_are(old_ev, old_cc, "query_qp: the old profiles, after the refused moves");
  const auto say_and_wait = [](const char* what) {
    std::printf("%s\n", what);
    std::fflush(stdout);
    char line[16];
    return std::scanf("%15s", line) == 1 && std::strcmp(line, "go") == 0;
  };
  if (!say_and_wait("kept")) return 4;

  // One profile at a time: the one not named stays.
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_INIT;
  a.cc_profile_id = new_cc;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_CC_PROFILE), 0,
             "INIT -> INIT to the new CC profile");
  profiles_are(old_ev, new_cc, "query_qp: the old EV profile, the new CC profile");
  if (!say_and_wait("half")) return 4;
  a.ev_profile_id = new_ev;
  expect_err(smrc_modify_qp(b.qp, &a,
                            SMRC_QP_STATE | SMRC_QP_EV_PROFILE | SMRC_QP_PKEY_INDEX | SMRC_QP_PORT |
                                SMRC_QP_ACCESS_FLAGS),
             0, "INIT -> INIT to the new EV profile, with rdma_cm's verbs-only bits");
  profiles_are(new_ev, new_cc, "query_qp: the new profiles");
  if (!exchange(b, &p.qpn, &p.rkey, &p.addr, &p.gid)) return 3;
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_RTR;
  a.dgid = p.gid;
  a.dest_qp_num = p.qpn;
  a.rq_psn = 1;
  expect_err(
      smrc_modify_qp(b.qp, &a, SMRC_QP_STATE | SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN), 0,
      "INIT -> RTR");
  a = smrc_qp_attr{};
  a.qp_state = SMRC_QPS_RTS;
  a.sq_psn = 1;
  a.timeout = kLinkTimeout;
  a.retry_linear = 1;
  a.retry_exp = kLinkRetryExp;
  expect_err(smrc_modify_qp(b.qp, &a,
                            SMRC_QP_STATE | SMRC_QP_SQ_PSN | SMRC_QP_TIMEOUT | SMRC_QP_RETRY_CNT),
             0, "RTR -> RTS");
  smrc_sge sge{reinterpret_cast<uintptr_t>(b.mr->addr), 64, b.mr->lkey};
  smrc_send_wr wr = signaled_write(&sge, p.addr, p.rkey);
  wr.wr_id = 89;
  smrc_wc wc{};
  expect_err(smrc_post_send(b.qp, &wr, nullptr), 0, "post a Write");
  expect(poll_one(b.cq, &wc, 20000) == 1 && wc.wr_id == 89 && wc.status == SMRC_WC_SUCCESS,
         "the Write completes", wc.status);
  std::printf("written\n");
  std::fflush(stdout);
  wc = smrc_wc{};
  expect(poll_one(b.cq, &wc, 20000) == 1 && wc.wr_id == 88 &&
             wc.opcode == SMRC_WC_RECV_RDMA_WITH_IMM && wc.status == SMRC_WC_SUCCESS &&
             ntohl(wc.imm_data) == kWimmImm,
         "the receive posted before INIT -> INIT takes the peer's immediate",
         static_cast<long>(wc.wr_id * 100 + wc.status));
  std::printf("done\n");
  std::fflush(stdout);
  return failures ? 1 : 0;
}

// A region freed under a Write in flight from it. The writer, on a send
// queue of 1 (a send ring of 2), first checks that a zero-length Write
// whose sg_list names nothing valid completes (num_sge 0: it is not read).
// It posts a 32 MiB Write and a 64-byte one that waits for room, then
// posts zero-length Writes until the ring takes one: the first Write is in
// the daemon's engine. It frees the region while that one is in flight,
// then posts one more from it. In post order: the first completes (the
// daemon keeps its mapping), the one that waited fails with LOC_PROT_ERR
// and takes the QP to ERR, the two behind it are flushed. It prints
// "written"; the target, on the line "check", verifies every byte the
// first Write placed.
int free_in_flight(const char* sock, bool writer) {
  constexpr uint32_t kBytes = 32u << 20;
  const auto pattern = [](uint32_t i) { return static_cast<uint8_t>(i * 7 + 1); };
  PeerLink p;
  if (int e = link_to_peer(sock, &p, 1, kBytes)) return e;
  Basic& b = p.b;
  auto* buf = static_cast<uint8_t*>(b.mr->addr);
  if (!writer) {
    char line[16];
    if (std::scanf("%15s", line) != 1 || std::strcmp(line, "check") != 0) return 4;
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < kBytes; ++i) wrong += buf[i] != pattern(i);
    expect(wrong == 0, "every byte of the Write from the freed region placed", wrong);
    return failures ? 1 : 0;
  }
  for (uint32_t i = 0; i < kBytes; ++i) buf[i] = pattern(i);
  const uint32_t lkey = b.mr->lkey;
  smrc_sge big{reinterpret_cast<uintptr_t>(buf), kBytes, lkey};
  smrc_sge stale{reinterpret_cast<uintptr_t>(buf), 64, lkey ^ 0x10000};
  smrc_sge small{reinterpret_cast<uintptr_t>(buf), 64, lkey};
  smrc_send_wr zero = signaled_write(&stale, p.addr, p.rkey);
  zero.wr_id = 5;
  zero.num_sge = 0;  // sg_list names a stale lkey: not read
  expect_err(smrc_post_send(b.qp, &zero, nullptr), 0, "a zero-length Write, sg_list not NULL");
  smrc_wc wc{};
  expect(poll_one(b.cq, &wc, 30000) == 1 && wc.wr_id == 5 && wc.status == SMRC_WC_SUCCESS,
         "the zero-length Write completes", wc.status);
  smrc_send_wr wr[2] = {signaled_write(&big, p.addr, p.rkey),
                        signaled_write(&small, p.addr, p.rkey)};
  wr[0].wr_id = 1;
  wr[1].wr_id = 2;
  wr[0].next = &wr[1];
  expect_err(smrc_post_send(b.qp, wr, nullptr), 0, "post 32 MiB and 64 bytes behind it");
  zero.wr_id = 3;
  int taken = ENOMEM;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (taken == ENOMEM && std::chrono::steady_clock::now() < end)
    taken = smrc_post_send(b.qp, &zero, nullptr);
  expect_err(taken, 0, "the ring takes a zero-length Write: the 32 MiB one is in the engine");
  expect_value(smrc_poll_cq(b.cq, 1, &wc), 0, "the 32 MiB Write is still in flight: completions");
  expect_err(smrc_free_mr(std::exchange(b.mr, nullptr)), 0, "free_mr under the Write");
  wr[1].wr_id = 4;
  wr[1].next = nullptr;
  expect_err(smrc_post_send(b.qp, &wr[1], nullptr), 0, "post a Write from the freed region");
  const smrc_wc_status want[4] = {SMRC_WC_SUCCESS, SMRC_WC_LOC_PROT_ERR, SMRC_WC_WR_FLUSH_ERR,
                                  SMRC_WC_WR_FLUSH_ERR};
  const char* what[4] = {"the Write in flight completes",
                         "then the Write waiting for room when freed -> LOC_PROT_ERR",
                         "then the zero-length Write behind it is flushed",
                         "then the Write posted after free_mr is flushed"};
  for (uint64_t i = 0; i < 4; ++i) {
    const bool got = poll_one(b.cq, &wc, 30000) == 1;
    expect(got && wc.wr_id == i + 1 && wc.status == want[i], what[i],
           got ? static_cast<long>(wc.wr_id * 100 + wc.status) : -1);
  }
  std::printf("written\n");
  std::fflush(stdout);
  return failures ? 1 : 0;
}

int daemon_dies(const char* sock) {
  Basic b;
  if (!setup(sock, &b)) return 2;
  expect_err(smrc_req_notify_cq(b.cq, 0), 0, "req_notify_cq");
  std::printf("ready\n");
  std::fflush(stdout);
  smrc_cq* cq = nullptr;
  void* cq_ctx = nullptr;
  // Blocks until the test kills the daemon: must return, not hang.
  expect_err(smrc_get_cq_event(b.ch, &cq, &cq_ctx, 20000), ENOTCONN,
             "get_cq_event when the daemon dies");
  smrc_wc wc;
  int n = 0;
  for (int i = 0; i < 100000 && n == 0; ++i) n = smrc_poll_cq(b.cq, 1, &wc);
  expect_err(n, -ENOTCONN, "poll_cq when the daemon is gone");
  smrc_recv_wr rwr{};
  expect_err(smrc_post_recv(b.qp, &rwr, nullptr), ENOTCONN, "post_recv");
  smrc_qp_attr a{};
  a.qp_state = SMRC_QPS_INIT;
  expect_err(smrc_modify_qp(b.qp, &a, SMRC_QP_STATE), ENOTCONN, "modify_qp");
  expect(smrc_alloc_mr(b.pd, 4096, 0) == nullptr && errno == ENOTCONN, "alloc_mr -> ENOTCONN");
  smrc_device_attr da;
  expect_err(smrc_query_device(b.ctx, &da), ENOTCONN, "query_device");
  smrc_gid gid;
  expect_err(smrc_query_gid(b.ctx, 0, &gid), ENOTCONN, "query_gid");
  uint64_t id = 0;
  expect_err(smrc_query_profile(b.ctx, SMRC_PROFILE_EV, "default", &id), ENOTCONN, "query_profile");
  expect(smrc_alloc_pd(b.ctx) == nullptr && errno == ENOTCONN, "alloc_pd -> ENOTCONN");
  expect(smrc_create_cq(b.ctx, 16, nullptr, nullptr) == nullptr && errno == ENOTCONN,
         "create_cq -> ENOTCONN");
  expect(smrc_create_comp_channel(b.ctx) == nullptr && errno == ENOTCONN,
         "create_comp_channel -> ENOTCONN");
  expect_err(smrc_req_notify_cq(b.cq, 0), ENOTCONN, "req_notify_cq");
  smrc_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = b.cq;
  ia.cap.max_send_wr = 4;
  expect(smrc_create_qp(b.pd, &ia) == nullptr && errno == ENOTCONN, "create_qp -> ENOTCONN");
  expect_err(smrc_query_qp(b.qp, &a, 0, nullptr), ENOTCONN, "query_qp");
  smrc_send_wr wr{};
  wr.opcode = SMRC_WR_RDMA_WRITE;
  expect_err(smrc_post_send(b.qp, &wr, nullptr), ENOTCONN, "post_send");
  // Events queued before the end (ports going up) come first, then the
  // end itself.
  smrc_async_event ev{};
  int got = 0;
  for (int i = 0; i < 16 && got == 0 && ev.event_type != SMRC_EVENT_DEVICE_FATAL; ++i)
    got = smrc_get_async_event(b.ctx, &ev, 1000);
  expect_err(got, 0, "get_async_event");
  expect(ev.event_type == SMRC_EVENT_DEVICE_FATAL, "DEVICE_FATAL event", ev.event_type);
  expect_err(smrc_get_async_event(b.ctx, &ev, 0), ENOTCONN, "then ENOTCONN");
  expect_err(smrc_destroy_qp(std::exchange(b.qp, nullptr)), ENOTCONN, "destroy_qp still frees");
  expect_err(smrc_free_mr(std::exchange(b.mr, nullptr)), ENOTCONN, "free_mr still frees");
  smrc_destroy_cq(std::exchange(b.cq, nullptr));
  smrc_destroy_comp_channel(std::exchange(b.ch, nullptr));
  smrc_dealloc_pd(std::exchange(b.pd, nullptr));
  smrc_close_device(std::exchange(b.ctx, nullptr));
  return failures ? 1 : 0;
}

int daemon_stops(const char* sock, long timeout_ms) {
  if (timeout_ms <= 0) return 2;
  setenv(SMRC_REPLY_TIMEOUT_ENV, std::to_string(timeout_ms).c_str(), 1);
  Basic b;
  if (!setup(sock, &b)) return 2;
  std::printf("ready\n");
  std::fflush(stdout);
  char line[16];
  if (std::fgets(line, sizeof(line), stdin) == nullptr) return 2;  // it is stopped
  const Stopwatch took;
  const bool timed_out = smrc_alloc_pd(b.ctx) == nullptr && errno == ETIMEDOUT;
  const long ms = took.ms();
  expect(timed_out, "alloc_pd of a stopped daemon -> ETIMEDOUT");
  expect(ms >= timeout_ms && ms < timeout_ms + 5000, "  ...after the reply timeout (ms)", ms);
  // Given up: the context is dead, as if the daemon were gone.
  smrc_device_attr da;
  expect_err(smrc_query_device(b.ctx, &da), ENOTCONN, "query_device");
  expect(smrc_alloc_mr(b.pd, 4096, 0) == nullptr && errno == ENOTCONN, "alloc_mr -> ENOTCONN");
  smrc_wc wc;
  expect_err(smrc_poll_cq(b.cq, 1, &wc), -ENOTCONN, "poll_cq");
  smrc_cq* cq = nullptr;
  void* cq_ctx = nullptr;
  const Stopwatch waited;
  expect_err(smrc_get_cq_event(b.ch, &cq, &cq_ctx, 20000), ENOTCONN, "get_cq_event");
  expect(waited.ms() < 1000, "  ...at once (ms)", waited.ms());
  smrc_recv_wr rwr{};
  expect_err(smrc_post_recv(b.qp, &rwr, nullptr), ENOTCONN, "post_recv");
  smrc_async_event ev{};
  int got = 0;
  for (int i = 0; i < 16 && got == 0 && ev.event_type != SMRC_EVENT_DEVICE_FATAL; ++i)
    got = smrc_get_async_event(b.ctx, &ev, 1000);
  expect(got == 0 && ev.event_type == SMRC_EVENT_DEVICE_FATAL, "DEVICE_FATAL event", got);
  expect_err(smrc_get_async_event(b.ctx, &ev, 0), ENOTCONN, "then ENOTCONN");
  // A new context waits no longer (the hello sits unread in the socket).
  open_times_out(sock, timeout_ms, "open_device of a stopped daemon -> ETIMEDOUT");
  // The context stays open while the daemon runs again: the library's
  // hang-up alone must tell it.
  std::printf("given up\n");
  std::fflush(stdout);
  if (std::fgets(line, sizeof(line), stdin) == nullptr) return 2;
  expect_err(smrc_destroy_qp(std::exchange(b.qp, nullptr)), ENOTCONN, "destroy_qp still frees");
  expect_err(smrc_free_mr(std::exchange(b.mr, nullptr)), ENOTCONN, "free_mr still frees");
  expect_err(smrc_destroy_cq(std::exchange(b.cq, nullptr)), 0, "destroy_cq");
  expect_err(smrc_destroy_comp_channel(std::exchange(b.ch, nullptr)), 0, "destroy_comp_channel");
  expect_err(smrc_dealloc_pd(std::exchange(b.pd, nullptr)), 0, "dealloc_pd");
  expect_err(smrc_close_device(std::exchange(b.ctx, nullptr)), 0, "close_device");
  return failures ? 1 : 0;
}

// Prints the device's async events until `plane` has gone down and come
// back up, as an operator's port changes reach applications.
int port_events(const char* sock, uint32_t plane) {
  smrc_context* ctx = smrc_open_device(sock);
  if (ctx == nullptr) return 2;
  std::printf("ready\n");
  std::fflush(stdout);
  bool down = false;
  for (;;) {
    smrc_async_event ev{};
    if (const int e = smrc_get_async_event(ctx, &ev, 10'000); e != 0) {
      std::printf("FAIL: get_async_event: %s\n", strerrorname_np(e));
      return 1;
    }
    std::printf("event: %s plane %u\n",
                smrc_event_type_str(static_cast<smrc_event_type>(ev.event_type)), ev.plane);
    std::fflush(stdout);
    if (ev.plane != plane) continue;
    if (ev.event_type == SMRC_EVENT_PORT_ERR) down = true;
    if (ev.event_type == SMRC_EVENT_PORT_ACTIVE && down) break;
  }
  return smrc_close_device(ctx);
}

// Takes no event until a line on standard input, then every one waiting:
// the plane's changes must all be there, in order (down, up, down, ...).
int port_events_later(const char* sock, uint32_t plane) {
  smrc_context* ctx = smrc_open_device(sock);
  if (ctx == nullptr) return 2;
  std::printf("ready\n");
  std::fflush(stdout);
  char line[16];
  if (std::fgets(line, sizeof(line), stdin) == nullptr) return 2;
  long changes = 0;
  bool in_order = true;
  smrc_async_event ev{};
  while (smrc_get_async_event(ctx, &ev, 2000) == 0) {
    if (ev.plane != plane) continue;
    in_order &= ev.event_type == (changes % 2 == 0 ? SMRC_EVENT_PORT_ERR : SMRC_EVENT_PORT_ACTIVE);
    ++changes;
  }
  std::printf("events: %ld on plane %u, %s\n", changes, plane,
              in_order ? "in order" : "out of order");
  return smrc_close_device(ctx);
}

// Until the test closes our standard input.
void hold() {
  char c;
  while (::read(0, &c, 1) > 0) {
  }
}

// Opens contexts until the daemon refuses one, then holds them.
int contexts(const char* sock) {
  std::vector<smrc_context*> ctxs;
  while (smrc_context* ctx = smrc_open_device(sock)) ctxs.push_back(ctx);
  std::printf("contexts: %zu open, then %s\n", ctxs.size(), strerrorname_np(errno));
  std::fflush(stdout);
  hold();
  for (smrc_context* ctx : ctxs) smrc_close_device(ctx);
  return 0;
}

// Opens `contexts` devices and makes completion channels on each until the
// daemon refuses; holds them all until standard input closes.
int hog(const char* sock, int contexts) {
  std::vector<smrc_context*> ctxs;
  std::vector<smrc_comp_channel*> channels;
  for (int i = 0; i < contexts; ++i) {
    smrc_context* ctx = smrc_open_device(sock);
    if (ctx == nullptr) {
      std::printf("FAIL: hog: open device %d: %s\n", i, strerrorname_np(errno));
      return 1;
    }
    ctxs.push_back(ctx);
    int n = 0;
    while (smrc_comp_channel* ch = smrc_create_comp_channel(ctx)) {
      channels.push_back(ch);
      ++n;
    }
    std::printf("hog: context %d: %d channels, then %s\n", i, n, strerrorname_np(errno));
  }
  std::printf("hog: holding %zu channels\n", channels.size());
  std::fflush(stdout);
  hold();
  for (smrc_comp_channel* ch : channels) smrc_destroy_comp_channel(ch);
  for (smrc_context* ctx : ctxs) smrc_close_device(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  if (mode == "misuse" && argc == 4) return misuse(argv[2], argv[3]);
  if (mode == "forge" && argc == 4) return forge(argv[2], argv[3]);
  if (mode == "stream" && argc == 5)
    return stream(argv[2], false, std::strtoull(argv[3], nullptr, 0),
                  std::strtoull(argv[4], nullptr, 0));
  if (mode == "stream") return stream(argv[2]);
  if (mode == "stream_flush") return stream(argv[2], true);
  if (mode == "init" && argc == 5) {
    Basic b;
    if (!setup(argv[2], &b)) return 2;
    const int e =
        to_init(b.qp, std::strtoull(argv[3], nullptr, 0), std::strtoull(argv[4], nullptr, 0));
    std::printf("init: %s\n", e == 0 ? "0" : strerrorname_np(e));
    return 0;
  }
  if (mode == "sink") return sink(argv[2], true);
  if (mode == "sink_rtr") return sink(argv[2], false);
  if (mode == "daemon_dies") return daemon_dies(argv[2]);
  if (mode == "daemon_stops" && argc == 4) return daemon_stops(argv[2], std::atol(argv[3]));
  if (mode == "victim") return victim(argv[2]);
  if (mode == "trespass") return trespass(argv[2]);
  if (mode == "two_pds") return two_pds(argv[2]);
  if (mode == "free_in_flight" && argc == 4)
    return free_in_flight(argv[2], std::strcmp(argv[3], "writer") == 0);
  if (mode == "recv_behind_sends" && argc == 4)
    return recv_behind_sends(argv[2], std::strcmp(argv[3], "deep") == 0);
  if (mode == "init_again" && argc == 8) {
    uint64_t id[5];
    for (int i = 0; i < 5; ++i) id[i] = std::strtoull(argv[3 + i], nullptr, 0);
    return init_again(argv[2], id[0], id[1], id[2], id[3], id[4]);
  }
  if (mode == "contexts" && argc == 3) return contexts(argv[2]);
  if (mode == "hog" && argc == 4) return hog(argv[2], std::atoi(argv[3]));
  if (mode == "port_events" && argc == 4)
    return port_events(argv[2], static_cast<uint32_t>(std::atoi(argv[3])));
  if (mode == "port_events_later" && argc == 4)
    return port_events_later(argv[2], static_cast<uint32_t>(std::atoi(argv[3])));
  return 2;
}
