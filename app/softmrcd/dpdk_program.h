// What softmrcd and smrc-fabric do alike as DPDK programs: split the
// command line at "--" (EAL options before it, the program's after), and
// place roles on worker lcores (the main lcore runs the control thread).
#pragma once

#include <string>
#include <vector>

namespace softmrc::softmrcd {

struct ProgramArgs {
  int eal_argc = 0;        // argv[0 .. eal_argc) is the EAL's
  std::vector<char*> own;  // argv[0], then what follows "--"
  bool help_only = false;  // no "--", and -h or --help among the arguments
};
ProgramArgs split_program_args(int argc, char** argv);

// SIGINT and SIGTERM call `handler` (which only raises a flag).
void on_stop_signals(void (*handler)(int));

// The lcore for a role that wants `wanted` (kAnyLcore: the first worker).
// False, with *err "EAL -l: ..." when there is no worker lcore at all, or
// "<key>: lcore N ..." when `wanted` is not enabled or is the main lcore.
bool pick_worker_lcore(int wanted, const std::string& key, const char* program, int* out,
                       std::string* err);

}  // namespace softmrc::softmrcd
