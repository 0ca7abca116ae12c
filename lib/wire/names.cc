// Printable names of the wire enums, for logs, counters and tests.
#include "wire/packet.h"

namespace softmrc::wire {

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::kWriteFirst:
      return "WRITE_FIRST";
    case Opcode::kWriteMiddle:
      return "WRITE_MIDDLE";
    case Opcode::kWriteLast:
      return "WRITE_LAST";
    case Opcode::kWriteOnly:
      return "WRITE_ONLY";
    case Opcode::kWriteLastImm:
      return "WRITE_LAST_IMM";
    case Opcode::kWriteOnlyImm:
      return "WRITE_ONLY_IMM";
    case Opcode::kAck:
      return "ACK";
    case Opcode::kNack:
      return "NACK";
    case Opcode::kProbeRequest:
      return "PROBE_REQUEST";
    case Opcode::kProbeReply:
      return "PROBE_REPLY";
    case Opcode::kPortStatus:
      return "PORT_STATUS";
  }
  return "UNKNOWN";
}

const char* nack_code_name(NackCode code) {
  switch (code) {
    case NackCode::kNone:
      return "none";
    case NackCode::kTrimmed:
      return "trimmed";
    case NackCode::kOutOfWindow:
      return "out_of_window";
    case NackCode::kRemoteAccess:
      return "remote_access";
    case NackCode::kInvalidRequest:
      return "invalid_request";
    case NackCode::kQpGone:
      return "qp_gone";
  }
  return "unknown";
}

const char* ev_mode_name(EvMode mode) {
  switch (mode) {
    case EvMode::kUdp:
      return "udp";
    case EvMode::kStev:
      return "stev";
    case EvMode::kSrv6:
      return "srv6";
  }
  return "unknown";
}

const char* parse_status_name(ParseStatus status) {
  switch (status) {
    case ParseStatus::kOk:
      return "ok";
    case ParseStatus::kTruncated:
      return "truncated";
    case ParseStatus::kNotIp:
      return "not_ip";
    case ParseStatus::kBadIpHeader:
      return "bad_ip_header";
    case ParseStatus::kFragment:
      return "fragment";
    case ParseStatus::kNotUdp:
      return "not_udp";
    case ParseStatus::kNotMrcPort:
      return "not_mrc_port";
    case ParseStatus::kBadUdpLength:
      return "bad_udp_length";
    case ParseStatus::kBadOpcode:
      return "bad_opcode";
    case ParseStatus::kBadVersion:
      return "bad_version";
    case ParseStatus::kBadLength:
      return "bad_length";
    case ParseStatus::kBadField:
      return "bad_field";
    case ParseStatus::kBadIcrc:
      return "bad_icrc";
    case ParseStatus::kCount:
      break;
  }
  return "unknown";
}

}  // namespace softmrc::wire
