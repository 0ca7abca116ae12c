// The controller socket's profile requests, the declared profiles and the
// state file (see control_server.h; the rules are lib/control's).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "softmrcd/control_server.h"
#include "softmrcd/daemon.h"

namespace softmrc::softmrcd {

using control::Err;
using control::Json;
using control::ProfileState;
using control::Result;

namespace {

// "good,assumed_bad,denied" or "none".
bool parse_event_mask(const std::string& s, uint32_t* out) {
  *out = 0;
  if (s == "none") return true;
  for (const std::string& x : control::split_list(s, ',')) {
    if (x == "good")
      *out |= control::kEventGood;
    else if (x == "assumed_bad")
      *out |= control::kEventAssumedBad;
    else if (x == "denied")
      *out |= control::kEventDenied;
    else
      return false;
  }
  return *out != 0;
}

// "width:init:min:max:mask/width:init:min:max:mask..." (numbers decimal or 0x).
bool parse_fields(const std::string& s, std::vector<wire::EvField>* out) {
  out->clear();
  for (const std::string& f : control::split_list(s, '/')) {
    const std::vector<std::string> p = control::split_list(f, ':');
    wire::EvField x;
    if (p.size() != 5 || !control::parse_number(p[0], &x.width) ||
        !control::parse_number(p[1], &x.init_val) || !control::parse_number(p[2], &x.min_val) ||
        !control::parse_number(p[3], &x.max_val) || !control::parse_number(p[4], &x.mask))
      return false;
    out->push_back(x);
  }
  return !out->empty();
}

constexpr const char* kProfileUsage =
    "usage: profile fmt|ev|cc show [<id>] | profile fmt|ev|cc create [<id>] | profile "
    "fmt|ev|cc destroy <id> | profile fmt set <id> [mode udp|stev|srv6] [widths <w,w,..>] "
    "[state init|offline|online] | profile ev set <id> [mode explicit|generated|auto] [fmt <id>] "
    "[count <n>] [min_active <n>] [event_mask <good,assumed_bad,denied|none>] [fields "
    "<width:init:min:max:mask/...>] [state ...] | profile ev replace <id> <index> <value> <port> "
    "| profile ev ev-state <id> <value> <port> good|denied | profile cc set <id> [algorithm "
    "nscc|none] [link_gbps <g> base_rtt_us <u>] [<nscc_param>=<value> ...] [state ...]";

}  // namespace

void ControlServer::profile_cmd(Client& c, const Words& w) {
  if (w.size() < 3 || (w[1] != "fmt" && w[1] != "ev" && w[1] != "cc"))
    return fail(c, Err::kInval, kProfileUsage);
  const char kind = w[1][0];  // 'f', 'e' or 'c'
  const std::string& op = w[2];
  uint64_t id = 0;
  const bool has_id = w.size() > 3;
  if (has_id && !control::parse_number(w[3], UINT64_MAX, &id))
    return fail(c, Err::kInval, "'" + w[3] + "' is not a profile id");
  if (op == "show" && w.size() <= 4) {
    Json a = Json::array();
    if (kind == 'f')
      for (const auto& [pid, p] : profiles_.fmts())
        if (!has_id || pid == id) a.push(control::fmt_json(p));
    if (kind == 'e')
      for (const auto& [pid, p] : profiles_.evs())
        if (!has_id || pid == id) a.push(control::ev_json(p, has_id));
    if (kind == 'c')
      for (const auto& [pid, p] : profiles_.ccs())
        if (!has_id || pid == id) a.push(control::cc_json(p));
    if (has_id && a.size() == 0)
      return fail(c, Err::kNoent, "no " + w[1] + " profile " + std::to_string(id));
    return reply(c, has_id ? a[0] : a);
  }
  Result r;
  if (op == "create" && w.size() <= 4) {
    uint64_t got = 0;
    r = kind == 'f'   ? profiles_.create_fmt(id, &got)
        : kind == 'e' ? profiles_.create_ev(id, &got)
                      : profiles_.create_cc(id, &got);
    id = got;
  } else if (op == "destroy" && w.size() == 4) {
    r = kind == 'f'   ? profiles_.destroy_fmt(id)
        : kind == 'e' ? profiles_.destroy_ev(id)
                      : profiles_.destroy_cc(id);
  } else if (op == "set" && has_id) {
    return profile_set(c, kind, id, w);
  } else if (kind == 'e' && (op == "replace" || op == "ev-state")) {
    return profile_ev_op(c, w);
  } else {
    return fail(c, Err::kInval, kProfileUsage);
  }
  if (!r.ok()) return fail(c, r.code, r.message);
  save_state();
  Json o = Json::object();
  o.set("id", id);
  o.set(op == "create" ? "created" : "destroyed", true);
  reply(c, std::move(o));
}

void ControlServer::profile_set(Client& c, char kind, uint64_t id, const Words& w) {
  control::FmtChange fc;
  control::EvProfileChange ec;
  control::CcChange cc;
  double link_gbps = 0, base_rtt_us = 0;
  std::optional<ProfileState> state;
  const auto bad = [&](const std::string& k, const std::string& v) {
    fail(c, Err::kInval, "bad " + k + " '" + v + "'");
  };
  for (size_t i = 4; i < w.size(); ++i) {
    const std::string& k = w[i];
    const size_t eq = k.find('=');
    if (kind == 'c' && eq != std::string::npos) {  // one NSCC parameter
      if (!cc.config) {
        const control::CcProfile* p = profiles_.cc(id);
        cc.config = p && p->config ? *p->config : engine::NsccParams{};
      }
      if (Result r = control::set_nscc_param(&*cc.config, k.substr(0, eq), k.substr(eq + 1));
          !r.ok())
        return fail(c, r.code, r.message);
      continue;
    }
    if (i + 1 == w.size()) return fail(c, Err::kInval, "'" + k + "' needs a value");
    const std::string& v = w[++i];
    if (k == "state") {
      ProfileState s;
      if (!control::parse_profile_state(v, &s)) return bad(k, v);
      state = s;
    } else if (kind == 'f' && k == "mode") {
      wire::EvMode m;
      if (!control::parse_fmt_mode(v, &m)) return bad(k, v);
      fc.mode = m;
    } else if (kind == 'f' && k == "widths") {
      std::vector<uint32_t> widths;
      for (const std::string& s : control::split_list(v, ',')) {
        uint32_t x = 0;
        if (!control::parse_number(s, &x) || x > 255) return bad(k, v);
        widths.push_back(x);
      }
      fc.widths = widths;
    } else if (kind == 'e' && k == "mode") {
      control::EvProfileMode m;
      if (!control::parse_ev_profile_mode(v, &m)) return bad(k, v);
      ec.mode = m;
    } else if (kind == 'e' && k == "fmt") {
      uint64_t id = 0;  // as wide as the ids 'create' gives
      if (!control::parse_number(v, UINT64_MAX, &id)) return bad(k, v);
      ec.fmt_id = id;
    } else if (kind == 'e' && (k == "count" || k == "min_active")) {
      uint32_t x = 0;
      if (!control::parse_number(v, &x)) return bad(k, v);
      if (k == "count") ec.count = x;
      if (k == "min_active") ec.min_active = x;
    } else if (kind == 'e' && k == "event_mask") {
      uint32_t m = 0;
      if (!parse_event_mask(v, &m)) return bad(k, v);
      ec.event_mask = m;
    } else if (kind == 'e' && k == "fields") {
      std::vector<wire::EvField> f;
      if (!parse_fields(v, &f)) return bad(k, v);
      ec.fields = f;
    } else if (kind == 'c' && k == "algorithm") {
      engine::CcAlgorithm a;
      if (!control::parse_cc_algorithm(v, &a)) return bad(k, v);
      cc.algorithm = a;
    } else if (kind == 'c' && (k == "link_gbps" || k == "base_rtt_us")) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x > 0 && x <= 1e6)) return bad(k, v);
      (k == "link_gbps" ? link_gbps : base_rtt_us) = x;
    } else {
      return fail(c, Err::kInval,
                  "unknown attribute '" + k + "' of a " +
                      (kind == 'f'   ? "format"
                       : kind == 'e' ? "EV"
                                     : "CC") +
                      " profile");
    }
  }
  if (kind == 'c' && (link_gbps > 0) != (base_rtt_us > 0))
    return fail(c, Err::kInval, "link_gbps and base_rtt_us go together");
  if (kind == 'c' && link_gbps > 0) {
    engine::NsccParams n =
        engine::default_nscc_params(static_cast<uint64_t>(link_gbps * 1e9),
                                    static_cast<uint64_t>(base_rtt_us * 1e3), d_.config().path_mtu);
    if (cc.config) {  // parameters named too: they win over the derived ones
      for (size_t i = 4; i < w.size(); ++i)
        if (const size_t eq = w[i].find('='); eq != std::string::npos)
          (void)control::set_nscc_param(&n, w[i].substr(0, eq), w[i].substr(eq + 1));
    }
    cc.config = n;
  }
  Result r;
  if (kind == 'f') {
    fc.state = state;
    r = profiles_.modify_fmt(id, fc);
  } else if (kind == 'e') {
    ec.state = state;
    r = profiles_.modify_ev(id, ec);
  } else {
    cc.state = state;
    r = profiles_.modify_cc(id, cc);
  }
  if (!r.ok()) return fail(c, r.code, r.message);
  save_state();
  reply(c, kind == 'f'   ? control::fmt_json(*profiles_.fmt(id))
           : kind == 'e' ? control::ev_json(*profiles_.ev(id), false)
                         : control::cc_json(*profiles_.cc(id)));
}

// profile ev replace <id> <index> <value> <port>
// profile ev ev-state <id> <value> <port> good|denied
void ControlServer::profile_ev_op(Client& c, const Words& w) {
  uint64_t id = 0;
  uint32_t port = 0, index = 0;
  wire::EvValue value;
  if (w[2] == "replace") {
    if (w.size() != 7 || !control::parse_number(w[3], UINT64_MAX, &id) ||
        !control::parse_number(w[4], &index) || !control::parse_ev_value(w[5], &value) ||
        !control::parse_number(w[6], &port) || port > 255)
      return fail(c, Err::kInval,
                  "usage: profile ev replace <id> <index> <value (hex, whole bytes)> <port>");
    if (Result r = profiles_.replace_ev(id, index, value, static_cast<uint8_t>(port)); !r.ok())
      return fail(c, r.code, r.message);
  } else {
    if (w.size() != 7 || !control::parse_number(w[3], UINT64_MAX, &id) ||
        !control::parse_ev_value(w[4], &value) || !control::parse_number(w[5], &port) ||
        port > 255 || (w[6] != "good" && w[6] != "denied"))
      return fail(c, Err::kInval,
                  "usage: profile ev ev-state <id> <value (hex, whole bytes)> <port> good|denied");
    const engine::EvState s = w[6] == "good" ? engine::EvState::kGood : engine::EvState::kDenied;
    std::vector<uint32_t> matched;
    if (Result r = profiles_.set_ev_state(id, value, static_cast<uint8_t>(port), s, &matched);
        !r.ok())
      return fail(c, r.code, r.message);
    apply_profile_ev_state(id, matched, s);
  }
  save_state();
  reply(c, control::ev_json(*profiles_.ev(id), true));
}

// A profile EV's state reaches every QP attached to the profile: a QP's EV
// set is the profile's array, index for index (attach_qp).
void ControlServer::apply_profile_ev_state(uint64_t profile, const std::vector<uint32_t>& matched,
                                           engine::EvState state) {
  const bool deny = state == engine::EvState::kDenied;
  for (auto& e : d_.endpoints()) {
    std::vector<uint32_t> qpns;
    for (const auto& [key, a] : attached_)
      if (key.first == e->index() && a.ev_id == profile) qpns.push_back(key.second);
    if (qpns.empty()) continue;
    e->call([&](EndpointTask& t, uint64_t now) {
      for (uint32_t qpn : qpns)
        for (uint32_t ev : matched) (void)t.engine().set_ev_denied(qpn, ev, deny, now);
    });
  }
}

int ControlServer::attach_qp(uint32_t endpoint, uint32_t qpn, const std::string& owner,
                             uint64_t ev_id, uint64_t cc_id, QpProfiles* out, std::string* why) {
  const Config& cfg = d_.config();
  out->ev_id = ev_id != 0 ? ev_id : cfg.qp.ev_profile + 1;
  out->cc_id = cc_id != 0 ? cc_id : cfg.qp.cc_profile + 1;
  const auto refuse = [&](const Result& r) {
    *why = r.message;
    return r.code == Err::kNoent ? ENOENT : EINVAL;
  };
  if (Result r = profiles_.attach(out->ev_id, out->cc_id); !r.ok()) return refuse(r);
  const control::EvProfile& ev = *profiles_.ev(out->ev_id);
  const control::CcProfile& cc = *profiles_.cc(out->cc_id);
  const wire::EvMode mode = cfg.endpoints[endpoint].ev_mode;
  // A declared profile's EVs are the configuration's, made in the
  // endpoint's own EV mode, as for the traffic generator's QPs; the
  // controller's are its array, expanded by its format, which must be the
  // endpoint's mode.
  const EvProfileSpec& base = cfg.ev_profiles[ev.declared ? ev.id - 1 : cfg.qp.ev_profile];
  Result r;
  if (ev.declared) {
    out->evs = ev_entries(base, cfg.endpoints[endpoint]);
  } else if (const control::FmtProfile* f = profiles_.fmt(ev.fmt_id);
             f == nullptr || f->mode != mode) {
    r = Result::error(Err::kInval, "EV profile " + std::to_string(ev.id) + "'s format is not " +
                                       wire::ev_mode_name(mode) + ", the EV mode of endpoint '" +
                                       cfg.endpoints[endpoint].name + "'");
  } else {
    r = profiles_.qp_evs(ev.id, &out->evs);
  }
  if (!r.ok()) {
    profiles_.detach(out->ev_id, out->cc_id);
    return refuse(r);
  }
  // Spraying and probing are the endpoint's: the declared profile's, or
  // qp.ev_profile's for the controller's profiles.
  out->ev_config.min_active = ev.min_active;
  out->ev_config.policy = base.spray;
  out->ev_config.probe_initial_ns = base.probe_initial_ns;
  out->ev_config.probe_max_ns = base.probe_max_ns;
  out->ev_config.ecn_avoid_ns = base.ecn_avoid_ns;
  out->denied.clear();
  for (uint32_t i = 0; i < ev.evs.size(); ++i)
    if (ev.evs[i].state == engine::EvState::kDenied) out->denied.push_back(i);
  if (cc.declared) {
    out->cc = cfg.cc_profiles[cc.id - 1].profile;
  } else {
    out->cc = engine::CcProfile{};
    out->cc.algorithm = *cc.algorithm;
    if (cc.config) out->cc.nscc = *cc.config;
  }
  // A QP that moves (INIT -> INIT) lets go of its old profiles only now,
  // holding the new ones: a refusal above left it as it was.
  detach_qp(endpoint, qpn);
  attached_[{endpoint, qpn}] = Attached{out->ev_id, out->cc_id, owner};
  return 0;
}

void ControlServer::detach_qp(uint32_t endpoint, uint32_t qpn) {
  auto it = attached_.find({endpoint, qpn});
  if (it == attached_.end()) return;
  profiles_.detach(it->second.ev_id, it->second.cc_id);
  attached_.erase(it);
}

// The configuration's profiles, ONLINE from the start: format 1 is UDP
// [16], format 2 STEV [16, 16], format 3 SRv6 [32, 16] (a block and one
// path uSID); EV profile n + 1 is ev_profiles' n-th, an explicit array of
// the EVs every QP with it gets (configuration.md); CC profile n + 1 is
// cc_profiles' n-th. The daemon's QPs attach to qp.ev_profile and
// qp.cc_profile.
void ControlServer::declare_profiles() {
  const Config& cfg = d_.config();
  struct Declared {
    wire::EvMode mode;
    std::vector<uint32_t> widths;
  };
  const Declared formats[] = {
      {wire::EvMode::kUdp, {16}}, {wire::EvMode::kStev, {16, 16}}, {wire::EvMode::kSrv6, {32, 16}}};
  for (uint32_t i = 0; i < std::size(formats); ++i)
    (void)profiles_.declare_fmt(i + 1, formats[i].mode, formats[i].widths);
  const wire::EvMode mode = cfg.endpoints[0].ev_mode;
  const auto& fmt = *std::find_if(std::begin(formats), std::end(formats),
                                  [&](const Declared& d) { return d.mode == mode; });
  for (uint32_t i = 0; i < cfg.ev_profiles.size(); ++i) {
    const EvProfileSpec& s = cfg.ev_profiles[i];
    control::EvProfile p;
    p.id = i + 1;
    p.name = s.name;
    p.mode = control::EvProfileMode::kExplicit;
    p.fmt_id = static_cast<uint64_t>(&fmt - formats) + 1;
    for (uint32_t width : fmt.widths) {
      const uint32_t all = width == 32 ? UINT32_MAX : (1u << width) - 1;
      p.fields.push_back(
          {.width = width, .init_val = 0, .min_val = 0, .max_val = all, .mask = all});
    }
    p.min_active = s.min_active;
    p.event_mask = control::kEventAll;
    for (const engine::EvEntry& e : ev_entries(s, cfg.endpoints[0])) {
      control::EvSlot slot;
      std::memcpy(slot.value.bytes, e.value.bytes, sizeof(slot.value.bytes));
      slot.port = static_cast<uint8_t>(e.plane + 1);
      p.evs.push_back(slot);
    }
    p.count = static_cast<uint32_t>(p.evs.size());
    if (Result r = profiles_.declare_ev(p); !r.ok())
      std::printf("softmrcd: control: ev_profiles.%s cannot be shown: %s\n", s.name.c_str(),
                  r.message.c_str());
  }
  for (uint32_t i = 0; i < cfg.cc_profiles.size(); ++i) {
    control::CcProfile p;
    p.id = i + 1;
    p.name = cfg.cc_profiles[i].name;
    p.algorithm = cfg.cc_profiles[i].profile.algorithm;
    if (*p.algorithm == engine::CcAlgorithm::kNscc) p.config = cfg.cc_profiles[i].profile.nscc;
    (void)profiles_.declare_cc(p);
  }
  // The traffic generator's QPs, made before the lcores start, are all
  // the QPs there are now.
  for (auto& e : d_.endpoints()) {
    std::vector<uint32_t> qpns;
    e->snapshot().read([&](const EndpointSnapshot& s) {
      for (uint32_t q = 0; q < s.num_qps; ++q) qpns.push_back(s.qps[q].qpn);
    });
    for (uint32_t qpn : qpns) {
      QpProfiles unused;
      std::string why;
      if (attach_qp(e->index(), qpn, "txgen", 0, 0, &unused, &why) != 0)
        std::printf("softmrcd: control: %s QP %u has no profiles: %s\n", e->name().c_str(), qpn,
                    why.c_str());
    }
  }
}

// The state file: {"profiles": <Registry::to_json()>, "ports": [{"endpoint",
// "plane", "admin"}]}, written whole to <file>.tmp and renamed.
bool ControlServer::load_state(std::string* err) {
  const std::string& path = d_.config().control_state_file;
  if (path.empty()) return true;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return true;  // first start
    *err = "control_state_file: cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  Json j;
  std::string why;
  if (!control::parse_json(text.str(), &j, &why)) {
    *err = "control_state_file: " + path + ": " + why;
    return false;
  }
  const Json* profiles = j.find("profiles");
  const Json* ports = j.find("ports");
  if (profiles == nullptr || ports == nullptr || !ports->is_array()) {
    *err = "control_state_file: " + path + ": needs 'profiles' and a 'ports' list";
    return false;
  }
  if (Result r = profiles_.restore(*profiles); !r.ok()) {
    *err = "control_state_file: " + path + ": " + control::err_name(r.code) + ": " + r.message;
    return false;
  }
  for (size_t i = 0; i < ports->size(); ++i) {
    const Json& p = (*ports)[i];
    const Json* ep = p.find("endpoint");
    const Json* admin = p.find("admin");
    const Json* plane = p.find("plane");
    uint64_t pl = 0;
    EndpointTask* e = ep && ep->is_string() ? d_.find_endpoint(ep->as_string()) : nullptr;
    if (e == nullptr || plane == nullptr || !plane->as_uint(&pl) || pl >= e->num_planes() ||
        admin == nullptr || !admin->is_string() ||
        (admin->as_string() != "up" && admin->as_string() != "down")) {
      *err = "control_state_file: " + path + ": ports[" + std::to_string(i) +
             "] is not a hosted endpoint's plane with admin up or down";
      return false;
    }
    const bool up = admin->as_string() == "up";
    admin_down_[{e->index(), static_cast<uint32_t>(pl)}] = !up;
    e->command(
        Command{.type = CommandType::kPlaneAdmin, .plane = static_cast<uint8_t>(pl), .up = up});
  }
  return true;
}

void ControlServer::save_state() {
  const std::string& path = d_.config().control_state_file;
  if (path.empty()) return;
  Json ports = Json::array();
  for (const auto& [key, down] : admin_down_) {
    Json p = Json::object();
    p.set("endpoint", d_.endpoints()[key.first]->name());
    p.set("plane", key.second);
    p.set("admin", down ? "down" : "up");
    ports.push(std::move(p));
  }
  Json o = Json::object();
  o.set("profiles", profiles_.to_json());
  o.set("ports", std::move(ports));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << o.dump() << "\n";
    if (!out) {
      std::printf("softmrcd: control: cannot write %s: %s\n", tmp.c_str(), std::strerror(errno));
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    std::printf("softmrcd: control: cannot replace %s: %s\n", path.c_str(), std::strerror(errno));
}

}  // namespace softmrc::softmrcd
