// The line-rate mode's synthetic peer (see linerate.h).
#include "softmrcd/linerate.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "cli/number.h"
#include "wire/icrc.h"

namespace softmrc::softmrcd {

namespace {

uint32_t peer_index(const Config& cfg) {
  return cfg.hosted;  // the first peer
}

void fill_mbuf(rte_mempool*, void* arg, void* obj, unsigned) {
  const auto* frame = static_cast<const std::vector<uint8_t>*>(arg);
  auto* m = static_cast<rte_mbuf*>(obj);
  std::memcpy(static_cast<uint8_t*>(m->buf_addr) + RTE_PKTMBUF_HEADROOM, frame->data(),
              frame->size());
}

}  // namespace

bool parse_linerate(const std::string& arg, LinerateSpec* out, std::string* err) {
  if (arg == "probe") {
    out->kind = LinerateKind::kProbe;
    return true;
  }
  const size_t colon = arg.find(':');
  const std::string kind = arg.substr(0, colon);
  if ((kind == "rx" || kind == "rx-fcs" || kind == "tx") && colon != std::string::npos) {
    uint64_t size = 0;
    if (cli::parse_uint(std::string_view(arg).substr(colon + 1), 1, wire::kMaxPayload, &size)) {
      out->kind = kind == "tx" ? LinerateKind::kTx : LinerateKind::kRx;
      out->fcs = kind == "rx-fcs";
      out->size_bytes = static_cast<uint32_t>(size);
      return true;
    }
  }
  *err = "--linerate: '" + arg + "' is not probe, rx:SIZE, rx-fcs:SIZE or tx:SIZE (SIZE 1..9000)";
  return false;
}

bool Linerate::build_template(const Config& cfg, const wire::Transport& t, uint32_t payload_len,
                              std::string* err) {
  frame_.assign(max_frame_bytes(cfg.path_mtu), 0);
  std::vector<uint8_t> payload(payload_len, 0x5a);
  const wire::WireEv ev{};
  const wire::TxMarking mark = wire::is_data(t.opcode)
                                   ? wire::TxMarking{wire::DscpConfig{}.trimmable, wire::kEcnEct0}
                                   : wire::TxMarking{wire::DscpConfig{}.control, wire::kEcnNotEct};
  const size_t len = wire::build_packet(from_peer_, ev, mark, t, payload, frame_);
  if (len == 0) {
    *err = "--linerate: cannot build the peer's frame";
    return false;
  }
  frame_.resize(len);
  frame_bytes_ = static_cast<uint32_t>(len);
  return true;
}

bool Linerate::setup(const Config& cfg, EndpointTask& ep, const LinerateSpec& spec,
                     std::string* err) {
  spec_ = spec;
  if (cfg.hosted != 1 || !cfg.links.empty() || !cfg.traffic.empty() || cfg.endpoints.size() < 2) {
    *err =
        "--linerate: the configuration must host one endpoint on device ports, name a peer, "
        "and have no links or traffic";
    return false;
  }
  const EndpointSpec& me = cfg.endpoints[0];
  const EndpointSpec& peer = cfg.endpoints[peer_index(cfg)];
  from_peer_.src_mac = peer.planes[0].mac;
  const rte_ether_addr mac = ep.port(0).mac();
  std::memcpy(from_peer_.dst_mac.bytes, mac.addr_bytes, 6);
  from_peer_.ip_version = me.planes[0].ip_version;
  std::memcpy(from_peer_.src_ip, peer.planes[0].ip, 16);
  std::memcpy(from_peer_.dst_ip, me.planes[0].ip, 16);
  from_peer_.ev_mode = me.ev_mode;
  parse_cfg_.ev_mode = me.ev_mode;
  parse_cfg_.verify_icrc = false;
  mpr_ = cfg.qp.mpr;
  if (spec.kind != LinerateKind::kProbe && spec.size_bytes > cfg.path_mtu) {
    *err = "--linerate: SIZE " + std::to_string(spec.size_bytes) + " is above path_mtu " +
           std::to_string(cfg.path_mtu);
    return false;
  }
  if (spec.kind == LinerateKind::kTx && ep.num_planes() != 1) {
    *err = "--linerate tx: the endpoint must have one plane (the ACKs follow its one port)";
    return false;
  }

  wire::Transport t;
  switch (spec.kind) {
    case LinerateKind::kProbe:
      t.opcode = wire::Opcode::kProbeRequest;
      t.dest_qpn = engine::kQpnConnectionless;
      t.probe.req_id = 1;
      if (!build_template(cfg, t, 0, err)) return false;
      break;
    case LinerateKind::kRx: {
      // SIZE == path_mtu: the middle of a long Write, as in a bulk transfer
      // (ACKs coalesced); otherwise one-packet Writes (each ACKed at once).
      const bool bulk = spec.size_bytes == cfg.path_mtu;
      const uint32_t msg_len = bulk ? 3 * spec.size_bytes : spec.size_bytes;
      uint8_t* buf = nullptr;
      uint32_t key = 0;
      if (!ep.alloc_region(msg_len, &buf, &key, err) || !ep.create_qp(&qpn_, err) ||
          !ep.connect(qpn_, peer_index(cfg), dest_qpn_, err))
        return false;
      t.opcode = bulk ? wire::Opcode::kWriteMiddle : wire::Opcode::kWriteOnly;
      t.dest_qpn = qpn_;
      t.data.msg_len = msg_len;
      t.data.offset = bulk ? spec.size_bytes : 0;
      t.data.va = reinterpret_cast<uint64_t>(buf) + t.data.offset;
      t.data.rkey = key;
      if (!build_template(cfg, t, spec.size_bytes, err)) return false;
      // The ICRC is affine in the frame's bits: icrc(psn) = icrc(0) ^ the
      // change each PSN byte makes on its own. So is the FCS, of the PSN
      // and of the ICRC that follows from it.
      const size_t hlen = wire::header_len(from_peer_, t.opcode);
      psn_offset_ = hlen - wire::transport_header_len(t.opcode) + offsetof(wire::Bth, psn);
      const auto icrc_of = [&](const std::vector<uint8_t>& f) {
        return wire::packet_icrc({f.data(), hlen}, {f.data() + hlen, spec.size_bytes}, me.ev_mode);
      };
      icrc_base_ = icrc_of(frame_);
      fcs_base_ = wire::crc32(frame_);  // built with its ICRC
      std::vector<uint8_t> scratch = frame_;
      for (size_t k = 0; k < 3; ++k) {
        for (unsigned v = 0; v < 256; ++v) {
          scratch[psn_offset_ + k] = static_cast<uint8_t>(v);
          const uint32_t icrc = icrc_of(scratch);
          wire::store_icrc(icrc, scratch.data() + scratch.size() - wire::kIcrcLen);
          icrc_delta_[k][v] = icrc ^ icrc_base_;
          fcs_delta_[k][v] = wire::crc32(scratch) ^ fcs_base_;
        }
        scratch[psn_offset_ + k] = 0;
      }
      if (spec.fcs) ep.read_fcs_behind_frames();
      break;
    }
    case LinerateKind::kTx: {
      // SIZE == path_mtu: 64-packet messages, as in a bulk transfer;
      // otherwise one packet per message.
      const bool bulk = spec.size_bytes == cfg.path_mtu;
      FlowSpec f;
      f.op = TrafficOp::kWimm;
      f.size_bytes = bulk ? 64 * spec.size_bytes : spec.size_bytes;
      // As many WIMMs as the QP may have outstanding and its send queue hold.
      const uint32_t most = std::min<uint32_t>(cfg.qp.max_wimm, cfg.limits.max_send_wr);
      f.window = bulk ? std::min<uint32_t>(16, most) : most;
      uint8_t* buf = nullptr;
      uint32_t key = 0;
      if (!ep.alloc_region(uint64_t{Txgen::slots(f)} * f.size_bytes, &buf, &key, err) ||
          !ep.create_qp(&qpn_, err) || !ep.connect(qpn_, peer_index(cfg), dest_qpn_, err))
        return false;
      Txgen::SenderSetup s{qpn_, f, 0, buf, key, 0, 0};
      s.fill = false;
      ep.txgen().add_sender(s);
      const wire::Opcode op = bulk ? wire::Opcode::kWriteMiddle : wire::Opcode::kWriteOnlyImm;
      frame_bytes_ = static_cast<uint32_t>(wire::header_len(from_peer_, op) + spec.size_bytes +
                                           wire::kIcrcLen);
      if (!ep.port(0).add_tx_hook(on_tx, this)) {
        *err = "--linerate: cannot hook the port's TX bursts";
        return false;
      }
      break;
    }
  }
  if (spec.kind != LinerateKind::kTx) rte_mempool_obj_iter(ep.rx_pool(), fill_mbuf, &frame_);
  for (uint32_t p = 0; p < ep.num_planes(); ++p)
    if (!ep.port(p).add_rx_hook(on_rx, this)) {
      *err = "--linerate: cannot hook the port's RX bursts";
      return false;
    }
  return true;
}

uint64_t Linerate::packets(const EndpointSnapshot& s) const {
  switch (spec_.kind) {
    case LinerateKind::kProbe:
      return s.engine.probe_replies_tx;
    case LinerateKind::kRx:
      return s.num_qps > 0 ? s.qps[0].counters.rx_data_packets : 0;
    case LinerateKind::kTx:
      return s.num_qps > 0 ? s.qps[0].counters.tx_data_packets : 0;
  }
  return 0;
}

uint16_t Linerate::on_rx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, uint16_t, void* arg) {
  auto& self = *static_cast<Linerate*>(arg);
  if (self.spec_.kind == LinerateKind::kTx) {
    if (n == 0) return 0;
    uint16_t keep = 0;
    if (self.ack_due_) {
      wire::Transport t;
      t.opcode = wire::Opcode::kAck;
      t.dest_qpn = self.qpn_;
      t.fb.cum_psn = (self.ack_psn_ + 1) & wire::kPsnMask;
      t.fb.ref_psn = self.ack_psn_;
      t.fb.sack_base = t.fb.cum_psn;
      t.fb.echo_tag = self.ack_tag_;
      t.fb.window_mpr = self.mpr_;
      rte_mbuf* m = pkts[0];
      const std::span<uint8_t> room(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
      const size_t len = wire::build_packet(
          self.from_peer_, wire::WireEv{},
          wire::TxMarking{wire::DscpConfig{}.control, wire::kEcnNotEct}, t, {}, room);
      m->data_len = static_cast<uint16_t>(len);
      m->pkt_len = static_cast<uint32_t>(len);
      self.ack_due_ = false;
      keep = 1;
    }
    rte_pktmbuf_free_bulk(pkts + keep, n - keep);
    return keep;
  }
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    m->data_len = static_cast<uint16_t>(self.frame_bytes_);
    m->pkt_len = self.frame_bytes_;
    if (self.spec_.kind != LinerateKind::kRx) continue;
    uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
    const uint32_t psn = self.next_psn_++ & wire::kPsnMask;
    const uint8_t b[3] = {uint8_t(psn >> 16), uint8_t(psn >> 8), uint8_t(psn)};
    std::memcpy(p + self.psn_offset_, b, 3);
    const uint32_t icrc = self.icrc_base_ ^ self.icrc_delta_[0][b[0]] ^ self.icrc_delta_[1][b[1]] ^
                          self.icrc_delta_[2][b[2]];
    wire::store_icrc(icrc, p + self.frame_bytes_ - wire::kIcrcLen);
    if (self.spec_.fcs)
      wire::put_le32(p + self.frame_bytes_, self.fcs_base_ ^ self.fcs_delta_[0][b[0]] ^
                                                self.fcs_delta_[1][b[1]] ^
                                                self.fcs_delta_[2][b[2]]);
  }
  return n;
}

// The last data packet of each burst: everything up to it gets acknowledged.
uint16_t Linerate::on_tx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, void* arg) {
  auto& self = *static_cast<Linerate*>(arg);
  wire::PacketView v;
  for (uint16_t i = n; i-- > 0;) {
    const rte_mbuf* m = pkts[i];
    if (m->nb_segs != 1) continue;
    if (wire::parse({rte_pktmbuf_mtod(m, const uint8_t*), m->data_len}, self.parse_cfg_, &v) ==
            wire::ParseStatus::kOk &&
        wire::is_data(v.t.opcode)) {
      self.ack_psn_ = v.t.psn;
      self.ack_tag_ = v.t.path_tag;
      self.ack_due_ = true;
      break;
    }
  }
  return n;
}

}  // namespace softmrc::softmrcd
