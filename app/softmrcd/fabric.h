// The in-process fabric: a link joins the plane-N ports of two hosted
// endpoints. Each port is a net_ring ethdev (rte_eth_from_rings) with its
// own RX and TX ring, and the fabric role, on some lcore, moves what one
// endpoint's port sent (its TX ring) to the peer's port (its RX ring)
// through the fabric emulator (emulator.h), one EmulatedHop per plane and
// direction:
//
//   endpoint a, plane p: port TX ring --hop (p, a->b)--> port RX ring of b
//   endpoint b, plane p: port TX ring --hop (p, b->a)--> port RX ring of a
//
// Each hop has the plane's rate, delay, buffer, ECN threshold, overflow
// policy and loss (links[].planes), and takes changes from the link's
// schedule and from operators: a plane down (both hops drop everything
// and both ports' links go down, as a cut cable would), loss, blackholes
// of the plane or of chosen EVs, a rate factor.
//
// The payload the link delivers is kept in bins of about half a base RTT;
// when a plane fails, the bins around it are captured, and the daemon's
// summary measures how goodput came through (measure_recovery()).
//
// Threads: create()/destroy() on the control thread; poll() on the link's
// lcore; request() from any thread (it only queues the change for poll());
// stats through a Published snapshot; finish() and trace() once the lcores
// have stopped.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstdint>
#include <string>
#include <vector>

#include "softmrcd/config.h"
#include "softmrcd/emulator.h"
#include "softmrcd/published.h"
#include "softmrcd/stats.h"

namespace softmrc::softmrcd {

// A plane that went out of service (down, or blackholed whole), for the
// goodput report: the DeliveryTrace capture with the same index.
struct PlaneFault {
  uint8_t plane = 0;
  bool blackhole = false;      // silent; else the plane went down
  uint8_t planes_before = 0;   // in service just before
  double surviving_share = 0;  // of the capacity in service before, what the others have
};

class Link {
 public:
  // Creates the rings, ring ports and hops of link `index` of `cfg`.
  bool create(const Config& cfg, uint32_t index, std::string* err);
  void destroy();

  // The port of endpoint side 0 (a) or 1 (b) on `plane`.
  uint16_t port(int side, uint32_t plane) const { return ports_[side][plane]; }
  uint32_t endpoint(int side) const { return side == 0 ? spec_.a : spec_.b; }
  int lcore() const { return lcore_; }
  void set_lcore(int lcore) { lcore_ = lcore; }
  uint32_t index() const { return index_; }
  uint32_t num_planes() const { return num_planes_; }

  // One pass of the fabric role: due schedule events and requests, then
  // per hop what the sender sent, and what is due at the receiver.
  void poll(uint64_t now_ns);

  // Any thread: a change that poll() applies (at_ns is ignored). False
  // when too many are waiting.
  bool request(const LinkEvent& e);

  Published<LinkSnapshot>& snapshot() { return snapshot_; }
  // Writer: the link's lcore, or the control thread once that has stopped.
  void publish(uint64_t now_ns);

  // The unloaded round trip over `plane`: twice its delay plus a full
  // data frame and an ACK serialised at its rate.
  uint64_t base_rtt_ns(uint32_t plane) const;

  // Control thread, after the lcores stopped: closes the open captures.
  void finish(uint64_t now_ns) { trace_.finish(now_ns); }
  const DeliveryTrace& trace() const { return trace_; }
  const PlaneFault& fault(uint32_t capture) const { return faults_[capture]; }

 private:
  static constexpr uint16_t kBurst = 32;

  struct Hop {
    rte_ring* from = nullptr;  // the sender's TX ring
    rte_ring* to = nullptr;    // the receiver's RX ring
    EmulatedHop emu;
  };

  void apply(const LinkEvent& e, uint64_t now_ns);
  void set_plane_up(uint32_t plane, bool up, uint64_t now_ns);
  bool in_service(uint32_t plane) const;
  // The rate in service (the slower direction), Mb/s.
  double capacity_mbps(uint32_t plane) const;

  LinkSpec spec_;
  uint32_t index_ = 0;
  uint32_t num_planes_ = 0;
  uint32_t path_mtu_ = 0;
  int lcore_ = kAnyLcore;
  std::vector<uint16_t> ports_[2];
  std::vector<rte_ring*> rings_;
  std::vector<Hop> hops_;  // [plane * 2 + direction], direction 0: a -> b
  rte_ring* requests_ = nullptr;
  size_t next_event_ = 0;
  uint64_t plane_events_ = 0;
  uint64_t payload_seen_ = 0;  // delivered by every hop, when the trace last saw it
  DeliveryTrace trace_;
  std::vector<PlaneFault> faults_;  // one per capture, reserved: no allocation on the lcore
  uint64_t snapshot_interval_ns_ = 0;
  uint64_t next_snapshot_ns_ = 0;
  Published<LinkSnapshot> snapshot_;
};

// "loss 0.01", "ev 49160 blackholed": a change as the log and the prompt
// show it.
std::string describe(const LinkEvent& e);

// An operator's change to a plane of a link ("loss", "0.01"); false with
// *err naming what is wrong.
bool parse_link_change(const std::string& what, const std::string& value,
                       const std::string& direction, LinkEvent* out, std::string* err);

}  // namespace softmrc::softmrcd
