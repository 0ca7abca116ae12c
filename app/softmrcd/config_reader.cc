// Reading YAML configurations (see config_reader.h).
#include "softmrcd/config_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/number.h"
#include "engine/qp_attr.h"

namespace softmrc::softmrcd {

namespace {

// What a corrupted frame's ICRC becomes: a plane's mode, or a schedule's.
void read_corrupt_icrc(Map& m, fabric::Corruption* c) {
  m.choice(
      "corrupt_icrc",
      {{"keep", fabric::Corruption::kBadIcrc}, {"recompute", fabric::Corruption::kRecomputedIcrc}},
      c);
}

// The fabric keys of a link, or of one of its planes over the link's.
void read_plane_fabric(Map& m, PlaneFabricSpec* p) {
  fabric::LinkConfig& l = p->link;
  double gbps = static_cast<double>(l.rate_mbps) / 1000;
  m.number("rate_gbps", 0.001, 10'000, &gbps);
  l.rate_mbps = static_cast<uint64_t>(std::llround(gbps * 1000));
  // The model's rates are whole Mb/s: 0.0015 would run at 2.
  if (std::abs(gbps * 1000 - static_cast<double>(l.rate_mbps)) > 1e-6) {
    std::ostringstream v;
    v << gbps;
    fail(m.key("rate_gbps"), v.str() + " is not a whole number of Mb/s (a multiple of 0.001)");
  }
  double us = static_cast<double>(l.delay_ns) / 1000;
  m.number("delay_us", 0, 100'000, &us);
  l.delay_ns = static_cast<uint64_t>(std::llround(us * 1000));
  // 0 KiB: no limit (no marking for ecn_kib).
  const auto kib = [&](const char* k, uint64_t* bytes) {
    uint64_t n = 0;
    if (!m.has(k)) return;
    m.uint(k, 0, 1u << 20, &n);
    *bytes = n == 0 ? fabric::kUnbounded : n << 10;
  };
  kib("buffer_kib", &l.buffer_bytes);
  kib("ecn_kib", &l.ecn_threshold_bytes);
  kib("priority_kib", &l.priority_buffer_bytes);
  m.choice("overflow", {{"drop", fabric::Overflow::kDrop}, {"trim", fabric::Overflow::kTrim}},
           &l.overflow);
  m.number("loss", 0, 1, &p->loss);
  m.number("corrupt", 0, 1, &p->corrupt);
  read_corrupt_icrc(m, &p->corrupt_icrc);
  if ((m.has("ecn_kib") || m.has("buffer_kib")) && l.ecn_threshold_bytes != fabric::kUnbounded &&
      l.buffer_bytes != fabric::kUnbounded && l.ecn_threshold_bytes >= l.buffer_bytes)
    fail(m.key("ecn_kib"), std::to_string(l.ecn_threshold_bytes >> 10) +
                               " is not below buffer_kib (" + std::to_string(l.buffer_bytes >> 10) +
                               "): no packet would be marked");
}

// Schedule entries: one change each, in time order; `for_ms` adds the
// change that undoes it, before the entries made at the same time (which it
// would cancel: loss 0.5 for 1000 ms, then loss 0.2 at that end).
void read_schedule(Map& m, const std::vector<PlaneFabricSpec>& planes, uint32_t num_planes,
                   std::vector<LinkEvent>* out) {
  const YAML::Node sched = m.list("schedule");
  std::vector<LinkEvent> undo;
  uint64_t last_ns = 0;
  for (size_t i = 0; i < sched.size(); ++i) {
    const std::string key = index_key(m.key("schedule"), i);
    Map s(sched[i], key);
    LinkEvent ev;
    if (!s.has("at_ms")) fail(s.key("at_ms"), "missing");
    uint64_t at_ms = 0;
    s.uint("at_ms", 0, 86'400'000, &at_ms);
    ev.at_ns = at_ms * 1'000'000;
    if (ev.at_ns < last_ns) fail(s.key("at_ms"), "is earlier than the event before it");
    last_ns = ev.at_ns;
    if (!s.has("plane")) fail(s.key("plane"), "missing");
    s.uint("plane", 0, num_planes - 1, &ev.plane);
    const char* change = nullptr;
    for (const char* k : {"state", "loss", "blackhole", "rate_factor", "corrupt", "corrupt_icrc"}) {
      if (!s.has(k)) continue;
      if (change != nullptr)
        fail(key, std::string("has both '") + change + "' and '" + k + "'; one change per event");
      change = k;
    }
    if (change == nullptr)
      fail(key, "needs one of state, loss, blackhole, rate_factor, corrupt or corrupt_icrc");
    const std::string what = change;
    s.choice("direction",
             {{"both", LinkDirection::kBoth},
              {"a_to_b", LinkDirection::kAToB},
              {"b_to_a", LinkDirection::kBToA}},
             &ev.direction);
    if (what == "state" && ev.direction != LinkDirection::kBoth)
      fail(s.key("direction"), "a plane goes down or up in both directions, as a cable does");
    if (s.has("evs") && what != "blackhole") fail(s.key("evs"), "only goes with blackhole");
    LinkEvent back = ev;
    if (what == "state") {
      bool up = false;
      s.choice("state", {{"up", true}, {"down", false}}, &up);
      ev.action = up ? LinkAction::kUp : LinkAction::kDown;
      back.action = up ? LinkAction::kDown : LinkAction::kUp;
    } else if (what == "loss") {
      s.number("loss", 0, 1, &ev.value);
      ev.action = back.action = LinkAction::kLoss;
      back.value = planes[ev.plane].loss;
    } else if (what == "rate_factor") {
      s.number("rate_factor", 0.001, 1, &ev.value);
      ev.action = back.action = LinkAction::kRateFactor;
      back.value = 1;
    } else if (what == "corrupt") {
      s.number("corrupt", 0, 1, &ev.value);
      ev.action = back.action = LinkAction::kCorrupt;
      back.value = planes[ev.plane].corrupt;
    } else if (what == "corrupt_icrc") {
      read_corrupt_icrc(s, &ev.corruption);
      ev.action = back.action = LinkAction::kCorruptIcrc;
      back.corruption = planes[ev.plane].corrupt_icrc;
    } else {
      bool on = false;
      s.boolean("blackhole", &on);
      ev.action = on ? LinkAction::kBlackholeOn : LinkAction::kBlackholeOff;
      back.action = on ? LinkAction::kBlackholeOff : LinkAction::kBlackholeOn;
    }
    uint64_t for_ms = 0;
    s.uint("for_ms", 1, 86'400'000, &for_ms);
    back.at_ns = ev.at_ns + for_ms * 1'000'000;
    if (s.has("evs")) {
      const YAML::Node evs = s.list("evs");
      if (evs.size() == 0) fail(s.key("evs"), "names no EV");
      ev.action = ev.action == LinkAction::kBlackholeOn ? LinkAction::kEvBlackholeOn
                                                        : LinkAction::kEvBlackholeOff;
      back.action = ev.action == LinkAction::kEvBlackholeOn ? LinkAction::kEvBlackholeOff
                                                            : LinkAction::kEvBlackholeOn;
      for (size_t k = 0; k < evs.size(); ++k) {
        ev.ev = back.ev =
            static_cast<uint32_t>(whole_number(evs[k], index_key(s.key("evs"), k), 0, 65535));
        out->push_back(ev);
        if (for_ms != 0) undo.push_back(back);
      }
    } else {
      out->push_back(ev);
      if (for_ms != 0) undo.push_back(back);
    }
    s.done();
  }
  out->insert(out->begin(), undo.begin(), undo.end());
  std::stable_sort(out->begin(), out->end(),
                   [](const LinkEvent& x, const LinkEvent& y) { return x.at_ns < y.at_ns; });
}
}  // namespace

std::string quoted(const YAML::Node& n) {
  return n.IsScalar() ? "'" + n.Scalar() + "'" : std::string("a ") + (n.IsMap() ? "map" : "list");
}

uint64_t whole_number(const YAML::Node& v, const std::string& key, uint64_t lo, uint64_t hi) {
  const std::string s = v.IsScalar() ? v.Scalar() : "";
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char* digits = s.data() + (hex ? 2 : 0);
  const char* end = s.data() + s.size();
  uint64_t x = 0;
  // from_chars takes no sign, prefix or space: only the digits of the base.
  const auto [at, ec] = std::from_chars(digits, end, x, hex ? 16 : 10);
  if (s.empty() || at != end || (ec != std::errc() && ec != std::errc::result_out_of_range))
    fail(key, quoted(v) + " is not a whole number");
  if (ec == std::errc::result_out_of_range || x < lo || x > hi)
    fail(key, (ec == std::errc() ? std::to_string(x) : s) + " is out of range " +
                  std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

double decimal_number(const YAML::Node& v, const std::string& key, double lo, double hi) {
  const std::string s = v.IsScalar() ? v.Scalar() : "";
  double x = 0;
  if (!cli::parse_decimal(s, &x)) fail(key, quoted(v) + " is not a number");
  if (x < lo || x > hi) {
    std::ostringstream m;
    m << s << " is out of range " << lo << ".." << hi;
    fail(key, m.str());
  }
  return x;
}

void check_unique_keys(const YAML::Node& node, const std::string& path) {
  if (!node || !node.IsMap()) return;
  std::map<std::string, int> line_of;  // key -> its first line
  for (const auto& kv : node) {
    // A key that is not a scalar is no key the readers know (Map::done).
    if (!kv.first.IsScalar()) continue;
    const std::string& k = kv.first.Scalar();
    const int line = kv.first.Mark().line + 1;
    const auto [first, fresh] = line_of.emplace(k, line);
    if (fresh) continue;
    const std::string where = first->second == line ? "line " + std::to_string(line)
                                                    : "lines " + std::to_string(first->second) +
                                                          " and " + std::to_string(line);
    fail(path.empty() ? k : path + "." + k, "is given twice (" + where + ")");
  }
}

void read_path_mtu(Map& m, uint32_t* out) {
  m.uint("path_mtu", 256, wire::kMaxPayload, out);
  if (!engine::valid_path_mtu(*out))
    fail(m.key("path_mtu"), std::to_string(*out) + " is not 256, 512, 1024, 2048, 4096 or 9000");
}

void read_ev_mode(Map& m, wire::EvMode* out) {
  m.choice(
      "ev_mode",
      {{"udp", wire::EvMode::kUdp}, {"stev", wire::EvMode::kStev}, {"srv6", wire::EvMode::kSrv6}},
      out);
}

void read_link_fabric(Map& m, uint32_t num_planes, LinkFabricSpec* out) {
  PlaneFabricSpec every;
  read_plane_fabric(m, &every);
  out->planes.assign(num_planes, every);
  const YAML::Node planes = m.list("planes");
  std::vector<bool> configured(num_planes, false);
  for (size_t i = 0; i < planes.size(); ++i) {
    Map pm(planes[i], index_key(m.key("planes"), i));
    if (!pm.has("plane")) fail(pm.key("plane"), "missing");
    uint32_t plane = 0;
    pm.uint("plane", 0, num_planes - 1, &plane);
    if (configured[plane])
      fail(pm.key("plane"), "plane " + std::to_string(plane) + " is configured twice");
    configured[plane] = true;
    read_plane_fabric(pm, &out->planes[plane]);
    pm.done();
  }
  m.uint("delay_line_packets", 16, 65536, &out->delay_line_packets);
  m.uint("seed", 0, UINT64_MAX, &out->seed);
  read_schedule(m, out->planes, num_planes, &out->schedule);
  using From = LinkFabricSpec::ScheduleFrom;
  m.choice("schedule_from", {{"start", From::kStart}, {"first_frame", From::kFirstFrame}},
           &out->schedule_from);
}

bool read_yaml(const std::string& text, const std::string& name,
               const std::function<void(const YAML::Node&)>& read, std::string* err) {
  try {
    read(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    *err = name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
           ": YAML syntax error: " + e.msg;
    return false;
  } catch (const ConfigError& e) {
    *err = name + ": " + e.key + ": " + e.problem;
    return false;
  }
  return true;
}

bool read_yaml_file(const std::string& path, const std::function<void(const YAML::Node&)>& read,
                    std::string* err) {
  // A directory opens, and reads as an empty file would.
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    *err = path + ": cannot open: " + std::strerror(EISDIR);
    return false;
  }
  std::ifstream in(path);
  if (!in) {
    *err = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  return read_yaml(text.str(), path, read, err);
}

}  // namespace softmrc::softmrcd
