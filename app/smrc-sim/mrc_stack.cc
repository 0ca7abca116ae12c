// MRC hosts over lib/engine; see mrc_stack.h.
#include "mrc_stack.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "fabric/rng.h"
#include "pattern/pattern.h"

namespace softmrc::sim {

namespace {

void check(engine::Status st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string("mrc: ") + what + ": " + st.reason());
}

// The frame every host uses towards every peer: IPv6, the EV in the UDP
// source port. Addresses encode the hosts so that framed mode is honest.
wire::FrameSpec frame_spec(uint32_t src, uint32_t dst, uint32_t plane) {
  wire::FrameSpec f;
  f.ip_version = wire::IpVersion::kV6;
  f.ev_mode = wire::EvMode::kUdp;
  f.src_mac.bytes[0] = f.dst_mac.bytes[0] = 0x02;
  f.src_mac.bytes[1] = f.dst_mac.bytes[1] = static_cast<uint8_t>(plane);
  f.src_mac.bytes[4] = static_cast<uint8_t>(src >> 8);
  f.src_mac.bytes[5] = static_cast<uint8_t>(src);
  f.dst_mac.bytes[4] = static_cast<uint8_t>(dst >> 8);
  f.dst_mac.bytes[5] = static_cast<uint8_t>(dst);
  f.src_ip[0] = f.dst_ip[0] = 0xfd;
  f.src_ip[1] = f.dst_ip[1] = static_cast<uint8_t>(plane);
  f.src_ip[14] = static_cast<uint8_t>(src >> 8);
  f.src_ip[15] = static_cast<uint8_t>(src);
  f.dst_ip[14] = static_cast<uint8_t>(dst >> 8);
  f.dst_ip[15] = static_cast<uint8_t>(dst);
  return f;
}

// The UDP source port: what the fabric hashes or reads as the path.
uint32_t ev_value(const wire::WireEv& ev) {
  return uint32_t{ev.bytes[0]} << 8 | ev.bytes[1];
}

engine::Region region_of(std::vector<uint8_t>& buf, uint32_t access) {
  engine::Region r;
  r.va = reinterpret_cast<uint64_t>(buf.data());
  r.length = buf.size();
  r.host = buf.data();
  r.access = access;
  return r;
}

}  // namespace

MrcStack::MrcStack(const Scenario& sc, const fabric::Topology& topo, StackListener& listener,
                   uint64_t seed)
    : sc_(sc), topo_(topo), listener_(listener), psn_seed_(fabric::mix64(seed)) {
  const MrcConfig& m = sc.mrc;
  const uint32_t planes = topo.planes();
  // Enough to keep a connection to every peer, up to 256.
  max_qps_ = m.max_qps != 0 ? m.max_qps : std::min(topo.hosts() - 1, 256u);

  for (uint32_t p = 0; p < planes; ++p) {
    for (uint32_t i = 0; i < m.evs_per_plane; ++i) {
      engine::EvEntry e{};
      e.plane = static_cast<uint8_t>(p);
      const uint32_t v = topo.config().ev_routing == fabric::EvRouting::kStructured
                             ? i
                             : 0xc000 + p * m.evs_per_plane + i;
      e.value.bytes[0] = static_cast<uint8_t>(v >> 8);
      e.value.bytes[1] = static_cast<uint8_t>(v);
      evs_.push_back(e);
    }
  }
  const wire::FrameSpec f = frame_spec(0, 1, 0);
  for (unsigned op = 0; op < 256; ++op)
    if (wire::is_known_opcode(static_cast<uint8_t>(op)))
      header_len_[op] = static_cast<uint16_t>(wire::header_len(f, static_cast<wire::Opcode>(op)));
  const auto frame_len = [&](wire::Opcode op, uint32_t payload) {
    return header_len_[static_cast<uint8_t>(op)] + payload + wire::kIcrcLen;
  };
  const TimeNs rtt = topo.base_rtt_ns(frame_len(wire::Opcode::kWriteMiddle, m.mtu),
                                      frame_len(wire::Opcode::kAck, 0));
  attr_.evs = evs_;
  attr_.ev_config.num_planes = static_cast<uint8_t>(planes);
  attr_.ev_config.min_active = m.min_active != 0 ? m.min_active : m.evs_per_plane;
  attr_.ev_config.policy =
      m.ecn_avoid ? engine::SprayPolicy::kEcnAvoid : engine::SprayPolicy::kRoundRobin;
  attr_.ev_config.probe_initial_ns = m.probe_initial_ns;
  attr_.ev_config.probe_max_ns = m.probe_max_ns;
  attr_.ev_config.ecn_avoid_ns = 4 * rtt;
  if (m.nscc) {
    attr_.cc.algorithm = engine::CcAlgorithm::kNscc;
    attr_.cc.nscc =
        engine::default_nscc_params(topo.config().host_link_mbps * 1'000'000 * planes, rtt, m.mtu);
  }
  attr_.path_mtu = m.mtu;
  attr_.mpr = attr_.mpr_dest = m.mpr;
  attr_.max_wimm = attr_.max_wimm_dest = 4;
  attr_.timeout = m.timeout;
  attr_.retry_linear = m.retry_linear;
  attr_.retry_exp = m.retry_exp;

  if (!sc.run.verify) {
    shared_src_.assign(sc.workload.message_bytes, 0x5a);
    shared_sink_.assign(sc.workload.message_bytes, 0);
  }
  tx_.resize(64);
  if (sc.run.framed) frame_buf_.resize(wire::kMaxHeaderLen + wire::kMaxPayload + wire::kIcrcLen);
  hosts_.resize(topo.hosts());
  for (uint32_t h = 0; h < topo.hosts(); ++h) init_host(h);
}

void MrcStack::init_host(uint32_t id) {
  Host& h = hosts_[id];
  engine::EndpointConfig cfg;
  cfg.num_planes = static_cast<uint8_t>(topo_.planes());
  cfg.max_qps = max_qps_;
  cfg.max_regions = sc_.run.verify ? max_qps_ + 2 : 2;
  cfg.qp.max_mpr = sc_.mrc.mpr;
  cfg.qp.max_wimm = 4;
  cfg.qp.max_send_wr = 2;
  cfg.qp.max_recv_wr = 2;
  cfg.ctrl_queue_packets = 1024;
  cfg.event_queue = 1024;
  cfg.tuning = sc_.mrc.tuning;
  check(h.ep.init(cfg), "endpoint init");
  h.conns.resize(max_qps_);
  constexpr uint32_t kRw = engine::kAccessLocalWrite | engine::kAccessRemoteWrite;
  if (sc_.run.verify) {
    // Each host's source bytes are its own pattern stream: a packet placed
    // at the wrong offset or from the wrong sender fails verification.
    h.src.assign(sc_.workload.message_bytes, 0);
    pattern::fill(h.src.data(), h.src.size(), id, 0);
    check(h.ep.register_region(region_of(h.src, kRw), &h.src_key), "register source");
    h.src_va = reinterpret_cast<uint64_t>(h.src.data());
  } else {
    check(h.ep.register_region(region_of(shared_src_, kRw), &h.src_key), "register source");
    check(h.ep.register_region(region_of(shared_sink_, kRw), &h.sink_key), "register sink");
    h.src_va = reinterpret_cast<uint64_t>(shared_src_.data());
  }
}

MrcStack::QpTotals MrcStack::totals(const engine::Qp& q) {
  const engine::QpCounters& c = q.counters();
  QpTotals t;
  std::copy(c.retransmits.begin(), c.retransmits.end(), t.retx.begin());
  t.timeouts = c.timeouts;
  t.duplicates_rx = c.rx_duplicates;
  t.trimmed_rx = c.rx_trimmed;
  return t;
}

void MrcStack::add(StackCounters& to, const QpTotals& now, const QpTotals& base) {
  using engine::RetxCause;
  const auto retx = [&](RetxCause r) {
    return now.retx[static_cast<size_t>(r)] - base.retx[static_cast<size_t>(r)];
  };
  to.retx_trim += retx(RetxCause::kTrim);
  to.retx_sack += retx(RetxCause::kSack);
  to.retx_timeout += retx(RetxCause::kTimeout);
  to.retx_oow += retx(RetxCause::kOutOfWindow);
  to.retx_plane += retx(RetxCause::kPlaneDown);
  to.retx_tail_probe += retx(RetxCause::kTailProbe);
  to.needless += now.duplicates_rx - base.duplicates_rx;
  for (size_t r = 0; r < now.retx.size(); ++r) to.retransmits += now.retx[r] - base.retx[r];
  to.timeouts += now.timeouts - base.timeouts;
  to.trimmed_rx += now.trimmed_rx - base.trimmed_rx;
}

const StackCounters& MrcStack::counters() const {
  report_ = counters_;
  for (const Host& h : hosts_)
    for (uint32_t qpn = 1; qpn <= h.created; ++qpn)
      if (h.conns[qpn - 1].connected) add(report_, totals(*h.ep.qp(qpn)), h.conns[qpn - 1].base);
  return report_;
}

// Resets both ends of the pair `qpn` of `host` belongs to; both QPs go back
// to their hosts' free lists.
void MrcStack::reset_pair(uint32_t host, uint32_t qpn, TimeNs now) {
  uint32_t ends[2][2] = {{host, qpn},
                         {hosts_[host].conns[qpn - 1].peer, hosts_[host].conns[qpn - 1].peer_qpn}};
  for (const auto& [h_id, q] : ends) {
    Host& h = hosts_[h_id];
    Conn& c = h.conns[q - 1];
    if (!c.connected) continue;
    add(counters_, totals(*h.ep.qp(q)), c.base);
    engine::QpAttr reset;
    reset.state = engine::QpState::kReset;
    check(h.ep.modify_qp(q, reset, engine::kAttrState, now), "reset");
    h.qpn_to.erase(c.peer);
    c.connected = false;
    c.sending = c.receiving = kNone;
    ++c.gen;
    h.free_qpns.push_back(q);
  }
}

// A QP for a new connection at `host`: a free one, a new one, or the least
// recently used idle connection, reset.
bool MrcStack::alloc_qp(uint32_t host, uint32_t* qpn, TimeNs now) {
  Host& h = hosts_[host];
  if (h.free_qpns.empty() && h.created < max_qps_) {
    check(h.ep.create_qp(qpn), "create_qp");
    ++h.created;
    return true;
  }
  if (h.free_qpns.empty()) {
    uint32_t victim = kNone;
    for (uint32_t q = 1; q <= h.created; ++q) {
      const Conn& c = h.conns[q - 1];
      if (c.connected && c.idle() && hosts_[c.peer].conns[c.peer_qpn - 1].idle() &&
          (victim == kNone || c.last_used < h.conns[victim - 1].last_used))
        victim = q;
    }
    if (victim == kNone) return false;
    reset_pair(host, victim, now);
  }
  *qpn = h.free_qpns.back();
  h.free_qpns.pop_back();
  return true;
}

// The pair for t.src -> t.dst: the connection they have, or a new one.
// False if that is busy in this direction or no QP is to be had.
bool MrcStack::pair(const Transfer& t, uint32_t* sq, uint32_t* dq, TimeNs now) {
  Host& s = hosts_[t.src];
  if (const auto it = s.qpn_to.find(t.dst); it != s.qpn_to.end()) {
    *sq = it->second;
    *dq = s.conns[*sq - 1].peer_qpn;
    return s.conns[*sq - 1].sending == kNone && hosts_[t.dst].conns[*dq - 1].receiving == kNone;
  }
  if (!alloc_qp(t.src, sq, now)) return false;
  if (!alloc_qp(t.dst, dq, now)) {
    s.free_qpns.push_back(*sq);
    return false;
  }
  Host& d = hosts_[t.dst];
  Conn& sc = s.conns[*sq - 1];
  Conn& dc = d.conns[*dq - 1];
  sc.connected = dc.connected = true;
  sc.peer = t.dst;
  sc.peer_qpn = *dq;
  sc.peer_gen = dc.gen;
  dc.peer = t.src;
  dc.peer_qpn = *sq;
  dc.peer_gen = sc.gen;
  s.qpn_to[t.dst] = *sq;
  d.qpn_to[t.src] = *dq;
  // Start PSNs vary per connection and wrap now and then.
  const auto psn = [&] { return static_cast<uint32_t>(fabric::mix64(++psn_seed_)) & 0xffffff; };
  const uint32_t forward = psn(), backward = psn();
  connect(t.src, *sq, t.dst, *dq, forward, backward, now);
  connect(t.dst, *dq, t.src, *sq, backward, forward, now);
  ++counters_.connections;
  return true;
}

void MrcStack::connect(uint32_t host, uint32_t qpn, uint32_t peer, uint32_t peer_qpn,
                       uint32_t sq_psn, uint32_t rq_psn, TimeNs now) {
  engine::QpAttr a = attr_;
  a.peer = peer;
  a.dest_qpn = peer_qpn;
  a.sq_psn = sq_psn;
  a.rq_psn = rq_psn;
  Host& h = hosts_[host];
  check(h.ep.connect_qp(qpn, a, now), "connect_qp");
  h.conns[qpn - 1].base = totals(*h.ep.qp(qpn));
}

uint32_t MrcStack::take_slot(uint32_t host) {
  Host& h = hosts_[host];
  if (!h.free_slots.empty()) {
    const uint32_t i = h.free_slots.back();
    h.free_slots.pop_back();
    return i;
  }
  auto s = std::make_unique<Slot>();
  s->buf.assign(sc_.workload.message_bytes, 0);
  check(h.ep.register_region(
            region_of(s->buf, engine::kAccessLocalWrite | engine::kAccessRemoteWrite), &s->key),
        "register slot");
  h.slots.push_back(std::move(s));
  return static_cast<uint32_t>(h.slots.size() - 1);
}

bool MrcStack::try_start(const Transfer& t, TimeNs now) {
  uint32_t sq = 0, dq = 0;
  if (!pair(t, &sq, &dq, now)) return false;
  Host& s = hosts_[t.src];
  Host& d = hosts_[t.dst];
  s.conns[sq - 1].sending = t.id;
  d.conns[dq - 1].receiving = t.id;
  s.conns[sq - 1].last_used = d.conns[dq - 1].last_used = ++use_clock_;
  if (active_.size() <= t.id) active_.resize(t.id + 1);
  Active& a = active_[t.id];
  a = Active{};
  a.live = true;
  a.t = t;
  a.src_qpn = sq;
  a.dst_qpn = dq;
  engine::WriteRequest wr;
  if (sc_.run.verify) {
    a.slot = take_slot(t.dst);
    const Slot& slot = *d.slots[a.slot];
    wr.remote_addr = reinterpret_cast<uint64_t>(slot.buf.data());
    wr.rkey = slot.key;
  } else {
    wr.remote_addr = reinterpret_cast<uint64_t>(shared_sink_.data());
    wr.rkey = d.sink_key;
  }
  check(d.ep.post_recv(dq, engine::RecvRequest{t.id}), "post_recv");
  wr.wr_id = t.id;
  wr.local_addr = s.src_va;
  wr.length = static_cast<uint32_t>(t.bytes);
  wr.lkey = s.src_key;
  wr.with_imm = true;
  wr.imm = t.id;
  check(s.ep.post_write(sq, wr), "post_write");
  listener_.wake(t.src);
  return true;
}

void MrcStack::start(const Transfer& t, TimeNs now) {
  if (try_start(t, now)) return;
  ++counters_.waits;
  const auto idx = static_cast<uint32_t>(waiting_.size());
  waiting_.push_back(t);
  waiting_done_.push_back(0);
  ++waiting_left_;
  hosts_[t.src].waiting.push_back(idx);
  hosts_[t.dst].waiting.push_back(idx);
}

// Something was released at `host`: start the transfers waiting on it,
// oldest first.
void MrcStack::retry_waiting(uint32_t host, TimeNs now) {
  Host& h = hosts_[host];
  size_t keep = 0;
  for (size_t i = 0; i < h.waiting.size(); ++i) {
    const uint32_t idx = h.waiting[i];
    if (waiting_done_[idx]) continue;
    if (try_start(waiting_[idx], now)) {
      waiting_done_[idx] = 1;
      --waiting_left_;
    } else {
      h.waiting[keep++] = idx;
    }
  }
  h.waiting.resize(keep);
  if (waiting_left_ == 0) {
    waiting_.clear();
    waiting_done_.clear();
  }
}

void MrcStack::finish(uint32_t transfer, TimeNs now, const char* failure) {
  Active* found = find_active(transfer);
  if (!found) return;
  const Active a = *found;
  found->live = false;
  Host& s = hosts_[a.t.src];
  Host& d = hosts_[a.t.dst];
  if (a.slot != kNone) d.free_slots.push_back(a.slot);
  Conn& sc = s.conns[a.src_qpn - 1];
  Conn& dc = d.conns[a.dst_qpn - 1];
  if (sc.connected && sc.sending == transfer) sc.sending = kNone;
  if (dc.connected && dc.receiving == transfer) dc.receiving = kNone;
  // A QP in ERROR takes its pair down, and whatever else the pair carried.
  uint32_t other = kNone;
  if (failure && sc.connected) {
    other = sc.receiving;
    reset_pair(a.t.src, a.src_qpn, now);
  }
  if (failure)
    listener_.failed(transfer, now, failure);
  else
    listener_.done(transfer, now);
  if (other != kNone) finish(other, now, "its connection failed");
  retry_waiting(a.t.src, now);
  retry_waiting(a.t.dst, now);
}

void MrcStack::on_completion(uint32_t host, const engine::Completion& c, TimeNs now) {
  Active* found = find_active(static_cast<uint32_t>(c.wr_id));
  if (!found) return;  // a flush after the transfer already failed
  Active& a = *found;
  if (c.status != engine::WcStatus::kSuccess) {
    ++counters_.qp_errors;
    finish(a.t.id, now, engine::wc_status_name(c.status));
    return;
  }
  if (c.opcode == engine::WcOpcode::kRecvWriteImm) {
    bool ok = c.imm == a.t.id && c.byte_len == a.t.bytes;
    if (ok && a.slot != kNone) {
      std::vector<uint8_t>& got = hosts_[host].slots[a.slot]->buf;
      ok = pattern::verify(got.data(), a.t.bytes, a.t.src, 0);
      std::fill(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(a.t.bytes), 0);
    }
    if (!ok) {
      ++counters_.verify_failures;
      finish(a.t.id, now, "delivered data differs from what was sent");
      return;
    }
    a.delivered = true;
    listener_.delivered(a.t.id, now);
  } else {
    a.sent = true;
  }
  if (a.sent && a.delivered) finish(a.t.id, now, nullptr);
}

void MrcStack::drain(uint32_t host, TimeNs now) {
  Host& h = hosts_[host];
  engine::Completion wc[32];
  for (size_t n; (n = h.ep.poll_completions(wc, 32)) > 0;)
    for (size_t i = 0; i < n; ++i) on_completion(host, wc[i], now);
  engine::Event ev[32];
  for (size_t n; (n = h.ep.poll_events(ev, 32)) > 0;) {
    for (size_t i = 0; i < n; ++i) {
      const engine::Event& e = ev[i];
      if (e.qpn == 0 || e.qpn > h.created) continue;
      const Conn& conn = h.conns[e.qpn - 1];
      if (e.type == engine::EventType::kEvStateChange) {
        EvChange c;
        c.host = host;
        c.peer = conn.peer;
        c.plane = e.ev.plane;
        c.ev = e.ev.ev;
        c.from = engine::ev_state_name(e.ev.old_state);
        c.to = engine::ev_state_name(e.ev.new_state);
        c.to_bad = e.ev.new_state == engine::EvState::kAssumedBad;
        c.to_good = e.ev.old_state == engine::EvState::kAssumedBad &&
                    e.ev.new_state == engine::EvState::kGood;
        counters_.ev_to_bad += c.to_bad;
        counters_.ev_to_good += c.to_good;
        listener_.ev_change(c, now);
      } else if (e.type == engine::EventType::kQpError) {
        if (listener_.tracing())
          listener_.note(now, "host " + std::to_string(host) + " qp " + std::to_string(e.qpn) +
                                  " error: " + (e.reason ? e.reason : "?"));
        const uint32_t transfer = conn.sending != kNone ? conn.sending : conn.receiving;
        if (transfer != kNone) {
          ++counters_.qp_errors;
          finish(transfer, now, e.reason ? e.reason : "QP error");
        }
      }
    }
  }
}

void MrcStack::fill(uint32_t host, const engine::TxPacket& tx, SimPacket* p) {
  const Host& h = hosts_[host];
  p->src = host;
  p->dst = tx.peer;
  p->plane = tx.plane;
  p->dst_gen = tx.src_qpn != 0 ? h.conns[tx.src_qpn - 1].peer_gen : 0;
  const uint32_t hdr = header_len_[static_cast<uint8_t>(tx.t.opcode)];
  p->meta = fabric::PacketMeta{};
  p->meta.bytes = hdr + tx.payload_len + wire::kIcrcLen;
  p->meta.header_bytes = hdr;
  p->meta.ev = ev_value(*tx.wire_ev);
  p->meta.control = !tx.is_data;
  p->meta.trimmable = tx.is_data;
  p->meta.ecn_capable = tx.is_data;
  p->t = tx.t;
  p->payload = tx.payload;
  p->payload_len = tx.payload_len;
  if (tx.is_data) ++counters_.data_packets;
  if (!sc_.run.framed) return;
  const wire::DscpConfig dscp;
  const wire::TxMarking mark = tx.is_data ? wire::TxMarking{dscp.trimmable, wire::kEcnEct0}
                                          : wire::TxMarking{dscp.control, wire::kEcnNotEct};
  const size_t len = wire::build_packet(frame_spec(host, tx.peer, tx.plane), *tx.wire_ev, mark,
                                        tx.t, {tx.payload, tx.payload_len}, frame_buf_);
  if (len == 0) throw std::runtime_error("mrc: the engine emitted a packet lib/wire cannot build");
  p->frame.assign(frame_buf_.begin(), frame_buf_.begin() + static_cast<std::ptrdiff_t>(len));
}

size_t MrcStack::poll_tx(uint32_t host, SimPacket* const* out, size_t max, TimeNs now) {
  max = std::min(max, tx_.size());
  const size_t n = hosts_[host].ep.poll_tx(tx_.data(), max, now);
  for (size_t i = 0; i < n; ++i) fill(host, tx_[i], out[i]);
  drain(host, now);  // timers may have completed or failed something
  return n;
}

void MrcStack::deliver(SimPacket& p, TimeNs now) {
  Host& h = hosts_[p.dst];
  wire::PacketView pv;
  if (sc_.run.framed) {
    // Dropped, as a NIC drops them; the sender resends as for a loss.
    if (const wire::ParseStatus st = wire::parse(p.frame, wire::ParseConfig{}, &pv);
        st != wire::ParseStatus::kOk) {
      ++(st == wire::ParseStatus::kBadIcrc ? counters_.icrc_errors : counters_.parse_errors);
      return;
    }
  } else {
    pv.t = p.t;
    pv.ecn = p.meta.ce ? wire::kEcnCe : p.meta.ecn_capable ? wire::kEcnEct0 : wire::kEcnNotEct;
    pv.trimmed = p.meta.trimmed;
    if (!p.meta.trimmed) {
      pv.payload = p.payload;
      pv.payload_len = p.payload_len;
    }
  }
  const uint32_t qpn = pv.t.dest_qpn;
  if (qpn == 0 || qpn > h.created || !h.conns[qpn - 1].connected ||
      h.conns[qpn - 1].gen != p.dst_gen) {
    ++counters_.stale_rx;
    return;
  }
  const engine::Qp* q = h.ep.qp(qpn);
  const uint64_t before = q->counters().rx_data_bytes;
  h.ep.on_packet(pv, static_cast<uint8_t>(p.plane), now, p.src);
  const uint64_t placed = q->counters().rx_data_bytes - before;
  if (placed) listener_.goodput(p.dst, placed, now);
  drain(p.dst, now);
}

TimeNs MrcStack::next_wakeup(uint32_t host) const {
  return hosts_[host].ep.next_wakeup();
}

void MrcStack::set_port_up(uint32_t host, uint32_t plane, bool up, TimeNs now) {
  hosts_[host].ep.set_plane_up(static_cast<uint8_t>(plane), up, now);
  drain(host, now);
}

}  // namespace softmrc::sim
