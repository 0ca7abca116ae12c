// The framer (see framer.h).
#include "softmrcd/framer.h"

#include <rte_malloc.h>

#include <algorithm>
#include <cstring>

#include "wire/usid.h"

namespace softmrc::softmrcd {

namespace {

// Eight bytes at a time: a byte loop is a cost every connectionless reply
// (a probe answered on the default path) pays in full.
bool names_path(const wire::WireEv& ev) {
  uint64_t any = 0;
  for (size_t i = 0; i < sizeof(ev.bytes); i += 8) {
    uint64_t w;
    std::memcpy(&w, ev.bytes + i, 8);
    any |= w;
  }
  return any != 0;
}

// The daemon holds one reference per region (dropped by no one: a retired
// region is forgotten once the count is back to it), so this is never
// called; memory is unmapped only after release_retired().
void keep_region(void*, void*) {}

}  // namespace

bool Framer::init(const Config& cfg, uint32_t self, const std::vector<wire::MacAddr>& macs,
                  rte_mempool* pool, rte_mempool* attach_pool, std::string* err) {
  const EndpointSpec& me = cfg.endpoints[self];
  self_ = self;
  num_planes_ = cfg.num_planes();
  num_peers_ = static_cast<uint32_t>(cfg.endpoints.size());
  pool_ = pool;
  attach_pool_ = attach_pool;
  extbuf_ = cfg.tx_payload == TxPayload::kExtbuf;
  ev_mode_ = me.ev_mode;
  parse_cfg_.ev_mode = me.ev_mode;
  parse_cfg_.verify_icrc = cfg.rx_verify_icrc;
  const size_t ip_len = me.planes[0].ip_version == wire::IpVersion::kV4 ? 4 : 16;

  std::vector<wire::FrameSpec> specs(size_t{num_peers_} * num_planes_);
  has_frame_.assign(specs.size(), 0);
  peer_ip_.assign(specs.size(), {});
  own_ip_.assign(num_planes_, {});
  own_vlan_.assign(num_planes_, 0);
  for (uint32_t plane = 0; plane < num_planes_; ++plane) {
    std::memcpy(own_ip_[plane].data(), me.planes[plane].ip, ip_len);
    own_vlan_[plane] = me.planes[plane].vlan;
  }
  for (uint32_t peer = 0; peer < num_peers_; ++peer) {
    const EndpointSpec& other = cfg.endpoints[peer];
    for (uint32_t plane = 0; plane < num_planes_; ++plane) {
      const size_t i = size_t{peer} * num_planes_ + plane;
      std::memcpy(peer_ip_[i].data(), other.planes[plane].ip, ip_len);
      if (peer == self || !other.planes[plane].has_mac) continue;
      wire::FrameSpec& f = specs[i];
      f.src_mac = macs[plane];
      f.dst_mac = other.planes[plane].mac;
      f.ip_version = me.planes[plane].ip_version;
      std::memcpy(f.src_ip, me.planes[plane].ip, 16);
      std::memcpy(f.dst_ip, other.planes[plane].ip, 16);
      f.ev_mode = me.ev_mode;
      f.has_vlan = me.planes[plane].vlan != 0;
      f.vlan_tci = static_cast<uint16_t>(me.planes[plane].vlan_pcp << 13 | me.planes[plane].vlan);
      has_frame_[i] = 1;
    }
  }
  frames_.clear();
  for (const wire::FrameSpec& f : specs) frames_.push_back(wire::header_template(f));
  // The same frames with an SRH, for SRv6 paths longer than the address.
  srh_frames_.clear();
  if (ev_mode_ == wire::EvMode::kSrv6) {
    for (wire::FrameSpec f : specs) {
      f.srv6_srh = true;
      srh_frames_.push_back(wire::header_template(f));
    }
  }
  const std::vector<engine::EvEntry> evs = ev_entries(cfg.ev_profiles[cfg.qp.ev_profile], me);
  default_ev_.assign(num_planes_, wire::WireEv{});
  for (auto it = evs.rbegin(); it != evs.rend(); ++it) default_ev_[it->plane] = it->value;
  if (extbuf_ && attach_pool_ == nullptr) {
    *err = "tx_payload extbuf needs a pool for external-buffer mbufs";
    return false;
  }
  return true;
}

bool Framer::add_extbuf_region(const uint8_t* base, size_t len, rte_iova_t iova, std::string* err) {
  // A device reads physical addresses in IOVA-PA mode: a region that is
  // not contiguous in them is copied from instead.
  if (!extbuf_ || (iova == RTE_BAD_IOVA && rte_eal_iova_mode() != RTE_IOVA_VA)) return true;
  ExtRegion r{base, base + len, iova, std::make_unique<rte_mbuf_ext_shared_info>()};
  r.shinfo->free_cb = keep_region;
  r.shinfo->fcb_opaque = nullptr;
  rte_mbuf_ext_refcnt_set(r.shinfo.get(), 1);  // the daemon's own reference
  auto at = std::upper_bound(regions_.begin(), regions_.end(), base,
                             [](const uint8_t* q, const ExtRegion& o) { return q < o.base; });
  if ((at != regions_.end() && at->base < r.end) || (at != regions_.begin() && base < at[-1].end)) {
    *err = "extbuf regions overlap";
    return false;
  }
  regions_.insert(at, std::move(r));
  return true;
}

void Framer::retire_extbuf_region(const uint8_t* base) {
  auto it = std::find_if(regions_.begin(), regions_.end(),
                         [&](const ExtRegion& r) { return r.base == base; });
  if (it == regions_.end()) return;
  retired_.push_back(std::move(*it));
  regions_.erase(it);
}

bool Framer::release_retired(const uint8_t* base) {
  auto it = std::find_if(retired_.begin(), retired_.end(),
                         [&](const ExtRegion& r) { return r.base == base; });
  if (it == retired_.end()) return true;
  if (rte_mbuf_ext_refcnt_read(it->shinfo.get()) > 1) return false;
  retired_.erase(it);
  return true;
}

void Framer::close() {
  rte_pktmbuf_free_bulk(stash_, stashed_);
  stashed_ = 0;
}

rte_mbuf* Framer::alloc() {
  if (stashed_ == 0) {
    if (rte_pktmbuf_alloc_bulk(pool_, stash_, kBurst) != 0) return rte_pktmbuf_alloc(pool_);
    stashed_ = kBurst;
  }
  return stash_[--stashed_];
}

const Framer::ExtRegion* Framer::find_region(const uint8_t* p, uint32_t len) const {
  auto it = std::upper_bound(regions_.begin(), regions_.end(), p,
                             [](const uint8_t* q, const ExtRegion& r) { return q < r.base; });
  if (it == regions_.begin()) return nullptr;
  --it;
  return p + len <= it->end ? &*it : nullptr;
}

const wire::HeaderTemplate* Framer::frame_of(const engine::TxPacket& p) const {
  const size_t i = size_t{p.peer} * num_planes_ + p.plane;
  if (p.peer >= num_peers_ || p.plane >= num_planes_ || !has_frame_[i]) return nullptr;
  return &frames_[i];
}

void Framer::frame(const engine::TxPacket* tx, size_t n, rte_mbuf** out, bool* extbuf,
                   DropCounters* drops) {
  const wire::DscpConfig& dscp = parse_cfg_.dscp;
  for (size_t done = 0; done < n;) {
    const size_t burst = std::min<size_t>(n - done, kBurst);
    const wire::HeaderTemplate* headers[kBurst];
    size_t hlen[kBurst];
    for (size_t i = done; i < done + burst; ++i) {
      const engine::TxPacket& p = tx[i];
      out[i] = nullptr;
      extbuf[i] = false;
      const wire::HeaderTemplate* f = headers[i - done] = frame_of(p);
      if (f == nullptr) {
        ++drops->other[size_t(Drop::kTxNoPeer)];
        continue;
      }
      // A QP's packet names its EV; a connectionless one may (a controller's
      // EV probe) or not (all zero: the plane's default path).
      const wire::WireEv* ev =
          p.ev != engine::kNoEv || names_path(*p.wire_ev) ? p.wire_ev : &default_ev_[p.plane];
      // An SRv6 EV is a path: the destination's own uSID (its address is a
      // uSID locator, the config checked) ends it, in the SRH's segment if
      // the path goes on there.
      wire::WireEv routed;
      if (ev_mode_ == wire::EvMode::kSrv6) {
        routed = *ev;
        const size_t at = size_t{p.peer} * num_planes_ + p.plane;
        const wire::Srv6Route route = wire::usid_route(routed.bytes, peer_ip_[at].data());
        if (route == wire::Srv6Route::kTooLong) {
          ++drops->other[size_t(Drop::kTxBuild)];
          continue;
        }
        if (route == wire::Srv6Route::kWithSrh) f = headers[i - done] = &srh_frames_[at];
        ev = &routed;
      }
      const wire::TxMarking mark = p.is_data ? wire::TxMarking{dscp.trimmable, wire::kEcnEct0}
                                             : wire::TxMarking{dscp.control, wire::kEcnNotEct};
      if (extbuf_ && p.payload_len > 0) {
        if (const ExtRegion* r = find_region(p.payload, p.payload_len)) {
          extbuf[i] = true;
          out[i] = frame_extbuf(*f, *ev, mark, p, *r, drops);
          continue;
        }
      }
      out[i] = frame_headers(*f, *ev, mark, p, &hlen[i - done], drops);
    }
    // The payloads and ICRCs, now that the headers have reached the cache.
    for (size_t i = done; i < done + burst; ++i) {
      rte_mbuf* m = out[i];
      if (m == nullptr) continue;
      if (extbuf[i]) {
        const uint32_t icrc = wire::packet_icrc({rte_pktmbuf_mtod(m, const uint8_t*), m->data_len},
                                                {tx[i].payload, tx[i].payload_len}, ev_mode_);
        wire::store_icrc(icrc, rte_pktmbuf_mtod(m->next->next, uint8_t*));
        continue;
      }
      const std::span<uint8_t> room(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
      const size_t len = wire::finish_packet(*headers[i - done], hlen[i - done],
                                             {tx[i].payload, tx[i].payload_len}, room);
      if (len == 0) {
        rte_pktmbuf_free(m);
        out[i] = nullptr;
        ++drops->other[size_t(Drop::kTxBuild)];
        continue;
      }
      m->data_len = static_cast<uint16_t>(len);
      m->pkt_len = static_cast<uint32_t>(len);
    }
    done += burst;
  }
}

// The headers only, `hlen` bytes: frame() finishes the packet.
rte_mbuf* Framer::frame_headers(const wire::HeaderTemplate& f, const wire::WireEv& ev,
                                wire::TxMarking mark, const engine::TxPacket& p, size_t* hlen,
                                DropCounters* drops) {
  rte_mbuf* m = alloc();
  if (m == nullptr) {
    ++drops->other[size_t(Drop::kTxNoMbuf)];
    return nullptr;
  }
  const std::span<uint8_t> room(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
  *hlen = wire::build_headers(f, ev, mark, p.t, p.payload_len, room);
  if (*hlen == 0) {
    rte_pktmbuf_free(m);
    ++drops->other[size_t(Drop::kTxBuild)];
    return nullptr;
  }
  return m;
}

// Headers | payload in place | ICRC: three segments, so that nothing is
// written into registered memory. frame() fills in the ICRC.
rte_mbuf* Framer::frame_extbuf(const wire::HeaderTemplate& f, const wire::WireEv& ev,
                               wire::TxMarking mark, const engine::TxPacket& p, const ExtRegion& r,
                               DropCounters* drops) {
  // Headers and ICRC from the TX pool, the payload's mbuf from the
  // attach pool; all or none.
  rte_mbuf* seg[3];
  if (rte_pktmbuf_alloc_bulk(pool_, seg, 2) != 0) {
    ++drops->other[size_t(Drop::kTxNoMbuf)];
    return nullptr;
  }
  seg[2] = seg[1];
  seg[1] = rte_pktmbuf_alloc(attach_pool_);
  if (seg[1] == nullptr) {
    rte_pktmbuf_free(seg[0]);
    rte_pktmbuf_free(seg[2]);
    ++drops->other[size_t(Drop::kTxNoMbuf)];
    return nullptr;
  }
  rte_mbuf* hdr = seg[0];
  const std::span<uint8_t> room(rte_pktmbuf_mtod(hdr, uint8_t*), rte_pktmbuf_tailroom(hdr));
  const size_t hlen = wire::build_headers(f, ev, mark, p.t, p.payload_len, room);
  if (hlen == 0) {
    for (rte_mbuf* s : seg) rte_pktmbuf_free(s);
    ++drops->other[size_t(Drop::kTxBuild)];
    return nullptr;
  }
  hdr->data_len = static_cast<uint16_t>(hlen);

  rte_mbuf* body = seg[1];
  uint8_t* payload = const_cast<uint8_t*>(p.payload);  // DPDK's type; nothing writes through it
  const rte_iova_t iova = rte_eal_iova_mode() == RTE_IOVA_VA ? reinterpret_cast<rte_iova_t>(payload)
                                                             : r.iova + (p.payload - r.base);
  rte_mbuf_ext_refcnt_update(r.shinfo.get(), 1);
  rte_pktmbuf_attach_extbuf(body, payload, iova, static_cast<uint16_t>(p.payload_len),
                            r.shinfo.get());
  body->data_len = static_cast<uint16_t>(p.payload_len);

  rte_mbuf* tail = seg[2];  // frame() writes the ICRC
  tail->data_len = wire::kIcrcLen;

  hdr->next = body;
  body->next = tail;
  hdr->nb_segs = 3;
  hdr->pkt_len = static_cast<uint32_t>(hlen + p.payload_len + wire::kIcrcLen);
  return hdr;
}

Framer::Addressed Framer::for_us(const wire::PacketView& v, uint8_t plane) const {
  // A priority tag (VLAN 0) is an untagged frame with a PCP.
  const uint16_t vlan = v.has_vlan ? v.vlan_tci & 0xfff : 0;
  if (vlan != own_vlan_[plane]) return Addressed::kOtherVlan;
  return std::memcmp(v.dst_ip, own_ip_[plane].data(), 16) == 0 ? Addressed::kUs
                                                               : Addressed::kOtherIp;
}

uint32_t Framer::peer_of(const wire::PacketView& v, uint8_t plane) const {
  for (uint32_t peer = 0; peer < num_peers_; ++peer)
    if (peer != self_ &&
        std::memcmp(v.src_ip, peer_ip_[size_t{peer} * num_planes_ + plane].data(), 16) == 0)
      return peer;
  return engine::kUnknownPeer;
}

}  // namespace softmrc::softmrcd
