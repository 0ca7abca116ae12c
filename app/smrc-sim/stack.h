// The transport running on every simulated host, behind one interface so
// that MRC (mrc_stack.h, the real lib/engine) and the single-path baseline
// (roce_stack.h) face the same fabric, workload and faults.
//
// The simulator owns time, the fabric and the NICs: it asks a stack for a
// host's packets (poll_tx) when that host's NIC has room, hands it packets
// that arrive (deliver), and wakes each host at next_wakeup(). The stack
// reports back through a StackListener; the listener must not call back
// into the stack from inside those calls (the simulator queues what it
// needs to do and does it afterwards).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "packet.h"

namespace softmrc::sim {

inline constexpr TimeNs kNever = UINT64_MAX;

// One message from src to dst: the unit a workload is made of.
struct Transfer {
  uint32_t id = 0;  // unique within its step
  uint32_t src = 0;
  uint32_t dst = 0;
  uint64_t bytes = 0;
  uint32_t step = 0;
};

struct EvChange {
  uint32_t host = 0;
  uint32_t peer = 0;
  uint32_t plane = 0;
  uint32_t ev = 0;  // index in the QP's EV set
  const char* from = "";
  const char* to = "";
  bool to_bad = false;   // a path was taken out of use
  bool to_good = false;  // ...or returned to it
};

class StackListener {
 public:
  virtual ~StackListener() = default;
  // Every byte of the transfer is at the receiver (and verified, if asked).
  virtual void delivered(uint32_t transfer, TimeNs now) = 0;
  // Both ends have finished and released the connection.
  virtual void done(uint32_t transfer, TimeNs now) = 0;
  virtual void failed(uint32_t transfer, TimeNs now, const char* why) = 0;
  // New payload bytes placed at `host` (duplicates excluded).
  virtual void goodput(uint32_t host, uint64_t bytes, TimeNs now) = 0;
  virtual void ev_change(const EvChange& c, TimeNs now) = 0;
  // `host` has something to send that the simulator does not know of.
  virtual void wake(uint32_t host) = 0;
  // A trace line, if tracing() (callers check first to save the formatting).
  virtual bool tracing() const = 0;
  virtual void note(TimeNs now, const std::string& line) = 0;
};

// Summed over hosts and connections; each stack fills what applies to it.
struct StackCounters {
  uint64_t data_packets = 0;  // sent, retransmissions included
  uint64_t retransmits = 0;   // data packets sent again
  // MRC's retransmissions by cause (engine::RetxCause order).
  uint64_t retx_trim = 0, retx_sack = 0, retx_timeout = 0, retx_oow = 0, retx_plane = 0,
           retx_tail_probe = 0;
  uint64_t needless = 0;   // MRC: copies a receiver already had (a resend that was not needed)
  uint64_t go_back_n = 0;  // baseline: NAK-triggered rewinds
  uint64_t timeouts = 0;
  uint64_t trimmed_rx = 0;       // trimmed packets that reached a receiver
  uint64_t out_of_order_rx = 0;  // baseline: arrivals discarded for a hole before them
  uint64_t ev_to_bad = 0;
  uint64_t ev_to_good = 0;
  uint64_t stale_rx = 0;      // arrivals for a connection that had finished
  uint64_t parse_errors = 0;  // framed mode: frames lib/wire refused, but for their ICRC
  uint64_t icrc_errors = 0;   // framed mode: frames dropped for a bad ICRC (a corrupt fault)
  uint64_t verify_failures = 0;
  uint64_t qp_errors = 0;
  uint64_t connections = 0;  // set up over the run
  uint64_t waits = 0;        // transfers that waited for a free QP
};

class Stack {
 public:
  virtual ~Stack() = default;
  // Begins a transfer now, or as soon as both hosts have a free QP.
  virtual void start(const Transfer& t, TimeNs now) = 0;
  // A packet that reached p.dst.
  virtual void deliver(SimPacket& p, TimeNs now) = 0;
  // Up to `max` packets `host` sends now, written into out[0..n).
  virtual size_t poll_tx(uint32_t host, SimPacket* const* out, size_t max, TimeNs now) = 0;
  // 0: has packets to send now; kNever: nothing pending.
  virtual TimeNs next_wakeup(uint32_t host) const = 0;
  // The NIC noticed its link on `plane` go down or come back.
  virtual void set_port_up(uint32_t host, uint32_t plane, bool up, TimeNs now) = 0;
  virtual const StackCounters& counters() const = 0;
};

}  // namespace softmrc::sim
