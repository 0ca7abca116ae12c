// YAML for the fabric: a `topology:` mapping into a TopologyConfig and a
// `faults:` list into FaultSpecs. docs/simulation.md lists every key with
// its unit and default. Errors throw ConfigError naming the key.
#pragma once

#include <vector>

#include "fabric/config_node.h"
#include "fabric/faults.h"
#include "fabric/topology.h"

namespace softmrc::fabric {

// Reads the mapping and checks the result with Topology::init().
TopologyConfig read_topology(const ConfigNode& node);
// Reads every entry of the list `key` of `parent`; targets are checked
// against a topology later, by FaultSchedule::add().
std::vector<FaultSpec> read_faults(const ConfigNode& parent, const char* key);

}  // namespace softmrc::fabric
