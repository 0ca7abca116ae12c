// The controller socket (see control_server.h).
#include "softmrcd/control_server.h"

#include <fcntl.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "softmrcd/daemon.h"
#include "softmrcd/report.h"
#include "wire/usid.h"

namespace softmrc::softmrcd {

static_assert(ControlServer::kProbeSlots >= engine::EndpointConfig{}.ctrl_queue_packets,
              "a probe slot must outlive the probe in the engine's control queue");

using control::Err;
using control::Json;

struct ControlServer::Probe {
  struct Target {
    uint32_t ev = 0;
    uint8_t plane = 0;
    std::string value;
    uint32_t sent = 0;
    std::vector<uint64_t> rtt_ns;
    std::string error;  // why a probe was not sent
  };
  uint32_t endpoint = 0;
  std::string peer;
  uint64_t deadline_ns = 0;
  std::vector<Target> targets;
  std::map<uint16_t, size_t> waiting;  // req_id -> target
};

namespace {

Json rows_json(const Report& r) {
  Json a = Json::array();
  for (const Row& row : r) {
    Json o = Json::object();
    o.set("name", row.name);
    for (const Field& f : row.fields) o.set(f.key, f.is_text ? Json(f.text) : Json(f.num));
    a.push(std::move(o));
  }
  return a;
}

std::string ev_hex(const wire::WireEv& v, wire::EvMode mode) {
  wire::EvValue x;
  std::memcpy(x.bytes, v.bytes, sizeof(x.bytes));
  return control::ev_value_hex(x, wire::ev_mode_max_width_bits(mode));
}

constexpr const char* kUsage =
    "commands: dev show | port show [<endpoint>] | port set <endpoint> <plane> up|down | ev show "
    "<endpoint> <qpn> | ev deny|restore <endpoint> <qpn> <ev> | ev probe <endpoint> <peer> "
    "[plane <p>] [evs <i,j,..>] [count <n>] [timeout-ms <t>] | events [follow] | stats "
    "[<endpoint>] | stats qp <endpoint> <qpn> | profile fmt|ev|cc show|create|destroy|set ...";

}  // namespace

ControlServer::ControlServer(Daemon& d)
    : d_(d), profiles_([&] {
        control::DeviceLimits l;
        l.num_ports = d.config().num_planes();
        return l;
      }()) {}

ControlServer::~ControlServer() {
  close();
  for (rte_ring* r : rings_) rte_ring_free(r);
}

bool ControlServer::open(std::string* err) {
  const Config& cfg = d_.config();
  if (!access_.resolve("control_group", cfg.control_group, err)) return false;
  for (auto& e : d_.endpoints()) {
    const std::string name = "smrcd_ctl" + std::to_string(e->index());
    rte_ring* r =
        rte_ring_create_elem(name.c_str(), sizeof(ControlEvent), kEventRing,
                             static_cast<int>(rte_socket_id()), RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (r == nullptr) {
      *err = "cannot create the controller's event ring: " + std::string(rte_strerror(rte_errno));
      return false;
    }
    rings_.push_back(r);
    e->set_control_events(r);
  }
  lost_seen_.assign(rings_.size(), 0);
  unreported_lost_.assign(rings_.size(), 0);
  probe_evs_.assign(rings_.size(), std::vector<wire::WireEv>(kProbeSlots));
  next_probe_.assign(rings_.size(), 0);
  declare_profiles();
  if (!load_state(err)) return false;
  if (cfg.control_socket == "none") return true;

  path_ = cfg.control_socket.empty() ? std::string(rte_eal_get_runtime_dir()) + "/smrcctl.sock"
                                     : cfg.control_socket;
  std::string why;
  listen_fd_ = listen_unix(path_, SOCK_STREAM, access_, &why);
  if (listen_fd_ < 0) {
    *err = "control_socket: " + why;
    return false;
  }
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::printf("softmrcd: control socket %s (%s)\n", path_.c_str(), access_.describe().c_str());
  std::fflush(stdout);
  return true;
}

void ControlServer::close() {
  for (Client& c : clients_) ::close(c.fd);
  clients_.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
  listen_fd_ = -1;
  if (spare_fd_ >= 0) ::close(spare_fd_);
  spare_fd_ = -1;
}

void ControlServer::add_fds(std::vector<pollfd>* fds) {
  if (listen_fd_ >= 0) fds->push_back(pollfd{listen_fd_, POLLIN, 0});
  // A client is read only while it reads its replies and its requests are
  // served: the rest waits in its socket, not in the daemon. POLLHUP still
  // tells when it is gone.
  for (const Client& c : clients_) {
    const bool read = !c.eof && c.out.size() < kMaxOutput && c.in.size() < kMaxInput;
    fds->push_back(
        pollfd{c.fd, static_cast<short>((read ? POLLIN : 0) | (c.out.empty() ? 0 : POLLOUT)), 0});
  }
}

void ControlServer::step(const pollfd* ready, size_t count, uint64_t now) {
  // Clients accepted below were not in this round: only the first
  // `count - 1` entries after the listener are.
  size_t at = 0;
  const size_t polled = clients_.size();
  if (listen_fd_ >= 0 && count > 0) {
    if (ready[0].revents & POLLIN) accept_clients(now);
    at = 1;
  }
  for (size_t i = 0; i < polled && at + i < count; ++i) {
    Client& c = clients_[i];
    const short revents = ready[at + i].revents;
    if (revents & POLLIN) {
      read_client(c);
    } else if (revents & (POLLHUP | POLLERR)) {
      // Unread data comes with POLLIN; what is left is a client gone for
      // good, or one that only stopped sending (read to see which).
      if (c.eof || (revents & POLLERR)) {
        ::close(c.fd);
        c.fd = -1;
      } else {
        read_client(c);
      }
    }
  }
  for (Client& c : clients_) serve_requests(c, now);
  drain_events(now);
  finish_probes(now, false);
  const uint64_t idle_ms = d_.config().control_idle_ms;
  for (Client& c : clients_) {
    if (c.fd < 0) continue;
    // A client that sent all it will is closed once answered.
    if (c.eof && c.in.empty() && !c.follow && !c.probe) c.closing = true;
    // Part of a line is no request: a client that never ends one is idle.
    const bool idle = !c.follow && !c.probe && c.out.empty() && !c.closing;
    if (idle && idle_ms != 0 && now - c.active_ns >= idle_ms * 1'000'000) {
      ++idle_closed_;
      fail(c, Err::kBusy, "closed after " + std::to_string(idle_ms) + " ms without a request");
      c.closing = true;
    }
    write_client(c);
  }
  std::erase_if(clients_, [](const Client& c) {
    if (c.fd >= 0 && !(c.closing && c.out.empty())) return false;
    if (c.fd >= 0) ::close(c.fd);
    return true;
  });
}

// At the process's descriptor limit the listener stays readable and no
// accept succeeds: a spare descriptor is given up to take the connection,
// tell it why, and close it, so the control thread does not spin on it.
void ControlServer::accept_without_fds() {
  ++refused_no_fd_;
  if (refused_no_fd_ == 1 || (refused_no_fd_ & (refused_no_fd_ - 1)) == 0) {
    std::printf("softmrcd: control: out of file descriptors; refused %" PRIu64
                " connection(s) so far\n",
                refused_no_fd_);
    std::fflush(stdout);
  }
  if (spare_fd_ >= 0) ::close(spare_fd_);
  spare_fd_ = -1;
  const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) {
    Client c;
    c.fd = fd;
    refuse(c, Err::kBusy, "softmrcd is out of file descriptors");
  }
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void ControlServer::accept_clients(uint64_t now) {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) accept_without_fds();
      return;
    }
    Client c;
    c.fd = fd;
    c.active_ns = now;
    std::string why;
    uint32_t pid = 0;
    if (!access_.allows(fd, &c.uid, &pid, &why)) {
      ++refused_;
      std::printf("softmrcd: control: refused a connection: %s\n", why.c_str());
      std::fflush(stdout);
      refuse(c, Err::kPerm, "permission denied: " + why);
      continue;
    }
    if (clients_.size() >= kMaxClients) {
      refuse(c, Err::kBusy,
             "too many controller connections (" + std::to_string(kMaxClients) + ")");
      continue;
    }
    ++accepted_;
    clients_.push_back(std::move(c));
  }
}

void ControlServer::read_client(Client& c) {
  char buf[4096];
  while (c.in.size() < kMaxInput) {
    const ssize_t n = ::read(c.fd, buf, sizeof(buf));
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      c.eof = true;  // its requests are still answered (echo 'stats' | socat ...)
      return;
    } else if (errno != EINTR) {
      if (errno == EAGAIN) return;
      ::close(c.fd);
      c.fd = -1;  // gone; a pending probe goes with it
      return;
    }
  }
}

// Serves the complete lines a client sent (and, once it sent all it will,
// a last one without '\n'), a bounded number per step, and none while it
// does not read the replies it has.
void ControlServer::serve_requests(Client& c, uint64_t now) {
  for (uint32_t n = 0; c.fd >= 0 && !c.closing && !c.in.empty(); ++n) {
    size_t end = c.in.find('\n');
    if (end == std::string::npos && !c.eof && c.in.size() <= kMaxRequest) return;
    if (end == std::string::npos) end = c.in.size();
    if (end > kMaxRequest) {
      fail(c, Err::kInval, "request longer than " + std::to_string(kMaxRequest) + " bytes");
      c.closing = true;
      c.in.clear();
      return;
    }
    if (n == kMaxRequestsPerStep) return;
    if (c.out.size() >= kMaxOutput) {
      ++output_stalls_;
      return;
    }
    std::string line = c.in.substr(0, end);
    c.in.erase(0, std::min(end + 1, c.in.size()));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (c.follow || c.probe) {
      fail(c, Err::kBusy, "one request at a time: this connection is busy");
      continue;
    }
    c.active_ns = now;
    handle(c, line, now);
    request_snaps_.clear();
  }
}

// One line, as much of it as the socket takes at once, then the connection
// closes (write_client() may have closed it already).
void ControlServer::refuse(Client& c, Err code, const std::string& message) {
  fail(c, code, message);
  write_client(c);
  if (c.fd >= 0) ::close(c.fd);
}

void ControlServer::write_client(Client& c) {
  while (c.fd >= 0 && !c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      ::close(c.fd);
      c.fd = -1;
      return;
    }
    c.out.erase(0, static_cast<size_t>(n));
  }
}

void ControlServer::reply(Client& c, Json result) {
  Json o = Json::object();
  o.set("ok", true);
  o.set("result", std::move(result));
  c.out += o.dump() + "\n";
}

void ControlServer::fail(Client& c, Err code, const std::string& message) {
  ++failed_;
  Json o = Json::object();
  o.set("ok", false);
  o.set("errno", control::err_name(code));
  o.set("error", message);
  c.out += o.dump() + "\n";
}

void ControlServer::handle(Client& c, const std::string& line, uint64_t now) {
  ++requests_;
  Words w;
  std::istringstream in(line);
  for (std::string word; in >> word;) w.push_back(word);
  if (w.empty()) return fail(c, Err::kInval, std::string("empty request; ") + kUsage);
  if (d_.phase() != Phase::kRun && w[0] != "stats" && w[0] != "dev")
    return fail(c, Err::kBusy, "softmrcd is stopping");
  if (w[0] == "dev" && w.size() == 2 && w[1] == "show") return dev_show(c);
  if (w[0] == "port") return port_cmd(c, w);
  if (w[0] == "ev") return ev_cmd(c, w, now);
  if (w[0] == "events") return events_cmd(c, w);
  if (w[0] == "stats") return stats_cmd(c, w);
  if (w[0] == "profile") return profile_cmd(c, w);
  fail(c, Err::kInval, "unknown request '" + line.substr(0, 64) + "'; " + kUsage);
}

// ---- dev, port ----

void ControlServer::dev_show(Client& c) {
  const Config& cfg = d_.config();
  const control::DeviceLimits& l = profiles_.limits();
  Json o = Json::object();
  o.set("max_fmt_profiles", l.max_fmt_profiles);
  o.set("max_ev_profiles", l.max_ev_profiles);
  o.set("max_cc_profiles", l.max_cc_profiles);
  o.set("max_evs_per_profile", l.max_evs_per_profile);
  o.set("ev_width_bits", l.ev_width_bits);
  o.set("max_ev_fields", static_cast<uint32_t>(wire::kMaxEvFields));
  Json fmts = Json::array();
  fmts.push("udp");
  fmts.push("stev");
  fmts.push("srv6");
  o.set("ev_fmt_modes", std::move(fmts));
  o.set("srv6_max_path_bits", wire::kSrv6PathMaxBits);
  Json modes = Json::array();
  modes.push("explicit");
  modes.push("generated");
  o.set("ev_modes", std::move(modes));
  Json algs = Json::array();
  algs.push("nscc");
  algs.push("none");
  o.set("cc_algorithms", std::move(algs));
  o.set("ev_states", "good assumed_bad denied");
  o.set("modify_online", false);
  o.set("port_mask", static_cast<uint64_t>((uint64_t{1} << cfg.num_planes()) - 1) << 1);
  o.set("ports", cfg.num_planes());
  Json eps = Json::array();
  for (auto& e : d_.endpoints()) eps.push(e->name());
  o.set("endpoints", std::move(eps));
  reply(c, std::move(o));
}

void ControlServer::port_cmd(Client& c, const Words& w) {
  if (w.size() >= 2 && w[1] == "show" && w.size() <= 3) {
    Json rows;
    std::string err;
    if (!report("planes", Words(w.begin() + 2, w.end()), &rows, &err))
      return fail(c, Err::kNoent, err);
    return reply(c, std::move(rows));
  }
  if (w.size() != 5 || w[1] != "set" || (w[4] != "up" && w[4] != "down"))
    return fail(c, Err::kInval,
                "usage: port show [<endpoint>] | port set <endpoint> <plane> up|down");
  EndpointTask* e = d_.find_endpoint(w[2]);
  if (e == nullptr) return fail(c, Err::kNoent, "no endpoint named '" + w[2] + "'");
  uint32_t plane = 0;
  if (!control::parse_number(w[3], &plane) || plane >= e->num_planes())
    return fail(
        c, Err::kInval,
        "no plane '" + w[3] + "' (planes are 0.." + std::to_string(e->num_planes() - 1) + ")");
  const bool up = w[4] == "up";
  Command cmd{.type = CommandType::kPlaneAdmin, .plane = static_cast<uint8_t>(plane), .up = up};
  // The call after the command returns once the lcore has applied both.
  if (!e->command(cmd))
    return fail(c, Err::kBusy, "the endpoint's command ring is full; try again");
  e->call([](EndpointTask&, uint64_t) {});
  admin_down_[{e->index(), plane}] = !up;
  save_state();
  Json rows;
  std::string err;
  report("planes", Words{w[2]}, &rows, &err);
  reply(c, std::move(rows[plane]));
}

// ---- ev ----

void ControlServer::ev_cmd(Client& c, const Words& w, uint64_t now) {
  if (w.size() >= 2 && w[1] == "probe") return probe_start(c, w, now);
  const bool show = w.size() == 4 && w[1] == "show";
  const bool deny = w.size() == 5 && (w[1] == "deny" || w[1] == "restore");
  if (!show && !deny)
    return fail(c, Err::kInval,
                "usage: ev show <endpoint> <qpn> | ev deny|restore <endpoint> <qpn> <ev> | ev "
                "probe <endpoint> <peer> [plane <p>] [evs <i,j,..>] [count <n>] [timeout-ms <t>]");
  EndpointTask* e = d_.find_endpoint(w[2]);
  if (e == nullptr) return fail(c, Err::kNoent, "no endpoint named '" + w[2] + "'");
  uint32_t qpn = 0, ev = 0;
  if (!control::parse_number(w[3], &qpn))
    return fail(c, Err::kInval, "'" + w[3] + "' is not a QPN");
  if (deny) {
    if (!control::parse_number(w[4], &ev))
      return fail(c, Err::kInval, "'" + w[4] + "' is not an EV index");
    engine::Status st;
    e->call([&](EndpointTask& t, uint64_t at) {
      st = t.engine().set_ev_denied(qpn, ev, w[1] == "deny", at);
    });
    if (!st.ok())
      return fail(
          c,
          std::string(st.reason()).find("unknown") != std::string::npos ? Err::kNoent : Err::kInval,
          st.reason());
  }
  // Each EV's wire value, from the QP itself; the call also makes the
  // snapshot the report below reads current.
  std::vector<wire::WireEv> values;
  e->call([&](EndpointTask& t, uint64_t) {
    if (const engine::Qp* q = t.engine().qp(qpn))
      for (uint32_t i = 0; i < q->evs().size(); ++i) values.push_back(q->evs().entry(i).value);
  });
  Json rows;
  std::string err;
  if (!paged_report("evs", Words{w[2], w[3]}, &rows, &err)) return fail(c, Err::kNoent, err);
  const wire::EvMode mode = d_.config().endpoints[e->index()].ev_mode;
  Json out = Json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    Json row = Json::object();
    row.set("ev", static_cast<uint64_t>(i));
    if (i < values.size()) row.set("value", ev_hex(values[i], mode));
    for (size_t k = 1; k < rows[i].size(); ++k) row.set(rows[i].key(k), rows[i].value(k));
    out.push(std::move(row));
  }
  if (deny) {
    if (ev >= out.size()) return fail(c, Err::kNoent, "no EV " + w[4]);
    return reply(c, out[ev]);
  }
  reply(c, std::move(out));
}

// ev probe <endpoint> <peer> [plane P] [evs i,j] [count N] [timeout-ms T]: EVs
// are indexes into the endpoint's EV array (as 'ev show' numbers them).
void ControlServer::probe_start(Client& c, const Words& w, uint64_t now) {
  if (w.size() < 4 || w.size() % 2 != 0)
    return fail(c, Err::kInval,
                "usage: ev probe <endpoint> <peer> [plane <p>] [evs <i,j,..>] [count <n>] "
                "[timeout-ms <t>]");
  const Config& cfg = d_.config();
  EndpointTask* e = d_.find_endpoint(w[2]);
  if (e == nullptr) return fail(c, Err::kNoent, "no endpoint named '" + w[2] + "'");
  uint32_t peer = UINT32_MAX;
  for (uint32_t i = 0; i < cfg.endpoints.size(); ++i)
    if (cfg.endpoints[i].name == w[3] && i != e->index()) peer = i;
  if (peer == UINT32_MAX) return fail(c, Err::kNoent, "no peer named '" + w[3] + "'");
  uint32_t plane = UINT32_MAX, count = 1, timeout_ms = 100;
  std::vector<uint32_t> evs;
  const wire::EvMode mode = cfg.endpoints[e->index()].ev_mode;
  const std::vector<engine::EvEntry> all =
      ev_entries(cfg.ev_profiles[cfg.qp.ev_profile], cfg.endpoints[e->index()]);
  for (size_t i = 4; i < w.size(); i += 2) {
    const std::string& k = w[i];
    const std::string& v = w[i + 1];
    bool good = true;
    if (k == "plane") {
      good = control::parse_number(v, &plane) && plane < e->num_planes();
    } else if (k == "count") {
      good = control::parse_number(v, &count) && count >= 1;
    } else if (k == "timeout-ms") {
      good = control::parse_number(v, &timeout_ms) && timeout_ms >= 1 &&
             timeout_ms <= control::kMaxProbeWaitMs;
    } else if (k == "evs") {
      for (const std::string& s : control::split_list(v, ',')) {
        uint32_t x = 0;
        if (!control::parse_number(s, &x) || x >= all.size()) {
          good = false;
          break;
        }
        evs.push_back(x);
      }
    } else {
      return fail(c, Err::kInval, "unknown probe option '" + k + "'");
    }
    if (!good) return fail(c, Err::kInval, "bad " + k + " '" + v + "'");
  }
  if (evs.empty())
    for (uint32_t i = 0; i < all.size(); ++i)
      if (plane == UINT32_MAX || all[i].plane == plane) evs.push_back(i);
  if (uint64_t{evs.size()} * count > kMaxProbesPerRequest)
    return fail(c, Err::kTooBig,
                std::to_string(evs.size() * count) + " probes; at most " +
                    std::to_string(kMaxProbesPerRequest) + " per request");
  auto p = std::make_unique<Probe>();
  p->endpoint = e->index();
  p->peer = w[3];
  p->deadline_ns = now + uint64_t{timeout_ms} * 1'000'000;
  for (uint32_t ev : evs) {
    Probe::Target t;
    t.ev = ev;
    t.plane = all[ev].plane;
    t.value = ev_hex(all[ev].value, mode);
    p->targets.push_back(t);
  }
  std::vector<wire::WireEv>& slots = probe_evs_[e->index()];
  uint32_t& next = next_probe_[e->index()];
  e->call([&](EndpointTask& task, uint64_t at) {
    for (uint32_t round = 0; round < count; ++round)
      for (size_t i = 0; i < p->targets.size(); ++i) {
        Probe::Target& t = p->targets[i];
        const uint16_t req = static_cast<uint16_t>(kControlProbeFlag | (next & 0x7fff));
        wire::WireEv& slot = slots[next++ % kProbeSlots];
        slot = all[t.ev].value;
        const engine::Status st = task.engine().send_probe(peer, t.plane, &slot, req, at);
        if (!st.ok()) {
          t.error = st.reason();
          continue;
        }
        ++t.sent;
        p->waiting[req] = i;
      }
  });
  c.probe = std::move(p);
}

void ControlServer::on_probe_reply(uint32_t endpoint, const ControlEvent& e, uint64_t) {
  for (Client& c : clients_) {
    if (!c.probe || c.probe->endpoint != endpoint) continue;
    auto it = c.probe->waiting.find(e.req_id);
    if (it == c.probe->waiting.end()) continue;
    c.probe->targets[it->second].rtt_ns.push_back(e.rtt_ns);
    c.probe->waiting.erase(it);
    return;
  }
}

void ControlServer::finish_probes(uint64_t now, bool force) {
  for (Client& c : clients_) {
    if (!c.probe || (!force && !c.probe->waiting.empty() && now < c.probe->deadline_ns)) continue;
    Json targets = Json::array();
    uint64_t unanswered = 0;
    for (const Probe::Target& t : c.probe->targets) {
      Json o = Json::object();
      o.set("ev", t.ev);
      o.set("plane", static_cast<uint32_t>(t.plane));
      o.set("value", t.value);
      o.set("sent", t.sent);
      o.set("answered", static_cast<uint64_t>(t.rtt_ns.size()));
      unanswered += t.sent - t.rtt_ns.size();
      if (!t.rtt_ns.empty()) {
        uint64_t sum = 0;
        for (uint64_t r : t.rtt_ns) sum += r;
        o.set("rtt_min_ns", *std::min_element(t.rtt_ns.begin(), t.rtt_ns.end()));
        o.set("rtt_avg_ns", sum / t.rtt_ns.size());
        o.set("rtt_max_ns", *std::max_element(t.rtt_ns.begin(), t.rtt_ns.end()));
      }
      if (!t.error.empty()) o.set("error", t.error);
      targets.push(std::move(o));
    }
    Json r = Json::object();
    r.set("endpoint", d_.endpoints()[c.probe->endpoint]->name());
    r.set("peer", c.probe->peer);
    r.set("unanswered", unanswered);
    r.set("evs", std::move(targets));
    c.probe.reset();
    reply(c, std::move(r));
  }
}

// ---- events ----

const ControlServer::Attached* ControlServer::attached(uint32_t endpoint, uint32_t qpn) const {
  auto it = attached_.find({endpoint, qpn});
  return it == attached_.end() ? nullptr : &it->second;
}

void ControlServer::drain_events(uint64_t now) {
  ControlEvent ev[64];
  for (uint32_t i = 0; i < rings_.size(); ++i) {
    // Events the lcore could not queue: counted now, and told with the
    // next event that reaches subscribers.
    const uint64_t lost = d_.endpoints()[i]->control_events_lost() - lost_seen_[i];
    lost_seen_[i] += lost;
    events_lost_ += lost;
    unreported_lost_[i] += lost;
    unsigned n;
    while ((n = rte_ring_sc_dequeue_burst_elem(rings_[i], ev, sizeof(ControlEvent), 64, nullptr)) >
           0)
      for (unsigned k = 0; k < n; ++k) {
        if (ev[k].type == ControlEventType::kProbeReply)
          on_probe_reply(i, ev[k], now);
        else
          on_ev_event(i, ev[k]);
      }
  }
}

void ControlServer::on_ev_event(uint32_t endpoint, const ControlEvent& e) {
  // A QP that is not attached (destroyed since, or not past RESET) has
  // no profile: its events are kept, with profile 0.
  const Attached* a = attached(endpoint, e.qpn);
  const uint64_t profile = a ? a->ev_id : 0;
  const control::EvProfile* p = profiles_.ev(profile);
  if (p != nullptr && !(p->event_mask & e.new_state)) return;
  EndpointTask& task = *d_.endpoints()[endpoint];
  const uint64_t lost = std::exchange(unreported_lost_[endpoint], 0);
  ++events_;
  Json o = Json::object();
  o.set("t_ns", e.at_ns);
  o.set("endpoint", task.name());
  o.set("qpn", e.qpn);
  if (a != nullptr) o.set("owner", a->owner);
  o.set("profile", profile);
  o.set("ev", e.ev);
  if (p != nullptr && e.ev < p->evs.size())
    o.set("value", control::ev_value_hex(
                       p->evs[e.ev].value,
                       wire::ev_mode_max_width_bits(d_.config().endpoints[endpoint].ev_mode)));
  o.set("port", static_cast<uint32_t>(e.plane) + 1);
  o.set("plane", static_cast<uint32_t>(e.plane));
  o.set("state", engine::ev_state_name(engine::EvState(e.new_state)));
  o.set("old_state", engine::ev_state_name(engine::EvState(e.old_state)));
  o.set("losses", e.losses);
  history_.push_back(o);
  if (history_.size() > kEventHistory) history_.pop_front();
  for (Client& c : clients_) {
    if (!c.follow || c.fd < 0) continue;
    if (c.out.size() > kMaxOutput) {
      ++c.dropped;
      ++subscriber_drops_;
      continue;
    }
    Json line = o;
    line.set("drop_count", c.dropped + lost);
    c.dropped = 0;
    Json wrap = Json::object();
    wrap.set("event", std::move(line));
    c.out += wrap.dump() + "\n";
  }
}

void ControlServer::events_cmd(Client& c, const Words& w) {
  if (w.size() == 2 && w[1] == "follow") {
    c.follow = true;
    Json r = Json::object();
    r.set("following", true);
    return reply(c, std::move(r));
  }
  if (w.size() != 1) return fail(c, Err::kInval, "usage: events [follow]");
  Json a = Json::array();
  for (const Json& e : history_) a.push(e);
  reply(c, std::move(a));
}

// ---- stats: the reports the prompt and telemetry show ----

bool ControlServer::report(const std::string& what, const Words& args, Json* out,
                           std::string* err) {
  if (request_snaps_.empty()) request_snaps_ = d_.snapshots();
  Report r;
  if (!make_report(d_, request_snaps_, what, args, &r, err)) return false;
  *out = rows_json(r);
  return true;
}

// Every page of a paged report ("qps", "evs"): the last row of a page is
// "more" with the next first index.
bool ControlServer::paged_report(const std::string& what, const Words& args, Json* out,
                                 std::string* err) {
  *out = Json::array();
  uint64_t first = 0;
  for (;;) {
    Words a = args;
    a.push_back(std::to_string(first));
    Json page;
    if (!report(what, a, &page, err)) return false;
    bool more = false;
    for (size_t i = 0; i < page.size(); ++i) {
      const Json* name = page[i].find("name");
      if (name && name->as_string() == "more") {
        more = page[i].find("next_first")->as_uint(&first);
        continue;
      }
      out->push(page[i]);
    }
    if (!more) return true;
  }
}

void ControlServer::stats_cmd(Client& c, const Words& w) {
  std::string err;
  if (w.size() == 4 && w[1] == "qp") {
    Json rows;
    if (!report("qp", Words{w[2], w[3]}, &rows, &err)) return fail(c, Err::kNoent, err);
    return reply(c, std::move(rows));
  }
  if (w.size() > 2)
    return fail(c, Err::kInval, "usage: stats [<endpoint>] | stats qp <endpoint> <qpn>");
  const Words only(w.begin() + 1, w.end());
  Json o = Json::object();
  Json t;
  if (!report("planes", only, &t, &err)) return fail(c, Err::kNoent, err);
  o.set("planes", std::move(t));
  if (!report("ports", only, &t, &err)) return fail(c, Err::kNoent, err);
  o.set("ports", std::move(t));
  Json qps = Json::array();
  for (auto& e : d_.endpoints()) {
    if (!only.empty() && e->name() != only[0]) continue;
    Json rows;
    if (!paged_report("qps", Words{e->name()}, &rows, &err)) return fail(c, Err::kNoent, err);
    for (size_t i = 0; i < rows.size(); ++i) qps.push(rows[i]);
  }
  o.set("qps", std::move(qps));
  if (!report("drops", only, &t, &err)) return fail(c, Err::kNoent, err);
  o.set("drops", std::move(t));
  if (!report("stats", only, &t, &err)) return fail(c, Err::kNoent, err);
  o.set("totals", std::move(t));
  Json ctl = Json::object();
  ctl.set("connections", accepted_);
  ctl.set("refused", refused_);
  ctl.set("refused_no_fd", refused_no_fd_);
  ctl.set("idle_closed", idle_closed_);
  ctl.set("output_stalls", output_stalls_);
  ctl.set("requests", requests_);
  ctl.set("failed", failed_);
  ctl.set("events", events_);
  ctl.set("events_lost", events_lost_);
  ctl.set("subscriber_drops", subscriber_drops_);
  o.set("control", std::move(ctl));
  if (apps_ != nullptr) {
    const AppServer::Counters n = apps_->counters();
    Json a = Json::object();
    a.set("connected", n.connected);
    a.set("serving", n.serving);
    a.set("connections", n.connections);
    a.set("served", n.served);
    a.set("refused", n.refused);
    a.set("busy", n.busy);
    a.set("hello_timeouts", n.hello_timeouts);
    a.set("gone", n.gone);
    a.set("events_dropped", n.events_dropped);
    a.set("events_lost", n.events_lost);
    o.set("applications", std::move(a));
  }
  reply(c, std::move(o));
}

}  // namespace softmrc::softmrcd
