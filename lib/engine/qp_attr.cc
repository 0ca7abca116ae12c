// QP state names and the validation of modify requests; see qp_attr.h.
#include "engine/qp_attr.h"

namespace softmrc::engine {

const char* qp_state_name(QpState state) {
  switch (state) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kError:
      return "ERROR";
  }
  return "?";
}

bool valid_path_mtu(uint32_t mtu) {
  return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096 || mtu == 9000;
}

namespace {

constexpr uint32_t kInitAttrs = kAttrEvProfile | kAttrCcProfile;
constexpr uint32_t kRtrAttrs =
    kAttrDest | kAttrPathMtu | kAttrRqPsn | kAttrMprDest | kAttrMaxWimmDest | kAttrCaps;
constexpr uint32_t kRtsAttrs =
    kAttrSqPsn | kAttrMpr | kAttrMaxWimm | kAttrTimeout | kAttrRetryCnt | kAttrCaps;
constexpr uint32_t kRtsToRtsAttrs = kAttrTimeout | kAttrRetryCnt | kAttrMprDest;
constexpr uint32_t kKnownCaps =
    kCapDynamicMpr | kCapTrimNackDestUnsupported | kCapSvcTimeDestUnsupported;

bool transition_allowed(QpState from, QpState to) {
  if (to == QpState::kReset || to == QpState::kError) return true;
  switch (to) {
    case QpState::kInit:
      return from == QpState::kReset || from == QpState::kInit;
    case QpState::kRtr:
      return from == QpState::kInit;
    case QpState::kRts:
      return from == QpState::kRtr || from == QpState::kRts;
    default:
      return false;
  }
}

}  // namespace

Status check_modify(QpState from, const QpAttr& attr, uint32_t mask, const QpLimits& limits) {
  if (!(mask & kAttrState)) return Status::error("modify: the mask must include the state");
  const QpState to = attr.state;
  if (to > QpState::kError) return Status::error("modify: unknown state");
  if (!transition_allowed(from, to)) return Status::error("modify: transition not allowed");

  uint32_t allowed = 0;
  uint32_t required = 0;
  switch (to) {
    case QpState::kInit:
      allowed = kInitAttrs;
      required = from == QpState::kReset ? kAttrEvProfile : 0;  // INIT -> INIT: what changes
      break;
    case QpState::kRtr:
      allowed = kRtrAttrs;
      required = kAttrDest | kAttrPathMtu | kAttrRqPsn;
      break;
    case QpState::kRts:
      allowed = from == QpState::kRts ? kRtsToRtsAttrs : kRtsAttrs;
      required = from == QpState::kRts ? 0 : kAttrSqPsn;
      break;
    default:
      break;
  }
  const uint32_t fields = mask & ~kAttrState;
  if (fields & ~allowed) return Status::error("modify: attribute not settable in this transition");
  if ((fields & required) != required) return Status::error("modify: required attribute missing");

  if (fields & kAttrEvProfile) {
    if (attr.evs.empty()) return Status::error("ev profile: no EVs");
    if (attr.evs.size() > kMaxEvsPerQp) return Status::error("ev profile: too many EVs");
    if (attr.ev_config.min_active == 0 || attr.ev_config.min_active > attr.evs.size())
      return Status::error("ev profile: min_active not 1..the EV count");
    if (attr.ev_config.num_planes != limits.num_planes)
      return Status::error("ev profile: num_planes differs from the endpoint's");
    for (const EvEntry& e : attr.evs)
      if (e.plane >= limits.num_planes) return Status::error("ev profile: EV on unknown plane");
  }
  if (fields & kAttrCcProfile) {
    if (const char* why = validate(attr.cc)) return Status::error(why);
  }
  if ((fields & kAttrDest) && attr.dest_qpn > wire::kQpnMask)
    return Status::error("dest_qpn: over 24 bits");
  if ((fields & kAttrPathMtu) && !valid_path_mtu(attr.path_mtu))
    return Status::error("path_mtu: not 256..4096 (power of two) or 9000");
  if ((fields & kAttrRqPsn) && attr.rq_psn > wire::kPsnMask)
    return Status::error("rq_psn: over 24 bits");
  if ((fields & kAttrSqPsn) && attr.sq_psn > wire::kPsnMask)
    return Status::error("sq_psn: over 24 bits");
  if ((fields & kAttrMprDest) && (attr.mpr_dest == 0 || attr.mpr_dest > limits.max_mpr))
    return Status::error("mpr_dest: not 1..max_mpr");
  if ((fields & kAttrMpr) && (attr.mpr == 0 || attr.mpr > limits.max_mpr))
    return Status::error("mpr: not 1..max_mpr");
  if ((fields & kAttrMaxWimmDest) && attr.max_wimm_dest > limits.max_wimm)
    return Status::error("max_wimm_dest: over the endpoint's limit");
  if ((fields & kAttrMaxWimm) && attr.max_wimm > limits.max_wimm)
    return Status::error("max_wimm: over the endpoint's limit");
  if ((fields & kAttrTimeout) && attr.timeout > kMaxTimeout)
    return Status::error("timeout: over 24");
  if ((fields & kAttrRetryCnt) &&
      (attr.retry_linear > kMaxRetryLinear || attr.retry_exp > kRetryExpUnlimited))
    return Status::error("retry: linear over 7 or exponential over 25");
  if ((fields & kAttrCaps) && (attr.caps & ~kKnownCaps))
    return Status::error("caps: unknown capability bits");
  return {};
}

}  // namespace softmrc::engine
