// Queue pair lifecycle: allocation, modify (state transitions and their
// attributes), the move to ERROR with its flush completions, and the timer
// dispatch shared by both halves. See qp.h.
#include "engine/qp.h"

#include <algorithm>
#include <bit>

#include "engine/psn.h"

namespace softmrc::engine {

void Qp::init(uint32_t qpn, uint32_t domain, const QpLimits& limits, const QpTuning& tuning) {
  qpn_ = qpn;
  domain_ = domain;
  limits_ = limits;
  tuning_ = tuning;
  const uint32_t window = uint32_t{limits.max_mpr} * kMprUnitPsns;
  // The tables are rings over the largest window, indexed by PSN modulo
  // their size; a power of two divides 2^24, so the mapping survives wrap.
  slots_.assign(std::bit_ceil(window), TxSlot{});
  slot_mask_ = static_cast<uint32_t>(slots_.size()) - 1;
  retx_.init(static_cast<uint32_t>(slots_.size()));
  // At least two SACK bitmaps wide, so extracting 128 bits never aliases.
  const uint32_t rx_bits = std::max(std::bit_ceil(window), 2 * wire::kSackBits);
  rx_bits_.assign(rx_bits / 64, 0);
  rx_bits_mask_ = rx_bits - 1;
  rx_last_.assign(rx_bits, RxLast{});
  sq_.init(limits.max_send_wr);
  rq_.init(limits.max_recv_wr);
  reset();
}

void Qp::reset() {
  state_ = QpState::kReset;
  attr_ = QpAttr{};
  sq_.clear();
  rq_.clear();
  sq_next_ = sq_.tail();
  seg_pkt_ = 0;
  next_msn_ = 0;
  std::fill(slots_.begin(), slots_.end(), TxSlot{});
  std::fill(rx_bits_.begin(), rx_bits_.end(), 0);
  std::fill(rx_last_.begin(), rx_last_.end(), RxLast{});
  retx_.clear();
  list_head_ = list_tail_ = kNil;
  snd_una_ = snd_nxt_ = 0;
  tx_seq_ = largest_acked_tx_seq_ = 0;
  inflight_bytes_ = 0;
  wimm_outstanding_ = 0;
  rto_deadline_ = kNever;
  loss_deadline_ = kNever;
  tlp_deadline_ = kNever;
  tlp_psn_ = kNil;
  probe_copy_psn_ = kNil;
  probe_copy_ev_ = kNoEv;
  tail_probes_ = 0;
  retries_ = 0;
  srtt_ns_ = 0;
  rtt_max_ns_ = 0;
  reorder_mult_ = kInitialReorderMult;
  losses_since_dup_ = 0;
  dsack_round_open_ = false;
  dsack_round_end_ = 0;
  quiet_round_end_ = 0;
  quiet_rounds_ = 0;
  epsn_ = rx_high_ = 0;
  rx_window_psns_ = 0;
  wimm_pending_ = 0;
  unacked_ = 0;
  ack_deadline_ = kNever;
  ce_since_ack_ = 0;
  have_remote_status_ = false;
  remote_status_seq_ = 0;
  port_status_left_ = 0;
}

Status Qp::modify(const QpAttr& attr, uint32_t mask, TimeNs now, Sinks& s) {
  if (Status st = check_modify(state_, attr, mask, limits_); !st.ok()) return st;
  const uint32_t fields = mask & ~kAttrState;
  switch (attr.state) {
    case QpState::kReset:
      reset();
      return {};
    case QpState::kError:
      // A QP in RESET holds nothing to flush, but it moves all the same.
      if (state_ == QpState::kReset) state_ = QpState::kError;
      fail(WcStatus::kFlushed, std::nullopt, "moved to ERROR by the application", s);
      return {};
    case QpState::kInit: {
      // From RESET the EV profile is required; INIT -> INIT replaces only
      // the profiles it names, and keeps the receives posted. Nothing has
      // changed when the EV set refuses its profile.
      const bool again = state_ == QpState::kInit;
      if (fields & kAttrEvProfile) {
        if (const char* why = evs_.init(attr.evs, attr.ev_config)) return Status::error(why);
        attr_.ev_config = attr.ev_config;
        // A new EV set has every plane up. Before RTR the QP has heard
        // nothing of its peer's planes, only of the endpoint's.
        local_planes_ = s.local_planes;
        remote_planes_ = UINT32_MAX;  // until the peer says otherwise
        port_status_seq_ = s.port_status_seq;
        for (uint8_t p = 0; p < limits_.num_planes; ++p)
          if (!(local_planes_ >> p & 1)) evs_.set_plane_up(p, false);
      }
      if (fields & kAttrCcProfile)
        attr_.cc = attr.cc;
      else if (!again)
        attr_.cc = CcProfile{};
      state_ = QpState::kInit;
      return {};
    }
    case QpState::kRtr:
      attr_.peer = attr.peer;
      attr_.dest_qpn = attr.dest_qpn;
      attr_.path_mtu = attr.path_mtu;
      attr_.rq_psn = attr.rq_psn;
      if (fields & kAttrMprDest) attr_.mpr_dest = attr.mpr_dest;
      attr_.mpr_dest = std::min(attr_.mpr_dest, limits_.max_mpr);  // the default may exceed it
      if (fields & kAttrMaxWimmDest) attr_.max_wimm_dest = attr.max_wimm_dest;
      attr_.max_wimm_dest = std::min(attr_.max_wimm_dest, limits_.max_wimm);  // so may this one
      if (fields & kAttrCaps) attr_.caps = attr.caps;
      enter_rtr(now);
      return {};
    case QpState::kRts:
      if (state_ == QpState::kRts) {
        if ((fields & kAttrMprDest) && !(attr_.caps & kCapDynamicMpr))
          return Status::error("mpr_dest: changes in RTS need dynamic MPR");
        if (fields & kAttrMprDest) {
          attr_.mpr_dest = attr.mpr_dest;
          rx_window_psns_ = uint32_t{attr.mpr_dest} * kMprUnitPsns;
        }
      } else {
        attr_.sq_psn = attr.sq_psn;
        if (fields & kAttrMpr) attr_.mpr = attr.mpr;
        attr_.mpr = std::min(attr_.mpr, limits_.max_mpr);  // the default may exceed it
        if (fields & kAttrMaxWimm) attr_.max_wimm = attr.max_wimm;
        attr_.max_wimm = std::min(attr_.max_wimm, limits_.max_wimm);  // so may this one
        if (fields & kAttrCaps) attr_.caps = attr.caps;
      }
      if (fields & kAttrTimeout) attr_.timeout = attr.timeout;
      if (fields & kAttrRetryCnt) {
        attr_.retry_linear = attr.retry_linear;
        attr_.retry_exp = attr.retry_exp;
      }
      if (state_ == QpState::kRtr) enter_rts();
      return {};
  }
  return Status::error("modify: unknown state");
}

void Qp::enter_rtr(TimeNs now) {
  epsn_ = rx_high_ = attr_.rq_psn;
  rx_window_psns_ = uint32_t{attr_.mpr_dest} * kMprUnitPsns;
  cc_.init(attr_.cc, attr_.path_mtu, now);
  state_ = QpState::kRtr;
}

void Qp::enter_rts() {
  snd_una_ = snd_nxt_ = attr_.sq_psn;
  quiet_round_end_ = snd_una_;
  peer_window_psns_ = uint32_t{attr_.mpr} * kMprUnitPsns;
  state_ = QpState::kRts;
}

void Qp::fail(WcStatus status, std::optional<uint32_t> failed_wqe, const char* reason, Sinks& s) {
  if (state_ == QpState::kError || state_ == QpState::kReset) return;
  state_ = QpState::kError;
  ++counters_.errors;
  // Every unfinished request completes, in post order, signaled or not.
  for (uint32_t pos = sq_.head(); pos != sq_.tail(); ++pos) {
    const SendWqe& w = sq_.at(pos);
    s.complete(Completion{w.wr_id, qpn_, w.with_imm ? WcOpcode::kWriteImm : WcOpcode::kWrite,
                          pos == failed_wqe ? status : WcStatus::kFlushed, w.length, 0});
  }
  sq_.clear();
  sq_next_ = sq_.tail();
  seg_pkt_ = 0;
  for (; !rq_.empty(); rq_.pop())
    s.complete(Completion{rq_.front(), qpn_, WcOpcode::kRecvWriteImm, WcStatus::kFlushed, 0, 0});
  retx_.clear();
  list_head_ = list_tail_ = kNil;
  inflight_bytes_ = 0;
  rto_deadline_ = kNever;
  loss_deadline_ = kNever;
  tlp_deadline_ = kNever;
  ack_deadline_ = kNever;
  Event e;
  e.type = EventType::kQpError;
  e.qpn = qpn_;
  e.status = status;
  e.reason = reason;
  s.event(e);
}

void Qp::fill_tx(TxPacket* out, uint32_t ev, wire::Opcode op) const {
  const EvEntry& e = evs_.entry(ev);
  out->peer = attr_.peer;
  out->src_qpn = qpn_;
  out->plane = e.plane;
  out->ev = ev;
  out->wire_ev = &e.value;
  out->is_data = wire::is_data(op);
  clear_transport(out);
  out->t.opcode = op;
  out->t.dest_qpn = attr_.dest_qpn;
  out->t.path_tag = ev;
  out->payload = nullptr;
  out->payload_len = 0;
}

void Qp::drain_ev_events(Sinks& s) {
  const auto events = evs_.events();
  if (events.empty()) return;
  for (const EvEvent& ev : events) {
    ++counters_.ev_state_changes;
    Event e;
    e.type = EventType::kEvStateChange;
    e.qpn = qpn_;
    e.ev = ev;
    s.event(e);
  }
  evs_.clear_events();
}

TimeNs Qp::next_timer() const {
  if (state_ != QpState::kRtr && state_ != QpState::kRts) return kNever;
  TimeNs t = std::min(ack_deadline_, rto_deadline_);
  if (state_ == QpState::kRts) t = std::min({t, loss_deadline_, tlp_deadline_, evs_.next_wakeup()});
  return t;
}

TimeNs Qp::next_wakeup() const {
  if (port_status_left_ > 0 && evs_.usable_count() > 0) return 0;
  return state_ == QpState::kRts && ready_to_send() ? 0 : next_timer();
}

void Qp::on_timers(TimeNs now, Sinks& s) {
  if (state_ != QpState::kRtr && state_ != QpState::kRts) return;
  if (ack_deadline_ <= now) send_pending_ack(now, s);
  if (state_ == QpState::kRts && loss_deadline_ <= now) detect_losses(now);
  if (state_ == QpState::kRts && tlp_deadline_ <= now) on_tail_probe(now);
  if (state_ == QpState::kRts && rto_deadline_ <= now) on_rto(now, s);
  drain_ev_events(s);
}

}  // namespace softmrc::engine
