// The in-process fabric (see fabric.h).
#include "softmrcd/fabric.h"

#include <rte_eth_ring.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli/number.h"

#include "fabric/rng.h"

namespace softmrc::softmrcd {

namespace {

// A sender may put several bursts on its ring per pass; take them all.
constexpr int kMaxBurstsPerPass = 4;
constexpr unsigned kRequestSlots = 64;
static_assert(sizeof(LinkEvent) % 4 == 0, "rte_ring elements are whole 32-bit words");

// Frames used for the base RTT: a full IPv6 data frame's headers and ICRC
// on top of the MTU, and an IPv6 ACK.
constexpr uint64_t kDataOverheadBytes = 110;
constexpr uint64_t kAckFrameBytes = 130;

// Goodput bins of about half a base RTT; a capture spans 50 ms before a
// plane fails and 100 ms after.
constexpr uint64_t kMinBinNs = 50'000;
constexpr uint64_t kMaxBinNs = 1'000'000;
constexpr uint64_t kCaptureBeforeNs = 50'000'000;
constexpr uint64_t kCaptureAfterNs = 100'000'000;
constexpr uint32_t kMaxCaptures = 4;

const char* direction_name(LinkDirection d) {
  switch (d) {
    case LinkDirection::kBoth:
      return "both";
    case LinkDirection::kAToB:
      return "a_to_b";
    case LinkDirection::kBToA:
      return "b_to_a";
  }
  return "?";
}

bool parse_double(const std::string& s, double lo, double hi, double* out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

}  // namespace

bool Link::create(const Config& cfg, uint32_t index, std::string* err) {
  spec_ = cfg.links[index];
  index_ = index;
  num_planes_ = cfg.num_planes();
  path_mtu_ = cfg.path_mtu;
  lcore_ = spec_.lcore;
  snapshot_interval_ns_ = cfg.snapshot_ms * 1'000'000;
  const std::string key = "links[" + std::to_string(index) + "]";
  hops_ = std::vector<Hop>(size_t{num_planes_} * 2);
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
          *err = key + ": cannot create ring " + name + ": " + rte_strerror(rte_errno);
          return false;
        }
        rings_.push_back(r);
        (dir == 0 ? rx : tx)[side][p] = r;
      }
      const std::string port_name = "ring_" + ep + "_p" + std::to_string(p);
      const int port =
          rte_eth_from_rings(port_name.c_str(), &rx[side][p], 1, &tx[side][p], 1, SOCKET_ID_ANY);
      if (port < 0) {
        *err = key + ": cannot create port " + port_name + ": " + rte_strerror(rte_errno);
        return false;
      }
      ports_[side].push_back(static_cast<uint16_t>(port));
    }
  }
  const std::string req_name = "smrcd_l" + std::to_string(index) + "_req";
  requests_ = rte_ring_create_elem(req_name.c_str(), sizeof(LinkEvent), kRequestSlots,
                                   SOCKET_ID_ANY, RING_F_SC_DEQ);
  if (requests_ == nullptr) {
    *err = key + ": cannot create ring " + req_name + ": " + rte_strerror(rte_errno);
    return false;
  }
  uint64_t min_rtt_ns = UINT64_MAX;
  for (uint32_t p = 0; p < num_planes_; ++p) {
    hops_[p * 2 + 0].from = tx[0][p];
    hops_[p * 2 + 0].to = rx[1][p];
    hops_[p * 2 + 1].from = tx[1][p];
    hops_[p * 2 + 1].to = rx[0][p];
    for (uint32_t dir = 0; dir < 2; ++dir) {
      HopConfig hc;
      hc.link = spec_.planes[p].link;
      hc.loss = spec_.planes[p].loss;
      hc.delay_line_packets = spec_.delay_line_packets;
      hc.seed = fabric::mix64(spec_.seed ^ (uint64_t{index} << 32 | p << 1 | dir));
      if (const char* why = hops_[p * 2 + dir].emu.init(hc)) {
        *err = key + ".planes: " + why;
        return false;
      }
    }
    min_rtt_ns = std::min(min_rtt_ns, base_rtt_ns(p));
  }
  const uint64_t bin_ns = std::clamp(min_rtt_ns / 2, kMinBinNs, kMaxBinNs);
  trace_.init(bin_ns, static_cast<uint32_t>(kCaptureBeforeNs / bin_ns),
              static_cast<uint32_t>(kCaptureAfterNs / bin_ns), kMaxCaptures);
  faults_.reserve(kMaxCaptures);
  LinkSnapshot proto;
  proto.hops.assign(hops_.size(), HopCounters{});
  proto.states.assign(hops_.size(), HopState{});
  proto.up_mask = num_planes_ == 32 ? UINT32_MAX : (1u << num_planes_) - 1;
  snapshot_.init(proto);
  return true;
}

// The ring ports are closed with the endpoints' ports; the rings and the
// frames the hops hold go here, before the pools they came from.
void Link::destroy() {
  for (Hop& h : hops_) h.emu.clear();
  for (rte_ring* r : rings_) {
    rte_mbuf* pkts[kBurst];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(pkts), kBurst, nullptr)) > 0)
      rte_pktmbuf_free_bulk(pkts, n);
    rte_ring_free(r);
  }
  rings_.clear();
  rte_ring_free(requests_);
  requests_ = nullptr;
}

uint64_t Link::base_rtt_ns(uint32_t plane) const {
  const fabric::LinkConfig& c = spec_.planes[plane].link;
  const uint64_t bits = (path_mtu_ + kDataOverheadBytes + kAckFrameBytes) * 8;
  return 2 * c.delay_ns + (bits * 1000 + c.rate_mbps - 1) / c.rate_mbps;
}

bool Link::request(const LinkEvent& e) {
  LinkEvent copy = e;  // DPDK takes a non-const table
  return rte_ring_mp_enqueue_elem(requests_, &copy, sizeof(copy)) == 0;
}

bool Link::in_service(uint32_t plane) const {
  for (uint32_t dir = 0; dir < 2; ++dir) {
    const HopState s = hops_[plane * 2 + dir].emu.state();
    if (!s.up || s.blackhole) return false;
  }
  return true;
}

double Link::capacity_mbps(uint32_t plane) const {
  if (!in_service(plane)) return 0;
  const double factor = std::min(hops_[plane * 2].emu.state().rate_factor,
                                 hops_[plane * 2 + 1].emu.state().rate_factor);
  return static_cast<double>(spec_.planes[plane].link.rate_mbps) * factor;
}

// A plane that goes down takes both ports' links down with it, so the
// endpoints learn it as they would from a NIC.
void Link::set_plane_up(uint32_t plane, bool up, uint64_t now_ns) {
  for (int side = 0; side < 2; ++side) {
    if (up)
      rte_eth_dev_set_link_up(ports_[side][plane]);
    else
      rte_eth_dev_set_link_down(ports_[side][plane]);
  }
  for (uint32_t dir = 0; dir < 2; ++dir) hops_[plane * 2 + dir].emu.set_up(up, now_ns);
}

void Link::apply(const LinkEvent& e, uint64_t now_ns) {
  if (e.plane >= num_planes_) return;
  const bool was_in_service = in_service(e.plane);
  PlaneFault fault{e.plane, e.action == LinkAction::kBlackholeOn, 0, 0};
  double capacity = 0;
  for (uint32_t p = 0; p < num_planes_; ++p) {
    fault.planes_before = static_cast<uint8_t>(fault.planes_before + in_service(p));
    capacity += capacity_mbps(p);
  }
  if (capacity > 0) fault.surviving_share = 1 - capacity_mbps(e.plane) / capacity;
  if (e.action == LinkAction::kDown || e.action == LinkAction::kUp) {
    const bool up = e.action == LinkAction::kUp;
    if (hops_[e.plane * 2].emu.state().up == up) return;
    set_plane_up(e.plane, up, now_ns);
  }
  for (uint32_t dir = 0; dir < 2; ++dir) {
    if ((e.direction == LinkDirection::kAToB && dir == 1) ||
        (e.direction == LinkDirection::kBToA && dir == 0))
      continue;
    EmulatedHop& hop = hops_[e.plane * 2 + dir].emu;
    switch (e.action) {
      case LinkAction::kDown:
      case LinkAction::kUp:
        break;
      case LinkAction::kLoss:
        hop.set_loss(e.value);
        break;
      case LinkAction::kBlackholeOn:
      case LinkAction::kBlackholeOff:
        hop.set_blackhole(e.action == LinkAction::kBlackholeOn);
        break;
      case LinkAction::kEvBlackholeOn:
      case LinkAction::kEvBlackholeOff:
        hop.set_ev_blackholed(e.ev, e.action == LinkAction::kEvBlackholeOn);
        break;
      case LinkAction::kRateFactor:
        hop.set_rate_factor(e.value);
        break;
    }
  }
  ++plane_events_;
  if (was_in_service && !in_service(e.plane) &&
      trace_.mark(now_ns, static_cast<uint32_t>(faults_.size())))
    faults_.push_back(fault);
  std::printf("softmrcd: t=%.3fs link %u plane %u %s\n", now_ns / 1e9, index_, e.plane,
              describe(e).c_str());
  std::fflush(stdout);
}

void Link::poll(uint64_t now_ns) {
  while (next_event_ < spec_.schedule.size() && spec_.schedule[next_event_].at_ns <= now_ns)
    apply(spec_.schedule[next_event_++], now_ns);
  if (rte_ring_count(requests_) != 0) {
    LinkEvent e;
    while (rte_ring_sc_dequeue_elem(requests_, &e, sizeof(e)) == 0) apply(e, now_ns);
  }
  rte_mbuf* pkts[kBurst];
  uint64_t payload = 0;
  for (Hop& hop : hops_) {
    for (int b = 0; b < kMaxBurstsPerPass; ++b) {
      const unsigned n =
          rte_ring_dequeue_burst(hop.from, reinterpret_cast<void**>(pkts), kBurst, nullptr);
      hop.emu.admit(pkts, static_cast<uint16_t>(n), now_ns);
      if (n < kBurst) break;
    }
    hop.emu.deliver(now_ns, [&hop](rte_mbuf** p, uint16_t n) {
      return static_cast<uint16_t>(
          rte_ring_enqueue_burst(hop.to, reinterpret_cast<void**>(p), n, nullptr));
    });
    payload += hop.emu.payload_bytes();
  }
  trace_.add(now_ns, payload - payload_seen_);
  payload_seen_ = payload;
  if (now_ns >= next_snapshot_ns_) publish(now_ns);
}

void Link::publish(uint64_t now_ns) {
  LinkSnapshot& s = snapshot_.back();
  s.at_ns = now_ns;
  s.up_mask = 0;
  for (uint32_t p = 0; p < num_planes_; ++p)
    s.up_mask |= uint32_t{hops_[p * 2].emu.state().up} << p;
  s.plane_events = plane_events_;
  for (size_t h = 0; h < hops_.size(); ++h) {
    s.hops[h] = hops_[h].emu.counters();
    s.states[h] = hops_[h].emu.state();
  }
  snapshot_.publish();
  next_snapshot_ns_ = now_ns + snapshot_interval_ns_;
}

std::string describe(const LinkEvent& e) {
  char buf[96];
  switch (e.action) {
    case LinkAction::kDown:
      return "down";
    case LinkAction::kUp:
      return "up";
    case LinkAction::kLoss:
      std::snprintf(buf, sizeof(buf), "loss %g", e.value);
      break;
    case LinkAction::kBlackholeOn:
      std::snprintf(buf, sizeof(buf), "blackhole on");
      break;
    case LinkAction::kBlackholeOff:
      std::snprintf(buf, sizeof(buf), "blackhole off");
      break;
    case LinkAction::kEvBlackholeOn:
      std::snprintf(buf, sizeof(buf), "ev %u blackholed", e.ev);
      break;
    case LinkAction::kEvBlackholeOff:
      std::snprintf(buf, sizeof(buf), "ev %u restored", e.ev);
      break;
    case LinkAction::kRateFactor:
      std::snprintf(buf, sizeof(buf), "rate_factor %g", e.value);
      break;
  }
  std::string s = buf;
  if (e.direction != LinkDirection::kBoth)
    s += std::string(" (") + direction_name(e.direction) + ")";
  return s;
}

bool parse_link_change(const std::string& what, const std::string& value,
                       const std::string& direction, LinkEvent* out, std::string* err) {
  LinkEvent e;
  if (direction.empty() || direction == "both") {
    e.direction = LinkDirection::kBoth;
  } else if (direction == "a_to_b") {
    e.direction = LinkDirection::kAToB;
  } else if (direction == "b_to_a") {
    e.direction = LinkDirection::kBToA;
  } else {
    *err = "direction '" + direction + "' is not both, a_to_b or b_to_a";
    return false;
  }
  if (what == "state") {
    if (value != "up" && value != "down") {
      *err = "state '" + value + "' is not up or down";
      return false;
    }
    if (e.direction != LinkDirection::kBoth) {
      *err = "a plane goes down or up in both directions";
      return false;
    }
    e.action = value == "up" ? LinkAction::kUp : LinkAction::kDown;
  } else if (what == "loss") {
    if (!parse_double(value, 0, 1, &e.value)) {
      *err = "loss '" + value + "' is not a probability 0..1";
      return false;
    }
    e.action = LinkAction::kLoss;
  } else if (what == "rate_factor") {
    if (!parse_double(value, 0.001, 1, &e.value)) {
      *err = "rate_factor '" + value + "' is not 0.001..1";
      return false;
    }
    e.action = LinkAction::kRateFactor;
  } else if (what == "blackhole") {
    if (value != "on" && value != "off") {
      *err = "blackhole '" + value + "' is not on or off";
      return false;
    }
    e.action = value == "on" ? LinkAction::kBlackholeOn : LinkAction::kBlackholeOff;
  } else if (what == "blackhole_ev" || what == "restore_ev") {
    uint64_t ev = 0;
    if (!cli::parse_uint(value, 0, 65535, &ev)) {
      *err = "EV '" + value + "' is not a UDP source port 0..65535";
      return false;
    }
    e.ev = static_cast<uint32_t>(ev);
    e.action = what == "blackhole_ev" ? LinkAction::kEvBlackholeOn : LinkAction::kEvBlackholeOff;
  } else {
    *err = "'" + what + "' is not state, loss, blackhole, blackhole_ev, restore_ev or rate_factor";
    return false;
  }
  *out = e;
  return true;
}

}  // namespace softmrc::softmrcd
