// The in-process fabric (see fabric.h).
#include "softmrcd/fabric.h"

#include <rte_eth_ring.h>
#include <rte_ethdev.h>

#include <cstdio>

namespace softmrc::softmrcd {

namespace {

constexpr uint16_t kBurst = 32;

}  // namespace

bool Link::create(const Config& cfg, uint32_t index, std::string* err) {
  spec_ = cfg.links[index];
  index_ = index;
  num_planes_ = cfg.num_planes();
  lcore_ = spec_.lcore;
  snapshot_interval_ns_ = cfg.snapshot_ms * 1'000'000;
  hops_.assign(size_t{num_planes_} * 2, Hop{});
  rte_ring* rx[2][engine::kMaxPlanes];
  rte_ring* tx[2][engine::kMaxPlanes];
  for (int side = 0; side < 2; ++side) {
    const std::string& ep = cfg.endpoints[endpoint(side)].name;
    for (uint32_t p = 0; p < num_planes_; ++p) {
      for (int dir = 0; dir < 2; ++dir) {
        const std::string name = "smrcd_l" + std::to_string(index) + "_" + std::to_string(side) +
                                 "_" + std::to_string(p) + (dir == 0 ? "rx" : "tx");
        rte_ring* r = rte_ring_create(name.c_str(), cfg.link_ring, SOCKET_ID_ANY,
                                      RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (r == nullptr) {
          *err = "links[" + std::to_string(index) + "]: cannot create ring " + name + ": " +
                 rte_strerror(rte_errno);
          return false;
        }
        rings_.push_back(r);
        (dir == 0 ? rx : tx)[side][p] = r;
      }
      const std::string port_name = "ring_" + ep + "_p" + std::to_string(p);
      const int port =
          rte_eth_from_rings(port_name.c_str(), &rx[side][p], 1, &tx[side][p], 1, SOCKET_ID_ANY);
      if (port < 0) {
        *err = "links[" + std::to_string(index) + "]: cannot create port " + port_name + ": " +
               rte_strerror(rte_errno);
        return false;
      }
      ports_[side].push_back(static_cast<uint16_t>(port));
    }
  }
  for (uint32_t p = 0; p < num_planes_; ++p) {
    hops_[p * 2 + 0].from = tx[0][p];
    hops_[p * 2 + 0].to = rx[1][p];
    hops_[p * 2 + 1].from = tx[1][p];
    hops_[p * 2 + 1].to = rx[0][p];
  }
  up_mask_ = num_planes_ == 32 ? UINT32_MAX : (1u << num_planes_) - 1;
  wanted_mask_.store(up_mask_);
  LinkSnapshot proto;
  proto.hops.assign(hops_.size(), HopCounters{});
  proto.up_mask = up_mask_;
  snapshot_.init(proto);
  return true;
}

// The ring ports are closed with the endpoints' ports; the rings go here.
void Link::destroy() {
  for (rte_ring* r : rings_) {
    rte_mbuf* pkts[kBurst];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(pkts), kBurst, nullptr)) > 0)
      rte_pktmbuf_free_bulk(pkts, n);
    rte_ring_free(r);
  }
  rings_.clear();
}

void Link::set_plane_up(uint32_t plane, bool up) {
  const uint32_t bit = 1u << plane;
  if (up)
    wanted_mask_.fetch_or(bit, std::memory_order_release);
  else
    wanted_mask_.fetch_and(~bit, std::memory_order_release);
}

// A plane that goes down takes both ports' links down with it, so the
// endpoints learn it as they would from a NIC.
void Link::apply_planes(uint32_t wanted, uint64_t now_ns) {
  const uint32_t changed = wanted ^ up_mask_;
  for (uint32_t p = 0; p < num_planes_; ++p) {
    if (!(changed >> p & 1)) continue;
    const bool up = wanted >> p & 1;
    for (int side = 0; side < 2; ++side) {
      const uint16_t port = ports_[side][p];
      if (up)
        rte_eth_dev_set_link_up(port);
      else
        rte_eth_dev_set_link_down(port);
    }
    ++plane_events_;
    std::printf("softmrcd: t=%.3fs link %u plane %u %s\n", now_ns / 1e9, index_, p,
                up ? "up" : "down");
    std::fflush(stdout);
  }
  up_mask_ = wanted;
}

void Link::forward(Hop& hop, bool plane_up, rte_mbuf** pkts, uint16_t n, uint64_t) {
  if (!plane_up) {
    rte_pktmbuf_free_bulk(pkts, n);
    hop.counters.dropped_down += n;
    return;
  }
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < n; ++i) bytes += pkts[i]->pkt_len;
  const unsigned sent = rte_ring_enqueue_burst(hop.to, reinterpret_cast<void**>(pkts), n, nullptr);
  if (sent < n) {
    for (unsigned i = sent; i < n; ++i) bytes -= pkts[i]->pkt_len;
    rte_pktmbuf_free_bulk(pkts + sent, n - sent);
    hop.counters.dropped_full += n - sent;
  }
  hop.counters.packets += sent;
  hop.counters.bytes += bytes;
}

void Link::poll(uint64_t now_ns) {
  while (next_event_ < spec_.schedule.size() && spec_.schedule[next_event_].at_ns <= now_ns) {
    const LinkEvent& e = spec_.schedule[next_event_++];
    set_plane_up(e.plane, e.up);
  }
  const uint32_t wanted = wanted_mask_.load(std::memory_order_acquire);
  if (wanted != up_mask_) apply_planes(wanted, now_ns);

  rte_mbuf* pkts[kBurst];
  for (size_t h = 0; h < hops_.size(); ++h) {
    Hop& hop = hops_[h];
    const unsigned n =
        rte_ring_dequeue_burst(hop.from, reinterpret_cast<void**>(pkts), kBurst, nullptr);
    if (n > 0) forward(hop, up_mask_ >> (h / 2) & 1, pkts, static_cast<uint16_t>(n), now_ns);
  }
  if (now_ns >= next_snapshot_ns_) publish(now_ns);
}

void Link::publish(uint64_t now_ns) {
  LinkSnapshot& s = snapshot_.back();
  s.at_ns = now_ns;
  s.up_mask = up_mask_;
  s.plane_events = plane_events_;
  for (size_t h = 0; h < hops_.size(); ++h) s.hops[h] = hops_[h].counters;
  snapshot_.publish();
  next_snapshot_ns_ = now_ns + snapshot_interval_ns_;
}

}  // namespace softmrc::softmrcd
