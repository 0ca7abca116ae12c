// A multi-plane fabric: the topology (fabric/topology.h), the state of
// every one-way link and its queue (fabric/link.h), and forwarding by EV.
//
// Forwarding. A packet from host src to host dst on plane p goes NIC ->
// leaf -> host when both hang off the same leaf, else NIC -> leaf -> spine
// -> leaf -> host. The source leaf picks the spine from the packet's EV:
// with EvRouting::kHash by an ECMP hash of (EV, src, dst) over the spines
// that routing currently offers towards dst; with kStructured the EV names
// the spine and routing is not consulted (a source route stays broken
// until the sender changes EV).
//
// Routing. Link state changes at once (set_link_up); the control plane
// follows `reroute_ns` later, when it withdraws the link from (or returns
// it to) the ECMP groups. A blackholed, lossy, degraded or corrupting link
// is never withdrawn: nothing tells the switches. advance(now) applies the
// route changes that have come due; next_route_change() says when the next
// one is.
//
// Two ways to move packets:
//   - route() then Link::enqueue() hop by hop, each at the time the packet
//     reaches that hop: what a discrete-event simulator does;
//   - transit(): every hop at once, giving the arrival time at the
//     destination: what a real-time emulator does (it holds the packet until
//     then). Later hops see the packet before the packets that reach them
//     earlier but were sent later, a small error at emulation speeds.
//
// Pure and clock-free, not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "fabric/link.h"
#include "fabric/rng.h"
#include "fabric/topology.h"

namespace softmrc::fabric {

struct Path {
  std::array<uint32_t, 4> links{};
  uint32_t hops = 0;
};

class Fabric {
 public:
  // nullptr on success, else a reason naming the field.
  const char* init(const TopologyConfig& cfg);

  const Topology& topology() const { return topo_; }
  uint32_t num_links() const { return static_cast<uint32_t>(links_.size()); }
  Link& link(uint32_t id) { return links_[id]; }
  const Link& link(uint32_t id) const { return links_[id]; }

  // The links a packet with `ev` takes as routing stands now; false when
  // routing offers no spine towards dst.
  bool route(uint32_t plane, uint32_t src, uint32_t dst, uint32_t ev, Path* out) const;

  // Every hop at once (see above). On a drop, *drop_link (if given) names
  // the link that dropped it.
  Verdict transit(uint32_t plane, uint32_t src, uint32_t dst, PacketMeta& pkt, TimeNs now, Rng& rng,
                  uint32_t* drop_link = nullptr);

  // Faults. Up/down changes routing reroute_ns later; the others never do.
  void set_link_up(uint32_t link, bool up, TimeNs now);
  void set_switch_up(const SwitchId& sw, bool up, TimeNs now);
  // Silently drop every packet carrying `ev` on `plane` (at each NIC's
  // first hop, so the path it names is dead from every host).
  void set_ev_blackholed(uint32_t plane, uint32_t ev, bool on);
  // A host's port on a plane has a carrier: both directions of its link up.
  bool host_port_up(uint32_t plane, uint32_t host) const {
    return links_[topo_.host_up(plane, host)].up() && links_[topo_.host_down(plane, host)].up();
  }

  bool routed(uint32_t link) const { return routed_[link] != 0; }
  TimeNs next_route_change() const { return pending_.empty() ? kNever : pending_.front().at_ns; }
  // Applies the route changes due by `now`; the links whose routing changed
  // are appended to *changed if given.
  void advance(TimeNs now, std::vector<uint32_t>* changed = nullptr);

 private:
  struct RouteChange {
    TimeNs at_ns;
    uint32_t link;
    bool up;
  };
  uint32_t pick_spine(uint32_t plane, uint32_t src_leaf, uint32_t dst_leaf, uint32_t src,
                      uint32_t dst, uint32_t ev) const;

  Topology topo_;
  std::vector<Link> links_;
  std::vector<uint8_t> routed_;       // per link: the control plane routes over it
  std::vector<uint32_t> withdrawn_;   // per plane: leaf/spine links out of routing
  std::vector<RouteChange> pending_;  // in time order
};

}  // namespace softmrc::fabric
