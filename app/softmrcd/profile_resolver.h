// How the application socket's QPs reach the controller's profiles: at
// RESET -> INIT a QP attaches to an ONLINE EV profile and an ONLINE CC
// profile by id (0: the daemon's qp.ev_profile / qp.cc_profile), takes its
// EVs, EV settings and CC profile from them, and stays attached (so the
// profiles cannot leave ONLINE) until it detaches: on RESET, when it is
// destroyed, or when its application goes away. At INIT -> INIT it may move
// to other profiles (attach_qp again).
//
// The daemon creates one resolver (the ControlServer, which owns the
// profile Registry) and hands it to the AppServer; both run on the control
// thread only, so no call here needs a lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/cc/congestion_control.h"
#include "engine/path/ev_set.h"

namespace softmrc::softmrcd {

// What a QP gets from its profiles.
struct QpProfiles {
  uint64_t ev_id = 0;  // resolved: never 0
  uint64_t cc_id = 0;
  std::vector<engine::EvEntry> evs;  // index for index the profile's array
  engine::EvSetConfig ev_config;     // num_planes is the caller's
  engine::CcProfile cc;
  std::vector<uint32_t> denied;  // indexes of EVs the controller DENIED
};

class ProfileResolver {
 public:
  virtual ~ProfileResolver() = default;
  // Attaches QP `qpn` of hosted endpoint `endpoint` (owned by `owner`, a
  // name for reports and events such as "app 4242"). 0 or an errno: ENOENT
  // (no such profile), EINVAL (not ONLINE, or its EVs do not fit the
  // endpoint), with *why. A QP attached already moves to these profiles
  // once they are attached, and on a refusal keeps the ones it had.
  virtual int attach_qp(uint32_t endpoint, uint32_t qpn, const std::string& owner, uint64_t ev_id,
                        uint64_t cc_id, QpProfiles* out, std::string* why) = 0;
  // Nothing if the QP is not attached.
  virtual void detach_qp(uint32_t endpoint, uint32_t qpn) = 0;
};

}  // namespace softmrc::softmrcd
