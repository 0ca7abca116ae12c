// An MRC endpoint: the QPs of one lcore, the registered memory they use,
// and the plane (port) state. It is the engine's whole interface: the
// caller hands it packets (on_packet), application requests (post_*), port
// events (set_plane_up) and the current time, and takes back packets to
// send (poll_tx), completions, events and the next time it must be called
// (next_wakeup). It never reads a clock, never allocates after setup
// (init, create_qp), and never writes outside a registered region.
//
// Not thread-safe: one endpoint per lcore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/counters.h"
#include "engine/event_ring.h"
#include "engine/memory_table.h"
#include "engine/qp.h"
#include "engine/qp_attr.h"
#include "engine/ring.h"
#include "engine/timer_heap.h"
#include "engine/types.h"
#include "wire/packet.h"

namespace softmrc::engine {

struct EndpointConfig {
  uint8_t num_planes = 1;
  uint32_t max_qps = 64;
  uint32_t max_regions = 1024;
  QpLimits qp;  // per-QP limits; qp.num_planes is taken from num_planes
  QpTuning tuning;
  uint32_t ctrl_queue_packets = 4096;  // ACKs, NACKs and probe replies awaiting poll_tx
  uint32_t event_queue = 4096;         // and a slot per QP that only kQpError may take
  uint32_t completion_queue = 0;       // 0: enough for every QP's send and receive queues
};

// What poll_tx sends per QP before moving to the next, for fairness.
inline constexpr uint32_t kQpTxBurst = 16;
// Rounds of QP_GONE notices an aborted QP sends after its first: at the
// default ACK timeout (262 us) the last goes 67 ms after the abort.
inline constexpr uint8_t kGoneNoticeResends = 8;

class Endpoint {
 public:
  Status init(const EndpointConfig& cfg);

  // The QP reads and writes only regions of `domain` (see memory_table.h).
  Status create_qp(uint32_t* qpn, uint32_t domain = kDefaultDomain);
  Status destroy_qp(uint32_t qpn);
  // destroy_qp for a QP whose owner is gone (softmrcd: its application
  // exited): a connected QP tells its peer with a QP_GONE NACK on every up
  // plane, so that the peer fails at once instead of retrying into a
  // timeout (or, as a receiver, never hearing of it). In case every copy
  // is lost, the notice goes out kGoneNoticeResends more times, after the
  // QP's ACK timeout and then doubling intervals; create_qp takes its QPN
  // only when no other is free, which ends the notices.
  Status abort_qp(uint32_t qpn, TimeNs now);
  // ERROR, as by modify_qp, for a QP whose owner can no longer use it
  // though it still exists (softmrcd's shutdown flushes its applications'
  // QPs into their CQs): a connected QP tells its peer with one round of
  // QP_GONE NACKs first. Its QPN stays in use, so no more rounds follow.
  Status abandon_qp(uint32_t qpn, TimeNs now);
  Status modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t mask, TimeNs now);
  Status query_qp(uint32_t qpn, QpState* state, QpAttr* attr) const;
  // RESET -> INIT -> RTR -> RTS in one call, each step taking its own fields
  // of `attr` (attr.state is ignored); `last` RTR stops there (a QP that only
  // receives). On a refusal the QP stays where that step found it and the
  // reason names the step's field or rule.
  Status connect_qp(uint32_t qpn, const QpAttr& attr, TimeNs now, QpState last = QpState::kRts);

  Status register_region(const Region& region, uint32_t* key);
  Status deregister_region(uint32_t key);

  Status post_write(uint32_t qpn, const WriteRequest& wr);
  Status post_recv(uint32_t qpn, const RecvRequest& wr);

  // A parsed packet that arrived on `plane`. `src_peer` names the sender for
  // connectionless probes (QPN 0), whose reply has no QP to take it from.
  // With `deferred`, a data packet's payload is not copied into registered
  // memory: the copy is left in *deferred (len 0: none) for the caller to
  // make before it next calls poll_tx() or poll_completions(), which may
  // hand out the packet's ACK or its message's completion. softmrcd makes
  // it while it checks the next packet's ICRC (wire::DeferredCopy).
  void on_packet(const wire::PacketView& pkt, uint8_t plane, TimeNs now,
                 uint32_t src_peer = kUnknownPeer, wire::DeferredCopy* deferred = nullptr);
  // Up to `max` packets to send now: control packets first, then each QP's
  // probes, port status, retransmissions and new data, bounded by its
  // congestion window and MPR. Runs due timers first.
  size_t poll_tx(TxPacket* out, size_t max, TimeNs now);
  size_t poll_completions(Completion* out, size_t max);
  size_t poll_events(Event* out, size_t max);
  // When poll_tx must run next even if nothing arrives: 0 when it has
  // something to send now, else the earliest timer (kNever: none).
  TimeNs next_wakeup() const;

  // A local port went up or down; every QP's EVs on it follow at once and
  // the peers are told with a port-status packet.
  void set_plane_up(uint8_t plane, bool up, TimeNs now);
  bool plane_up(uint8_t plane) const { return local_planes_ >> plane & 1; }
  // Controller: DENY an EV of a QP, or lift the denial.
  Status set_ev_denied(uint32_t qpn, uint32_t ev, bool denied, TimeNs now);
  // Controller: a connectionless probe (QPN 0) to `peer` on `plane`; the
  // reply comes back as an EventType::kProbeReply event. `ev` must stay
  // valid until poll_tx has handed the probe out.
  Status send_probe(uint32_t peer, uint8_t plane, const wire::WireEv* ev, uint16_t req_id,
                    TimeNs now);

  // Stats view: the QP (counters, EV set, congestion control), or nullptr.
  const Qp* qp(uint32_t qpn) const;
  const EndpointCounters& counters() const { return counters_; }
  const MemoryTable& memory() const { return mem_; }

 private:
  Qp* find(uint32_t qpn);
  Sinks sinks() {
    return Sinks{.ctrl = ctrl_,
                 .cq = cq_,
                 .events = events_,
                 .cq_overflowing = cq_overflowing_,
                 .ep = counters_,
                 .mem = mem_,
                 .local_planes = local_planes_,
                 .port_status_seq = port_status_seq_};
  }
  void purge_ctrl(uint32_t qpn);
  void make_ready(uint32_t qpn);  // joins the ready list unless already on it
  // After anything that may give the QP work or move its timers.
  void touched(uint32_t qpn);
  void answer_probe(const wire::PacketView& pkt, uint8_t plane, TimeNs now, uint32_t src_peer);
  // A control packet of no QP (it outlives any) to `peer` on `plane`,
  // queued for poll_tx with its transport cleared but for the opcode and
  // destination QPN; nullptr when the control queue is full.
  TxPacket* queue_connectionless(uint32_t peer, uint8_t plane, const wire::WireEv* ev,
                                 wire::Opcode op, uint32_t dest_qpn);
  // What a QP's QP_GONE notices say; for an aborted QP, kept by QPN - 1
  // while rounds are due.
  struct GoneNotice {
    uint32_t peer = 0;
    uint32_t dest_qpn = 0;
    uint32_t epsn = 0;     // checked by a peer that sends
    uint32_t snd_nxt = 0;  // by one that only receives (RTR)
    uint8_t mpr_dest = 0;
    uint8_t rounds_left = 0;  // 0: none due
    TimeNs interval = 0;      // until the next round
  };
  static GoneNotice gone_notice(const Qp& q);
  // QP_GONE NACKs naming QP `qpn`, one per up plane; false if the control
  // queue had no room for some.
  bool queue_gone_notices(const GoneNotice& g, uint32_t qpn);
  // A round of aborted QP `qpn`'s notices, and its timer set for the next.
  void send_gone_round(uint32_t qpn, TimeNs now);

  EndpointConfig cfg_{};
  MemoryTable mem_;
  std::vector<Qp> qps_;  // QPN n lives at qps_[n - 1]
  std::vector<bool> in_use_;
  std::vector<uint32_t> live_;  // QPNs in use
  // The transmit scheduler touches only QPs that may have work: those in
  // ready_ (each at most once, round-robin) and the one whose timer is due
  // first. Idle QPs cost nothing per call, however many there are.
  Ring<uint32_t> ready_;
  std::vector<bool> queued_;  // in ready_
  TimerHeap timers_;          // key: QPN - 1
  Ring<TxPacket> ctrl_;
  Ring<Completion> cq_;
  EventRing events_;
  bool cq_overflowing_ = false;  // see Sinks
  EndpointCounters counters_{};
  uint32_t local_planes_ = 0;
  uint32_t port_status_seq_ = 0;
  std::vector<GoneNotice> gone_;  // by QPN - 1
  TimerHeap gone_timers_;         // their next rounds; key: QPN - 1
};

}  // namespace softmrc::engine
