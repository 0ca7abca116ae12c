// Randomised two-endpoint scenarios: many messages from A to B over a
// scripted, faulty fabric. Every byte must arrive as sent, completions must
// come in order, and nothing may fail. Each scenario is drawn from a seed;
// a failure prints the seed, and the same seed replays it exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "harness.h"
#include "seeds.h"

namespace softmrc::engine::test {
namespace {

struct Message {
  uint32_t size;
  bool imm;
  uint64_t src_off;
  uint64_t dst_off;
  uint64_t hash;
};

// The lower half of each side's region is its send buffer, the upper half
// the target of the peer's messages.
uint64_t half(const Harness& h) {
  return const_cast<Harness&>(h).a().mem.size() / 2;
}
uint64_t region_va(int side) {
  return 0x10000000ull * (side + 1);
}

// Drives messages from side `from` to the other side and checks them as
// they complete.
class Transfer {
 public:
  Transfer(Harness& h, int from, std::vector<Message> msgs, uint32_t qp = 0)
      : h_(h), from_(from), msgs_(std::move(msgs)), qp_(qp) {}

  // Posts what fits; consumes new completions; true when all are done.
  bool pump() {
    Side& src = h_.side(from_);
    Side& dst = h_.side(1 - from_);
    const uint32_t src_qpn = src.qpns[qp_];
    const uint32_t dst_qpn = dst.qpns[qp_];
    for (auto& scq = h_.completions(from_); s_seen_ < scq.size(); ++s_seen_) {
      const Completion& c = scq[s_seen_];
      if (c.qpn != src_qpn || c.opcode == WcOpcode::kRecvWriteImm) continue;  // not ours
      EXPECT_EQ(c.status, WcStatus::kSuccess) << wc_status_name(c.status);
      EXPECT_EQ(c.wr_id, sends_done_) << "send completions out of post order";
      ++sends_done_;
    }
    for (auto& rcq = h_.completions(1 - from_); r_seen_ < rcq.size(); ++r_seen_) {
      const Completion& c = rcq[r_seen_];
      if (c.qpn != dst_qpn || c.opcode != WcOpcode::kRecvWriteImm) continue;
      EXPECT_EQ(c.status, WcStatus::kSuccess) << wc_status_name(c.status);
      // The WIMM and every Write posted before it must be in memory.
      EXPECT_LT(c.imm, msgs_.size());
      if (c.imm >= msgs_.size()) continue;
      EXPECT_EQ(c.byte_len, msgs_[c.imm].size);
      EXPECT_GE(c.imm, verified_) << "receive completions out of order";
      for (; verified_ <= c.imm; ++verified_) EXPECT_TRUE(placed(verified_)) << "msg " << verified_;
      ++recvs_done_;
      EXPECT_TRUE(dst.ep.post_recv(dst_qpn, RecvRequest{c.wr_id}).ok());
    }
    while (posted_ < msgs_.size()) {
      const Message& m = msgs_[posted_];
      WriteRequest wr;
      wr.wr_id = posted_;
      wr.local_addr = region_va(from_) + m.src_off;
      wr.length = m.size;
      wr.lkey = src.key;
      wr.remote_addr = region_va(1 - from_) + m.dst_off;
      wr.rkey = dst.key;
      wr.with_imm = m.imm;
      wr.imm = static_cast<uint32_t>(posted_);
      if (!src.ep.post_write(src_qpn, wr).ok()) break;  // send queue full: later
      ++posted_;
    }
    return sends_done_ == msgs_.size() && recvs_done_ == wimms();
  }

  bool placed(size_t i) const {
    const Message& m = msgs_[i];
    return hash_bytes(h_.side(1 - from_).mem.data() + m.dst_off, m.size) == m.hash;
  }
  bool all_placed() const {
    for (size_t i = 0; i < msgs_.size(); ++i)
      if (!placed(i)) return false;
    return true;
  }
  size_t wimms() const {
    return static_cast<size_t>(
        std::count_if(msgs_.begin(), msgs_.end(), [](const Message& m) { return m.imm; }));
  }
  uint64_t packets(uint32_t mtu) const {
    uint64_t n = 0;
    for (const Message& m : msgs_) n += m.size == 0 ? 1 : (m.size + mtu - 1) / mtu;
    return n;
  }

 private:
  Harness& h_;
  int from_;
  std::vector<Message> msgs_;
  uint32_t qp_;
  size_t posted_ = 0;
  size_t s_seen_ = 0;
  size_t r_seen_ = 0;
  size_t sends_done_ = 0;
  size_t recvs_done_ = 0;
  size_t verified_ = 0;
};

// Random messages from random bytes in the sender's lower half into
// distinct places in slice `slice` of `slices` of the receiver's upper half.
std::vector<Message> make_messages(Harness& h, int from, std::mt19937_64& rng, size_t count,
                                   uint32_t max_size, uint32_t slice = 0, uint32_t slices = 1) {
  Side& src = h.side(from);
  const uint64_t hb = half(h);
  if (slice == 0)
    for (uint64_t i = 0; i < hb; ++i) src.mem[i] = static_cast<uint8_t>(rng());
  std::vector<Message> msgs;
  uint64_t dst = hb + hb / slices * slice;
  const uint64_t end = dst + hb / slices;
  for (size_t i = 0; i < count; ++i) {
    Message m{};
    const uint32_t kind = rng() % 8;
    m.size = kind == 0  ? 0
             : kind < 3 ? static_cast<uint32_t>(rng() % 64 + 1)
                        : static_cast<uint32_t>(rng() % max_size + 1);
    if (dst + m.size > end) break;
    m.imm = rng() % 3 == 0;
    m.src_off = rng() % (hb - m.size + 1);
    m.dst_off = dst;
    dst += m.size;
    m.hash = hash_bytes(src.mem.data() + m.src_off, m.size);
    msgs.push_back(m);
  }
  if (!msgs.empty()) msgs.back().imm = true;  // the last WIMM proves everything is in place
  return msgs;
}

void post_receives(Harness& h, int side, uint16_t n, uint32_t qp = 0) {
  for (uint16_t i = 0; i < n; ++i)
    ASSERT_TRUE(h.side(side).ep.post_recv(h.side(side).qpns[qp], RecvRequest{1000u + i}).ok());
}

bool no_errors(Harness& h) {
  for (int s = 0; s < 2; ++s)
    for (const Event& e : h.events(s))
      if (e.type == EventType::kQpError) return false;
  return true;
}

HarnessConfig random_config(std::mt19937_64& rng) {
  HarnessConfig cfg;
  static constexpr uint32_t kMtus[] = {256, 512, 1024, 2048, 4096, 9000};
  cfg.qps = static_cast<uint32_t>(rng() % 3 + 1);
  cfg.num_planes = static_cast<uint8_t>(rng() % 4 + 1);
  cfg.evs_per_plane = static_cast<uint32_t>(rng() % 6 + 1);
  cfg.mtu = kMtus[rng() % 6];
  cfg.mpr = static_cast<uint8_t>(rng() % 8 + 1);
  cfg.max_wimm = static_cast<uint16_t>(rng() % 16 + 1);
  cfg.start_psn_a = static_cast<uint32_t>(rng() % 2 ? rng() & 0xffffff : 0xffffff - rng() % 300);
  cfg.start_psn_b = static_cast<uint32_t>(rng() & 0xffffff);
  cfg.min_active =
      std::min<uint32_t>(static_cast<uint32_t>(rng() % 2 + 1), cfg.num_planes * cfg.evs_per_plane);
  cfg.tuning.ack_every_packets = static_cast<uint32_t>(rng() % 16 + 1);
  cfg.tuning.reorder_threshold = static_cast<uint32_t>(rng() % 8 + 3);
  cfg.retry_exp = kRetryExpUnlimited;
  if (rng() % 2) {
    cfg.cc.algorithm = CcAlgorithm::kNscc;
    cfg.cc.nscc = default_nscc_params(100'000'000'000ull, 8'000, cfg.mtu);
  }
  if (rng() % 3 == 0) {  // B advertises its window, which may be smaller than A's
    cfg.caps = kCapDynamicMpr;
    cfg.mpr_dest_b = static_cast<uint8_t>(rng() % cfg.mpr + 1);
  }
  return cfg;
}

PipeFaults random_faults(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  PipeFaults f;
  f.drop_rate = u(rng) < 0.5 ? u(rng) * 0.03 : 0;
  f.trim_rate = u(rng) < 0.5 ? u(rng) * 0.05 : 0;
  f.dup_rate = u(rng) < 0.3 ? u(rng) * 0.02 : 0;
  f.ce_rate = u(rng) < 0.3 ? u(rng) * 0.05 : 0;
  f.delay_ns = 1'000 + rng() % 4'000;
  f.jitter_ns = u(rng) < 0.5 ? rng() % 3'000 : 0;
  return f;
}

constexpr TimeNs kLimitNs = 2'000'000'000;  // 2 s of virtual time

// Every data packet A sent was placed, discarded as a duplicate, trimmed,
// refused as out of window, or dropped by the fabric; and every resend is
// counted under exactly one cause, on the QP and on its EV.
void expect_counters_add_up(Harness& h, const Transfer& t, uint32_t mtu) {
  const Qp& a = *h.a().ep.qp(h.a().qpn);
  const Qp& b = *h.b().ep.qp(h.b().qpn);
  const QpCounters& ac = a.counters();
  const QpCounters& bc = b.counters();
  EXPECT_EQ(ac.tx_data_packets + h.duplicated_data(0), bc.rx_data_packets + bc.rx_duplicates +
                                                           bc.rx_trimmed + bc.rx_out_of_window +
                                                           h.dropped_data(0));
  uint64_t resends = 0;
  for (uint64_t n : ac.retransmits) resends += n;
  EXPECT_EQ(ac.tx_data_packets, t.packets(mtu) + resends);
  uint64_t ev_tx = 0, ev_retx = 0;
  for (uint32_t e = 0; e < a.evs().size(); ++e) {
    ev_tx += a.evs().counters(e).tx_packets;
    ev_retx += a.evs().counters(e).retransmits;
  }
  EXPECT_EQ(ev_tx, ac.tx_data_packets);
  EXPECT_EQ(ev_retx, resends);
  EXPECT_EQ(bc.rx_trimmed, bc.nacks_tx[size_t(wire::NackCode::kTrimmed)]);
}

TEST(TwoEndpoints, RandomScenariosDeliverEveryByteInOrderWithoutErrors) {
  for (uint64_t seed : seeds(300)) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    HarnessConfig cfg = random_config(rng);
    cfg.mem_bytes = 1 << 20;
    Harness h(cfg, seed);
    const PipeFaults f = random_faults(rng);
    h.set_all_pipes(f);
    if (rng() % 4 == 0 && cfg.num_planes * cfg.evs_per_plane > 1) {  // a black-holed EV
      h.pipe(0, 0).dead_evs = 1;
      h.pipe(1, 0).dead_evs = 1;
    }
    // A -> B on every QP pair, and B -> A on the first one sometimes.
    const bool both_ways = rng() % 3 == 0;
    std::vector<Transfer> transfers;
    for (uint32_t k = 0; k < cfg.qps; ++k) {
      post_receives(h, 1, cfg.max_wimm, k);
      transfers.emplace_back(h, 0, make_messages(h, 0, rng, 10 + rng() % 30, 32 * 1024, k, cfg.qps),
                             k);
    }
    if (both_ways) {
      post_receives(h, 0, cfg.max_wimm);
      transfers.emplace_back(h, 1, make_messages(h, 1, rng, 10 + rng() % 20, 16 * 1024));
    }
    auto all_done = [&] {
      bool done = true;
      for (Transfer& t : transfers) done &= t.pump();  // pump every one, every time
      return done;
    };
    ASSERT_TRUE(h.run(all_done, kLimitNs)) << "stalled\n" << describe(h);
    for (const Transfer& t : transfers) EXPECT_TRUE(t.all_placed());
    EXPECT_TRUE(no_errors(h));
    h.run_for(10'000'000);  // let stray copies land
    if (!both_ways && cfg.qps == 1) expect_counters_add_up(h, transfers[0], cfg.mtu);
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(TwoEndpoints, PlaneFailureMidTransferCostsNoErrorAndNoTimeout) {
  for (uint64_t seed : seeds(100)) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed * 7919);
    HarnessConfig cfg = random_config(rng);
    cfg.num_planes = static_cast<uint8_t>(rng() % 3 + 2);
    cfg.mem_bytes = 512 * 1024;
    cfg.timeout = 8;  // 262 us, against an RTT under 20 us
    Harness h(cfg, seed);
    PipeFaults f;
    f.delay_ns = 2'000;
    f.jitter_ns = rng() % 2'000;
    h.set_all_pipes(f);
    const auto plane = static_cast<uint8_t>(rng() % cfg.num_planes);
    const TimeNs fail_at = 3'000 + rng() % 20'000;
    h.schedule_plane(plane, false, fail_at);
    post_receives(h, 1, cfg.max_wimm);
    Transfer t(h, 0, make_messages(h, 0, rng, 30, 16 * 1024));
    ASSERT_TRUE(h.run([&] { return t.pump(); }, kLimitNs)) << "stalled\n" << describe(h);
    EXPECT_TRUE(t.all_placed());
    EXPECT_TRUE(no_errors(h));
    // No stall: A's completions keep coming across the failure, never more
    // than a few round trips (here about 6 us each) apart.
    TimeNs last = 0, worst_gap = 0;
    for (TimeNs at : h.completion_times(0)) {
      if (at > fail_at) worst_gap = std::max(worst_gap, at - std::max(last, fail_at));
      last = at;
    }
    EXPECT_LT(worst_gap, 30'000u) << describe(h);
    h.run_for(100'000);  // let the port status land if the transfer beat it
    const Qp* qa = h.a().ep.qp(h.a().qpn);
    EXPECT_EQ(qa->counters().timeouts, 0u);
    EXPECT_FALSE(qa->evs().plane_up(plane));
    EXPECT_FALSE(h.b().ep.qp(h.b().qpn)->evs().plane_up(plane)) << "B learns from port status\n"
                                                                << describe(h);
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(TwoEndpoints, SameSeedReplaysExactly) {
  auto run_once = [](uint64_t seed) {
    std::mt19937_64 rng(seed);
    HarnessConfig cfg = random_config(rng);
    cfg.mem_bytes = 256 * 1024;
    Harness h(cfg, seed);
    h.set_all_pipes(random_faults(rng));
    post_receives(h, 1, cfg.max_wimm);
    Transfer t(h, 0, make_messages(h, 0, rng, 20, 16 * 1024));
    h.run([&] { return t.pump(); }, kLimitNs);
    return std::make_tuple(h.now(), h.delivered(), h.dropped(),
                           h.a().ep.qp(h.a().qpn)->counters().tx_data_packets);
  };
  for (uint64_t seed : {3u, 17u, 42u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    EXPECT_EQ(run_once(seed), run_once(seed));
  }
}

HarnessConfig quiet_config() {
  HarnessConfig cfg;
  cfg.num_planes = 2;
  cfg.evs_per_plane = 4;
  cfg.mem_bytes = 256 * 1024;
  return cfg;
}

// A Write of `length` bytes from the start of A's region to the start of
// B's (wr_id 1).
WriteRequest a_to_b(Harness& h, uint32_t length) {
  WriteRequest wr;
  wr.wr_id = 1;
  wr.local_addr = region_va(0);
  wr.length = length;
  wr.lkey = h.a().key;
  wr.remote_addr = region_va(1);
  wr.rkey = h.b().key;
  return wr;
}

bool has_error(Harness& h, int side, WcStatus status) {
  for (const Event& e : h.events(side))
    if (e.type == EventType::kQpError && e.status == status) return true;
  return false;
}

long qp_errors(Harness& h, int side) {
  return std::count_if(h.events(side).begin(), h.events(side).end(),
                       [](const Event& e) { return e.type == EventType::kQpError; });
}

TEST(TwoEndpoints, PacketsDroppedByBitmapAreResentOnOtherEvsAfterTheSackShowsTheHoles) {
  Harness h(quiet_config());
  h.pipe(0, 0).drop_data_bitmap = 0b100011;  // the 1st, 2nd and 6th data packets on plane 0
  std::mt19937_64 rng(21);
  post_receives(h, 1, 16);
  Transfer t(h, 0, make_messages(h, 0, rng, 20, 8 * 1024));
  ASSERT_TRUE(h.run([&] { return t.pump(); }, kLimitNs)) << describe(h);
  EXPECT_TRUE(t.all_placed());
  EXPECT_TRUE(no_errors(h));
  const QpCounters& c = h.a().ep.qp(h.a().qpn)->counters();
  EXPECT_EQ(h.dropped_data(0), 3u);
  EXPECT_EQ(c.retransmits[size_t(RetxCause::kSack)], 3u);
  EXPECT_EQ(c.timeouts, 0u);
}

TEST(TwoEndpoints, LostTailIsRecoveredByTheRetransmitTimer) {
  Harness h(quiet_config());
  // Drop the first copy of the very last packet: nothing later can overtake
  // it, so only the timer can find it.
  bool dropped = false;
  h.set_filter([&](int dir, const TxPacket& p) {
    if (dir != 0 || !p.is_data || dropped || p.t.opcode != wire::Opcode::kWriteOnlyImm)
      return Verdict::kPass;
    dropped = true;
    return Verdict::kDrop;
  });
  post_receives(h, 1, 4);
  WriteRequest wr = a_to_b(h, 100);
  wr.with_imm = true;
  ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, wr).ok());
  ASSERT_TRUE(h.run([&] { return h.completions(0).size() == 1; }, kLimitNs));
  EXPECT_TRUE(dropped);
  EXPECT_EQ(h.completions(0)[0].status, WcStatus::kSuccess);
  const QpCounters& c = h.a().ep.qp(h.a().qpn)->counters();
  EXPECT_EQ(c.timeouts, 1u);
  EXPECT_EQ(c.retransmits[size_t(RetxCause::kTimeout)], 1u);
  EXPECT_GE(h.now(), ack_timeout_ns(quiet_config().timeout));
}

TEST(TwoEndpoints, TrimmedPacketsAreResentWithoutBlamingAnyEv) {
  Harness h(quiet_config(), 8);
  PipeFaults f;
  f.trim_rate = 0.1;
  h.set_all_pipes(f);
  std::mt19937_64 rng(8);
  post_receives(h, 1, 16);
  Transfer t(h, 0, make_messages(h, 0, rng, 30, 24 * 1024));
  ASSERT_TRUE(h.run([&] { return t.pump(); }, kLimitNs)) << describe(h);
  EXPECT_TRUE(t.all_placed());
  const QpCounters& ac = h.a().ep.qp(h.a().qpn)->counters();
  const QpCounters& bc = h.b().ep.qp(h.b().qpn)->counters();
  EXPECT_GT(bc.rx_trimmed, 10u);
  EXPECT_EQ(ac.retransmits[size_t(RetxCause::kTrim)], bc.rx_trimmed);
  EXPECT_EQ(ac.nacks_rx[size_t(wire::NackCode::kTrimmed)], bc.rx_trimmed);
  EXPECT_EQ(ac.ev_state_changes, 0u) << "a trim is congestion, not a broken path";
  EXPECT_EQ(ac.timeouts, 0u);
}

// With dynamic MPR the requester starts at its own window (8 x 128 PSNs)
// until the responder's smaller one (1 x 128) reaches it, so most of its
// first flight comes back as out-of-window NACKs. The resends queue in the
// order the NACKs and losses are found, not in PSN order: one the window
// refuses must not hold up the one that lets snd_una move.
HarnessConfig window_mismatch_config() {
  HarnessConfig cfg = quiet_config();
  cfg.mem_bytes = 1 << 20;
  cfg.caps = kCapDynamicMpr;
  cfg.mpr_dest_b = 1;
  return cfg;
}

TEST(TwoEndpoints, AResendTheResponderWindowRefusesDoesNotHoldUpTheOnesBehindIt) {
  Harness h(window_mismatch_config());
  bool dropped = false;  // the first copy of PSN 50, inside B's window
  h.set_filter([&](int dir, const TxPacket& p) {
    if (dir != 0 || !p.is_data || dropped || p.t.psn != 50) return Verdict::kPass;
    dropped = true;
    return Verdict::kDrop;
  });
  ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, a_to_b(h, 300 * 1024)).ok());
  ASSERT_TRUE(h.run([&] { return !h.completions(0).empty(); }, kLimitNs)) << describe(h);
  EXPECT_TRUE(dropped);
  EXPECT_EQ(h.completions(0)[0].status, WcStatus::kSuccess) << describe(h);
  EXPECT_TRUE(no_errors(h));
  EXPECT_GT(h.b().ep.qp(h.b().qpn)->counters().rx_out_of_window, 0u);
  EXPECT_TRUE(std::equal(h.a().mem.begin(), h.a().mem.begin() + 300 * 1024, h.b().mem.begin()));
}

TEST(TwoEndpoints, OutOfWindowNacksArrivingOutOfOrderDoNotStallTheQp) {
  Harness h(window_mismatch_config());
  h.pipe(0, 1).delay_ns = 22'000;  // plane 1's NACKs come back behind plane 0's
  ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, a_to_b(h, 1000 * 1024)).ok());
  ASSERT_TRUE(h.run([&] { return !h.completions(0).empty(); }, kLimitNs)) << describe(h);
  EXPECT_EQ(h.completions(0)[0].status, WcStatus::kSuccess) << describe(h);
  EXPECT_TRUE(no_errors(h));
  EXPECT_GT(h.b().ep.qp(h.b().qpn)->counters().rx_out_of_window, 0u);
}

TEST(TwoEndpoints, WimmWithNoReceivePostedFailsBothSides) {
  Harness h(quiet_config());
  WriteRequest wr = a_to_b(h, 100);
  wr.with_imm = true;
  ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, wr).ok());
  ASSERT_TRUE(h.run([&] { return !h.completions(0).empty(); }, 10'000'000));
  EXPECT_EQ(h.completions(0)[0].status, WcStatus::kRemoteInvalidRequest);
  EXPECT_TRUE(has_error(h, 0, WcStatus::kRemoteInvalidRequest));
  EXPECT_TRUE(has_error(h, 1, WcStatus::kRemoteInvalidRequest));
  EXPECT_EQ(h.b().ep.qp(h.b().qpn)->state(), QpState::kError);
}

TEST(TwoEndpoints, WriteOutsideTheRemoteRegionFailsTheRequestWithRemoteAccessError) {
  Harness h(quiet_config());
  const auto before = h.b().mem;
  WriteRequest wr = a_to_b(h, 4096);
  wr.remote_addr = region_va(1) + h.b().mem.size() - 2048;  // runs 2 KiB past the end
  ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, wr).ok());
  ASSERT_TRUE(h.run([&] { return !h.completions(0).empty(); }, 10'000'000));
  EXPECT_EQ(h.completions(0)[0].status, WcStatus::kRemoteAccessError);
  EXPECT_TRUE(has_error(h, 1, WcStatus::kRemoteAccessError));
  // Packets inside the region may land before the first bad one; none past it.
  EXPECT_EQ(h.b().mem.size(), before.size());
}

// Registers `mem` on side s at kForeignVa in a protection domain that no
// QP of the harness is in (softmrcd: another application PD's region).
constexpr uint64_t kForeignVa = 0x70000000;
void register_foreign(Side& s, std::vector<uint8_t>* mem, uint32_t access, uint32_t* key) {
  constexpr uint32_t kForeignDomain = 9;
  ASSERT_TRUE(s.ep.register_region(
                      Region{kForeignVa, mem->size(), mem->data(), access, kForeignDomain}, key)
                  .ok());
}

// softmrcd gives each application PD a protection domain: a peer that names
// the key, address and length of a region in another exactly is still refused.
TEST(TwoEndpoints, WriteToARegionOfAnotherDomainFailsWithRemoteAccessErrorAndLeavesItAlone) {
  Harness h(quiet_config());
  std::vector<uint8_t> other(8192, 0x5a);
  uint32_t other_key = 0;
  ASSERT_NO_FATAL_FAILURE(
      register_foreign(h.b(), &other, kAccessLocalWrite | kAccessRemoteWrite, &other_key));
  WriteRequest wr = a_to_b(h, 4096);
  wr.remote_addr = kForeignVa;
  wr.rkey = other_key;
  ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, wr).ok());
  ASSERT_TRUE(h.run([&] { return !h.completions(0).empty(); }, 10'000'000));
  EXPECT_EQ(h.completions(0)[0].status, WcStatus::kRemoteAccessError);
  EXPECT_TRUE(has_error(h, 1, WcStatus::kRemoteAccessError));
  EXPECT_EQ(std::count(other.begin(), other.end(), 0x5a), static_cast<long>(other.size()));
}

TEST(TwoEndpoints, AQpSendsOnlyFromRegionsOfItsOwnDomain) {
  Harness h(quiet_config());
  std::vector<uint8_t> other(4096, 0x5a);
  uint32_t foreign = 0;
  ASSERT_NO_FATAL_FAILURE(register_foreign(h.a(), &other, kAccessLocalWrite, &foreign));
  WriteRequest wr = a_to_b(h, 4096);
  wr.local_addr = kForeignVa;
  wr.lkey = foreign;
  EXPECT_FALSE(h.a().ep.post_write(h.a().qpn, wr).ok());
  EXPECT_TRUE(h.a().ep.post_write(h.a().qpn, a_to_b(h, 4096)).ok());
}

// softmrcd aborts the QPs of an application that exited: the peer fails at
// once (well inside one ACK timeout), as a sender and as a receiver.
TEST(TwoEndpoints, AbortedQpFailsItsPeerWithRemoteOperationalErrorAtOnce) {
  Harness h(quiet_config());
  post_receives(h, 0, 4);  // A receives too: they are flushed
  WriteRequest wr = a_to_b(h, 128 * 1024);
  ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, wr).ok());
  ASSERT_TRUE(h.run([&] { return h.b().ep.qp(h.b().qpn)->epsn() != 0; }, 10'000'000));
  const TimeNs aborted_at = h.now();
  ASSERT_TRUE(h.b().ep.abort_qp(h.b().qpn, h.now()).ok());
  EXPECT_EQ(h.b().ep.counters().qp_gone_tx, 2u);  // one per up plane
  EXPECT_EQ(h.b().ep.qp(h.b().qpn), nullptr);
  ASSERT_TRUE(
      h.run([&] { return has_error(h, 0, WcStatus::kRemoteOperationalError); }, 10'000'000));
  EXPECT_LT(h.now() - aborted_at, ack_timeout_ns(quiet_config().timeout));
  const auto& c = h.completions(0);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].status, WcStatus::kRemoteOperationalError);
  EXPECT_EQ(std::count_if(c.begin(), c.end(),
                          [](const Completion& x) { return x.status == WcStatus::kFlushed; }),
            4);
  EXPECT_EQ(h.a().ep.qp(h.a().qpn)->state(), QpState::kError);
}

TEST(TwoEndpoints, AbortedQpFailsAnIdlePeerToo) {
  Harness h(quiet_config());
  ASSERT_TRUE(h.a().ep.abort_qp(h.a().qpn, h.now()).ok());
  ASSERT_TRUE(
      h.run([&] { return has_error(h, 1, WcStatus::kRemoteOperationalError); }, 10'000'000));
  EXPECT_EQ(h.b().ep.qp(h.b().qpn)->state(), QpState::kError);
}

TEST(TwoEndpoints, AbortedSenderFailsAPeerThatOnlyReceives) {
  HarnessConfig cfg = quiet_config();
  cfg.b_last = QpState::kRtr;  // as verbs allows a QP that never sends
  Harness h(cfg);
  post_receives(h, 1, 4);
  ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, a_to_b(h, 128 * 1024)).ok());
  ASSERT_TRUE(h.run([&] { return h.b().ep.qp(h.b().qpn)->epsn() != 0; }, 10'000'000));
  const TimeNs aborted_at = h.now();
  ASSERT_TRUE(h.a().ep.abort_qp(h.a().qpn, h.now()).ok());
  ASSERT_TRUE(
      h.run([&] { return has_error(h, 1, WcStatus::kRemoteOperationalError); }, 10'000'000));
  EXPECT_LT(h.now() - aborted_at, ack_timeout_ns(cfg.timeout));
  EXPECT_EQ(h.b().ep.qp(h.b().qpn)->state(), QpState::kError);
  const auto& c = h.completions(1);
  EXPECT_EQ(std::count_if(c.begin(), c.end(),
                          [](const Completion& x) { return x.status == WcStatus::kFlushed; }),
            4);
}

// Every copy of the first notice lost: the receiver still fails, by the
// first resend, one ACK timeout later.
TEST(TwoEndpoints, AQpGoneLostOnEveryPlaneStillReachesAPeerThatOnlyReceives) {
  HarnessConfig cfg = quiet_config();
  cfg.b_last = QpState::kRtr;
  Harness h(cfg);
  post_receives(h, 1, 4);
  int lost = 0;
  h.set_filter([&](int dir, const TxPacket& p) {
    const bool first_round = dir == 0 && p.t.fb.code == wire::NackCode::kQpGone && lost < 2;
    lost += first_round;
    return first_round ? Verdict::kDrop : Verdict::kPass;
  });
  const TimeNs aborted_at = h.now();
  ASSERT_TRUE(h.a().ep.abort_qp(h.a().qpn, aborted_at).ok());
  ASSERT_TRUE(
      h.run([&] { return has_error(h, 1, WcStatus::kRemoteOperationalError); }, 10'000'000));
  EXPECT_EQ(lost, 2);  // one per plane
  EXPECT_GE(h.now() - aborted_at, ack_timeout_ns(cfg.timeout));
  EXPECT_LT(h.now() - aborted_at, 2 * ack_timeout_ns(cfg.timeout));
  h.run_for(1'000'000'000);  // the later resends find B's QP in ERROR
  EXPECT_EQ(h.a().ep.counters().qp_gone_tx, 2u * (1 + kGoneNoticeResends));
  EXPECT_EQ(qp_errors(h, 1), 1);
}

// An application with many QPs has them all aborted at once: rounds the
// control queue has no room for go out as it drains, not a timeout later.
TEST(TwoEndpoints, QpGoneRoundsAControlQueueCannotHoldGoOutAsItDrains) {
  HarnessConfig cfg = quiet_config();
  cfg.qps = 4;
  cfg.b_last = QpState::kRtr;
  cfg.ctrl_queue_packets = 2;  // one QP's round (a NACK per plane)
  Harness h(cfg);
  const TimeNs aborted_at = h.now();
  for (uint32_t qpn : h.a().qpns) ASSERT_TRUE(h.a().ep.abort_qp(qpn, aborted_at).ok());
  EXPECT_EQ(h.a().ep.counters().ctrl_dropped, 6u);
  ASSERT_TRUE(h.run([&] { return qp_errors(h, 1) == 4; }, 10'000'000));
  EXPECT_LT(h.now() - aborted_at, ack_timeout_ns(cfg.timeout) / 2);
}

TEST(TwoEndpoints, BlackHoledEvIsMarkedAssumedBadAndRestoredByProbesWhenItHeals) {
  Harness h(quiet_config());
  h.pipe(0, 0).dead_evs = 1u << 2;  // A's EV 2 (plane 0) swallows everything
  std::mt19937_64 rng(5);
  post_receives(h, 1, 16);
  Transfer t(h, 0, make_messages(h, 0, rng, 30, 8 * 1024));
  ASSERT_TRUE(h.run([&] { return t.pump(); }, kLimitNs)) << describe(h);
  EXPECT_TRUE(t.all_placed());
  const Qp& a = *h.a().ep.qp(h.a().qpn);
  EXPECT_EQ(a.evs().state(2), EvState::kAssumedBad);
  h.run_for(200'000);
  EXPECT_EQ(a.evs().state(2), EvState::kAssumedBad);
  EXPECT_GT(a.counters().probes_tx, 1u) << "probes keep failing while it is dark";
  h.pipe(0, 0).dead_evs = 0;
  h.run_for(1'000'000);
  EXPECT_EQ(a.evs().state(2), EvState::kGood);
  std::vector<EvState> seen;
  for (const Event& e : h.events(0))
    if (e.type == EventType::kEvStateChange && e.ev.ev == 2) seen.push_back(e.ev.new_state);
  EXPECT_EQ(seen, (std::vector<EvState>{EvState::kAssumedBad, EvState::kGood}));
  EXPECT_TRUE(no_errors(h));
}

TEST(TwoEndpoints, MinActiveEvsStayUsableWhenEveryPathLoses) {
  HarnessConfig cfg = quiet_config();
  cfg.min_active = 3;
  cfg.retry_exp = kRetryExpUnlimited;
  Harness h(cfg, 11);
  PipeFaults f;
  f.drop_rate = 0.2;  // every path loses
  h.set_all_pipes(f);
  std::mt19937_64 rng(11);
  post_receives(h, 1, 16);
  Transfer t(h, 0, make_messages(h, 0, rng, 30, 8 * 1024));
  uint32_t min_usable = UINT32_MAX;
  const Qp& a = *h.a().ep.qp(h.a().qpn);
  ASSERT_TRUE(h.run(
      [&] {
        min_usable = std::min(min_usable, a.evs().usable_count());
        return t.pump();
      },
      kLimitNs))
      << describe(h);
  EXPECT_TRUE(t.all_placed());
  EXPECT_EQ(min_usable, 3u);
  uint64_t losses = 0;
  for (uint32_t e = 0; e < a.evs().size(); ++e) losses += a.evs().counters(e).losses;
  EXPECT_GT(losses, 5u);
}

TEST(TwoEndpoints, EveryPlaneDownRunsOutOfRetriesIntoRetryExceeded) {
  HarnessConfig cfg = quiet_config();
  cfg.timeout = 4;  // 16 us
  cfg.retry_linear = 3;
  cfg.retry_exp = 3;
  Harness h(cfg);
  h.schedule_plane(0, false, 1'000);
  h.schedule_plane(1, false, 1'000);
  for (uint64_t id = 0; id < 3; ++id) {
    WriteRequest wr;
    wr.wr_id = id;
    wr.local_addr = region_va(0);
    wr.length = 64 * 1024;
    wr.lkey = h.a().key;
    wr.remote_addr = region_va(1);
    wr.rkey = h.b().key;
    ASSERT_TRUE(h.a().ep.post_write(h.a().qpn, wr).ok());
  }
  h.run([&] { return h.completions(0).size() == 3; }, kLimitNs);
  EXPECT_EQ(h.a().ep.qp(h.a().qpn)->state(), QpState::kError);
  EXPECT_TRUE(has_error(h, 0, WcStatus::kRetryExceeded));
  EXPECT_EQ(h.a().ep.qp(h.a().qpn)->counters().timeouts, 7u);
  ASSERT_EQ(h.completions(0).size(), 3u);
  EXPECT_EQ(h.completions(0)[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(h.completions(0)[1].status, WcStatus::kFlushed);
  EXPECT_EQ(h.completions(0)[2].status, WcStatus::kFlushed);
}

TEST(TwoEndpoints, PlaneComingBackIsUsedAgain) {
  HarnessConfig cfg = quiet_config();
  Harness h(cfg);
  h.schedule_plane(1, false, 1'000);
  h.schedule_plane(1, true, 50'000);
  std::mt19937_64 rng(9);
  post_receives(h, 1, 16);
  h.run_for(60'000);
  EXPECT_TRUE(h.a().ep.qp(h.a().qpn)->evs().plane_up(1));
  EXPECT_TRUE(h.b().ep.qp(h.b().qpn)->evs().plane_up(1)) << "B hears the newer port status";
  Transfer t(h, 0, make_messages(h, 0, rng, 20, 8 * 1024));
  ASSERT_TRUE(h.run([&] { return t.pump(); }, kLimitNs));
  const Qp& a = *h.a().ep.qp(h.a().qpn);
  uint64_t on_plane1 = 0;
  for (uint32_t e = 0; e < a.evs().size(); ++e)
    if (a.evs().entry(e).plane == 1) on_plane1 += a.evs().counters(e).tx_packets;
  EXPECT_GT(on_plane1, 0u);
}

}  // namespace
}  // namespace softmrc::engine::test
