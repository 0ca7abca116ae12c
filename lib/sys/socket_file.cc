// The file a process is about to listen on (socket_file.h).
#include "sys/socket_file.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softmrc::sys {

SocketFile socket_file(const std::string& path, int type) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return SocketFile::kFree;
  if (!S_ISSOCK(st.st_mode)) return SocketFile::kNotSocket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return SocketFile::kLive;  // cannot be probed
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int probe = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (probe < 0) return SocketFile::kLive;
  const bool refused = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
                       errno == ECONNREFUSED;
  ::close(probe);
  return refused ? SocketFile::kStale : SocketFile::kLive;
}

}  // namespace softmrc::sys
