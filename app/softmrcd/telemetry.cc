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
  const char* report;   // nullptr: the link change command
  bool paged_by_reply;  // [endpoint][,first]: rows from `first` that fit one reply
  const char* help;
};

constexpr TelemetryCommand kCommands[] = {
    {"/softmrc/endpoints", "endpoints", true,
     "Hosted endpoints: lcore, planes, QPs. Parameters: [,first]"},
    {"/softmrc/ports", "ports", true,
     "Ethdev counters per endpoint plane. Parameters: [endpoint][,first]"},
    {"/softmrc/planes", "planes", true,
     "Plane state (link, admin, in use) and counters. Parameters: [endpoint][,first]"},
    {"/softmrc/qps", "qps", false, "QP summaries, 32 at a time. Parameters: [endpoint[,first]]"},
    {"/softmrc/qp", "qp", false, "Every counter of one QP. Parameters: [endpoint,]qpn"},
    {"/softmrc/evs", "evs", false,
     "EV states and counters of a QP, 32 at a time. Parameters: "
     "[endpoint,]qpn[,first]"},
    {"/softmrc/drops", "drops", true, "Dropped packets by reason. Parameters: [endpoint][,first]"},
    {"/softmrc/stats", "stats", true,
     "Per-endpoint totals and the traffic generator. Parameters: [endpoint][,first]"},
    {"/softmrc/links", "links", true,
     "The in-process fabric per link and plane. Parameters: [endpoint][,first] (the link it is "
     "on)"},
    {"/softmrc/fabric/set", nullptr, false,
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
  std::vector<std::string> args = split_params(params);
  uint32_t first = 0;
  if (g_daemon == nullptr) {
    err = "softmrcd is starting or stopping";
  } else if (c == nullptr) {
    err = "unknown command";
  } else if (c->report == nullptr) {
    change_link(*g_daemon, args, &report, &err);
  } else if (c->paged_by_reply &&
             (args.size() > 2 || (args.size() == 2 && !parse_u32(args[1], &first)))) {
    err = "expected [<endpoint>][,<first>]";
  } else {
    if (c->paged_by_reply && args.size() == 2) args.pop_back();
    make_report(*g_daemon, c->report, args, &report, &err);
  }
  return put_report(report, err, d, first);
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
