// The connect guard (see connect_guard.h) and the connect it interposes.
#include "port/ethdev/connect_guard.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "port/ethdev/libc_next.h"

namespace softmrc::port::connect_guard {

namespace {
thread_local int scopes = 0;
bool in_scope() {
  return scopes > 0;
}
}  // namespace

NonBlocking::NonBlocking() {
  ++scopes;
}
NonBlocking::~NonBlocking() {
  --scopes;
}

}  // namespace softmrc::port::connect_guard

// Every connect of the process comes here. Outside a NonBlocking scope, or
// for another family than AF_UNIX (whose non-blocking connect would only
// begin, EINPROGRESS), it is libc's; a UNIX socket's either completes at
// once or fails, so the socket is blocking again when it returns.
extern "C" int connect(int fd, const sockaddr* addr, socklen_t len) {
  using Connect = int (*)(int, const sockaddr*, socklen_t);
  static std::atomic<Connect> next{nullptr};
  const Connect real = softmrc::port::libc_next(next, "connect");
  if (real == nullptr) return static_cast<int>(syscall(SYS_connect, fd, addr, len));
  const int flags =
      softmrc::port::connect_guard::in_scope() && addr != nullptr && addr->sa_family == AF_UNIX
          ? ::fcntl(fd, F_GETFL)
          : -1;
  if (flags < 0 || (flags & O_NONBLOCK)) return real(fd, addr, len);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  const int ret = real(fd, addr, len);
  const int saved = errno;
  ::fcntl(fd, F_SETFL, flags);
  errno = saved;
  return ret;
}
