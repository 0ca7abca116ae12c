// The event loop; see simulator.h.
#include "simulator.h"

#include <algorithm>
#include <cinttypes>
#include <span>
#include <stdexcept>

#include "mrc_stack.h"
#include "roce_stack.h"

namespace softmrc::sim {

namespace {

uint32_t transport_mtu(const Scenario& sc, TransportKind t) {
  return t == TransportKind::kMrc ? sc.mrc.mtu : sc.roce.mtu;
}

}  // namespace

Simulator::Simulator(const Scenario& sc, const SimOptions& opt)
    : sc_(sc),
      opt_(opt),
      rng_(fabric::mix64(opt.seed)),
      workload_(sc.workload, sc.topology.hosts, opt.seed) {
  if (std::string why = unsupported(sc, opt.transport); !why.empty()) throw std::runtime_error(why);
  // The seed varies the ECMP hashing too: which flows collide is part of
  // what a seed decides.
  fabric::TopologyConfig topo = sc.topology;
  topo.hash_seed = fabric::mix64(topo.hash_seed ^ fabric::mix64(opt.seed));
  if (const char* why = fabric_.init(topo))
    throw std::runtime_error(std::string("topology: ") + why);
  for (const fabric::FaultSpec& f : sc.faults)
    if (std::string why = faults_.add(f, fabric_.topology()); !why.empty())
      throw std::runtime_error(why);
  hosts_ = sc.topology.hosts;
  planes_ = sc.topology.planes;
  StackListener& listener = *this;
  if (opt.transport == TransportKind::kMrc)
    stack_ = std::make_unique<MrcStack>(sc, fabric_.topology(), listener, opt.seed);
  else
    stack_ = std::make_unique<RoceStack>(sc, fabric_.topology(), listener, opt.seed);
  nic_limit_bytes_ =
      uint64_t{planes_} * sc.run.nic_queue_packets * (transport_mtu(sc, opt.transport) + 128);
  wake_at_.assign(hosts_, kNever);
  port_up_.assign(uint64_t{hosts_} * planes_, 1);
  for (size_t i = 0; i < kBurst; ++i) burst_[i] = alloc_packet();

  result_.scenario = sc.name;
  result_.transport = opt.transport;
  result_.seed = opt.seed;
  result_.hosts = hosts_;
  result_.host_rate_mbps = sc.topology.host_link_mbps * planes_;
  result_.host_rx_bytes.assign(hosts_, 0);
  result_.bin_ns = sc.run.bin_ns;
}

Simulator::~Simulator() = default;

uint32_t Simulator::alloc_packet() {
  if (!free_packets_.empty()) {
    const uint32_t id = free_packets_.back();
    free_packets_.pop_back();
    return id;
  }
  if (packets_.size() > EventQueue::kMaxId)
    throw std::runtime_error("more packets in flight than the event queue can name");
  packets_.emplace_back();
  return static_cast<uint32_t>(packets_.size() - 1);
}

Bin& Simulator::bin(TimeNs t) {
  const size_t i = t / result_.bin_ns;
  if (result_.bins.size() <= i) result_.bins.resize(i + 1);
  return result_.bins[i];
}

void Simulator::note(TimeNs now, const std::string& line) {
  std::fprintf(opt_.trace, "%12" PRIu64 " %s\n", now, line.c_str());
}

void Simulator::schedule_wake(uint32_t host, TimeNs at) {
  if (wake_at_[host] <= at) return;
  wake_at_[host] = at;
  queue_.push(at, EventType::kWake, host);
}

void Simulator::schedule_route() {
  const TimeNs t = fabric_.next_route_change();
  if (t == fabric::kNever || t >= route_at_) return;
  route_at_ = t;
  queue_.push(t, EventType::kRoute, 0);
}

RunResult Simulator::run() {
  queue_.push(0, EventType::kStepStart, 0);
  if (faults_.next_at() != fabric::kNever) queue_.push(faults_.next_at(), EventType::kFault, 0);
  result_.stop = "the event queue ran dry: transfers are stuck";
  while (!queue_.empty() && !all_done_) {
    const Event e = queue_.pop();
    if (e.at_ns > sc_.run.time_limit_ns) {
      result_.stop = "time limit (run.time_limit_ms)";
      now_ = sc_.run.time_limit_ns;
      break;
    }
    now_ = e.at_ns;
    ++result_.events;
    // The next event's packet is most likely not in cache: ask for it now.
    if (!queue_.empty() && queue_.top().type == EventType::kHop) {
      const char* next = reinterpret_cast<const char*>(&packets_[queue_.top().id]);
      __builtin_prefetch(next);
      __builtin_prefetch(next + 64);
    }

    switch (e.type) {
      case EventType::kHop:
        hop(e.id);
        break;
      case EventType::kWake:
        if (wake_at_[e.id] == now_) {
          wake_at_[e.id] = kNever;
          service(e.id);
        }
        break;
      case EventType::kFault:
        apply_faults();
        break;
      case EventType::kRoute: {
        std::vector<uint32_t> changed;
        fabric_.advance(now_, tracing() ? &changed : nullptr);
        for (uint32_t link : changed)
          note(now_, "routing " + std::string(fabric_.routed(link) ? "restores " : "withdraws ") +
                         fabric_.topology().link_name(link));
        if (now_ >= route_at_) route_at_ = kNever;
        schedule_route();
        break;
      }
      case EventType::kPort: {
        const PortChange& c = port_changes_[e.id];
        if (tracing())
          note(now_, "host " + std::to_string(c.host) + " port p" + std::to_string(c.plane) +
                         (c.up ? " up" : " down"));
        stack_->set_port_up(c.host, c.plane, c.up, now_);
        schedule_wake(c.host, now_);
        break;
      }
      case EventType::kStepStart:
        begin_step(e.id);
        break;
    }
    settle();
    if (opt_.progress && (result_.events & 0xffff) == 0)
      opt_.progress(Progress{now_, step_, workload_.steps(), workload_.finished_count(),
                             workload_.transfers(), result_.events});
  }
  if (all_done_)
    result_.stop =
        result_.steps_failed() ? "every step ended, some transfers failed" : "every step completed";
  finish_result();
  return std::move(result_);
}

void Simulator::begin_step(uint32_t step) {
  step_ = step;
  step_active_ = true;
  ready_.clear();
  workload_.begin_step(step, &ready_);
  StepRecord rec;
  rec.step = step;
  rec.start_ns = rec.end_ns = now_;
  rec.transfers = workload_.transfers();
  result_.steps.push_back(rec);
  started_at_.assign(workload_.transfers(), 0);
  if (opt_.record_transfers) {
    record_base_ = result_.transfers.size();
    for (uint32_t id = 0; id < workload_.transfers(); ++id)
      result_.transfers.push_back(TransferRecord{workload_.transfer(id)});
  }
  if (tracing())
    note(now_, "step " + std::to_string(step) + " begins: " + std::to_string(rec.transfers) +
                   " transfers");
  for (const Transfer& t : ready_) start(t);
}

TransferRecord* Simulator::record(uint32_t transfer) {
  return opt_.record_transfers ? &result_.transfers[record_base_ + transfer] : nullptr;
}

void Simulator::start(const Transfer& t) {
  started_at_[t.id] = now_;
  if (TransferRecord* r = record(t.id)) r->start_ns = now_;
  stack_->start(t, now_);
}

// What finished transfers let happen next: more transfers, the next step.
void Simulator::settle() {
  for (size_t i = 0; i < finished_.size(); ++i) {
    ready_.clear();
    workload_.finished(finished_[i], &ready_);
    for (const Transfer& t : ready_) start(t);
  }
  finished_.clear();
  if (!step_active_ || !workload_.step_complete()) return;
  step_active_ = false;
  StepRecord& rec = result_.steps.back();
  rec.done_ns = now_;
  rec.complete = rec.failed == 0;
  if (tracing())
    note(now_, "step " + std::to_string(step_) + " ends: time " + std::to_string(rec.time_ns()) +
                   " ns, " + std::to_string(rec.failed) + " failed");
  if (step_ + 1 < workload_.steps())
    queue_.push(now_ + sc_.workload.compute_ns, EventType::kStepStart, step_ + 1);
  else
    all_done_ = true;
}

void Simulator::delivered(uint32_t transfer, TimeNs now) {
  const Transfer& t = workload_.transfer(transfer);
  const TimeNs mct = std::max<TimeNs>(1, now - started_at_[transfer]);
  result_.mct_ns.push_back(mct);
  result_.flow_gbps.push_back(static_cast<double>(t.bytes) * 8 / static_cast<double>(mct));
  result_.payload_bytes += t.bytes;
  StepRecord& rec = result_.steps.back();
  rec.end_ns = std::max(rec.end_ns, now);
  if (TransferRecord* r = record(transfer)) r->delivered_ns = now;
  if (tracing())
    note(now, "delivered " + std::to_string(t.src) + "->" + std::to_string(t.dst) + " #" +
                  std::to_string(transfer) + " in " + std::to_string(mct) + " ns");
}

void Simulator::done(uint32_t transfer, TimeNs now) {
  if (TransferRecord* r = record(transfer)) r->done_ns = now;
  finished_.push_back(transfer);
}

void Simulator::failed(uint32_t transfer, TimeNs now, const char* why) {
  const Transfer& t = workload_.transfer(transfer);
  // A failed transfer counts as finished, so its step lasts until it failed.
  StepRecord& rec = result_.steps.back();
  ++rec.failed;
  rec.end_ns = std::max(rec.end_ns, now);
  if (TransferRecord* r = record(transfer)) {
    r->done_ns = now;
    r->failed = true;
  }
  if (tracing())
    note(now, "FAILED " + std::to_string(t.src) + "->" + std::to_string(t.dst) + " #" +
                  std::to_string(transfer) + ": " + why);
  finished_.push_back(transfer);
}

void Simulator::goodput(uint32_t host, uint64_t bytes, TimeNs now) {
  result_.host_rx_bytes[host] += bytes;
  bin(now).rx_bytes += bytes;
}

void Simulator::ev_change(const EvChange& c, TimeNs now) {
  Bin& b = bin(now);
  b.ev_to_bad += c.to_bad;
  b.ev_to_good += c.to_good;
  if (tracing())
    note(now, "host " + std::to_string(c.host) + " ->" + std::to_string(c.peer) + " ev#" +
                  std::to_string(c.ev) + " p" + std::to_string(c.plane) + " " + c.from + " -> " +
                  c.to);
}

uint64_t Simulator::nic_backlog(uint32_t host) const {
  uint64_t bytes = 0;
  for (uint32_t p = 0; p < planes_; ++p)
    bytes += fabric_.link(fabric_.topology().host_up(p, host)).backlog_bytes(now_);
  return bytes;
}

// When the NIC's queues will have drained below the limit: at least the
// excess over the limit at the NIC's full rate (sooner is impossible; if
// some planes run dry first the host simply waits once more).
TimeNs Simulator::nic_ready_at(uint32_t host, uint64_t backlog) const {
  uint64_t rate_bps = 0;
  for (uint32_t p = 0; p < planes_; ++p)
    rate_bps += fabric_.link(fabric_.topology().host_up(p, host)).rate_bps();
  const uint64_t excess = backlog - nic_limit_bytes_ + 1;
  return now_ + std::max<uint64_t>(1, (excess * 8'000'000'000 + rate_bps - 1) / rate_bps);
}

void Simulator::service(uint32_t host) {
  bool blocked = false;
  for (;;) {
    const uint64_t backlog = nic_backlog(host);
    if (backlog >= nic_limit_bytes_) {
      schedule_wake(host, nic_ready_at(host, backlog));
      blocked = true;
      break;
    }
    for (size_t i = 0; i < kBurst; ++i) burst_ptrs_[i] = &packets_[burst_[i]];
    const size_t n = stack_->poll_tx(host, burst_ptrs_, kBurst, now_);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = burst_[i];
      burst_[i] = alloc_packet();
      inject(id);
    }
    if (n < kBurst) break;
  }
  const TimeNs next = stack_->next_wakeup(host);
  if (next == kNever) return;
  if (next > now_)
    schedule_wake(host, next);
  else if (!blocked)
    schedule_wake(host, now_ + 1);  // it has more than one burst allows: come back at once
}

void Simulator::inject(uint32_t id) {
  SimPacket& p = packets_[id];
  p.hop = 0;
  if (!fabric_.route(p.plane, p.src, p.dst, p.meta.ev, &p.path)) {
    const uint32_t link = fabric_.topology().host_up(p.plane, p.src);
    fabric_.link(link).count_drop(fabric::DropReason::kNoRoute);
    drop(p, link, fabric::DropReason::kNoRoute);
    free_packet(id);
    return;
  }
  enter(id);
}

void Simulator::enter(uint32_t id) {
  SimPacket& p = packets_[id];
  const uint32_t link_id = p.path.links[p.hop];
  fabric::Link& link = fabric_.link(link_id);
  const bool was_trimmed = p.meta.trimmed;
  const bool was_ce = p.meta.ce;
  // The frame keeps what earlier links did to it; this says what this one does.
  p.meta.corrupted = fabric::Corruption::kNone;
  const fabric::Verdict v = link.enqueue(p.meta, now_, rng_);
  if (!v.delivered()) {
    drop(p, link_id, v.drop);
    free_packet(id);
    return;
  }
  if (p.meta.trimmed && !was_trimmed) {
    ++bin(now_).trims;
    if (tracing()) note(now_, "trim " + fabric_.topology().link_name(link_id) + " " + describe(p));
    if (sc_.run.framed) p.frame.resize(wire::trim(p.frame, wire::DscpConfig{}));
  }
  if (p.meta.ce && !was_ce && sc_.run.framed) wire::mark_ce(p.frame);
  if (p.meta.corrupted != fabric::Corruption::kNone) corrupt(p, link_id);
  p.down_count = link.down_count();
  queue_.push(v.at_ns, EventType::kHop, id);
}

void Simulator::hop(uint32_t id) {
  SimPacket& p = packets_[id];
  const uint32_t link_id = p.path.links[p.hop];
  fabric::Link& link = fabric_.link(link_id);
  if (!link.survived(p.down_count)) {
    link.count_drop(fabric::DropReason::kLinkDown);
    drop(p, link_id, fabric::DropReason::kLinkDown);
    free_packet(id);
    return;
  }
  if (++p.hop < p.path.hops) {
    enter(id);
    return;
  }
  stack_->deliver(p, now_);
  const uint32_t dst = p.dst;
  free_packet(id);
  service(dst);
}

void Simulator::drop(const SimPacket& p, uint32_t link, fabric::DropReason why) {
  ++bin(now_).drops;
  if (tracing())
    note(now_, std::string("drop ") + fabric::drop_reason_name(why) + " " +
                   fabric_.topology().link_name(link) + " " + describe(p));
}

// One payload byte changed (every MRC data packet carries some: a transfer
// has at least one byte), and a fresh ICRC if the link recomputes it.
// Only framed MRC runs get here: unsupported() refuses the others.
void Simulator::corrupt(SimPacket& p, uint32_t link) {
  const size_t end = p.frame.size() - wire::kIcrcLen;
  const size_t start = end - p.payload_len;
  p.frame[start + rng_.below(p.payload_len)] ^= static_cast<uint8_t>(1 + rng_.below(255));
  const bool recomputed = p.meta.corrupted == fabric::Corruption::kRecomputedIcrc;
  if (recomputed) {
    const std::span<const uint8_t> frame(p.frame);
    wire::store_icrc(wire::packet_icrc(frame.first(start), frame.subspan(start, p.payload_len),
                                       wire::ParseConfig{}.ev_mode),
                     p.frame.data() + end);
  }
  if (tracing())
    note(now_, "corrupt " + fabric_.topology().link_name(link) + " " + describe(p) +
                   (recomputed ? ", ICRC recomputed" : ""));
}

std::string Simulator::describe(const SimPacket& p) const {
  char ev[16];
  std::snprintf(ev, sizeof ev, "%#x", p.meta.ev);
  std::string s = std::to_string(p.src) + "->" + std::to_string(p.dst) + " ev " + ev + " ";
  if (opt_.transport == TransportKind::kMrc) {
    s += wire::opcode_name(p.t.opcode);
    if (wire::is_data(p.t.opcode)) s += " psn " + std::to_string(p.t.psn);
    return s;
  }
  s += p.roce.kind == RoceKind::kData ? "data" : p.roce.kind == RoceKind::kAck ? "ack" : "nak";
  return s + " psn " + std::to_string(p.roce.psn);
}

void Simulator::apply_faults() {
  for (const fabric::FaultEvent& f : faults_.apply_due(now_, fabric_)) {
    result_.faults.push_back(FaultNote{now_, f.what});
    if (tracing()) note(now_, "fault " + f.what);
  }
  // A NIC whose link changed state notices after port_detect_ns.
  for (uint32_t h = 0; h < hosts_; ++h) {
    for (uint32_t p = 0; p < planes_; ++p) {
      const uint8_t up = fabric_.host_port_up(p, h);
      uint8_t& known = port_up_[uint64_t{h} * planes_ + p];
      if (up == known) continue;
      known = up;
      port_changes_.push_back(PortChange{h, p, up != 0});
      queue_.push(now_ + sc_.run.port_detect_ns, EventType::kPort,
                  static_cast<uint32_t>(port_changes_.size() - 1));
    }
  }
  if (faults_.next_at() != fabric::kNever) queue_.push(faults_.next_at(), EventType::kFault, 0);
  schedule_route();
}

void Simulator::finish_result() {
  RunResult& r = result_;
  r.finished = all_done_;
  // A step the run stopped in lasted at least until the run's end.
  if (step_active_ && !r.steps.empty()) r.steps.back().end_ns = now_;
  for (const StepRecord& s : r.steps) r.finished = r.finished && s.complete;
  r.end_ns = now_;
  std::sort(r.mct_ns.begin(), r.mct_ns.end());
  std::sort(r.flow_gbps.begin(), r.flow_gbps.end());
  r.stack = stack_->counters();
  const double span_ps = static_cast<double>(std::max<TimeNs>(1, now_)) * 1000;
  double up = 0, down = 0, fab = 0;
  uint64_t n_fab = 0;
  for (uint32_t id = 0; id < fabric_.num_links(); ++id) {
    const fabric::LinkCounters& c = fabric_.link(id).counters();
    for (size_t d = 0; d < r.drops.size(); ++d) r.drops[d] += c.drops[d];
    r.trims += c.trims;
    r.ce_marks += c.ce_marks;
    r.corruptions += c.corruptions;
    const double u = static_cast<double>(c.busy_ps) / span_ps;
    switch (fabric_.topology().info(id).kind) {
      case fabric::LinkKind::kHostUp:
        up += u;
        break;
      case fabric::LinkKind::kHostDown:
        down += u;
        break;
      default:
        fab += u;
        ++n_fab;
        r.util_fabric_max = std::max(r.util_fabric_max, u);
    }
  }
  const double host_links = static_cast<double>(hosts_) * planes_;
  r.util_host_up = up / host_links;
  r.util_host_down = down / host_links;
  r.util_fabric = n_fab ? fab / static_cast<double>(n_fab) : 0;
  // The series covers the whole run and no more: a run that ends on a bin's
  // boundary leaves that bin no width, and what happened at that instant
  // belongs to the bin it closes.
  bin(now_);
  if (now_ > 0 && now_ % r.bin_ns == 0 && r.bins.size() == now_ / r.bin_ns + 1) {
    const Bin last = r.bins.back();
    r.bins.pop_back();
    r.bins.back() += last;
  }
}

}  // namespace softmrc::sim
