// A value one lcore keeps current and other threads read, without the
// lcore ever waiting: a triple buffer. The writer fills back() and
// publish()es it; a reader takes the newest published copy. Readers (the
// telemetry threads, the control thread) are serialised among themselves
// by a mutex that the writer never touches.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace softmrc::softmrcd {

template <typename T>
class Published {
 public:
  // Sizes all three copies like `proto` (the writer must not allocate).
  void init(const T& proto) {
    for (T& b : bufs_) b = proto;
  }

  // Writer (the owning lcore).
  T& back() { return bufs_[back_]; }
  void publish() { back_ = middle_.exchange(back_ | kFresh, std::memory_order_acq_rel) & kIndex; }

  // Readers: `f` sees the newest published copy.
  template <typename F>
  void read(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (middle_.load(std::memory_order_relaxed) & kFresh)
      front_ = middle_.exchange(front_, std::memory_order_acq_rel) & kIndex;
    f(static_cast<const T&>(bufs_[front_]));
  }

 private:
  static constexpr uint32_t kIndex = 3;
  static constexpr uint32_t kFresh = 4;

  T bufs_[3];
  uint32_t back_ = 0;                // writer's
  std::atomic<uint32_t> middle_{1};  // last published, | kFresh until a reader takes it
  uint32_t front_ = 2;               // readers'
  std::mutex mu_;
};

}  // namespace softmrc::softmrcd
