// libFuzzer target for softmrcd's AppStage (app/softmrcd/app_stage.h):
// whatever an application writes into the rings it shares with the daemon.
//
// Endpoint A hosts two applications: the script's, which owns two QPs with
// their rings and two CQs, and a bystander that owns one region. An honest
// engine endpoint B is the QPs' peer, over frames built with
// wire::build_packet and parsed back. Each input is a script: work
// requests with hostile fields (opcodes, flags, keys of the bystander's and
// of deregistered regions, addresses and lengths around the edges of
// regions), receives, lcore passes, time, B's Writes-with-Immediate into
// A, CQ arming, QPs moved to ERROR, reset and reconnected, or replaced,
// and scribbles over the rings' entries and indices. The promises checked:
//   - nothing outside the application's own regions and rings is read or
//     written: the bystander's region, a deregistered region and the pages
//     around every region and ring are poisoned for ASan;
//   - every CQE names a work request the application posted, on that QP
//     and ring, once; one the script made invalid completes with an error,
//     never with success;
//   - each queue of a QP completes in post order (an application that
//     signals every n-th Write counts on it), and after an error
//     completion nothing more on that queue succeeds: the QP is in ERROR;
//   - once the QPs are flushed at the end, every receive and every
//     signaled or invalid send has had its CQE;
//   - an armed CQ that got completions in a pass has had its channel woken;
//   - no crash, no undefined behaviour (UBSan), whatever the sequence.
// Only what the script scribbled over (a ring's index or entries, a CQ's
// index) is exempt from the CQE checks. Any broken promise aborts, and
// libFuzzer saves the input.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <vector>

#include "fuzz_endpoint.h"
#include "shm/app_protocol.h"
#include "shm/spsc_ring.h"
#include "softmrcd/app_stage.h"

namespace softmrc::fuzz {
namespace {

using engine::TimeNs;
using shm::Cqe;
using shm::WorkRequest;

constexpr uint32_t kApp = 1, kBystander = 2;  // owners
constexpr uint32_t kRingCapacity = 16;        // each QP's send and receive ring
constexpr uint32_t kCqCapacity = 64;
constexpr uint32_t kMaxSendWr = 2;  // the application's, far below the engine's 64
constexpr uint32_t kMaxRecvWr = 4;  // likewise: more receives wait in the ring
constexpr uint32_t kPeerRecvs = 16;
constexpr uint32_t kMaxWrite = 3 * kMtu;
enum Cq { kSendCq, kRecvCq };

struct Region {
  uint64_t va = 0;
  uint32_t key = 0;
  uint64_t len = 0;
};

// A work request the script wrote into a ring, by wr_id (each unique).
struct Posted {
  uint32_t qpn = 0;
  bool recv = false;
  bool invalid = false;        // by the rules of docs/api.md: must not succeed
  bool must_complete = false;  // signaled, invalid, or a receive
  bool completed = false;
  uint32_t life = 0;  // the QP's life (Script::qp_lives_) it was posted in
};

// One application QP: its rings' memory, the library's producer ends and
// the daemon's AppQp, and B's QP at the other end.
struct AppQpLife {
  GuardedRegion mem{shm::qp_bytes(kRingCapacity, kRingCapacity), 0};
  shm::RingProducer<WorkRequest> send, recv;  // the application's ends
  softmrcd::AppQp qp;
  uint32_t qpn = 0;
  uint32_t peer_qpn = 0;
  uint32_t life = 0;
};

struct AppCqMem {
  GuardedRegion mem{shm::cq_bytes(kCqCapacity), 0};
  shm::RingHeader* header() const {
    return reinterpret_cast<shm::RingHeader*>(mem.data() + shm::cq_ring_offset());
  }
  shm::RingConsumer<Cqe> ring;  // the application's end
  softmrcd::AppCq cq;
  int wake_read = -1;  // the application's end of the channel's pipe
  bool scribbled = false;
};

class Script {
 public:
  Script()
      : own_(16 * 1024, 0x11),
        own_local_(4096, 0x22),
        gone_(4096, 0x33),
        bystander_(4096, 0x44),
        peer_mem_(16 * 1024, 0x55),
        evs_(fuzz_evs()) {
    if (!a_.init(endpoint_config(4, 8)).ok() || !b_.init(endpoint_config(4, 8)).ok()) fail("init");
    stage_.init(4, 8);
    const uint32_t local_remote = engine::kAccessLocalWrite | engine::kAccessRemoteWrite;
    regions_[0] = add_region(own_, 0x10000000, local_remote, kApp);
    regions_[1] = add_region(own_local_, 0x20000000, engine::kAccessLocalWrite, kApp);
    regions_[2] = add_region(gone_, 0x30000000, local_remote, kApp);
    regions_[3] = add_region(bystander_, 0x40000000, engine::kAccessLocalWrite, kBystander);
    stage_.remove_region(regions_[2].key);
    if (!a_.deregister_region(regions_[2].key).ok()) fail("deregister_region");
    gone_.poison_all();
    bystander_.poison_all();
    const engine::Region peer{0x50000000, peer_mem_.size(), peer_mem_.data(), local_remote};
    if (!b_.register_region(peer, &peer_key_).ok()) fail("register_region");
    for (int c = 0; c < 2; ++c) open_cq(c);
    for (uint32_t k = 0; k < 2; ++k) open_qp(k);
  }

  ~Script() {
    for (auto& c : cqs_)
      for (int fd : {c->cq.wake_fd, c->wake_read})
        if (fd >= 0) ::close(fd);
  }

  void run(FuzzedDataProvider& in) {
    for (int step = 0; step < 256 && in.remaining_bytes() > 0; ++step) {
      switch (in.ConsumeIntegralInRange<int>(0, 13)) {
        case 0:
        case 1:
        case 2:
        case 3:
          post_send(in);
          break;
        case 4:
        case 5:
          post_recv(in);
          break;
        case 6:
        case 7:
          pass();
          break;
        case 8:
          now_ += in.ConsumeIntegralInRange<TimeNs>(0, 5'000'000);
          pass();
          break;
        case 9:
          poll_cqs();
          break;
        case 10:
          peer_write(in);
          break;
        case 11:
          cqs_[in.ConsumeBool()]->cq.ctrl->armed.store(1, std::memory_order_seq_cst);
          break;
        case 12:
          to_error_or_replace(in);
          break;
        default:
          scribble(in);
          break;
      }
    }
    finish();
  }

 private:
  Region add_region(const GuardedRegion& r, uint64_t va, uint32_t access, uint32_t owner) {
    Region t{va, 0, r.size()};
    if (!a_.register_region(engine::Region{va, r.size(), r.data(), access}, &t.key).ok())
      fail("register_region");
    if (!stage_.add_region(shm::RegionEntry{t.key, owner, va, r.size()})) fail("add_region");
    return t;
  }

  // As AppServer's kCreateCq: the daemon formats the ring, then both ends
  // attach. The send CQ has a completion channel.
  void open_cq(int c) {
    auto m = std::make_unique<AppCqMem>();
    auto* ctrl = new (m->mem.data()) shm::CqControl;
    ctrl->armed.store(0);
    ctrl->fired.store(0);
    ctrl->overflow.store(0);
    uint8_t* ring = m->mem.data() + shm::cq_ring_offset();
    shm::format_ring(ring);
    m->ring.attach(ring, kCqCapacity);
    m->cq.id = static_cast<uint32_t>(c + 1);
    m->cq.owner = kApp;
    m->cq.ctrl = ctrl;
    m->cq.ring.attach(ring, kCqCapacity);
    m->cq.backlog.init(kCqCapacity);
    if (c == kSendCq) {  // with a channel, as AppServer's kCreateChannel makes it
      int p[2];
      if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) fail("pipe2");
      m->wake_read = p[0];
      m->cq.wake_fd = p[1];
    }
    stage_.add_cq(&m->cq);
    cqs_[c] = std::move(m);
  }

  // As AppServer's kCreateQp and an application's connection: QP k of A
  // (the second gives up retrying soon) to a fresh QP of B with receives.
  void open_qp(uint32_t k) {
    auto l = std::make_unique<AppQpLife>();
    uint8_t* send = l->mem.data();
    uint8_t* recv = send + shm::qp_recv_ring_offset(kRingCapacity);
    shm::format_ring(send);
    shm::format_ring(recv);
    l->send.attach(send, kRingCapacity);
    l->recv.attach(recv, kRingCapacity);
    l->qp.owner = kApp;
    l->qp.domain = kApp;
    l->qp.max_send_wr = kMaxSendWr;
    l->qp.max_recv_wr = kMaxRecvWr;
    l->qp.send_cq = &cqs_[kSendCq]->cq;
    l->qp.recv_cq = &cqs_[kRecvCq]->cq;
    l->qp.send_ring.attach(send, kRingCapacity);
    l->qp.recv_ring.attach(recv, kRingCapacity);
    if (!a_.create_qp(&l->qpn).ok()) fail("create_qp");
    stage_.add_qp(l->qpn, &l->qp);
    connect_to_new_peer(*l, k == 0);
    app_qpns_.insert(l->qpn);
    qps_[k] = std::move(l);
  }

  // A's QP of l (in RESET) connected to a fresh QP of B with receives
  // posted, in a new life.
  void connect_to_new_peer(AppQpLife& l, bool retry_forever) {
    if (!b_.create_qp(&l.peer_qpn).ok()) fail("B's create_qp");
    if (!a_.connect_qp(l.qpn, qp_attr(evs_, l.peer_qpn, retry_forever), now_).ok() ||
        !b_.connect_qp(l.peer_qpn, qp_attr(evs_, l.qpn, true), now_).ok())
      fail("connect_qp");
    for (uint32_t i = 0; i < kPeerRecvs; ++i) (void)b_.post_recv(l.peer_qpn, {});
    l.life = static_cast<uint32_t>(qp_lives_.size());
    qp_lives_.push_back(false);
  }

  AppQpLife& qp(FuzzedDataProvider& in) { return *qps_[in.ConsumeBool()]; }

  // An address and length in or around region r: mostly inside, often
  // at an edge, sometimes anywhere.
  static void aim(FuzzedDataProvider& in, const Region& r, uint32_t max_len, uint64_t* addr,
                  uint32_t* len) {
    *len = in.ConsumeIntegralInRange<uint32_t>(0, max_len);
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:  // ending at the region's end, give or take a little
        *addr = r.va + r.len - *len + in.ConsumeIntegral<int8_t>();
        break;
      case 1:  // starting at its start, give or take a little
        *addr = r.va + in.ConsumeIntegral<int8_t>();
        break;
      case 2:
        *addr = r.va + in.ConsumeIntegral<int32_t>();
        break;
      default:
        *addr =
            r.va + in.ConsumeIntegralInRange<uint64_t>(0, r.len - std::min<uint64_t>(*len, r.len));
        break;
    }
  }

  static bool inside(const Region& r, uint64_t addr, uint64_t len) {
    return addr >= r.va && addr - r.va <= r.len && len <= r.len - (addr - r.va);
  }

  void post_send(FuzzedDataProvider& in) {
    AppQpLife& l = qp(in);
    WorkRequest w{};
    w.wr_id = next_wr_id_;
    w.opcode = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegral<uint8_t>()
                                                         : uint8_t(in.ConsumeBool());
    w.flags = in.ConsumeIntegral<uint8_t>();
    // The application's two regions, the deregistered one, the
    // bystander's, or any key.
    const int pick = in.ConsumeIntegralInRange<int>(0, 9);
    const Region& from = regions_[pick < 6 ? pick % 2 : std::min(pick - 4, 3)];
    w.lkey = pick == 9 ? in.ConsumeIntegral<uint32_t>() : from.key;
    aim(in, from, in.ConsumeIntegralInRange<int>(0, 15) == 0 ? ~0u : kMaxWrite, &w.local_addr,
        &w.length);
    w.remote_addr =
        0x50000000 + in.ConsumeIntegralInRange<uint64_t>(0, peer_mem_.size() - kMaxWrite);
    w.rkey = peer_key_;
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {
      w.remote_addr = in.ConsumeIntegral<uint64_t>();
      w.rkey = in.ConsumeIntegral<uint32_t>();
    }
    w.imm = in.ConsumeIntegral<uint32_t>();
    if (l.send.enqueue_burst(&w, 1) != 1) return;
    // docs/api.md's rules for a send, checked here independently.
    const bool own_key = w.lkey == regions_[0].key || w.lkey == regions_[1].key;
    const Region& own = w.lkey == regions_[0].key ? regions_[0] : regions_[1];
    const bool invalid = w.opcode > uint8_t(shm::WrOpcode::kWriteImm) ||
                         w.length > shm::kMaxMsgBytes || w.remote_addr + w.length < w.remote_addr ||
                         (w.length > 0 && !(own_key && inside(own, w.local_addr, w.length)));
    record(l, false, invalid, invalid || (w.flags & shm::kWrSignaled) != 0);
  }

  void post_recv(FuzzedDataProvider& in) {
    AppQpLife& l = qp(in);
    WorkRequest w{};
    w.wr_id = next_wr_id_;
    w.opcode = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegral<uint8_t>()
                                                         : uint8_t(shm::WrOpcode::kRecv);
    w.lkey = in.ConsumeIntegral<uint32_t>();
    w.length = in.ConsumeIntegral<uint32_t>();
    if (l.recv.enqueue_burst(&w, 1) != 1) return;
    record(l, true, w.opcode != uint8_t(shm::WrOpcode::kRecv), true);
  }

  void record(const AppQpLife& l, bool recv, bool invalid, bool must_complete) {
    posted_[next_wr_id_++] = Posted{l.qpn, recv, invalid, must_complete, false, l.life};
  }

  // B writes into A with an immediate, mostly into the region A may
  // write, sometimes into others or anywhere.
  void peer_write(FuzzedDataProvider& in) {
    const AppQpLife& l = qp(in);
    engine::WriteRequest wr;
    const int pick = in.ConsumeIntegralInRange<int>(0, 7);
    const Region& at = regions_[pick < 5 ? 0 : pick - 4];
    uint32_t len;
    aim(in, at, kMaxWrite, &wr.remote_addr, &len);
    wr.length = len;
    wr.rkey = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? in.ConsumeIntegral<uint32_t>() : at.key;
    wr.local_addr = 0x50000000;
    wr.lkey = peer_key_;
    wr.with_imm = in.ConsumeIntegralInRange<int>(0, 3) != 0;
    wr.imm = in.ConsumeIntegral<uint32_t>();
    (void)b_.post_write(l.peer_qpn, wr);
  }

  // The application moves a QP to ERROR (AppServer takes what it posted
  // first), resets it and connects it again, or replaces a QP that is in
  // ERROR on either side.
  void to_error_or_replace(FuzzedDataProvider& in) {
    const uint32_t k = in.ConsumeBool();
    AppQpLife& l = *qps_[k];
    if (in.ConsumeIntegralInRange<int>(0, 2) == 0) return reset_and_reconnect(l, k == 0);
    if (a_.qp(l.qpn)->state() == engine::QpState::kError ||
        b_.qp(l.peer_qpn)->state() == engine::QpState::kError) {
      // As AppServer's kDestroyQp: what its rings still hold is dropped.
      stage_.remove_qp(l.qpn);
      if (!a_.destroy_qp(l.qpn).ok() || !b_.destroy_qp(l.peer_qpn).ok()) fail("destroy_qp");
      qp_lives_[l.life] = true;
      open_qp(k);
      return;
    }
    stage_.take_posted(a_, l.qpn);
    engine::QpAttr a;
    a.state = engine::QpState::kError;
    (void)a_.modify_qp(l.qpn, a, engine::kAttrState, now_);
  }

  // As AppServer's modify to RESET: what was posted first goes to the
  // engine, then the reset drops what the QP had and what waited, without
  // completions. Then a new life, connected to a fresh QP of B.
  void reset_and_reconnect(AppQpLife& l, bool retry_forever) {
    stage_.take_posted(a_, l.qpn);
    engine::QpAttr a;
    a.state = engine::QpState::kReset;
    if (!a_.modify_qp(l.qpn, a, engine::kAttrState, now_).ok()) fail("modify_qp to RESET");
    stage_.drop_posted(l.qpn);
    qp_lives_[l.life] = true;  // what it had posted need not complete any more
    if (!b_.destroy_qp(l.peer_qpn).ok()) fail("B's destroy_qp");
    connect_to_new_peer(l, retry_forever);
  }

  // What a buggy or hostile application may do to shared memory: bytes
  // over a ring slot (after its wr_id, which the checks key on), a ring's
  // producer index, or a CQ's consumer index.
  void scribble(FuzzedDataProvider& in) {
    if (in.ConsumeIntegralInRange<int>(0, 3) != 0) return;  // rarely
    const int what = in.ConsumeIntegralInRange<int>(0, 2);
    const uint32_t value = in.ConsumeIntegral<uint32_t>();
    if (what == 2) {
      AppCqMem& c = *cqs_[in.ConsumeBool()];
      c.header()->cons.store(value);
      c.scribbled = true;
      return;
    }
    AppQpLife& l = qp(in);
    uint8_t* ring = l.mem.data() + (in.ConsumeBool() ? shm::qp_recv_ring_offset(kRingCapacity) : 0);
    scribbled_qpns_.insert(l.qpn);
    if (what == 1) {
      reinterpret_cast<shm::RingHeader*>(ring)->prod.store(value);
      return;
    }
    uint8_t* slot = ring + sizeof(shm::RingHeader) + (value % kRingCapacity) * sizeof(WorkRequest);
    const std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(sizeof(WorkRequest) - 8);
    if (!bytes.empty()) std::memcpy(slot + 8, bytes.data(), bytes.size());
  }

  // One lcore pass as EndpointTask::poll makes it, with B answering at
  // once; then the wake-up promise for an armed CQ. Returns how many
  // descriptors and completions of A's it moved.
  uint32_t pass() {
    AppCqMem& sc = *cqs_[kSendCq];
    const uint32_t prod_before = sc.header()->prod.load();
    const bool armed = sc.cq.ctrl->armed.load() != 0;

    uint32_t moved = stage_.poll(a_) + drain_a();
    for (int round = 0; round < 4; ++round) {
      exchange(a_, b_);
      exchange(b_, a_);
      moved += drain_a();
      drain_b();
    }

    if (armed && sc.header()->prod.load() != prod_before && sc.cq.backlog.empty() &&
        !sc.scribbled) {
      char wakes[64];
      if (sc.cq.ctrl->armed.load() != 0 || ::read(sc.wake_read, wakes, sizeof(wakes)) < 1 ||
          sc.cq.ctrl->fired.load() != 1)
        fail("an armed CQ got completions and no wake-up");
      sc.cq.ctrl->fired.store(0);
    }
    return moved;
  }

  // What `from` sends, framed, read back and handed to `to`.
  void exchange(engine::Endpoint& from, engine::Endpoint& to) {
    engine::TxPacket tx[64];
    for (int burst = 0; burst < 16; ++burst) {
      const size_t n = from.poll_tx(tx, 64, now_);
      for (size_t i = 0; i < n; ++i) {
        const wire::WireEv ev = tx[i].wire_ev ? *tx[i].wire_ev : wire::WireEv{};
        wire::PacketView v;
        if (frame_and_parse(tx[i].t, ev, false, false, {tx[i].payload, tx[i].payload_len}, frame_,
                            &v))
          to.on_packet(v, tx[i].plane, now_, /*src_peer=*/0);
      }
      if (n < 64) break;
    }
  }

  // EndpointTask::drain_engine for A: every completion is an application
  // QP's (or one the application destroyed). Returns how many.
  uint32_t drain_a() {
    engine::Completion wc[32];
    uint32_t taken = 0;
    for (size_t n; (n = a_.poll_completions(wc, 32)) > 0; taken += n)
      for (size_t i = 0; i < n; ++i)
        if (!stage_.on_completion(wc[i]) && is_live(wc[i].qpn))
          fail("a live QP's completion not taken");
    stage_.notify();
    engine::Event ev[32];
    for (size_t n; (n = a_.poll_events(ev, 32)) > 0;)
      for (size_t i = 0; i < n; ++i) (void)stage_.on_event(ev[i]);
    softmrcd::AppEvent unused[64];  // the control thread's side: taken, not checked here
    while (stage_.take_events(unused, 64) > 0) {
    }
    return taken;
  }

  bool is_live(uint32_t qpn) const { return qps_[0]->qpn == qpn || qps_[1]->qpn == qpn; }

  // B keeps its receives posted.
  void drain_b() {
    engine::Completion wc[32];
    for (size_t n; (n = b_.poll_completions(wc, 32)) > 0;)
      for (size_t i = 0; i < n; ++i)
        if (wc[i].opcode == engine::WcOpcode::kRecvWriteImm) (void)b_.post_recv(wc[i].qpn, {});
    engine::Event ev[32];
    while (b_.poll_events(ev, 32) > 0) {
    }
  }

  // The application takes its CQEs, and each is checked.
  void poll_cqs() {
    for (int c = 0; c < 2; ++c) {
      AppCqMem& m = *cqs_[c];
      Cqe e[16];
      for (uint32_t n; (n = m.ring.dequeue_burst(e, 16)) > 0;)
        for (uint32_t i = 0; i < n; ++i) check(e[i], c, m.scribbled);
    }
  }

  void check(const Cqe& e, int cq, bool scribbled_cq) {
    if (e.status > uint8_t(shm::WcStatus::kGeneralErr)) fail("an unknown status");
    if (e.opcode > uint8_t(shm::CqeOpcode::kRecvWriteImm)) fail("an unknown opcode");
    if (!app_qpns_.contains(e.qpn)) fail("a completion for a QP the application never had");
    if (scribbled_cq || scribbled_qpns_.contains(e.qpn)) return;
    auto it = posted_.find(e.wr_id);
    if (it == posted_.end()) fail("a completion for a work request never posted");
    Posted& p = it->second;
    if (p.qpn != e.qpn) fail("a completion on another QP than its work request's");
    const bool recv = e.opcode == uint8_t(shm::CqeOpcode::kRecvWriteImm);
    if (p.recv != recv || (cq == kRecvCq) != recv) fail("a completion of the wrong kind or CQ");
    if (p.completed) fail("a work request completed twice");
    p.completed = true;
    const bool ok = e.status == uint8_t(shm::WcStatus::kSuccess);
    if (p.invalid && ok) fail("an invalid work request succeeded");
    Queue& q = queues_[{p.life, recv}];
    if (e.wr_id < q.last_completed) fail("a completion out of post order");
    q.last_completed = e.wr_id;
    if (ok && q.failed) fail("a success after an error completion on the same queue");
    q.failed = q.failed || !ok;
    if (recv && e.status == uint8_t(shm::WcStatus::kSuccess) && e.byte_len > kMaxWrite)
      fail("a receive longer than any Write sent");
  }

  // The daemon's shutdown flush, then passes until A moves nothing and
  // the application has taken every CQE, then every work request that
  // must complete has.
  void finish() {
    (void)stage_.flush(a_, now_);
    for (int i = 0; i < 64; ++i) {
      now_ += 1'000'000;
      const uint32_t moved = pass();
      poll_cqs();
      if (moved == 0 && cqs_[kSendCq]->cq.backlog.empty() && cqs_[kRecvCq]->cq.backlog.empty())
        break;
    }
    bool lost = false;
    for (const auto& c : cqs_)
      lost = lost || c->scribbled || c->cq.ctrl->overflow.load() != 0 || !c->cq.backlog.empty();
    if (lost) return;  // the script broke the CQ, or outran it (counted in overflow)
    for (const auto& [wr_id, p] : posted_)
      if (p.must_complete && !p.completed && !qp_lives_[p.life] && !scribbled_qpns_.contains(p.qpn))
        fail("a work request that must complete did not");
  }

  GuardedRegion own_, own_local_, gone_, bystander_, peer_mem_;
  std::vector<engine::EvEntry> evs_;
  engine::Endpoint a_, b_;
  softmrcd::AppStage stage_;
  Region regions_[4];  // own (remote write), own (local only), gone, the bystander's
  uint32_t peer_key_ = 0;
  std::unique_ptr<AppCqMem> cqs_[2];
  std::unique_ptr<AppQpLife> qps_[2];
  std::vector<bool> qp_lives_;         // by life: true once the QP was destroyed
  std::set<uint32_t> app_qpns_;        // every QPN the application had
  std::set<uint32_t> scribbled_qpns_;  // QPNs whose rings the script scribbled over
  std::map<uint64_t, Posted> posted_;
  struct Queue {
    uint64_t last_completed = 0;  // wr_ids grow in post order
    bool failed = false;          // an error completion was seen
  };
  std::map<std::pair<uint32_t, bool>, Queue> queues_;  // by QP life, and receive queue or not
  uint64_t next_wr_id_ = 1;
  TimeNs now_ = 1'000'000;
  Frame frame_;
};

}  // namespace
}  // namespace softmrc::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  softmrc::fuzz::Script script;
  script.run(in);
  return 0;
}
