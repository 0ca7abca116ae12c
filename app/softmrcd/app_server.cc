// The application API, softmrcd's side (see app_server.h).

// rte_dev_dma_map() and rte_dev_dma_unmap() are experimental in DPDK 22.11.
#define ALLOW_EXPERIMENTAL_API
#include "softmrcd/app_server.h"

#include <fcntl.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <rte_memory.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <new>

#include "softmrc/softmrc.h"
#include "softmrcd/endpoint_task.h"

namespace softmrc::softmrcd {

using shm::Msg;
using shm::MsgType;

namespace {

constexpr int kMaxClients = 256;  // applications served at once (through hello)
// Connections not yet through hello. Beyond, the listener is left alone and
// new ones wait in its backlog; one that says nothing is closed after
// kHelloTimeoutNs, so idle connections cannot keep applications out.
constexpr int kMaxGreeting = 64;
constexpr uint64_t kHelloTimeoutNs = 5'000'000'000;
// Descriptors kept for everything but applications' clients and channels:
// DPDK's own, the ports', telemetry, the controller, a request's passed fds.
constexpr size_t kFdReserve = 256;
constexpr uint64_t kReapIntervalNs = 10'000'000;  // retired regions: checked every 10 ms
// The share of vm.max_map_count (the process's mappings) the applications'
// regions, CQs and QPs may take: the rest stays for DPDK, the heap and the
// threads, which would fail to grow if the applications took it all.
constexpr size_t kMappingShareDivisor = 2;
constexpr size_t kDefaultMaxMapCount = 65530;  // the kernel's, where /proc does not say
// Events held for an application that does not take them, beyond which
// more are dropped (and counted): a QP's fatal event is one per QP, so this
// covers many more QPs than a context has; port events are a few per
// plane change.
constexpr size_t kMaxUnsentEvents = 4096;

// The 16-byte GID of an endpoint: its plane-0 address, IPv4 mapped.
void gid_of(const EndpointSpec& e, uint8_t out[16]) {
  const PlaneSpec& p = e.planes[0];
  if (p.ip_version == wire::IpVersion::kV6) {
    std::memcpy(out, p.ip, 16);
    return;
  }
  std::memset(out, 0, 16);
  out[10] = out[11] = 0xff;
  std::memcpy(out + 12, p.ip, 4);
}

}  // namespace

// ---------------------------------------------------------------------
// AppServer: the control thread's half.

struct AppServer::Client {
  int fd = -1;
  uint32_t owner = 0;
  uint32_t pid = 0;  // SO_PEERCRED at accept
  std::string name;  // "app <pid>", for the controller
  Listener* l = nullptr;
  bool hello = false;
  uint64_t hello_by_ns = 0;  // closed if still without hello then
  bool refused = false;      // closed once its reply is sent
  std::string denied;        // why it may not connect (app_group); empty: it may
  uint32_t next_id = 1;
  struct Cq {
    std::unique_ptr<AppCq> cq;
    shm::Mapping mem;
    uint32_t channel = 0;
  };
  struct Qp {
    std::unique_ptr<AppQp> qp;
    shm::Mapping mem;
    uint32_t pd = 0;
    uint32_t send_cq = 0, recv_cq = 0;
    uint64_t ev_profile_id = 0, cc_profile_id = 0;
    bool attached = false;  // to its profiles (ProfileResolver), from INIT until RESET
    uint8_t dgid[16] = {};
  };
  // A PD is a protection domain of the engine's: its QPs reach only its
  // regions, whether through an SGE or a peer's rkey.
  std::map<uint32_t, uint32_t> pds;    // id -> domain
  std::map<uint32_t, Memory> regions;  // by key
  std::map<uint32_t, Cq> cqs;          // by id
  std::map<uint32_t, int> channels;    // id -> write end of its pipe
  std::map<uint32_t, Qp> qps;          // by QPN
  // Events waiting for room in the socket (send_events()), oldest first.
  std::deque<shm::EventMsg> unsent;
};

AppServer::AppServer() = default;

AppServer::~AppServer() {
  close();
}

bool AppServer::setup(const Config& cfg,
                      const std::vector<std::unique_ptr<EndpointTask>>& endpoints,
                      ProfileResolver* profiles, std::string* err) {
  cfg_ = &cfg;
  profiles_ = profiles;
  if (!access_.resolve("app_group", cfg.app_group, err)) return false;
  for (auto& t : endpoints) {
    const EndpointSpec& spec = cfg.endpoints[t->index()];
    if (spec.app_socket.empty()) continue;
    const std::string key = spec.key + ".app_socket";
    Listener l;
    std::string why;
    l.fd = listen_unix(spec.app_socket, SOCK_SEQPACKET, access_, &why);
    if (l.fd < 0) {
      *err = key + ": " + why;
      return false;
    }
    l.path = spec.app_socket;
    l.task = t.get();
    l.endpoint = t->index();
    for (uint32_t p = 0; p < t->num_planes(); ++p) {
      rte_eth_dev_info info{};
      if (rte_eth_dev_info_get(t->port(p).port_id(), &info) == 0 && info.device != nullptr &&
          std::find(l.devices.begin(), l.devices.end(), info.device) == l.devices.end())
        l.devices.push_back(info.device);
    }
    l.stage = std::make_unique<AppStage>();
    l.stage->init(cfg.limits.max_qps, cfg.limits.max_regions);
    t->set_app_stage(l.stage.get());
    std::printf("softmrcd: %s: applications connect to %s (%s)\n", spec.name.c_str(),
                spec.app_socket.c_str(), access_.describe().c_str());
    listeners_.push_back(std::move(l));
  }
  // Each client holds a socket and each completion channel a pipe's write
  // end, so that many applications could otherwise take every descriptor
  // the daemon has (its listeners, memif's and the controller's accepts
  // would then fail). The channels get what the limit leaves, raised as far
  // as it may be.
  rlimit nofile{};
  if (!listeners_.empty() && ::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    if (nofile.rlim_cur < nofile.rlim_max) {
      nofile.rlim_cur = nofile.rlim_max;
      (void)::setrlimit(RLIMIT_NOFILE, &nofile);
      (void)::getrlimit(RLIMIT_NOFILE, &nofile);
    }
    const size_t most = size_t{kMaxClients} * shm::kMaxChannelsPerClient;
    const size_t held = kMaxClients + kMaxGreeting + kFdReserve;
    channel_budget_ = nofile.rlim_cur > held ? std::min<size_t>(nofile.rlim_cur - held, most) : 0;
    size_t max_map_count = kDefaultMaxMapCount;
    if (FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
      if (std::fscanf(f, "%zu", &max_map_count) != 1) max_map_count = kDefaultMaxMapCount;
      std::fclose(f);
    }
    mapping_budget_ = max_map_count / kMappingShareDivisor;
    std::printf(
        "softmrcd: applications: at most %d at once (and %d connecting), %zu completion "
        "channels in all (descriptor limit %llu), %zu regions, CQs and QPs in all "
        "(vm.max_map_count %zu)\n",
        kMaxClients, kMaxGreeting, channel_budget_,
        static_cast<unsigned long long>(nofile.rlim_cur), mapping_budget_, max_map_count);
  }
  std::fflush(stdout);
  return true;
}

bool AppServer::may_map() const {
  size_t held = retired_.size();  // unmapped only once nothing reads them
  for (const auto& c : clients_) held += c->regions.size() + c->cqs.size() + c->qps.size();
  return held < mapping_budget_;
}

AppServer::Counters AppServer::counters() const {
  Counters c = counted_;
  for (const Listener& l : listeners_) c.events_lost += l.stage->events_lost();
  c.connected = clients_.size();
  c.serving = clients_.size() - greeting();
  return c;
}

size_t AppServer::greeting() const {
  return static_cast<size_t>(
      std::count_if(clients_.begin(), clients_.end(), [](const auto& c) { return !c->hello; }));
}

void AppServer::add_fds(std::vector<pollfd>* fds) {
  // A full house of connections awaiting hello leaves the listeners unpolled.
  const short accepting = greeting() < kMaxGreeting ? POLLIN : 0;
  for (Listener& l : listeners_) fds->push_back(pollfd{l.fd, accepting, 0});
  for (auto& c : clients_)
    fds->push_back(pollfd{c->fd, short(POLLIN | (c->unsent.empty() ? 0 : POLLOUT)), 0});
}

void AppServer::step(const pollfd* ready, size_t count, uint64_t now_ns) {
  // `ready` matches the fds of add_fds: listeners first, then clients.
  const size_t nl = listeners_.size();
  const size_t nc = std::min(clients_.size(), count - std::min(count, nl));
  std::vector<Client*> gone;
  for (size_t i = 0; i < nc; ++i) {
    const short ev = ready[nl + i].revents;
    if ((ev & ~POLLOUT) == 0) continue;  // room for events: send_events()
    if (!serve(*clients_[i])) gone.push_back(clients_[i].get());
  }
  for (auto& c : clients_) {
    if (c->hello || now_ns < c->hello_by_ns) continue;
    if (std::find(gone.begin(), gone.end(), c.get()) != gone.end()) continue;
    std::printf("softmrcd: %s: closed a connection from pid %u: no hello within %llu s\n",
                cfg_->endpoints[c->l->endpoint].name.c_str(), c->pid,
                static_cast<unsigned long long>(kHelloTimeoutNs / 1'000'000'000));
    std::fflush(stdout);
    ++counted_.hello_timeouts;
    gone.push_back(c.get());
  }
  for (Client* c : gone) drop(*c);
  for (size_t i = 0; i < nl && i < count; ++i)
    if (ready[i].revents & POLLIN) accept_on(listeners_[i], now_ns);
  for (Listener& l : listeners_) send_events(l);
  if (!retired_.empty() && now_ns >= next_reap_ns_) {
    next_reap_ns_ = now_ns + kReapIntervalNs;
    for (Listener& l : listeners_) reap(l);
  }
}

AppServer::Memory AppServer::share(const shm::Mapping& mem, const Listener& l) const {
  Memory m;
  m.mem = mem;
  if (cfg_->tx_payload != TxPayload::kExtbuf) return m;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = mem.bytes / page;
  auto* base = static_cast<uint8_t*>(mem.addr);
  std::vector<rte_iova_t> iovas(pages);
  if (rte_eal_iova_mode() == RTE_IOVA_VA) {
    for (size_t i = 0; i < pages; ++i) iovas[i] = reinterpret_cast<rte_iova_t>(base + i * page);
  } else {
    // Physical addresses: known (and kept) only for pages locked in memory.
    if (::mlock(base, mem.bytes) != 0) return m;
    for (size_t i = 0; i < pages; ++i) {
      iovas[i] = rte_mem_virt2phy(base + i * page);
      if (iovas[i] == RTE_BAD_IOVA || iovas[i] != iovas[0] + i * page) return m;
    }
  }
  // Fails when DPDK's memseg lists are all taken: the region is then copied.
  if (pages == 0 ||
      rte_extmem_register(base, mem.bytes, iovas.data(), static_cast<unsigned>(pages), page) != 0)
    return m;
  m.extmem = true;
  m.iova = iovas[0];
  // Every port's device reads the payload in place: a NIC by DMA, so the
  // region is mapped for it (into the IOMMU, VFIO's or the PMD's own); a
  // vdev reads with the CPU and its bus maps nothing. A device that cannot
  // map (ENOTSUP) needs no mapping in IOVA-PA mode, where it is given the
  // physical addresses; in IOVA-VA mode the region is then copied instead.
  for (rte_device* d : l.devices) {
    if (rte_dev_dma_map(d, base, m.iova, mem.bytes) >= 0) {
      m.dma_mapped.push_back(d);
      continue;
    }
    if (rte_errno == ENOTSUP && rte_eal_iova_mode() == RTE_IOVA_PA) continue;
    std::printf(
        "softmrcd: a %zu-byte application region is sent by copy: %s cannot DMA-map it "
        "(%s)\n",
        mem.bytes, rte_dev_name(d), std::strerror(rte_errno));
    std::fflush(stdout);
    unmap_dma(&m);
    (void)rte_extmem_unregister(base, mem.bytes);
    m.extmem = false;
    return m;
  }
  return m;
}

void AppServer::unmap_dma(Memory* m) {
  for (rte_device* d : m->dma_mapped)
    (void)rte_dev_dma_unmap(d, m->mem.addr, m->iova, m->mem.bytes);
  m->dma_mapped.clear();
}

void AppServer::unshare(Memory* m) {
  unmap_dma(m);
  if (m->extmem) (void)rte_extmem_unregister(m->mem.addr, m->mem.bytes);
  m->extmem = m->framed = false;
  shm::unmap_shared(&m->mem);
}

void AppServer::reap(Listener& l) {
  std::vector<uint8_t> idle(retired_.size(), 0);
  bool any = false;
  for (const Retired& r : retired_) any = any || r.l == &l;
  if (!any) return;
  l.task->call([&](EndpointTask& t, uint64_t) {
    for (size_t i = 0; i < retired_.size(); ++i) {
      const Retired& r = retired_[i];
      if (r.l != &l) continue;
      // A send its application queued holds a pointer into the mapping.
      bool busy = false;
      for (const auto& c : clients_)
        if (c->owner == r.owner)
          for (const auto& [qpn, q] : c->qps)
            if (const engine::Qp* eq = t.engine().qp(qpn); eq && eq->send_queue_depth() > 0)
              busy = true;
      const auto* base = static_cast<const uint8_t*>(r.m.mem.addr);
      idle[i] = !busy && (!r.m.framed || t.framer().release_retired(base));
    }
  });
  size_t i = 0;
  std::erase_if(retired_, [&](Retired& r) {
    if (!idle[i++]) return false;
    unshare(&r.m);
    return true;
  });
}

void AppServer::accept_on(Listener& l, uint64_t now_ns) {
  for (size_t greeting_now = greeting(); greeting_now < kMaxGreeting; ++greeting_now) {
    const int fd = ::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto c = std::make_unique<Client>();
    c->fd = fd;
    c->hello_by_ns = now_ns + kHelloTimeoutNs;
    ++counted_.connections;
    c->owner = next_owner_++;
    if (next_owner_ == 0) ++next_owner_;  // an event for owner 0 goes to all
    // The socket's mode keeps others out; a mode opened up by mistake does not
    // let them in: their first request gets EACCES.
    uint32_t uid = 0;
    if (!access_.allows(fd, &uid, &c->pid, &c->denied)) {
      ++counted_.refused;
      std::printf("softmrcd: %s: refused an application: %s\n",
                  cfg_->endpoints[l.endpoint].name.c_str(), c->denied.c_str());
      std::fflush(stdout);
    }
    c->name = "app " + std::to_string(c->pid);
    c->l = &l;
    clients_.push_back(std::move(c));
  }
}

namespace {

// Whether an application's socket takes another event. An event goes only
// while the socket is writable (poll(): at most a quarter of its buffer
// unread), so the rest stays free for the replies, which are never held.
bool room_for_event(int fd) {
  pollfd p{fd, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
}

bool send_event(int fd, const shm::EventMsg& e) {
  Msg m{};
  m.magic = shm::kAppMagic;
  m.type = uint16_t(MsgType::kEvent);
  m.u.event = e;
  return ::send(fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) == ssize_t(sizeof(m));
}

}  // namespace

// Events are never lost to an application that is slow to take them: each
// waits in its `unsent`, in order, up to kMaxUnsentEvents, and goes once
// its socket has room.
void AppServer::send_events(Listener& l) {
  AppEvent ev[32];
  for (;;) {
    for (auto& c : clients_) {
      if (c->l != &l) continue;
      while (!c->unsent.empty() && room_for_event(c->fd) && send_event(c->fd, c->unsent.front()))
        c->unsent.pop_front();
    }
    const uint32_t n = l.stage->take_events(ev, 32);
    if (n == 0) return;
    for (uint32_t i = 0; i < n; ++i)
      for (auto& c : clients_) {
        if (c->l != &l || !c->hello || (ev[i].owner != 0 && ev[i].owner != c->owner)) continue;
        if (c->unsent.size() < kMaxUnsentEvents)
          c->unsent.push_back(ev[i].msg);
        else
          ++counted_.events_dropped;
      }
  }
}

bool AppServer::serve(Client& c) {
  Msg req{};
  // Every descriptor that came along is ours to close, however many.
  std::vector<int> fds;
  bool truncated = false;
  const ssize_t n = shm::recv_message(c.fd, &req, MSG_DONTWAIT, &fds, &truncated);
  if (n < 0 && errno == EAGAIN) return true;
  if (n <= 0) {
    for (int fd : fds) shm::close_received(fd);
    return false;
  }
  Msg rep{};
  rep.magic = shm::kAppMagic;
  rep.type = req.type | shm::kReplyBit;
  rep.seq = req.seq;
  const char* why = "ok";
  int st = truncated ? EPROTO
                     : shm::validate_message(req, static_cast<size_t>(n), fds.size() == 1, &why);
  if (truncated) why = "message or descriptors truncated";
  if (st == 0 && fds.size() > 1) {
    st = EBADF;
    why = "more than one file descriptor";
  }
  std::string denial;
  if (!c.denied.empty()) {
    denial = "permission denied: " + c.denied;
    st = EACCES;
    why = denial.c_str();
    c.refused = true;
  }
  if (st == 0 && !c.hello && req.type != uint16_t(MsgType::kHello)) {
    st = EPROTO;
    why = "hello first";
  }
  int reply_fd = -1;
  if (st == 0) {
    handle(c, req, fds.empty() ? -1 : fds[0], &rep, &reply_fd);
  } else {
    rep.status = st;
    std::snprintf(rep.detail, sizeof(rep.detail), "%s", why);
  }
  for (int fd : fds) shm::close_received(fd);
  // Never wait for an application: one that does not read its replies
  // (its socket buffer is full) is dropped rather than stall the thread.
  const bool sent = shm::send_message(c.fd, rep, reply_fd, MSG_DONTWAIT) == 0;
  if (reply_fd >= 0) ::close(reply_fd);
  return sent && !c.refused;
}

namespace {

constexpr const char* kMappingsUsedUp =
    "softmrcd maps as many regions, CQs and QPs as vm.max_map_count lets it";

void refuse(Msg* rep, int st, const char* why) {
  rep->status = st;
  std::snprintf(rep->detail, sizeof(rep->detail), "%s", why);
}

// Engine QP states and the API's are numbered alike.
engine::QpState to_engine(uint32_t s) {
  return static_cast<engine::QpState>(s);
}

}  // namespace

void AppServer::handle(Client& c, const Msg& req, int fd, Msg* rep, int* reply_fd) {
  Listener& l = *c.l;
  EndpointTask& task = *l.task;
  AppStage& stage = *l.stage;
  const Config& cfg = *cfg_;
  const EndpointSpec& spec = cfg.endpoints[l.endpoint];
  switch (static_cast<MsgType>(req.type)) {
    case MsgType::kHello: {
      if (req.u.hello.protocol_version != shm::kAppProtocolVersion)
        return refuse(rep, EPROTO, "protocol version differs from the daemon's");
      if (req.u.hello.api_version >> 16 != SMRC_API_VERSION_MAJOR)
        return refuse(rep, EPROTO, "API major version differs from the daemon's");
      if (!c.hello && clients_.size() - greeting() >= kMaxClients) {
        c.refused = true;
        ++counted_.busy;
        return refuse(rep, EBUSY, "softmrcd serves as many applications as it may (256)");
      }
      c.hello = true;
      ++counted_.served;
      shm::HelloRep& h = rep->u.hello_rep;
      std::snprintf(h.name, sizeof(h.name), "%s", spec.name.c_str());
      gid_of(spec, h.gid);
      h.api_version = SMRC_API_VERSION;
      h.num_planes = static_cast<uint32_t>(spec.planes.size());
      h.max_qp = cfg.limits.max_qps;
      h.max_mr = cfg.limits.max_regions;
      h.max_cq = shm::kMaxCqsPerClient;
      h.max_cqe = shm::kMaxCqe;
      h.max_qp_wr = std::min({cfg.limits.max_send_wr, cfg.limits.max_recv_wr, shm::kMaxQpWr});
      h.path_mtu = cfg.path_mtu;
      h.max_mr_size = shm::kMaxMrBytes;
      h.max_msg_size = shm::kMaxMsgBytes;
      h.max_wimm = cfg.limits.max_wimm;
      h.max_mpr = cfg.limits.max_mpr;
      h.max_timeout = engine::kMaxTimeout;
      h.device_cap_flags =
          SMRC_DEVICE_CAP_DYNAMIC_MPR | SMRC_DEVICE_CAP_TRIM_NACK | SMRC_DEVICE_CAP_SVC_TIME;
      h.num_ev_profiles = static_cast<uint32_t>(cfg.ev_profiles.size());
      h.num_cc_profiles = static_cast<uint32_t>(cfg.cc_profiles.size());
      return;
    }
    case MsgType::kQueryProfile: {
      const auto& q = req.u.query_profile;
      uint64_t id = 0;
      if (q.kind == SMRC_PROFILE_EV) {
        for (size_t i = 0; i < cfg.ev_profiles.size(); ++i)
          if (cfg.ev_profiles[i].name == q.name) id = i + 1;
      } else {
        for (size_t i = 0; i < cfg.cc_profiles.size(); ++i)
          if (cfg.cc_profiles[i].name == q.name) id = i + 1;
      }
      if (id == 0) return refuse(rep, ENOENT, "no profile of that name");
      rep->u.query_profile_rep.id = id;
      return;
    }
    case MsgType::kAllocPd: {
      if (c.pds.size() >= shm::kMaxPdsPerClient) return refuse(rep, ENOMEM, "too many PDs");
      const uint32_t id = c.next_id++;
      c.pds[id] = new_domain();
      rep->u.id_rep.id = id;
      return;
    }
    case MsgType::kDeallocPd: {
      auto it = c.pds.find(req.u.key.id);
      if (it == c.pds.end()) return refuse(rep, EINVAL, "no such PD");
      const auto in_pd = [&](const auto& entry) { return entry.second.pd == it->first; };
      if (std::ranges::any_of(c.regions, in_pd) || std::ranges::any_of(c.qps, in_pd))
        return refuse(rep, EBUSY, "a region or QP still uses the PD");
      release_domain(it->second);
      c.pds.erase(it);
      return;
    }
    case MsgType::kRegMr: {
      const shm::RegMrReq& r = req.u.reg_mr;
      auto pd = c.pds.find(r.pd);
      if (pd == c.pds.end()) return refuse(rep, EINVAL, "no such PD");
      const uint32_t domain = pd->second;
      if (!may_map()) return refuse(rep, ENOMEM, kMappingsUsedUp);
      shm::Mapping mem;
      const char* why = "ok";
      if (const int st = shm::map_shared(fd, r.length, &mem, &why); st != 0)
        return refuse(rep, st, why);
      Memory m = share(mem, l);
      engine::Region region;
      region.va = r.addr;
      region.length = r.length;
      region.host = static_cast<uint8_t*>(mem.addr);
      region.access = engine::kAccessLocalWrite |
                      ((r.access & SMRC_ACCESS_REMOTE_WRITE) ? engine::kAccessRemoteWrite : 0);
      region.domain = domain;  // only the PD's QPs reach it
      uint32_t key = 0;
      bool ok = false;
      task.call([&](EndpointTask& t, uint64_t) {
        if (!t.engine().register_region(region, &key).ok()) return;
        ok = stage.add_region(shm::RegionEntry{key, domain, r.addr, r.length});
        if (!ok) {
          (void)t.engine().deregister_region(key);
          return;
        }
        std::string unused;  // the mappings never overlap
        m.framed =
            m.extmem && t.framer().add_extbuf_region(region.host, mem.bytes, m.iova, &unused);
      });
      if (!ok) {
        unshare(&m);
        return refuse(rep, ENOMEM, "the endpoint's region table is full (limits.max_regions)");
      }
      m.pd = r.pd;
      c.regions[key] = m;
      rep->u.reg_mr_rep.key = key;
      return;
    }
    case MsgType::kDeregMr: {
      const uint32_t key = req.u.key.id;
      auto it = c.regions.find(key);
      if (it == c.regions.end()) return refuse(rep, EINVAL, "no region of this application");
      task.call([&](EndpointTask& t, uint64_t) {
        stage.remove_region(key);
        (void)t.engine().deregister_region(key);
        t.framer().retire_extbuf_region(static_cast<const uint8_t*>(it->second.mem.addr));
      });
      retired_.push_back(Retired{&l, c.owner, it->second});
      c.regions.erase(it);
      reap(l);
      return;
    }
    case MsgType::kCreateChannel: {
      if (c.channels.size() >= shm::kMaxChannelsPerClient)
        return refuse(rep, ENOMEM, "too many completion channels");
      size_t channels = 0;
      for (const auto& other : clients_) channels += other->channels.size();
      if (channels >= channel_budget_)
        return refuse(rep, ENOMEM,
                      "softmrcd holds as many completion channels as its descriptor "
                      "limit allows");
      // The daemon makes the pipe and keeps its write end: nothing the
      // application does to its end can make the lcore's write block (a
      // full pipe: EAGAIN) or raise a signal (a closed one: EPIPE, SIGPIPE
      // is ignored). An application's own eventfd could do both.
      int p[2];
      if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return refuse(rep, EMFILE, "cannot create the channel's pipe");
      const uint32_t id = c.next_id++;
      c.channels[id] = p[1];
      *reply_fd = p[0];
      rep->u.id_rep.id = id;
      return;
    }
    case MsgType::kDestroyChannel: {
      auto it = c.channels.find(req.u.key.id);
      if (it == c.channels.end()) return refuse(rep, EINVAL, "no such channel");
      for (auto& [id, cq] : c.cqs)
        if (cq.channel == it->first) return refuse(rep, EBUSY, "a CQ still uses the channel");
      ::close(it->second);
      c.channels.erase(it);
      return;
    }
    case MsgType::kCreateCq: {
      const shm::CreateCqReq& r = req.u.create_cq;
      if (c.cqs.size() >= shm::kMaxCqsPerClient) return refuse(rep, ENOMEM, "too many CQs");
      if (!may_map()) return refuse(rep, ENOMEM, kMappingsUsedUp);
      int wake_fd = -1;
      if (r.channel != 0) {
        auto ch = c.channels.find(r.channel);
        if (ch == c.channels.end()) return refuse(rep, EINVAL, "no such channel");
        wake_fd = ch->second;
      }
      Client::Cq cq;
      const char* why = "ok";
      if (const int st = shm::map_shared(fd, shm::cq_bytes(r.capacity), &cq.mem, &why); st != 0)
        return refuse(rep, st, why);
      auto* ctrl = new (cq.mem.addr) shm::CqControl;
      ctrl->armed.store(0);
      ctrl->fired.store(0);
      ctrl->overflow.store(0);
      void* ring = static_cast<char*>(cq.mem.addr) + shm::cq_ring_offset();
      shm::format_ring(ring);
      cq.cq = std::make_unique<AppCq>();
      cq.cq->id = c.next_id++;
      cq.cq->owner = c.owner;
      cq.cq->ctrl = ctrl;
      cq.cq->ring.attach(ring, r.capacity);
      cq.cq->backlog.init(r.capacity);
      cq.cq->wake_fd = wake_fd;
      cq.channel = r.channel;
      AppCq* p = cq.cq.get();
      task.call([&](EndpointTask&, uint64_t) { stage.add_cq(p); });
      rep->u.id_rep.id = p->id;
      c.cqs[p->id] = std::move(cq);
      return;
    }
    case MsgType::kDestroyCq: {
      auto it = c.cqs.find(req.u.key.id);
      if (it == c.cqs.end()) return refuse(rep, EINVAL, "no such CQ");
      for (auto& [qpn, q] : c.qps)
        if (q.send_cq == it->first || q.recv_cq == it->first)
          return refuse(rep, EBUSY, "a QP still uses the CQ");
      AppCq* p = it->second.cq.get();
      task.call([&](EndpointTask&, uint64_t) { stage.remove_cq(p); });
      shm::unmap_shared(&it->second.mem);
      c.cqs.erase(it);
      return;
    }
    case MsgType::kCreateQp: {
      const shm::CreateQpReq& r = req.u.create_qp;
      auto scq = c.cqs.find(r.send_cq), rcq = c.cqs.find(r.recv_cq);
      if (scq == c.cqs.end() || rcq == c.cqs.end())
        return refuse(rep, EINVAL, "no such CQ (send or receive)");
      auto pd = c.pds.find(r.pd);
      if (pd == c.pds.end()) return refuse(rep, EINVAL, "no such PD");
      const uint32_t domain = pd->second;
      if (r.max_send_wr == 0 || r.max_send_wr > cfg.limits.max_send_wr ||
          r.max_recv_wr > cfg.limits.max_recv_wr)
        return refuse(rep, EINVAL, "max_send_wr or max_recv_wr over the endpoint's limits");
      if (!may_map()) return refuse(rep, ENOMEM, kMappingsUsedUp);
      Client::Qp q;
      const char* why = "ok";
      if (const int st = shm::map_shared(
              fd, shm::qp_bytes(r.send_ring_capacity, r.recv_ring_capacity), &q.mem, &why);
          st != 0)
        return refuse(rep, st, why);
      void* recv_ring =
          static_cast<char*>(q.mem.addr) + shm::qp_recv_ring_offset(r.send_ring_capacity);
      shm::format_ring(q.mem.addr);
      shm::format_ring(recv_ring);
      q.qp = std::make_unique<AppQp>();
      q.qp->owner = c.owner;
      q.qp->domain = domain;
      q.qp->pid = c.pid;
      q.qp->max_send_wr = r.max_send_wr;
      q.qp->max_recv_wr = r.max_recv_wr;
      q.qp->sig_all = r.sq_sig_all != 0;
      q.qp->send_cq = scq->second.cq.get();
      q.qp->recv_cq = rcq->second.cq.get();
      q.qp->send_ring.attach(q.mem.addr, r.send_ring_capacity);
      q.qp->recv_ring.attach(recv_ring, r.recv_ring_capacity);
      q.send_cq = r.send_cq;
      q.recv_cq = r.recv_cq;
      uint32_t qpn = 0;
      AppQp* p = q.qp.get();
      task.call([&](EndpointTask& t, uint64_t) {
        if (t.engine().create_qp(&qpn, domain).ok()) stage.add_qp(qpn, p);
      });
      if (qpn == 0) {
        shm::unmap_shared(&q.mem);
        return refuse(rep, ENOMEM, "the endpoint's QP table is full (limits.max_qps)");
      }
      rep->u.create_qp_rep.qpn = qpn;
      q.pd = r.pd;
      c.qps[qpn] = std::move(q);
      return;
    }
    case MsgType::kDestroyQp: {
      auto it = c.qps.find(req.u.key.id);
      if (it == c.qps.end()) return refuse(rep, EINVAL, "no QP of this application");
      const uint32_t qpn = it->first;
      task.call([&](EndpointTask& t, uint64_t) {
        stage.remove_qp(qpn);
        (void)t.engine().destroy_qp(qpn);
      });
      profiles_->detach_qp(l.endpoint, qpn);
      shm::unmap_shared(&it->second.mem);
      c.qps.erase(it);
      // Its events go before the reply, or not at all: one arriving after
      // it would be taken for a later QP's of the same number.
      std::erase_if(c.unsent, [&](const shm::EventMsg& e) {
        return e.kind == uint32_t(shm::EventKind::kQpFatal) && e.qpn == qpn;
      });
      return;
    }
    case MsgType::kModifyQp:
    case MsgType::kQueryQp: {
      const bool modify = req.type == uint16_t(MsgType::kModifyQp);
      const uint32_t qpn = modify ? req.u.modify_qp.qpn : req.u.key.id;
      auto it = c.qps.find(qpn);
      if (it == c.qps.end()) return refuse(rep, EINVAL, "no QP of this application");
      Client::Qp& cq = it->second;
      if (!modify) {
        shm::WireQpAttr& w = rep->u.query_qp_rep.attr;
        task.call([&](EndpointTask& t, uint64_t) {
          const engine::Qp* q = t.engine().qp(qpn);
          if (q == nullptr) return;
          const engine::QpAttr& a = q->attr();
          w.qp_state = uint32_t(q->state());
          w.path_mtu = a.path_mtu;
          w.dest_qp_num = a.dest_qpn;
          w.rq_psn = a.rq_psn;
          w.sq_psn = a.sq_psn;
          w.caps = a.caps;
          w.max_wimm_dest = a.max_wimm_dest;
          w.max_wimm = a.max_wimm;
          w.mpr_dest = a.mpr_dest;
          w.mpr = a.mpr;
          w.timeout = a.timeout;
          w.retry_linear = a.retry_linear;
          w.retry_exp = a.retry_exp;
        });
        w.ev_profile_id = cq.ev_profile_id;
        w.cc_profile_id = cq.cc_profile_id;
        std::memcpy(w.dgid, cq.dgid, 16);
        return;
      }
      const uint32_t mask = req.u.modify_qp.mask;
      const shm::WireQpAttr& w = req.u.modify_qp.attr;
      int st = 0;
      const char* why = "ok";
      uint32_t peer = engine::kUnknownPeer;
      if (mask & SMRC_QP_AV) {
        for (uint32_t i = 0; i < cfg.endpoints.size(); ++i) {
          uint8_t g[16];
          gid_of(cfg.endpoints[i], g);
          if (std::memcmp(g, w.dgid, 16) == 0) peer = i;
        }
      }
      // A QP attaches to its profiles on its way from RESET to INIT; at
      // INIT -> INIT (rdma_cm does one before RTR) it moves to those it
      // names and keeps the other. Either is undone below if the transition
      // fails. An attached QP is past RESET: sent to INIT from RTR, RTS or
      // ERR it moves to no profile, and the transition is refused.
      const bool to_init =
          (mask & SMRC_QP_STATE) && to_engine(w.qp_state) == engine::QpState::kInit;
      const uint32_t named = mask & (SMRC_QP_EV_PROFILE | SMRC_QP_CC_PROFILE);
      bool moving = false;
      if (to_init && cq.attached && named != 0) {
        task.call([&](EndpointTask& t, uint64_t) {
          const engine::Qp* q = t.engine().qp(qpn);
          moving = q != nullptr && q->state() == engine::QpState::kInit;
        });
      }
      QpProfiles prof;
      bool attaching = false;
      if (to_init && (!cq.attached || moving)) {
        // Not named at INIT -> INIT: the QP's own (0, the default, again).
        const uint64_t keep_ev = moving ? cq.ev_profile_id : 0;
        const uint64_t keep_cc = moving ? cq.cc_profile_id : 0;
        std::string detail;
        const int e = profiles_->attach_qp(
            l.endpoint, qpn, c.name, (mask & SMRC_QP_EV_PROFILE) ? w.ev_profile_id : keep_ev,
            (mask & SMRC_QP_CC_PROFILE) ? w.cc_profile_id : keep_cc, &prof, &detail);
        if (e != 0) return refuse(rep, e, detail.c_str());
        attaching = !moving;
      }
      bool reset = false;
      task.call([&](EndpointTask& t, uint64_t now) {
        engine::Endpoint& ep = t.engine();
        const engine::Qp* q = ep.qp(qpn);
        if (q == nullptr) {
          st = EINVAL;
          why = "QP gone";
          return;
        }
        // A receive posted before RTR must be there when the first packet is.
        stage.take_posted(ep, qpn);
        const engine::QpState from = q->state();
        const engine::QpState to = (mask & SMRC_QP_STATE) ? to_engine(w.qp_state) : from;
        engine::QpAttr a;
        a.state = to;
        uint32_t em = engine::kAttrState;
        uint32_t allowed = SMRC_QP_STATE, required = 0;
        if (to == engine::QpState::kInit &&
            ((from == engine::QpState::kReset && attaching) ||
             (from == engine::QpState::kInit && (moving || named == 0)))) {
          // From RESET the QP takes both profiles; at INIT -> INIT those named.
          const bool fresh = from == engine::QpState::kReset;
          allowed |= SMRC_QP_EV_PROFILE | SMRC_QP_CC_PROFILE;
          if (fresh || (mask & SMRC_QP_EV_PROFILE)) {
            a.evs = prof.evs;
            a.ev_config = prof.ev_config;
            a.ev_config.num_planes = static_cast<uint8_t>(t.num_planes());
            em |= engine::kAttrEvProfile;
          }
          if (fresh || (mask & SMRC_QP_CC_PROFILE)) {
            a.cc = prof.cc;
            em |= engine::kAttrCcProfile;
          }
        } else if (from == engine::QpState::kInit && to == engine::QpState::kRtr) {
          allowed |= SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN | SMRC_QP_PATH_MTU |
                     SMRC_QP_MPR_DEST | SMRC_QP_MAX_WIMM_DEST | SMRC_QP_CAPS;
          required = SMRC_QP_AV | SMRC_QP_DEST_QPN | SMRC_QP_RQ_PSN;
          a.peer = peer;
          a.dest_qpn = w.dest_qp_num;
          a.rq_psn = w.rq_psn;
          a.path_mtu = (mask & SMRC_QP_PATH_MTU) ? w.path_mtu : cfg.path_mtu;
          a.mpr_dest = (mask & SMRC_QP_MPR_DEST) ? w.mpr_dest : cfg.qp.mpr;
          a.max_wimm_dest = (mask & SMRC_QP_MAX_WIMM_DEST) ? w.max_wimm_dest : cfg.qp.max_wimm;
          a.caps = w.caps;
          em |= engine::kAttrDest | engine::kAttrPathMtu | engine::kAttrRqPsn |
                engine::kAttrMprDest | engine::kAttrMaxWimmDest |
                ((mask & SMRC_QP_CAPS) ? engine::kAttrCaps : 0);
        } else if (from == engine::QpState::kRtr && to == engine::QpState::kRts) {
          allowed |= SMRC_QP_SQ_PSN | SMRC_QP_MPR | SMRC_QP_MAX_WIMM | SMRC_QP_TIMEOUT |
                     SMRC_QP_RETRY_CNT | SMRC_QP_CAPS;
          required = SMRC_QP_SQ_PSN;
          a.sq_psn = w.sq_psn;
          a.mpr = (mask & SMRC_QP_MPR) ? w.mpr : cfg.qp.mpr;
          a.max_wimm = (mask & SMRC_QP_MAX_WIMM) ? w.max_wimm : cfg.qp.max_wimm;
          a.timeout = (mask & SMRC_QP_TIMEOUT) ? w.timeout : cfg.qp.timeout;
          a.retry_linear = (mask & SMRC_QP_RETRY_CNT) ? w.retry_linear : cfg.qp.retry_linear;
          a.retry_exp = (mask & SMRC_QP_RETRY_CNT) ? w.retry_exp : cfg.qp.retry_exp;
          a.caps = w.caps;
          em |= engine::kAttrSqPsn | engine::kAttrMpr | engine::kAttrMaxWimm |
                engine::kAttrTimeout | engine::kAttrRetryCnt |
                ((mask & SMRC_QP_CAPS) ? engine::kAttrCaps : 0);
        } else if (from == engine::QpState::kRts && to == engine::QpState::kRts) {
          allowed |= SMRC_QP_TIMEOUT | SMRC_QP_RETRY_CNT;
          a.timeout = w.timeout;
          a.retry_linear = w.retry_linear;
          a.retry_exp = w.retry_exp;
          em |= ((mask & SMRC_QP_TIMEOUT) ? engine::kAttrTimeout : 0) |
                ((mask & SMRC_QP_RETRY_CNT) ? engine::kAttrRetryCnt : 0);
        }
        if (mask & ~allowed) {
          st = EINVAL;
          why = "attribute not settable in this transition (or the transition does not exist)";
          return;
        }
        if ((mask & required) != required) {
          st = EINVAL;
          why = "required attribute missing (RTR: AV, DEST_QPN, RQ_PSN; RTS: SQ_PSN)";
          return;
        }
        if ((required & SMRC_QP_AV) && peer == engine::kUnknownPeer) {
          st = EHOSTUNREACH;
          why = "dgid names no configured endpoint or peer";
          return;
        }
        if ((em & engine::kAttrPathMtu) && a.path_mtu > cfg.path_mtu) {
          st = EINVAL;
          why = "path_mtu over the endpoint's";
          return;
        }
        if (engine::Status s = ep.modify_qp(qpn, a, em, now); !s.ok()) {
          st = EINVAL;
          why = s.reason();
          return;
        }
        // The EVs the controller denied in the profile start denied.
        if (em & engine::kAttrEvProfile)
          for (uint32_t ev : prof.denied) (void)ep.set_ev_denied(qpn, ev, true, now);
        reset = to == engine::QpState::kReset;
        if (reset) stage.drop_posted(qpn);
      });
      if (st != 0) {
        if (attaching) profiles_->detach_qp(l.endpoint, qpn);
        // Back to the profiles it held a moment ago: nothing can have
        // changed them (the registry is this thread's, and a profile stays
        // ONLINE while attached), so this cannot fail but is said if it does.
        std::string detail;
        QpProfiles old;
        if (moving && profiles_->attach_qp(l.endpoint, qpn, c.name, cq.ev_profile_id,
                                           cq.cc_profile_id, &old, &detail) != 0) {
          std::printf("softmrcd: %s: QP %u stays on the profiles of a refused INIT -> INIT: %s\n",
                      spec.name.c_str(), qpn, detail.c_str());
          std::fflush(stdout);
        }
        return refuse(rep, st, why);
      }
      if (attaching) cq.attached = true;
      if (reset && cq.attached) {
        profiles_->detach_qp(l.endpoint, qpn);
        cq.attached = false;
      }
      if (reset) {  // as the engine's QP, it keeps no attribute
        cq.ev_profile_id = cq.cc_profile_id = 0;
        std::memset(cq.dgid, 0, sizeof(cq.dgid));
        return;
      }
      if (mask & SMRC_QP_EV_PROFILE) cq.ev_profile_id = w.ev_profile_id;
      if (mask & SMRC_QP_CC_PROFILE) cq.cc_profile_id = w.cc_profile_id;
      if (mask & SMRC_QP_AV) std::memcpy(cq.dgid, w.dgid, 16);
      return;
    }
    case MsgType::kEvent:
      break;
  }
  refuse(rep, EINVAL, "unknown message type");
}

uint32_t AppServer::new_domain() {
  while (next_domain_ == engine::kDefaultDomain || domains_.contains(next_domain_)) ++next_domain_;
  domains_.insert(next_domain_);
  return next_domain_++;
}

// The application is gone: its QPs first (nothing more is sent from or
// placed into its memory once they and its regions left the engine, all in
// one call on the lcore), then everything it shared is unmapped.
void AppServer::drop(Client& c) {
  Listener& l = *c.l;
  if (!c.hello) {  // it could create nothing
    shm::close_received(c.fd);
    std::erase_if(clients_, [&](const std::unique_ptr<Client>& p) { return p.get() == &c; });
    return;
  }
  AppStage& stage = *l.stage;
  c.l->task->call([&](EndpointTask& t, uint64_t now) {
    for (auto& [qpn, q] : c.qps) {
      stage.remove_qp(qpn);
      (void)t.engine().abort_qp(qpn, now);  // its peer hears of it at once
    }
    for (auto& [id, cq] : c.cqs) stage.remove_cq(cq.cq.get());
    for (auto& [key, r] : c.regions) {
      stage.remove_region(key);
      (void)t.engine().deregister_region(key);
      t.framer().retire_extbuf_region(static_cast<const uint8_t*>(r.mem.addr));
    }
  });
  ++counted_.gone;
  for (auto& [qpn, q] : c.qps) profiles_->detach_qp(c.l->endpoint, qpn);
  std::printf("softmrcd: %s: application %u went away: %zu QPs destroyed, %zu regions freed\n",
              cfg_->endpoints[c.l->endpoint].name.c_str(), c.owner, c.qps.size(), c.regions.size());
  std::fflush(stdout);
  for (auto& [qpn, q] : c.qps) shm::unmap_shared(&q.mem);
  for (auto& [id, cq] : c.cqs) shm::unmap_shared(&cq.mem);
  for (auto& [key, r] : c.regions) retired_.push_back(Retired{c.l, c.owner, r});
  for (auto& [id, wake_fd] : c.channels) ::close(wake_fd);
  for (auto& [id, domain] : c.pds) release_domain(domain);
  shm::close_received(c.fd);
  std::erase_if(clients_, [&](const std::unique_ptr<Client>& p) { return p.get() == &c; });
  reap(l);
}

// The lcores have stopped: nothing is placed any more.
void AppServer::close() {
  for (auto& c : clients_) {
    for (auto& [qpn, q] : c->qps) shm::unmap_shared(&q.mem);
    for (auto& [id, cq] : c->cqs) shm::unmap_shared(&cq.mem);
    for (auto& [key, r] : c->regions) unshare(&r);
    for (auto& [id, wake_fd] : c->channels) ::close(wake_fd);
    shm::close_received(c->fd);
  }
  clients_.clear();
  // The mbufs still pointing into retired regions are freed without their
  // payload being read (the ports no longer send).
  for (Retired& r : retired_) unshare(&r.m);
  retired_.clear();
  for (Listener& l : listeners_) {
    if (l.task) l.task->set_app_stage(nullptr);
    ::close(l.fd);
    ::unlink(l.path.c_str());
  }
  listeners_.clear();
}

}  // namespace softmrc::softmrcd
