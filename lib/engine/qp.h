// One reliable-connected queue pair: its lifecycle (qp.cc), its requester
// half (requester.cc: segmentation, in-flight tracking, SACK processing,
// retransmission, timers, probes) and its responder half (responder.cc:
// window and bitmap, placement, ACK/NACK generation, in-order completion).
// Each QP has an EV set and a congestion controller; both halves share them.
//
// Not thread-safe: a QP belongs to the endpoint (and lcore) that created it.
// init() allocates every per-QP table at its maximum size; nothing on the
// packet path allocates afterwards.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/cc/congestion_control.h"
#include "engine/counters.h"
#include "engine/event_ring.h"
#include "engine/memory_table.h"
#include "engine/path/ev_set.h"
#include "engine/qp_attr.h"
#include "engine/ring.h"
#include "engine/types.h"
#include "wire/packet.h"

namespace softmrc::engine {

// Tunables shared by every QP of an endpoint (EndpointConfig carries them).
struct QpTuning {
  uint32_t ack_every_packets = 16;  // coalesce at most this many in-order packets per ACK
  TimeNs ack_delay_ns = 4'000;      // ...or hold an ACK at most this long
  uint32_t reorder_threshold = 1;   // later transmissions acked before a hole counts as lost
  bool trim_nack = true;            // answer trimmed packets with a NACK
  bool service_time = true;         // report responder service time in feedback
};

// The reorder window is the slowest recent RTT plus this many quarters of
// the smoothed RTT. It starts at a whole RTT: sprayed paths differ by their
// queues, and while queues build up in a connection's first RTTs every
// sample is already out of date. Each needless resend widens it by one;
// losses with no needless resend narrow it back, down to the floor.
inline constexpr uint32_t kInitialReorderMult = 4;
inline constexpr uint32_t kMinReorderMult = 2;
inline constexpr uint32_t kMaxReorderMult = 16;

// Where a QP puts what it produces; owned by the endpoint.
struct Sinks {
  Ring<TxPacket>& ctrl;
  Ring<Completion>& cq;
  EventRing& events;
  bool& cq_overflowing;  // a completion was lost and none has fit since
  EndpointCounters& ep;
  MemoryTable& mem;
  uint32_t local_planes;     // bit per plane: this endpoint's port is up
  uint32_t port_status_seq;  // numbers this endpoint's port-status updates
  // Where a placement goes that the caller makes (Endpoint::on_packet);
  // nullptr: placed at once.
  wire::DeferredCopy* deferred = nullptr;

  // A completion the queue has no room for is lost: the caller hears of it
  // (as verbs raises IBV_EVENT_CQ_ERR), not only by its absence. Once per
  // overflow: an event per completion lost to a flush would crowd the QP's
  // own error event out of the event queue.
  void complete(const Completion& c) {
    if (cq.push(c)) {
      cq_overflowing = false;
      return;
    }
    ++ep.cq_overflow;
    if (cq_overflowing) return;
    cq_overflowing = true;
    Event e;
    e.type = EventType::kCqOverflow;
    e.qpn = c.qpn;
    event(e);
  }
  void event(const Event& e) {
    if (!events.push(e)) ++ep.events_lost;
  }
};

class Qp {
  // Tests reach through it what no test could drive a QP to (the send
  // queue's positions after 2^32 Writes); defined by test/unit/engine only.
  friend struct QpTestAccess;

 public:
  // `domain`: the protection domain whose regions the QP reads and writes.
  void init(uint32_t qpn, uint32_t domain, const QpLimits& limits, const QpTuning& tuning);

  uint32_t qpn() const { return qpn_; }
  QpState state() const { return state_; }
  const QpAttr& attr() const { return attr_; }
  Status modify(const QpAttr& attr, uint32_t mask, TimeNs now, Sinks& s);

  // Requester.
  Status post_write(const WriteRequest& wr, const MemoryTable& mem);
  // The next packet this QP may send now (probe, port status, retransmit,
  // new data, in that order); false when none may go.
  bool poll_packet(TimeNs now, TxPacket* out);
  // `src_peer`: the sending endpoint, kUnknownPeer where the caller does not
  // know it.
  void on_feedback(const wire::PacketView& pkt, uint32_t src_peer, TimeNs now, Sinks& s);
  void on_probe_reply(const wire::PacketView& pkt, TimeNs now, Sinks& s);
  void on_port_status(const wire::PacketView& pkt, uint32_t src_peer, TimeNs now, Sinks& s);
  // A local port changed: `mask` has a bit per up port, `seq` numbers the
  // endpoint's updates.
  void set_local_plane(uint8_t plane, uint32_t mask, uint32_t seq, TimeNs now, Sinks& s);

  // Responder.
  Status post_recv(const RecvRequest& wr);
  void on_data(const wire::PacketView& pkt, uint8_t plane, TimeNs now, Sinks& s);

  // Timers of both halves.
  void on_timers(TimeNs now, Sinks& s);
  TimeNs next_timer() const;
  // 0 if poll_packet() would send now, else next_timer().
  TimeNs next_wakeup() const;

  // Stats view.
  const QpCounters& counters() const { return counters_; }
  const EvSet& evs() const { return evs_; }
  EvSet& evs() { return evs_; }
  const CongestionControl& cc() const { return cc_; }
  uint64_t inflight_bytes() const { return inflight_bytes_; }
  TimeNs srtt_ns() const { return srtt_ns_; }
  TimeNs rtt_max_ns() const { return rtt_max_ns_; }
  uint32_t reorder_mult() const { return reorder_mult_; }
  uint32_t send_queue_depth() const { return sq_.size(); }
  uint32_t snd_una() const { return snd_una_; }
  uint32_t snd_nxt() const { return snd_nxt_; }
  uint32_t epsn() const { return epsn_; }
  uint32_t retransmit_queue_depth() const { return retx_.size(); }
  uint32_t retries() const { return retries_; }
  uint32_t recv_queue_depth() const { return rq_.size(); }

  // Report EV state changes as events (after anything that may change them).
  void drain_ev_events(Sinks& s);

 private:
  // Requester state per PSN in [snd_una_, snd_nxt_).
  enum class TxState : uint8_t { kFree, kInFlight, kLost, kAcked };
  static constexpr uint32_t kNil = UINT32_MAX;  // no PSN (PSNs are 24 bits)
  struct TxSlot {
    uint32_t wqe = 0;     // absolute send-queue position
    uint32_t offset = 0;  // of the payload within the message
    uint32_t len = 0;     // payload bytes
    uint32_t ev = kNoEv;  // EV of the latest transmission
    TimeNs sent_ns = 0;
    uint64_t tx_seq = 0;   // transmission order, for loss detection
    uint32_t prev = kNil;  // neighbours in the in-flight list (PSNs)
    uint32_t next = kNil;
    TxState state = TxState::kFree;
    RetxCause cause = RetxCause::kCount;  // why it is lost (counted when resent)
    bool retransmitted = false;
  };
  struct SendWqe {
    uint64_t wr_id = 0;
    const uint8_t* src = nullptr;
    uint32_t length = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;
    bool with_imm = false;
    bool signaled = true;
    uint32_t msn = 0;
    uint32_t first_psn = 0;
    uint32_t npkts = 0;
  };
  // Responder: what completing a message needs, kept for last packets.
  struct RxLast {
    uint32_t imm = 0;
    uint32_t msg_len = 0;
    bool is_last = false;
    bool has_imm = false;
  };

  // qp.cc
  void enter_rtr(TimeNs now);
  void enter_rts();
  void reset();
  // `failed_wqe`: the send-queue position of the request that failed, if
  // any (a position is any uint32_t, UINT32_MAX included: no sentinel).
  void fail(WcStatus status, std::optional<uint32_t> failed_wqe, const char* reason, Sinks& s);
  void fill_tx(TxPacket* out, uint32_t ev, wire::Opcode op) const;

  // requester.cc
  TxSlot& slot(uint32_t psn) { return slots_[psn & slot_mask_]; }
  uint32_t send_window_psns() const;
  bool in_send_window(uint32_t psn) const;
  bool resend_pending(uint32_t psn) const;
  void build_data(uint32_t psn, uint32_t ev, bool retransmit, TimeNs now, TxPacket* out);
  bool cwnd_allows(uint32_t len) const;
  bool ready_to_send() const;
  void queue_retransmit(uint32_t psn);
  bool poll_retransmit(TimeNs now, TxPacket* out);
  bool poll_new_data(TimeNs now, TxPacket* out);
  bool poll_probe(TimeNs now, TxPacket* out);
  bool poll_port_status(TimeNs now, TxPacket* out);
  void list_append(uint32_t psn);
  void list_remove(uint32_t psn);
  bool ack_psn(uint32_t psn, uint32_t* acked_bytes);
  TimeNs rto_interval() const;
  void mark_lost(uint32_t psn, RetxCause cause, bool ev_penalty, TimeNs now);
  void detect_losses(TimeNs now);
  void requeue_overtaken_on(uint32_t ev, TimeNs now);
  TimeNs probe_timeout() const;
  void on_tail_probe(TimeNs now);
  void complete_sends(Sinks& s);
  void on_rto(TimeNs now, Sinks& s);
  void requeue_plane(uint8_t plane, TimeNs now);
  bool apply_plane(uint8_t plane, TimeNs now);
  void on_peer_gone(const wire::Feedback& fb, uint32_t src_peer, Sinks& s);
  std::optional<uint32_t> wqe_of_psn(uint32_t psn) const;
  bool acks_unsent(const wire::Feedback& fb) const;

  // responder.cc
  bool rx_bit(uint32_t psn) const;
  void set_rx_bit(uint32_t psn, bool v);
  void sack_bits(uint32_t base, uint64_t out[2]) const;
  void advance_epsn(Sinks& s);
  void send_feedback(wire::NackCode code, uint32_t ref_psn, uint32_t echo_tag, uint8_t plane,
                     uint8_t flags, TimeNs arrival_ns, TimeNs now, Sinks& s);
  void send_pending_ack(TimeNs now, Sinks& s);
  void resend_feedback(TimeNs now, Sinks& s);
  bool place(const wire::PacketView& pkt, Sinks& s, wire::NackCode* why);

  uint32_t qpn_ = 0;
  uint32_t domain_ = kDefaultDomain;
  QpLimits limits_{};
  QpTuning tuning_{};
  QpState state_ = QpState::kReset;
  QpAttr attr_{};
  EvSet evs_;
  CongestionControl cc_;
  QpCounters counters_{};
  uint32_t local_planes_ = 0;   // bit per plane: up here
  uint32_t remote_planes_ = 0;  // bit per plane: up at the peer (its port status)
  uint32_t port_status_seq_ = 0;
  uint32_t remote_status_seq_ = 0;
  bool have_remote_status_ = false;
  uint32_t port_status_left_ = 0;  // copies of our port status still to send

  // Requester.
  Ring<SendWqe> sq_;
  uint32_t sq_next_ = 0;  // absolute position of the WQE being segmented
  uint32_t seg_pkt_ = 0;  // next packet index within it
  uint32_t next_msn_ = 0;
  std::vector<TxSlot> slots_;
  uint32_t slot_mask_ = 0;
  uint32_t snd_una_ = 0;       // oldest PSN not acknowledged
  uint32_t snd_nxt_ = 0;       // next new PSN
  uint32_t list_head_ = kNil;  // in-flight PSNs, oldest transmission first
  uint32_t list_tail_ = kNil;
  Ring<uint32_t> retx_;  // PSNs waiting to be resent
  uint64_t tx_seq_ = 0;
  uint64_t largest_acked_tx_seq_ = 0;
  uint64_t inflight_bytes_ = 0;
  uint32_t wimm_outstanding_ = 0;
  uint32_t peer_window_psns_ = 0;  // the responder's advertised window (dynamic MPR)
  TimeNs rto_deadline_ = kNever;
  TimeNs loss_deadline_ = kNever;  // an overtaken packet leaves the reorder window
  TimeNs tlp_deadline_ = kNever;   // feedback has been quiet too long: send a tail probe
  uint32_t tlp_psn_ = kNil;        // the latest tail probe since the last progress
  uint32_t tail_probes_ = 0;       // tail probes since the last progress
  uint32_t tlp_lost_ev_ = kNoEv;   // the EV of the transmission the latest probe stands in for
  // The latest tail probe's copy, kept past progress: its duplicate, which
  // may arrive after the original's ACK, says nothing about reordering.
  uint32_t probe_copy_psn_ = kNil;
  uint32_t probe_copy_ev_ = kNoEv;
  uint32_t retries_ = 0;  // timeouts since the last progress
  TimeNs srtt_ns_ = 0;
  TimeNs rtt_max_ns_ = 0;                        // slowest recent RTT sample, decaying
  uint32_t reorder_mult_ = kInitialReorderMult;  // reorder window slack, in quarter smoothed RTTs
  uint32_t losses_since_dup_ = 0;                // SACK losses since the last duplicate feedback
  bool dsack_round_open_ = false;  // the window was widened; not again before snd_una passes...
  uint32_t dsack_round_end_ = 0;   // ...this, snd_nxt at the time
  uint32_t quiet_round_end_ = 0;   // a round trip ends when snd_una passes this
  uint32_t quiet_rounds_ = 0;      // round trips since the last duplicate
  uint16_t probe_req_id_ = 0;

  // Responder.
  std::vector<uint64_t> rx_bits_;  // received PSNs, a ring over the window
  uint32_t rx_bits_mask_ = 0;      // ring size in bits - 1
  std::vector<RxLast> rx_last_;    // same ring, message ends only
  uint32_t epsn_ = 0;              // every PSN before this one has been received
  uint32_t rx_high_ = 0;           // one past the highest PSN received
  uint32_t rx_window_psns_ = 0;
  Ring<uint64_t> rq_;          // posted receives (wr_id)
  uint32_t wimm_pending_ = 0;  // WIMM ends received, not yet completed
  uint32_t unacked_ = 0;       // received since the last feedback
  TimeNs ack_deadline_ = kNever;
  uint32_t ack_ref_psn_ = 0;
  uint32_t ack_ref_tag_ = 0;
  uint8_t ack_ref_plane_ = 0;
  bool ack_ref_ce_ = false;
  TimeNs ack_ref_arrival_ns_ = 0;
  uint16_t ce_since_ack_ = 0;
};

}  // namespace softmrc::engine
