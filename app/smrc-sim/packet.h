// A packet in flight through the simulated fabric: what the fabric model
// needs (fabric::PacketMeta, the path and where it is on it), who sent it to
// whom, and the transport's content. MRC packets carry the engine's
// wire::Transport and a pointer to their payload in the sender's registered
// memory (which the simulator never rewrites while a run lasts), or, in
// framed mode, the frame lib/wire built. Baseline (RoCE) packets carry a
// RoceHeader. Packets live in a pool and are recycled.
#pragma once

#include <cstdint>
#include <vector>

#include "fabric/fabric.h"
#include "wire/packet.h"

namespace softmrc::sim {

using TimeNs = uint64_t;

enum class RoceKind : uint8_t { kData, kAck, kNak };

// The baseline's transport header: a go-back-N QP's sequence numbers.
struct RoceHeader {
  RoceKind kind = RoceKind::kData;
  uint32_t qp = 0;       // the receiving host's QP
  uint32_t psn = 0;      // data: this packet; ACK/NAK: the next PSN expected
  bool last = false;     // data: the message's last packet
  bool ack_req = false;  // data: answer at once (the sender's window is full)
  uint32_t ce = 0;       // ACK: CE-marked packets since the previous ACK
  uint32_t acked = 0;    // ACK: packets newly acknowledged
};

// The fields every hop touches come first and fit in two cache lines.
struct alignas(64) SimPacket {
  uint32_t src = 0;  // hosts
  uint32_t dst = 0;
  uint32_t plane = 0;
  uint32_t dst_gen = 0;  // generation of the receiving QP's connection: stale copies are dropped
  fabric::PacketMeta meta;
  fabric::Path path;
  uint32_t hop = 0;         // index in path of the link the packet is on
  uint32_t down_count = 0;  // that link's down count when the packet entered it
  // MRC
  wire::Transport t;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
  std::vector<uint8_t> frame;  // framed mode only
  // Baseline
  RoceHeader roce;
};

}  // namespace softmrc::sim
