// softmrcd's configuration: the YAML file read into plain, validated
// structs with units in their field names. Nothing else in the daemon sees
// YAML. docs/configuration.md lists every key, its unit, its default and
// every message a bad file gets.
//
// load_config() checks everything that needs no EAL (syntax, types,
// ranges, names and references, sizes that must agree); what needs the EAL
// (lcores, devices) is checked when the daemon sets up, with the same
// "<key>: <problem>" messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/cc/congestion_control.h"
#include "engine/path/ev_set.h"
#include "fabric/link.h"
#include "wire/headers.h"
#include "wire/packet.h"

namespace softmrc::softmrcd {

inline constexpr int kAnyLcore = -1;              // an endpoint or link without `lcore`
inline constexpr size_t kMaxAppSocketPath = 107;  // sockaddr_un.sun_path, less the NUL

enum class TxPayload : uint8_t {
  kCopy,    // payload copied into the frame's mbuf
  kExtbuf,  // payload sent in place from registered memory (an external-buffer mbuf)
};

struct PlaneSpec {
  std::string port;       // device spec; empty for a plane of a linked endpoint or a peer
  int lcore = kAnyLcore;  // polls the port, when not the endpoint's (port_task.h)
  bool has_mac = false;
  wire::MacAddr mac;
  wire::IpVersion ip_version = wire::IpVersion::kV6;
  uint8_t ip[16] = {};
  uint16_t vlan = 0;     // 802.1Q VLAN id of the plane's frames; 0: untagged
  uint8_t vlan_pcp = 0;  // their priority (PCP), with a VLAN
};

// An endpoint this process hosts, or a peer hosted elsewhere (addresses only).
struct EndpointSpec {
  std::string name;
  std::string key;  // "endpoints[0]" or "peers[0]", for messages
  bool hosted = true;
  int lcore = kAnyLcore;
  // Where applications reach it (libsoftmrc, docs/api.md); empty: nowhere.
  std::string app_socket;
  wire::EvMode ev_mode = wire::EvMode::kUdp;
  std::vector<PlaneSpec> planes;
};

struct EvProfileSpec {
  std::string name;
  uint32_t evs_per_plane = 16;
  uint16_t udp_port_base = 0xc000;  // EV n of plane p: source port base + p * evs_per_plane + n
  uint32_t min_active = 1;
  engine::SprayPolicy spray = engine::SprayPolicy::kRoundRobin;
  engine::TimeNs probe_initial_ns = 20'000;
  engine::TimeNs probe_max_ns = 1'000'000;
  engine::TimeNs ecn_avoid_ns = 50'000;
};

struct CcProfileSpec {
  std::string name;
  engine::CcProfile profile;  // NSCC parameters derived from the two below
  double link_gbps = 100;
  engine::TimeNs base_rtt_ns = 10'000;
};

// Attributes of the QPs the daemon opens (the traffic generator's).
struct QpSpec {
  uint32_t ev_profile = 0;  // index into Config::ev_profiles
  uint32_t cc_profile = 0;  // index into Config::cc_profiles
  uint8_t mpr = 8;
  uint16_t max_wimm = 128;
  uint8_t timeout = 14;  // ACK timeout 1.024 us * 2^14 = 16.8 ms
  uint8_t retry_linear = 7;
  uint8_t retry_exp = 7;
};

struct LimitsSpec {
  uint32_t max_qps = 64;
  uint32_t max_regions = 256;
  uint8_t max_mpr = 16;
  uint16_t max_wimm = 1024;
  uint32_t max_send_wr = 1024;
  uint32_t max_recv_wr = 1024;
};

// How one plane of an in-process link behaves, in each direction: the
// queue and wire of lib/fabric's link model.
struct PlaneFabricSpec {
  fabric::LinkConfig link{.rate_mbps = 100'000, .overflow = fabric::Overflow::kTrim};
  double loss = 0;     // probability per packet
  double corrupt = 0;  // probability per data packet
  fabric::Corruption corrupt_icrc = fabric::Corruption::kBadIcrc;
};

enum class LinkDirection : uint8_t { kBoth, kAToB, kBToA };

enum class LinkAction : uint8_t {
  kDown,  // both directions, and both ports' links
  kUp,
  kLoss,  // value: the probability
  kBlackholeOn,
  kBlackholeOff,
  kEvBlackholeOn,  // ev: the EV (UDP source port)
  kEvBlackholeOff,
  kRateFactor,   // value: times the configured rate, (0, 1]
  kCorrupt,      // value: the probability per data packet
  kCorruptIcrc,  // corruption: what becomes of a corrupted frame's ICRC
};

// A change to one plane of a link: from the schedule, at a time after the
// schedule's origin (LinkFabricSpec::schedule_from), or from an operator,
// at once.
struct LinkEvent {
  uint64_t at_ns = 0;
  uint8_t plane = 0;
  LinkDirection direction = LinkDirection::kBoth;
  LinkAction action = LinkAction::kDown;
  fabric::Corruption corruption = fabric::Corruption::kBadIcrc;
  uint32_t ev = 0;
  double value = 0;
};

// How a link behaves: per plane its queue and wire, and the changes due
// over time. softmrcd's in-process links and smrc-fabric's links read the
// same keys (config_reader.h).
struct LinkFabricSpec {
  std::vector<PlaneFabricSpec> planes;  // per plane
  uint32_t delay_line_packets = 512;    // per plane and direction
  uint64_t seed = 1;                    // of the loss and corruption draws
  std::vector<LinkEvent> schedule;      // sorted by time
  // What the schedule's times count from: the start of the process, or
  // the first frame the link receives (endpoints in other processes start
  // when they will; their traffic is what a schedule means to hit).
  enum class ScheduleFrom : uint8_t { kStart, kFirstFrame } schedule_from = ScheduleFrom::kStart;
  bool srv6 = false;  // the planes are SRv6 uSID switches (emulator.h)
};

// Two hosted endpoints whose plane N ports are joined through the
// in-process fabric (net_ring pairs and the fabric emulator).
struct LinkSpec {
  uint32_t a = 0;  // endpoint indexes
  uint32_t b = 0;
  int lcore = kAnyLcore;  // the fabric's forwarding step; default: a's lcore
  LinkFabricSpec fabric;

  // The end that is not `end`.
  uint32_t other_end(uint32_t end) const { return end == a ? b : a; }
};

enum class TrafficOp : uint8_t { kWrite, kWimm };
// The batch markers (0-byte WIMMs) a write flow keeps in flight (txgen.h).
inline constexpr uint32_t kWriteMarkersInFlight = 2;

// A traffic generator flow: QPs from one endpoint to another, either of
// which may be a peer (traffic_plan.h: how processes agree on QPNs).
struct FlowSpec {
  uint32_t from = 0;  // endpoint indexes
  uint32_t to = 0;
  uint32_t qps = 1;
  TrafficOp op = TrafficOp::kWimm;
  uint32_t size_bytes = 65536;
  uint32_t window = 8;       // messages in flight per QP
  uint64_t messages = 0;     // per QP; 0: no limit
  uint64_t duration_ns = 0;  // 0: no limit
  // A flow from another process: how long its responder waits for a
  // requester that went quiet before it ends the flow unfinished; 0: forever.
  uint64_t requester_timeout_ns = 5'000'000'000;
};

struct Config {
  std::string path;  // the file, for messages
  uint32_t path_mtu = 4096;
  TxPayload tx_payload = TxPayload::kCopy;
  bool rx_verify_icrc = true;
  bool rx_ipv4_checksum_offload = true;  // ports that can check IPv4 header checksums do
  bool rx_keep_crc = true;  // ports that can keep each frame's FCS do: the ICRC check uses it
  uint32_t mbufs = 8191;    // per endpoint, for the frames it sends
  uint32_t mbuf_cache = 256;
  uint16_t rx_desc = 512;
  uint16_t tx_desc = 512;
  uint32_t link_ring = 512;
  uint64_t link_poll_us = 100;
  uint64_t tx_stall_us = 1'000;    // a port in use that takes no frame this long is stalled
  uint64_t idle_yield_passes = 0;  // 0: a lcore never yields
  uint64_t snapshot_ms = 100;
  uint64_t log_interval_ms = 1000;
  uint64_t drain_ms = 2000;
  LimitsSpec limits;
  std::vector<EvProfileSpec> ev_profiles;
  std::vector<CcProfileSpec> cc_profiles;
  QpSpec qp;
  std::vector<EndpointSpec> endpoints;  // hosted ones first, then peers
  uint32_t hosted = 0;                  // how many of `endpoints` are hosted
  std::vector<LinkSpec> links;
  std::vector<FlowSpec> traffic;
  // The controller socket (docs/controller.md): its path (empty: smrcctl.sock
  // in the EAL's runtime directory; "none": no socket), the group whose
  // members may use it besides root (empty: root only), and the file that
  // keeps the controller's profiles and port states (empty: none).
  std::string control_socket;
  std::string control_group;
  std::string control_state_file;
  uint64_t control_idle_ms = 60'000;  // a controller connection without requests; 0: kept
  // Besides root, the group whose members may use the endpoints'
  // app_sockets (empty: root only).
  std::string app_group;

  uint32_t num_planes() const {
    return endpoints.empty() ? 0 : uint32_t(endpoints[0].planes.size());
  }
  // The link an endpoint's planes belong to, or -1.
  int link_of(uint32_t endpoint) const;
};

// The EVs of `me`'s QPs with profile `p`, listed plane by plane. EV n of
// plane k is the path number udp_port_base + k * evs_per_plane + n: the
// UDP source port (STEV mode also puts n in the flow label), or in SRv6
// mode the one uSID of the path block:number:: in plane k's block (the
// framer appends the destination, wire/usid.h).
std::vector<engine::EvEntry> ev_entries(const EvProfileSpec& p, const EndpointSpec& me);

// Frames each ring between a port lcore and its endpoint holds
// (port_task.h): a few bursts, to ride out the two lcores' jitter. More
// would only keep more mbufs out of the caches; the PMD's rings are the
// buffer.
inline constexpr uint32_t kPortRingSlots = 256;
// Frames a port lcore moves per burst; it holds one TX burst besides its
// rings.
inline constexpr uint16_t kPortBurst = 32;

// Whether plane `plane` of a hosted endpoint has a port lcore of its own:
// its `lcore` is set and is not the endpoint's.
bool has_own_lcore(const EndpointSpec& e, uint32_t plane);

// Mbufs of an endpoint's RX pool: every RX descriptor of every plane (and
// every slot of a port lcore's rx ring), the burst being handled and the
// lcore cache.
uint32_t rx_pool_size(const Config& cfg, uint32_t endpoint);

// Bytes of the largest frame the daemon builds or accepts for `path_mtu`.
inline uint32_t max_frame_bytes(uint32_t path_mtu) {
  return static_cast<uint32_t>(wire::kMaxHeaderLen) + path_mtu + wire::kIcrcLen;
}

// Reads and validates a file. On failure *err is "<file>: <key>: <problem>"
// (or "<file>:<line>:<column>: ..." for YAML syntax errors).
bool load_config(const std::string& path, Config* out, std::string* err);
// The same, from text (tests).
bool parse_config(const std::string& text, const std::string& name, Config* out, std::string* err);

}  // namespace softmrc::softmrcd
