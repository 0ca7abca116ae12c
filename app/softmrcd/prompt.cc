// The interactive prompt (see prompt.h). Each command is a cmdline
// instance: a result struct, its tokens and a handler, as in testpmd.
#include "softmrcd/prompt.h"

#include <cmdline.h>
#include <cmdline_parse.h>
#include <cmdline_parse_num.h>
#include <cmdline_parse_string.h>
#include <cmdline_socket.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "softmrcd/daemon.h"
#include "softmrcd/report.h"

namespace softmrc::softmrcd {

namespace {

Prompt* g_prompt = nullptr;  // the handlers' way back; one prompt per process

constexpr size_t kLineWidth = 100;

// A command: its handler, its help and its tokens.
struct CommandSpec {
  void (*handler)(void* result, cmdline* cl, void* data);
  const char* help;
  std::vector<cmdline_parse_token_hdr_t*> tokens;
};

void print_report(cmdline* cl, const Report& report) {
  if (report.empty()) cmdline_printf(cl, "(nothing)\n");
  for (const Row& row : report) {
    cmdline_printf(cl, "%s\n", row.name.c_str());
    size_t width = 0;
    for (const Field& f : row.fields) {
      const std::string value = f.is_text ? f.text : std::to_string(f.num);
      const size_t len = f.key.size() + value.size() + 2;
      if (width > 0 && width + len > kLineWidth) {
        cmdline_printf(cl, "\n");
        width = 0;
      }
      cmdline_printf(cl, "%s %s=%s", width == 0 ? " " : "", f.key.c_str(), value.c_str());
      width += len + (width == 0 ? 1 : 0);
    }
    cmdline_printf(cl, "\n");
  }
}

void show(cmdline* cl, const std::string& what, const std::vector<std::string>& args) {
  Report report;
  std::string err;
  if (!make_report(g_prompt->daemon(), what, args, &report, &err))
    cmdline_printf(cl, "error: %s\n", err.c_str());
  else
    print_report(cl, report);
}

// show <what> [<endpoint>]
struct ShowResult {
  cmdline_fixed_string_t show;
  cmdline_fixed_string_t what;
  cmdline_fixed_string_t endpoint;
};

void on_show(void* r, cmdline* cl, void*) {
  show(cl, static_cast<ShowResult*>(r)->what, {});
}

void on_show_endpoint(void* r, cmdline* cl, void*) {
  const auto* res = static_cast<ShowResult*>(r);
  show(cl, res->what, {res->endpoint});
}

cmdline_parse_token_string_t t_show = TOKEN_STRING_INITIALIZER(ShowResult, show, "show");
cmdline_parse_token_string_t t_show_what =
    TOKEN_STRING_INITIALIZER(ShowResult, what, "endpoints#ports#planes#qps#drops#stats#links");
cmdline_parse_token_string_t t_show_per_endpoint =
    TOKEN_STRING_INITIALIZER(ShowResult, what, "ports#planes#qps#drops#stats#links");
cmdline_parse_token_string_t t_show_endpoint =
    TOKEN_STRING_INITIALIZER(ShowResult, endpoint, nullptr);

const CommandSpec cmd_show = {
    on_show,
    "show endpoints|ports|planes|qps|drops|stats|links",
    {&t_show.hdr, &t_show_what.hdr},
};
const CommandSpec cmd_show_endpoint = {
    on_show_endpoint,
    "show ports|planes|qps|drops|stats|links <endpoint>",
    {&t_show.hdr, &t_show_per_endpoint.hdr, &t_show_endpoint.hdr},
};

// show qps <endpoint>|* <first>: the page of QPs a "more next_first" row
// names; '*' (never an endpoint's name) pages the list of every endpoint's.
struct ShowQpsResult {
  cmdline_fixed_string_t show;
  cmdline_fixed_string_t qps;
  cmdline_fixed_string_t endpoint;
  uint32_t first;
};

void on_show_qps_from(void* r, cmdline* cl, void*) {
  const auto* res = static_cast<ShowQpsResult*>(r);
  const std::string endpoint = std::strcmp(res->endpoint, "*") == 0 ? "" : res->endpoint;
  show(cl, "qps", {endpoint, std::to_string(res->first)});
}

cmdline_parse_token_string_t t_showqps = TOKEN_STRING_INITIALIZER(ShowQpsResult, show, "show");
cmdline_parse_token_string_t t_showqps_qps = TOKEN_STRING_INITIALIZER(ShowQpsResult, qps, "qps");
cmdline_parse_token_string_t t_showqps_endpoint =
    TOKEN_STRING_INITIALIZER(ShowQpsResult, endpoint, nullptr);
cmdline_parse_token_num_t t_showqps_first = TOKEN_NUM_INITIALIZER(ShowQpsResult, first, RTE_UINT32);

const CommandSpec cmd_show_qps_from = {
    on_show_qps_from,
    "show qps <endpoint>|* <first>",
    {&t_showqps.hdr, &t_showqps_qps.hdr, &t_showqps_endpoint.hdr, &t_showqps_first.hdr},
};

// show qp <endpoint> <qpn>, show evs <endpoint> <qpn> [<first>]
struct ShowQpResult {
  cmdline_fixed_string_t show;
  cmdline_fixed_string_t what;
  cmdline_fixed_string_t endpoint;
  uint32_t qpn;
  uint32_t first;
};

void on_show_qp(void* r, cmdline* cl, void*) {
  const auto* res = static_cast<ShowQpResult*>(r);
  show(cl, res->what, {res->endpoint, std::to_string(res->qpn)});
}

void on_show_evs_from(void* r, cmdline* cl, void*) {
  const auto* res = static_cast<ShowQpResult*>(r);
  show(cl, "evs", {res->endpoint, std::to_string(res->qpn), std::to_string(res->first)});
}

cmdline_parse_token_string_t t_showqp = TOKEN_STRING_INITIALIZER(ShowQpResult, show, "show");
cmdline_parse_token_string_t t_showqp_what = TOKEN_STRING_INITIALIZER(ShowQpResult, what, "qp#evs");
cmdline_parse_token_string_t t_showqp_evs = TOKEN_STRING_INITIALIZER(ShowQpResult, what, "evs");
cmdline_parse_token_string_t t_showqp_endpoint =
    TOKEN_STRING_INITIALIZER(ShowQpResult, endpoint, nullptr);
cmdline_parse_token_num_t t_showqp_qpn = TOKEN_NUM_INITIALIZER(ShowQpResult, qpn, RTE_UINT32);
cmdline_parse_token_num_t t_showqp_first = TOKEN_NUM_INITIALIZER(ShowQpResult, first, RTE_UINT32);

const CommandSpec cmd_show_qp = {
    on_show_qp,
    "show qp|evs <endpoint> <qpn>",
    {&t_showqp.hdr, &t_showqp_what.hdr, &t_showqp_endpoint.hdr, &t_showqp_qpn.hdr},
};
const CommandSpec cmd_show_evs_from = {
    on_show_evs_from,
    "show evs <endpoint> <qpn> <first>",
    {&t_showqp.hdr, &t_showqp_evs.hdr, &t_showqp_endpoint.hdr, &t_showqp_qpn.hdr,
     &t_showqp_first.hdr},
};

// `done`, or the endpoints a command sent to every endpoint did not reach
// (`not_done` there): it took effect everywhere else, so typing it again
// is the remedy.
void say_broadcast(cmdline* cl, const std::vector<std::string>& missed, const char* done,
                   const char* not_done) {
  if (missed.empty()) {
    cmdline_printf(cl, "%s\n", done);
    return;
  }
  std::string names;
  for (const std::string& name : missed) names += (names.empty() ? "'" : ", '") + name + "'";
  cmdline_printf(cl, "error: %s on %s: command ring full (its lcore is behind); try again\n",
                 not_done, names.c_str());
}

// start | stop | quit | help
struct WordResult {
  cmdline_fixed_string_t word;
};

void on_word(void* r, cmdline* cl, void*) {
  const std::string w = static_cast<WordResult*>(r)->word;
  Daemon& d = g_prompt->daemon();
  if ((w == "start" || w == "stop") && !d.hosts_traffic()) {
    cmdline_printf(cl,
                   "error: no traffic to %s: the configuration has no flow from or to an "
                   "endpoint hosted here\n",
                   w.c_str());
  } else if (w == "start" && d.phase() != Phase::kRun) {
    // Stopping flows are ended for good: a start would do nothing.
    cmdline_printf(cl, "error: softmrcd is stopping: no new traffic\n");
  } else if (w == "start") {
    say_broadcast(cl, d.start_traffic(), "traffic started", "traffic not started");
  } else if (w == "stop") {
    say_broadcast(cl, d.stop_traffic(), "traffic stopped (in-flight messages still complete)",
                  "traffic not stopped");
  } else if (w == "quit") {
    g_prompt->quit();
  } else {
    cmdline_printf(
        cl,
        "show endpoints                        the hosted endpoints\n"
        "show ports|planes|qps|drops|stats|links [<endpoint>]\n"
        "                                      every endpoint's rows, or one's\n"
        "show qps <endpoint>|* <first>         its (or every endpoint's) QPs from the\n"
        "                                      <first>th, 32 at a time\n"
        "show qp <endpoint> <qpn>              every counter of a QP\n"
        "show evs <endpoint> <qpn> [<first>]   a QP's EVs, 32 at a time\n"
        "start | stop                          the traffic generator\n"
        "set plane <endpoint> <plane> up|down  take a plane out of use, or back\n"
        "set link <link> plane <plane> up|down  fail or restore an in-process link's plane\n"
        "set link <link> plane <plane> loss <p> | blackhole on|off | blackhole_ev <ev> |\n"
        "    restore_ev <ev> | rate_factor <f> | corrupt <p> | corrupt_icrc keep|recompute\n"
        "                                      a fault on both directions of the plane\n"
        "clear stats                           zero the plane, drop and port counters\n"
        "quit                                  stop cleanly and exit\n");
  }
}

cmdline_parse_token_string_t t_word =
    TOKEN_STRING_INITIALIZER(WordResult, word, "start#stop#quit#help");
const CommandSpec cmd_word = {
    on_word,
    "start | stop | quit | help",
    {&t_word.hdr},
};

// clear stats
struct ClearResult {
  cmdline_fixed_string_t clear;
  cmdline_fixed_string_t stats;
};

void on_clear(void*, cmdline* cl, void*) {
  say_broadcast(cl, g_prompt->daemon().clear_stats(), "stats cleared",
                "plane and drop counters not cleared");
}

cmdline_parse_token_string_t t_clear = TOKEN_STRING_INITIALIZER(ClearResult, clear, "clear");
cmdline_parse_token_string_t t_clear_stats = TOKEN_STRING_INITIALIZER(ClearResult, stats, "stats");
const CommandSpec cmd_clear = {
    on_clear,
    "clear stats",
    {&t_clear.hdr, &t_clear_stats.hdr},
};

// set plane <endpoint> <plane> up|down
struct SetPlaneResult {
  cmdline_fixed_string_t set;
  cmdline_fixed_string_t plane_word;
  cmdline_fixed_string_t endpoint;
  uint32_t plane;
  cmdline_fixed_string_t state;
};

void on_set_plane(void* r, cmdline* cl, void*) {
  const auto* res = static_cast<SetPlaneResult*>(r);
  EndpointTask* e = g_prompt->daemon().find_endpoint(res->endpoint);
  if (e == nullptr) {
    cmdline_printf(cl, "error: no endpoint named '%s'\n", res->endpoint);
    return;
  }
  if (res->plane >= e->num_planes()) {
    cmdline_printf(cl, "error: '%s' has planes 0..%u\n", res->endpoint, e->num_planes() - 1);
    return;
  }
  const bool up = std::strcmp(res->state, "up") == 0;
  Command c{CommandType::kPlaneAdmin, static_cast<uint8_t>(res->plane), up};
  if (!e->command(c)) {
    cmdline_printf(cl, "error: '%s' is not taking commands\n", res->endpoint);
    return;
  }
  cmdline_printf(cl, "%s plane %u set %s\n", res->endpoint, res->plane, up ? "up" : "down");
}

cmdline_parse_token_string_t t_set = TOKEN_STRING_INITIALIZER(SetPlaneResult, set, "set");
cmdline_parse_token_string_t t_set_plane =
    TOKEN_STRING_INITIALIZER(SetPlaneResult, plane_word, "plane");
cmdline_parse_token_string_t t_set_endpoint =
    TOKEN_STRING_INITIALIZER(SetPlaneResult, endpoint, nullptr);
cmdline_parse_token_num_t t_set_num = TOKEN_NUM_INITIALIZER(SetPlaneResult, plane, RTE_UINT32);
cmdline_parse_token_string_t t_set_state =
    TOKEN_STRING_INITIALIZER(SetPlaneResult, state, "up#down");
const CommandSpec cmd_set_plane = {
    on_set_plane,
    "set plane <endpoint> <plane> up|down",
    {&t_set.hdr, &t_set_plane.hdr, &t_set_endpoint.hdr, &t_set_num.hdr, &t_set_state.hdr},
};

// set link <link> plane <plane> up|down
struct SetLinkResult {
  cmdline_fixed_string_t set;
  cmdline_fixed_string_t link_word;
  uint32_t link;
  cmdline_fixed_string_t plane_word;
  uint32_t plane;
  cmdline_fixed_string_t state;
};

void change(cmdline* cl, const std::vector<std::string>& args) {
  Report report;
  std::string err;
  if (!change_link(g_prompt->daemon(), args, &report, &err))
    cmdline_printf(cl, "error: %s\n", err.c_str());
  else
    cmdline_printf(cl, "link %s plane %s set %s\n", args[0].c_str(), args[1].c_str(),
                   report[0].fields[0].text.c_str());
}

void on_set_link(void* r, cmdline* cl, void*) {
  const auto* res = static_cast<SetLinkResult*>(r);
  change(cl, {std::to_string(res->link), std::to_string(res->plane), "state", res->state});
}

cmdline_parse_token_string_t t_setl = TOKEN_STRING_INITIALIZER(SetLinkResult, set, "set");
cmdline_parse_token_string_t t_setl_link =
    TOKEN_STRING_INITIALIZER(SetLinkResult, link_word, "link");
cmdline_parse_token_num_t t_setl_num = TOKEN_NUM_INITIALIZER(SetLinkResult, link, RTE_UINT32);
cmdline_parse_token_string_t t_setl_plane =
    TOKEN_STRING_INITIALIZER(SetLinkResult, plane_word, "plane");
cmdline_parse_token_num_t t_setl_pnum = TOKEN_NUM_INITIALIZER(SetLinkResult, plane, RTE_UINT32);
cmdline_parse_token_string_t t_setl_state =
    TOKEN_STRING_INITIALIZER(SetLinkResult, state, "up#down");
const CommandSpec cmd_set_link = {
    on_set_link,
    "set link <link> plane <plane> up|down",
    {&t_setl.hdr, &t_setl_link.hdr, &t_setl_num.hdr, &t_setl_plane.hdr, &t_setl_pnum.hdr,
     &t_setl_state.hdr},
};

// set link <link> plane <plane> <what> <value>
struct SetLinkChangeResult {
  cmdline_fixed_string_t set;
  cmdline_fixed_string_t link_word;
  uint32_t link;
  cmdline_fixed_string_t plane_word;
  uint32_t plane;
  cmdline_fixed_string_t what;
  cmdline_fixed_string_t value;
};

void on_set_link_change(void* r, cmdline* cl, void*) {
  const auto* res = static_cast<SetLinkChangeResult*>(r);
  change(cl, {std::to_string(res->link), std::to_string(res->plane), res->what, res->value});
}

cmdline_parse_token_string_t t_setc = TOKEN_STRING_INITIALIZER(SetLinkChangeResult, set, "set");
cmdline_parse_token_string_t t_setc_link =
    TOKEN_STRING_INITIALIZER(SetLinkChangeResult, link_word, "link");
cmdline_parse_token_num_t t_setc_num = TOKEN_NUM_INITIALIZER(SetLinkChangeResult, link, RTE_UINT32);
cmdline_parse_token_string_t t_setc_plane =
    TOKEN_STRING_INITIALIZER(SetLinkChangeResult, plane_word, "plane");
cmdline_parse_token_num_t t_setc_pnum =
    TOKEN_NUM_INITIALIZER(SetLinkChangeResult, plane, RTE_UINT32);
cmdline_parse_token_string_t t_setc_what = TOKEN_STRING_INITIALIZER(
    SetLinkChangeResult, what,
    "loss#blackhole#blackhole_ev#restore_ev#rate_factor#corrupt#corrupt_icrc");
cmdline_parse_token_string_t t_setc_value =
    TOKEN_STRING_INITIALIZER(SetLinkChangeResult, value, nullptr);
const CommandSpec cmd_set_link_change = {
    on_set_link_change,
    "set link <link> plane <plane> "
    "loss|blackhole|blackhole_ev|restore_ev|rate_factor|corrupt|corrupt_icrc <value>",
    {&t_setc.hdr, &t_setc_link.hdr, &t_setc_num.hdr, &t_setc_plane.hdr, &t_setc_pnum.hdr,
     &t_setc_what.hdr, &t_setc_value.hdr},
};

const CommandSpec* const kCommands[] = {
    &cmd_show, &cmd_show_endpoint, &cmd_show_qps_from, &cmd_show_qp,  &cmd_show_evs_from,
    &cmd_word, &cmd_clear,         &cmd_set_plane,     &cmd_set_link, &cmd_set_link_change,
};

// cmdline_parse_inst_t ends in a flexible array of tokens, which C++ cannot
// initialise (GCC lets it, clang does not): so instructions are made at
// run time, in memory from malloc (an implicit-lifetime type), from their
// CommandSpec. Each ends in a null token.
cmdline_parse_inst_t* make_instruction(const CommandSpec& spec) {
  const size_t bytes =
      sizeof(cmdline_parse_inst_t) + (spec.tokens.size() + 1) * sizeof(cmdline_parse_token_hdr_t*);
  auto* inst = static_cast<cmdline_parse_inst_t*>(std::calloc(1, bytes));
  if (inst == nullptr) return nullptr;
  inst->f = spec.handler;
  inst->help_str = spec.help;
  std::copy(spec.tokens.begin(), spec.tokens.end(), inst->tokens);
  return inst;
}

}  // namespace

Prompt::Prompt(Daemon& d) : d_(d) {
  g_prompt = this;
  for (const CommandSpec* spec : kCommands) {
    cmdline_parse_inst_t* inst = make_instruction(*spec);
    if (inst == nullptr) return;  // no prompt: on_input() reports the end of input
    context_.push_back(inst);
  }
  context_.push_back(nullptr);
  cl_ = cmdline_stdin_new(context_.data(), "softmrcd> ");
}

Prompt::~Prompt() {
  if (cl_ != nullptr) cmdline_stdin_exit(cl_);
  for (cmdline_parse_inst_t* inst : context_) std::free(inst);
  g_prompt = nullptr;
}

int Prompt::fd() const {
  return STDIN_FILENO;
}

bool Prompt::on_input() {
  if (cl_ == nullptr || quit_) return false;
  char buf[256];
  const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
  if (n <= 0) return false;  // end of input
  if (cmdline_in(cl_, buf, static_cast<int>(n)) < 0) return false;
  return !quit_;
}

}  // namespace softmrc::softmrcd
