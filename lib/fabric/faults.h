// Faults on a schedule: what a scenario says will break, when, and for how
// long, turned into timed actions on the fabric.
//
// A FaultSpec is what a person writes (a flapping link, a switch reboot);
// FaultSchedule::add() resolves its target against the topology and
// expands it into primitive FaultEvents (link down, link up, blackhole on,
// loss rate...), each a list of link ids and a time. apply_due(now) applies
// the events that have come due through the same Fabric calls a run-time
// caller would make, and returns them so the caller can react (tell a NIC
// its port went down, write a trace line).
//
// Faults may overlap. A link is down while any down fault holds it (a
// link_down, a switch_down, a flap's down time), and blackholed while any
// blackhole does: the end of one leaves the others in force; link_up and
// switch_up bring links up whatever holds them down. Two gray, two
// degrade, or two corrupt faults on one link at once would each set its
// loss (rate, corruption), so add() refuses the second. An end falls
// before a start at the same time.
//
// Clock-free: the caller says what time it is.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fabric/fabric.h"

namespace softmrc::fabric {

enum class FaultKind : uint8_t {
  kLinkDown,    // link(s) down; up again after for_ns if given
  kLinkUp,      // link(s) up, whatever holds them down
  kSwitchDown,  // every link of a switch down; up after for_ns (a reboot)
  kSwitchUp,    // its links up, whatever holds them down
  kBlackhole,   // link(s) silently drop everything (routing keeps using them)
  kGray,        // link(s) lose `loss` of their packets at random
  kFlap,        // link(s) go down for down_ns every period_ns, `count` times
  kDegrade,     // link(s) run at rate_factor times their rate
  kCorrupt,     // link(s) rewrite a payload byte of `probability` of their data packets
};
const char* fault_kind_name(FaultKind k);

enum class Direction : uint8_t { kBoth, kUp, kDown };  // up: towards the spines

// Which links a fault hits. Exactly one form:
//   host link   plane, host            (the host's NIC port on that plane)
//   fabric link plane, leaf, spine
//   plane       plane, every leaf/spine link of it (all_fabric_links)
//   switch      plane, leaf or spine   (every link into or out of it;
//               direction kBoth only)
struct FaultTarget {
  enum class Form : uint8_t { kHostLink, kFabricLink, kPlaneFabric, kLeaf, kSpine };
  Form form = Form::kFabricLink;
  uint32_t plane = 0;
  uint32_t host = 0;
  uint32_t leaf = 0;
  uint32_t spine = 0;
  Direction direction = Direction::kBoth;
};

struct FaultSpec {
  std::string where;  // where it was written ("faults[2]"), for error messages
  FaultKind kind = FaultKind::kLinkDown;
  FaultTarget target;
  TimeNs at_ns = 0;
  TimeNs for_ns = kNever;  // undone after this long (kNever: never); not for *_up, flap
  double loss = 0;         // kGray: probability per packet, (0, 1]
  double rate_factor = 1;  // kDegrade: (0, 1)
  TimeNs period_ns = 0;    // kFlap
  TimeNs down_ns = 0;      // kFlap: < period_ns
  uint32_t count = 0;      // kFlap: cycles
  double probability = 0;  // kCorrupt: per data packet, (0, 1]
  Corruption corruption = Corruption::kBadIcrc;  // kCorrupt: what becomes of the ICRC
};

enum class FaultAction : uint8_t {
  kDown,
  kUp,
  kBlackholeOn,
  kBlackholeOff,
  kLoss,
  kRate,
  kCorrupt,
};

struct FaultEvent {
  TimeNs at_ns = 0;
  FaultAction action = FaultAction::kDown;
  double value = 0;   // kLoss, kCorrupt: probability; kRate: factor
  bool ends = false;  // the end of a fault (for_ns over, a flap's up): one hold less
  std::vector<uint32_t> links;
  std::string what;                              // "link_down p0 leaf1<->spine2", for traces
  Corruption corruption = Corruption::kBadIcrc;  // kCorrupt
};

class FaultSchedule {
 public:
  // Link changes (events times their links) a schedule holds at most: a
  // flap of every link of a big plane expands to far more.
  static constexpr uint64_t kMaxLinkChanges = uint64_t{1} << 24;

  // Resolves and expands `spec`. Returns an empty string on success, else
  // "<where>: <problem>".
  std::string add(const FaultSpec& spec, const Topology& topo);

  const std::vector<FaultEvent>& events() const { return events_; }
  TimeNs next_at() const { return next_ < events_.size() ? events_[next_].at_ns : kNever; }
  // Applies, in order, every event due at `now` and returns them.
  std::span<const FaultEvent> apply_due(TimeNs now, Fabric& fabric);

 private:
  // A gray, degrade or corrupt fault's span, to refuse another on its links.
  struct Setting {
    FaultKind kind;
    TimeNs from_ns;
    TimeNs to_ns;                 // kNever: never undone
    std::vector<uint32_t> links;  // sorted
    std::string where;
  };

  void push(FaultEvent e);
  void apply(const FaultEvent& e, Fabric& fabric, TimeNs now);

  std::vector<FaultEvent> events_;  // in time order, ends first at equal times
  size_t next_ = 0;
  uint64_t link_changes_ = 0;
  std::vector<Setting> settings_;
  std::vector<uint32_t> downs_;       // per link: down faults holding it
  std::vector<uint32_t> blackholes_;  // per link: blackhole faults holding it
};

}  // namespace softmrc::fabric
