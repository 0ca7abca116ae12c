// smrc-fabric's telemetry commands (see telemetry.h).
#include "smrc-fabric/telemetry.h"

#include <rte_ethdev.h>
#include <rte_telemetry.h>

#include <cstring>
#include <mutex>
#include <string>

#include "port/ethdev/hangup_guard.h"
#include "port/ethdev/unmap_guard.h"
#include "smrc-fabric/fabric_process.h"
#include "softmrcd/report.h"

namespace softmrc::smrc_fabric {

namespace {

std::mutex g_mu;  // guards g_process against teardown while a command runs
FabricProcess* g_process = nullptr;

void port_rows(const FabricProcess& f, softmrcd::Report* out) {
  for (const FabricPort& fp : f.ports()) {
    softmrcd::Row r{fp.port->name(), {}};
    r.num("link", fp.link);
    r.text("side", fp.side == 0 ? "a" : "b");
    r.num("plane", fp.plane);
    rte_eth_stats st{};
    fp.port->stats(&st);
    softmrcd::add_port_counters(st, &r);
    rte_eth_link link{};
    rte_eth_link_get_nowait(fp.port->port_id(), &link);
    r.num("link_up", link.link_status == RTE_ETH_LINK_UP);
    r.num("unmap_guard_timeouts", port::unmap_guard::wait_timeouts());   // the process's
    r.num("hangup_guard_sends", port::hangup_guard::peer_gone_sends());  // the process's
    out->push_back(std::move(r));
  }
}

int on_command(const char* cmd, const char* params, rte_tel_data* d) {
  std::lock_guard<std::mutex> lock(g_mu);
  softmrcd::Report report;
  std::string err;
  const std::vector<std::string> args = softmrcd::split_params(params);
  uint32_t first = 0;  // the reports page as softmrcd's do (report.h)
  if (g_process == nullptr) {
    err = "smrc-fabric is starting or stopping";
  } else if (std::strcmp(cmd, "/softmrc/fabric/set") == 0) {
    softmrcd::request_link_change(g_process->links(), args, &report, &err);
  } else if (args.size() > 1 || (args.size() == 1 && !softmrcd::parse_u32(args[0], &first))) {
    err = "expected [<first>]";
  } else if (std::strcmp(cmd, "/softmrc/links") == 0) {
    for (const auto& l : g_process->links()) softmrcd::link_rows(*l, &report);
  } else {
    port_rows(*g_process, &report);
  }
  return softmrcd::put_report(report, err, d, first);
}

}  // namespace

void attach_telemetry(FabricProcess* f) {
  static bool registered = false;
  std::lock_guard<std::mutex> lock(g_mu);
  g_process = f;
  if (registered) return;
  registered = true;
  rte_telemetry_register_cmd(
      "/softmrc/links", on_command,
      "Per link and plane: counters, drops by reason, faults. Parameter: [first]");
  rte_telemetry_register_cmd(
      "/softmrc/fabric/set", on_command,
      "Changes a plane of a link (docs/daemon.md). Parameters: link,plane,what,value[,direction]");
  rte_telemetry_register_cmd(
      "/softmrc/fabric/ports", on_command,
      "Per port: link, side, plane, ethdev counters, link. Parameter: [first]");
}

}  // namespace softmrc::smrc_fabric
