// The traffic generator (see txgen.h).
#include "softmrcd/txgen.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "pattern/pattern.h"

namespace softmrc::softmrcd {

namespace {

constexpr int32_t kNoFlow = INT32_MAX;

// A connectionless probe goes out on the framer's default path of its plane.
const wire::WireEv kDefaultPath{};

}  // namespace

void Txgen::init(uint32_t max_qps) {
  by_qpn_.assign(size_t{max_qps} + 1, kNoFlow);
}

void Txgen::add_sender(const SenderSetup& s) {
  Sender x;
  x.s = s;
  x.slots = slots(s.flow);
  x.local_va = s.local_va.value_or(reinterpret_cast<uint64_t>(s.buf));
  x.waiting = s.remote_peer != engine::kUnknownPeer;
  by_qpn_[s.qpn] = static_cast<int32_t>(senders_.size());
  senders_.push_back(x);
  if (!x.waiting) return;
  peer(s.remote_peer, s.remote_name).awaited = true;
}

Txgen::Peer& Txgen::peer(uint32_t index, const char* name) {
  for (Peer& p : peers_)
    if (p.index == index) return p;
  return peers_.emplace_back(Peer{.index = index, .name = name});
}

engine::Status Txgen::add_receiver(const ReceiverSetup& r, engine::Endpoint& ep) {
  Receiver x;
  x.r = r;
  x.slots = slots(r.flow);
  by_qpn_[r.qpn] = ~static_cast<int32_t>(receivers_.size());
  receivers_.push_back(x);
  if (r.remote_peer != engine::kUnknownPeer) peer(r.remote_peer, r.remote_name);
  for (uint32_t i = 0; i < receives(r.flow); ++i)
    if (engine::Status st = ep.post_recv(r.qpn, engine::RecvRequest{}); !st.ok()) return st;
  return {};
}

void Txgen::start(engine::TimeNs now) {
  for (Sender& s : senders_) {
    // A flow that is posting keeps its deadline: a second start is no restart.
    if (s.failed || s.exhausted || s.active) continue;
    s.active = true;
    s.deadline =
        s.s.flow.duration_ns != 0 && !s.waiting ? now + s.s.flow.duration_ns : engine::kNever;
  }
}

void Txgen::stop() {
  for (Sender& s : senders_) s.active = false;
}

void Txgen::end_flows() {
  shutting_down_ = true;
  counters_.in_flight_at_stop = in_flight();
  for (Sender& s : senders_) {
    s.active = false;
    // A flow still waiting for its peer sent nothing, and owes no end.
    if (!s.waiting) s.exhausted = true;
  }
}

bool Txgen::may_post(const Sender& s, engine::TimeNs now) const {
  const FlowSpec& f = s.s.flow;
  return s.active && (f.messages == 0 || s.next < f.messages) && now < s.deadline;
}

// One probe per interval to each peer that senders wait for or a receiver
// asks about, on the planes in use in turn.
void Txgen::probe(engine::Endpoint& ep, engine::TimeNs now) {
  for (Peer& p : peers_) {
    if (!(p.awaited || p.asking) || now < p.next_probe) continue;
    p.next_probe = now + kProbeIntervalNs;
    for (uint32_t k = 0; k < engine::kMaxPlanes; ++k) {
      const auto plane = static_cast<uint8_t>((p.next_plane + k) % engine::kMaxPlanes);
      if (!ep.plane_up(plane)) continue;
      // A full control queue only delays the next try.
      (void)ep.send_probe(p.index, plane, &kDefaultPath, static_cast<uint16_t>(p.index), now);
      p.next_plane = static_cast<uint8_t>(plane + 1);
      break;
    }
  }
}

void Txgen::on_probe_reply(const engine::Event& e, engine::TimeNs now) {
  for (Peer& p : peers_) {
    if (e.probe_req_id != static_cast<uint16_t>(p.index)) continue;
    if (p.asking) {
      p.asking = false;
      for (Receiver& r : receivers_)
        if (r.r.remote_peer == p.index && !r.ended) r.quiet_since = now;
    }
    if (!p.awaited) continue;
    p.awaited = false;
    for (Sender& s : senders_) {
      if (!s.waiting || s.s.remote_peer != p.index) continue;
      s.waiting = false;
      if (s.active && s.s.flow.duration_ns != 0) s.deadline = now + s.s.flow.duration_ns;
    }
    std::printf(
        "softmrcd: t=%.3fs peer %s answered a probe on plane %u (rtt %.1f us): its "
        "flows start\n",
        now / 1e9, p.name, e.plane, e.rtt_ns / 1e3);
    std::fflush(stdout);
  }
}

void Txgen::post(engine::Endpoint& ep, engine::TimeNs now) {
  if (!peers_.empty()) probe(ep, now);
  for (Receiver& r : receivers_) {
    if (r.ended) {
      if (!r.done) linger(r, ep, now);
    } else if (r.r.remote_peer != engine::kUnknownPeer && r.r.flow.requester_timeout_ns != 0) {
      watch_requester(r, ep, now);
    }
    if (r.checked == r.expected) continue;
    const uint64_t unchecked = (r.expected - r.checked) * r.r.flow.size_bytes - r.check_offset;
    const uint64_t eighth_in_words = unchecked / 8 & ~uint64_t{7};
    check(r, r.expected, std::max(kCheckSliceBytes, eighth_in_words));
  }
  for (Sender& s : senders_) {
    if (s.waiting) continue;
    const FlowSpec& f = s.s.flow;
    if ((f.messages != 0 && s.next >= f.messages) || now >= s.deadline) s.exhausted = true;
    while (may_post(s, now) && s.outstanding < f.window) {
      const uint64_t m = s.next;
      const uint64_t off = (m % s.slots) * f.size_bytes;
      uint8_t* src = s.s.buf + off;
      if (s.s.fill) pattern::fill(src, f.size_bytes, s.s.stream, m);
      engine::WriteRequest wr;
      wr.wr_id = m;
      wr.local_addr = s.local_va + off;
      wr.length = f.size_bytes;
      wr.lkey = s.s.lkey;
      wr.remote_addr = s.s.remote_va + off;
      wr.rkey = s.s.rkey;
      wr.with_imm = f.op == TrafficOp::kWimm;
      wr.imm = static_cast<uint32_t>(m);
      if (engine::Status st = ep.post_write(s.s.qpn, wr); !st.ok()) {
        std::fprintf(stderr, "softmrcd: txgen: QP %u: message %" PRIu64 ": %s\n", s.s.qpn, m,
                     st.reason());
        ++counters_.errors;
        s.active = false;
        s.failed = true;
        break;
      }
      ++s.next;
      ++s.outstanding;
      ++counters_.posted;
      if (f.op == TrafficOp::kWrite && s.next % f.window == 0) post_marker(s, ep);
    }
    // A flow that stops mid-batch closes the batch so that it is checked;
    // one that failed has a QP that takes nothing more.
    if (f.op == TrafficOp::kWrite && !s.failed && !may_post(s, now) && s.marked < s.next)
      post_marker(s, ep);
    // A flow that used up its limit says so once everything completed.
    if (s.exhausted && !s.failed && !s.end_posted && s.outstanding == 0 && s.markers_out == 0 &&
        (f.op == TrafficOp::kWimm || s.marked == s.next))
      post_end(s, ep);
  }
}

// A 0-byte WIMM whose immediate is the next message index: a batch marker
// or the end of the flow, told apart by the tag in its wr_id.
engine::WriteRequest Txgen::control_wimm(const Sender& s, uint64_t tag) {
  engine::WriteRequest wr;
  wr.wr_id = tag | s.next;
  wr.local_addr = s.local_va;
  wr.lkey = s.s.lkey;
  wr.remote_addr = s.s.remote_va;
  wr.rkey = s.s.rkey;
  wr.with_imm = true;
  wr.imm = static_cast<uint32_t>(s.next);
  return wr;
}

void Txgen::post_marker(Sender& s, engine::Endpoint& ep) {
  if (engine::Status st = ep.post_write(s.s.qpn, control_wimm(s, kMarker)); !st.ok()) {
    std::fprintf(stderr, "softmrcd: txgen: QP %u: batch marker: %s\n", s.s.qpn, st.reason());
    ++counters_.errors;
    s.active = false;
    s.failed = true;
    s.marked = s.next;  // do not retry: the batch stays unchecked, and counted as an error
    return;
  }
  s.marked = s.next;
  ++s.markers_out;
}

// The end: a 0-byte WIMM naming the number of messages. In write mode it
// follows the last batch marker, so it names no new message.
void Txgen::post_end(Sender& s, engine::Endpoint& ep) {
  s.end_posted = true;
  if (engine::Status st = ep.post_write(s.s.qpn, control_wimm(s, kEnd)); !st.ok()) {
    std::fprintf(stderr, "softmrcd: txgen: QP %u: end of flow: %s\n", s.s.qpn, st.reason());
    ++counters_.errors;
    s.failed = true;
    return;
  }
  s.end_out = true;
}

bool Txgen::heard(Receiver& r, const engine::Endpoint& ep, engine::TimeNs now) {
  const engine::Qp* q = ep.qp(r.r.qpn);
  uint64_t rx = 0;
  if (q != nullptr) {
    const engine::QpCounters& c = q->counters();
    rx = c.rx_data_packets + c.rx_duplicates + c.rx_out_of_window + c.rx_trimmed;
  }
  if (rx == r.rx_seen) return false;
  r.rx_seen = rx;
  r.quiet_since = now;
  return true;
}

// A remote flow's responder stays until the QP has been quiet for the
// linger time: a requester whose ACK of the end was lost resends it.
void Txgen::linger(Receiver& r, const engine::Endpoint& ep, engine::TimeNs now) {
  if (!heard(r, ep, now) && r.quiet_since == engine::kNever) r.quiet_since = now;
  if (now - r.quiet_since >= r.r.linger_ns) r.done = true;
}

// Nothing arrived for half the timeout: ask the requester's endpoint (an
// answer starts the quiet time again); for all of it: the requester is
// gone. A flow that never started waits, as a server does.
void Txgen::watch_requester(Receiver& r, const engine::Endpoint& ep, engine::TimeNs now) {
  if (heard(r, ep, now) || r.quiet_since == engine::kNever) return;
  const engine::TimeNs timeout = r.r.flow.requester_timeout_ns;
  const engine::TimeNs quiet = now - r.quiet_since;
  if (quiet < timeout / 2) return;
  if (quiet < timeout) {
    peer(r.r.remote_peer, r.r.remote_name).asking = true;
    return;
  }
  ++counters_.errors;
  std::fprintf(stderr,
               "softmrcd: txgen: QP %u: requester %s silent for %" PRIu64
               " ms (nothing arrived, no probe answered): the flow ends unfinished after "
               "%" PRIu64 " messages\n",
               r.r.qpn, r.r.remote_name, quiet / 1'000'000, r.expected);
  end(r);
  r.done = true;
}

void Txgen::on_completion(const engine::Completion& c, engine::Endpoint& ep) {
  const int32_t i = c.qpn < by_qpn_.size() ? by_qpn_[c.qpn] : kNoFlow;
  if (i == kNoFlow) return;
  if (i >= 0)
    on_send_completion(senders_[i], c);
  else
    on_recv_completion(receivers_[~i], c, ep);
}

void Txgen::on_send_completion(Sender& s, const engine::Completion& c) {
  if (c.wr_id & kEnd) {
    s.end_out = false;
    // Flushed: the daemon is shutting down, and the flow is over anyway.
    s.ended = c.status == engine::WcStatus::kSuccess || c.status == engine::WcStatus::kFlushed;
    if (!s.ended) {
      ++counters_.errors;
      s.failed = true;
      std::fprintf(stderr, "softmrcd: txgen: QP %u: end of flow completed with %s\n", c.qpn,
                   engine::wc_status_name(c.status));
    }
    return;
  }
  // Messages are counted, batch markers are not: posted messages are the
  // completed, flushed and failed ones.
  const bool marker = c.wr_id & kMarker;
  if (marker) {
    --s.markers_out;
  } else {
    --s.outstanding;
    if (c.status == engine::WcStatus::kSuccess) {
      ++counters_.completed;
      counters_.completed_bytes += s.s.flow.size_bytes;
      counters_.drained += shutting_down_;
    } else if (c.status == engine::WcStatus::kFlushed) {
      ++counters_.flushed;
      counters_.flushed_at_stop += shutting_down_;
    }
  }
  if (c.status == engine::WcStatus::kSuccess || c.status == engine::WcStatus::kFlushed) return;
  ++counters_.errors;
  s.active = false;
  s.failed = true;
  std::fprintf(stderr, "softmrcd: txgen: QP %u: %s %" PRIu64 " completed with %s\n", c.qpn,
               marker ? "batch marker" : "message", c.wr_id & ~kMarker,
               engine::wc_status_name(c.status));
}

void Txgen::check(Receiver& r, uint64_t until, uint64_t budget) {
  const FlowSpec& f = r.r.flow;
  while (r.checked < until && budget != 0) {
    const uint64_t m = r.checked;
    const uint64_t len = std::min(budget, f.size_bytes - r.check_offset);
    const uint8_t* p = r.r.buf + (m % r.slots) * f.size_bytes + r.check_offset;
    if (!r.check_failed) r.check_failed = !pattern::verify(p, len, r.r.stream, m, r.check_offset);
    r.check_offset += len;
    budget -= len;
    if (r.check_offset < f.size_bytes) break;  // the budget ended inside the message
    if (r.check_failed) {
      ++counters_.mismatches;
      std::fprintf(stderr, "softmrcd: txgen: QP %u: message %" PRIu64 " has wrong bytes\n", r.r.qpn,
                   m);
    } else {
      ++counters_.verified;
      counters_.verified_bytes += f.size_bytes;
    }
    ++r.checked;
    r.check_offset = 0;
    r.check_failed = false;
  }
}

void Txgen::check_before_ack(Receiver& r) {
  const uint64_t lag = r.r.flow.window;
  if (r.expected > lag) check(r, r.expected - lag, UINT64_MAX);
}

void Txgen::skip(Receiver& r, uint64_t count) {
  check(r, r.expected, UINT64_MAX);
  r.expected += count;
  r.checked = r.expected;
}

void Txgen::finish_checks() {
  for (Receiver& r : receivers_) check(r, r.expected, UINT64_MAX);
}

void Txgen::on_recv_completion(Receiver& r, const engine::Completion& c, engine::Endpoint& ep) {
  if (c.status == engine::WcStatus::kFlushed) {
    // Posted receives end so at the daemon's flush; before it, the QP
    // failed and will get nothing more.
    if (abandoned_ || r.ended) return;
    ++counters_.errors;
    std::fprintf(stderr,
                 "softmrcd: txgen: QP %u: the QP failed (receives flushed): the flow ends "
                 "unfinished after %" PRIu64 " messages\n",
                 c.qpn, r.expected);
    end(r);
    r.done = true;
    return;
  }
  if (c.status != engine::WcStatus::kSuccess || c.opcode != engine::WcOpcode::kRecvWriteImm) {
    ++counters_.errors;
    std::fprintf(stderr, "softmrcd: txgen: QP %u: receive completed with %s\n", c.qpn,
                 engine::wc_status_name(c.status));
    return;
  }
  const FlowSpec& f = r.r.flow;
  if (c.byte_len == 0 && c.imm == static_cast<uint32_t>(r.expected)) {
    // The end: every message up to here was checked (in write mode it
    // follows the last batch marker; a WIMM message has at least a byte).
    end(r);
  } else if (f.op == TrafficOp::kWimm) {
    const uint64_t m = r.expected;
    if (c.imm != static_cast<uint32_t>(m) || c.byte_len != f.size_bytes) {
      ++counters_.mismatches;
      std::fprintf(stderr,
                   "softmrcd: txgen: QP %u: message %" PRIu64 " arrived as imm %u, %u bytes\n",
                   c.qpn, m, c.imm, c.byte_len);
      skip(r, 1);
    } else {
      ++r.expected;
      check_before_ack(r);
    }
  } else {
    // The marker names the end of its batch (mod 2^32).
    const uint64_t count = static_cast<uint32_t>(c.imm - static_cast<uint32_t>(r.expected));
    if (count > f.window || c.byte_len != 0) {
      ++counters_.mismatches;
      std::fprintf(stderr, "softmrcd: txgen: QP %u: batch marker %u after message %" PRIu64 "\n",
                   c.qpn, c.imm, r.expected);
      skip(r, count);
    } else {
      r.expected += count;
      check_before_ack(r);
    }
  }
  if (engine::Status st = ep.post_recv(c.qpn, engine::RecvRequest{}); !st.ok()) {
    ++counters_.errors;
    std::fprintf(stderr, "softmrcd: txgen: QP %u: %s\n", c.qpn, st.reason());
  }
}

void Txgen::end(Receiver& r) {
  if (r.ended) return;
  r.ended = true;
  check(r, r.expected, UINT64_MAX);
  r.done = r.r.remote_peer == engine::kUnknownPeer;
  r.quiet_since = engine::kNever;  // the linger counts from here
}

bool Txgen::finished() const {
  for (const Sender& s : senders_) {
    if (s.outstanding != 0 || s.markers_out != 0 || s.end_out) return false;
    if (!s.failed && !(s.exhausted && s.ended)) return false;
  }
  for (const Receiver& r : receivers_)
    if (r.r.remote_peer != engine::kUnknownPeer && !r.done) return false;
  return true;
}

void Txgen::abandon() {
  abandoned_ = true;
  for (Sender& s : senders_) {
    s.active = false;
    s.marked = s.next;
    if (!s.end_posted) s.end_posted = s.ended = true;
  }
}

uint64_t Txgen::in_flight() const {
  uint64_t n = 0;
  for (const Sender& s : senders_) n += s.outstanding;
  return n;
}

uint64_t Txgen::ends_owed() const {
  uint64_t n = 0;
  for (const Sender& s : senders_) n += s.exhausted && !s.failed && !s.ended;
  return n;
}

}  // namespace softmrc::softmrcd
