// NSCC and "none". All window arithmetic is in double-precision bytes: the
// increases are fractions of an MTU per ACK, and doubles are deterministic
// for a given build, which is all the replayable tests need.
#include "engine/cc/congestion_control.h"

#include <algorithm>
#include <cmath>

namespace softmrc::engine {
namespace {

// Weight of one delay sample in the smoothed delay that sets the depth of a
// multiplicative decrease: smooth enough to ride out one queue spike, quick
// enough to follow a queue that builds over a few RTTs of per-packet ACKs.
constexpr double kDelayEwmaWeight = 1.0 / 16;

// Fast increase applies while delay stays below this share of the target
// (the fabric is close to empty) for a whole window's worth of ACKs.
constexpr double kNearZeroDelayShare = 1.0 / 8;

// Proportional increase at zero delay, per RTT, as a share of max_cwnd; it
// falls linearly to nothing at the target. With max_cwnd = 1.5 BDP this is
// about a tenth of the BDP per RTT. (The OCP parameter set has no knob for
// it; UET derives it from the fabric the same way.)
constexpr double kProportionalShareOfMaxCwnd = 1.0 / 16;

// Upper bounds that keep time and window arithmetic far from overflow.
constexpr TimeNs kMaxCcTimeNs = 1'000'000'000;  // 1 s
constexpr uint64_t kMaxCwndLimitBytes = uint64_t{1} << 40;

bool in_range(double v, double lo, double hi) {
  return v >= lo && v <= hi;
}  // false on NaN

}  // namespace

const char* cc_algorithm_name(CcAlgorithm algorithm) {
  switch (algorithm) {
    case CcAlgorithm::kNone:
      return "none";
    case CcAlgorithm::kNscc:
      return "nscc";
  }
  return "?";
}

const char* validate(const CcProfile& profile) {
  if (profile.algorithm == CcAlgorithm::kNone) return nullptr;
  if (profile.algorithm != CcAlgorithm::kNscc) return "algorithm: unknown";
  const NsccParams& p = profile.nscc;
  if (p.base_rtt_ns == 0 || p.base_rtt_ns > kMaxCcTimeNs) return "base_rtt_ns: not in (0, 1 s]";
  if (p.target_delay_ns == 0 || p.target_delay_ns > kMaxCcTimeNs)
    return "target_delay_ns: not in (0, 1 s]";
  if (p.max_cwnd_bytes == 0 || p.max_cwnd_bytes > kMaxCwndLimitBytes)
    return "max_cwnd_bytes: not in (0, 2^40]";
  if (p.adjust_bytes_threshold == 0 || p.adjust_bytes_threshold > kMaxCwndLimitBytes)
    return "adjust_bytes_threshold: not in (0, 2^40]";
  if (p.adjust_period_ns == 0 || p.adjust_period_ns > kMaxCcTimeNs)
    return "adjust_period_ns: not in (0, 1 s]";
  if (!in_range(p.eta, 0, 1e6)) return "eta: not in [0, 1e6] MTUs";
  if (!in_range(p.fi, 0, 1e6)) return "fi: not in [0, 1e6] MTUs";
  if (!in_range(p.fi_scale, 0, 16)) return "fi_scale: not in [0, 16]";
  if (!(p.gamma > 0 && p.gamma <= 1)) return "gamma: not in (0, 1]";
  if (!(p.max_md_jump > 0 && p.max_md_jump < 1)) return "max_md_jump: not in (0, 1)";
  if (!p.disable_qa) {
    if (p.qa_gate > 63) return "qa_gate: above 63";
    if (p.qa_threshold_ns <= p.target_delay_ns || p.qa_threshold_ns > kMaxCcTimeNs)
      return "qa_threshold_ns: not in (target_delay_ns, 1 s]";
  }
  return nullptr;
}

NsccParams default_nscc_params(uint64_t link_rate_bps, TimeNs base_rtt_ns, uint32_t mtu) {
  const double bdp_bytes =
      static_cast<double>(link_rate_bps) / 8 * static_cast<double>(base_rtt_ns) / 1e9;
  NsccParams p;
  p.base_rtt_ns = base_rtt_ns;
  // A lone flow at max_cwnd queues half a base RTT: exactly the target.
  p.target_delay_ns = base_rtt_ns / 2;
  p.max_cwnd_bytes = std::max(static_cast<uint64_t>(std::ceil(1.5 * bdp_bytes)), uint64_t{2} * mtu);
  p.adjust_bytes_threshold = uint64_t{8} * mtu;
  p.adjust_period_ns = base_rtt_ns;
  p.eta = 0.15;
  p.fi = std::max(1.0, bdp_bytes / (32.0 * mtu));
  p.fi_scale = 0.25;
  p.gamma = 0.8;
  p.max_md_jump = 0.5;
  p.disable_qa = false;
  p.qa_gate = 3;
  p.qa_threshold_ns = 4 * p.target_delay_ns;
  return p;
}

void CongestionControl::init(const CcProfile& profile, uint32_t mtu_bytes, TimeNs now) {
  *this = CongestionControl{};
  algorithm_ = profile.algorithm;
  if (algorithm_ == CcAlgorithm::kNone) return;
  p_ = profile.nscc;
  mtu_ = mtu_bytes;
  max_cwnd_ = std::max(static_cast<double>(p_.max_cwnd_bytes), mtu_);
  cwnd_ = max_cwnd_;  // start at line rate; trims and quick adapt pull an incast down
  base_rtt_ns_ = p_.base_rtt_ns;
  last_adjust_ns_ = now;
  next_eta_ns_ = now + p_.adjust_period_ns;
  next_md_ns_ = now;
  qa_window_end_ns_ = now + base_rtt_ns_ + p_.target_delay_ns;
}

uint64_t CongestionControl::cwnd_bytes() const {
  if (algorithm_ == CcAlgorithm::kNone) return UINT64_MAX;
  return static_cast<uint64_t>(cwnd_);
}

void CongestionControl::clamp() {
  cwnd_ = std::clamp(cwnd_, mtu_, max_cwnd_);
}

void CongestionControl::cut(double bytes) {
  cwnd_ -= bytes;
  clamp();
  inc_ = 0;
  near_zero_bytes_ = 0;
  fast_increase_ = false;
  counters_.decreases++;
}

void CongestionControl::on_ack(const AckSample& s, TimeNs now) {
  if (algorithm_ == CcAlgorithm::kNone) return;
  achieved_bytes_ += s.acked_bytes;
  bytes_since_adjust_ += s.acked_bytes;

  double delay_ns = avg_delay_ns_;
  if (s.rtt_ns != 0) {
    base_rtt_ns_ = std::min(base_rtt_ns_, s.rtt_ns);
    delay_ns = static_cast<double>(s.rtt_ns - base_rtt_ns_);
    avg_delay_ns_ =
        have_delay_ ? avg_delay_ns_ + kDelayEwmaWeight * (delay_ns - avg_delay_ns_) : delay_ns;
    have_delay_ = true;
    if (delay_ns > static_cast<double>(p_.qa_threshold_ns)) qa_triggered_ = true;
  }
  if (maybe_quick_adapt(s.inflight_bytes, now)) return;

  // Feedback for bytes sent before the last quick adapt describes the queue
  // that quick adapt already reacted to: its marks must not cut again.
  const bool stale = stale_bytes_ > 0;
  stale_bytes_ -= std::min<uint64_t>(stale_bytes_, s.acked_bytes);
  if (have_delay_ && !(stale && s.ecn)) react(s, delay_ns, now);
  maybe_adjust(now);
  clamp();
}

void CongestionControl::react(const AckSample& s, double delay_ns, TimeNs now) {
  const auto target = static_cast<double>(p_.target_delay_ns);
  if (!s.ecn && delay_ns < target) {
    fast_or_proportional_increase(delay_ns, s.acked_bytes);
  } else if (!s.ecn) {
    near_zero_bytes_ = 0;
    fast_increase_ = false;
    inc_ += p_.fi * mtu_ * s.acked_bytes;
  } else if (delay_ns >= target) {
    multiplicative_decrease(s.sent_ns, now);
  }
  // ECN below the target: hold; the EV set steers away from the marked path.
}

void CongestionControl::fast_or_proportional_increase(double delay_ns, uint32_t acked_bytes) {
  const auto target = static_cast<double>(p_.target_delay_ns);
  if (p_.fi_scale > 0 && delay_ns < target * kNearZeroDelayShare) {
    near_zero_bytes_ += acked_bytes;
    if (fast_increase_ || static_cast<double>(near_zero_bytes_) > cwnd_) {
      fast_increase_ = true;
      cwnd_ += p_.fi_scale * acked_bytes;
      counters_.increases++;
      return;
    }
  } else {
    near_zero_bytes_ = 0;
    fast_increase_ = false;
  }
  inc_ += (target - delay_ns) / target * kProportionalShareOfMaxCwnd * max_cwnd_ * acked_bytes;
}

void CongestionControl::multiplicative_decrease(TimeNs sent_ns, TimeNs now) {
  near_zero_bytes_ = 0;
  fast_increase_ = false;
  const auto target = static_cast<double>(p_.target_delay_ns);
  // The depth follows the smoothed delay: one late sample must not halve
  // the window. If the smoothed delay is still below the target, wait.
  if (now < next_md_ns_ || avg_delay_ns_ <= target) return;
  // A mark on a packet sent before the last decrease describes the queue
  // that decrease already answered: once per round trip, as TCP reacts to
  // ECN once per window. Spacing by the base RTT alone cut again and again
  // while the queue built before the first cut drained (an RTT of queueing
  // is several base RTTs), and took a plane failure's window to a fifth.
  if (sent_ns != 0 && sent_ns < last_md_ns_) return;
  const double factor =
      std::max(1 - p_.gamma * (avg_delay_ns_ - target) / avg_delay_ns_, 1 - p_.max_md_jump);
  cut(cwnd_ * (1 - factor));
  next_md_ns_ = now + base_rtt_ns_;
  last_md_ns_ = now;
}

void CongestionControl::maybe_adjust(TimeNs now) {
  double step = 0;
  if (bytes_since_adjust_ >= p_.adjust_bytes_threshold ||
      now - last_adjust_ns_ >= p_.adjust_period_ns) {
    // inc_ holds acked bytes times per-RTT increase; a window's worth of ACKs
    // adds one per-RTT increase. Never more than was delivered meanwhile.
    step = std::min(inc_ / cwnd_, static_cast<double>(bytes_since_adjust_));
    inc_ = 0;
    bytes_since_adjust_ = 0;
    last_adjust_ns_ = now;
  }
  if (now >= next_eta_ns_) {
    step += p_.eta * mtu_;
    next_eta_ns_ = now + p_.adjust_period_ns;
  }
  if (step > 0 && cwnd_ < max_cwnd_) {
    cwnd_ += step;
    counters_.increases++;
  }
}

bool CongestionControl::maybe_quick_adapt(uint64_t inflight_bytes, TimeNs now) {
  if (p_.disable_qa || now < qa_window_end_ns_) return false;
  // Delivery over the window just ended: if a trigger fired in it and far
  // less than max_cwnd got through, the window is set to what did.
  const auto achieved = static_cast<double>(achieved_bytes_);
  const bool adapt =
      qa_triggered_ && achieved_bytes_ < (p_.max_cwnd_bytes >> p_.qa_gate) && achieved < cwnd_;
  if (adapt) {
    cwnd_ = achieved;
    clamp();
    inc_ = 0;
    near_zero_bytes_ = 0;
    fast_increase_ = false;
    stale_bytes_ = inflight_bytes;
    counters_.quick_adapts++;
  }
  achieved_bytes_ = 0;
  qa_triggered_ = false;
  qa_window_end_ns_ = now + base_rtt_ns_ + p_.target_delay_ns;
  return adapt;
}

void CongestionControl::on_trim(uint64_t inflight_bytes, TimeNs now) {
  counters_.trims++;
  on_packet_lost(inflight_bytes, now);
}

void CongestionControl::on_loss(uint64_t inflight_bytes, TimeNs now) {
  counters_.losses++;
  on_packet_lost(inflight_bytes, now);
}

void CongestionControl::on_packet_lost(uint64_t inflight_bytes, TimeNs now) {
  if (algorithm_ == CcAlgorithm::kNone) return;
  if (stale_bytes_ > 0) {  // sent before the last quick adapt: already answered
    stale_bytes_ -= std::min(stale_bytes_, static_cast<uint64_t>(mtu_));
    return;
  }
  cut(mtu_);
  qa_triggered_ = true;
  maybe_quick_adapt(inflight_bytes, now);
}

void CongestionControl::on_timeout(TimeNs now) {
  counters_.timeouts++;
  if (algorithm_ == CcAlgorithm::kNone) return;
  // A timeout is a loss nobody reported: the strongest decrease NSCC has.
  cut(cwnd_ * p_.max_md_jump);
  next_md_ns_ = now + base_rtt_ns_;
  last_md_ns_ = now;
}

}  // namespace softmrc::engine
