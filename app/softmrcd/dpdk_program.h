// What softmrcd and smrc-fabric do alike as DPDK programs: split the
// command line at "--" (EAL options before it, the program's after), read
// their own options alike, and place roles on worker lcores (the main lcore
// runs the control thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace softmrc::softmrcd {

// Without "--", the first -h, --help or --version is taken as the
// program's own, as DPDK users type `softmrcd --help`.
struct ProgramArgs {
  int eal_argc = 0;        // argv[0 .. eal_argc) is the EAL's
  std::vector<char*> own;  // argv[0], then what follows "--"
};
ProgramArgs split_program_args(int argc, char** argv);

// --version: softmrc's release and the DPDK the program runs on.
void print_version(const char* program);

// An option's value in ms: false, with *err "--<name>: '<text>' is not
// 0..<max>", unless `text` is a whole number up to `max`.
bool parse_ms_option(const char* name, const char* text, uint64_t max, uint64_t* out,
                     std::string* err);

// -c/--config FILE: false, with *err, for an empty value (`--config=`),
// which check_operands() would otherwise take for no --config at all.
bool set_config_option(const char* text, std::string* config, std::string* err);

// What getopt_long's ':' (a value missing) or '?' (an unknown option) means,
// for the option just read.
std::string option_error(int c, char** argv);

// After getopt_long: false, with *err, if arguments are left over or no
// --config was given (`program` names itself in the hint).
bool check_operands(int argc, char** argv, const std::string& config, const char* program,
                    std::string* err);

// --log-interval-ms if given (>= 0), else the config's, in ns.
inline uint64_t log_interval_ns(int64_t option_ms, uint64_t config_ms) {
  return (option_ms >= 0 ? static_cast<uint64_t>(option_ms) : config_ms) * 1'000'000;
}

// From now on SIGINT and SIGTERM only raise a flag, read by stop_signal();
// installed before the configuration is read, so that they stop a program
// cleanly during setup too. SIGPIPE is ignored: a write to a peer that went
// away (an application's pipe, a memif peer that closed mid-handshake:
// memif writes without MSG_NOSIGNAL) fails with EPIPE instead of ending the
// process.
void catch_stop_signals();
// "SIGINT" or "SIGTERM" once one arrived, else nullptr.
const char* stop_signal();

// The lcore for a role that wants `wanted` (kAnyLcore: the first worker).
// False, with *err "EAL -l: ..." when there is no worker lcore at all, or
// "<key>: lcore N ..." when `wanted` is not enabled or is the main lcore.
bool pick_worker_lcore(int wanted, const std::string& key, const char* program, int* out,
                       std::string* err);

}  // namespace softmrc::softmrcd
