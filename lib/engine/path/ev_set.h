// The per-QP set of entropy values (EVs): which paths a QP may spray its
// packets over, their health, and the choice of an EV for each packet.
//
// An EV is GOOD, ASSUMED_BAD (a packet on it was lost outright; it is probed
// with exponential backoff until a probe reply restores it) or DENIED (by the
// controller). A plane that goes down makes all its EVs unusable at once,
// whatever their state. A QP never marks so many EVs ASSUMED_BAD that fewer
// than `min_active` stay usable. Every state change is recorded as an event.
// docs/engine-paths-cc.md has the state machine and the spraying policies.
//
// Not thread-safe: owned by the lcore that owns the QP. Time is an argument.
// init() allocates; nothing else does.
//
// Changes from the interface first agreed with the core: on_acked() and
// set_plane_up() take no time (nothing here depends on when they happen; a
// plane event is not an EV state change), and events_lost() counts events
// that did not fit the pre-sized event buffer.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "wire/packet.h"

namespace softmrc::engine {

using TimeNs = uint64_t;  // nanoseconds on the caller's clock (engine/types.h re-exports these)
inline constexpr TimeNs kNever = UINT64_MAX;
inline constexpr uint32_t kNoEv = UINT32_MAX;

inline constexpr uint32_t kMaxEvsPerQp = 4096;
inline constexpr uint8_t kMaxPlanes = 32;  // one bit per port in a port-status mask
// Bounds on the configured times, so that time arithmetic cannot overflow.
inline constexpr TimeNs kMaxEvTimerNs = 60'000'000'000;

// Values as in the OCP controller API, so they can be reported unchanged.
enum class EvState : uint8_t { kGood = 1, kAssumedBad = 2, kDenied = 4 };
const char* ev_state_name(EvState state);

struct EvEntry {
  wire::WireEv value;
  uint8_t plane;  // the port the EV leaves on, 0-based
};

enum class SprayPolicy : uint8_t {
  kRoundRobin,  // planes in turn, the EVs of each plane in turn
  kEcnAvoid,    // planes by weight (congested planes get less), and within a
                // plane skips EVs that saw a CE mark lately
};

// kEcnAvoid's plane weights: each plane starts at the maximum, loses a
// share on every CE echo and trim from its EVs and gains a little back on
// every clean acknowledgement, so a congested plane carries what it can
// and the others the rest. A plane never drops below the minimum, so it
// keeps being measured.
inline constexpr uint32_t kPlaneWeightMax = 1024;
inline constexpr uint32_t kPlaneWeightMin = kPlaneWeightMax / 16;
const char* spray_policy_name(SprayPolicy policy);

struct EvSetConfig {
  uint32_t min_active = 1;  // losses never leave fewer usable EVs than this
  SprayPolicy policy = SprayPolicy::kRoundRobin;
  TimeNs probe_initial_ns = 0;  // first probe this long after ASSUMED_BAD...
  TimeNs probe_max_ns = 0;      // ...then the gap doubles up to this
  TimeNs ecn_avoid_ns = 0;      // kEcnAvoid: how long a CE mark steers away from an EV
  uint8_t num_planes = 1;
};

struct EvCounters {
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t retransmits = 0;
  uint64_t acked = 0;
  uint64_t ecn_marks = 0;
  uint64_t trims = 0;
  uint64_t losses = 0;
  uint64_t probes_sent = 0;
  uint64_t probe_replies = 0;
  uint32_t state_changes = 0;
};

struct EvEvent {
  uint32_t ev;
  uint8_t plane;
  EvState old_state;
  EvState new_state;
  uint32_t drop_count;  // losses on this EV since its previous state change
  TimeNs at;
};

class EvSet {
 public:
  // Returns nullptr on success or the reason the set or config is invalid.
  // May be called again to start over.
  const char* init(std::span<const EvEntry> evs, const EvSetConfig& cfg);

  uint32_t size() const { return static_cast<uint32_t>(entries_.size()); }
  const EvEntry& entry(uint32_t ev) const { return entries_[ev]; }
  EvState state(uint32_t ev) const { return ev_[ev].state; }
  const EvCounters& counters(uint32_t ev) const { return counters_[ev]; }
  const EvSetConfig& config() const { return cfg_; }
  // GOOD EVs on planes that are up.
  uint32_t usable_count() const { return usable_count_; }
  bool usable(uint32_t ev) const;

  // The EV for the next packet: usable EVs only, consecutive picks rotate
  // over the planes that have one, and within a plane follow the policy.
  // `avoid` (the EV a packet was just trimmed or lost on) is returned only
  // if it is the only usable EV. kNoEv when nothing is usable.
  uint32_t pick(TimeNs now, uint32_t avoid = kNoEv);
  // Like pick() on one plane only (ACKs and probe replies go back on the
  // plane a packet came in on); kNoEv if that plane has no usable EV.
  uint32_t pick_on_plane(uint8_t plane, TimeNs now);

  // Per-EV calls below take an `ev` below size(); the caller checks indexes
  // that come from the wire (set_denied() checks its own).
  void on_sent(uint32_t ev, uint32_t bytes, bool retransmit);
  void on_acked(uint32_t ev);
  void on_ecn(uint32_t ev, TimeNs now);
  void on_trim(uint32_t ev);
  // A packet sent on `ev` was lost outright: GOOD -> ASSUMED_BAD at once,
  // unless that would leave fewer than min_active usable EVs, or the EV's
  // plane is down (the plane explains the loss); then it is only counted.
  // Returns true if the state changed.
  bool on_loss(uint32_t ev, TimeNs now);

  // Plane up/down (a local port event or the peer's port status).
  void set_plane_up(uint8_t plane, bool up);
  bool plane_up(uint8_t plane) const { return plane < cfg_.num_planes && plane_[plane].up; }
  // kEcnAvoid's share of new packets for the plane, kPlaneWeightMin..Max.
  uint32_t plane_weight(uint8_t plane) const { return plane_[plane].weight; }

  // Controller: any state -> DENIED, DENIED -> GOOD. Returns false if `ev` is
  // out of range.
  bool set_denied(uint32_t ev, bool denied, TimeNs now);

  // Probing of ASSUMED_BAD EVs on up planes, with per-EV exponential
  // backoff. probe_due() returns the same EV until on_probe_sent() is called.
  uint32_t probe_due(TimeNs now) const;
  void on_probe_sent(uint32_t ev, TimeNs now);
  // ASSUMED_BAD -> GOOD, if the probe answered (sent at `probe_sent_ns`,
  // the reply's echo) left after the EV went bad: a reply to an older
  // probe, late or duplicated, says nothing of the path since. False for
  // such a stale reply.
  bool on_probe_reply(uint32_t ev, TimeNs probe_sent_ns, TimeNs now);
  TimeNs next_wakeup() const { return next_probe_ns_; }  // earliest probe due, or kNever

  // State changes since the last clear_events(), oldest first. The buffer
  // holds two changes per EV; changes beyond that are counted, not kept.
  std::span<const EvEvent> events() const { return std::span(events_).first(num_events_); }
  void clear_events() { num_events_ = 0; }
  uint64_t events_lost() const { return events_lost_; }

 private:
  static constexpr uint32_t kNoSlot = UINT32_MAX;

  struct EvRuntime {
    EvState state = EvState::kGood;
    uint8_t plane = 0;
    uint32_t slot = kNoSlot;      // index in good_ (GOOD) or bad_ (ASSUMED_BAD)
    uint32_t drops = 0;           // losses since the last state change
    TimeNs probe_at_ns = kNever;  // ASSUMED_BAD: when the next probe is due
    TimeNs probe_gap_ns = 0;      // ASSUMED_BAD: gap before that probe
    TimeNs bad_since_ns = 0;      // ASSUMED_BAD: since when
    TimeNs avoid_until_ns = 0;    // kEcnAvoid: steer away until then
  };
  struct Plane {
    uint32_t begin = 0;   // this plane's segment of good_
    uint32_t good = 0;    // GOOD EVs, at good_[begin, begin + good)
    uint32_t cursor = 0;  // next candidate, relative to begin
    bool up = true;
    uint32_t weight = kPlaneWeightMax;  // kEcnAvoid
    int64_t credit = 0;                 // kEcnAvoid: smooth weighted round-robin
  };

  uint32_t pick_in_plane(Plane& plane, TimeNs now, uint32_t avoid);
  uint8_t pick_weighted_plane();
  void lower_weight(uint8_t plane, uint32_t shift);
  void change_state(uint32_t ev, EvState to, TimeNs now);
  void add_good(uint32_t ev);
  void remove_good(uint32_t ev);
  void add_bad(uint32_t ev, TimeNs now);
  void remove_bad(uint32_t ev);
  void update_next_probe();

  EvSetConfig cfg_{};
  std::vector<EvEntry> entries_;
  std::vector<EvRuntime> ev_;
  std::vector<EvCounters> counters_;
  std::vector<uint32_t> good_;  // GOOD EVs, grouped by plane
  std::vector<uint32_t> bad_;   // ASSUMED_BAD EVs at [0, num_bad_), any order
  uint32_t num_bad_ = 0;
  std::array<Plane, kMaxPlanes> plane_{};
  uint8_t next_plane_ = 0;
  uint32_t usable_count_ = 0;
  TimeNs next_probe_ns_ = kNever;
  std::vector<EvEvent> events_;  // recorded at [0, num_events_)
  size_t num_events_ = 0;
  uint64_t events_lost_ = 0;
};

}  // namespace softmrc::engine
