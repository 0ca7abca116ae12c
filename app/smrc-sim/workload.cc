// Workload patterns and their order; see workload.h.
#include "workload.h"

#include <numeric>

#include "fabric/rng.h"

namespace softmrc::sim {

Workload::Workload(const WorkloadConfig& cfg, uint32_t hosts, uint64_t seed)
    : cfg_(cfg), hosts_(hosts), seed_(seed) {}

void Workload::add(uint32_t src, uint32_t dst, uint64_t bytes) {
  Transfer t;
  t.id = static_cast<uint32_t>(table_.size());
  t.src = src;
  t.dst = dst;
  t.bytes = bytes;
  t.step = step_;
  table_.push_back(t);
}

void Workload::begin_step(uint32_t step, std::vector<Transfer>* ready) {
  step_ = step;
  table_.clear();
  finished_ = 0;
  const uint32_t h = hosts_;
  switch (cfg_.pattern) {
    case Pattern::kPermutation: {
      // A derangement: shuffle until no host sends to itself (e tries on average).
      fabric::Rng rng(fabric::mix64(seed_ * 1'000'003 + step));
      std::vector<uint32_t> perm(h);
      bool fixed = true;
      while (fixed) {
        std::iota(perm.begin(), perm.end(), 0u);
        for (uint32_t i = h - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
        fixed = false;
        for (uint32_t i = 0; i < h; ++i) fixed = fixed || perm[i] == i;
      }
      for (uint32_t src = 0; src < h; ++src) add(src, perm[src], cfg_.message_bytes);
      *ready = table_;
      return;
    }
    case Pattern::kAllToAll: {
      for (uint32_t src = 0; src < h; ++src)
        for (uint32_t k = 0; k + 1 < h; ++k) add(src, (src + 1 + k) % h, cfg_.message_bytes);
      next_peer_.assign(h, cfg_.concurrency);
      for (uint32_t src = 0; src < h; ++src)
        for (uint32_t k = 0; k < cfg_.concurrency && k + 1 < h; ++k)
          ready->push_back(table_[src * (h - 1) + k]);
      return;
    }
    case Pattern::kIncast:
      for (uint32_t src = 1; src <= cfg_.incast_senders; ++src) add(src, 0, cfg_.message_bytes);
      *ready = table_;
      return;
    case Pattern::kRingAllReduce: {
      const uint64_t chunk = (cfg_.message_bytes + h - 1) / h;
      for (uint32_t phase = 0; phase < 2 * (h - 1); ++phase)
        for (uint32_t src = 0; src < h; ++src) add(src, (src + 1) % h, chunk);
      sent_.assign(h, 0);
      received_.assign(h, 0);
      started_.assign(h, 0);
      for (uint32_t src = 0; src < h; ++src) ring_try(src, ready);
      return;
    }
  }
}

// Starts host's next ring phase if its own previous send has finished and
// its predecessor's send of that phase has arrived.
void Workload::ring_try(uint32_t host, std::vector<Transfer>* ready) {
  const uint32_t phase = started_[host];
  if (phase >= 2 * (hosts_ - 1)) return;
  if (phase > 0 && (sent_[host] < phase || received_[host] < phase)) return;
  ++started_[host];
  ready->push_back(table_[phase * hosts_ + host]);
}

void Workload::finished(uint32_t id, std::vector<Transfer>* ready) {
  ++finished_;
  const Transfer& t = table_[id];
  switch (cfg_.pattern) {
    case Pattern::kPermutation:
    case Pattern::kIncast:
      return;
    case Pattern::kAllToAll: {
      uint32_t& k = next_peer_[t.src];
      if (k + 1 < hosts_) ready->push_back(table_[t.src * (hosts_ - 1) + k++]);
      return;
    }
    case Pattern::kRingAllReduce:
      ++sent_[t.src];
      ++received_[t.dst];
      ring_try(t.src, ready);
      ring_try(t.dst, ready);
      return;
  }
}

}  // namespace softmrc::sim
