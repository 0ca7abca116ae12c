// The application API's data path in softmrcd: AppStage, one per endpoint,
// on its lcore (docs/api.md). Each pass it drains the applications'
// work-request rings (bounded per QP and per pass), checks every descriptor
// (lib/shm/app_protocol.h), posts to the engine, and turns the engine's
// completions for application QPs into CQ entries and wake-ups through
// the completion channels' pipes. No lock, no allocation per packet; a
// wake-up (a one-byte write) only for an armed CQ.
//
// Plain C++ over the engine and the shared rings, no DPDK: AppServer (the
// control thread) maps what applications share and hands it over through
// EndpointTask::call(); test/fuzz/app_fuzz drives it as a hostile
// application would.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "engine/endpoint.h"
#include "engine/ring.h"
#include "shm/app_protocol.h"
#include "shm/spsc_ring.h"

namespace softmrc::softmrcd {

// An async event from the lcore to the control thread, for one
// application (owner) or all of them (owner 0).
struct AppEvent {
  uint32_t owner = 0;
  shm::EventMsg msg{};
};

struct AppCq {
  uint32_t id = 0;
  uint32_t owner = 0;
  shm::CqControl* ctrl = nullptr;
  shm::RingProducer<shm::Cqe> ring;
  engine::Ring<shm::Cqe> backlog;  // when the ring is full
  int wake_fd = -1;                // its channel's pipe (write end), or -1
  bool touched = false;            // got entries this pass
  bool overflow_reported = false;
};

struct AppQp {
  uint32_t owner = 0;
  uint32_t domain = 0;  // its PD's: the regions its Writes may read
  uint32_t pid = 0;     // the application's process, for reports
  uint32_t max_send_wr = 0;
  // Receives the engine holds for it at most: more wait in the ring, which
  // fills, and the library refuses them (ENOMEM) as verbs does.
  uint32_t max_recv_wr = 0;
  bool sig_all = false;
  AppCq* send_cq = nullptr;
  AppCq* recv_cq = nullptr;
  shm::RingConsumer<shm::WorkRequest> send_ring;
  shm::RingConsumer<shm::WorkRequest> recv_ring;
  bool ring_reported = false;  // a corrupt ring failed the QP
  // Descriptors taken from the send ring that the engine's send queue had
  // no room for yet: posted first next pass.
  static constexpr uint32_t kStash = 32;
  shm::WorkRequest stash[kStash];
  uint32_t stash_at = 0;
  uint32_t stash_n = 0;
};

class AppStage {
 public:
  // Control thread, before the lcores start: sizes every table.
  void init(uint32_t max_qps, uint32_t max_regions);

  // The owning lcore, once per pass: how many descriptors it took.
  uint32_t poll(engine::Endpoint& ep);
  // From drain_engine: true when the completion was an application QP's.
  bool on_completion(const engine::Completion& c);
  bool on_event(const engine::Event& e);
  void on_plane(uint32_t plane, bool up);
  // After a pass's completions from the engine: the stage's own error
  // completions, then notifications for armed CQs.
  void notify();

  // Inside EndpointTask::call() (the lcore), for the control thread.
  void add_cq(AppCq* cq);
  void remove_cq(AppCq* cq);
  void add_qp(uint32_t qpn, AppQp* qp);
  void remove_qp(uint32_t qpn);
  bool add_region(const shm::RegionEntry& e) { return regions_.add(e); }
  void remove_region(uint32_t key) { regions_.remove(key); }
  AppQp* qp(uint32_t qpn) { return qpn - 1 < qps_.size() ? qps_[qpn - 1] : nullptr; }

  // The owning lcore: the QPs, for its snapshot; sends not yet completed
  // (the shutdown's drain waits for them); every QP to ERROR (the
  // shutdown's flush), returning how many.
  const std::vector<uint32_t>& live_qps() const { return live_qps_; }
  // Before a modify: what the application posted to the QP's ring before
  // asking for it (receives before RTR) goes to the engine first.
  void take_posted(engine::Endpoint& ep, uint32_t qpn);
  // After a move to RESET: what the application posted before it and the
  // engine does not hold yet (Writes waiting for room in the send queue,
  // descriptors still in the rings) is dropped with the rest of the QP's
  // work, without completions.
  void drop_posted(uint32_t qpn);
  uint64_t outstanding(const engine::Endpoint& ep) const;
  uint32_t flush(engine::Endpoint& ep, uint64_t now);

  // The control thread: events the lcore raised.
  uint32_t take_events(AppEvent* out, uint32_t max) { return events_out_.dequeue_burst(out, max); }

  // The owning lcore: descriptors refused as malformed, and rings found
  // corrupt (the endpoint's snapshot publishes it).
  uint64_t bad_descriptors() const { return bad_descriptors_; }
  // Any thread: events the control thread had no room for (it drains the
  // ring every 10 ms at least).
  uint64_t events_lost() const { return events_lost_.load(std::memory_order_relaxed); }

 private:
  // How many descriptors they took from the QP's rings.
  uint32_t take_receives(engine::Endpoint& ep, uint32_t qpn, AppQp& q);
  uint32_t take_sends(engine::Endpoint& ep, uint32_t qpn, AppQp& q, uint32_t budget);
  void fail_if_corrupt(engine::Endpoint& ep, uint32_t qpn, AppQp& q);
  void post_recv(engine::Endpoint& ep, uint32_t qpn, AppQp& q, const shm::WorkRequest& w);
  // The QP is in ERROR (or gone): what it is given is flushed.
  static bool flushing(const engine::Qp* eq);
  static void to_error(engine::Endpoint& ep, uint32_t qpn);
  void drop_held(uint32_t qpn);
  // false: the engine's send queue is full, keep it for later.
  bool post_send(engine::Endpoint& ep, uint32_t qpn, AppQp& q, const shm::WorkRequest& w);
  void complete(AppCq* cq, const shm::Cqe& e);
  // A request that fails: its QP goes to ERROR, as an error completion
  // takes a verbs QP there (unless in RESET), and the request completes
  // with `st` after what that flushed.
  void fail_request(engine::Endpoint& ep, const engine::Qp& eq, AppQp& q, uint32_t qpn,
                    const shm::WorkRequest& w, shm::WcStatus st, uint32_t vendor_err, bool recv);
  // An error completion on the receive CQ (recv) or the send CQ, held
  // until notify(): the engine's completions of the same pass, for
  // requests posted before it, reach the CQ first.
  void error_cqe(AppQp& q, uint32_t qpn, const shm::WorkRequest& w, shm::WcStatus st,
                 uint32_t vendor_err, bool recv);
  void raise(const AppEvent& e) {
    if (events_in_.enqueue_burst(&e, 1) == 0)
      events_lost_.store(events_lost_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  }

  std::vector<AppQp*> qps_;  // by QPN - 1
  std::vector<uint32_t> live_qps_;
  std::vector<AppCq*> cqs_;  // live
  std::vector<AppCq*> touched_;
  struct HeldCqe {
    AppCq* cq;
    shm::Cqe cqe;
  };
  std::vector<HeldCqe> held_;  // error_cqe()'s, in post order
  std::vector<shm::RegionEntry> region_slots_;
  shm::RegionTable regions_{nullptr, 0};
  struct AlignedFree {
    void operator()(unsigned char* p) const {
      ::operator delete (p, std::align_val_t{shm::kCacheLine});
    }
  };
  std::unique_ptr<unsigned char, AlignedFree> event_ring_;
  shm::RingProducer<AppEvent> events_in_;
  shm::RingConsumer<AppEvent> events_out_;
  size_t next_qp_ = 0;  // round-robin start, for fairness
  uint64_t bad_descriptors_ = 0;
  std::atomic<uint64_t> events_lost_{0};  // written by the lcore only
};

}  // namespace softmrc::softmrcd
