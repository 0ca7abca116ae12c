// smrc-perf: perftest-style RDMA Write bandwidth and latency between two
// applications on softmrcd endpoints, through libsoftmrc. Without a
// server host it is the server, which takes the test's parameters from
// the client. Output follows the OCP MRC benchmark's columns.
#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cli/number.h"
#include "cli/version.h"
#include "perf.h"

namespace {

using namespace softmrc;
using perf::Test;

struct Cli {
  perf::Options opt;
  bool json = false;
  int progress = -1;  // -1: when standard error is a terminal
};

void usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: smrc-perf write_bw|write_lat [options] [SERVER]\n"
      "RDMA Write bandwidth (write_bw) or round-trip latency (write_lat) between two\n"
      "applications, each on its softmrcd endpoint. Without SERVER this side is the\n"
      "server: it waits for a client on --port and takes the test parameters (sizes,\n"
      "iterations, window, QPs, --bidir) from it. QP numbers, addresses and keys are\n"
      "exchanged over that TCP connection; the receiver checks every byte of each size\n"
      "after a final Write-with-Immediate.\n\n"
      "  -d, --socket PATH       softmrcd application socket (default: $SOFTMRC_SOCKET,\n"
      "                          else " SMRC_DEFAULT_SOCKET
      ")\n"
      "  -p, --port N            TCP port of the exchange (1..65535, default 18515)\n"
      "  -m, --min-size N        smallest message in bytes (1..67108864, default 1)\n"
      "  -s, --max-size N        largest message in bytes (1..67108864, default 65536)\n"
      "  -f, --step-factor N     each size is N times the previous (2..1024, default 2)\n"
      "  -n, --iters N           timed messages per size and QP\n"
      "                          (1..1000000000, default 1000)\n"
      "  -w, --warmup N          untimed messages first (0..1000000, default 100)\n"
      "  -t, --window N          write_bw: Writes outstanding per QP (1..65536, default 128)\n"
      "  -c, --signal-every N    a completion every N-th Write (1..65536, default 64;\n"
      "                          write_bw: at most --window, else lowered to it)\n"
      "  -q, --qps N             write_bw: QPs, used at once (1..4096, default 1)\n"
      "  -b, --bidir             write_bw: both sides send at once\n"
      "      --ev-profile P      the daemon's EV profile for the QPs: a name from its\n"
      "                          configuration, or the number of one made with smrcctl\n"
      "                          (default: its own)\n"
      "      --cc-profile P      the same for the CC profile\n"
      "  -e, --use-event         sleep on a completion channel instead of spinning\n"
      "      --timeout-ms N      give up when one wait (for the peer's next message or\n"
      "                          the next completion) takes longer (1..3600000,\n"
      "                          default 30000)\n"
      "      --json              one JSON object per message size on standard output\n"
      "      --progress          a progress bar on standard error (default: on a terminal)\n"
      "      --no-progress       never\n"
      "  -h, --help              this text\n"
      "      --version           softmrc's release and libsoftmrc's version string\n\n"
      "write_bw prints MsgSize, TotalOps (messages of all QPs), BW_avg in Gb/s and\n"
      "MsgRate in Mpps; with --bidir each side prints what it sent. write_lat prints\n"
      "round-trip percentiles in microseconds (nearest rank; under 1000 --iters,\n"
      "p99.9 is the max): a Write-with-Immediate there and one back. Exit status: 0\n"
      "when every size ran and verified, 1 when something failed (the message says\n"
      "what), 2 for bad arguments.\n");
}

bool parse(int argc, char** argv, Cli* c, std::string* err) {
  enum : int { kEvProfile = 256, kCcProfile, kTimeout, kJson, kProgress, kNoProgress, kVersion };
  static const option kLong[] = {
      {"socket", required_argument, nullptr, 'd'},
      {"port", required_argument, nullptr, 'p'},
      {"min-size", required_argument, nullptr, 'm'},
      {"max-size", required_argument, nullptr, 's'},
      {"step-factor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},
      {"warmup", required_argument, nullptr, 'w'},
      {"window", required_argument, nullptr, 't'},
      {"signal-every", required_argument, nullptr, 'c'},
      {"qps", required_argument, nullptr, 'q'},
      {"bidir", no_argument, nullptr, 'b'},
      {"ev-profile", required_argument, nullptr, kEvProfile},
      {"cc-profile", required_argument, nullptr, kCcProfile},
      {"use-event", no_argument, nullptr, 'e'},
      {"timeout-ms", required_argument, nullptr, kTimeout},
      {"json", no_argument, nullptr, kJson},
      {"progress", no_argument, nullptr, kProgress},
      {"no-progress", no_argument, nullptr, kNoProgress},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, kVersion},
      {nullptr, 0, nullptr, 0},
  };
  perf::Options& o = c->opt;
  perf::Params& p = o.params;
  bool qps_set = false, window_set = false;
  const auto number = [&](const char* name, uint64_t lo, uint64_t hi, auto* out) {
    uint64_t v = 0;
    if (!cli::parse_uint(optarg, lo, hi, &v)) {
      *err = std::string(name) + ": '" + optarg + "' is not an integer in " + std::to_string(lo) +
             ".." + std::to_string(hi);
      return false;
    }
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(v);
    return true;
  };
  static const char kShort[] = ":d:p:m:s:f:n:w:t:c:q:beh";
  // The option getopt_long refused, as given: a long option's word, which it
  // has stepped past, else the letter, which may sit mid-cluster (-xb) with
  // optind still on it.
  const auto refused = [&](bool letter) {
    const std::string word = argv[optind - 1];
    return letter ? std::string("-") + static_cast<char>(optopt) : word.substr(0, word.find('='));
  };
  opterr = 0;
  int ch;
  while ((ch = getopt_long(argc, argv, kShort, kLong, nullptr)) != -1) {
    bool ok = true;
    switch (ch) {
      case 'd':
        o.socket = optarg;
        break;
      case 'p':
        ok = number("--port", 1, 65535, &o.port);
        break;
      case 'm':
        ok = number("--min-size", 1, perf::kMaxSize, &p.min_size);
        break;
      case 's':
        ok = number("--max-size", 1, perf::kMaxSize, &p.max_size);
        break;
      case 'f':
        ok = number("--step-factor", 2, perf::kMaxStepFactor, &p.step_factor);
        break;
      case 'n':
        ok = number("--iters", 1, perf::kMaxIters, &p.iters);
        break;
      case 'w':
        ok = number("--warmup", 0, perf::kMaxWarmup, &p.warmup);
        break;
      case 't':
        ok = number("--window", 1, perf::kMaxWindow, &p.window), window_set = true;
        break;
      case 'c':
        ok = number("--signal-every", 1, perf::kMaxSignalEvery, &p.signal_every);
        break;
      case 'q':
        ok = number("--qps", 1, perf::kMaxQps, &p.qps), qps_set = true;
        break;
      case 'b':
        p.bidir = true;
        break;
      case 'e':
        o.use_event = true;
        break;
      case kEvProfile:
        o.ev_profile = optarg;
        break;
      case kCcProfile:
        o.cc_profile = optarg;
        break;
      case kTimeout:
        ok = number("--timeout-ms", 1, perf::kMaxTimeoutMs, &o.timeout_ms);
        break;
      case kJson:
        c->json = true;
        break;
      case kProgress:
        c->progress = 1;
        break;
      case kNoProgress:
        c->progress = 0;
        break;
      case 'h':
        usage(stdout);
        std::exit(0);
      case kVersion:
        std::printf("%slibsoftmrc: %s\n", cli::version_text("smrc-perf").c_str(),
                    smrc_version_string());
        std::exit(0);
      case ':':
        // Only the last word can lack its value: a long option's, or a
        // cluster's last letter (-bp).
        *err = refused(argv[optind - 1][1] != '-') + " needs a value";
        return false;
      default:
        // optopt: 0 for an unknown long option, an unknown letter, or the
        // value of a long option given a value it takes none of.
        if (optopt != 0 && (optopt > 255 || (optopt != ':' && std::strchr(kShort, optopt)))) {
          *err = refused(false) + " takes no value";
        } else {
          *err = "unknown option " + refused(optopt != 0);
        }
        return false;
    }
    if (!ok) return false;
  }
  if (optind >= argc) {
    *err = "which test: write_bw or write_lat?";
    return false;
  }
  const std::string test = argv[optind++];
  if (test == "write_bw") {
    p.test = Test::kWriteBw;
  } else if (test == "write_lat") {
    p.test = Test::kWriteLat;
  } else {
    *err = "'" + test + "' is not a test: write_bw or write_lat";
    return false;
  }
  if (optind < argc) o.server = argv[optind++];
  if (optind < argc) {
    *err = std::string("unexpected argument '") + argv[optind] + "'";
    return false;
  }
  if (p.min_size > p.max_size) {
    *err = "--min-size " + std::to_string(p.min_size) + " is over --max-size " +
           std::to_string(p.max_size);
    return false;
  }
  if (p.test == Test::kWriteLat && (qps_set || window_set || p.bidir)) {
    *err =
        "write_lat runs one message at a time on one QP: --qps, --window and --bidir are "
        "write_bw's";
    return false;
  }
  // Only signaled Writes complete and free their window's slots: a window
  // that fills before a signaled Write is posted would never drain.
  if (p.test == Test::kWriteBw && p.signal_every > p.window) {
    std::fprintf(stderr, "smrc-perf: note: --signal-every %u is over --window %u; using %u\n",
                 p.signal_every, p.window, p.window);
    p.signal_every = p.window;
  }
  return true;
}

void progress(const Cli& c, size_t done, size_t total, uint64_t size) {
  if (c.progress == 0) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu sizes%s", filled, "##############################",
               kWidth - filled, "", done, total,
               done == total ? "          \n" : (" (" + std::to_string(size) + " B)").c_str());
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Cli c;
  std::string err;
  if (!parse(argc, argv, &c, &err)) {
    std::fprintf(stderr, "smrc-perf: %s (see --help)\n", err.c_str());
    return 2;
  }
  if (c.progress < 0) c.progress = isatty(STDERR_FILENO);
  perf::Session s(c.opt);
  if (!s.start(&err)) {
    std::fprintf(stderr, "smrc-perf: %s\n", err.c_str());
    return 1;
  }
  const perf::Params& p = s.params();  // the client's, on the server too
  const bool bw = p.test == Test::kWriteBw;
  const bool prints = s.sends() || (!bw && s.client());
  if (prints && !c.json) {
    if (bw)
      std::printf("%10s %12s %14s %14s\n", "MsgSize", "TotalOps", "BW_avg(Gbps)", "MsgRate(Mpps)");
    else
      std::printf("%10s %10s %10s %10s %10s %10s %10s   (round trip)\n", "MsgSize", "TotalOps",
                  "avg(us)", "p50(us)", "p99(us)", "p99.9(us)", "max(us)");
  }
  const std::vector<uint64_t> sizes = perf::sizes(p);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (prints) progress(c, i, sizes.size(), sizes[i]);
    perf::BwResult b;
    perf::LatResult l;
    if (!(bw ? s.run_bw(sizes[i], &b, &err) : s.run_lat(sizes[i], &l, &err))) {
      if (prints && c.progress) std::fputc('\n', stderr);
      std::fprintf(stderr, "smrc-perf: %s\n", err.c_str());
      return 1;
    }
    if (!prints) continue;
    if (c.progress) std::fputs("\r\033[K", stderr);
    if (bw && c.json) {
      std::printf(
          "{\"test\":\"write_bw\",\"msg_size\":%lu,\"total_ops\":%lu,\"qps\":%u,\"bidir\":%s,"
          "\"seconds\":%.9f,\"bw_gbps\":%.6g,\"msg_rate_mpps\":%.6g,\"verified\":true}\n",
          b.size, b.total_ops, p.qps, p.bidir ? "true" : "false", b.seconds, b.gbps(), b.mpps());
    } else if (bw) {
      std::printf("%10lu %12lu %14.3f %14.6f\n", b.size, b.total_ops, b.gbps(), b.mpps());
    } else if (c.json) {
      std::printf(
          "{\"test\":\"write_lat\",\"msg_size\":%lu,\"total_ops\":%lu,\"rtt_us\":{\"avg\":%.3f,"
          "\"p50\":%.3f,\"p99\":%.3f,\"p99_9\":%.3f,\"max\":%.3f},\"verified\":true}\n",
          l.size, l.total_ops, l.average(), l.percentile(500), l.percentile(990), l.percentile(999),
          l.percentile(1000));
    } else {
      std::printf("%10lu %10lu %10.2f %10.2f %10.2f %10.2f %10.2f\n", l.size, l.total_ops,
                  l.average(), l.percentile(500), l.percentile(990), l.percentile(999),
                  l.percentile(1000));
    }
    std::fflush(stdout);
  }
  if (prints) progress(c, sizes.size(), sizes.size(), 0);
  if (!s.finish(&err)) {
    std::fprintf(stderr, "smrc-perf: %s\n", err.c_str());
    return 1;
  }
  if (!prints && !c.json)
    std::printf("smrc-perf: %zu message sizes received and verified\n", sizes.size());
  return 0;
}
