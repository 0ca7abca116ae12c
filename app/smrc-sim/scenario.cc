// Scenario YAML; see scenario.h.
#include "scenario.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "engine/qp_attr.h"
#include "fabric/config.h"

namespace softmrc::sim {

namespace {

using fabric::ConfigError;
using fabric::ConfigNode;

constexpr uint64_t kMaxBins = 1'000'000;

TimeNs us(const ConfigNode& n, const char* key, double lo, double hi, double def_us) {
  return static_cast<TimeNs>(std::llround(n.number(key, lo, hi, def_us) * 1000));
}

uint32_t mtu(const ConfigNode& n, uint32_t def) {
  const auto v = static_cast<uint32_t>(n.integer("mtu", 256, 9000, def));
  if (!engine::valid_path_mtu(v)) n.fail("mtu", "must be 256, 512, 1024, 2048, 4096 or 9000");
  return v;
}

WorkloadConfig read_workload(const ConfigNode& n, uint32_t hosts) {
  n.only({"pattern", "message_kib", "steps", "compute_us", "concurrency", "incast_senders"});
  WorkloadConfig w;
  static constexpr Pattern kPatterns[] = {Pattern::kPermutation, Pattern::kAllToAll,
                                          Pattern::kIncast, Pattern::kRingAllReduce};
  w.pattern =
      kPatterns[n.choice("pattern", {"permutation", "all_to_all", "incast", "ring_allreduce"}, 0)];
  w.message_bytes = static_cast<uint64_t>(
      std::llround(n.number("message_kib", 1.0 / 1024, 2 * 1024 * 1024, 1024) * 1024));
  w.steps = static_cast<uint32_t>(n.integer("steps", 1, 100'000, 1));
  w.compute_ns = us(n, "compute_us", 0, 1e9, 0);
  w.concurrency =
      static_cast<uint32_t>(n.integer("concurrency", 1, hosts - 1, std::min(8u, hosts - 1)));
  w.incast_senders =
      static_cast<uint32_t>(n.integer("incast_senders", 1, hosts - 1, std::min(32u, hosts - 1)));
  if (w.pattern == Pattern::kRingAllReduce && w.message_bytes < hosts)
    n.fail("message_kib", "a ring all-reduce needs at least one byte per host");
  return w;
}

MrcConfig read_mrc(const ConfigNode& n) {
  n.only({"evs_per_plane", "mtu", "mpr", "timeout", "retry_linear", "retry_exp", "cc", "spray",
          "min_active", "probe_initial_us", "probe_max_us", "max_qps", "ack_every", "ack_delay_us",
          "reorder_threshold"});
  MrcConfig m;
  m.evs_per_plane = static_cast<uint32_t>(n.integer("evs_per_plane", 1, 512, m.evs_per_plane));
  m.mtu = mtu(n, m.mtu);
  m.mpr = static_cast<uint8_t>(n.integer("mpr", 1, 64, m.mpr));
  m.timeout = static_cast<uint8_t>(n.integer("timeout", 0, engine::kMaxTimeout, m.timeout));
  m.retry_linear =
      static_cast<uint8_t>(n.integer("retry_linear", 0, engine::kMaxRetryLinear, m.retry_linear));
  m.retry_exp =
      static_cast<uint8_t>(n.integer("retry_exp", 0, engine::kRetryExpUnlimited, m.retry_exp));
  m.nscc = n.choice("cc", {"nscc", "none"}, 0) == 0;
  m.ecn_avoid = n.choice("spray", {"rr", "ecn_avoid"}, 0) == 1;
  m.min_active = static_cast<uint32_t>(n.integer("min_active", 0, 4096, 0));
  m.probe_initial_ns = us(n, "probe_initial_us", 0.001, 60e6, 20);
  m.probe_max_ns = us(n, "probe_max_us", 0.001, 60e6, 1000);
  if (m.probe_max_ns < m.probe_initial_ns)
    n.fail("probe_max_us", "must not be below probe_initial_us");
  m.max_qps = static_cast<uint32_t>(n.integer("max_qps", 0, 1 << 20, 0));
  m.tuning.ack_every_packets =
      static_cast<uint32_t>(n.integer("ack_every", 1, 1024, m.tuning.ack_every_packets));
  m.tuning.ack_delay_ns =
      us(n, "ack_delay_us", 0.001, 1e6, static_cast<double>(m.tuning.ack_delay_ns) / 1000);
  m.tuning.reorder_threshold =
      static_cast<uint32_t>(n.integer("reorder_threshold", 1, 1024, m.tuning.reorder_threshold));
  return m;
}

RoceConfig read_roce(const ConfigNode& n) {
  n.only({"mtu", "timeout", "retry", "cc", "qps_per_transfer", "ack_every", "ack_delay_us"});
  RoceConfig r;
  r.mtu = mtu(n, r.mtu);
  r.timeout = static_cast<uint8_t>(n.integer("timeout", 0, 31, r.timeout));
  r.retry = static_cast<uint8_t>(n.integer("retry", 0, 7, r.retry));
  r.dctcp = n.choice("cc", {"dctcp", "none"}, 0) == 0;
  r.qps_per_transfer = static_cast<uint32_t>(n.integer("qps_per_transfer", 0, 256, 0));
  r.ack_every = static_cast<uint32_t>(n.integer("ack_every", 1, 1024, r.ack_every));
  r.ack_delay_ns = us(n, "ack_delay_us", 0.001, 1e6, 4);
  return r;
}

RunConfig read_run(const ConfigNode& n) {
  n.only({"seed", "time_limit_ms", "framed", "verify", "bin_us", "port_detect_us",
          "nic_queue_packets"});
  RunConfig r;
  r.seed = n.integer("seed", 0, UINT64_MAX, r.seed);
  r.time_limit_ns =
      static_cast<TimeNs>(std::llround(n.number("time_limit_ms", 0.001, 1e6, 1000) * 1e6));
  r.framed = n.boolean("framed", r.framed);
  r.verify = n.boolean("verify", r.verify);
  r.bin_ns = us(n, "bin_us", 0.1, 1e6, 10);
  // The time series is kept in memory and written out whole: a run that
  // goes on to its limit fills every bin up to it.
  if (r.time_limit_ns / r.bin_ns > kMaxBins) {
    char why[160];
    std::snprintf(why, sizeof why,
                  "at least %g for a time_limit_ms of %g: the time series holds at most %" PRIu64
                  " bins",
                  static_cast<double>(r.time_limit_ns) / kMaxBins / 1000,
                  static_cast<double>(r.time_limit_ns) / 1e6, kMaxBins);
    n.fail("bin_us", why);
  }
  r.port_detect_ns = us(n, "port_detect_us", 0, 1e6, 10);
  r.nic_queue_packets = static_cast<uint32_t>(n.integer("nic_queue_packets", 1, 1024, 4));
  return r;
}

}  // namespace

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::kPermutation:
      return "permutation";
    case Pattern::kAllToAll:
      return "all_to_all";
    case Pattern::kIncast:
      return "incast";
    case Pattern::kRingAllReduce:
      return "ring_allreduce";
  }
  return "?";
}

const char* transport_name(TransportKind t) {
  return t == TransportKind::kMrc ? "mrc" : "roce";
}

Scenario read_scenario(const ConfigNode& root) {
  root.only({"name", "description", "topology", "faults", "workload", "transports", "mrc", "roce",
             "run"});
  Scenario s;
  s.name = root.text("name", "unnamed");
  s.description = root.text("description", "");
  s.topology = fabric::read_topology(root.map("topology"));
  s.faults = fabric::read_faults(root, "faults");
  fabric::Topology topo;
  if (const char* why = topo.init(s.topology)) throw ConfigError(std::string("topology: ") + why);
  fabric::FaultSchedule check;
  for (const fabric::FaultSpec& f : s.faults)
    if (std::string why = check.add(f, topo); !why.empty()) throw ConfigError(why);
  s.workload = read_workload(root.map_or_empty("workload"), s.topology.hosts);
  s.mrc = read_mrc(root.map_or_empty("mrc"));
  s.roce = read_roce(root.map_or_empty("roce"));
  s.run = read_run(root.map_or_empty("run"));
  if (root.has("transports")) {
    s.run.transports.clear();
    for (const std::string& t : root.strings("transports")) {
      if (t == "mrc")
        s.run.transports.push_back(TransportKind::kMrc);
      else if (t == "roce")
        s.run.transports.push_back(TransportKind::kRoce);
      else
        root.fail("transports", "each must be mrc or roce, got '" + t + "'");
    }
    if (s.run.transports.empty()) root.fail("transports", "name at least one of mrc, roce");
  }
  if (s.mrc.evs_per_plane * s.topology.planes > 4096)
    throw ConfigError("mrc.evs_per_plane: times the planes must be at most 4096 EVs per QP");
  if (s.mrc.min_active > s.mrc.evs_per_plane * s.topology.planes)
    throw ConfigError("mrc.min_active: above the EVs of a QP (evs_per_plane x planes)");
  return s;
}

std::string unsupported(const Scenario& sc, TransportKind t) {
  for (const fabric::FaultSpec& f : sc.faults) {
    if (f.kind != fabric::FaultKind::kCorrupt) continue;
    if (t == TransportKind::kRoce)
      return f.where +
             ": a corrupt fault needs MRC: the baseline carries lengths, not bytes "
             "(transports: [mrc], or --transport mrc)";
    if (!sc.run.framed)
      return f.where +
             ": a corrupt fault needs framed packets: unframed ones carry no bytes to "
             "corrupt (run.framed: true, or --framed)";
  }
  return {};
}

Scenario load_scenario(const std::string& file) {
  try {
    return read_scenario(fabric::ConfigNode::load_file(file));
  } catch (const fabric::ConfigError& e) {
    throw fabric::ConfigError(file + ": " + e.what());
  }
}

}  // namespace softmrc::sim
