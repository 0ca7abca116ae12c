// The line-rate mode (softmrcd --linerate, driven by bench/linerate.py):
// one endpoint on net_null ports, with a synthetic peer built into the
// ports' bursts, so the endpoint's whole packet path runs as fast as its
// lcore can while the peer costs next to nothing.
//
//   probe     every RX burst is full of connectionless probe requests (pre-
//             built in the RX pool; net_null leaves mbuf data alone); the
//             endpoint parses each (ICRC checked), the engine answers it, the
//             framer builds the reply, the TX burst sends it. A header-only
//             forward: MRC's counterpart of testpmd's io forwarding.
//   rx:SIZE   every RX burst is full of data packets of SIZE payload bytes to
//             one QP, PSNs counting up: when SIZE is the path MTU, middle
//             packets of a long Write (a bulk transfer: the responder ACKs
//             every 16), else one-packet Writes (each ACKed at once). The
//             peer's only per-packet work is writing the PSN and patching the
//             ICRC (XOR of three table entries, precomputed with lib/wire).
//             The endpoint parses, checks the ICRC, places the payload in
//             registered memory (the one copy) and sends the ACKs.
//   rx-fcs:SIZE
//             rx, with each frame's FCS behind it (patched as the ICRC is),
//             as a port that keeps the CRC (RTE_ETH_RX_OFFLOAD_KEEP_CRC)
//             leaves it: the endpoint reads it there, so its ICRC check
//             folds the headers only. net_null keeps no CRC: this measures
//             what a NIC that does would give.
//   tx:SIZE   the endpoint's QP sends Writes-with-Immediate, not filled: of
//             64 packets of SIZE bytes when SIZE is the path MTU, else of one
//             packet; a TX hook notes the last PSN of each burst and the next
//             RX burst carries one cumulative ACK for it.
//
// Runs on the endpoint's lcore (the hooks run inside its bursts).
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "softmrcd/config.h"
#include "softmrcd/endpoint_task.h"
#include "wire/packet.h"

namespace softmrc::softmrcd {

enum class LinerateKind : uint8_t { kProbe, kRx, kTx };

struct LinerateSpec {
  LinerateKind kind = LinerateKind::kProbe;
  uint32_t size_bytes = 0;  // payload of rx and tx packets
  bool fcs = false;         // rx: each frame's FCS behind it (rx-fcs)
  uint64_t warmup_ms = 300;
  uint64_t run_ms = 2000;
};

// "probe", "rx:SIZE", "rx-fcs:SIZE" or "tx:SIZE".
bool parse_linerate(const std::string& arg, LinerateSpec* out, std::string* err);

class Linerate {
 public:
  // After the endpoint's setup and before its start(): needs the only
  // hosted endpoint on device ports and a peer.
  bool setup(const Config& cfg, EndpointTask& ep, const LinerateSpec& spec, std::string* err);

  const LinerateSpec& spec() const { return spec_; }
  uint32_t frame_bytes() const { return frame_bytes_; }
  // The packets the mode counts (probes answered, data placed, data sent).
  uint64_t packets(const EndpointSnapshot& s) const;

 private:
  static uint16_t on_rx(uint16_t port, uint16_t queue, rte_mbuf** pkts, uint16_t n, uint16_t max,
                        void* arg);
  static uint16_t on_tx(uint16_t port, uint16_t queue, rte_mbuf** pkts, uint16_t n, void* arg);
  bool build_template(const Config& cfg, const wire::Transport& t, uint32_t payload_len,
                      std::string* err);

  LinerateSpec spec_;
  wire::FrameSpec from_peer_;   // frames as the peer would send them to the endpoint
  std::vector<uint8_t> frame_;  // the template
  uint32_t frame_bytes_ = 0;
  wire::ParseConfig parse_cfg_;

  // rx: PSN, ICRC and FCS patching.
  size_t psn_offset_ = 0;
  uint32_t icrc_base_ = 0;
  std::array<std::array<uint32_t, 256>, 3> icrc_delta_{};
  uint32_t fcs_base_ = 0;
  std::array<std::array<uint32_t, 256>, 3> fcs_delta_{};
  uint32_t next_psn_ = 0;

  // tx: the cumulative ACK the next RX burst carries.
  uint32_t qpn_ = 0;
  uint32_t dest_qpn_ = 1;
  bool ack_due_ = false;
  uint32_t ack_psn_ = 0;  // last PSN sent
  uint32_t ack_tag_ = 0;
  uint8_t mpr_ = 8;
};

}  // namespace softmrc::softmrcd
