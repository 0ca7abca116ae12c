// Workloads as training steps: each step is a set of transfers with an
// order among them, and a step ends when its slowest transfer ends (the
// step time is what a training job pays). Steps run back to back, separated
// by the configured compute time.
//
//   permutation     every host sends `message` to one other; a new random
//                   derangement (seeded) each step; all start at once
//   all_to_all      every host sends `message` to every other, in the
//                   pairwise order h+1, h+2, ... (mod H), `concurrency`
//                   transfers at a time per host
//   incast          hosts 1..n send `message` to host 0, all at once
//   ring_allreduce  2(H-1) phases around the ring 0 -> 1 -> ... -> 0; in each
//                   a host sends message/H to its successor, once its own
//                   previous send has finished and its predecessor's has
//                   arrived (reduce-scatter, then all-gather)
//
// Deterministic for a seed; no time of its own.
#pragma once

#include <cstdint>
#include <vector>

#include "scenario.h"
#include "stack.h"

namespace softmrc::sim {

class Workload {
 public:
  Workload(const WorkloadConfig& cfg, uint32_t hosts, uint64_t seed);

  uint32_t steps() const { return cfg_.steps; }
  // Builds step `step`; the transfers that may start at once go to *ready.
  void begin_step(uint32_t step, std::vector<Transfer>* ready);
  // Transfer `id` of the current step has finished (done or failed); what
  // that lets start goes to *ready.
  void finished(uint32_t id, std::vector<Transfer>* ready);

  uint32_t transfers() const { return static_cast<uint32_t>(table_.size()); }
  const Transfer& transfer(uint32_t id) const { return table_[id]; }
  uint32_t finished_count() const { return finished_; }
  bool step_complete() const { return finished_ == table_.size(); }

 private:
  void add(uint32_t src, uint32_t dst, uint64_t bytes);
  void ring_try(uint32_t host, std::vector<Transfer>* ready);

  WorkloadConfig cfg_;
  uint32_t hosts_;
  uint64_t seed_;
  uint32_t step_ = 0;
  std::vector<Transfer> table_;  // this step's transfers, by id
  uint32_t finished_ = 0;
  // all_to_all: the next peer index each host will send to.
  std::vector<uint32_t> next_peer_;
  // ring_allreduce: phases each host has sent (finished), received, started.
  std::vector<uint32_t> sent_, received_, started_;
};

}  // namespace softmrc::sim
