// The application API, softmrcd's side (docs/api.md). Two halves:
//
//  AppServer  a ControlService on the control thread: the UNIX socket of
//             each hosted endpoint with `app_socket`, one connection per
//             application (libsoftmrc context), the slow path (hello,
//             regions, CQs, channels, QPs, modify/query), and async events
//             to the applications. It maps what the applications share and
//             reaches the engine only through EndpointTask::call().
//  AppStage   one per endpoint, on its lcore: the data path
//             (app_stage.h).
//
// An application that goes away (its socket closes) has its QPs destroyed,
// then its regions deregistered, all inside one call on the lcore: no packet
// is placed into its memory after that.
//
// With tx_payload: extbuf, each application region is also an extbuf region
// of the framer (its payload is sent in place) if DPDK knows its IOVA and
// every port's device can read it: it is registered with
// rte_extmem_register, with the pages' virtual addresses in IOVA-VA mode (in
// IOVA-PA mode it is locked in memory and sent in place only if its pages
// are physically contiguous), then DMA-mapped for each port's device
// (rte_dev_dma_map); by copy otherwise. A region freed
// (or whose application went) is retired: deregistered and retired in the
// framer, and unmapped once no send queued by its application may read it
// and no mbuf in flight points into it (checked again every few ms).
//
// Profiles: a QP's EV and CC profile ids are resolved at RESET -> INIT by
// the daemon's ProfileResolver (the controller's profiles), which keeps the
// QP attached until it returns to RESET, is destroyed or its application
// goes; an INIT -> INIT that names a profile moves the QP to it. At
// shutdown (Phase::kFlush) the lcore moves every application QP to ERROR,
// so what the applications had outstanding completes as flushed before
// their sockets close.
#pragma once

#include <poll.h>
#include <rte_dev.h>
#include <rte_memory.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "shm/app_protocol.h"
#include "shm/shared_memory.h"
#include "softmrcd/app_stage.h"
#include "softmrcd/config.h"
#include "softmrcd/control_service.h"
#include "softmrcd/profile_resolver.h"
#include "softmrcd/unix_socket.h"

namespace softmrc::softmrcd {

class EndpointTask;

class AppServer : public ControlService {
 public:
  AppServer();
  ~AppServer() override;
  // Opens the socket of every hosted endpoint that has `app_socket`.
  // Returns false with *err set ("endpoints[0].app_socket: ...").
  // `profiles` resolves the QPs' profile ids; it outlives this server.
  bool setup(const Config& cfg, const std::vector<std::unique_ptr<EndpointTask>>& endpoints,
             ProfileResolver* profiles, std::string* err);
  bool empty() const { return listeners_.empty(); }

  // What became of the connections to the application sockets (smrcctl
  // stats: `applications`).
  struct Counters {
    uint64_t connected = 0;       // now, hello or not
    uint64_t serving = 0;         // now, through hello
    uint64_t connections = 0;     // accepted since the start
    uint64_t served = 0;          // hellos answered OK
    uint64_t refused = 0;         // neither root nor in app_group: EACCES
    uint64_t busy = 0;            // hellos beyond the 256 served: EBUSY
    uint64_t hello_timeouts = 0;  // closed without a hello
    uint64_t gone = 0;            // served applications that went away
    uint64_t events_dropped = 0;  // async events beyond what a slow application had waiting
    uint64_t events_lost = 0;     // async events an lcore could not hand to this thread
  };
  Counters counters() const;

  void add_fds(std::vector<pollfd>* fds) override;
  void step(const pollfd* ready, size_t count, uint64_t now_ns) override;
  void close() override;

 private:
  struct Client;
  struct Listener {
    int fd = -1;
    std::string path;
    EndpointTask* task = nullptr;
    uint32_t endpoint = 0;
    // The endpoint's ports' devices, each once: what application regions
    // sent in place are DMA-mapped for.
    std::vector<rte_device*> devices;
    std::unique_ptr<AppStage> stage;
  };

  void accept_on(Listener& l, uint64_t now_ns);
  size_t greeting() const;  // connections not yet through hello
  // false: the client is gone (EOF or an unreadable message).
  bool serve(Client& c);
  // `fd`: the request's descriptor or -1; *reply_fd: one to send with the
  // reply (closed after), left -1 if none.
  void handle(Client& c, const shm::Msg& req, int fd, shm::Msg* rep, int* reply_fd);
  void drop(Client& c);
  // Whether another application memfd may be mapped (mapping_budget_).
  bool may_map() const;
  void send_events(Listener& l);
  // A region's memory, shared by its application.
  struct Memory {
    shm::Mapping mem;
    bool extmem = false;                  // registered with rte_extmem_register
    bool framed = false;                  // an extbuf region of the framer
    rte_iova_t iova = RTE_BAD_IOVA;       // of the first byte, when extmem
    std::vector<rte_device*> dma_mapped;  // rte_dev_dma_map done for these
    uint32_t pd = 0;                      // the application's PD it was registered in
  };
  Memory share(const shm::Mapping& mem, const Listener& l) const;
  static void unmap_dma(Memory* m);
  static void unshare(Memory* m);
  // Unmaps the retired regions of l's applications that nothing reads any more.
  void reap(Listener& l);
  // A protection domain that no live PD has, never the default one (the
  // traffic generator's); ends with release_domain().
  uint32_t new_domain();
  void release_domain(uint32_t domain) { domains_.erase(domain); }

  const Config* cfg_ = nullptr;
  ProfileResolver* profiles_ = nullptr;
  std::vector<Listener> listeners_;
  std::vector<std::unique_ptr<Client>> clients_;
  uint32_t next_owner_ = 1;
  uint32_t next_domain_ = 1;
  std::set<uint32_t> domains_;  // every live PD's
  size_t channel_budget_ = 0;   // what the descriptor limit leaves all clients' channels
  size_t mapping_budget_ = 0;   // what vm.max_map_count leaves all clients' memfds
  SocketAccess access_;         // app_group
  Counters counted_;            // the totals; the gauges are counted on demand
  struct Retired {
    Listener* l = nullptr;
    uint32_t owner = 0;
    Memory m;
  };
  std::vector<Retired> retired_;
  uint64_t next_reap_ns_ = 0;
};

}  // namespace softmrc::softmrcd
