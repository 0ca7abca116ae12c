// The daemon's checks of what an application sends it (see app_protocol.h).
#include "shm/app_protocol.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softmrc::shm {

namespace {

bool terminated(const char* s, size_t n) {
  return std::memchr(s, '\0', n) != nullptr;
}

bool pow2_in(uint32_t v, uint32_t max) {
  return v >= 2 && v <= max && (v & (v - 1)) == 0;
}

}  // namespace

int validate_message(const Msg& m, size_t bytes, bool has_fd, const char** why) {
  *why = "ok";
  if (bytes != sizeof(Msg)) {
    *why = "message of the wrong size";
    return EPROTO;
  }
  if (m.magic != kAppMagic) {
    *why = "bad magic";
    return EPROTO;
  }
  if (m.type < uint16_t(MsgType::kHello) || m.type >= uint16_t(MsgType::kEvent)) {
    *why = "unknown message type";
    return EINVAL;
  }
  const auto type = static_cast<MsgType>(m.type);
  if (has_fd != carries_fd(type)) {
    *why = has_fd ? "a file descriptor where none belongs" : "file descriptor missing";
    return EBADF;
  }
  switch (type) {
    case MsgType::kQueryProfile:
      if (m.u.query_profile.kind != 1 && m.u.query_profile.kind != 2) {
        *why = "profile kind not EV (1) or CC (2)";
        return EINVAL;
      }
      if (!terminated(m.u.query_profile.name, sizeof(m.u.query_profile.name))) {
        *why = "profile name not terminated";
        return EINVAL;
      }
      break;
    case MsgType::kRegMr: {
      const RegMrReq& r = m.u.reg_mr;
      if (r.length == 0 || r.length > kMaxMrBytes) {
        *why = "region length 0 or over the limit";
        return EINVAL;
      }
      if (r.addr + r.length < r.addr) {
        *why = "region wraps the address space";
        return EINVAL;
      }
      if (r.access & ~uint32_t{(1u << 0) | (1u << 1) | (1u << 2) | (1u << 20)}) {
        *why = "unknown access bits";
        return EINVAL;
      }
      break;
    }
    case MsgType::kCreateCq:
      if (!pow2_in(m.u.create_cq.capacity, kMaxCqe)) {
        *why = "CQ capacity not a power of two in 2..65536";
        return EINVAL;
      }
      break;
    case MsgType::kCreateQp: {
      const CreateQpReq& q = m.u.create_qp;
      if (q.max_send_wr > kMaxQpWr || q.max_recv_wr > kMaxQpWr) {
        *why = "max_send_wr or max_recv_wr over the limit";
        return EINVAL;
      }
      if (!pow2_in(q.send_ring_capacity, kMaxQpWr) || q.send_ring_capacity < q.max_send_wr ||
          !pow2_in(q.recv_ring_capacity, kMaxQpWr) || q.recv_ring_capacity < q.max_recv_wr) {
        *why = "a ring's capacity is not a power of two >= its queue's max_*_wr";
        return EINVAL;
      }
      break;
    }
    case MsgType::kModifyQp:
      if (m.u.modify_qp.attr.qp_state > 4) {
        *why = "unknown QP state";
        return EINVAL;
      }
      break;
    default:
      break;
  }
  return 0;
}

bool RegionTable::add(const RegionEntry& e) {
  const uint32_t i = e.key & 0xffff;
  if (e.key == 0 || i >= num_ || slots_[i].key != 0) return false;
  slots_[i] = e;
  return true;
}

void RegionTable::remove(uint32_t key) {
  const uint32_t i = key & 0xffff;
  if (i < num_ && slots_[i].key == key) slots_[i] = RegionEntry{};
}

const RegionEntry* RegionTable::find(uint32_t key, uint32_t domain) const {
  const uint32_t i = key & 0xffff;
  if (key == 0 || i >= num_) return nullptr;
  const RegionEntry& e = slots_[i];
  return e.key == key && e.domain == domain ? &e : nullptr;
}

bool range_inside(const RegionEntry& r, uint64_t addr, uint64_t len) {
  if (addr < r.va) return false;
  const uint64_t off = addr - r.va;
  return off <= r.length && len <= r.length - off;
}

WcStatus check_work_request(const WorkRequest& wr, uint32_t domain, const RegionTable& regions,
                            uint32_t max_msg_bytes) {
  switch (static_cast<WrOpcode>(wr.opcode)) {
    case WrOpcode::kWrite:
    case WrOpcode::kWriteImm:
      break;
    default:
      return WcStatus::kLocQpOpErr;
  }
  if (wr.length > max_msg_bytes) return WcStatus::kLocLenErr;
  if (wr.remote_addr + wr.length < wr.remote_addr) return WcStatus::kLocLenErr;
  if (wr.length == 0) return WcStatus::kSuccess;
  const RegionEntry* r = regions.find(wr.lkey, domain);
  if (r == nullptr || !range_inside(*r, wr.local_addr, wr.length)) return WcStatus::kLocProtErr;
  return WcStatus::kSuccess;
}

int send_message(int fd, const Msg& m, int pass_fd, int flags) {
  iovec iov{const_cast<Msg*>(&m), sizeof(m)};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (pass_fd >= 0) {
    h.msg_control = control;
    h.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &h, flags | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(sizeof(m))) return 0;
    if (n < 0 && errno == EINTR) continue;
    return n < 0 ? errno : EMSGSIZE;
  }
}

ssize_t recv_message(int fd, Msg* m, int flags, std::vector<int>* fds, bool* truncated,
                     bool* fds_lost) {
  iovec iov{m, sizeof(*m)};
  // Room for as many descriptors as one message can carry (the kernel's
  // SCM_MAX_FD): the kernel would close those that do not fit itself, on
  // this thread and without close_received().
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 253)];
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = control;
  h.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(fd, &h, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++k) {
        int got;
        std::memcpy(&got, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
        fds->push_back(got);
      }
  *truncated = (h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  if (fds_lost) *fds_lost = (h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == MSG_CTRUNC;
  return n;
}

namespace {

// The kernel refuses to pass UNIX sockets nested deeper than this
// (ETOOMANYREFS); a peer that keeps sending gets this many messages read.
constexpr int kMaxNesting = 5;
constexpr int kMaxDrained = 256;

void close_received(int fd, int depth) {
  struct stat st {};
  int domain = 0;
  socklen_t len = sizeof(domain);
  if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
      ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0) {
    int listening = 0;
    len = sizeof(listening);
    if (domain == AF_UNIX && depth < kMaxNesting &&
        ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening) {
      // Connections not yet accepted may hold descriptors of their own.
      // (accept4() has no MSG_DONTWAIT: the socket itself must not block.)
      (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      for (int n = 0, c; n < kMaxDrained &&
                         (c = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;
           ++n)
        close_received(c, depth + 1);
    } else if (domain == AF_UNIX && depth < kMaxNesting) {
      Msg m;
      std::vector<int> fds;
      bool truncated = false;
      for (int n = 0; n < kMaxDrained && recv_message(fd, &m, MSG_DONTWAIT, &fds, &truncated) > 0;
           ++n) {
        for (int f : fds) close_received(f, depth + 1);
        fds.clear();
      }
      for (int f : fds) close_received(f, depth + 1);
    } else if (domain != AF_UNIX) {
      const linger off{0, 0};
      (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
    }
  }
  ::close(fd);
}

}  // namespace

void close_received(int fd) {
  close_received(fd, 0);
}

}  // namespace softmrc::shm
