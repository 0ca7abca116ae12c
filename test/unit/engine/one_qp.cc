// The single-QP test fixture; see one_qp.h.
#include "one_qp.h"

#include <stdexcept>

#include "engine/psn.h"

namespace softmrc::engine::test {

namespace {

void check(Status st) {
  if (!st.ok()) throw std::runtime_error(st.reason());
}

}  // namespace

OneQp::OneQp(const OneQpConfig& cfg) : cfg_(cfg) {
  EndpointConfig ec;
  ec.num_planes = cfg.num_planes;
  ec.max_qps = 2;
  ec.qp.max_mpr = cfg.max_mpr;
  ec.qp.max_send_wr = 64;
  ec.qp.max_recv_wr = 64;
  ec.tuning = cfg.tuning;
  ec.event_queue = cfg.event_queue;
  ec.completion_queue = cfg.completion_queue;
  check(ep.init(ec));
  mem.assign(cfg.mem_bytes, 0);
  for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<uint8_t>(i * 7 + 1);
  check(ep.register_region(
      Region{kVa, mem.size(), mem.data(), kAccessLocalWrite | kAccessRemoteWrite}, &key));
  check(ep.create_qp(&qpn));

  std::vector<EvEntry> evs;
  for (uint8_t p = 0; p < cfg.num_planes; ++p)
    for (uint32_t i = 0; i < cfg.evs_per_plane; ++i) {
      EvEntry e{};
      e.plane = p;
      e.value.bytes[31] = static_cast<uint8_t>(p * 16 + i);
      evs.push_back(e);
    }
  QpAttr at;
  at.evs = evs;
  at.ev_config.num_planes = cfg.num_planes;
  at.ev_config.min_active = cfg.min_active;
  at.ev_config.probe_initial_ns = cfg.probe_initial_ns;
  at.ev_config.probe_max_ns = cfg.probe_max_ns;
  at.cc = cfg.cc;
  at.peer = 9;
  at.dest_qpn = cfg.dest_qpn;
  at.path_mtu = cfg.mtu;
  at.rq_psn = cfg.rq_psn;
  at.sq_psn = cfg.sq_psn;
  at.mpr_dest = at.mpr = cfg.mpr;
  at.max_wimm_dest = at.max_wimm = cfg.max_wimm;
  at.timeout = cfg.timeout;
  at.retry_linear = cfg.retry_linear;
  at.retry_exp = cfg.retry_exp;
  at.caps = cfg.caps;
  check(ep.connect_qp(qpn, at, 0, cfg.last));
}

Status OneQp::write(uint64_t wr_id, uint32_t src_off, uint32_t len, bool imm, uint32_t imm_data,
                    uint64_t remote, uint32_t rkey) {
  WriteRequest wr;
  wr.wr_id = wr_id;
  wr.local_addr = kVa + src_off;
  wr.length = len;
  wr.lkey = key;
  wr.remote_addr = remote;
  wr.rkey = rkey;
  wr.with_imm = imm;
  wr.imm = imm_data;
  return ep.post_write(qpn, wr);
}

std::vector<TxPacket> OneQp::tx(TimeNs now, size_t max) {
  std::vector<TxPacket> out;
  TxPacket buf[32];
  while (out.size() < max) {
    const size_t n = ep.poll_tx(buf, std::min<size_t>(32, max - out.size()), now);
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

std::vector<Completion> OneQp::completions() {
  std::vector<Completion> out;
  Completion c[32];
  for (size_t n; (n = ep.poll_completions(c, 32)) > 0;) out.insert(out.end(), c, c + n);
  return out;
}

std::vector<Event> OneQp::events() {
  std::vector<Event> out;
  Event e[32];
  for (size_t n; (n = ep.poll_events(e, 32)) > 0;) out.insert(out.end(), e, e + n);
  return out;
}

wire::PacketView OneQp::ack(uint32_t cum, uint32_t ref, uint32_t echo_tag,
                            std::vector<uint32_t> sacked, wire::NackCode code,
                            uint8_t flags) const {
  wire::PacketView pv;
  pv.t.opcode = code == wire::NackCode::kNone ? wire::Opcode::kAck : wire::Opcode::kNack;
  pv.t.dest_qpn = qpn;
  wire::Feedback& fb = pv.t.fb;
  fb.cum_psn = cum;
  fb.ref_psn = ref;
  fb.sack_base = cum;
  for (uint32_t p : sacked) {
    const auto i = static_cast<uint32_t>(psn_diff(p, cum));
    if (i < wire::kSackBits) fb.sack_bitmap[i / 64] |= uint64_t{1} << (i % 64);
  }
  fb.echo_tag = echo_tag;
  fb.window_mpr = cfg_.mpr;
  fb.code = code;
  fb.flags = flags;
  return pv;
}

wire::PacketView OneQp::data(uint32_t psn, wire::Opcode op, uint32_t off, uint32_t msg_len,
                             uint32_t msg_off, const std::vector<uint8_t>& payload,
                             uint32_t imm) const {
  wire::PacketView pv;
  pv.t.opcode = op;
  pv.t.dest_qpn = qpn;
  pv.t.psn = psn;
  pv.t.path_tag = 3;
  pv.t.data.va = kVa + off;
  pv.t.data.rkey = key;
  pv.t.data.msg_len = msg_len;
  pv.t.data.offset = msg_off;
  pv.t.data.imm = imm;
  pv.payload = payload.empty() ? nullptr : payload.data();
  pv.payload_len = static_cast<uint32_t>(payload.size());
  return pv;
}

}  // namespace softmrc::engine::test
