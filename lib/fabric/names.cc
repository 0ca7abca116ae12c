// Printable names of the fabric's enumerations.
#include "fabric/faults.h"
#include "fabric/link.h"
#include "fabric/topology.h"

namespace softmrc::fabric {

const char* overflow_name(Overflow o) {
  switch (o) {
    case Overflow::kDrop:
      return "drop";
    case Overflow::kTrim:
      return "trim";
  }
  return "?";
}

const char* corruption_icrc_name(Corruption c) {
  switch (c) {
    case Corruption::kNone:
      return "none";
    case Corruption::kBadIcrc:
      return "keep";
    case Corruption::kRecomputedIcrc:
      return "recompute";
  }
  return "?";
}

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kNone:
      return "none";
    case DropReason::kLinkDown:
      return "link_down";
    case DropReason::kBlackhole:
      return "blackhole";
    case DropReason::kEvBlackhole:
      return "ev_blackhole";
    case DropReason::kLoss:
      return "loss";
    case DropReason::kOverflow:
      return "overflow";
    case DropReason::kPriorityOverflow:
      return "priority_overflow";
    case DropReason::kNoRoute:
      return "no_route";
    case DropReason::kCount:
      break;
  }
  return "?";
}

const char* ev_routing_name(EvRouting r) {
  switch (r) {
    case EvRouting::kHash:
      return "hash";
    case EvRouting::kStructured:
      return "structured";
  }
  return "?";
}

const char* fault_kind_name(FaultKind k) {
  switch (k) {
    case FaultKind::kLinkDown:
      return "link_down";
    case FaultKind::kLinkUp:
      return "link_up";
    case FaultKind::kSwitchDown:
      return "switch_down";
    case FaultKind::kSwitchUp:
      return "switch_up";
    case FaultKind::kBlackhole:
      return "blackhole";
    case FaultKind::kGray:
      return "gray";
    case FaultKind::kFlap:
      return "flap";
    case FaultKind::kDegrade:
      return "degrade";
    case FaultKind::kCorrupt:
      return "corrupt";
  }
  return "?";
}

}  // namespace softmrc::fabric
