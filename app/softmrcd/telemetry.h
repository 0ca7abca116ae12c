// The daemon's DPDK telemetry commands, under /softmrc/ (read them with
// dpdk-telemetry.py -f <file prefix>, or any client of the telemetry
// socket). Each command is a report (report.h) returned as a dict of dicts;
// a bad parameter returns {"error": "..."}.
//
// Telemetry callbacks run on DPDK's telemetry threads: they read only the
// snapshots the lcores publish, never the lcores' own state.
#pragma once

namespace softmrc::softmrcd {

class Daemon;

// Registers the commands (on the first call) and points them at `d`;
// with nullptr they answer {"error": "softmrcd is starting or stopping"}.
void attach_telemetry(Daemon* d);

}  // namespace softmrc::softmrcd
