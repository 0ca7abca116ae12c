// Farewell frames (see farewell.h).
#include "port/ethdev/farewell.h"

#include <cstring>

namespace softmrc::port {

namespace {

constexpr uint8_t kMagic[4] = {'S', 'M', 'R', 'C'};
constexpr uint8_t kVersion = 1;
constexpr size_t kEtherTypeAt = 12;
constexpr size_t kMagicAt = 14;
constexpr size_t kVersionAt = 18;
constexpr size_t kKindAt = 19;

}  // namespace

Farewell farewell_kind(std::span<const uint8_t> frame) {
  if (frame.size() <= kKindAt) return Farewell::kNone;
  if (frame[kEtherTypeAt] != kFarewellEtherType >> 8 ||
      frame[kEtherTypeAt + 1] != (kFarewellEtherType & 0xFF))
    return Farewell::kNone;
  if (std::memcmp(frame.data() + kMagicAt, kMagic, sizeof(kMagic)) != 0 ||
      frame[kVersionAt] != kVersion)
    return Farewell::kNone;
  const uint8_t kind = frame[kKindAt];
  if (kind != uint8_t(Farewell::kBye) && kind != uint8_t(Farewell::kByeAck)) return Farewell::kNone;
  return Farewell(kind);
}

void write_farewell(Farewell kind, const uint8_t (&src)[6], uint8_t* out) {
  std::memset(out, 0, kFarewellFrameLen);
  std::memset(out, 0xFF, 6);  // broadcast: the link's one peer
  std::memcpy(out + 6, src, 6);
  out[kEtherTypeAt] = kFarewellEtherType >> 8;
  out[kEtherTypeAt + 1] = kFarewellEtherType & 0xFF;
  std::memcpy(out + kMagicAt, kMagic, sizeof(kMagic));
  out[kVersionAt] = kVersion;
  out[kKindAt] = uint8_t(kind);
}

}  // namespace softmrc::port
