// The traffic generator, MRC's answer to testpmd's txonly: the flows of the
// `traffic` section, as requesters on the endpoint they leave and
// responders on the endpoint they reach. Every byte is checked at the
// responder against a pattern derived from (flow, QP, message index,
// offset), so neither side needs to tell the other anything.
//
//   wimm   message m is a Write-with-Immediate (imm = m) into responder slot
//          m % slots; its receive completion makes it due for checking.
//   write  message m is a Write into slot m % slots; after every window of
//          Writes (and when the flow stops) the requester sends a 0-byte
//          WIMM marker whose immediate is the next message index. Its
//          receive completes only once every earlier Write is placed, so
//          the batch is then due for checking.
//
// The responder checks a message a slice per lcore pass (more while it
// lags), so that checking a window of long messages does not hold up the
// lcore's ACKs for milliseconds. Each side has a window of slots more than
// the flow keeps in flight (2 x window for wimm, 3 x window for write),
// and the responder lets checking lag at most a window behind what
// arrived: a slot is reused only after the requester's window moved past
// a completion the responder produced, and before that completion's ACK
// leaves, every message that the moved window may overwrite is checked.
//
// The end of a flow: once a requester has used up its message count or
// duration and every message completed, it sends a 0-byte WIMM whose
// immediate is the number of messages (in write mode: a marker naming no
// new message). The responder checks that number and knows the flow is
// over, which is how a responder in another process learns when to stop.
// A daemon that is stopping ends its flows the same way (end_flows()), so
// the responder learns how many messages there were and stops too. It then
// lingers until nothing has arrived on the QP for `linger_ns`, so
// that a lost ACK of the end is answered when the requester resends it.
//
// A requester whose responder is hosted elsewhere starts only when that
// endpoint answers a connectionless probe (one every kProbeIntervalNs, on
// the planes in use in turn): the peer's QPs exist by then, and a duration
// counts from there.
//
// A responder whose requester is hosted elsewhere cannot tell a requester
// that is only quiet (stopped, or between flows of an interactive run)
// from one that is gone (killed, or its flow failed and its daemon
// stopped): once the QP has been quiet for half the flow's
// requester_timeout, it probes the requester's endpoint the same way, and
// an answer starts the quiet time again. A QP quiet for the whole timeout
// ends its flow unfinished, counted as an error. So does a responder's QP
// that failed (its receives flushed before abandon()): it gets nothing
// more.
//
// Owned by the endpoint's lcore; setup (add_*) runs before it starts.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/endpoint.h"
#include "softmrcd/config.h"
#include "softmrcd/stats.h"

namespace softmrc::softmrcd {

class Txgen {
 public:
  static constexpr engine::TimeNs kProbeIntervalNs = 10'000'000;

  struct SenderSetup {
    uint32_t qpn = 0;
    FlowSpec flow;
    uint64_t stream = 0;
    uint8_t* buf = nullptr;  // slots(flow) * flow.size_bytes, registered under lkey
    uint32_t lkey = 0;
    uint64_t remote_va = 0;  // the responder's buffer
    uint32_t rkey = 0;
    bool fill = true;  // write the pattern (the line-rate mode's peer checks nothing)
    // The responder's endpoint when another process hosts it: the sender
    // waits for it to answer a probe. engine::kUnknownPeer: hosted here.
    uint32_t remote_peer = engine::kUnknownPeer;
    const char* remote_name = "";  // for the log; outlives the Txgen
    // The address of buf in the lkey's region; none: buf's own address.
    std::optional<uint64_t> local_va = std::nullopt;
  };
  struct ReceiverSetup {
    uint32_t qpn = 0;
    FlowSpec flow;
    uint64_t stream = 0;
    const uint8_t* buf = nullptr;
    // The requester's endpoint when another process hosts it
    // (engine::kUnknownPeer: hosted here). The traffic is then done here
    // only once its end arrived and the QP was quiet for linger_ns, or the
    // requester went silent (flow.requester_timeout_ns).
    uint32_t remote_peer = engine::kUnknownPeer;
    const char* remote_name = "";  // for the log; outlives the Txgen
    engine::TimeNs linger_ns = 0;
  };

  // Message slots in each side's buffer: what may be in flight, plus a
  // window that checking may lag behind.
  static uint32_t slots(const FlowSpec& f) {
    return f.op == TrafficOp::kWimm ? 2 * f.window : 3 * f.window;
  }
  // The least a responder checks per pass while it lags; more when it lags
  // further (a fraction of what is unchecked).
  static constexpr uint64_t kCheckSliceBytes = 64 * 1024;

  void init(uint32_t max_qps);
  void add_sender(const SenderSetup& s);
  // Receives a responder keeps posted: one per WIMM the requester may have
  // in flight. In write mode those are markers, two at most: the last
  // batch's, whose ACK may still be on its way, and the next batch's; lost
  // and resent, the second may arrive first.
  static uint32_t receives(const FlowSpec& f) {
    return f.op == TrafficOp::kWimm ? f.window : kWriteMarkersInFlight;
  }

  // Posts the receives the responder keeps outstanding.
  engine::Status add_receiver(const ReceiverSetup& r, engine::Endpoint& ep);

  // Start (or resume) posting; duration limits count from `now` (or from
  // the peer's first probe reply). Flows already posting go on as they were.
  void start(engine::TimeNs now);
  // Stop posting; what is outstanding still completes.
  void stop();
  // Stop posting for good (the daemon is shutting down): every flow ends
  // as if it had reached its limit, with its end once what is outstanding
  // completed. What is outstanding now, and how it ends, is counted apart
  // (TxgenCounters::in_flight_at_stop).
  void end_flows();
  // The QPs are being flushed (the daemon's flush): nothing more can be
  // posted, no batch marker and no end (a flow's end then goes unsent, and
  // is owed no more), and flushed receives are no failure.
  void abandon();

  // Once per lcore pass: post what the senders' windows allow and check a
  // slice of what the receivers have not checked yet.
  void post(engine::Endpoint& ep, engine::TimeNs now);
  // Check everything that arrived (the daemon is stopping).
  void finish_checks();
  void on_completion(const engine::Completion& c, engine::Endpoint& ep);
  // An engine::EventType::kProbeReply event.
  void on_probe_reply(const engine::Event& e, engine::TimeNs now);

  // Every sender reached its limit (or failed) and has nothing outstanding,
  // and every flow from another process ended here.
  bool finished() const;
  uint64_t in_flight() const;  // messages posted, not completed
  uint64_t ends_owed() const;  // flows at their limit whose end has not completed
  const TxgenCounters& counters() const { return counters_; }
  TxgenCounters& counters() { return counters_; }

 private:
  static constexpr uint64_t kMarker = uint64_t{1} << 63;  // wr_id of a batch marker
  static constexpr uint64_t kEnd = uint64_t{1} << 62;     // wr_id of the end marker

  struct Sender {
    SenderSetup s;
    uint32_t slots = 0;
    uint64_t local_va = 0;  // buf in the lkey's region
    uint64_t next = 0;      // next message to post
    uint64_t marked = 0;    // write mode: messages before this have a marker posted
    uint32_t outstanding = 0;
    uint32_t markers_out = 0;
    engine::TimeNs deadline = engine::kNever;
    bool waiting = false;    // for its remote peer to answer a probe
    bool active = false;     // posting
    bool exhausted = false;  // its message count or duration is used up
    bool failed = false;     // an error stopped it
    bool end_posted = false;
    bool end_out = false;  // the end marker is outstanding
    bool ended = false;    // ... and completed
  };
  struct Receiver {
    ReceiverSetup r;
    uint32_t slots = 0;
    uint64_t expected = 0;      // next message to arrive (write: a marker to name)
    uint64_t checked = 0;       // messages before this are checked
    uint64_t check_offset = 0;  // bytes of message `checked` checked so far
    bool check_failed = false;  // ... and they differ
    bool ended = false;         // the end marker arrived, or the requester went silent
    bool done = false;          // ... and the QP has been quiet since (remote only)
    uint64_t rx_seen = 0;       // the QP's data packets when last looked at
    engine::TimeNs quiet_since = engine::kNever;  // kNever: nothing arrived yet
  };
  // Another process's endpoint that this one's flows start from or lead to.
  struct Peer {
    uint32_t index = 0;  // endpoint index, also the probes' req_id
    const char* name = "";
    bool awaited = false;  // senders wait for its first answer
    bool asking = false;   // a receiver's quiet requester: is it still there?
    engine::TimeNs next_probe = 0;
    uint8_t next_plane = 0;
  };

  bool may_post(const Sender& s, engine::TimeNs now) const;
  Peer& peer(uint32_t index, const char* name);
  void probe(engine::Endpoint& ep, engine::TimeNs now);
  static engine::WriteRequest control_wimm(const Sender& s, uint64_t tag);
  void post_marker(Sender& s, engine::Endpoint& ep);
  void post_end(Sender& s, engine::Endpoint& ep);
  // Whether the QP has seen packets since the last look (and since when
  // it has been quiet).
  static bool heard(Receiver& r, const engine::Endpoint& ep, engine::TimeNs now);
  void linger(Receiver& r, const engine::Endpoint& ep, engine::TimeNs now);
  void watch_requester(Receiver& r, const engine::Endpoint& ep, engine::TimeNs now);
  void end(Receiver& r);
  void on_send_completion(Sender& s, const engine::Completion& c);
  void on_recv_completion(Receiver& r, const engine::Completion& c, engine::Endpoint& ep);
  // Checks messages before `until`, at most `budget` bytes of them. A
  // budget that ends inside a message is whole 8-byte words, so the next
  // part starts on a word of the pattern.
  void check(Receiver& r, uint64_t until, uint64_t budget);
  // Checks what the requester's window may overwrite once the completion
  // that brought `expected` here is acknowledged.
  void check_before_ack(Receiver& r);
  // A message that arrived wrong: what came before it is checked, it is not.
  void skip(Receiver& r, uint64_t count);

  std::vector<Sender> senders_;
  std::vector<Receiver> receivers_;
  std::vector<Peer> peers_;
  std::vector<int32_t> by_qpn_;  // >= 0: sender index; < 0: ~receiver index
  TxgenCounters counters_;
  bool shutting_down_ = false;  // end_flows() was called
  bool abandoned_ = false;      // abandon() was called
};

}  // namespace softmrc::softmrcd
