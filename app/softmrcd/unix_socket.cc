// softmrcd's listening UNIX sockets (unix_socket.h).
#include "softmrcd/unix_socket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sys/socket_file.h"

namespace softmrc::softmrcd {

namespace {

// The daemon's user, who may always connect: root, when run as it should be.
std::string owner_name() {
  return ::geteuid() == 0 ? "root" : "uid " + std::to_string(::geteuid());
}

}  // namespace

bool SocketAccess::resolve(const std::string& key_name, const std::string& group_name,
                           std::string* why) {
  key = key_name;
  group.clear();
  gid = 0;
  if (group_name.empty()) return true;
  const ::group* g = ::getgrnam(group_name.c_str());
  if (g == nullptr) {
    *why = key + ": no group named '" + group_name + "'";
    return false;
  }
  group = group_name;
  gid = g->gr_gid;
  return true;
}

bool SocketAccess::allows(int fd, uint32_t* uid, uint32_t* pid, std::string* why) const {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    *why = std::string("cannot read the peer's credentials: ") + std::strerror(errno);
    return false;
  }
  *uid = cred.uid;
  *pid = static_cast<uint32_t>(cred.pid);
  if (cred.uid == 0 || cred.uid == ::geteuid()) return true;
  if (!group.empty()) {
    if (cred.gid == gid) return true;
    gid_t groups[256];
    socklen_t glen = sizeof(groups);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
      for (size_t i = 0; i < glen / sizeof(gid_t); ++i)
        if (groups[i] == gid) return true;
  }
  *why = "uid " + std::to_string(cred.uid) + " (pid " + std::to_string(cred.pid) + ") is not " +
         owner_name() +
         (group.empty() ? " (" + key + " is not set)" : " and not in group '" + group + "'");
  return false;
}

std::string SocketAccess::describe() const {
  return owner_name() + (group.empty() ? " only" : " and group " + group);
}

int listen_unix(const std::string& path, int type, const SocketAccess& access, std::string* why) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    *why = "'" + path + "' is longer than a UNIX socket path may be";
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  switch (sys::socket_file(path, type)) {
    case sys::SocketFile::kNotSocket:
      *why = "'" + path + "' exists and is not a socket";
      return -1;
    case sys::SocketFile::kLive:
      *why = "'" + path + "' is in use by another process";
      return -1;
    case sys::SocketFile::kStale:
      ::unlink(addr.sun_path);
      break;
    case sys::SocketFile::kFree:
      break;
  }
  const int fd = ::socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const mode_t old = ::umask(0117);  // 0660 from the start, no window
  const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::umask(old);
  const gid_t group = access.group.empty() ? ::getegid() : access.gid;
  if (!bound || ::listen(fd, 128) != 0 || ::chown(addr.sun_path, ::geteuid(), group) != 0 ||
      ::chmod(addr.sun_path, 0660) != 0) {
    *why = "cannot listen on '" + path + "': " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (bound) ::unlink(addr.sun_path);
    return -1;
  }
  return fd;
}

}  // namespace softmrc::softmrcd
