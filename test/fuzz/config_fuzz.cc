// libFuzzer target for softmrcd's configuration reader (parse_config): a
// YAML file is input the daemon must refuse cleanly, whoever wrote it. The
// promises checked:
//   - any bytes are read or refused, never a crash, an escaping exception
//     or undefined behaviour;
//   - a refusal names the file: "<file>: <key>: <problem>" or
//     "<file>:<line>:<column>: ..." (docs/configuration.md);
//   - what is accepted holds what the daemon relies on later: at least
//     one endpoint, every endpoint with the same 1..kMaxPlanes planes, all
//     of one IP version.
#include <cstdint>
#include <string>

#include "fuzz_endpoint.h"
#include "softmrcd/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace softmrc;
  const std::string text(reinterpret_cast<const char*>(data), size);
  softmrcd::Config cfg;
  std::string err;
  if (!softmrcd::parse_config(text, "fuzz.yaml", &cfg, &err)) {
    if (err.rfind("fuzz.yaml:", 0) != 0) fuzz::fail("a refusal that does not name the file");
    return 0;
  }
  if (cfg.endpoints.empty()) fuzz::fail("no endpoint");
  const size_t planes = cfg.endpoints[0].planes.size();
  if (planes == 0 || planes > engine::kMaxPlanes)
    fuzz::fail("an endpoint with no planes or too many");
  for (const softmrcd::EndpointSpec& e : cfg.endpoints) {
    if (e.planes.size() != planes) fuzz::fail("endpoints with different numbers of planes");
    for (const softmrcd::PlaneSpec& p : e.planes)
      if (p.ip_version != cfg.endpoints[0].planes[0].ip_version)
        fuzz::fail("IPv4 and IPv6 planes in one configuration");
  }
  return 0;
}
