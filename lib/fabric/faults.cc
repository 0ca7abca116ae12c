// Fault specs, their expansion into timed events, and applying them; see
// faults.h.
#include "fabric/faults.h"

#include <algorithm>
#include <cmath>

namespace softmrc::fabric {

namespace {

std::string target_name(const FaultTarget& t) {
  const char* dir = t.direction == Direction::kUp     ? " (up)"
                    : t.direction == Direction::kDown ? " (down)"
                                                      : "";
  std::string p = "p" + std::to_string(t.plane) + " ";
  switch (t.form) {
    case FaultTarget::Form::kHostLink:
      return p + "host" + std::to_string(t.host) + " link" + dir;
    case FaultTarget::Form::kFabricLink:
      return p + "leaf" + std::to_string(t.leaf) + "<->spine" + std::to_string(t.spine) + dir;
    case FaultTarget::Form::kPlaneFabric:
      return p + "all leaf/spine links" + dir;
    case FaultTarget::Form::kLeaf:
      return p + "leaf" + std::to_string(t.leaf);
    case FaultTarget::Form::kSpine:
      return p + "spine" + std::to_string(t.spine);
  }
  return p;
}

// The links of a target, or a problem.
std::string resolve(const FaultTarget& t, const Topology& topo, std::vector<uint32_t>* out) {
  if (t.plane >= topo.planes())
    return "plane " + std::to_string(t.plane) +
           " does not exist (planes: " + std::to_string(topo.planes()) + ")";
  if ((t.form == FaultTarget::Form::kFabricLink || t.form == FaultTarget::Form::kLeaf) &&
      t.leaf >= topo.leaves())
    return "leaf " + std::to_string(t.leaf) +
           " does not exist (leaves: " + std::to_string(topo.leaves()) + ")";
  if ((t.form == FaultTarget::Form::kFabricLink || t.form == FaultTarget::Form::kSpine) &&
      t.spine >= topo.spines())
    return "spine " + std::to_string(t.spine) +
           " does not exist (spines: " + std::to_string(topo.spines()) + ")";
  if (t.form == FaultTarget::Form::kHostLink && t.host >= topo.hosts())
    return "host " + std::to_string(t.host) +
           " does not exist (hosts: " + std::to_string(topo.hosts()) + ")";
  const bool up = t.direction != Direction::kDown;
  const bool down = t.direction != Direction::kUp;
  switch (t.form) {
    case FaultTarget::Form::kHostLink:
      if (up) out->push_back(topo.host_up(t.plane, t.host));
      if (down) out->push_back(topo.host_down(t.plane, t.host));
      break;
    case FaultTarget::Form::kFabricLink:
      if (up) out->push_back(topo.leaf_up(t.plane, t.leaf, t.spine));
      if (down) out->push_back(topo.spine_down(t.plane, t.spine, t.leaf));
      break;
    case FaultTarget::Form::kPlaneFabric:
      for (uint32_t l = 0; l < topo.leaves(); ++l) {
        for (uint32_t s = 0; s < topo.spines(); ++s) {
          if (up) out->push_back(topo.leaf_up(t.plane, l, s));
          if (down) out->push_back(topo.spine_down(t.plane, s, l));
        }
      }
      break;
    case FaultTarget::Form::kLeaf:
      *out = topo.switch_links({t.plane, SwitchTier::kLeaf, t.leaf});
      break;
    case FaultTarget::Form::kSpine:
      *out = topo.switch_links({t.plane, SwitchTier::kSpine, t.spine});
      break;
  }
  return {};
}

bool is_switch(const FaultTarget& t) {
  return t.form == FaultTarget::Form::kLeaf || t.form == FaultTarget::Form::kSpine;
}

// Whether two sorted lists share a link.
bool share(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) return true;
    a[i] < b[j] ? ++i : ++j;
  }
  return false;
}

}  // namespace

void FaultSchedule::apply(const FaultEvent& e, Fabric& fabric, TimeNs now) {
  for (uint32_t id : e.links) {
    Link& l = fabric.link(id);
    switch (e.action) {
      case FaultAction::kDown:
        ++downs_[id];
        fabric.set_link_up(id, false, now);
        break;
      case FaultAction::kUp:
        downs_[id] = e.ends && downs_[id] > 0 ? downs_[id] - 1 : 0;
        if (downs_[id] == 0) fabric.set_link_up(id, true, now);
        break;
      case FaultAction::kBlackholeOn:
        ++blackholes_[id];
        l.set_blackhole(true);
        break;
      case FaultAction::kBlackholeOff:
        if (blackholes_[id] > 0) --blackholes_[id];
        l.set_blackhole(blackholes_[id] != 0);
        break;
      case FaultAction::kLoss:
        l.set_loss_rate(e.value);
        break;
      case FaultAction::kRate:
        l.set_rate_factor(e.value, now);
        break;
      case FaultAction::kCorrupt:
        l.set_corruption(e.value, e.corruption);
        break;
    }
  }
}

// After the events due at the same time, or before the first start among
// them for an end: an end never cancels what starts when it falls.
void FaultSchedule::push(FaultEvent e) {
  const auto it =
      std::upper_bound(events_.begin() + static_cast<std::ptrdiff_t>(next_), events_.end(), e,
                       [](const FaultEvent& x, const FaultEvent& y) {
                         return x.at_ns < y.at_ns || (x.at_ns == y.at_ns && x.ends && !y.ends);
                       });
  events_.insert(it, std::move(e));
}

std::string FaultSchedule::add(const FaultSpec& s, const Topology& topo) {
  const auto fail = [&](const std::string& why) { return s.where + ": " + why; };
  std::vector<uint32_t> links;
  if (std::string why = resolve(s.target, topo, &links); !why.empty()) return fail(why);
  const bool sw = is_switch(s.target);
  if ((s.kind == FaultKind::kSwitchDown || s.kind == FaultKind::kSwitchUp) && !sw)
    return fail(std::string(fault_kind_name(s.kind)) + " needs a switch: leaf or spine alone");
  if ((s.kind == FaultKind::kLinkDown || s.kind == FaultKind::kLinkUp) && sw)
    return fail(std::string(fault_kind_name(s.kind)) +
                " needs a link: host, leaf and spine, or all_fabric_links (use switch_down for a "
                "switch)");
  if (sw && s.target.direction != Direction::kBoth)
    return fail("direction: a switch's faults take every link into and out of it");
  const bool undone =
      s.kind != FaultKind::kLinkUp && s.kind != FaultKind::kSwitchUp && s.kind != FaultKind::kFlap;
  if (s.for_ns != kNever && !undone)
    return fail(std::string("for_us: a ") + fault_kind_name(s.kind) +
                " fault is not undone (only link_down, switch_down, blackhole, gray, degrade and "
                "corrupt are)");
  if (s.for_ns != kNever && s.for_ns == 0) return fail("for_us: must be above 0");
  std::string name = std::string(fault_kind_name(s.kind)) + " " + target_name(s.target);
  if (s.kind == FaultKind::kCorrupt && s.corruption == Corruption::kRecomputedIcrc)
    name += ", ICRC recomputed";
  const TimeNs end = s.for_ns == kNever ? kNever : s.at_ns + s.for_ns;
  const uint64_t events =
      s.kind == FaultKind::kFlap ? 2 * uint64_t{s.count} : 1 + uint64_t{undone && end != kNever};
  if (events * links.size() > kMaxLinkChanges - link_changes_)
    return fail("expands to " + std::to_string(events * links.size()) + " link changes (" +
                std::to_string(events) + " events x " + std::to_string(links.size()) +
                " links), more than the " + std::to_string(kMaxLinkChanges) +
                " a schedule holds in all: fewer cycles or a narrower target");
  const bool setting =
      s.kind == FaultKind::kGray || s.kind == FaultKind::kDegrade || s.kind == FaultKind::kCorrupt;
  std::vector<uint32_t> sorted;
  if (setting) {
    sorted = links;
    std::sort(sorted.begin(), sorted.end());
    for (const Setting& o : settings_)
      if (o.kind == s.kind && s.at_ns < o.to_ns && o.from_ns < end && share(o.links, sorted))
        return fail("overlaps " + o.where + " on a link: one " + fault_kind_name(s.kind) +
                    " fault per link at a time");
  }
  const auto event = [&](TimeNs at, FaultAction a, double v, bool ends, const char* suffix) {
    push(FaultEvent{at, a, v, ends, links, name + suffix, s.corruption});
  };
  switch (s.kind) {
    case FaultKind::kLinkDown:
    case FaultKind::kSwitchDown:
      event(s.at_ns, FaultAction::kDown, 0, false, "");
      if (end != kNever) event(end, FaultAction::kUp, 0, true, ": back up");
      break;
    case FaultKind::kLinkUp:
    case FaultKind::kSwitchUp:
      event(s.at_ns, FaultAction::kUp, 0, false, "");
      break;
    case FaultKind::kBlackhole:
      event(s.at_ns, FaultAction::kBlackholeOn, 0, false, "");
      if (end != kNever) event(end, FaultAction::kBlackholeOff, 0, true, ": over");
      break;
    case FaultKind::kGray:
      if (!(s.loss > 0 && s.loss <= 1)) return fail("loss: must be in (0, 1]");
      event(s.at_ns, FaultAction::kLoss, s.loss, false, "");
      if (end != kNever) event(end, FaultAction::kLoss, 0, true, ": over");
      break;
    case FaultKind::kDegrade:
      if (!(s.rate_factor > 0 && s.rate_factor < 1)) return fail("rate: must be in (0, 1)");
      event(s.at_ns, FaultAction::kRate, s.rate_factor, false, "");
      if (end != kNever) event(end, FaultAction::kRate, 1, true, ": over");
      break;
    case FaultKind::kCorrupt:
      if (!(s.probability > 0 && s.probability <= 1)) return fail("probability: must be in (0, 1]");
      event(s.at_ns, FaultAction::kCorrupt, s.probability, false, "");
      if (end != kNever) event(end, FaultAction::kCorrupt, 0, true, ": over");
      break;
    case FaultKind::kFlap:
      if (s.period_ns == 0) return fail("period_us: must be above 0");
      if (s.down_ns == 0 || s.down_ns >= s.period_ns)
        return fail("down_us: must be above 0 and below period_us");
      if (s.count == 0) return fail("count: must be at least 1");
      for (uint32_t i = 0; i < s.count; ++i) {
        const TimeNs t = s.at_ns + i * s.period_ns;
        event(t, FaultAction::kDown, 0, false, ": down");
        event(t + s.down_ns, FaultAction::kUp, 0, true, ": up");
      }
      break;
  }
  if (setting) settings_.push_back(Setting{s.kind, s.at_ns, end, std::move(sorted), s.where});
  link_changes_ += events * links.size();
  downs_.resize(std::max<size_t>(downs_.size(), topo.num_links()));
  blackholes_.resize(downs_.size());
  return {};
}

std::span<const FaultEvent> FaultSchedule::apply_due(TimeNs now, Fabric& fabric) {
  const size_t first = next_;
  while (next_ < events_.size() && events_[next_].at_ns <= now)
    apply(events_[next_++], fabric, now);
  return std::span<const FaultEvent>(events_).subspan(first, next_ - first);
}

}  // namespace softmrc::fabric
