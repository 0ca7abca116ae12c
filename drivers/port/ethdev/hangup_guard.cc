// The hangup guard (see hangup_guard.h) and the sendmsg it interposes.
#include "port/ethdev/hangup_guard.h"

#include <rte_interrupts.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <atomic>
#include <cerrno>

#include "port/ethdev/libc_next.h"

namespace softmrc::port::hangup_guard {

namespace {
std::atomic<uint64_t> gone_sends{0};
}  // namespace

uint64_t peer_gone_sends() {
  return gone_sends.load(std::memory_order_relaxed);
}

}  // namespace softmrc::port::hangup_guard

namespace {

bool unix_seqpacket(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int type = 0;
  socklen_t type_len = sizeof(type);
  return getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         addr.ss_family == AF_UNIX && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 &&
         type == SOCK_SEQPACKET;
}

ssize_t bytes_of(const msghdr* msg) {
  ssize_t n = 0;
  for (size_t i = 0; i < msg->msg_iovlen; ++i) n += static_cast<ssize_t>(msg->msg_iov[i].iov_len);
  return n;
}

}  // namespace

// Every sendmsg of the process comes here; off the interrupt thread, or for
// any other socket, it is libc's.
extern "C" ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  using SendMsg = ssize_t (*)(int, const msghdr*, int);
  static std::atomic<SendMsg> next{nullptr};
  const SendMsg real = softmrc::port::libc_next(next, "sendmsg");
  if (real == nullptr) return syscall(SYS_sendmsg, fd, msg, flags);
  if (!rte_thread_is_intr() || !unix_seqpacket(fd)) return real(fd, msg, flags);
  const ssize_t ret = real(fd, msg, flags | MSG_NOSIGNAL);
  if (ret >= 0 || errno != EPIPE) return ret;
  softmrc::port::hangup_guard::gone_sends.fetch_add(1, std::memory_order_relaxed);
  return bytes_of(msg);
}
