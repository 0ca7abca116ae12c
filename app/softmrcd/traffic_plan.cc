// The traffic generator's QPNs, keys and addresses (see traffic_plan.h).
#include "softmrcd/traffic_plan.h"

#include <algorithm>

#include "engine/memory_table.h"

namespace softmrc::softmrcd {

TrafficPlan::TrafficPlan(const Config& cfg) {
  // Flow QPs per endpoint, in list order: the n-th gets QPN n + 1 and the
  // n-th region.
  std::vector<uint32_t> used(cfg.endpoints.size(), 0);
  for (const FlowSpec& f : cfg.traffic) {
    first_.push_back(static_cast<uint32_t>(qps_.size()));
    for (uint32_t q = 0; q < f.qps; ++q) {
      FlowQp x;
      x.from.qpn = ++used[f.from];
      x.to.qpn = ++used[f.to];
      qps_.push_back(x);
    }
  }

  // The key of the n-th registration on a fresh table, from the engine's
  // own table: the derivation follows the engine wherever its keys go.
  const uint32_t regions = used.empty() ? 0 : *std::max_element(used.begin(), used.end());
  std::vector<uint32_t> keys(regions, 0);
  engine::MemoryTable table;
  table.init(cfg.limits.max_regions);
  static uint8_t byte;  // the table wants a host address; it is never touched
  engine::Region r;
  r.host = &byte;
  for (uint32_t& key : keys) (void)table.register_region(r, &key);
  for (FlowQp& x : qps_) {
    x.from.rkey = keys[x.from.qpn - 1];
    x.to.rkey = keys[x.to.qpn - 1];
  }
}

}  // namespace softmrc::softmrcd
