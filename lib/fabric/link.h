// One direction of one link with the output queue that feeds it: the
// building block of the fabric model.
//
// API in short (for the simulator and the real-time emulator alike):
//
//   fabric::Link link;
//   link.init(LinkConfig{.rate_mbps = 100'000, .delay_ns = 500,
//                        .buffer_bytes = 256 << 10, .ecn_threshold_bytes = 64 << 10,
//                        .overflow = Overflow::kTrim});
//   PacketMeta p{.bytes = 4190, .header_bytes = 94, .ev = ev,
//                .trimmable = true, .ecn_capable = true};
//   Verdict v = link.enqueue(p, now_ns, rng);
//   if (v.delivered()) hand the packet over at v.at_ns, CE-marked if p.ce,
//                      cut to p.bytes (= header_bytes) if p.trimmed;
//   else               it is lost, v.drop says why.
//
// The queue is a virtual FIFO: it keeps only the time at which the link
// will have sent everything accepted so far, so enqueue() is O(1), holds no
// packets and needs no timer. The caller keeps the packet until v.at_ns.
// Two classes share the link: control packets and trimmed headers go on a
// strict-priority class with its own (small) limit; data waits behind them.
// On overflow a trimmable data packet is cut to its headers and moved to
// the priority class (Overflow::kTrim), anything else is dropped.
// Congestion marking is a step at ecn_threshold_bytes of data queued ahead
// of the packet (DCTCP's K).
//
// Faults are plain state changed by direct calls at any time: up/down,
// a silent blackhole (whole link, or chosen EVs only), random loss on the
// wire (gray link), a rate factor (degraded link) and random corruption of
// data payloads. fabric/faults.h drives the same calls from a schedule.
//
// Approximations, all small against a data packet's serialisation time: a
// priority packet does not wait for the data packet being sent when it
// arrives, and the data queued before it is not delayed by it (data that
// arrives afterwards is). Enqueue calls must come in non-decreasing `now`
// order per link; an earlier `now` is treated as the latest one seen.
//
// Pure and clock-free: time is an argument, randomness comes from the Rng
// passed in (drawn only for lossy or corrupting links). Not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fabric/rng.h"

namespace softmrc::fabric {

using TimeNs = uint64_t;
inline constexpr TimeNs kNever = UINT64_MAX;
inline constexpr uint64_t kUnbounded = UINT64_MAX;

enum class Overflow : uint8_t {
  kDrop,  // a full queue drops every packet that does not fit
  kTrim,  // ...but cuts trimmable data to its headers and forwards those
};
const char* overflow_name(Overflow o);

struct LinkConfig {
  uint64_t rate_mbps = 100'000;               // line rate, Mb/s
  TimeNs delay_ns = 0;                        // propagation plus the next node's forwarding latency
  uint64_t buffer_bytes = kUnbounded;         // data class limit
  uint64_t ecn_threshold_bytes = kUnbounded;  // CE-mark data that finds more than this queued
  Overflow overflow = Overflow::kDrop;
  uint64_t priority_buffer_bytes = kUnbounded;  // control and trimmed headers
};
// nullptr if usable, else a reason naming the field.
const char* validate(const LinkConfig& cfg);

enum class DropReason : uint8_t {
  kNone,
  kLinkDown,          // the link is down (or went down while the packet was queued)
  kBlackhole,         // the link silently drops everything
  kEvBlackhole,       // the link silently drops this packet's EV
  kLoss,              // random loss on the wire (gray link)
  kOverflow,          // data queue full and the packet could not be trimmed
  kPriorityOverflow,  // priority queue full
  kNoRoute,           // (fabric) no usable uplink towards the destination
  kCount,
};
const char* drop_reason_name(DropReason r);

// A payload byte a link rewrote, and what became of the ICRC over it.
enum class Corruption : uint8_t {
  kNone,
  kBadIcrc,         // changed on the wire: the receiver's ICRC check fails
  kRecomputedIcrc,  // changed by a faulty switch that then computed a fresh ICRC:
                    // only an end-to-end check of the bytes finds it
};
// What becomes of a corrupted frame's ICRC as configurations spell it:
// "keep" (kBadIcrc), "recompute"; "none" for kNone.
const char* corruption_icrc_name(Corruption c);

// What a queue needs to know about a packet, and what it did to it.
struct PacketMeta {
  uint32_t bytes = 0;         // frame length now
  uint32_t header_bytes = 0;  // frame length after a trim (headers up to the MRC type header)
  uint32_t ev = 0;            // the entropy value as switches read it (or a 32-bit hash of it)
  bool control = false;       // ACK, NACK, probe...: rides the priority class
  bool trimmable = false;     // data with the trimmable DSCP
  bool ecn_capable = false;   // ECT: may be CE-marked instead of being dropped early
  bool ce = false;            // set by a queue
  bool trimmed = false;       // set by a queue: payload cut, rides the priority class from here
  // Set by a corrupting link: the owner of the frame rewrites one of its
  // payload bytes (a later corruption overrides what an earlier one left).
  Corruption corrupted = Corruption::kNone;
};

struct Verdict {
  TimeNs at_ns = kNever;  // when the packet reaches the far end of the link
  DropReason drop = DropReason::kNone;
  bool delivered() const { return drop == DropReason::kNone; }
};

struct LinkCounters {
  uint64_t packets = 0;  // accepted onto the wire (including those the wire then lost)
  uint64_t bytes = 0;
  uint64_t trims = 0;
  uint64_t ce_marks = 0;
  uint64_t corruptions = 0;  // data packets whose payload it rewrote
  std::array<uint64_t, static_cast<size_t>(DropReason::kCount)> drops{};
  uint64_t busy_ps = 0;            // time spent serialising, for utilisation
  uint64_t max_backlog_bytes = 0;  // deepest data queue seen by an arriving packet
};

class Link {
 public:
  // nullptr on success, else validate()'s reason.
  const char* init(const LinkConfig& cfg);

  Verdict enqueue(PacketMeta& pkt, TimeNs now, Rng& rng);
  // Whether enqueue(pkt, now) would trim it: a caller that cuts frames
  // itself can try first, and offer one it cannot cut as not trimmable.
  bool would_trim(const PacketMeta& pkt, TimeNs now) const;

  // Data bytes queued (including the one being sent) at `now`.
  uint64_t backlog_bytes(TimeNs now) const;
  // When the data class will have sent everything accepted so far.
  TimeNs idle_at_ns() const { return to_ns(data_busy_ps_); }
  // The rate in force (the configured one times the rate factor), bit/s.
  uint64_t rate_bps() const { return rate_bps_; }
  const LinkConfig& config() const { return cfg_; }
  const LinkCounters& counters() const { return counters_; }

  // Faults. Going down loses everything queued; a packet enqueued earlier
  // that reaches the far end later must be checked with survived().
  void set_up(bool up, TimeNs now);
  bool up() const { return up_; }
  uint32_t down_count() const { return down_count_; }
  bool survived(uint32_t down_count_at_enqueue) const {
    return up_ && down_count_ == down_count_at_enqueue;
  }
  void set_blackhole(bool on) { blackhole_ = on; }
  bool blackhole() const { return blackhole_; }
  void set_ev_blackholed(uint32_t ev, bool on);
  size_t blackholed_ev_count() const { return blackholed_evs_.size(); }
  void set_loss_rate(double p) { loss_rate_ = p; }  // [0, 1]
  double loss_rate() const { return loss_rate_; }
  // Serialise at `factor` times the configured rate, (0, 1], from `now`
  // on: what is queued then drains at the new rate too.
  void set_rate_factor(double factor, TimeNs now);
  // Corrupt a payload byte of each data packet it delivers with
  // probability `p` ([0, 1]; 0 stops), leaving the ICRC as `how` says.
  void set_corruption(double p, Corruption how) {
    corrupt_rate_ = p;
    corruption_ = how;
  }
  double corrupt_rate() const { return corrupt_rate_; }
  Corruption corruption() const { return corruption_; }

  // Called by the owner for a packet lost after enqueue() accepted it (the
  // link went down while it was queued): keeps the drop counters whole.
  void count_drop(DropReason r) { ++counters_.drops[static_cast<size_t>(r)]; }

 private:
  // Picoseconds since time 0: 64 bits would run out after 213 days.
  using Ps = unsigned __int128;

  static Ps to_ps(TimeNs ns) { return Ps{ns} * 1000; }
  static TimeNs to_ns(Ps ps) { return static_cast<TimeNs>((ps + 999) / 1000); }  // rounded up
  static constexpr uint64_t kPsBitsPerByte = 8'000'000'000'000;  // 8 bits x 10^12 ps/s

  uint64_t serialise_ps(uint64_t bytes) const {
    return static_cast<uint64_t>((Ps{bytes} * kPsBitsPerByte + rate_bps_ - 1) / rate_bps_);
  }
  uint64_t queued_bytes(Ps busy_ps, Ps now_ps) const {
    return busy_ps > now_ps ? static_cast<uint64_t>((busy_ps - now_ps) * rate_bps_ / kPsBitsPerByte)
                            : 0;
  }
  // Why the link takes no packet on `ev`, or kNone.
  DropReason refusal(uint32_t ev) const;
  bool overflows(const PacketMeta& pkt, uint64_t ahead) const;  // the data class
  bool can_trim(const PacketMeta& pkt) const;
  Verdict drop(DropReason r) {
    count_drop(r);
    return Verdict{kNever, r};
  }

  LinkConfig cfg_{};
  uint64_t rate_bps_ = 0;  // the configured rate times the rate factor (below 1 Mb/s too)
  Ps data_busy_ps_ = 0;    // the data class has sent everything by then
  Ps prio_busy_ps_ = 0;    // the priority class likewise
  Ps last_now_ps_ = 0;
  bool up_ = true;
  bool blackhole_ = false;
  Corruption corruption_ = Corruption::kBadIcrc;
  double loss_rate_ = 0;
  double corrupt_rate_ = 0;
  uint32_t down_count_ = 0;
  std::vector<uint32_t> blackholed_evs_;
  LinkCounters counters_{};
};

}  // namespace softmrc::fabric
