// The interactive prompt (softmrcd -i), on DPDK's cmdline library as in
// testpmd. It runs on the control thread between its other duties: the
// daemon waits on fd() with its other descriptors and calls on_input()
// when it is readable. Commands (type 'help'):
//
//   show endpoints                    show qps <endpoint> <first>
//   show ports|planes|qps|drops|stats|links [<endpoint>]
//   show qp <endpoint> <qpn>          show evs <endpoint> <qpn> [<first>]
//   start | stop                      the traffic generator
//   set plane <endpoint> <plane> up|down
//   set link <link> plane <plane> up|down
//   set link <link> plane <plane> loss|blackhole|blackhole_ev|restore_ev|rate_factor|
//                                 corrupt|corrupt_icrc <value>
//   clear stats                       quit
#pragma once

#include <cstdint>
#include <vector>

struct cmdline;
struct cmdline_inst;

namespace softmrc::softmrcd {

class Daemon;

class Prompt {
 public:
  explicit Prompt(Daemon& d);
  ~Prompt();
  Prompt(const Prompt&) = delete;
  Prompt& operator=(const Prompt&) = delete;

  // The descriptor to wait on (standard input).
  int fd() const;
  // Reads what is there and runs every complete command; false after
  // 'quit' or at the end of the input.
  bool on_input();

  // For the command handlers.
  Daemon& daemon() { return d_; }
  void quit() { quit_ = true; }

 private:
  Daemon& d_;
  std::vector<cmdline_inst*> context_;  // the commands, then nullptr (owned)
  cmdline* cl_ = nullptr;
  bool quit_ = false;
};

}  // namespace softmrc::softmrcd
