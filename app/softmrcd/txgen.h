// The traffic generator, MRC's answer to testpmd's txonly: the flows of the
// `traffic` section, as requesters on the endpoint they leave and
// responders on the endpoint they reach. Every byte is checked at the
// responder against a pattern derived from (flow, QP, message index,
// offset), so neither side needs to tell the other anything.
//
//   wimm   message m is a Write-with-Immediate (imm = m) into responder slot
//          m % window; the responder checks it when its receive completes.
//   write  message m is a Write into slot m % (2 * window); after every
//          window of Writes (and when the flow stops) the requester sends a
//          0-byte WIMM marker whose immediate is the next message index.
//          Its receive completes only once every earlier Write is placed,
//          so the responder then checks the batch.
//
// A slot is reused only after the message in it completed at the
// requester, which needs an ACK that the responder sends only after it has
// polled (and checked) the completions it produced; so nothing is
// overwritten before it is checked.
//
// Owned by the endpoint's lcore; setup (add_*) runs before it starts.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/endpoint.h"
#include "softmrcd/config.h"
#include "softmrcd/stats.h"

namespace softmrc::softmrcd {

class Txgen {
 public:
  struct SenderSetup {
    uint32_t qpn = 0;
    FlowSpec flow;
    uint64_t stream = 0;
    uint8_t* buf = nullptr;  // slots(flow) * flow.size_bytes, registered under lkey
    uint32_t lkey = 0;
    uint64_t remote_va = 0;  // the responder's buffer
    uint32_t rkey = 0;
    bool fill = true;  // write the pattern (the line-rate mode's peer checks nothing)
  };
  struct ReceiverSetup {
    uint32_t qpn = 0;
    FlowSpec flow;
    uint64_t stream = 0;
    const uint8_t* buf = nullptr;
  };

  // Message slots in each side's buffer.
  static uint32_t slots(const FlowSpec& f) {
    return f.op == TrafficOp::kWimm ? f.window : 2 * f.window;
  }

  void init(uint32_t max_qps);
  void add_sender(const SenderSetup& s);
  // Posts the receives the responder keeps outstanding.
  engine::Status add_receiver(const ReceiverSetup& r, engine::Endpoint& ep);

  // Start (or resume) posting; duration limits count from `now`.
  void start(engine::TimeNs now);
  // Stop posting; what is outstanding still completes.
  void stop();

  void post(engine::Endpoint& ep, engine::TimeNs now);
  void on_completion(const engine::Completion& c, engine::Endpoint& ep);

  // Every sender reached its limit (or failed) and has nothing outstanding.
  bool finished() const;
  uint64_t in_flight() const;  // messages posted, not completed
  const TxgenCounters& counters() const { return counters_; }
  TxgenCounters& counters() { return counters_; }

 private:
  static constexpr uint64_t kMarker = uint64_t{1} << 63;  // wr_id of a batch marker

  struct Sender {
    SenderSetup s;
    uint32_t slots = 0;
    uint64_t next = 0;    // next message to post
    uint64_t marked = 0;  // write mode: messages before this have a marker posted
    uint32_t outstanding = 0;
    uint32_t markers_out = 0;
    engine::TimeNs deadline = engine::kNever;
    bool active = false;     // posting
    bool exhausted = false;  // its message count or duration is used up
    bool failed = false;     // an error stopped it
  };
  struct Receiver {
    ReceiverSetup r;
    uint32_t slots = 0;
    uint64_t expected = 0;  // next message to check
  };

  bool may_post(const Sender& s, engine::TimeNs now) const;
  void post_marker(Sender& s, engine::Endpoint& ep);
  void on_send_completion(Sender& s, const engine::Completion& c);
  void on_recv_completion(Receiver& r, const engine::Completion& c, engine::Endpoint& ep);
  bool check(const Receiver& r, uint64_t m);

  std::vector<Sender> senders_;
  std::vector<Receiver> receivers_;
  std::vector<int32_t> by_qpn_;  // >= 0: sender index; < 0: ~receiver index
  TxgenCounters counters_;
};

}  // namespace softmrc::softmrcd
