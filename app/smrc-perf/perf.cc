#include "perf.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

#include "cli/number.h"
#include "pattern/pattern.h"

namespace softmrc::perf {

namespace {

constexpr uint32_t kMagic = 0x46504d53;  // "SMPF"
constexpr uint32_t kVersion = 4;
// The test byte of a server's answer that refuses the client; a reason
// (2-byte length, then text) follows instead of parameters.
constexpr uint8_t kRefused = 0;
constexpr size_t kMaxReasonShown = 300;
// Receives kept posted per QP in write_lat (one per ping or pong in flight).
constexpr uint32_t kLatRecvs = 16;
// write_lat's send queue: one Write in flight at a time, and a few before
// it whose ACKs may trail the peer's answers.
constexpr uint32_t kLatSends = 16;
// How often a write_bw wait looks for the peer's keep-alives.
constexpr int64_t kListenMs = 5;
// Sync points between the sides, per message size, and a write_bw
// sender's keep-alive.
enum : uint32_t { kReady = 1, kDone = 2, kBye = 3, kAlive = 4 };

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string api_error(const std::string& what, int e) {
  if (e == ENOTCONN) return what + ": softmrcd went away";
  return what + ": " + std::strerror(e);
}

// A sync point or a keep-alive: (what, size, value).
Message sync_message(uint32_t what, uint64_t size, uint64_t value) {
  Message m;
  m.put(what, 4);
  m.put(size, 8);
  m.put(value, 8);
  return m;
}

bool is_keep_alive(const Message& m) {
  return Message(m.bytes()).get(4) == kAlive;
}

const char* test_name(Test t) {
  return t == Test::kWriteLat ? "write_lat" : "write_bw";
}

// The reason of a refusal, as much of it as is worth showing, made printable:
// it comes from the peer.
std::string refusal_reason(Message& m) {
  std::string why(static_cast<size_t>(m.get(2)), '\0');
  m.get_bytes(why.data(), why.size());
  if (!m.ok() || !m.at_end()) return "(a reason that does not parse)";
  if (why.size() > kMaxReasonShown) why.resize(kMaxReasonShown);
  for (char& c : why)
    if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
  return why;
}

// What in a client's hello no smrc-perf command line gives (the same
// bounds, against a forged peer), or "".
std::string hello_problem(const Params& p) {
  if (p.test != Test::kWriteBw && p.test != Test::kWriteLat)
    return "test " + std::to_string(static_cast<unsigned>(p.test)) + " is not one of smrc-perf's";
  const struct {
    const char* option;
    uint64_t value, lo, hi;
  } kRanges[] = {
      {"--qps", p.qps, 1, kMaxQps},
      {"--min-size", p.min_size, 1, kMaxSize},
      {"--max-size", p.max_size, 1, kMaxSize},
      {"--step-factor", p.step_factor, 2, kMaxStepFactor},
      {"--iters", p.iters, 1, kMaxIters},
      {"--warmup", p.warmup, 0, kMaxWarmup},
      {"--window", p.window, 1, kMaxWindow},
      {"--signal-every", p.signal_every, 1, kMaxSignalEvery},
  };
  for (const auto& r : kRanges)
    if (r.value < r.lo || r.value > r.hi)
      return std::string(r.option) + " " + std::to_string(r.value) + " is not in " +
             std::to_string(r.lo) + ".." + std::to_string(r.hi);
  if (p.min_size > p.max_size)
    return "--min-size " + std::to_string(p.min_size) + " is over --max-size " +
           std::to_string(p.max_size);
  // A window that fills before a signaled Write is posted would never drain.
  if (p.test == Test::kWriteBw && p.signal_every > p.window)
    return "--signal-every " + std::to_string(p.signal_every) + " is over --window " +
           std::to_string(p.window);
  if (p.test == Test::kWriteLat && (p.qps != 1 || p.bidir))
    return "write_lat runs one message at a time on one QP";
  return "";
}

uint64_t wr_id(uint32_t q, uint64_t n) {
  return static_cast<uint64_t>(q) << 40 | n;
}
uint32_t wr_qp(uint64_t id) {
  return static_cast<uint32_t>(id >> 40);
}
uint64_t wr_seq(uint64_t id) {
  return id & ((1ull << 40) - 1);
}

}  // namespace

std::vector<uint64_t> sizes(const Params& p) {
  std::vector<uint64_t> out;
  for (uint64_t s = p.min_size; s < p.max_size; s *= p.step_factor) out.push_back(s);
  out.push_back(p.max_size);
  return out;
}

Session::~Session() {
  for (smrc_qp* qp : qps_) smrc_destroy_qp(qp);
  if (mr_) smrc_free_mr(mr_);
  if (send_cq_) smrc_destroy_cq(send_cq_);
  if (recv_cq_) smrc_destroy_cq(recv_cq_);
  if (channel_) smrc_destroy_comp_channel(channel_);
  if (pd_) smrc_dealloc_pd(pd_);
  if (ctx_) smrc_close_device(ctx_);
}

bool Session::start(std::string* err) {
  // Both sides reach their daemon first, so that a missing one is said at
  // once. The server learns the parameters from the client, so it meets
  // the client before it sizes anything; the client checks its parameters
  // against its device first.
  if (!open_device(err)) return false;
  if (client()) return open(err) && exchange(err) && connect(err);
  if (!oob_.accept(opt_.port, static_cast<int>(opt_.timeout_ms), err)) return false;
  return exchange(err) && connect(err);
}

bool Session::open_device(std::string* err) {
  ctx_ = smrc_open_device(opt_.socket.empty() ? nullptr : opt_.socket.c_str());
  if (ctx_ == nullptr) {
    const char* env = std::getenv(SMRC_SOCKET_ENV);
    const std::string where = !opt_.socket.empty() ? opt_.socket
                              : env != nullptr && *env
                                  ? env + std::string(" ($" SMRC_SOCKET_ENV ")")
                                  : SMRC_DEFAULT_SOCKET;
    *err = "cannot open softmrcd at " + where + ": " + std::strerror(errno);
    return false;
  }
  if (int e = smrc_query_device(ctx_, &dev_)) {
    *err = api_error("query device", e);
    return false;
  }
  return true;
}

bool Session::open(std::string* err) {
  if (p_.max_size > dev_.max_msg_size) {
    *err = "--max-size " + std::to_string(p_.max_size) + " is over the device's largest Write (" +
           std::to_string(dev_.max_msg_size) + " bytes)";
    return false;
  }
  const uint64_t region = 2ull * p_.qps * p_.max_size;
  if (region > dev_.max_mr_size) {
    *err = "--qps x --max-size needs " + std::to_string(region) +
           " bytes of registered memory (a send and a receive area per QP); the device allows " +
           std::to_string(dev_.max_mr_size);
    return false;
  }
  if (p_.qps > dev_.max_qp) {
    *err = "--qps " + std::to_string(p_.qps) + " is over the device's " +
           std::to_string(dev_.max_qp) + " QPs";
    return false;
  }
  max_recv_wr_ = std::min(kLatRecvs, dev_.max_qp_wr);
  if (p_.test == Test::kWriteLat) {
    max_send_wr_ = std::min(kLatSends, dev_.max_qp_wr);
  } else if (p_.window + 2 > dev_.max_qp_wr) {
    *err = "--window " + std::to_string(p_.window) + " is over the device's " +
           std::to_string(dev_.max_qp_wr - 2) + " outstanding Writes per QP";
    return false;
  } else {
    max_send_wr_ = std::min(std::max(p_.window, p_.signal_every) + 2, dev_.max_qp_wr);
  }
  // Every QP's send and receive queues complete into one CQ each: a CQ
  // smaller than their sum would overflow (and fail the QPs) mid-run.
  for (const auto& [queue, per_qp] : {std::pair{"send", max_send_wr_}, {"receive", max_recv_wr_}}) {
    if (uint64_t{per_qp} * p_.qps > dev_.max_cqe) {
      *err = "--qps " + std::to_string(p_.qps) + " x " + std::to_string(per_qp) + " " + queue +
             " queue entries need " + std::to_string(uint64_t{per_qp} * p_.qps) +
             " completion queue entries; the device's CQs hold " + std::to_string(dev_.max_cqe);
      return false;
    }
  }
  pd_ = smrc_alloc_pd(ctx_);
  if (pd_ == nullptr) {
    *err = api_error("alloc pd", errno);
    return false;
  }
  if (opt_.use_event && (channel_ = smrc_create_comp_channel(ctx_)) == nullptr) {
    *err = api_error("create completion channel", errno);
    return false;
  }
  send_cq_ = smrc_create_cq(ctx_, static_cast<int>(max_send_wr_ * p_.qps), nullptr, channel_);
  recv_cq_ = smrc_create_cq(ctx_, static_cast<int>(max_recv_wr_ * p_.qps), nullptr, channel_);
  if (send_cq_ == nullptr || recv_cq_ == nullptr) {
    *err = api_error("create cq", errno);
    return false;
  }
  mr_ = smrc_alloc_mr(pd_, region, SMRC_ACCESS_LOCAL_WRITE | SMRC_ACCESS_REMOTE_WRITE);
  if (mr_ == nullptr) {
    *err = api_error("alloc mr of " + std::to_string(region) + " bytes", errno);
    return false;
  }
  std::random_device rd;
  for (uint32_t q = 0; q < p_.qps; ++q) {
    smrc_qp_init_attr init{};
    init.send_cq = send_cq_;
    init.recv_cq = recv_cq_;
    init.cap.max_send_wr = max_send_wr_;
    init.cap.max_recv_wr = max_recv_wr_;
    init.cap.max_send_sge = 1;
    smrc_qp* qp = smrc_create_qp(pd_, &init);
    if (qp == nullptr) {
      *err = api_error("create qp " + std::to_string(q), errno);
      return false;
    }
    qps_.push_back(qp);
    psn_.push_back(rd() & 0xffffff);
    smrc_qp_attr a{};
    uint32_t mask = SMRC_QP_STATE;
    a.qp_state = SMRC_QPS_INIT;
    struct Profile {
      const std::string& name;
      smrc_profile_kind kind;
      uint64_t* id;
      uint32_t mask;
    };
    for (const Profile& pr :
         {Profile{opt_.ev_profile, SMRC_PROFILE_EV, &a.ev_profile_id, SMRC_QP_EV_PROFILE},
          Profile{opt_.cc_profile, SMRC_PROFILE_CC, &a.cc_profile_id, SMRC_QP_CC_PROFILE}}) {
      if (pr.name.empty()) continue;
      // A name from the daemon's configuration, else a number: the id of a
      // profile made with smrcctl (which has no name).
      if (int e = smrc_query_profile(ctx_, pr.kind, pr.name.c_str(), pr.id)) {
        if (e != ENOENT || !cli::parse_uint(pr.name, 1, UINT64_MAX, pr.id)) {
          *err = api_error("profile '" + pr.name + "'", e);
          return false;
        }
      }
      mask |= pr.mask;
    }
    if (int e = smrc_modify_qp(qp, &a, mask)) {
      *err = api_error("modify qp to INIT", e);
      return false;
    }
  }
  return true;
}

// The client sends its parameters and its addresses; the server opens
// its side to match and answers with its own, or with why it will not.
bool Session::exchange(std::string* err) {
  const auto put_side = [&](Message& m) {
    union smrc_gid gid {};
    smrc_query_gid(ctx_, 0, &gid);
    m.put_bytes(gid.raw, sizeof(gid.raw));
    m.put(mr_->rkey, 4);
    m.put(reinterpret_cast<uintptr_t>(recv_area(0)), 8);
    m.put(opt_.timeout_ms, 4);
    for (uint32_t q = 0; q < p_.qps; ++q) {
      m.put(smrc_qp_num(qps_[q]), 4);
      m.put(psn_[q], 4);
    }
  };
  const auto put_params = [&](Message& m) {
    m.put(kMagic, 4);
    m.put(kVersion, 4);
    m.put(static_cast<uint8_t>(p_.test), 1);
    m.put(p_.bidir, 1);
    m.put(p_.qps, 4);
    m.put(p_.min_size, 8);
    m.put(p_.max_size, 8);
    m.put(p_.step_factor, 4);
    m.put(p_.iters, 4);
    m.put(p_.warmup, 4);
    m.put(p_.window, 4);
    m.put(p_.signal_every, 4);
  };
  // False if the message is not smrc-perf's, of this version; a refusal
  // reads as test 0.
  const auto get_params = [&](Message& m, Params* p) {
    if (m.get(4) != kMagic || m.get(4) != kVersion) return false;
    p->test = static_cast<Test>(m.get(1));
    if (static_cast<uint8_t>(p->test) == kRefused) return m.ok();
    p->bidir = m.get(1) != 0;
    p->qps = static_cast<uint32_t>(m.get(4));
    p->min_size = m.get(8);
    p->max_size = m.get(8);
    p->step_factor = static_cast<uint32_t>(m.get(4));
    p->iters = static_cast<uint32_t>(m.get(4));
    p->warmup = static_cast<uint32_t>(m.get(4));
    p->window = static_cast<uint32_t>(m.get(4));
    p->signal_every = static_cast<uint32_t>(m.get(4));
    return m.ok();
  };
  const auto get_side = [&](Message& m) {
    m.get_bytes(peer_.gid.raw, sizeof(peer_.gid.raw));
    peer_.rkey = static_cast<uint32_t>(m.get(4));
    peer_.recv_base = m.get(8);
    peer_.timeout_ms = static_cast<uint32_t>(m.get(4));
    for (uint32_t q = 0; q < p_.qps; ++q) {
      peer_.qpn.push_back(static_cast<uint32_t>(m.get(4)));
      peer_.psn.push_back(static_cast<uint32_t>(m.get(4)) & 0xffffff);
    }
    return m.ok() && m.at_end();
  };
  // The peer's --timeout-ms paces our keep-alives: out of range, it is refused.
  const auto timeout_problem = [&]() -> std::string {
    if (peer_.timeout_ms >= 1 && peer_.timeout_ms <= kMaxTimeoutMs) return "";
    return "--timeout-ms " + std::to_string(peer_.timeout_ms) + " is not in 1.." +
           std::to_string(kMaxTimeoutMs);
  };
  const int timeout = static_cast<int>(opt_.timeout_ms);
  if (client()) {
    if (!oob_.connect(opt_.server, opt_.port, timeout, err)) return false;
    Message hello;
    put_params(hello);
    put_side(hello);
    Message reply;
    if (!oob_.send(hello, err) || !oob_.receive(&reply, timeout, err)) return false;
    Params echo;
    if (!get_params(reply, &echo)) {
      *err = "the server's answer is not smrc-perf's (or another version)";
      return false;
    }
    if (static_cast<uint8_t>(echo.test) == kRefused) {
      *err = "the server refused: " + refusal_reason(reply);
      return false;
    }
    if (echo.test != p_.test || !get_side(reply)) {
      *err = "the server's answer does not parse";
      return false;
    }
    if (std::string why = timeout_problem(); !why.empty()) {
      *err = "the server's answer: " + why;
      return false;
    }
    return true;
  }
  // The server: whatever it cannot accept, it says why to both.
  const auto refuse = [&](const std::string& why) {
    Message no;
    no.put(kMagic, 4);
    no.put(kVersion, 4);
    no.put(kRefused, 1);
    const size_t len = std::min(why.size(), kMaxReasonShown);
    no.put(len, 2);
    no.put_bytes(why.data(), len);
    std::string unsent;
    (void)oob_.send(no, &unsent);  // the client may be gone already
    *err = "refused the client: " + why;
    return false;
  };
  Message hello;
  if (!oob_.receive(&hello, timeout, err)) return false;
  Params wanted;
  if (!get_params(hello, &wanted) || static_cast<uint8_t>(wanted.test) == kRefused)
    return refuse("the hello is not smrc-perf's exchange, version " + std::to_string(kVersion));
  if (std::string why = hello_problem(wanted); !why.empty()) return refuse(why);
  if (wanted.test != p_.test)
    return refuse(std::string("this server runs ") + test_name(p_.test) + ", the client " +
                  test_name(wanted.test));
  p_ = wanted;
  if (!get_side(hello)) return refuse("the client's addresses do not parse");
  if (std::string why = timeout_problem(); !why.empty()) return refuse(why);
  if (std::string why; !open(&why)) return refuse(why);
  Message reply;
  put_params(reply);
  put_side(reply);
  return oob_.send(reply, err);
}

bool Session::connect(std::string* err) {
  for (uint32_t q = 0; q < p_.qps; ++q) {
    smrc_qp_attr a{};
    a.qp_state = SMRC_QPS_RTR;
    a.dgid = peer_.gid;
    a.dest_qp_num = peer_.qpn[q];
    a.rq_psn = peer_.psn[q];
    if (int e = smrc_modify_qp(qps_[q], &a,
                               SMRC_QP_STATE | SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN)) {
      *err = api_error("modify qp to RTR", e);
      return false;
    }
    a.qp_state = SMRC_QPS_RTS;
    a.sq_psn = psn_[q];
    if (int e = smrc_modify_qp(qps_[q], &a, SMRC_QP_STATE | SMRC_QP_SQ_PSN)) {
      *err = api_error("modify qp to RTS", e);
      return false;
    }
  }
  // write_lat keeps its receives posted from here on, one given back per message.
  return p_.test != Test::kWriteLat || post_recvs(0, max_recv_wr_, err);
}

// Both sides send (what, size, value) and wait for the other's.
bool Session::sync(uint32_t what, uint64_t size, uint64_t value, uint64_t* peer_value,
                   std::string* err) {
  Message got;
  if (!oob_.send(sync_message(what, size, value), err) || !receive_sync(&got, err)) return false;
  const uint64_t w = got.get(4);
  const uint64_t s = got.get(8);
  const uint64_t v = got.get(8);
  if (!got.ok() || w != what || s != size) {
    *err = "the peer is out of step (it failed, or runs other parameters)";
    return false;
  }
  if (peer_value) *peer_value = v;
  return true;
}

bool Session::receive_sync(Message* m, std::string* err) {
  // Keep-alives tell a receiver that the sender's stream goes on. A peer
  // that owes a sync message has ended its stream (its last completions,
  // and keep-alives with them, may still come), so they do not extend this
  // wait: a peer sending nothing else would hold us for ever.
  const int64_t deadline_ns = now_ns() + int64_t{opt_.timeout_ms} * 1'000'000;
  bool alive = false;  // a keep-alive came
  for (;;) {
    const int64_t left_ns = std::max<int64_t>(deadline_ns - now_ns(), 0);
    if (pending_) {
      *m = std::move(*pending_);
      pending_.reset();
    } else if (!oob_.receive(m, static_cast<int>((left_ns + 999'999) / 1'000'000), err)) {
      if (alive && now_ns() >= deadline_ns)
        *err = "the peer sent nothing but keep-alives for " + std::to_string(opt_.timeout_ms) +
               " ms (it is out of step)";
      return false;
    }
    if (!is_keep_alive(*m)) return true;
    alive = true;
  }
}

bool Session::keep_alive(std::string* err) {
  const int64_t now = now_ns();
  // Often enough for the more impatient side.
  const int64_t every_ns = int64_t{std::min(opt_.timeout_ms, peer_.timeout_ms)} * 1'000'000 / 4;
  if (now - last_alive_ns_ < every_ns) return true;
  last_alive_ns_ = now;
  return oob_.send(sync_message(kAlive, 0, 0), err);
}

bool Session::hear_peer(bool* alive, std::string* err) {
  *alive = false;
  if (pending_ || !oob_.readable()) return true;
  Message m;
  if (!oob_.receive(&m, static_cast<int>(opt_.timeout_ms), err)) return false;
  *alive = is_keep_alive(m);
  if (!*alive) pending_ = std::move(m);
  return true;
}

uint8_t* Session::send_area(uint32_t q) const {
  return static_cast<uint8_t*>(mr_->addr) + q * p_.max_size;
}

uint8_t* Session::recv_area(uint32_t q) const {
  return send_area(p_.qps + q);
}

bool Session::post_write(uint32_t q, uint64_t size, bool with_imm, uint32_t imm, bool signaled,
                         uint64_t id, std::string* err) {
  smrc_sge sge{reinterpret_cast<uintptr_t>(send_area(q)), static_cast<uint32_t>(size), mr_->lkey};
  smrc_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = with_imm ? SMRC_WR_RDMA_WRITE_WITH_IMM : SMRC_WR_RDMA_WRITE;
  wr.send_flags = signaled ? SMRC_SEND_SIGNALED : 0;
  wr.imm_data = htonl(imm);
  wr.rdma.remote_addr = peer_.recv_base + q * p_.max_size;
  wr.rdma.rkey = peer_.rkey;
  smrc_send_wr* bad = nullptr;
  if (int e = smrc_post_send(qps_[q], &wr, &bad)) {
    *err = api_error("post write on qp " + std::to_string(q), e);
    return false;
  }
  return true;
}

bool Session::post_recvs(uint32_t q, uint32_t n, std::string* err) {
  for (uint32_t i = 0; i < n; ++i) {
    smrc_recv_wr wr{};
    wr.wr_id = wr_id(q, 0);
    smrc_recv_wr* bad = nullptr;
    if (int e = smrc_post_recv(qps_[q], &wr, &bad)) {
      *err = api_error("post recv on qp " + std::to_string(q), e);
      return false;
    }
  }
  return true;
}

int Session::wait(smrc_cq* cq, smrc_wc* wc, int max, bool peer_streams, std::string* err) {
  const int64_t timeout_ns = int64_t{opt_.timeout_ms} * 1'000'000;
  int64_t deadline = now_ns() + timeout_ns;
  // Only write_bw senders send keep-alives; reading them (not at every poll)
  // also keeps a peer that streams meanwhile (--bidir) from blocking on a
  // full socket.
  const bool listen = p_.test == Test::kWriteBw;
  int64_t next_listen = 0;
  for (;;) {
    int n = smrc_poll_cq(cq, max, wc);
    if (n == 0 && channel_ != nullptr) {
      // Arm, then look once more: a completion that landed before the
      // arming raises no event.
      if (int e = smrc_req_notify_cq(cq, 0)) n = -e;
      if (n == 0) n = smrc_poll_cq(cq, max, wc);
      if (n == 0) {
        const int64_t left_ms = std::max<int64_t>((deadline - now_ns()) / 1'000'000, 0);
        smrc_cq* ev_cq = nullptr;
        void* ctx = nullptr;
        const int e =
            smrc_get_cq_event(channel_, &ev_cq, &ctx,
                              static_cast<int>(listen ? std::min(left_ms, kListenMs) : left_ms));
        if (e == 0) smrc_ack_cq_events(ev_cq, 1);
        if (e != 0 && e != ETIMEDOUT) n = -e;
      }
    }
    if (n < 0) {
      *err = api_error("poll cq", -n);
      return n;
    }
    if (n > 0) return n;
    const int64_t now = now_ns();
    if (listen && now >= next_listen) {
      next_listen = now + kListenMs * 1'000'000;
      bool alive = false;
      if (!hear_peer(&alive, err)) return -EPIPE;
      if (alive && peer_streams) deadline = now + timeout_ns;
    }
    if (now >= deadline) {
      *err = "no completion within " + std::to_string(opt_.timeout_ms) +
             " ms (is the peer's softmrcd reachable?)";
      return -ETIMEDOUT;
    }
  }
}

bool Session::check(const smrc_wc& wc, std::string* err) const {
  if (wc.status == SMRC_WC_SUCCESS) return true;
  *err = "qp " + std::to_string(wr_qp(wc.wr_id)) +
         ": work completion: " + smrc_wc_status_str(static_cast<smrc_wc_status>(wc.status));
  return false;
}

bool Session::run_bw(uint64_t size, BwResult* r, std::string* err) {
  const bool receives = !client() || p_.bidir;
  for (uint32_t q = 0; q < p_.qps; ++q) {
    if (receives) {
      std::memset(recv_area(q), 0, size);
      if (!post_recvs(q, 1, err)) return false;
    }
    if (sends()) pattern::fill(send_area(q), size, stream(q, client()), size);
  }
  if (!sync(kReady, size, 0, nullptr, err)) return false;
  smrc_wc wc[32];
  if (sends()) {
    // Warm-up: each Write signaled and waited for, as the OCP benchmark does.
    for (uint32_t i = 0; i < p_.warmup; ++i) {
      for (uint32_t q = 0; q < p_.qps; ++q)
        if (!post_write(q, size, false, 0, true, wr_id(q, 0), err)) return false;
      for (uint32_t left = p_.qps; left > 0;) {
        const int n = wait(send_cq_, wc, 32, false, err);
        if (n < 0 || !keep_alive(err)) return false;
        for (int k = 0; k < n; ++k)
          if (!check(wc[k], err)) return false;
        left -= static_cast<uint32_t>(n);
      }
    }
    std::vector<uint64_t> posted(p_.qps, 0), done(p_.qps, 0);
    uint32_t finished = 0;
    const int64_t t0 = now_ns();
    while (finished < p_.qps) {
      for (uint32_t q = 0; q < p_.qps; ++q) {
        while (posted[q] < p_.iters && posted[q] - done[q] < p_.window) {
          const uint64_t n = ++posted[q];
          const bool signaled = n % p_.signal_every == 0 || n == p_.iters;
          if (!post_write(q, size, false, 0, signaled, wr_id(q, n), err)) return false;
        }
      }
      const int n = wait(send_cq_, wc, 32, false, err);
      if (n < 0 || !keep_alive(err)) return false;
      for (int i = 0; i < n; ++i) {
        if (!check(wc[i], err)) return false;
        // A QP completes in order: a signaled Write says every earlier one is done.
        const uint32_t q = wr_qp(wc[i].wr_id);
        done[q] = wr_seq(wc[i].wr_id);
        if (done[q] == p_.iters) ++finished;
      }
    }
    r->seconds = (now_ns() - t0) / 1e9;
    r->size = size;
    r->total_ops = uint64_t{p_.iters} * p_.qps;
    // The message that tells the receiver to look (imm: the size).
    for (uint32_t q = 0; q < p_.qps; ++q)
      if (!post_write(q, 0, true, static_cast<uint32_t>(size), true, wr_id(q, 0), err))
        return false;
    for (uint32_t left = p_.qps; left > 0;) {
      const int n = wait(send_cq_, wc, 32, false, err);
      if (n < 0 || !keep_alive(err)) return false;
      for (int i = 0; i < n; ++i)
        if (!check(wc[i], err)) return false;
      left -= static_cast<uint32_t>(n);
    }
  }
  bool verified = true;
  if (receives) {
    for (uint32_t left = p_.qps; left > 0;) {
      const int n = wait(recv_cq_, wc, 32, true, err);
      if (n < 0) return false;
      for (int i = 0; i < n; ++i) {
        if (!check(wc[i], err)) return false;
        const uint32_t q = wr_qp(wc[i].wr_id);
        if (wc[i].opcode != SMRC_WC_RECV_RDMA_WITH_IMM || ntohl(wc[i].imm_data) != size) {
          *err = "qp " + std::to_string(q) + ": unexpected receive completion";
          return false;
        }
        verified = verified && pattern::verify(recv_area(q), size, stream(q, !client()), size);
      }
      left -= static_cast<uint32_t>(n);
    }
  }
  return agree(size, verified, err);
}

bool Session::run_lat(uint64_t size, LatResult* r, std::string* err) {
  const uint32_t total = p_.warmup + p_.iters;
  pattern::fill(send_area(0), size, stream(0, client()), size);
  std::memset(recv_area(0), 0, size);
  if (!sync(kReady, size, 0, nullptr, err)) return false;
  r->size = size;
  r->total_ops = p_.iters;
  r->rtt_us.clear();
  try {
    r->rtt_us.reserve(p_.iters);
  } catch (const std::bad_alloc&) {
    *err = "no memory for " + std::to_string(p_.iters) +
           " round-trip times (8 bytes each): lower --iters";
    return false;
  }
  smrc_wc wc[8];
  // One receive per message: wait for it, give it back, check its number.
  const auto receive = [&](uint32_t i) {
    if (wait(recv_cq_, wc, 1, false, err) < 0 || !check(wc[0], err)) return false;
    if (ntohl(wc[0].imm_data) != i) {
      *err = "message " + std::to_string(i) + " arrived as number " +
             std::to_string(ntohl(wc[0].imm_data));
      return false;
    }
    return post_recvs(0, 1, err);
  };
  // Unsignaled Writes but every signal_every-th, reaped here so the CQ never fills.
  const auto send = [&](uint32_t i) {
    const bool signaled = (i + 1) % p_.signal_every == 0;
    if (!post_write(0, size, true, i, signaled, wr_id(0, i), err)) return false;
    const int n = smrc_poll_cq(send_cq_, 8, wc);
    for (int k = 0; k < n; ++k)
      if (!check(wc[k], err)) return false;
    if (n < 0) *err = api_error("poll cq", -n);
    return n >= 0;
  };
  for (uint32_t i = 0; i < total; ++i) {
    if (client()) {
      const int64_t t0 = now_ns();
      if (!send(i) || !receive(i)) return false;
      if (i >= p_.warmup) r->rtt_us.push_back((now_ns() - t0) / 1e3);
    } else if (!receive(i) || !send(i)) {
      return false;
    }
  }
  std::sort(r->rtt_us.begin(), r->rtt_us.end());
  const bool verified = pattern::verify(recv_area(0), size, stream(0, !client()), size);
  return agree(size, verified, err);
}

// The end of a size: each side says whether its receive areas held the
// right bytes; the size passes when both did.
bool Session::agree(uint64_t size, bool verified, std::string* err) {
  uint64_t peer_verified = 1;
  if (!sync(kDone, size, verified, &peer_verified, err)) return false;
  if (!verified || !peer_verified) {
    *err = std::to_string(size) + "-byte messages: " +
           (verified ? "the peer found wrong bytes" : "wrong bytes arrived here");
    return false;
  }
  return true;
}

bool Session::finish(std::string* err) {
  return sync(kBye, 0, 0, nullptr, err);
}

}  // namespace softmrc::perf
