// Counters an operator reads through the stats view: per QP (this file),
// per EV (EvCounters, path/ev_set.h), per congestion controller
// (CcCounters) and per endpoint. Plain integers, written by the owning
// lcore only.
#pragma once

#include <array>
#include <cstdint>

#include "wire/headers.h"

namespace softmrc::engine {

inline constexpr size_t kNackCodes = 6;  // wire::NackCode values

// Why a data packet was sent again.
enum class RetxCause : uint8_t {
  kTrim,
  kSack,
  kTimeout,
  kOutOfWindow,
  kPlaneDown,
  kTailProbe,  // a tail loss probe: the newest packet again when feedback went quiet
  kCount,
};
const char* retx_cause_name(RetxCause cause);

struct QpCounters {
  // Requester.
  uint64_t tx_data_packets = 0;  // including retransmits
  uint64_t tx_data_bytes = 0;
  std::array<uint64_t, size_t(RetxCause::kCount)> retransmits{};  // resends, by cause
  uint64_t acks_rx = 0;
  std::array<uint64_t, kNackCodes> nacks_rx{};  // by code
  // Feedback about something else: PSNs never sent (a confused peer), a
  // stray notice, a probe reply older than its EV's failure.
  uint64_t feedback_ignored = 0;
  uint64_t duplicate_feedback = 0;  // the responder got a copy it had: a needless resend
  uint64_t timeouts = 0;
  uint64_t probes_tx = 0;
  uint64_t probe_replies_rx = 0;
  uint64_t port_status_tx = 0;
  uint64_t port_status_rx = 0;
  uint64_t send_completions = 0;
  uint64_t no_usable_ev = 0;  // a packet waited because no EV was usable
  // Responder.
  uint64_t rx_data_packets = 0;  // placed
  uint64_t rx_data_bytes = 0;
  uint64_t rx_trimmed = 0;
  uint64_t rx_duplicates = 0;
  uint64_t rx_out_of_window = 0;
  uint64_t rx_ce = 0;
  uint64_t acks_tx = 0;
  std::array<uint64_t, kNackCodes> nacks_tx{};  // by code
  uint64_t recv_completions = 0;
  // Both.
  uint64_t ev_state_changes = 0;
  uint64_t errors = 0;  // transitions to ERROR
};

struct EndpointCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_unknown_qpn = 0;  // no QP, or a QP not yet in RTR/RTS
  uint64_t rx_unexpected = 0;   // an opcode the state machine has no use for here
  uint64_t rx_bad_plane = 0;    // arrived on a plane this endpoint does not have
  uint64_t probe_replies_tx = 0;
  uint64_t ctrl_dropped = 0;  // control packet queue full
  uint64_t ctrl_no_ev = 0;    // no usable EV back to the peer
  uint64_t qp_gone_tx = 0;    // QP_GONE NACKs abort_qp sent
  uint64_t events_lost = 0;   // event queue full
  uint64_t cq_overflow = 0;   // completion queue full: completions lost
  // What QPs destroyed since had retransmitted: with the live QPs' own
  // counts, every retransmission the endpoint made.
  uint64_t destroyed_qp_retransmits = 0;
};

}  // namespace softmrc::engine
