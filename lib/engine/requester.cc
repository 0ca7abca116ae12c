// The requester half of a QP: segmentation of Write/WIMM requests into
// MTU-sized packets, the in-flight table, SACK and NACK processing,
// selective retransmission, the retransmit timer with its linear then
// exponential retries, EV probes and port status. See docs/engine.md,
// "Requester".
//
// Loss detection is by transmission order: every transmission gets a
// sequence number and joins the in-flight list (oldest first). A packet is
// lost once `reorder_threshold` later transmissions have been acknowledged
// (it was overtaken on the SACK) and it is older than the reorder window,
// or when the retransmit timer fires. When feedback goes quiet for a probe
// timeout (about two RTTs) with packets in flight, the newest one is sent
// again on another EV, a tail loss probe (RACK-TLP, RFC 8985): a lost tail
// packet, or a lost last ACK on a dead reverse path, then costs a few RTTs
// instead of an ACK timeout, and no EV is blamed for it.
#include <algorithm>
#include <bit>

#include "engine/psn.h"
#include "engine/qp.h"

namespace softmrc::engine {

namespace {

constexpr uint32_t kPortStatusCopies = 2;  // sent on different planes
constexpr uint32_t kMaxBackoffShift = 25;  // 1.024 us * 2^24 * 2^25 stays far below 2^64
constexpr TimeNs kRttMaxDecay = 64;        // per RTT sample, the max loses 1/64
constexpr uint32_t kReorderRelaxLosses = 16;
constexpr uint32_t kReorderRelaxRounds = 16;  // round trips without a duplicate
constexpr uint32_t kMaxTailProbes = 2;        // between two progresses
constexpr const char* kPeerGone =
    "the peer's QP is gone (its application exited, or its daemon stopped)";

}  // namespace

Status Qp::post_write(const WriteRequest& wr, const MemoryTable& mem) {
  if (state_ != QpState::kRts) return Status::error("post_write: QP not in RTS");
  if (wr.length > kMaxMessageBytes) return Status::error("post_write: message over 2 GiB");
  if (wr.remote_addr + wr.length < wr.remote_addr)
    return Status::error("post_write: remote range wraps");
  if (wr.with_imm && attr_.max_wimm == 0) return Status::error("post_write: max_wimm is 0");
  const uint8_t* src = nullptr;
  if (wr.length > 0) {
    src = mem.translate(wr.lkey, wr.local_addr, wr.length, 0, domain_);
    if (src == nullptr) return Status::error("post_write: local buffer outside the lkey's region");
  }
  if (sq_.full()) return Status::error("post_write: send queue full");
  const uint32_t mtu = attr_.path_mtu;
  SendWqe* w = sq_.emplace();
  *w = SendWqe{};
  w->wr_id = wr.wr_id;
  w->src = src;
  w->length = wr.length;
  w->remote_addr = wr.remote_addr;
  w->rkey = wr.rkey;
  w->imm = wr.imm;
  w->with_imm = wr.with_imm;
  w->signaled = wr.signaled;
  w->msn = next_msn_++;
  w->npkts = wr.length == 0 ? 1 : (wr.length + mtu - 1) / mtu;
  return {};
}

uint32_t Qp::send_window_psns() const {
  const uint32_t own = uint32_t{attr_.mpr} * kMprUnitPsns;
  return (attr_.caps & kCapDynamicMpr) ? std::min(own, peer_window_psns_) : own;
}

bool Qp::in_send_window(uint32_t psn) const {
  return static_cast<uint32_t>(psn_diff(psn, snd_una_)) < send_window_psns();
}

// Whether a retransmit queue entry still stands for a resend: entries of
// packets acknowledged before their resend stay behind until popped.
bool Qp::resend_pending(uint32_t psn) const {
  return psn_diff(psn, snd_una_) >= 0 && psn_before(psn, snd_nxt_) &&
         slots_[psn & slot_mask_].state == TxState::kLost;
}

// At least one packet may always be in flight, so a window smaller than
// one MTU cannot stall the QP.
bool Qp::cwnd_allows(uint32_t len) const {
  return inflight_bytes_ == 0 || inflight_bytes_ + len <= cc_.cwnd_bytes();
}

// Whether poll_packet() would send data now; it mirrors the checks there,
// so that next_wakeup() says "now" exactly when there is work.
bool Qp::ready_to_send() const {
  if (evs_.usable_count() == 0) return false;
  bool waiting = false;  // a resend the responder's window refuses for now
  for (uint32_t pos = retx_.head(); pos != retx_.tail(); ++pos) {
    const uint32_t psn = retx_.at(pos);
    if (!resend_pending(psn)) continue;
    if (in_send_window(psn)) return cwnd_allows(slots_[psn & slot_mask_].len);
    waiting = true;
  }
  if (waiting) return false;  // new data never overtakes a queued resend
  if (sq_next_ == sq_.tail()) return false;
  if (static_cast<uint32_t>(psn_diff(snd_nxt_, snd_una_)) >= send_window_psns()) return false;
  const SendWqe& w = sq_.at(sq_next_);
  if (seg_pkt_ == 0 && w.with_imm && wimm_outstanding_ >= attr_.max_wimm) return false;
  return cwnd_allows(std::min(attr_.path_mtu, w.length - seg_pkt_ * attr_.path_mtu));
}

bool Qp::poll_packet(TimeNs now, TxPacket* out) {
  if (state_ == QpState::kRtr) return poll_port_status(now, out);
  if (state_ != QpState::kRts) return false;
  if (poll_probe(now, out) || poll_port_status(now, out) || poll_retransmit(now, out)) return true;
  // New data never overtakes a resend that is waiting for room.
  return retx_.empty() && poll_new_data(now, out);
}

bool Qp::poll_probe(TimeNs now, TxPacket* out) {
  const uint32_t ev = evs_.probe_due(now);
  if (ev == kNoEv) return false;
  fill_tx(out, ev, wire::Opcode::kProbeRequest);
  out->t.probe.req_id = ++probe_req_id_;
  out->t.probe.t_send_ns = now;
  evs_.on_probe_sent(ev, now);
  ++counters_.probes_tx;
  return true;
}

bool Qp::poll_port_status(TimeNs now, TxPacket* out) {
  if (port_status_left_ == 0) return false;
  const uint32_t ev = evs_.pick(now);
  if (ev == kNoEv) return false;
  fill_tx(out, ev, wire::Opcode::kPortStatus);
  out->t.port_status.port_mask = local_planes_;
  out->t.port_status.seq = port_status_seq_;
  out->t.port_status.num_planes = limits_.num_planes;
  --port_status_left_;
  ++counters_.port_status_tx;
  return true;
}

// Resends queue in the order losses are found (NACKs, SACK holes, the
// timer), not in PSN order. The responder's window (dynamic MPR) may refuse
// the oldest entry while one behind it is the PSN snd_una waits for, so
// the first entry the window allows goes out.
bool Qp::poll_retransmit(TimeNs now, TxPacket* out) {
  while (!retx_.empty() && !resend_pending(retx_.front())) retx_.pop();
  uint32_t pos = retx_.head();
  while (pos != retx_.tail() && !(resend_pending(retx_.at(pos)) && in_send_window(retx_.at(pos))))
    ++pos;
  if (pos == retx_.tail()) return false;
  const uint32_t psn = retx_.at(pos);
  TxSlot& sl = slot(psn);
  if (!cwnd_allows(sl.len)) return false;
  // Never the EV that lost it, unless it is the only one left.
  const uint32_t ev = evs_.pick(now, sl.ev);
  if (ev == kNoEv) {
    ++counters_.no_usable_ev;
    return false;
  }
  std::swap(retx_.at(pos), retx_.front());  // a refused entry keeps its place in the queue
  retx_.pop();
  build_data(psn, ev, true, now, out);
  return true;
}

bool Qp::poll_new_data(TimeNs now, TxPacket* out) {
  if (sq_next_ == sq_.tail()) return false;
  if (static_cast<uint32_t>(psn_diff(snd_nxt_, snd_una_)) >= send_window_psns()) return false;
  SendWqe& w = sq_.at(sq_next_);
  if (seg_pkt_ == 0 && w.with_imm && wimm_outstanding_ >= attr_.max_wimm) return false;
  const uint32_t offset = seg_pkt_ * attr_.path_mtu;
  const uint32_t len = std::min(attr_.path_mtu, w.length - offset);
  if (!cwnd_allows(len)) return false;
  const uint32_t ev = evs_.pick(now);
  if (ev == kNoEv) {
    ++counters_.no_usable_ev;
    return false;
  }
  if (seg_pkt_ == 0) {
    w.first_psn = snd_nxt_;
    if (w.with_imm) ++wimm_outstanding_;
  }
  const uint32_t psn = snd_nxt_;
  snd_nxt_ = psn_add(psn, 1);
  TxSlot& sl = slot(psn);
  sl = TxSlot{};
  sl.wqe = sq_next_;
  sl.offset = offset;
  sl.len = len;
  if (++seg_pkt_ == w.npkts) {
    seg_pkt_ = 0;
    ++sq_next_;
  }
  build_data(psn, ev, false, now, out);
  return true;
}

void Qp::build_data(uint32_t psn, uint32_t ev, bool retransmit, TimeNs now, TxPacket* out) {
  TxSlot& sl = slot(psn);
  const SendWqe& w = sq_.at(sl.wqe);
  const bool first = psn == w.first_psn;
  const bool last = psn == psn_add(w.first_psn, w.npkts - 1);
  using wire::Opcode;
  Opcode op;
  if (first && last)
    op = w.with_imm ? Opcode::kWriteOnlyImm : Opcode::kWriteOnly;
  else if (first)
    op = Opcode::kWriteFirst;
  else if (last)
    op = w.with_imm ? Opcode::kWriteLastImm : Opcode::kWriteLast;
  else
    op = Opcode::kWriteMiddle;

  fill_tx(out, ev, op);
  wire::Transport& t = out->t;
  t.psn = psn;
  t.ack_req = last;
  t.mth_flags = retransmit ? wire::kMthRetransmit : 0;
  t.data.va = w.remote_addr + sl.offset;
  t.data.rkey = w.rkey;
  t.data.msg_len = w.length;
  t.data.msn = w.msn;
  t.data.offset = sl.offset;
  t.data.imm = wire::has_imm(op) ? w.imm : 0;
  out->payload = w.src == nullptr ? nullptr : w.src + sl.offset;
  out->payload_len = sl.len;

  sl.ev = ev;
  sl.sent_ns = now;
  sl.tx_seq = ++tx_seq_;
  sl.state = TxState::kInFlight;
  sl.retransmitted |= retransmit;
  list_append(psn);
  inflight_bytes_ += sl.len;
  evs_.on_sent(ev, sl.len, retransmit);
  ++counters_.tx_data_packets;
  counters_.tx_data_bytes += sl.len;
  if (retransmit) ++counters_.retransmits[static_cast<size_t>(sl.cause)];
  if (retransmit && sl.cause == RetxCause::kTailProbe) {
    probe_copy_psn_ = psn;
    probe_copy_ev_ = ev;
  }
  if (rto_deadline_ == kNever) rto_deadline_ = now + rto_interval();
  if (!retransmit && srtt_ns_ != 0) tlp_deadline_ = now + probe_timeout();
}

void Qp::list_append(uint32_t psn) {
  TxSlot& sl = slot(psn);
  sl.prev = list_tail_;
  sl.next = kNil;
  if (list_tail_ == kNil)
    list_head_ = psn;
  else
    slot(list_tail_).next = psn;
  list_tail_ = psn;
}

void Qp::list_remove(uint32_t psn) {
  TxSlot& sl = slot(psn);
  if (sl.prev == kNil)
    list_head_ = sl.next;
  else
    slot(sl.prev).next = sl.next;
  if (sl.next == kNil)
    list_tail_ = sl.prev;
  else
    slot(sl.next).prev = sl.prev;
  sl.prev = sl.next = kNil;
}

// The ring holds one entry per lost transmission. If entries no longer
// pending fill it, squeeze them out (rare, and no allocation).
void Qp::queue_retransmit(uint32_t psn) {
  if (retx_.full()) retx_.erase_if([this](uint32_t p) { return !resend_pending(p); });
  retx_.push(psn);
}

void Qp::mark_lost(uint32_t psn, RetxCause cause, bool ev_penalty, TimeNs now) {
  TxSlot& sl = slot(psn);
  if (sl.state != TxState::kInFlight) return;
  list_remove(psn);
  inflight_bytes_ -= sl.len;
  sl.state = TxState::kLost;
  sl.cause = cause;
  if (ev_penalty) evs_.on_loss(sl.ev, now);
  queue_retransmit(psn);
}

bool Qp::ack_psn(uint32_t psn, uint32_t* acked_bytes) {
  TxSlot& sl = slot(psn);
  if (sl.state == TxState::kInFlight) {
    list_remove(psn);
    inflight_bytes_ -= sl.len;
  } else if (sl.state != TxState::kLost) {
    return false;
  }
  sl.state = TxState::kAcked;
  *acked_bytes += sl.len;
  evs_.on_acked(sl.ev);
  largest_acked_tx_seq_ = std::max(largest_acked_tx_seq_, sl.tx_seq);
  return true;
}

// Two smoothed RTTs (at least the slowest recent one) and the responder's
// ACK delay: long enough that quiet feedback means something was lost.
TimeNs Qp::probe_timeout() const {
  return std::max(2 * srtt_ns_, rtt_max_ns_) + tuning_.ack_delay_ns;
}

// The newest packet in flight goes again, on another EV and without blame:
// whether it or its ACK was lost, the copy's ACK reports the receiver's
// state. A second probe (another EV, another reverse path for its ACK)
// follows after twice the timeout; then only the ACK timeout is left.
void Qp::on_tail_probe(TimeNs now) {
  tlp_deadline_ = kNever;
  if (list_tail_ == kNil || tail_probes_ >= kMaxTailProbes) return;
  tlp_psn_ = list_tail_;
  tlp_lost_ev_ = slot(list_tail_).ev;
  ++tail_probes_;
  mark_lost(list_tail_, RetxCause::kTailProbe, false, now);
  if (tail_probes_ < kMaxTailProbes) tlp_deadline_ = now + 2 * probe_timeout();
}

// Overtaken is not enough on a multipath fabric, where paths differ in
// delay (a congested plane queues): the packet must also be older than the
// reorder window, the slowest recent RTT plus reorder_mult_ quarters of the
// smoothed RTT (RACK's rule, with the path spread in place of the last
// RTT); before any sample, a quarter of the ACK timeout. A younger
// overtaken packet arms the loss timer.
void Qp::detect_losses(TimeNs now) {
  loss_deadline_ = kNever;
  const TimeNs window = srtt_ns_ != 0 ? rtt_max_ns_ + reorder_mult_ * srtt_ns_ / 4
                                      : ack_timeout_ns(attr_.timeout) / 4;
  while (list_head_ != kNil) {
    const TxSlot& head = slot(list_head_);
    if (head.tx_seq + tuning_.reorder_threshold > largest_acked_tx_seq_) break;
    // On an EV already found broken, overtaken is enough: waiting out the
    // window for each packet sent there before its EV was found out held
    // the oldest message (and the sender's window of messages) a window
    // longer after a plane was blackholed.
    const bool broken_path = evs_.state(head.ev) == EvState::kAssumedBad;
    if (!broken_path && now < head.sent_ns + window) {
      loss_deadline_ = head.sent_ns + window;
      break;
    }
    // A loss that takes its EV out of use (or lands on one already out) is
    // a broken path, which blacklisting answers; only a loss the paths
    // cannot explain is congestion for NSCC.
    const uint32_t ev = slot(list_head_).ev;
    const bool was_usable = evs_.usable(ev);
    mark_lost(list_head_, RetxCause::kSack, true, now);
    if (evs_.usable(ev))
      cc_.on_loss(inflight_bytes_, now);
    else if (was_usable)
      requeue_overtaken_on(ev, now);
    // The window shrinks back after enough losses without a duplicate.
    if (++losses_since_dup_ >= kReorderRelaxLosses && reorder_mult_ > kMinReorderMult) {
      --reorder_mult_;
      losses_since_dup_ = 0;
    }
  }
}

// The loss just took `ev` out of use: the path is taken for broken, so
// whatever else on it was overtaken too is resent now, not one reorder
// window later each. On a blackholed plane those packets, sent while its
// EVs were still in use, held the oldest message (and so the sender's
// window of messages) for that long again.
void Qp::requeue_overtaken_on(uint32_t ev, TimeNs now) {
  for (uint32_t p = list_head_; p != kNil;) {
    const TxSlot& sl = slot(p);
    if (sl.tx_seq + tuning_.reorder_threshold > largest_acked_tx_seq_) break;
    const uint32_t next = sl.next;
    if (sl.ev == ev) mark_lost(p, RetxCause::kSack, false, now);
    p = next;
  }
}

// A QP_GONE fails this QP only if it can be from its peer QP about this
// connection, so that a late copy meant for an earlier QP of this number
// fails no new one: it names the peer QP (echo tag), comes from the peer's
// endpoint where the caller knows the sender, and its PSNs are ones that QP
// could have reached. In RTS the reference PSN (what the peer expected
// next) must be one this QP has sent, from its oldest unacknowledged through
// its next; in RTR, which has sent nothing, the SACK base (what the peer
// would have sent next) must be one this QP could still accept, from its
// expected PSN through the PSN just past its window.
void Qp::on_peer_gone(const wire::Feedback& fb, uint32_t src_peer, Sinks& s) {
  bool ours = (fb.echo_tag & wire::kQpnMask) == attr_.dest_qpn &&
              (src_peer == kUnknownPeer || src_peer == attr_.peer);
  if (ours && state_ == QpState::kRtr) {
    const int32_t ahead = psn_diff(fb.sack_base & wire::kPsnMask, epsn_);
    ours = ahead >= 0 && static_cast<uint32_t>(ahead) <= rx_window_psns_;
  } else if (ours) {
    const uint32_t ref = fb.ref_psn & wire::kPsnMask;
    ours = psn_diff(ref, snd_una_) >= 0 && psn_diff(ref, snd_nxt_) <= 0;
  }
  if (!ours) {
    ++counters_.feedback_ignored;
    return;
  }
  ++counters_.nacks_rx[static_cast<size_t>(wire::NackCode::kQpGone)];
  // The first unfinished request takes the status, whatever the peer had
  // received of it; the rest are flushed.
  std::optional<uint32_t> first;
  if (state_ == QpState::kRts && !sq_.empty()) first = sq_.head();
  fail(WcStatus::kRemoteOperationalError, first, kPeerGone, s);
}

// Feedback that acknowledges a PSN never sent, cumulatively or with a SACK
// bit, is not about this connection's packets (a stray copy, a confused
// peer): none of it is trusted. SACK bits below snd_una are not suspect: a
// late ACK overtaken by a newer one names them. The lowest and highest set
// bits bound the others (128 PSNs cannot pass snd_nxt and come back).
bool Qp::acks_unsent(const wire::Feedback& fb) const {
  if (psn_diff(fb.cum_psn & wire::kPsnMask, snd_nxt_) > 0) return true;
  const uint64_t b0 = fb.sack_bitmap[0], b1 = fb.sack_bitmap[1];
  if ((b0 | b1) == 0) return false;
  const auto lo = static_cast<uint32_t>(b0 != 0 ? std::countr_zero(b0) : 64 + std::countr_zero(b1));
  const auto hi =
      static_cast<uint32_t>(b1 != 0 ? 127 - std::countl_zero(b1) : 63 - std::countl_zero(b0));
  const uint32_t base = fb.sack_base & wire::kPsnMask;
  return psn_diff(psn_add(base, lo), snd_nxt_) >= 0 || psn_diff(psn_add(base, hi), snd_nxt_) >= 0;
}

std::optional<uint32_t> Qp::wqe_of_psn(uint32_t psn) const {
  if (psn_diff(psn, snd_una_) < 0 || !psn_before(psn, snd_nxt_)) return std::nullopt;
  return slots_[psn & slot_mask_].wqe;
}

void Qp::on_feedback(const wire::PacketView& pkt, uint32_t src_peer, TimeNs now, Sinks& s) {
  const wire::Feedback& fb = pkt.t.fb;
  if (fb.code == wire::NackCode::kQpGone) {  // the endpoint hands feedback only to RTR and RTS
    on_peer_gone(fb, src_peer, s);
    return;
  }
  if (state_ != QpState::kRts) {
    ++s.ep.rx_unexpected;
    return;
  }
  const auto code = static_cast<size_t>(fb.code);
  if (code >= kNackCodes) {
    ++counters_.feedback_ignored;
    return;
  }
  if (fb.code == wire::NackCode::kNone)
    ++counters_.acks_rx;
  else
    ++counters_.nacks_rx[code];

  const uint32_t ref = fb.ref_psn & wire::kPsnMask;
  if (fb.code == wire::NackCode::kRemoteAccess || fb.code == wire::NackCode::kInvalidRequest) {
    // A refused packet is never acknowledged, so a NACK that names no PSN
    // in flight is a stray copy (an earlier connection's): not ours to die of.
    const std::optional<uint32_t> wqe = wqe_of_psn(ref);
    if (!wqe) {
      ++counters_.feedback_ignored;
      return;
    }
    const bool access = fb.code == wire::NackCode::kRemoteAccess;
    fail(access ? WcStatus::kRemoteAccessError : WcStatus::kRemoteInvalidRequest, wqe,
         access ? "the responder refused the target (rkey, bounds or access)"
                : "the responder refused the request (malformed, or no receive for a WIMM)",
         s);
    return;
  }
  const uint32_t cum = fb.cum_psn & wire::kPsnMask;
  if (acks_unsent(fb)) {
    ++counters_.feedback_ignored;
    return;
  }

  const bool ref_in_window = psn_diff(ref, snd_una_) >= 0 && psn_before(ref, snd_nxt_);
  const TxSlot* ref_slot = ref_in_window ? &slot(ref) : nullptr;
  // Feedback on the latest transmission of the packet that triggered it,
  // not on an older copy.
  const bool on_latest_copy =
      ref_slot != nullptr && ref_slot->state == TxState::kInFlight && ref_slot->ev == fb.echo_tag;
  // An RTT sample only from a first transmission, and only if this feedback
  // acknowledges it.
  const bool rtt_candidate =
      fb.code == wire::NackCode::kNone && on_latest_copy && !ref_slot->retransmitted;
  // Feedback on the tail probe's copy itself.
  const bool answers_probe = on_latest_copy && ref == tlp_psn_;
  const TimeNs ref_sent_ns = on_latest_copy ? ref_slot->sent_ns : 0;

  uint32_t acked_bytes = 0;
  bool progress = false;
  for (uint32_t p = snd_una_; psn_before(p, cum); p = psn_add(p, 1))
    progress |= ack_psn(p, &acked_bytes);
  for (uint32_t k = 0; k < 2; ++k) {
    for (uint64_t bits = fb.sack_bitmap[k]; bits != 0; bits &= bits - 1) {
      const uint32_t p = psn_add(fb.sack_base, 64 * k + std::countr_zero(bits));
      if (psn_diff(p, snd_una_) >= 0 && psn_before(p, snd_nxt_))
        progress |= ack_psn(p, &acked_bytes);
    }
  }
  // Before the cumulative point moves: it frees the slots it passes, and the
  // packet that fills the oldest hole (the slowest path's) must be sampled.
  TimeNs rtt_ns = 0;
  if (rtt_candidate && ref_slot->state == TxState::kAcked) {
    // A service time as long as the round trip itself is wrong (a peer
    // counting in another unit): the raw RTT is the better sample.
    const TimeNs raw = now - ref_slot->sent_ns;
    const TimeNs svc = ((fb.flags & wire::kFbSvcTimeValid) &&
                        !(attr_.caps & kCapSvcTimeDestUnsupported) && fb.service_time_ns < raw)
                           ? fb.service_time_ns
                           : 0;
    rtt_ns = std::max<TimeNs>(raw - svc, 1);
    srtt_ns_ = srtt_ns_ == 0 ? rtt_ns : (7 * srtt_ns_ + rtt_ns) / 8;
    // A decaying maximum: the slowest path's samples keep it up, and it
    // forgets a path that got faster within a few dozen samples.
    rtt_max_ns_ = std::max(rtt_ns, rtt_max_ns_ - rtt_max_ns_ / kRttMaxDecay);
  }
  while (snd_una_ != snd_nxt_ && slot(snd_una_).state == TxState::kAcked) {
    slot(snd_una_).state = TxState::kFree;
    snd_una_ = psn_add(snd_una_, 1);
  }

  // A trim says congestion, not a broken path: resend at once elsewhere,
  // without blaming the EV. The echoed tag must match the latest
  // transmission, or the NACK is about an older copy.
  if ((fb.code == wire::NackCode::kTrimmed || fb.code == wire::NackCode::kOutOfWindow) &&
      ref_slot != nullptr && ref_slot->state == TxState::kInFlight && ref_slot->ev == fb.echo_tag) {
    const bool trim = fb.code == wire::NackCode::kTrimmed;
    if (trim) {
      evs_.on_trim(ref_slot->ev);
      cc_.on_trim(inflight_bytes_, now);
    }
    mark_lost(ref, trim ? RetxCause::kTrim : RetxCause::kOutOfWindow, false, now);
  }

  // A duplicate reached the responder: a copy was resent that had not been
  // lost. Unless it was a tail probe (which expects that), reordering is
  // deeper than the window assumed, so widen it (RACK's response to a DSACK),
  // once per round trip: the duplicates of one episode (a burst of resends
  // after the sender was held up) are one lesson, not one each, and used to
  // take the window to its maximum at once.
  if (dsack_round_open_ && !psn_before(snd_una_, dsack_round_end_)) dsack_round_open_ = false;
  // Widening is forgotten too, a step per 16 round trips without a
  // duplicate, down to where it started: a sender held up by its CPU makes
  // packets overtake each other by milliseconds now and then, and each such
  // episode used to leave the window wider for good (a blackholed plane's
  // losses then took five RTTs to be declared).
  if (!psn_before(snd_una_, quiet_round_end_)) {
    quiet_round_end_ = snd_nxt_;
    if (++quiet_rounds_ >= kReorderRelaxRounds) {
      quiet_rounds_ = 0;
      if (reorder_mult_ > kInitialReorderMult) --reorder_mult_;
    }
  }
  if (fb.flags & wire::kFbDuplicate) {
    ++counters_.duplicate_feedback;
    if (!answers_probe && !(ref == probe_copy_psn_ && fb.echo_tag == probe_copy_ev_)) {
      if (!dsack_round_open_) {
        reorder_mult_ = std::min(reorder_mult_ + 1, kMaxReorderMult);
        dsack_round_open_ = true;
        dsack_round_end_ = snd_nxt_;
      }
      losses_since_dup_ = 0;
      quiet_rounds_ = 0;
    }
  } else if (answers_probe && fb.code == wire::NackCode::kNone) {
    // The probe's copy was news to the responder: the transmission it
    // stood in for was lost, so its EV lost it (RACK-TLP's loss detection).
    evs_.on_loss(tlp_lost_ev_, now);
    if (evs_.usable(tlp_lost_ev_)) cc_.on_loss(inflight_bytes_, now);
  }

  const bool ecn = (fb.flags & wire::kFbEcnEcho) != 0 || fb.ce_count > 0;
  if ((fb.flags & wire::kFbEcnEcho) && fb.echo_tag < evs_.size()) evs_.on_ecn(fb.echo_tag, now);
  if (fb.window_mpr != 0) peer_window_psns_ = uint32_t{fb.window_mpr} * kMprUnitPsns;
  if (acked_bytes > 0 || rtt_ns > 0 || ecn)
    cc_.on_ack(AckSample{acked_bytes, inflight_bytes_, rtt_ns, ecn, ref_sent_ns}, now);

  detect_losses(now);
  if (progress) {
    retries_ = 0;
    rto_deadline_ = snd_una_ == snd_nxt_ ? kNever : now + rto_interval();
    tlp_psn_ = kNil;
    tail_probes_ = 0;
    tlp_deadline_ = list_head_ == kNil || srtt_ns_ == 0 ? kNever : now + probe_timeout();
  }
  complete_sends(s);
  drain_ev_events(s);
}

void Qp::complete_sends(Sinks& s) {
  while (sq_.head() != sq_next_) {
    const SendWqe& w = sq_.front();
    if (psn_before(snd_una_, psn_add(w.first_psn, w.npkts))) break;
    if (w.with_imm) --wimm_outstanding_;
    if (w.signaled) {
      s.complete(Completion{w.wr_id, qpn_, w.with_imm ? WcOpcode::kWriteImm : WcOpcode::kWrite,
                            WcStatus::kSuccess, w.length, 0});
    }
    ++counters_.send_completions;
    sq_.pop();
  }
}

// ACK timeout at the base interval for the first `retry_linear` timeouts,
// then doubling per timeout.
TimeNs Qp::rto_interval() const {
  const TimeNs base = ack_timeout_ns(attr_.timeout);
  if (retries_ < attr_.retry_linear) return base;
  return base << std::min<uint32_t>(retries_ - attr_.retry_linear + 1, kMaxBackoffShift);
}

void Qp::on_rto(TimeNs now, Sinks& s) {
  ++counters_.timeouts;
  ++retries_;
  const bool unlimited = attr_.retry_exp == kRetryExpUnlimited;
  if (!unlimited && retries_ > uint32_t{attr_.retry_linear} + attr_.retry_exp) {
    fail(WcStatus::kRetryExceeded, sq_.head(), "retry count exceeded", s);
    return;
  }
  cc_.on_timeout(now);
  while (list_head_ != kNil) mark_lost(list_head_, RetxCause::kTimeout, true, now);
  loss_deadline_ = kNever;
  tlp_deadline_ = kNever;
  tlp_psn_ = kNil;
  tail_probes_ = 0;
  rto_deadline_ = now + rto_interval();
}

void Qp::requeue_plane(uint8_t plane, TimeNs now) {
  for (uint32_t p = list_head_; p != kNil;) {
    const uint32_t next = slot(p).next;
    if (evs_.entry(slot(p).ev).plane == plane) mark_lost(p, RetxCause::kPlaneDown, false, now);
    p = next;
  }
}

// An EV's plane is usable when it is up here and at the peer. Packets in
// flight on a plane that just went down are resent at once elsewhere: they
// are gone, and waiting for the SACK or the timer would only stall.
// Feedback this QP sent on the plane since it failed is lost too: the
// responder sends its current state again on a live plane.
bool Qp::apply_plane(uint8_t plane, TimeNs now) {
  const bool up = (local_planes_ >> plane & 1) && (remote_planes_ >> plane & 1);
  if (evs_.plane_up(plane) == up) return false;
  evs_.set_plane_up(plane, up);
  if (!up && state_ == QpState::kRts) requeue_plane(plane, now);
  return !up;
}

void Qp::set_local_plane(uint8_t plane, uint32_t mask, uint32_t seq, TimeNs now, Sinks& s) {
  local_planes_ = mask;
  port_status_seq_ = seq;
  if (state_ == QpState::kReset || state_ == QpState::kError) return;
  const bool lost = apply_plane(plane, now);
  if (state_ == QpState::kRtr || state_ == QpState::kRts) {
    port_status_left_ = kPortStatusCopies;
    if (lost) resend_feedback(now, s);
  }
  drain_ev_events(s);
}

void Qp::on_port_status(const wire::PacketView& pkt, uint32_t src_peer, TimeNs now, Sinks& s) {
  const wire::PortStatus& ps = pkt.t.port_status;
  if (src_peer != kUnknownPeer && src_peer != attr_.peer) {  // not our peer's planes
    ++counters_.feedback_ignored;
    return;
  }
  if (have_remote_status_ && static_cast<int32_t>(ps.seq - remote_status_seq_) <= 0) return;
  have_remote_status_ = true;
  remote_status_seq_ = ps.seq;
  remote_planes_ = ps.port_mask;
  ++counters_.port_status_rx;
  bool lost = false;
  for (uint8_t p = 0; p < limits_.num_planes; ++p) lost |= apply_plane(p, now);
  if (lost) resend_feedback(now, s);
  drain_ev_events(s);
}

void Qp::on_probe_reply(const wire::PacketView& pkt, TimeNs now, Sinks& s) {
  const uint32_t ev = pkt.t.probe.echo_tag;
  if (state_ != QpState::kRts || ev >= evs_.size()) {
    ++s.ep.rx_unexpected;
    return;
  }
  ++counters_.probe_replies_rx;
  if (!evs_.on_probe_reply(ev, pkt.t.probe.t_send_ns, now)) ++counters_.feedback_ignored;
  drain_ev_events(s);
}

}  // namespace softmrc::engine
