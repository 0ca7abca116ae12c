// The daemon: setup, the lcores' loop and the control thread (see daemon.h).
#include "softmrcd/daemon.h"

#include <poll.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "softmrcd/prompt.h"

namespace softmrc::softmrcd {

namespace {

volatile std::sig_atomic_t g_signal = 0;

constexpr uint64_t kControlTickMs = 10;
constexpr uint64_t kFlushTimeoutNs = 1'000'000'000;

double gbps(uint64_t bytes, uint64_t ns) {
  return ns == 0 ? 0.0 : bytes * 8.0 / static_cast<double>(ns);
}

uint64_t retransmits(const EndpointSnapshot& s) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < s.num_qps; ++i)
    for (uint64_t r : s.qps[i].counters.retransmits) n += r;
  return n;
}

}  // namespace

Daemon::Daemon() = default;

Daemon::~Daemon() {
  teardown();
}

void Daemon::on_signal(int sig) {
  g_signal = sig;
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
  const uint64_t log_ms =
      opt.log_interval_ms >= 0 ? static_cast<uint64_t>(opt.log_interval_ms) : cfg_.log_interval_ms;
  log_interval_ns_ = log_ms * 1'000'000;

  for (uint32_t i = 0; i < cfg_.links.size(); ++i) {
    links_.push_back(std::make_unique<Link>());
    if (!links_.back()->create(cfg_, i, err)) return false;
  }
  for (uint32_t i = 0; i < cfg_.hosted; ++i) {
    std::vector<uint16_t> link_ports;
    if (const int l = cfg_.link_of(i); l >= 0) {
      const int side = links_[l]->endpoint(0) == i ? 0 : 1;
      for (uint32_t p = 0; p < cfg_.num_planes(); ++p)
        link_ports.push_back(links_[l]->port(side, p));
    }
    endpoints_.push_back(std::make_unique<EndpointTask>());
    if (!endpoints_.back()->setup(cfg_, i, link_ports, &clock_, &phase_, err)) return false;
  }
  if (!opt_.linerate.empty()) {
    LinerateSpec spec;
    linerate_ = std::make_unique<Linerate>();
    if (!parse_linerate(opt_.linerate, &spec, err) ||
        !linerate_->setup(cfg_, *endpoints_[0], spec, err))
      return false;
  }
  if (!assign_lcores(err) || !setup_traffic(err)) return false;
  for (auto& e : endpoints_)
    if (!e->start(err)) return false;
  return true;
}

// The main lcore runs the control thread; roles go to worker lcores.
bool Daemon::assign_lcores(std::string* err) {
  const unsigned main = rte_get_main_lcore();
  const unsigned first = rte_get_next_lcore(-1, 1, 0);
  if (first >= RTE_MAX_LCORE) {
    *err = "EAL -l: the main lcore " + std::to_string(main) +
           " runs the control thread; softmrcd needs at least one more (e.g. -l 0-1)";
    return false;
  }
  const auto pick = [&](int wanted, const std::string& key, int* out) {
    if (wanted == kAnyLcore) {
      *out = static_cast<int>(first);
      return true;
    }
    if (wanted >= RTE_MAX_LCORE || !rte_lcore_is_enabled(static_cast<unsigned>(wanted))) {
      *err = key + ": lcore " + std::to_string(wanted) + " is not enabled (EAL -l/--lcores)";
      return false;
    }
    if (static_cast<unsigned>(wanted) == main) {
      *err = key + ": lcore " + std::to_string(wanted) +
             " is the main lcore, which runs the control thread";
      return false;
    }
    *out = wanted;
    return true;
  };
  roles_.assign(RTE_MAX_LCORE, LcoreRoles{});
  for (auto& e : endpoints_) {
    int lc = 0;
    if (!pick(e->lcore(), cfg_.endpoints[e->index()].key + ".lcore", &lc)) return false;
    e->set_lcore(lc);
    roles_[lc].endpoints.push_back(e.get());
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

// One QP pair per flow QP: a sender on `from`, a checking receiver on `to`,
// each with a buffer of the flow's message slots in registered memory.
bool Daemon::setup_traffic(std::string* err) {
  for (uint32_t fi = 0; fi < cfg_.traffic.size(); ++fi) {
    const FlowSpec& f = cfg_.traffic[fi];
    EndpointTask& a = *endpoints_[f.from];
    EndpointTask& b = *endpoints_[f.to];
    const uint64_t bytes = uint64_t{Txgen::slots(f)} * f.size_bytes;
    const std::string key = "traffic[" + std::to_string(fi) + "]: ";
    for (uint32_t q = 0; q < f.qps; ++q) {
      uint8_t* abuf = nullptr;
      uint8_t* bbuf = nullptr;
      uint32_t akey = 0, bkey = 0, aqpn = 0, bqpn = 0;
      if (!a.alloc_region(bytes, &abuf, &akey, err) || !b.alloc_region(bytes, &bbuf, &bkey, err) ||
          !a.create_qp(&aqpn, err) || !b.create_qp(&bqpn, err) ||
          !a.connect(aqpn, f.to, bqpn, err) || !b.connect(bqpn, f.from, aqpn, err)) {
        *err = key + *err;
        return false;
      }
      const uint64_t stream = uint64_t{fi} << 32 | q;
      a.txgen().add_sender({aqpn, f, stream, abuf, akey, reinterpret_cast<uint64_t>(bbuf), bkey});
      if (!b.add_receiver({bqpn, f, stream, bbuf}, err)) {
        *err = key + *err;
        return false;
      }
    }
  }
  return true;
}

bool Daemon::broadcast(const Command& c) {
  bool ok = true;
  for (auto& e : endpoints_) ok = e->command(c) && ok;
  return ok;
}

void Daemon::start_traffic() {
  broadcast(Command{CommandType::kStart});
}

void Daemon::stop_traffic() {
  broadcast(Command{CommandType::kStop});
}

void Daemon::clear_stats() {
  broadcast(Command{CommandType::kClearStats});
  for (auto& e : endpoints_)
    for (uint32_t p = 0; p < e->num_planes(); ++p) e->port(p).reset_stats();
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
  while (d.phase_.load(std::memory_order_relaxed) != Phase::kExit) {
    const uint64_t tsc = rte_rdtsc();
    for (EndpointTask* e : r.endpoints) e->poll(tsc);
    if (!r.links.empty()) {
      const uint64_t now = d.clock_.ns(tsc);
      for (Link* l : r.links) l->poll(now);
    }
  }
  return 0;
}

int Daemon::run() {
  struct sigaction sa {};
  sa.sa_handler = &Daemon::on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  started_ns_ = clock_.now_ns();
  last_log_ns_ = started_ns_;
  last_log_ = snapshots();
  next_log_ns_ = started_ns_ + log_interval_ns_;
  if (!opt_.interactive || linerate_) start_traffic();
  for (unsigned lc = 0; lc < roles_.size(); ++lc)
    if (!roles_[lc].endpoints.empty() || !roles_[lc].links.empty())
      rte_eal_remote_launch(&Daemon::lcore_main, &roles_[lc], lc);
  if (opt_.interactive) prompt_ = std::make_unique<Prompt>(*this);

  uint64_t now = started_ns_;
  while (phase() != Phase::kExit) {
    if (prompt_) {
      if (!prompt_->poll(kControlTickMs)) request_stop("quit");
    } else {
      ::poll(nullptr, 0, static_cast<int>(kControlTickMs));
    }
    now = clock_.now_ns();
    control_step(now);
  }
  rte_eal_mp_wait_lcore();
  prompt_.reset();
  return summarize(clock_.now_ns());
}

void Daemon::control_step(uint64_t now) {
  if (g_signal != 0 && phase() == Phase::kRun)
    request_stop(g_signal == SIGINT ? "SIGINT" : "SIGTERM");
  if (linerate_ && phase() == Phase::kRun) measure_linerate(now);
  const std::vector<EndpointSnapshot> snaps = snapshots();
  switch (phase()) {
    case Phase::kRun: {
      bool bounded = !opt_.interactive && !cfg_.traffic.empty();
      for (const FlowSpec& f : cfg_.traffic) bounded = bounded && (f.messages || f.duration_ns);
      bool finished = bounded;
      for (const EndpointSnapshot& s : snaps) finished = finished && s.txgen_finished;
      if (finished) request_stop("traffic done");
      break;
    }
    case Phase::kDrain: {
      bool idle = true;
      for (const EndpointSnapshot& s : snaps) idle = idle && s.txgen.in_flight == 0;
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
  const char* kind[] = {"probe", "rx", "tx"};
  std::printf(
      "softmrcd: linerate %s: %u-byte frames, %.3f Mpps, %.2f Gb/s on lcore %d "
      "(%" PRIu64 " packets in %.3f s, %" PRIu64 " dropped)\n",
      kind[size_t(spec.kind)], linerate_->frame_bytes(), n * 1e3 / dt,
      gbps(n * linerate_->frame_bytes(), dt), endpoints_[0]->lcore(), n, dt / 1e9,
      s.drops.total() + s.engine.ctrl_dropped);
  std::fflush(stdout);
  request_stop("linerate done");
}

// One line per interval: per endpoint its rates, planes in use (one digit
// per plane), retransmissions and drops; then the traffic generator.
void Daemon::log_status(uint64_t now) {
  const std::vector<EndpointSnapshot> snaps = snapshots();
  const uint64_t dt = now - last_log_ns_;
  std::string line;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "softmrcd: t=%.3fs", now / 1e9);
  line += buf;
  uint64_t verified = 0, verified_before = 0, errors = 0;
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
    std::snprintf(buf, sizeof(buf),
                  " %s[tx %.2f Gb/s rx %.2f Gb/s planes %s retx %" PRIu64 " drops %" PRIu64 "]",
                  endpoints_[i]->name().c_str(), gbps(tx, dt), gbps(rx, dt), planes.c_str(),
                  retransmits(s), s.drops.total());
    line += buf;
    verified += s.txgen.verified;
    verified_before += before.txgen.verified;
    errors += s.txgen.errors + s.txgen.mismatches;
  }
  if (!cfg_.traffic.empty()) {
    std::snprintf(buf, sizeof(buf), " txgen verified %" PRIu64 " (+%" PRIu64 ") errors %" PRIu64,
                  verified, verified - std::min(verified, verified_before), errors);
    line += buf;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  last_log_ = snaps;
  last_log_ns_ = now;
}

int Daemon::summarize(uint64_t now) {
  for (auto& l : links_) l->publish(now);  // their lcores have stopped
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
  }
  const uint64_t end = stop_at_ns_ != 0 ? stop_at_ns_ : now;
  const uint64_t elapsed = end - started_ns_;
  if (!stop_reason_.empty())
    std::printf("softmrcd: stopped (%s) at t=%.3fs: %" PRIu64 " messages were in flight, %" PRIu64
                " completed during the drain, %" PRIu64 " flushed (status %s)\n",
                stop_reason_.c_str(), end / 1e9, t.in_flight_at_stop,
                t.in_flight_at_stop - std::min(t.in_flight_at_stop, t.flushed), t.flushed,
                engine::wc_status_name(engine::WcStatus::kFlushed));
  for (size_t i = 0; i < snaps.size(); ++i) {
    PlaneCounters c;
    for (const PlaneCounters& p : snaps[i].planes) {
      c.tx_packets += p.tx_packets;
      c.tx_extbuf += p.tx_extbuf;
      c.rx_packets += p.rx_packets;
    }
    std::printf("softmrcd: %s: sent %" PRIu64 " packets (%" PRIu64
                " with the payload sent in place), received %" PRIu64 ", dropped %" PRIu64 "\n",
                endpoints_[i]->name().c_str(), c.tx_packets, c.tx_extbuf, c.rx_packets,
                snaps[i].drops.total());
  }
  if (cfg_.traffic.empty()) return 0;
  std::printf("softmrcd: txgen: %" PRIu64 " messages posted, %" PRIu64 " completed, %" PRIu64
              " verified (%.1f MiB, every byte checked), %" PRIu64 " mismatches, %" PRIu64
              " errors, %" PRIu64 " flushed; %.3f s, %.2f Gb/s verified\n",
              t.posted, t.completed, t.verified, t.verified_bytes / 1048576.0, t.mismatches,
              t.errors, t.flushed, elapsed / 1e9, gbps(t.verified_bytes, elapsed));
  const bool ok = t.mismatches == 0 && t.errors == 0;
  std::printf("softmrcd: %s\n",
              ok ? "PASS: every verified byte was right, no errors" : "FAIL: see the errors above");
  std::fflush(stdout);
  return ok ? 0 : 1;
}

void Daemon::teardown() {
  if (phase() != Phase::kExit) {
    phase_.store(Phase::kExit, std::memory_order_release);
    rte_eal_mp_wait_lcore();
  }
  for (auto& e : endpoints_) e->close();
  for (auto& l : links_) l->destroy();
  for (auto& e : endpoints_) e->free_pools();
  endpoints_.clear();
  links_.clear();
}

}  // namespace softmrc::softmrcd
