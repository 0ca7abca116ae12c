// One side of an smrc-perf run: the device, memory, CQs and QPs it opens
// through libsoftmrc, the exchange with the other side, and the runs per
// message size.
//
// Memory: one region holds each QP's send area and then each QP's receive
// area, max_size bytes apiece. The peer Writes QP q's messages into our
// receive area q; after the last one it sends a Write-with-Immediate,
// whose completion (MRC completes in PSN order) says every byte before it
// was placed, and we check the bytes.
#pragma once

#include <softmrc/softmrc.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "oob.h"
#include "stats.h"

namespace softmrc::perf {

enum class Test : uint8_t { kWriteBw = 1, kWriteLat = 2 };

// Every parameter's range, on the command line and in a client's hello,
// which a server must not trust.
inline constexpr uint32_t kMaxQps = 4096;
inline constexpr uint64_t kMaxSize = 64 << 20;
inline constexpr uint32_t kMaxStepFactor = 1024;
inline constexpr uint32_t kMaxIters = 1'000'000'000;
inline constexpr uint32_t kMaxWarmup = 1'000'000;
inline constexpr uint32_t kMaxWindow = 65536;
inline constexpr uint32_t kMaxSignalEvery = 65536;
inline constexpr uint32_t kMaxTimeoutMs = 3'600'000;

// What the client chooses; the server takes it from the client.
struct Params {
  Test test = Test::kWriteBw;
  bool bidir = false;
  uint32_t qps = 1;
  uint64_t min_size = 1;
  uint64_t max_size = 65536;
  uint32_t step_factor = 2;
  uint32_t iters = 1000;
  uint32_t warmup = 100;
  uint32_t window = 128;
  uint32_t signal_every = 64;
};

struct Options {
  Params params;
  std::string server;  // empty: this side is the server
  std::string socket;  // empty: the library's default
  uint16_t port = 18515;
  std::string ev_profile;
  std::string cc_profile;
  bool use_event = false;
  uint32_t timeout_ms = 30'000;
};

// The sizes min, min*f, min*f^2, ... up to max, and max itself.
std::vector<uint64_t> sizes(const Params& p);

class Session {
 public:
  explicit Session(const Options& o) : opt_(o), p_(o.params) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  // Opens everything, meets the peer and connects the QPs.
  bool start(std::string* err);
  const Params& params() const { return p_; }
  bool sends() const { return client() || p_.bidir; }
  bool client() const { return !opt_.server.empty(); }

  // One message size; the result is this side's sending (when it sends).
  bool run_bw(uint64_t size, BwResult* r, std::string* err);
  bool run_lat(uint64_t size, LatResult* r, std::string* err);
  // Tells the peer we are done and waits for its word.
  bool finish(std::string* err);

 private:
  struct Peer {
    union smrc_gid gid {};
    uint32_t rkey = 0;
    uint64_t recv_base = 0;
    uint32_t timeout_ms = 0;  // its --timeout-ms, for our keep-alives
    std::vector<uint32_t> qpn, psn;
  };

  // Connects to softmrcd and learns its limits.
  bool open_device(std::string* err);
  // Sizes and opens the QPs and memory for p_.
  bool open(std::string* err);
  bool exchange(std::string* err);
  bool connect(std::string* err);
  bool sync(uint32_t what, uint64_t size, uint64_t value, uint64_t* peer_value, std::string* err);
  // The peer's next message but its keep-alives, within --timeout-ms.
  bool receive_sync(Message* m, std::string* err);
  // A write_bw sender's word, now and then, to a peer that waits for its stream.
  bool keep_alive(std::string* err);
  // Reads what the peer sent, if anything: *alive when it was a keep-alive
  // (a later message waits in pending_ for receive_sync).
  bool hear_peer(bool* alive, std::string* err);
  bool agree(uint64_t size, bool verified, std::string* err);
  uint8_t* send_area(uint32_t q) const;
  uint8_t* recv_area(uint32_t q) const;
  // The pattern stream (lib/pattern) of QP q's Writes from the client, or
  // from the server: the two directions differ, so bytes that reach the
  // wrong side, or never leave their own, fail the check.
  static uint64_t stream(uint32_t q, bool from_client) { return 2ull * q + (from_client ? 0 : 1); }
  bool post_write(uint32_t q, uint64_t size, bool with_imm, uint32_t imm, bool signaled,
                  uint64_t wr_id, std::string* err);
  bool post_recvs(uint32_t q, uint32_t n, std::string* err);
  // Waits for at least one completion on cq (up to max), for --timeout-ms.
  // With peer_streams (what we wait for is the peer's stream of Writes,
  // whose progress shows nowhere here) a keep-alive from the peer starts
  // the wait over too.
  int wait(smrc_cq* cq, smrc_wc* wc, int max, bool peer_streams, std::string* err);
  bool check(const smrc_wc& wc, std::string* err) const;

  Options opt_;
  Params p_;
  Channel oob_;
  std::optional<Message> pending_;  // read by wait(), for receive_sync
  int64_t last_alive_ns_ = 0;
  Peer peer_;
  smrc_context* ctx_ = nullptr;
  smrc_device_attr dev_{};
  smrc_pd* pd_ = nullptr;
  smrc_comp_channel* channel_ = nullptr;
  smrc_cq* send_cq_ = nullptr;
  smrc_cq* recv_cq_ = nullptr;
  smrc_mr* mr_ = nullptr;
  std::vector<smrc_qp*> qps_;
  std::vector<uint32_t> psn_;
  uint32_t max_send_wr_ = 0;
  uint32_t max_recv_wr_ = 0;
};

}  // namespace softmrc::perf
