// The application API's data path (see app_stage.h).
#include "softmrcd/app_stage.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace softmrc::softmrcd {

using shm::Cqe;
using shm::CqeOpcode;
using shm::WcStatus;
using shm::WorkRequest;
using shm::WrOpcode;

namespace {

constexpr uint32_t kQpBudget = 32;     // descriptors per QP per pass
constexpr uint32_t kPassBudget = 256;  // descriptors per pass, all QPs
constexpr uint32_t kEventRing = 1024;

WcStatus wc_status(engine::WcStatus s) {
  switch (s) {
    case engine::WcStatus::kSuccess:
      return WcStatus::kSuccess;
    case engine::WcStatus::kRetryExceeded:
      return WcStatus::kRetryExcErr;
    case engine::WcStatus::kRemoteAccessError:
      return WcStatus::kRemAccessErr;
    case engine::WcStatus::kRemoteInvalidRequest:
      return WcStatus::kRemInvReqErr;
    case engine::WcStatus::kFlushed:
      return WcStatus::kWrFlushErr;
    case engine::WcStatus::kRemoteOperationalError:
      return WcStatus::kRemOpErr;
  }
  return WcStatus::kGeneralErr;
}

}  // namespace

void AppStage::init(uint32_t max_qps, uint32_t max_regions) {
  qps_.assign(max_qps, nullptr);
  live_qps_.reserve(max_qps);
  cqs_.reserve(max_qps * 2 + 64);
  touched_.reserve(cqs_.capacity());
  // A pass's sends; a QP's receives flushed in ERROR may grow it once.
  held_.reserve(kPassBudget);
  region_slots_.assign(std::max<uint32_t>(max_regions, 1), shm::RegionEntry{});
  regions_ = shm::RegionTable(region_slots_.data(), static_cast<uint32_t>(region_slots_.size()));
  const size_t bytes = shm::ring_bytes(kEventRing, sizeof(AppEvent));
  event_ring_.reset(
      static_cast<unsigned char*>(::operator new (bytes, std::align_val_t{shm::kCacheLine})));
  shm::format_ring(event_ring_.get());
  events_in_.attach(event_ring_.get(), kEventRing);
  events_out_.attach(event_ring_.get(), kEventRing);
}

void AppStage::add_cq(AppCq* cq) {
  cqs_.push_back(cq);
  // Every CQ may be touched at once (one whose completions wait for room
  // stays touched after its QPs are gone): complete() must not allocate.
  if (touched_.capacity() < cqs_.capacity()) touched_.reserve(cqs_.capacity());
}

void AppStage::remove_cq(AppCq* cq) {
  cqs_.erase(std::remove(cqs_.begin(), cqs_.end(), cq), cqs_.end());
  touched_.erase(std::remove(touched_.begin(), touched_.end(), cq), touched_.end());
  std::erase_if(held_, [cq](const HeldCqe& h) { return h.cq == cq; });
}

void AppStage::add_qp(uint32_t qpn, AppQp* qp) {
  qps_[qpn - 1] = qp;
  live_qps_.push_back(qpn);
}

void AppStage::remove_qp(uint32_t qpn) {
  if (qpn - 1 >= qps_.size()) return;
  qps_[qpn - 1] = nullptr;
  live_qps_.erase(std::remove(live_qps_.begin(), live_qps_.end(), qpn), live_qps_.end());
  drop_held(qpn);
}

// A QP reset or destroyed takes its completions not yet delivered with it,
// as the engine's go (on_completion()) and as verbs cleans them from a CQ.
void AppStage::drop_held(uint32_t qpn) {
  std::erase_if(held_, [qpn](const HeldCqe& h) { return h.cqe.qpn == qpn; });
}

uint32_t AppStage::poll(engine::Endpoint& ep) {
  const size_t n = live_qps_.size();
  if (n == 0) return 0;
  uint32_t taken = 0;
  // Every QP's receives, all of them (up to its max_recv_wr), every pass:
  // a receive posted before the peer was told to send is then in place for
  // every frame this pass took in (EndpointTask::poll), however many sends
  // wait before it. A receive costs the engine a queue slot, nothing more.
  for (uint32_t qpn : live_qps_) taken += take_receives(ep, qpn, *qps_[qpn - 1]);
  // Sends round-robin under a budget, without a division per pass (a
  // 64-bit one costs more than an idle ring's check).
  uint32_t budget = kPassBudget;
  if (++next_qp_ >= n) next_qp_ = 0;
  size_t at = next_qp_;
  for (size_t i = 0; i < n && budget > 0; ++i) {
    const uint32_t qpn = live_qps_[at];
    if (++at == n) at = 0;
    const uint32_t take = std::min(budget, kQpBudget);
    taken += take_sends(ep, qpn, *qps_[qpn - 1], take);
    budget -= take;
  }
  return taken;
}

uint32_t AppStage::take_receives(engine::Endpoint& ep, uint32_t qpn, AppQp& q) {
  WorkRequest wr[kQpBudget];
  uint32_t taken = 0, n;
  // Bounded: what the ring held when it was read, at most its capacity,
  // and what the engine's receive queue has room for under max_recv_wr (a
  // QP in ERROR takes them all, to flush).
  uint32_t room = q.recv_ring.capacity();
  if (const engine::Qp* eq = ep.qp(qpn); !flushing(eq)) {
    const uint32_t held = eq->recv_queue_depth();
    room = held < q.max_recv_wr ? q.max_recv_wr - held : 0;
  }
  do {
    n = q.recv_ring.dequeue_burst(wr, std::min(room, kQpBudget));
    for (uint32_t i = 0; i < n; ++i) post_recv(ep, qpn, q, wr[i]);
    taken += n;
    room -= n;
  } while (n == kQpBudget && taken < q.recv_ring.capacity());
  fail_if_corrupt(ep, qpn, q);
  return taken;
}

uint32_t AppStage::take_sends(engine::Endpoint& ep, uint32_t qpn, AppQp& q, uint32_t budget) {
  while (q.stash_n > 0) {
    if (!post_send(ep, qpn, q, q.stash[q.stash_at])) return 0;
    ++q.stash_at;
    --q.stash_n;
  }
  WorkRequest wr[kQpBudget];
  const uint32_t n = q.send_ring.dequeue_burst(wr, std::min(budget, kQpBudget));
  fail_if_corrupt(ep, qpn, q);
  for (uint32_t i = 0; i < n; ++i) {
    if (post_send(ep, qpn, q, wr[i])) continue;
    q.stash_at = 0;
    q.stash_n = n - i;
    std::memcpy(q.stash, wr + i, q.stash_n * sizeof(WorkRequest));
    return n;
  }
  return n;
}

// A producer index that cannot be right: the ring moves nothing more, and
// the QP fails as a QP whose retries ran out would.
void AppStage::fail_if_corrupt(engine::Endpoint& ep, uint32_t qpn, AppQp& q) {
  if (q.ring_reported || !(q.send_ring.corrupt() || q.recv_ring.corrupt())) return;
  q.ring_reported = true;
  ++bad_descriptors_;
  to_error(ep, qpn);
  AppEvent e{q.owner, {}};
  e.msg.kind = uint32_t(shm::EventKind::kQpFatal);
  e.msg.qpn = qpn;
  e.msg.status = uint32_t(WcStatus::kBadRespErr);
  raise(e);
}

bool AppStage::flushing(const engine::Qp* eq) {
  return eq == nullptr || eq->state() == engine::QpState::kError;
}

void AppStage::to_error(engine::Endpoint& ep, uint32_t qpn) {
  engine::QpAttr a;
  a.state = engine::QpState::kError;
  (void)ep.modify_qp(qpn, a, engine::kAttrState, 0);
}

void AppStage::post_recv(engine::Endpoint& ep, uint32_t qpn, AppQp& q, const WorkRequest& w) {
  const engine::Qp* eq = ep.qp(qpn);
  const WcStatus st = shm::check_recv_request(w);
  if (st != WcStatus::kSuccess) ++bad_descriptors_;
  if (flushing(eq))  // as in verbs, unchecked
    error_cqe(q, qpn, w, WcStatus::kWrFlushErr, 0, true);
  else if (st != WcStatus::kSuccess)
    fail_request(ep, *eq, q, qpn, w, st, 0, true);
  else if (!ep.post_recv(qpn, engine::RecvRequest{w.wr_id}).ok())
    fail_request(ep, *eq, q, qpn, w, WcStatus::kLocQpOpErr, 0, true);
}

bool AppStage::post_send(engine::Endpoint& ep, uint32_t qpn, AppQp& q, const WorkRequest& w) {
  const engine::Qp* eq = ep.qp(qpn);
  const bool flush = flushing(eq);
  // Checked when the engine can take it, as a NIC checks a request when it
  // starts it: one behind a full send queue waits, unchecked.
  if (!flush && eq->send_queue_depth() >= q.max_send_wr) return false;
  WcStatus st = shm::check_work_request(w, q.domain, regions_, shm::kMaxMsgBytes);
  if (st != WcStatus::kSuccess) ++bad_descriptors_;
  if (flush) {
    error_cqe(q, qpn, w, WcStatus::kWrFlushErr, 0, false);
    return true;
  }
  if (st == WcStatus::kSuccess && eq->state() != engine::QpState::kRts) st = WcStatus::kLocQpOpErr;
  if (st != WcStatus::kSuccess) {
    fail_request(ep, *eq, q, qpn, w, st, 0, false);
    return true;
  }
  engine::WriteRequest r;
  r.wr_id = w.wr_id;
  r.local_addr = w.local_addr;
  r.length = w.length;
  r.lkey = w.lkey;
  r.remote_addr = w.remote_addr;
  r.rkey = w.rkey;
  r.with_imm = w.opcode == uint8_t(WrOpcode::kWriteImm);
  r.imm = ntohl(w.imm);
  r.signaled = q.sig_all || (w.flags & shm::kWrSignaled);
  if (!ep.post_write(qpn, r).ok())
    fail_request(ep, *eq, q, qpn, w, WcStatus::kGeneralErr, 1, false);
  return true;
}

void AppStage::fail_request(engine::Endpoint& ep, const engine::Qp& eq, AppQp& q, uint32_t qpn,
                            const WorkRequest& w, WcStatus st, uint32_t vendor_err, bool recv) {
  if (eq.state() != engine::QpState::kReset) to_error(ep, qpn);
  error_cqe(q, qpn, w, st, vendor_err, recv);
}

void AppStage::error_cqe(AppQp& q, uint32_t qpn, const WorkRequest& w, WcStatus st,
                         uint32_t vendor_err, bool recv) {
  Cqe e{};
  e.wr_id = w.wr_id;
  e.qpn = qpn;
  e.status = uint8_t(st);
  e.vendor_err = vendor_err;
  e.opcode = uint8_t(recv                                       ? CqeOpcode::kRecvWriteImm
                     : w.opcode == uint8_t(WrOpcode::kWriteImm) ? CqeOpcode::kWriteImm
                                                                : CqeOpcode::kWrite);
  held_.push_back(HeldCqe{recv ? q.recv_cq : q.send_cq, e});
}

bool AppStage::on_completion(const engine::Completion& c) {
  AppQp* q = qp(c.qpn);
  if (q == nullptr) return false;
  Cqe e{};
  e.wr_id = c.wr_id;
  e.qpn = c.qpn;
  e.byte_len = c.byte_len;
  e.status = uint8_t(wc_status(c.status));
  const bool recv = c.opcode == engine::WcOpcode::kRecvWriteImm;
  e.opcode = uint8_t(recv                                      ? CqeOpcode::kRecvWriteImm
                     : c.opcode == engine::WcOpcode::kWriteImm ? CqeOpcode::kWriteImm
                                                               : CqeOpcode::kWrite);
  e.imm = recv ? htonl(c.imm) : 0;
  complete(recv ? q->recv_cq : q->send_cq, e);
  return true;
}

void AppStage::complete(AppCq* cq, const Cqe& e) {
  if (!cq->touched) {
    cq->touched = true;
    touched_.push_back(cq);  // reserved for every CQ (add_cq()): no allocation
  }
  if (cq->backlog.empty() && cq->ring.enqueue_burst(&e, 1) == 1) return;
  if (cq->backlog.push(e)) return;
  cq->ctrl->overflow.fetch_add(1, std::memory_order_relaxed);
  if (!cq->overflow_reported) {
    cq->overflow_reported = true;
    AppEvent ev{cq->owner, {}};
    ev.msg.kind = uint32_t(shm::EventKind::kCqErr);
    ev.msg.cq = cq->id;
    raise(ev);
  }
}

void AppStage::notify() {
  for (const HeldCqe& h : held_) complete(h.cq, h.cqe);
  held_.clear();
  for (AppCq* cq : touched_) {
    cq->touched = false;
    // What waited for room goes first, in order.
    while (!cq->backlog.empty() && cq->ring.enqueue_burst(&cq->backlog.front(), 1) == 1)
      cq->backlog.pop();
    if (!cq->backlog.empty()) {
      cq->touched = true;  // try again next pass
      continue;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (cq->wake_fd >= 0 && cq->ctrl->armed.exchange(0, std::memory_order_seq_cst) != 0) {
      cq->ctrl->fired.store(1, std::memory_order_release);
      // Non-blocking: a full pipe already holds a wake-up.
      const char wake = 1;
      (void)!::write(cq->wake_fd, &wake, 1);
    }
  }
  std::erase_if(touched_, [](const AppCq* cq) { return !cq->touched; });
}

bool AppStage::on_event(const engine::Event& e) {
  if (e.type != engine::EventType::kQpError) return false;
  AppQp* q = qp(e.qpn);
  if (q == nullptr) return false;
  // Only a move to ERROR that was asked for fails a QP with kFlushed: the
  // application's own (verbs raises no event for it), fail_if_corrupt's
  // (which raised its own) and the shutdown's flush (DEVICE_FATAL follows).
  if (e.status == engine::WcStatus::kFlushed) return true;
  AppEvent ev{q->owner, {}};
  ev.msg.kind = uint32_t(shm::EventKind::kQpFatal);
  ev.msg.qpn = e.qpn;
  ev.msg.status = uint32_t(wc_status(e.status));
  raise(ev);
  return true;
}

void AppStage::take_posted(engine::Endpoint& ep, uint32_t qpn) {
  AppQp* q = qp(qpn);
  if (q == nullptr) return;
  take_receives(ep, qpn, *q);
  // Bounded: the ring holds at most its capacity.
  for (uint32_t i = 0; i <= q->send_ring.capacity() / kQpBudget && !q->ring_reported; ++i)
    take_sends(ep, qpn, *q, kQpBudget);
}

void AppStage::drop_posted(uint32_t qpn) {
  AppQp* q = qp(qpn);
  if (q == nullptr) return;
  q->stash_n = 0;
  drop_held(qpn);
  // The rings hold what was posted before the modify (the application
  // writes them before it asks): none of it may reach the reset QP.
  shm::WorkRequest drop[kQpBudget];
  while (q->send_ring.dequeue_burst(drop, kQpBudget) != 0) {
  }
  while (q->recv_ring.dequeue_burst(drop, kQpBudget) != 0) {
  }
}

uint64_t AppStage::outstanding(const engine::Endpoint& ep) const {
  uint64_t n = 0;
  for (uint32_t qpn : live_qps_)
    if (const engine::Qp* q = ep.qp(qpn)) n += q->send_queue_depth();
  return n;
}

uint32_t AppStage::flush(engine::Endpoint& ep, uint64_t now) {
  uint32_t n = 0;
  for (uint32_t qpn : live_qps_) {
    const engine::Qp* q = ep.qp(qpn);
    if (q == nullptr || q->state() == engine::QpState::kError) continue;
    // Nothing the application posts from now on reaches the wire: the
    // ring's descriptors complete as flushed when drained. The peer QP
    // hears at once (QP_GONE), as when an application exits.
    (void)ep.abandon_qp(qpn, now);
    ++n;
  }
  return n;
}

void AppStage::on_plane(uint32_t plane, bool up) {
  AppEvent ev{0, {}};
  ev.msg.kind = uint32_t(up ? shm::EventKind::kPortActive : shm::EventKind::kPortErr);
  ev.msg.plane = plane;
  raise(ev);
}

}  // namespace softmrc::softmrcd
