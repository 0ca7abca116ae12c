// The in-process fabric (see fabric.h).
#include "softmrcd/fabric.h"

#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

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

// A decimal number as the configuration spells it, in [lo, hi].
bool parse_double(const std::string& s, double lo, double hi, double* out) {
  double v = 0;
  if (!cli::parse_decimal(s, &v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

bool Link::create(const Config& cfg, uint32_t index, std::string* err) {
  const LinkSpec& spec = cfg.links[index];
  spec_ = spec.fabric;
  ends_[0] = spec.a;
  ends_[1] = spec.b;
  index_ = index;
  num_planes_ = cfg.num_planes();
  path_mtu_ = cfg.path_mtu;
  lcore_ = spec.lcore;
  const std::string key = "links[" + std::to_string(index) + "]";
  HopEnd rx[2][engine::kMaxPlanes];
  HopEnd tx[2][engine::kMaxPlanes];
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
        (dir == 0 ? rx : tx)[side][p].ring = r;
      }
      const std::string port_name = "ring_" + ep + "_p" + std::to_string(p);
      const int port = rte_eth_from_rings(port_name.c_str(), &rx[side][p].ring, 1,
                                          &tx[side][p].ring, 1, SOCKET_ID_ANY);
      if (port < 0) {
        *err = key + ": cannot create port " + port_name + ": " + rte_strerror(rte_errno);
        return false;
      }
      ports_[side].push_back(static_cast<uint16_t>(port));
    }
  }
  if (!init(rx, tx, cfg.snapshot_ms, err)) {
    *err = key + *err;
    return false;
  }
  return true;
}

// A port's queue 0 is both ends: the hop out of its side receives from it,
// the hop into its side sends to it.
bool Link::join(uint32_t index, const LinkFabricSpec& spec,
                const std::vector<port::EthdevPort*> (&ports)[2], int lcore, uint32_t path_mtu,
                uint64_t snapshot_ms, std::string* err) {
  spec_ = spec;
  index_ = index;
  num_planes_ = static_cast<uint32_t>(spec.planes.size());
  path_mtu_ = path_mtu;
  lcore_ = lcore;
  HopEnd ends[2][engine::kMaxPlanes];
  for (int side = 0; side < 2; ++side) {
    for (uint32_t p = 0; p < num_planes_; ++p) {
      ports_[side].push_back(ports[side][p]->port_id());
      ends[side][p].port = ports[side][p];
    }
  }
  if (!init(ends, ends, snapshot_ms, err)) {
    *err = "links[" + std::to_string(index) + "]" + *err;
    return false;
  }
  return true;
}

// rx[side][p] is where side's plane p receives, tx[side][p] where it sends.
bool Link::init(const HopEnd (&rx)[2][engine::kMaxPlanes],
                const HopEnd (&tx)[2][engine::kMaxPlanes], uint64_t snapshot_ms, std::string* err) {
  snapshot_interval_ns_ = snapshot_ms * 1'000'000;
  schedule_origin_ns_ =
      spec_.schedule_from == LinkFabricSpec::ScheduleFrom::kStart ? 0 : kNoOriginYet;
  hops_ = std::vector<Hop>(size_t{num_planes_} * 2);
  const std::string req_name = "smrcd_l" + std::to_string(index_) + "_req";
  requests_ = rte_ring_create_elem(req_name.c_str(), sizeof(LinkEvent), kRequestSlots,
                                   SOCKET_ID_ANY, RING_F_SC_DEQ);
  if (requests_ == nullptr) {
    *err = ": cannot create ring " + req_name + ": " + rte_strerror(rte_errno);
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
      hc.corrupt = spec_.planes[p].corrupt;
      hc.corrupt_icrc = spec_.planes[p].corrupt_icrc;
      hc.delay_line_packets = spec_.delay_line_packets;
      hc.seed = fabric::mix64(spec_.seed ^ (uint64_t{index_} << 32 | p << 1 | dir));
      hc.srv6 = spec_.srv6;
      if (const char* why = hops_[p * 2 + dir].emu.init(hc)) {
        *err = std::string(".planes: ") + why;
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

// The ports are closed by their owners (the endpoints', smrc-fabric); the
// rings and the frames the hops hold go here, before the pools they came
// from.
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
// endpoints learn it as they would from a NIC; a PMD that cannot (memif)
// keeps its link up, and the plane only drops everything. False then.
bool Link::set_plane_up(uint32_t plane, bool up, uint64_t now_ns) {
  bool links_follow = true;
  for (int side = 0; side < 2; ++side) {
    const int ret = up ? rte_eth_dev_set_link_up(ports_[side][plane])
                       : rte_eth_dev_set_link_down(ports_[side][plane]);
    links_follow = links_follow && ret == 0;
  }
  for (uint32_t dir = 0; dir < 2; ++dir) hops_[plane * 2 + dir].emu.set_up(up, now_ns);
  return links_follow;
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
  bool links_follow = true;
  if (e.action == LinkAction::kDown || e.action == LinkAction::kUp) {
    const bool up = e.action == LinkAction::kUp;
    if (hops_[e.plane * 2].emu.state().up == up) {
      // Nothing to do, as for `ip link set down` twice; but said, as every
      // other change is, so that whoever asked sees that it arrived.
      log_change(e, up ? " (already up)" : " (already down)", now_ns);
      return;
    }
    links_follow = set_plane_up(e.plane, up, now_ns) || up;
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
        hop.set_rate_factor(e.value, now_ns);
        break;
      case LinkAction::kCorrupt:
        hop.set_corrupt(e.value);
        break;
      case LinkAction::kCorruptIcrc:
        hop.set_corrupt_icrc(e.corruption);
        break;
    }
  }
  ++plane_events_;
  if (was_in_service && !in_service(e.plane) &&
      trace_.mark(now_ns, static_cast<uint32_t>(faults_.size())))
    faults_.push_back(fault);
  log_change(e, links_follow ? "" : " (the ports' links stay up)", now_ns);
}

void Link::log_change(const LinkEvent& e, const char* note, uint64_t now_ns) {
  std::printf("%s: t=%.3fs link %u plane %u %s%s\n", program_, now_ns / 1e9, index_, e.plane,
              describe(e).c_str(), note);
  std::fflush(stdout);
}

void Link::start_schedule(uint64_t now_ns) {
  schedule_origin_ns_ = now_ns;
  std::printf("%s: t=%.3fs link %u: first frame, the schedule starts\n", program_, now_ns / 1e9,
              index_);
  std::fflush(stdout);
}

void Link::poll(uint64_t now_ns) {
  if (schedule_origin_ns_ != kNoOriginYet)
    while (next_event_ < spec_.schedule.size() &&
           spec_.schedule[next_event_].at_ns <= now_ns - schedule_origin_ns_)
      apply(spec_.schedule[next_event_++], now_ns);
  if (rte_ring_count(requests_) != 0) {
    LinkEvent e;
    while (rte_ring_sc_dequeue_elem(requests_, &e, sizeof(e)) == 0) apply(e, now_ns);
  }
  rte_mbuf* pkts[kBurst];
  uint64_t payload = 0;
  for (Hop& hop : hops_) {
    if (hop.from.port != nullptr) poll_port_link(hop, now_ns);
    for (int b = 0; b < kMaxBurstsPerPass; ++b) {
      const uint16_t n = hop.from.ring != nullptr
                             ? static_cast<uint16_t>(rte_ring_dequeue_burst(
                                   hop.from.ring, reinterpret_cast<void**>(pkts), kBurst, nullptr))
                             : hop.from.port->rx_burst(pkts, kBurst);
      if (n != 0 && schedule_origin_ns_ == kNoOriginYet) start_schedule(now_ns);
      hop.emu.admit(pkts, n, now_ns);
      if (n < kBurst) break;
    }
    const HopEnd to = hop.to;
    hop.emu.deliver(now_ns, [to](rte_mbuf** p, uint16_t n) {
      return to.ring != nullptr ? static_cast<uint16_t>(rte_ring_enqueue_burst(
                                      to.ring, reinterpret_cast<void**>(p), n, nullptr))
                                : to.port->tx_burst(p, n);
    });
    payload += hop.emu.payload_bytes();
  }
  trace_.add(now_ns, payload - payload_seen_);
  payload_seen_ = payload;
  if (now_ns >= next_snapshot_ns_) publish(now_ns);
}

void Link::finish(uint64_t now_ns) {
  for (Hop& h : hops_) h.emu.clear();
  trace_.finish(now_ns);
  publish(now_ns);
}

// A standalone link's ports are polled by nothing else: their links are
// read here too. A memif server whose client said farewell takes nothing
// until it has seen that client go and a new one come (a restarted
// endpoint), which only poll_link() notices.
void Link::poll_port_link(Hop& hop, uint64_t now_ns) {
  port::EthdevPort& port = *hop.from.port;
  if (!port.poll_link(rte_rdtsc())) return;
  const auto h = static_cast<uint32_t>(&hop - hops_.data());
  std::printf("%s: t=%.3fs link %u plane %u side %s: port %s %s\n", program_, now_ns / 1e9, index_,
              h / 2, h % 2 == 0 ? "a" : "b", port.name().c_str(),
              port.link_up()        ? "up"
              : port.peer_closing() ? "down (its peer closed)"
                                    : "down");
  std::fflush(stdout);
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
    case LinkAction::kCorrupt:
      std::snprintf(buf, sizeof(buf), "corrupt %g", e.value);
      break;
    case LinkAction::kCorruptIcrc:
      std::snprintf(buf, sizeof(buf), "corrupt_icrc %s",
                    fabric::corruption_icrc_name(e.corruption));
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
  if (direction == "both") {
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
  } else if (what == "corrupt") {
    if (!parse_double(value, 0, 1, &e.value)) {
      *err = "corrupt '" + value + "' is not a probability 0..1";
      return false;
    }
    e.action = LinkAction::kCorrupt;
  } else if (what == "corrupt_icrc") {
    if (value == fabric::corruption_icrc_name(fabric::Corruption::kBadIcrc)) {
      e.corruption = fabric::Corruption::kBadIcrc;
    } else if (value == fabric::corruption_icrc_name(fabric::Corruption::kRecomputedIcrc)) {
      e.corruption = fabric::Corruption::kRecomputedIcrc;
    } else {
      *err = "corrupt_icrc '" + value + "' is not keep or recompute";
      return false;
    }
    e.action = LinkAction::kCorruptIcrc;
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
    *err = "'" + what +
           "' is not state, loss, blackhole, blackhole_ev, restore_ev, rate_factor, corrupt or "
           "corrupt_icrc";
    return false;
  }
  *out = e;
  return true;
}

void link_rows(Link& l, Report* out) {
  LinkSnapshot s;
  l.snapshot().read([&](const LinkSnapshot& x) { s = x; });
  for (uint32_t p = 0; p < l.num_planes(); ++p) {
    Row r{"link" + std::to_string(l.index()) + "/" + std::to_string(p), {}};
    r.num("up", s.up_mask >> p & 1);
    r.num("base_rtt_ns", l.base_rtt_ns(p));
    for (int dir = 0; dir < 2; ++dir) {
      const HopCounters& h = s.hops[p * 2 + dir];
      const HopState& st = s.states[p * 2 + dir];
      const std::string k = dir == 0 ? "a_to_b_" : "b_to_a_";
      r.num(k + "packets", h.packets);
      r.num(k + "bytes", h.bytes);
      r.num(k + "payload_bytes", h.payload_bytes);
      r.num(k + "ce_marks", h.ce_marks);
      r.num(k + "trims", h.trims);
      r.num(k + "corrupted", h.corrupted);
      r.num(k + "corrupt_skipped_chained", h.corrupt_skipped_chained);
      r.num(k + "drops", h.total_drops());
      for (size_t i = 1; i < h.drops.size(); ++i) {
        if (fabric::DropReason(i) == fabric::DropReason::kNoRoute) continue;  // no routing here
        r.num(k + "drop_" + fabric::drop_reason_name(fabric::DropReason(i)), h.drops[i]);
      }
      for (size_t i = 0; i < h.hop_drops.size(); ++i)
        r.num(k + "drop_" + hop_drop_name(HopDrop(i)), h.hop_drops[i]);
      r.num(k + "max_delay_line", h.max_held_packets);
      r.num(k + "max_backlog_bytes", h.max_backlog_bytes);
      r.text(k + "loss", number_text(st.loss));
      r.num(k + "blackhole", st.blackhole);
      r.num(k + "blackholed_evs", st.blackholed_evs);
      r.text(k + "rate_factor", number_text(st.rate_factor));
      r.text(k + "corrupt", number_text(st.corrupt));
      r.text(k + "corrupt_icrc", fabric::corruption_icrc_name(st.corrupt_icrc));
    }
    out->push_back(std::move(r));
  }
}

bool request_link_change(const std::vector<std::unique_ptr<Link>>& links,
                         const std::vector<std::string>& args, Report* out, std::string* err) {
  uint32_t link = 0, plane = 0;
  if (args.size() < 4 || args.size() > 5 || !parse_u32(args[0], &link) ||
      !parse_u32(args[1], &plane)) {
    *err = "expected <link>,<plane>,<what>,<value>[,<direction>]";
    return false;
  }
  if (link >= links.size()) {
    *err = "no link " + args[0] + " (there are " + std::to_string(links.size()) + ")";
    return false;
  }
  Link& l = *links[link];
  if (plane >= l.num_planes()) {
    *err = "no plane " + args[1] + " (planes are 0.." + std::to_string(l.num_planes() - 1) + ")";
    return false;
  }
  LinkEvent e;
  if (!parse_link_change(args[2], args[3], args.size() == 5 ? args[4] : "both", &e, err))
    return false;
  e.plane = static_cast<uint8_t>(plane);
  if (!l.request(e)) {
    *err = "link " + args[0] + " has too many changes waiting";
    return false;
  }
  out->clear();
  // Named as /softmrc/links names the plane's row, however the numbers
  // were spelt ("00").
  Row r{"link" + std::to_string(link) + "/" + std::to_string(plane), {}};
  r.text("requested", describe(e));
  out->push_back(std::move(r));
  return true;
}

// Per plane over the interval: the rate it carried (both directions), the
// faults in force, and what it trimmed, marked and dropped.
std::string link_status(const LinkSnapshot& s, const LinkSnapshot& before, uint64_t dt) {
  std::string line;
  char buf[96];
  for (size_t p = 0; p * 2 < s.hops.size(); ++p) {
    uint64_t carried = 0, trims = 0, ce = 0, drops = 0, corrupted = 0;
    bool blackhole = false, recompute = false;
    double loss = 0, rate_factor = 1, corrupt = 0;
    for (size_t h = p * 2; h < p * 2 + 2; ++h) {
      carried += s.hops[h].bytes - before.hops[h].bytes;
      trims += s.hops[h].trims - before.hops[h].trims;
      ce += s.hops[h].ce_marks - before.hops[h].ce_marks;
      drops += s.hops[h].total_drops() - before.hops[h].total_drops();
      corrupted += s.hops[h].corrupted - before.hops[h].corrupted;
      blackhole = blackhole || s.states[h].blackhole || s.states[h].blackholed_evs != 0;
      loss = std::max(loss, s.states[h].loss);
      rate_factor = std::min(rate_factor, s.states[h].rate_factor);
      if (s.states[h].corrupt > 0) {
        corrupt = std::max(corrupt, s.states[h].corrupt);
        recompute = recompute || s.states[h].corrupt_icrc == fabric::Corruption::kRecomputedIcrc;
      }
    }
    if (!line.empty()) line += " | ";
    if (!(s.up_mask >> p & 1)) {
      std::snprintf(buf, sizeof(buf), "p%zu down", p);
      line += buf;
      continue;
    }
    std::snprintf(buf, sizeof(buf), "p%zu %.2f Gb/s", p, gbps(carried, dt));
    line += buf;
    const auto count = [&](const char* what, uint64_t n) {
      if (n == 0) return;
      std::snprintf(buf, sizeof(buf), " %s %" PRIu64, what, n);
      line += buf;
    };
    count("trims", trims);
    count("ce", ce);
    count("drops", drops);
    count("corrupted", corrupted);
    if (blackhole) line += " blackhole";
    if (loss > 0) {
      std::snprintf(buf, sizeof(buf), " loss %g", loss);
      line += buf;
    }
    if (rate_factor < 1) {
      std::snprintf(buf, sizeof(buf), " rate x%g", rate_factor);
      line += buf;
    }
    if (corrupt > 0) {
      std::snprintf(buf, sizeof(buf), " corrupt %g%s", corrupt, recompute ? " recompute" : "");
      line += buf;
    }
  }
  return line;
}

HopCounters sum_hops(const std::vector<HopCounters>& hops) {
  HopCounters t;
  for (const HopCounters& h : hops) {
    t.packets += h.packets;
    t.bytes += h.bytes;
    t.payload_bytes += h.payload_bytes;
    t.trims += h.trims;
    t.ce_marks += h.ce_marks;
    t.corrupted += h.corrupted;
    t.corrupt_skipped_chained += h.corrupt_skipped_chained;
    for (size_t i = 0; i < t.drops.size(); ++i) t.drops[i] += h.drops[i];
    for (size_t i = 0; i < t.hop_drops.size(); ++i) t.hop_drops[i] += h.hop_drops[i];
  }
  return t;
}

// Drop reasons only where they happened.
std::string hop_totals(const HopCounters& c) {
  std::string reasons;
  const auto reason = [&](const char* name, uint64_t n) {
    if (n == 0) return;
    reasons += (reasons.empty() ? " (" : ", ") + std::string(name) + " " + std::to_string(n);
  };
  for (size_t i = 1; i < c.drops.size(); ++i)
    reason(fabric::drop_reason_name(fabric::DropReason(i)), c.drops[i]);
  for (size_t i = 0; i < c.hop_drops.size(); ++i) reason(hop_drop_name(HopDrop(i)), c.hop_drops[i]);
  if (!reasons.empty()) reasons += ")";
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "delivered %" PRIu64 " packets (%.1f MiB of payload), trimmed %" PRIu64
                ", CE-marked %" PRIu64 ", dropped %" PRIu64,
                c.packets, c.payload_bytes / 1048576.0, c.trims, c.ce_marks, c.total_drops());
  std::string corrupted;
  if (c.corrupted != 0) corrupted = "; corrupted " + std::to_string(c.corrupted);
  if (c.corrupt_skipped_chained != 0)
    corrupted += "; " + std::to_string(c.corrupt_skipped_chained) +
                 " chained frames drawn for corruption left whole";
  return buf + reasons + corrupted;
}

}  // namespace softmrc::softmrcd
