// Registered memory regions; see memory_table.h.
#include "engine/memory_table.h"

namespace softmrc::engine {

void MemoryTable::init(uint32_t max_regions) {
  if (max_regions > kIndexMask + 1) max_regions = kIndexMask + 1;
  slots_.assign(max_regions, Slot{});
  free_.clear();
  free_.reserve(max_regions);
  for (uint32_t i = max_regions; i-- > 0;) free_.push_back(i);
  live_ = 0;
}

Status MemoryTable::register_region(const Region& r, uint32_t* key) {
  if (r.host == nullptr) return Status::error("region: null host pointer");
  if (r.va + r.length < r.va) return Status::error("region: va + length overflows");
  if ((r.access & ~(kAccessLocalWrite | kAccessRemoteWrite)) != 0)
    return Status::error("region: unknown access flags");
  if (free_.empty()) return Status::error("region: table full");
  const uint32_t index = free_.back();
  free_.pop_back();
  Slot& s = slots_[index];
  s.region = r;
  s.live = true;
  ++live_;
  *key = (uint32_t{s.generation} << kIndexBits) | index;
  return {};
}

Status MemoryTable::deregister_region(uint32_t key) {
  const uint32_t index = key & kIndexMask;
  if (index >= slots_.size() || !slots_[index].live ||
      slots_[index].generation != key >> kIndexBits)
    return Status::error("region: unknown key");
  Slot& s = slots_[index];
  s.live = false;
  // Generation 0 is never handed out, so a zeroed key never matches.
  s.generation = static_cast<uint16_t>(s.generation == UINT16_MAX ? 1 : s.generation + 1);
  free_.push_back(index);
  --live_;
  return {};
}

uint8_t* MemoryTable::translate(uint32_t key, uint64_t va, uint64_t len, uint32_t access,
                                uint32_t domain) const {
  const uint32_t index = key & kIndexMask;
  if (index >= slots_.size()) return nullptr;
  const Slot& s = slots_[index];
  if (!s.live || s.generation != key >> kIndexBits || s.region.domain != domain ||
      (s.region.access & access) != access)
    return nullptr;
  const Region& r = s.region;
  if (va < r.va) return nullptr;
  const uint64_t off = va - r.va;
  if (off > r.length || len > r.length - off) return nullptr;
  return r.host + off;
}

}  // namespace softmrc::engine
