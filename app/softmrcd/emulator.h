// The fabric emulator's data path: lib/fabric's link model applied to real
// mbufs in real time. An EmulatedHop is one direction of one emulated link
// (a plane of an in-process link, or a port pair of a standalone fabric):
//
//   admit(burst, now)  each frame's headers are read (EV, class, length up
//                      to the MRC type header) and offered to a fabric::Link,
//                      which queues, CE-marks, trims or drops it and says
//                      when it reaches the far end; the frame is marked or
//                      cut in place (lib/wire) and held in the delay line
//   deliver(now, send) frames whose time has come go to `send` (a ring, a
//                      TX burst) in delivery order
//
// The delay line is two FIFOs, data and priority (control packets and
// trimmed headers overtake queued data, as the model's priority class
// does); each is in delivery-time order because its class is served in
// order at a fixed propagation delay, so release only looks at two heads.
// It holds at most delay_line_packets frames; a frame beyond that is
// dropped and counted (delay_line_full), so memory is bounded and sized at
// init(). Going down loses every frame held, as a cut cable would; so does
// the end of the run (counted apart), so that what a hop took adds up.
//
// Faults are calls between bursts: down/up, blackhole (the whole hop or
// chosen EVs), random loss, rate factor, corruption. The EV a switch reads
// is the UDP source port. Corruption flips one payload byte of a data
// frame, leaving the ICRC stale (a bit error: the receiver drops the frame)
// or computing a fresh one (a faulty switch: only an end-to-end check of
// the bytes finds it). A chained frame is left whole and counted apart:
// its payload may be the sender's registered memory, sent in place.
//
// DeliveryTrace keeps the payload a link delivered in short time bins and
// captures the bins around a fault, for measure_recovery().
//
// Owned by one lcore. No locks; nothing on the packet path allocates (only
// blackholing one more EV may).
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "fabric/link.h"
#include "fabric/rng.h"

namespace softmrc::softmrcd {

// Drops the emulator adds to fabric::DropReason's: the model holds no
// packets, the emulator does.
enum class HopDrop : uint8_t {
  kDelayLineFull,  // the hop already holds delay_line_packets frames
  kRxRingFull,     // the receiving port took no more at delivery time
  kUntrimmable,    // the queue would trim it, but the frame cannot be cut
  kAtShutdown,     // still held when the run stopped
  kCount,
};
const char* hop_drop_name(HopDrop d);

struct HopConfig {
  fabric::LinkConfig link;
  double loss = 0;     // probability per packet, [0, 1]
  double corrupt = 0;  // probability per data packet, [0, 1]
  fabric::Corruption corrupt_icrc = fabric::Corruption::kBadIcrc;
  uint32_t delay_line_packets = 512;  // frames held (queued or on the wire) at most
  uint64_t seed = 1;                  // of the loss and corruption draws
  // SRv6 uSID switches (wire/usid.h): a packet's EV is the active uSID of
  // its IPv6 destination, which the plane shifts down to the destination.
  bool srv6 = false;
};

struct HopCounters {
  uint64_t packets = 0;  // delivered to the receiver
  uint64_t bytes = 0;
  uint64_t payload_bytes = 0;  // of the untrimmed data packets delivered
  uint64_t ce_marks = 0;
  uint64_t trims = 0;
  uint64_t corrupted = 0;  // frames delivered with a payload byte changed
  // Chained frames drawn for corruption and left whole: their first
  // segment had no room to take a copy of the rest.
  uint64_t corrupt_skipped_chained = 0;
  std::array<uint64_t, size_t(fabric::DropReason::kCount)> drops{};  // the model's
  std::array<uint64_t, size_t(HopDrop::kCount)> hop_drops{};         // the emulator's
  uint64_t max_held_packets = 0;   // the deepest the delay line got
  uint64_t max_backlog_bytes = 0;  // the deepest data queue an arriving packet found

  uint64_t total_drops() const {
    uint64_t n = 0;
    for (uint64_t v : drops) n += v;
    for (uint64_t v : hop_drops) n += v;
    return n;
  }
};

// A hop's faults as they stand.
struct HopState {
  bool up = true;
  bool blackhole = false;
  uint32_t blackholed_evs = 0;
  double loss = 0;
  double rate_factor = 1;
  double corrupt = 0;
  fabric::Corruption corrupt_icrc = fabric::Corruption::kBadIcrc;
};

class EmulatedHop {
 public:
  EmulatedHop() = default;
  EmulatedHop(const EmulatedHop&) = delete;
  EmulatedHop& operator=(const EmulatedHop&) = delete;
  ~EmulatedHop() { clear(); }

  // nullptr on success, else a reason naming the field.
  const char* init(const HopConfig& cfg);
  // Frees every frame held, counted as dropped at_shutdown.
  void clear();

  // Takes ownership of pkts[0, n).
  void admit(rte_mbuf* const* pkts, uint16_t n, uint64_t now_ns);

  // Hands every frame due by `now` to `send(rte_mbuf** pkts, uint16_t n)`,
  // which returns how many it took (the rest are freed and counted as
  // rx_ring_full), in bursts of up to 32.
  template <typename Send>
  void deliver(uint64_t now_ns, Send&& send) {
    rte_mbuf* burst[kBurst];
    uint32_t payload[kBurst];
    uint16_t n;
    while ((n = take_due(now_ns, burst, payload)) > 0) {
      const uint16_t sent = send(burst, n);
      account_delivered(burst, payload, sent, n);
      if (n < kBurst) break;
    }
  }

  uint32_t held() const { return data_.size() + priority_.size(); }
  uint64_t payload_bytes() const { return counters_.payload_bytes; }

  // Faults. Down loses every frame held.
  void set_up(bool up, uint64_t now_ns);
  void set_blackhole(bool on) { link_.set_blackhole(on); }
  void set_ev_blackholed(uint32_t ev, bool on) { link_.set_ev_blackholed(ev, on); }
  void set_loss(double p) { link_.set_loss_rate(p); }
  void set_rate_factor(double f, uint64_t now_ns);
  void set_corrupt(double p) { link_.set_corruption(p, link_.corruption()); }
  void set_corrupt_icrc(fabric::Corruption how) { link_.set_corruption(link_.corrupt_rate(), how); }
  HopState state() const;
  // The model's own counters merged into the emulator's.
  HopCounters counters() const;

 private:
  static constexpr uint16_t kBurst = 32;

  struct Held {
    rte_mbuf* m;
    uint64_t at_ns;
    uint32_t payload_bytes;
  };

  // A fixed-capacity FIFO in delivery-time order.
  class Fifo {
   public:
    void init(uint32_t capacity);
    bool empty() const { return head_ == tail_; }
    uint32_t size() const { return tail_ - head_; }
    const Held& front() const { return slots_[head_ & mask_]; }
    void pop() { ++head_; }
    void push(const Held& h) { slots_[tail_++ & mask_] = h; }

   private:
    std::vector<Held> slots_;
    uint32_t mask_ = 0;
    uint32_t head_ = 0;
    uint32_t tail_ = 0;
  };

  void admit_one(rte_mbuf* m, uint64_t now_ns);
  bool trim(rte_mbuf* m);
  void corrupt(rte_mbuf* m, uint32_t header_bytes, uint32_t payload, fabric::Corruption how);
  void free_held();
  uint16_t take_due(uint64_t now_ns, rte_mbuf** out, uint32_t* payload);
  void account_delivered(rte_mbuf** pkts, const uint32_t* payload, uint16_t sent, uint16_t n);

  HopConfig cfg_;
  fabric::Link link_;
  fabric::Rng rng_;
  Fifo data_;
  Fifo priority_;
  HopCounters counters_;  // the emulator's part
  double rate_factor_ = 1;
  std::vector<uint8_t> scratch_;  // a chained frame made contiguous for trimming
};

// Delivered payload in fixed time bins over a sliding window, and copies
// of the window around chosen moments (faults) for a later look.
class DeliveryTrace {
 public:
  // A stall this shortly before the moment still shapes what follows it:
  // a sender held up for milliseconds comes back to spurious losses, EVs
  // taken out of use and one plane's queue full.
  static constexpr uint64_t kStallLookbackNs = 10'000'000;

  struct Capture {
    uint64_t at_ns = 0;          // the moment
    uint32_t tag = 0;            // the caller's
    uint32_t at_bin = 0;         // bins[at_bin] holds the moment
    uint32_t first_bin = 0;      // bins before this one were before the trace began
    uint32_t num_bins = 0;       // bins filled
    bool done = false;           // the whole post window was seen
    uint64_t max_stall_ns = 0;   // the longest time between two add()s from kStallLookbackNs
                                 // before the moment on
    uint64_t fault_bin = 0;      // the moment's bin, counted from time 0
    std::vector<uint64_t> bins;  // bytes per bin
  };

  // Sizes everything: captures hold pre_bins before the moment and
  // post_bins from it; at most max_captures are kept.
  void init(uint64_t bin_ns, uint32_t pre_bins, uint32_t post_bins, uint32_t max_captures);
  // Bytes delivered by `now` since the last call; call every pass, with 0
  // too, so captures complete on time and see how long passes stall.
  void add(uint64_t now_ns, uint64_t bytes);
  // Starts a capture around `now`; false when every capture is used.
  bool mark(uint64_t now_ns, uint32_t tag);
  // Completes the open captures with what there is (at shutdown).
  void finish(uint64_t now_ns);

  uint64_t bin_ns() const { return bin_ns_; }
  std::span<const Capture> captures() const { return {captures_.data(), num_captures_}; }

 private:
  void advance(uint64_t bin);
  void fill(Capture& c, uint64_t upto_bin);

  uint64_t bin_ns_ = 0;
  uint32_t pre_bins_ = 0;
  uint32_t post_bins_ = 0;
  std::vector<uint64_t> ring_;        // bins [cur_ - size + 1, cur_], by bin % size
  std::vector<uint64_t> stall_ring_;  // the same bins: the longest gap between add()s ending there
  uint64_t cur_ = 0;                  // the bin being filled
  uint64_t first_ = 0;                // the first bin ever filled
  uint64_t last_add_ns_ = 0;
  bool started_ = false;
  std::vector<Capture> captures_;
  uint32_t num_captures_ = 0;
};

// How goodput went through a fault, from a capture's bins: the level
// before it (the mean over the pre window); the time until goodput is back
// to `keep_share` of that level, that is the first moment from which a
// moving mean over `smooth_bins` stays there for `hold_bins` bins; the
// lowest moving mean before that; and the level after (from 10 ms after
// the fault on).
struct Recovery {
  bool measured = false;  // false: too little traffic or history around the fault
  double before_gbps = 0;
  double after_gbps = 0;
  double lowest_gbps = 0;
  bool recovered = false;  // within the capture
  uint64_t recovery_ns = 0;
  uint64_t longest_gap_ns = 0;  // the longest run of empty bins after the fault
};
Recovery measure_recovery(const DeliveryTrace::Capture& c, uint64_t bin_ns, double keep_share,
                          uint32_t smooth_bins, uint32_t hold_bins);

}  // namespace softmrc::softmrcd
