// Queue pair states and attributes, in the spirit of mrc_modify_qp(): a
// modify call carries an attribute struct and a mask naming the fields it
// sets, and each transition accepts (and requires) its own fields.
//
//   RESET -> INIT   EV profile (required), CC profile
//   INIT  -> INIT   EV profile, CC profile (each replaces the QP's; posted
//                   receives stay)
//   INIT  -> RTR    peer + dest QPN, path MTU, receive PSN (required);
//                   responder MPR, responder max WIMM, capabilities
//   RTR   -> RTS    send PSN (required); requester MPR, max WIMM, ACK
//                   timeout, retry counts, capabilities
//   RTS   -> RTS    ACK timeout, retry counts, dynamic-MPR responder window
//   any   -> ERROR, any -> RESET
//
// check_modify() is pure: it validates a request against the current state
// and the endpoint's limits without touching the QP.
#pragma once

#include <cstdint>
#include <span>

#include "engine/cc/congestion_control.h"
#include "engine/path/ev_set.h"
#include "engine/types.h"

namespace softmrc::engine {

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kError };
const char* qp_state_name(QpState state);

// Mask bits of QpAttr fields.
inline constexpr uint32_t kAttrState = 1u << 0;
inline constexpr uint32_t kAttrEvProfile = 1u << 1;    // INIT
inline constexpr uint32_t kAttrCcProfile = 1u << 2;    // INIT
inline constexpr uint32_t kAttrDest = 1u << 3;         // RTR: peer, dest_qpn
inline constexpr uint32_t kAttrPathMtu = 1u << 4;      // RTR
inline constexpr uint32_t kAttrRqPsn = 1u << 5;        // RTR
inline constexpr uint32_t kAttrMprDest = 1u << 6;      // RTR (RTS with dynamic MPR)
inline constexpr uint32_t kAttrMaxWimmDest = 1u << 7;  // RTR
inline constexpr uint32_t kAttrSqPsn = 1u << 8;        // RTS
inline constexpr uint32_t kAttrMpr = 1u << 9;          // RTS
inline constexpr uint32_t kAttrMaxWimm = 1u << 10;     // RTS
inline constexpr uint32_t kAttrTimeout = 1u << 11;     // RTS
inline constexpr uint32_t kAttrRetryCnt = 1u << 12;    // RTS
inline constexpr uint32_t kAttrCaps = 1u << 13;        // RTR, RTS

// QpAttr.caps
inline constexpr uint32_t kCapDynamicMpr = 1u << 0;  // obey the responder's advertised window
inline constexpr uint32_t kCapTrimNackDestUnsupported = 1u << 1;  // peer sends no trim NACKs
inline constexpr uint32_t kCapSvcTimeDestUnsupported = 1u << 2;   // peer's service time is absent

inline constexpr uint32_t kMprUnitPsns = 128;
inline constexpr uint8_t kMaxTimeout = 24;  // ACK timeout 1.024 us * 2^24 = 17.2 s
inline constexpr uint8_t kMaxRetryLinear = 7;
inline constexpr uint8_t kRetryExpUnlimited = 25;

struct QpAttr {
  QpState state = QpState::kReset;
  // INIT. The EV entries are copied into the QP's EV set.
  std::span<const EvEntry> evs;
  EvSetConfig ev_config;
  CcProfile cc;
  // RTR
  uint32_t peer = 0;      // opaque id the framer maps to addresses
  uint32_t dest_qpn = 0;  // the peer's QPN, 24 bits
  uint32_t path_mtu = 4096;
  uint32_t rq_psn = 0;
  uint8_t mpr_dest = 8;  // responder window, in 128-PSN units
  uint16_t max_wimm_dest = 128;
  // RTS
  uint32_t sq_psn = 0;
  uint8_t mpr = 8;           // requester window, in 128-PSN units
  uint16_t max_wimm = 128;   // WIMMs outstanding at once
  uint8_t timeout = 8;       // ACK timeout 1.024 us * 2^timeout (8: 262 us)
  uint8_t retry_linear = 7;  // timeouts retried at the base interval, <= 7
  uint8_t retry_exp = 7;     // then with doubling interval, <= 25 (25: unlimited)
  uint32_t caps = 0;         // kCap*
};

// What an endpoint supports; modify requests are checked against it.
struct QpLimits {
  uint8_t max_mpr = 16;  // in 128-PSN units; sizes the per-QP windows
  uint16_t max_wimm = 1024;
  uint32_t max_send_wr = 1024;
  uint32_t max_recv_wr = 1024;
  uint8_t num_planes = 1;
};

bool valid_path_mtu(uint32_t mtu);
constexpr uint64_t ack_timeout_ns(uint8_t timeout) {
  return 1024ull << timeout;
}

// Validates moving from `from` with `attr`/`mask`. Ok, or a reason.
Status check_modify(QpState from, const QpAttr& attr, uint32_t mask, const QpLimits& limits);

}  // namespace softmrc::engine
