// The in-process fabric: a link joins the plane-N ports of two hosted
// endpoints. Each port is a net_ring ethdev (rte_eth_from_rings) with its
// own RX and TX ring, and the fabric role, on some lcore, moves what one
// endpoint's port sent (its TX ring) to the peer's port (its RX ring):
//
//   endpoint a, plane p: port TX ring --hop (p, a->b)--> port RX ring of b
//   endpoint b, plane p: port TX ring --hop (p, b->a)--> port RX ring of a
//
// forward() is the one step every burst takes between the two rings, and
// the seam where the fabric emulator (lib/fabric's queues, delay, rate,
// ECN marking, trimming, loss, in real time) plugs in. Here it forwards
// perfectly; a plane that is down drops everything and shows both ports'
// links down, as a cut cable would.
//
// Threads: create()/destroy() on the control thread; poll() on the link's
// lcore; set_plane_up() from any thread (it only records a request that
// poll() applies); stats through a Published snapshot.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "softmrcd/config.h"
#include "softmrcd/published.h"
#include "softmrcd/stats.h"

namespace softmrc::softmrcd {

class Link {
 public:
  // Creates the rings and ring ports of link `index` of `cfg`.
  bool create(const Config& cfg, uint32_t index, std::string* err);
  void destroy();

  // The port of endpoint side 0 (a) or 1 (b) on `plane`.
  uint16_t port(int side, uint32_t plane) const { return ports_[side][plane]; }
  uint32_t endpoint(int side) const { return side == 0 ? spec_.a : spec_.b; }
  int lcore() const { return lcore_; }
  void set_lcore(int lcore) { lcore_ = lcore; }
  uint32_t index() const { return index_; }

  // One pass of the fabric role: due schedule events, requested plane
  // changes, then a burst per hop.
  void poll(uint64_t now_ns);

  // A request from any thread; poll() applies it.
  void set_plane_up(uint32_t plane, bool up);

  Published<LinkSnapshot>& snapshot() { return snapshot_; }
  // Writer: the link's lcore, or the control thread once that has stopped.
  void publish(uint64_t now_ns);

 private:
  struct Hop {
    rte_ring* from = nullptr;  // the sender's TX ring
    rte_ring* to = nullptr;    // the receiver's RX ring
    HopCounters counters;
  };

  // Everything that happens to a burst between the sender's and the
  // receiver's port. Takes ownership of pkts[0, n).
  void forward(Hop& hop, bool plane_up, rte_mbuf** pkts, uint16_t n, uint64_t now_ns);
  void apply_planes(uint32_t wanted, uint64_t now_ns);

  LinkSpec spec_;
  uint32_t index_ = 0;
  uint32_t num_planes_ = 0;
  int lcore_ = kAnyLcore;
  std::vector<uint16_t> ports_[2];
  std::vector<rte_ring*> rings_;
  std::vector<Hop> hops_;  // [plane * 2 + direction], direction 0: a -> b
  size_t next_event_ = 0;
  uint32_t up_mask_ = 0;                  // applied by poll()
  std::atomic<uint32_t> wanted_mask_{0};  // requested
  uint64_t plane_events_ = 0;
  uint64_t snapshot_interval_ns_ = 0;
  uint64_t next_snapshot_ns_ = 0;
  Published<LinkSnapshot> snapshot_;
};

}  // namespace softmrc::softmrcd
