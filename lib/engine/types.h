// Vocabulary of the engine's public interface: time, status results, work
// requests, completions, events and the transmit descriptor handed to the
// framer. TimeNs, kNever and kNoEv come from path/ev_set.h so that the EV
// set stays usable on its own.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/path/ev_set.h"
#include "wire/packet.h"

namespace softmrc::engine {

// The result of a request that may be refused: ok, or a reason that names
// the offending field or rule. Reasons are static strings.
class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  static constexpr Status error(const char* reason) { return Status(reason); }
  constexpr bool ok() const { return reason_ == nullptr; }
  constexpr const char* reason() const { return reason_ ? reason_ : "ok"; }

 private:
  constexpr explicit Status(const char* reason) : reason_(reason) {}
  const char* reason_ = nullptr;
};

inline constexpr uint32_t kQpnConnectionless = 0;  // controller EV probes
// A packet's sending endpoint, where the caller does not know it.
inline constexpr uint32_t kUnknownPeer = UINT32_MAX;
inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 31;

enum class WcOpcode : uint8_t { kWrite, kWriteImm, kRecvWriteImm };
enum class WcStatus : uint8_t {
  kSuccess,
  kRetryExceeded,           // both retry counts ran out
  kRemoteAccessError,       // the responder refused the target (rkey, bounds, access)
  kRemoteInvalidRequest,    // malformed request, or a WIMM with no receive posted
  kFlushed,                 // the QP went to ERROR before this request finished
  kRemoteOperationalError,  // the peer's QP is gone (QP_GONE NACK)
};
const char* wc_opcode_name(WcOpcode op);
const char* wc_status_name(WcStatus status);

struct Completion {
  uint64_t wr_id = 0;
  uint32_t qpn = 0;
  WcOpcode opcode = WcOpcode::kWrite;
  WcStatus status = WcStatus::kSuccess;
  uint32_t byte_len = 0;  // receive: the length of the WIMM message
  uint32_t imm = 0;       // receive of a WIMM only
};

// An RDMA Write (with_imm: Write-with-Immediate). local_addr is an address
// inside a region registered under lkey; the engine translates it.
struct WriteRequest {
  uint64_t wr_id = 0;
  uint64_t local_addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  bool with_imm = false;
  uint32_t imm = 0;
  bool signaled = true;  // errors complete even when unsignaled
};

struct RecvRequest {
  uint64_t wr_id = 0;
};

// One packet for the framer: it maps (peer, plane) to a wire::FrameSpec,
// frames `t` with `wire_ev`, and appends the payload.
struct TxPacket {
  uint32_t peer = 0;                      // opaque peer id from the QP's attributes
  uint32_t src_qpn = kQpnConnectionless;  // the local QP that sends it
  uint8_t plane = 0;
  uint32_t ev = kNoEv;                    // index in the QP's EV set (kNoEv: framer's default path)
  const wire::WireEv* wire_ev = nullptr;  // valid until the next call into the endpoint
  bool is_data = false;                   // data (trimmable DSCP) or control
  wire::Transport t;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
};

// Resets p->t to a default Transport in place, copied from a constant
// (GCC makes that eight 16-byte stores and a few narrow ones):
// `p->t = wire::Transport{}` builds a temporary with narrow stores and
// copies it with wide loads, which then wait for those stores to reach the
// cache (a stall per control packet), and constructing in place zeroes its
// 144 bytes with `rep stos`, whose start-up cost is most of the rest.
inline constexpr wire::Transport kDefaultTransport{};
inline void clear_transport(TxPacket* p) {
  std::memcpy(static_cast<void*>(&p->t), &kDefaultTransport, sizeof(wire::Transport));
}

enum class EventType : uint8_t {
  kEvStateChange,  // `ev` holds the change
  kQpError,        // the QP went to ERROR; `status` and `reason` say why
  kProbeReply,     // a reply to a connectionless probe (QPN 0)
  kCqOverflow,     // the completion queue was full: a completion of `qpn` was lost
};
const char* event_type_name(EventType type);

struct Event {
  EventType type = EventType::kEvStateChange;
  uint32_t qpn = 0;
  EvEvent ev{};
  WcStatus status = WcStatus::kSuccess;
  const char* reason = nullptr;
  // kProbeReply
  uint16_t probe_req_id = 0;
  uint8_t plane = 0;
  TimeNs rtt_ns = 0;
};

}  // namespace softmrc::engine
