// A single endpoint with one QP in RTS (or RTR), for tests that play the peer by
// hand: they read what the endpoint sends and feed it hand-made packets.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/endpoint.h"

namespace softmrc::engine::test {

struct OneQpConfig {
  uint8_t num_planes = 2;
  uint32_t evs_per_plane = 2;
  uint32_t mtu = 1024;
  uint8_t mpr = 8;
  uint8_t max_mpr = 8;
  uint16_t max_wimm = 8;
  uint8_t timeout = 10;  // 1.05 ms
  uint8_t retry_linear = 7;
  uint8_t retry_exp = 7;
  uint32_t min_active = 1;
  uint32_t sq_psn = 100;
  uint32_t rq_psn = 500;
  uint32_t dest_qpn = 77;
  uint32_t caps = 0;
  CcProfile cc;
  QpTuning tuning;
  TimeNs probe_initial_ns = 10'000;
  TimeNs probe_max_ns = 80'000;
  size_t mem_bytes = 64 * 1024;
  uint32_t event_queue = 4096;    // the endpoint's event queue
  uint32_t completion_queue = 0;  // the endpoint's completion queue (0: the engine's default)
  QpState last = QpState::kRts;   // kRtr: a QP that only receives
};

class OneQp {
 public:
  explicit OneQp(const OneQpConfig& cfg = {});

  Endpoint ep;
  uint32_t qpn = 0;
  std::vector<uint8_t> mem;
  uint32_t key = 0;
  static constexpr uint64_t kVa = 0x40000000;

  const Qp& qp() const { return *ep.qp(qpn); }
  const OneQpConfig& config() const { return cfg_; }

  // Posts a Write (or WIMM) of `len` bytes from mem[src_off].
  Status write(uint64_t wr_id, uint32_t src_off, uint32_t len, bool imm = false,
               uint32_t imm_data = 0, uint64_t remote = 0x9000000, uint32_t rkey = 5);
  std::vector<TxPacket> tx(TimeNs now, size_t max = 1 << 20);
  std::vector<Completion> completions();
  std::vector<Event> events();

  // Feedback to this QP's requester, as the peer's responder would send it.
  wire::PacketView ack(uint32_t cum, uint32_t ref, uint32_t echo_tag,
                       std::vector<uint32_t> sacked = {},
                       wire::NackCode code = wire::NackCode::kNone, uint8_t flags = 0) const;
  // A data packet to this QP's responder, aimed at mem[off].
  wire::PacketView data(uint32_t psn, wire::Opcode op, uint32_t off, uint32_t msg_len,
                        uint32_t msg_off, const std::vector<uint8_t>& payload,
                        uint32_t imm = 0) const;

 private:
  OneQpConfig cfg_;
};

}  // namespace softmrc::engine::test
