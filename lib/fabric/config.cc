// Topology and fault schedule YAML; see config.h.
#include "fabric/config.h"

#include <cmath>

namespace softmrc::fabric {

namespace {

constexpr double kMaxUs = 1e9;  // 1000 s of virtual time

// The model's rates are whole Mb/s: 0.0015 would run at 2.
uint64_t mbps(const ConfigNode& n, const char* key, double def_gbps) {
  const double gbps = n.number(key, 0.001, 10'000, def_gbps);
  const auto mbps = static_cast<uint64_t>(std::llround(gbps * 1000));
  if (std::abs(gbps * 1000 - static_cast<double>(mbps)) > 1e-6)
    n.fail(key,
           "must be a whole number of Mb/s (a multiple of 0.001), got '" + n.text(key, "") + "'");
  return mbps;
}

uint64_t kib(const ConfigNode& n, const char* key, double lo, double def) {
  return static_cast<uint64_t>(std::llround(n.number(key, lo, 1 << 20, def) * 1024));
}

TimeNs us_to_ns(double us) {
  return static_cast<TimeNs>(std::llround(us * 1000));
}

}  // namespace

TopologyConfig read_topology(const ConfigNode& n) {
  n.only({"hosts", "planes", "radix", "oversubscription", "host_link", "fabric_link",
          "switch_queue", "ev_routing", "reroute_us", "hash_seed"});
  TopologyConfig c;
  c.hosts = static_cast<uint32_t>(n.integer("hosts", 2, 65536));
  c.planes = static_cast<uint32_t>(n.integer("planes", 1, 32, 1));
  c.radix = static_cast<uint32_t>(n.integer("radix", 2, 1024));
  c.oversubscription = n.number("oversubscription", 0.1, 64, 1);
  const ConfigNode host = n.map_or_empty("host_link");
  host.only({"gbps", "delay_ns"});
  c.host_link_mbps = mbps(host, "gbps", 100);
  c.host_link_delay_ns = host.integer("delay_ns", 0, 1'000'000'000, 500);
  const ConfigNode fab = n.map_or_empty("fabric_link");
  fab.only({"gbps", "delay_ns"});
  c.fabric_link_mbps = mbps(fab, "gbps", 100);
  c.fabric_link_delay_ns = fab.integer("delay_ns", 0, 1'000'000'000, 500);
  const ConfigNode q = n.map_or_empty("switch_queue");
  q.only({"buffer_kib", "ecn_kib", "priority_kib", "overflow"});
  c.buffer_bytes = kib(q, "buffer_kib", 1, 256);
  // 0: never marks, as softmrcd's ecn_kib.
  c.ecn_threshold_bytes = kib(q, "ecn_kib", 0, 64);
  if (c.ecn_threshold_bytes == 0) c.ecn_threshold_bytes = kUnbounded;
  if (c.ecn_threshold_bytes != kUnbounded && c.ecn_threshold_bytes >= c.buffer_bytes)
    q.fail("ecn_kib", "must be below buffer_kib (" + q.text("buffer_kib", "256") +
                          "): no packet would be marked, got '" + q.text("ecn_kib", "64") + "'" +
                          (q.has("ecn_kib") ? "" : " (the default)"));
  c.priority_buffer_bytes = kib(q, "priority_kib", 0.25, 64);
  c.overflow = q.choice("overflow", {"drop", "trim"}, 1) == 0 ? Overflow::kDrop : Overflow::kTrim;
  c.ev_routing = n.choice("ev_routing", {"hash", "structured"}, 0) == 0 ? EvRouting::kHash
                                                                        : EvRouting::kStructured;
  c.reroute_ns = us_to_ns(n.number("reroute_us", 0, kMaxUs, 100));
  c.hash_seed = n.integer("hash_seed", 0, UINT64_MAX, 0);
  Topology check;
  if (const char* why = check.init(c)) throw ConfigError(n.path() + ": " + why);
  return c;
}

std::vector<FaultSpec> read_faults(const ConfigNode& parent, const char* key) {
  std::vector<FaultSpec> out;
  for (const ConfigNode& f : parent.list(key)) {
    f.only({"type", "at_us", "for_us", "plane", "host", "leaf", "spine", "all_fabric_links",
            "direction", "loss", "rate", "period_us", "down_us", "count", "probability", "icrc"});
    FaultSpec s;
    s.where = f.path();
    static constexpr FaultKind kKinds[] = {
        FaultKind::kLinkDown, FaultKind::kLinkUp,    FaultKind::kSwitchDown,
        FaultKind::kSwitchUp, FaultKind::kBlackhole, FaultKind::kGray,
        FaultKind::kFlap,     FaultKind::kDegrade,   FaultKind::kCorrupt};
    if (!f.has("type")) f.fail("type", "missing");
    s.kind = kKinds[f.choice("type",
                             {"link_down", "link_up", "switch_down", "switch_up", "blackhole",
                              "gray", "flap", "degrade", "corrupt"},
                             0)];
    s.at_ns = us_to_ns(f.number("at_us", 0, kMaxUs));
    if (f.has("for_us")) s.for_ns = us_to_ns(f.number("for_us", 0.001, kMaxUs));
    FaultTarget& t = s.target;
    t.plane = static_cast<uint32_t>(f.integer("plane", 0, 31));
    const bool host = f.has("host"), leaf = f.has("leaf"), spine = f.has("spine");
    const bool all = f.boolean("all_fabric_links", false);
    if (host + all + (leaf || spine) != 1)
      f.fail("plane",
             "name exactly one target besides the plane: host, leaf and/or spine, or "
             "all_fabric_links: true");
    if (host) {
      t.form = FaultTarget::Form::kHostLink;
      t.host = static_cast<uint32_t>(f.integer("host", 0, 65535));
    } else if (all) {
      t.form = FaultTarget::Form::kPlaneFabric;
    } else {
      t.form = leaf && spine ? FaultTarget::Form::kFabricLink
               : leaf        ? FaultTarget::Form::kLeaf
                             : FaultTarget::Form::kSpine;
      t.leaf = static_cast<uint32_t>(f.integer("leaf", 0, 1023, 0));
      t.spine = static_cast<uint32_t>(f.integer("spine", 0, 1023, 0));
    }
    static constexpr Direction kDirs[] = {Direction::kBoth, Direction::kUp, Direction::kDown};
    t.direction = kDirs[f.choice("direction", {"both", "up", "down"}, 0)];
    if (s.kind == FaultKind::kGray) s.loss = f.number("loss", 0, 1);
    if (s.kind == FaultKind::kDegrade) s.rate_factor = f.number("rate", 0, 1);
    if (s.kind == FaultKind::kFlap) {
      s.period_ns = us_to_ns(f.number("period_us", 0.001, kMaxUs));
      s.down_ns = us_to_ns(f.number("down_us", 0.001, kMaxUs));
      s.count = static_cast<uint32_t>(f.integer("count", 1, 100'000));
    }
    if (s.kind == FaultKind::kCorrupt) {
      s.probability = f.number("probability", 0, 1);
      s.corruption = f.choice("icrc", {"keep", "recompute"}, 0) == 0 ? Corruption::kBadIcrc
                                                                     : Corruption::kRecomputedIcrc;
    }
    // The keys only one kind of fault takes.
    static constexpr struct {
      const char* key;
      FaultKind kind;
    } kOwnKeys[] = {{"loss", FaultKind::kGray},      {"rate", FaultKind::kDegrade},
                    {"period_us", FaultKind::kFlap}, {"down_us", FaultKind::kFlap},
                    {"count", FaultKind::kFlap},     {"probability", FaultKind::kCorrupt},
                    {"icrc", FaultKind::kCorrupt}};
    for (const auto& [key, kind] : kOwnKeys)
      if (f.has(key) && s.kind != kind)
        f.fail(key, std::string("does not apply to a ") + fault_kind_name(s.kind) + " fault");
    out.push_back(s);
  }
  return out;
}

}  // namespace softmrc::fabric
