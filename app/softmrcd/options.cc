// softmrcd's command-line options (see options.h).
#include "softmrcd/options.h"

#include <getopt.h>

#include <cstdio>

#include "softmrcd/dpdk_program.h"

namespace softmrc::softmrcd {

void print_usage(const char* prog) {
  std::printf(
      "usage: %s [EAL options] -- --config FILE [options]\n"
      "\n"
      "softmrcd, the MRC endpoint: poll-mode lcores carry out MRC on one DPDK port\n"
      "per plane. EAL options (before --) are DPDK's own, e.g. -l 0-1 --no-huge -m 512\n"
      "--vdev net_null0; the main lcore runs the control thread, so give at least one\n"
      "more. The YAML file (docs/configuration.md) names the endpoints, their ports,\n"
      "lcores, profiles and the traffic generator's flows.\n"
      "\n"
      "  -c, --config FILE        the configuration (required)\n"
      "  -i, --interactive        a prompt (type 'help'); traffic waits for 'start'\n"
      "      --log-interval-ms N  a status line every N ms, 0 for none\n"
      "                           (default: the config's stats.log_interval_ms, 1000)\n"
      "      --linerate MODE      measure the packet path on net_null ports against a\n"
      "                           synthetic peer, print Mpps and Gb/s, and exit:\n"
      "                           probe (header-only: probe requests in, replies out),\n"
      "                           rx:SIZE (data in, placed, ACKs out), rx-fcs:SIZE (rx\n"
      "                           with each frame's FCS kept, as a NIC with KEEP_CRC\n"
      "                           leaves it) or tx:SIZE (data out, ACKs in); see\n"
      "                           bench/linerate.py\n"
      "  -h, --help               this text\n"
      "      --version            softmrc's release and the DPDK it runs on\n"
      "\n"
      "Without -i, traffic starts at once; when every flow has a message count or a\n"
      "duration, softmrcd exits after the last one completes. SIGINT or SIGTERM stops\n"
      "it cleanly: new work stops, in-flight work completes (or is flushed after\n"
      "shutdown.drain_ms), then a summary. One during setup (ports probed and\n"
      "started) ends setup at its next step: what was set up is torn down, and the\n"
      "run counts as one whose traffic never ran, as does one while the config file\n"
      "is still being opened (a FIFO).\n"
      "\n"
      "Counters: DPDK telemetry, commands under /softmrc/ (dpdk-telemetry.py -f <file\n"
      "prefix>, then /softmrc/stats, /softmrc/ports, /softmrc/planes, /softmrc/qps,\n"
      "/softmrc/qp,<endpoint>,<qpn>, /softmrc/evs,<endpoint>,<qpn>[,<first>],\n"
      "/softmrc/drops, /softmrc/links, /softmrc/endpoints, and\n"
      "/softmrc/fabric/set,<link>,<plane>,<what>,<value>[,<direction>]).\n"
      "\n"
      "Exit status: 0 clean run (every byte verified; also no traffic configured, or\n"
      "-i and 'start' never typed), 1 a transfer failed, a byte was wrong, or the\n"
      "traffic checked nothing (no message completed or arrived: a peer that never\n"
      "answered, a stop during setup or the config read), 2 bad options,\n"
      "configuration or EAL setup.\n",
      prog);
}

bool parse_options(int argc, char** argv, Options* o, std::string* err) {
  enum : int { kLogInterval = 256, kLinerate, kVersion };
  static const option kLong[] = {
      {"config", required_argument, nullptr, 'c'},
      {"interactive", no_argument, nullptr, 'i'},
      {"log-interval-ms", required_argument, nullptr, kLogInterval},
      {"linerate", required_argument, nullptr, kLinerate},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, kVersion},
      {nullptr, 0, nullptr, 0},
  };
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":c:ih", kLong, nullptr)) != -1) {
    switch (c) {
      case 'c':
        if (!set_config_option(optarg, &o->config, err)) return false;
        break;
      case 'i':
        o->interactive = true;
        break;
      case kLogInterval: {
        uint64_t v = 0;
        if (!parse_ms_option("log-interval-ms", optarg, 3'600'000, &v, err)) return false;
        o->log_interval_ms = static_cast<int64_t>(v);
        break;
      }
      case kLinerate: {
        LinerateSpec spec;
        if (!parse_linerate(optarg, &spec, err)) return false;
        o->linerate = spec;
        break;
      }
      case 'h':
        o->help = true;
        return true;
      case kVersion:
        o->version = true;
        return true;
      default:
        *err = option_error(c, argv);
        return false;
    }
  }
  return check_operands(argc, argv, o->config, "softmrcd", err);
}

}  // namespace softmrc::softmrcd
