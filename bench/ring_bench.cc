// The shared-memory SPSC ring (lib/shm): what moving one 64-byte work
// request costs, in bursts, on one thread (the instructions alone) and
// between two threads (with the cache-line transfers a real application
// and softmrcd pay).
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>
#include <vector>

#include "shm/spsc_ring.h"

namespace {

using namespace softmrc::shm;

struct Request {  // the size of a work-request descriptor
  uint64_t words[8];
};
static_assert(sizeof(Request) == 64);

constexpr uint32_t kCapacity = 1024;

// A formatted ring and both of its ends.
struct Ring {
  struct alignas(kCacheLine) Line {
    unsigned char b[kCacheLine];
  };
  std::vector<Line> lines = std::vector<Line>(ring_bytes(kCapacity, sizeof(Request)) / kCacheLine);
  RingProducer<Request> p;
  RingConsumer<Request> c;
  Ring() {
    format_ring(lines.data());
    p.attach(lines.data(), kCapacity);
    c.attach(lines.data(), kCapacity);
  }
};

// Enqueue a burst, dequeue it, on one thread.
void BM_RingBurstSameThread(benchmark::State& state) {
  const auto burst = static_cast<uint32_t>(state.range(0));
  Ring r;
  RingProducer<Request>& p = r.p;
  RingConsumer<Request>& c = r.c;
  std::vector<Request> in(burst), out(burst);
  for (auto _ : state) {
    benchmark::DoNotOptimize(p.enqueue_burst(in.data(), burst));
    benchmark::DoNotOptimize(c.dequeue_burst(out.data(), burst));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * burst);
}
BENCHMARK(BM_RingBurstSameThread)->Arg(1)->Arg(8)->Arg(32);

// A producer thread and a consumer thread, each moving bursts as fast as
// the other side lets it; the time is per entry through the ring.
void BM_RingBurstTwoThreads(benchmark::State& state) {
  const auto burst = static_cast<uint32_t>(state.range(0));
  Ring r;
  RingProducer<Request>& p = r.p;
  RingConsumer<Request>& c = r.c;
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    std::vector<Request> out(burst);
    while (!stop.load(std::memory_order_relaxed)) c.dequeue_burst(out.data(), burst);
  });
  std::vector<Request> in(burst);
  uint64_t moved = 0;
  for (auto _ : state) {
    uint32_t n = 0;
    while (n < burst) n += p.enqueue_burst(in.data() + n, burst - n);
    moved += n;
  }
  stop.store(true);
  consumer.join();
  state.SetItemsProcessed(static_cast<int64_t>(moved));
}
BENCHMARK(BM_RingBurstTwoThreads)->Arg(1)->Arg(8)->Arg(32)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
