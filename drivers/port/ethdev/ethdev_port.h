// The ethdev port driver: one DPDK ethdev (any PMD: a NIC, net_null,
// net_ring, net_tap, net_memif) serving as one plane of an endpoint, with
// one RX and one TX queue.
//
// This is the narrow port interface the daemon's lcore loop sees: bursts
// of mbufs in and out (DPDK's own inline burst calls, no extra dispatch),
// the link state, and the offloads the port turned on. The lcores reach
// their ports only through it; the daemon's control path makes a few
// rte_eth_* calls of its own: the in-process fabric makes its ring ports
// (rte_eth_from_rings) and takes a plane's links down and up
// (rte_eth_dev_set_link_*), the ports report reads each link
// (rte_eth_link_get_nowait), and the application server finds the ports'
// devices (rte_eth_dev_info_get).
//
// Threads: attach/open/start/stop/close run on the control thread while no
// lcore polls the port. rx_burst, tx_burst and poll_link belong to the
// lcore that owns the port. The link-status interrupt callback runs on
// DPDK's interrupt thread and only raises an atomic flag; stats() and
// set_admin_up() are control-path calls DPDK allows beside the bursts.
//
// DPDK's memif client connects to its server only when the port starts.
// So that a link comes up when its server does (started later, or a peer
// daemon or smrc-fabric restarted), start() lets a net_memif client port
// fail to connect, and poll_link() restarts such a port whose link is
// down, at growing intervals (kReconnectFirstUs doubling to
// kReconnectMaxUs). The restart (stop, then start: a connect) runs on
// EAL's interrupt thread, as an alarm: memif's handshake and disconnect run
// there too, with no lock against a stop from another thread, and the lcore
// polls its other ports meanwhile. No burst reaches the port from the
// request until the lcore has taken the outcome, and the connect never
// waits for a server that accepts nothing (connect_guard.h).
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "port/ethdev/farewell.h"
#include "port/ethdev/unmap_guard.h"

namespace softmrc::port {

struct EthdevPortConfig {
  uint16_t rx_desc = 512;
  uint16_t tx_desc = 512;
  uint32_t mtu = 0;  // L3 MTU in bytes (frame minus Ethernet header); 0: keep the PMD's
  rte_mempool* rx_pool = nullptr;
  bool tx_multi_seg = false;      // TX chains (headers + an external payload buffer)
  bool tx_fast_free = false;      // every TX mbuf is direct, refcnt 1, from one pool
  bool rx_ipv4_checksum = false;  // the port checks IPv4 header checksums, where it can
  bool rx_keep_crc = false;       // the port leaves each frame's FCS behind it, where it can
  uint64_t link_poll_us = 100;    // PMDs without link interrupts: re-read the link this often
};

class EthdevPort {
 public:
  static constexpr uint64_t kLinkBackstopUs = 10'000;
  static constexpr uint64_t kPeerCloseWaitUs = 1'000'000;
  static constexpr uint64_t kReconnectFirstUs = 100'000;
  static constexpr uint64_t kReconnectMaxUs = 3'200'000;

  EthdevPort() = default;
  EthdevPort(const EthdevPort&) = delete;
  EthdevPort& operator=(const EthdevPort&) = delete;
  ~EthdevPort();

  // The port named by `spec`: a PCI address ("0000:3b:00.0"), a vdev spec
  // ("net_null0,size=64"), or the name of a port that already exists (a
  // ring pair, or a device given on the EAL command line). Probes the
  // device if needed.
  static bool attach(const std::string& spec, uint16_t* port_id, std::string* err);
  // Whether the port can send mbuf chains (RTE_ETH_TX_OFFLOAD_MULTI_SEGS).
  static bool can_multi_seg(uint16_t port_id);

  bool open(uint16_t port_id, const EthdevPortConfig& cfg, std::string* err);
  bool start(std::string* err);
  void stop();
  void close();
  // Closes `ports` (none polled any more). net_memif ports first hand
  // their links over to their peers (farewell.h), waiting up to
  // kPeerCloseWaitUs in all for the peers' answers.
  static void close_all(std::span<EthdevPort* const> ports);

  uint16_t port_id() const { return port_id_; }
  const std::string& name() const { return name_; }
  const std::string& driver() const { return driver_; }
  bool link_interrupt() const { return lsc_; }
  // Link-status interrupts the PMD raised (each makes the next poll read the link).
  uint64_t link_interrupts() const { return link_interrupts_.load(std::memory_order_relaxed); }
  // Whether received frames carry the port's IPv4 header checksum verdict
  // (RTE_MBUF_F_RX_IP_CKSUM_*): asked for and offered.
  bool rx_ipv4_checksum() const { return rx_ipv4_checksum_; }
  // Whether a received frame's FCS, which the port checked, follows its
  // last byte in the buffer (RTE_ETH_RX_OFFLOAD_KEEP_CRC: not counted in
  // pkt_len, as DPDK's PMDs do it): asked for and offered.
  bool rx_keeps_crc() const { return rx_keep_crc_; }

  // No burst reaches a link the peer is closing (farewell.h), nor a port
  // stopped to reconnect; none is unmapped under (unmap_guard.h).
  uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) {
    if (off_) [[unlikely]]
      return keep_off();
    const unmap_guard::Burst burst;
    return rte_eth_rx_burst(port_id_, 0, pkts, n);
  }
  uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) {
    if (off_) [[unlikely]]
      return keep_off();
    const unmap_guard::Burst burst;
    return rte_eth_tx_burst(port_id_, 0, pkts, n);
  }

  // Re-reads the link when an interrupt said it changed, and once the poll
  // period has passed since the last read: link_poll_us for PMDs without
  // link interrupts, kLinkBackstopUs for those with them (some, net_tap
  // among them, claim the interrupt and never raise it: DPDK 22.11's
  // updates its link from netlink silently). True when the link changed;
  // link_up() then has the new state.
  bool poll_link(uint64_t now_tsc);
  bool link_up() const { return link_up_; }
  // The link is down to us because its peer said farewell, not (yet) for
  // the PMD.
  bool peer_closing() const { return kept_off_; }
  // Restarts of a memif client that brought its link back (on the owning
  // lcore's side), and those that found no server, or one that accepts
  // nothing. Counted when the lcore takes the restart's outcome.
  uint64_t reconnects() const { return reconnects_.load(std::memory_order_relaxed); }
  uint64_t reconnect_failures() const {
    return reconnect_failures_.load(std::memory_order_relaxed);
  }

  // Test and benchmark hooks: functions DPDK runs inside every RX (after
  // the PMD) or TX (before the PMD) burst of the port, on the polling lcore.
  // Set before start().
  bool add_rx_hook(rte_rx_callback_fn fn, void* arg);
  bool add_tx_hook(rte_tx_callback_fn fn, void* arg);

  // Control path.
  bool stats(rte_eth_stats* out) const { return rte_eth_stats_get(port_id_, out) == 0; }
  void reset_stats() { rte_eth_stats_reset(port_id_); }
  // Administrative link state (rte_eth_dev_set_link_up/down); false if the
  // PMD cannot.
  bool set_admin_up(bool up);
  rte_ether_addr mac() const;
  // Makes `mac` the port's address; where the PMD cannot, turns on
  // promiscuous mode so that frames to `mac` still arrive. False if neither.
  bool use_mac(const rte_ether_addr& mac);

  // DPDK's link-status interrupt callback (`arg`: the port), on EAL's
  // interrupt thread. Public so that a test can raise one: no vdev the
  // tests can run raises it.
  static int on_link_event(uint16_t port_id, rte_eth_event_type type, void* arg, void* ret);

 private:
  // The end of a net_memif link that this port is (farewell.h).
  enum class LinkEnd : uint8_t { kNone, kClient, kServer };

  // Takes the farewell frames out of every burst of a net_memif port.
  static uint16_t take_farewells(uint16_t port_id, uint16_t queue, rte_mbuf** pkts, uint16_t n,
                                 uint16_t max, void* arg);
  void on_farewell(Farewell kind);
  bool send_farewell(Farewell kind);
  // A burst on a link the peer is closing: none, only a BYE_ACK the TX
  // ring had no room for. Returns 0.
  uint16_t keep_off();
  bool read_link();
  // rte_eth_dev_start; a memif client's connect to its server does not wait.
  int dev_start();
  // A memif client with its link down: asks the interrupt thread to stop
  // the port and start it again (a connect to the server), at most once per
  // reconnect interval; a later poll takes the outcome.
  void reconnect(uint64_t now_tsc);
  static void restart(void* arg);  // the alarm, on the interrupt thread
  void take_restart(uint64_t now_tsc);
  // Control path, no lcore polling: a restart asked for is over, or will
  // not run.
  void settle_restart();

  uint16_t port_id_ = RTE_MAX_ETHPORTS;
  std::string name_;
  std::string driver_;
  bool opened_ = false;
  bool started_ = false;
  bool lsc_ = false;  // the PMD raises link-status interrupts
  bool rx_ipv4_checksum_ = false;
  bool rx_keep_crc_ = false;
  LinkEnd link_end_ = LinkEnd::kNone;
  rte_mempool* farewell_pool_ = nullptr;
  // What add_rx_hook() and add_tx_hook() added (the farewell callback
  // too): removed and freed in close().
  std::vector<const rte_eth_rxtx_callback*> rx_callbacks_;
  std::vector<const rte_eth_rxtx_callback*> tx_callbacks_;
  bool off_ = false;         // kept_off_ or restarting_: no bursts
  bool restarting_ = false;  // stopped to reconnect; started again when its server answers
  // A restart's progress: the lcore asks (kAsked), the interrupt thread
  // answers, the lcore takes the answer (kIdle). While kAsked, started_ is
  // the interrupt thread's.
  enum Restart : uint8_t { kIdle, kAsked, kStarted, kFailed };
  std::atomic<Restart> restart_{kIdle};
  bool link_raw_up_ = false;         // the PMD's link state, whatever the farewell says
  uint64_t reconnect_wait_tsc_ = 0;  // the interval now, doubling to kReconnectMaxUs
  uint64_t next_reconnect_tsc_ = 0;
  std::atomic<uint64_t> reconnects_{0};
  std::atomic<uint64_t> reconnect_failures_{0};
  bool kept_off_ = false;    // the peer said BYE: no bursts
  bool ack_owed_ = false;    // ... and our BYE_ACK is not sent yet
  bool peer_gone_ = false;   // ... and the link has gone down since
  bool closing_ = false;     // in close_all(): a client answers no BYE
  bool bye_owed_ = false;    // closing, our BYE is not sent yet
  bool peer_acked_ = false;  // closing, the peer answered our BYE
  bool link_up_ = false;
  uint64_t link_poll_tsc_ = 0;
  uint64_t next_link_poll_tsc_ = 0;
  std::atomic<bool> link_event_{false};
  std::atomic<uint64_t> link_interrupts_{0};  // written by EAL's interrupt thread
};

}  // namespace softmrc::port
