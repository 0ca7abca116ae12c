// One endpoint this process hosts: its engine (QPs, EVs, registered
// memory), one port per plane, the framer, its half of the traffic
// generator's flows, and its counters. The lcore that owns it calls poll()
// in a loop; one pass is
//
//   commands -> link changes -> RX bursts -> wire::parse -> engine.on_packet
//   -> completions and events -> txgen posts -> engine.poll_tx -> framer
//   -> TX bursts -> (every stats.snapshot_ms) a snapshot
//
// with time from the TSC, no locks and no allocation. Everything else
// reaches the lcore as a Command through a ring, and leaves it through the
// Published snapshot.
#pragma once

#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/endpoint.h"
#include "port/ethdev/ethdev_port.h"
#include "softmrcd/clock.h"
#include "softmrcd/config.h"
#include "softmrcd/control_events.h"
#include "softmrcd/framer.h"
#include "softmrcd/port_task.h"
#include "softmrcd/published.h"
#include "softmrcd/stats.h"
#include "softmrcd/txgen.h"

namespace softmrc::softmrcd {

// The daemon's life, as every lcore sees it.
enum class Phase : uint8_t {
  kRun,
  kDrain,  // no new work: what is in flight may still complete
  kFlush,  // every QP to ERROR: what is left completes as flushed
  kExit,   // lcores return
};

enum class CommandType : uint8_t { kStart, kStop, kPlaneAdmin, kClearStats, kCall };

class EndpointTask;
class AppStage;

// A function the owning lcore runs for another thread (kCall): the slow path
// of the application and controller sockets. The caller waits for `done`.
struct LcoreCall {
  void (*run)(LcoreCall& self, EndpointTask& task, uint64_t now);
  std::atomic<bool> done{false};
};

struct Command {
  CommandType type = CommandType::kStart;
  uint8_t plane = 0;
  bool up = false;
  uint8_t reserved[5] = {};
  LcoreCall* call = nullptr;  // kCall
};
static_assert(sizeof(Command) == 16);

class EndpointTask {
 public:
  EndpointTask() = default;
  EndpointTask(const EndpointTask&) = delete;
  EndpointTask& operator=(const EndpointTask&) = delete;
  ~EndpointTask();

  // Control thread, before the lcores start. `link_ports` are the plane
  // ports of the endpoint's link (empty: open the configured devices).
  bool setup(const Config& cfg, uint32_t index, const std::vector<uint16_t>& link_ports,
             const Clock* clock, const std::atomic<Phase>* phase, std::string* err);
  // Registered memory for the traffic generator, from the EAL's memory,
  // registered at its own address or at `va`.
  bool alloc_region(size_t bytes, uint8_t** buf, uint32_t* key, std::string* err);
  bool alloc_region(size_t bytes, uint64_t va, uint8_t** buf, uint32_t* key, std::string* err);
  bool create_qp(uint32_t* qpn, std::string* err);
  bool connect(uint32_t qpn, uint32_t peer, uint32_t dest_qpn, std::string* err);
  Txgen& txgen() { return txgen_; }
  bool add_receiver(const Txgen::ReceiverSetup& r, std::string* err);
  bool start(std::string* err);  // ports up; sizes the snapshot for the QPs created
  void close();                  // after the lcores stopped
  // The ports it made (setup may have stopped before every plane had one).
  void add_ports_to(std::vector<port::EthdevPort*>* ports);
  // After every endpoint and link closed: no mbuf of the pools is in use.
  void free_pools();
  rte_mempool* rx_pool() const { return rx_pool_; }

  // The owning lcore. True when the pass found work: a frame received or
  // sent, an application's descriptor, a command.
  bool poll(uint64_t tsc);

  // Any thread.
  bool command(const Command& c);
  // The control thread, while the lcores run: runs fn(engine, now) on the
  // owning lcore between two passes and returns once it has run and the
  // snapshot shows its effects. The engine is not thread-safe, so every
  // call into it from another thread goes this way.
  template <typename Fn>
  void call(Fn&& fn);
  Published<EndpointSnapshot>& snapshot() { return snapshot_; }
  // Before the lcores start: where EV state changes and the controller's
  // probe replies go (control_events.h); records that find it full are
  // counted in control_events_lost().
  void set_control_events(rte_ring* r) { ctl_events_ = r; }
  uint64_t control_events_lost() const { return ctl_lost_.load(std::memory_order_relaxed); }
  bool flushed() const { return flushed_.load(std::memory_order_acquire); }

  // Setup (or after the lcores stopped): the applications' stage, run in
  // every pass (app_stage.h).
  void set_app_stage(AppStage* stage) { app_ = stage; }

  // The owning lcore (inside call()): the engine and the framer.
  engine::Endpoint& engine() { return ep_; }
  Framer& framer() { return framer_; }

  // Fixed after setup.
  const std::string& name() const { return name_; }
  uint32_t index() const { return index_; }
  int lcore() const { return lcore_; }
  void set_lcore(int lcore) { lcore_ = lcore; }
  uint32_t num_planes() const { return static_cast<uint32_t>(planes_.size()); }
  port::EthdevPort& port(uint32_t plane) { return *planes_[plane].port; }
  // The lcore of its own that polls the plane's port (port_task.h), or null.
  PortTask* port_task(uint32_t plane) { return planes_[plane].relay.get(); }
  // The line-rate peer writes each frame's FCS behind it, as a port that
  // keeps the CRC does: every plane reads it there.
  void read_fcs_behind_frames() {
    for (Plane& p : planes_) p.port_keeps_crc = true;
  }

 private:
  static constexpr uint16_t kBurst = 32;
  static constexpr uint16_t kPendingMax = 2 * kBurst;
  static constexpr int kMaxTxBurstsPerPass = 4;

  struct Plane {
    std::unique_ptr<port::EthdevPort> port;
    std::unique_ptr<PortTask> relay;  // the port's own lcore, if it has one
    bool port_checks_ipv4 = false;    // port->rx_ipv4_checksum(), at hand per frame
    bool port_keeps_crc = false;      // port->rx_keeps_crc(), or the line-rate peer's FCS
    PortTaskCounters relay_cleared;   // the relay's counters at the last clear
    PlaneState state;
    PlaneCounters counters;
    rte_mbuf* pending[kPendingMax];  // framed, not yet taken by the port
    uint16_t num_pending = 0;
    uint64_t full_since_ns = 0;  // pending too full for a burst since then (0: it is not)
    bool stalled = false;        // full for tx_stall_us: a hung peer, a NIC paused by PFC
    rte_mbuf* received[kBurst];  // this pass's RX burst, not yet handled
    uint16_t num_received = 0;
  };

  void on_phase(Phase phase, uint64_t now);
  void run_commands(uint64_t now);
  void apply_plane_state(uint32_t plane, const char* why, uint64_t now);
  // The plane's port, directly or through its own lcore's rings.
  static uint16_t rx_burst(Plane& p, rte_mbuf** pkts, uint16_t n) {
    return p.relay ? p.relay->rx_burst(pkts, n) : p.port->rx_burst(pkts, n);
  }
  static uint16_t tx_burst(Plane& p, rte_mbuf** pkts, uint16_t n) {
    return p.relay ? p.relay->tx_burst(pkts, n) : p.port->tx_burst(pkts, n);
  }
  void poll_links(uint64_t tsc, uint64_t now);
  uint32_t receive_bursts();
  // This pass's frames of the plane, taken by receive_bursts().
  void handle_received(uint32_t plane, uint64_t now);
  // Makes `placement` (the previous packet's) on the way and leaves this
  // packet's in it.
  void handle_rx(rte_mbuf* m, uint32_t plane, uint64_t now, wire::DeferredCopy& placement);
  void drain_engine(uint64_t now);
  void to_control(const engine::Event& e);
  // How many frames the ports took.
  uint32_t transmit(uint64_t now);
  uint16_t flush_tx(Plane& p, uint64_t now);
  bool tx_room() const;
  void publish(uint64_t now);

  const Config* cfg_ = nullptr;
  const Clock* clock_ = nullptr;
  const std::atomic<Phase>* phase_ = nullptr;
  Phase seen_phase_ = Phase::kRun;
  std::string name_;
  uint32_t index_ = 0;
  int lcore_ = kAnyLcore;
  uint32_t max_frame_ = 0;

  engine::Endpoint ep_;
  Framer framer_;
  Txgen txgen_;
  AppStage* app_ = nullptr;
  std::vector<Plane> planes_;
  rte_mempool* tx_pool_ = nullptr;
  rte_mempool* rx_pool_ = nullptr;      // device ports only
  rte_mempool* attach_pool_ = nullptr;  // tx_payload extbuf only
  rte_ring* commands_ = nullptr;
  std::vector<void*> regions_;  // rte_malloc'd
  std::vector<uint32_t> qpns_;

  DropCounters drops_;
  wire::PacketView view_;
  std::vector<uint8_t> scratch_;  // a chained frame, made contiguous for parse
  engine::TxPacket tx_[kBurst];
  // drain_engine's bursts: members, so that a pass does not value-initialise
  // them (several KiB of memset, a tenth of an idle pass).
  engine::Completion completions_[kBurst];
  engine::Event events_[kBurst];
  uint64_t next_snapshot_ns_ = 0;
  Published<EndpointSnapshot> snapshot_;
  std::atomic<bool> flushed_{false};
  uint32_t app_flushed_qps_ = 0;
  rte_ring* ctl_events_ = nullptr;
  std::atomic<uint64_t> ctl_lost_{0};  // written by the lcore only
};

template <typename Fn>
void EndpointTask::call(Fn&& fn) {
  struct Bound : LcoreCall {
    Fn* fn;
  };
  Bound b;
  b.fn = &fn;
  b.run = [](LcoreCall& self, EndpointTask& task, uint64_t now) {
    (*static_cast<Bound&>(self).fn)(task, now);
  };
  Command c{.type = CommandType::kCall};
  c.call = &b;
  // The lcore empties the command ring every pass: a full one is waited
  // out, as callers rely on fn having run (a QP freed has left the stage).
  while (!command(c)) rte_pause();
  while (!b.done.load(std::memory_order_acquire)) rte_pause();
}

}  // namespace softmrc::softmrcd
