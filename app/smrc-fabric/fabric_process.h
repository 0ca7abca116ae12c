// smrc-fabric as a process: the ports of every link (opened from their
// device specs), the links that join them (softmrcd/fabric.h, standalone
// mode), the lcores that poll the links, and the control thread on the
// main lcore (signals, the status line, the end of the run, the summary).
//
// The lcore model is softmrcd's: each link is a role owned by one worker
// lcore (links[].lcore, default the first worker); an lcore polls its
// links in turn. The control thread and telemetry read the links' Published
// snapshots and queue changes through Link::request(), never touching a
// link's state.
#pragma once

#include <rte_mempool.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "port/ethdev/ethdev_port.h"
#include "smrc-fabric/config.h"
#include "softmrcd/clock.h"
#include "softmrcd/fabric.h"

namespace softmrc::smrc_fabric {

struct Options {
  std::string config;
  bool help = false;
  bool version = false;
  int64_t log_interval_ms = -1;  // -1: the config's stats.log_interval_ms
  uint64_t duration_ms = 0;      // 0: until SIGINT or SIGTERM
};

// A port of a link: which side and plane it is.
struct FabricPort {
  uint32_t link = 0;
  int side = 0;
  uint32_t plane = 0;
  std::string spec;
  std::unique_ptr<port::EthdevPort> port;
};

class FabricProcess {
 public:
  FabricProcess() = default;
  FabricProcess(const FabricProcess&) = delete;
  FabricProcess& operator=(const FabricProcess&) = delete;
  ~FabricProcess();

  // After rte_eal_init. On failure *err is "<key>: <problem>".
  bool setup(const FabricConfig& cfg, const Options& opt, std::string* err);
  // Runs until a signal or the duration; the exit status.
  int run();
  void teardown();

  // Telemetry threads.
  const std::vector<std::unique_ptr<softmrcd::Link>>& links() const { return links_; }
  const std::vector<FabricPort>& ports() const { return ports_; }

 private:
  struct LcoreRoles {
    FabricProcess* process = nullptr;
    std::vector<softmrcd::Link*> links;
  };

  static int lcore_main(void* arg);
  bool open_ports(std::string* err);
  bool assign_lcores(std::string* err);
  void log_status(uint64_t now);
  void summarize(uint64_t now, const char* why);

  FabricConfig cfg_;
  Options opt_;
  softmrcd::Clock clock_;
  std::atomic<bool> stop_{false};
  rte_mempool* pool_ = nullptr;
  std::vector<FabricPort> ports_;
  std::vector<std::unique_ptr<softmrcd::Link>> links_;
  std::vector<LcoreRoles> roles_;  // by lcore id
  uint64_t log_interval_ns_ = 0;
  uint64_t last_log_ns_ = 0;
  std::vector<softmrcd::LinkSnapshot> last_log_;
};

}  // namespace softmrc::smrc_fabric
