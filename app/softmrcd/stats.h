// What the daemon counts, and the snapshots through which other threads
// read it. Each lcore writes its own counters as plain integers; every
// stats.snapshot_ms it copies them into a Published snapshot that the
// telemetry commands, the interactive prompt and the periodic log read.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/cc/congestion_control.h"
#include "engine/counters.h"
#include "engine/path/ev_set.h"
#include "engine/qp_attr.h"
#include "softmrcd/emulator.h"
#include "wire/packet.h"

namespace softmrc::softmrcd {

// Packets the daemon drops before or after the engine, by reason. Parse
// failures are counted by wire::ParseStatus.
enum class Drop : uint8_t {
  kRxNotForUs,      // parsed, but addressed to another IP than the plane's
  kRxOtherVlan,     // parsed, but tagged with another VLAN than the plane's (or none)
  kRxTooLong,       // longer than the largest frame the path MTU allows
  kTxNoMbuf,        // mempool empty while framing
  kTxBuild,         // the engine handed out a packet lib/wire cannot build
  kTxNoPeer,        // a packet for a peer this endpoint has no addresses for
  kTxPlaneDown,     // framed for a plane that went out of use, and its port refused it
  kTxStalled,       // framed for a stalled port in use (tx_stall_us), beyond what it holds
  kTxPortLinkDown,  // freed by a port lcore because its port's link was down
  kCount,
};
const char* drop_name(Drop d);

struct DropCounters {
  std::array<uint64_t, size_t(wire::ParseStatus::kCount)> parse{};  // [kOk] unused
  std::array<uint64_t, size_t(Drop::kCount)> other{};

  uint64_t total() const {
    uint64_t n = 0;
    for (size_t i = 1; i < parse.size(); ++i) n += parse[i];
    for (uint64_t v : other) n += v;
    return n;
  }
};

struct PlaneCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_extbuf = 0;     // data packets sent from registered memory in place
  uint64_t link_changes = 0;  // link up/down transitions seen
  uint64_t tx_stalls = 0;     // times its port took no frame for tx_stall_us while in use
  // Of rx_packets, those whose IPv4 header checksum the port checked.
  uint64_t rx_ipv4_checksum_by_port = 0;
  // Of rx_packets, those whose ICRC was checked through the FCS their port
  // kept, and those whose kept FCS disagreed (then folded whole: what the
  // port left behind the frame was not its FCS).
  uint64_t rx_icrc_from_fcs = 0;
  uint64_t rx_fcs_wrong = 0;
  // A port on an lcore of its own (port_task.h).
  uint64_t port_rx_stalls = 0;     // its passes that left RX alone: the endpoint was behind
  uint64_t port_tx_link_down = 0;  // frames it freed because the link was down
};

struct PlaneState {
  bool link_up = false;    // the port's link
  bool admin_up = true;    // not taken down by an operator
  bool engine_up = false;  // what the engine was told: link_up && admin_up
};

struct TxgenCounters {
  // Requester side.
  uint64_t posted = 0;  // messages (Writes or WIMMs; not batch markers)
  uint64_t completed = 0;
  uint64_t completed_bytes = 0;
  uint64_t in_flight = 0;  // messages posted, not completed (at the snapshot)
  uint64_t ends_owed = 0;  // flows at their limit whose end has not completed (ditto)
  // Responder side.
  uint64_t verified = 0;  // messages whose every byte was checked
  uint64_t verified_bytes = 0;
  uint64_t mismatches = 0;  // messages with a wrong byte, length or immediate
  // Both.
  uint64_t errors = 0;   // completions with an error status, refused posts
  uint64_t flushed = 0;  // messages that ended with status FLUSHED (QP moved to ERROR)
  // Shutdown: the messages outstanding when it began, and of those, the
  // ones that completed during the drain and the ones the flush ended.
  uint64_t in_flight_at_stop = 0;
  uint64_t drained = 0;
  uint64_t flushed_at_stop = 0;
};

struct QpStats {
  uint32_t qpn = 0;
  bool app = false;  // an application's (app_server.h), else the traffic generator's
  uint32_t pid = 0;  // the application's process
  engine::QpState state = engine::QpState::kReset;
  uint32_t peer = 0;
  uint32_t dest_qpn = 0;
  engine::QpCounters counters;
  engine::CcCounters cc;
  uint64_t cwnd_bytes = 0;
  uint64_t inflight_bytes = 0;
  uint32_t snd_una = 0;
  uint32_t snd_nxt = 0;
  uint32_t epsn = 0;
  uint64_t srtt_ns = 0;
  uint64_t rtt_max_ns = 0;
  uint32_t first_ev = 0;  // this QP's EVs are evs[first_ev, first_ev + num_evs)
  uint32_t num_evs = 0;
  uint32_t usable_evs = 0;
};

struct EvStats {
  uint8_t plane = 0;
  engine::EvState state = engine::EvState::kGood;
  bool usable = true;  // the QP may send on it: a usable state, its plane up here and at the peer
  engine::EvCounters counters;
};

struct EndpointSnapshot {
  uint64_t at_ns = 0;
  std::vector<PlaneState> plane_state;
  std::vector<PlaneCounters> planes;
  DropCounters drops;
  engine::EndpointCounters engine;
  TxgenCounters txgen;
  bool txgen_finished = false;   // every flow leaving here reached its limit
  bool stopping = false;         // taken after the lcore saw the stop (flows' ends owed counted)
  uint64_t app_outstanding = 0;  // application sends posted to the engine, not completed
  uint32_t app_flushed_qps = 0;  // application QPs the shutdown moved to ERROR
  uint64_t app_bad_descriptors = 0;  // applications' descriptors and rings refused (app_stage.h)
  uint32_t num_qps = 0;
  std::vector<QpStats> qps;  // [0, num_qps)
  std::vector<EvStats> evs;
};

// Every retransmission the endpoint made, its destroyed QPs' included.
inline uint64_t retransmits(const EndpointSnapshot& s) {
  uint64_t n = s.engine.destroyed_qp_retransmits;
  for (uint32_t i = 0; i < s.num_qps; ++i)
    for (uint64_t r : s.qps[i].counters.retransmits) n += r;
  return n;
}

// Gb/s of `bytes` over `ns`.
inline double gbps(uint64_t bytes, uint64_t ns) {
  return ns == 0 ? 0.0 : bytes * 8.0 / static_cast<double>(ns);
}

struct LinkSnapshot {
  uint64_t at_ns = 0;
  uint32_t up_mask = 0;           // bit per plane
  std::vector<HopCounters> hops;  // [plane * 2 + direction], direction 0: a -> b
  std::vector<HopState> states;   // likewise
  uint64_t plane_events = 0;      // changes applied (schedule and operators)
};

}  // namespace softmrc::softmrcd
