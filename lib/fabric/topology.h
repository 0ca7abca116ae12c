// The shape of a multi-plane fabric: H hosts, each with one NIC port per
// plane, and per plane an independent two-tier leaf/spine Clos.
//
// A leaf switch has `radix` ports: hosts_per_leaf towards hosts and the
// rest (one per spine) towards the spines, split by the oversubscription
// ratio (host ports : uplinks). Host h hangs off leaf h / hosts_per_leaf;
// a spine has one port per leaf, so there are at most `radix` leaves. Every
// link is two one-way Links (fabric/link.h), each with the output queue at
// its sending end; the host-to-leaf direction is the NIC's own queue.
//
// Link ids are dense, plane by plane:
//   host h -> its leaf      host_up(p, h)      (NIC egress: never drops)
//   leaf   -> host h        host_down(p, h)
//   leaf l -> spine s       leaf_up(p, l, s)
//   spine s -> leaf l       spine_down(p, s, l)
//
// Pure arithmetic, no state beyond the configuration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/link.h"

namespace softmrc::fabric {

// How a leaf reads a packet's EV to pick the spine.
enum class EvRouting : uint8_t {
  kHash,        // ECMP: a hash of the EV and both endpoints picks among the routed spines
  kStructured,  // the EV names the path (SRv6 uSID reading): spine = ev % spines
};
const char* ev_routing_name(EvRouting r);

struct TopologyConfig {
  uint32_t hosts = 16;
  uint32_t planes = 1;
  uint32_t radix = 8;           // ports per switch
  double oversubscription = 1;  // leaf host ports : leaf uplinks
  uint64_t host_link_mbps = 100'000;
  TimeNs host_link_delay_ns = 500;
  uint64_t fabric_link_mbps = 100'000;
  TimeNs fabric_link_delay_ns = 500;
  // Every switch output queue (the NIC queues are unbounded and never mark).
  uint64_t buffer_bytes = 256 << 10;
  uint64_t ecn_threshold_bytes = 64 << 10;
  uint64_t priority_buffer_bytes = 64 << 10;
  Overflow overflow = Overflow::kTrim;
  EvRouting ev_routing = EvRouting::kHash;
  TimeNs reroute_ns = 100'000;  // a failed link leaves the routing this long after it fails
  uint64_t hash_seed = 0;       // varies the ECMP hash
};

enum class LinkKind : uint8_t { kHostUp, kHostDown, kLeafUp, kSpineDown };

enum class SwitchTier : uint8_t { kLeaf, kSpine };
struct SwitchId {
  uint32_t plane = 0;
  SwitchTier tier = SwitchTier::kSpine;
  uint32_t index = 0;
};

// What a link id stands for. `host` is meaningful for host links, `spine`
// for leaf/spine links; `leaf` always.
struct LinkInfo {
  uint32_t plane = 0;
  LinkKind kind = LinkKind::kHostUp;
  uint32_t host = 0;
  uint32_t leaf = 0;
  uint32_t spine = 0;
};

class Topology {
 public:
  // nullptr on success, else a reason naming the field.
  const char* init(const TopologyConfig& cfg);

  const TopologyConfig& config() const { return cfg_; }
  uint32_t hosts() const { return cfg_.hosts; }
  uint32_t planes() const { return cfg_.planes; }
  uint32_t hosts_per_leaf() const { return hosts_per_leaf_; }
  uint32_t leaves() const { return leaves_; }
  uint32_t spines() const { return spines_; }
  uint32_t leaf_of(uint32_t host) const { return host / hosts_per_leaf_; }

  uint32_t num_links() const { return links_per_plane_ * cfg_.planes; }
  uint32_t links_per_plane() const { return links_per_plane_; }
  uint32_t host_up(uint32_t plane, uint32_t host) const { return base(plane) + host; }
  uint32_t host_down(uint32_t plane, uint32_t host) const {
    return base(plane) + cfg_.hosts + host;
  }
  uint32_t leaf_up(uint32_t plane, uint32_t leaf, uint32_t spine) const {
    return base(plane) + 2 * cfg_.hosts + leaf * spines_ + spine;
  }
  uint32_t spine_down(uint32_t plane, uint32_t spine, uint32_t leaf) const {
    return base(plane) + 2 * cfg_.hosts + leaves_ * spines_ + spine * leaves_ + leaf;
  }

  // Every link into or out of a switch (a leaf's include its host links).
  std::vector<uint32_t> switch_links(const SwitchId& sw) const;

  // Unloaded round trip between hosts on different leaves: a frame of
  // `data_bytes` out, one of `ack_bytes` back, store-and-forward at each hop.
  TimeNs base_rtt_ns(uint32_t data_bytes, uint32_t ack_bytes) const;

  LinkInfo info(uint32_t link) const;
  // "p0 leaf3->spine1", for traces and messages.
  std::string link_name(uint32_t link) const;
  // The queue configuration of a link: NIC egress or switch output.
  LinkConfig link_config(uint32_t link) const;

 private:
  uint32_t base(uint32_t plane) const { return plane * links_per_plane_; }

  TopologyConfig cfg_{};
  uint32_t hosts_per_leaf_ = 0;
  uint32_t leaves_ = 0;
  uint32_t spines_ = 0;
  uint32_t links_per_plane_ = 0;
};

}  // namespace softmrc::fabric
