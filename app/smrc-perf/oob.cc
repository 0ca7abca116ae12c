#include "oob.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace softmrc::perf {

namespace {

// Messages are small: addresses and a few counters per QP.
constexpr uint32_t kMaxMessage = 1 << 20;

std::string sys_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Connects s, a non-blocking socket, to ai by deadline_ms, then makes it
// blocking (as send() and the reads expect): 0, or why not. A blocking
// connect() would wait out the kernel's SYN retries, over two minutes,
// when a server's backlog is full.
int connect_by(int s, const addrinfo* ai, int64_t deadline_ms) {
  if (::connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno;
    pollfd p{s, POLLOUT, 0};
    int rc;
    do {
      const int64_t left = deadline_ms - now_ms();
      rc = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) return errno;
    if (rc == 0) return ETIMEDOUT;
    int e = 0;
    socklen_t len = sizeof(e);
    if (::getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len) != 0) return errno;
    if (e != 0) return e;
  }
  return ::fcntl(s, F_SETFL, ::fcntl(s, F_GETFL) & ~O_NONBLOCK) == 0 ? 0 : errno;
}

}  // namespace

void Message::put(uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Message::put_bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  bytes_.insert(bytes_.end(), b, b + n);
}

uint64_t Message::get(int bytes) {
  if (!ok_ || bytes_.size() - at_ < static_cast<size_t>(bytes)) {
    ok_ = false;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(bytes_[at_++]) << (8 * i);
  return v;
}

void Message::get_bytes(void* p, size_t n) {
  if (!ok_ || bytes_.size() - at_ < n) {
    ok_ = false;
    std::memset(p, 0, n);
    return;
  }
  std::memcpy(p, bytes_.data() + at_, n);
  at_ += n;
}

Channel::~Channel() {
  if (fd_ >= 0) ::close(fd_);
}

bool Channel::accept(uint16_t port, int timeout_ms, std::string* err) {
  const int ls = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) {
    *err = sys_error("socket");
    return false;
  }
  const int on = 1;
  const int off = 0;
  ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  ::setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));  // IPv4 clients too
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  a.sin6_addr = in6addr_any;
  pollfd p{ls, POLLIN, 0};
  if (::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    *err = sys_error("--port " + std::to_string(port));
  } else if (::listen(ls, 1) != 0) {
    *err = sys_error("listen");
  } else if (::poll(&p, 1, timeout_ms) <= 0) {
    *err = "no client connected to port " + std::to_string(port) + " within " +
           std::to_string(timeout_ms) + " ms";
  } else {
    fd_ = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd_ < 0) *err = sys_error("accept");
  }
  ::close(ls);
  if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  return fd_ >= 0;
}

bool Channel::connect(const std::string& host, uint16_t port, int timeout_ms, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    *err = "server '" + host + "': " + ::gai_strerror(rc);
    return false;
  }
  const int64_t deadline = now_ms() + timeout_ms;
  int last_errno = 0;
  while (fd_ < 0) {
    for (addrinfo* ai = res; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
      const int s =
          ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
      if (s < 0) continue;
      last_errno = connect_by(s, ai, deadline);
      if (last_errno == 0) {
        fd_ = s;
      } else {
        ::close(s);
      }
    }
    if (fd_ >= 0 || now_ms() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) {
    *err = "cannot connect to " + host + ":" + std::to_string(port) + " within " +
           std::to_string(timeout_ms) + " ms: " + std::strerror(last_errno);
    return false;
  }
  const int on = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  return true;
}

bool Channel::send(const Message& m, std::string* err) {
  Message framed;
  framed.put(m.bytes().size(), 4);
  framed.put_bytes(m.bytes().data(), m.bytes().size());
  const std::vector<uint8_t>& b = framed.bytes();
  for (size_t at = 0; at < b.size();) {
    const ssize_t n = ::send(fd_, b.data() + at, b.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *err = sys_error("the peer's connection");
      return false;
    }
    at += static_cast<size_t>(n);
  }
  return true;
}

bool Channel::read_exact(uint8_t* p, size_t n, int timeout_ms, std::string* err) {
  const int64_t deadline = now_ms() + timeout_ms;
  while (n > 0) {
    pollfd pfd{fd_, POLLIN, 0};
    const int64_t left = deadline - now_ms();
    const int rc = left > 0 ? ::poll(&pfd, 1, static_cast<int>(left)) : 0;
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) {
      *err = "the peer said nothing for " + std::to_string(timeout_ms) + " ms";
      return false;
    }
    const ssize_t got = ::recv(fd_, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      *err = got == 0 ? "the peer closed the connection" : sys_error("the peer's connection");
      return false;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool Channel::readable() const {
  pollfd pfd{fd_, POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0;
}

bool Channel::receive(Message* m, int timeout_ms, std::string* err) {
  uint8_t len[4];
  if (!read_exact(len, sizeof(len), timeout_ms, err)) return false;
  const uint32_t n = len[0] | len[1] << 8 | len[2] << 16 | static_cast<uint32_t>(len[3]) << 24;
  if (n > kMaxMessage) {
    *err = "the peer sent a message of " + std::to_string(n) + " bytes: not smrc-perf?";
    return false;
  }
  std::vector<uint8_t> bytes(n);
  if (!read_exact(bytes.data(), n, timeout_ms, err)) return false;
  *m = Message(std::move(bytes));
  return true;
}

}  // namespace softmrc::perf
