// libFuzzer target for engine::Endpoint: whatever a remote peer sends, in
// whatever order, against an endpoint with live QPs, registered regions and
// work outstanding.
//
// Each input is a script: packets (built from the input's fields, framed
// with wire::build_packet and let through only if wire::parse accepts them,
// as softmrcd would), passes of poll_tx, time going by, new Writes and
// receives, planes going down and up, a QP moved to ERROR, abandoned or
// aborted and reopened; a placement is sometimes left to the script, as
// softmrcd leaves it (on_packet's DeferredCopy). The promises checked:
//   - nothing is written outside a region registered with remote write:
//     the pages around each region and a deregistered region are poisoned
//     for ASan, so any access aborts, and a region registered without
//     remote write must still hold its fill pattern at the end;
//   - no crash, no undefined behaviour (UBSan), whatever the sequence;
//   - every completion names a QP of the endpoint and a known status.
// Any broken promise aborts, and libFuzzer saves the input.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fuzz_endpoint.h"

namespace softmrc::fuzz {
namespace {

using engine::TimeNs;

constexpr uint8_t kUntouched = 0x5a;  // the fill of the region without remote write

struct Target {
  uint64_t va;
  uint32_t key;
  uint64_t len;
};

class Script {
 public:
  Script()
      : remote_(64 * 1024, kUntouched),
        local_only_(8 * 1024, kUntouched),
        gone_(4096, kUntouched),
        evs_(fuzz_evs()) {
    if (!ep_.init(endpoint_config(4, 8)).ok()) fail("init");
    targets_[0] =
        add_region(remote_, 0x10000000, engine::kAccessLocalWrite | engine::kAccessRemoteWrite);
    targets_[1] = add_region(local_only_, 0x20000000, engine::kAccessLocalWrite);
    targets_[2] = add_region(gone_, 0x30000000, engine::kAccessRemoteWrite);
    if (!ep_.deregister_region(targets_[2].key).ok()) fail("deregister");
    gone_.poison_all();
    for (uint32_t k = 0; k < 2; ++k) open_qp(k);
    for (size_t i = 0; i < sizeof(payload_); ++i) payload_[i] = static_cast<uint8_t>(i * 7);
  }

  void run(FuzzedDataProvider& in) {
    for (int step = 0; step < 256 && in.remaining_bytes() > 0; ++step) {
      switch (in.ConsumeIntegralInRange<int>(0, 11)) {
        case 0:
        case 1:
        case 2:
        case 3:
        case 4: {
          uint32_t len = 0;
          const wire::Transport t = data_packet(in, &len);
          deliver(in, t, len);
          break;
        }
        case 5:
          deliver(in, feedback_packet(in));
          break;
        case 6:
          deliver(in, other_packet(in));
          break;
        case 7:
          now_ += in.ConsumeIntegralInRange<TimeNs>(0, 5'000'000);
          poll();
          break;
        case 8:
          post_write(in);
          break;
        case 9:
          (void)ep_.post_recv(qp(in), engine::RecvRequest{in.ConsumeIntegral<uint16_t>()});
          break;
        case 10: {
          const uint8_t plane = in.ConsumeIntegralInRange<uint8_t>(0, kPlanes - 1);
          ep_.set_plane_up(plane, !ep_.plane_up(plane), now_);
          break;
        }
        default:
          // Rarely: an ERROR QP (moved there, or abandoned) takes no more
          // packets, and the script would have little left to do; an
          // aborted one (its application gone) is reopened at once,
          // receiving only (RTR) or in RTS.
          switch (in.ConsumeIntegralInRange<int>(0, 15)) {
            case 0: {
              engine::QpAttr a;
              a.state = engine::QpState::kError;
              (void)ep_.modify_qp(qp(in), a, engine::kAttrState, now_);
              break;
            }
            case 2:  // as softmrcd's shutdown does, telling the peer
              if (!ep_.abandon_qp(qp(in), now_).ok()) fail("abandon_qp");
              break;
            case 1: {
              const uint32_t k = in.ConsumeBool();
              if (!ep_.abort_qp(qpns_[k], now_).ok()) fail("abort_qp");
              open_qp(k, in.ConsumeBool() ? engine::QpState::kRtr : engine::QpState::kRts);
              break;
            }
            default:
              poll();
              break;
          }
          break;
      }
    }
    now_ += 10'000'000;
    poll();
    for (size_t i = 0; i < local_only_.size(); ++i)
      if (local_only_.data()[i] != kUntouched) fail("a region without remote write was written");
  }

 private:
  Target add_region(GuardedRegion& r, uint64_t va, uint32_t access) {
    Target t{va, 0, r.size()};
    const engine::Region region{va, r.size(), r.data(), access};
    if (!ep_.register_region(region, &t.key).ok()) fail("register_region");
    return t;
  }

  // QP k, connected to the peer's QP 100 + k (up to `last`), with receives
  // posted.
  void open_qp(uint32_t k, engine::QpState last = engine::QpState::kRts) {
    if (!ep_.create_qp(&qpns_[k]).ok()) fail("create_qp");
    if (qpns_[k] >= sizeof(ours_)) fail("a QPN over max_qps");
    ours_[qpns_[k]] = true;
    // The first QP retries forever, the second gives up soon.
    if (!ep_.connect_qp(qpns_[k], qp_attr(evs_, 100 + k, k == 0), now_, last).ok())
      fail("connect_qp");
    for (int i = 0; i < 8; ++i) (void)ep_.post_recv(qpns_[k], engine::RecvRequest{});
  }

  // A QP in ERROR takes no more packets: it is replaced, as an application
  // would, so that the rest of the script still has QPs to reach.
  void replace_failed_qps() {
    for (uint32_t k = 0; k < 2; ++k) {
      if (ep_.qp(qpns_[k])->state() != engine::QpState::kError) continue;
      if (!ep_.destroy_qp(qpns_[k]).ok()) fail("destroy_qp");
      open_qp(k);
    }
  }

  uint32_t qp(FuzzedDataProvider& in) { return qpns_[in.ConsumeBool()]; }

  // A destination QPN: mostly ours, sometimes the connectionless one or any.
  uint32_t dest_qpn(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        return 0;
      case 1:
        return in.ConsumeIntegralInRange<uint32_t>(0, wire::kQpnMask);
      default:
        return qp(in);
    }
  }

  // A PSN mostly inside the windows that start at 0 in both directions,
  // sometimes anywhere near them, below the wrap too.
  static uint32_t psn(FuzzedDataProvider& in) {
    if (in.ConsumeIntegralInRange<int>(0, 3) != 0)
      return in.ConsumeIntegralInRange<uint32_t>(0, 511);
    return static_cast<uint32_t>(in.ConsumeIntegral<int16_t>()) & wire::kPsnMask;
  }

  wire::Transport base(FuzzedDataProvider& in, wire::Opcode op) {
    wire::Transport t;
    t.opcode = op;
    t.dest_qpn = dest_qpn(in);
    t.psn = psn(in);
    t.ack_req = in.ConsumeBool();
    t.solicited = in.ConsumeBool();
    t.mth_flags = in.ConsumeIntegral<uint8_t>();
    t.path_tag = in.ConsumeIntegral<uint32_t>();
    return t;
  }

  // A data packet (and its payload's length) aimed at or around a region's
  // edges, mostly one that parse() and the responder's checks accept: its
  // offset and length agree with its opcode's place in the message. The
  // responder writes the payload at the packet's own va.
  wire::Transport data_packet(FuzzedDataProvider& in, uint32_t* len) {
    const auto op = static_cast<wire::Opcode>(in.ConsumeIntegralInRange<uint8_t>(
        uint8_t(wire::Opcode::kWriteFirst), uint8_t(wire::Opcode::kWriteOnlyImm)));
    wire::Transport t = base(in, op);
    // Mostly the region a peer may write: a bad key or address moves the
    // responder's QP to ERROR, and the script must replace it.
    const int pick = in.ConsumeIntegralInRange<int>(0, 7);
    const Target& at = targets_[pick < 6 ? 0 : pick - 5];
    const bool only = wire::is_first(op) && wire::is_last(op);
    const bool middle = !wire::is_first(op) && !wire::is_last(op);
    const uint32_t packets = only ? 1 : in.ConsumeIntegralInRange<uint32_t>(middle ? 3 : 2, 80);
    t.data.msg_len = packets * kMtu - in.ConsumeIntegralInRange<uint32_t>(0, kMtu - 1);
    if (in.ConsumeIntegralInRange<int>(0, 15) == 0) t.data.msg_len = in.ConsumeIntegral<uint32_t>();
    const uint32_t index = wire::is_first(op) ? 0
                           : wire::is_last(op)
                               ? packets - 1
                               : in.ConsumeIntegralInRange<uint32_t>(1, packets - 2);
    t.data.offset = index * kMtu;
    const uint32_t rest = t.data.msg_len > t.data.offset ? t.data.msg_len - t.data.offset : 0;
    *len = in.ConsumeIntegralInRange<int>(0, 7) != 0 ? std::min(rest, kMtu)
                                                     : in.ConsumeIntegralInRange<uint32_t>(0, kMtu);
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:  // ending at the region's end, give or take a little
        t.data.va = at.va + at.len - *len + in.ConsumeIntegral<int8_t>();
        break;
      case 1:  // inside
        t.data.va = at.va + in.ConsumeIntegralInRange<uint64_t>(0, at.len - *len);
        break;
      default:
        t.data.va = at.va + in.ConsumeIntegral<int32_t>();
        break;
    }
    t.data.rkey =
        in.ConsumeIntegralInRange<int>(0, 7) == 0 ? in.ConsumeIntegral<uint32_t>() : at.key;
    t.data.msn = in.ConsumeIntegralInRange<uint32_t>(0, 8);
    t.data.imm = in.ConsumeIntegral<uint32_t>();
    return t;
  }

  wire::Transport feedback_packet(FuzzedDataProvider& in) {
    const bool nack = in.ConsumeBool();
    wire::Transport t = base(in, nack ? wire::Opcode::kNack : wire::Opcode::kAck);
    wire::Feedback& f = t.fb;
    f.cum_psn = psn(in);
    f.ref_psn = psn(in);
    f.sack_base = psn(in);
    f.sack_bitmap[0] = in.ConsumeIntegral<uint64_t>();
    f.sack_bitmap[1] = in.ConsumeIntegral<uint64_t>();
    // A QP_GONE's echo tag names the QP gone: often one of the peer's.
    f.echo_tag = in.ConsumeBool() ? 100 + in.ConsumeIntegralInRange<uint32_t>(0, 1)
                                  : in.ConsumeIntegral<uint32_t>();
    f.service_time_ns = in.ConsumeIntegral<uint32_t>();
    f.window_mpr = in.ConsumeIntegral<uint16_t>();
    f.ce_count = in.ConsumeIntegral<uint16_t>();
    // Mostly the codes a requester recovers from (trimmed, out of window);
    // the fatal ones move the QP to ERROR.
    constexpr wire::NackCode kCodes[] = {
        wire::NackCode::kTrimmed,        wire::NackCode::kTrimmed,
        wire::NackCode::kTrimmed,        wire::NackCode::kOutOfWindow,
        wire::NackCode::kOutOfWindow,    wire::NackCode::kRemoteAccess,
        wire::NackCode::kInvalidRequest, wire::NackCode::kQpGone};
    f.code = nack ? kCodes[in.ConsumeIntegralInRange<size_t>(0, std::size(kCodes) - 1)]
                  : wire::NackCode::kNone;
    f.flags = in.ConsumeIntegral<uint8_t>();
    return t;
  }

  wire::Transport other_packet(FuzzedDataProvider& in) {
    const auto op = static_cast<wire::Opcode>(in.ConsumeIntegralInRange<uint8_t>(
        uint8_t(wire::Opcode::kProbeRequest), uint8_t(wire::Opcode::kPortStatus)));
    wire::Transport t = base(in, op);
    if (op == wire::Opcode::kPortStatus) {
      t.port_status.num_planes = in.ConsumeIntegralInRange<uint8_t>(0, 32);
      t.port_status.port_mask =
          in.ConsumeIntegral<uint32_t>() &
          (t.port_status.num_planes == 32 ? ~0u : (1u << t.port_status.num_planes) - 1);
      t.port_status.seq = in.ConsumeIntegral<uint32_t>();
    } else {
      t.probe.req_id = in.ConsumeIntegral<uint16_t>();
      t.probe.port = in.ConsumeIntegral<uint8_t>();
      t.probe.flags = in.ConsumeIntegral<uint8_t>();
      t.probe.echo_tag = in.ConsumeIntegral<uint32_t>();
      t.probe.t_send_ns = in.ConsumeIntegral<uint64_t>();
      t.probe.service_time_ns = in.ConsumeIntegral<uint32_t>();
    }
    return t;
  }

  // Frames the packet as a peer would and hands the engine what parse()
  // makes of it, trimmed or CE-marked as a switch may.
  void deliver(FuzzedDataProvider& in, const wire::Transport& t, uint32_t len = 0) {
    const bool ce = in.ConsumeBool();
    const bool trim = in.ConsumeIntegralInRange<int>(0, 7) == 0;
    wire::PacketView v;
    if (!frame_and_parse(t, wire::WireEv{}, ce, trim, {payload_, len}, frame_, &v)) return;
    const uint8_t plane = in.ConsumeIntegralInRange<uint8_t>(0, kPlanes - 1);
    // As softmrcd does, the placement may be left to the caller.
    wire::DeferredCopy placement;
    ep_.on_packet(v, plane, now_, /*src_peer=*/0, in.ConsumeBool() ? &placement : nullptr);
    if (placement.len > 0) {
      const auto at = reinterpret_cast<uintptr_t>(placement.dst);
      const auto base = reinterpret_cast<uintptr_t>(remote_.data());
      if (at < base || at + placement.len > base + remote_.size() || placement.src != v.payload ||
          placement.len != v.payload_len)
        fail("a deferred placement is not the payload into the remote-write region");
      placement.make();
    }
    if (in.ConsumeBool()) poll();
  }

  void post_write(FuzzedDataProvider& in) {
    engine::WriteRequest wr;
    wr.wr_id = in.ConsumeIntegral<uint16_t>();
    const Target& from = targets_[in.ConsumeIntegralInRange(0, 2)];
    wr.length = in.ConsumeIntegralInRange<uint32_t>(0, 8 * kMtu);
    wr.local_addr = from.va + in.ConsumeIntegralInRange<uint64_t>(0, from.len);
    wr.lkey = from.key;
    wr.remote_addr = in.ConsumeIntegral<uint32_t>();
    wr.rkey = in.ConsumeIntegral<uint32_t>();
    wr.with_imm = in.ConsumeBool();
    wr.signaled = in.ConsumeBool();
    (void)ep_.post_write(qp(in), wr);
  }

  // One pass of what the lcore does after packets: send, complete, events.
  void poll() {
    engine::TxPacket tx[64];
    for (int i = 0; i < 64 && ep_.poll_tx(tx, 64, now_) == 64; ++i) {
    }
    engine::Completion wc[32];
    for (size_t n; (n = ep_.poll_completions(wc, 32)) > 0;) {
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].qpn >= sizeof(ours_) || !ours_[wc[i].qpn]) fail("a completion for no QP");
        if (engine::wc_status_name(wc[i].status) == nullptr) fail("an unknown status");
      }
    }
    engine::Event ev[32];
    while (ep_.poll_events(ev, 32) > 0) {
    }
    replace_failed_qps();
  }

  GuardedRegion remote_, local_only_, gone_;
  engine::Endpoint ep_;
  Target targets_[3] = {};
  std::vector<engine::EvEntry> evs_;
  uint32_t qpns_[2] = {};
  bool ours_[8] = {};  // the QPNs this script created (max_qps is 4)
  TimeNs now_ = 1'000'000;
  uint8_t payload_[kMtu];
  Frame frame_;
};

}  // namespace
}  // namespace softmrc::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  softmrc::fuzz::Script script;
  script.run(in);
  return 0;
}
