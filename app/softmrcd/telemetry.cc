// /softmrc/ telemetry commands (see telemetry.h).
#include "softmrcd/telemetry.h"

#include <rte_telemetry.h>

#include <cstring>
#include <mutex>
#include <string>

#include "softmrcd/daemon.h"
#include "softmrcd/report.h"

namespace softmrc::softmrcd {

namespace {

std::mutex g_mu;  // guards g_daemon against teardown while a command runs
Daemon* g_daemon = nullptr;

struct TelemetryCommand {
  const char* path;
  const char* report;  // nullptr: the link change command
  const char* help;
};

constexpr TelemetryCommand kCommands[] = {
    {"/softmrc/endpoints", "endpoints", "Hosted endpoints: lcore, planes, QPs. No parameters"},
    {"/softmrc/ports", "ports", "Ethdev counters per endpoint plane. Parameter: [endpoint]"},
    {"/softmrc/planes", "planes",
     "Plane state (link, admin, in use) and counters. Parameter: [endpoint]"},
    {"/softmrc/qps", "qps", "QP summaries, 32 at a time. Parameters: [endpoint[,first]]"},
    {"/softmrc/qp", "qp", "Every counter of one QP. Parameters: [endpoint,]qpn"},
    {"/softmrc/evs", "evs",
     "EV states and counters of a QP, 32 at a time. Parameters: "
     "[endpoint,]qpn[,first]"},
    {"/softmrc/drops", "drops", "Dropped packets by reason. Parameter: [endpoint]"},
    {"/softmrc/stats", "stats",
     "Per-endpoint totals and the traffic generator. Parameter: [endpoint]"},
    {"/softmrc/links", "links",
     "The in-process fabric per link and plane: counters, drops, faults. Parameter: "
     "[endpoint] (the link it is on)"},
    {"/softmrc/fabric/set", nullptr,
     "Changes a plane of an in-process link (docs/daemon.md). Parameters: "
     "link,plane,what,value[,direction]"},
};

// DPDK refuses to register a command whose help has 128 characters or more.
constexpr bool helps_fit() {
  for (const TelemetryCommand& c : kCommands)
    if (std::char_traits<char>::length(c.help) >= 128) return false;
  return true;
}
static_assert(helps_fit());

int on_command(const char* cmd, const char* params, rte_tel_data* d) {
  const TelemetryCommand* c = nullptr;
  for (const TelemetryCommand& k : kCommands)
    if (std::strcmp(k.path, cmd) == 0) c = &k;
  std::lock_guard<std::mutex> lock(g_mu);
  Report report;
  std::string err;
  if (g_daemon == nullptr) {
    err = "softmrcd is starting or stopping";
  } else if (c == nullptr) {
    err = "unknown command";
  } else if (c->report == nullptr) {
    change_link(*g_daemon, split_params(params), &report, &err);
  } else {
    make_report(*g_daemon, c->report, split_params(params), &report, &err);
  }
  return put_report(report, err, d);
}

}  // namespace

void attach_telemetry(Daemon* d) {
  static bool registered = false;
  std::lock_guard<std::mutex> lock(g_mu);
  g_daemon = d;
  if (registered) return;
  registered = true;
  for (const TelemetryCommand& c : kCommands)
    rte_telemetry_register_cmd(c.path, on_command, c.help);
}

}  // namespace softmrc::softmrcd
