// softmrcd's own command-line options: the arguments after "--" (EAL's
// options come before it, as for every DPDK program).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "softmrcd/linerate.h"

namespace softmrc::softmrcd {

struct Options {
  std::string config;
  bool interactive = false;
  bool help = false;
  bool version = false;
  int64_t log_interval_ms = -1;          // -1: the config's stats.log_interval_ms
  std::optional<LinerateSpec> linerate;  // --linerate probe, rx:SIZE or tx:SIZE
};

// Parses argv[0..argc) (argv[0] is the program name). On failure *err says
// which option and why.
bool parse_options(int argc, char** argv, Options* out, std::string* err);
void print_usage(const char* prog);

}  // namespace softmrc::softmrcd
