// Reports on the daemon's state (see report.h).
#include "softmrcd/report.h"

#include <cstdio>

#include "cli/number.h"

#include "port/ethdev/hangup_guard.h"
#include "port/ethdev/unmap_guard.h"
#include "softmrcd/daemon.h"

namespace softmrc::softmrcd {

namespace {

// Resolves an optional leading endpoint name: all endpoints (-1) when absent.
bool endpoint_arg(Daemon& d, const std::vector<std::string>& args, int* index, std::string* err) {
  *index = -1;
  if (args.empty() || args[0].empty()) return true;
  if (EndpointTask* e = d.find_endpoint(args[0])) {
    *index = static_cast<int>(e->index());
    return true;
  }
  *err = "no endpoint named '" + args[0] + "'";
  return false;
}

const QpStats* find_qp(const EndpointSnapshot& s, uint32_t qpn) {
  for (uint32_t i = 0; i < s.num_qps; ++i)
    if (s.qps[i].qpn == qpn) return &s.qps[i];
  return nullptr;
}

// The QP that "[endpoint,]qpn[,first]" names in the snapshots (the endpoint
// may be left out when there is one); nullptr with *err if there is none.
const QpStats* named_qp(Daemon& d, const std::vector<EndpointSnapshot>& snaps,
                        const std::vector<std::string>& args, size_t max_args, int* index,
                        uint32_t* first, std::string* err) {
  std::vector<std::string> rest = args;
  *index = 0;
  uint32_t number = 0;
  if (!rest.empty() && d.find_endpoint(rest[0]) != nullptr) {
    *index = static_cast<int>(d.find_endpoint(rest[0])->index());
    rest.erase(rest.begin());
  } else if (!rest.empty() && !parse_u32(rest[0], &number)) {
    // Not a QPN: meant as an endpoint's name.
    *err = "no endpoint named '" + rest[0] + "'";
    return nullptr;
  } else if (d.endpoints().size() != 1) {
    *err = "name the endpoint first: <endpoint>,<qpn>";
    return nullptr;
  }
  uint32_t qpn = 0;
  if (rest.empty() || rest.size() > max_args || !parse_u32(rest[0], &qpn) ||
      (rest.size() > 1 && !parse_u32(rest[1], first))) {
    *err = "expected [<endpoint>,]<qpn>" + std::string(max_args > 1 ? "[,<first>]" : "");
    return nullptr;
  }
  const QpStats* q = find_qp(snaps[*index], qpn);
  if (q == nullptr)
    *err = "no QP " + std::to_string(qpn) + " on '" + d.endpoints()[*index]->name() + "'";
  return q;
}

std::string plane_row(const std::string& endpoint, size_t plane) {
  return endpoint + "/" + std::to_string(plane);
}

uint64_t sum(const std::array<uint64_t, size_t(engine::RetxCause::kCount)>& a) {
  uint64_t n = 0;
  for (uint64_t v : a) n += v;
  return n;
}

void endpoints_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps, Report* out) {
  for (auto& e : d.endpoints()) {
    const EndpointSpec& spec = d.config().endpoints[e->index()];
    Row r{e->name(), {}};
    r.num("lcore", static_cast<uint64_t>(e->lcore()));
    r.num("planes", e->num_planes());
    r.num("qps", snaps[e->index()].num_qps);
    r.text("ev_mode", wire::ev_mode_name(spec.ev_mode));
    r.text("ip", spec.planes[0].ip_version == wire::IpVersion::kV4 ? "ipv4" : "ipv6");
    const int link = d.config().link_of(e->index());
    r.text("link", link < 0 ? "none" : std::to_string(link));
    out->push_back(std::move(r));
  }
}

void ports_report(Daemon& d, int only, Report* out) {
  for (auto& e : d.endpoints()) {
    if (only >= 0 && static_cast<int>(e->index()) != only) continue;
    for (uint32_t p = 0; p < e->num_planes(); ++p) {
      port::EthdevPort& port = e->port(p);
      Row r{plane_row(e->name(), p), {}};
      r.num("port_id", port.port_id());
      r.text("device", port.name());
      r.text("driver", port.driver());
      rte_eth_link link{};
      rte_eth_link_get_nowait(port.port_id(), &link);
      r.num("link_up", link.link_status == RTE_ETH_LINK_UP);
      r.num("link_interrupt", port.link_interrupt());
      r.num("link_interrupts", port.link_interrupts());
      r.num("reconnects", port.reconnects());
      r.num("reconnect_failures", port.reconnect_failures());
      r.num("unmap_guard_timeouts", port::unmap_guard::wait_timeouts());   // the process's
      r.num("hangup_guard_sends", port::hangup_guard::peer_gone_sends());  // the process's
      r.num("rx_ipv4_checksum", port.rx_ipv4_checksum());
      r.num("rx_keep_crc", port.rx_keeps_crc());
      rte_eth_stats st{};
      port.stats(&st);
      add_port_counters(st, &r);
      out->push_back(std::move(r));
    }
  }
}

void planes_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps, int only, Report* out) {
  for (auto& e : d.endpoints()) {
    if (only >= 0 && static_cast<int>(e->index()) != only) continue;
    const EndpointSnapshot& s = snaps[e->index()];
    for (size_t p = 0; p < s.planes.size(); ++p) {
      Row r{plane_row(e->name(), p), {}};
      r.num("link_up", s.plane_state[p].link_up);
      r.num("admin_up", s.plane_state[p].admin_up);
      r.num("in_use", s.plane_state[p].engine_up);
      r.num("rx_packets", s.planes[p].rx_packets);
      r.num("rx_bytes", s.planes[p].rx_bytes);
      r.num("tx_packets", s.planes[p].tx_packets);
      r.num("tx_bytes", s.planes[p].tx_bytes);
      r.num("tx_extbuf", s.planes[p].tx_extbuf);
      r.num("rx_ipv4_checksum_by_port", s.planes[p].rx_ipv4_checksum_by_port);
      r.num("rx_icrc_from_fcs", s.planes[p].rx_icrc_from_fcs);
      r.num("rx_fcs_wrong", s.planes[p].rx_fcs_wrong);
      r.num("link_changes", s.planes[p].link_changes);
      r.num("tx_stalls", s.planes[p].tx_stalls);
      r.num("port_rx_stalls", s.planes[p].port_rx_stalls);
      r.num("port_tx_link_down", s.planes[p].port_tx_link_down);
      uint64_t usable = 0, good = 0;
      for (uint32_t q = 0; q < s.num_qps; ++q)
        for (uint32_t i = 0; i < s.qps[q].num_evs; ++i) {
          const EvStats& ev = s.evs[s.qps[q].first_ev + i];
          if (ev.plane != p) continue;
          good += ev.state == engine::EvState::kGood;
          usable += ev.usable;
        }
      r.num("evs_good", good);
      r.num("evs_usable", usable);
      out->push_back(std::move(r));
    }
  }
}

void qp_summary(Row& r, Daemon& d, const QpStats& q) {
  r.text("owner", q.app ? "app " + std::to_string(q.pid) : "txgen");
  r.text("state", engine::qp_state_name(q.state));
  r.text("peer", q.peer < d.config().endpoints.size() ? d.config().endpoints[q.peer].name : "?");
  r.num("dest_qpn", q.dest_qpn);
  r.num("tx_data_packets", q.counters.tx_data_packets);
  r.num("rx_data_packets", q.counters.rx_data_packets);
  r.num("retransmits", sum(q.counters.retransmits));
  r.num("timeouts", q.counters.timeouts);
  r.num("evs", q.num_evs);
  r.num("usable_evs", q.usable_evs);
  r.num("srtt_ns", q.srtt_ns);
}

bool qps_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps,
                const std::vector<std::string>& args, Report* out, std::string* err) {
  int only = -1;
  uint32_t first = 0;
  if (!endpoint_arg(d, args, &only, err)) return false;
  if (args.size() > 2 || (args.size() == 2 && !parse_u32(args[1], &first))) {
    *err = "expected [<endpoint>[,<first>]]";
    return false;
  }
  uint32_t index = 0;
  for (auto& e : d.endpoints()) {
    if (only >= 0 && static_cast<int>(e->index()) != only) continue;
    const EndpointSnapshot& s = snaps[e->index()];
    for (uint32_t i = 0; i < s.num_qps; ++i, ++index) {
      if (index < first) continue;
      if (out->size() == kReportPage) {
        Row more{"more", {}};
        more.num("next_first", index);
        out->push_back(std::move(more));
        return true;
      }
      Row r{e->name() + "/" + std::to_string(s.qps[i].qpn), {}};
      qp_summary(r, d, s.qps[i]);
      out->push_back(std::move(r));
    }
  }
  return true;
}

bool qp_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps,
               const std::vector<std::string>& args, Report* out, std::string* err) {
  int index = 0;
  uint32_t first = 0;
  const QpStats* q = named_qp(d, snaps, args, 1, &index, &first, err);
  if (q == nullptr) return false;
  const engine::QpCounters& c = q->counters;
  Row r{d.endpoints()[index]->name() + "/" + std::to_string(q->qpn), {}};
  qp_summary(r, d, *q);
  r.num("snd_una", q->snd_una);
  r.num("snd_nxt", q->snd_nxt);
  r.num("epsn", q->epsn);
  r.num("rtt_max_ns", q->rtt_max_ns);
  r.num("cwnd_bytes", q->cwnd_bytes);
  r.num("inflight_bytes", q->inflight_bytes);
  r.num("tx_data_bytes", c.tx_data_bytes);
  for (size_t i = 0; i < c.retransmits.size(); ++i)
    r.num(std::string("retransmits_") + engine::retx_cause_name(engine::RetxCause(i)),
          c.retransmits[i]);
  r.num("acks_rx", c.acks_rx);
  for (size_t i = 1; i < c.nacks_rx.size(); ++i)
    r.num(std::string("nacks_rx_") + wire::nack_code_name(wire::NackCode(i)), c.nacks_rx[i]);
  r.num("feedback_ignored", c.feedback_ignored);
  r.num("duplicate_feedback", c.duplicate_feedback);
  r.num("probes_tx", c.probes_tx);
  r.num("probe_replies_rx", c.probe_replies_rx);
  r.num("port_status_tx", c.port_status_tx);
  r.num("port_status_rx", c.port_status_rx);
  r.num("send_completions", c.send_completions);
  r.num("no_usable_ev", c.no_usable_ev);
  r.num("rx_data_bytes", c.rx_data_bytes);
  r.num("rx_trimmed", c.rx_trimmed);
  r.num("rx_duplicates", c.rx_duplicates);
  r.num("rx_out_of_window", c.rx_out_of_window);
  r.num("rx_ce", c.rx_ce);
  r.num("acks_tx", c.acks_tx);
  for (size_t i = 1; i < c.nacks_tx.size(); ++i)
    r.num(std::string("nacks_tx_") + wire::nack_code_name(wire::NackCode(i)), c.nacks_tx[i]);
  r.num("recv_completions", c.recv_completions);
  r.num("ev_state_changes", c.ev_state_changes);
  r.num("errors", c.errors);
  r.num("cc_increases", q->cc.increases);
  r.num("cc_decreases", q->cc.decreases);
  r.num("cc_quick_adapts", q->cc.quick_adapts);
  r.num("cc_trims", q->cc.trims);
  r.num("cc_losses", q->cc.losses);
  r.num("cc_timeouts", q->cc.timeouts);
  out->push_back(std::move(r));
  return true;
}

bool evs_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps,
                const std::vector<std::string>& args, Report* out, std::string* err) {
  int index = 0;
  uint32_t first = 0;
  const QpStats* q = named_qp(d, snaps, args, 2, &index, &first, err);
  if (q == nullptr) return false;
  const EndpointSnapshot& s = snaps[index];
  for (uint32_t i = first; i < q->num_evs; ++i) {
    if (out->size() == kReportPage) {
      Row more{"more", {}};
      more.num("next_first", i);
      out->push_back(std::move(more));
      break;
    }
    const EvStats& ev = s.evs[q->first_ev + i];
    Row r{"ev" + std::to_string(i), {}};
    r.num("plane", ev.plane);
    r.text("state", engine::ev_state_name(ev.state));
    r.num("tx_packets", ev.counters.tx_packets);
    r.num("tx_bytes", ev.counters.tx_bytes);
    r.num("retransmits", ev.counters.retransmits);
    r.num("acked", ev.counters.acked);
    r.num("ecn_marks", ev.counters.ecn_marks);
    r.num("trims", ev.counters.trims);
    r.num("losses", ev.counters.losses);
    r.num("probes_sent", ev.counters.probes_sent);
    r.num("probe_replies", ev.counters.probe_replies);
    r.num("state_changes", ev.counters.state_changes);
    out->push_back(std::move(r));
  }
  return true;
}

void drops_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps, int only, Report* out) {
  for (auto& e : d.endpoints()) {
    if (only >= 0 && static_cast<int>(e->index()) != only) continue;
    const EndpointSnapshot& s = snaps[e->index()];
    Row r{e->name(), {}};
    for (size_t i = 1; i < s.drops.parse.size(); ++i)
      r.num(std::string("rx_") + wire::parse_status_name(wire::ParseStatus(i)), s.drops.parse[i]);
    for (size_t i = 0; i < s.drops.other.size(); ++i) r.num(drop_name(Drop(i)), s.drops.other[i]);
    r.num("total", s.drops.total());
    // Counted by the engine: packets it had no use for.
    r.num("engine_rx_unknown_qpn", s.engine.rx_unknown_qpn);
    r.num("engine_rx_unexpected", s.engine.rx_unexpected);
    r.num("engine_rx_bad_plane", s.engine.rx_bad_plane);
    r.num("engine_ctrl_dropped", s.engine.ctrl_dropped);
    r.num("engine_ctrl_no_ev", s.engine.ctrl_no_ev);
    r.num("engine_events_lost", s.engine.events_lost);
    r.num("engine_cq_overflow", s.engine.cq_overflow);
    // Refused before the engine: applications' malformed work requests.
    r.num("app_bad_descriptors", s.app_bad_descriptors);
    out->push_back(std::move(r));
  }
}

void stats_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps, int only, Report* out) {
  for (auto& e : d.endpoints()) {
    if (only >= 0 && static_cast<int>(e->index()) != only) continue;
    const EndpointSnapshot& s = snaps[e->index()];
    Row r{e->name(), {}};
    PlaneCounters t;
    for (const PlaneCounters& p : s.planes) {
      t.rx_packets += p.rx_packets;
      t.rx_bytes += p.rx_bytes;
      t.tx_packets += p.tx_packets;
      t.tx_bytes += p.tx_bytes;
    }
    r.num("at_ns", s.at_ns);
    r.num("rx_packets", t.rx_packets);
    r.num("rx_bytes", t.rx_bytes);
    r.num("tx_packets", t.tx_packets);
    r.num("tx_bytes", t.tx_bytes);
    r.num("drops", s.drops.total());
    r.num("retransmits", retransmits(s));
    r.num("qps", s.num_qps);
    r.num("qp_gone_tx", s.engine.qp_gone_tx);  // peers told an application's QP is gone
    r.num("txgen_posted", s.txgen.posted);
    r.num("txgen_completed", s.txgen.completed);
    r.num("txgen_completed_bytes", s.txgen.completed_bytes);
    r.num("txgen_in_flight", s.txgen.in_flight);
    r.num("txgen_verified", s.txgen.verified);
    r.num("txgen_verified_bytes", s.txgen.verified_bytes);
    r.num("txgen_mismatches", s.txgen.mismatches);
    r.num("txgen_errors", s.txgen.errors);
    r.num("txgen_flushed", s.txgen.flushed);
    out->push_back(std::move(r));
  }
}

}  // namespace

bool make_report(Daemon& d, const std::string& what, const std::vector<std::string>& args,
                 Report* out, std::string* err) {
  return make_report(d, d.snapshots(), what, args, out, err);
}

bool make_report(Daemon& d, const std::vector<EndpointSnapshot>& snaps, const std::string& what,
                 const std::vector<std::string>& args, Report* out, std::string* err) {
  out->clear();
  int only = -1;
  if (what == "endpoints") {
    if (!args.empty() && !args[0].empty()) {
      *err = "endpoints takes no endpoint: expected [,<first>]";
      return false;
    }
    endpoints_report(d, snaps, out);
  } else if (what == "ports") {
    if (!endpoint_arg(d, args, &only, err)) return false;
    ports_report(d, only, out);
  } else if (what == "planes") {
    if (!endpoint_arg(d, args, &only, err)) return false;
    planes_report(d, snaps, only, out);
  } else if (what == "qps") {
    return qps_report(d, snaps, args, out, err);
  } else if (what == "qp") {
    return qp_report(d, snaps, args, out, err);
  } else if (what == "evs") {
    return evs_report(d, snaps, args, out, err);
  } else if (what == "drops") {
    if (!endpoint_arg(d, args, &only, err)) return false;
    drops_report(d, snaps, only, out);
  } else if (what == "stats") {
    if (!endpoint_arg(d, args, &only, err)) return false;
    stats_report(d, snaps, only, out);
  } else if (what == "links") {
    // An endpoint's: the link it is on, if any.
    if (!endpoint_arg(d, args, &only, err)) return false;
    const int link = only >= 0 ? d.config().link_of(static_cast<uint32_t>(only)) : -1;
    for (auto& l : d.links())
      if (only < 0 || static_cast<int>(l->index()) == link) link_rows(*l, out);
  } else {
    *err = "no report '" + what + "'";
    return false;
  }
  return true;
}

bool change_link(Daemon& d, const std::vector<std::string>& args, Report* out, std::string* err) {
  return request_link_change(d.links(), args, out, err);
}

}  // namespace softmrc::softmrcd
