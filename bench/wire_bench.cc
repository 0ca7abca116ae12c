// Microbenchmarks of lib/wire: per-packet build and parse cost for a 4 KiB
// data packet, an ACK and a probe, the zero-copy transmit path (headers
// plus an ICRC over a payload that stays where it is), a receiver's parse
// and placement (the copy after the check, or inside the next one), and
// CRC-32 throughput of each engine, alone and folded into a copy.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "wire/icrc.h"
#include "wire/packet.h"

namespace softmrc::wire {
namespace {

constexpr uint32_t kDataPayloadBytes = 4096;

FrameSpec bench_frame() {
  FrameSpec f;
  f.src_mac.bytes[5] = 1;
  f.dst_mac.bytes[5] = 2;
  f.src_ip[15] = 1;
  f.dst_ip[15] = 2;
  f.ev_mode = EvMode::kStev;
  return f;
}

Transport data_transport() {
  Transport t;
  t.opcode = Opcode::kWriteOnly;
  t.dest_qpn = 0x42;
  t.psn = 1000;
  t.path_tag = 3;
  t.data.va = 0x7f0000000000;
  t.data.rkey = 0x1234;
  t.data.msg_len = kDataPayloadBytes;
  return t;
}

Transport probe_transport() {
  Transport t;
  t.opcode = Opcode::kProbeReply;
  t.probe.req_id = 1;
  t.probe.flags = kProbeSvcTimeValid;
  t.probe.echo_tag = 7;
  t.probe.t_send_ns = 123456789;
  return t;
}

Transport ack_transport() {
  Transport t;
  t.opcode = Opcode::kAck;
  t.dest_qpn = 0x42;
  t.psn = 1000;
  t.fb.cum_psn = 990;
  t.fb.ref_psn = 1000;
  t.fb.sack_base = 990;
  t.fb.sack_bitmap[0] = 0x3ff;
  t.fb.window_mpr = 8;
  return t;
}

struct Built {
  std::vector<uint8_t> frame;
  size_t len = 0;
};

Built build(const Transport& t, uint32_t payload_len) {
  Built b;
  b.frame.resize(kMaxHeaderLen + kMaxPayload + kIcrcLen);
  const std::vector<uint8_t> payload(payload_len, 0x5a);
  const TxMarking marking{26, kEcnEct0};
  b.len = build_packet(bench_frame(), WireEv{}, marking, t, payload, b.frame);
  return b;
}

void BM_BuildPacket(benchmark::State& state, const Transport& t, uint32_t payload_len) {
  const FrameSpec frame = bench_frame();
  const std::vector<uint8_t> payload(payload_len, 0x5a);
  std::vector<uint8_t> out(kMaxHeaderLen + kMaxPayload + kIcrcLen);
  const TxMarking marking{26, kEcnEct0};
  for (auto _ : state) {
    benchmark::DoNotOptimize(build_packet(frame, WireEv{}, marking, t, payload, out));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(payload_len));
}
BENCHMARK_CAPTURE(BM_BuildPacket, data_4k, data_transport(), kDataPayloadBytes);
BENCHMARK_CAPTURE(BM_BuildPacket, ack, ack_transport(), 0);
BENCHMARK_CAPTURE(BM_BuildPacket, probe, probe_transport(), 0);

// Headers alone, without the ICRC: from the FrameSpec, and from its
// HeaderTemplate made once, as softmrcd's framer does.
void BM_BuildHeaders(benchmark::State& state, const Transport& t, bool from_template) {
  const FrameSpec frame = bench_frame();
  const HeaderTemplate tmpl = header_template(frame);
  uint8_t out[kMaxHeaderLen];
  const TxMarking marking{48, kEcnNotEct};
  for (auto _ : state) {
    benchmark::DoNotOptimize(from_template ? build_headers(tmpl, WireEv{}, marking, t, 0, out)
                                           : build_headers(frame, WireEv{}, marking, t, 0, out));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_BuildHeaders, ack, ack_transport(), false);
BENCHMARK_CAPTURE(BM_BuildHeaders, ack_template, ack_transport(), true);

// With `fcs_kept`, the port hands over the frame's FCS (PortChecks).
void BM_Parse(benchmark::State& state, const Transport& t, uint32_t payload_len, bool verify,
              bool fcs_kept = false) {
  const Built b = build(t, payload_len);
  if (b.len == 0) {
    state.SkipWithError("build_packet failed");
    return;
  }
  ParseConfig cfg;
  cfg.ev_mode = EvMode::kStev;
  cfg.verify_icrc = verify;
  PortChecks checked;
  checked.fcs_kept = fcs_kept;
  checked.fcs = crc32({b.frame.data(), b.len});
  PacketView view;
  for (auto _ : state) {
    const ParseStatus s = parse({b.frame.data(), b.len}, cfg, &view, checked);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(view);
  }
  if (parse({b.frame.data(), b.len}, cfg, &view, checked) != ParseStatus::kOk ||
      (fcs_kept && view.icrc_check != IcrcCheck::kFromFcs)) {
    state.SkipWithError("parse failed");
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(payload_len));
}
BENCHMARK_CAPTURE(BM_Parse, data_4k_icrc, data_transport(), kDataPayloadBytes, true);
BENCHMARK_CAPTURE(BM_Parse, data_4k_icrc_fcs, data_transport(), kDataPayloadBytes, true, true);
BENCHMARK_CAPTURE(BM_Parse, data_4k_no_icrc, data_transport(), kDataPayloadBytes, false);
BENCHMARK_CAPTURE(BM_Parse, ack_icrc, ack_transport(), 0, true);
BENCHMARK_CAPTURE(BM_Parse, ack_no_icrc, ack_transport(), 0, false);
BENCHMARK_CAPTURE(BM_Parse, probe_icrc, probe_transport(), 0, true);

// A receiver's 4 KiB frame: parsed with its ICRC checked, its payload
// placed into a 4 MiB region walked 4 KiB at a time, from one of 32
// frames (a burst's mbufs). 0: parse, then the copy; 1: the copy deferred
// into the next frame's parse (wire::DeferredCopy), as softmrcd makes it;
// 2: as 1, the ICRC checked through the FCS a port kept (PortChecks).
void BM_ParseAndPlace4k(benchmark::State& state) {
  const Built b = build(data_transport(), kDataPayloadBytes);
  constexpr size_t kFrames = 32;
  const size_t stride = (b.len + 63) / 64 * 64 + 64;
  std::vector<uint8_t> frames(kFrames * stride);
  for (size_t i = 0; i < kFrames; ++i) std::memcpy(&frames[i * stride], b.frame.data(), b.len);
  std::vector<uint8_t> region(size_t{4} << 20);
  ParseConfig cfg;
  cfg.ev_mode = EvMode::kStev;
  PacketView view;
  DeferredCopy placement;
  PortChecks checked;
  checked.fcs_kept = state.range(0) == 2;
  checked.fcs = crc32({b.frame.data(), b.len});
  size_t i = 0;
  size_t to = 0;
  for (auto _ : state) {
    const std::span<const uint8_t> frame(&frames[i * stride], b.len);
    ParseStatus st;
    if (state.range(0) == 0) {
      st = parse(frame, cfg, &view);
      std::memcpy(region.data() + to, view.payload, view.payload_len);
    } else {
      st = parse(frame, cfg, &view, checked, placement);
      placement = {region.data() + to, view.payload, view.payload_len};
    }
    if (st != ParseStatus::kOk) {
      state.SkipWithError("parse failed");
      break;
    }
    benchmark::ClobberMemory();
    i = (i + 1) % kFrames;
    to = (to + kDataPayloadBytes) % region.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * int64_t{kDataPayloadBytes});
}
BENCHMARK(BM_ParseAndPlace4k)->Arg(0)->Arg(1)->Arg(2);

// An IPv4 ACK, its ICRC checked, its header checksum summed by parse() or
// vouched for by the port (PortChecks: rx_ipv4_checksum_offload).
void BM_ParseIpv4Ack(benchmark::State& state, bool port_checked) {
  FrameSpec frame = bench_frame();
  frame.ip_version = IpVersion::kV4;
  frame.ev_mode = EvMode::kUdp;
  std::vector<uint8_t> bytes(kMaxHeaderLen + kIcrcLen);
  const size_t len =
      build_packet(frame, WireEv{}, TxMarking{48, kEcnNotEct}, ack_transport(), {}, bytes);
  const PortChecks checked{.ipv4_checksum =
                               port_checked ? PortVerdict::kGood : PortVerdict::kUnchecked};
  PacketView view;
  if (len == 0 || parse({bytes.data(), len}, ParseConfig{}, &view, checked) != ParseStatus::kOk) {
    state.SkipWithError("build or parse failed");
    return;
  }
  for (auto _ : state) {
    const ParseStatus s = parse({bytes.data(), len}, ParseConfig{}, &view, checked);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(view);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_CAPTURE(BM_ParseIpv4Ack, summed, false);
BENCHMARK_CAPTURE(BM_ParseIpv4Ack, port_checked, true);

// The zero-copy TX path: headers into a small buffer, the ICRC over them
// and the payload in place; the payload itself is never copied.
void BM_BuildHeadersAndIcrc4k(benchmark::State& state) {
  const FrameSpec frame = bench_frame();
  const Transport t = data_transport();
  const std::vector<uint8_t> payload(kDataPayloadBytes, 0x5a);
  uint8_t headers[kMaxHeaderLen];
  uint8_t icrc[kIcrcLen];
  const TxMarking marking{26, kEcnEct0};
  for (auto _ : state) {
    const size_t n = build_headers(frame, WireEv{}, marking, t, kDataPayloadBytes, headers);
    store_icrc(packet_icrc({headers, n}, payload, frame.ev_mode), icrc);
    benchmark::DoNotOptimize(icrc);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * int64_t{kDataPayloadBytes});
}
BENCHMARK(BM_BuildHeadersAndIcrc4k);

// ICRC of one data packet (masked headers, then the payload) by payload size.
void BM_PacketIcrc(benchmark::State& state) {
  const auto payload_len = static_cast<uint32_t>(state.range(0));
  const FrameSpec frame = bench_frame();
  const std::vector<uint8_t> payload(payload_len, 0x5a);
  uint8_t headers[kMaxHeaderLen];
  const size_t n =
      build_headers(frame, WireEv{}, TxMarking{}, data_transport(), payload_len, headers);
  for (auto _ : state) benchmark::DoNotOptimize(packet_icrc({headers, n}, payload, frame.ev_mode));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n + payload_len));
}
BENCHMARK(BM_PacketIcrc)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->Arg(9000);

// Raw CRC-32 throughput, the bulk of every ICRC, by engine (0 tables,
// 1 PCLMULQDQ, 2 VPCLMULQDQ) and length.
void BM_Crc32(benchmark::State& state) {
  const auto engine = static_cast<CrcEngine>(state.range(0));
  if (crc32_set_engine(engine) != engine) {
    state.SkipWithError("this CPU lacks the engine");
    return;
  }
  const std::vector<uint8_t> data(static_cast<size_t>(state.range(1)), 0xa5);
  for (auto _ : state) benchmark::DoNotOptimize(crc32(data));
  state.SetBytesProcessed(state.iterations() * state.range(1));
  crc32_set_engine(crc32_best_engine());
}
BENCHMARK(BM_Crc32)->ArgsProduct({{0, 1, 2}, {64, 128, 256, 1024, 4096, 9000}});

// One CRC after another, each fed the state the previous one left: the
// latency that a packet waiting for its own ICRC sees, where the loop above
// overlaps independent CRCs.
void BM_Crc32Latency(benchmark::State& state) {
  const std::vector<uint8_t> data(static_cast<size_t>(state.range(0)), 0xa5);
  uint32_t s = kCrc32Init;
  for (auto _ : state) s = crc32_update(s, data.data(), data.size());
  benchmark::DoNotOptimize(s);
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Crc32Latency)->Arg(64)->Arg(96)->Arg(112)->Arg(128)->Arg(256)->Arg(4096);

// A payload copied and checked: crc32_copy() against a copy, then a CRC.
void BM_Crc32Copy(benchmark::State& state) {
  const auto len = static_cast<size_t>(state.range(0));
  const std::vector<uint8_t> src(len, 0xa5);
  std::vector<uint8_t> dst(len);
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32_copy(kCrc32Init, dst.data(), src.data(), len));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Crc32Copy)->Arg(1024)->Arg(4096)->Arg(9000);

void BM_MemcpyThenCrc32(benchmark::State& state) {
  const auto len = static_cast<size_t>(state.range(0));
  const std::vector<uint8_t> src(len, 0xa5);
  std::vector<uint8_t> dst(len);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), len);
    benchmark::ClobberMemory();
    benchmark::DoNotOptimize(crc32_update(kCrc32Init, dst.data(), len));
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_MemcpyThenCrc32)->Arg(1024)->Arg(4096)->Arg(9000);

// The same 4 KiB copies from memory that is not in the caches, as payloads
// are: a 256 MiB source walked 4 KiB at a time. 0: memcpy alone (the
// floor), 1: crc32_copy, 2: memcpy then crc32_update.
void BM_ColdCopy4k(benchmark::State& state) {
  constexpr size_t kLen = 4096;
  constexpr size_t kSource = size_t{256} << 20;
  std::vector<uint8_t> src(kSource, 0xa5);
  std::vector<uint8_t> dst(size_t{4} << 20);
  size_t from = 0;
  size_t to = 0;
  for (auto _ : state) {
    uint8_t* d = dst.data() + to;
    const uint8_t* s = src.data() + from;
    if (state.range(0) == 0) {
      std::memcpy(d, s, kLen);
    } else if (state.range(0) == 1) {
      benchmark::DoNotOptimize(crc32_copy(kCrc32Init, d, s, kLen));
    } else {
      std::memcpy(d, s, kLen);
      benchmark::DoNotOptimize(crc32_update(kCrc32Init, d, kLen));
    }
    benchmark::ClobberMemory();
    from = (from + kLen) % kSource;
    to = (to + kLen) % dst.size();
  }
  state.SetBytesProcessed(state.iterations() * int64_t{kLen});
}
BENCHMARK(BM_ColdCopy4k)->Arg(0)->Arg(1)->Arg(2);

}  // namespace
}  // namespace softmrc::wire

BENCHMARK_MAIN();
