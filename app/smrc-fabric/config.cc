// Reading and validating smrc-fabric's YAML configuration (see config.h).
#include "smrc-fabric/config.h"

#include "engine/path/ev_set.h"
#include "softmrcd/config_reader.h"

namespace softmrc::smrc_fabric {

namespace {

using softmrcd::ClaimedOnce;
using softmrcd::device_name;
using softmrcd::fail;
using softmrcd::index_key;
using softmrcd::Map;
using softmrcd::quoted;

void read_ports(Map& m, const char* side, std::vector<std::string>* out) {
  const YAML::Node ports = m.list(side);
  if (ports.size() == 0 || ports.size() > engine::kMaxPlanes)
    fail(m.key(side), "needs 1.." + std::to_string(engine::kMaxPlanes) + " ports, one per plane");
  for (size_t p = 0; p < ports.size(); ++p) {
    if (!ports[p].IsScalar() || ports[p].Scalar().empty())
      fail(index_key(m.key(side), p), "must be a device spec, not " + quoted(ports[p]));
    out->push_back(ports[p].Scalar());
  }
}

void read_link(const YAML::Node& node, const std::string& key, FabricConfig* c) {
  Map m(node, key);
  FabricLinkSpec l;
  read_ports(m, "a", &l.ports[0]);
  read_ports(m, "b", &l.ports[1]);
  if (l.ports[1].size() != l.ports[0].size())
    fail(m.key("b"), std::to_string(l.ports[1].size()) + " ports, but a has " +
                         std::to_string(l.ports[0].size()) + " (one port per plane on each side)");
  m.uint("lcore", 0, softmrcd::kMaxLcoreId, &l.lcore);
  read_link_fabric(m, static_cast<uint32_t>(l.ports[0].size()), &l.fabric);
  // Only SRv6 changes what a switch does: it routes on, and consumes, uSIDs.
  wire::EvMode ev_mode = wire::EvMode::kUdp;
  read_ev_mode(m, &ev_mode);
  l.fabric.srv6 = ev_mode == wire::EvMode::kSrv6;
  m.done();
  c->links.push_back(l);
}

// A device is one port: it cannot be two planes, or two sides.
void check_ports_unique(const FabricConfig& c) {
  ClaimedOnce devices;
  for (size_t i = 0; i < c.links.size(); ++i)
    for (int side = 0; side < 2; ++side)
      for (size_t p = 0; p < c.links[i].ports[side].size(); ++p)
        devices.claim(device_name(c.links[i].ports[side][p]),
                      index_key(index_key("links", i) + (side == 0 ? ".a" : ".b"), p));
}

void read_root(const YAML::Node& root, FabricConfig* c) {
  if (!root || root.IsNull()) fail("(file)", "is empty");
  Map m(root, "");
  softmrcd::read_path_mtu(m, &c->path_mtu);
  {
    Map r(m.get("rings"), "rings");
    r.uint("rx_desc", 32, 16384, &c->rx_desc);
    r.uint("tx_desc", 32, 16384, &c->tx_desc);
    r.done();
  }
  {
    Map s(m.get("stats"), "stats");
    s.uint("snapshot_ms", 1, 60'000, &c->snapshot_ms);
    s.uint("log_interval_ms", 0, 3'600'000, &c->log_interval_ms);
    s.done();
  }
  const YAML::Node links = m.list("links");
  if (links.size() == 0) fail("links", "missing (at least one link to emulate)");
  for (size_t i = 0; i < links.size(); ++i) read_link(links[i], index_key("links", i), c);
  check_ports_unique(*c);
  m.done();
}

}  // namespace

uint32_t FabricConfig::num_ports() const {
  uint32_t n = 0;
  for (const FabricLinkSpec& l : links) n += static_cast<uint32_t>(l.ports[0].size() * 2);
  return n;
}

bool parse_config(const std::string& text, const std::string& name, FabricConfig* out,
                  std::string* err) {
  *out = FabricConfig{};
  out->path = name;
  return softmrcd::read_yaml(
      text, name, [out](const YAML::Node& root) { read_root(root, out); }, err);
}

bool load_config(const std::string& path, FabricConfig* out, std::string* err) {
  *out = FabricConfig{};
  out->path = path;
  return softmrcd::read_yaml_file(
      path, [out](const YAML::Node& root) { read_root(root, out); }, err);
}

}  // namespace softmrc::smrc_fabric
