// A plane's port polled by an lcore of its own (`endpoints[i].planes[j].
// lcore`): the port lcore moves frames between the port and two
// single-producer single-consumer rings, and the endpoint's lcore takes and
// gives bursts through those rings as it would through the port. On bare
// metal each port gets a core this way, and the endpoint's lcore spends
// itself on the protocol rather than on the PMD, while every QP stays with
// the endpoint's lcore.
//
//   port RX -> rx ring -> endpoint        endpoint -> tx ring -> port TX
//
// The port lcore receives only while the rx ring has room for a burst, so a
// busy endpoint pushes back on the port (a NIC then counts imissed; a ring
// or memif peer waits) instead of losing frames between the two lcores.
// The link state crosses as one atomic word. Frames for a link that is down
// are freed at the port and counted, as the endpoint does on its own ports.
#pragma once

#include <rte_common.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "port/ethdev/ethdev_port.h"
#include "softmrcd/config.h"

namespace softmrc::softmrcd {

// The port lcore's counters; the endpoint publishes them with its plane's.
struct PortTaskCounters {
  uint64_t rx_stalls = 0;     // passes that left the port alone: the rx ring was full
  uint64_t tx_link_down = 0;  // frames freed because the port's link was down
};

class PortTask {
 public:
  PortTask() = default;
  PortTask(const PortTask&) = delete;
  PortTask& operator=(const PortTask&) = delete;
  ~PortTask() { close(); }

  // Control thread, before the lcores start. Each ring holds
  // kPortRingSlots frames (config.h).
  bool setup(port::EthdevPort* port, const std::string& name, std::string* err);
  // After the port started: the link state the endpoint starts from.
  void start();
  // After the lcores stopped: frees every frame still between the lcores.
  void close();

  int lcore() const { return lcore_; }
  void set_lcore(int lcore) { lcore_ = lcore; }

  // The port lcore. True when the pass moved a frame.
  bool poll(uint64_t tsc);
  PortTaskCounters counters() const;

  // The endpoint's lcore: the port's interface, through the rings.
  uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) {
    return static_cast<uint16_t>(
        rte_ring_sc_dequeue_burst(rx_, reinterpret_cast<void**>(pkts), n, nullptr));
  }
  uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) {
    return static_cast<uint16_t>(
        rte_ring_sp_enqueue_burst(tx_, reinterpret_cast<void**>(pkts), n, nullptr));
  }
  // True when the link changed since the last call; link_up() and
  // peer_closing() then have the new state.
  bool poll_link();
  bool link_up() const { return seen_link_ & kUp; }
  bool peer_closing() const { return seen_link_ & kPeerClosing; }

 private:
  // The link word: a change count above two state bits.
  static constexpr uint32_t kUp = 1;
  static constexpr uint32_t kPeerClosing = 2;
  static constexpr uint32_t kChange = 4;

  void publish_link();
  uint16_t receive();
  uint16_t transmit();

  port::EthdevPort* port_ = nullptr;
  int lcore_ = kAnyLcore;
  rte_ring* rx_ = nullptr;
  rte_ring* tx_ = nullptr;
  std::atomic<uint32_t> link_{0};  // written by the port lcore (and start())

  // Port lcore: its own cache lines, away from what the endpoint reads.
  alignas(RTE_CACHE_LINE_SIZE)
      rte_mbuf* pending_[kPortBurst];  // taken from the tx ring, not yet by the port
  uint16_t num_pending_ = 0;
  std::atomic<uint64_t> rx_stalls_{0};
  std::atomic<uint64_t> tx_link_down_{0};

  // Endpoint's lcore.
  alignas(RTE_CACHE_LINE_SIZE) uint32_t seen_link_ = 0;
};

}  // namespace softmrc::softmrcd
