// The emulated fabric: a link joins, plane by plane, two sides a and b,
// and the fabric role, on some lcore, moves what one side sent to the
// other through the fabric emulator (emulator.h), one EmulatedHop per
// plane and direction. A link is either
//
//   in-process (softmrcd, create()): the plane-N ports of two hosted
//   endpoints are net_ring ethdevs (rte_eth_from_rings), each with its own
//   RX and TX ring, and the hops move frames between the rings directly:
//     endpoint a, plane p: port TX ring --hop (p, a->b)--> port RX ring of b
//     endpoint b, plane p: port TX ring --hop (p, b->a)--> port RX ring of a
//   or standalone (smrc-fabric, join()): any two ethdev ports per plane
//   (net_memif servers that endpoints in other processes connect to,
//   net_tap, ...), which the hops receive from and send to themselves:
//     side a, plane p: port RX --hop (p, a->b)--> port TX of side b
//
// Each hop has the plane's rate, delay, buffer, ECN threshold, overflow
// policy, loss and corruption (links[].planes), and takes changes from
// the link's schedule and from operators: a plane down (both hops drop
// everything and both ports' links go down, as a cut cable would, where
// the PMD can take a link down: net_ring and net_tap can, net_memif
// cannot), loss, blackholes of the plane or of chosen EVs, a rate factor,
// corruption (operators only).
//
// The payload the link delivers is kept in bins of about half a base RTT;
// when a plane fails, the bins around it are captured, and the daemon's
// summary measures how goodput came through (measure_recovery()).
//
// Threads: create()/join()/destroy() on the control thread; poll() on the
// link's lcore (a standalone link's ports, their links included, are
// polled there only); request() from any thread (it only queues the change for
// poll()); stats through a Published snapshot; finish() and trace() once
// the lcores have stopped.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "port/ethdev/ethdev_port.h"
#include "softmrcd/config.h"
#include "softmrcd/emulator.h"
#include "softmrcd/published.h"
#include "softmrcd/report.h"
#include "softmrcd/stats.h"

namespace softmrc::softmrcd {

// A plane that went out of service (down, or blackholed whole), for the
// goodput report: the DeliveryTrace capture with the same index.
struct PlaneFault {
  uint8_t plane = 0;
  bool blackhole = false;      // silent; else the plane went down
  uint8_t planes_before = 0;   // in service just before
  double surviving_share = 0;  // of the capacity in service before, what the others have
};

class Link {
 public:
  // `program` names the log lines ("softmrcd", "smrc-fabric").
  explicit Link(const char* program) : program_(program) {}

  // In-process: creates the rings, ring ports and hops of link `index` of
  // `cfg`, between two hosted endpoints.
  bool create(const Config& cfg, uint32_t index, std::string* err);
  // Standalone: joins ports[0][p] (side a) and ports[1][p] (side b) for
  // every plane p, ports that the caller opened and started (and closes,
  // after destroy()). `lcore` is the caller's choice of lcore.
  bool join(uint32_t index, const LinkFabricSpec& spec,
            const std::vector<port::EthdevPort*> (&ports)[2], int lcore, uint32_t path_mtu,
            uint64_t snapshot_ms, std::string* err);
  void destroy();

  // The port of side 0 (a) or 1 (b) on `plane`.
  uint16_t port(int side, uint32_t plane) const { return ports_[side][plane]; }
  // In-process: the endpoint of side 0 (a) or 1 (b).
  uint32_t endpoint(int side) const { return ends_[side]; }
  int lcore() const { return lcore_; }
  void set_lcore(int lcore) { lcore_ = lcore; }
  uint32_t index() const { return index_; }
  uint32_t num_planes() const { return num_planes_; }

  // One pass of the fabric role: due schedule events and requests, then
  // per hop what the sender sent, and what is due at the receiver.
  void poll(uint64_t now_ns);

  // Any thread: a change that poll() applies (at_ns is ignored). False
  // when too many are waiting.
  bool request(const LinkEvent& e);

  Published<LinkSnapshot>& snapshot() { return snapshot_; }
  // Writer: the link's lcore, or the control thread once that has stopped.
  void publish(uint64_t now_ns);

  // The unloaded round trip over `plane`: twice its delay plus a full
  // data frame and an ACK serialised at its rate.
  uint64_t base_rtt_ns(uint32_t plane) const;

  // Control thread, after the lcores stopped: drops what the hops still
  // hold (at_shutdown), closes the open captures and publishes the counters.
  void finish(uint64_t now_ns);
  const DeliveryTrace& trace() const { return trace_; }
  const PlaneFault& fault(uint32_t capture) const { return faults_[capture]; }

 private:
  static constexpr uint16_t kBurst = 32;
  static constexpr uint64_t kNoOriginYet = UINT64_MAX;  // schedule_origin_ns_ before a frame

  // Where a hop takes frames from or hands them to: a ring of an
  // in-process link (read and written directly, behind the ring port its
  // endpoint polls), or else a port of the caller's.
  struct HopEnd {
    rte_ring* ring = nullptr;
    port::EthdevPort* port = nullptr;
  };

  struct Hop {
    HopEnd from;  // the sender's TX ring, or the sending side's port
    HopEnd to;    // the receiver's RX ring, or the receiving side's port
    EmulatedHop emu;
  };

  // The hops, goodput trace and snapshot, once the ends are known.
  bool init(const HopEnd (&rx)[2][engine::kMaxPlanes], const HopEnd (&tx)[2][engine::kMaxPlanes],
            uint64_t snapshot_ms, std::string* err);
  void apply(const LinkEvent& e, uint64_t now_ns);
  // The log line of a change: "<program>: t=... link L plane P <change><note>".
  void log_change(const LinkEvent& e, const char* note, uint64_t now_ns);
  // Standalone: reads the link of the port `hop` receives from.
  void poll_port_link(Hop& hop, uint64_t now_ns);
  bool set_plane_up(uint32_t plane, bool up, uint64_t now_ns);
  bool in_service(uint32_t plane) const;
  // schedule_from first_frame: the schedule's times count from now.
  void start_schedule(uint64_t now_ns);
  // The rate in service (the slower direction), Mb/s.
  double capacity_mbps(uint32_t plane) const;

  const char* program_;
  LinkFabricSpec spec_;
  uint32_t ends_[2] = {};
  uint32_t index_ = 0;
  uint32_t num_planes_ = 0;
  uint32_t path_mtu_ = 0;
  int lcore_ = kAnyLcore;
  std::vector<uint16_t> ports_[2];
  std::vector<rte_ring*> rings_;
  std::vector<Hop> hops_;  // [plane * 2 + direction], direction 0: a -> b
  rte_ring* requests_ = nullptr;
  size_t next_event_ = 0;
  uint64_t schedule_origin_ns_ = 0;  // what the schedule's at_ns count from
  uint64_t plane_events_ = 0;
  uint64_t payload_seen_ = 0;  // delivered by every hop, when the trace last saw it
  DeliveryTrace trace_;
  std::vector<PlaneFault> faults_;  // one per capture, reserved: no allocation on the lcore
  uint64_t snapshot_interval_ns_ = 0;
  uint64_t next_snapshot_ns_ = 0;
  Published<LinkSnapshot> snapshot_;
};

// "loss 0.01", "ev 49160 blackholed": a change as the log and the prompt
// show it.
std::string describe(const LinkEvent& e);

// An operator's change to a plane of a link ("loss", "0.01", "both"); false
// with *err naming what is wrong.
bool parse_link_change(const std::string& what, const std::string& value,
                       const std::string& direction, LinkEvent* out, std::string* err);

// What both programs show of their links: the rows of /softmrc/links
// (and `show links`), per link and plane.
void link_rows(Link& l, Report* out);
// args: <link>,<plane>,<what>,<value>[,<direction>] (parse_link_change()).
// Queues the change for the link's lcore (/softmrc/fabric/set); *out is
// one row saying what was requested.
bool request_link_change(const std::vector<std::unique_ptr<Link>>& links,
                         const std::vector<std::string>& args, Report* out, std::string* err);
// The status line's part for a link: per plane, what it carried over the
// `dt_ns` between two snapshots (both directions), or "down", then the
// faults in force and what it trimmed, marked and dropped.
std::string link_status(const LinkSnapshot& s, const LinkSnapshot& before, uint64_t dt_ns);
// "delivered <n> packets (<x> MiB of payload), trimmed <t>, CE-marked <c>,
// dropped <d> (<reason> <n>, ...)": the summary of one hop or of several
// summed.
std::string hop_totals(const HopCounters& c);
HopCounters sum_hops(const std::vector<HopCounters>& hops);

}  // namespace softmrc::softmrcd
