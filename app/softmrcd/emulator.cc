// The fabric emulator's data path (see emulator.h).
#include "softmrcd/emulator.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "wire/headers.h"
#include "wire/icrc.h"
#include "wire/packet.h"
#include "wire/usid.h"

namespace softmrc::softmrcd {

namespace {

// What a switch reads from a frame's first segment. Fields it cannot read
// stay 0: such a frame is forwarded as untrimmable data on EV 0.
struct FrameInfo {
  uint32_t header_bytes = 0;  // through the MRC type header; 0: not an MRC frame
  uint32_t ev = 0;            // the UDP source port
  uint32_t ipv6_dst = 0;      // offset of an IPv6 destination address; 0: none
  uint32_t srh = 0;           // offset of a one-segment SRH; 0: none
  uint8_t dscp = 0;
  uint8_t ecn = 0;
  bool data = false;
};

FrameInfo peek(const uint8_t* p, uint32_t len) {
  using namespace wire;
  FrameInfo f;
  if (len < sizeof(EthHdr)) return f;
  uint16_t type = load<EthHdr>(p).ether_type.get();
  uint32_t off = sizeof(EthHdr);
  if (type == kEtherTypeVlan) {
    if (len < off + sizeof(VlanTag)) return f;
    type = load<VlanTag>(p + off).ether_type.get();
    off += sizeof(VlanTag);
  }
  uint8_t proto = 0;
  if (type == kEtherTypeIpv4) {
    if (len < off + sizeof(Ipv4Hdr)) return f;
    const auto ip = load<Ipv4Hdr>(p + off);
    const uint32_t ihl_bytes = (ip.version_ihl & 0xfu) * 4;
    if (ihl_bytes < sizeof(Ipv4Hdr)) return f;
    f.dscp = static_cast<uint8_t>(ip.tos >> 2);
    f.ecn = ip.tos & 3;
    proto = ip.protocol;
    off += ihl_bytes;
  } else if (type == kEtherTypeIpv6) {
    if (len < off + sizeof(Ipv6Hdr)) return f;
    const auto ip = load<Ipv6Hdr>(p + off);
    f.ipv6_dst = off + offsetof(Ipv6Hdr, dst);
    const auto tclass = static_cast<uint8_t>(ip.version_tc_flow.get() >> 20);
    f.dscp = static_cast<uint8_t>(tclass >> 2);
    f.ecn = tclass & 3;
    proto = ip.next_header;
    off += sizeof(Ipv6Hdr);
    if (proto == kIpProtoRouting) {  // an SRv6 SRH: 8 bytes plus 8 per hdr_ext_len
      if (len < off + 8) return f;
      // The segment a switch may take as the address: as parse() reads it.
      if (len >= off + sizeof(SrhOneSegment) && is_one_segment_srh(p + off)) f.srh = off;
      proto = p[off];
      off += 8 + 8u * p[off + 1];
    }
  } else {
    return f;
  }
  if (proto != kIpProtoUdp || len < off + sizeof(UdpHdr) + sizeof(Bth)) return f;
  const auto udp = load<UdpHdr>(p + off);
  f.ev = udp.src_port.get();
  const uint8_t op = p[off + sizeof(UdpHdr)];
  if (udp.dst_port.get() != kRoceUdpPort || !is_known_opcode(op)) return f;
  f.data = is_data(Opcode(op));
  f.header_bytes = off + sizeof(UdpHdr) + static_cast<uint32_t>(transport_header_len(Opcode(op)));
  return f;
}

constexpr wire::DscpConfig kDscp{};  // the code points softmrcd's framer uses

uint32_t round_up_pow2(uint32_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

const char* hop_drop_name(HopDrop d) {
  switch (d) {
    case HopDrop::kDelayLineFull:
      return "delay_line_full";
    case HopDrop::kRxRingFull:
      return "rx_ring_full";
    case HopDrop::kUntrimmable:
      return "untrimmable";
    case HopDrop::kAtShutdown:
      return "at_shutdown";
    case HopDrop::kCount:
      break;
  }
  return "?";
}

void EmulatedHop::Fifo::init(uint32_t capacity) {
  slots_.assign(round_up_pow2(capacity), Held{});
  mask_ = static_cast<uint32_t>(slots_.size()) - 1;
  head_ = tail_ = 0;
}

const char* EmulatedHop::init(const HopConfig& cfg) {
  clear();
  if (const char* why = link_.init(cfg.link)) return why;
  if (cfg.delay_line_packets == 0) return "delay_line_packets: 0";
  cfg_ = cfg;
  link_.set_loss_rate(cfg.loss);
  link_.set_corruption(cfg.corrupt, cfg.corrupt_icrc);
  rng_.reseed(cfg.seed);
  // Each class may hold the whole budget.
  data_.init(cfg.delay_line_packets);
  priority_.init(cfg.delay_line_packets);
  counters_ = HopCounters{};
  rate_factor_ = 1;
  scratch_.resize(wire::kMaxHeaderLen + wire::kMaxPayload + wire::kIcrcLen);
  return nullptr;
}

void EmulatedHop::free_held() {
  for (Fifo* f : {&data_, &priority_}) {
    while (!f->empty()) {
      rte_pktmbuf_free(f->front().m);
      f->pop();
    }
  }
}

void EmulatedHop::clear() {
  counters_.hop_drops[size_t(HopDrop::kAtShutdown)] += held();
  free_held();
}

void EmulatedHop::admit(rte_mbuf* const* pkts, uint16_t n, uint64_t now_ns) {
  for (uint16_t i = 0; i < n; ++i) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
    admit_one(pkts[i], now_ns);
  }
}

void EmulatedHop::admit_one(rte_mbuf* m, uint64_t now_ns) {
  // Checked first, so the model does not count a packet that never left.
  if (held() >= cfg_.delay_line_packets) {
    ++counters_.hop_drops[size_t(HopDrop::kDelayLineFull)];
    rte_pktmbuf_free(m);
    return;
  }
  const FrameInfo f = peek(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
  // An SRv6 plane routes on the destination's active uSID, the path.
  uint8_t* usids =
      cfg_.srv6 && f.ipv6_dst != 0 ? rte_pktmbuf_mtod_offset(m, uint8_t*, f.ipv6_dst) : nullptr;
  fabric::PacketMeta pm;
  pm.bytes = m->pkt_len;
  pm.header_bytes = f.header_bytes;
  pm.ev = usids != nullptr ? wire::usid_at(usids, 0) : f.ev;
  pm.control = f.dscp == kDscp.control || f.dscp == kDscp.trimmed;
  pm.trimmable = f.data && f.dscp == kDscp.trimmable;
  pm.ecn_capable = f.ecn != wire::kEcnNotEct;
  // A frame the queue will trim is cut first, so that one lib/wire cannot
  // cut is never counted as trimmed, nor takes the priority class's time.
  if (pm.trimmable && link_.would_trim(pm, now_ns) && !trim(m)) {
    ++counters_.hop_drops[size_t(HopDrop::kUntrimmable)];
    rte_pktmbuf_free(m);
    return;
  }
  const fabric::Verdict v = link_.enqueue(pm, now_ns, rng_);
  if (!v.delivered()) {  // counted by the model
    rte_pktmbuf_free(m);
    return;
  }
  // The IP header is in the first segment: the framer builds it there.
  if (pm.ce) wire::mark_ce({rte_pktmbuf_mtod(m, uint8_t*), m->data_len});
  // The plane's switches consume the path's uSIDs, one each, down to the
  // destination's own (going on into the SRH's segment).
  if (usids != nullptr)
    wire::usid_deliver(usids, f.srh != 0 ? rte_pktmbuf_mtod_offset(m, uint8_t*, f.srh) : nullptr);
  const uint32_t payload = f.data && !pm.trimmed && m->pkt_len > f.header_bytes + wire::kIcrcLen
                               ? m->pkt_len - f.header_bytes - wire::kIcrcLen
                               : 0;
  // The model draws for any packet off the priority class; only data with
  // a payload has a byte to change. A chained frame's payload may be the
  // sender's registered memory, sent in place: the switch changes its own
  // copy, made in the first segment.
  if (pm.corrupted != fabric::Corruption::kNone && payload != 0) {
    if (rte_pktmbuf_linearize(m) == 0)
      corrupt(m, f.header_bytes, payload, pm.corrupted);
    else
      ++counters_.corrupt_skipped_chained;
  }
  (pm.control || pm.trimmed ? priority_ : data_).push(Held{m, v.at_ns, payload});
  counters_.max_held_packets = std::max<uint64_t>(counters_.max_held_packets, held());
}

// Cuts the payload as a trimming switch does (lib/wire rewrites the
// lengths and the DSCP). A chained frame (payload sent in place) is
// trimmed in a contiguous copy whose headers go back into the first
// segment, and the payload segments are let go.
bool EmulatedHop::trim(rte_mbuf* m) {
  if (m->nb_segs == 1) {
    const size_t len = wire::trim({rte_pktmbuf_mtod(m, uint8_t*), m->data_len}, kDscp);
    if (len == 0) return false;
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
    return true;
  }
  if (m->pkt_len > scratch_.size()) return false;
  const auto* frame =
      static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, m->pkt_len, scratch_.data()));
  if (frame != scratch_.data()) std::memcpy(scratch_.data(), frame, m->pkt_len);
  const size_t len = wire::trim({scratch_.data(), m->pkt_len}, kDscp);
  if (len == 0 || len > m->data_len) return false;
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), scratch_.data(), len);
  rte_pktmbuf_free(m->next);
  m->next = nullptr;
  m->nb_segs = 1;
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  return true;
}

// One payload byte changed to another value (as smrc-sim does), and with
// kRecomputedIcrc a fresh ICRC over the frame as it now is.
void EmulatedHop::corrupt(rte_mbuf* m, uint32_t header_bytes, uint32_t payload,
                          fabric::Corruption how) {
  uint8_t* frame = rte_pktmbuf_mtod(m, uint8_t*);
  frame[header_bytes + rng_.below(payload)] ^= static_cast<uint8_t>(1 + rng_.below(255));
  if (how == fabric::Corruption::kRecomputedIcrc)
    wire::store_icrc(wire::packet_icrc({frame, header_bytes}, {frame + header_bytes, payload},
                                       cfg_.srv6 ? wire::EvMode::kSrv6 : wire::EvMode::kUdp),
                     frame + header_bytes + payload);
  ++counters_.corrupted;
}

uint16_t EmulatedHop::take_due(uint64_t now_ns, rte_mbuf** out, uint32_t* payload) {
  uint16_t n = 0;
  while (n < kBurst) {
    const bool data_due = !data_.empty() && data_.front().at_ns <= now_ns;
    const bool prio_due = !priority_.empty() && priority_.front().at_ns <= now_ns;
    if (!data_due && !prio_due) break;
    Fifo& f = !data_due                                        ? priority_
              : !prio_due                                      ? data_
              : priority_.front().at_ns <= data_.front().at_ns ? priority_
                                                               : data_;
    out[n] = f.front().m;
    payload[n] = f.front().payload_bytes;
    ++n;
    f.pop();
  }
  return n;
}

void EmulatedHop::account_delivered(rte_mbuf** pkts, const uint32_t* payload, uint16_t sent,
                                    uint16_t n) {
  for (uint16_t i = 0; i < sent; ++i) {
    ++counters_.packets;
    counters_.bytes += pkts[i]->pkt_len;
    counters_.payload_bytes += payload[i];
  }
  if (sent < n) {
    counters_.hop_drops[size_t(HopDrop::kRxRingFull)] += n - sent;
    rte_pktmbuf_free_bulk(pkts + sent, n - sent);
  }
}

void EmulatedHop::set_up(bool up, uint64_t now_ns) {
  if (up == link_.up()) return;
  if (!up) {
    for (uint32_t i = held(); i > 0; --i) link_.count_drop(fabric::DropReason::kLinkDown);
    free_held();
  }
  link_.set_up(up, now_ns);
}

void EmulatedHop::set_rate_factor(double f, uint64_t now_ns) {
  link_.set_rate_factor(f, now_ns);
  rate_factor_ = f;
}

HopState EmulatedHop::state() const {
  HopState s;
  s.up = link_.up();
  s.blackhole = link_.blackhole();
  s.blackholed_evs = static_cast<uint32_t>(link_.blackholed_ev_count());
  s.loss = link_.loss_rate();
  s.rate_factor = rate_factor_;
  s.corrupt = link_.corrupt_rate();
  s.corrupt_icrc = link_.corruption();
  return s;
}

HopCounters EmulatedHop::counters() const {
  HopCounters c = counters_;
  const fabric::LinkCounters& lc = link_.counters();
  c.ce_marks = lc.ce_marks;
  c.trims = lc.trims;
  c.drops = lc.drops;
  c.max_backlog_bytes = lc.max_backlog_bytes;
  return c;
}

void DeliveryTrace::init(uint64_t bin_ns, uint32_t pre_bins, uint32_t post_bins,
                         uint32_t max_captures) {
  bin_ns_ = bin_ns;
  pre_bins_ = pre_bins;
  post_bins_ = post_bins;
  // Bins [fault - pre, fault + post) are all still here when the first
  // bin after them starts.
  ring_.assign(size_t{pre_bins} + post_bins + 1, 0);
  stall_ring_.assign(ring_.size(), 0);
  captures_.assign(max_captures, Capture{});
  for (Capture& c : captures_) c.bins.assign(size_t{pre_bins} + post_bins, 0);
  num_captures_ = 0;
  started_ = false;
}

void DeliveryTrace::add(uint64_t now_ns, uint64_t bytes) {
  const uint64_t bin = now_ns / bin_ns_;
  if (!started_) {
    started_ = true;
    first_ = cur_ = bin;
    last_add_ns_ = now_ns;
  }
  if (bin > cur_) advance(bin);
  ring_[cur_ % ring_.size()] += bytes;
  const uint64_t gap = now_ns - std::min(now_ns, last_add_ns_);
  stall_ring_[cur_ % ring_.size()] = std::max(stall_ring_[cur_ % ring_.size()], gap);
  for (uint32_t i = 0; i < num_captures_; ++i)
    if (!captures_[i].done) captures_[i].max_stall_ns = std::max(captures_[i].max_stall_ns, gap);
  last_add_ns_ = now_ns;
}

// Moves on to `bin`: captures whose window ended are copied out first, then
// the bins skipped over start empty.
void DeliveryTrace::advance(uint64_t bin) {
  for (uint32_t i = 0; i < num_captures_; ++i) {
    Capture& c = captures_[i];
    if (!c.done && bin >= c.fault_bin + post_bins_) {
      fill(c, c.fault_bin + post_bins_);
      c.done = true;
    }
  }
  const uint64_t size = ring_.size();
  for (uint64_t b = std::max(cur_ + 1, bin >= size ? bin - size + 1 : 0); b <= bin; ++b)
    ring_[b % size] = stall_ring_[b % size] = 0;
  cur_ = bin;
}

// Copies bins [fault - pre, upto) of the ring, those before the trace
// began and after cur_ as empty.
void DeliveryTrace::fill(Capture& c, uint64_t upto_bin) {
  const uint64_t start = c.fault_bin >= pre_bins_ ? c.fault_bin - pre_bins_ : 0;
  const uint64_t size = ring_.size();
  c.at_bin = static_cast<uint32_t>(c.fault_bin - start);
  c.first_bin = static_cast<uint32_t>(first_ > start ? first_ - start : 0);
  c.num_bins = static_cast<uint32_t>(std::min<uint64_t>(upto_bin - start, c.bins.size()));
  for (uint32_t i = 0; i < c.num_bins; ++i) {
    const uint64_t b = start + i;
    c.bins[i] = b >= first_ && b <= cur_ && b + size > cur_ ? ring_[b % size] : 0;
  }
}

bool DeliveryTrace::mark(uint64_t now_ns, uint32_t tag) {
  add(now_ns, 0);
  if (num_captures_ == captures_.size()) return false;
  Capture& c = captures_[num_captures_++];
  c.at_ns = now_ns;
  c.tag = tag;
  c.fault_bin = now_ns / bin_ns_;
  c.done = false;
  c.num_bins = 0;
  // Stalls in the bins still held from kStallLookbackNs before on.
  const uint64_t size = ring_.size();
  const uint64_t lookback = std::min<uint64_t>(kStallLookbackNs / bin_ns_, size - 1);
  c.max_stall_ns = 0;
  const uint64_t oldest_held = cur_ + 1 >= size ? cur_ + 1 - size : 0;
  for (uint64_t b = std::max({first_, oldest_held, c.fault_bin - std::min(c.fault_bin, lookback)});
       b <= cur_; ++b)
    c.max_stall_ns = std::max(c.max_stall_ns, stall_ring_[b % size]);
  return true;
}

void DeliveryTrace::finish(uint64_t now_ns) {
  if (!started_) return;
  add(now_ns, 0);
  for (uint32_t i = 0; i < num_captures_; ++i) {
    Capture& c = captures_[i];
    if (!c.done) fill(c, std::min(cur_, c.fault_bin + post_bins_));  // cur_ is partial
  }
}

Recovery measure_recovery(const DeliveryTrace::Capture& c, uint64_t bin_ns, double keep_share,
                          uint32_t smooth_bins, uint32_t hold_bins) {
  Recovery r;
  const auto gbps = [&](double bytes_per_bin) { return bytes_per_bin * 8 / double(bin_ns); };
  const auto mean = [&](uint32_t from, uint32_t to) {
    double sum = 0;
    for (uint32_t i = from; i < to; ++i) sum += double(c.bins[i]);
    return to > from ? sum / (to - from) : 0.0;
  };
  const uint32_t f = c.at_bin;
  if (f < c.first_bin + 4 * smooth_bins || c.num_bins < f + smooth_bins + hold_bins) return r;
  const double before = mean(c.first_bin, f);
  if (before == 0) return r;
  r.measured = true;
  r.before_gbps = gbps(before);
  // The first window from which `hold_bins` windows in a row keep the
  // level; the fault's own bin, part before and part after it, counts.
  const uint32_t last = c.num_bins - smooth_bins;  // the last window's start
  double lowest = HUGE_VAL;
  uint32_t held = 0;
  for (uint32_t i = f; i <= last; ++i) {
    const double m = mean(i, i + smooth_bins);
    held = m >= keep_share * before ? held + 1 : 0;
    if (held == hold_bins) {
      r.recovered = true;
      r.recovery_ns = uint64_t{i + 1 - hold_bins - f} * bin_ns;
      break;
    }
    if (held == 0) lowest = std::min(lowest, m);
  }
  // Never below the level: the lowest is the first window's.
  r.lowest_gbps = gbps(lowest == HUGE_VAL ? mean(f, f + smooth_bins) : lowest);
  const uint32_t settled = f + static_cast<uint32_t>(10'000'000 / bin_ns);
  if (settled < c.num_bins) r.after_gbps = gbps(mean(settled, c.num_bins));
  uint64_t run = 0, longest = 0;
  for (uint32_t i = f; i < c.num_bins; ++i) {
    run = c.bins[i] == 0 ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  r.longest_gap_ns = longest * bin_ns;
  return r;
}

}  // namespace softmrc::softmrcd
