// A two-endpoint harness for engine tests: endpoints A and B joined by one
// scripted pipe per direction and plane, in virtual time. Pipes can drop
// (by rate, by a bitmap over the data packets they carry, by EV), trim,
// duplicate, CE-mark, delay and reorder packets, and planes can go down.
// Everything random comes from one seeded std::mt19937_64, so a run
// replays exactly from its seed.
//
// Packets are not serialised: a TxPacket becomes the receiver's PacketView
// directly (a trim sets `trimmed` and drops the payload; a CE mark sets
// ecn = 3). Set ENGINE_TRACE to print every packet and plane change.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/endpoint.h"

namespace softmrc::engine::test {

struct PipeFaults {
  double drop_rate = 0;  // any packet
  double trim_rate = 0;  // data packets
  double dup_rate = 0;
  double ce_rate = 0;  // data packets
  TimeNs delay_ns = 2'000;
  uint32_t rate_gbps = 100;       // serialisation on this pipe (0: none)
  TimeNs jitter_ns = 0;           // uniform extra delay: reorders packets
  uint64_t drop_data_bitmap = 0;  // bit n: drop the n-th data packet on this pipe
  uint64_t dead_evs = 0;          // bit e: drop everything sent on the sender's EV e
};

// What a custom filter decides for one packet.
enum class Verdict : uint8_t { kPass, kDrop, kTrim };

struct Side {
  Endpoint ep;
  uint32_t qpn = 0;            // the first QP: qpns[0]
  std::vector<uint32_t> qpns;  // qpns[k] is connected to the peer's qpns[k]
  std::vector<uint8_t> mem;    // one registered region
  uint32_t key = 0;
};

struct HarnessConfig {
  uint32_t qps = 1;  // QP pairs between the two endpoints
  uint8_t num_planes = 2;
  uint32_t evs_per_plane = 4;
  uint32_t mtu = 1024;
  uint8_t mpr = 8;
  uint8_t mpr_dest_b = 0;  // B's responder window for A's packets (0: mpr)
  uint32_t caps = 0;       // both sides' capability flags (kCap...)
  uint16_t max_wimm = 16;
  uint32_t max_send_wr = 256;  // each side's limit
  uint8_t timeout = 6;         // 65.5 us
  uint8_t retry_linear = 7;
  uint8_t retry_exp = 7;
  uint32_t min_active = 1;
  CcProfile cc;
  size_t mem_bytes = 1 << 20;
  uint32_t start_psn_a = 0;
  uint32_t start_psn_b = 0;
  TimeNs probe_initial_ns = 20'000;
  TimeNs probe_max_ns = 200'000;
  TimeNs plane_detect_ns = 1'000;  // port event after the link drops
  QpTuning tuning;
  QpState b_last = QpState::kRts;  // kRtr: B's QPs only receive
  uint32_t ctrl_queue_packets = 4096;
};

class Harness {
 public:
  explicit Harness(const HarnessConfig& cfg, uint64_t seed = 1);

  Side& a() { return side_[0]; }
  Side& b() { return side_[1]; }
  Side& side(int i) { return side_[i]; }
  TimeNs now() const { return now_; }
  std::mt19937_64& rng() { return rng_; }

  // dir 0: A -> B, dir 1: B -> A.
  PipeFaults& pipe(int dir, uint8_t plane) { return pipes_[dir][plane]; }
  void set_all_pipes(const PipeFaults& f);
  // Applied before the scripted faults; sees the sender's TxPacket.
  void set_filter(std::function<Verdict(int dir, const TxPacket&)> f) { filter_ = std::move(f); }

  // The link of `plane` breaks at `at` (both directions); A's port reports
  // it plane_detect_ns later. `up` restores it the same way.
  void schedule_plane(uint8_t plane, bool up, TimeNs at);

  // An application's turn in every pass, between delivering packets and
  // polling what to send (softmrcd's lcore order): it polls side's
  // completions itself, so completions() does not see them. True when it
  // did something (posted, or has work left for the next pass).
  void set_app(std::function<bool(int side)> app) { app_ = std::move(app); }

  // Runs until pred() holds (true) or virtual time passes `limit` (false).
  bool run(const std::function<bool()>& pred, TimeNs limit);
  // Runs until nothing is in flight and no timer is due before `limit`.
  void run_for(TimeNs duration);

  // Completions and events seen so far, per side.
  std::vector<Completion>& completions(int side) { return cq_[side]; }
  std::vector<TimeNs>& completion_times(int side) { return cq_at_[side]; }
  std::vector<Event>& events(int side) { return ev_[side]; }

  uint64_t delivered() const { return delivered_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t dropped_data(int dir) const { return dropped_data_[dir]; }
  uint64_t duplicated_data(int dir) const { return duplicated_data_[dir]; }

 private:
  struct Flight {
    TimeNs at = 0;
    uint64_t seq = 0;
    int to = 0;
    uint8_t plane = 0;
    wire::PacketView pv;
    std::vector<uint8_t> payload;
  };
  struct Later {  // min-heap order on (at, seq)
    bool operator()(const Flight& x, const Flight& y) const {
      return x.at != y.at ? x.at > y.at : x.seq > y.seq;
    }
  };
  struct PlaneChange {
    TimeNs at;
    uint8_t plane;
    bool up;
    bool link;  // true: the link itself; false: A's port event
  };

  void setup_side(int i, const HarnessConfig& cfg);
  void connect(const HarnessConfig& cfg);
  void connect_qp(const HarnessConfig& cfg, int side, uint32_t k);
  void transmit(int from, const TxPacket& p);
  bool step();
  bool collect();

  HarnessConfig cfg_;
  std::mt19937_64 rng_;
  Side side_[2];
  std::vector<EvEntry> evs_;
  std::vector<PipeFaults> pipes_[2];
  std::vector<bool> link_up_;
  std::vector<uint64_t> data_count_[2];
  std::vector<TimeNs> link_free_[2];  // when each pipe has sent its last packet
  std::vector<PlaneChange> plane_changes_;
  std::function<Verdict(int, const TxPacket&)> filter_;
  std::function<bool(int)> app_;
  std::vector<Flight> queue_;  // a heap ordered by Later
  uint64_t seq_ = 0;
  TimeNs now_ = 0;
  std::vector<Completion> cq_[2];
  std::vector<TimeNs> cq_at_[2];  // when each completion was polled
  std::vector<Event> ev_[2];
  bool trace_;  // $ENGINE_TRACE: print every packet
  uint64_t delivered_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dropped_data_[2] = {};
  uint64_t duplicated_data_[2] = {};
};

// One line per side: PSN state and counters, for failure messages.
std::string describe(Harness& h);

// FNV-1a, for comparing message contents.
uint64_t hash_bytes(const uint8_t* p, size_t n);

}  // namespace softmrc::engine::test
