// smrcctl: the MRC controller CLI, a client of softmrcd's control socket.
//
//   smrcctl [--socket PATH | --prefix EAL_PREFIX] [--json] [--reply-timeout-ms N] <command> ...
//
// It sends the command's words as one request line and renders the JSON
// reply (or, with --json, prints it). docs/controller.md has the commands,
// the protocol and the exit codes below.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/number.h"
#include "cli/version.h"
#include "control/json.h"
#include "control/profiles.h"

namespace {

using softmrc::control::Json;

constexpr int kExitOk = 0;
constexpr int kExitRefused = 1;     // softmrcd refused the request
constexpr int kExitUsage = 2;       // bad command line
constexpr int kExitNoDaemon = 3;    // cannot connect, or the connection broke
constexpr int kExitPermission = 4;  // not root nor in the control group
constexpr int kExitUnanswered = 5;  // ev probe: some probes got no reply
constexpr int kExitNoReply = 6;     // softmrcd took no connection or sent no reply in time

// How long softmrcd may take to take the connection and to reply
// (--reply-timeout-ms); ev probe replies after its probes' wait, which the
// daemon bounds (control::kMaxProbeWaitMs).
constexpr uint64_t kReplyTimeoutMs = 10'000;
constexpr uint64_t kMaxReplyTimeoutMs = 3'600'000;

constexpr const char* kUsage =
    R"(usage: smrcctl [-s|--socket PATH | --prefix EAL_PREFIX] [-j|--json] [--reply-timeout-ms N]
               <command>
       smrcctl --help | --version

  dev show                                 limits and capabilities
  port show [<endpoint>]                   planes: link, admin state, in use, EVs
  port set <endpoint> <plane> up|down      admin state of a plane
  ev show <endpoint> <qpn>                 a QP's EVs: state, counters
  ev deny|restore <endpoint> <qpn> <ev>    deny an EV of a QP, or lift the denial
  ev probe <endpoint> <peer> [--plane P] [--evs I,J,..] [--count N] [--timeout-ms T]
                                           probe EVs of the endpoint's EV array, per-EV RTT
  events [--follow [--count N]]            recent EV state changes; --follow: as they happen
  stats [<endpoint>]                       planes, ports, QPs, drops, totals, the socket
  stats qp <endpoint> <qpn>                every counter of a QP
  profile fmt|ev|cc show [<id>]            profiles (an EV profile's id: with its EV array)
  profile fmt|ev|cc create [<id>] | destroy <id>
  profile fmt set <id> [mode udp|stev|srv6] [widths W,W,..] [state init|offline|online]
  profile ev set <id> [mode explicit|generated|auto] [fmt ID] [count N] [min_active N]
                 [event_mask good,assumed_bad,denied|none] [fields W:INIT:MIN:MAX:MASK/...] [state S]
  profile ev replace <id> <index> <value> <port>
  profile ev ev-state <id> <value> <port> good|denied
  profile cc set <id> [algorithm nscc|none] [link_gbps G base_rtt_us U] [PARAM=VALUE ...] [state S]

The socket is --socket, else /var/run/dpdk/<prefix>/smrcctl.sock (prefix: --prefix, default rte).
--reply-timeout-ms: how long softmrcd may take to take the connection and to reply (1..3600000,
default 10000; ev probe: 10000 more for its probes; events --follow: the first reply only).
Exit status: 0 done, 1 softmrcd refused the request, 2 bad usage, 3 softmrcd unreachable,
4 permission denied, 5 ev probe: some probes were not answered, 6 softmrcd did not reply in time.
)";

volatile sig_atomic_t g_stop = 0;

int usage(const std::string& why) {
  std::fprintf(stderr, "smrcctl: %s\n%s", why.c_str(), kUsage);
  return kExitUsage;
}

std::string scalar_text(const Json& v) {
  return v.is_string() ? v.as_string() : v.dump();
}

// Arrays of objects as tables; objects as "key: value" lines, nested
// values under a heading.
void render(const Json& v, const std::string& indent) {
  if (v.is_array() && v.size() > 0 && v[0].is_object()) {
    std::vector<std::string> cols;
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t k = 0; k < v[i].size(); ++k)
        if (std::find(cols.begin(), cols.end(), v[i].key(k)) == cols.end())
          cols.push_back(v[i].key(k));
    std::vector<size_t> width(cols.size());
    std::vector<std::vector<std::string>> cells(v.size(), std::vector<std::string>(cols.size()));
    for (size_t c = 0; c < cols.size(); ++c) width[c] = cols[c].size();
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t c = 0; c < cols.size(); ++c) {
        const Json* x = v[i].find(cols[c]);
        cells[i][c] = x ? scalar_text(*x) : "-";
        width[c] = std::max(width[c], cells[i][c].size());
      }
    std::string line = indent;
    for (size_t c = 0; c < cols.size(); ++c)
      line += cols[c] + std::string(width[c] - cols[c].size() + 2, ' ');
    std::printf("%s\n", line.c_str());
    for (size_t i = 0; i < v.size(); ++i) {
      line = indent;
      for (size_t c = 0; c < cols.size(); ++c)
        line += cells[i][c] + std::string(width[c] - cells[i][c].size() + 2, ' ');
      std::printf("%s\n", line.c_str());
    }
    return;
  }
  if (v.is_object()) {
    for (size_t k = 0; k < v.size(); ++k) {
      const Json& x = v.value(k);
      if ((x.is_array() && x.size() > 0 && x[0].is_object()) || (x.is_object() && x.size() > 0)) {
        std::printf("%s%s:\n", indent.c_str(), v.key(k).c_str());
        render(x, indent + "  ");
      } else {
        std::printf("%s%s: %s\n", indent.c_str(), v.key(k).c_str(), scalar_text(x).c_str());
      }
    }
    return;
  }
  std::printf("%s%s\n", indent.c_str(), scalar_text(v).c_str());
}

// Why a reply line is not the protocol's ({"ok":true,"result":...} or
// {"ok":false,"errno":"E...","error":"..."}), or "" with *reply parsed.
std::string reply_problem(const std::string& line, Json* reply) {
  std::string err;
  if (!softmrc::control::parse_json(line, reply, &err)) return err;
  const Json* ok = reply->is_object() ? reply->find("ok") : nullptr;
  if (ok == nullptr || !ok->is_bool()) return "no \"ok\": true or false";
  if (ok->as_bool()) return reply->find("result") ? "" : "\"ok\": true without a \"result\"";
  const Json* e = reply->find("errno");
  const Json* m = reply->find("error");
  return e && e->is_string() && m && m->is_string() ? ""
                                                    : "a refusal without \"errno\" and \"error\"";
}

void render_event(const Json& e) {
  const auto get = [&](const char* k) {
    const Json* x = e.find(k);
    return x ? scalar_text(*x) : std::string("?");
  };
  uint64_t t = 0;
  if (const Json* x = e.find("t_ns")) x->as_uint(&t);
  std::printf("t=%.6fs %s qp %s profile %s ev %s (%s) port %s: %s -> %s losses %s drop_count %s\n",
              t / 1e9, get("endpoint").c_str(), get("qpn").c_str(), get("profile").c_str(),
              get("ev").c_str(), get("value").c_str(), get("port").c_str(),
              get("old_state").c_str(), get("state").c_str(), get("losses").c_str(),
              e.find("drop_count") ? get("drop_count").c_str() : "0");
  std::fflush(stdout);
}

timeval duration(uint64_t ms) {
  return {static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
}

enum class Read { kLine, kEnd, kTimeout };

// Reads one line; kEnd at the end of the stream or on an error, kTimeout
// when a read waited for the socket's SO_RCVTIMEO.
Read read_line(int fd, std::string* buf, std::string* line) {
  for (;;) {
    const size_t nl = buf->find('\n');
    if (nl != std::string::npos) {
      *line = buf->substr(0, nl);
      buf->erase(0, nl + 1);
      return Read::kLine;
    }
    char chunk[65536];
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR && !g_stop) continue;
    if (n < 0 && errno == EAGAIN) return Read::kTimeout;
    if (n <= 0) return Read::kEnd;
    buf->append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket_path, prefix = "rte";
  uint64_t reply_timeout_ms = kReplyTimeoutMs;
  bool json = false;
  std::vector<std::string> words;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return kExitOk;
    }
    if (a == "--version") {
      std::fputs(softmrc::cli::version_text("smrcctl").c_str(), stdout);
      return kExitOk;
    }
    if (a == "--json" || a == "-j") {
      json = true;
    } else if (a == "--socket" || a == "-s" || a == "--prefix" || a == "--reply-timeout-ms") {
      if (i + 1 == argc) return usage(a + " needs a value");
      const char* v = argv[++i];
      // Else an empty --socket would be the default socket, unsaid.
      if (*v == '\0') return usage(a + ": empty value");
      if (a == "--prefix") {
        prefix = v;
      } else if (a != "--reply-timeout-ms") {
        socket_path = v;
      } else if (!softmrc::cli::parse_uint(v, 1, kMaxReplyTimeoutMs, &reply_timeout_ms)) {
        return usage(a + ": '" + v + "' is not an integer in 1.." +
                     std::to_string(kMaxReplyTimeoutMs));
      }
    } else {
      return usage("unknown option '" + a + "'");
    }
  }
  if (i == argc) return usage("no command");
  // Options of the commands travel without their dashes.
  uint64_t follow_count = 0;
  bool follow = false;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a.empty() || a.find_first_of(" \t\r\n") != std::string::npos)
      return usage("'" + a + "' is not one word");
    const bool events = !words.empty() && words[0] == "events";
    if (a == "--count" && events) {
      if (i + 1 == argc) return usage("--count needs a value");
      if (!softmrc::cli::parse_uint(argv[++i], 1, UINT64_MAX, &follow_count))
        return usage(std::string("--count: '") + argv[i] + "' is not an integer in 1.." +
                     std::to_string(UINT64_MAX));
      continue;
    }
    if (a.rfind("--", 0) == 0) a = a.substr(2);
    // Only events follows: another command's word "follow" is an endpoint's name.
    if (a == "follow" && events) follow = true;
    words.push_back(a);
  }
  // The daemon keeps no count: without --follow it would be dropped unsaid.
  if (follow_count > 0 && !follow) return usage("--count is for events --follow");
  const std::vector<std::string> known = {"dev", "port", "ev", "events", "stats", "profile"};
  if (std::find(known.begin(), known.end(), words[0]) == known.end())
    return usage("unknown command '" + words[0] + "'");
  if (socket_path.empty()) socket_path = "/var/run/dpdk/" + prefix + "/smrcctl.sock";

  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) return usage("socket path too long");
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  // A stopped daemon neither takes connections (its backlog fills) nor
  // replies: the send timeout bounds connect() too.
  const bool probe = words[0] == "ev" && words.size() > 1 && words[1] == "probe";
  const uint64_t reply_ms = reply_timeout_ms + (probe ? softmrc::control::kMaxProbeWaitMs : 0);
  const timeval send_timeout = duration(reply_timeout_ms), reply_timeout = duration(reply_ms);
  if (fd < 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &reply_timeout, sizeof(reply_timeout)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    if (e == EAGAIN) {
      std::fprintf(stderr,
                   "smrcctl: %s: softmrcd did not take the connection within %llu ms (is it "
                   "stopped? see --reply-timeout-ms)\n",
                   socket_path.c_str(), static_cast<unsigned long long>(reply_timeout_ms));
      return kExitNoReply;
    }
    if (e == EACCES || e == EPERM) {
      std::fprintf(stderr,
                   "smrcctl: permission denied: %s (softmrcd's controller is for root and the "
                   "members of its control_group)\n",
                   socket_path.c_str());
      return kExitPermission;
    }
    // A file or a directory refuses as a daemon that is gone would.
    struct stat st {};
    if (::stat(socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      std::fprintf(stderr, "smrcctl: cannot connect to %s: not a socket (see --socket)\n",
                   socket_path.c_str());
      return kExitNoDaemon;
    }
    std::fprintf(stderr, "smrcctl: cannot connect to %s: %s (is softmrcd running? see --socket)\n",
                 socket_path.c_str(), std::strerror(e));
    return kExitNoDaemon;
  }

  std::string request;
  for (const std::string& w : words) request += (request.empty() ? "" : " ") + w;
  request += "\n";
  // A refused peer may find the connection closed before its request is
  // out; the refusal is still there to read. MSG_NOSIGNAL: SIGPIPE is left
  // for standard output, whose reader going away (| head) ends smrcctl,
  // following or not, as it ends other programs.
  const bool sent = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
                    static_cast<ssize_t>(request.size());
  const int send_errno = errno;
  std::string buf, line, err;
  Json reply;
  const Read got = read_line(fd, &buf, &line);
  if (got == Read::kTimeout) {
    std::fprintf(stderr,
                 "smrcctl: %s: softmrcd sent no reply within %llu ms (is it stopped or stuck? "
                 "see --reply-timeout-ms)\n",
                 socket_path.c_str(), static_cast<unsigned long long>(reply_ms));
    return kExitNoReply;
  }
  if (got == Read::kEnd) {
    const std::string why = !buf.empty() ? "softmrcd closed the connection mid-reply, after " +
                                               std::to_string(buf.size()) + " bytes"
                            : sent ? "softmrcd closed the connection without a reply"
                                   : std::strerror(send_errno);
    std::fprintf(stderr, "smrcctl: %s: %s\n", socket_path.c_str(), why.c_str());
    return kExitNoDaemon;
  }
  if (const std::string why = reply_problem(line, &reply); !why.empty()) {
    std::fprintf(stderr, "smrcctl: softmrcd sent a reply that is not the protocol's: %s\n",
                 why.c_str());
    return kExitNoDaemon;
  }
  if (!reply.find("ok")->as_bool()) {
    const std::string code = reply.find("errno")->as_string();
    const std::string msg = reply.find("error")->as_string();
    if (json) std::printf("%s\n", reply.dump().c_str());
    std::fprintf(stderr, "smrcctl: %s: %s\n", code.c_str(), msg.c_str());
    if (code == "EPERM" && msg.rfind("permission denied", 0) == 0) return kExitPermission;
    return msg.rfind("usage:", 0) == 0 ? kExitUsage : kExitRefused;
  }
  const Json* result = reply.find("result");
  if (!follow) {
    if (json)
      std::printf("%s\n", result->dump().c_str());
    else
      render(*result, "");
    uint64_t unanswered = 0;
    if (words[0] == "ev" && words.size() > 1 && words[1] == "probe" && result->find("unanswered") &&
        result->find("unanswered")->as_uint(&unanswered) && unanswered > 0) {
      std::fprintf(stderr, "smrcctl: %llu probes were not answered in time\n",
                   static_cast<unsigned long long>(unanswered));
      return kExitUnanswered;
    }
    return kExitOk;
  }
  // events --follow: one event per line until the count, a signal or the
  // daemon's end. Events may be hours apart, so no timeout. SIGINT and
  // SIGTERM end following with exit 0; before, they end smrcctl the
  // default way, which says nothing about a reply it did not wait for.
  const timeval forever{};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = 1; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::fprintf(stderr, "smrcctl: following EV events of %s\n", socket_path.c_str());
  for (uint64_t n = 0; !g_stop && (follow_count == 0 || n < follow_count); ++n) {
    if (read_line(fd, &buf, &line) != Read::kLine) {
      if (g_stop) return kExitOk;
      std::fprintf(stderr, "smrcctl: %s: softmrcd closed the connection\n", socket_path.c_str());
      return kExitNoDaemon;
    }
    Json ev;
    if (!softmrc::control::parse_json(line, &ev, &err) || ev.find("event") == nullptr) continue;
    if (json) {
      std::printf("%s\n", ev.find("event")->dump().c_str());
      std::fflush(stdout);
    } else {
      render_event(*ev.find("event"));
    }
  }
  return kExitOk;
}
