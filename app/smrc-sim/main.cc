// smrc-sim: runs a scenario (config/scenarios/*.yaml) on the simulated
// multi-plane fabric, once per transport and seed, and reports step times,
// message completion times, goodput, utilisation, retransmissions and EV
// state changes; --out writes them as JSON and CSV for scripts/sim-plot.py.
// Seeds of a sweep run in parallel (TBB); each run is deterministic.
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cli/number.h"
#include "cli/version.h"
#include "fabric/config_node.h"
#include "simulator.h"

namespace {

using namespace softmrc;
using sim::TransportKind;

struct Options {
  std::string scenario;
  bool have_seed = false;
  uint64_t seed = 0;
  uint32_t seeds = 1;
  uint32_t jobs = 0;  // 0: every core
  std::vector<TransportKind> transports;
  std::string out_dir;
  std::string trace;
  bool framed = false;
  int progress = -1;  // -1: when stderr is a terminal
  bool quiet = false;
};

void usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: smrc-sim SCENARIO.yaml [options]\n"
      "Runs a scenario on the simulated multi-plane fabric, in virtual time, once per\n"
      "transport (MRC over lib/engine, and the single-path go-back-N baseline) and seed.\n\n"
      "  --seed N          first seed (default: the scenario's run.seed)\n"
      "  --seeds N         run N seeds, from the first one up (1..10000, default 1), in\n"
      "                    parallel\n"
      "  --jobs N          threads for a sweep (1..256, default: every core)\n"
      "  --transport T     mrc, roce or both (default: the scenario's transports)\n"
      "  --out DIR         write summary.json, steps.csv, timeseries.csv and hosts.csv\n"
      "                    into DIR (created if missing); plot them with scripts/sim-plot.py\n"
      "  --trace FILE      one line per fault, routing change, port event, drop, trim, EV\n"
      "                    state change, delivery and step of a single run ('-': standard\n"
      "                    output)\n"
      "  --framed          build, trim, mark and parse every MRC packet through lib/wire\n"
      "  --progress        show progress on standard error: a bar per run, or the runs\n"
      "                    done in a parallel sweep (default: when it is a terminal)\n"
      "  --no-progress     never show it\n"
      "  --quiet           print nothing but errors\n"
      "  -h, --help        this text\n"
      "  --version         softmrc's release\n\n"
      "Exit status: 0 when every run was simulated (a transfer that fails is a result),\n"
      "1 if a run could not be set up, MRC delivered wrong bytes (a bug, or a corrupt\n"
      "fault whose switch recomputed the ICRC) or frames lib/wire refused for anything\n"
      "but their ICRC, or the results could not be written; 2 for bad arguments or a bad\n"
      "scenario file, or one with a fault the run cannot model (a corrupt fault needs\n"
      "framed MRC runs).\n");
}

bool parse_options(int argc, char** argv, Options* o) {
  enum : int {
    kSeed = 256,
    kSeeds,
    kJobs,
    kTransport,
    kOut,
    kTrace,
    kFramed,
    kProgress,
    kNoProgress,
    kQuiet,
    kVersion,
  };
  static const option kLong[] = {
      {"seed", required_argument, nullptr, kSeed},
      {"seeds", required_argument, nullptr, kSeeds},
      {"jobs", required_argument, nullptr, kJobs},
      {"transport", required_argument, nullptr, kTransport},
      {"out", required_argument, nullptr, kOut},
      {"trace", required_argument, nullptr, kTrace},
      {"framed", no_argument, nullptr, kFramed},
      {"progress", no_argument, nullptr, kProgress},
      {"no-progress", no_argument, nullptr, kNoProgress},
      {"quiet", no_argument, nullptr, kQuiet},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, kVersion},
      {nullptr, 0, nullptr, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "h", kLong, nullptr)) != -1) {
    uint64_t v = 0;
    const char* bad = nullptr;
    switch (c) {
      case kSeed:
        if (!cli::parse_uint(optarg, 0, UINT64_MAX, &o->seed)) bad = "--seed: not an integer >= 0";
        o->have_seed = true;
        break;
      case kSeeds:
        if (!cli::parse_uint(optarg, 1, 10'000, &v)) bad = "--seeds: not an integer in 1..10000";
        o->seeds = static_cast<uint32_t>(v);
        break;
      case kJobs:
        if (!cli::parse_uint(optarg, 1, 256, &v)) bad = "--jobs: not an integer in 1..256";
        o->jobs = static_cast<uint32_t>(v);
        break;
      case kTransport:
        if (std::strcmp(optarg, "mrc") == 0)
          o->transports = {TransportKind::kMrc};
        else if (std::strcmp(optarg, "roce") == 0)
          o->transports = {TransportKind::kRoce};
        else if (std::strcmp(optarg, "both") == 0)
          o->transports = {TransportKind::kMrc, TransportKind::kRoce};
        else
          bad = "--transport: must be mrc, roce or both";
        break;
      case kOut:
        o->out_dir = optarg;
        if (o->out_dir.empty()) bad = "--out: empty directory name";
        break;
      case kTrace:
        o->trace = optarg;
        if (o->trace.empty()) bad = "--trace: empty file name";
        break;
      case kFramed:
        o->framed = true;
        break;
      case kProgress:
        o->progress = 1;
        break;
      case kNoProgress:
        o->progress = 0;
        break;
      case kQuiet:
        o->quiet = true;
        break;
      case 'h':
        usage(stdout);
        std::exit(0);
      case kVersion:
        std::fputs(cli::version_text("smrc-sim").c_str(), stdout);
        std::exit(0);
      default:
        usage(stderr);
        return false;
    }
    if (bad) {
      std::fprintf(stderr, "smrc-sim: %s (got '%s')\n", bad, optarg);
      return false;
    }
  }
  if (optind + 1 != argc) {
    std::fprintf(stderr, optind == argc ? "smrc-sim: no scenario file given\n"
                                        : "smrc-sim: one scenario file only\n");
    usage(stderr);
    return false;
  }
  o->scenario = argv[optind];
  return true;
}

// Resident memory of this process, bytes.
uint64_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long pages = 0, resident = 0;
  const int got = std::fscanf(f, "%llu %llu", &pages, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

bool make_dirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string part = dir.substr(0, i);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

class ProgressBar {
 public:
  void show(const sim::Progress& p, const char* what) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double frac =
        (p.step + (p.transfers ? static_cast<double>(p.finished) / p.transfers : 0)) /
        std::max(1u, p.steps);
    const int width = 30;
    const int filled = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r%s [%.*s%*s] %3.0f%% step %u/%u  t=%.3f ms  %.2f M events/s ", what,
                 filled, "##############################", width - filled, "", 100 * frac,
                 p.step + 1, p.steps, static_cast<double>(p.now_ns) / 1e6,
                 secs > 0 ? static_cast<double>(p.events) / secs / 1e6 : 0.0);
    drawn_ = true;
  }
  void clear() {
    if (drawn_) std::fprintf(stderr, "\r%*s\r", 100, "");
    drawn_ = false;
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
  bool drawn_ = false;
};

struct Task {
  TransportKind transport;
  uint64_t seed;
};

sim::RunResult run_one(const sim::Scenario& sc, const Task& task, std::FILE* trace,
                       ProgressBar* bar, bool measure_memory) {
  sim::SimOptions opt;
  opt.transport = task.transport;
  opt.seed = task.seed;
  opt.trace = trace;
  if (bar)
    opt.progress = [bar, &task](const sim::Progress& p) {
      bar->show(p, sim::transport_name(task.transport));
    };
  const uint64_t rss_before = measure_memory ? rss_bytes() : 0;
  const auto t0 = std::chrono::steady_clock::now();
  sim::Simulator s(sc, opt);
  sim::RunResult r = s.run();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (measure_memory) {
    const uint64_t after = rss_bytes();
    r.rss_bytes = after > rss_before ? after - rss_before : 0;
  }
  if (bar) bar->clear();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, &o)) return 2;
  sim::Scenario sc;
  try {
    sc = sim::load_scenario(o.scenario);
  } catch (const fabric::ConfigError& e) {
    std::fprintf(stderr, "smrc-sim: %s\n", e.what());
    return 2;
  }
  if (o.framed) sc.run.framed = true;
  if (!o.transports.empty()) sc.run.transports = o.transports;
  for (TransportKind t : sc.run.transports) {
    if (std::string why = sim::unsupported(sc, t); !why.empty()) {
      std::fprintf(stderr, "smrc-sim: %s: %s\n", o.scenario.c_str(), why.c_str());
      return 2;
    }
  }
  const uint64_t first = o.have_seed ? o.seed : sc.run.seed;
  if (o.seeds - 1 > UINT64_MAX - first) {
    std::fprintf(stderr,
                 "smrc-sim: --seeds: %u seeds from %" PRIu64 " would pass the last seed, %" PRIu64
                 "\n",
                 o.seeds, first, UINT64_MAX);
    return 2;
  }

  std::vector<Task> tasks;
  for (uint32_t i = 0; i < o.seeds; ++i)
    for (TransportKind t : sc.run.transports) tasks.push_back(Task{t, first + i});
  if (!o.trace.empty() && tasks.size() != 1) {
    std::fprintf(stderr,
                 "smrc-sim: --trace needs a single run: one seed and one transport "
                 "(add --transport mrc or --transport roce)\n");
    return 2;
  }
  if (!o.out_dir.empty() && !make_dirs(o.out_dir)) {
    std::fprintf(stderr, "smrc-sim: --out: cannot create directory '%s'\n", o.out_dir.c_str());
    return 2;
  }
  std::FILE* trace = nullptr;
  if (!o.trace.empty()) {
    trace = o.trace == "-" ? stdout : std::fopen(o.trace.c_str(), "w");
    if (!trace) {
      std::fprintf(stderr, "smrc-sim: --trace: cannot write '%s'\n", o.trace.c_str());
      return 2;
    }
  }

  const unsigned cores = std::max(1u, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN)));
  const uint32_t jobs = o.jobs ? o.jobs : cores;
  const bool sequential = jobs == 1 || tasks.size() == 1;
  const bool show_progress =
      !o.quiet && (o.progress == 1 || (o.progress == -1 && isatty(STDERR_FILENO)));
  if (!o.quiet)
    std::printf("scenario %s: %u hosts, %u planes, %s, %s; %zu run%s\n", sc.name.c_str(),
                sc.topology.hosts, sc.topology.planes, sim::pattern_name(sc.workload.pattern),
                sc.run.framed ? "framed" : "metadata packets", tasks.size(),
                tasks.size() == 1 ? "" : "s");

  std::vector<sim::RunResult> results(tasks.size());
  try {
    if (sequential) {
      ProgressBar bar;
      for (size_t i = 0; i < tasks.size(); ++i)
        results[i] = run_one(sc, tasks[i], trace, show_progress ? &bar : nullptr, true);
    } else {
      tbb::global_control limit(tbb::global_control::max_allowed_parallelism, jobs);
      std::atomic<size_t> done{0};
      std::mutex print;
      tbb::parallel_for(size_t{0}, tasks.size(), [&](size_t i) {
        results[i] = run_one(sc, tasks[i], nullptr, nullptr, false);
        const size_t n = ++done;
        if (!show_progress) return;
        const std::lock_guard<std::mutex> lock(print);
        std::fprintf(stderr, "\r%zu/%zu runs done%s", n, tasks.size(),
                     n == tasks.size() ? "\n" : "");
      });
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "smrc-sim: %s\n", e.what());
    return 1;
  }
  if (trace && trace != stdout) std::fclose(trace);

  int status = 0;
  for (const sim::RunResult& r : results) {
    if (!o.quiet) print_summary(stdout, r);
    if (r.stack.verify_failures || r.stack.parse_errors) status = 1;
  }
  if (!o.out_dir.empty()) {
    if (std::string why = sim::write_results(o.out_dir, sc, results); !why.empty()) {
      std::fprintf(stderr, "smrc-sim: %s\n", why.c_str());
      return 1;
    }
    if (!o.quiet) std::printf("results in %s/\n", o.out_dir.c_str());
  }
  return status;
}
