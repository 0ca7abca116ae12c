// The ethdev port driver (see ethdev_port.h).
#include "port/ethdev/ethdev_port.h"

#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_kvargs.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "port/ethdev/connect_guard.h"
#include "sys/socket_file.h"

namespace softmrc::port {

namespace {

std::string errno_text(int ret) {
  return std::string(rte_strerror(ret < 0 ? -ret : ret));
}

// "net_null0,size=64" -> "net_null0": the device name that ethdev knows.
std::string device_name(const std::string& spec) {
  return spec.substr(0, spec.find(','));
}

uint64_t tsc_of_us(uint64_t us) {
  return us * rte_get_tsc_hz() / 1'000'000;
}

// How often close_all() re-reads a link it waits on, and how long it lets
// the interrupt thread finish a peer's disconnect once the link is down.
constexpr unsigned kPeerPollUs = 1'000;
constexpr unsigned kPeerSettleUs = 50'000;

// Whether a net_memif device is the server end of its link (memif's
// default role is client).
bool memif_server(const rte_device* dev) {
  const rte_devargs* da = dev ? rte_dev_devargs(dev) : nullptr;
  if (da == nullptr || da->args == nullptr) return false;
  rte_kvargs* kv = rte_kvargs_parse(da->args, nullptr);
  if (kv == nullptr) return false;
  const char* role = rte_kvargs_get(kv, "role");
  const bool server = role != nullptr && std::string_view(role) == "server";
  rte_kvargs_free(kv);
  return server;
}

// A memif server with a socket file (socket-abstract=no) cannot bind over
// the file a process that died left behind ("Address already in use"), so
// such a file, a socket nothing answers on, is removed first. Anything
// else at the path is left for the probe to report.
void remove_stale_memif_socket(const std::string& spec) {
  const size_t comma = spec.find(',');
  if (!spec.starts_with("net_memif") || comma == std::string::npos) return;
  rte_kvargs* kv = rte_kvargs_parse(spec.c_str() + comma + 1, nullptr);
  if (kv == nullptr) return;
  const char* role = rte_kvargs_get(kv, "role");
  const char* abstract = rte_kvargs_get(kv, "socket-abstract");
  const char* socket = rte_kvargs_get(kv, "socket");
  const std::string path = socket != nullptr ? socket : "/run/memif.sock";  // memif's default
  const bool file = role != nullptr && std::string_view(role) == "server" && abstract != nullptr &&
                    std::string_view(abstract) == "no";
  rte_kvargs_free(kv);
  if (file && sys::socket_file(path, SOCK_SEQPACKET) == sys::SocketFile::kStale)
    ::unlink(path.c_str());
}

}  // namespace

EthdevPort::~EthdevPort() {
  close();
}

bool EthdevPort::attach(const std::string& spec, uint16_t* port_id, std::string* err) {
  const std::string name = device_name(spec);
  if (name.empty()) {
    *err = "empty device name";
    return false;
  }
  if (rte_eth_dev_get_port_by_name(name.c_str(), port_id) == 0) return true;
  remove_stale_memif_socket(spec);
  const int ret = rte_dev_probe(spec.c_str());
  if (ret < 0) {
    *err = "cannot probe '" + spec + "': " + errno_text(ret);
    return false;
  }
  if (rte_eth_dev_get_port_by_name(name.c_str(), port_id) != 0) {
    *err = "'" + spec + "' was probed but is not an ethdev port";
    return false;
  }
  return true;
}

bool EthdevPort::can_multi_seg(uint16_t port_id) {
  rte_eth_dev_info info;
  return rte_eth_dev_info_get(port_id, &info) == 0 &&
         (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
}

bool EthdevPort::open(uint16_t port_id, const EthdevPortConfig& cfg, std::string* err) {
  port_id_ = port_id;
  char name[RTE_ETH_NAME_MAX_LEN];
  if (rte_eth_dev_get_name_by_port(port_id, name) != 0) {
    *err = "no port " + std::to_string(port_id);
    return false;
  }
  name_ = name;
  rte_eth_dev_info info;
  if (int ret = rte_eth_dev_info_get(port_id, &info); ret != 0) {
    *err = name_ + ": cannot read device info: " + errno_text(ret);
    return false;
  }
  driver_ = info.driver_name ? info.driver_name : "?";
  if (driver_ == "net_memif")
    link_end_ = memif_server(info.device) ? LinkEnd::kServer : LinkEnd::kClient;

  rte_eth_conf conf{};
  if (cfg.tx_multi_seg) {
    if (!(info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS)) {
      *err = name_ + " (" + driver_ + ") cannot send multi-segment packets";
      return false;
    }
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  }
  if (cfg.tx_fast_free && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE))
    conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
  rx_ipv4_checksum_ =
      cfg.rx_ipv4_checksum && (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) != 0;
  if (rx_ipv4_checksum_) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM;
  rx_keep_crc_ = cfg.rx_keep_crc && (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_KEEP_CRC) != 0;
  if (rx_keep_crc_) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_KEEP_CRC;
  // Link-status interrupts where the PMD has them; polling otherwise.
  lsc_ = info.dev_flags != nullptr && (*info.dev_flags & RTE_ETH_DEV_INTR_LSC) != 0;
  conf.intr_conf.lsc = lsc_ ? 1 : 0;
  if (cfg.mtu != 0) {
    if (cfg.mtu > info.max_mtu) {
      *err = name_ + ": MTU " + std::to_string(cfg.mtu) + " is above the port's maximum " +
             std::to_string(info.max_mtu);
      return false;
    }
    // What rte_eth_dev_configure() checks, with a message that says so:
    // net_tap and net_memif, for one, take no frame above 1518 bytes.
    const uint32_t overhead = info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu
                                  ? info.max_rx_pktlen - info.max_mtu
                                  : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
    if (cfg.mtu + overhead > info.max_rx_pktlen) {
      *err = name_ + " (" + driver_ + "): MTU " + std::to_string(cfg.mtu) + " needs frames of " +
             std::to_string(cfg.mtu + overhead) + " bytes, above the port's maximum of " +
             std::to_string(info.max_rx_pktlen);
      return false;
    }
    conf.rxmode.mtu = cfg.mtu;
  }
  if (int ret = rte_eth_dev_configure(port_id, 1, 1, &conf); ret != 0) {
    *err = name_ + ": configure failed: " + errno_text(ret);
    return false;
  }
  opened_ = true;
  uint16_t rx_desc = cfg.rx_desc;
  uint16_t tx_desc = cfg.tx_desc;
  if (int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc); ret != 0) {
    *err = name_ + ": descriptor counts refused: " + errno_text(ret);
    return false;
  }
  const int socket = rte_eth_dev_socket_id(port_id);
  rte_eth_rxconf rxconf = info.default_rxconf;
  rxconf.offloads = conf.rxmode.offloads;
  if (int ret = rte_eth_rx_queue_setup(port_id, 0, rx_desc, socket, &rxconf, cfg.rx_pool);
      ret != 0) {
    *err = name_ + ": RX queue setup failed: " + errno_text(ret);
    return false;
  }
  rte_eth_txconf txconf = info.default_txconf;
  txconf.offloads = conf.txmode.offloads;
  if (int ret = rte_eth_tx_queue_setup(port_id, 0, tx_desc, socket, &txconf); ret != 0) {
    *err = name_ + ": TX queue setup failed: " + errno_text(ret);
    return false;
  }
  if (lsc_)
    rte_eth_dev_callback_register(port_id, RTE_ETH_EVENT_INTR_LSC, &EthdevPort::on_link_event,
                                  this);
  if (link_end_ != LinkEnd::kNone) {
    farewell_pool_ = cfg.rx_pool;
    if (!add_rx_hook(&EthdevPort::take_farewells, this)) {
      *err = name_ + ": cannot add the farewell RX callback: " + errno_text(rte_errno);
      return false;
    }
  }
  const uint64_t poll_us = lsc_ ? std::max(cfg.link_poll_us, kLinkBackstopUs) : cfg.link_poll_us;
  link_poll_tsc_ = tsc_of_us(poll_us);
  return true;
}

// A memif client's start connects to its server; never a wait (connect_guard.h).
int EthdevPort::dev_start() {
  if (link_end_ != LinkEnd::kClient) return rte_eth_dev_start(port_id_);
  const connect_guard::NonBlocking no_wait;
  return rte_eth_dev_start(port_id_);
}

bool EthdevPort::start(std::string* err) {
  const int ret = dev_start();
  // A memif client whose server is not there yet waits for it, its link
  // down, as it would for a server that went away.
  if (ret != 0 && link_end_ != LinkEnd::kClient) {
    *err = name_ + ": start failed: " + errno_text(ret);
    return false;
  }
  started_ = ret == 0;
  restarting_ = off_ = !started_;
  read_link();
  next_link_poll_tsc_ = rte_rdtsc() + link_poll_tsc_;
  // A first handshake is not cut short by a reconnect.
  reconnect_wait_tsc_ = tsc_of_us(kReconnectFirstUs);
  next_reconnect_tsc_ = rte_rdtsc() + tsc_of_us(started_ ? kReconnectMaxUs : kReconnectFirstUs);
  return true;
}

void EthdevPort::stop() {
  settle_restart();
  if (started_) rte_eth_dev_stop(port_id_);
  started_ = false;
}

void EthdevPort::settle_restart() {
  if (restart_.load(std::memory_order_acquire) == kIdle) return;
  // Waits for a restart the interrupt thread is running; one still queued
  // is dropped, and the port stays as the lcore left it.
  if (rte_eal_alarm_cancel(&EthdevPort::restart, this) > 0) {
    restart_.store(kIdle, std::memory_order_relaxed);
    return;
  }
  take_restart(rte_rdtsc());
}

void EthdevPort::close() {
  stop();
  // Callbacks hang on the port id, which DPDK gives the next port it
  // probes: they must not outlive this object. Stopped, the port runs none.
  for (const rte_eth_rxtx_callback* cb : rx_callbacks_) {
    (void)rte_eth_remove_rx_callback(port_id_, 0, cb);
    rte_free(const_cast<rte_eth_rxtx_callback*>(cb));
  }
  for (const rte_eth_rxtx_callback* cb : tx_callbacks_) {
    (void)rte_eth_remove_tx_callback(port_id_, 0, cb);
    rte_free(const_cast<rte_eth_rxtx_callback*>(cb));
  }
  rx_callbacks_.clear();
  tx_callbacks_.clear();
  if (!opened_) return;
  // EAGAIN: the callback is running on the interrupt thread right now; it
  // must be gone before this port is, or a later interrupt writes into it.
  while (lsc_ && rte_eth_dev_callback_unregister(port_id_, RTE_ETH_EVENT_INTR_LSC,
                                                 &EthdevPort::on_link_event, this) == -EAGAIN)
    rte_pause();
  rte_eth_dev_close(port_id_);
  opened_ = false;
}

void EthdevPort::close_all(std::span<EthdevPort* const> ports) {
  std::vector<EthdevPort*> waiting;
  for (EthdevPort* p : ports) {
    p->settle_restart();
    if (p->link_end_ == LinkEnd::kNone || !p->started_) {
      p->close();
      continue;
    }
    p->closing_ = true;
    p->bye_owed_ = !p->kept_off_;
    waiting.push_back(p);
  }
  const uint64_t deadline = rte_rdtsc() + tsc_of_us(kPeerCloseWaitUs);
  bool saw_down = false;
  while (!waiting.empty() && rte_rdtsc() < deadline) {
    std::erase_if(waiting, [&](EthdevPort* p) {
      // A TX ring may have no room yet (memif's server sends into slots
      // its client's RX bursts hand back): farewells are sent until taken.
      if (p->bye_owed_) p->bye_owed_ = !p->send_farewell(Farewell::kBye);
      // The burst's callback takes in the peer's BYE or BYE_ACK (kept
      // off the link, the burst only sends a BYE_ACK still owed).
      rte_mbuf* pkts[32];
      if (const uint16_t n = p->rx_burst(pkts, 32); n > 0) rte_pktmbuf_free_bulk(pkts, n);
      // Acknowledged: the peer keeps off the link and waits for us to go.
      if (p->peer_acked_) {
        p->close();
        return true;
      }
      rte_eth_link link;
      if (rte_eth_link_get_nowait(p->port_id_, &link) != 0 || link.link_status != RTE_ETH_LINK_UP) {
        saw_down = true;
        return true;
      }
      return false;
    });
    if (!waiting.empty()) rte_delay_us_sleep(kPeerPollUs);
  }
  // The link goes down first thing in the interrupt thread's disconnect;
  // the rest of it (unmapping, freeing) must be over before our close.
  if (saw_down) rte_delay_us_sleep(kPeerSettleUs);
  for (EthdevPort* p : ports) p->close();
}

uint16_t EthdevPort::take_farewells(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, uint16_t,
                                    void* arg) {
  auto* port = static_cast<EthdevPort*>(arg);
  uint16_t kept = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    const Farewell kind = m->data_len >= kFarewellFrameLen
                              ? farewell_kind({rte_pktmbuf_mtod(m, const uint8_t*), m->data_len})
                              : Farewell::kNone;
    if (kind == Farewell::kNone) {
      pkts[kept++] = m;
      continue;
    }
    rte_pktmbuf_free(m);
    port->on_farewell(kind);
  }
  return kept;
}

void EthdevPort::on_farewell(Farewell kind) {
  if (kind == Farewell::kByeAck) {
    peer_acked_ = closing_;
    return;
  }
  // Closing, a client waits for its server's answer instead.
  if (closing_ && link_end_ == LinkEnd::kClient) return;
  if (kept_off_) return;
  ack_owed_ = !send_farewell(Farewell::kByeAck);
  kept_off_ = off_ = true;
  peer_gone_ = false;
  next_link_poll_tsc_ = 0;  // the endpoint hears of it at its next poll_link()
}

uint16_t EthdevPort::keep_off() {
  if (ack_owed_ && !restarting_) ack_owed_ = !send_farewell(Farewell::kByeAck);
  return 0;
}

bool EthdevPort::send_farewell(Farewell kind) {
  rte_mbuf* m = farewell_pool_ ? rte_pktmbuf_alloc(farewell_pool_) : nullptr;
  if (m == nullptr) return false;
  auto* frame = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kFarewellFrameLen));
  if (frame == nullptr) {
    rte_pktmbuf_free(m);
    return false;
  }
  const rte_ether_addr src = mac();
  write_farewell(kind, src.addr_bytes, frame);
  const unmap_guard::Burst burst;
  if (rte_eth_tx_burst(port_id_, 0, &m, 1) == 1) return true;
  rte_pktmbuf_free(m);
  return false;
}

int EthdevPort::on_link_event(uint16_t, rte_eth_event_type, void* arg, void*) {
  auto* port = static_cast<EthdevPort*>(arg);
  port->link_interrupts_.fetch_add(1, std::memory_order_relaxed);
  port->link_event_.store(true, std::memory_order_release);
  return 0;
}

bool EthdevPort::read_link() {
  rte_eth_link link;
  if (rte_eth_link_get_nowait(port_id_, &link) != 0) return false;
  bool up = link.link_status == RTE_ETH_LINK_UP;
  if (up != link_raw_up_) {
    link_raw_up_ = up;
    // A client reconnects soon after its link went down, then less often.
    reconnect_wait_tsc_ = tsc_of_us(kReconnectFirstUs);
    next_reconnect_tsc_ = rte_rdtsc() + reconnect_wait_tsc_;
  }
  if (kept_off_) {
    // Kept off until the peer has gone and a new one connected.
    peer_gone_ = peer_gone_ || !up;
    if (up && peer_gone_) kept_off_ = peer_gone_ = ack_owed_ = false;
    off_ = kept_off_ || restarting_;
    up = up && !kept_off_;
  }
  const bool changed = up != link_up_;
  link_up_ = up;
  return changed;
}

bool EthdevPort::poll_link(uint64_t now_tsc) {
  if (link_event_.load(std::memory_order_relaxed)) {
    link_event_.store(false, std::memory_order_relaxed);
  } else if (now_tsc < next_link_poll_tsc_) {
    return false;
  }
  next_link_poll_tsc_ = now_tsc + link_poll_tsc_;
  const bool changed = read_link();
  if (link_end_ != LinkEnd::kClient) return changed;
  const Restart restart = restart_.load(std::memory_order_acquire);
  if (restart == kStarted || restart == kFailed)
    take_restart(now_tsc);
  else if (restart == kIdle && !link_raw_up_ && now_tsc >= next_reconnect_tsc_)
    reconnect(now_tsc);
  return changed;
}

void EthdevPort::reconnect(uint64_t now_tsc) {
  restarting_ = off_ = true;
  restart_.store(kAsked, std::memory_order_relaxed);
  // The alarm's list is taken under a lock: the interrupt thread sees
  // every write before it.
  if (rte_eal_alarm_set(1, &EthdevPort::restart, this) != 0) {
    restart_.store(kFailed, std::memory_order_relaxed);
    take_restart(now_tsc);
  }
}

void EthdevPort::restart(void* arg) {
  auto* port = static_cast<EthdevPort*>(arg);
  if (port->started_) rte_eth_dev_stop(port->port_id_);
  // Fails while nothing listens on the server's socket, or the server
  // accepts nothing (memif logs it).
  port->started_ = port->dev_start() == 0;
  port->restart_.store(port->started_ ? kStarted : kFailed, std::memory_order_release);
}

void EthdevPort::take_restart(uint64_t now_tsc) {
  const uint64_t most = tsc_of_us(kReconnectMaxUs);
  if (restart_.load(std::memory_order_acquire) == kStarted) {
    restarting_ = false;
    off_ = kept_off_;
    reconnects_.fetch_add(1, std::memory_order_relaxed);
    // Connected: the handshake brings the link up; a failed one is
    // retried after the longest interval.
    reconnect_wait_tsc_ = most;
  } else {
    reconnect_failures_.fetch_add(1, std::memory_order_relaxed);
    reconnect_wait_tsc_ = std::min(reconnect_wait_tsc_ * 2, most);
  }
  restart_.store(kIdle, std::memory_order_relaxed);
  next_reconnect_tsc_ = now_tsc + reconnect_wait_tsc_;
}

bool EthdevPort::set_admin_up(bool up) {
  const int ret = up ? rte_eth_dev_set_link_up(port_id_) : rte_eth_dev_set_link_down(port_id_);
  return ret == 0;
}

bool EthdevPort::add_rx_hook(rte_rx_callback_fn fn, void* arg) {
  const rte_eth_rxtx_callback* cb = rte_eth_add_rx_callback(port_id_, 0, fn, arg);
  if (cb != nullptr) rx_callbacks_.push_back(cb);
  return cb != nullptr;
}

bool EthdevPort::add_tx_hook(rte_tx_callback_fn fn, void* arg) {
  const rte_eth_rxtx_callback* cb = rte_eth_add_tx_callback(port_id_, 0, fn, arg);
  if (cb != nullptr) tx_callbacks_.push_back(cb);
  return cb != nullptr;
}

rte_ether_addr EthdevPort::mac() const {
  rte_ether_addr a{};
  rte_eth_macaddr_get(port_id_, &a);
  return a;
}

bool EthdevPort::use_mac(const rte_ether_addr& mac) {
  rte_ether_addr a = mac;
  if (rte_eth_dev_default_mac_addr_set(port_id_, &a) == 0) return true;
  return rte_eth_promiscuous_enable(port_id_) == 0;
}

}  // namespace softmrc::port
