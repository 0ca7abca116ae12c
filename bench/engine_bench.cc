// Engine cost per data packet, payload copy aside as far as possible:
//   BM_Requester  - segmentation, EV choice, in-flight tracking and the
//                   processing of one coalesced SACK per 16 packets
//   BM_Responder  - window bitmap, placement, in-order completion and ACK
//                   generation, packets arriving in order
//   BM_EndToEnd   - both endpoints joined back to back: requester,
//                   responder and ACK handling for every data packet
// The payload is 256 bytes (the smallest MTU) so the copy into registered
// memory stays a small part of the figure; the /4096 variants show the copy.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "engine/endpoint.h"
#include "engine/psn.h"

namespace softmrc::engine {
namespace {

constexpr uint64_t kVa = 0x100000;
constexpr uint32_t kMsgPackets = 64;
constexpr size_t kPage = 4096;

void check(Status st) {
  if (!st.ok()) throw std::runtime_error(st.reason());
}

struct Node {
  Endpoint ep;
  uint32_t qpn = 0;
  uint32_t key = 0;
  // The registered region starts on a page, wherever the allocator put the
  // buffer: the placement copy's speed depends on where its source and
  // destination start within a cache line, and that moved with every
  // allocation the engine's init made, by up to a tenth of BM_Responder.
  std::vector<uint8_t> storage;
  std::span<uint8_t> mem;
};

void setup(Node& n, uint32_t mtu, uint32_t dest_qpn, uint32_t mem_bytes) {
  EndpointConfig cfg;
  cfg.num_planes = 4;
  cfg.max_qps = 2;
  cfg.qp.max_mpr = 16;
  check(n.ep.init(cfg));
  n.storage.assign(mem_bytes + kPage, 0x5a);
  const auto offset = -reinterpret_cast<uintptr_t>(n.storage.data()) & (kPage - 1);
  n.mem = std::span(n.storage).subspan(offset, mem_bytes);
  check(n.ep.register_region(
      Region{kVa, n.mem.size(), n.mem.data(), kAccessLocalWrite | kAccessRemoteWrite}, &n.key));
  check(n.ep.create_qp(&n.qpn));
  std::vector<EvEntry> evs(64);
  for (uint32_t i = 0; i < evs.size(); ++i) {
    evs[i].plane = static_cast<uint8_t>(i % 4);
    evs[i].value.bytes[31] = static_cast<uint8_t>(i);
  }
  QpAttr a;
  a.evs = evs;
  a.ev_config.num_planes = 4;
  a.ev_config.probe_initial_ns = 100'000;
  a.ev_config.probe_max_ns = 1'000'000;
  a.dest_qpn = dest_qpn;
  a.path_mtu = mtu;
  a.mpr_dest = a.mpr = 16;
  check(n.ep.connect_qp(n.qpn, a, 0));
}

WriteRequest message(const Node& n, uint32_t len, uint32_t rkey) {
  WriteRequest wr;
  wr.local_addr = kVa;
  wr.length = len;
  wr.lkey = n.key;
  wr.remote_addr = kVa;
  wr.rkey = rkey;
  wr.signaled = true;
  return wr;
}

wire::PacketView view_of(const TxPacket& p) {
  wire::PacketView pv;
  pv.t = p.t;
  pv.ecn = wire::kEcnEct0;
  pv.payload = p.payload;
  pv.payload_len = p.payload_len;
  return pv;
}

void BM_Requester(benchmark::State& state) {
  const auto mtu = static_cast<uint32_t>(state.range(0));
  Node n;
  setup(n, mtu, 9, mtu * kMsgPackets);
  const WriteRequest wr = message(n, mtu * kMsgPackets, 1);
  TxPacket tx[32];
  Completion c[8];
  wire::PacketView ack;
  ack.t.opcode = wire::Opcode::kAck;
  ack.t.dest_qpn = n.qpn;
  ack.t.fb.window_mpr = 16;
  TimeNs now = 0;
  uint64_t packets = 0;
  for (auto _ : state) {
    check(n.ep.post_write(n.qpn, wr));
    for (uint32_t sent = 0; sent < kMsgPackets;) {
      const size_t k = n.ep.poll_tx(tx, 16, now);
      sent += static_cast<uint32_t>(k);
      // One coalesced SACK for the burst, as a responder acking every 16.
      ack.t.fb.cum_psn = psn_add(tx[k - 1].t.psn, 1);
      ack.t.fb.ref_psn = tx[k - 1].t.psn;
      ack.t.fb.sack_base = ack.t.fb.cum_psn;
      ack.t.fb.echo_tag = tx[k - 1].ev;
      now += 1'000;
      n.ep.on_packet(ack, 0, now);
    }
    benchmark::DoNotOptimize(n.ep.poll_completions(c, 8));
    packets += kMsgPackets;
  }
  state.counters["ns/pkt"] = benchmark::Counter(
      static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(packets));
}
BENCHMARK(BM_Requester)->Arg(256)->Arg(4096);

void BM_Responder(benchmark::State& state) {
  const auto mtu = static_cast<uint32_t>(state.range(0));
  Node req, rsp;
  setup(req, mtu, 1, mtu * kMsgPackets);
  setup(rsp, mtu, 1, mtu * kMsgPackets);
  // Record one message's packets once, then replay them with fresh PSNs.
  check(req.ep.post_write(req.qpn, message(req, mtu * kMsgPackets, rsp.key)));
  std::vector<TxPacket> pkts(kMsgPackets);
  for (size_t got = 0; got < kMsgPackets;)
    got += req.ep.poll_tx(pkts.data() + got, kMsgPackets - got, 0);
  std::vector<wire::PacketView> views;
  for (const TxPacket& p : pkts) views.push_back(view_of(p));
  TxPacket tx[32];
  uint32_t psn = 0;
  TimeNs now = 0;
  uint64_t packets = 0;
  for (auto _ : state) {
    for (wire::PacketView& v : views) {
      v.t.psn = psn;
      psn = psn_add(psn, 1);
      now += 100;
      rsp.ep.on_packet(v, 0, now);
    }
    benchmark::DoNotOptimize(rsp.ep.poll_tx(tx, 32, now));
    packets += kMsgPackets;
  }
  state.counters["ns/pkt"] = benchmark::Counter(
      static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["acks/pkt"] =
      static_cast<double>(rsp.ep.qp(rsp.qpn)->counters().acks_tx) / static_cast<double>(packets);
}
BENCHMARK(BM_Responder)->Arg(256)->Arg(4096);

void BM_EndToEnd(benchmark::State& state) {
  const auto mtu = static_cast<uint32_t>(state.range(0));
  Node a, b;
  setup(a, mtu, 1, mtu * kMsgPackets);
  setup(b, mtu, 1, mtu * kMsgPackets);
  const WriteRequest wr = message(a, mtu * kMsgPackets, b.key);
  TxPacket tx[32];
  Completion c[8];
  TimeNs now = 0;
  uint64_t packets = 0;
  for (auto _ : state) {
    check(a.ep.post_write(a.qpn, wr));
    for (size_t done = 0; done == 0;) {
      now += 500;
      for (size_t k = a.ep.poll_tx(tx, 32, now), i = 0; i < k; ++i)
        b.ep.on_packet(view_of(tx[i]), tx[i].plane, now);
      for (size_t k = b.ep.poll_tx(tx, 32, now), i = 0; i < k; ++i)
        a.ep.on_packet(view_of(tx[i]), tx[i].plane, now);
      done = a.ep.poll_completions(c, 8);
    }
    packets += kMsgPackets;
  }
  state.counters["ns/pkt"] = benchmark::Counter(
      static_cast<double>(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["acks/pkt"] =
      static_cast<double>(b.ep.qp(b.qpn)->counters().acks_tx) / static_cast<double>(packets);
}
BENCHMARK(BM_EndToEnd)->Arg(256)->Arg(4096);

}  // namespace
}  // namespace softmrc::engine

BENCHMARK_MAIN();
