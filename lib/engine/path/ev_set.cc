// EvSet: GOOD EVs live in one array, grouped by plane, so that picking an EV
// is a plane rotation plus an index into that plane's segment, and a state
// change is an O(1) swap-remove or append. ASSUMED_BAD EVs live in a second
// array that only probing walks.
#include "engine/path/ev_set.h"

#include <algorithm>

namespace softmrc::engine {
namespace {

// kEcnAvoid looks at most this many EVs of a plane past the cursor for one
// without a recent CE mark; if all are marked, the plane as a whole is
// congested and steering inside it cannot help (NSCC slows down instead).
constexpr uint32_t kEcnAvoidMaxScan = 8;

// How far one congestion signal lowers a plane's weight (a fraction
// 2^-shift of it): a trim means a full queue, a CE mark a growing one. A
// clean acknowledgement adds kPlaneWeightGain back. At equilibrium roughly
// one acknowledgement in 2^kEcnWeightShift carries a mark.
constexpr uint32_t kEcnWeightShift = 6;
constexpr uint32_t kTrimWeightShift = 3;
constexpr uint32_t kPlaneWeightGain = 1;

// Room for two state changes per EV between drains (bad and back, or a
// controller deny and undeny), and never less than this.
constexpr size_t kMinEventCapacity = 64;

}  // namespace

const char* ev_state_name(EvState state) {
  switch (state) {
    case EvState::kGood:
      return "GOOD";
    case EvState::kAssumedBad:
      return "ASSUMED_BAD";
    case EvState::kDenied:
      return "DENIED";
  }
  return "?";
}

const char* spray_policy_name(SprayPolicy policy) {
  switch (policy) {
    case SprayPolicy::kRoundRobin:
      return "round_robin";
    case SprayPolicy::kEcnAvoid:
      return "ecn_avoid";
  }
  return "?";
}

const char* EvSet::init(std::span<const EvEntry> evs, const EvSetConfig& cfg) {
  if (evs.empty()) return "EV set is empty";
  if (evs.size() > kMaxEvsPerQp) return "more EVs than kMaxEvsPerQp";
  if (cfg.num_planes == 0 || cfg.num_planes > kMaxPlanes) return "num_planes out of [1, 32]";
  // 0 would let losses take every EV out of use, leaving only probes.
  if (cfg.min_active == 0) return "min_active is 0";
  if (cfg.min_active > evs.size()) return "min_active exceeds EV count";
  if (cfg.policy != SprayPolicy::kRoundRobin && cfg.policy != SprayPolicy::kEcnAvoid)
    return "unknown spray policy";
  if (cfg.probe_initial_ns == 0) return "probe_initial_ns is 0";
  if (cfg.probe_max_ns < cfg.probe_initial_ns) return "probe_max_ns below probe_initial_ns";
  if (cfg.probe_max_ns > kMaxEvTimerNs) return "probe_max_ns above kMaxEvTimerNs";
  if (cfg.ecn_avoid_ns > kMaxEvTimerNs) return "ecn_avoid_ns above kMaxEvTimerNs";
  for (const EvEntry& e : evs)
    if (e.plane >= cfg.num_planes) return "EV on a plane beyond num_planes";

  const auto n = static_cast<uint32_t>(evs.size());
  cfg_ = cfg;
  entries_.assign(evs.begin(), evs.end());
  ev_.assign(n, EvRuntime{});
  counters_.assign(n, EvCounters{});
  good_.assign(n, 0);
  // Sized here and never resized, so that a copied EvSet keeps its room.
  bad_.assign(n, 0);
  num_bad_ = 0;
  events_.assign(std::max(kMinEventCapacity, 2 * static_cast<size_t>(n)), EvEvent{});
  num_events_ = 0;
  events_lost_ = 0;
  next_plane_ = 0;
  next_probe_ns_ = kNever;

  // Each plane gets a segment of good_ as long as its EV count; its EVs start
  // in the order given, which is the round-robin order.
  plane_.fill(Plane{});
  for (const EvEntry& e : evs) plane_[e.plane].begin++;
  uint32_t begin = 0;
  for (uint8_t p = 0; p < cfg.num_planes; p++) {
    const uint32_t count = plane_[p].begin;
    plane_[p].begin = begin;
    begin += count;
  }
  for (uint32_t ev = 0; ev < n; ev++) {
    ev_[ev].plane = evs[ev].plane;
    add_good(ev);
  }
  usable_count_ = n;
  return nullptr;
}

bool EvSet::usable(uint32_t ev) const {
  return ev < size() && ev_[ev].state == EvState::kGood && plane_[ev_[ev].plane].up;
}

void EvSet::add_good(uint32_t ev) {
  Plane& plane = plane_[ev_[ev].plane];
  ev_[ev].slot = plane.begin + plane.good;
  good_[ev_[ev].slot] = ev;
  plane.good++;
  if (plane.up) usable_count_++;
}

void EvSet::remove_good(uint32_t ev) {
  Plane& plane = plane_[ev_[ev].plane];
  const uint32_t last = plane.begin + plane.good - 1;
  const uint32_t slot = ev_[ev].slot;
  good_[slot] = good_[last];
  ev_[good_[slot]].slot = slot;
  ev_[ev].slot = kNoSlot;
  plane.good--;
  if (plane.cursor >= plane.good) plane.cursor = 0;
  if (plane.up) usable_count_--;
}

void EvSet::add_bad(uint32_t ev, TimeNs now) {
  EvRuntime& r = ev_[ev];
  r.slot = num_bad_;
  bad_[num_bad_++] = ev;
  r.bad_since_ns = now;
  r.probe_gap_ns = cfg_.probe_initial_ns;
  r.probe_at_ns = now + r.probe_gap_ns;
  if (plane_[r.plane].up) next_probe_ns_ = std::min(next_probe_ns_, r.probe_at_ns);
}

void EvSet::remove_bad(uint32_t ev) {
  const uint32_t slot = ev_[ev].slot;
  bad_[slot] = bad_[--num_bad_];
  ev_[bad_[slot]].slot = slot;
  ev_[ev].slot = kNoSlot;
  ev_[ev].probe_at_ns = kNever;
  update_next_probe();
}

void EvSet::update_next_probe() {
  next_probe_ns_ = kNever;
  for (uint32_t ev : std::span(bad_).first(num_bad_))
    if (plane_[ev_[ev].plane].up) next_probe_ns_ = std::min(next_probe_ns_, ev_[ev].probe_at_ns);
}

void EvSet::change_state(uint32_t ev, EvState to, TimeNs now) {
  EvRuntime& r = ev_[ev];
  const EvState from = r.state;
  if (from == to) return;
  if (from == EvState::kGood) remove_good(ev);
  if (from == EvState::kAssumedBad) remove_bad(ev);
  r.state = to;
  if (to == EvState::kGood) add_good(ev);
  if (to == EvState::kAssumedBad) add_bad(ev, now);

  counters_[ev].state_changes++;
  if (num_events_ < events_.size())
    events_[num_events_++] = EvEvent{ev, r.plane, from, to, r.drops, now};
  else
    events_lost_++;
  r.drops = 0;
}

uint32_t EvSet::pick_in_plane(Plane& plane, TimeNs now, uint32_t avoid) {
  // Candidates in cursor order: the first one that is not `avoid` (and, for
  // kEcnAvoid, not recently marked) wins; failing that, the first one that
  // is not `avoid`; failing that (the plane holds only `avoid`), kNoEv.
  const uint32_t scan = cfg_.policy == SprayPolicy::kEcnAvoid
                            ? std::min(plane.good, kEcnAvoidMaxScan)
                            : std::min(plane.good, 2u);
  uint32_t fallback = kNoSlot;
  uint32_t chosen = kNoSlot;
  uint32_t pos = plane.cursor;
  for (uint32_t i = 0; i < scan; i++) {
    const uint32_t ev = good_[plane.begin + pos];
    if (ev != avoid) {
      if (fallback == kNoSlot) fallback = pos;
      if (cfg_.policy != SprayPolicy::kEcnAvoid || ev_[ev].avoid_until_ns <= now) {
        chosen = pos;
        break;
      }
    }
    if (++pos == plane.good) pos = 0;
  }
  if (chosen == kNoSlot) chosen = fallback;
  if (chosen == kNoSlot) return kNoEv;
  plane.cursor = chosen + 1 == plane.good ? 0 : chosen + 1;
  return good_[plane.begin + chosen];
}

// Smooth weighted round-robin (as in nginx): every eligible plane earns its
// weight, the richest is chosen and pays the total. Picks interleave in
// proportion to the weights, with no bursts on one plane.
uint8_t EvSet::pick_weighted_plane() {
  int64_t total = 0;
  uint8_t best = kMaxPlanes;
  for (uint8_t p = 0; p < cfg_.num_planes; p++) {
    Plane& plane = plane_[p];
    if (!plane.up || plane.good == 0) continue;
    plane.credit += plane.weight;
    total += plane.weight;
    if (best == kMaxPlanes || plane.credit > plane_[best].credit) best = p;
  }
  if (best != kMaxPlanes) plane_[best].credit -= total;
  return best;
}

uint32_t EvSet::pick(TimeNs now, uint32_t avoid) {
  if (usable_count_ == 0) return kNoEv;
  const uint8_t planes = cfg_.num_planes;
  uint8_t p = next_plane_;
  if (cfg_.policy == SprayPolicy::kEcnAvoid) {
    p = pick_weighted_plane();  // a usable plane exists: usable_count_ > 0
    const uint32_t ev = pick_in_plane(plane_[p], now, avoid);
    if (ev != kNoEv) return ev;
  }
  for (uint8_t i = 0; i < planes; i++) {
    Plane& plane = plane_[p];
    if (++p == planes) p = 0;
    if (!plane.up || plane.good == 0) continue;
    const uint32_t ev = pick_in_plane(plane, now, avoid);
    if (ev == kNoEv) continue;  // this plane holds only `avoid`
    next_plane_ = p;
    return ev;
  }
  return avoid;  // usable, and the only usable EV
}

uint32_t EvSet::pick_on_plane(uint8_t plane, TimeNs now) {
  if (plane >= cfg_.num_planes) return kNoEv;
  Plane& pl = plane_[plane];
  if (!pl.up || pl.good == 0) return kNoEv;
  return pick_in_plane(pl, now, kNoEv);
}

void EvSet::on_sent(uint32_t ev, uint32_t bytes, bool retransmit) {
  EvCounters& c = counters_[ev];
  c.tx_packets++;
  c.tx_bytes += bytes;
  if (retransmit) c.retransmits++;
}

void EvSet::on_acked(uint32_t ev) {
  counters_[ev].acked++;
  Plane& plane = plane_[ev_[ev].plane];
  plane.weight = std::min(plane.weight + kPlaneWeightGain, kPlaneWeightMax);
}

void EvSet::lower_weight(uint8_t p, uint32_t shift) {
  Plane& plane = plane_[p];
  const uint32_t step = std::max(plane.weight >> shift, 1u);  // <= weight, as weight >= 1
  plane.weight = std::max(plane.weight - step, kPlaneWeightMin);
}

void EvSet::on_ecn(uint32_t ev, TimeNs now) {
  counters_[ev].ecn_marks++;
  ev_[ev].avoid_until_ns = now + cfg_.ecn_avoid_ns;
  lower_weight(ev_[ev].plane, kEcnWeightShift);
}

void EvSet::on_trim(uint32_t ev) {
  counters_[ev].trims++;
  lower_weight(ev_[ev].plane, kTrimWeightShift);
}

bool EvSet::on_loss(uint32_t ev, TimeNs now) {
  counters_[ev].losses++;
  EvRuntime& r = ev_[ev];
  r.drops++;
  if (r.state != EvState::kGood || !plane_[r.plane].up) return false;
  if (usable_count_ <= cfg_.min_active) return false;
  change_state(ev, EvState::kAssumedBad, now);
  return true;
}

void EvSet::set_plane_up(uint8_t plane, bool up) {
  if (plane >= cfg_.num_planes || plane_[plane].up == up) return;
  Plane& pl = plane_[plane];
  pl.up = up;
  pl.credit = 0;  // rejoins the weighted rotation from a neutral position
  if (up)
    usable_count_ += pl.good;
  else
    usable_count_ -= pl.good;
  // Probes of this plane's ASSUMED_BAD EVs pause while it is down and are
  // due at once when it comes back if their time has passed.
  update_next_probe();
}

bool EvSet::set_denied(uint32_t ev, bool denied, TimeNs now) {
  if (ev >= size()) return false;
  const EvState s = ev_[ev].state;
  if (denied && s != EvState::kDenied) change_state(ev, EvState::kDenied, now);
  if (!denied && s == EvState::kDenied) change_state(ev, EvState::kGood, now);
  return true;
}

uint32_t EvSet::probe_due(TimeNs now) const {
  if (now < next_probe_ns_) return kNoEv;
  uint32_t best = kNoEv;
  for (uint32_t ev : std::span(bad_).first(num_bad_)) {
    const EvRuntime& r = ev_[ev];
    if (!plane_[r.plane].up || r.probe_at_ns > now) continue;
    if (best == kNoEv || r.probe_at_ns < ev_[best].probe_at_ns) best = ev;
  }
  return best;
}

void EvSet::on_probe_sent(uint32_t ev, TimeNs now) {
  counters_[ev].probes_sent++;
  EvRuntime& r = ev_[ev];
  if (r.state != EvState::kAssumedBad) return;
  r.probe_gap_ns = std::min(r.probe_gap_ns * 2, cfg_.probe_max_ns);
  r.probe_at_ns = now + r.probe_gap_ns;
  update_next_probe();
}

bool EvSet::on_probe_reply(uint32_t ev, TimeNs probe_sent_ns, TimeNs now) {
  counters_[ev].probe_replies++;
  const EvRuntime& r = ev_[ev];
  if (r.state != EvState::kAssumedBad) return true;
  if (probe_sent_ns < r.bad_since_ns) return false;
  change_state(ev, EvState::kGood, now);
  return true;
}

}  // namespace softmrc::engine
