// The single-path baseline: a compact model of RoCE's reliable connection,
// written for the simulator (it is not lib/engine and never will be).
//
// What it models, per QP:
//   - one path: a fixed UDP source port (EV) per QP, so ECMP hashes every
//     packet of the QP onto the same links; a transfer is split over
//     qps_per_transfer QPs, one per plane in turn, so a host uses all its
//     ports as NCCL does with one QP per NIC port;
//   - packets sent in PSN order; the receiver accepts only the next PSN
//     expected and drops anything after a hole, answering the first such
//     packet with a NAK (sequence error); the sender goes back to the NAKed
//     PSN and resends everything from there (go-back-N);
//   - cumulative ACKs, coalesced over ack_every packets or ack_delay_us,
//     at once for the last packet of a message, for duplicates, and for a
//     packet that filled the sender's window (it sets AckReq);
//   - a retransmission timer of 4.096 us * 2^timeout from the last
//     progress; on expiry the sender goes back to the oldest unacknowledged
//     PSN; `retry` expiries without progress fail the transfer (QP error);
//   - a DCTCP-style window (the role DCQCN's rate plays in RoCE NICs):
//     alpha tracks the share of CE-marked packets per window, the window
//     shrinks by alpha/2 once per window with marks, grows by one MTU per
//     window without; it starts at its ceiling, 1.5 x the bandwidth-delay
//     product of one port (as NSCC's max_cwnd), so a lone QP runs at line
//     rate from the start.
//     With cc none it stays at the ceiling;
//   - data is not trimmable (RoCE has no trimmable DSCP): a full switch
//     queue drops it; a NIC that got a trimmed packet could not use it.
// What it leaves out: PFC (the fabric is lossy, as MRC's is), packet
// payloads (lengths only), and reaction to port events (a QP keeps its
// plane; a dead port shows as timeouts).
#pragma once

#include <deque>
#include <unordered_map>
#include <vector>

#include "fabric/topology.h"
#include "scenario.h"
#include "stack.h"

namespace softmrc::sim {

class RoceStack final : public Stack {
 public:
  // `seed` varies each QP's UDP source port, hence its path.
  RoceStack(const Scenario& sc, const fabric::Topology& topo, StackListener& listener,
            uint64_t seed);

  void start(const Transfer& t, TimeNs now) override;
  void deliver(SimPacket& p, TimeNs now) override;
  size_t poll_tx(uint32_t host, SimPacket* const* out, size_t max, TimeNs now) override;
  TimeNs next_wakeup(uint32_t host) const override;
  void set_port_up(uint32_t, uint32_t, bool, TimeNs) override {}
  const StackCounters& counters() const override { return counters_; }

 private:
  struct Qp {
    bool in_use = false;
    bool sender = false;
    uint32_t transfer = 0;
    uint32_t peer = 0;
    uint32_t peer_qp = 0;
    uint32_t gen = 0;
    uint32_t peer_gen = 0;
    uint32_t plane = 0;
    uint32_t ev = 0;
    uint32_t npkts = 0;     // packets in the message
    uint32_t last_len = 0;  // payload of the last one
    // Sender.
    uint32_t una = 0;       // oldest PSN not acknowledged
    uint32_t nxt = 0;       // next PSN to send
    uint32_t max_sent = 0;  // one past the highest PSN ever sent
    double cwnd = 0;        // bytes
    double alpha = 0;
    uint32_t win_end = 0;  // the current DCTCP observation window ends at this PSN
    uint32_t win_acked = 0;
    uint32_t win_marked = 0;
    TimeNs rto_at = kNever;
    uint32_t retries = 0;
    // Receiver.
    uint32_t epsn = 0;
    uint32_t unacked = 0;
    uint32_t ce = 0;
    bool nak_sent = false;
    TimeNs ack_at = kNever;  // a coalesced ACK is due
    bool in_ready = false;   // listed in Host::ready
  };
  struct Ctrl {
    uint32_t qp;  // the local receiver QP that answers
    RoceKind kind;
    uint32_t psn;
    uint32_t ce;
    uint32_t acked;
  };
  struct Host {
    std::vector<Qp> qps;
    std::vector<uint32_t> free;
    std::deque<Ctrl> ctrl;
    std::vector<uint32_t> senders;    // QPs with data to send or unacknowledged
    std::vector<uint32_t> receivers;  // QPs that may owe a coalesced ACK
    std::vector<uint32_t> ready;      // senders that may send now (stale entries pruned lazily)
    uint32_t cursor = 0;
    TimeNs timer_at = kNever;  // no RTO or ACK timer is due before this
  };
  static constexpr uint32_t kNoQp = UINT32_MAX;
  struct Active {
    Transfer t;
    std::vector<uint32_t> src_qps;  // per sub-flow; kNoQp once it is done
    std::vector<uint32_t> dst_qps;
    uint32_t subs_delivered = 0;
    uint32_t subs_done = 0;
  };

  uint32_t alloc(uint32_t host);
  bool can_send(const Qp& q) const;
  // A sender's window or position changed: list it if it may send.
  void refresh(Host& h, uint32_t qi);
  void run_timers(uint32_t host, TimeNs now);
  void queue_ack(Host& h, uint32_t qi);
  uint32_t payload_of(const Qp& q, uint32_t psn) const;
  void on_feedback(uint32_t host, const RoceHeader& h, TimeNs now);
  void on_data(uint32_t host, SimPacket& p, TimeNs now);
  void react(Qp& q, uint32_t acked, uint32_t marked);
  void sub_done(uint32_t host, uint32_t qp, TimeNs now);
  void fail(uint32_t transfer, TimeNs now, const char* why);
  void free_qp(uint32_t host, uint32_t qp);

  const Scenario& sc_;
  StackListener& listener_;
  uint64_t seed_ = 0;
  uint32_t subs_ = 1;
  TimeNs rto_ns_ = 0;
  double max_cwnd_ = 0;
  std::vector<Host> hosts_;
  std::unordered_map<uint32_t, Active> active_;
  StackCounters counters_;
};

}  // namespace softmrc::sim
