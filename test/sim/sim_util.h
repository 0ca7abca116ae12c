// Helpers for the simulator tests: scenarios written inline as YAML, runs
// with a seed that SIM_SEED can override, and traces captured in memory.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fabric/config_node.h"
#include "scenario.h"
#include "simulator.h"

namespace softmrc::sim::test {

inline Scenario scenario(const std::string& yaml) {
  return read_scenario(fabric::ConfigNode::parse(yaml));
}

// The seed of a randomised test: `fallback`, or $SIM_SEED to replay one.
inline uint64_t seed_or_env(uint64_t fallback) {
  const char* s = std::getenv("SIM_SEED");
  return s ? std::strtoull(s, nullptr, 0) : fallback;
}

inline std::string seed_note(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay: SIM_SEED=" + std::to_string(seed) + ")";
}

struct SimRun {
  RunResult result;
  std::string trace;
};

// One run, with its trace when `trace` is set.
inline SimRun run(const Scenario& sc, TransportKind t, uint64_t seed, bool trace = false) {
  SimRun out;
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = trace ? open_memstream(&buf, &len) : nullptr;
  SimOptions opt;
  opt.transport = t;
  opt.seed = seed;
  opt.trace = f;
  opt.record_transfers = true;
  Simulator s(sc, opt);
  out.result = s.run();
  if (f) {
    std::fclose(f);
    out.trace.assign(buf, len);
    std::free(buf);
  }
  return out;
}

// Every transfer of every step delivered, none failed, bytes accounted.
inline void expect_all_delivered(const RunResult& r) {
  EXPECT_TRUE(r.finished) << r.stop;
  for (const StepRecord& s : r.steps) {
    EXPECT_TRUE(s.complete) << "step " << s.step;
    EXPECT_EQ(s.failed, 0u) << "step " << s.step;
  }
  uint64_t bytes = 0;
  for (const TransferRecord& t : r.transfers) {
    EXPECT_FALSE(t.failed) << t.t.src << "->" << t.t.dst << " step " << t.t.step;
    EXPECT_GT(t.delivered_ns, 0u) << t.t.src << "->" << t.t.dst << " step " << t.t.step;
    EXPECT_GE(t.done_ns, t.delivered_ns);
    bytes += t.t.bytes;
  }
  EXPECT_EQ(r.payload_bytes, bytes);
  EXPECT_EQ(r.mct_ns.size(), r.transfers.size());
  EXPECT_EQ(r.stack.verify_failures, 0u);
  EXPECT_EQ(r.stack.parse_errors, 0u);
  EXPECT_EQ(r.stack.qp_errors, 0u);
}

}  // namespace softmrc::sim::test
