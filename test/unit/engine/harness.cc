// The two-endpoint harness; see harness.h.
#include "harness.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace softmrc::engine::test {

std::string describe(Harness& h) {
  std::string out;
  for (int i = 0; i < 2; ++i) {
    const Qp* q = h.side(i).ep.qp(h.side(i).qpn);
    const QpCounters& c = q->counters();
    char line[512];
    snprintf(
        line, sizeof line,
        "%c: state=%s una=%u nxt=%u epsn=%u sq=%u retxq=%u retries=%u inflight=%lu "
        "usable_evs=%u tx=%lu retx[trim=%lu sack=%lu rto=%lu oow=%lu plane=%lu] "
        "timeouts=%lu rx=%lu dup=%lu oow=%lu trimmed=%lu acks_tx=%lu acks_rx=%lu "
        "no_ev=%lu probes=%lu/%lu t=%lu\n",
        'A' + i, qp_state_name(q->state()), q->snd_una(), q->snd_nxt(), q->epsn(),
        q->send_queue_depth(), q->retransmit_queue_depth(), q->retries(),
        static_cast<unsigned long>(q->inflight_bytes()), q->evs().usable_count(),
        static_cast<unsigned long>(c.tx_data_packets), static_cast<unsigned long>(c.retransmits[0]),
        static_cast<unsigned long>(c.retransmits[1]), static_cast<unsigned long>(c.retransmits[2]),
        static_cast<unsigned long>(c.retransmits[3]), static_cast<unsigned long>(c.retransmits[4]),
        static_cast<unsigned long>(c.timeouts), static_cast<unsigned long>(c.rx_data_packets),
        static_cast<unsigned long>(c.rx_duplicates), static_cast<unsigned long>(c.rx_out_of_window),
        static_cast<unsigned long>(c.rx_trimmed), static_cast<unsigned long>(c.acks_tx),
        static_cast<unsigned long>(c.acks_rx), static_cast<unsigned long>(c.no_usable_ev),
        static_cast<unsigned long>(c.probes_tx), static_cast<unsigned long>(c.probe_replies_rx),
        static_cast<unsigned long>(h.now()));
    out += line;
  }
  return out;
}

uint64_t hash_bytes(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

Harness::Harness(const HarnessConfig& cfg, uint64_t seed)
    : cfg_(cfg), rng_(seed), trace_(std::getenv("ENGINE_TRACE") != nullptr) {
  for (int d = 0; d < 2; ++d) {
    pipes_[d].assign(cfg.num_planes, PipeFaults{});
    data_count_[d].assign(cfg.num_planes, 0);
    link_free_[d].assign(cfg.num_planes, 0);
  }
  link_up_.assign(cfg.num_planes, true);
  for (uint8_t p = 0; p < cfg.num_planes; ++p) {
    for (uint32_t i = 0; i < cfg.evs_per_plane; ++i) {
      EvEntry e{};
      e.plane = p;
      e.value.bytes[0] = p;
      e.value.bytes[1] = static_cast<uint8_t>(i);
      evs_.push_back(e);
    }
  }
  setup_side(0, cfg);
  setup_side(1, cfg);
  connect(cfg);
}

void Harness::setup_side(int i, const HarnessConfig& cfg) {
  Side& s = side_[i];
  EndpointConfig ec;
  ec.num_planes = cfg.num_planes;
  ec.max_qps = cfg.qps;
  ec.qp.max_mpr = 8;
  ec.qp.max_send_wr = cfg.max_send_wr;
  ec.qp.max_recv_wr = 256;
  ec.tuning = cfg.tuning;
  ec.ctrl_queue_packets = cfg.ctrl_queue_packets;
  if (Status st = s.ep.init(ec); !st.ok()) throw std::runtime_error(st.reason());
  s.mem.assign(cfg.mem_bytes, 0);
  Region r{0x10000000ull * (i + 1), s.mem.size(), s.mem.data(),
           kAccessLocalWrite | kAccessRemoteWrite};
  if (Status st = s.ep.register_region(r, &s.key); !st.ok()) throw std::runtime_error(st.reason());
  s.qpns.resize(cfg.qps);
  for (uint32_t& qpn : s.qpns)
    if (Status st = s.ep.create_qp(&qpn); !st.ok()) throw std::runtime_error(st.reason());
  s.qpn = s.qpns[0];
}

void Harness::connect(const HarnessConfig& cfg) {
  for (int i = 0; i < 2; ++i) {
    for (uint32_t k = 0; k < cfg.qps; ++k) connect_qp(cfg, i, k);
  }
}

void Harness::connect_qp(const HarnessConfig& cfg, int i, uint32_t k) {
  Side& s = side_[i];
  const Side& peer = side_[1 - i];
  const uint32_t qpn = s.qpns[k];
  QpAttr at;
  at.evs = evs_;
  at.ev_config.num_planes = cfg.num_planes;
  at.ev_config.min_active = cfg.min_active;
  at.ev_config.probe_initial_ns = cfg.probe_initial_ns;
  at.ev_config.probe_max_ns = cfg.probe_max_ns;
  at.cc = cfg.cc;
  at.peer = static_cast<uint32_t>(1 - i);
  at.dest_qpn = peer.qpns[k];
  at.path_mtu = cfg.mtu;
  at.rq_psn = i == 0 ? cfg.start_psn_b : cfg.start_psn_a;
  at.sq_psn = i == 0 ? cfg.start_psn_a : cfg.start_psn_b;
  at.mpr_dest = at.mpr = cfg.mpr;
  if (i == 1 && cfg.mpr_dest_b != 0) at.mpr_dest = cfg.mpr_dest_b;
  at.caps = cfg.caps;
  at.max_wimm_dest = at.max_wimm = cfg.max_wimm;
  at.timeout = cfg.timeout;
  at.retry_linear = cfg.retry_linear;
  at.retry_exp = cfg.retry_exp;
  const Status st = s.ep.connect_qp(qpn, at, now_, i == 1 ? cfg.b_last : QpState::kRts);
  if (!st.ok()) throw std::runtime_error(st.reason());
}

void Harness::set_all_pipes(const PipeFaults& f) {
  for (auto& dir : pipes_) std::fill(dir.begin(), dir.end(), f);
}

void Harness::schedule_plane(uint8_t plane, bool up, TimeNs at) {
  plane_changes_.push_back({at, plane, up, true});
  plane_changes_.push_back({at + cfg_.plane_detect_ns, plane, up, false});
}

void Harness::transmit(int from, const TxPacket& p) {
  std::uniform_real_distribution<double> u(0, 1);
  const PipeFaults& f = pipes_[from][p.plane];
  Verdict v = filter_ ? filter_(from, p) : Verdict::kPass;
  if (p.is_data) {
    const uint64_t n = data_count_[from][p.plane]++;
    if (n < 64 && (f.drop_data_bitmap >> n & 1)) v = Verdict::kDrop;
  }
  if (p.ev < 64 && (f.dead_evs >> p.ev & 1)) v = Verdict::kDrop;
  if (!link_up_[p.plane]) v = Verdict::kDrop;
  // Draw every random number whatever the verdict, so that a filter or a
  // scripted fault does not shift the rest of the run's randomness.
  const double r_drop = u(rng_), r_trim = u(rng_), r_dup = u(rng_), r_ce = u(rng_);
  const TimeNs jitter =
      f.jitter_ns ? std::uniform_int_distribution<TimeNs>(0, f.jitter_ns)(rng_) : 0;
  const TimeNs jitter_dup =
      f.jitter_ns ? std::uniform_int_distribution<TimeNs>(0, f.jitter_ns)(rng_) : 0;
  if (v == Verdict::kPass && r_drop < f.drop_rate) v = Verdict::kDrop;
  if (p.is_data && v == Verdict::kPass && r_trim < f.trim_rate) v = Verdict::kTrim;
  if (trace_) {
    const wire::Feedback& fb = p.t.fb;
    printf("%10lu %c>%c plane %u ev %2d %-14s psn %8u cum %8u ref %8u %s\n",
           static_cast<unsigned long>(now_), from ? 'B' : 'A', from ? 'A' : 'B', p.plane,
           static_cast<int>(p.ev), wire::opcode_name(p.t.opcode), p.t.psn, fb.cum_psn, fb.ref_psn,
           v == Verdict::kDrop   ? "DROP"
           : v == Verdict::kTrim ? "TRIM"
                                 : "");
  }
  if (v == Verdict::kDrop) {
    ++dropped_;
    dropped_data_[from] += p.is_data;
    return;
  }

  Flight fl;
  fl.to = 1 - from;
  fl.plane = p.plane;
  fl.pv.t = p.t;
  fl.pv.ecn = p.is_data ? wire::kEcnEct0 : wire::kEcnNotEct;
  if (p.is_data && r_ce < f.ce_rate) fl.pv.ecn = wire::kEcnCe;
  if (v == Verdict::kTrim) {
    fl.pv.trimmed = true;
  } else if (p.payload_len > 0) {
    fl.payload.assign(p.payload, p.payload + p.payload_len);
  }
  // Data packets queue behind each other on the pipe: 64 bytes of headers
  // plus whatever payload survived.
  // Control packets ride a strict-priority class and skip the data queue.
  TimeNs depart = now_;
  if (f.rate_gbps > 0 && p.is_data) {
    const uint64_t bits = (64 + fl.payload.size()) * 8;
    depart = std::max(now_, link_free_[from][p.plane]) + bits / f.rate_gbps;
    link_free_[from][p.plane] = depart;
  }
  const int copies = r_dup < f.dup_rate ? 2 : 1;
  if (p.is_data) duplicated_data_[from] += copies - 1;
  for (int c = 0; c < copies; ++c) {
    Flight x = fl;
    x.at = depart + f.delay_ns + (c == 0 ? jitter : jitter_dup);
    x.seq = seq_++;
    queue_.push_back(std::move(x));
    std::push_heap(queue_.begin(), queue_.end(), Later{});
  }
}

// True when an application did something.
bool Harness::collect() {
  bool did = false;
  for (int i = 0; i < 2; ++i) {
    if (app_) {
      did |= app_(i);
    } else {
      Completion c[64];
      for (size_t n; (n = side_[i].ep.poll_completions(c, 64)) > 0;) {
        cq_[i].insert(cq_[i].end(), c, c + n);
        cq_at_[i].insert(cq_at_[i].end(), n, now_);
      }
    }
    Event e[64];
    for (size_t n; (n = side_[i].ep.poll_events(e, 64)) > 0;) ev_[i].insert(ev_[i].end(), e, e + n);
  }
  return did;
}

// Does everything due at now_; false if there was nothing.
bool Harness::step() {
  bool did = false;
  for (auto it = plane_changes_.begin(); it != plane_changes_.end();) {
    if (it->at > now_) {
      ++it;
      continue;
    }
    if (trace_)
      printf("%10lu plane %u %s %s\n", static_cast<unsigned long>(now_), it->plane,
             it->link ? "link" : "port", it->up ? "up" : "down");
    if (it->link)
      link_up_[it->plane] = it->up;
    else
      side_[0].ep.set_plane_up(it->plane, it->up, now_);
    it = plane_changes_.erase(it);
    did = true;
  }
  TxPacket tx[32];
  for (int i = 0; i < 2; ++i) {
    for (size_t n; (n = side_[i].ep.poll_tx(tx, 32, now_)) > 0;) {
      for (size_t k = 0; k < n; ++k) transmit(i, tx[k]);
      did = true;
    }
  }
  while (!queue_.empty() && queue_.front().at <= now_) {
    std::pop_heap(queue_.begin(), queue_.end(), Later{});
    Flight f = std::move(queue_.back());
    queue_.pop_back();
    f.pv.payload = f.payload.empty() ? nullptr : f.payload.data();
    f.pv.payload_len = static_cast<uint32_t>(f.payload.size());
    side_[f.to].ep.on_packet(f.pv, f.plane, now_, static_cast<uint32_t>(1 - f.to));
    ++delivered_;
    did = true;
  }
  return collect() || did;
}

bool Harness::run(const std::function<bool()>& pred, TimeNs limit) {
  for (;;) {
    if (pred()) return true;
    if (step()) continue;
    TimeNs next = std::min(side_[0].ep.next_wakeup(), side_[1].ep.next_wakeup());
    if (!queue_.empty()) next = std::min(next, queue_.front().at);
    for (const PlaneChange& c : plane_changes_) next = std::min(next, c.at);
    if (next == kNever || next > limit) return pred();
    now_ = std::max(next, now_ + 1);
  }
}

void Harness::run_for(TimeNs duration) {
  const TimeNs end = now_ + duration;
  run([] { return false; }, end);
  now_ = std::max(now_, end);
}

}  // namespace softmrc::engine::test
