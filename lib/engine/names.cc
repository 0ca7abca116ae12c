// Printable names of the engine's enums, for logs, events and the CLI.
#include "engine/counters.h"
#include "engine/types.h"

namespace softmrc::engine {

const char* wc_opcode_name(WcOpcode op) {
  switch (op) {
    case WcOpcode::kWrite:
      return "WRITE";
    case WcOpcode::kWriteImm:
      return "WRITE_WITH_IMM";
    case WcOpcode::kRecvWriteImm:
      return "RECV_RDMA_WITH_IMM";
  }
  return "?";
}

const char* wc_status_name(WcStatus status) {
  switch (status) {
    case WcStatus::kSuccess:
      return "SUCCESS";
    case WcStatus::kRetryExceeded:
      return "RETRY_EXCEEDED";
    case WcStatus::kRemoteAccessError:
      return "REMOTE_ACCESS_ERROR";
    case WcStatus::kRemoteInvalidRequest:
      return "REMOTE_INVALID_REQUEST";
    case WcStatus::kFlushed:
      return "FLUSHED";
    case WcStatus::kRemoteOperationalError:
      return "REMOTE_OPERATIONAL_ERROR";
  }
  return "?";
}

const char* event_type_name(EventType type) {
  switch (type) {
    case EventType::kEvStateChange:
      return "EV_STATE_CHANGE";
    case EventType::kQpError:
      return "QP_ERROR";
    case EventType::kProbeReply:
      return "PROBE_REPLY";
    case EventType::kCqOverflow:
      return "CQ_OVERFLOW";
  }
  return "?";
}

const char* retx_cause_name(RetxCause cause) {
  switch (cause) {
    case RetxCause::kTrim:
      return "trim";
    case RetxCause::kSack:
      return "sack";
    case RetxCause::kTimeout:
      return "timeout";
    case RetxCause::kOutOfWindow:
      return "out_of_window";
    case RetxCause::kPlaneDown:
      return "plane_down";
    case RetxCause::kTailProbe:
      return "tail_probe";
    case RetxCause::kCount:
      break;
  }
  return "?";
}

}  // namespace softmrc::engine
