// A simulator scenario: the fabric (lib/fabric's topology and fault
// schedule), the workload, the two transports' settings and the run's
// settings, read from one YAML file into plain validated structs.
// docs/simulation.md lists every key with its unit and default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/qp.h"
#include "fabric/config_node.h"
#include "fabric/faults.h"
#include "fabric/topology.h"

namespace softmrc::sim {

using TimeNs = uint64_t;

enum class Pattern : uint8_t {
  kPermutation,    // every host sends to one other, a new random derangement each step
  kAllToAll,       // every host sends to every other, `concurrency` peers at a time
  kIncast,         // `incast_senders` hosts send to host 0
  kRingAllReduce,  // 2(H-1) ring phases, each host sending message/H to its successor
};
const char* pattern_name(Pattern p);

struct WorkloadConfig {
  Pattern pattern = Pattern::kPermutation;
  uint64_t message_bytes = 1 << 20;  // per transfer (ring: the buffer each host reduces)
  uint32_t steps = 1;                // training steps, run back to back
  TimeNs compute_ns = 0;             // gap between one step's end and the next one's start
  uint32_t concurrency = 8;          // all-to-all: transfers a host has in flight at once
  uint32_t incast_senders = 32;
};

enum class TransportKind : uint8_t { kMrc, kRoce };
const char* transport_name(TransportKind t);

struct MrcConfig {
  uint32_t evs_per_plane = 16;
  uint32_t mtu = 4096;
  uint8_t mpr = 2;      // window, in 128-PSN units
  uint8_t timeout = 7;  // ACK timeout 1.024 us * 2^timeout (7: 131 us)
  uint8_t retry_linear = 7;
  uint8_t retry_exp = 7;
  bool nscc = true;         // else congestion control "none"
  bool ecn_avoid = false;   // spraying policy: ECN-avoid instead of round robin
  uint32_t min_active = 0;  // 0: evs_per_plane (a plane's worth)
  TimeNs probe_initial_ns = 20'000;
  TimeNs probe_max_ns = 1'000'000;
  uint32_t max_qps = 0;     // QPs per host (0: one per peer, at most 256)
  engine::QpTuning tuning;  // ACK coalescing and loss detection (the engine's defaults)
};

struct RoceConfig {
  uint32_t mtu = 4096;
  uint8_t timeout = 14;           // 4.096 us * 2^timeout (14: 67 ms, perftest's default)
  uint8_t retry = 7;              // timeouts without progress before the QP fails
  bool dctcp = true;              // ECN-driven window (the role DCQCN plays); else a fixed window
  uint32_t qps_per_transfer = 0;  // 0: one per plane
  uint32_t ack_every = 16;        // coalesce ACKs over this many in-order packets...
  TimeNs ack_delay_ns = 4'000;    // ...or this long
};

struct RunConfig {
  std::vector<TransportKind> transports = {TransportKind::kMrc, TransportKind::kRoce};
  uint64_t seed = 1;
  TimeNs time_limit_ns = 1'000'000'000;  // virtual; a run that has not finished stops here
  bool framed = false;             // MRC packets built, trimmed, marked and parsed through lib/wire
  bool verify = true;              // every message's bytes compared at the receiver
  TimeNs bin_ns = 10'000;          // time-series resolution
  TimeNs port_detect_ns = 10'000;  // a NIC notices its link went down after this
  uint32_t nic_queue_packets = 4;  // per plane: the NIC pulls from the transport below this
};

struct Scenario {
  std::string name;
  std::string description;
  fabric::TopologyConfig topology;
  std::vector<fabric::FaultSpec> faults;
  WorkloadConfig workload;
  MrcConfig mrc;
  RoceConfig roce;
  RunConfig run;
};

// Throws fabric::ConfigError naming the key and the problem.
Scenario read_scenario(const fabric::ConfigNode& root);
// Why a run of `sc` over transport `t` cannot model one of its faults, or
// an empty string. Checked when the run is set up, once --framed and
// --transport have had their say.
std::string unsupported(const Scenario& sc, TransportKind t);
Scenario load_scenario(const std::string& file);

}  // namespace softmrc::sim
