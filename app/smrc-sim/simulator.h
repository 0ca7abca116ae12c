// The discrete-event simulator: one run of a scenario with one transport
// and one seed, in virtual nanoseconds.
//
// It owns the fabric (lib/fabric), the fault schedule, the workload and a
// Stack with every host's transport. Events: a packet reaching the far end
// of a link (then it enters the next link's queue, or is handed to the
// receiving host), a host's transport being due, a fault, a routing change,
// a NIC noticing its link state, the start of a step. Each host's NIC pulls
// packets from its transport only while its queues (one per plane) hold
// fewer than nic_queue_packets per plane, as a NIC's scheduler does.
// Events at the same time run in the order they were scheduled, and every
// random draw comes from one seeded fabric::Rng, so a run replays exactly
// from (scenario, transport, seed).
//
// Not thread-safe; runs of a sweep each have their own Simulator.
#pragma once

#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "event_queue.h"
#include "fabric/fabric.h"
#include "fabric/faults.h"
#include "results.h"
#include "scenario.h"
#include "stack.h"
#include "workload.h"

namespace softmrc::sim {

struct Progress {
  TimeNs now_ns = 0;
  uint32_t step = 0;
  uint32_t steps = 0;
  uint32_t finished = 0;  // transfers of this step
  uint32_t transfers = 0;
  uint64_t events = 0;
};

struct SimOptions {
  TransportKind transport = TransportKind::kMrc;
  uint64_t seed = 1;
  std::FILE* trace = nullptr;  // one line per notable event (drops, trims, faults, EVs...)
  std::function<void(const Progress&)> progress;  // every 64 Ki events
  bool record_transfers = false;                  // fill RunResult::transfers
};

class Simulator final : private StackListener {
 public:
  // Throws std::runtime_error if the scenario cannot be set up.
  Simulator(const Scenario& sc, const SimOptions& opt);
  ~Simulator() override;

  RunResult run();

 private:
  static constexpr size_t kBurst = 16;

  // StackListener
  void delivered(uint32_t transfer, TimeNs now) override;
  void done(uint32_t transfer, TimeNs now) override;
  void failed(uint32_t transfer, TimeNs now, const char* why) override;
  void goodput(uint32_t host, uint64_t bytes, TimeNs now) override;
  void ev_change(const EvChange& c, TimeNs now) override;
  void wake(uint32_t host) override { schedule_wake(host, now_); }
  bool tracing() const override { return opt_.trace != nullptr; }
  void note(TimeNs now, const std::string& line) override;

  uint32_t alloc_packet();
  void free_packet(uint32_t id) { free_packets_.push_back(id); }
  Bin& bin(TimeNs t);
  void schedule_wake(uint32_t host, TimeNs at);
  void schedule_route();
  void begin_step(uint32_t step);
  void start(const Transfer& t);
  TransferRecord* record(uint32_t transfer);
  void settle();
  void service(uint32_t host);
  uint64_t nic_backlog(uint32_t host) const;
  TimeNs nic_ready_at(uint32_t host, uint64_t backlog) const;
  void inject(uint32_t id);
  void enter(uint32_t id);
  void hop(uint32_t id);
  void drop(const SimPacket& p, uint32_t link, fabric::DropReason why);
  void corrupt(SimPacket& p, uint32_t link);
  void apply_faults();
  std::string describe(const SimPacket& p) const;
  void finish_result();

  const Scenario& sc_;
  SimOptions opt_;
  fabric::Fabric fabric_;
  fabric::FaultSchedule faults_;
  fabric::Rng rng_;
  Workload workload_;
  std::unique_ptr<Stack> stack_;
  EventQueue queue_;
  TimeNs now_ = 0;
  uint32_t hosts_ = 0;
  uint32_t planes_ = 0;
  uint64_t nic_limit_bytes_ = 0;

  std::deque<SimPacket> packets_;  // stable addresses; recycled through free_packets_
  std::vector<uint32_t> free_packets_;
  uint32_t burst_[kBurst] = {};  // packets lent to the stack for the next poll_tx
  SimPacket* burst_ptrs_[kBurst] = {};

  std::vector<TimeNs> wake_at_;  // per host: the earliest wake-up scheduled
  TimeNs route_at_ = UINT64_MAX;
  std::vector<uint8_t> port_up_;  // per host x plane: what the NICs were last told
  struct PortChange {
    uint32_t host;
    uint32_t plane;
    bool up;
  };
  std::vector<PortChange> port_changes_;

  uint32_t step_ = 0;
  bool step_active_ = false;
  bool all_done_ = false;
  std::vector<TimeNs> started_at_;  // per transfer of the step
  size_t record_base_ = 0;          // where this step's transfers start in result_.transfers
  std::vector<uint32_t> finished_;  // transfers done or failed, for settle()
  std::vector<Transfer> ready_;
  RunResult result_;
};

}  // namespace softmrc::sim
