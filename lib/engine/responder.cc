// The responder half of a QP: the receive window (a bitmap ring over
// [epsn, epsn + MPR)), placement of each packet into registered memory the
// moment it arrives, duplicate and out-of-window accounting, ACK/NACK
// generation and in-order completion of WIMM receives. See docs/engine.md,
// "Responder".
//
// ACK policy: coalesced (every `ack_every_packets` packets, or after
// `ack_delay_ns`) while packets arrive in order; immediate on a gap, on the
// packet that fills one, on a duplicate, a trimmed or out-of-window packet,
// and when a message's last packet arrives or becomes cumulatively received.
#include <algorithm>
#include <cstring>

#include "engine/psn.h"
#include "engine/qp.h"

namespace softmrc::engine {

Status Qp::post_recv(const RecvRequest& wr) {
  if (state_ == QpState::kReset || state_ == QpState::kError)
    return Status::error("post_recv: QP in RESET or ERROR");
  if (!rq_.push(wr.wr_id)) return Status::error("post_recv: receive queue full");
  return {};
}

bool Qp::rx_bit(uint32_t psn) const {
  const uint32_t i = psn & rx_bits_mask_;
  return rx_bits_[i >> 6] >> (i & 63) & 1;
}

void Qp::set_rx_bit(uint32_t psn, bool v) {
  const uint32_t i = psn & rx_bits_mask_;
  const uint64_t bit = uint64_t{1} << (i & 63);
  if (v)
    rx_bits_[i >> 6] |= bit;
  else
    rx_bits_[i >> 6] &= ~bit;
}

// Bits for [base, base + 128), restricted to the window: ring positions past
// its end alias PSNs below epsn or are stale.
void Qp::sack_bits(uint32_t base, uint64_t out[2]) const {
  const auto words = static_cast<uint32_t>(rx_bits_.size());
  for (uint32_t k = 0; k < 2; ++k) {
    const uint32_t i = psn_add(base, 64 * k) & rx_bits_mask_;
    const uint32_t w = i >> 6;
    const uint32_t sh = i & 63;
    const uint64_t lo = rx_bits_[w] >> sh;
    const uint64_t hi = sh == 0 ? 0 : rx_bits_[(w + 1) & (words - 1)] << (64 - sh);
    out[k] = lo | hi;
  }
  const int32_t valid = psn_diff(psn_add(epsn_, rx_window_psns_), base);
  if (valid <= 0) {
    out[0] = out[1] = 0;
  } else if (valid < 64) {
    out[0] &= (uint64_t{1} << valid) - 1;
    out[1] = 0;
  } else if (valid < 128) {
    out[1] &= (uint64_t{1} << (valid - 64)) - 1;
  }
}

bool Qp::place(const wire::PacketView& pkt, Sinks& s, wire::NackCode* why) {
  const wire::Transport& t = pkt.t;
  const wire::DataFields& d = t.data;
  const uint32_t len = pkt.payload_len;
  *why = wire::NackCode::kInvalidRequest;
  if (len > attr_.path_mtu) return false;
  if (uint64_t{d.offset} + len > d.msg_len) return false;
  if (wire::is_first(t.opcode) && d.offset != 0) return false;
  if (wire::is_last(t.opcode) && d.offset + len != d.msg_len) return false;
  if (!wire::is_last(t.opcode) && len != attr_.path_mtu) return false;
  if (len == 0) return true;  // a zero-length Write touches no memory
  uint8_t* dst = s.mem.translate(d.rkey, d.va, len, kAccessRemoteWrite, domain_);
  if (dst == nullptr) {
    *why = wire::NackCode::kRemoteAccess;
    return false;
  }
  if (s.deferred != nullptr)
    *s.deferred = {dst, pkt.payload, len};
  else
    std::memcpy(dst, pkt.payload, len);
  return true;
}

void Qp::on_data(const wire::PacketView& pkt, uint8_t plane, TimeNs now, Sinks& s) {
  const wire::Transport& t = pkt.t;
  const uint32_t psn = t.psn & wire::kPsnMask;
  const int32_t d = psn_diff(psn, epsn_);
  const bool ce = pkt.ecn == wire::kEcnCe;
  const uint8_t ce_flag = ce ? wire::kFbEcnEcho : 0;

  if (d < 0 || (static_cast<uint32_t>(d) < rx_window_psns_ && rx_bit(psn))) {
    // A copy we already have: its ACK may have been lost, so answer at once.
    ++counters_.rx_duplicates;
    send_feedback(wire::NackCode::kNone, psn, t.path_tag, plane, ce_flag | wire::kFbDuplicate, now,
                  now, s);
    return;
  }
  if (static_cast<uint32_t>(d) >= rx_window_psns_) {
    ++counters_.rx_out_of_window;
    send_feedback(wire::NackCode::kOutOfWindow, psn, t.path_tag, plane, ce_flag, now, now, s);
    return;
  }
  if (pkt.trimmed) {
    ++counters_.rx_trimmed;
    if (tuning_.trim_nack)
      send_feedback(wire::NackCode::kTrimmed, psn, t.path_tag, plane, ce_flag, now, now, s);
    return;
  }
  const bool imm = wire::has_imm(t.opcode);
  if (imm && (wimm_pending_ >= rq_.size() || wimm_pending_ >= attr_.max_wimm_dest)) {
    send_feedback(wire::NackCode::kInvalidRequest, psn, t.path_tag, plane, ce_flag, now, now, s);
    fail(WcStatus::kRemoteInvalidRequest, std::nullopt, "WIMM arrived with no receive posted", s);
    return;
  }
  wire::NackCode why;
  if (!place(pkt, s, &why)) {
    send_feedback(why, psn, t.path_tag, plane, ce_flag, now, now, s);
    fail(why == wire::NackCode::kRemoteAccess ? WcStatus::kRemoteAccessError
                                              : WcStatus::kRemoteInvalidRequest,
         std::nullopt,
         why == wire::NackCode::kRemoteAccess ? "remote write outside a registered region"
                                              : "malformed data packet",
         s);
    return;
  }

  ++counters_.rx_data_packets;
  counters_.rx_data_bytes += pkt.payload_len;
  if (ce) {
    ++counters_.rx_ce;
    ++ce_since_ack_;
  }
  set_rx_bit(psn, true);
  if (wire::is_last(t.opcode)) {
    rx_last_[psn & rx_bits_mask_] = RxLast{t.data.imm, t.data.msg_len, true, imm};
    if (imm) ++wimm_pending_;
  }
  if (psn_diff(psn_add(psn, 1), rx_high_) > 0) rx_high_ = psn_add(psn, 1);
  // Filling the oldest hole acknowledges the packets queued behind it, and
  // may complete messages the requester is waiting on: no coalescing then.
  bool filled = false;
  if (d == 0) {
    advance_epsn(s);
    filled = epsn_ != psn_add(psn, 1);
  }

  ++unacked_;
  ack_ref_psn_ = psn;
  ack_ref_tag_ = t.path_tag;
  ack_ref_plane_ = plane;
  ack_ref_ce_ = ce;
  ack_ref_arrival_ns_ = now;
  const bool immediate =
      d != 0 || filled || epsn_ != rx_high_ || wire::is_last(t.opcode) || t.ack_req;
  if (immediate || unacked_ >= tuning_.ack_every_packets)
    send_pending_ack(now, s);
  else if (ack_deadline_ == kNever)
    ack_deadline_ = now + tuning_.ack_delay_ns;
}

// Everything below epsn has been placed, so a WIMM's receive completes
// only when its data and all earlier data of the QP are in memory.
void Qp::advance_epsn(Sinks& s) {
  while (epsn_ != rx_high_ && rx_bit(epsn_)) {
    set_rx_bit(epsn_, false);
    RxLast& l = rx_last_[epsn_ & rx_bits_mask_];
    if (l.is_last && l.has_imm) {
      s.complete(Completion{rq_.front(), qpn_, WcOpcode::kRecvWriteImm, WcStatus::kSuccess,
                            l.msg_len, l.imm});
      rq_.pop();
      --wimm_pending_;
      ++counters_.recv_completions;
    }
    l = RxLast{};
    epsn_ = psn_add(epsn_, 1);
  }
}

// After a plane loss: the current cumulative and selective state, with no
// packet to echo (no RTT sample, no ECN), if anything has arrived at all.
void Qp::resend_feedback(TimeNs now, Sinks& s) {
  if (epsn_ == attr_.rq_psn && rx_high_ == attr_.rq_psn) return;
  send_feedback(wire::NackCode::kNone, psn_add(epsn_, kPsnModulus - 1), kNoEv, 0, 0, now, now, s);
}

void Qp::send_pending_ack(TimeNs now, Sinks& s) {
  if (unacked_ == 0) {
    ack_deadline_ = kNever;
    return;
  }
  send_feedback(wire::NackCode::kNone, ack_ref_psn_, ack_ref_tag_, ack_ref_plane_,
                ack_ref_ce_ ? wire::kFbEcnEcho : 0, ack_ref_arrival_ns_, now, s);
}

void Qp::send_feedback(wire::NackCode code, uint32_t ref_psn, uint32_t echo_tag, uint8_t plane,
                       uint8_t flags, TimeNs arrival_ns, TimeNs now, Sinks& s) {
  // Back on the plane the packet came in on, if that plane has a usable EV.
  uint32_t ev = evs_.pick_on_plane(plane, now);
  if (ev == kNoEv) ev = evs_.pick(now);
  if (ev == kNoEv) {
    // Nothing leaves until an EV is usable again: a delayed ACK waits for
    // the next feedback instead of staying due (and the endpoint busy).
    ++s.ep.ctrl_no_ev;
    ack_deadline_ = kNever;
    return;
  }
  TxPacket* out = s.ctrl.emplace();
  if (out == nullptr) {
    ++s.ep.ctrl_dropped;
    return;
  }
  fill_tx(out, ev, code == wire::NackCode::kNone ? wire::Opcode::kAck : wire::Opcode::kNack);
  wire::Feedback& fb = out->t.fb;
  fb.cum_psn = epsn_;
  fb.ref_psn = ref_psn;
  // The bitmap starts at epsn, unless that would leave the referenced PSN
  // out; then it ends at the referenced PSN.
  fb.sack_base = psn_diff(ref_psn, epsn_) < static_cast<int32_t>(wire::kSackBits)
                     ? epsn_
                     : psn_add(ref_psn, kPsnModulus - (wire::kSackBits - 1));
  sack_bits(fb.sack_base, fb.sack_bitmap);
  fb.echo_tag = echo_tag;
  if (tuning_.service_time) {
    fb.service_time_ns = static_cast<uint32_t>(std::min<TimeNs>(now - arrival_ns, UINT32_MAX));
    flags |= wire::kFbSvcTimeValid;
  }
  fb.window_mpr = attr_.mpr_dest;
  fb.ce_count = ce_since_ack_;
  fb.code = code;
  fb.flags = flags;
  if (code == wire::NackCode::kNone)
    ++counters_.acks_tx;
  else
    ++counters_.nacks_tx[static_cast<size_t>(code)];
  unacked_ = 0;
  ack_deadline_ = kNever;
  ce_since_ack_ = 0;
}

}  // namespace softmrc::engine
