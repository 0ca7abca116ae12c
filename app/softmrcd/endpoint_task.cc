// One hosted endpoint and its lcore pass (see endpoint_task.h).
#include "softmrcd/endpoint_task.h"

#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "softmrcd/app_stage.h"

namespace softmrc::softmrcd {

namespace {

constexpr unsigned kCommandRing = 64;
constexpr uint64_t kOwnAddress = UINT64_MAX;  // alloc_region: register at the host address

std::string plane_key(const EndpointSpec& e, uint32_t plane) {
  return e.key + ".planes[" + std::to_string(plane) + "]";
}

// DPDK's memory is IOVA-contiguous within a page but not always across
// pages: the region's IOVA if all of it is contiguous, else RTE_BAD_IOVA.
rte_iova_t contiguous_iova(const uint8_t* base, size_t len) {
  if (rte_eal_iova_mode() == RTE_IOVA_VA) return reinterpret_cast<rte_iova_t>(base);
  const rte_memseg* ms = rte_mem_virt2memseg(base, nullptr);
  const rte_iova_t first = rte_mem_virt2iova(base);
  if (ms == nullptr || ms->hugepage_sz == 0 || first == RTE_BAD_IOVA) return RTE_BAD_IOVA;
  const size_t page = ms->hugepage_sz;
  for (size_t off = page - reinterpret_cast<uintptr_t>(base) % page; off < len; off += page)
    if (rte_mem_virt2iova(base + off) != first + off) return RTE_BAD_IOVA;
  return first;
}

}  // namespace

EndpointTask::~EndpointTask() {
  close();
}

bool EndpointTask::setup(const Config& cfg, uint32_t index, const std::vector<uint16_t>& link_ports,
                         const Clock* clock, const std::atomic<Phase>* phase, std::string* err) {
  cfg_ = &cfg;
  clock_ = clock;
  phase_ = phase;
  index_ = index;
  const EndpointSpec& spec = cfg.endpoints[index];
  name_ = spec.name;
  lcore_ = spec.lcore;
  max_frame_ = max_frame_bytes(cfg.path_mtu);
  scratch_.resize(max_frame_);
  const int socket = static_cast<int>(rte_socket_id());

  // Frames are built in the TX pool; device ports receive into the RX
  // pool (ring ports of a link pass the peer's TX mbufs instead).
  const std::string pool_name = "smrcd_ep" + std::to_string(index);
  // A port that keeps the CRC writes it behind the frame.
  const uint32_t data_room = RTE_PKTMBUF_HEADROOM + max_frame_ + RTE_ETHER_CRC_LEN;
  const auto make_pool = [&](const std::string& suffix, uint32_t n, uint32_t room) {
    rte_mempool* mp = rte_pktmbuf_pool_create((pool_name + suffix).c_str(), n, cfg.mbuf_cache, 0,
                                              static_cast<uint16_t>(room), socket);
    if (mp == nullptr)
      *err = "mempool.mbufs: cannot allocate " + std::to_string(n) + " mbufs of " +
             std::to_string(room) + " bytes for endpoint '" + name_ +
             "': " + rte_strerror(rte_errno) + " (give the EAL more memory with -m)";
    return mp;
  };
  if ((tx_pool_ = make_pool("_tx", cfg.mbufs, data_room)) == nullptr) return false;
  if (link_ports.empty() &&
      (rx_pool_ = make_pool("_rx", rx_pool_size(cfg, index), data_room)) == nullptr)
    return false;
  // Each attached mbuf holds a reference on its region's 16-bit count,
  // besides the daemon's own: no more of them than the count can hold.
  if (cfg.tx_payload == TxPayload::kExtbuf &&
      (attach_pool_ = make_pool("_x", std::min<uint32_t>(cfg.mbufs, UINT16_MAX - 1), 0)) == nullptr)
    return false;
  const std::string ring_name = "smrcd_cmd" + std::to_string(index);
  commands_ =
      rte_ring_create_elem(ring_name.c_str(), sizeof(Command), kCommandRing, socket, RING_F_SC_DEQ);
  if (commands_ == nullptr) {
    *err = "cannot create the command ring of endpoint '" + name_ + "'";
    return false;
  }

  planes_.resize(spec.planes.size());
  std::vector<wire::MacAddr> macs(planes_.size());
  for (uint32_t p = 0; p < planes_.size(); ++p) {
    const std::string key = plane_key(spec, p);
    uint16_t port_id = 0;
    if (!link_ports.empty()) {
      port_id = link_ports[p];
    } else if (!port::EthdevPort::attach(spec.planes[p].port, &port_id, err)) {
      *err = key + ".port: " + *err;
      return false;
    }
    if (cfg.tx_payload == TxPayload::kExtbuf && !port::EthdevPort::can_multi_seg(port_id)) {
      *err = key + ".port: tx_payload extbuf needs multi-segment TX, which '" +
             spec.planes[p].port + "' does not offer (use tx_payload: copy)";
      return false;
    }
    port::EthdevPortConfig pc;
    pc.rx_desc = cfg.rx_desc;
    pc.tx_desc = cfg.tx_desc;
    pc.mtu = max_frame_ - static_cast<uint32_t>(sizeof(wire::EthHdr));
    pc.rx_pool = rx_pool_ != nullptr ? rx_pool_ : tx_pool_;
    pc.tx_multi_seg = cfg.tx_payload == TxPayload::kExtbuf;
    pc.tx_fast_free = cfg.tx_payload == TxPayload::kCopy;
    pc.rx_ipv4_checksum = cfg.rx_ipv4_checksum_offload;
    pc.rx_keep_crc = cfg.rx_keep_crc;
    pc.link_poll_us = cfg.link_poll_us;
    planes_[p].port = std::make_unique<port::EthdevPort>();
    port::EthdevPort& port = *planes_[p].port;
    if (!port.open(port_id, pc, err)) {
      *err = key + ".port: " + *err;
      return false;
    }
    planes_[p].port_checks_ipv4 = port.rx_ipv4_checksum();
    planes_[p].port_keeps_crc = port.rx_keeps_crc();
    if (has_own_lcore(spec, p)) {
      planes_[p].relay = std::make_unique<PortTask>();
      planes_[p].relay->set_lcore(spec.planes[p].lcore);
      const std::string relay_name = "smrcd_p" + std::to_string(index) + "_" + std::to_string(p);
      if (!planes_[p].relay->setup(&port, relay_name, err)) {
        *err = key + ".lcore: " + *err;
        return false;
      }
    }
    if (spec.planes[p].has_mac) {
      rte_ether_addr a;
      std::memcpy(a.addr_bytes, spec.planes[p].mac.bytes, 6);
      if (!port.use_mac(a)) {
        *err = key + ".mac: port " + port.name() + " takes neither this MAC nor promiscuous mode";
        return false;
      }
      macs[p] = spec.planes[p].mac;
    } else {
      const rte_ether_addr a = port.mac();
      std::memcpy(macs[p].bytes, a.addr_bytes, 6);
    }
  }

  engine::EndpointConfig ec;
  ec.num_planes = static_cast<uint8_t>(planes_.size());
  ec.max_qps = cfg.limits.max_qps;
  ec.max_regions = cfg.limits.max_regions;
  ec.qp.max_mpr = cfg.limits.max_mpr;
  ec.qp.max_wimm = cfg.limits.max_wimm;
  ec.qp.max_send_wr = cfg.limits.max_send_wr;
  ec.qp.max_recv_wr = cfg.limits.max_recv_wr;
  if (engine::Status st = ep_.init(ec); !st.ok()) {
    *err = "limits: " + std::string(st.reason());
    return false;
  }
  txgen_.init(cfg.limits.max_qps);
  return framer_.init(cfg, index, macs, tx_pool_, attach_pool_, err);
}

bool EndpointTask::alloc_region(size_t bytes, uint8_t** buf, uint32_t* key, std::string* err) {
  return alloc_region(bytes, kOwnAddress, buf, key, err);
}

bool EndpointTask::alloc_region(size_t bytes, uint64_t va, uint8_t** buf, uint32_t* key,
                                std::string* err) {
  void* mem = rte_malloc_socket("smrcd_region", bytes, RTE_CACHE_LINE_SIZE,
                                static_cast<int>(rte_socket_id()));
  if (mem == nullptr) {
    *err = "cannot allocate " + std::to_string(bytes) + " bytes of registered memory on '" + name_ +
           "' (give the EAL more memory with -m)";
    return false;
  }
  regions_.push_back(mem);
  *buf = static_cast<uint8_t*>(mem);
  std::memset(mem, 0, bytes);
  engine::Region r;
  r.va = va == kOwnAddress ? reinterpret_cast<uint64_t>(mem) : va;
  r.length = bytes;
  r.host = *buf;
  r.access = engine::kAccessLocalWrite | engine::kAccessRemoteWrite;
  if (engine::Status st = ep_.register_region(r, key); !st.ok()) {
    *err = "register_region on '" + name_ + "': " + st.reason() + " (raise limits.max_regions)";
    return false;
  }
  return framer_.add_extbuf_region(*buf, bytes, contiguous_iova(*buf, bytes), err);
}

bool EndpointTask::add_receiver(const Txgen::ReceiverSetup& r, std::string* err) {
  if (engine::Status st = txgen_.add_receiver(r, ep_); !st.ok()) {
    *err = "endpoint '" + name_ + "': " + st.reason() + " (raise limits.max_recv_wr)";
    return false;
  }
  return true;
}

bool EndpointTask::create_qp(uint32_t* qpn, std::string* err) {
  if (engine::Status st = ep_.create_qp(qpn); !st.ok()) {
    *err = "endpoint '" + name_ + "': " + st.reason() + " (raise limits.max_qps)";
    return false;
  }
  qpns_.push_back(*qpn);
  return true;
}

bool EndpointTask::connect(uint32_t qpn, uint32_t peer, uint32_t dest_qpn, std::string* err) {
  const Config& c = *cfg_;
  const EvProfileSpec& evp = c.ev_profiles[c.qp.ev_profile];
  const std::vector<engine::EvEntry> evs = ev_entries(evp, c.endpoints[index_]);
  engine::QpAttr a;
  a.evs = evs;
  a.ev_config.min_active = evp.min_active;
  a.ev_config.policy = evp.spray;
  a.ev_config.probe_initial_ns = evp.probe_initial_ns;
  a.ev_config.probe_max_ns = evp.probe_max_ns;
  a.ev_config.ecn_avoid_ns = evp.ecn_avoid_ns;
  a.ev_config.num_planes = static_cast<uint8_t>(num_planes());
  a.cc = c.cc_profiles[c.qp.cc_profile].profile;
  a.peer = peer;
  a.dest_qpn = dest_qpn;
  a.path_mtu = c.path_mtu;
  a.mpr_dest = a.mpr = c.qp.mpr;
  a.max_wimm_dest = a.max_wimm = c.qp.max_wimm;
  a.timeout = c.qp.timeout;
  a.retry_linear = c.qp.retry_linear;
  a.retry_exp = c.qp.retry_exp;
  if (engine::Status st = ep_.connect_qp(qpn, a, clock_->now_ns()); !st.ok()) {
    *err = "qp: cannot connect QP " + std::to_string(qpn) + " of '" + name_ + "': " + st.reason();
    return false;
  }
  return true;
}

bool EndpointTask::start(std::string* err) {
  for (uint32_t p = 0; p < planes_.size(); ++p) {
    if (!planes_[p].port->start(err)) return false;
    if (planes_[p].relay) planes_[p].relay->start();
    PlaneState& s = planes_[p].state;
    s.link_up = planes_[p].port->link_up();
    s.engine_up = true;  // the engine starts with every plane up
    apply_plane_state(p, "link down at start", clock_->now_ns());
  }
  EndpointSnapshot proto;
  proto.plane_state.resize(planes_.size());
  proto.planes.resize(planes_.size());
  proto.qps.resize(qpns_.size());
  size_t evs = 0;
  for (uint32_t qpn : qpns_) evs += ep_.qp(qpn)->evs().size();
  proto.evs.resize(evs);
  snapshot_.init(proto);
  publish(clock_->now_ns());
  return true;
}

void EndpointTask::close() {
  framer_.close();
  for (Plane& p : planes_) {
    for (uint16_t i = 0; i < p.num_pending; ++i) rte_pktmbuf_free(p.pending[i]);
    p.num_pending = 0;
    p.relay.reset();
    if (p.port) p.port->close();
  }
  planes_.clear();
  for (void* r : regions_) rte_free(r);
  regions_.clear();
  if (commands_) rte_ring_free(commands_);
  commands_ = nullptr;
}

void EndpointTask::add_ports_to(std::vector<port::EthdevPort*>* ports) {
  for (Plane& p : planes_)
    if (p.port) ports->push_back(p.port.get());
}

void EndpointTask::free_pools() {
  rte_mempool_free(tx_pool_);
  rte_mempool_free(rx_pool_);
  rte_mempool_free(attach_pool_);
  tx_pool_ = rx_pool_ = attach_pool_ = nullptr;
}

bool EndpointTask::command(const Command& c) {
  Command copy = c;  // DPDK takes a non-const table
  return rte_ring_mp_enqueue_elem(commands_, &copy, sizeof(copy)) == 0;
}

bool EndpointTask::poll(uint64_t tsc) {
  const uint64_t now = clock_->ns(tsc);
  const Phase phase = phase_->load(std::memory_order_acquire);
  if (phase != seen_phase_) on_phase(phase, now);
  uint32_t work = rte_ring_count(commands_);
  if (work != 0) {
    run_commands(now);
    // What a call made the engine complete (a QP moved to ERROR flushes
    // its queues) reaches the CQs before the stage takes more descriptors:
    // the QP's Writes still waiting for room are flushed after them, in
    // post order.
    drain_engine(now);
  }
  poll_links(tsc, now);
  work += receive_bursts();
  // Applications' descriptors after the RX bursts, before their frames are
  // handled: a receive an application posted before telling its peer to
  // send (write_lat's) is then in place for every frame the peer sent in
  // answer, however long the lcore was descheduled in between (MRC has no
  // RNR: a Write-with-Immediate with no receive fails the QP).
  if (app_) work += app_->poll(ep_);
  for (uint32_t p = 0; p < planes_.size(); ++p) handle_received(p, now);
  drain_engine(now);
  txgen_.post(ep_, now);
  work += transmit(now);
  if (now >= next_snapshot_ns_) publish(now);
  return work != 0;
}

void EndpointTask::poll_links(uint64_t tsc, uint64_t now) {
  for (uint32_t p = 0; p < planes_.size(); ++p) {
    Plane& pl = planes_[p];
    bool up, peer_closing;
    if (pl.relay) {
      if (!pl.relay->poll_link()) continue;
      up = pl.relay->link_up();
      peer_closing = pl.relay->peer_closing();
    } else {
      if (!pl.port->poll_link(tsc)) continue;
      up = pl.port->link_up();
      peer_closing = pl.port->peer_closing();
    }
    pl.state.link_up = up;
    ++pl.counters.link_changes;
    apply_plane_state(p, up ? "link up" : peer_closing ? "peer closing" : "link down", now);
  }
}

void EndpointTask::on_phase(Phase phase, uint64_t now) {
  if (seen_phase_ == Phase::kRun) {
    txgen_.end_flows();
  }
  seen_phase_ = phase;
  if (phase == Phase::kFlush) {
    engine::QpAttr a;
    a.state = engine::QpState::kError;
    for (uint32_t qpn : qpns_) (void)ep_.modify_qp(qpn, a, engine::kAttrState, now);
    txgen_.abandon();
    if (app_) app_flushed_qps_ = app_->flush(ep_, now);
    drain_engine(now);
    txgen_.finish_checks();
  }
  // What the change did is in the snapshot at once: the control thread
  // judges the drain, and writes the summary, by it.
  publish(now);
  if (phase == Phase::kFlush) flushed_.store(true, std::memory_order_release);
}

void EndpointTask::run_commands(uint64_t now) {
  Command c;
  while (rte_ring_sc_dequeue_elem(commands_, &c, sizeof(c)) == 0) {
    switch (c.type) {
      case CommandType::kStart:
        txgen_.start(now);
        break;
      case CommandType::kStop:
        txgen_.stop();
        break;
      case CommandType::kPlaneAdmin:
        if (c.plane < planes_.size()) {
          planes_[c.plane].state.admin_up = c.up;
          apply_plane_state(c.plane, c.up ? "set up" : "set down", now);
        }
        break;
      case CommandType::kClearStats:
        for (Plane& p : planes_) {
          p.counters = PlaneCounters{};
          if (p.relay) p.relay_cleared = p.relay->counters();
        }
        drops_ = DropCounters{};
        break;
      case CommandType::kCall:
        c.call->run(*c.call, *this, now);
        publish(now);  // what the call changed is in the snapshot when call() returns
        c.call->done.store(true, std::memory_order_release);
        break;
    }
  }
  publish(now);
}

// The engine uses a plane while its port's link is up and no operator took
// it down; a change takes its EVs out of (or back into) use at once.
void EndpointTask::apply_plane_state(uint32_t plane, const char* why, uint64_t now) {
  PlaneState& s = planes_[plane].state;
  const bool up = s.link_up && s.admin_up;
  if (up == s.engine_up) return;
  s.engine_up = up;
  ep_.set_plane_up(static_cast<uint8_t>(plane), up, now);
  if (app_) app_->on_plane(plane, up);
  std::printf("softmrcd: t=%.3fs %s plane %u %s (%s)\n", now / 1e9, name_.c_str(), plane,
              up ? "up" : "down", why);
  std::fflush(stdout);
}

uint32_t EndpointTask::receive_bursts() {
  uint32_t n = 0;
  for (Plane& p : planes_) n += p.num_received = rx_burst(p, p.received, kBurst);
  return n;
}

void EndpointTask::handle_received(uint32_t plane, uint64_t now) {
  Plane& p = planes_[plane];
  const uint16_t n = p.num_received;
  if (n == 0) return;
  // Each payload's placement is made while the next packet's ICRC is
  // checked (wire::DeferredCopy); the last one's before the mbufs go.
  wire::DeferredCopy placement;
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(p.received[i + 1], void*));
    handle_rx(p.received[i], plane, now, placement);
  }
  placement.make();
  rte_pktmbuf_free_bulk(p.received, n);
  p.num_received = 0;
}

void EndpointTask::handle_rx(rte_mbuf* m, uint32_t plane, uint64_t now,
                             wire::DeferredCopy& placement) {
  const uint32_t len = m->pkt_len;
  if (len > max_frame_) {
    ++drops_.other[size_t(Drop::kRxTooLong)];
    return;
  }
  const void* frame = rte_pktmbuf_mtod(m, const void*);
  if (m->nb_segs > 1) {
    // The placement's source may be the previous chained frame in scratch_.
    placement.make();
    frame = rte_pktmbuf_read(m, 0, len, scratch_.data());
  }
  const auto* data = static_cast<const uint8_t*>(frame);
  wire::PortChecks checked;
  if (planes_[plane].port_checks_ipv4) checked.ipv4_checksum = ipv4_checksum_verdict(m->ol_flags);
  if (planes_[plane].port_keeps_crc && m->nb_segs == 1 &&
      rte_pktmbuf_tailroom(m) >= RTE_ETHER_CRC_LEN) {
    checked.fcs_kept = true;
    checked.fcs = wire::get_le32(data + len);
  }
  const wire::ParseStatus st =
      wire::parse({data, len}, framer_.parse_config(), &view_, checked, placement);
  placement = {};
  if (st != wire::ParseStatus::kOk) {
    ++drops_.parse[size_t(st)];
    return;
  }
  if (const Framer::Addressed a = framer_.for_us(view_, static_cast<uint8_t>(plane));
      a != Framer::Addressed::kUs) {
    ++drops_.other[size_t(a == Framer::Addressed::kOtherVlan ? Drop::kRxOtherVlan
                                                             : Drop::kRxNotForUs)];
    return;
  }
  PlaneCounters& c = planes_[plane].counters;
  ++c.rx_packets;
  c.rx_bytes += len;
  if (checked.ipv4_checksum == wire::PortVerdict::kGood) ++c.rx_ipv4_checksum_by_port;
  c.rx_icrc_from_fcs += view_.icrc_check == wire::IcrcCheck::kFromFcs;
  c.rx_fcs_wrong += view_.icrc_check == wire::IcrcCheck::kFcsWrong;
  // The sender is looked up (a scan of the peers) only where it matters: a
  // connectionless probe's reply has no QP to take the peer from, and a
  // QP_GONE or a port status must come from the QP's own peer.
  const bool sender_matters =
      (view_.t.opcode == wire::Opcode::kProbeRequest && (view_.t.dest_qpn & wire::kQpnMask) == 0) ||
      (view_.t.opcode == wire::Opcode::kNack && view_.t.fb.code == wire::NackCode::kQpGone) ||
      view_.t.opcode == wire::Opcode::kPortStatus;
  const uint32_t src_peer =
      sender_matters ? framer_.peer_of(view_, static_cast<uint8_t>(plane)) : engine::kUnknownPeer;
  ep_.on_packet(view_, static_cast<uint8_t>(plane), now, src_peer, &placement);
}

void EndpointTask::drain_engine(uint64_t now) {
  engine::Completion* wc = completions_;
  size_t n;
  while ((n = ep_.poll_completions(wc, kBurst)) > 0)
    for (size_t i = 0; i < n; ++i)
      if (app_ == nullptr || !app_->on_completion(wc[i])) txgen_.on_completion(wc[i], ep_);
  if (app_) app_->notify();
  engine::Event* ev = events_;
  while ((n = ep_.poll_events(ev, kBurst)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      if (ctl_events_ != nullptr) to_control(ev[i]);
      if (ev[i].type == engine::EventType::kProbeReply) txgen_.on_probe_reply(ev[i], now);
      if (app_) app_->on_event(ev[i]);
      // At shutdown the daemon moves every QP to ERROR itself.
      if (ev[i].type != engine::EventType::kQpError || seen_phase_ == Phase::kFlush) continue;
      std::printf("softmrcd: %s QP %u: error: %s\n", name_.c_str(), ev[i].qpn,
                  ev[i].reason ? ev[i].reason : engine::wc_status_name(ev[i].status));
      std::fflush(stdout);
    }
  }
}

void EndpointTask::to_control(const engine::Event& e) {
  ControlEvent c;
  if (e.type == engine::EventType::kEvStateChange) {
    c.type = ControlEventType::kEvState;
    c.plane = e.ev.plane;
    c.old_state = static_cast<uint8_t>(e.ev.old_state);
    c.new_state = static_cast<uint8_t>(e.ev.new_state);
    c.ev = e.ev.ev;
    c.losses = e.ev.drop_count;
    c.at_ns = e.ev.at;
  } else if (e.type == engine::EventType::kProbeReply && (e.probe_req_id & kControlProbeFlag)) {
    c.type = ControlEventType::kProbeReply;
    c.plane = e.plane;
    c.req_id = e.probe_req_id;
    c.rtt_ns = e.rtt_ns;
  } else {
    return;
  }
  c.qpn = e.qpn;
  if (rte_ring_sp_enqueue_elem(ctl_events_, &c, sizeof(c)) != 0)
    ctl_lost_.store(ctl_lost_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

bool EndpointTask::tx_room() const {
  // A stalled port holds the others back no longer, if another port in use
  // takes frames; when none does (a link's lcore descheduled fills every
  // plane's ring at once), dropping would gain nothing: wait.
  const auto full = [](const Plane& p) {
    return p.state.engine_up && p.num_pending > kPendingMax - kBurst;
  };
  const bool one_takes = std::any_of(planes_.begin(), planes_.end(),
                                     [&](const Plane& p) { return p.state.engine_up && !full(p); });
  for (const Plane& p : planes_)
    if (full(p) && !(p.stalled && one_takes)) return false;
  return true;
}

uint16_t EndpointTask::flush_tx(Plane& p, uint64_t now) {
  uint16_t sent = 0;
  if (p.num_pending != 0) {
    sent = tx_burst(p, p.pending, p.num_pending);
    for (uint16_t i = 0; i < sent; ++i) p.counters.tx_bytes += p.pending[i]->pkt_len;
    p.counters.tx_packets += sent;
    p.num_pending -= sent;
    if (p.num_pending != 0 && !p.state.engine_up) {
      // A port out of use (a tap whose link is down refuses every frame)
      // must not hold up the others: the engine resends what was on it.
      rte_pktmbuf_free_bulk(p.pending + sent, p.num_pending);
      drops_.other[size_t(Drop::kTxPlaneDown)] += p.num_pending;
      p.num_pending = 0;
    }
    std::memmove(p.pending, p.pending + sent, p.num_pending * sizeof(rte_mbuf*));
  }
  // Backpressure for a moment; a port in use that stays full is treated as
  // lossy instead (tx_room()), so the other planes go on and the engine's
  // loss recovery moves its traffic to them.
  if (p.num_pending <= kPendingMax - kBurst) {
    p.full_since_ns = 0;
    p.stalled = false;
  } else if (p.full_since_ns == 0) {
    p.full_since_ns = now | 1;
  } else if (!p.stalled && now - p.full_since_ns >= cfg_->tx_stall_us * 1'000) {
    p.stalled = true;
    ++p.counters.tx_stalls;
  }
  return sent;
}

// Backpressure: the engine is asked for packets only while every port in
// use can take a full burst, so a busy port delays packets instead of
// losing them.
uint32_t EndpointTask::transmit(uint64_t now) {
  uint32_t sent = 0;
  for (Plane& p : planes_) sent += flush_tx(p, now);
  for (int b = 0; b < kMaxTxBurstsPerPass && tx_room(); ++b) {
    const size_t n = ep_.poll_tx(tx_, kBurst, now);
    rte_mbuf* m[kBurst];
    bool extbuf[kBurst];
    framer_.frame(tx_, n, m, extbuf, &drops_);
    for (size_t i = 0; i < n; ++i) {
      if (m[i] == nullptr) continue;
      Plane& p = planes_[tx_[i].plane];
      if (p.num_pending == kPendingMax) {  // only a stalled port fills up
        rte_pktmbuf_free(m[i]);
        ++drops_.other[size_t(Drop::kTxStalled)];
        continue;
      }
      p.pending[p.num_pending++] = m[i];
      p.counters.tx_extbuf += extbuf[i];
    }
    for (Plane& p : planes_) sent += flush_tx(p, now);
    if (n < kBurst) break;
  }
  return sent;
}

void EndpointTask::publish(uint64_t now) {
  EndpointSnapshot& s = snapshot_.back();
  s.at_ns = now;
  s.stopping = seen_phase_ != Phase::kRun;
  s.drops = drops_;
  for (size_t p = 0; p < planes_.size(); ++p) {
    s.plane_state[p] = planes_[p].state;
    s.planes[p] = planes_[p].counters;
    if (const PortTask* relay = planes_[p].relay.get()) {
      const PortTaskCounters c = relay->counters();
      s.planes[p].port_rx_stalls = c.rx_stalls - planes_[p].relay_cleared.rx_stalls;
      s.planes[p].port_tx_link_down = c.tx_link_down - planes_[p].relay_cleared.tx_link_down;
      s.drops.other[size_t(Drop::kTxPortLinkDown)] += s.planes[p].port_tx_link_down;
    }
  }
  s.engine = ep_.counters();
  s.txgen = txgen_.counters();
  s.txgen.in_flight = txgen_.in_flight();
  s.txgen.ends_owed = txgen_.ends_owed();
  s.txgen_finished = txgen_.finished();
  s.app_outstanding = app_ ? app_->outstanding(ep_) : 0;
  s.app_flushed_qps = app_flushed_qps_;
  s.app_bad_descriptors = app_ ? app_->bad_descriptors() : 0;
  // The traffic generator's QPs, then the applications'. Their number and
  // EVs change only through calls (the slow path): the snapshot's tables
  // grow here when they hold fewer, never per packet.
  static const std::vector<uint32_t> kNoQps;
  const std::vector<uint32_t>& app_qpns = app_ ? app_->live_qps() : kNoQps;
  const size_t all = qpns_.size() + app_qpns.size();
  const auto qpn_at = [&](size_t i) {
    return i < qpns_.size() ? qpns_[i] : app_qpns[i - qpns_.size()];
  };
  size_t evs = 0;
  for (size_t i = 0; i < all; ++i)
    if (const engine::Qp* q = ep_.qp(qpn_at(i))) evs += q->evs().size();
  if (s.qps.size() < all) s.qps.resize(all);
  if (s.evs.size() < evs) s.evs.resize(evs);
  uint32_t ev_index = 0;
  s.num_qps = 0;
  for (size_t i = 0; i < all; ++i) {
    const bool app = i >= qpns_.size();
    const uint32_t qpn = qpn_at(i);
    const engine::Qp* q = ep_.qp(qpn);
    if (q == nullptr) continue;
    QpStats& qs = s.qps[s.num_qps++];
    qs.qpn = qpn;
    qs.app = app;
    qs.pid = app ? app_->qp(qpn)->pid : 0;
    qs.state = q->state();
    qs.peer = q->attr().peer;
    qs.dest_qpn = q->attr().dest_qpn;
    qs.counters = q->counters();
    qs.cc = q->cc().counters();
    qs.cwnd_bytes = q->cc().cwnd_bytes();
    qs.inflight_bytes = q->inflight_bytes();
    qs.snd_una = q->snd_una();
    qs.snd_nxt = q->snd_nxt();
    qs.epsn = q->epsn();
    qs.srtt_ns = q->srtt_ns();
    qs.rtt_max_ns = q->rtt_max_ns();
    const engine::EvSet& evs = q->evs();
    qs.first_ev = ev_index;
    qs.num_evs = std::min<uint32_t>(evs.size(), static_cast<uint32_t>(s.evs.size()) - ev_index);
    qs.usable_evs = evs.usable_count();
    for (uint32_t e = 0; e < qs.num_evs; ++e) {
      EvStats& es = s.evs[ev_index++];
      es.plane = evs.entry(e).plane;
      es.state = evs.state(e);
      es.usable = evs.usable(e);
      es.counters = evs.counters(e);
    }
  }
  snapshot_.publish();
  next_snapshot_ns_ = now + cfg_->snapshot_ms * 1'000'000;
}

}  // namespace softmrc::softmrcd
