// smrc-loopback: two MRC endpoints over an emulated multi-plane fabric, in
// virtual time.
//
// Endpoint A writes messages (Write-with-Immediate) to endpoint B through
// the real engine; every packet is framed with lib/wire, crosses a fabric of
// P planes (NIC serialisation, a switch queue per plane with ECN marking and
// trimming, propagation delay) and is parsed again on arrival. Part-way
// through, one plane fails. B verifies every byte of every message when its
// receive completes. The run prints a line per interval and a summary, and
// exits non-zero if any byte, completion or QP went wrong.
//
// This is the project's end-to-end job until the DPDK endpoint (softmrcd)
// takes it over; it needs no EAL and no NIC.
#include <getopt.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <queue>
#include <string>
#include <vector>

#include "cli/number.h"
#include "cli/version.h"
#include "engine/endpoint.h"
#include "pattern/pattern.h"
#include "wire/packet.h"

namespace {

using namespace softmrc;
using engine::TimeNs;

struct Options {
  uint32_t planes = 4;
  uint32_t evs_per_plane = 16;
  double gib = 4.0;
  uint32_t msg_kib = 1024;
  uint32_t window = 16;  // messages in flight
  uint32_t mtu = 4096;
  double link_gbps = 100;
  double prop_us = 1.0;  // each hop: NIC to switch, switch to NIC
  int fail_plane = 2;
  double fail_at_ms = 25;
  bool fail_link_down = false;  // default: a silent blackhole
  int trim_plane = 3;
  double trim_plane_gbps = 60;  // the trimming plane's congested switch port
  uint32_t switch_buffer_kib = 128;
  double interval_ms = 5;
  bool nscc = true;
  engine::SprayPolicy spray = engine::SprayPolicy::kEcnAvoid;
};

void usage(FILE* out) {
  std::fprintf(
      out,
      "usage: smrc-loopback [options]\n"
      "Two MRC endpoints over an emulated multi-plane fabric (virtual time).\n\n"
      "  --gib N              data to transfer and verify, GiB, 0.001..64 (default 4)\n"
      "  --planes N           planes, 1..8 (default 4)\n"
      "  --evs-per-plane N    EVs per plane in the QP's profile, 1..64 (default 16)\n"
      "  --msg-kib N          message size, KiB, 1..65536 (default 1024)\n"
      "  --window N           messages in flight, 1..128 (default 16); --msg-kib x\n"
      "                       --window at most 1 GiB\n"
      "  --mtu N              path MTU: 256, 512, 1024, 2048, 4096 or 9000 (default 4096)\n"
      "  --link-gbps N        per-plane link rate, Gb/s, 1..1000 (default 100)\n"
      "  --fail-plane N       plane that fails, below --planes, or -1 for none (default 2)\n"
      "  --fail-at-ms N       when it fails, virtual ms, 0..1000000 (default 25)\n"
      "  --link-down          the failure is a link-down port event on both ends\n"
      "                       (default: a silent blackhole found by loss and probes)\n"
      "  --trim-plane N       plane whose switch port is congested and trims, below\n"
      "                       --planes, or -1 for none (default 3)\n"
      "  --trim-plane-gbps N  that port's rate, Gb/s, 1..1000 (default 60)\n"
      "  --switch-buffer-kib N  switch queue limit before trimming, 16..1048576\n"
      "                       (default 128)\n"
      "  --interval-ms N      report interval, virtual ms, 0.01..1000000 (default 5)\n"
      "  --no-cc              congestion control 'none' instead of NSCC\n"
      "  --spray rr|ecn-avoid  EV spraying policy: strict plane round-robin, or planes\n"
      "                       weighted by their congestion (default ecn-avoid)\n"
      "  -h, --help           this text\n"
      "  --version            softmrc's release\n"
      "\n"
      "Exit status: 0 when every byte was verified, 1 when a message failed or a\n"
      "byte was wrong (or the engine could not be set up), 2 for bad arguments.\n");
}

constexpr uint64_t kMaxWindowKib = 1 << 20;

bool parse_number(const char* s, double lo, double hi, double* out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_options(int argc, char** argv, Options* o) {
  enum : int {
    kGib = 256,
    kPlanes,
    kEvs,
    kMsg,
    kWindow,
    kMtu,
    kLink,
    kFailPlane,
    kFailAt,
    kLinkDown,
    kTrimPlane,
    kTrimGbps,
    kBuffer,
    kInterval,
    kNoCc,
    kSpray,
    kVersion,
  };
  static const option kLong[] = {
      {"gib", required_argument, nullptr, kGib},
      {"planes", required_argument, nullptr, kPlanes},
      {"evs-per-plane", required_argument, nullptr, kEvs},
      {"msg-kib", required_argument, nullptr, kMsg},
      {"window", required_argument, nullptr, kWindow},
      {"mtu", required_argument, nullptr, kMtu},
      {"link-gbps", required_argument, nullptr, kLink},
      {"fail-plane", required_argument, nullptr, kFailPlane},
      {"fail-at-ms", required_argument, nullptr, kFailAt},
      {"link-down", no_argument, nullptr, kLinkDown},
      {"trim-plane", required_argument, nullptr, kTrimPlane},
      {"trim-plane-gbps", required_argument, nullptr, kTrimGbps},
      {"switch-buffer-kib", required_argument, nullptr, kBuffer},
      {"interval-ms", required_argument, nullptr, kInterval},
      {"no-cc", no_argument, nullptr, kNoCc},
      {"spray", required_argument, nullptr, kSpray},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, kVersion},
      {nullptr, 0, nullptr, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "h", kLong, nullptr)) != -1) {
    double v = 0;
    const char* name = nullptr;
    auto num = [&](const char* n, double lo, double hi) {
      name = n;
      return parse_number(optarg, lo, hi, &v);
    };
    // Counts and sizes: decimal digits only, not '2.5' read as 2.
    auto whole = [&](const char* n, uint64_t lo, uint64_t hi) {
      name = n;
      uint64_t u = 0;
      if (!cli::parse_uint(optarg, lo, hi, &u)) return false;
      v = static_cast<double>(u);
      return true;
    };
    // A plane, 0..7, or -1 for none.
    auto plane = [&](const char* n) {
      if (std::strcmp(optarg, "-1") != 0) return whole(n, 0, 7);
      name = n;
      v = -1;
      return true;
    };
    bool ok = true;
    switch (c) {
      case kGib:
        ok = num("--gib", 0.001, 64);
        o->gib = v;
        break;
      case kPlanes:
        ok = whole("--planes", 1, 8);
        o->planes = static_cast<uint32_t>(v);
        break;
      case kEvs:
        ok = whole("--evs-per-plane", 1, 64);
        o->evs_per_plane = static_cast<uint32_t>(v);
        break;
      case kMsg:
        ok = whole("--msg-kib", 1, 65536);
        o->msg_kib = static_cast<uint32_t>(v);
        break;
      case kWindow:
        ok = whole("--window", 1, 128);
        o->window = static_cast<uint32_t>(v);
        break;
      case kMtu:
        ok = whole("--mtu", 256, 9000) && engine::valid_path_mtu(static_cast<uint32_t>(v));
        o->mtu = static_cast<uint32_t>(v);
        break;
      case kLink:
        ok = num("--link-gbps", 1, 1000);
        o->link_gbps = v;
        break;
      case kFailPlane:
        ok = plane("--fail-plane");
        o->fail_plane = static_cast<int>(v);
        break;
      case kFailAt:
        ok = num("--fail-at-ms", 0, 1e6);
        o->fail_at_ms = v;
        break;
      case kLinkDown:
        o->fail_link_down = true;
        break;
      case kTrimPlane:
        ok = plane("--trim-plane");
        o->trim_plane = static_cast<int>(v);
        break;
      case kTrimGbps:
        ok = num("--trim-plane-gbps", 1, 1000);
        o->trim_plane_gbps = v;
        break;
      case kBuffer:
        ok = whole("--switch-buffer-kib", 16, 1 << 20);
        o->switch_buffer_kib = static_cast<uint32_t>(v);
        break;
      case kInterval:
        ok = num("--interval-ms", 0.01, 1e6);
        o->interval_ms = v;
        break;
      case kNoCc:
        o->nscc = false;
        break;
      case kSpray:
        name = "--spray";
        ok = std::strcmp(optarg, "rr") == 0 || std::strcmp(optarg, "ecn-avoid") == 0;
        o->spray =
            optarg[0] == 'e' ? engine::SprayPolicy::kEcnAvoid : engine::SprayPolicy::kRoundRobin;
        break;
      case 'h':
        usage(stdout);
        std::exit(0);
      case kVersion:
        std::fputs(cli::version_text("smrc-loopback").c_str(), stdout);
        std::exit(0);
      default:
        usage(stderr);
        return false;
    }
    if (!ok) {
      std::fprintf(stderr, "smrc-loopback: bad value '%s' for %s\n", optarg, name);
      return false;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "smrc-loopback: unexpected argument '%s'\n", argv[optind]);
    return false;
  }
  // Each endpoint holds a slot per message in flight.
  if (uint64_t{o->msg_kib} * o->window > kMaxWindowKib) {
    std::fprintf(stderr,
                 "smrc-loopback: --msg-kib x --window must be at most %" PRIu64
                 " KiB (1 GiB, each endpoint's buffer), got %u x %u\n",
                 kMaxWindowKib, o->msg_kib, o->window);
    return false;
  }
  if (o->fail_plane >= static_cast<int>(o->planes) ||
      o->trim_plane >= static_cast<int>(o->planes)) {
    std::fprintf(stderr,
                 "smrc-loopback: --fail-plane and --trim-plane must be below --planes (%u)\n",
                 o->planes);
    return false;
  }
  return true;
}

// One direction of one plane: the sender's NIC port, the switch egress
// queue towards the receiver, and two hops of propagation delay.
struct Link {
  double nic_bytes_per_ns = 0;
  double switch_bytes_per_ns = 0;
  double nic_free_ns = 0;
  double switch_free_ns = 0;
  double buffer_bytes = 0;
  double ecn_bytes = 0;
  double prop_ns = 0;
  bool blackholed = false;
};

struct Arrival {
  double at_ns;
  uint64_t seq;  // ties in time keep send order
  int dst;
  uint8_t plane;
  std::vector<uint8_t> frame;
  bool operator>(const Arrival& o) const {
    return at_ns != o.at_ns ? at_ns > o.at_ns : seq > o.seq;
  }
};

struct FabricCounters {
  uint64_t packets = 0, bytes = 0, trims = 0, ce_marks = 0, dropped = 0;
};

class Fabric {
 public:
  Fabric(const Options& o) : planes_(o.planes) {
    links_.resize(2 * o.planes);
    tx_bytes_.assign(o.planes, 0);
    for (uint32_t p = 0; p < o.planes; ++p) {
      for (int dir = 0; dir < 2; ++dir) {
        Link& l = link(dir, p);
        l.nic_bytes_per_ns = o.link_gbps / 8;
        l.switch_bytes_per_ns =
            (static_cast<int>(p) == o.trim_plane ? o.trim_plane_gbps : o.link_gbps) / 8;
        l.buffer_bytes = o.switch_buffer_kib * 1024.0;
        l.ecn_bytes = l.buffer_bytes / 4;
        l.prop_ns = o.prop_us * 1000;
      }
    }
  }

  // Sends `frame` from endpoint `src` (0 = A, 1 = B) on `plane` at `now`.
  void send(int src, uint8_t plane, std::vector<uint8_t> frame, double now) {
    Link& l = link(src, plane);
    ++counters_.packets;
    counters_.bytes += frame.size();
    tx_bytes_[plane] += frame.size();
    l.nic_free_ns = std::max(now, l.nic_free_ns) + frame.size() / l.nic_bytes_per_ns;
    const double at_switch = l.nic_free_ns + l.prop_ns;
    if (l.blackholed) {
      ++counters_.dropped;
      return;
    }
    const double queued = std::max(0.0, l.switch_free_ns - at_switch) * l.switch_bytes_per_ns;
    double leave;
    if (queued + frame.size() > l.buffer_bytes) {
      const size_t trimmed = wire::trim(frame, wire::DscpConfig{});
      if (trimmed == 0) {
        ++counters_.dropped;
        return;
      }
      // A trimmed header jumps the queue on the priority class.
      frame.resize(trimmed);
      ++counters_.trims;
      leave = at_switch + trimmed / l.switch_bytes_per_ns;
    } else {
      if (queued > l.ecn_bytes && wire::mark_ce(frame)) ++counters_.ce_marks;
      l.switch_free_ns =
          std::max(at_switch, l.switch_free_ns) + frame.size() / l.switch_bytes_per_ns;
      leave = l.switch_free_ns;
    }
    arrivals_.push(Arrival{leave + l.prop_ns, seq_++, 1 - src, plane, std::move(frame)});
  }

  void set_blackholed(uint8_t plane, bool on) {
    link(0, plane).blackholed = on;
    link(1, plane).blackholed = on;
  }

  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>>& arrivals() {
    return arrivals_;
  }
  const FabricCounters& counters() const { return counters_; }
  std::vector<uint64_t>& tx_bytes() { return tx_bytes_; }

 private:
  Link& link(int src, uint32_t plane) { return links_[src * planes_ + plane]; }

  uint32_t planes_;
  std::vector<Link> links_;
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals_;
  uint64_t seq_ = 0;
  FabricCounters counters_;
  std::vector<uint64_t> tx_bytes_;
};

wire::FrameSpec frame_spec(int src, uint8_t plane) {
  wire::FrameSpec f;
  f.ip_version = wire::IpVersion::kV6;
  f.ev_mode = wire::EvMode::kUdp;
  f.src_mac.bytes[0] = f.dst_mac.bytes[0] = 0x02;
  f.src_mac.bytes[4] = f.dst_mac.bytes[4] = plane;
  f.src_mac.bytes[5] = static_cast<uint8_t>(src + 1);
  f.dst_mac.bytes[5] = static_cast<uint8_t>(2 - src);
  f.src_ip[0] = f.dst_ip[0] = 0xfd;
  f.src_ip[15] = static_cast<uint8_t>(src + 1);
  f.dst_ip[15] = static_cast<uint8_t>(2 - src);
  return f;
}

// The QP's EV profile: evs_per_plane UDP source ports on every plane.
std::vector<engine::EvEntry> make_evs(const Options& o, int side) {
  std::vector<engine::EvEntry> evs;
  for (uint32_t i = 0; i < o.evs_per_plane; ++i) {
    for (uint32_t p = 0; p < o.planes; ++p) {
      engine::EvEntry e{};
      const uint16_t port = static_cast<uint16_t>(0xc000 | side << 12 | p << 8 | i);
      e.value.bytes[0] = static_cast<uint8_t>(port >> 8);
      e.value.bytes[1] = static_cast<uint8_t>(port);
      e.plane = static_cast<uint8_t>(p);
      evs.push_back(e);
    }
  }
  return evs;
}

bool check(engine::Status s, const char* what) {
  if (!s.ok()) std::fprintf(stderr, "smrc-loopback: %s: %s\n", what, s.reason());
  return s.ok();
}

struct Side {
  engine::Endpoint ep;
  uint32_t qpn = 0;
  std::vector<uint8_t> buf;
  uint32_t key = 0;
};

bool setup_side(Side& s, const Options& o, uint64_t slot_bytes) {
  engine::EndpointConfig cfg;
  cfg.num_planes = static_cast<uint8_t>(o.planes);
  cfg.max_qps = 4;
  if (!check(s.ep.init(cfg), "endpoint init") || !check(s.ep.create_qp(&s.qpn), "create_qp"))
    return false;
  s.buf.assign(slot_bytes * o.window, 0);
  engine::Region r;
  r.va = reinterpret_cast<uint64_t>(s.buf.data());
  r.length = s.buf.size();
  r.host = s.buf.data();
  r.access = engine::kAccessLocalWrite | engine::kAccessRemoteWrite;
  return check(s.ep.register_region(r, &s.key), "register_region");
}

bool connect(Side& s, const Options& o, uint32_t peer, uint32_t peer_qpn,
             const std::vector<engine::EvEntry>& evs) {
  const double rate_bytes_per_ns = o.planes * o.link_gbps / 8;
  const TimeNs base_rtt_ns =
      static_cast<TimeNs>(4 * o.prop_us * 1000 + 2 * o.mtu / (o.link_gbps / 8));
  engine::QpAttr a;
  a.evs = evs;
  a.ev_config.min_active = o.evs_per_plane;  // at least one plane's worth
  a.ev_config.policy = o.spray;
  a.ev_config.probe_initial_ns = 20'000;
  a.ev_config.probe_max_ns = 1'000'000;
  a.ev_config.ecn_avoid_ns = 50'000;
  a.ev_config.num_planes = static_cast<uint8_t>(o.planes);
  if (o.nscc) {
    a.cc.algorithm = engine::CcAlgorithm::kNscc;
    a.cc.nscc = engine::default_nscc_params(static_cast<uint64_t>(rate_bytes_per_ns * 8e9),
                                            base_rtt_ns, o.mtu);
  }
  a.peer = peer;
  a.dest_qpn = peer_qpn;
  a.path_mtu = o.mtu;
  a.rq_psn = a.sq_psn = 0x100;
  a.mpr_dest = a.mpr = 16;
  a.max_wimm_dest = a.max_wimm = static_cast<uint16_t>(o.window);
  a.timeout = 6;  // 65 us: a few RTTs of this fabric
  a.retry_linear = 7;
  a.retry_exp = 7;
  return check(s.ep.connect_qp(s.qpn, a, 0), "connect_qp");
}

// What the failure cost, from payload delivered to B in 10 us bins smoothed
// over 50 us: the goodput before (the millisecond before the fault) and on
// the surviving planes (ms 1..3 after it); how long until goodput first came
// back to 90% of that new level and to (P-1)/P of the old one, how low it
// went meanwhile, and the longest stretch in which nothing arrived at all.
void report_dip(const Options& o, const std::vector<uint64_t>& bins, double bin_ns,
                double fail_ns) {
  const auto fail_bin = static_cast<size_t>(fail_ns / bin_ns);
  const auto ms_bins = static_cast<size_t>(1e6 / bin_ns);
  const auto gbps = [&](double bytes_per_bin) { return bytes_per_bin * 8 / bin_ns; };
  const auto mean = [&](size_t from, size_t to) {
    to = std::min(to, bins.size());
    double sum = 0;
    for (size_t i = from; i < to; ++i) sum += bins[i];
    return to > from ? sum / (to - from) : 0.0;
  };
  if (fail_bin < ms_bins || bins.size() < fail_bin + 3 * ms_bins) {
    std::printf("plane %d failed at t=%.1f ms: the run is too short around it to measure the dip\n",
                o.fail_plane, o.fail_at_ms);
    return;
  }
  const double before = mean(fail_bin - ms_bins, fail_bin);
  const double after = mean(fail_bin + ms_bins, fail_bin + 3 * ms_bins);
  constexpr size_t kSmooth = 5;
  const auto first_at_least = [&](double level) -> size_t {
    for (size_t i = fail_bin; i + kSmooth <= fail_bin + ms_bins; ++i)
      if (mean(i, i + kSmooth) >= level) return i - fail_bin;
    return SIZE_MAX;
  };
  const size_t to_new_level = first_at_least(0.9 * after);
  const size_t to_old_share = first_at_least(before * (o.planes - 1) / o.planes);
  double dip = mean(fail_bin, fail_bin + kSmooth);
  for (size_t i = fail_bin; i < fail_bin + std::min(to_new_level, ms_bins); ++i)
    dip = std::min(dip, mean(i, i + kSmooth));
  size_t stall = 0;
  for (size_t i = fail_bin, run = 0; i < fail_bin + ms_bins; ++i) {
    run = bins[i] == 0 ? run + 1 : 0;
    stall = std::max(stall, run);
  }
  const double rtt_ns = 4 * o.prop_us * 1000;
  const auto span = [&](size_t n) -> std::string {
    if (n == SIZE_MAX) return "not within 1 ms";
    char text[64];
    std::snprintf(text, sizeof text, "%.0f us (%.0f base RTTs)", n * bin_ns / 1e3,
                  n * bin_ns / rtt_ns);
    return text;
  };
  std::printf("plane %d %s at t=%.1f ms: goodput %.1f Gb/s before, %.1f Gb/s on %u planes after\n",
              o.fail_plane, o.fail_link_down ? "down" : "blackholed", o.fail_at_ms, gbps(before),
              gbps(after), o.planes - 1);
  std::printf("  back to 90%% of the new level in %s, lowest %.1f Gb/s before that\n",
              span(to_new_level).c_str(), gbps(dip));
  std::printf("  back to %u/%u of the old level in %s; longest stretch with no delivery %s\n",
              o.planes - 1, o.planes, span(to_old_share).c_str(), span(stall).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, &o)) return 2;

  const uint64_t msg_bytes = uint64_t{o.msg_kib} * 1024;
  const uint64_t total_msgs =
      std::max<uint64_t>(1, static_cast<uint64_t>(o.gib * (1ull << 30) / msg_bytes));
  const uint64_t total_bytes = total_msgs * msg_bytes;

  Side a, b;
  const auto evs_a = make_evs(o, 0);
  const auto evs_b = make_evs(o, 1);
  if (!setup_side(a, o, msg_bytes) || !setup_side(b, o, msg_bytes)) return 1;
  if (!connect(a, o, 1, b.qpn, evs_a) || !connect(b, o, 0, a.qpn, evs_b)) return 1;
  Side* sides[2] = {&a, &b};

  // B pre-posts a receive per message in flight: no RNR in MRC.
  for (uint32_t i = 0; i < o.window; ++i)
    if (!check(b.ep.post_recv(b.qpn, engine::RecvRequest{i}), "post_recv")) return 1;

  uint64_t next_msg = 0;       // next message A posts
  uint64_t verified_msgs = 0;  // messages B checked
  uint64_t errors = 0;
  auto post_next = [&]() {
    const uint64_t seq = next_msg++;
    uint8_t* slot_a = a.buf.data() + (seq % o.window) * msg_bytes;
    pattern::fill(slot_a, msg_bytes, /*stream=*/0, seq);
    engine::WriteRequest wr;
    wr.wr_id = seq;
    wr.local_addr = reinterpret_cast<uint64_t>(slot_a);
    wr.length = static_cast<uint32_t>(msg_bytes);
    wr.lkey = a.key;
    wr.remote_addr = reinterpret_cast<uint64_t>(b.buf.data() + (seq % o.window) * msg_bytes);
    wr.rkey = b.key;
    wr.with_imm = true;
    wr.imm = static_cast<uint32_t>(seq);
    if (!check(a.ep.post_write(a.qpn, wr), "post_write")) ++errors;
  };
  for (uint32_t i = 0; i < o.window && next_msg < total_msgs; ++i) post_next();

  Fabric fabric(o);
  wire::ParseConfig parse_cfg;
  uint64_t parse_errors = 0;
  std::vector<engine::TxPacket> tx(64);
  std::vector<uint8_t> scratch(wire::kMaxHeaderLen + wire::kMaxPayload + wire::kIcrcLen);

  const double interval_ns = o.interval_ms * 1e6;
  const double fail_ns = o.fail_plane >= 0 ? o.fail_at_ms * 1e6 : INFINITY;
  bool failed = false;
  double now = 0;
  double next_report = interval_ns;
  uint64_t interval_bytes = 0;
  std::vector<uint64_t> last_plane_bytes(o.planes, 0);
  uint64_t ev_changes = 0, qp_errors = 0;
  uint32_t bad_evs = 0;

  // New payload delivered to B in fine bins, for the dip after the failure
  // (message completions are too coarse: one 1 MiB message is ~30 us).
  const double bin_ns = 10'000;
  std::vector<uint64_t> bins;
  const auto duplicates = [](const Side& s) {
    const engine::Qp* qp = s.ep.qp(s.qpn);
    return qp ? qp->counters().rx_duplicates : 0;
  };
  auto record = [&](uint64_t bytes) {
    const size_t bin = static_cast<size_t>(now / bin_ns);
    if (bins.size() <= bin) bins.resize(bin + 1, 0);
    bins[bin] += bytes;
  };

  std::printf("smrc-loopback: %.2f GiB in %" PRIu64
              " x %u KiB Write-with-Immediate, %u planes x %.0f Gb/s, "
              "%u EVs/plane, MTU %u, CC %s\n",
              total_bytes / double(1ull << 30), total_msgs, o.msg_kib, o.planes, o.link_gbps,
              o.evs_per_plane, o.mtu, o.nscc ? "nscc" : "none");
  if (o.trim_plane >= 0)
    std::printf(
        "  plane %d's switch port runs at %.0f Gb/s with a %u KiB buffer: it marks and trims\n",
        o.trim_plane, o.trim_plane_gbps, o.switch_buffer_kib);
  if (o.fail_plane >= 0)
    std::printf("  plane %d fails at t=%.1f ms (%s)\n", o.fail_plane, o.fail_at_ms,
                o.fail_link_down ? "link down" : "silent blackhole");

  // Completions and events: B verifies each message, A posts the next one,
  // errors end the run. Called after arrivals and again after the
  // transmit pass, whose timers may have just failed the QP: nothing may be
  // due after that, and the run must end now, not at the time limit.
  auto drain = [&]() {
    engine::Completion wc[32];
    size_t n;
    while ((n = a.ep.poll_completions(wc, 32)) > 0) {
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].status != engine::WcStatus::kSuccess) {
          std::fprintf(stderr, "A: completion of message %" PRIu64 ": %s\n", wc[i].wr_id,
                       engine::wc_status_name(wc[i].status));
          ++errors;
        } else if (next_msg < total_msgs) {
          post_next();
        }
      }
    }
    while ((n = b.ep.poll_completions(wc, 32)) > 0) {
      for (size_t i = 0; i < n; ++i) {
        const uint64_t seq = verified_msgs;
        if (wc[i].status != engine::WcStatus::kSuccess ||
            wc[i].opcode != engine::WcOpcode::kRecvWriteImm ||
            wc[i].imm != static_cast<uint32_t>(seq) || wc[i].byte_len != msg_bytes ||
            !pattern::verify(b.buf.data() + (seq % o.window) * msg_bytes, msg_bytes, 0, seq)) {
          std::fprintf(stderr, "B: message %" PRIu64 " failed verification (status %s, imm %u)\n",
                       seq, engine::wc_status_name(wc[i].status), wc[i].imm);
          ++errors;
          continue;
        }
        ++verified_msgs;
        interval_bytes += msg_bytes;
        if (!check(b.ep.post_recv(b.qpn, engine::RecvRequest{seq}), "post_recv")) ++errors;
      }
    }
    for (Side* s : sides) {
      engine::Event ev[32];
      while ((n = s->ep.poll_events(ev, 32)) > 0) {
        for (size_t i = 0; i < n; ++i) {
          if (ev[i].type == engine::EventType::kEvStateChange) {
            ++ev_changes;
            if (ev[i].ev.new_state == engine::EvState::kAssumedBad) ++bad_evs;
            if (ev[i].ev.old_state == engine::EvState::kAssumedBad) --bad_evs;
          } else if (ev[i].type == engine::EventType::kQpError) {
            std::fprintf(stderr, "QP error: %s\n", ev[i].reason ? ev[i].reason : "");
            ++qp_errors;
            ++errors;
          }
        }
      }
    }
  };

  const double limit_ns = 60e9;  // virtual; a stuck transfer ends the run
  while (verified_msgs < total_msgs && now < limit_ns && errors == 0) {
    // Next instant anything happens.
    double next = limit_ns;
    if (!fabric.arrivals().empty()) next = fabric.arrivals().top().at_ns;
    for (Side* s : sides) next = std::min(next, static_cast<double>(s->ep.next_wakeup()));
    if (!failed) next = std::min(next, fail_ns);
    now = std::max(now, next);

    if (!failed && now >= fail_ns) {
      failed = true;
      const auto p = static_cast<uint8_t>(o.fail_plane);
      fabric.set_blackholed(p, true);
      if (o.fail_link_down)
        for (Side* s : sides) s->ep.set_plane_up(p, false, static_cast<TimeNs>(now));
    }

    while (!fabric.arrivals().empty() && fabric.arrivals().top().at_ns <= now) {
      Arrival arr = std::move(const_cast<Arrival&>(fabric.arrivals().top()));
      fabric.arrivals().pop();
      wire::PacketView v;
      if (wire::parse(arr.frame, parse_cfg, &v) != wire::ParseStatus::kOk) {
        ++parse_errors;
        continue;
      }
      // Goodput is payload B did not have: a copy of a packet it already
      // placed (a needless resend) is not counted.
      const uint64_t copies = duplicates(b);
      sides[arr.dst]->ep.on_packet(v, arr.plane, static_cast<TimeNs>(now));
      if (arr.dst == 1 && wire::is_data(v.t.opcode) && duplicates(b) == copies)
        record(v.payload_len);
    }

    drain();

    size_t n;
    for (int side = 0; side < 2; ++side) {
      while ((n = sides[side]->ep.poll_tx(tx.data(), tx.size(), static_cast<TimeNs>(now))) > 0) {
        for (size_t i = 0; i < n; ++i) {
          const engine::TxPacket& p = tx[i];
          const wire::FrameSpec f = frame_spec(side, p.plane);
          const wire::WireEv ev = p.wire_ev ? *p.wire_ev : wire::WireEv{};
          const wire::TxMarking mark = p.is_data ? wire::TxMarking{26, wire::kEcnEct0}
                                                 : wire::TxMarking{48, wire::kEcnNotEct};
          const size_t len =
              wire::build_packet(f, ev, mark, p.t, {p.payload, p.payload_len}, scratch);
          if (len == 0) {
            std::fprintf(stderr, "smrc-loopback: the engine emitted an unbuildable packet\n");
            return 1;
          }
          fabric.send(side, p.plane, std::vector<uint8_t>(scratch.begin(), scratch.begin() + len),
                      now);
        }
      }
    }

    drain();

    while (now >= next_report) {
      const FabricCounters& fc = fabric.counters();
      std::printf("t=%6.1f ms  goodput %6.1f Gb/s  planes Gb/s", next_report / 1e6,
                  interval_bytes * 8 / interval_ns);
      for (uint32_t p = 0; p < o.planes; ++p) {
        std::printf(" %5.1f", (fabric.tx_bytes()[p] - last_plane_bytes[p]) * 8 / interval_ns);
        last_plane_bytes[p] = fabric.tx_bytes()[p];
      }
      const engine::Qp* qp = a.ep.qp(a.qpn);
      const uint32_t usable = qp ? qp->evs().usable_count() : 0;
      std::printf("  trims %" PRIu64 "  ce %" PRIu64 "  drops %" PRIu64
                  "  EVs usable %u/%zu (bad %u)\n",
                  fc.trims, fc.ce_marks, fc.dropped, usable, evs_a.size(), bad_evs);
      interval_bytes = 0;
      next_report += interval_ns;
    }
  }

  const double elapsed_ms = now / 1e6;
  // What was verified, over the time it took (not what was asked for).
  const uint64_t verified_bytes = verified_msgs * msg_bytes;
  const double goodput = now > 0 ? static_cast<double>(verified_bytes) * 8 / now : 0.0;
  std::printf("\n%.2f GiB verified in %.1f virtual ms (%.1f Gb/s), %" PRIu64 " errors, %" PRIu64
              " parse errors, %" PRIu64 " EV state changes, %" PRIu64 " packets B already had\n",
              verified_bytes / double(1ull << 30), elapsed_ms, goodput, errors, parse_errors,
              ev_changes, duplicates(b));
  if (failed)
    report_dip(o, bins, bin_ns, fail_ns);
  else if (o.fail_plane >= 0)
    std::printf("plane %d did not fail: the run ended before t=%.1f ms\n", o.fail_plane,
                o.fail_at_ms);
  const FabricCounters& fc = fabric.counters();
  std::printf("fabric: %" PRIu64 " packets, %" PRIu64 " trimmed, %" PRIu64 " CE-marked, %" PRIu64
              " dropped\n",
              fc.packets, fc.trims, fc.ce_marks, fc.dropped);
  const bool ok = verified_msgs == total_msgs && errors == 0 && parse_errors == 0 && qp_errors == 0;
  std::printf("%s\n", ok ? "PASS: every byte verified" : "FAIL");
  return ok ? 0 : 1;
}
