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

}  // namespace

void apply(const FaultEvent& e, Fabric& fabric, TimeNs now) {
  for (uint32_t id : e.links) {
    Link& l = fabric.link(id);
    switch (e.action) {
      case FaultAction::kDown:
        fabric.set_link_up(id, false, now);
        break;
      case FaultAction::kUp:
        fabric.set_link_up(id, true, now);
        break;
      case FaultAction::kBlackholeOn:
        l.set_blackhole(true);
        break;
      case FaultAction::kBlackholeOff:
        l.set_blackhole(false);
        break;
      case FaultAction::kLoss:
        l.set_loss_rate(e.value);
        break;
      case FaultAction::kRate:
        l.set_rate_factor(e.value, now);
        break;
    }
  }
}

void FaultSchedule::push(FaultEvent e) {
  const auto it =
      std::upper_bound(events_.begin() + static_cast<std::ptrdiff_t>(next_), events_.end(), e.at_ns,
                       [](TimeNs at, const FaultEvent& x) { return at < x.at_ns; });
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
  if (s.for_ns != kNever && s.for_ns == 0) return fail("for_us: must be above 0");
  const std::string name = std::string(fault_kind_name(s.kind)) + " " + target_name(s.target);
  const TimeNs end = s.for_ns == kNever ? kNever : s.at_ns + s.for_ns;
  const auto event = [&](TimeNs at, FaultAction a, double v, const char* suffix) {
    push(FaultEvent{at, a, v, links, name + suffix});
  };
  switch (s.kind) {
    case FaultKind::kLinkDown:
    case FaultKind::kSwitchDown:
      event(s.at_ns, FaultAction::kDown, 0, "");
      if (end != kNever) event(end, FaultAction::kUp, 0, ": back up");
      break;
    case FaultKind::kLinkUp:
    case FaultKind::kSwitchUp:
      event(s.at_ns, FaultAction::kUp, 0, "");
      break;
    case FaultKind::kBlackhole:
      event(s.at_ns, FaultAction::kBlackholeOn, 0, "");
      if (end != kNever) event(end, FaultAction::kBlackholeOff, 0, ": over");
      break;
    case FaultKind::kGray:
      if (!(s.loss > 0 && s.loss <= 1)) return fail("loss: must be in (0, 1]");
      event(s.at_ns, FaultAction::kLoss, s.loss, "");
      if (end != kNever) event(end, FaultAction::kLoss, 0, ": over");
      break;
    case FaultKind::kDegrade:
      if (!(s.rate_factor > 0 && s.rate_factor < 1)) return fail("rate: must be in (0, 1)");
      event(s.at_ns, FaultAction::kRate, s.rate_factor, "");
      if (end != kNever) event(end, FaultAction::kRate, 1, ": over");
      break;
    case FaultKind::kFlap:
      if (s.period_ns == 0) return fail("period_us: must be above 0");
      if (s.down_ns == 0 || s.down_ns >= s.period_ns)
        return fail("down_us: must be above 0 and below period_us");
      if (s.count == 0) return fail("count: must be at least 1");
      for (uint32_t i = 0; i < s.count; ++i) {
        const TimeNs t = s.at_ns + i * s.period_ns;
        event(t, FaultAction::kDown, 0, ": down");
        event(t + s.down_ns, FaultAction::kUp, 0, ": up");
      }
      break;
  }
  return {};
}

std::span<const FaultEvent> FaultSchedule::apply_due(TimeNs now, Fabric& fabric) {
  const size_t first = next_;
  while (next_ < events_.size() && events_[next_].at_ns <= now)
    apply(events_[next_++], fabric, now);
  return std::span<const FaultEvent>(events_).subspan(first, next_ - first);
}

}  // namespace softmrc::fabric
