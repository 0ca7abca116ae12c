// MRC on every host: one engine::Endpoint per host, unchanged, driven in
// virtual time.
//
// Connections. Two hosts talk over one QP pair (a QP at each end), brought
// up with Endpoint::connect_qp the first time they exchange a message and
// kept afterwards, as an application keeps its connections: what a QP has
// learnt about its paths (EV states, congestion window, RTT) carries over
// to its next message. A pair carries one message each way at a time.
// Each host holds at most max_qps QPs; when it needs another it resets the
// connection it used least recently among those idle, and a transfer that
// finds no QP free waits for one. A 1024-host all-to-all thus needs QPs for
// the transfers in flight, not for every peer (a million QPs otherwise).
// A reset bumps the connection's generation; packets carry the receiver's
// generation and a late copy for an earlier connection is dropped and
// counted as stale.
//
// Every QP has the same EV profile: evs_per_plane EVs on each plane. With
// hash routing the EVs are distinct UDP source ports and the fabric's ECMP
// hash spreads them; with structured routing EV i names spine i mod spines.
//
// Data. With run.verify each host sends its own lib/pattern stream and each
// incoming message lands in a buffer of its own, checked with
// pattern::verify when its completion arrives. Without it (large runs) all
// hosts share one source and one sink buffer, overlapping writes land
// there, and delivery is checked by the engine's completions (immediate,
// length, order) only.
//
// Framed mode builds each packet with wire::build_packet, lets the fabric
// trim (wire::trim) and mark (wire::mark_ce) the bytes, and parses them
// with wire::parse (ICRC checked) on arrival.
#pragma once

#include <array>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/endpoint.h"
#include "fabric/topology.h"
#include "scenario.h"
#include "stack.h"

namespace softmrc::sim {

class MrcStack final : public Stack {
 public:
  // `seed` varies the start PSNs.
  MrcStack(const Scenario& sc, const fabric::Topology& topo, StackListener& listener,
           uint64_t seed);

  void start(const Transfer& t, TimeNs now) override;
  void deliver(SimPacket& p, TimeNs now) override;
  size_t poll_tx(uint32_t host, SimPacket* const* out, size_t max, TimeNs now) override;
  TimeNs next_wakeup(uint32_t host) const override;
  void set_port_up(uint32_t host, uint32_t plane, bool up, TimeNs now) override;
  // Includes the connections still open.
  const StackCounters& counters() const override;

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  // The engine counters a run reports, as of some moment: a QP's counters
  // run on across connections, so a connection's share is a difference.
  struct QpTotals {
    std::array<uint64_t, static_cast<size_t>(engine::RetxCause::kCount)> retx{};
    uint64_t timeouts = 0;
    uint64_t duplicates_rx = 0;
    uint64_t trimmed_rx = 0;
  };
  static QpTotals totals(const engine::Qp& q);
  static void add(StackCounters& to, const QpTotals& now, const QpTotals& base);

  // This host's end of a QP pair.
  struct Conn {
    bool connected = false;
    uint32_t peer = 0;
    uint32_t peer_qpn = 0;
    uint32_t gen = 0;  // bumped by every reset
    uint32_t peer_gen = 0;
    uint32_t sending = kNone;    // the transfer this QP is the requester of
    uint32_t receiving = kNone;  // ...and the one it is the responder of
    uint64_t last_used = 0;
    QpTotals base;  // the QP's totals when it was connected
    bool idle() const { return sending == kNone && receiving == kNone; }
  };
  struct Slot {  // a receive buffer (verify mode)
    std::vector<uint8_t> buf;
    uint32_t key = 0;
  };
  struct Host {
    engine::Endpoint ep;
    std::vector<Conn> conns;  // by QPN - 1
    std::vector<uint32_t> free_qpns;
    uint32_t created = 0;
    std::unordered_map<uint32_t, uint32_t> qpn_to;  // peer -> QPN of the connected pair
    uint32_t src_key = 0;
    uint64_t src_va = 0;
    std::vector<uint8_t> src;                  // verify: this host's pattern
    uint32_t sink_key = 0;                     // !verify: the shared sink
    std::vector<std::unique_ptr<Slot>> slots;  // verify
    std::vector<uint32_t> free_slots;
    std::vector<uint32_t> waiting;  // indexes into waiting_ of transfers that involve this host
  };
  struct Active {
    bool live = false;
    Transfer t;
    uint32_t src_qpn = 0;
    uint32_t dst_qpn = 0;
    uint32_t slot = kNone;
    bool sent = false;
    bool delivered = false;
  };

  void init_host(uint32_t id);
  Active* find_active(uint32_t transfer) {
    return transfer < active_.size() && active_[transfer].live ? &active_[transfer] : nullptr;
  }
  bool alloc_qp(uint32_t host, uint32_t* qpn, TimeNs now);
  void reset_pair(uint32_t host, uint32_t qpn, TimeNs now);
  bool pair(const Transfer& t, uint32_t* sq, uint32_t* dq, TimeNs now);
  bool try_start(const Transfer& t, TimeNs now);
  void connect(uint32_t host, uint32_t qpn, uint32_t peer, uint32_t peer_qpn, uint32_t sq_psn,
               uint32_t rq_psn, TimeNs now);
  uint32_t take_slot(uint32_t host);
  void drain(uint32_t host, TimeNs now);
  void on_completion(uint32_t host, const engine::Completion& c, TimeNs now);
  void finish(uint32_t transfer, TimeNs now, const char* failure);
  void retry_waiting(uint32_t host, TimeNs now);
  void fill(uint32_t host, const engine::TxPacket& tx, SimPacket* p);

  const Scenario& sc_;
  const fabric::Topology& topo_;
  StackListener& listener_;
  uint32_t max_qps_ = 0;
  std::vector<engine::EvEntry> evs_;        // the EV profile of every QP
  engine::QpAttr attr_;                     // every QP's attributes but peer, QPNs and PSNs
  std::array<uint16_t, 256> header_len_{};  // by opcode: frame headers (the trimmed length)
  std::vector<Host> hosts_;
  std::vector<uint8_t> shared_src_;   // !verify
  std::vector<uint8_t> shared_sink_;  // !verify
  std::vector<Active> active_;        // by transfer id
  std::vector<Transfer> waiting_;
  std::vector<uint8_t> waiting_done_;
  uint32_t waiting_left_ = 0;
  std::vector<engine::TxPacket> tx_;
  std::vector<uint8_t> frame_buf_;
  StackCounters counters_;  // of connections that were reset
  mutable StackCounters report_;
  uint64_t psn_seed_ = 0;
  uint64_t use_clock_ = 0;
};

}  // namespace softmrc::sim
