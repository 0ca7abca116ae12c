// What the fuzz targets around engine::Endpoint share: memory with poisoned
// guard pages, the endpoint's and QPs' setup, and framing a TxPacket as the
// daemon would (build_packet) and reading it back (parse).
#pragma once

#include <sanitizer/asan_interface.h>

#include <errno.h>  // program_invocation_short_name

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/endpoint.h"
#include "wire/packet.h"

namespace softmrc::fuzz {

// A broken promise: the run aborts, and libFuzzer saves the input.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "%s: broken promise: %s\n", program_invocation_short_name, what);
  std::abort();
}

inline constexpr size_t kGuard = 4096;
inline constexpr uint8_t kPlanes = 2;
inline constexpr uint32_t kMtu = 1024;

// `len` bytes, page-aligned (shared rings need their cache-line alignment),
// filled with `fill`, with a poisoned page on each side.
class GuardedRegion {
 public:
  GuardedRegion(size_t len, uint8_t fill)
      : len_(len), mem_(static_cast<uint8_t*>(std::aligned_alloc(kGuard, span(len)))) {
    std::memset(mem_.get(), fill, span(len));
    ASAN_POISON_MEMORY_REGION(mem_.get(), kGuard);
    ASAN_POISON_MEMORY_REGION(data() + len_, span(len) - kGuard - len_);
  }
  ~GuardedRegion() { ASAN_UNPOISON_MEMORY_REGION(mem_.get(), span(len_)); }
  GuardedRegion(const GuardedRegion&) = delete;
  GuardedRegion& operator=(const GuardedRegion&) = delete;

  uint8_t* data() const { return mem_.get() + kGuard; }
  size_t size() const { return len_; }
  void poison_all() { ASAN_POISON_MEMORY_REGION(data(), len_); }

 private:
  // The guards, and the region rounded up to whole pages.
  static size_t span(size_t len) { return kGuard + (len + kGuard - 1) / kGuard * kGuard + kGuard; }
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  size_t len_;
  std::unique_ptr<uint8_t, Free> mem_;
};

inline engine::EndpointConfig endpoint_config(uint32_t max_qps, uint32_t max_regions) {
  engine::EndpointConfig ec;
  ec.num_planes = kPlanes;
  ec.max_qps = max_qps;
  ec.max_regions = max_regions;
  ec.qp.max_mpr = 2;
  ec.qp.max_send_wr = 64;
  ec.qp.max_recv_wr = 64;
  ec.qp.max_wimm = 64;
  ec.ctrl_queue_packets = 256;
  ec.event_queue = 256;
  return ec;
}

// Four EVs on each plane.
inline std::vector<engine::EvEntry> fuzz_evs() {
  std::vector<engine::EvEntry> evs;
  for (uint8_t p = 0; p < kPlanes; ++p) {
    for (uint8_t i = 0; i < 4; ++i) {
      engine::EvEntry e{};
      e.plane = p;
      e.value.bytes[0] = p;
      e.value.bytes[1] = i;
      evs.push_back(e);
    }
  }
  return evs;
}

// A QP's attributes toward `dest_qpn` of peer 0. One that retries forever
// keeps scripts going; one that gives up soon reaches the retry-exceeded
// path.
inline engine::QpAttr qp_attr(const std::vector<engine::EvEntry>& evs, uint32_t dest_qpn,
                              bool retry_forever) {
  engine::QpAttr at;
  at.evs = evs;
  at.ev_config.num_planes = kPlanes;
  at.ev_config.probe_initial_ns = 20'000;
  at.ev_config.probe_max_ns = 200'000;
  at.peer = 0;
  at.dest_qpn = dest_qpn;
  at.path_mtu = kMtu;
  at.mpr = at.mpr_dest = 2;
  at.max_wimm = at.max_wimm_dest = 16;
  at.timeout = 6;
  at.retry_linear = retry_forever ? 7 : 2;
  at.retry_exp = retry_forever ? 25 : 2;
  return at;
}

// A frame's bytes, big enough for any packet at kMtu.
using Frame = uint8_t[wire::kMaxHeaderLen + kMtu + wire::kIcrcLen];

// Frames `t` with `payload` as a sender's framer would (reading every
// payload byte), CE-marked or trimmed (data only) as a switch may, and
// parses it back; false if a step refuses it.
inline bool frame_and_parse(const wire::Transport& t, const wire::WireEv& ev, bool ce, bool trim,
                            std::span<const uint8_t> payload, Frame& frame, wire::PacketView* out) {
  wire::FrameSpec f;
  f.src_ip[0] = 0xfd;
  f.dst_ip[0] = 0xfd;
  const wire::DscpConfig dscp;
  const bool data = wire::is_data(t.opcode);
  const wire::TxMarking mark{data ? dscp.trimmable : dscp.control,
                             data && ce ? wire::kEcnCe : wire::kEcnEct0};
  size_t n = wire::build_packet(f, ev, mark, t, payload, frame);
  if (n != 0 && data && trim) n = wire::trim({frame, n}, dscp);
  return n != 0 && wire::parse({frame, n}, wire::ParseConfig{}, out) == wire::ParseStatus::kOk;
}

}  // namespace softmrc::fuzz
