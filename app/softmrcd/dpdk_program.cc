#include "softmrcd/dpdk_program.h"

#include <getopt.h>
#include <rte_lcore.h>
#include <rte_version.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "cli/number.h"
#include "cli/version.h"
#include "softmrcd/config.h"

namespace softmrc::softmrcd {

ProgramArgs split_program_args(int argc, char** argv) {
  ProgramArgs a;
  a.eal_argc = argc;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      a.eal_argc = i;
      break;
    }
  a.own.push_back(argv[0]);
  for (int i = a.eal_argc + 1; i < argc; ++i) a.own.push_back(argv[i]);
  if (a.eal_argc == argc)
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0 ||
          std::strcmp(argv[i], "--version") == 0) {
        a.own.push_back(argv[i]);
        break;
      }
  return a;
}

void print_version(const char* program) {
  std::printf("%s%s\n", cli::version_text(program).c_str(), rte_version());
}

bool parse_ms_option(const char* name, const char* text, uint64_t max, uint64_t* out,
                     std::string* err) {
  if (cli::parse_uint(text, 0, max, out)) return true;
  *err = std::string("--") + name + ": '" + text + "' is not 0.." + std::to_string(max);
  return false;
}

bool set_config_option(const char* text, std::string* config, std::string* err) {
  if (*text == '\0') {
    *err = "--config: empty file name";
    return false;
  }
  *config = text;
  return true;
}

std::string option_error(int c, char** argv) {
  // getopt_long has stepped past a long option's word and past a cluster
  // whose last letter it refused (-ib); a letter mid-cluster (-zi) leaves
  // optind on its cluster, so argv[optind - 1] is another word. optopt
  // tells them apart: 0 for an unknown long option, else the letter, or
  // the value of a long option given a value it takes none of
  // (--interactive=1), which is over 255 or the option's initial.
  const std::string word = argv[optind - 1];
  const bool named_long =
      word.rfind("--", 0) == 0 &&
      (c == ':' || optopt == 0 || optopt > 255 ||
       (word.find('=') != std::string::npos && word[2] == static_cast<char>(optopt)));
  return (named_long ? word : std::string("-") + static_cast<char>(optopt)) +
         (c == ':' ? ": needs a value" : ": unknown option (see --help)");
}

bool check_operands(int argc, char** argv, const std::string& config, const char* program,
                    std::string* err) {
  if (optind < argc) {
    *err = std::string("unexpected argument '") + argv[optind] + "'";
    return false;
  }
  if (config.empty()) {
    *err = std::string("--config: missing (") + program + " [EAL options] -- --config FILE)";
    return false;
  }
  return true;
}

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) {
  g_stop_signal = sig;
}

}  // namespace

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &sa, nullptr);
}

const char* stop_signal() {
  if (g_stop_signal == 0) return nullptr;
  return g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
}

bool pick_worker_lcore(int wanted, const std::string& key, const char* program, int* out,
                       std::string* err) {
  const unsigned main = rte_get_main_lcore();
  const unsigned first = rte_get_next_lcore(-1, 1, 0);
  if (first >= RTE_MAX_LCORE) {
    *err = "EAL -l: the main lcore " + std::to_string(main) + " runs the control thread; " +
           program + " needs at least one more (e.g. -l 0-1)";
    return false;
  }
  if (wanted == kAnyLcore) {
    *out = static_cast<int>(first);
    return true;
  }
  if (wanted >= RTE_MAX_LCORE || !rte_lcore_is_enabled(static_cast<unsigned>(wanted))) {
    *err = key + ": lcore " + std::to_string(wanted) + " is not enabled (EAL -l/--lcores)";
    return false;
  }
  if (static_cast<unsigned>(wanted) == main) {
    *err = key + ": lcore " + std::to_string(wanted) +
           " is the main lcore, which runs the control thread";
    return false;
  }
  *out = wanted;
  return true;
}

}  // namespace softmrc::softmrcd
