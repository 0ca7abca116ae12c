// The daemon's state as named rows of named values, built from the
// snapshots: one source for the telemetry commands (a dict of dicts) and
// the prompt's `show` (a listing), so the two never disagree.
//
//   endpoints                      one row per hosted endpoint
//   ports [endpoint]               ethdev counters, "a/0" = endpoint a, plane 0
//   planes [endpoint]              the daemon's per-plane state and counters
//   qps [endpoint [first]]         QP summaries (the traffic generator's QPs,
//                                  then the applications'), 32 rows from `first`
//   qp [endpoint] qpn              every counter of one QP
//   evs [endpoint] qpn [first]     32 EVs of a QP from `first`
//   drops [endpoint]               dropped packets by reason
//   stats [endpoint]               per-endpoint totals and the traffic generator
//   links [endpoint]               the in-process fabric, per link and plane
//                                  (an endpoint's: the link it is on)
//
// change_link() is the one command that changes something: a fault on a
// plane of an in-process link, for telemetry and the prompt alike.
//
// Runs on the control or a telemetry thread.
#pragma once

#include <rte_ethdev.h>

#include <cstdint>
#include <string>
#include <vector>

struct rte_tel_data;

namespace softmrc::softmrcd {

class Daemon;
struct EndpointSnapshot;

struct Field {
  std::string key;
  bool is_text = false;
  uint64_t num = 0;
  std::string text;
};

struct Row {
  std::string name;
  std::vector<Field> fields;

  void num(std::string key, uint64_t v) { fields.push_back({std::move(key), false, v, {}}); }
  void text(std::string key, std::string v) {
    fields.push_back({std::move(key), true, 0, std::move(v)});
  }
};

using Report = std::vector<Row>;

inline constexpr uint32_t kReportPage = 32;  // rows of QPs or EVs per request

// What every report shares (report_rows.cc): a telemetry command's
// parameters split at commas, a decimal parameter, a number shown as text
// ("0.01"), and the report as a telemetry reply (a dict of dicts, or
// {"error": err} when err is not empty).
std::vector<std::string> split_params(const char* params);
bool parse_u32(const std::string& s, uint32_t* out);
std::string number_text(double v);
// A port's ethdev counters, as every report of ports shows them.
void add_port_counters(const rte_eth_stats& st, Row* r);
// DPDK 22.11 cuts a telemetry reply at 16 KiB (MAX_OUTPUT_LEN), silently:
// the rows from `first` that fit well inside go out, then, if any are
// left, a row "more" with the next first (as the qps and evs reports page
// themselves, 32 rows that always fit).
int put_report(const Report& report, const std::string& err, rte_tel_data* d, uint32_t first);

// `args` are the parameters after the report's name. False, with *err, for
// a bad name or parameters. The first form reads the endpoints' snapshots
// itself; a caller making several reports of one moment passes them.
bool make_report(Daemon& d, const std::string& what, const std::vector<std::string>& args,
                 Report* out, std::string* err);
bool make_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps, const std::string& what,
                 const std::vector<std::string>& args, Report* out, std::string* err);

// args: <link>,<plane>,<what>,<value>[,<direction>] (parse_link_change()).
// Queues the change for the link's lcore; *out is one row saying what was
// requested.
bool change_link(Daemon& d, const std::vector<std::string>& args, Report* out, std::string* err);

}  // namespace softmrc::softmrcd
