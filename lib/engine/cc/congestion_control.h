// Per-QP congestion control: a window of bytes in flight, driven by ECN
// echoes, trims, losses and delay, modelled on UET 1.0's NSCC; or "none",
// which leaves the window unbounded (the MPR alone limits a QP's flight).
//
// NSCC reacts to each ACK by its quadrant: queueing delay below or above the
// target, crossed with ECN or not. Below target without ECN it grows in
// proportion to the headroom (and fast near zero delay); above target
// without ECN it grows gently and equally for every flow (fair increase);
// above target with ECN it decreases multiplicatively, at most once per base
// RTT and by at most max_md_jump; below target with ECN it holds (the EV set
// steers away from the marked path). Increases are batched. Quick adapt
// collapses the window to what was actually delivered when trims, losses or
// an extreme delay show that the window is far too large.
// docs/engine-paths-cc.md lists every parameter with its unit, default and why.
//
// Not thread-safe: owned by the lcore that owns the QP. Time is an argument;
// nothing allocates.
#pragma once

#include <cstdint>

#include "engine/path/ev_set.h"  // TimeNs

namespace softmrc::engine {

enum class CcAlgorithm : uint8_t { kNone, kNscc };
const char* cc_algorithm_name(CcAlgorithm algorithm);

// The parameter set of the OCP controller API's NSCC configuration, with
// units in the names. Ratios are plain numbers; "MTUs" means multiples of the
// QP's path MTU.
struct NsccParams {
  TimeNs base_rtt_ns = 0;               // unloaded RTT of the fabric; ratchets down on samples
  TimeNs target_delay_ns = 0;           // queueing delay (RTT - base RTT) the window aims at
  uint64_t max_cwnd_bytes = 0;          // window ceiling; the window starts here
  uint64_t adjust_bytes_threshold = 0;  // apply batched increases after this many acked bytes...
  TimeNs adjust_period_ns = 0;          // ...or after this long, whichever comes first
  double eta = 0;                       // MTUs added once per adjust period, whatever the signals
  double fi = 0;                        // fair increase: MTUs per RTT while delay >= target, no ECN
  double fi_scale = 0;         // fast increase: window growth per acked byte near zero delay
  double gamma = 0;            // decrease depth: gamma * (avg_delay - target) / avg_delay
  double max_md_jump = 0;      // largest fraction of the window one decrease removes
  bool disable_qa = false;     // quick adapt off
  uint8_t qa_gate = 0;         // quick adapt only if delivered < max_cwnd >> qa_gate
  TimeNs qa_threshold_ns = 0;  // a delay sample above this triggers quick adapt
};

struct CcProfile {
  CcAlgorithm algorithm = CcAlgorithm::kNone;
  NsccParams nscc;  // used when algorithm == kNscc
};

// nullptr if the profile is usable, else a reason that names the field.
const char* validate(const CcProfile& profile);

// NSCC parameters for a fabric of `link_rate_bps` per QP path and
// `base_rtt_ns` unloaded RTT (derivation in docs/engine-paths-cc.md).
NsccParams default_nscc_params(uint64_t link_rate_bps, TimeNs base_rtt_ns, uint32_t mtu);

struct AckSample {
  uint32_t acked_bytes;     // bytes newly acknowledged by this feedback
  uint64_t inflight_bytes;  // after removing them
  TimeNs rtt_ns;            // 0 = no sample; already net of responder service time
  bool ecn;                 // the feedback echoes a CE mark
  // When the packet the feedback is about was sent (its latest copy); 0 if
  // not known. A decrease answers only feedback on packets sent after the
  // previous one (unknown: only the base RTT spacing applies).
  TimeNs sent_ns = 0;
};

struct CcCounters {
  uint64_t increases = 0;  // batched adjustments and fast-increase steps that grew the window
  uint64_t decreases = 0;  // multiplicative decreases, trim/loss/timeout cuts
  uint64_t quick_adapts = 0;
  uint64_t trims = 0;
  uint64_t losses = 0;
  uint64_t timeouts = 0;
};

class CongestionControl {
 public:
  // `profile` must pass validate().
  void init(const CcProfile& profile, uint32_t mtu_bytes, TimeNs now);

  // kNone: UINT64_MAX.
  uint64_t cwnd_bytes() const;
  CcAlgorithm algorithm() const { return algorithm_; }
  TimeNs base_rtt_ns() const { return base_rtt_ns_; }
  TimeNs avg_delay_ns() const { return static_cast<TimeNs>(avg_delay_ns_); }

  void on_ack(const AckSample& sample, TimeNs now);
  // A trim NACK: one packet was cut by a congested switch.
  void on_trim(uint64_t inflight_bytes, TimeNs now);
  // A packet lost outright (no trim, overtaken by later PSNs).
  void on_loss(uint64_t inflight_bytes, TimeNs now);
  // The retransmit timer fired with nothing acknowledged.
  void on_timeout(TimeNs now);

  const CcCounters& counters() const { return counters_; }

 private:
  void react(const AckSample& s, double delay_ns, TimeNs now);
  void fast_or_proportional_increase(double delay_ns, uint32_t acked_bytes);
  void multiplicative_decrease(TimeNs sent_ns, TimeNs now);
  void cut(double bytes);
  void on_packet_lost(uint64_t inflight_bytes, TimeNs now);  // a trim or a loss
  void maybe_adjust(TimeNs now);
  bool maybe_quick_adapt(uint64_t inflight_bytes, TimeNs now);
  void clamp();

  CcAlgorithm algorithm_ = CcAlgorithm::kNone;
  NsccParams p_{};
  double mtu_ = 0;
  double max_cwnd_ = 0;
  double cwnd_ = 0;
  TimeNs base_rtt_ns_ = 0;
  double avg_delay_ns_ = 0;
  bool have_delay_ = false;

  // Batched increases: inc_ is in bytes^2 (acked bytes times the per-RTT
  // increase); dividing by the window turns a window's worth into one step.
  double inc_ = 0;
  uint64_t bytes_since_adjust_ = 0;
  TimeNs last_adjust_ns_ = 0;
  TimeNs next_eta_ns_ = 0;
  uint64_t near_zero_bytes_ = 0;  // acked bytes in a row with near-zero delay
  bool fast_increase_ = false;

  TimeNs next_md_ns_ = 0;  // no multiplicative decrease before this
  TimeNs last_md_ns_ = 0;  // the last multiplicative decrease or timeout cut

  // Quick adapt: delivery is measured over windows of base RTT + target.
  uint64_t achieved_bytes_ = 0;
  TimeNs qa_window_end_ns_ = 0;
  bool qa_triggered_ = false;
  uint64_t stale_bytes_ = 0;  // acked bytes whose ECN predates the last quick adapt

  CcCounters counters_{};
};

}  // namespace softmrc::engine
