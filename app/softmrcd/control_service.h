// A service of the control thread, such as the application or controller
// socket. The control thread waits on every service's file descriptors
// (and the prompt's) at once, so a request is served as soon as it
// arrives, and calls step() after each wait, ready or not.
//
// Services run on the control thread only. They reach an endpoint's engine
// through EndpointTask::call(), which runs on the endpoint's own lcore.
#pragma once

#include <poll.h>

#include <cstdint>
#include <vector>

namespace softmrc::softmrcd {

class ControlService {
 public:
  virtual ~ControlService() = default;
  // Appends the descriptors to wait on for the next round.
  virtual void add_fds(std::vector<pollfd>* fds) = 0;
  // After the wait: `ready` holds this service's entries of the round, with
  // revents filled in (in the order add_fds appended them).
  virtual void step(const pollfd* ready, size_t count, uint64_t now_ns) = 0;
  // The lcores have stopped: close the sockets, unmap what was shared.
  virtual void close() = 0;
};

}  // namespace softmrc::softmrcd
