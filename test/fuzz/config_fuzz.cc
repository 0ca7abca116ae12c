// libFuzzer target for the YAML configuration readers of softmrcd and
// smrc-fabric (parse_config): a file is input they must refuse cleanly,
// whoever wrote it. Each input goes to both. The promises checked:
//   - any bytes are read or refused, never a crash, an escaping exception
//     or undefined behaviour;
//   - a refusal names the file: "<file>: <key>: <problem>" or
//     "<file>:<line>:<column>: ..." (docs/configuration.md);
//   - what is accepted holds what the programs rely on later. softmrcd:
//     at least one endpoint, every endpoint with the same 1..kMaxPlanes
//     planes, all of one IP version. smrc-fabric: at least one link, each
//     with the same 1..kMaxPlanes ports on both sides, no device twice.
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_endpoint.h"
#include "smrc-fabric/config.h"
#include "softmrcd/config.h"

namespace softmrc::fuzz {
namespace {

constexpr const char* kName = "fuzz.yaml";

void check_refusal(const std::string& err) {
  if (err.rfind(std::string(kName) + ":", 0) != 0) fail("a refusal that does not name the file");
}

void read_as_softmrcd(const std::string& text) {
  softmrcd::Config cfg;
  std::string err;
  if (!softmrcd::parse_config(text, kName, &cfg, &err)) return check_refusal(err);
  if (cfg.endpoints.empty()) fail("no endpoint");
  const size_t planes = cfg.endpoints[0].planes.size();
  if (planes == 0 || planes > engine::kMaxPlanes) fail("an endpoint with no planes or too many");
  for (const softmrcd::EndpointSpec& e : cfg.endpoints) {
    if (e.planes.size() != planes) fail("endpoints with different numbers of planes");
    for (const softmrcd::PlaneSpec& p : e.planes)
      if (p.ip_version != cfg.endpoints[0].planes[0].ip_version)
        fail("IPv4 and IPv6 planes in one configuration");
  }
}

void read_as_smrc_fabric(const std::string& text) {
  smrc_fabric::FabricConfig cfg;
  std::string err;
  if (!smrc_fabric::parse_config(text, kName, &cfg, &err)) return check_refusal(err);
  if (cfg.links.empty()) fail("no link");
  std::set<std::string> devices;
  for (const smrc_fabric::FabricLinkSpec& l : cfg.links) {
    if (l.ports[0].empty() || l.ports[0].size() > engine::kMaxPlanes ||
        l.ports[1].size() != l.ports[0].size())
      fail("a link whose sides do not have the same 1..kMaxPlanes ports");
    for (const auto& side : l.ports)
      for (const std::string& spec : side)
        if (!devices.insert(spec.substr(0, spec.find(','))).second) fail("a device used twice");
  }
}

}  // namespace
}  // namespace softmrc::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  softmrc::fuzz::read_as_softmrcd(text);
  softmrc::fuzz::read_as_smrc_fabric(text);
  return 0;
}
