// Registered memory: the regions a QP may read from (local writes) and the
// responder may write into (remote writes). A key names one region; keys
// carry a generation so that a key of a deregistered region never matches a
// later one. Every region and QP belongs to a protection domain (softmrcd:
// an application's PD, or the daemon itself), and a QP reaches only regions
// of its own: a peer that learns a key of another PD cannot write there.
// Lookups check bounds with overflow-safe arithmetic: no access ever lands
// outside a region.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/types.h"

namespace softmrc::engine {

inline constexpr uint32_t kAccessLocalWrite = 1u << 0;
inline constexpr uint32_t kAccessRemoteWrite = 1u << 1;

// The domain of regions and QPs that name none.
inline constexpr uint32_t kDefaultDomain = 0;

struct Region {
  uint64_t va = 0;  // the application's address of the first byte
  uint64_t length = 0;
  uint8_t* host = nullptr;  // where that byte is in this process
  uint32_t access = 0;      // kAccess*
  uint32_t domain = kDefaultDomain;
};

class MemoryTable {
 public:
  void init(uint32_t max_regions);

  // Returns the key through *key.
  Status register_region(const Region& r, uint32_t* key);
  Status deregister_region(uint32_t key);

  // Host pointer for [va, va + len) inside the region named by key, if that
  // region belongs to `domain` and allows `access`; nullptr otherwise.
  // len == 0 is valid anywhere inside (or at the end of) the region.
  uint8_t* translate(uint32_t key, uint64_t va, uint64_t len, uint32_t access,
                     uint32_t domain) const;

  uint32_t live_regions() const { return live_; }

 private:
  static constexpr uint32_t kIndexBits = 16;
  static constexpr uint32_t kIndexMask = (1u << kIndexBits) - 1;

  struct Slot {
    Region region;
    uint16_t generation = 1;
    bool live = false;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  uint32_t live_ = 0;
};

}  // namespace softmrc::engine
