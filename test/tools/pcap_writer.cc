// Writes the captures that test the Wireshark dissector
// (scripts/wireshark/softmrc.lua), and what the dissector must show for them.
//
// One classic pcap per EV mode (softmrc-udp.pcap, softmrc-stev.pcap,
// softmrc-srv6.pcap: a capture comes from one deployment, and the EV mode is
// a dissector preference), each frame built by lib/wire, and expected.tsv:
//   <pcap> <frame> <check> <field> <value>
// where check is `eq` (the field's values, comma-separated), `name` (the text
// the field is shown with contains value), `absent` or `present`.
// Expected values come from the Transport each frame was built from and from
// lib/wire's own names and parser, so the dissector cannot drift from them.
//
// Usage: softmrc_pcap_writer <output-dir>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "wire/headers.h"
#include "wire/packet.h"

namespace softmrc::tools {
namespace {

using wire::EvMode;
using wire::FrameSpec;
using wire::IpVersion;
using wire::NackCode;
using wire::Opcode;
using wire::Transport;
using wire::WireEv;

[[noreturn]] void die(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::fputs("softmrc_pcap_writer: ", stderr);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::exit(1);
}

void put_le(std::vector<uint8_t>& out, uint32_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

std::string ipv6_text(const uint8_t a[16]) {
  char s[40];
  std::snprintf(s, sizeof(s),
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", a[0],
                a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
                a[14], a[15]);
  return s;
}

// One capture file and its lines of expected.tsv. Expectations apply to the
// frame added last.
class Capture {
 public:
  Capture(const std::string& dir, const char* file, EvMode mode, FILE* expected)
      : file_(file), mode_(mode), expected_(expected) {
    out_ = std::fopen((dir + "/" + file).c_str(), "wb");
    if (!out_) die("cannot create %s/%s", dir.c_str(), file);
    std::vector<uint8_t> hdr;
    put_le(hdr, 0xa1b2c3d4, 4);  // microsecond timestamps
    put_le(hdr, 2, 2);           // version 2.4
    put_le(hdr, 4, 2);
    put_le(hdr, 0, 4);      // thiszone
    put_le(hdr, 0, 4);      // sigfigs
    put_le(hdr, 65535, 4);  // snap length
    put_le(hdr, 1, 4);      // LINKTYPE_ETHERNET
    write(hdr);
  }
  ~Capture() {
    if (std::fclose(out_) != 0) die("cannot write %s", file_);
  }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  EvMode mode() const { return mode_; }

  // Appends a frame of which only the first `captured` bytes were captured.
  void add(std::span<const uint8_t> frame, size_t captured) {
    ++frames_;
    std::vector<uint8_t> rec;
    put_le(rec, 1700000000 + frames_, 4);
    put_le(rec, 0, 4);
    put_le(rec, static_cast<uint32_t>(captured), 4);
    put_le(rec, static_cast<uint32_t>(frame.size()), 4);
    rec.insert(rec.end(), frame.begin(), frame.begin() + static_cast<ptrdiff_t>(captured));
    write(rec);
  }
  void add(std::span<const uint8_t> frame) { add(frame, frame.size()); }

  void eq(const char* field, uint64_t value) { line("eq", field, std::to_string(value)); }
  void eq_list(const char* field, const std::vector<uint64_t>& values) {
    std::string s;
    for (uint64_t v : values) s += (s.empty() ? "" : ",") + std::to_string(v);
    line("eq", field, s);
  }
  void eq_text(const char* field, const std::string& text) { line("eq", field, text); }
  void name(const char* field, const char* shown) { line("name", field, shown); }
  void absent(const char* field) { line("absent", field, "-"); }
  void present(const char* field) { line("present", field, "-"); }

 private:
  void write(const std::vector<uint8_t>& bytes) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), out_) != bytes.size()) die("write failed");
  }
  void line(const char* check, const char* field, const std::string& value) {
    std::fprintf(expected_, "%s\t%u\t%s\t%s\t%s\n", file_, frames_, check, field, value.c_str());
  }

  const char* file_;
  EvMode mode_;
  FILE* expected_;
  FILE* out_;
  unsigned frames_ = 0;
};

const wire::DscpConfig kDscp{};

std::vector<uint8_t> payload_of(uint32_t len) {
  std::vector<uint8_t> p(len);
  for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(i * 7 + 1);
  return p;
}

wire::TxMarking marking_for(Opcode op) {
  return wire::is_data(op) ? wire::TxMarking{kDscp.trimmable, wire::kEcnEct0}
                           : wire::TxMarking{kDscp.control, wire::kEcnNotEct};
}

wire::PacketView parse_or_die(std::span<const uint8_t> frame, EvMode mode) {
  wire::ParseConfig cfg;
  cfg.ev_mode = mode;
  wire::PacketView view;
  const wire::ParseStatus st = wire::parse(frame, cfg, &view);
  if (st != wire::ParseStatus::kOk)
    die("lib/wire rejects its own packet: %s", wire::parse_status_name(st));
  return view;
}

std::vector<uint8_t> build(const FrameSpec& spec, const WireEv& ev, const Transport& t,
                           uint32_t payload_len) {
  std::vector<uint8_t> frame(wire::kMaxHeaderLen + payload_len + wire::kIcrcLen);
  const auto payload = payload_of(payload_len);
  const size_t len = wire::build_packet(spec, ev, marking_for(t.opcode), t, payload, frame);
  if (len == 0) die("build_packet failed for opcode 0x%02x", static_cast<unsigned>(t.opcode));
  frame.resize(len);
  return frame;
}

uint32_t icrc_of_frame(std::span<const uint8_t> frame, const FrameSpec& spec, Opcode op) {
  const size_t hdr = wire::header_len(spec, op);
  return wire::packet_icrc(frame.first(hdr),
                           frame.subspan(hdr, frame.size() - hdr - wire::kIcrcLen), spec.ev_mode);
}

// The EV as the packet carries it, in the fields the capture's mode shows.
void expect_ev(Capture& c, const wire::PacketView& v, const WireEv& ev) {
  const WireEv carried = wire::wire_ev_of(v, c.mode());
  if (std::memcmp(carried.bytes, ev.bytes, sizeof(ev.bytes)) != 0)
    die("the packet does not carry the EV it was built with");
  std::map<std::string, std::string> shown;  // field -> value
  switch (c.mode()) {
    case EvMode::kUdp:
      shown["softmrc.ev.udp_sport"] = std::to_string(v.udp_src_port);
      break;
    case EvMode::kStev:
      shown["softmrc.ev.stev"] =
          std::to_string((uint32_t{v.udp_src_port} << 16) | (v.flow_label & 0xffff));
      break;
    case EvMode::kSrv6:
      shown["softmrc.ev.srv6_dst"] = ipv6_text(v.dst_ip);
      if (v.has_srh) shown["softmrc.ev.srv6_segment"] = ipv6_text(v.srh_segment);
      break;
  }
  for (const char* field : {"softmrc.ev.udp_sport", "softmrc.ev.stev", "softmrc.ev.srv6_dst",
                            "softmrc.ev.srv6_segment"}) {
    const auto it = shown.find(field);
    if (it == shown.end())
      c.absent(field);
    else
      c.eq_text(field, it->second);
  }
}

std::vector<uint64_t> sack_psns(const wire::Feedback& fb) {
  std::vector<uint64_t> psns;
  for (unsigned i = 0; i < wire::kSackBits; ++i)
    if ((fb.sack_bitmap[i / 64] >> (i % 64)) & 1)
      psns.push_back((fb.sack_base + i) & wire::kPsnMask);
  return psns;
}

// Every field the dissector shows for the BTH, MTH and type header of `t`.
void expect_transport(Capture& c, const Transport& t, uint32_t payload_len) {
  c.eq("softmrc.opcode", static_cast<uint8_t>(t.opcode));
  c.name("softmrc.opcode", wire::opcode_name(t.opcode));
  c.eq("softmrc.se", t.solicited);
  c.eq("softmrc.pkey", t.pkey);
  c.eq("softmrc.dest_qpn", t.dest_qpn);
  c.eq("softmrc.ack_req", t.ack_req);
  c.eq("softmrc.psn", t.psn);
  c.eq("softmrc.version", wire::kProtocolVersion);
  c.eq("softmrc.mth_flags.retransmit", (t.mth_flags & wire::kMthRetransmit) != 0);
  c.eq("softmrc.path_tag", t.path_tag);
  if (wire::is_data(t.opcode)) {
    c.eq("softmrc.va", t.data.va);
    c.eq("softmrc.rkey", t.data.rkey);
    c.eq("softmrc.msg_len", t.data.msg_len);
    c.eq("softmrc.msn", t.data.msn);
    c.eq("softmrc.offset", t.data.offset);
    if (wire::has_imm(t.opcode))
      c.eq("softmrc.imm", t.data.imm);
    else
      c.absent("softmrc.imm");
    c.eq("softmrc.payload_len", payload_len);
    c.absent("softmrc.cum_psn");
  } else if (wire::is_feedback(t.opcode)) {
    const wire::Feedback& fb = t.fb;
    c.eq("softmrc.cum_psn", fb.cum_psn);
    c.eq("softmrc.ref_psn", fb.ref_psn);
    c.eq("softmrc.sack_base", fb.sack_base);
    c.eq_list("softmrc.sack_psn", sack_psns(fb));
    c.eq("softmrc.echo_tag", fb.echo_tag);
    c.eq("softmrc.service_time_ns", fb.service_time_ns);
    c.eq("softmrc.window_mpr", fb.window_mpr);
    c.eq("softmrc.ce_count", fb.ce_count);
    c.eq("softmrc.nack_code", static_cast<uint8_t>(fb.code));
    c.name("softmrc.nack_code", wire::nack_code_name(fb.code));
    c.eq("softmrc.fb_flags.ecn_echo", (fb.flags & wire::kFbEcnEcho) != 0);
    c.eq("softmrc.fb_flags.svc_time_valid", (fb.flags & wire::kFbSvcTimeValid) != 0);
    c.eq("softmrc.fb_flags.duplicate", (fb.flags & wire::kFbDuplicate) != 0);
    c.absent("softmrc.va");
    c.absent("softmrc.payload_len");
  } else if (t.opcode == Opcode::kPortStatus) {
    const wire::PortStatus& ps = t.port_status;
    c.eq("softmrc.port_mask", ps.port_mask);
    std::vector<uint64_t> planes;
    for (unsigned n = 0; n < 32; ++n)
      if ((ps.port_mask >> n) & 1) planes.push_back(n);
    c.eq_list("softmrc.plane", planes);
    c.eq("softmrc.port_seq", ps.seq);
    c.eq("softmrc.num_planes", ps.num_planes);
  } else {
    const wire::Probe& p = t.probe;
    c.eq("softmrc.probe.req_id", p.req_id);
    c.eq("softmrc.probe.port", p.port);
    c.eq("softmrc.probe.flags.svc_time_valid", (p.flags & wire::kProbeSvcTimeValid) != 0);
    c.eq("softmrc.echo_tag", p.echo_tag);
    c.eq("softmrc.probe.t_send_ns", p.t_send_ns);
    c.eq("softmrc.service_time_ns", p.service_time_ns);
  }
}

// Builds a well-formed packet, checks lib/wire accepts it, writes it and
// everything the dissector must show for it.
void add_packet(Capture& c, const FrameSpec& spec, const WireEv& ev, const Transport& t,
                uint32_t payload_len = 0) {
  const auto frame = build(spec, ev, t, payload_len);
  const wire::PacketView v = parse_or_die(frame, c.mode());
  c.add(frame);
  expect_transport(c, t, payload_len);
  expect_ev(c, v, ev);
  c.eq("softmrc.trimmed", 0);
  if (wire::is_data(t.opcode))
    c.eq("softmrc.trimmable", 1);
  else
    c.absent("softmrc.trimmable");
  c.eq("softmrc.icrc", icrc_of_frame(frame, spec, t.opcode));
  c.name("softmrc.icrc_status", "Good");
  c.absent("softmrc.expert.bad_icrc");
  c.absent("softmrc.expert.truncated");
}

// A packet a switch trimmed: headers only, no ICRC, DSCP re-marked.
void add_trimmed(Capture& c, const FrameSpec& spec, const WireEv& ev, const Transport& t,
                 uint32_t payload_len) {
  auto frame = build(spec, ev, t, payload_len);
  frame.resize(wire::trim(frame, kDscp));
  if (frame.empty()) die("trim failed");
  const wire::PacketView v = parse_or_die(frame, c.mode());
  if (!v.trimmed) die("lib/wire does not see its trimmed packet as trimmed");
  c.add(frame);
  expect_transport(c, t, 0);
  expect_ev(c, v, ev);
  c.eq("softmrc.trimmed", 1);
  c.eq("softmrc.trimmable", 0);
  c.absent("softmrc.icrc");
  c.name("softmrc.icrc_status", "Absent");
  c.present("softmrc.expert.trimmed");
  c.absent("softmrc.expert.truncated");
}

Transport data(Opcode op, uint32_t psn, uint32_t offset, uint32_t msg_len) {
  Transport t;
  t.opcode = op;
  t.dest_qpn = 0x00a1b2;
  t.psn = psn;
  t.path_tag = 0x5000 + psn;
  t.data.va = 0x00007f1234560000ull + offset;
  t.data.rkey = 0xcafe0042;
  t.data.msg_len = msg_len;
  t.data.msn = 7;
  t.data.offset = offset;
  if (wire::has_imm(op)) t.data.imm = 0xdeadbeef;
  return t;
}

Transport feedback(NackCode code, uint8_t flags) {
  Transport t;
  t.opcode = code == NackCode::kNone ? Opcode::kAck : Opcode::kNack;
  t.dest_qpn = 0x00c3d4;
  t.psn = 0xfffff0;
  t.path_tag = 0x77;
  t.fb.cum_psn = 0xfffff8;
  t.fb.ref_psn = 0x000003 + static_cast<uint8_t>(code);
  t.fb.sack_base = 0xfffffa;  // the SACK window wraps through PSN 0
  t.fb.sack_bitmap[0] = 0x8000000000000025ull;
  t.fb.sack_bitmap[1] = 0x4000000000000001ull;
  t.fb.echo_tag = 0x5010 + static_cast<uint8_t>(code);
  t.fb.service_time_ns = 1234;
  t.fb.window_mpr = 8;
  t.fb.ce_count = 3;
  t.fb.code = code;
  t.fb.flags = flags;
  return t;
}

FrameSpec frame_spec(IpVersion ip, EvMode mode) {
  FrameSpec f;
  f.src_mac = {{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
  f.dst_mac = {{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}};
  f.ip_version = ip;
  f.ev_mode = mode;
  if (ip == IpVersion::kV4) {
    const uint8_t src[] = {10, 0, 0, 1}, dst[] = {10, 0, 0, 2};
    std::memcpy(f.src_ip, src, 4);
    std::memcpy(f.dst_ip, dst, 4);
  } else {
    f.src_ip[0] = f.dst_ip[0] = 0xfd;
    f.src_ip[15] = 1;
    f.dst_ip[15] = 2;
  }
  return f;
}

WireEv ev_of(std::initializer_list<uint8_t> bytes) {
  WireEv ev;
  size_t i = 0;
  for (uint8_t b : bytes) ev.bytes[i++] = b;
  return ev;
}

// Every opcode, option and damage the dissector has to handle, in UDP mode.
void write_udp_capture(Capture& c) {
  const FrameSpec v4 = frame_spec(IpVersion::kV4, EvMode::kUdp);
  const FrameSpec v6 = frame_spec(IpVersion::kV6, EvMode::kUdp);
  FrameSpec v4_vlan = v4;
  v4_vlan.has_vlan = true;
  v4_vlan.vlan_tci = (3 << 13) | 100;  // PCP 3, VID 100
  const WireEv ev = ev_of({0xc3, 0x51});

  add_packet(c, v4, ev, data(Opcode::kWriteFirst, 100, 0, 3000), 1024);
  Transport middle = data(Opcode::kWriteMiddle, 101, 1024, 3000);
  middle.mth_flags = wire::kMthRetransmit;
  add_packet(c, v4_vlan, ev, middle, 1024);
  Transport last = data(Opcode::kWriteLast, 102, 2048, 3000);
  last.ack_req = true;
  add_packet(c, v6, ev, last, 952);
  Transport only = data(Opcode::kWriteOnly, 0xffffff, 0, 64);
  only.solicited = true;
  only.pkey = 0x8001;
  add_packet(c, v6, ev, only, 64);
  add_packet(c, v6, ev, data(Opcode::kWriteLastImm, 104, 4096, 4100), 4);
  add_packet(c, v4, ev, data(Opcode::kWriteOnlyImm, 105, 0, 0), 0);

  add_packet(c, v6, ev, feedback(NackCode::kNone, wire::kFbEcnEcho | wire::kFbSvcTimeValid));
  add_packet(c, v4, ev, feedback(NackCode::kTrimmed, wire::kFbSvcTimeValid));
  add_packet(c, v6, ev, feedback(NackCode::kOutOfWindow, wire::kFbDuplicate));
  add_packet(c, v6, ev, feedback(NackCode::kRemoteAccess, 0));
  add_packet(c, v6, ev, feedback(NackCode::kInvalidRequest, 0));

  Transport req;
  req.opcode = Opcode::kProbeRequest;
  req.path_tag = 0x99;
  req.probe.req_id = 0x1234;
  req.probe.t_send_ns = 1'700'000'000'123'456'789ull;
  add_packet(c, v6, ev, req);
  Transport reply = req;
  reply.opcode = Opcode::kProbeReply;
  reply.probe.port = 3;
  reply.probe.flags = wire::kProbeSvcTimeValid;
  reply.probe.echo_tag = 0x99;
  reply.probe.service_time_ns = 850;
  add_packet(c, v6, ev, reply);

  Transport status;
  status.opcode = Opcode::kPortStatus;
  status.port_status = {.port_mask = 0x8000000b, .seq = 42, .num_planes = 32};
  add_packet(c, v4, ev, status);

  add_trimmed(c, v6, ev, data(Opcode::kWriteMiddle, 106, 1024, 3000), 1024);

  // One bit of the ICRC flipped.
  const Transport hit = data(Opcode::kWriteOnly, 107, 0, 512);
  auto frame = build(v4, ev, hit, 512);
  const uint32_t good = icrc_of_frame(frame, v4, hit.opcode);
  frame.back() ^= 0x10;
  c.add(frame);
  expect_transport(c, hit, 512);
  c.eq("softmrc.trimmed", 0);
  c.name("softmrc.icrc_status", "Bad");
  c.eq("softmrc.icrc_calc", good);
  c.present("softmrc.expert.bad_icrc");

  // An MTH version this dissector does not speak, with a valid ICRC: the
  // BTH and MTH are shown, the rest is not guessed at.
  frame = build(v6, ev, only, 64);
  const size_t mth = wire::header_len(v6, only.opcode) - wire::transport_header_len(only.opcode) +
                     sizeof(wire::Bth);
  frame[mth] = wire::kProtocolVersion + 1;
  wire::store_icrc(icrc_of_frame(frame, v6, only.opcode), &frame[frame.size() - wire::kIcrcLen]);
  c.add(frame);
  c.eq("softmrc.psn", only.psn);
  c.eq("softmrc.version", wire::kProtocolVersion + 1);
  c.present("softmrc.expert.unknown_version");
  c.absent("softmrc.va");

  // Captured with a snap length that cuts the DataHdr.
  frame = build(v4, ev, hit, 512);
  c.add(frame, wire::header_len(v4, hit.opcode) - sizeof(wire::DataHdr) + 10);
  c.eq("softmrc.psn", hit.psn);
  c.eq("softmrc.path_tag", hit.path_tag);
  c.present("softmrc.expert.truncated");
  c.absent("softmrc.msg_len");
  c.name("softmrc.icrc_status", "Unverified");

  // ... and one that cuts the BTH.
  c.add(frame, wire::header_len(v4, hit.opcode) - wire::transport_header_len(hit.opcode) + 6);
  c.present("softmrc.expert.truncated");
  c.absent("softmrc.psn");

  // An unassigned opcode in the MRC range: the BTH is all that is known.
  frame = build(v4, ev, hit, 512);
  frame[wire::header_len(v4, hit.opcode) - wire::transport_header_len(hit.opcode)] = 0xc8;
  c.add(frame);
  c.eq("softmrc.opcode", 0xc8);
  c.eq("softmrc.psn", hit.psn);
  c.present("softmrc.expert.unknown_opcode");
  c.absent("softmrc.version");

  // Not an MRC opcode (RC RDMA WRITE Only): left to Wireshark's InfiniBand dissector.
  frame = build(v4, ev, hit, 512);
  frame[wire::header_len(v4, hit.opcode) - wire::transport_header_len(hit.opcode)] = 0x0a;
  c.add(frame);
  c.absent("softmrc.opcode");
  c.eq("infiniband.bth.opcode", 0x0a);
}

void write_stev_capture(Capture& c) {
  const FrameSpec v6 = frame_spec(IpVersion::kV6, EvMode::kStev);
  const WireEv ev = ev_of({0x13, 0x03, 0x21, 0x02});
  add_packet(c, v6, ev, data(Opcode::kWriteOnly, 200, 0, 1500), 1500);
  add_packet(c, v6, ev, feedback(NackCode::kNone, 0));
  add_packet(c, v6, ev, feedback(NackCode::kTrimmed, wire::kFbEcnEcho));
}

void write_srv6_capture(Capture& c) {
  FrameSpec da_only = frame_spec(IpVersion::kV6, EvMode::kSrv6);
  FrameSpec with_srh = da_only;
  with_srh.srv6_srh = true;
  const WireEv da_ev =
      ev_of({0x13, 0x13, 0x13, 0x13, 0x01, 0x09, 0x02, 0x0b, 0x03, 0x07, 0x04, 0x09});
  const WireEv srh_ev =
      ev_of({0x13, 0x13, 0x13, 0x13, 0x01, 0x09, 0x02, 0x0b, 0x03, 0x07, 0x04, 0x09,
             0x05, 0x01, 0x06, 0x02, 0x13, 0x13, 0x13, 0x13, 0x07, 0x0c, 0x08, 0x0d});
  add_packet(c, da_only, da_ev, data(Opcode::kWriteFirst, 300, 0, 8192), 4096);
  add_packet(c, with_srh, srh_ev, data(Opcode::kWriteLastImm, 301, 4096, 8192), 4096);
  add_packet(c, with_srh, srh_ev, feedback(NackCode::kNone, wire::kFbSvcTimeValid));
  add_trimmed(c, with_srh, srh_ev, data(Opcode::kWriteMiddle, 302, 4096, 16384), 4096);
}

}  // namespace
}  // namespace softmrc::tools

int main(int argc, char** argv) {
  using namespace softmrc::tools;
  if (argc != 2) die("usage: softmrc_pcap_writer <output-dir>");
  const std::string dir = argv[1];
  FILE* expected = std::fopen((dir + "/expected.tsv").c_str(), "w");
  if (!expected) die("cannot create %s/expected.tsv", dir.c_str());
  {
    Capture udp(dir, "softmrc-udp.pcap", EvMode::kUdp, expected);
    write_udp_capture(udp);
    Capture stev(dir, "softmrc-stev.pcap", EvMode::kStev, expected);
    write_stev_capture(stev);
    Capture srv6(dir, "softmrc-srv6.pcap", EvMode::kSrv6, expected);
    write_srv6_capture(srv6);
  }
  if (std::fclose(expected) != 0) die("cannot write expected.tsv");
  return 0;
}
