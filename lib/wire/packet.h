// The logical view of an MRC packet, and the calls that turn it into bytes
// and back.
//
// The engine reads and writes `Transport` (BTH + MTH + type header) only;
// the framing below it (`FrameSpec`, the EV) is prepared once per peer and
// plane by whoever owns the port. parse() never trusts its input: every
// length and field is checked before it is read, and nothing past the end of
// the frame, or past the headers of a trimmed packet, is ever touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "wire/headers.h"

namespace softmrc::wire {

enum class IpVersion : uint8_t { kV4 = 4, kV6 = 6 };

// Where the EV rides on the wire (docs/wire-format.md, "Entropy values").
enum class EvMode : uint8_t {
  kUdp,   // UDP source port (16 bits), IPv4 or IPv6
  kStev,  // IPv6 only: bits 31..16 in the UDP source port, 15..0 in the flow label
  kSrv6,  // IPv6 only: bytes 0-15 are the destination address (a uSID container),
          // bytes 16-31 an optional one-segment SRH
};
const char* ev_mode_name(EvMode mode);

// An expanded on-wire EV, most significant byte first (see ev_expansion.h).
struct WireEv {
  uint8_t bytes[32] = {};
};

struct MacAddr {
  uint8_t bytes[6] = {};
};

// DSCP code points softmrc uses. Switches that trim recognise `trimmable`
// and re-mark a trimmed packet with `trimmed`.
struct DscpConfig {
  uint8_t trimmable = 26;  // data packets (AF31)
  uint8_t trimmed = 27;    // data packets whose payload a switch cut off
  uint8_t control = 48;    // ACK, NACK, probes, port status (CS6)
};

inline constexpr uint8_t kEcnNotEct = 0;
inline constexpr uint8_t kEcnEct0 = 2;
inline constexpr uint8_t kEcnCe = 3;

// Framing of every packet from this endpoint to one peer on one plane.
struct FrameSpec {
  MacAddr src_mac;
  MacAddr dst_mac;
  bool has_vlan = false;
  uint16_t vlan_tci = 0;
  IpVersion ip_version = IpVersion::kV6;
  uint8_t src_ip[16] = {};  // IPv4 addresses use the first 4 bytes
  uint8_t dst_ip[16] = {};  // ignored in SRv6 mode: the EV is the destination
  uint8_t ttl = 64;
  EvMode ev_mode = EvMode::kUdp;
  bool srv6_srh = false;  // SRv6 mode: put EV bytes 16-31 in a one-segment SRH
};

struct DataFields {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t msg_len = 0;
  uint32_t msn = 0;
  uint32_t offset = 0;
  uint32_t imm = 0;  // only on WriteLastImm / WriteOnlyImm

  bool operator==(const DataFields&) const = default;
};

struct Feedback {
  uint32_t cum_psn = 0;
  uint32_t ref_psn = 0;
  uint32_t sack_base = 0;
  uint64_t sack_bitmap[2] = {};
  uint32_t echo_tag = 0;
  uint32_t service_time_ns = 0;
  uint16_t window_mpr = 0;
  uint16_t ce_count = 0;
  NackCode code = NackCode::kNone;
  uint8_t flags = 0;

  bool operator==(const Feedback&) const = default;
};

struct Probe {
  uint16_t req_id = 0;
  uint8_t port = 0;
  uint8_t flags = 0;
  uint32_t echo_tag = 0;
  uint64_t t_send_ns = 0;
  uint32_t service_time_ns = 0;

  bool operator==(const Probe&) const = default;
};

struct PortStatus {
  uint32_t port_mask = 0;
  uint32_t seq = 0;
  uint8_t num_planes = 0;

  bool operator==(const PortStatus&) const = default;
};

// BTH + MTH + the type header selected by `opcode`. Only the member that
// matches the opcode is built; parse() fills it and clears the others.
struct Transport {
  Opcode opcode = Opcode::kWriteOnly;
  uint16_t pkey = kDefaultPkey;
  uint32_t dest_qpn = 0;  // 24 bits
  uint32_t psn = 0;       // 24 bits
  bool ack_req = false;
  bool solicited = false;
  uint8_t mth_flags = 0;
  uint32_t path_tag = 0;
  DataFields data;
  Feedback fb;
  Probe probe;
  PortStatus port_status;

  bool operator==(const Transport&) const = default;
};

// Whether frames from `frame` carry an SRH (SRv6 mode with srv6_srh).
constexpr bool has_srh(const FrameSpec& frame) {
  return frame.ip_version == IpVersion::kV6 && frame.ev_mode == EvMode::kSrv6 && frame.srv6_srh;
}
// Bytes of the Ethernet and VLAN headers: the offset of the IP header.
constexpr size_t l3_offset(const FrameSpec& frame) {
  return sizeof(EthHdr) + (frame.has_vlan ? sizeof(VlanTag) : 0);
}
// Bytes of MRC headers from the BTH through the type header (and ImmDt).
constexpr size_t transport_header_len(Opcode op) {
  return sizeof(Bth) + sizeof(Mth) + type_header_len(op);
}
// Bytes of headers from the Ethernet header through the type header (and
// ImmDt), i.e. the offset of the payload.
constexpr size_t header_len(const FrameSpec& frame, Opcode op) {
  const size_t ip = frame.ip_version == IpVersion::kV4 ? sizeof(Ipv4Hdr) : sizeof(Ipv6Hdr);
  return l3_offset(frame) + ip + (has_srh(frame) ? sizeof(SrhOneSegment) : 0) + sizeof(UdpHdr) +
         transport_header_len(op);
}

inline constexpr size_t kMaxHeaderLen = 14 + 4 + 40 + 24 + 8 + 12 + 8 + 44 + 4;
inline constexpr uint32_t kMaxPayload = 9000;  // largest MTU softmrc supports

struct TxMarking {
  uint8_t dscp = 0;
  uint8_t ecn = kEcnNotEct;
};

// Writes all headers for a packet that will carry `payload_len` bytes of
// payload followed by the ICRC; lengths and the IPv4 checksum are final.
// Returns the header length, or 0 if `out` is too small or a field is out of
// range (a PSN or QPN over 24 bits, a payload on a non-data packet, a payload
// over kMaxPayload, an IPv4 frame in STEV or SRv6 mode).
size_t build_headers(const FrameSpec& frame, const WireEv& ev, TxMarking marking,
                     const Transport& t, uint32_t payload_len, std::span<uint8_t> out);

// Where the headers the ICRC masks sit in a frame (icrc.h). Offsets are
// from the start of the Ethernet header.
struct IcrcLayout {
  size_t l3_offset = 0;
  IpVersion ip_version = IpVersion::kV6;
  bool has_srh = false;
  EvMode ev_mode = EvMode::kUdp;
};

// The Ethernet, IP and UDP headers of a FrameSpec as far as no packet
// changes them, made once (per peer and plane) so that each packet's are a
// copy with its own lengths, marking and EV set: the same bytes as
// build_headers() from the FrameSpec, in fewer instructions.
struct HeaderTemplate {
  uint8_t bytes[96] = {};  // Ethernet (+VLAN), IP (+SRH), UDP: at most 90
  uint8_t len = 0;         // of `bytes`, 0 if the FrameSpec cannot be framed
  IcrcLayout layout;       // where its IP (and SRH) header sits
  uint32_t ipv4_sum = 0;   // IPv4: the ones'-complement sum of the words no packet changes
};
HeaderTemplate header_template(const FrameSpec& frame);
// build_headers() with the FrameSpec's template: the same bytes, the same
// checks and result.
size_t build_headers(const HeaderTemplate& tmpl, const WireEv& ev, TxMarking marking,
                     const Transport& t, uint32_t payload_len, std::span<uint8_t> out);

// The ICRC of a packet whose headers (from build_headers) and payload may
// live in separate buffers, as they do for zero-copy transmit.
uint32_t packet_icrc(std::span<const uint8_t> headers, std::span<const uint8_t> payload,
                     EvMode ev_mode);
void store_icrc(uint32_t icrc, uint8_t out[kIcrcLen]);

// Headers, a copy of the payload and the ICRC, contiguous in `out`.
// Returns the frame length, or 0 as build_headers does.
size_t build_packet(const FrameSpec& frame, const WireEv& ev, TxMarking marking, const Transport& t,
                    std::span<const uint8_t> payload, std::span<uint8_t> out);

// build_packet() in two steps: after build_headers() wrote `hlen` bytes of
// headers for `frame` to `out`, copies the payload (of the length given to
// build_headers()) behind them and appends the ICRC, computed in the same
// pass as the copy. Returns the frame length, or 0 if `out` is too small.
// A burst frames fastest as all its headers first, then all its
// finish_packet() calls: the ICRC reads the headers back, and the CPU
// cannot forward stores that recent to its wide loads.
size_t finish_packet(const FrameSpec& frame, size_t hlen, std::span<const uint8_t> payload,
                     std::span<uint8_t> out);
size_t finish_packet(const HeaderTemplate& tmpl, size_t hlen, std::span<const uint8_t> payload,
                     std::span<uint8_t> out);

enum class ParseStatus : uint8_t {
  kOk,
  kTruncated,     // shorter than its headers or than its own length fields say
  kNotIp,         // EtherType is neither IPv4, IPv6 nor a VLAN tag over them
  kBadIpHeader,   // wrong version, IPv4 options, bad checksum, bad length
  kFragment,      // IPv4 fragment
  kNotUdp,        // not UDP (after an optional SRH)
  kNotMrcPort,    // UDP destination port is not 4791
  kBadUdpLength,  // UDP length disagrees with the IP length
  kBadOpcode,     // not an MRC opcode
  kBadVersion,    // MTH version this parser does not speak
  kBadLength,     // payload present where none is allowed, or too long
  kBadField,      // a field out of range (offset past msg_len, reserved bits)
  kBadIcrc,       // ICRC mismatch
  kCount,
};
const char* parse_status_name(ParseStatus status);

struct ParseConfig {
  DscpConfig dscp;
  EvMode ev_mode = EvMode::kUdp;  // decides which IPv6 fields the ICRC masks
  bool verify_icrc = true;
};

// How parse() checked a frame's ICRC.
enum class IcrcCheck : uint8_t {
  kNone,      // not checked: a trimmed frame, or verify_icrc off
  kFolded,    // the whole frame folded
  kFromFcs,   // the headers folded, the body taken from the port's FCS
  kFcsWrong,  // the port's FCS disagreed, a fold of the whole then agreed:
              // what the port kept was not the frame's FCS
};
// Bodies (what follows the BTH and MTH) at least this long are checked
// through a kept FCS: shorter ones fold about as fast as the headers.
inline constexpr size_t kIcrcFromFcsMinBody = 256;

struct PacketView {
  MacAddr src_mac;
  MacAddr dst_mac;
  bool has_vlan = false;
  uint16_t vlan_tci = 0;
  IpVersion ip_version = IpVersion::kV6;
  uint8_t dscp = 0;
  uint8_t ecn = 0;
  uint32_t flow_label = 0;
  uint8_t ttl = 0;
  uint8_t src_ip[16] = {};  // IPv4 addresses use the first 4 bytes, the rest are zero
  uint8_t dst_ip[16] = {};
  bool has_srh = false;
  uint8_t srh_segment[16] = {};
  uint16_t udp_src_port = 0;
  bool trimmed = false;  // DSCP says a switch cut the payload: payload is empty
  Transport t;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
  uint16_t header_len = 0;
  IcrcCheck icrc_check = IcrcCheck::kNone;
};

// What the port that received a frame found when it checked it (its RX
// offloads): parse() takes a port's verdict instead of checking again.
enum class PortVerdict : uint8_t {
  kUnchecked,  // parse() checks
  kGood,
  kBad,  // refused as parse() would refuse it
};
struct PortChecks {
  PortVerdict ipv4_checksum = PortVerdict::kUnchecked;  // the IPv4 header checksum
  // The port kept the frame's Ethernet FCS after checking it (a frame that
  // failed never arrives): `fcs`, the CRC-32 of every byte of the frame.
  // The ICRC check then folds the headers only (icrc_matches_fcs()).
  bool fcs_kept = false;
  uint32_t fcs = 0;
};

// A copy one step leaves for a later one to make: the engine's placement of
// a received payload, which softmrcd makes while the next packet's ICRC is
// folded. The fold is bound by its multiplies and leaves the CPU's loads
// and stores idle, so the copy costs next to nothing there. Its
// destination must not overlap its source or the data being folded.
struct DeferredCopy {
  uint8_t* dst = nullptr;
  const uint8_t* src = nullptr;
  size_t len = 0;

  // Makes what is left of the copy, which leaves none.
  void make() {
    if (len > 0) std::memcpy(dst, src, len);
    *this = {};
  }
};

// On success every field of *out is written, so one view can serve packet
// after packet; on failure *out is reset to a default view.
ParseStatus parse(std::span<const uint8_t> frame, const ParseConfig& cfg, PacketView* out,
                  PortChecks checked = {});
// parse() that also makes `side`, whatever the result: folded into the
// ICRC check where that has room for it, else copied after it.
ParseStatus parse(std::span<const uint8_t> frame, const ParseConfig& cfg, PacketView* out,
                  PortChecks checked, const DeferredCopy& side);

// The wire EV the packet was sent on, reassembled from its headers for the
// given mode (UDP: source port; STEV: port and flow label; SRv6: the
// destination address and SRH segment as they are now).
WireEv wire_ev_of(const PacketView& pkt, EvMode mode);

// The ones'-complement sum that an IPv4 header checksum is made of, over
// the 20-byte header at `hdr`: a header is valid when it is 0xffff, and the
// checksum field is the complement of the sum taken with that field zero.
uint16_t ipv4_header_sum(const uint8_t* hdr);

// Switch-side operations on a built frame (used by the fabric emulator).
// trim(): keeps every header through the MRC type header (and ImmDt), drops
// payload and ICRC, re-marks DSCP as `trimmed` and fixes the length fields.
// Returns the new frame length, or 0 if the frame is not a trimmable data
// packet (wrong DSCP, not data, unparseable).
size_t trim(std::span<uint8_t> frame, const DscpConfig& dscp);
// Sets ECN to CE if the packet is ECN-capable; returns whether it did.
bool mark_ce(std::span<uint8_t> frame);

}  // namespace softmrc::wire
