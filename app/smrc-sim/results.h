// What one run of the simulator measured, and how it is written out:
// a summary on the terminal, summary.json, and CSV files that
// scripts/sim-plot.py turns into plots (docs/simulation.md, "Results").
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fabric/link.h"
#include "scenario.h"
#include "stack.h"

namespace softmrc::sim {

struct StepRecord {
  uint32_t step = 0;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;   // the last transfer's data arrived, or it failed: the step time ends
                       // here (the run's end for a step the run stopped in)
  TimeNs done_ns = 0;  // every connection of the step released
  uint32_t transfers = 0;
  uint32_t failed = 0;
  bool complete = false;
  TimeNs time_ns() const { return end_ns - start_ns; }
};

// One slice of the time series.
struct Bin {
  uint64_t rx_bytes = 0;  // payload placed at receivers (goodput)
  uint32_t ev_to_bad = 0;
  uint32_t ev_to_good = 0;
  uint32_t drops = 0;
  uint32_t trims = 0;

  Bin& operator+=(const Bin& o) {
    rx_bytes += o.rx_bytes;
    ev_to_bad += o.ev_to_bad;
    ev_to_good += o.ev_to_good;
    drops += o.drops;
    trims += o.trims;
    return *this;
  }
};

// One transfer, kept when SimOptions::record_transfers is set (tests).
struct TransferRecord {
  Transfer t;
  TimeNs start_ns = 0;
  TimeNs delivered_ns = 0;  // 0: never
  TimeNs done_ns = 0;       // done or failed; 0: neither
  bool failed = false;
};

struct FaultNote {
  TimeNs at_ns = 0;
  std::string what;
};

struct RunResult {
  std::string scenario;
  TransportKind transport = TransportKind::kMrc;
  uint64_t seed = 0;
  uint32_t hosts = 0;
  uint64_t host_rate_mbps = 0;  // a host's NIC: planes x link rate
  bool finished = false;        // every step completed
  std::string stop;             // why the run ended
  TimeNs end_ns = 0;
  std::vector<StepRecord> steps;
  std::vector<TimeNs> mct_ns;     // message completion times, sorted
  std::vector<double> flow_gbps;  // per transfer: bytes / completion time, sorted
  std::vector<uint64_t> host_rx_bytes;
  TimeNs bin_ns = 0;
  std::vector<Bin> bins;  // [b x bin_ns, (b + 1) x bin_ns), the last one up to end_ns
  std::vector<FaultNote> faults;
  std::vector<TransferRecord> transfers;  // step by step, by id (record_transfers only)
  // Fabric, over every link.
  std::array<uint64_t, static_cast<size_t>(fabric::DropReason::kCount)> drops{};
  uint64_t trims = 0;
  uint64_t ce_marks = 0;
  uint64_t corruptions = 0;  // data packets whose payload a corrupt fault rewrote
  double util_host_up = 0;   // mean busy share of NIC-to-leaf links over the run
  double util_fabric = 0;    // ...of leaf/spine links
  double util_fabric_max = 0;
  double util_host_down = 0;
  StackCounters stack;
  // Cost.
  uint64_t events = 0;
  double wall_s = 0;           // filled by the caller
  uint64_t rss_bytes = 0;      // filled by the caller when it can measure
  uint64_t payload_bytes = 0;  // delivered

  uint64_t steps_failed() const;
  // Step time quantile (q in [0, 1]) over completed steps, 0 if none.
  TimeNs step_quantile(double q) const;
};

// q-quantile of a sorted vector (nearest rank), 0 if empty.
template <typename T>
T quantile(const std::vector<T>& sorted, double q) {
  if (sorted.empty()) return T{};
  const auto i = static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

// Goodput of all hosts in time-series bin `b`, Gb/s, over the part of the
// bin the run covered: the last bin ends with the run, usually part way.
double bin_gbps(const RunResult& r, size_t b);

void print_summary(std::FILE* out, const RunResult& r);
// Writes summary.json, steps.csv, timeseries.csv and hosts.csv into `dir`.
// Returns an empty string or what went wrong.
std::string write_results(const std::string& dir, const Scenario& sc,
                          const std::vector<RunResult>& runs);

}  // namespace softmrc::sim
