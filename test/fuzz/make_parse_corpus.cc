// Writes the seed corpus of parse_fuzz: one valid frame per packet type and
// framing option, built with wire::build_packet (and wire::trim for the
// trimmed ones), one file each.
//
// The seeds are checked in under test/fuzz/corpus/. After a wire format
// change, regenerate them from a fuzz build:
//   CXX=clang++ meson setup build-fuzz -Dfuzz=true && ninja -C build-fuzz fuzz-corpus
// (which runs `make_parse_corpus <source>/test/fuzz/corpus`).
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "wire/packet.h"

namespace {

using namespace softmrc::wire;

struct Framing {
  const char* name;
  IpVersion ip;
  EvMode mode;
  bool vlan;
  bool srh;
};

constexpr Framing kV6Udp{"v6_udp", IpVersion::kV6, EvMode::kUdp, false, false};
constexpr Framing kV4Udp{"v4_udp", IpVersion::kV4, EvMode::kUdp, false, false};
constexpr Framing kV6Stev{"v6_stev", IpVersion::kV6, EvMode::kStev, false, false};
constexpr Framing kV6Srv6{"v6_srv6", IpVersion::kV6, EvMode::kSrv6, false, false};
constexpr Framing kV6Srv6Srh{"v6_srv6_srh", IpVersion::kV6, EvMode::kSrv6, false, true};
constexpr Framing kVlanV6Udp{"vlan_v6_udp", IpVersion::kV6, EvMode::kUdp, true, false};
constexpr Framing kVlanV4Udp{"vlan_v4_udp", IpVersion::kV4, EvMode::kUdp, true, false};

FrameSpec frame_of(const Framing& fr) {
  FrameSpec f;
  for (uint8_t i = 0; i < 6; ++i) {
    f.src_mac.bytes[i] = static_cast<uint8_t>(0x02 + i);
    f.dst_mac.bytes[i] = static_cast<uint8_t>(0x12 + i);
  }
  f.has_vlan = fr.vlan;
  f.vlan_tci = 100;
  f.ip_version = fr.ip;
  for (uint8_t i = 0; i < 16; ++i) {
    f.src_ip[i] = static_cast<uint8_t>(0x20 + i);
    f.dst_ip[i] = static_cast<uint8_t>(0x40 + i);
  }
  f.ev_mode = fr.mode;
  f.srv6_srh = fr.srh;
  return f;
}

WireEv ev_of() {
  WireEv ev;
  for (uint8_t i = 0; i < 32; ++i) ev.bytes[i] = static_cast<uint8_t>(0xf0 ^ (i * 7));
  ev.bytes[0] = 0xfc;  // an SRv6 locator-like prefix
  return ev;
}

// A data packet of `payload_len` bytes at a place in a three-packet message
// that agrees with its opcode.
Transport data_of(Opcode op, uint32_t payload_len) {
  Transport t;
  t.opcode = op;
  t.dest_qpn = 0x000123;
  t.psn = 0x00fff0;
  t.path_tag = 7;
  const uint32_t before = is_first(op) ? 0 : payload_len;
  const uint32_t after = is_last(op) ? 0 : payload_len;
  t.data.msg_len = before + payload_len + after;
  t.data.offset = before;
  t.data.va = 0x10000 + before;
  t.data.rkey = 0xabc;
  t.data.msn = 5;
  t.data.imm = has_imm(op) ? 0x11223344 : 0;
  t.ack_req = is_last(op);
  t.solicited = has_imm(op);
  return t;
}

Transport control_of(Opcode op) {
  Transport t;
  t.opcode = op;
  t.dest_qpn = 0x000456;
  t.psn = 0x000010;
  t.path_tag = 9;
  if (is_feedback(op)) {
    t.fb.cum_psn = 0x00fff0;
    t.fb.ref_psn = 0x00fff4;
    t.fb.sack_base = 0x00fff0;
    t.fb.sack_bitmap[0] = 0x1d;
    t.fb.echo_tag = 7;
    t.fb.service_time_ns = 800;
    t.fb.window_mpr = 8;
    t.fb.ce_count = 1;
    t.fb.code = op == Opcode::kNack ? NackCode::kTrimmed : NackCode::kNone;
    t.fb.flags = kFbSvcTimeValid;
  } else if (op == Opcode::kPortStatus) {
    t.port_status.port_mask = 0xb;
    t.port_status.seq = 3;
    t.port_status.num_planes = 4;
  } else {
    t.probe.req_id = 42;
    t.probe.port = 1;
    t.probe.echo_tag = 9;
    t.probe.t_send_ns = 1000000;
    t.probe.service_time_ns = op == Opcode::kProbeReply ? 300 : 0;
    t.probe.flags = op == Opcode::kProbeReply ? kProbeSvcTimeValid : 0;
  }
  return t;
}

class Writer {
 public:
  explicit Writer(std::string dir) : dir_(std::move(dir)) {}

  void packet(const std::string& name, const Framing& fr, const Transport& t, uint32_t payload_len,
              bool trimmed = false, uint8_t ecn = kEcnEct0) {
    std::vector<uint8_t> payload(payload_len);
    for (uint32_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(i);
    const DscpConfig dscp;
    const TxMarking marking{is_data(t.opcode) ? dscp.trimmable : dscp.control,
                            is_data(t.opcode) ? ecn : kEcnNotEct};
    std::vector<uint8_t> frame(kMaxHeaderLen + kMaxPayload + kIcrcLen);
    size_t n = build_packet(frame_of(fr), ev_of(), marking, t, payload, frame);
    if (n != 0 && trimmed) n = trim({frame.data(), n}, dscp);
    if (n == 0) {
      std::fprintf(stderr, "make_parse_corpus: cannot build %s\n", name.c_str());
      ok_ = false;
      return;
    }
    const std::string path = dir_ + "/" + name + "_" + fr.name + ".bin";
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(frame.data(), 1, n, f) != n || std::fclose(f) != 0) {
      std::perror(path.c_str());
      ok_ = false;
    }
  }

  bool ok() const { return ok_; }

 private:
  std::string dir_;
  bool ok_ = true;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  Writer w(argv[1]);
  w.packet("data_first", kV6Udp, data_of(Opcode::kWriteFirst, 256), 256);
  w.packet("data_middle", kV6Udp, data_of(Opcode::kWriteMiddle, 256), 256);
  w.packet("data_last", kV6Udp, data_of(Opcode::kWriteLast, 256), 256);
  w.packet("data_only", kV6Udp, data_of(Opcode::kWriteOnly, 64), 64);
  w.packet("data_only_4k", kV6Udp, data_of(Opcode::kWriteOnly, 4096), 4096);
  w.packet("data_last_imm", kV6Udp, data_of(Opcode::kWriteLastImm, 128), 128);
  w.packet("data_only_imm", kV6Udp, data_of(Opcode::kWriteOnlyImm, 8), 8);
  w.packet("data_only_ce", kV6Udp, data_of(Opcode::kWriteOnly, 64), 64, false, kEcnCe);
  w.packet("ack", kV6Udp, control_of(Opcode::kAck), 0);
  w.packet("nack", kV6Udp, control_of(Opcode::kNack), 0);
  w.packet("probe_request", kV6Udp, control_of(Opcode::kProbeRequest), 0);
  w.packet("probe_reply", kV6Udp, control_of(Opcode::kProbeReply), 0);
  w.packet("port_status", kV6Udp, control_of(Opcode::kPortStatus), 0);

  w.packet("data_only", kV4Udp, data_of(Opcode::kWriteOnly, 64), 64);
  w.packet("ack", kV4Udp, control_of(Opcode::kAck), 0);
  w.packet("data_first", kVlanV6Udp, data_of(Opcode::kWriteFirst, 128), 128);
  w.packet("nack", kVlanV4Udp, control_of(Opcode::kNack), 0);
  w.packet("data_only_imm", kV6Stev, data_of(Opcode::kWriteOnlyImm, 64), 64);
  w.packet("ack", kV6Stev, control_of(Opcode::kAck), 0);
  w.packet("data_middle", kV6Srv6, data_of(Opcode::kWriteMiddle, 64), 64);
  w.packet("data_only", kV6Srv6Srh, data_of(Opcode::kWriteOnly, 64), 64);
  w.packet("ack", kV6Srv6Srh, control_of(Opcode::kAck), 0);
  w.packet("probe_request", kV6Srv6Srh, control_of(Opcode::kProbeRequest), 0);

  w.packet("trimmed_data_middle", kV6Udp, data_of(Opcode::kWriteMiddle, 256), 256, true);
  w.packet("trimmed_data_last_imm", kVlanV4Udp, data_of(Opcode::kWriteLastImm, 64), 64, true);
  w.packet("trimmed_data_first", kV6Srv6Srh, data_of(Opcode::kWriteFirst, 64), 64, true);
  return w.ok() ? 0 : 1;
}
