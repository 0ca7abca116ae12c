// Links, forwarding by EV and the routing control plane; see fabric.h.
#include "fabric/fabric.h"

#include <algorithm>

namespace softmrc::fabric {

namespace {

constexpr uint32_t kNoSpine = UINT32_MAX;

// Uniform pick in [0, n) from the high bits of a hash.
uint32_t scale(uint64_t h, uint32_t n) {
  return static_cast<uint32_t>(((h >> 32) * n) >> 32);
}

}  // namespace

const char* Fabric::init(const TopologyConfig& cfg) {
  if (const char* why = topo_.init(cfg)) return why;
  links_.assign(topo_.num_links(), Link{});
  for (uint32_t id = 0; id < links_.size(); ++id)
    if (const char* why = links_[id].init(topo_.link_config(id))) return why;
  routed_.assign(links_.size(), 1);
  withdrawn_.assign(cfg.planes, 0);
  pending_.clear();
  return nullptr;
}

uint32_t Fabric::pick_spine(uint32_t plane, uint32_t src_leaf, uint32_t dst_leaf, uint32_t src,
                            uint32_t dst, uint32_t ev) const {
  const uint32_t spines = topo_.spines();
  if (topo_.config().ev_routing == EvRouting::kStructured) return ev % spines;
  // The 5-tuple of an MRC packet differs between flows only in the
  // addresses and the EV; each leaf hashes with its own seed.
  const uint64_t key = uint64_t{ev} << 32 | uint64_t{src} << 16 | dst;
  const uint64_t h = mix64(key ^ mix64(topo_.config().hash_seed + src_leaf));
  if (withdrawn_[plane] == 0) return scale(h, spines);
  uint32_t usable = 0;
  for (uint32_t s = 0; s < spines; ++s)
    usable +=
        routed(topo_.leaf_up(plane, src_leaf, s)) && routed(topo_.spine_down(plane, s, dst_leaf));
  if (usable == 0) return kNoSpine;
  uint32_t k = scale(h, usable);
  for (uint32_t s = 0; s < spines; ++s) {
    if (routed(topo_.leaf_up(plane, src_leaf, s)) && routed(topo_.spine_down(plane, s, dst_leaf)) &&
        k-- == 0)
      return s;
  }
  return kNoSpine;
}

bool Fabric::route(uint32_t plane, uint32_t src, uint32_t dst, uint32_t ev, Path* out) const {
  const uint32_t src_leaf = topo_.leaf_of(src);
  const uint32_t dst_leaf = topo_.leaf_of(dst);
  out->links[0] = topo_.host_up(plane, src);
  if (src_leaf == dst_leaf) {
    out->links[1] = topo_.host_down(plane, dst);
    out->hops = 2;
    return true;
  }
  const uint32_t spine = pick_spine(plane, src_leaf, dst_leaf, src, dst, ev);
  if (spine == kNoSpine) return false;
  out->links[1] = topo_.leaf_up(plane, src_leaf, spine);
  out->links[2] = topo_.spine_down(plane, spine, dst_leaf);
  out->links[3] = topo_.host_down(plane, dst);
  out->hops = 4;
  return true;
}

Verdict Fabric::transit(uint32_t plane, uint32_t src, uint32_t dst, PacketMeta& pkt, TimeNs now,
                        Rng& rng, uint32_t* drop_link) {
  Path path;
  if (!route(plane, src, dst, pkt.ev, &path)) {
    if (drop_link) *drop_link = topo_.host_up(plane, src);
    return Verdict{kNever, DropReason::kNoRoute};
  }
  Verdict v{now, DropReason::kNone};
  for (uint32_t i = 0; i < path.hops; ++i) {
    v = links_[path.links[i]].enqueue(pkt, v.at_ns, rng);
    if (!v.delivered()) {
      if (drop_link) *drop_link = path.links[i];
      break;
    }
  }
  return v;
}

void Fabric::set_link_up(uint32_t link, bool up, TimeNs now) {
  if (links_[link].up() == up) return;
  links_[link].set_up(up, now);
  const TimeNs at = now + topo_.config().reroute_ns;
  const RouteChange change{at, link, up};
  pending_.insert(std::upper_bound(
                      pending_.begin(), pending_.end(), change,
                      [](const RouteChange& a, const RouteChange& b) { return a.at_ns < b.at_ns; }),
                  change);
}

void Fabric::set_switch_up(const SwitchId& sw, bool up, TimeNs now) {
  for (uint32_t link : topo_.switch_links(sw)) set_link_up(link, up, now);
}

void Fabric::set_ev_blackholed(uint32_t plane, uint32_t ev, bool on) {
  for (uint32_t h = 0; h < topo_.hosts(); ++h)
    links_[topo_.host_up(plane, h)].set_ev_blackholed(ev, on);
}

void Fabric::advance(TimeNs now, std::vector<uint32_t>* changed) {
  size_t done = 0;
  for (; done < pending_.size() && pending_[done].at_ns <= now; ++done) {
    const RouteChange& c = pending_[done];
    if (routed(c.link) == c.up) continue;
    routed_[c.link] = c.up;
    if (changed) changed->push_back(c.link);
    const LinkKind kind = topo_.info(c.link).kind;
    if (kind == LinkKind::kLeafUp || kind == LinkKind::kSpineDown) {
      uint32_t& w = withdrawn_[c.link / topo_.links_per_plane()];
      w = c.up ? w - 1 : w + 1;
    }
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
}

}  // namespace softmrc::fabric
