// The EAL of a gtest binary in the dpdk suite: started once for the whole
// binary (--no-huge, no PCI, no shared config, lcore 0, the binary's own
// --file-prefix), with one packet pool the tests share.
#pragma once

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <iterator>

namespace softmrc::test {

class EalEnvironment : public ::testing::Environment {
 public:
  EalEnvironment(const char* file_prefix, unsigned mbufs, unsigned cache, uint16_t data_room)
      : prefix_(file_prefix), mbufs_(mbufs), cache_(cache), data_room_(data_room) {}

  void SetUp() override {
    const char* argv[] = {"dpdk_test",     "--no-huge",   "-m",          "128",
                          "--no-pci",      "--no-shconf", "-l",          "0",
                          "--file-prefix", prefix_,       "--log-level", "lib.eal:warning"};
    ASSERT_GE(rte_eal_init(std::size(argv), const_cast<char**>(argv)), 0);
    pool = rte_pktmbuf_pool_create("test_pool", mbufs_, cache_, 0, data_room_, 0);
    ASSERT_NE(pool, nullptr);
  }
  void TearDown() override {
    rte_mempool_free(pool);
    cleanup();
  }

  rte_mempool* pool = nullptr;
  // The binary's last EAL call: port::eal_cleanup() where memif ports were
  // closed (see drivers/port/ethdev/eal_cleanup.h).
  void (*cleanup)() = [] { rte_eal_cleanup(); };

 private:
  const char* prefix_;
  unsigned mbufs_;
  unsigned cache_;
  uint16_t data_room_;
};

// Registers the binary's EAL; call once, at namespace scope.
inline EalEnvironment* add_eal(const char* file_prefix, unsigned mbufs, unsigned cache,
                               uint16_t data_room) {
  return static_cast<EalEnvironment*>(::testing::AddGlobalTestEnvironment(
      new EalEnvironment(file_prefix, mbufs, cache, data_room)));
}

}  // namespace softmrc::test
