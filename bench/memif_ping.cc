// memif_ping: round trips of raw frames over one DPDK port, the baseline
// that bench/api.py sets next to smrc-perf write_lat. The far side echoes
// (dpdk-testpmd --forward-mode=io on the other end of a net_memif link).
//
//   memif_ping [EAL options] -- [--frame B] [--burst N] [--count N] [--warmup N]
//                               [--timeout-ms N]
//
// Each round trip sends --burst frames of --frame bytes in one TX burst and
// waits until all of them are back; the TSC times it. The loop runs on the
// first worker lcore when there is one (so it can be pinned like softmrcd's
// polling lcore), else on the main lcore. Prints the percentiles in us;
// exit 0 when every round trip came back, 1 on a timeout or a setup
// failure, 2 for bad options.
#include <getopt.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/number.h"

namespace {

constexpr uint16_t kPort = 0;
constexpr uint16_t kMaxBurst = 32;
constexpr uint16_t kEtherType = 0x88b5;  // IEEE local experimental
constexpr uint32_t kMinFrame = 64;
constexpr uint32_t kHello = UINT32_MAX;  // wait_echo's frames, never a round trip's

struct Options {
  uint32_t frame = 174;
  uint16_t burst = 1;
  uint32_t count = 10000;
  uint32_t warmup = 100;
  uint32_t timeout_ms = 1000;
};

struct Run {
  Options opt;
  rte_mempool* pool = nullptr;
  std::vector<double> rtt_us;
  std::string err;
};

bool parse(int argc, char** argv, Options* o, std::string* err) {
  static const option kLong[] = {
      {"frame", required_argument, nullptr, 'f'},      {"burst", required_argument, nullptr, 'b'},
      {"count", required_argument, nullptr, 'n'},      {"warmup", required_argument, nullptr, 'w'},
      {"timeout-ms", required_argument, nullptr, 't'}, {nullptr, 0, nullptr, 0},
  };
  struct Bound {
    const char* name;
    uint64_t lo, hi;
  };
  opterr = 0;
  int ch;
  while ((ch = getopt_long(argc, argv, "", kLong, nullptr)) != -1) {
    uint64_t v = 0;
    Bound b{};
    switch (ch) {
      case 'f':
        b = {"--frame", kMinFrame, RTE_ETHER_MAX_LEN};
        break;
      case 'b':
        b = {"--burst", 1, kMaxBurst};
        break;
      case 'n':
        b = {"--count", 1, 100'000'000};  // below kHello
        break;
      case 'w':
        b = {"--warmup", 0, 1'000'000};
        break;
      case 't':
        b = {"--timeout-ms", 1, 60'000};
        break;
      default:
        *err = std::string("unknown option or missing value: ") + argv[optind - 1];
        return false;
    }
    if (!softmrc::cli::parse_uint(optarg, b.lo, b.hi, &v)) {
      *err = std::string(b.name) + ": '" + optarg + "' is not an integer in " +
             std::to_string(b.lo) + ".." + std::to_string(b.hi);
      return false;
    }
    switch (ch) {
      case 'f':
        o->frame = static_cast<uint32_t>(v);
        break;
      case 'b':
        o->burst = static_cast<uint16_t>(v);
        break;
      case 'n':
        o->count = static_cast<uint32_t>(v);
        break;
      case 'w':
        o->warmup = static_cast<uint32_t>(v);
        break;
      default:
        o->timeout_ms = static_cast<uint32_t>(v);
    }
  }
  if (optind < argc) {
    *err = std::string("unexpected argument '") + argv[optind] + "'";
    return false;
  }
  return true;
}

// Ethernet to the broadcast address, then the round trip's number and the
// frame's index in its burst: replies are matched on both, so a late frame
// of an earlier round trip is never taken for this one's.
bool fill(rte_mempool* pool, uint32_t frame, uint32_t seq, uint16_t index, rte_mbuf** out) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return false;
  auto* p = rte_pktmbuf_mtod(m, uint8_t*);
  std::memset(p, 0, frame);
  auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
  std::memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
  eth->src_addr.addr_bytes[0] = 0x02;
  eth->ether_type = rte_cpu_to_be_16(kEtherType);
  std::memcpy(p + sizeof(*eth), &seq, sizeof(seq));
  std::memcpy(p + sizeof(*eth) + sizeof(seq), &index, sizeof(index));
  m->data_len = m->pkt_len = frame;
  *out = m;
  return true;
}

bool ours(const rte_mbuf* m, uint32_t seq) {
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  if (m->data_len < sizeof(rte_ether_hdr) + sizeof(seq)) return false;
  uint32_t got;
  std::memcpy(&got, p + sizeof(rte_ether_hdr), sizeof(got));
  return got == seq;
}

// The far side may not forward yet when the link is up (dpdk-testpmd
// starts forwarding after its port): a frame every millisecond until one
// comes back.
bool wait_echo(Run& r, uint64_t timeout) {
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t t0 = rte_rdtsc();
  for (uint64_t next = t0; rte_rdtsc() - t0 < timeout;) {
    if (rte_rdtsc() >= next) {
      rte_mbuf* m;
      if (!fill(r.pool, r.opt.frame, kHello, 0, &m)) return false;
      if (rte_eth_tx_burst(kPort, 0, &m, 1) == 0) rte_pktmbuf_free(m);
      next = rte_rdtsc() + hz / 1000;
    }
    rte_mbuf* rx[kMaxBurst];
    const uint16_t n = rte_eth_rx_burst(kPort, 0, rx, kMaxBurst);
    bool back = false;
    for (uint16_t i = 0; i < n; ++i) back = back || ours(rx[i], kHello);
    rte_pktmbuf_free_bulk(rx, n);
    if (back) return true;
  }
  return false;
}

int ping(void* arg) {
  Run& r = *static_cast<Run*>(arg);
  const Options& o = r.opt;
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t timeout = hz / 1000 * o.timeout_ms;
  if (!wait_echo(r, timeout * 5)) {
    r.err = "nothing came back within " + std::to_string(o.timeout_ms * 5) + " ms";
    return -1;
  }
  r.rtt_us.reserve(o.count);
  for (uint32_t seq = 0; seq < o.warmup + o.count; ++seq) {
    rte_mbuf* tx[kMaxBurst];
    for (uint16_t i = 0; i < o.burst; ++i) {
      if (!fill(r.pool, o.frame, seq, i, &tx[i])) {
        rte_pktmbuf_free_bulk(tx, i);
        r.err = "out of mbufs";
        return -1;
      }
    }
    const uint64_t t0 = rte_rdtsc();
    uint16_t sent = 0;
    while (sent < o.burst && rte_rdtsc() - t0 < timeout)
      sent += rte_eth_tx_burst(kPort, 0, tx + sent, o.burst - sent);
    if (sent < o.burst) {
      rte_pktmbuf_free_bulk(tx + sent, o.burst - sent);
      r.err = "the port took no frames for " + std::to_string(o.timeout_ms) + " ms";
      return -1;
    }
    uint16_t back = 0;
    uint64_t t1 = t0;
    while (back < o.burst) {
      rte_mbuf* rx[kMaxBurst];
      const uint16_t n = rte_eth_rx_burst(kPort, 0, rx, kMaxBurst);
      t1 = rte_rdtsc();
      for (uint16_t i = 0; i < n; ++i) back += ours(rx[i], seq);
      rte_pktmbuf_free_bulk(rx, n);
      if (back < o.burst && t1 - t0 > timeout) {
        r.err = "round trip " + std::to_string(seq) + ": " + std::to_string(back) + " of " +
                std::to_string(o.burst) + " frames back within " + std::to_string(o.timeout_ms) +
                " ms";
        return -1;
      }
    }
    if (seq >= o.warmup) r.rtt_us.push_back(static_cast<double>(t1 - t0) * 1e6 / hz);
  }
  return 0;
}

bool setup_port(rte_mempool* pool, uint32_t timeout_ms, std::string* err) {
  if (rte_eth_dev_count_avail() == 0) {
    *err = "no port: give one with --vdev (e.g. net_memif0,role=client,socket=...)";
    return false;
  }
  rte_eth_conf conf{};
  if (rte_eth_dev_configure(kPort, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(kPort, 0, 1024, rte_socket_id(), nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(kPort, 0, 1024, rte_socket_id(), nullptr) != 0) {
    *err = "cannot set up port 0";
    return false;
  }
  // A memif client connects when it starts, and fails while its server
  // does not listen yet; its link is up once the server accepted it.
  const uint64_t deadline = rte_get_timer_cycles() + rte_get_timer_hz() / 1000 * timeout_ms * 5;
  while (rte_eth_dev_start(kPort) != 0) {
    if (rte_get_timer_cycles() > deadline) {
      *err = "cannot start port 0";
      return false;
    }
    rte_delay_ms(100);  // each failure logs a line
  }
  rte_eth_link link{};
  while (rte_eth_link_get_nowait(kPort, &link) == 0 && link.link_status != RTE_ETH_LINK_UP) {
    if (rte_get_timer_cycles() > deadline) {
      *err = "port 0's link did not come up";
      return false;
    }
    rte_delay_ms(10);
  }
  return true;
}

double percentile(const std::vector<double>& v, double p) {
  const size_t i = static_cast<size_t>(p / 100 * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  const int eal = rte_eal_init(argc, argv);
  if (eal < 0) {
    std::fprintf(stderr, "memif_ping: EAL init failed\n");
    return 1;
  }
  argc -= eal;
  argv += eal;
  Run r;
  if (!parse(argc, argv, &r.opt, &r.err)) {
    std::fprintf(stderr, "memif_ping: %s\n", r.err.c_str());
    rte_eal_cleanup();
    return 2;
  }
  r.pool = rte_pktmbuf_pool_create("ping_pool", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                   static_cast<int>(rte_socket_id()));
  int rc = r.pool != nullptr && setup_port(r.pool, r.opt.timeout_ms, &r.err) ? 0 : -1;
  if (r.pool == nullptr) r.err = "cannot create the mbuf pool";
  if (rc == 0) {
    const unsigned worker = rte_get_next_lcore(-1, 1, 0);
    if (worker < RTE_MAX_LCORE) {
      rte_eal_remote_launch(ping, &r, worker);
      rc = rte_eal_wait_lcore(worker);
    } else {
      rc = ping(&r);
    }
  }
  if (rc == 0) {
    std::vector<double>& v = r.rtt_us;
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    std::printf(
        "memif_ping: %zu round trips of %u x %u-byte frames: avg %.2f p50 %.2f p99 %.2f "
        "p99.9 %.2f max %.2f us\n",
        v.size(), r.opt.burst, r.opt.frame, sum / v.size(), percentile(v, 50), percentile(v, 99),
        percentile(v, 99.9), v.back());
  } else {
    std::fprintf(stderr, "memif_ping: %s\n", r.err.c_str());
  }
  rte_eth_dev_stop(kPort);
  rte_eth_dev_close(kPort);
  rte_eal_cleanup();
  return rc == 0 ? 0 : 1;
}
