// The go-back-N single-path baseline; see roce_stack.h.
#include "roce_stack.h"

#include <algorithm>

#include "fabric/rng.h"

namespace softmrc::sim {

namespace {

// Frame sizes: Ethernet 14, IPv6 40, UDP 8, BTH 12, ICRC 4; a RETH (16) on
// the first packet of a message, an AETH (4) on ACKs and NAKs.
constexpr uint32_t kDataHeader = 78;
constexpr uint32_t kRethBytes = 16;
constexpr uint32_t kAckBytes = 82;
constexpr double kDctcpGain = 1.0 / 16;

}  // namespace

RoceStack::RoceStack(const Scenario& sc, const fabric::Topology& topo, StackListener& listener,
                     uint64_t seed)
    : sc_(sc), listener_(listener), seed_(fabric::mix64(seed)) {
  subs_ = sc.roce.qps_per_transfer != 0 ? sc.roce.qps_per_transfer : topo.planes();
  rto_ns_ = 4096ull << sc.roce.timeout;
  const TimeNs rtt = topo.base_rtt_ns(sc.roce.mtu + kDataHeader, kAckBytes);
  const double bdp = static_cast<double>(topo.config().host_link_mbps) * rtt / 8'000;
  max_cwnd_ = std::max(1.5 * bdp, 2.0 * sc.roce.mtu);
  hosts_.resize(topo.hosts());
}

uint32_t RoceStack::alloc(uint32_t host) {
  Host& h = hosts_[host];
  uint32_t qi;
  if (!h.free.empty()) {
    qi = h.free.back();
    h.free.pop_back();
  } else {
    qi = static_cast<uint32_t>(h.qps.size());
    h.qps.emplace_back();
  }
  const uint32_t gen = h.qps[qi].gen;
  h.qps[qi] = Qp{};
  h.qps[qi].gen = gen;
  h.qps[qi].in_use = true;
  return qi;
}

void RoceStack::free_qp(uint32_t host, uint32_t qi) {
  Host& h = hosts_[host];
  Qp& q = h.qps[qi];
  if (!q.in_use) return;
  q.in_use = false;
  ++q.gen;
  std::vector<uint32_t>& list = q.sender ? h.senders : h.receivers;
  list.erase(std::find(list.begin(), list.end(), qi));
  std::erase_if(h.ctrl, [qi](const Ctrl& c) { return c.qp == qi; });
  h.free.push_back(qi);
}

void RoceStack::start(const Transfer& t, TimeNs now) {
  (void)now;
  const uint32_t mtu = sc_.roce.mtu;
  const uint64_t packets = std::max<uint64_t>(1, (t.bytes + mtu - 1) / mtu);
  const auto n = static_cast<uint32_t>(std::min<uint64_t>(subs_, packets));
  const uint32_t planes = sc_.topology.planes;
  Active a;
  a.t = t;
  uint64_t left = t.bytes;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t bytes = i + 1 == n ? left : t.bytes / n;
    left -= bytes;
    const uint32_t sq = alloc(t.src);
    const uint32_t rq = alloc(t.dst);
    Qp& s = hosts_[t.src].qps[sq];
    Qp& r = hosts_[t.dst].qps[rq];
    // A RoCE NIC derives the UDP source port from the QP: one path per QP.
    const uint32_t ev =
        0xc000 |
        static_cast<uint32_t>(
            fabric::mix64(seed_ ^ uint64_t{t.step} << 48 ^ uint64_t{t.id} << 16 ^ i) & 0x3fff);
    for (Qp* q : {&s, &r}) {
      q->transfer = t.id;
      q->plane = i % planes;
      q->ev = ev;
      q->npkts = static_cast<uint32_t>(std::max<uint64_t>(1, (bytes + mtu - 1) / mtu));
      q->last_len = static_cast<uint32_t>(bytes - uint64_t{q->npkts - 1} * mtu);
    }
    s.sender = true;
    s.peer = t.dst;
    s.peer_qp = rq;
    s.peer_gen = r.gen;
    s.cwnd = max_cwnd_;
    s.alpha = 1;  // as Linux's DCTCP: the first marked window halves
    r.peer = t.src;
    r.peer_qp = sq;
    r.peer_gen = s.gen;
    hosts_[t.src].senders.push_back(sq);
    hosts_[t.dst].receivers.push_back(rq);
    refresh(hosts_[t.src], sq);
    a.src_qps.push_back(sq);
    a.dst_qps.push_back(rq);
    ++counters_.connections;
  }
  active_[t.id] = std::move(a);
  listener_.wake(t.src);
}

uint32_t RoceStack::payload_of(const Qp& q, uint32_t psn) const {
  return psn + 1 == q.npkts ? q.last_len : sc_.roce.mtu;
}

bool RoceStack::can_send(const Qp& q) const {
  if (q.nxt >= q.npkts) return false;
  const double inflight = static_cast<double>(q.nxt - q.una) * sc_.roce.mtu;
  return q.nxt == q.una || inflight + sc_.roce.mtu <= q.cwnd;
}

size_t RoceStack::poll_tx(uint32_t host, SimPacket* const* out, size_t max, TimeNs now) {
  Host& h = hosts_[host];
  if (h.timer_at <= now) run_timers(host, now);

  size_t n = 0;
  for (; n < max && !h.ctrl.empty(); h.ctrl.pop_front()) {
    const Ctrl& c = h.ctrl.front();
    const Qp& r = h.qps[c.qp];
    SimPacket* p = out[n++];
    p->src = host;
    p->dst = r.peer;
    p->plane = r.plane;
    p->dst_gen = r.peer_gen;
    p->meta = fabric::PacketMeta{};
    p->meta.bytes = p->meta.header_bytes = kAckBytes;
    p->meta.ev = r.ev;
    p->meta.control = true;
    p->roce = RoceHeader{c.kind, r.peer_qp, c.psn, false, false, c.ce, c.acked};
  }
  while (n < max && !h.ready.empty()) {
    h.cursor %= static_cast<uint32_t>(h.ready.size());
    const uint32_t qi = h.ready[h.cursor];
    Qp& q = h.qps[qi];
    if (!q.in_use || !can_send(q)) {  // prune: it is listed again when it may send
      q.in_ready = false;
      h.ready[h.cursor] = h.ready.back();
      h.ready.pop_back();
      continue;
    }
    ++h.cursor;
    const uint32_t psn = q.nxt++;
    if (psn < q.max_sent)
      ++counters_.retransmits;
    else
      q.max_sent = psn + 1;
    ++counters_.data_packets;
    if (q.rto_at == kNever) {
      q.rto_at = now + rto_ns_;
      h.timer_at = std::min(h.timer_at, q.rto_at);
    }
    SimPacket* p = out[n++];
    const uint32_t len = payload_of(q, psn);
    p->src = host;
    p->dst = q.peer;
    p->plane = q.plane;
    p->dst_gen = q.peer_gen;
    p->meta = fabric::PacketMeta{};
    p->meta.header_bytes = kDataHeader + (psn == 0 ? kRethBytes : 0);
    p->meta.bytes = p->meta.header_bytes + len;
    p->meta.ev = q.ev;
    p->meta.ecn_capable = true;
    p->payload_len = len;
    // Ask for an ACK when the window is now full, so that coalescing at
    // the receiver never holds back what would open it again.
    p->roce = RoceHeader{RoceKind::kData, q.peer_qp, psn, psn + 1 == q.npkts, !can_send(q), 0, 0};
  }
  return n;
}

TimeNs RoceStack::next_wakeup(uint32_t host) const {
  const Host& h = hosts_[host];
  if (!h.ctrl.empty()) return 0;
  for (uint32_t qi : h.ready)
    if (h.qps[qi].in_use && can_send(h.qps[qi])) return 0;
  return h.timer_at;
}

void RoceStack::refresh(Host& h, uint32_t qi) {
  Qp& q = h.qps[qi];
  if (q.in_ready || !q.in_use || !q.sender || !can_send(q)) return;
  q.in_ready = true;
  h.ready.push_back(qi);
}

// Runs the RTO and ACK timers that are due and finds the next one.
void RoceStack::run_timers(uint32_t host, TimeNs now) {
  Host& h = hosts_[host];
  for (uint32_t qi : h.receivers)
    if (h.qps[qi].ack_at <= now) queue_ack(h, qi);
  // An expiry may fail a transfer, which edits h.senders.
  std::vector<uint32_t> expired;
  for (uint32_t qi : h.senders)
    if (h.qps[qi].rto_at <= now) expired.push_back(qi);
  for (uint32_t qi : expired) {
    Qp& q = h.qps[qi];
    if (!q.in_use || q.rto_at > now) continue;
    ++counters_.timeouts;
    if (++q.retries > sc_.roce.retry) {
      ++counters_.qp_errors;
      if (listener_.tracing())
        listener_.note(now, "host " + std::to_string(host) + " roce qp " + std::to_string(qi) +
                                " retry count exceeded");
      fail(q.transfer, now, "retry count exceeded");
      continue;
    }
    q.nxt = q.una;
    q.rto_at = now + rto_ns_;
    refresh(h, qi);
  }
  h.timer_at = kNever;
  for (uint32_t qi : h.receivers) h.timer_at = std::min(h.timer_at, h.qps[qi].ack_at);
  for (uint32_t qi : h.senders) h.timer_at = std::min(h.timer_at, h.qps[qi].rto_at);
}

void RoceStack::deliver(SimPacket& p, TimeNs now) {
  Host& h = hosts_[p.dst];
  const uint32_t qi = p.roce.qp;
  if (qi >= h.qps.size() || !h.qps[qi].in_use || h.qps[qi].gen != p.dst_gen) {
    ++counters_.stale_rx;
    return;
  }
  if (p.roce.kind == RoceKind::kData)
    on_data(p.dst, p, now);
  else
    on_feedback(p.dst, p.roce, now);
}

void RoceStack::on_data(uint32_t host, SimPacket& p, TimeNs now) {
  Host& h = hosts_[host];
  const uint32_t qi = p.roce.qp;
  Qp& r = h.qps[qi];
  if (p.meta.trimmed) {  // headers only: a RoCE NIC has no use for it (its ICRC fails)
    ++counters_.trimmed_rx;
    return;
  }
  const uint32_t psn = p.roce.psn;
  if (psn == r.epsn) {
    ++r.epsn;
    ++r.unacked;
    r.ce += p.meta.ce;
    r.nak_sent = false;
    listener_.goodput(host, p.payload_len, now);
    if (p.roce.last || p.roce.ack_req || r.unacked >= sc_.roce.ack_every) {
      queue_ack(h, qi);
      listener_.wake(host);
    } else if (r.ack_at == kNever) {
      r.ack_at = now + sc_.roce.ack_delay_ns;
      h.timer_at = std::min(h.timer_at, r.ack_at);
    }
    if (p.roce.last) {
      Active& a = active_.at(r.transfer);
      if (++a.subs_delivered == a.src_qps.size()) listener_.delivered(r.transfer, now);
    }
  } else if (psn > r.epsn) {
    ++counters_.out_of_order_rx;
    if (!r.nak_sent) {
      h.ctrl.push_back(Ctrl{qi, RoceKind::kNak, r.epsn, 0, 0});
      r.nak_sent = true;
      listener_.wake(host);
    }
  } else {
    h.ctrl.push_back(Ctrl{qi, RoceKind::kAck, r.epsn, 0, 0});  // its ACK may have been lost
    listener_.wake(host);
  }
}

void RoceStack::queue_ack(Host& h, uint32_t qi) {
  Qp& r = h.qps[qi];
  h.ctrl.push_back(Ctrl{qi, RoceKind::kAck, r.epsn, r.ce, r.unacked});
  r.unacked = r.ce = 0;
  r.ack_at = kNever;
}

void RoceStack::react(Qp& q, uint32_t acked, uint32_t marked) {
  if (!sc_.roce.dctcp) return;
  q.win_acked += acked;
  q.win_marked += marked;
  if (q.una < q.win_end) return;
  const double f = q.win_acked ? static_cast<double>(q.win_marked) / q.win_acked : 0;
  q.alpha = (1 - kDctcpGain) * q.alpha + kDctcpGain * std::min(f, 1.0);
  if (q.win_marked)
    q.cwnd *= 1 - q.alpha / 2;
  else
    q.cwnd += sc_.roce.mtu;
  q.cwnd = std::clamp(q.cwnd, static_cast<double>(sc_.roce.mtu), max_cwnd_);
  q.win_end = q.nxt;
  q.win_acked = q.win_marked = 0;
}

void RoceStack::on_feedback(uint32_t host, const RoceHeader& fb, TimeNs now) {
  Qp& q = hosts_[host].qps[fb.qp];
  if (!q.sender) return;
  const uint32_t cum = std::min(fb.psn, q.max_sent);
  if (cum > q.una) {
    const uint32_t acked = cum - q.una;
    q.una = cum;
    q.nxt = std::max(q.nxt, q.una);
    q.retries = 0;
    if (q.una == q.npkts) {
      sub_done(host, fb.qp, now);
      return;
    }
    q.rto_at = now + rto_ns_;
    react(q, acked, fb.ce);
  }
  if (fb.kind == RoceKind::kNak && cum < q.nxt) {
    ++counters_.go_back_n;
    q.nxt = cum;
  }
  Host& h = hosts_[host];
  h.timer_at = std::min(h.timer_at, q.rto_at);
  refresh(h, fb.qp);
  listener_.wake(host);
}

void RoceStack::sub_done(uint32_t host, uint32_t qi, TimeNs now) {
  const Qp& q = hosts_[host].qps[qi];
  const uint32_t transfer = q.transfer;
  const uint32_t peer = q.peer, peer_qp = q.peer_qp;
  free_qp(host, qi);
  free_qp(peer, peer_qp);
  Active& a = active_.at(transfer);
  const auto sub = std::find(a.src_qps.begin(), a.src_qps.end(), qi) - a.src_qps.begin();
  a.src_qps[sub] = a.dst_qps[sub] = kNoQp;
  if (++a.subs_done < a.src_qps.size()) return;
  active_.erase(transfer);
  listener_.done(transfer, now);
}

void RoceStack::fail(uint32_t transfer, TimeNs now, const char* why) {
  const auto it = active_.find(transfer);
  if (it == active_.end()) return;
  const Active a = std::move(it->second);
  active_.erase(it);
  for (uint32_t qi : a.src_qps)
    if (qi != kNoQp) free_qp(a.t.src, qi);
  for (uint32_t qi : a.dst_qps)
    if (qi != kNoQp) free_qp(a.t.dst, qi);
  listener_.failed(transfer, now, why);
}

}  // namespace softmrc::sim
