// Round trips of every packet type and framing option, and rejection of
// malformed input with the right reason.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "wire/headers.h"
#include "wire/packet.h"
#include "wire_test_util.h"

namespace softmrc::wire {
namespace {

using testing::build;
using testing::make_frame;
using testing::make_payload;
using testing::make_transport;

void expect_same_transport(const Transport& a, const Transport& b) {
  EXPECT_EQ(a.opcode, b.opcode);
  EXPECT_EQ(a.pkey, b.pkey);
  EXPECT_EQ(a.dest_qpn, b.dest_qpn);
  EXPECT_EQ(a.psn, b.psn);
  EXPECT_EQ(a.ack_req, b.ack_req);
  EXPECT_EQ(a.solicited, b.solicited);
  EXPECT_EQ(a.mth_flags, b.mth_flags);
  EXPECT_EQ(a.path_tag, b.path_tag);
  if (is_data(a.opcode)) {
    EXPECT_EQ(a.data.va, b.data.va);
    EXPECT_EQ(a.data.rkey, b.data.rkey);
    EXPECT_EQ(a.data.msg_len, b.data.msg_len);
    EXPECT_EQ(a.data.msn, b.data.msn);
    EXPECT_EQ(a.data.offset, b.data.offset);
    EXPECT_EQ(a.data.imm, b.data.imm);
  } else if (is_feedback(a.opcode)) {
    EXPECT_EQ(a.fb.cum_psn, b.fb.cum_psn);
    EXPECT_EQ(a.fb.ref_psn, b.fb.ref_psn);
    EXPECT_EQ(a.fb.sack_base, b.fb.sack_base);
    EXPECT_EQ(a.fb.sack_bitmap[0], b.fb.sack_bitmap[0]);
    EXPECT_EQ(a.fb.sack_bitmap[1], b.fb.sack_bitmap[1]);
    EXPECT_EQ(a.fb.echo_tag, b.fb.echo_tag);
    EXPECT_EQ(a.fb.service_time_ns, b.fb.service_time_ns);
    EXPECT_EQ(a.fb.window_mpr, b.fb.window_mpr);
    EXPECT_EQ(a.fb.ce_count, b.fb.ce_count);
    EXPECT_EQ(a.fb.code, b.fb.code);
    EXPECT_EQ(a.fb.flags, b.fb.flags);
  } else if (a.opcode == Opcode::kPortStatus) {
    EXPECT_EQ(a.port_status.port_mask, b.port_status.port_mask);
    EXPECT_EQ(a.port_status.seq, b.port_status.seq);
    EXPECT_EQ(a.port_status.num_planes, b.port_status.num_planes);
  } else {
    EXPECT_EQ(a.probe.req_id, b.probe.req_id);
    EXPECT_EQ(a.probe.port, b.probe.port);
    EXPECT_EQ(a.probe.flags, b.probe.flags);
    EXPECT_EQ(a.probe.echo_tag, b.probe.echo_tag);
    EXPECT_EQ(a.probe.t_send_ns, b.probe.t_send_ns);
    EXPECT_EQ(a.probe.service_time_ns, b.probe.service_time_ns);
  }
}

struct Framing {
  IpVersion ip;
  EvMode mode;
  bool vlan;
  bool srh;
};

std::string framing_name(const Framing& f) {
  return std::string(f.ip == IpVersion::kV4 ? "Ipv4" : "Ipv6") + ev_mode_name(f.mode) +
         (f.vlan ? "Vlan" : "") + (f.srh ? "Srh" : "");
}

constexpr Framing kFramings[] = {
    {IpVersion::kV4, EvMode::kUdp, false, false}, {IpVersion::kV4, EvMode::kUdp, true, false},
    {IpVersion::kV6, EvMode::kUdp, false, false}, {IpVersion::kV6, EvMode::kStev, false, false},
    {IpVersion::kV6, EvMode::kStev, true, false}, {IpVersion::kV6, EvMode::kSrv6, false, false},
    {IpVersion::kV6, EvMode::kSrv6, false, true}, {IpVersion::kV6, EvMode::kSrv6, true, true},
};

class RoundTrip : public ::testing::TestWithParam<std::tuple<Framing, Opcode>> {};

TEST_P(RoundTrip, EveryFieldSurvivesBuildAndParse) {
  const auto [framing, op] = GetParam();
  const FrameSpec frame = make_frame(framing.ip, framing.mode, framing.vlan, framing.srh);
  const uint32_t payload_len = is_data(op) ? 1000 : 0;
  const Transport t = make_transport(op, payload_len);
  const auto payload = make_payload(payload_len);
  const TxMarking marking{is_data(op) ? uint8_t{26} : uint8_t{48}, kEcnEct0};
  const auto bytes = build(frame, t, payload, marking);
  ASSERT_EQ(bytes.size(), header_len(frame, op) + payload_len + kIcrcLen);

  ParseConfig cfg;
  cfg.ev_mode = framing.mode;
  PacketView v;
  ASSERT_EQ(parse(bytes, cfg, &v), ParseStatus::kOk);
  expect_same_transport(t, v.t);
  EXPECT_EQ(v.header_len, header_len(frame, op));
  EXPECT_EQ(v.payload_len, payload_len);
  if (payload_len) {
    ASSERT_NE(v.payload, nullptr);
    EXPECT_EQ(0, std::memcmp(v.payload, payload.data(), payload_len));
  }
  EXPECT_EQ(v.ip_version, framing.ip);
  EXPECT_EQ(v.dscp, marking.dscp);
  EXPECT_EQ(v.ecn, marking.ecn);
  EXPECT_EQ(v.ttl, frame.ttl);
  EXPECT_FALSE(v.trimmed);
  EXPECT_EQ(v.has_vlan, framing.vlan);
  if (framing.vlan) {
    EXPECT_EQ(v.vlan_tci, frame.vlan_tci);
  }
  EXPECT_EQ(v.has_srh, framing.srh);
  EXPECT_EQ(0, std::memcmp(v.src_mac.bytes, frame.src_mac.bytes, 6));
  EXPECT_EQ(0, std::memcmp(v.dst_mac.bytes, frame.dst_mac.bytes, 6));
  EXPECT_EQ(0, std::memcmp(v.src_ip, frame.src_ip, framing.ip == IpVersion::kV4 ? 4 : 16));

  // The EV comes back from wherever the mode puts it.
  const WireEv sent = testing::make_ev();
  const WireEv got = wire_ev_of(v, framing.mode);
  const size_t ev_bytes = framing.mode == EvMode::kUdp    ? 2
                          : framing.mode == EvMode::kStev ? 4
                          : framing.srh                   ? 32
                                                          : 16;
  EXPECT_EQ(0, std::memcmp(sent.bytes, got.bytes, ev_bytes));
  if (framing.mode == EvMode::kStev) {
    EXPECT_EQ(v.flow_label, 0xa2a3u);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAllFramings, RoundTrip,
                         ::testing::Combine(::testing::ValuesIn(kFramings),
                                            ::testing::ValuesIn(testing::kAllOpcodes)),
                         [](const auto& info) {
                           return framing_name(std::get<0>(info.param)) +
                                  opcode_name(std::get<1>(info.param));
                         });

FrameSpec v6() {
  return make_frame(IpVersion::kV6, EvMode::kUdp);
}
FrameSpec v4() {
  return make_frame(IpVersion::kV4, EvMode::kUdp);
}

ParseStatus parse_bytes(const std::vector<uint8_t>& bytes, EvMode mode = EvMode::kUdp) {
  ParseConfig cfg;
  cfg.ev_mode = mode;
  PacketView v;
  return parse(bytes, cfg, &v);
}

// Rewrites the big-endian 16-bit field at `off` and, for IPv4, fixes the
// header checksum, so only the field under test is wrong.
void poke16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v >> 8);
  b[off + 1] = static_cast<uint8_t>(v);
}

TEST(Parse, EveryPrefixOfAValidPacketIsRejected) {
  for (const FrameSpec& frame : {v4(), v6()}) {
    for (Opcode op : testing::kAllOpcodes) {
      const auto bytes = build(frame, make_transport(op, is_data(op) ? 64 : 0),
                               make_payload(is_data(op) ? 64 : 0));
      for (size_t n = 0; n < bytes.size(); ++n) {
        std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<long>(n));
        SCOPED_TRACE(std::string(opcode_name(op)) + " prefix " + std::to_string(n));
        EXPECT_EQ(parse_bytes(prefix), ParseStatus::kTruncated);
      }
    }
  }
}

TEST(Parse, EthernetPaddingAfterTheIpPacketIsIgnored) {
  auto bytes = build(v4(), make_transport(Opcode::kAck), {});
  bytes.resize(bytes.size() + 20, 0);
  PacketView v;
  ASSERT_EQ(parse(bytes, ParseConfig{}, &v), ParseStatus::kOk);
  EXPECT_EQ(v.payload_len, 0u);
}

TEST(Parse, CorruptedPayloadFailsTheIcrc) {
  auto bytes = build(v6(), make_transport(Opcode::kWriteOnly, 256), make_payload(256));
  bytes[bytes.size() - 100] ^= 1;
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadIcrc);
}

TEST(Parse, CorruptedIcrcIsRejectedUnlessVerificationIsOff) {
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  bytes.back() ^= 0x80;
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadIcrc);
  ParseConfig cfg;
  cfg.verify_icrc = false;
  PacketView v;
  EXPECT_EQ(parse(bytes, cfg, &v), ParseStatus::kOk);
}

TEST(Parse, WrongMrcVersionIsRejected) {
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  const size_t mth = 14 + 40 + 8 + 12;
  bytes[mth] = 2;
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadVersion);
}

TEST(Parse, NonZeroBthTransportVersionIsRejected) {
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  bytes[14 + 40 + 8 + 1] |= 0x01;
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadVersion);
}

TEST(Parse, RoceOpcodesOutsideTheMrcRangeAreRejected) {
  for (uint8_t op : {0x00, 0x0a, 0x11, 0xbf, 0xc6, 0xcf, 0xd5, 0xff}) {
    auto bytes = build(v6(), make_transport(Opcode::kAck), {});
    bytes[14 + 40 + 8] = op;
    EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadOpcode) << int{op};
  }
}

TEST(Parse, NonIpEtherTypeIsRejected) {
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  poke16(bytes, 12, 0x0806);  // ARP
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kNotIp);
}

TEST(Parse, OtherUdpPortsAreNotMrc) {
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  poke16(bytes, 14 + 40 + 2, 4792);
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kNotMrcPort);
}

TEST(Parse, NonUdpNextHeaderIsRejected) {
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  bytes[14 + 6] = 6;  // TCP
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kNotUdp);
}

TEST(Parse, UdpLengthMustMatchTheIpLength) {
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  poke16(bytes, 14 + 40 + 4, static_cast<uint16_t>(bytes.size() - 14 - 40 - 1));
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadUdpLength);
}

TEST(Parse, Ipv4HeaderChecksumIsVerified) {
  auto bytes = build(v4(), make_transport(Opcode::kAck), {});
  bytes[14 + 8] ^= 1;  // TTL, without fixing the checksum
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadIpHeader);
}

TEST(Parse, Ipv4HeaderChecksumIsLeftToAPortThatCheckedIt) {
  auto bytes = build(v4(), make_transport(Opcode::kAck), {});
  bytes[14 + 8] ^= 1;  // TTL (not covered by the ICRC), without fixing the checksum
  const PortChecks good{.ipv4_checksum = PortVerdict::kGood};
  const PortChecks bad{.ipv4_checksum = PortVerdict::kBad};
  PacketView v;
  EXPECT_EQ(parse(bytes, ParseConfig{}, &v, good), ParseStatus::kOk);
  EXPECT_EQ(v.ttl, bytes[14 + 8]);
  EXPECT_EQ(parse(bytes, ParseConfig{}, &v, PortChecks{}), ParseStatus::kBadIpHeader);
  // A port's BAD is taken too, for a header whose sum is right.
  bytes[14 + 8] ^= 1;
  EXPECT_EQ(parse(bytes, ParseConfig{}, &v, PortChecks{}), ParseStatus::kOk);
  EXPECT_EQ(parse(bytes, ParseConfig{}, &v, bad), ParseStatus::kBadIpHeader);
  // What the port vouched for is the checksum alone: a header with options
  // is still refused.
  bytes[14] = 0x46;
  EXPECT_EQ(parse(bytes, ParseConfig{}, &v, good), ParseStatus::kBadIpHeader);
}

TEST(Parse, Ipv4OptionsAndFragmentsAreRejected) {
  auto with_options = build(v4(), make_transport(Opcode::kAck), {});
  with_options[14] = 0x46;
  EXPECT_EQ(parse_bytes(with_options), ParseStatus::kBadIpHeader);

  // A fragment with a correct header checksum.
  Transport t = make_transport(Opcode::kAck);
  auto frag = build(v4(), t, {});
  frag[14 + 6] |= 0x20;  // more fragments
  frag[14 + 10] = frag[14 + 11] = 0;
  uint32_t sum = 0;
  for (size_t i = 0; i < 20; i += 2) sum += (frag[14 + i] << 8) | frag[14 + i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  poke16(frag, 14 + 10, static_cast<uint16_t>(~sum));
  EXPECT_EQ(parse_bytes(frag), ParseStatus::kFragment);
}

TEST(Parse, Ipv6LengthBeyondTheFrameIsTruncation) {
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  poke16(bytes, 14 + 4, static_cast<uint16_t>(bytes.size()));
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kTruncated);
}

TEST(Parse, DataBeyondItsMessageIsABadField) {
  Transport t = make_transport(Opcode::kWriteMiddle, 512);
  t.data.msg_len = t.data.offset + 100;  // the payload would overrun the message
  EXPECT_EQ(parse_bytes(build(v6(), t, make_payload(512))), ParseStatus::kBadField);
}

TEST(Parse, FirstPacketMustStartAtOffsetZero) {
  Transport t = make_transport(Opcode::kWriteFirst, 512);
  t.data.offset = 8;
  EXPECT_EQ(parse_bytes(build(v6(), t, make_payload(512))), ParseStatus::kBadField);
}

TEST(Parse, LastPacketMustEndTheMessage) {
  Transport t = make_transport(Opcode::kWriteLast, 512);
  t.data.msg_len += 1;
  EXPECT_EQ(parse_bytes(build(v6(), t, make_payload(512))), ParseStatus::kBadField);
}

// Only a message's last packet may be short: a FIRST or MIDDLE with no
// payload (not trimmed) carries nothing and ends nothing.
TEST(Parse, NonLastDataPacketWithoutPayloadIsABadField) {
  for (const Opcode op : {Opcode::kWriteFirst, Opcode::kWriteMiddle}) {
    SCOPED_TRACE(opcode_name(op));
    const Transport t = make_transport(op, 0);
    ASSERT_LT(t.data.offset, t.data.msg_len);
    EXPECT_EQ(parse_bytes(build(v6(), t, {})), ParseStatus::kBadField);
  }
}

TEST(Parse, TargetAddressMayNotWrap) {
  Transport t = make_transport(Opcode::kWriteOnly, 512);
  t.data.va = UINT64_MAX - 100;
  EXPECT_EQ(parse_bytes(build(v6(), t, make_payload(512))), ParseStatus::kBadField);
}

TEST(Parse, ZeroLengthWriteIsValid) {
  Transport t = make_transport(Opcode::kWriteOnlyImm, 0);
  ASSERT_EQ(t.data.msg_len, 0u);
  PacketView v;
  ASSERT_EQ(parse(build(v6(), t, {}), ParseConfig{}, &v), ParseStatus::kOk);
  EXPECT_EQ(v.payload_len, 0u);
  EXPECT_EQ(v.payload, nullptr);
  EXPECT_EQ(v.t.data.imm, 0xdeadbeefu);
}

TEST(Parse, NackWithoutCodeAndAckWithCodeAreBadFields) {
  Transport nack = make_transport(Opcode::kNack);
  nack.fb.code = NackCode::kNone;
  EXPECT_EQ(parse_bytes(build(v6(), nack, {})), ParseStatus::kBadField);
  Transport ack = make_transport(Opcode::kAck);
  ack.fb.code = NackCode::kOutOfWindow;
  EXPECT_EQ(parse_bytes(build(v6(), ack, {})), ParseStatus::kBadField);
  Transport unknown = make_transport(Opcode::kNack);
  unknown.fb.code = static_cast<NackCode>(static_cast<uint8_t>(NackCode::kQpGone) + 1);
  EXPECT_EQ(parse_bytes(build(v6(), unknown, {})), ParseStatus::kBadField);
  Transport last = make_transport(Opcode::kNack);
  last.fb.code = NackCode::kQpGone;
  EXPECT_EQ(parse_bytes(build(v6(), last, {})), ParseStatus::kOk);
}

TEST(Parse, PortStatusMaskMustFitItsPlanes) {
  Transport t = make_transport(Opcode::kPortStatus);
  t.port_status.num_planes = 2;
  t.port_status.port_mask = 0b100;
  EXPECT_EQ(parse_bytes(build(v6(), t, {})), ParseStatus::kBadField);
}

TEST(Parse, ControlPacketWithPayloadIsABadLength) {
  // Build an ACK, then grow it by 8 bytes claimed by the IP and UDP lengths.
  auto bytes = build(v6(), make_transport(Opcode::kAck), {});
  bytes.insert(bytes.end() - kIcrcLen, 8, 0);
  poke16(bytes, 14 + 4, static_cast<uint16_t>(bytes.size() - 14 - 40));
  poke16(bytes, 14 + 40 + 4, static_cast<uint16_t>(bytes.size() - 14 - 40));
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadLength);
}

TEST(Parse, DataPayloadOverTheJumboLimitIsABadLength) {
  // Build a 9000-byte packet, then splice in one more payload byte.
  Transport t = make_transport(Opcode::kWriteOnly, kMaxPayload);
  auto bytes = build(v6(), t, make_payload(kMaxPayload));
  ASSERT_FALSE(bytes.empty());
  bytes.insert(bytes.end() - kIcrcLen, 1, 0);
  poke16(bytes, 14 + 4, static_cast<uint16_t>(bytes.size() - 14 - 40));
  poke16(bytes, 14 + 40 + 4, static_cast<uint16_t>(bytes.size() - 14 - 40));
  EXPECT_EQ(parse_bytes(bytes), ParseStatus::kBadLength);
}

TEST(Parse, SrhWithMoreThanOneSegmentIsNotAccepted) {
  FrameSpec f = make_frame(IpVersion::kV6, EvMode::kSrv6, false, true);
  auto bytes = build(f, make_transport(Opcode::kAck), {});
  bytes[14 + 40 + 4] = 1;  // last_entry: two segments
  EXPECT_EQ(parse_bytes(bytes, EvMode::kSrv6), ParseStatus::kNotUdp);
}

TEST(Parse, ParseViewIsResetOnFailure) {
  PacketView v;
  v.payload_len = 99;
  const std::vector<uint8_t> junk(10, 0xff);
  EXPECT_EQ(parse(junk, ParseConfig{}, &v), ParseStatus::kTruncated);
  EXPECT_EQ(v.payload_len, 0u);
}

// Every field of two views, the Transport members the opcode does not
// select included.
void expect_same_view(const PacketView& a, const PacketView& b) {
  EXPECT_EQ(0, std::memcmp(a.src_mac.bytes, b.src_mac.bytes, 6));
  EXPECT_EQ(0, std::memcmp(a.dst_mac.bytes, b.dst_mac.bytes, 6));
  EXPECT_EQ(a.has_vlan, b.has_vlan);
  EXPECT_EQ(a.vlan_tci, b.vlan_tci);
  EXPECT_EQ(a.ip_version, b.ip_version);
  EXPECT_EQ(a.dscp, b.dscp);
  EXPECT_EQ(a.ecn, b.ecn);
  EXPECT_EQ(a.flow_label, b.flow_label);
  EXPECT_EQ(a.ttl, b.ttl);
  EXPECT_EQ(0, std::memcmp(a.src_ip, b.src_ip, 16));
  EXPECT_EQ(0, std::memcmp(a.dst_ip, b.dst_ip, 16));
  EXPECT_EQ(a.has_srh, b.has_srh);
  EXPECT_EQ(0, std::memcmp(a.srh_segment, b.srh_segment, 16));
  EXPECT_EQ(a.udp_src_port, b.udp_src_port);
  EXPECT_EQ(a.trimmed, b.trimmed);
  EXPECT_EQ(a.payload, b.payload);
  EXPECT_EQ(a.payload_len, b.payload_len);
  EXPECT_EQ(a.header_len, b.header_len);
  Transport ta = a.t;
  Transport tb = b.t;
  expect_same_transport(ta, tb);
  // The members the opcode leaves out are cleared, as in a fresh view.
  for (Opcode op :
       {Opcode::kWriteLastImm, Opcode::kAck, Opcode::kProbeReply, Opcode::kPortStatus}) {
    ta.opcode = tb.opcode = op;
    expect_same_transport(ta, tb);
  }
}

// parse() writes every field on success instead of resetting the view
// first: a view reused across packets must hold the last packet only.
TEST(Parse, AReusedViewHoldsOnlyTheLastPacket) {
  const FrameSpec busy = make_frame(IpVersion::kV6, EvMode::kSrv6, true, true);
  const auto previous = {
      build(busy, make_transport(Opcode::kWriteLastImm, 300), make_payload(300)),
      build(v4(), make_transport(Opcode::kNack), {}),
      build(busy, make_transport(Opcode::kPortStatus), {}),
  };
  for (const Framing& framing : kFramings) {
    const FrameSpec frame = make_frame(framing.ip, framing.mode, framing.vlan, framing.srh);
    for (Opcode op : testing::kAllOpcodes) {
      const uint32_t payload_len = is_data(op) ? 100 : 0;
      const auto bytes = build(frame, make_transport(op, payload_len), make_payload(payload_len));
      ParseConfig cfg;
      cfg.ev_mode = framing.mode;
      PacketView fresh;
      ASSERT_EQ(parse(bytes, cfg, &fresh), ParseStatus::kOk);
      for (const auto& before : previous) {
        PacketView reused;
        ParseConfig before_cfg;
        before_cfg.ev_mode = EvMode::kSrv6;
        ASSERT_EQ(parse(before, before_cfg, &reused), ParseStatus::kOk);
        ASSERT_EQ(parse(bytes, cfg, &reused), ParseStatus::kOk);
        SCOPED_TRACE(framing_name(framing) + opcode_name(op));
        expect_same_view(reused, fresh);
      }
    }
  }
}

// build_headers() writes fields in place: every byte of the headers,
// reserved ones included, must be written whatever the buffer held.
TEST(Build, WritesEveryHeaderByte) {
  for (const Framing& framing : kFramings) {
    const FrameSpec frame = make_frame(framing.ip, framing.mode, framing.vlan, framing.srh);
    for (Opcode op : testing::kAllOpcodes) {
      const Transport t = make_transport(op, is_data(op) ? 100 : 0);
      std::vector<uint8_t> zeros(kMaxHeaderLen, 0x00);
      std::vector<uint8_t> ones(kMaxHeaderLen, 0xff);
      const size_t n =
          build_headers(frame, testing::make_ev(), {26, kEcnEct0}, t, is_data(op) ? 100 : 0, zeros);
      ASSERT_EQ(n, header_len(frame, op));
      ASSERT_EQ(
          build_headers(frame, testing::make_ev(), {26, kEcnEct0}, t, is_data(op) ? 100 : 0, ones),
          n);
      EXPECT_EQ(0, std::memcmp(zeros.data(), ones.data(), n))
          << framing_name(framing) << opcode_name(op);
    }
  }
}

// The framer's way: every header of a burst, then every payload and ICRC.
TEST(Build, HeadersThenFinishPacketEqualsBuildPacket) {
  for (const Framing& framing : kFramings) {
    const FrameSpec frame = make_frame(framing.ip, framing.mode, framing.vlan, framing.srh);
    std::vector<std::vector<uint8_t>> burst;
    std::vector<size_t> hlens;
    for (Opcode op : testing::kAllOpcodes) {
      const uint32_t len = is_data(op) ? 1500 : 0;
      burst.emplace_back(kMaxHeaderLen + len + kIcrcLen);
      hlens.push_back(build_headers(frame, testing::make_ev(), {26, kEcnEct0},
                                    make_transport(op, len), len, burst.back()));
      ASSERT_EQ(hlens.back(), header_len(frame, op));
    }
    for (size_t i = 0; i < burst.size(); ++i) {
      const Opcode op = testing::kAllOpcodes[i];
      const auto payload = make_payload(is_data(op) ? 1500 : 0);
      const size_t n = finish_packet(frame, hlens[i], payload, burst[i]);
      burst[i].resize(n);
      EXPECT_EQ(burst[i], build(frame, make_transport(op, payload.size()), payload))
          << framing_name(framing) << opcode_name(op);
    }
  }
}

// The framer's templates: one per FrameSpec, reused for packet after packet
// with other EVs, markings and lengths, into a buffer that held other
// frames: each frame parses to its own fields.
TEST(Build, AReusedTemplateGivesEachPacketItsOwnFields) {
  for (const Framing& framing : kFramings) {
    const FrameSpec frame = make_frame(framing.ip, framing.mode, framing.vlan, framing.srh);
    const HeaderTemplate tmpl = header_template(frame);
    std::vector<uint8_t> reused(kMaxHeaderLen + 1500 + kIcrcLen, 0xab);
    ParseConfig cfg;
    cfg.ev_mode = framing.mode;
    const size_t ev_bytes = framing.mode == EvMode::kUdp    ? 2
                            : framing.mode == EvMode::kStev ? 4
                            : framing.srh                   ? 32
                                                            : 16;
    for (int round = 0; round < 2; ++round) {
      for (Opcode op : testing::kAllOpcodes) {
        const auto payload = make_payload(is_data(op) ? 1500 - 100 * round : 0);
        const Transport t = make_transport(op, static_cast<uint32_t>(payload.size()));
        WireEv ev = testing::make_ev();
        for (size_t b = 0; b < sizeof(ev.bytes); ++b)
          ev.bytes[b] ^= static_cast<uint8_t>(uint8_t(op) + round);
        const TxMarking mark{static_cast<uint8_t>(is_data(op) ? 26 : 48),
                             round ? kEcnCe : kEcnEct0};
        const size_t hlen = build_headers(tmpl, ev, mark, t, payload.size(), reused);
        ASSERT_EQ(hlen, header_len(frame, op)) << framing_name(framing) << opcode_name(op);
        const size_t n = finish_packet(tmpl, hlen, payload, reused);
        ASSERT_EQ(n, hlen + payload.size() + kIcrcLen);

        PacketView v;
        ASSERT_EQ(parse({reused.data(), n}, cfg, &v), ParseStatus::kOk)
            << framing_name(framing) << opcode_name(op) << " round " << round;
        expect_same_transport(t, v.t);
        EXPECT_EQ(v.dscp, mark.dscp);
        EXPECT_EQ(v.ecn, mark.ecn);
        EXPECT_EQ(v.payload_len, payload.size());
        EXPECT_TRUE(payload.empty() || std::memcmp(v.payload, payload.data(), payload.size()) == 0);
        const WireEv got = wire_ev_of(v, framing.mode);
        EXPECT_EQ(0, std::memcmp(ev.bytes, got.bytes, ev_bytes))
            << framing_name(framing) << opcode_name(op) << " round " << round;
      }
    }
  }
}

// A FrameSpec that cannot be framed makes a template that frames nothing.
TEST(Build, TemplateOfAnUnframeableSpecBuildsNothing) {
  const HeaderTemplate tmpl = header_template(make_frame(IpVersion::kV4, EvMode::kStev));
  std::vector<uint8_t> out(kMaxHeaderLen + kIcrcLen);
  EXPECT_EQ(tmpl.len, 0u);
  EXPECT_EQ(build_headers(tmpl, testing::make_ev(), {}, make_transport(Opcode::kAck), 0, out), 0u);
}

TEST(Build, RefusesFieldsOutOfRange) {
  std::vector<uint8_t> out(kMaxHeaderLen + kMaxPayload + kIcrcLen);
  const WireEv ev = testing::make_ev();
  Transport t = make_transport(Opcode::kAck);
  t.psn = 1u << 24;
  EXPECT_EQ(build_headers(v6(), ev, {}, t, 0, out), 0u);
  t = make_transport(Opcode::kAck);
  t.dest_qpn = 1u << 24;
  EXPECT_EQ(build_headers(v6(), ev, {}, t, 0, out), 0u);
  EXPECT_EQ(build_headers(v6(), ev, {}, make_transport(Opcode::kAck), 1, out), 0u);
  EXPECT_EQ(build_headers(v6(), ev, {}, make_transport(Opcode::kWriteOnly), kMaxPayload + 1, out),
            0u);
  EXPECT_EQ(build_headers(make_frame(IpVersion::kV4, EvMode::kStev), ev, {},
                          make_transport(Opcode::kAck), 0, out),
            0u);
  EXPECT_EQ(build_headers(v6(), ev, {64, 0}, make_transport(Opcode::kAck), 0, out), 0u);
  std::vector<uint8_t> small(header_len(v6(), Opcode::kAck) - 1);
  EXPECT_EQ(build_headers(v6(), ev, {}, make_transport(Opcode::kAck), 0, small), 0u);
}

TEST(Build, HeaderLengthsMatchTheDocumentedLayout) {
  EXPECT_EQ(transport_header_len(Opcode::kWriteMiddle), 12u + 8 + 24);
  EXPECT_EQ(transport_header_len(Opcode::kWriteLastImm), 12u + 8 + 24 + 4);
  EXPECT_EQ(transport_header_len(Opcode::kAck), 12u + 8 + 44);
  EXPECT_EQ(transport_header_len(Opcode::kProbeReply), 12u + 8 + 24);
  EXPECT_EQ(transport_header_len(Opcode::kPortStatus), 12u + 8 + 12);
  EXPECT_EQ(header_len(v4(), Opcode::kWriteOnly), 14u + 20 + 8 + 44);
  EXPECT_EQ(header_len(make_frame(IpVersion::kV6, EvMode::kSrv6, true, true), Opcode::kAck),
            14u + 4 + 40 + 24 + 8 + 64);
}

TEST(Names, EveryStatusAndOpcodeHasAName) {
  for (int s = 0; s < static_cast<int>(ParseStatus::kCount); ++s)
    EXPECT_STRNE(parse_status_name(static_cast<ParseStatus>(s)), "unknown");
  for (Opcode op : testing::kAllOpcodes) EXPECT_STRNE(opcode_name(op), "UNKNOWN");
}

}  // namespace
}  // namespace softmrc::wire
