// softmrc wire protocol v1: the on-wire header layouts.
//
// Every struct here is byte-exact (alignment 1, size checked) and uses
// big-endian field types. docs/wire-format.md describes each byte; keep the
// two in step. A packet is:
//
//   Ethernet [802.1Q] | IPv4 or IPv6 [SRv6 SRH] | UDP (dst 4791) | BTH |
//   MTH | type header [ImmDt] | payload | ICRC
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire/endian.h"

namespace softmrc::wire {

inline constexpr uint8_t kProtocolVersion = 1;  // MTH.version of this format
inline constexpr uint16_t kRoceUdpPort = 4791;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoRouting = 43;  // IPv6 routing header
inline constexpr uint8_t kSrhRoutingType = 4;   // Segment Routing Header
inline constexpr uint16_t kDefaultPkey = 0xffff;
inline constexpr uint32_t kPsnMask = 0xffffff;  // PSNs and QPNs are 24 bits
inline constexpr uint32_t kQpnMask = 0xffffff;

// MRC opcodes live in the InfiniBand manufacturer-specific range
// (0xC0-0xFF), so no RoCEv2 peer mistakes them for its own.
enum class Opcode : uint8_t {
  kWriteFirst = 0xc0,
  kWriteMiddle = 0xc1,
  kWriteLast = 0xc2,
  kWriteOnly = 0xc3,
  kWriteLastImm = 0xc4,
  kWriteOnlyImm = 0xc5,
  kAck = 0xd0,
  kNack = 0xd1,
  kProbeRequest = 0xd2,
  kProbeReply = 0xd3,
  kPortStatus = 0xd4,
};

constexpr bool is_data(Opcode op) {
  return op >= Opcode::kWriteFirst && op <= Opcode::kWriteOnlyImm;
}
constexpr bool has_imm(Opcode op) {
  return op == Opcode::kWriteLastImm || op == Opcode::kWriteOnlyImm;
}
// Last (or only) packet of a message: the responder completes it in order.
constexpr bool is_last(Opcode op) {
  return op == Opcode::kWriteLast || op == Opcode::kWriteOnly || has_imm(op);
}
constexpr bool is_first(Opcode op) {
  return op == Opcode::kWriteFirst || op == Opcode::kWriteOnly || op == Opcode::kWriteOnlyImm;
}
constexpr bool is_feedback(Opcode op) {
  return op == Opcode::kAck || op == Opcode::kNack;
}
constexpr bool is_known_opcode(uint8_t op) {
  return (op >= 0xc0 && op <= 0xc5) || (op >= 0xd0 && op <= 0xd4);
}
const char* opcode_name(Opcode op);

// NACK reason codes (FeedbackHdr.code; 0 in an ACK).
enum class NackCode : uint8_t {
  kNone = 0,
  kTrimmed = 1,         // the packet arrived trimmed: resend it
  kOutOfWindow = 2,     // PSN beyond the responder's MPR window
  kRemoteAccess = 3,    // bad rkey, or address/length outside the region
  kInvalidRequest = 4,  // malformed request, or WIMM with no receive posted
  kQpGone = 5,          // the responder's QP was torn down (its owner is gone)
};
const char* nack_code_name(NackCode code);

// MTH.flags
inline constexpr uint8_t kMthRetransmit = 0x01;  // this data packet is a resend

// FeedbackHdr.flags
inline constexpr uint8_t kFbEcnEcho = 0x01;       // the referenced packet was CE-marked
inline constexpr uint8_t kFbSvcTimeValid = 0x02;  // service_time_ns is meaningful
inline constexpr uint8_t kFbDuplicate = 0x04;     // the referenced packet was a duplicate

// ProbeHdr.flags
inline constexpr uint8_t kProbeSvcTimeValid = 0x01;

inline constexpr unsigned kSackBits = 128;  // bits in FeedbackHdr.sack_bitmap

struct EthHdr {
  uint8_t dst[6];
  uint8_t src[6];
  Be16 ether_type;
};

struct VlanTag {
  Be16 tci;  // PCP(3) DEI(1) VID(12)
  Be16 ether_type;
};

struct Ipv4Hdr {
  uint8_t version_ihl;  // 0x45: options are not supported
  uint8_t tos;          // DSCP(6) ECN(2)
  Be16 total_length;
  Be16 id;
  Be16 fragment;  // flags(3) offset(13): fragments are rejected
  uint8_t ttl;
  uint8_t protocol;
  Be16 checksum;
  uint8_t src[4];
  uint8_t dst[4];
};

struct Ipv6Hdr {
  Be32 version_tc_flow;  // version(4) traffic class(8: DSCP, ECN) flow label(20)
  Be16 payload_length;
  uint8_t next_header;
  uint8_t hop_limit;
  uint8_t src[16];
  uint8_t dst[16];
};

// SRv6 Segment Routing Header with exactly one 128-bit segment (a second
// uSID container), as MRC's SRv6 mode uses it.
struct SrhOneSegment {
  uint8_t next_header;
  uint8_t hdr_ext_len;   // 2: 16 bytes after the first 8
  uint8_t routing_type;  // 4
  uint8_t segments_left;
  uint8_t last_entry;  // 0
  uint8_t flags;
  Be16 tag;
  uint8_t segment[16];
};

// Whether the sizeof(SrhOneSegment) bytes at `srh` are an SRH as MRC's
// SRv6 mode uses it: a segment routing header with exactly one segment.
inline bool is_one_segment_srh(const uint8_t* srh) {
  return srh[offsetof(SrhOneSegment, routing_type)] == kSrhRoutingType &&
         srh[offsetof(SrhOneSegment, hdr_ext_len)] == 2 &&
         srh[offsetof(SrhOneSegment, last_entry)] == 0;
}

struct UdpHdr {
  Be16 src_port;
  Be16 dst_port;
  Be16 length;
  Be16 checksum;  // 0 (RoCEv2 relies on the ICRC)
};

// InfiniBand Base Transport Header, as RoCEv2 carries it.
struct Bth {
  uint8_t opcode;
  uint8_t se_m_pad_tver;  // SE(1) MigReq(1) PadCnt(2) TVer(4): 0 in v1
  Be16 pkey;
  uint8_t resv8a;  // variant (masked in the ICRC)
  Be24 dest_qpn;
  uint8_t ack_req;  // bit 7: AckReq
  Be24 psn;
};

// MRC Transport Header: in every MRC packet, right after the BTH.
struct Mth {
  uint8_t version;  // kProtocolVersion
  uint8_t flags;    // kMth*
  Be16 reserved;
  Be32 path_tag;  // the sender's name for the EV it sent this packet on; echoed back
};

// Data packets: the placement target of this packet's payload plus what
// the responder needs to complete the message in order.
struct DataHdr {
  Be64 va;  // remote virtual address of this packet's first payload byte
  Be32 rkey;
  Be32 msg_len;  // total message length in bytes
  Be32 msn;      // message sequence number on the QP
  Be32 offset;   // offset of this payload within the message
};

struct ImmHdr {
  Be32 imm;  // on WriteLastImm / WriteOnlyImm only
};

// ACK (code 0) and NACK (code != 0) share one layout.
struct FeedbackHdr {
  Be32 cum_psn;          // low 24 bits: every PSN before this one has been received
  Be32 ref_psn;          // low 24 bits: the PSN that triggered this ACK/NACK
  Be32 sack_base;        // low 24 bits: PSN of bit 0 of the bitmap
  Be64 sack_bitmap[2];   // bit i of word i/64 (LSB first): sack_base + i received
  Be32 echo_tag;         // path_tag of the triggering packet
  Be32 service_time_ns;  // responder arrival-to-feedback time for ref_psn
  Be16 window_mpr;       // responder's current window, in 128-PSN units
  Be16 ce_count;         // CE-marked data packets since the previous feedback
  uint8_t code;          // NackCode
  uint8_t flags;         // kFb*
  Be16 reserved;
};

struct ProbeHdr {
  Be16 req_id;
  uint8_t port;          // reply: the plane (port) the request arrived on
  uint8_t flags;         // kProbe*
  Be32 echo_tag;         // reply: path_tag of the request
  Be64 t_send_ns;        // request: sender's timestamp; reply: echoed unchanged
  Be32 service_time_ns;  // reply: responder turnaround
  Be32 reserved;
};

struct PortStatusHdr {
  Be32 port_mask;  // bit N: the sender's plane N is usable
  Be32 seq;        // increases per update; older updates are ignored
  uint8_t num_planes;
  uint8_t reserved[3];
};

inline constexpr unsigned kIcrcLen = 4;

// Bytes of the type header (and ImmDt) that follows the MTH.
constexpr size_t type_header_len(Opcode op) {
  if (is_data(op)) return sizeof(DataHdr) + (has_imm(op) ? sizeof(ImmHdr) : 0);
  if (is_feedback(op)) return sizeof(FeedbackHdr);
  if (op == Opcode::kPortStatus) return sizeof(PortStatusHdr);
  return sizeof(ProbeHdr);
}

static_assert(sizeof(EthHdr) == 14);
static_assert(sizeof(VlanTag) == 4);
static_assert(sizeof(Ipv4Hdr) == 20);
static_assert(sizeof(Ipv6Hdr) == 40);
static_assert(sizeof(SrhOneSegment) == 24);
static_assert(sizeof(UdpHdr) == 8);
static_assert(sizeof(Bth) == 12);
static_assert(sizeof(Mth) == 8);
static_assert(sizeof(DataHdr) == 24);
static_assert(sizeof(ImmHdr) == 4);
static_assert(sizeof(FeedbackHdr) == 44);
static_assert(sizeof(ProbeHdr) == 24);
static_assert(sizeof(PortStatusHdr) == 12);

}  // namespace softmrc::wire
