// The file a process is about to listen on as a UNIX socket (softmrcd's
// application and control sockets, memif servers' sockets): free, a socket
// a process that died left behind, someone's live socket, or not a socket.
#pragma once

#include <string>

namespace softmrc::sys {

enum class SocketFile {
  kFree,       // nothing at the path
  kStale,      // a socket nobody listens on: the listener may remove it
  kLive,       // a socket that answers (or that cannot be probed): someone's
  kNotSocket,  // something else: not ours to remove
};

// Probes `path` with a connect of socket `type` (SOCK_STREAM,
// SOCK_SEQPACKET). Only a refused connect makes a socket stale: one of
// another type, or one that cannot be probed, counts as live.
SocketFile socket_file(const std::string& path, int type);

}  // namespace softmrc::sys
