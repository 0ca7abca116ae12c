// What an endpoint's lcore hands the controller socket: EV state changes
// and replies to the controller's EV probes, as small fixed records in an
// rte_ring (single producer: the lcore; single consumer: the control
// thread). The lcore never waits: a record that finds the ring full is
// counted as lost, and the next event a subscriber gets carries the count.
#pragma once

#include <cstdint>

namespace softmrc::softmrcd {

enum class ControlEventType : uint8_t { kEvState, kProbeReply };

struct ControlEvent {
  ControlEventType type = ControlEventType::kEvState;
  uint8_t plane = 0;
  uint8_t old_state = 0;  // engine::EvState values
  uint8_t new_state = 0;
  uint16_t req_id = 0;  // kProbeReply
  uint16_t reserved = 0;
  uint32_t qpn = 0;
  uint32_t ev = 0;      // index in the QP's EV set
  uint32_t losses = 0;  // losses on the EV since its previous change
  uint64_t at_ns = 0;
  uint64_t rtt_ns = 0;  // kProbeReply
};
static_assert(sizeof(ControlEvent) == 40);

// A connectionless probe whose req_id has this bit is the controller's
// (the traffic generator numbers its own from 0).
inline constexpr uint16_t kControlProbeFlag = 0x8000;

}  // namespace softmrc::softmrcd
