// softmrcd's listening UNIX sockets (the controller's and the
// applications'): who may connect, and the socket file itself.
//
// A socket is created with mode 0660, owned by the daemon's user (root, as
// it is run) and the configured group (none: the daemon's), from the start
// (no window with a wider mode). The mode is the gate; every connection's
// peer is checked again with SO_PEERCRED and SO_PEERGROUPS, so a socket
// whose mode was opened up still lets in only root and the group.
#pragma once

#include <sys/types.h>

#include <string>

namespace softmrc::softmrcd {

struct SocketAccess {
  std::string key;    // the configuration's key for the group, for messages
  std::string group;  // empty: root only
  gid_t gid = 0;

  // Looks up the group named by configuration key `key` (empty: root
  // only). false with *why set if there is no such group.
  bool resolve(const std::string& key_name, const std::string& group_name, std::string* why);
  // Who the peer of an accepted connection is, and whether it may stay:
  // uid 0, the daemon's uid, or a member of the group (primary or
  // supplementary). *why: "uid U (pid P) is not root and not in group
  // 'G'", or "... is not root (<key> is not set)".
  bool allows(int fd, uint32_t* uid, uint32_t* pid, std::string* why) const;
  // "root only" or "root and group G" (for the log).
  std::string describe() const;
};

// Listens on `path` with a socket of `type` (SOCK_STREAM, SOCK_SEQPACKET),
// non-blocking. A socket file left by a process that died is replaced; one
// that answers is another process's, and anything else at the path is not
// ours to remove. Returns the descriptor, or -1 with *why set: "'<path>'
// is longer than a UNIX socket path may be", "'<path>' exists and is not
// a socket", "'<path>' is in use by another process", "cannot listen on
// '<path>': <reason>".
int listen_unix(const std::string& path, int type, const SocketAccess& access, std::string* why);

}  // namespace softmrc::softmrcd
