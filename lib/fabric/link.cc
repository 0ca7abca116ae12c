// The link and its output queue; see link.h.
#include "fabric/link.h"

#include <algorithm>
#include <cmath>

namespace softmrc::fabric {

namespace {

// 10 Tb/s: headroom over the fastest link we model.
constexpr uint64_t kMaxRateMbps = 10'000'000;
constexpr TimeNs kMaxDelayNs = 1'000'000'000;

}  // namespace

const char* validate(const LinkConfig& cfg) {
  if (cfg.rate_mbps == 0 || cfg.rate_mbps > kMaxRateMbps) return "rate_mbps: not 1..10^7";
  if (cfg.delay_ns > kMaxDelayNs) return "delay_ns: above 1 s";
  if (cfg.buffer_bytes == 0) return "buffer_bytes: 0";
  if (cfg.priority_buffer_bytes == 0) return "priority_buffer_bytes: 0";
  if (cfg.overflow != Overflow::kDrop && cfg.overflow != Overflow::kTrim)
    return "overflow: unknown policy";
  return nullptr;
}

const char* Link::init(const LinkConfig& cfg) {
  if (const char* why = validate(cfg)) return why;
  *this = Link{};
  cfg_ = cfg;
  rate_bps_ = cfg.rate_mbps * 1'000'000;
  return nullptr;
}

uint64_t Link::backlog_bytes(TimeNs now) const {
  return queued_bytes(data_busy_ps_, to_ps(now));
}

DropReason Link::refusal(uint32_t ev) const {
  if (!up_) return DropReason::kLinkDown;
  if (blackhole_) return DropReason::kBlackhole;
  if (!blackholed_evs_.empty() &&
      std::find(blackholed_evs_.begin(), blackholed_evs_.end(), ev) != blackholed_evs_.end())
    return DropReason::kEvBlackhole;
  return DropReason::kNone;
}

bool Link::overflows(const PacketMeta& pkt, uint64_t ahead) const {
  return cfg_.buffer_bytes != kUnbounded && ahead + pkt.bytes > cfg_.buffer_bytes;
}

bool Link::can_trim(const PacketMeta& pkt) const {
  return pkt.trimmable && cfg_.overflow == Overflow::kTrim && pkt.header_bytes != 0 &&
         pkt.header_bytes < pkt.bytes;
}

bool Link::would_trim(const PacketMeta& pkt, TimeNs now) const {
  return refusal(pkt.ev) == DropReason::kNone && !pkt.control && !pkt.trimmed && can_trim(pkt) &&
         overflows(pkt, queued_bytes(data_busy_ps_, std::max(to_ps(now), last_now_ps_)));
}

Verdict Link::enqueue(PacketMeta& pkt, TimeNs now, Rng& rng) {
  if (const DropReason r = refusal(pkt.ev); r != DropReason::kNone) return drop(r);

  const Ps now_ps = std::max(to_ps(now), last_now_ps_);
  last_now_ps_ = now_ps;
  bool priority = pkt.control || pkt.trimmed;
  if (!priority) {
    const uint64_t ahead = queued_bytes(data_busy_ps_, now_ps);
    counters_.max_backlog_bytes = std::max(counters_.max_backlog_bytes, ahead);
    if (overflows(pkt, ahead)) {
      if (!can_trim(pkt)) return drop(DropReason::kOverflow);
      pkt.bytes = pkt.header_bytes;
      pkt.trimmed = true;
      ++counters_.trims;
      priority = true;
    } else if (pkt.ecn_capable && ahead > cfg_.ecn_threshold_bytes) {
      pkt.ce = true;
      ++counters_.ce_marks;
    }
  }
  const uint64_t ser_ps = serialise_ps(pkt.bytes);
  Ps depart_ps = 0;
  if (priority) {
    if (cfg_.priority_buffer_bytes != kUnbounded &&
        queued_bytes(prio_busy_ps_, now_ps) + pkt.bytes > cfg_.priority_buffer_bytes)
      return drop(DropReason::kPriorityOverflow);
    depart_ps = std::max(prio_busy_ps_, now_ps) + ser_ps;
    prio_busy_ps_ = depart_ps;
    // Data that arrives from now on waits for this packet too.
    data_busy_ps_ = std::max<Ps>(data_busy_ps_ + ser_ps, depart_ps);
  } else {
    depart_ps = std::max(data_busy_ps_, now_ps) + ser_ps;
    data_busy_ps_ = depart_ps;
  }
  ++counters_.packets;
  counters_.bytes += pkt.bytes;
  counters_.busy_ps += ser_ps;
  // A gray link loses the packet on the wire: it still used the link.
  if (loss_rate_ > 0 && rng.uniform() < loss_rate_) return drop(DropReason::kLoss);
  if (corrupt_rate_ > 0 && !pkt.control && !pkt.trimmed && rng.uniform() < corrupt_rate_) {
    pkt.corrupted = corruption_;
    ++counters_.corruptions;
  }
  return Verdict{to_ns(depart_ps) + cfg_.delay_ns, DropReason::kNone};
}

void Link::set_up(bool up, TimeNs now) {
  if (up == up_) return;
  up_ = up;
  if (!up) {
    ++down_count_;
    // Whatever was queued is gone; the queue restarts empty.
    data_busy_ps_ = prio_busy_ps_ = std::max(to_ps(now), last_now_ps_);
  }
}

void Link::set_ev_blackholed(uint32_t ev, bool on) {
  const auto it = std::find(blackholed_evs_.begin(), blackholed_evs_.end(), ev);
  if (on && it == blackholed_evs_.end()) blackholed_evs_.push_back(ev);
  if (!on && it != blackholed_evs_.end()) blackholed_evs_.erase(it);
}

void Link::set_rate_factor(double factor, TimeNs now) {
  if (!(factor > 0)) factor = 1e-6;
  factor = std::min(factor, 1.0);
  const uint64_t old_rate = rate_bps_;
  rate_bps_ =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(cfg_.rate_mbps * 1e6 * factor)));
  // The queue keeps its bytes, not its drain time: the time left to send
  // them scales with the rate.
  const Ps now_ps = std::max(to_ps(now), last_now_ps_);
  for (Ps* busy : {&data_busy_ps_, &prio_busy_ps_})
    if (*busy > now_ps) *busy = now_ps + ((*busy - now_ps) * old_rate + rate_bps_ - 1) / rate_bps_;
}

}  // namespace softmrc::fabric
