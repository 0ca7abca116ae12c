// The endpoint: QP table, dispatch of arriving packets, the transmit
// scheduler and the plane state. See endpoint.h.
#include "engine/endpoint.h"

#include <algorithm>

namespace softmrc::engine {

namespace {

// The framer's default path to a peer, for replies to connectionless probes.
const wire::WireEv kDefaultEv{};

bool connected(const Qp& q) {
  return q.state() == QpState::kRtr || q.state() == QpState::kRts;
}

}  // namespace

Status Endpoint::init(const EndpointConfig& cfg) {
  if (cfg.num_planes == 0 || cfg.num_planes > kMaxPlanes)
    return Status::error("endpoint: num_planes not 1..32");
  if (cfg.max_qps == 0 || cfg.max_qps > wire::kQpnMask)
    return Status::error("endpoint: max_qps not 1..2^24-1");
  if (cfg.qp.max_mpr == 0) return Status::error("endpoint: max_mpr is 0");
  if (cfg.tuning.ack_every_packets == 0) return Status::error("endpoint: ack_every_packets is 0");
  if (cfg.tuning.reorder_threshold == 0) return Status::error("endpoint: reorder_threshold is 0");
  cfg_ = cfg;
  cfg_.qp.num_planes = cfg.num_planes;
  mem_.init(cfg.max_regions);
  qps_.clear();
  qps_.resize(cfg.max_qps);
  in_use_.assign(cfg.max_qps, false);
  live_.clear();
  live_.reserve(cfg.max_qps);
  ready_.init(cfg.max_qps);
  queued_.assign(cfg.max_qps, false);
  timers_.init(cfg.max_qps);
  gone_timers_.init(cfg.max_qps);
  gone_.assign(cfg.max_qps, GoneNotice{});
  ctrl_.init(cfg.ctrl_queue_packets);
  events_.init(cfg.event_queue, cfg.max_qps);
  const uint64_t cq = cfg.completion_queue != 0
                          ? cfg.completion_queue
                          : uint64_t{cfg.max_qps} * (cfg.qp.max_send_wr + cfg.qp.max_recv_wr);
  cq_.init(static_cast<uint32_t>(std::min<uint64_t>(cq, uint64_t{1} << 30)));
  cq_overflowing_ = false;
  local_planes_ = cfg.num_planes == 32 ? UINT32_MAX : (1u << cfg.num_planes) - 1;
  port_status_seq_ = 0;
  counters_ = EndpointCounters{};
  return {};
}

Qp* Endpoint::find(uint32_t qpn) {
  if (qpn == 0 || qpn > qps_.size() || !in_use_[qpn - 1]) return nullptr;
  return &qps_[qpn - 1];
}

const Qp* Endpoint::qp(uint32_t qpn) const {
  if (qpn == 0 || qpn > qps_.size() || !in_use_[qpn - 1]) return nullptr;
  return &qps_[qpn - 1];
}

Status Endpoint::create_qp(uint32_t* qpn, uint32_t domain) {
  // The first free QPN, but one whose aborted QP still sends notices only
  // if no other is free: taking it ends them.
  uint32_t index = UINT32_MAX;
  for (uint32_t i = 0; i < in_use_.size(); ++i) {
    if (in_use_[i]) continue;
    if (!gone_[i].rounds_left) {
      index = i;
      break;
    }
    if (index == UINT32_MAX) index = i;
  }
  if (index == UINT32_MAX) return Status::error("create_qp: no free QP");
  gone_[index] = GoneNotice{};
  gone_timers_.set(index, kNever);
  in_use_[index] = true;
  *qpn = index + 1;  // QPN 0 is the connectionless probe target
  qps_[index].init(*qpn, domain, cfg_.qp, cfg_.tuning);
  live_.push_back(*qpn);
  return {};
}

// Control packets still queued for a QP point into its EV set: drop them
// before the EV set goes away (destroy) or is rebuilt (reset).
void Endpoint::purge_ctrl(uint32_t qpn) {
  ctrl_.erase_if([qpn](const TxPacket& p) { return p.src_qpn == qpn; });
}

Status Endpoint::destroy_qp(uint32_t qpn) {
  const Qp* q = find(qpn);
  if (q == nullptr) return Status::error("destroy_qp: unknown QPN");
  for (uint64_t n : q->counters().retransmits) counters_.destroyed_qp_retransmits += n;
  purge_ctrl(qpn);
  in_use_[qpn - 1] = false;
  qps_[qpn - 1] = Qp{};  // releases its tables
  live_.erase(std::find(live_.begin(), live_.end(), qpn));
  timers_.set(qpn - 1, kNever);
  if (queued_[qpn - 1]) {
    queued_[qpn - 1] = false;
    ready_.erase_if([qpn](uint32_t other) { return other == qpn; });
  }
  return {};
}

Endpoint::GoneNotice Endpoint::gone_notice(const Qp& q) {
  return GoneNotice{.peer = q.attr().peer,
                    .dest_qpn = q.attr().dest_qpn,
                    .epsn = q.epsn(),
                    .snd_nxt = q.snd_nxt(),
                    .mpr_dest = q.attr().mpr_dest,
                    .rounds_left = 1 + kGoneNoticeResends,
                    .interval = ack_timeout_ns(q.attr().timeout)};
}

Status Endpoint::abort_qp(uint32_t qpn, TimeNs now) {
  const Qp* q = find(qpn);
  if (q == nullptr) return Status::error("abort_qp: unknown QPN");
  const bool tell = connected(*q);
  const GoneNotice notice = gone_notice(*q);
  const Status st = destroy_qp(qpn);
  if (!tell) return st;
  gone_[qpn - 1] = notice;
  send_gone_round(qpn, now);
  return st;
}

Status Endpoint::abandon_qp(uint32_t qpn, TimeNs now) {
  const Qp* q = find(qpn);
  if (q == nullptr) return Status::error("abandon_qp: unknown QPN");
  if (connected(*q)) (void)queue_gone_notices(gone_notice(*q), qpn);
  QpAttr error;
  error.state = QpState::kError;
  return modify_qp(qpn, error, kAttrState, now);
}

bool Endpoint::queue_gone_notices(const GoneNotice& g, uint32_t qpn) {
  bool whole = true;
  for (uint8_t plane = 0; plane < cfg_.num_planes; ++plane) {
    if (!plane_up(plane)) continue;
    // Not a QP's own packet: it goes on the default path, which outlives
    // the QP and its EV set.
    TxPacket* out =
        queue_connectionless(g.peer, plane, &kDefaultEv, wire::Opcode::kNack, g.dest_qpn);
    if (out == nullptr) {
      ++counters_.ctrl_dropped;
      whole = false;
      continue;
    }
    wire::Feedback& fb = out->t.fb;
    fb.cum_psn = fb.ref_psn = g.epsn;
    fb.sack_base = g.snd_nxt;
    fb.echo_tag = qpn;  // names the QP that is gone
    fb.window_mpr = g.mpr_dest;
    fb.code = wire::NackCode::kQpGone;
    ++counters_.qp_gone_tx;
  }
  return whole;
}

// A round the control queue had no room for is tried again by the next
// poll_tx, after this one has drained some of the queue: an application
// with many QPs has them all aborted at once, and their rounds fall due
// together.
void Endpoint::send_gone_round(uint32_t qpn, TimeNs now) {
  GoneNotice& g = gone_[qpn - 1];
  if (!queue_gone_notices(g, qpn)) {
    gone_timers_.set(qpn - 1, now + 1);
    return;
  }
  gone_timers_.set(qpn - 1, --g.rounds_left ? now + g.interval : kNever);
  g.interval *= 2;
}

void Endpoint::make_ready(uint32_t qpn) {
  if (queued_[qpn - 1]) return;
  queued_[qpn - 1] = true;
  ready_.push(qpn);  // cannot fail: one slot per QP
}

void Endpoint::touched(uint32_t qpn) {
  make_ready(qpn);
  timers_.set(qpn - 1, qps_[qpn - 1].next_timer());
}

Status Endpoint::modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t mask, TimeNs now) {
  Qp* q = find(qpn);
  if (q == nullptr) return Status::error("modify_qp: unknown QPN");
  if ((mask & kAttrState) && attr.state == QpState::kReset) purge_ctrl(qpn);
  Sinks s = sinks();
  const Status st = q->modify(attr, mask, now, s);
  touched(qpn);
  return st;
}

Status Endpoint::connect_qp(uint32_t qpn, const QpAttr& attr, TimeNs now, QpState last) {
  static constexpr struct {
    QpState state;
    uint32_t mask;
  } kSteps[] = {
      {QpState::kInit, kAttrEvProfile | kAttrCcProfile},
      {QpState::kRtr,
       kAttrDest | kAttrPathMtu | kAttrRqPsn | kAttrMprDest | kAttrMaxWimmDest | kAttrCaps},
      {QpState::kRts,
       kAttrSqPsn | kAttrMpr | kAttrMaxWimm | kAttrTimeout | kAttrRetryCnt | kAttrCaps},
  };
  QpAttr step = attr;
  for (const auto& s : kSteps) {
    step.state = s.state;
    if (Status st = modify_qp(qpn, step, kAttrState | s.mask, now); !st.ok()) return st;
    if (s.state == last) break;
  }
  return {};
}

Status Endpoint::query_qp(uint32_t qpn, QpState* state, QpAttr* attr) const {
  const Qp* q = qp(qpn);
  if (q == nullptr) return Status::error("query_qp: unknown QPN");
  *state = q->state();
  *attr = q->attr();
  return {};
}

Status Endpoint::register_region(const Region& region, uint32_t* key) {
  return mem_.register_region(region, key);
}

Status Endpoint::deregister_region(uint32_t key) {
  return mem_.deregister_region(key);
}

Status Endpoint::post_write(uint32_t qpn, const WriteRequest& wr) {
  Qp* q = find(qpn);
  if (q == nullptr) return Status::error("post_write: unknown QPN");
  const Status st = q->post_write(wr, mem_);
  if (st.ok()) touched(qpn);
  return st;
}

Status Endpoint::post_recv(uint32_t qpn, const RecvRequest& wr) {
  Qp* q = find(qpn);
  if (q == nullptr) return Status::error("post_recv: unknown QPN");
  return q->post_recv(wr);
}

void Endpoint::on_packet(const wire::PacketView& pkt, uint8_t plane, TimeNs now, uint32_t src_peer,
                         wire::DeferredCopy* deferred) {
  if (deferred != nullptr) *deferred = {};
  ++counters_.rx_packets;
  if (plane >= cfg_.num_planes) {
    ++counters_.rx_bad_plane;
    return;
  }
  const wire::Opcode op = pkt.t.opcode;
  if (op == wire::Opcode::kProbeRequest) {
    answer_probe(pkt, plane, now, src_peer);
    return;
  }
  const uint32_t qpn = pkt.t.dest_qpn & wire::kQpnMask;
  if (op == wire::Opcode::kProbeReply && qpn == kQpnConnectionless) {
    Event e;
    e.type = EventType::kProbeReply;
    e.probe_req_id = pkt.t.probe.req_id;
    e.plane = plane;
    e.rtt_ns = now - std::min<TimeNs>(now, pkt.t.probe.t_send_ns);
    if (!events_.push(e)) ++counters_.events_lost;
    return;
  }
  Qp* q = find(qpn);
  if (q == nullptr || (q->state() != QpState::kRtr && q->state() != QpState::kRts)) {
    ++counters_.rx_unknown_qpn;
    return;
  }
  Sinks s = sinks();
  s.deferred = deferred;
  if (wire::is_data(op))
    q->on_data(pkt, plane, now, s);
  else if (wire::is_feedback(op))
    q->on_feedback(pkt, src_peer, now, s);
  else if (op == wire::Opcode::kProbeReply)
    q->on_probe_reply(pkt, now, s);
  else if (op == wire::Opcode::kPortStatus)
    q->on_port_status(pkt, src_peer, now, s);
  else
    ++counters_.rx_unexpected;
  touched(qpn);
}

// Probe requests are answered by the endpoint, on the plane they came in
// on: for a QP over one of its EVs, for QPN 0 over the framer's default path.
// A QP with no usable EV answers on the default path too: when both ends
// have none (each blacklisted the EVs of a plane that went dark, then lost
// their other planes), unanswered probes would keep them apart for good.
void Endpoint::answer_probe(const wire::PacketView& pkt, uint8_t plane, TimeNs now,
                            uint32_t src_peer) {
  const uint32_t qpn = pkt.t.dest_qpn & wire::kQpnMask;
  Qp* q = qpn == kQpnConnectionless ? nullptr : find(qpn);
  uint32_t ev = kNoEv;
  if (q != nullptr) {
    if (q->state() != QpState::kRtr && q->state() != QpState::kRts) {
      ++counters_.rx_unknown_qpn;
      return;
    }
    ev = q->evs().pick_on_plane(plane, now);
    if (ev == kNoEv) ev = q->evs().pick(now);
  } else if (qpn != kQpnConnectionless || src_peer == kUnknownPeer) {
    ++counters_.rx_unknown_qpn;
    return;
  }
  TxPacket* out = ctrl_.emplace();
  if (out == nullptr) {
    ++counters_.ctrl_dropped;
    return;
  }
  out->peer = q ? q->attr().peer : src_peer;
  out->src_qpn = q ? qpn : kQpnConnectionless;
  out->plane = ev != kNoEv ? q->evs().entry(ev).plane : plane;
  out->ev = ev;
  out->wire_ev = ev != kNoEv ? &q->evs().entry(ev).value : &kDefaultEv;
  out->is_data = false;
  clear_transport(out);
  out->t.opcode = wire::Opcode::kProbeReply;
  out->t.dest_qpn = q ? q->attr().dest_qpn : kQpnConnectionless;
  out->t.path_tag = ev;
  out->t.probe.req_id = pkt.t.probe.req_id;
  out->t.probe.port = plane;
  out->t.probe.flags = wire::kProbeSvcTimeValid;
  out->t.probe.echo_tag = pkt.t.path_tag;
  out->t.probe.t_send_ns = pkt.t.probe.t_send_ns;
  out->t.probe.service_time_ns = 0;  // answered within this call
  out->payload = nullptr;
  out->payload_len = 0;
  ++counters_.probe_replies_tx;
}

Status Endpoint::send_probe(uint32_t peer, uint8_t plane, const wire::WireEv* ev, uint16_t req_id,
                            TimeNs now) {
  if (plane >= cfg_.num_planes) return Status::error("send_probe: unknown plane");
  if (ev == nullptr) return Status::error("send_probe: no EV");
  TxPacket* out =
      queue_connectionless(peer, plane, ev, wire::Opcode::kProbeRequest, kQpnConnectionless);
  if (out == nullptr) return Status::error("send_probe: control queue full");
  out->t.probe.req_id = req_id;
  out->t.probe.t_send_ns = now;
  return {};
}

TxPacket* Endpoint::queue_connectionless(uint32_t peer, uint8_t plane, const wire::WireEv* ev,
                                         wire::Opcode op, uint32_t dest_qpn) {
  TxPacket* out = ctrl_.emplace();
  if (out == nullptr) return nullptr;
  out->peer = peer;
  out->src_qpn = kQpnConnectionless;
  out->plane = plane;
  out->ev = kNoEv;
  out->wire_ev = ev;
  out->is_data = false;
  clear_transport(out);
  out->t.opcode = op;
  out->t.dest_qpn = dest_qpn;
  out->payload = nullptr;
  out->payload_len = 0;
  return out;
}

size_t Endpoint::poll_tx(TxPacket* out, size_t max, TimeNs now) {
  Sinks s = sinks();
  while (gone_timers_.top_time() <= now) send_gone_round(gone_timers_.top_key() + 1, now);
  // Due timers make their QPs ready; they are re-armed once polled below.
  while (timers_.top_time() <= now) {
    const uint32_t qpn = timers_.top_key() + 1;
    qps_[qpn - 1].on_timers(now, s);
    timers_.set(qpn - 1, kNever);
    make_ready(qpn);
  }
  size_t n = 0;
  for (; n < max && !ctrl_.empty(); ctrl_.pop()) out[n++] = ctrl_.front();
  ctrl_.restart_if_empty();
  // Round-robin over ready QPs, a burst each: one that fills its burst goes
  // back to the tail, one that runs dry leaves until something touches it.
  while (n < max && !ready_.empty()) {
    const uint32_t qpn = ready_.front();
    ready_.pop();
    Qp& q = qps_[qpn - 1];
    uint32_t b = 0;
    while (b < kQpTxBurst && n < max && q.poll_packet(now, &out[n])) {
      ++n;
      ++b;
    }
    if (b == kQpTxBurst || n == max)
      ready_.push(qpn);
    else
      queued_[qpn - 1] = false;
    timers_.set(qpn - 1, q.next_timer());
  }
  return n;
}

size_t Endpoint::poll_completions(Completion* out, size_t max) {
  size_t n = 0;
  for (; n < max && !cq_.empty(); cq_.pop()) out[n++] = cq_.front();
  cq_.restart_if_empty();
  return n;
}

size_t Endpoint::poll_events(Event* out, size_t max) {
  size_t n = 0;
  for (; n < max && !events_.empty(); events_.pop()) out[n++] = events_.front();
  events_.restart_if_empty();
  return n;
}

TimeNs Endpoint::next_wakeup() const {
  if (!ctrl_.empty()) return 0;
  TimeNs t = std::min(timers_.top_time(), gone_timers_.top_time());
  for (uint32_t pos = ready_.head(); pos != ready_.tail() && t != 0; ++pos)
    t = std::min(t, qps_[ready_.at(pos) - 1].next_wakeup());
  return t;
}

void Endpoint::set_plane_up(uint8_t plane, bool up, TimeNs now) {
  if (plane >= cfg_.num_planes || plane_up(plane) == up) return;
  if (up)
    local_planes_ |= 1u << plane;
  else
    local_planes_ &= ~(1u << plane);
  ++port_status_seq_;
  Sinks s = sinks();
  for (uint32_t qpn : live_) {
    qps_[qpn - 1].set_local_plane(plane, local_planes_, port_status_seq_, now, s);
    touched(qpn);
  }
}

Status Endpoint::set_ev_denied(uint32_t qpn, uint32_t ev, bool denied, TimeNs now) {
  Qp* q = find(qpn);
  if (q == nullptr) return Status::error("set_ev_denied: unknown QPN");
  if (q->state() == QpState::kReset) return Status::error("set_ev_denied: QP has no EVs yet");
  if (!q->evs().set_denied(ev, denied, now)) return Status::error("set_ev_denied: unknown EV");
  Sinks s = sinks();
  q->drain_ev_events(s);
  touched(qpn);
  return {};
}

}  // namespace softmrc::engine
