// Fabric shape and link numbering; see topology.h.
#include "fabric/topology.h"

#include <cmath>
#include <cstdio>

namespace softmrc::fabric {

namespace {

constexpr uint32_t kMaxHosts = 1u << 16;
constexpr uint32_t kMaxPlanes = 32;  // one bit per port in a port-status mask
constexpr uint32_t kMaxRadix = 1024;

}  // namespace

const char* Topology::init(const TopologyConfig& cfg) {
  if (cfg.hosts < 2 || cfg.hosts > kMaxHosts) return "hosts: not 2..65536";
  if (cfg.planes < 1 || cfg.planes > kMaxPlanes) return "planes: not 1..32";
  if (cfg.radix < 2 || cfg.radix > kMaxRadix) return "radix: not 2..1024";
  if (!(cfg.oversubscription >= 0.1 && cfg.oversubscription <= 64))
    return "oversubscription: not 0.1..64";
  if (cfg.buffer_bytes < 1024) return "buffer_bytes: below 1 KiB";
  if (cfg.priority_buffer_bytes < 256) return "priority_buffer_bytes: below 256 bytes";
  if (cfg.ev_routing != EvRouting::kHash && cfg.ev_routing != EvRouting::kStructured)
    return "ev_routing: unknown";
  // Leaf ports: host ports : uplinks = oversubscription, at least one of each.
  const auto down = static_cast<uint32_t>(
      std::floor(cfg.radix * cfg.oversubscription / (1 + cfg.oversubscription)));
  if (down < 1 || down >= cfg.radix)
    return "oversubscription: leaves no host port or no uplink at this radix";
  const uint32_t leaves = (cfg.hosts + down - 1) / down;
  if (leaves > cfg.radix)
    return "hosts: more leaves than a spine has ports (raise radix or oversubscription)";
  cfg_ = cfg;
  hosts_per_leaf_ = down;
  leaves_ = leaves;
  spines_ = cfg.radix - down;
  links_per_plane_ = 2 * cfg.hosts + 2 * leaves_ * spines_;
  for (uint32_t id : {host_up(0, 0), host_down(0, 0), leaf_up(0, 0, 0), spine_down(0, 0, 0)})
    if (const char* why = validate(link_config(id))) return why;
  return nullptr;
}

std::vector<uint32_t> Topology::switch_links(const SwitchId& sw) const {
  std::vector<uint32_t> out;
  if (sw.tier == SwitchTier::kSpine) {
    for (uint32_t l = 0; l < leaves_; ++l) {
      out.push_back(leaf_up(sw.plane, l, sw.index));
      out.push_back(spine_down(sw.plane, sw.index, l));
    }
    return out;
  }
  for (uint32_t h = sw.index * hosts_per_leaf_;
       h < cfg_.hosts && h < (sw.index + 1) * hosts_per_leaf_; ++h) {
    out.push_back(host_up(sw.plane, h));
    out.push_back(host_down(sw.plane, h));
  }
  for (uint32_t s = 0; s < spines_; ++s) {
    out.push_back(leaf_up(sw.plane, sw.index, s));
    out.push_back(spine_down(sw.plane, s, sw.index));
  }
  return out;
}

TimeNs Topology::base_rtt_ns(uint32_t data_bytes, uint32_t ack_bytes) const {
  const auto ser_ns = [](uint64_t bytes, uint64_t mbps) { return bytes * 8'000 / mbps; };
  const uint64_t frames = uint64_t{data_bytes} + ack_bytes;
  return 4 * cfg_.host_link_delay_ns + 4 * cfg_.fabric_link_delay_ns +
         2 * ser_ns(frames, cfg_.host_link_mbps) + 2 * ser_ns(frames, cfg_.fabric_link_mbps);
}

LinkInfo Topology::info(uint32_t link) const {
  LinkInfo i;
  i.plane = link / links_per_plane_;
  uint32_t r = link % links_per_plane_;
  if (r < cfg_.hosts) {
    i.kind = LinkKind::kHostUp;
    i.host = r;
    i.leaf = leaf_of(r);
  } else if ((r -= cfg_.hosts) < cfg_.hosts) {
    i.kind = LinkKind::kHostDown;
    i.host = r;
    i.leaf = leaf_of(r);
  } else if ((r -= cfg_.hosts) < leaves_ * spines_) {
    i.kind = LinkKind::kLeafUp;
    i.leaf = r / spines_;
    i.spine = r % spines_;
  } else {
    r -= leaves_ * spines_;
    i.kind = LinkKind::kSpineDown;
    i.spine = r / leaves_;
    i.leaf = r % leaves_;
  }
  return i;
}

std::string Topology::link_name(uint32_t link) const {
  const LinkInfo i = info(link);
  char buf[64];
  switch (i.kind) {
    case LinkKind::kHostUp:
      std::snprintf(buf, sizeof buf, "p%u host%u->leaf%u", i.plane, i.host, i.leaf);
      break;
    case LinkKind::kHostDown:
      std::snprintf(buf, sizeof buf, "p%u leaf%u->host%u", i.plane, i.leaf, i.host);
      break;
    case LinkKind::kLeafUp:
      std::snprintf(buf, sizeof buf, "p%u leaf%u->spine%u", i.plane, i.leaf, i.spine);
      break;
    case LinkKind::kSpineDown:
      std::snprintf(buf, sizeof buf, "p%u spine%u->leaf%u", i.plane, i.spine, i.leaf);
      break;
  }
  return buf;
}

LinkConfig Topology::link_config(uint32_t link) const {
  LinkConfig c;
  const LinkKind kind = info(link).kind;
  const bool host_link = kind == LinkKind::kHostUp || kind == LinkKind::kHostDown;
  c.rate_mbps = host_link ? cfg_.host_link_mbps : cfg_.fabric_link_mbps;
  c.delay_ns = host_link ? cfg_.host_link_delay_ns : cfg_.fabric_link_delay_ns;
  if (kind != LinkKind::kHostUp) {  // a NIC holds back rather than drop: unbounded
    c.buffer_bytes = cfg_.buffer_bytes;
    c.ecn_threshold_bytes = cfg_.ecn_threshold_bytes;
    c.priority_buffer_bytes = cfg_.priority_buffer_bytes;
    c.overflow = cfg_.overflow;
  }
  return c;
}

}  // namespace softmrc::fabric
