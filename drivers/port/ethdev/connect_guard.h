// The connect guard: restarting a port never blocks its thread in connect().
//
// DPDK 22.11's net_memif client connects its control socket, a blocking
// UNIX socket, inside rte_eth_dev_start. A server that is alive but does
// not accept (stopped, hung) fills its listen backlog (memif listens with
// one) after a connection or two, and the next connect() then waits until
// it accepts: the thread that restarts the port to reconnect (EAL's
// interrupt thread, EthdevPort) would stop serving every other port's
// interrupts and alarms with it. So this process
// interposes connect: while a NonBlocking is in scope on the calling
// thread, a UNIX socket connects as a non-blocking one does, and a full
// backlog fails at once (EAGAIN), which memif reports as a failed start;
// the port tries again later.
#pragma once

namespace softmrc::port::connect_guard {

class NonBlocking {
 public:
  NonBlocking();
  ~NonBlocking();
  NonBlocking(const NonBlocking&) = delete;
  NonBlocking& operator=(const NonBlocking&) = delete;
};

}  // namespace softmrc::port::connect_guard
