// Reading and validating softmrcd's YAML configuration (see config.h),
// through the Map of config_reader.h. The first problem ends the load.
#include "softmrcd/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <iterator>
#include <utility>

#include "softmrcd/config_reader.h"

#include "control/profiles.h"
#include "engine/qp_attr.h"
#include "wire/headers.h"
#include "wire/usid.h"

namespace softmrc::softmrcd {

namespace {

// Checked again against the EAL at setup; this only bounds the number.
constexpr uint64_t kMaxMbufCache = 512;  // RTE_MEMPOOL_CACHE_MAX_SIZE
// The most limits.max_mpr and limits.max_wimm may be.
constexpr uint64_t kMaxMprLimit = 64;
constexpr uint64_t kMaxWimmLimit = 65535;

// Six pairs of hex digits between colons: no sign, space or 0x.
bool parse_mac(const std::string& s, wire::MacAddr* out) {
  if (s.size() != 17) return false;
  for (size_t i = 0; i < 6; ++i) {
    const char* at = s.data() + 3 * i;
    if (i < 5 && at[2] != ':') return false;
    if (!std::isxdigit(static_cast<unsigned char>(at[0])) ||
        !std::isxdigit(static_cast<unsigned char>(at[1])))
      return false;
    std::from_chars(at, at + 2, out->bytes[i], 16);
  }
  return true;
}

// Key `k` of `m` (its default when absent) may be at most `limit`, the
// value of `limit_key`: checked on the value that applies, not only on
// one written in the file, so that the engine never refuses it later.
void check_at_most(Map& m, const char* k, uint64_t value, const std::string& limit_key,
                   uint64_t limit) {
  if (value <= limit) return;
  fail(m.key(k), std::to_string(value) + (m.has(k) ? "" : " (the default)") + " is above " +
                     limit_key + " (" + std::to_string(limit) + ")");
}

void read_ip(Map& m, PlaneSpec* p) {
  const std::string s = m.required_string("ip");
  if (inet_pton(AF_INET6, s.c_str(), p->ip) == 1) {
    p->ip_version = wire::IpVersion::kV6;
  } else if (inet_pton(AF_INET, s.c_str(), p->ip) == 1) {
    p->ip_version = wire::IpVersion::kV4;
  } else {
    fail(m.key("ip"), "'" + s + "' is not an IPv4 or IPv6 address");
  }
}

std::string ip_text(const PlaneSpec& p) {
  char text[INET6_ADDRSTRLEN] = "";
  inet_ntop(p.ip_version == wire::IpVersion::kV4 ? AF_INET : AF_INET6, p.ip, text, sizeof(text));
  return text;
}

// Why endpoints `x` and `y` cannot talk: their EV modes differ.
std::string modes_differ(const EndpointSpec& x, const EndpointSpec& y) {
  return "'" + x.name + "' has ev_mode " + wire::ev_mode_name(x.ev_mode) + ", but '" + y.name +
         "' has " + wire::ev_mode_name(y.ev_mode);
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 31) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

void read_endpoint(const YAML::Node& node, const std::string& key, bool hosted, EndpointSpec* e) {
  Map m(node, key);
  e->key = key;
  e->hosted = hosted;
  e->name = m.required_string("name");
  if (!valid_name(e->name))
    fail(m.key("name"), "'" + e->name + "' is not a name (1-31 letters, digits, '-' or '_')");
  if (hosted) m.uint("lcore", 0, kMaxLcoreId, &e->lcore);
  if (hosted && m.has("app_socket")) {
    e->app_socket = m.string("app_socket");
    if (e->app_socket.empty() || e->app_socket.size() > kMaxAppSocketPath)
      fail(m.key("app_socket"),
           "needs a path of 1.." + std::to_string(kMaxAppSocketPath) + " characters");
  }
  read_ev_mode(m, &e->ev_mode);
  const YAML::Node planes = m.list("planes");
  if (planes.size() == 0 || planes.size() > engine::kMaxPlanes)
    fail(m.key("planes"), "needs 1.." + std::to_string(engine::kMaxPlanes) + " planes");
  for (size_t i = 0; i < planes.size(); ++i) {
    PlaneSpec p;
    Map pm(planes[i], index_key(m.key("planes"), i));
    if (hosted) {
      p.port = pm.string("port");
      pm.uint("lcore", 0, kMaxLcoreId, &p.lcore);
      if (p.lcore != kAnyLcore && e->lcore == kAnyLcore)
        fail(pm.key("lcore"), "needs the endpoint's own lcore set too (" + m.key("lcore") + ")");
    }
    if (pm.has("mac")) {
      const std::string mac = pm.string("mac");
      if (!parse_mac(mac, &p.mac))
        fail(pm.key("mac"), "'" + mac + "' is not a MAC address (like 02:00:00:00:00:01)");
      p.has_mac = true;
    } else if (!hosted) {
      fail(pm.key("mac"), "missing (a peer's MAC cannot be learnt)");
    }
    read_ip(pm, &p);
    if (hosted) {
      // Neither 0 (a priority tag, no VLAN) nor 4095 (reserved) is a VLAN.
      pm.uint("vlan", 1, 4094, &p.vlan);
      if (pm.has("vlan_pcp") && p.vlan == 0) fail(pm.key("vlan_pcp"), "needs a vlan");
      pm.uint("vlan_pcp", 0, 7, &p.vlan_pcp);
    }
    if (p.ip_version == wire::IpVersion::kV4 && e->ev_mode != wire::EvMode::kUdp)
      fail(pm.key("ip"), std::string("IPv4 address with ev_mode ") +
                             wire::ev_mode_name(e->ev_mode) + " (it needs IPv6)");
    if (e->ev_mode == wire::EvMode::kSrv6 && !wire::usid_locator(p.ip))
      fail(pm.key("ip"), "'" + ip_text(p) +
                             "' is not a uSID locator (ev_mode srv6): a 32-bit block, a node "
                             "uSID other than 0, then zeros, like fcbb:bb00:1::");
    if (i > 0 && p.ip_version != e->planes[0].ip_version)
      fail(pm.key("ip"), "mixes IPv4 and IPv6 across the planes of one endpoint");
    pm.done();
    e->planes.push_back(p);
  }
  m.done();
}

void read_ev_profile(const std::string& name, const YAML::Node& node, EvProfileSpec* p) {
  Map m(node, "ev_profiles." + name);
  p->name = name;
  m.uint("evs_per_plane", 1, engine::kMaxEvsPerQp, &p->evs_per_plane);
  m.uint("udp_port_base", 0, 65535, &p->udp_port_base);
  m.uint("min_active", 1, engine::kMaxEvsPerQp, &p->min_active);
  m.choice(
      "spray",
      {{"rr", engine::SprayPolicy::kRoundRobin}, {"ecn-avoid", engine::SprayPolicy::kEcnAvoid}},
      &p->spray);
  const uint64_t max_us = engine::kMaxEvTimerNs / 1000;
  uint64_t us = p->probe_initial_ns / 1000;
  m.uint("probe_initial_us", 1, max_us, &us);
  p->probe_initial_ns = us * 1000;
  us = p->probe_max_ns / 1000;
  m.uint("probe_max_us", 1, max_us, &us);
  p->probe_max_ns = us * 1000;
  us = p->ecn_avoid_ns / 1000;
  m.uint("ecn_avoid_us", 0, max_us, &us);
  p->ecn_avoid_ns = us * 1000;
  if (p->probe_max_ns < p->probe_initial_ns)
    fail(m.key("probe_max_us"), "is below probe_initial_us");
  m.done();
}

void read_cc_profile(const std::string& name, const YAML::Node& node, uint32_t path_mtu,
                     CcProfileSpec* p) {
  Map m(node, "cc_profiles." + name);
  p->name = name;
  p->profile.algorithm = engine::CcAlgorithm::kNscc;
  m.choice("algorithm",
           {{"nscc", engine::CcAlgorithm::kNscc}, {"none", engine::CcAlgorithm::kNone}},
           &p->profile.algorithm);
  m.number("link_gbps", 1, 10'000, &p->link_gbps);
  double rtt_us = p->base_rtt_ns / 1000.0;
  m.number("base_rtt_us", 0.1, 1'000'000, &rtt_us);
  p->base_rtt_ns = static_cast<engine::TimeNs>(rtt_us * 1000);
  m.done();
  if (p->profile.algorithm == engine::CcAlgorithm::kNscc) {
    p->profile.nscc = engine::default_nscc_params(static_cast<uint64_t>(p->link_gbps * 1e9),
                                                  p->base_rtt_ns, path_mtu);
    if (const char* why = engine::validate(p->profile))
      fail(m.key("base_rtt_us"), std::string("gives unusable NSCC parameters: ") + why);
  }
}

uint32_t find_endpoint(const Config& c, const std::string& key, const std::string& name,
                       bool must_be_hosted) {
  for (uint32_t i = 0; i < c.endpoints.size(); ++i) {
    if (c.endpoints[i].name != name) continue;
    if (must_be_hosted && !c.endpoints[i].hosted)
      fail(key, "'" + name + "' is a peer; it must be an endpoint this process hosts");
    return i;
  }
  fail(key, "no endpoint named '" + name + "'");
}

void read_link(const YAML::Node& node, const std::string& key, Config* c) {
  Map m(node, key);
  LinkSpec l;
  const YAML::Node ends = m.list("endpoints");
  if (ends.size() != 2 || !ends[0].IsScalar() || !ends[1].IsScalar())
    fail(m.key("endpoints"), "must name two endpoints, like [a, b]");
  l.a = find_endpoint(*c, m.key("endpoints"), ends[0].Scalar(), true);
  l.b = find_endpoint(*c, m.key("endpoints"), ends[1].Scalar(), true);
  if (l.a == l.b) fail(m.key("endpoints"), "links an endpoint to itself");
  for (const uint32_t e : {l.a, l.b}) {
    if (c->link_of(e) >= 0)
      fail(m.key("endpoints"), "'" + c->endpoints[e].name + "' is already in another link");
    for (size_t p = 0; p < c->endpoints[e].planes.size(); ++p) {
      const PlaneSpec& plane = c->endpoints[e].planes[p];
      const std::string pkey = index_key(c->endpoints[e].key + ".planes", p);
      if (!plane.port.empty())
        fail(pkey + ".port", "a linked endpoint's ports are the link's; remove 'port'");
      if (!plane.has_mac)
        fail(pkey + ".mac", "missing (a linked endpoint's ports have no MAC of their own)");
    }
  }
  const EndpointSpec& a = c->endpoints[l.a];
  const EndpointSpec& b = c->endpoints[l.b];
  if (a.ev_mode != b.ev_mode) fail(m.key("endpoints"), modes_differ(b, a));
  for (size_t p = 0; p < a.planes.size(); ++p)
    if (a.planes[p].vlan != b.planes[p].vlan)
      fail(index_key(b.key + ".planes", p) + ".vlan",
           "VLAN " + std::to_string(b.planes[p].vlan) + ", but '" + a.name + "', its link's " +
               "other end, tags plane " + std::to_string(p) + " with " +
               std::to_string(a.planes[p].vlan) + " (0: untagged)");
  m.uint("lcore", 0, kMaxLcoreId, &l.lcore);
  read_link_fabric(m, c->num_planes(), &l.fabric);
  l.fabric.srv6 = a.ev_mode == wire::EvMode::kSrv6;
  m.done();
  c->links.push_back(l);
}

// The two ends of a flow must be able to talk: the same EV mode, and an
// endpoint in a link reaches only the link's other end. Either end may be
// a peer (a flow between two peers is another process's, listed here so
// that the QPNs agree: traffic_plan.h).
void check_flow_ends(const Config& c, Map& m, const FlowSpec& f) {
  const EndpointSpec& from = c.endpoints[f.from];
  const EndpointSpec& to = c.endpoints[f.to];
  if (from.ev_mode != to.ev_mode) fail(m.key("to"), modes_differ(to, from));
  const struct {
    uint32_t self, other;
    const char* key;
  } ends[] = {{f.from, f.to, "to"}, {f.to, f.from, "from"}};
  for (const auto& e : ends) {
    const int l = c.link_of(e.self);
    if (l < 0) continue;
    const uint32_t partner = c.links[l].other_end(e.self);
    if (partner != e.other)
      fail(m.key(e.key), "'" + c.endpoints[e.other].name + "' is out of reach: '" +
                             c.endpoints[e.self].name + "' is in links[" + std::to_string(l) +
                             "], whose planes reach only '" + c.endpoints[partner].name + "'");
  }
}

void read_flow(const YAML::Node& node, const std::string& key, Config* c) {
  Map m(node, key);
  FlowSpec f;
  f.from = find_endpoint(*c, m.key("from"), m.required_string("from"), false);
  f.to = find_endpoint(*c, m.key("to"), m.required_string("to"), false);
  if (f.from == f.to) fail(m.key("to"), "is the same endpoint as 'from'");
  check_flow_ends(*c, m, f);
  m.uint("qps", 1, c->limits.max_qps, &f.qps);
  m.choice("op", {{"write", TrafficOp::kWrite}, {"wimm", TrafficOp::kWimm}}, &f.op);
  m.uint("size", 1, engine::kMaxMessageBytes, &f.size_bytes);
  m.uint("window", 1, 1u << 20, &f.window);
  // Write mode sends a batch marker (a 0-byte WIMM) per window of Writes,
  // and its send queue holds up to two besides the window. The tightest
  // bound is the one to name.
  const std::pair<std::string, uint64_t> bounds[] = {
      {"qp.max_wimm", c->qp.max_wimm},
      {"limits.max_recv_wr", c->limits.max_recv_wr},
      {"limits.max_send_wr / 2", c->limits.max_send_wr / 2},
      {"limits.max_send_wr - 2, the batch markers' room",
       f.op == TrafficOp::kWrite ? c->limits.max_send_wr - kWriteMarkersInFlight : UINT64_MAX},
  };
  const auto& tightest =
      *std::min_element(std::begin(bounds), std::end(bounds),
                        [](const auto& x, const auto& y) { return x.second < y.second; });
  check_at_most(m, "window", f.window, tightest.first, tightest.second);
  if (f.op == TrafficOp::kWrite &&
      std::min<uint32_t>(c->qp.max_wimm, c->limits.max_recv_wr) < kWriteMarkersInFlight)
    fail(m.key("op"),
         "write keeps 2 batch markers (0-byte WIMMs) in flight: it needs qp.max_wimm and "
         "limits.max_recv_wr of at least 2");
  m.uint("messages", 0, UINT32_MAX, &f.messages);
  uint64_t ms = 0;
  m.uint("duration_ms", 0, 86'400'000, &ms);
  f.duration_ns = ms * 1'000'000;
  ms = f.requester_timeout_ns / 1'000'000;
  m.uint("requester_timeout_ms", 0, 86'400'000, &ms);
  f.requester_timeout_ns = ms * 1'000'000;
  m.done();
  c->traffic.push_back(f);
}

void check_planes_agree(const Config& c) {
  for (const EndpointSpec& e : c.endpoints) {
    if (e.planes.size() != c.num_planes())
      fail(e.key + ".planes", std::to_string(e.planes.size()) + " planes, but " +
                                  c.endpoints[0].key + " has " + std::to_string(c.num_planes()) +
                                  " (plane N is port N on every endpoint)");
    if (e.planes[0].ip_version != c.endpoints[0].planes[0].ip_version)
      fail(e.key + ".planes[0].ip", "IPv4 and IPv6 endpoints cannot talk to each other");
  }
}

// SRv6 paths are made in the sender's block and end at the receiver's
// address, so the SRv6 endpoints of a plane share its block (one uSID
// domain per plane).
void check_srv6_blocks(const Config& c) {
  const EndpointSpec* first = nullptr;
  for (const EndpointSpec& e : c.endpoints) {
    if (e.ev_mode != wire::EvMode::kSrv6) continue;
    if (first == nullptr) first = &e;
    for (size_t p = 0; p < c.num_planes(); ++p) {
      if (std::memcmp(e.planes[p].ip, first->planes[p].ip, wire::kUsidBlockBytes) == 0) continue;
      PlaneSpec block = first->planes[p];
      std::memset(block.ip + wire::kUsidBlockBytes, 0, sizeof(block.ip) - wire::kUsidBlockBytes);
      fail(index_key(e.key + ".planes", p) + ".ip",
           "'" + ip_text(e.planes[p]) + "' is outside " + ip_text(block) +
               "/32, the uSID block of '" + first->name +
               "' on this plane (the SRv6 endpoints of a plane share one)");
    }
  }
}

// Declared profiles are the controller's too (docs/controller.md): named,
// and no more than the device holds of their kind.
void check_profile_names(const YAML::Node& profiles, const char* key, uint32_t max) {
  if (!profiles || !profiles.IsMap()) return;
  if (profiles.size() > max)
    fail(key, std::to_string(profiles.size()) + " profiles; at most " + std::to_string(max));
  for (const auto& kv : profiles)
    if (!kv.first.IsScalar() || kv.first.Scalar().empty())
      fail(key, "has a profile whose name is not a name: " + quoted(kv.first));
}

// A packet's destination address names its receiver: no two endpoints
// (hosted or peers) may share one on a plane.
void check_addresses_unique(const Config& c) {
  for (size_t i = 0; i < c.endpoints.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      for (size_t p = 0; p < c.num_planes(); ++p) {
        const PlaneSpec& a = c.endpoints[i].planes[p];
        if (std::memcmp(a.ip, c.endpoints[j].planes[p].ip, sizeof(a.ip)) != 0) continue;
        fail(index_key(c.endpoints[i].key + ".planes", p) + ".ip",
             "'" + ip_text(a) + "' is also the address of '" + c.endpoints[j].name +
                 "' on this plane");
      }
}

void check_hosted_ports(const Config& c) {
  // A device is polled by one plane's lcore; ethdev would hand a second
  // plane the same port ("net_null0,size=64" and "net_null0" are one).
  ClaimedOnce devices;
  for (uint32_t i = 0; i < c.hosted; ++i) {
    const EndpointSpec& e = c.endpoints[i];
    if (c.link_of(i) >= 0) continue;
    for (size_t p = 0; p < e.planes.size(); ++p) {
      const std::string key = index_key(e.key + ".planes", p) + ".port";
      if (e.planes[p].port.empty())
        fail(key, "missing (a PCI address or vdev spec, or join the endpoint to a link)");
      devices.claim(device_name(e.planes[p].port), key);
    }
  }
}

// Each socket is this process's own: two with one path would refuse each
// other at setup as "in use by another process".
void check_sockets_unique(const Config& c) {
  ClaimedOnce paths;
  if (!c.control_socket.empty() && c.control_socket != "none")
    paths.claim(c.control_socket, "control_socket");
  for (uint32_t i = 0; i < c.hosted; ++i)
    if (!c.endpoints[i].app_socket.empty())
      paths.claim(c.endpoints[i].app_socket, c.endpoints[i].key + ".app_socket");
}

// Peers too: the plan gives them QPNs and keys as their own process will.
void check_traffic_fits(const Config& c) {
  std::vector<uint64_t> qps(c.endpoints.size(), 0);
  for (const FlowSpec& f : c.traffic) {
    qps[f.from] += f.qps;
    qps[f.to] += f.qps;
  }
  for (uint32_t i = 0; i < c.endpoints.size(); ++i) {
    if (qps[i] > c.limits.max_qps)
      fail("traffic", "needs " + std::to_string(qps[i]) + " QPs on endpoint '" +
                          c.endpoints[i].name + "', above limits.max_qps (" +
                          std::to_string(c.limits.max_qps) + ")");
    if (qps[i] > c.limits.max_regions)
      fail("traffic", "needs " + std::to_string(qps[i]) + " registered regions on endpoint '" +
                          c.endpoints[i].name + "', above limits.max_regions (" +
                          std::to_string(c.limits.max_regions) + ")");
  }
}

uint32_t port_lcore_planes(const EndpointSpec& e) {
  uint32_t n = 0;
  for (uint32_t p = 0; p < e.planes.size(); ++p) n += has_own_lcore(e, p);
  return n;
}

// Every TX descriptor (or, on a link, every slot of the two rings between
// the endpoints and of the delay line) of every plane may hold an mbuf of
// the endpoint's TX pool, plus the lcore caches and what is being framed;
// so may a port lcore's tx ring and burst, and on a link the partner's port
// lcores' rx rings.
void check_mbufs(const Config& c) {
  for (uint32_t i = 0; i < c.hosted; ++i) {
    const int link = c.link_of(i);
    const uint64_t per_plane =
        link >= 0 ? 2 * uint64_t{c.link_ring} + c.links[link].fabric.delay_line_packets : c.tx_desc;
    // A port lcore's tx ring and the burst it holds.
    uint64_t relay = uint64_t{port_lcore_planes(c.endpoints[i])} * (kPortRingSlots + kPortBurst);
    if (link >= 0) {
      const uint32_t partner = c.links[link].other_end(i);
      relay += uint64_t{port_lcore_planes(c.endpoints[partner])} * kPortRingSlots;
    }
    const uint64_t need = c.num_planes() * per_plane + relay + 2 * c.mbuf_cache + 512;
    if (c.mbufs < need)
      fail("mempool.mbufs",
           std::to_string(c.mbufs) + " is too few for endpoint '" + c.endpoints[i].name +
               "': " + std::to_string(c.num_planes()) + " planes x " + std::to_string(per_plane) +
               (link >= 0 ? " link ring and delay line slots" : " TX descriptors") +
               (relay ? " and " + std::to_string(relay) + " port lcore ring slots" : "") +
               " need at least " + std::to_string(need));
  }
}

void read_root(const YAML::Node& root, Config* c) {
  if (!root || root.IsNull()) fail("(file)", "is empty");
  Map m(root, "");
  read_path_mtu(m, &c->path_mtu);
  m.choice("tx_payload", {{"copy", TxPayload::kCopy}, {"extbuf", TxPayload::kExtbuf}},
           &c->tx_payload);
  m.boolean("rx_verify_icrc", &c->rx_verify_icrc);
  m.boolean("rx_ipv4_checksum_offload", &c->rx_ipv4_checksum_offload);
  m.boolean("rx_keep_crc", &c->rx_keep_crc);
  m.uint("link_poll_us", 1, 1'000'000, &c->link_poll_us);
  m.uint("tx_stall_us", 1, 10'000'000, &c->tx_stall_us);
  m.uint("idle_yield_passes", 0, 1'000'000'000, &c->idle_yield_passes);
  c->control_socket = m.string("control_socket");
  c->control_group = m.string("control_group");
  c->control_state_file = m.string("control_state_file");
  m.uint("control_idle_ms", 0, 86'400'000, &c->control_idle_ms);
  c->app_group = m.string("app_group");
  {
    Map mp(m.get("mempool"), "mempool");
    mp.uint("mbufs", 1023, 1u << 24, &c->mbufs);
    mp.uint("cache", 0, kMaxMbufCache, &c->mbuf_cache);
    mp.done();
  }
  {
    Map r(m.get("rings"), "rings");
    r.uint("rx_desc", 32, 16384, &c->rx_desc);
    r.uint("tx_desc", 32, 16384, &c->tx_desc);
    r.uint("link", 64, 65536, &c->link_ring);
    r.done();
    if (c->link_ring & (c->link_ring - 1))
      fail("rings.link", std::to_string(c->link_ring) + " is not a power of two");
  }
  {
    Map s(m.get("stats"), "stats");
    s.uint("snapshot_ms", 1, 60'000, &c->snapshot_ms);
    s.uint("log_interval_ms", 0, 3'600'000, &c->log_interval_ms);
    s.done();
  }
  {
    Map s(m.get("shutdown"), "shutdown");
    s.uint("drain_ms", 0, 600'000, &c->drain_ms);
    s.done();
  }
  {
    Map l(m.get("limits"), "limits");
    LimitsSpec& lim = c->limits;
    l.uint("max_qps", 1, 65535, &lim.max_qps);
    l.uint("max_regions", 1, 65535, &lim.max_regions);
    l.uint("max_mpr", 1, kMaxMprLimit, &lim.max_mpr);
    l.uint("max_wimm", 1, kMaxWimmLimit, &lim.max_wimm);
    l.uint("max_send_wr", 2, 1u << 20, &lim.max_send_wr);
    l.uint("max_recv_wr", 1, 1u << 20, &lim.max_recv_wr);
    l.done();
  }

  // Endpoints and peers first: profiles are checked against the plane count.
  const YAML::Node eps = m.list("endpoints");
  if (eps.size() == 0) fail("endpoints", "missing (at least one endpoint to host)");
  for (size_t i = 0; i < eps.size(); ++i) {
    EndpointSpec e;
    read_endpoint(eps[i], index_key("endpoints", i), true, &e);
    c->endpoints.push_back(e);
  }
  c->hosted = static_cast<uint32_t>(c->endpoints.size());
  const YAML::Node peers = m.list("peers");
  for (size_t i = 0; i < peers.size(); ++i) {
    EndpointSpec e;
    read_endpoint(peers[i], index_key("peers", i), false, &e);
    c->endpoints.push_back(e);
  }
  for (size_t i = 0; i < c->endpoints.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (c->endpoints[i].name == c->endpoints[j].name)
        fail(c->endpoints[i].key + ".name", "'" + c->endpoints[i].name + "' is used twice");
  check_planes_agree(*c);
  check_addresses_unique(*c);
  check_srv6_blocks(*c);

  const YAML::Node evp = m.get("ev_profiles");
  if (evp && !evp.IsNull() && !evp.IsMap()) fail("ev_profiles", "must be a map of named profiles");
  check_unique_keys(evp, "ev_profiles");
  check_profile_names(evp, "ev_profiles", control::DeviceLimits{}.max_ev_profiles);
  if (evp && evp.IsMap())
    for (const auto& kv : evp) {
      EvProfileSpec p;
      read_ev_profile(kv.first.Scalar(), kv.second, &p);
      c->ev_profiles.push_back(p);
    }
  if (c->ev_profiles.empty()) c->ev_profiles.push_back(EvProfileSpec{.name = "default"});
  const bool srv6 =
      std::any_of(c->endpoints.begin(), c->endpoints.end(),
                  [](const EndpointSpec& e) { return e.ev_mode == wire::EvMode::kSrv6; });
  for (const EvProfileSpec& p : c->ev_profiles) {
    const std::string key = "ev_profiles." + p.name;
    const uint64_t evs = uint64_t{p.evs_per_plane} * c->num_planes();
    if (evs > engine::kMaxEvsPerQp)
      fail(key + ".evs_per_plane", std::to_string(evs) + " EVs over " +
                                       std::to_string(c->num_planes()) + " planes is above " +
                                       std::to_string(engine::kMaxEvsPerQp));
    if (p.udp_port_base + evs > 65536)
      fail(key + ".udp_port_base",
           "leaves no room for " + std::to_string(evs) + " source ports below 65536");
    if (p.udp_port_base == 0 && srv6)
      fail(key + ".udp_port_base", "is 0, which ends a uSID list: SRv6 paths need 1..65535");
    if (p.min_active > evs)
      fail(key + ".min_active", std::to_string(p.min_active) + " is above the profile's " +
                                    std::to_string(evs) + " EVs");
  }

  const YAML::Node ccp = m.get("cc_profiles");
  if (ccp && !ccp.IsNull() && !ccp.IsMap()) fail("cc_profiles", "must be a map of named profiles");
  check_unique_keys(ccp, "cc_profiles");
  check_profile_names(ccp, "cc_profiles", control::DeviceLimits{}.max_cc_profiles);
  if (ccp && ccp.IsMap())
    for (const auto& kv : ccp) {
      CcProfileSpec p;
      read_cc_profile(kv.first.Scalar(), kv.second, c->path_mtu, &p);
      c->cc_profiles.push_back(p);
    }
  if (c->cc_profiles.empty()) {
    CcProfileSpec p;
    read_cc_profile("default", YAML::Node(), c->path_mtu, &p);
    c->cc_profiles.push_back(p);
  }

  {
    Map q(m.get("qp"), "qp");
    QpSpec& qp = c->qp;
    const auto profile = [&](const char* k, const auto& list) -> uint32_t {
      const std::string name = q.has(k) ? q.string(k) : "default";
      for (uint32_t i = 0; i < list.size(); ++i)
        if (list[i].name == name) return i;
      fail(q.key(k), "no profile named '" + name + "'");
    };
    qp.ev_profile = profile("ev_profile", c->ev_profiles);
    qp.cc_profile = profile("cc_profile", c->cc_profiles);
    q.uint("mpr", 1, kMaxMprLimit, &qp.mpr);
    q.uint("max_wimm", 1, kMaxWimmLimit, &qp.max_wimm);
    q.uint("timeout", 0, engine::kMaxTimeout, &qp.timeout);
    q.uint("retry_linear", 0, engine::kMaxRetryLinear, &qp.retry_linear);
    q.uint("retry_exp", 0, engine::kRetryExpUnlimited, &qp.retry_exp);
    q.done();
    check_at_most(q, "mpr", qp.mpr, "limits.max_mpr", c->limits.max_mpr);
    check_at_most(q, "max_wimm", qp.max_wimm, "limits.max_wimm", c->limits.max_wimm);
  }

  const YAML::Node links = m.list("links");
  for (size_t i = 0; i < links.size(); ++i) read_link(links[i], index_key("links", i), c);
  check_hosted_ports(*c);
  check_sockets_unique(*c);
  const YAML::Node traffic = m.list("traffic");
  for (size_t i = 0; i < traffic.size(); ++i) read_flow(traffic[i], index_key("traffic", i), c);
  check_traffic_fits(*c);
  check_mbufs(*c);
  m.done();
}

}  // namespace

int Config::link_of(uint32_t endpoint) const {
  for (size_t i = 0; i < links.size(); ++i)
    if (links[i].a == endpoint || links[i].b == endpoint) return static_cast<int>(i);
  return -1;
}

std::vector<engine::EvEntry> ev_entries(const EvProfileSpec& p, const EndpointSpec& me) {
  std::vector<engine::EvEntry> evs;
  const auto num_planes = static_cast<uint32_t>(me.planes.size());
  for (uint32_t plane = 0; plane < num_planes; ++plane) {
    for (uint32_t n = 0; n < p.evs_per_plane; ++n) {
      engine::EvEntry e{};
      const uint32_t path = p.udp_port_base + plane * p.evs_per_plane + n;
      uint8_t* at = e.value.bytes;
      if (me.ev_mode == wire::EvMode::kSrv6) {
        std::memcpy(at, me.planes[plane].ip, wire::kUsidBlockBytes);
        at += wire::kUsidBlockBytes;
      }
      at[0] = static_cast<uint8_t>(path >> 8);
      at[1] = static_cast<uint8_t>(path);
      if (me.ev_mode == wire::EvMode::kStev) {
        at[2] = static_cast<uint8_t>(n >> 8);
        at[3] = static_cast<uint8_t>(n);
      }
      e.plane = static_cast<uint8_t>(plane);
      evs.push_back(e);
    }
  }
  return evs;
}

bool has_own_lcore(const EndpointSpec& e, uint32_t plane) {
  const int lcore = e.planes[plane].lcore;
  return lcore != kAnyLcore && lcore != e.lcore;
}

uint32_t rx_pool_size(const Config& cfg, uint32_t endpoint) {
  return cfg.num_planes() * (uint32_t{cfg.rx_desc} + 64) +
         port_lcore_planes(cfg.endpoints[endpoint]) * kPortRingSlots + 2 * cfg.mbuf_cache + 64;
}

bool parse_config(const std::string& text, const std::string& name, Config* out, std::string* err) {
  *out = Config{};
  out->path = name;
  return read_yaml(
      text, name, [out](const YAML::Node& root) { read_root(root, out); }, err);
}

bool load_config(const std::string& path, Config* out, std::string* err) {
  *out = Config{};
  out->path = path;
  return read_yaml_file(
      path, [out](const YAML::Node& root) { read_root(root, out); }, err);
}

}  // namespace softmrc::softmrcd
