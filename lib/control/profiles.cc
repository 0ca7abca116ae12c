// The controller's profiles and their rules (see profiles.h).
#include "control/profiles.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "wire/usid.h"

namespace softmrc::control {

namespace {

std::string pid(const char* what, uint64_t id) {
  return std::string(what) + " profile " + std::to_string(id);
}

Result ok() {
  return Result{};
}

uint32_t sum(const std::vector<uint32_t>& v) {
  uint32_t n = 0;
  for (uint32_t x : v) n += x;
  return n;
}

template <typename Map>
Result create(Map& m, uint64_t id, uint32_t max, const char* what, uint64_t* out) {
  if (m.size() >= max)
    return Result::error(Err::kNoSpc, std::string("no room for another ") + what +
                                          " profile (the device holds " + std::to_string(max) +
                                          ")");
  if (id == 0) {
    id = 1;
    while (m.count(id)) ++id;
  } else if (m.count(id)) {
    return Result::error(Err::kExist, pid(what, id) + " exists");
  }
  m[id].id = id;
  *out = id;
  return ok();
}

template <typename P>
Result destroy_check(const P* p, const char* what, uint64_t id) {
  if (p == nullptr) return Result::error(Err::kNoent, "no " + pid(what, id));
  if (p->declared)
    return Result::error(Err::kPerm,
                         pid(what, id) + " is declared in the configuration file: change it there");
  if (p->state == ProfileState::kOnline)
    return Result::error(Err::kBusy, pid(what, id) + " is ONLINE: take it OFFLINE first");
  return ok();
}

template <typename P>
Result modify_check(const P* p, const char* what, uint64_t id, bool changes_attrs) {
  if (p == nullptr) return Result::error(Err::kNoent, "no " + pid(what, id));
  if (p->declared)
    return Result::error(Err::kPerm,
                         pid(what, id) + " is declared in the configuration file: change it there");
  if (p->state == ProfileState::kOnline && changes_attrs)
    return Result::error(Err::kBusy, pid(what, id) +
                                         " is ONLINE: only 'state offline' is allowed (softmrc "
                                         "does not modify ONLINE profiles)");
  return ok();
}

// The EV fields of a profile as lib/wire expands them.
wire::EvProfile fields_of(const EvProfile& p) {
  wire::EvProfile wp;
  wp.field_count = static_cast<uint8_t>(p.fields.size());
  for (size_t i = 0; i < p.fields.size(); ++i) wp.fields[i] = p.fields[i];
  return wp;
}

Result from_wire(wire::EvExpansionError e, const std::string& where) {
  if (e == wire::EvExpansionError::kOk) return ok();
  return Result::error(wire::ev_expansion_errno(e) == E2BIG ? Err::kTooBig : Err::kInval,
                       where + ": " + wire::ev_expansion_error_name(e));
}

}  // namespace

const char* err_name(Err e) {
  switch (e) {
    case Err::kOk:
      return "OK";
    case Err::kInval:
      return "EINVAL";
    case Err::kBusy:
      return "EBUSY";
    case Err::kNoent:
      return "ENOENT";
    case Err::kTooBig:
      return "E2BIG";
    case Err::kNotSup:
      return "ENOTSUP";
    case Err::kExist:
      return "EEXIST";
    case Err::kNoSpc:
      return "ENOSPC";
    case Err::kPerm:
      return "EPERM";
  }
  return "?";
}

const char* profile_state_name(ProfileState s) {
  switch (s) {
    case ProfileState::kInit:
      return "INIT";
    case ProfileState::kOffline:
      return "OFFLINE";
    case ProfileState::kOnline:
      return "ONLINE";
  }
  return "?";
}

bool parse_profile_state(const std::string& s, ProfileState* out) {
  if (s == "init" || s == "INIT")
    *out = ProfileState::kInit;
  else if (s == "offline" || s == "OFFLINE")
    *out = ProfileState::kOffline;
  else if (s == "online" || s == "ONLINE")
    *out = ProfileState::kOnline;
  else
    return false;
  return true;
}

const char* ev_profile_mode_name(EvProfileMode m) {
  switch (m) {
    case EvProfileMode::kAuto:
      return "auto";
    case EvProfileMode::kExplicit:
      return "explicit";
    case EvProfileMode::kGenerated:
      return "generated";
  }
  return "?";
}

bool parse_ev_profile_mode(const std::string& s, EvProfileMode* out) {
  for (EvProfileMode m :
       {EvProfileMode::kAuto, EvProfileMode::kExplicit, EvProfileMode::kGenerated})
    if (s == ev_profile_mode_name(m)) {
      *out = m;
      return true;
    }
  return false;
}

bool parse_fmt_mode(const std::string& s, wire::EvMode* out) {
  for (wire::EvMode m : {wire::EvMode::kUdp, wire::EvMode::kStev, wire::EvMode::kSrv6})
    if (s == wire::ev_mode_name(m)) {
      *out = m;
      return true;
    }
  return false;
}

wire::EvFormat Registry::format_of(const FmtProfile& f) {
  wire::EvFormat out;
  out.mode = f.mode.value_or(wire::EvMode::kUdp);
  out.field_count = static_cast<uint8_t>(std::min<size_t>(f.widths.size(), wire::kMaxEvFields + 1));
  for (size_t i = 0; i < f.widths.size() && i < wire::kMaxEvFields; ++i)
    out.widths[i] = static_cast<uint8_t>(std::min<uint32_t>(f.widths[i], 255));
  return out;
}

const FmtProfile* Registry::fmt(uint64_t id) const {
  auto it = fmts_.find(id);
  return it == fmts_.end() ? nullptr : &it->second;
}
const EvProfile* Registry::ev(uint64_t id) const {
  auto it = evs_.find(id);
  return it == evs_.end() ? nullptr : &it->second;
}
const CcProfile* Registry::cc(uint64_t id) const {
  auto it = ccs_.find(id);
  return it == ccs_.end() ? nullptr : &it->second;
}

Result Registry::create_fmt(uint64_t id, uint64_t* out) {
  return create(fmts_, id, limits_.max_fmt_profiles, "format", out);
}
Result Registry::create_ev(uint64_t id, uint64_t* out) {
  return create(evs_, id, limits_.max_ev_profiles, "EV", out);
}
Result Registry::create_cc(uint64_t id, uint64_t* out) {
  return create(ccs_, id, limits_.max_cc_profiles, "CC", out);
}

Result Registry::destroy_fmt(uint64_t id) {
  if (Result r = destroy_check(fmt(id), "format", id); !r.ok()) return r;
  for (const auto& [eid, p] : evs_)
    if (p.fmt_id == id)
      return Result::error(Err::kBusy, pid("format", id) + " is used by " + pid("EV", eid));
  fmts_.erase(id);
  return ok();
}

Result Registry::destroy_ev(uint64_t id) {
  if (Result r = destroy_check(ev(id), "EV", id); !r.ok()) return r;
  evs_.erase(id);
  return ok();
}

Result Registry::destroy_cc(uint64_t id) {
  if (Result r = destroy_check(cc(id), "CC", id); !r.ok()) return r;
  ccs_.erase(id);
  return ok();
}

// The four moves of the life cycle; staying put is no move.
Result Registry::transition(ProfileState from, ProfileState to, const char* what,
                            uint64_t id) const {
  const bool allowed = from == to ||
                       (from == ProfileState::kInit && to == ProfileState::kOffline) ||
                       (from == ProfileState::kOffline && to != ProfileState::kOffline) ||
                       (from == ProfileState::kOnline && to == ProfileState::kOffline);
  if (allowed) return ok();
  return Result::error(Err::kInval, pid(what, id) + ": " + profile_state_name(from) + " -> " +
                                        profile_state_name(to) +
                                        " is not a move (INIT -> OFFLINE -> ONLINE -> OFFLINE -> "
                                        "INIT)");
}

Result Registry::modify_fmt(uint64_t id, const FmtChange& c) {
  const bool attrs = c.mode || c.widths;
  if (Result r = modify_check(fmt(id), "format", id, attrs); !r.ok()) return r;
  FmtProfile p = fmts_[id];
  const ProfileState to = c.state.value_or(p.state);
  if (Result r = transition(p.state, to, "format", id); !r.ok()) return r;
  // An ONLINE EV profile relies on the format as it is.
  if (attrs || to != ProfileState::kOnline)
    for (const auto& [eid, e] : evs_)
      if (e.fmt_id == id && e.state == ProfileState::kOnline && to != p.state)
        return Result::error(Err::kBusy,
                             pid("format", id) + " is used by ONLINE " + pid("EV", eid));
  if (c.mode) p.mode = *c.mode;
  if (c.widths) p.widths = *c.widths;
  if (to == ProfileState::kInit && p.state != ProfileState::kInit) {
    p.mode.reset();
    p.widths.clear();
  }
  if (to == ProfileState::kOffline && !p.mode)
    return Result::error(Err::kInval, pid("format", id) + " cannot go OFFLINE without a mode");
  // Widths are checked against the mode as soon as both are known.
  if (to != ProfileState::kInit && !p.widths.empty()) {
    if (p.widths.size() > wire::kMaxEvFields)
      return Result::error(Err::kTooBig, pid("format", id) + ": more than " +
                                             std::to_string(wire::kMaxEvFields) + " fields");
    if (Result r = from_wire(wire::check_ev_format(format_of(p)), pid("format", id)); !r.ok())
      return r;
  }
  if (to == ProfileState::kOnline && p.state != ProfileState::kOnline) {
    if (p.widths.empty())
      return Result::error(Err::kInval, pid("format", id) + " cannot go ONLINE without fields");
    // The sender appends the destination's uSID to the path.
    if (*p.mode == wire::EvMode::kSrv6 && sum(p.widths) > wire::kSrv6PathMaxBits)
      return Result::error(Err::kNotSup, pid("format", id) + ": " + std::to_string(sum(p.widths)) +
                                             " bits; softmrcd frames SRv6 paths of at most " +
                                             std::to_string(wire::kSrv6PathMaxBits) +
                                             " (the destination's uSID ends the path)");
  }
  p.state = to;
  fmts_[id] = p;
  return ok();
}

// What OFFLINE needs: a mode, and for the non-automatic modes an ONLINE
// format, a count and fields that fit the format.
Result Registry::check_ev_config(const EvProfile& p) const {
  const std::string who = pid("EV", p.id);
  if (!p.mode) return Result::error(Err::kInval, who + " cannot go OFFLINE without a mode");
  if (*p.mode == EvProfileMode::kAuto) return ok();
  const FmtProfile* f = fmt(p.fmt_id);
  if (p.fmt_id == 0) return Result::error(Err::kInval, who + " cannot go OFFLINE without a format");
  if (f == nullptr)
    return Result::error(Err::kNoent, who + ": no format profile " + std::to_string(p.fmt_id));
  if (f->state != ProfileState::kOnline)
    return Result::error(Err::kInval, who + ": format profile " + std::to_string(p.fmt_id) +
                                          " is " + profile_state_name(f->state) + ", not ONLINE");
  if (p.count == 0) return Result::error(Err::kInval, who + " cannot go OFFLINE without a count");
  if (p.count > limits_.max_evs_per_profile)
    return Result::error(Err::kTooBig, who + ": count " + std::to_string(p.count) +
                                           " is above the device's " +
                                           std::to_string(limits_.max_evs_per_profile));
  if (p.fields.empty())
    return Result::error(Err::kInval, who + " cannot go OFFLINE without fields");
  if (p.fields.size() > wire::kMaxEvFields)
    return Result::error(Err::kTooBig,
                         who + ": more than " + std::to_string(wire::kMaxEvFields) + " fields");
  const wire::EvProfile wp = fields_of(p);
  return from_wire(wire::check_ev_profile(format_of(*f), wp), who);
}

// Entering OFFLINE: an explicit array starts unpopulated; a generated one
// takes the generated values in turn on each port (value i / ports on port
// i % ports + 1), so every port gets the same paths.
Result Registry::fill_array(EvProfile* p) const {
  p->evs.clear();
  if (*p->mode == EvProfileMode::kAuto) return ok();
  p->evs.resize(p->count);
  if (*p->mode == EvProfileMode::kExplicit) return ok();
  const wire::EvFormat f = format_of(*fmt(p->fmt_id));
  const wire::EvProfile wp = fields_of(*p);
  uint64_t generated = 0;
  const uint32_t ports = limits_.num_ports;
  if (Result r = from_wire(wire::ev_generated_count(f, wp, p->count, &generated), pid("EV", p->id));
      !r.ok())
    return r;
  if (generated * ports < p->count)
    return Result::error(Err::kInval, pid("EV", p->id) + ": the fields generate " +
                                          std::to_string(generated) + " values, " +
                                          std::to_string(generated * ports) + " EVs over " +
                                          std::to_string(ports) + " ports, fewer than count " +
                                          std::to_string(p->count));
  for (uint32_t i = 0; i < p->count; ++i) {
    if (Result r =
            from_wire(wire::generate_ev(f, wp, i / ports, &p->evs[i].value), pid("EV", p->id));
        !r.ok())
      return r;
    p->evs[i].port = static_cast<uint8_t>(i % ports + 1);
  }
  return ok();
}

Result Registry::check_ev_online(const EvProfile& p) const {
  const std::string who = pid("EV", p.id);
  if (*p.mode == EvProfileMode::kAuto)
    return Result::error(Err::kNotSup,
                         who +
                             ": softmrcd has no automatic EVs; use an explicit or generated "
                             "profile (or the configuration's ev_profiles)");
  if (p.min_active == 0 || p.min_active > p.count)
    return Result::error(Err::kInval, who + ": min_active " + std::to_string(p.min_active) +
                                          " is not in 1..count (" + std::to_string(p.count) + ")");
  for (size_t i = 0; i < p.evs.size(); ++i)
    if (p.evs[i].port == 0)
      return Result::error(Err::kInval, who + ": EV " + std::to_string(i) +
                                            " is unpopulated (replace every EV before ONLINE)");
  // The format may have changed while this profile was OFFLINE: the array
  // must still be what the format makes of the fields.
  if (Result r = check_ev_config(p); !r.ok()) return r;
  EvProfile fresh = p;
  if (Result r = fill_array(&fresh); !r.ok()) return r;
  const wire::EvFormat f = format_of(*fmt(p.fmt_id));
  const wire::EvProfile wp = fields_of(p);
  for (size_t i = 0; i < p.evs.size(); ++i) {
    wire::WireEv w;
    const bool stale =
        *p.mode == EvProfileMode::kGenerated
            ? !std::equal(std::begin(p.evs[i].value.bytes), std::end(p.evs[i].value.bytes),
                          fresh.evs[i].value.bytes)
            : wire::expand_ev(f, wp, p.evs[i].value, &w) != wire::EvExpansionError::kOk;
    if (stale)
      return Result::error(Err::kInval, who + ": format profile " + std::to_string(p.fmt_id) +
                                            " changed since EV " + std::to_string(i) +
                                            " was made; set the profile's fmt or fields again");
  }
  return ok();
}

Result Registry::modify_ev(uint64_t id, const EvProfileChange& c) {
  const bool attrs = c.mode || c.fmt_id || c.count || c.min_active || c.event_mask || c.fields;
  if (Result r = modify_check(ev(id), "EV", id, attrs); !r.ok()) return r;
  EvProfile p = evs_[id];
  const ProfileState to = c.state.value_or(p.state);
  if (Result r = transition(p.state, to, "EV", id); !r.ok()) return r;
  if (p.state == ProfileState::kOnline && to == ProfileState::kOffline && p.attached != 0)
    return Result::error(Err::kBusy,
                         pid("EV", id) + " is used by " + std::to_string(p.attached) + " QPs");
  if (c.event_mask && (*c.event_mask & ~kEventAll) != 0)
    return Result::error(Err::kInval, pid("EV", id) + ": event mask " +
                                          std::to_string(*c.event_mask) +
                                          " has bits other than good, assumed_bad, denied");
  // The array's shape follows mode, format, count and fields: changing one
  // of them while OFFLINE starts the array again.
  const bool reshape = c.mode || c.fmt_id || c.count || c.fields;
  if (c.mode) p.mode = *c.mode;
  if (c.fmt_id) p.fmt_id = *c.fmt_id;
  if (c.count) p.count = *c.count;
  if (c.min_active) p.min_active = *c.min_active;
  if (c.event_mask) p.event_mask = *c.event_mask;
  if (c.fields) p.fields = *c.fields;
  if (to == ProfileState::kInit && p.state != ProfileState::kInit) {
    const uint64_t keep = p.id;
    p = EvProfile{};
    p.id = keep;
  }
  const bool entering_offline = to == ProfileState::kOffline && p.state == ProfileState::kInit;
  if (to != ProfileState::kInit && (entering_offline || reshape)) {
    if (Result r = check_ev_config(p); !r.ok()) return r;
    if (Result r = fill_array(&p); !r.ok()) return r;
  }
  if (to == ProfileState::kOnline && p.state != ProfileState::kOnline)
    if (Result r = check_ev_online(p); !r.ok()) return r;
  p.state = to;
  evs_[id] = p;
  return ok();
}

Result Registry::replace_ev(uint64_t id, uint32_t index, const wire::EvValue& value, uint8_t port) {
  const EvProfile* p = ev(id);
  if (p == nullptr) return Result::error(Err::kNoent, "no " + pid("EV", id));
  if (p->declared)
    return Result::error(Err::kPerm,
                         pid("EV", id) + " is declared in the configuration file: change it there");
  if (!p->mode || *p->mode != EvProfileMode::kExplicit || p->state == ProfileState::kInit)
    return Result::error(Err::kInval,
                         pid("EV", id) + ": EVs are replaced in an OFFLINE explicit profile");
  if (p->state == ProfileState::kOnline)
    return Result::error(Err::kBusy, pid("EV", id) + " is ONLINE: take it OFFLINE to replace EVs");
  if (index >= p->evs.size())
    return Result::error(Err::kInval, pid("EV", id) + ": EV index " + std::to_string(index) +
                                          " is not below count " + std::to_string(p->evs.size()));
  if (port == 0 || port > limits_.num_ports)
    return Result::error(Err::kInval, "port " + std::to_string(port) + " is not in 1.." +
                                          std::to_string(limits_.num_ports));
  // The value must expand: nothing past what the fields consume.
  const wire::EvProfile wp = fields_of(*p);
  wire::WireEv w;
  if (Result r = from_wire(wire::expand_ev(format_of(*fmt(p->fmt_id)), wp, value, &w),
                           pid("EV", id) + ": EV value");
      !r.ok())
    return r;
  EvSlot& s = evs_[id].evs[index];
  s.value = value;
  s.port = port;
  s.state = engine::EvState::kGood;
  return ok();
}

Result Registry::set_ev_state(uint64_t id, const wire::EvValue& value, uint8_t port,
                              engine::EvState st, std::vector<uint32_t>* matched) {
  matched->clear();
  const EvProfile* p = ev(id);
  if (p == nullptr) return Result::error(Err::kNoent, "no " + pid("EV", id));
  if (st == engine::EvState::kAssumedBad)
    return Result::error(Err::kInval, "only the endpoint marks an EV ASSUMED_BAD (good or denied)");
  if (p->state == ProfileState::kInit || p->evs.empty())
    return Result::error(
        Err::kInval, pid("EV", id) + " has no EV array (" + profile_state_name(p->state) + ", " +
                         (p->mode ? ev_profile_mode_name(*p->mode) : "no mode") + ")");
  EvProfile& m = evs_[id];
  for (uint32_t i = 0; i < m.evs.size(); ++i)
    if (m.evs[i].port == port &&
        std::equal(std::begin(value.bytes), std::end(value.bytes), m.evs[i].value.bytes)) {
      m.evs[i].state = st;
      matched->push_back(i);
    }
  if (matched->empty())
    return Result::error(Err::kNoent, pid("EV", id) + " has no EV " +
                                          ev_value_hex(value, wire::kEvValueBits) + " on port " +
                                          std::to_string(port));
  return ok();
}

Result Registry::attach(uint64_t ev_id, uint64_t cc_id) {
  const EvProfile* e = ev_id ? ev(ev_id) : nullptr;
  const CcProfile* c = cc_id ? cc(cc_id) : nullptr;
  if (ev_id && e == nullptr) return Result::error(Err::kNoent, "no " + pid("EV", ev_id));
  if (cc_id && c == nullptr) return Result::error(Err::kNoent, "no " + pid("CC", cc_id));
  if (e && e->state != ProfileState::kOnline)
    return Result::error(Err::kInval, pid("EV", ev_id) + " is " + profile_state_name(e->state) +
                                          "; QPs attach to ONLINE profiles");
  if (c && c->state != ProfileState::kOnline)
    return Result::error(Err::kInval, pid("CC", cc_id) + " is " + profile_state_name(c->state) +
                                          "; QPs attach to ONLINE profiles");
  if (ev_id) ++evs_[ev_id].attached;
  if (cc_id) ++ccs_[cc_id].attached;
  return ok();
}

void Registry::detach(uint64_t ev_id, uint64_t cc_id) {
  if (auto it = evs_.find(ev_id); it != evs_.end() && it->second.attached) --it->second.attached;
  if (auto it = ccs_.find(cc_id); it != ccs_.end() && it->second.attached) --it->second.attached;
}

Result Registry::qp_evs(uint64_t ev_id, std::vector<engine::EvEntry>* out) const {
  const EvProfile* p = ev(ev_id);
  if (p == nullptr) return Result::error(Err::kNoent, "no " + pid("EV", ev_id));
  if (p->state != ProfileState::kOnline)
    return Result::error(Err::kInval, pid("EV", ev_id) + " is not ONLINE");
  const FmtProfile* f = fmt(p->fmt_id);
  const wire::EvProfile wp = fields_of(*p);
  out->clear();
  for (const EvSlot& s : p->evs) {
    engine::EvEntry e{};
    if (Result r =
            from_wire(wire::expand_ev(format_of(*f), wp, s.value, &e.value), pid("EV", ev_id));
        !r.ok())
      return r;
    e.plane = static_cast<uint8_t>(s.port - 1);
    out->push_back(e);
  }
  return ok();
}

Result Registry::declare_fmt(uint64_t id, wire::EvMode mode, const std::vector<uint32_t>& widths) {
  uint64_t got = 0;
  if (Result r = create_fmt(id, &got); !r.ok()) return r;
  if (Result r = modify_fmt(id, FmtChange{mode, widths, ProfileState::kOffline}); !r.ok()) return r;
  if (Result r = modify_fmt(id, FmtChange{{}, {}, ProfileState::kOnline}); !r.ok()) return r;
  fmts_[id].declared = true;
  return ok();
}

Result Registry::declare_ev(EvProfile p) {
  uint64_t got = 0;
  if (Result r = create_ev(p.id, &got); !r.ok()) return r;
  p.state = ProfileState::kOnline;
  p.declared = true;
  if (Result r = check_ev_config(p); !r.ok()) return r;
  if (Result r = check_ev_online(p); !r.ok()) return r;
  evs_[p.id] = p;
  return ok();
}

Result Registry::declare_cc(CcProfile p) {
  uint64_t got = 0;
  if (Result r = create_cc(p.id, &got); !r.ok()) return r;
  p.state = ProfileState::kOnline;
  p.declared = true;
  ccs_[p.id] = p;
  return ok();
}

Result Registry::modify_cc(uint64_t id, const CcChange& c) {
  const bool attrs = c.algorithm || c.config;
  if (Result r = modify_check(cc(id), "CC", id, attrs); !r.ok()) return r;
  CcProfile p = ccs_[id];
  const ProfileState to = c.state.value_or(p.state);
  if (Result r = transition(p.state, to, "CC", id); !r.ok()) return r;
  if (p.state == ProfileState::kOnline && to == ProfileState::kOffline && p.attached != 0)
    return Result::error(Err::kBusy,
                         pid("CC", id) + " is used by " + std::to_string(p.attached) + " QPs");
  if (c.algorithm) p.algorithm = *c.algorithm;
  if (c.config) p.config = *c.config;
  if (to == ProfileState::kInit && p.state != ProfileState::kInit) {
    p.algorithm.reset();
    p.config.reset();
  }
  if (to != ProfileState::kInit && !p.algorithm)
    return Result::error(Err::kInval, pid("CC", id) + " cannot go OFFLINE without an algorithm");
  if (to == ProfileState::kOnline && p.state != ProfileState::kOnline &&
      *p.algorithm == engine::CcAlgorithm::kNscc) {
    if (!p.config)
      return Result::error(Err::kInval,
                           pid("CC", id) + " (nscc) cannot go ONLINE without a config");
    engine::CcProfile cp{engine::CcAlgorithm::kNscc, *p.config};
    if (const char* why = engine::validate(cp))
      return Result::error(Err::kInval, pid("CC", id) + ": " + why);
  }
  p.state = to;
  ccs_[id] = p;
  return ok();
}

// ---- JSON forms ----

std::string ev_value_hex(const wire::EvValue& v, uint32_t bits) {
  const uint32_t bytes =
      std::max<uint32_t>(1, std::min<uint32_t>((bits + 7) / 8, wire::kEvValueBytes));
  std::string s = "0x";
  char buf[4];
  for (uint32_t i = 0; i < bytes; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", v.bytes[i]);
    s += buf;
  }
  return s;
}

bool parse_ev_value(const std::string& s, wire::EvValue* out) {
  std::string h = s;
  if (h.size() > 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X')) h = h.substr(2);
  if (h.empty() || h.size() % 2 != 0 || h.size() > 2 * wire::kEvValueBytes) return false;
  wire::EvValue v;
  for (size_t i = 0; i < h.size(); i += 2) {
    unsigned b = 0;
    for (size_t k = i; k < i + 2; ++k) {
      const char c = h[k];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return false;
      b = b << 4 | static_cast<unsigned>(d);
    }
    v.bytes[i / 2] = static_cast<uint8_t>(b);
  }
  *out = v;
  return true;
}

namespace {

Json widths_json(const std::vector<uint32_t>& w) {
  Json a = Json::array();
  for (uint32_t x : w) a.push(x);
  return a;
}

Json fields_json(const std::vector<wire::EvField>& fields) {
  Json a = Json::array();
  for (const wire::EvField& f : fields) {
    Json o = Json::object();
    o.set("width", f.width);
    o.set("init", f.init_val);
    o.set("min", f.min_val);
    o.set("max", f.max_val);
    o.set("mask", f.mask);
    a.push(std::move(o));
  }
  return a;
}

Json mask_json(uint32_t mask) {
  Json a = Json::array();
  if (mask & kEventGood) a.push("good");
  if (mask & kEventAssumedBad) a.push("assumed_bad");
  if (mask & kEventDenied) a.push("denied");
  return a;
}

}  // namespace

Json fmt_json(const FmtProfile& f) {
  Json o = Json::object();
  o.set("id", f.id);
  o.set("state", profile_state_name(f.state));
  o.set("declared", f.declared);
  o.set("mode", f.mode ? Json(wire::ev_mode_name(*f.mode)) : Json());
  o.set("widths", widths_json(f.widths));
  o.set("width_bits", sum(f.widths));
  return o;
}

Json ev_json(const EvProfile& p, bool with_array) {
  Json o = Json::object();
  o.set("id", p.id);
  if (!p.name.empty()) o.set("name", p.name);
  o.set("state", profile_state_name(p.state));
  o.set("declared", p.declared);
  o.set("mode", p.mode ? Json(ev_profile_mode_name(*p.mode)) : Json());
  o.set("fmt", p.fmt_id);
  o.set("count", p.count);
  o.set("min_active", p.min_active);
  o.set("event_mask", mask_json(p.event_mask));
  o.set("fields", fields_json(p.fields));
  o.set("attached_qps", p.attached);
  if (with_array) {
    uint32_t bits = 0;
    for (const wire::EvField& x : p.fields)
      bits += static_cast<uint32_t>(__builtin_popcount(x.mask));
    Json a = Json::array();
    for (const EvSlot& s : p.evs) {
      Json e = Json::object();
      e.set("value", ev_value_hex(s.value, bits ? bits : wire::kEvValueBits));
      e.set("port", s.port);
      e.set("state", s.port == 0 ? "UNPOPULATED" : engine::ev_state_name(s.state));
      a.push(std::move(e));
    }
    o.set("evs", std::move(a));
  }
  return o;
}

Json cc_json(const CcProfile& p) {
  Json o = Json::object();
  o.set("id", p.id);
  if (!p.name.empty()) o.set("name", p.name);
  o.set("state", profile_state_name(p.state));
  o.set("declared", p.declared);
  o.set("algorithm", p.algorithm ? Json(engine::cc_algorithm_name(*p.algorithm)) : Json());
  o.set("attached_qps", p.attached);
  if (p.config) {
    const engine::NsccParams& n = *p.config;
    Json c = Json::object();
    c.set("base_rtt_ns", n.base_rtt_ns);
    c.set("target_delay_ns", n.target_delay_ns);
    c.set("max_cwnd_bytes", n.max_cwnd_bytes);
    c.set("adjust_bytes_threshold", n.adjust_bytes_threshold);
    c.set("adjust_period_ns", n.adjust_period_ns);
    c.set("eta", n.eta);
    c.set("fi", n.fi);
    c.set("fi_scale", n.fi_scale);
    c.set("gamma", n.gamma);
    c.set("max_md_jump", n.max_md_jump);
    c.set("disable_qa", n.disable_qa);
    c.set("qa_gate", static_cast<uint32_t>(n.qa_gate));
    c.set("qa_threshold_ns", n.qa_threshold_ns);
    o.set("config", std::move(c));
  }
  return o;
}

Json Registry::to_json() const {
  Json o = Json::object();
  Json f = Json::array(), e = Json::array(), c = Json::array();
  for (const auto& [id, p] : fmts_)
    if (!p.declared) f.push(fmt_json(p));
  for (const auto& [id, p] : evs_)
    if (!p.declared) e.push(ev_json(p, true));
  for (const auto& [id, p] : ccs_)
    if (!p.declared) c.push(cc_json(p));
  o.set("fmt_profiles", std::move(f));
  o.set("ev_profiles", std::move(e));
  o.set("cc_profiles", std::move(c));
  return o;
}

bool parse_number(const std::string& s, uint64_t max, uint64_t* out) {
  // Decimal or 0x hex, as documented: not octal, no sign or spaces.
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char* digits = s.c_str() + (hex ? 2 : 0);
  if (!std::isxdigit(static_cast<unsigned char>(*digits)) || (!hex && !std::isdigit(*digits)))
    return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(digits, &end, hex ? 16 : 10);
  if (*end != '\0' || errno != 0 || v > max) return false;
  *out = v;
  return true;
}

bool parse_number(const std::string& s, uint32_t* out) {
  uint64_t v = 0;
  if (!parse_number(s, UINT32_MAX, &v)) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

bool parse_cc_algorithm(const std::string& s, engine::CcAlgorithm* out) {
  for (engine::CcAlgorithm a : {engine::CcAlgorithm::kNone, engine::CcAlgorithm::kNscc})
    if (s == engine::cc_algorithm_name(a)) {
      *out = a;
      return true;
    }
  return false;
}

Result set_nscc_param(engine::NsccParams* n, const std::string& key, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(value.c_str(), &end);
  const bool number = !value.empty() && *end == '\0' && errno == 0 && std::isfinite(d) && d >= 0;
  const bool whole = number && d == std::floor(d) && d < 1.8e19;
  const auto bad = [&](const char* what) {
    return Result::error(Err::kInval, "NSCC " + key + ": '" + value + "' is not " + what);
  };
  struct U64 {
    const char* name;
    uint64_t* field;
  };
  const U64 whole_params[] = {{"base_rtt_ns", &n->base_rtt_ns},
                              {"target_delay_ns", &n->target_delay_ns},
                              {"max_cwnd_bytes", &n->max_cwnd_bytes},
                              {"adjust_bytes_threshold", &n->adjust_bytes_threshold},
                              {"adjust_period_ns", &n->adjust_period_ns},
                              {"qa_threshold_ns", &n->qa_threshold_ns}};
  for (const U64& u : whole_params)
    if (key == u.name) {
      if (!whole) return bad("a whole number");
      *u.field = static_cast<uint64_t>(d);
      return ok();
    }
  struct Real {
    const char* name;
    double* field;
  };
  const Real real_params[] = {{"eta", &n->eta},
                              {"fi", &n->fi},
                              {"fi_scale", &n->fi_scale},
                              {"gamma", &n->gamma},
                              {"max_md_jump", &n->max_md_jump}};
  for (const Real& r : real_params)
    if (key == r.name) {
      if (!number) return bad("a number");
      *r.field = d;
      return ok();
    }
  if (key == "qa_gate") {
    if (!whole || d > 63) return bad("a whole number 0..63");
    n->qa_gate = static_cast<uint8_t>(d);
    return ok();
  }
  if (key == "disable_qa") {
    if (value != "true" && value != "false" && value != "0" && value != "1")
      return bad("true or false");
    n->disable_qa = value == "true" || value == "1";
    return ok();
  }
  return Result::error(Err::kInval, "no NSCC parameter '" + key + "'");
}

Result nscc_from_json(const Json& o, engine::NsccParams* out) {
  engine::NsccParams n;
  for (size_t i = 0; i < o.size(); ++i) {
    const Json& v = o.value(i);
    std::string text;
    uint64_t u = 0;
    if (v.is_bool())
      text = v.as_bool() ? "true" : "false";
    else if (v.as_uint(&u))
      text = std::to_string(u);
    else if (v.is_number())
      text = Json(v.as_double()).dump();
    if (Result r = set_nscc_param(&n, o.key(i), text); !r.ok()) return r;
  }
  *out = n;
  return ok();
}

namespace {

// Restoring: each saved field, read without trusting the file.
bool get_uint(const Json& o, const char* k, uint64_t* out) {
  const Json* v = o.find(k);
  return v != nullptr && v->as_uint(out);
}

Result bad_file(const std::string& what) {
  return Result::error(Err::kInval, "state file: " + what);
}

Result restore_state(ProfileState saved, const std::function<Result(ProfileState)>& move) {
  if (saved == ProfileState::kInit) return ok();
  if (Result r = move(ProfileState::kOffline); !r.ok()) return r;
  return saved == ProfileState::kOnline ? move(ProfileState::kOnline) : ok();
}

bool get_state(const Json& o, ProfileState* out) {
  const Json* v = o.find("state");
  return v != nullptr && v->is_string() && parse_profile_state(v->as_string(), out);
}

}  // namespace

Result Registry::restore(const Json& j) {
  const Json* f = j.find("fmt_profiles");
  const Json* e = j.find("ev_profiles");
  const Json* c = j.find("cc_profiles");
  if (f == nullptr || e == nullptr || c == nullptr || !f->is_array() || !e->is_array() ||
      !c->is_array())
    return bad_file("needs fmt_profiles, ev_profiles and cc_profiles lists");
  for (size_t i = 0; i < f->size(); ++i) {
    const Json& o = (*f)[i];
    uint64_t id = 0, got = 0;
    ProfileState st;
    if (!get_uint(o, "id", &id) || id == 0 || !get_state(o, &st))
      return bad_file("fmt_profiles[" + std::to_string(i) + "] needs an id and a state");
    if (Result r = create_fmt(id, &got); !r.ok()) return r;
    FmtChange ch;
    if (const Json* m = o.find("mode"); m && m->is_string()) {
      wire::EvMode mode;
      if (!parse_fmt_mode(m->as_string(), &mode))
        return bad_file("bad mode of format " + std::to_string(id));
      ch.mode = mode;
    }
    if (const Json* w = o.find("widths"); w && w->is_array()) {
      std::vector<uint32_t> widths;
      for (size_t k = 0; k < w->size(); ++k) {
        uint64_t x = 0;
        if (!(*w)[k].as_uint(&x) || x > 255)
          return bad_file("bad width of format " + std::to_string(id));
        widths.push_back(static_cast<uint32_t>(x));
      }
      ch.widths = widths;
    }
    if (Result r = modify_fmt(id, ch); !r.ok()) return r;
    if (Result r = restore_state(st,
                                 [&](ProfileState s) {
                                   return modify_fmt(id, FmtChange{{}, {}, s});
                                 });
        !r.ok())
      return r;
  }
  for (size_t i = 0; i < e->size(); ++i) {
    const Json& o = (*e)[i];
    uint64_t id = 0, got = 0, x = 0;
    ProfileState st;
    if (!get_uint(o, "id", &id) || id == 0 || !get_state(o, &st))
      return bad_file("ev_profiles[" + std::to_string(i) + "] needs an id and a state");
    if (Result r = create_ev(id, &got); !r.ok()) return r;
    EvProfileChange ch;
    if (const Json* m = o.find("mode"); m && m->is_string()) {
      EvProfileMode mode;
      if (!parse_ev_profile_mode(m->as_string(), &mode))
        return bad_file("bad mode of EV profile " + std::to_string(id));
      ch.mode = mode;
    }
    if (get_uint(o, "fmt", &x) && x != 0) ch.fmt_id = x;
    if (get_uint(o, "count", &x) && x != 0 && x <= UINT32_MAX) ch.count = static_cast<uint32_t>(x);
    if (get_uint(o, "min_active", &x) && x <= UINT32_MAX) ch.min_active = static_cast<uint32_t>(x);
    if (const Json* m = o.find("event_mask"); m && m->is_array()) {
      uint32_t mask = 0;
      for (size_t k = 0; k < m->size(); ++k) {
        const std::string s = (*m)[k].is_string() ? (*m)[k].as_string() : "";
        mask |= s == "good"          ? kEventGood
                : s == "assumed_bad" ? kEventAssumedBad
                : s == "denied"      ? kEventDenied
                                     : 0;
      }
      ch.event_mask = mask;
    }
    if (const Json* fl = o.find("fields"); fl && fl->is_array() && fl->size() != 0) {
      std::vector<wire::EvField> fields;
      for (size_t k = 0; k < fl->size(); ++k) {
        uint64_t w = 0, in = 0, lo = 0, hi = 0, mk = 0;
        const Json& fo = (*fl)[k];
        if (!get_uint(fo, "width", &w) || !get_uint(fo, "init", &in) || !get_uint(fo, "min", &lo) ||
            !get_uint(fo, "max", &hi) || !get_uint(fo, "mask", &mk) || w > 255 || in > UINT32_MAX ||
            lo > UINT32_MAX || hi > UINT32_MAX || mk > UINT32_MAX)
          return bad_file("bad field of EV profile " + std::to_string(id));
        fields.push_back(wire::EvField{static_cast<uint32_t>(w), static_cast<uint32_t>(in),
                                       static_cast<uint32_t>(lo), static_cast<uint32_t>(hi),
                                       static_cast<uint32_t>(mk)});
      }
      ch.fields = fields;
    }
    if (Result r = modify_ev(id, ch); !r.ok()) return r;
    if (st == ProfileState::kInit) continue;
    if (Result r = modify_ev(id, EvProfileChange{.state = ProfileState::kOffline}); !r.ok())
      return r;
    const Json* arr = o.find("evs");
    const bool explicit_mode = ch.mode && *ch.mode == EvProfileMode::kExplicit;
    for (size_t k = 0; arr && arr->is_array() && k < arr->size(); ++k) {
      const Json& eo = (*arr)[k];
      const Json* v = eo.find("value");
      const Json* s = eo.find("state");
      uint64_t port = 0;
      wire::EvValue value;
      if (!get_uint(eo, "port", &port) || port > 255 || v == nullptr || !v->is_string() ||
          !parse_ev_value(v->as_string(), &value) || s == nullptr || !s->is_string())
        return bad_file("bad EV " + std::to_string(k) + " of EV profile " + std::to_string(id));
      if (port == 0) continue;  // unpopulated
      if (explicit_mode)
        if (Result r = replace_ev(id, static_cast<uint32_t>(k), value, static_cast<uint8_t>(port));
            !r.ok())
          return r;
      std::vector<uint32_t> matched;
      if (s->as_string() == "DENIED")
        if (Result r = set_ev_state(id, value, static_cast<uint8_t>(port), engine::EvState::kDenied,
                                    &matched);
            !r.ok())
          return r;
    }
    if (st == ProfileState::kOnline)
      if (Result r = modify_ev(id, EvProfileChange{.state = ProfileState::kOnline}); !r.ok())
        return r;
  }
  for (size_t i = 0; i < c->size(); ++i) {
    const Json& o = (*c)[i];
    uint64_t id = 0, got = 0;
    ProfileState st;
    if (!get_uint(o, "id", &id) || id == 0 || !get_state(o, &st))
      return bad_file("cc_profiles[" + std::to_string(i) + "] needs an id and a state");
    if (Result r = create_cc(id, &got); !r.ok()) return r;
    CcChange ch;
    if (const Json* a = o.find("algorithm"); a && a->is_string()) {
      engine::CcAlgorithm alg;
      if (!parse_cc_algorithm(a->as_string(), &alg))
        return bad_file("bad algorithm of CC profile " + std::to_string(id));
      ch.algorithm = alg;
    }
    if (const Json* cfg = o.find("config"); cfg && cfg->is_object()) {
      engine::NsccParams n;
      if (Result r = nscc_from_json(*cfg, &n); !r.ok()) return r;
      ch.config = n;
    }
    if (Result r = modify_cc(id, ch); !r.ok()) return r;
    if (Result r = restore_state(st,
                                 [&](ProfileState s) {
                                   return modify_cc(id, CcChange{{}, {}, s});
                                 });
        !r.ok())
      return r;
  }
  return ok();
}

}  // namespace softmrc::control
