// softmrcd: the MRC endpoint as a DPDK process.
//
//   softmrcd [EAL options] -- --config FILE [-i] [--log-interval-ms N]
//
// The configuration is read and checked before the EAL starts, so a bad
// file costs no EAL setup; then the daemon builds the endpoints, links and
// traffic, runs until its traffic is done or it is told to stop, and prints
// a summary. Exit status: 0 clean, 1 a transfer failed or checked nothing,
// 2 bad usage. SIGINT and SIGTERM stop it cleanly from before the EAL on
// (exit 1 if that was before its traffic ran, or before its file was read).
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_pdump.h>

#include <cstdio>
#include <string>
#include <vector>

#include "port/ethdev/eal_cleanup.h"
#include "softmrcd/config.h"
#include "softmrcd/daemon.h"
#include "softmrcd/dpdk_program.h"
#include "softmrcd/options.h"
#include "softmrcd/telemetry.h"

namespace {

using namespace softmrc::softmrcd;

constexpr int kExitUsage = 2;

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "softmrcd: %s\n", msg.c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  ProgramArgs args = split_program_args(argc, argv);
  Options opt;
  std::string err;
  if (!parse_options(static_cast<int>(args.own.size()), args.own.data(), &opt, &err))
    return usage_error(err);
  if (opt.help) {
    print_usage(argv[0]);
    return 0;
  }
  if (opt.version) {
    print_version("softmrcd");
    return 0;
  }
  // From here on, SIGINT and SIGTERM stop softmrcd cleanly, setup included.
  catch_stop_signals();
  Config cfg;
  if (!load_config(opt.config, &cfg, &err)) {
    // A signal fails a blocking open (a FIFO's) with EINTR: a stop, not a bad
    // file. Whether traffic was due is unknown, so nothing counts as verified.
    if (stop_signal() == nullptr) return usage_error(err);
    std::printf("softmrcd: stopped (%s) while reading %s, before any setup\n", stop_signal(),
                opt.config.c_str());
    return 1;
  }

  if (rte_eal_init(args.eal_argc, argv) < 0)
    return usage_error(std::string("EAL initialisation failed: ") + rte_strerror(rte_errno));
  // Lets dpdk-dumpcap and dpdk-pdump (secondary processes) capture our
  // ports; impossible without a shared configuration (--no-shconf).
  const bool capture = rte_pdump_init() == 0;
  attach_telemetry(nullptr);
  int status = kExitUsage;
  {
    Daemon daemon;
    if (!daemon.setup(cfg, opt, &err)) {
      // A signal may have failed a step on its own (EINTR): not the file's fault.
      if (stop_signal() != nullptr)
        status = daemon.setup_stopped();
      else
        std::fprintf(stderr, "softmrcd: %s: %s\n", cfg.path.c_str(), err.c_str());
    } else {
      attach_telemetry(&daemon);
      status = daemon.run();
      attach_telemetry(nullptr);
    }
  }
  if (capture) rte_pdump_uninit();
  softmrc::port::eal_cleanup();
  return status;
}
