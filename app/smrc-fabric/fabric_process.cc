// smrc-fabric as a process (see fabric_process.h).
#include "smrc-fabric/fabric_process.h"

#include "softmrcd/dpdk_program.h"

#include <poll.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <cstdio>

namespace softmrc::smrc_fabric {

namespace {

constexpr uint64_t kControlTickMs = 10;
constexpr uint32_t kMbufCache = 256;

const char* side_name(int side) {
  return side == 0 ? "a" : "b";
}

std::string port_key(const FabricPort& p) {
  return "links[" + std::to_string(p.link) + "]." + side_name(p.side) + "[" +
         std::to_string(p.plane) + "]";
}

}  // namespace

FabricProcess::~FabricProcess() {
  teardown();
}

bool FabricProcess::setup(const FabricConfig& cfg, const Options& opt, std::string* err) {
  cfg_ = cfg;
  opt_ = opt;
  clock_.start();
  log_interval_ns_ = softmrcd::log_interval_ns(opt.log_interval_ms, cfg_.log_interval_ms);
  if (!open_ports(err)) return false;
  size_t first_port = 0;
  for (uint32_t i = 0; i < cfg_.links.size(); ++i) {
    const FabricLinkSpec& spec = cfg_.links[i];
    std::vector<port::EthdevPort*> ends[2];
    const size_t planes = spec.ports[0].size();
    for (int side = 0; side < 2; ++side)
      for (size_t p = 0; p < planes; ++p)
        ends[side].push_back(ports_[first_port + side * planes + p].port.get());
    first_port += 2 * planes;
    links_.push_back(std::make_unique<softmrcd::Link>("smrc-fabric"));
    if (!links_.back()->join(i, spec.fabric, ends, spec.lcore, cfg_.path_mtu, cfg_.snapshot_ms,
                             err))
      return false;
  }
  return assign_lcores(err);
}

// One pool for every port: what the RX descriptors and the TX descriptors
// of every port may hold, what the delay lines hold, the lcore caches.
bool FabricProcess::open_ports(std::string* err) {
  uint64_t mbufs = 0;
  for (const FabricLinkSpec& l : cfg_.links)
    mbufs += l.ports[0].size() * 2 *
             (uint64_t{cfg_.rx_desc} + cfg_.tx_desc + l.fabric.delay_line_packets);
  mbufs += uint64_t{rte_lcore_count()} * kMbufCache * 2 + 512;
  const uint32_t frame = softmrcd::max_frame_bytes(cfg_.path_mtu);
  pool_ = rte_pktmbuf_pool_create("smrc_fabric_pool", static_cast<unsigned>(mbufs), kMbufCache, 0,
                                  static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + frame),
                                  static_cast<int>(rte_socket_id()));
  if (pool_ == nullptr) {
    *err = "cannot allocate " + std::to_string(mbufs) + " mbufs of " + std::to_string(frame) +
           " bytes: " + rte_strerror(rte_errno) + " (give the EAL more memory with -m)";
    return false;
  }
  for (uint32_t i = 0; i < cfg_.links.size(); ++i)
    for (int side = 0; side < 2; ++side)
      for (uint32_t p = 0; p < cfg_.links[i].ports[side].size(); ++p)
        ports_.push_back(FabricPort{i, side, p, cfg_.links[i].ports[side][p],
                                    std::make_unique<port::EthdevPort>()});
  port::EthdevPortConfig pc;
  pc.rx_desc = cfg_.rx_desc;
  pc.tx_desc = cfg_.tx_desc;
  pc.mtu = frame - static_cast<uint32_t>(sizeof(wire::EthHdr));
  pc.rx_pool = pool_;
  for (FabricPort& fp : ports_) {
    uint16_t id = 0;
    if (!port::EthdevPort::attach(fp.spec, &id, err) || !fp.port->open(id, pc, err)) {
      *err = port_key(fp) + ": " + *err;
      return false;
    }
    // A switch port takes frames for any address; a PMD without the mode
    // (net_memif) filters nothing anyway.
    rte_eth_promiscuous_enable(id);
    if (!fp.port->start(err)) {
      *err = port_key(fp) + ": " + *err;
      return false;
    }
  }
  return true;
}

// The main lcore runs the control thread; links go to worker lcores.
bool FabricProcess::assign_lcores(std::string* err) {
  roles_.assign(RTE_MAX_LCORE, LcoreRoles{});
  for (auto& l : links_) {
    int lc = 0;
    if (!softmrcd::pick_worker_lcore(l->lcore(), "links[" + std::to_string(l->index()) + "].lcore",
                                     "smrc-fabric", &lc, err))
      return false;
    l->set_lcore(lc);
    roles_[lc].links.push_back(l.get());
  }
  for (LcoreRoles& r : roles_) r.process = this;
  return true;
}

int FabricProcess::lcore_main(void* arg) {
  const LcoreRoles& r = *static_cast<const LcoreRoles*>(arg);
  const FabricProcess& f = *r.process;
  while (!f.stop_.load(std::memory_order_relaxed)) {
    const uint64_t now = f.clock_.now_ns();
    for (softmrcd::Link* l : r.links) l->poll(now);
  }
  return 0;
}

int FabricProcess::run() {
  for (auto& l : links_) {
    last_log_.emplace_back();
    l->snapshot().read([&](const softmrcd::LinkSnapshot& x) { last_log_.back() = x; });
  }
  for (unsigned lc = 0; lc < roles_.size(); ++lc)
    if (!roles_[lc].links.empty())
      rte_eal_remote_launch(&FabricProcess::lcore_main, &roles_[lc], lc);
  std::printf("smrc-fabric: %zu links, %zu ports, forwarding\n", links_.size(), ports_.size());
  std::fflush(stdout);

  const uint64_t started = clock_.now_ns();
  const uint64_t end = opt_.duration_ms == 0 ? UINT64_MAX : started + opt_.duration_ms * 1'000'000;
  uint64_t next_log = started + log_interval_ns_;
  last_log_ns_ = started;
  const char* why = "duration";
  uint64_t now = started;
  for (;;) {
    ::poll(nullptr, 0, static_cast<int>(kControlTickMs));
    now = clock_.now_ns();
    if (softmrcd::stop_signal() != nullptr) {
      why = softmrcd::stop_signal();
      break;
    }
    if (now >= end) break;
    if (log_interval_ns_ != 0 && now >= next_log) {
      log_status(now);
      next_log = std::max(next_log + log_interval_ns_, now + 1);
    }
  }
  stop_.store(true, std::memory_order_relaxed);
  rte_eal_mp_wait_lcore();
  summarize(clock_.now_ns(), why);
  return 0;
}

// Per link, what each plane carried over the interval and what the
// fabric did to it.
void FabricProcess::log_status(uint64_t now) {
  const uint64_t dt = now - last_log_ns_;
  for (size_t l = 0; l < links_.size(); ++l) {
    softmrcd::LinkSnapshot s;
    links_[l]->snapshot().read([&](const softmrcd::LinkSnapshot& x) { s = x; });
    std::printf("smrc-fabric: t=%.3fs link %zu: %s\n", now / 1e9, l,
                softmrcd::link_status(s, last_log_[l], dt).c_str());
    last_log_[l] = std::move(s);
  }
  std::fflush(stdout);
  last_log_ns_ = now;
}

// Per link, then per plane and direction: delivered, trimmed, marked,
// dropped by reason. The ports' own counters are telemetry's only: memif
// forgets them when its peer leaves.
void FabricProcess::summarize(uint64_t now, const char* why) {
  std::printf("smrc-fabric: stopped (%s) at t=%.3fs\n", why, now / 1e9);
  for (auto& l : links_) {  // their lcores have stopped
    l->finish(now);
    softmrcd::LinkSnapshot s;
    l->snapshot().read([&](const softmrcd::LinkSnapshot& x) { s = x; });
    std::printf("smrc-fabric: link %u: %s\n", l->index(),
                softmrcd::hop_totals(softmrcd::sum_hops(s.hops)).c_str());
    for (uint32_t p = 0; p < l->num_planes(); ++p)
      for (int dir = 0; dir < 2; ++dir)
        std::printf("smrc-fabric: link %u plane %u %s: %s\n", l->index(), p,
                    dir == 0 ? "a_to_b" : "b_to_a",
                    softmrcd::hop_totals(s.hops[p * 2 + dir]).c_str());
  }
  std::fflush(stdout);
}

void FabricProcess::teardown() {
  if (!stop_.exchange(true)) rte_eal_mp_wait_lcore();
  std::vector<port::EthdevPort*> ports;
  for (FabricPort& fp : ports_) ports.push_back(fp.port.get());
  // The memif clients (softmrcd) are told first: see port/ethdev/farewell.h.
  port::EthdevPort::close_all(ports);
  for (auto& l : links_) l->destroy();
  links_.clear();
  ports_.clear();
  rte_mempool_free(pool_);
  pool_ = nullptr;
}

}  // namespace softmrc::smrc_fabric
