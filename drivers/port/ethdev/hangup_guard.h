// The hangup guard: a memif control message to a peer that has already
// hung up is not an error on EAL's interrupt thread.
//
// DPDK 22.11's memif server accepts a connection on the interrupt thread,
// registers the connection's callback, and sends HELLO. A client that gave
// up before it was accepted (its connect queued while the server's process
// was stopped or descheduled, then closed; or any local program that
// connects and closes at once) makes that send fail with EPIPE, and memif
// then frees the connection's state and closes its socket without
// unregistering the callback: at the next registration EAL's interrupt
// thread panics ("Error adding fd ... epoll_ctl, Bad file descriptor") and
// the process aborts. So this process interposes sendmsg: on the interrupt
// thread, a send on a UNIX SOCK_SEQPACKET socket (memif's control channel)
// never raises SIGPIPE, and one that finds its peer gone reports success,
// as if the peer had left just after it. The callback stays registered,
// reads the hangup, and memif takes its ordinary way out: for a connection
// not yet tied to a port, unregistering it; for a port's, disconnecting.
#pragma once

#include <cstdint>

namespace softmrc::port::hangup_guard {

// Sends on the interrupt thread that found their peer gone (the process's).
uint64_t peer_gone_sends();

}  // namespace softmrc::port::hangup_guard
