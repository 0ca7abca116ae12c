// What libsoftmrc and softmrcd agree on (docs/api.md, "How it works"):
//
//  - the slow path: fixed-size messages on a SOCK_SEQPACKET UNIX socket,
//    one request, one reply (same type with kReplyBit, same seq), plus
//    unsolicited event messages from the daemon; file descriptors ride
//    along with SCM_RIGHTS (the application's memfds one way, a completion
//    channel's pipe the other);
//  - the data path: per QP two rings of WorkRequest (application ->
//    daemon), its sends and its receives, so that a receive never waits
//    behind sends the engine has no room for yet (a verbs QP's SQ and RQ);
//    per CQ a ring of Cqe (daemon -> application) behind a CqControl block;
//    each in a sealed memfd both processes map (spsc_ring.h);
//  - the checks the daemon applies to everything an application writes
//    (validate_message, check_work_request). They are pure functions, so
//    unit tests drive them with every kind of garbage.
//
// Neither side trusts the other's bytes: every field is checked where it
// is used, never a pointer of the other process followed.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "shm/spsc_ring.h"

namespace softmrc::shm {

// Bumped on any change to the messages or the shared layouts below.
inline constexpr uint32_t kAppProtocolVersion = 5;
inline constexpr uint32_t kAppMagic = 0x534d5243;  // "SMRC"

enum class MsgType : uint16_t {
  kHello = 1,
  kQueryProfile,
  kRegMr,  // fd: the region's memfd
  kDeregMr,
  kCreateChannel,  // the reply's fd: the read end of the channel's pipe
  kDestroyChannel,
  kCreateCq,  // fd: the CQ's memfd
  kDestroyCq,
  kCreateQp,  // fd: the QP's memfd
  kDestroyQp,
  kModifyQp,
  kQueryQp,
  kAllocPd,
  kDeallocPd,
  kEvent,  // daemon -> application, unsolicited; the last
};
inline constexpr uint16_t kReplyBit = 0x8000;

// Limits the daemon enforces whatever its configuration says.
inline constexpr uint32_t kMaxCqe = 1u << 16;
inline constexpr uint32_t kMaxQpWr = 1u << 16;
inline constexpr uint64_t kMaxMrBytes = uint64_t{1} << 40;
inline constexpr uint32_t kMaxMsgBytes = uint32_t{1} << 31;  // per Write
inline constexpr uint32_t kMaxCqsPerClient = 1024;
inline constexpr uint32_t kMaxChannelsPerClient = 256;
inline constexpr uint32_t kMaxPdsPerClient = 256;
inline constexpr size_t kNameBytes = 64;

struct HelloReq {
  uint32_t protocol_version;
  uint32_t api_version;
};
struct HelloRep {
  char name[kNameBytes];
  uint8_t gid[16];
  uint32_t api_version;
  uint32_t num_planes;
  uint32_t max_qp;
  uint32_t max_mr;
  uint32_t max_cq;
  uint32_t max_cqe;
  uint32_t max_qp_wr;
  uint32_t path_mtu;
  uint64_t max_mr_size;
  uint64_t max_msg_size;
  uint16_t max_wimm;
  uint8_t max_mpr;
  uint8_t max_timeout;
  uint32_t device_cap_flags;
  uint32_t num_ev_profiles;
  uint32_t num_cc_profiles;
};
struct QueryProfileReq {
  uint32_t kind;  // 1 EV, 2 CC
  char name[kNameBytes];
};
struct QueryProfileRep {
  uint64_t id;
};
struct RegMrReq {
  uint64_t addr;  // the application's address of the first byte
  uint64_t length;
  uint32_t access;
  uint32_t pd;  // the id kAllocPd gave
};
struct RegMrRep {
  uint32_t key;
};
struct KeyReq {  // kDeregMr, kDestroyChannel, kDestroyCq, kDestroyQp, kQueryQp, kDeallocPd
  uint32_t id;
};
struct IdRep {  // kCreateChannel, kCreateCq, kAllocPd: the new id
  uint32_t id;
};
struct CreateCqReq {
  uint32_t capacity;  // a power of two: the ring's entries
  uint32_t channel;   // 0: none
};
struct CreateQpReq {
  uint32_t send_cq;
  uint32_t recv_cq;
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t send_ring_capacity;  // a power of two >= max_send_wr
  uint32_t recv_ring_capacity;  // a power of two >= max_recv_wr
  uint32_t sq_sig_all;
  uint32_t pd;  // the id kAllocPd gave
};
struct CreateQpRep {
  uint32_t qpn;
};

// smrc_qp_attr, minus pointers and verbs-only fields; the mask bits are
// the public header's SMRC_QP_*.
struct WireQpAttr {
  uint32_t qp_state;
  uint32_t path_mtu;  // bytes (the library converts from enum smrc_mtu)
  uint64_t ev_profile_id;
  uint64_t cc_profile_id;
  uint8_t dgid[16];
  uint32_t dest_qp_num;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint32_t caps;
  uint16_t max_wimm_dest;
  uint16_t max_wimm;
  uint8_t mpr_dest;
  uint8_t mpr;
  uint8_t timeout;
  uint8_t retry_linear;
  uint8_t retry_exp;
  uint8_t reserved[7];
};
struct ModifyQpReq {
  uint32_t qpn;
  uint32_t mask;
  WireQpAttr attr;
};
struct QueryQpRep {
  WireQpAttr attr;
};

enum class EventKind : uint32_t {
  kQpFatal = 1,  // matches smrc_event_type
  kPortActive = 2,
  kPortErr = 3,
  kCqErr = 4,
};
struct EventMsg {
  uint32_t kind;  // EventKind
  uint32_t plane;
  uint32_t qpn;
  uint32_t cq;
  uint32_t status;  // WcStatus
};

// One message, either way. `status` is 0 or a positive errno value
// (replies only); `detail` a human-readable reason for a refusal.
struct Msg {
  uint32_t magic;
  uint16_t type;  // MsgType, | kReplyBit in replies
  uint16_t reserved;
  uint32_t seq;  // echoed in the reply
  int32_t status;
  union {
    HelloReq hello;
    HelloRep hello_rep;
    QueryProfileReq query_profile;
    QueryProfileRep query_profile_rep;
    RegMrReq reg_mr;
    RegMrRep reg_mr_rep;
    KeyReq key;
    IdRep id_rep;
    CreateCqReq create_cq;
    CreateQpReq create_qp;
    CreateQpRep create_qp_rep;
    ModifyQpReq modify_qp;
    QueryQpRep query_qp_rep;
    EventMsg event;
    uint8_t raw[192];
  } u;
  char detail[96];
};
static_assert(sizeof(Msg) == 16 + 192 + 96);

// Which requests carry a file descriptor. (One reply does: kCreateChannel's.)
constexpr bool carries_fd(MsgType t) {
  return t == MsgType::kRegMr || t == MsgType::kCreateCq || t == MsgType::kCreateQp;
}

// The daemon's first check of a request it received: size, magic, a known
// type, an fd exactly where one belongs, and every field in range. 0 or
// the errno value of the reply (EPROTO, EINVAL, EBADF); `*why` says which
// rule, as a static string.
int validate_message(const Msg& m, size_t bytes, bool has_fd, const char** why);

// Sends one whole message on the SOCK_SEQPACKET socket `fd`, with `pass_fd`
// attached (SCM_RIGHTS) unless it is negative; `flags` are send(2)'s
// (MSG_NOSIGNAL always). 0 or the errno value.
int send_message(int fd, const Msg& m, int pass_fd, int flags = 0);

// Receives one message from `fd` (recvmsg(2) `flags`) and every file
// descriptor that came with it, which the caller then owns: the bytes
// received (0 at EOF, -1 with errno), and in *truncated whether the
// message or its descriptors did not fit; in *fds_lost (if not null)
// whether only descriptors did not (the receiver's descriptor table is
// full: the kernel closed them).
ssize_t recv_message(int fd, Msg* m, int flags, std::vector<int>* fds, bool* truncated,
                     bool* fds_lost = nullptr);

// Closes a descriptor that came from an application without waiting on it.
// close() would wait on a TCP socket its sender set to linger (SO_LINGER)
// with unsent data, and on a UNIX socket holding such a socket in its queue
// (the kernel closes what is queued as the socket goes), however deep: that
// would hold up the thread that serves every application. So sockets stop
// lingering, and what UNIX sockets hold (the application connections
// themselves included) is taken out and closed this way first. Other files
// whose close can wait (FUSE, NFS, serial TTYs) are closed as they are.
void close_received(int fd);

// ---------------------------------------------------------------------
// The data path.

enum class WrOpcode : uint8_t {
  kWrite = 0,
  kWriteImm = 1,
  kRecv = 2,  // consumes one Write-with-Immediate
};
inline constexpr uint8_t kWrSignaled = 1u << 0;

// One work request, as the library writes it into one of the QP's rings.
struct WorkRequest {
  uint64_t wr_id;
  uint64_t local_addr;  // the application's address inside lkey's region
  uint64_t remote_addr;
  uint32_t length;
  uint32_t lkey;
  uint32_t rkey;
  uint32_t imm;    // network byte order, as the application gave it
  uint8_t opcode;  // WrOpcode
  uint8_t flags;   // kWr*
  uint8_t reserved[6];
};
static_assert(sizeof(WorkRequest) == 48);

// Completion statuses as the public header numbers them.
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr,
  kLocQpOpErr,
  kLocProtErr,
  kWrFlushErr,
  kBadRespErr,
  kRemAccessErr,
  kRemInvReqErr,
  kRetryExcErr,
  kFatalErr,
  kGeneralErr,
  kRemOpErr,
};
enum class CqeOpcode : uint8_t { kWrite = 0, kWriteImm = 1, kRecvWriteImm = 2 };

struct Cqe {
  uint64_t wr_id;
  uint32_t qpn;
  uint32_t byte_len;
  uint32_t imm;  // network byte order
  uint32_t vendor_err;
  uint8_t status;  // WcStatus
  uint8_t opcode;  // CqeOpcode
  uint8_t reserved[6];
};
static_assert(sizeof(Cqe) == 32);

// The notification state of a CQ, at the start of its memfd, then the ring.
//
// req_notify: the application stores armed = 1 (seq_cst), then polls the
// ring once more. The daemon, after publishing completions (release),
// issues a seq_cst fence and exchanges armed with 0; if it was 1 it sets
// fired = 1 and writes a byte into the channel's pipe. Either the application's
// second poll sees the completion or the daemon sees the arming: no lost
// wake-up. `overflow` counts completions the daemon had to drop.
struct CqControl {
  alignas(kCacheLine) std::atomic<uint32_t> armed;
  alignas(kCacheLine) std::atomic<uint32_t> fired;
  std::atomic<uint32_t> overflow;
};
static_assert(sizeof(CqControl) == 2 * kCacheLine);

constexpr size_t cq_ring_offset() {
  return sizeof(CqControl);
}
constexpr size_t cq_bytes(uint32_t capacity) {
  return cq_ring_offset() + ring_bytes(capacity, sizeof(Cqe));
}
// A QP's memfd: its send ring, then its receive ring on a cache line of
// its own.
constexpr size_t qp_recv_ring_offset(uint32_t send_capacity) {
  return (ring_bytes(send_capacity, sizeof(WorkRequest)) + kCacheLine - 1) / kCacheLine *
         kCacheLine;
}
constexpr size_t qp_bytes(uint32_t send_capacity, uint32_t recv_capacity) {
  return qp_recv_ring_offset(send_capacity) + ring_bytes(recv_capacity, sizeof(WorkRequest));
}

// A registered region as the daemon knows it: the application's address
// range, and which application owns it.
struct RegionEntry {
  uint32_t key = 0;     // 0: free
  uint32_t domain = 0;  // its PD's protection domain (engine::Region::domain)
  uint64_t va = 0;
  uint64_t length = 0;
};

// The regions of an endpoint, indexed by the key's low 16 bits (the
// engine's key layout: index | generation << 16).
class RegionTable {
 public:
  explicit RegionTable(RegionEntry* slots, uint32_t num) : slots_(slots), num_(num) {}
  bool add(const RegionEntry& e);
  void remove(uint32_t key);
  // The entry of `key` if it is live and in `domain`, else nullptr.
  const RegionEntry* find(uint32_t key, uint32_t domain) const;

 private:
  RegionEntry* slots_;
  uint32_t num_;
};

// Whether [addr, addr + len) lies inside the region (overflow-safe; len 0
// is inside anywhere up to the end).
bool range_inside(const RegionEntry& r, uint64_t addr, uint64_t len);

// The daemon's check of one WorkRequest copied out of the send ring of a
// QP in protection domain `domain`: kSuccess, or the status of the error
// completion it gets instead of being posted.
WcStatus check_work_request(const WorkRequest& wr, uint32_t domain, const RegionTable& regions,
                            uint32_t max_msg_bytes);
// Likewise for the receive ring, where only receives belong.
constexpr WcStatus check_recv_request(const WorkRequest& wr) {
  return wr.opcode == uint8_t(WrOpcode::kRecv) ? WcStatus::kSuccess : WcStatus::kLocQpOpErr;
}

}  // namespace softmrc::shm
