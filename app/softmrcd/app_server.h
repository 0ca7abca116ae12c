// The application API, softmrcd's side (docs/api.md). Two halves:
//
//  AppServer  a ControlService on the control thread: the UNIX socket of
//             each hosted endpoint with `app_socket`, one connection per
//             application (libsoftmrc context), the slow path (hello,
//             regions, CQs, channels, QPs, modify/query), and async events
//             to the applications. It maps what the applications share and
//             reaches the engine only through EndpointTask::call().
//  AppStage   one per endpoint, on its lcore: each pass drains the
//             applications' work-request rings (bounded per QP and per
//             pass), checks every descriptor (lib/shm/app_protocol.h),
//             posts to the engine, and turns the engine's completions for
//             application QPs into CQ entries and eventfd notifications.
//             No lock, no allocation per packet; an eventfd write only for
//             an armed CQ.
//
// An application that goes away (its socket closes) has its QPs destroyed,
// then its regions deregistered, all inside one call on the lcore: no packet
// is placed into its memory after that.
//
// With tx_payload: extbuf, each application region is also an extbuf region
// of the framer (its payload is sent in place) if DPDK knows its IOVA and
// every port's device can read it: it is registered with
// rte_extmem_register, with the pages' virtual addresses in IOVA-VA mode (in
// IOVA-PA mode it is locked in memory and sent in place only if its pages
// are physically contiguous), then DMA-mapped for each port's device
// (rte_dev_dma_map); by copy otherwise. A region freed
// (or whose application went) is retired: deregistered and retired in the
// framer, and unmapped once no send queued by its application may read it
// and no mbuf in flight points into it (checked again every few ms).
//
// Profiles: a QP's EV and CC profile ids are resolved at RESET -> INIT by
// the daemon's ProfileResolver (the controller's profiles), which keeps the
// QP attached until it returns to RESET, is destroyed or its application
// goes. At shutdown (Phase::kFlush) the lcore moves every application QP to
// ERROR, so what the applications had outstanding completes as flushed
// before their sockets close.
#pragma once

#include <poll.h>
#include <rte_dev.h>
#include <rte_memory.h>

#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "engine/endpoint.h"
#include "engine/ring.h"
#include "shm/app_protocol.h"
#include "shm/shared_memory.h"
#include "shm/spsc_ring.h"
#include "softmrcd/config.h"
#include "softmrcd/control_service.h"
#include "softmrcd/profile_resolver.h"

namespace softmrc::softmrcd {

class EndpointTask;

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
  int efd = -1;                    // the channel's eventfd, or -1
  bool touched = false;            // got entries this pass
  bool overflow_reported = false;
};

struct AppQp {
  uint32_t owner = 0;
  uint32_t pid = 0;  // the application's process, for reports
  uint32_t max_send_wr = 0;
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
  // After a pass's completions: notifications for armed CQs.
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
  uint64_t outstanding(const engine::Endpoint& ep) const;
  uint32_t flush(engine::Endpoint& ep, uint64_t now);

  // The control thread: events the lcore raised.
  uint32_t take_events(AppEvent* out, uint32_t max) { return events_out_.dequeue_burst(out, max); }

  uint64_t bad_descriptors() const { return bad_descriptors_; }

 private:
  // How many descriptors they took from the QP's rings.
  uint32_t take_receives(engine::Endpoint& ep, uint32_t qpn, AppQp& q);
  uint32_t take_sends(engine::Endpoint& ep, uint32_t qpn, AppQp& q, uint32_t budget);
  void fail_if_corrupt(engine::Endpoint& ep, uint32_t qpn, AppQp& q);
  void post_recv(engine::Endpoint& ep, uint32_t qpn, AppQp& q, const shm::WorkRequest& w);
  // false: the engine's send queue is full, keep it for later.
  bool post_send(engine::Endpoint& ep, uint32_t qpn, AppQp& q, const shm::WorkRequest& w);
  void complete(AppCq* cq, const shm::Cqe& e);
  // An error completion on the receive CQ (recv) or the send CQ.
  void error_cqe(AppQp& q, uint32_t qpn, const shm::WorkRequest& w, shm::WcStatus st,
                 uint32_t vendor_err, bool recv);
  void raise(const AppEvent& e) { (void)events_in_.enqueue_burst(&e, 1); }

  std::vector<AppQp*> qps_;  // by QPN - 1
  std::vector<uint32_t> live_qps_;
  std::vector<AppCq*> cqs_;  // live
  std::vector<AppCq*> touched_;
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
};

class AppServer : public ControlService {
 public:
  AppServer();
  ~AppServer() override;
  // Opens the socket of every hosted endpoint that has `app_socket`.
  // Returns false with *err set ("endpoints[0].app_socket: ...").
  // `profiles` resolves the QPs' profile ids; it outlives this server.
  bool setup(const Config& cfg, const std::vector<std::unique_ptr<EndpointTask>>& endpoints,
             ProfileResolver* profiles, std::string* err);
  bool empty() const { return listeners_.empty(); }

  void add_fds(std::vector<pollfd>* fds) override;
  void step(const pollfd* ready, size_t count, uint64_t now_ns) override;
  void close() override;

 private:
  struct Client;
  struct Listener {
    int fd = -1;
    std::string path;
    EndpointTask* task = nullptr;
    uint32_t endpoint = 0;
    // The endpoint's ports' devices, each once: what application regions
    // sent in place are DMA-mapped for.
    std::vector<rte_device*> devices;
    std::unique_ptr<AppStage> stage;
  };

  void accept_on(Listener& l);
  // false: the client is gone (EOF or an unreadable message).
  bool serve(Client& c);
  void handle(Client& c, const shm::Msg& req, int fd, shm::Msg* rep);
  void drop(Client& c);
  void send_events(Listener& l);
  // A region's memory, shared by its application.
  struct Memory {
    shm::Mapping mem;
    bool extmem = false;                  // registered with rte_extmem_register
    bool framed = false;                  // an extbuf region of the framer
    rte_iova_t iova = RTE_BAD_IOVA;       // of the first byte, when extmem
    std::vector<rte_device*> dma_mapped;  // rte_dev_dma_map done for these
  };
  Memory share(const shm::Mapping& mem, const Listener& l) const;
  static void unmap_dma(Memory* m);
  static void unshare(Memory* m);
  // Unmaps the retired regions of l's applications that nothing reads any more.
  void reap(Listener& l);

  const Config* cfg_ = nullptr;
  ProfileResolver* profiles_ = nullptr;
  std::vector<Listener> listeners_;
  std::vector<std::unique_ptr<Client>> clients_;
  uint32_t next_owner_ = 1;
  struct Retired {
    Listener* l = nullptr;
    uint32_t owner = 0;
    Memory m;
  };
  std::vector<Retired> retired_;
  uint64_t next_reap_ns_ = 0;
};

}  // namespace softmrc::softmrcd
