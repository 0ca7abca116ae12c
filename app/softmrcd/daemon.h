// The daemon: builds the hosted endpoints and in-process links from the
// configuration, gives each lcore its roles, and runs the control thread on
// the main lcore (the prompt, the periodic log, signals, shutdown).
//
// The lcore model: every endpoint, every link and every plane port given
// an lcore of its own (port_task.h) is a role that one lcore owns; an
// lcore runs all of its roles in turn, in one loop, so one lcore may carry
// everything (a 2-core machine), or each endpoint and each of its ports may
// have its own (bare metal). Roles share nothing but rings (the ports',
// the port lcores' and the commands') and the Phase; the control thread
// and telemetry read Published snapshots.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "softmrcd/clock.h"
#include "softmrcd/config.h"
#include "softmrcd/control_service.h"
#include "softmrcd/endpoint_task.h"
#include "softmrcd/fabric.h"
#include "softmrcd/linerate.h"
#include "softmrcd/options.h"

namespace softmrc::softmrcd {

class Prompt;

class Daemon {
 public:
  Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  ~Daemon();

  // After rte_eal_init. On failure *err is "<key>: <problem>"; false too,
  // between steps, once a stop signal arrived (stop_signal()).
  bool setup(const Config& cfg, const Options& opt, std::string* err);
  // After setup() gave up for a stop signal: says so; the exit status.
  int setup_stopped();
  // Runs until the traffic is done, a signal, or 'quit'; the exit status.
  int run();
  void teardown();

  // The control thread and telemetry threads.
  const Config& config() const { return cfg_; }
  std::vector<std::unique_ptr<EndpointTask>>& endpoints() { return endpoints_; }
  std::vector<std::unique_ptr<Link>>& links() { return links_; }
  EndpointTask* find_endpoint(const std::string& name);
  Phase phase() const { return phase_.load(std::memory_order_acquire); }
  // Every endpoint's snapshot, newest copies (the control thread's view).
  std::vector<EndpointSnapshot> snapshots();

  // The prompt's commands. Those sent to every endpoint's lcore return the
  // endpoints they did not reach (a full command ring: the lcore is behind).
  std::vector<std::string> start_traffic();
  std::vector<std::string> stop_traffic();
  void request_stop(const char* why);
  std::vector<std::string> clear_stats();
  // Whether some flow of the traffic starts or ends at a hosted endpoint
  // (else start and stop have nothing to act on).
  bool hosts_traffic() const;

  // Setup: a service the control thread serves from now on.
  void add_service(std::unique_ptr<ControlService> s) { services_.push_back(std::move(s)); }

 private:
  struct LcoreRoles {
    Daemon* daemon = nullptr;
    std::vector<EndpointTask*> endpoints;
    std::vector<Link*> links;
    std::vector<PortTask*> ports;  // planes' ports on lcores of their own
  };

  static int lcore_main(void* arg);
  bool assign_lcores(std::string* err);
  bool setup_traffic(std::string* err);
  std::vector<std::string> broadcast(const Command& c);
  void wait_for_input(uint64_t timeout_ms);
  void control_step(uint64_t now);
  void measure_linerate(uint64_t now);
  void log_status(uint64_t now);
  void report_recoveries(const std::vector<EndpointSnapshot>& snaps);
  int summarize(uint64_t now);
  // Whether a run that moved no message of the traffic failed: some flow
  // has an end here, and its traffic was started (by 'start' under -i).
  bool traffic_expected() const;

  Config cfg_;
  Options opt_;
  Clock clock_;
  std::atomic<Phase> phase_{Phase::kRun};
  std::vector<std::unique_ptr<EndpointTask>> endpoints_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<LcoreRoles> roles_;  // by lcore id
  std::unique_ptr<Prompt> prompt_;
  std::vector<std::unique_ptr<ControlService>> services_;
  std::vector<pollfd> fds_;          // one wait's: the prompt's, then each service's
  std::vector<size_t> service_fds_;  // per service: how many of fds_ are its
  std::unique_ptr<Linerate> linerate_;
  uint64_t linerate_t0_ns_ = 0;  // the measured interval's start (snapshot time)
  uint64_t linerate_packets0_ = 0;

  bool traffic_started_ = false;
  std::string stop_reason_;
  uint64_t started_ns_ = 0;
  uint64_t stop_at_ns_ = 0;  // when draining began
  uint64_t phase_deadline_ns_ = 0;
  uint64_t next_log_ns_ = 0;
  uint64_t log_interval_ns_ = 0;
  uint64_t last_log_ns_ = 0;
  std::vector<EndpointSnapshot> last_log_;  // the previous log line's counters
  std::vector<LinkSnapshot> last_link_log_;
  Recovery dip_;  // the slowest recovery from a plane failure, for the last line
  PlaneFault dip_fault_;
  uint64_t dip_at_ns_ = 0;
  double dip_rtt_ns_ = 0;
};

}  // namespace softmrc::softmrcd
