// Where the traffic generator's QPs live, on both ends of every flow: the
// QPN, the key and the address of each flow QP's buffer, derived from the
// `traffic` list alone. Two processes that read the same list agree on
// them without exchanging a byte, so a flow may leave an endpoint of one
// softmrcd and reach an endpoint of another (a peer).
//
// The rule, on every endpoint (hosted or peer): the flows that touch it are
// taken in list order, and QP q of each gets the endpoint's next QPN (from
// 1) and its next registered region. The region is registered at address 0
// (an MRC address is the registrant's choice: only the key and the offset
// reach memory), and its key is the one a fresh engine::MemoryTable hands
// out for that registration. A hosted endpoint creates its QPs and regions
// in exactly this order, before anything else, and the daemon checks that
// its engine agreed.
#pragma once

#include <cstdint>
#include <vector>

#include "softmrcd/config.h"

namespace softmrc::softmrcd {

struct FlowQpEnd {
  uint32_t qpn = 0;
  uint32_t rkey = 0;  // of the QP's buffer (slots x size bytes)
  uint64_t va = 0;    // the buffer's first byte
};

struct FlowQp {
  FlowQpEnd from;  // the requester's
  FlowQpEnd to;    // the responder's
};

class TrafficPlan {
 public:
  // `cfg` was validated: every flow's QPs fit limits.max_qps and
  // limits.max_regions on both of its endpoints.
  explicit TrafficPlan(const Config& cfg);

  const FlowQp& qp(uint32_t flow, uint32_t q) const { return qps_[first_[flow] + q]; }

 private:
  std::vector<uint32_t> first_;  // per flow: its QP 0 in qps_
  std::vector<FlowQp> qps_;
};

}  // namespace softmrc::softmrcd
