// The controller socket: smrcctl's way into softmrcd (docs/controller.md).
//
// A UNIX stream socket, mode 0660, owned by root and the configured
// control_group. Every connection's peer is checked with SO_PEERCRED and
// SO_PEERGROUPS: root, or a member of the group; anyone else gets one
// refusal line, is counted and logged, and is disconnected.
//
// Protocol: a request is one line of words (smrcctl's command line after
// its options), at most kMaxRequest bytes; each reply is one line of JSON,
// {"ok":true,"result":...} or {"ok":false,"errno":"EBUSY","error":"..."}.
// "events follow" turns the connection into a stream of {"event":...}
// lines until the client closes it.
//
// It owns the profile Registry and is the daemon's ProfileResolver: every
// QP, the traffic generator's and the applications', is attached to an EV
// and a CC profile, so a profile's EV states reach all of its QPs, events
// name the QP's profile and owner, and a profile in use stays ONLINE.
//
// Runs on the control thread only (a ControlService). Engine access goes
// through EndpointTask::call() or the command ring; EV state changes and
// probe replies come from each endpoint's lcore through an rte_ring.
#pragma once

#include <rte_ring.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/json.h"
#include "control/profiles.h"
#include "softmrcd/app_server.h"
#include "softmrcd/control_events.h"
#include "softmrcd/control_service.h"
#include "softmrcd/profile_resolver.h"
#include "softmrcd/stats.h"
#include "softmrcd/unix_socket.h"

namespace softmrc::softmrcd {

class Daemon;

class ControlServer : public ControlService, public ProfileResolver {
 public:
  static constexpr size_t kMaxRequest = 4096;            // bytes per request line
  static constexpr size_t kMaxClients = 64;              // beyond: refused (EBUSY)
  static constexpr size_t kMaxOutput = 256 * 1024;       // queued reply bytes per client
  static constexpr size_t kMaxInput = 16 * kMaxRequest;  // read ahead per client
  static constexpr uint32_t kMaxRequestsPerStep = 64;    // per client, so none starves others
  static constexpr size_t kEventHistory = 256;           // kept for 'events'
  static constexpr uint32_t kEventRing = 4096;           // per endpoint
  static constexpr uint32_t kProbeSlots = 4096;          // per endpoint: EVs of probes in flight
  static constexpr uint32_t kMaxProbesPerRequest = 256;

  explicit ControlServer(Daemon& d);
  ~ControlServer() override;

  // Setup, after the daemon's endpoints and traffic exist and before the
  // lcores start: the socket, the declared profiles, the state file.
  bool open(std::string* err);
  // The application server whose counters `stats` shows; it outlives
  // every request (the services are destroyed after the lcores stop).
  void set_app_server(const AppServer* apps) { apps_ = apps; }

  void add_fds(std::vector<pollfd>* fds) override;
  void step(const pollfd* ready, size_t count, uint64_t now_ns) override;
  void close() override;

  int attach_qp(uint32_t endpoint, uint32_t qpn, const std::string& owner, uint64_t ev_id,
                uint64_t cc_id, QpProfiles* out, std::string* why) override;
  void detach_qp(uint32_t endpoint, uint32_t qpn) override;

 private:
  struct Attached {
    uint64_t ev_id = 0;
    uint64_t cc_id = 0;
    std::string owner;  // "txgen", "app <pid>"
  };
  struct Probe;
  struct Client {
    int fd = -1;
    uint32_t uid = 0;
    std::string in;
    std::string out;
    bool follow = false;           // an 'events follow' stream
    uint64_t dropped = 0;          // events this subscriber missed since its last one
    bool eof = false;              // the client sent all it will (it may still read)
    bool closing = false;          // close once `out` is written
    uint64_t active_ns = 0;        // accepted, or last request
    std::unique_ptr<Probe> probe;  // an 'ev probe' waiting for replies
  };
  using Words = std::vector<std::string>;

  void accept_clients(uint64_t now);
  void accept_without_fds();
  void read_client(Client& c);
  void serve_requests(Client& c, uint64_t now);
  void write_client(Client& c);
  void refuse(Client& c, control::Err code, const std::string& message);
  void handle(Client& c, const std::string& line, uint64_t now);
  void reply(Client& c, control::Json result);
  void fail(Client& c, control::Err code, const std::string& message);

  // Commands; each replies (or leaves a probe pending) and returns nothing.
  void dev_show(Client& c);
  void port_cmd(Client& c, const Words& w);
  void ev_cmd(Client& c, const Words& w, uint64_t now);
  void probe_start(Client& c, const Words& w, uint64_t now);
  void events_cmd(Client& c, const Words& w);
  void stats_cmd(Client& c, const Words& w);
  void profile_cmd(Client& c, const Words& w);
  void profile_set(Client& c, char kind, uint64_t id, const Words& w);
  void profile_ev_op(Client& c, const Words& w);

  // The reports of one request all read the snapshots taken at its first.
  bool report(const std::string& what, const Words& args, control::Json* out, std::string* err);
  bool paged_report(const std::string& what, const Words& args, control::Json* out,
                    std::string* err);
  void drain_events(uint64_t now);
  void on_ev_event(uint32_t endpoint, const ControlEvent& e);
  void on_probe_reply(uint32_t endpoint, const ControlEvent& e, uint64_t now);
  void finish_probes(uint64_t now, bool force);
  // Applies a profile EV's new state to the QPs attached to that profile.
  void apply_profile_ev_state(uint64_t profile, const std::vector<uint32_t>& matched,
                              engine::EvState state);
  void declare_profiles();
  bool load_state(std::string* err);
  void save_state();
  const Attached* attached(uint32_t endpoint, uint32_t qpn) const;

  Daemon& d_;
  int listen_fd_ = -1;
  int spare_fd_ = -1;  // given up to accept (and refuse) a client at the fd limit
  std::string path_;
  SocketAccess access_;              // control_group
  const AppServer* apps_ = nullptr;  // for stats; none without app sockets
  control::Registry profiles_;
  std::vector<Client> clients_;
  std::vector<rte_ring*> rings_;                 // per hosted endpoint
  std::vector<uint64_t> lost_seen_;              // per endpoint: lcore losses already reported
  std::deque<control::Json> history_;            // the latest events
  std::vector<EndpointSnapshot> request_snaps_;  // of the request being handled, if read
  // Per endpoint, kProbeSlots: the EVs its queued probes point to. An
  // endpoint's own slots, so a slot is rewritten only on its lcore, and
  // only once the engine's control queue (no longer than kProbeSlots) has
  // sent the probe that used it.
  std::vector<std::vector<wire::WireEv>> probe_evs_;
  std::vector<uint32_t> next_probe_;
  std::vector<uint64_t> unreported_lost_;  // per endpoint: for the next event's drop_count
  std::map<std::pair<uint32_t, uint32_t>, bool> admin_down_;    // (endpoint, plane)
  std::map<std::pair<uint32_t, uint32_t>, Attached> attached_;  // (endpoint, qpn)

  // Counters (stats 'control').
  uint64_t accepted_ = 0;
  uint64_t refused_ = 0;
  uint64_t refused_no_fd_ = 0;  // accepted only to be refused: the fd table was full
  uint64_t idle_closed_ = 0;
  uint64_t output_stalls_ = 0;  // requests held because a client was not reading its replies
  uint64_t requests_ = 0;
  uint64_t failed_ = 0;
  uint64_t events_ = 0;
  uint64_t events_lost_ = 0;  // lcore ring overflow
  uint64_t subscriber_drops_ = 0;
};

}  // namespace softmrc::softmrcd
