// A plane's port on an lcore of its own (see port_task.h).
#include "softmrcd/port_task.h"

#include <rte_errno.h>
#include <rte_lcore.h>

#include <cstring>

namespace softmrc::softmrcd {

bool PortTask::setup(port::EthdevPort* port, const std::string& name, std::string* err) {
  port_ = port;
  const int socket = static_cast<int>(rte_socket_id());
  const unsigned flags = RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ;
  rx_ = rte_ring_create((name + "_rx").c_str(), kPortRingSlots, socket, flags);
  if (rx_ != nullptr) tx_ = rte_ring_create((name + "_tx").c_str(), kPortRingSlots, socket, flags);
  if (tx_ == nullptr) {
    *err = "cannot create the rings of port lcore '" + name + "': " + rte_strerror(rte_errno);
    return false;
  }
  return true;
}

void PortTask::start() {
  link_.store(port_->link_up() ? kUp : 0, std::memory_order_release);
  seen_link_ = link_.load(std::memory_order_relaxed);
}

void PortTask::close() {
  rte_mbuf* m[kPortBurst];
  for (rte_ring* r : {rx_, tx_}) {
    if (r == nullptr) continue;
    unsigned n;
    while ((n = rte_ring_dequeue_burst(r, reinterpret_cast<void**>(m), kPortBurst, nullptr)) > 0)
      rte_pktmbuf_free_bulk(m, n);
    rte_ring_free(r);
  }
  rx_ = tx_ = nullptr;
  rte_pktmbuf_free_bulk(pending_, num_pending_);
  num_pending_ = 0;
}

bool PortTask::poll(uint64_t tsc) {
  if (port_->poll_link(tsc)) publish_link();
  const uint16_t moved = receive();
  return (moved | transmit()) != 0;
}

PortTaskCounters PortTask::counters() const {
  return {rx_stalls_.load(std::memory_order_relaxed),
          tx_link_down_.load(std::memory_order_relaxed)};
}

void PortTask::publish_link() {
  const uint32_t state = (port_->link_up() ? kUp : 0) | (port_->peer_closing() ? kPeerClosing : 0);
  const uint32_t changes = (link_.load(std::memory_order_relaxed) & ~(kChange - 1)) + kChange;
  link_.store(changes | state, std::memory_order_release);
}

bool PortTask::poll_link() {
  const uint32_t now = link_.load(std::memory_order_acquire);
  if (now == seen_link_) return false;
  seen_link_ = now;
  return true;
}

uint16_t PortTask::receive() {
  if (rte_ring_free_count(rx_) < kPortBurst) {
    rx_stalls_.store(rx_stalls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return 0;
  }
  rte_mbuf* pkts[kPortBurst];
  const uint16_t n = port_->rx_burst(pkts, kPortBurst);
  // Single producer with room for a burst: all n go in.
  if (n != 0) rte_ring_sp_enqueue_burst(rx_, reinterpret_cast<void**>(pkts), n, nullptr);
  return n;
}

uint16_t PortTask::transmit() {
  num_pending_ += static_cast<uint16_t>(rte_ring_sc_dequeue_burst(
      tx_, reinterpret_cast<void**>(pending_ + num_pending_), kPortBurst - num_pending_, nullptr));
  if (num_pending_ == 0) return 0;
  const uint16_t sent = port_->tx_burst(pending_, num_pending_);
  const uint16_t left = num_pending_ - sent;
  if (left != 0 && !port_->link_up()) {
    // A port whose link is down may refuse every frame (a tap does): the
    // engine resends what was on it, so these must not hold up the ring.
    rte_pktmbuf_free_bulk(pending_ + sent, left);
    tx_link_down_.store(tx_link_down_.load(std::memory_order_relaxed) + left,
                        std::memory_order_relaxed);
    num_pending_ = 0;
    return sent;
  }
  std::memmove(pending_, pending_ + sent, left * sizeof(rte_mbuf*));
  num_pending_ = left;
  return sent;
}

}  // namespace softmrc::softmrcd
