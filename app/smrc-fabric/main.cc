// smrc-fabric: the emulated fabric as a DPDK process, between endpoints
// in other processes (softmrcd over net_memif, net_tap, ...).
//
//   smrc-fabric [EAL options] -- --config FILE [--log-interval-ms N] [--duration-ms N]
//
// The configuration is read and checked before the EAL starts; then the
// ports are opened, the links join them, and one or more worker lcores
// forward frames through the emulator until SIGINT, SIGTERM or the
// duration; a summary follows. Exit status: 0 a clean run or a stop by
// signal (setup included), 2 bad usage, configuration or setup.
#include <getopt.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "port/ethdev/eal_cleanup.h"
#include "smrc-fabric/config.h"
#include "smrc-fabric/fabric_process.h"
#include "smrc-fabric/telemetry.h"
#include "softmrcd/dpdk_program.h"

namespace {

using namespace softmrc::smrc_fabric;

constexpr int kExitUsage = 2;

void print_usage(const char* prog) {
  std::printf(
      "usage: %s [EAL options] -- --config FILE [options]\n"
      "\n"
      "smrc-fabric, the emulated MRC fabric: per link and plane it joins a port of\n"
      "side a to a port of side b (net_memif servers that softmrcd's memif clients\n"
      "connect to, net_tap, any DPDK port) and forwards frames both ways through\n"
      "the fabric emulator: rate, delay, buffer, ECN marking, trimming, loss,\n"
      "corruption, blackholes, planes going down and up on a schedule. EAL options\n"
      "(before --) are DPDK's own, e.g. -l 0-1 --no-huge -m 512 --no-pci; the main\n"
      "lcore runs the control thread, so give at least one more. The YAML file\n"
      "(docs/configuration.md, \"smrc-fabric\") names the links, their ports and\n"
      "the same link keys as softmrcd's links[].\n"
      "\n"
      "  -c, --config FILE        the configuration (required)\n"
      "      --log-interval-ms N  a status line every N ms, 0 for none\n"
      "                           (default: the config's stats.log_interval_ms, 1000)\n"
      "      --duration-ms N      stop after N ms; 0 (the default): run until SIGINT or\n"
      "                           SIGTERM\n"
      "  -h, --help               this text\n"
      "      --version            softmrc's release and the DPDK it runs on\n"
      "\n"
      "A plane that goes down drops everything in both directions; ports whose PMD\n"
      "can take their link down (net_tap, net_ring) go down with it, net_memif\n"
      "ports stay up. SIGINT or SIGTERM stops it, during setup too; a summary per\n"
      "link, plane and direction and per port follows once it forwarded.\n"
      "\n"
      "Counters: DPDK telemetry (dpdk-telemetry.py -f <file prefix>): /softmrc/links,\n"
      "/softmrc/fabric/ports, and /softmrc/fabric/set,<link>,<plane>,<what>,<value>\n"
      "[,<direction>] to change a plane while it runs.\n"
      "\n"
      "Exit status: 0 a clean run, or stopped by SIGINT or SIGTERM (also during\n"
      "setup); 2 bad options, configuration or EAL setup.\n",
      prog);
}

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "smrc-fabric: %s\n", msg.c_str());
  return kExitUsage;
}

bool parse_options(int argc, char** argv, Options* o, std::string* err) {
  enum : int { kLogInterval = 256, kDuration, kVersion };
  static const option kLong[] = {
      {"config", required_argument, nullptr, 'c'},
      {"log-interval-ms", required_argument, nullptr, kLogInterval},
      {"duration-ms", required_argument, nullptr, kDuration},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, kVersion},
      {nullptr, 0, nullptr, 0},
  };
  optind = 1;
  opterr = 0;
  int c;
  uint64_t v = 0;
  while ((c = getopt_long(argc, argv, ":c:h", kLong, nullptr)) != -1) {
    switch (c) {
      case 'c':
        if (!softmrc::softmrcd::set_config_option(optarg, &o->config, err)) return false;
        break;
      case kLogInterval:
        if (!softmrc::softmrcd::parse_ms_option("log-interval-ms", optarg, 3'600'000, &v, err))
          return false;
        o->log_interval_ms = static_cast<int64_t>(v);
        break;
      case kDuration:
        if (!softmrc::softmrcd::parse_ms_option("duration-ms", optarg, 86'400'000, &v, err))
          return false;
        o->duration_ms = v;
        break;
      case 'h':
        o->help = true;
        return true;
      case kVersion:
        o->version = true;
        return true;
      default:
        *err = softmrc::softmrcd::option_error(c, argv);
        return false;
    }
  }
  return softmrc::softmrcd::check_operands(argc, argv, o->config, "smrc-fabric", err);
}

}  // namespace

int main(int argc, char** argv) {
  softmrc::softmrcd::ProgramArgs args = softmrc::softmrcd::split_program_args(argc, argv);
  Options opt;
  std::string err;
  if (!parse_options(static_cast<int>(args.own.size()), args.own.data(), &opt, &err))
    return usage_error(err);
  if (opt.help) {
    print_usage(argv[0]);
    return 0;
  }
  if (opt.version) {
    softmrc::softmrcd::print_version("smrc-fabric");
    return 0;
  }
  // From here on, SIGINT and SIGTERM stop smrc-fabric cleanly, setup included.
  softmrc::softmrcd::catch_stop_signals();
  FabricConfig cfg;
  if (!load_config(opt.config, &cfg, &err)) {
    // A signal fails a blocking open (a FIFO's) with EINTR: a stop, not a bad file.
    if (softmrc::softmrcd::stop_signal() == nullptr) return usage_error(err);
    std::printf("smrc-fabric: stopped (%s) while reading %s, before any setup\n",
                softmrc::softmrcd::stop_signal(), opt.config.c_str());
    return 0;
  }

  if (rte_eal_init(args.eal_argc, argv) < 0)
    return usage_error(std::string("EAL initialisation failed: ") + rte_strerror(rte_errno));
  attach_telemetry(nullptr);
  int status = kExitUsage;
  {
    FabricProcess fabric;
    if (!fabric.setup(cfg, opt, &err)) {
      // A signal may have failed a step on its own (EINTR): not the file's fault.
      if (softmrc::softmrcd::stop_signal() != nullptr) {
        std::printf("smrc-fabric: stopped (%s) during setup\n", softmrc::softmrcd::stop_signal());
        status = 0;
      } else {
        std::fprintf(stderr, "smrc-fabric: %s: %s\n", cfg.path.c_str(), err.c_str());
      }
    } else {
      attach_telemetry(&fabric);
      status = fabric.run();
      attach_telemetry(nullptr);
    }
  }
  softmrc::port::eal_cleanup();
  return status;
}
