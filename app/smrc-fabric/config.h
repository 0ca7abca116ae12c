// smrc-fabric's configuration: the YAML file read into plain, validated
// structs. A link's fabric keys are softmrcd's (links[] in
// docs/configuration.md), read by the same code (softmrcd/config_reader.h);
// what is smrc-fabric's own is where the frames come from: per link, the
// ports of sides a and b, one per plane.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "softmrcd/config.h"

namespace softmrc::smrc_fabric {

struct FabricLinkSpec {
  std::vector<std::string> ports[2];  // side a, side b: a device spec per plane
  int lcore = softmrcd::kAnyLcore;    // default: the first worker lcore
  softmrcd::LinkFabricSpec fabric;
};

struct FabricConfig {
  std::string path;          // the file, for messages
  uint32_t path_mtu = 4096;  // sizes the frames the ports take
  uint16_t rx_desc = 512;
  uint16_t tx_desc = 512;
  uint64_t snapshot_ms = 100;
  uint64_t log_interval_ms = 1000;
  std::vector<FabricLinkSpec> links;

  uint32_t num_ports() const;
};

// Reads and validates a file. On failure *err is "<file>: <key>: <problem>"
// (or "<file>:<line>:<column>: ..." for YAML syntax errors).
bool load_config(const std::string& path, FabricConfig* out, std::string* err);
// The same, from text (tests).
bool parse_config(const std::string& text, const std::string& name, FabricConfig* out,
                  std::string* err);

}  // namespace softmrc::smrc_fabric
