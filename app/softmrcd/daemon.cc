// The daemon: setup, the lcores' loop and the control thread (see daemon.h).
#include "softmrcd/daemon.h"

#include <poll.h>
#include <rte_cycles.h>
#include <rte_lcore.h>
#include <sched.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "softmrcd/app_server.h"
#include "softmrcd/control_server.h"
#include "softmrcd/dpdk_program.h"
#include "softmrcd/prompt.h"
#include "softmrcd/traffic_plan.h"

namespace softmrc::softmrcd {

namespace {

constexpr uint64_t kControlTickMs = 10;
// Goodput after a plane failure is judged by a moving mean over this many
// bins (about two base RTTs), which must stay at the level for the second
// number of bins (about ten base RTTs) to count as back.
constexpr uint32_t kRecoverySmoothBins = 4;
constexpr uint32_t kRecoveryHoldBins = 20;
// Once the fabric is the bottleneck, goodput on the surviving planes
// settles at their share of the capacity ((P-1)/P of before for equal
// planes), not above it: the level allows this much below, for the noise
// of short windows on a shared lcore.
constexpr double kRecoveryTolerance = 0.1;
constexpr uint64_t kFlushTimeoutNs = 1'000'000'000;
// A responder in another process stays this long (4 ACK timeouts, within
// these bounds) after the end of a flow, for a resent end whose ACK was lost.
constexpr uint64_t kMinLingerNs = 20'000'000;
constexpr uint64_t kMaxLingerNs = 2'000'000'000;

// " (3.5 base RTTs of 227.8 us)", or nothing without a base RTT.
std::string in_rtts(uint64_t ns, double rtt_ns, bool with_rtt) {
  if (rtt_ns == 0) return "";
  char buf[64];
  if (with_rtt)
    std::snprintf(buf, sizeof(buf), " (%.1f base RTTs of %.1f us)", ns / rtt_ns, rtt_ns / 1e3);
  else
    std::snprintf(buf, sizeof(buf), " (%.1f base RTTs)", ns / rtt_ns);
  return buf;
}

}  // namespace

Daemon::Daemon() = default;

Daemon::~Daemon() {
  teardown();
}

EndpointTask* Daemon::find_endpoint(const std::string& name) {
  for (auto& e : endpoints_)
    if (e->name() == name) return e.get();
  return nullptr;
}

bool Daemon::setup(const Config& cfg, const Options& opt, std::string* err) {
  cfg_ = cfg;
  opt_ = opt;
  clock_.start();
  log_interval_ns_ = log_interval_ns(opt.log_interval_ms, cfg_.log_interval_ms);
  // Probing ports and starting them can take a while: a stop signal
  // meanwhile ends setup at the next step, and teardown undoes the rest.
  const auto stopping = [] { return stop_signal() != nullptr; };

  for (uint32_t i = 0; i < cfg_.links.size(); ++i) {
    if (stopping()) return false;
    links_.push_back(std::make_unique<Link>("softmrcd"));
    if (!links_.back()->create(cfg_, i, err)) return false;
  }
  for (uint32_t i = 0; i < cfg_.hosted; ++i) {
    std::vector<uint16_t> link_ports;
    if (const int l = cfg_.link_of(i); l >= 0) {
      const int side = links_[l]->endpoint(0) == i ? 0 : 1;
      for (uint32_t p = 0; p < cfg_.num_planes(); ++p)
        link_ports.push_back(links_[l]->port(side, p));
    }
    if (stopping()) return false;
    endpoints_.push_back(std::make_unique<EndpointTask>());
    if (!endpoints_.back()->setup(cfg_, i, link_ports, &clock_, &phase_, err)) return false;
  }
  if (opt_.linerate) {
    linerate_ = std::make_unique<Linerate>();
    if (!linerate_->setup(cfg_, *endpoints_[0], *opt_.linerate, err)) return false;
  }
  if (!assign_lcores(err) || !setup_traffic(err)) return false;
  // The controller owns the profiles; the applications' QPs attach to them
  // through it (profile_resolver.h), so it outlives the application server
  // (teardown destroys the services last to first).
  auto control = std::make_unique<ControlServer>(*this);
  ControlServer& resolver = *control;
  add_service(std::move(control));
  if (auto apps = std::make_unique<AppServer>(); !apps->setup(cfg_, endpoints_, &resolver, err))
    return false;
  else if (!apps->empty()) {
    resolver.set_app_server(apps.get());
    add_service(std::move(apps));
  }
  for (auto& e : endpoints_)
    if (stopping() || !e->start(err)) return false;
  return !stopping() && resolver.open(err) && !stopping();
}

int Daemon::setup_stopped() {
  std::printf("softmrcd: stopped (%s) during setup, before any traffic\n", stop_signal());
  int status = 0;
  if (traffic_expected()) {
    std::printf("softmrcd: FAIL: the traffic never ran, nothing was verified\n");
    status = 1;
  }
  std::fflush(stdout);
  return status;
}

bool Daemon::traffic_expected() const {
  return (!opt_.interactive || traffic_started_) && hosts_traffic();
}

bool Daemon::hosts_traffic() const {
  for (const FlowSpec& f : cfg_.traffic)
    if (f.from < cfg_.hosted || f.to < cfg_.hosted) return true;
  return false;
}

// The main lcore runs the control thread; roles go to worker lcores.
bool Daemon::assign_lcores(std::string* err) {
  const auto pick = [&](int wanted, const std::string& key, int* out) {
    return pick_worker_lcore(wanted, key, "softmrcd", out, err);
  };
  roles_.assign(RTE_MAX_LCORE, LcoreRoles{});
  for (auto& e : endpoints_) {
    int lc = 0;
    if (!pick(e->lcore(), cfg_.endpoints[e->index()].key + ".lcore", &lc)) return false;
    e->set_lcore(lc);
    roles_[lc].endpoints.push_back(e.get());
    for (uint32_t p = 0; p < e->num_planes(); ++p) {
      PortTask* port = e->port_task(p);
      if (port == nullptr) continue;
      const std::string key =
          cfg_.endpoints[e->index()].key + ".planes[" + std::to_string(p) + "].lcore";
      if (!pick(port->lcore(), key, &lc)) return false;
      roles_[lc].ports.push_back(port);
    }
  }
  for (auto& l : links_) {
    int lc = 0;
    const int wanted = l->lcore() == kAnyLcore ? endpoints_[l->endpoint(0)]->lcore() : l->lcore();
    if (!pick(wanted, "links[" + std::to_string(l->index()) + "].lcore", &lc)) return false;
    l->set_lcore(lc);
    roles_[lc].links.push_back(l.get());
  }
  for (LcoreRoles& r : roles_) r.daemon = this;
  return true;
}

namespace {

uint64_t linger_ns_of(const Config& cfg) {
  const uint64_t timeout_ns = uint64_t{1024} << cfg.qp.timeout;  // the ACK timeout
  return std::clamp<uint64_t>(4 * timeout_ns, kMinLingerNs, kMaxLingerNs);
}

// One flow QP's end on a hosted endpoint: its buffer and QP, made where
// the plan says (traffic_plan.h), connected to the other end.
bool open_flow_end(EndpointTask& e, const FlowQpEnd& self, uint32_t peer, uint32_t dest_qpn,
                   uint64_t bytes, uint8_t** buf, std::string* err) {
  uint32_t key = 0, qpn = 0;
  if (!e.alloc_region(bytes, self.va, buf, &key, err) || !e.create_qp(&qpn, err)) return false;
  if (qpn != self.qpn || key != self.rkey) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  "endpoint '%s' made QPN %u and key 0x%x, not the plan's %u and 0x%x (was "
                  "something made before the traffic?)",
                  e.name().c_str(), qpn, key, self.qpn, self.rkey);
    *err = text;
    return false;
  }
  return e.connect(qpn, peer, dest_qpn, err);
}

}  // namespace

// One QP pair per flow QP: a sender on `from`, a checking receiver on `to`,
// each with a buffer of the flow's message slots in registered memory.
// Either end may be hosted by another process, which makes its end from
// the same plan; a flow between two peers is not ours at all.
bool Daemon::setup_traffic(std::string* err) {
  const TrafficPlan plan(cfg_);
  const uint64_t linger_ns = linger_ns_of(cfg_);
  for (uint32_t fi = 0; fi < cfg_.traffic.size(); ++fi) {
    const FlowSpec& f = cfg_.traffic[fi];
    EndpointTask* a = f.from < cfg_.hosted ? endpoints_[f.from].get() : nullptr;
    EndpointTask* b = f.to < cfg_.hosted ? endpoints_[f.to].get() : nullptr;
    const uint64_t bytes = uint64_t{Txgen::slots(f)} * f.size_bytes;
    const std::string key = "traffic[" + std::to_string(fi) + "]: ";
    for (uint32_t q = 0; q < f.qps && (a || b); ++q) {
      const FlowQp& ids = plan.qp(fi, q);
      const uint64_t stream = uint64_t{fi} << 32 | q;
      uint8_t* buf = nullptr;
      if (a) {
        if (!open_flow_end(*a, ids.from, f.to, ids.to.qpn, bytes, &buf, err)) {
          *err = key + *err;
          return false;
        }
        Txgen::SenderSetup s{ids.from.qpn, f, stream, buf, ids.from.rkey, ids.to.va, ids.to.rkey};
        s.local_va = ids.from.va;
        if (!b) {
          s.remote_peer = f.to;
          s.remote_name = cfg_.endpoints[f.to].name.c_str();
        }
        a->txgen().add_sender(s);
      }
      if (b) {
        if (!open_flow_end(*b, ids.to, f.from, ids.from.qpn, bytes, &buf, err)) {
          *err = key + *err;
          return false;
        }
        Txgen::ReceiverSetup r{ids.to.qpn, f, stream, buf};
        if (!a) {
          r.remote_peer = f.from;
          r.remote_name = cfg_.endpoints[f.from].name.c_str();
        }
        r.linger_ns = linger_ns;
        if (!b->add_receiver(r, err)) {
          *err = key + *err;
          return false;
        }
      }
    }
  }
  return true;
}

std::vector<std::string> Daemon::broadcast(const Command& c) {
  std::vector<std::string> missed;
  for (auto& e : endpoints_)
    if (!e->command(c)) missed.push_back(e->name());
  return missed;
}

std::vector<std::string> Daemon::start_traffic() {
  traffic_started_ = true;
  return broadcast(Command{CommandType::kStart});
}

std::vector<std::string> Daemon::stop_traffic() {
  return broadcast(Command{CommandType::kStop});
}

std::vector<std::string> Daemon::clear_stats() {
  for (auto& e : endpoints_)
    for (uint32_t p = 0; p < e->num_planes(); ++p) e->port(p).reset_stats();
  return broadcast(Command{CommandType::kClearStats});
}

std::vector<EndpointSnapshot> Daemon::snapshots() {
  std::vector<EndpointSnapshot> out(endpoints_.size());
  for (size_t i = 0; i < endpoints_.size(); ++i)
    endpoints_[i]->snapshot().read([&](const EndpointSnapshot& s) { out[i] = s; });
  return out;
}

void Daemon::request_stop(const char* why) {
  if (phase() != Phase::kRun) return;
  const uint64_t now = clock_.now_ns();
  stop_reason_ = why;
  stop_at_ns_ = now;
  if (cfg_.drain_ms == 0) {
    phase_deadline_ns_ = now + kFlushTimeoutNs;
    phase_.store(Phase::kFlush, std::memory_order_release);
  } else {
    phase_deadline_ns_ = now + cfg_.drain_ms * 1'000'000;
    phase_.store(Phase::kDrain, std::memory_order_release);
  }
  std::printf("softmrcd: t=%.3fs stopping (%s): no new work; in-flight work has %" PRIu64
              " ms to complete\n",
              now / 1e9, why, cfg_.drain_ms);
  std::fflush(stdout);
}

int Daemon::lcore_main(void* arg) {
  const LcoreRoles& r = *static_cast<const LcoreRoles*>(arg);
  const Daemon& d = *r.daemon;
  // A link's delay line runs on the clock, never idle: its lcore never yields.
  const uint64_t yield_after = r.links.empty() ? d.cfg_.idle_yield_passes : 0;
  uint64_t idle = 0;
  while (d.phase_.load(std::memory_order_relaxed) != Phase::kExit) {
    const uint64_t tsc = rte_rdtsc();
    bool work = false;
    for (EndpointTask* e : r.endpoints) work = e->poll(tsc) || work;
    for (PortTask* p : r.ports) work = p->poll(tsc) || work;
    if (!r.links.empty()) {
      const uint64_t now = d.clock_.ns(tsc);
      for (Link* l : r.links) l->poll(now);
    }
    if (work || yield_after == 0) {
      idle = 0;
    } else if (++idle >= yield_after) {
      // Whatever else is runnable on this CPU (an application woken by
      // its completion channel) runs now, not when the scheduler's slice ends.
      idle = 0;
      sched_yield();
    }
  }
  return 0;
}

int Daemon::run() {
  started_ns_ = clock_.now_ns();
  last_log_ns_ = started_ns_;
  last_log_ = snapshots();
  for (auto& l : links_) {
    last_link_log_.emplace_back();
    l->snapshot().read([&](const LinkSnapshot& x) { last_link_log_.back() = x; });
  }
  next_log_ns_ = started_ns_ + log_interval_ns_;
  if (!opt_.interactive || linerate_) start_traffic();  // the rings are empty: it reaches all
  for (unsigned lc = 0; lc < roles_.size(); ++lc)
    if (!roles_[lc].endpoints.empty() || !roles_[lc].links.empty() || !roles_[lc].ports.empty())
      rte_eal_remote_launch(&Daemon::lcore_main, &roles_[lc], lc);
  if (opt_.interactive) prompt_ = std::make_unique<Prompt>(*this);

  uint64_t now = started_ns_;
  while (phase() != Phase::kExit) {
    wait_for_input(kControlTickMs);
    now = clock_.now_ns();
    control_step(now);
  }
  rte_eal_mp_wait_lcore();
  // Only now: a service's memory may be where the lcores were placing data.
  for (auto& s : services_) s->close();
  prompt_.reset();
  return summarize(clock_.now_ns());
}

// One wait of the control thread, on the prompt and every service at once.
void Daemon::wait_for_input(uint64_t timeout_ms) {
  fds_.clear();
  if (prompt_) fds_.push_back(pollfd{prompt_->fd(), POLLIN, 0});
  service_fds_.clear();
  for (auto& s : services_) {
    const size_t before = fds_.size();
    s->add_fds(&fds_);
    service_fds_.push_back(fds_.size() - before);
  }
  if (::poll(fds_.data(), fds_.size(), static_cast<int>(timeout_ms)) < 0)
    for (pollfd& p : fds_) p.revents = 0;  // a signal
  size_t at = 0;
  if (prompt_) {
    if ((fds_[0].revents & (POLLIN | POLLHUP)) && !prompt_->on_input()) request_stop("quit");
    at = 1;
  }
  const uint64_t now = clock_.now_ns();
  for (size_t i = 0; i < services_.size(); ++i) {
    services_[i]->step(fds_.data() + at, service_fds_[i], now);
    at += service_fds_[i];
  }
}

void Daemon::control_step(uint64_t now) {
  if (stop_signal() != nullptr && phase() == Phase::kRun) request_stop(stop_signal());
  if (linerate_ && phase() == Phase::kRun) measure_linerate(now);
  // Every tick: read the few flags in place, not a copy of every QP and EV.
  switch (phase()) {
    case Phase::kRun: {
      // A flow sent from here must have a limit; one that only arrives
      // here is over once its end arrived (txgen.h), limit or not.
      bool bounded = !opt_.interactive && !cfg_.traffic.empty();
      for (const FlowSpec& f : cfg_.traffic)
        if (f.from < cfg_.hosted) bounded = bounded && (f.messages || f.duration_ns);
      bool finished = bounded;
      for (auto& e : endpoints_)
        e->snapshot().read(
            [&](const EndpointSnapshot& s) { finished = finished && s.txgen_finished; });
      if (finished) request_stop("traffic done");
      break;
    }
    case Phase::kDrain: {
      // Only snapshots taken after an lcore saw the stop count: an older one
      // shows neither the flows' ends it owes nor, just after the flows
      // started, the messages in flight.
      bool idle = true;
      for (auto& e : endpoints_)
        e->snapshot().read([&](const EndpointSnapshot& s) {
          idle = idle && s.stopping && s.txgen.in_flight == 0 && s.txgen.ends_owed == 0 &&
                 s.app_outstanding == 0;
        });
      if (idle || now >= phase_deadline_ns_) {
        phase_deadline_ns_ = now + kFlushTimeoutNs;
        phase_.store(Phase::kFlush, std::memory_order_release);
      }
      break;
    }
    case Phase::kFlush: {
      bool flushed = true;
      for (auto& e : endpoints_) flushed = flushed && e->flushed();
      if (flushed || now >= phase_deadline_ns_)
        phase_.store(Phase::kExit, std::memory_order_release);
      break;
    }
    case Phase::kExit:
      break;
  }
  if (log_interval_ns_ != 0 && now >= next_log_ns_) {
    log_status(now);
    next_log_ns_ += log_interval_ns_;
    if (next_log_ns_ <= now) next_log_ns_ = now + log_interval_ns_;
  }
}

// The line-rate mode: the packets counted between two snapshots of the
// endpoint, after a warm-up, over the snapshots' own times. "Dropped" adds
// the engine's control packets that found its queue full to the daemon's
// drops: either means the path cannot keep up with itself.
void Daemon::measure_linerate(uint64_t now) {
  const LinerateSpec& spec = linerate_->spec();
  if (now < started_ns_ + spec.warmup_ms * 1'000'000) return;
  EndpointSnapshot s;
  endpoints_[0]->snapshot().read([&](const EndpointSnapshot& x) { s = x; });
  if (linerate_t0_ns_ == 0) {
    linerate_t0_ns_ = s.at_ns;
    linerate_packets0_ = linerate_->packets(s);
    return;
  }
  const uint64_t dt = s.at_ns - linerate_t0_ns_;
  if (dt < spec.run_ms * 1'000'000) return;
  const uint64_t n = linerate_->packets(s) - linerate_packets0_;
  const char* kind[] = {"probe", spec.fcs ? "rx-fcs" : "rx", "tx"};
  uint64_t rx = 0, from_fcs = 0, fcs_wrong = 0;
  for (const PlaneCounters& c : s.planes) {
    rx += c.rx_packets;
    from_fcs += c.rx_icrc_from_fcs;
    fcs_wrong += c.rx_fcs_wrong;
  }
  std::printf(
      "softmrcd: linerate %s: %u-byte frames, %.3f Mpps, %.2f Gb/s on lcore %d "
      "(%" PRIu64 " packets in %.3f s, %" PRIu64 " dropped); of %" PRIu64
      " frames received, %" PRIu64 " ICRC-checked through their FCS, %" PRIu64
      " with a wrong FCS\n",
      kind[size_t(spec.kind)], linerate_->frame_bytes(), n * 1e3 / dt,
      gbps(n * linerate_->frame_bytes(), dt), endpoints_[0]->lcore(), n, dt / 1e9,
      s.drops.total() + s.engine.ctrl_dropped, rx, from_fcs, fcs_wrong);
  std::fflush(stdout);
  request_stop("linerate done");
}

// One line per interval: per endpoint its rates, planes in use (one digit
// per plane), retransmissions, drops and usable EVs; then the traffic
// generator. A line per link follows: what each plane carried and what
// the fabric did to it.
void Daemon::log_status(uint64_t now) {
  const std::vector<EndpointSnapshot> snaps = snapshots();
  const uint64_t dt = now - last_log_ns_;
  std::string line;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "softmrcd: t=%.3fs", now / 1e9);
  line += buf;
  uint64_t verified = 0, verified_before = 0, bytes = 0, bytes_before = 0, errors = 0;
  for (size_t i = 0; i < snaps.size(); ++i) {
    const EndpointSnapshot& s = snaps[i];
    const EndpointSnapshot& before = last_log_[i];
    uint64_t tx = 0, rx = 0;
    std::string planes;
    for (size_t p = 0; p < s.planes.size(); ++p) {
      tx += s.planes[p].tx_bytes - std::min(s.planes[p].tx_bytes, before.planes[p].tx_bytes);
      rx += s.planes[p].rx_bytes - std::min(s.planes[p].rx_bytes, before.planes[p].rx_bytes);
      planes += s.plane_state[p].engine_up ? '1' : '0';
    }
    uint64_t usable = 0, evs = 0;
    for (uint32_t q = 0; q < s.num_qps; ++q) {
      usable += s.qps[q].usable_evs;
      evs += s.qps[q].num_evs;
    }
    std::snprintf(buf, sizeof(buf),
                  " %s[tx %.2f Gb/s rx %.2f Gb/s planes %s retx %" PRIu64 " drops %" PRIu64
                  " evs %" PRIu64 "/%" PRIu64 "]",
                  endpoints_[i]->name().c_str(), gbps(tx, dt), gbps(rx, dt), planes.c_str(),
                  retransmits(s), s.drops.total(), usable, evs);
    line += buf;
    verified += s.txgen.verified;
    verified_before += before.txgen.verified;
    bytes += s.txgen.verified_bytes;
    bytes_before += before.txgen.verified_bytes;
    errors += s.txgen.errors + s.txgen.mismatches;
  }
  if (!cfg_.traffic.empty()) {
    std::snprintf(buf, sizeof(buf),
                  " txgen verified %" PRIu64 " (+%" PRIu64 ") %.2f Gb/s errors %" PRIu64, verified,
                  verified - std::min(verified, verified_before),
                  gbps(bytes - std::min(bytes, bytes_before), dt), errors);
    line += buf;
  }
  std::printf("%s\n", line.c_str());
  for (size_t l = 0; l < links_.size(); ++l) {
    LinkSnapshot s;
    links_[l]->snapshot().read([&](const LinkSnapshot& x) { s = x; });
    std::printf("softmrcd: t=%.3fs link %zu: %s\n", now / 1e9, l,
                link_status(s, last_link_log_[l], dt).c_str());
    last_link_log_[l] = std::move(s);
  }
  std::fflush(stdout);
  last_log_ = snaps;
  last_log_ns_ = now;
}

// How goodput came through each plane failure of each link: the payload
// the link delivered, in bins of about half a base RTT (fabric.h).
void Daemon::report_recoveries(const std::vector<EndpointSnapshot>& snaps) {
  uint64_t srtt_ns = 0, qps = 0;
  for (const EndpointSnapshot& s : snaps)
    for (uint32_t q = 0; q < s.num_qps; ++q)
      if (s.qps[q].srtt_ns != 0) {
        srtt_ns += s.qps[q].srtt_ns;
        ++qps;
      }
  for (auto& l : links_) {
    const DeliveryTrace& trace = l->trace();
    for (const DeliveryTrace::Capture& c : trace.captures()) {
      const PlaneFault& f = l->fault(c.tag);
      std::printf("softmrcd: link %u plane %u %s at t=%.3fs: ", l->index(), f.plane,
                  f.blackhole ? "blackholed" : "down", c.at_ns / 1e9);
      Recovery r;
      if (f.surviving_share > 0) {
        const double level = (1 - kRecoveryTolerance) * f.surviving_share;
        r = measure_recovery(c, trace.bin_ns(), level, kRecoverySmoothBins, kRecoveryHoldBins);
      }
      if (!r.measured) {
        std::printf("too little traffic around it to measure goodput\n");
        continue;
      }
      // A base RTT below the bins' width is no unit to count in.
      const uint64_t base_rtt_ns = l->base_rtt_ns(f.plane);
      const double rtt_ns = base_rtt_ns >= trace.bin_ns() ? static_cast<double>(base_rtt_ns) : 0;
      std::printf("goodput %.2f Gb/s on %u planes before, %.2f Gb/s after; ", r.before_gbps,
                  f.planes_before, r.after_gbps);
      if (r.recovered)
        std::printf(
            "back to %.0f%% of before (less %.0f%%) in %.2f ms%s, lowest %.2f Gb/s meanwhile",
            f.surviving_share * 100, kRecoveryTolerance * 100, r.recovery_ns / 1e6,
            in_rtts(r.recovery_ns, rtt_ns, true).c_str(), r.lowest_gbps);
      else
        std::printf("not back to %.0f%% of before (less %.0f%%) within %.0f ms, lowest %.2f Gb/s",
                    f.surviving_share * 100, kRecoveryTolerance * 100,
                    (c.num_bins - c.at_bin) * trace.bin_ns() / 1e6, r.lowest_gbps);
      std::printf(
          "; longest delivery gap %.2f ms, longest lcore pause %.2f ms; QPs' smoothed "
          "RTT at the end %.0f us\n",
          r.longest_gap_ns / 1e6, c.max_stall_ns / 1e6, qps ? srtt_ns / 1e3 / qps : 0.0);
      const bool slowest =
          !dip_.measured || (dip_.recovered && (!r.recovered || r.recovery_ns > dip_.recovery_ns));
      if (slowest) {
        dip_ = r;
        dip_fault_ = f;
        dip_at_ns_ = c.at_ns;
        dip_rtt_ns_ = rtt_ns;
      }
    }
  }
}

int Daemon::summarize(uint64_t now) {
  for (auto& l : links_) l->finish(now);  // their lcores have stopped
  const std::vector<EndpointSnapshot> snaps = snapshots();
  TxgenCounters t;
  for (const EndpointSnapshot& s : snaps) {
    t.posted += s.txgen.posted;
    t.completed += s.txgen.completed;
    t.verified += s.txgen.verified;
    t.verified_bytes += s.txgen.verified_bytes;
    t.mismatches += s.txgen.mismatches;
    t.errors += s.txgen.errors;
    t.flushed += s.txgen.flushed;
    t.in_flight_at_stop += s.txgen.in_flight_at_stop;
    t.drained += s.txgen.drained;
    t.flushed_at_stop += s.txgen.flushed_at_stop;
  }
  const uint64_t end = stop_at_ns_ != 0 ? stop_at_ns_ : now;
  const uint64_t elapsed = end - started_ns_;
  if (!stop_reason_.empty())
    std::printf("softmrcd: stopped (%s) at t=%.3fs: %" PRIu64 " messages were in flight, %" PRIu64
                " completed during the drain, %" PRIu64 " flushed (status %s)\n",
                stop_reason_.c_str(), end / 1e9, t.in_flight_at_stop, t.drained, t.flushed_at_stop,
                engine::wc_status_name(engine::WcStatus::kFlushed));
  for (size_t i = 0; i < snaps.size(); ++i)
    if (snaps[i].app_flushed_qps != 0)
      std::printf(
          "softmrcd: %s: %u application QPs moved to ERROR at the flush: their "
          "outstanding work completed with %s\n",
          endpoints_[i]->name().c_str(), snaps[i].app_flushed_qps,
          engine::wc_status_name(engine::WcStatus::kFlushed));
  for (size_t i = 0; i < snaps.size(); ++i) {
    PlaneCounters c;
    for (const PlaneCounters& p : snaps[i].planes) {
      c.tx_packets += p.tx_packets;
      c.tx_extbuf += p.tx_extbuf;
      c.rx_packets += p.rx_packets;
    }
    std::printf("softmrcd: %s: sent %" PRIu64 " packets (%" PRIu64
                " with the payload sent in place), received %" PRIu64 ", dropped %" PRIu64
                ", retransmitted %" PRIu64 "\n",
                endpoints_[i]->name().c_str(), c.tx_packets, c.tx_extbuf, c.rx_packets,
                snaps[i].drops.total(), retransmits(snaps[i]));
  }
  for (auto& l : links_) {
    LinkSnapshot s;
    l->snapshot().read([&](const LinkSnapshot& x) { s = x; });
    std::printf("softmrcd: link %u: %s\n", l->index(), hop_totals(sum_hops(s.hops)).c_str());
  }
  if (cfg_.traffic.empty()) return 0;
  std::printf("softmrcd: txgen: %" PRIu64 " messages posted, %" PRIu64 " completed, %" PRIu64
              " verified (%.1f MiB, every byte checked), %" PRIu64 " mismatches, %" PRIu64
              " errors, %" PRIu64 " flushed; %.3f s, %.2f Gb/s verified\n",
              t.posted, t.completed, t.verified, t.verified_bytes / 1048576.0, t.mismatches,
              t.errors, t.flushed, elapsed / 1e9, gbps(t.verified_bytes, elapsed));
  report_recoveries(snaps);
  // A run whose flows never got going (a peer that never answered, say)
  // checked nothing: no clean run.
  const bool idle = traffic_expected() && t.completed == 0 && t.verified == 0;
  const bool ok = t.mismatches == 0 && t.errors == 0 && !idle;
  std::string line = ok ? "PASS: " : "FAIL: ";
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%.2f GiB verified, every byte checked, %" PRIu64 " errors",
                t.verified_bytes / double(1ull << 30), t.errors + t.mismatches);
  line += buf;
  if (dip_.measured) {
    std::snprintf(buf, sizeof(buf), "; plane %u %s at t=%.3fs, goodput ", dip_fault_.plane,
                  dip_fault_.blackhole ? "blackholed" : "down", dip_at_ns_ / 1e9);
    line += buf;
    if (!dip_.recovered)
      std::snprintf(buf, sizeof(buf),
                    "fell to %.2f Gb/s and stayed below %.0f%% of %.2f Gb/s (less %.0f%%)",
                    dip_.lowest_gbps, dip_fault_.surviving_share * 100, dip_.before_gbps,
                    kRecoveryTolerance * 100);
    else if (dip_.recovery_ns == 0)
      std::snprintf(buf, sizeof(buf), "stayed at %.0f%% of %.2f Gb/s (less %.0f%%) or above",
                    dip_fault_.surviving_share * 100, dip_.before_gbps, kRecoveryTolerance * 100);
    else
      std::snprintf(buf, sizeof(buf), "dipped to %.2f Gb/s for %.2f ms%s", dip_.lowest_gbps,
                    dip_.recovery_ns / 1e6, in_rtts(dip_.recovery_ns, dip_rtt_ns_, false).c_str());
    line += buf;
  }
  if (idle)
    line += "; no message completed or arrived, so no byte was checked";
  else if (!ok)
    line += " (see the errors above)";
  std::printf("softmrcd: %s\n", line.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

void Daemon::teardown() {
  if (phase() != Phase::kExit) {
    phase_.store(Phase::kExit, std::memory_order_release);
    rte_eal_mp_wait_lcore();
  }
  while (!services_.empty()) services_.pop_back();
  std::vector<port::EthdevPort*> ports;
  for (auto& e : endpoints_) e->add_ports_to(&ports);
  port::EthdevPort::close_all(ports);
  for (auto& e : endpoints_) e->close();
  for (auto& l : links_) l->destroy();
  for (auto& e : endpoints_) e->free_pools();
  endpoints_.clear();
  links_.clear();
}

}  // namespace softmrc::softmrcd
