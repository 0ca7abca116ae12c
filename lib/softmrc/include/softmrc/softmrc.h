/*
 * softmrc.h - the application API of softmrc (libsoftmrc).
 *
 * An application drives MRC queue pairs hosted by a softmrcd endpoint. The
 * concepts mirror the OCP MRC API (mrc.h) and libibverbs, under our own
 * names and with a plain C ABI: a device (one softmrcd endpoint, reached
 * through its application socket), a protection domain, memory regions,
 * completion queues with an optional completion channel, and reliable
 * queue pairs that move RESET -> INIT -> RTR -> RTS and carry only RDMA
 * Write and RDMA Write-with-Immediate. Receive work requests exist only to
 * consume Write-with-Immediate and have no scatter list.
 *
 * Full reference, memory model, threading rules and an example:
 * docs/api.md.
 *
 * Errors. Calls returning int return 0 on success or a positive errno
 * value (EINVAL, ENOMEM, ENOTCONN, ...), as ibv_modify_qp() does; calls
 * returning a pointer return NULL and set errno; smrc_poll_cq() returns
 * the number of completions or a negative errno value. ENOTCONN always
 * means the daemon is gone: the context is dead and only the destroy
 * calls and smrc_close_device() remain useful. The library learns of it
 * in slow-path calls, waits, and empty polls of a CQ; posting does not
 * look (it returns 0 until another call has found out). A daemon that
 * does not answer a slow-path call within the reply timeout
 * (SMRC_REPLY_TIMEOUT_ENV; stopped with SIGSTOP, say) is given up as gone:
 * that call fails with ETIMEDOUT, the library hangs up (the daemon, when
 * it runs again, frees what the context had), and the context is dead as
 * above.
 *
 * Threading. Slow-path calls (open, create, modify, destroy, alloc) may be
 * made from any thread. The data path is single-threaded per queue: a QP
 * has a send ring and a receive ring, so one thread at a time posts its
 * sends and one thread at a time its receives (the same thread or two),
 * and one thread at a time polls a CQ.
 */
#ifndef SOFTMRC_SOFTMRC_H
#define SOFTMRC_SOFTMRC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API this header describes: (major << 16) | minor. The library's
 * soname carries the major (libsoftmrc.so.1), so an application is only
 * ever loaded with a library of the major it was built for; the functions
 * a minor adds come in a symbol version of their own (SOFTMRC_1.1, ...),
 * so a library of an older minor that lacks them is refused at load time.
 * The daemon and the library agree on their own protocol version when a
 * device is opened (EPROTO if they do not). */
#define SMRC_API_VERSION_MAJOR 1
#define SMRC_API_VERSION_MINOR 0
#define SMRC_API_VERSION ((SMRC_API_VERSION_MAJOR << 16) | SMRC_API_VERSION_MINOR)

/* The library's API version, (major << 16) | minor. */
uint32_t smrc_api_version(void);
/* The library's version string, e.g. "softmrc 0.1.0 (api 1.0, protocol 5)":
 * the API version it implements and the version of the protocol it speaks
 * to softmrcd (a daemon of another protocol version refuses it, EPROTO). */
const char* smrc_version_string(void);

/* Where smrc_open_device(NULL) connects: $SOFTMRC_SOCKET, else this. */
#define SMRC_DEFAULT_SOCKET "/run/softmrc/softmrcd.sock"
#define SMRC_SOCKET_ENV "SOFTMRC_SOCKET"
/* How long a slow-path call (every call that is not a post, a poll or a
 * wait for an event) waits for the daemon to take its connection and to
 * answer: $SOFTMRC_REPLY_TIMEOUT_MS (1..3600000), read when the device is
 * opened, else this. A daemon that takes longer is given up as gone. */
#define SMRC_REPLY_TIMEOUT_ENV "SOFTMRC_REPLY_TIMEOUT_MS"
#define SMRC_DEFAULT_REPLY_TIMEOUT_MS 30000

/* ------------------------------------------------------------------ */
/* Opaque handles                                                      */

struct smrc_context;      /* an open device: one softmrcd endpoint */
struct smrc_pd;           /* protection domain */
struct smrc_comp_channel; /* wakes a thread when a CQ gets a completion */
struct smrc_cq;           /* completion queue */
struct smrc_qp;           /* reliable queue pair */

/* A memory region: memory the library allocated in shared memory and the
 * daemon registered. The fields are the application's to read. */
struct smrc_mr {
  struct smrc_context* context;
  struct smrc_pd* pd;
  void* addr;      /* the first byte, in this process; also the remote address */
  size_t length;   /* as asked for */
  uint32_t lkey;   /* names it in local SGEs */
  uint32_t rkey;   /* names it to the peer (the same value as lkey) */
  uint32_t access; /* SMRC_ACCESS_* */
};

/* A 16-byte address: the endpoint's plane-0 IP address, IPv6 or
 * IPv4-mapped (::ffff:a.b.c.d). */
union smrc_gid {
  uint8_t raw[16];
  struct {
    uint64_t subnet_prefix; /* network order */
    uint64_t interface_id;  /* network order */
  } global;
};

/* ------------------------------------------------------------------ */
/* Device                                                              */

/* Connects to the softmrcd endpoint whose application socket is `path`
 * (NULL: $SOFTMRC_SOCKET, else SMRC_DEFAULT_SOCKET) and checks that both
 * speak the same protocol. Errors (errno): ENOENT/ECONNREFUSED no daemon
 * there, EACCES neither root nor in the daemon's app_group (refused by the
 * kernel or by the daemon), EBUSY the daemon serves as many applications
 * as it may (256), EPROTO a daemon of another protocol version,
 * ENAMETOOLONG path too long, ENOTCONN the daemon hung up before it
 * answered, ETIMEDOUT it took neither the connection nor the request
 * within the reply timeout (SMRC_REPLY_TIMEOUT_ENV), EINVAL that variable
 * is not a number of milliseconds in 1..3600000, ENOMEM, EMFILE/ENFILE no
 * descriptor for the socket. */
struct smrc_context* smrc_open_device(const char* path);
/* Closes the context. Everything made through it that the application has
 * not destroyed is destroyed by the daemon (as if the process had died),
 * and the library frees its own side of it (mappings, descriptors,
 * handles): those handles are then as invalid as the context. Returns 0,
 * or EINVAL for NULL. */
int smrc_close_device(struct smrc_context* ctx);

enum smrc_device_cap_flags {
  SMRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 0,
  SMRC_DEVICE_CAP_TRIM_NACK = 1 << 1,
  SMRC_DEVICE_CAP_SVC_TIME = 1 << 2,
};

struct smrc_device_attr {
  char name[64];             /* the endpoint's name in the daemon's config */
  uint32_t api_version;      /* the daemon's SMRC_API_VERSION */
  uint32_t num_planes;       /* ports of the endpoint */
  uint32_t max_qp;           /* QPs of the endpoint (all applications) */
  uint32_t max_mr;           /* regions of the endpoint */
  uint32_t max_cq;           /* CQs per context */
  uint32_t max_cqe;          /* entries per CQ */
  uint32_t max_qp_wr;        /* max_send_wr and max_recv_wr per QP */
  uint64_t max_mr_size;      /* bytes per region */
  uint64_t max_msg_size;     /* bytes per Write */
  uint16_t max_wimm;         /* max_wimm and max_wimm_dest */
  uint8_t max_mpr;           /* in 128-PSN units */
  uint8_t max_timeout;       /* 24: 1.024 us * 2^24 */
  uint32_t path_mtu;         /* the endpoint's path MTU (bytes) */
  uint32_t device_cap_flags; /* SMRC_DEVICE_CAP_* */
  uint32_t num_ev_profiles;  /* ids 1..num_ev_profiles (smrc_query_profile) */
  uint32_t num_cc_profiles;
};

/* Errors: EINVAL (NULL), ENOTCONN. */
int smrc_query_device(struct smrc_context* ctx, struct smrc_device_attr* attr);
/* The local GID (index 0 is the only one). Errors: EINVAL (NULL, index not
 * 0), ENOTCONN. */
int smrc_query_gid(struct smrc_context* ctx, int index, union smrc_gid* gid);

enum smrc_profile_kind {
  SMRC_PROFILE_EV = 1,
  SMRC_PROFILE_CC = 2,
};
/* The id of the daemon's EV or CC profile called `name`, for
 * smrc_qp_attr.ev_profile_id / cc_profile_id. Ids are 1-based in the
 * order of the daemon's configuration; 0 means the daemon's default (its
 * `qp.ev_profile` / `qp.cc_profile`). Errors: EINVAL (NULL ctx, name or
 * id, a kind other than EV and CC), ENOENT no such profile, ENOTCONN. */
int smrc_query_profile(struct smrc_context* ctx, enum smrc_profile_kind kind, const char* name,
                       uint64_t* id);

/* ------------------------------------------------------------------ */
/* Protection domain and memory                                        */

/* Errors: EINVAL (NULL), ENOMEM, ENOTCONN. */
struct smrc_pd* smrc_alloc_pd(struct smrc_context* ctx);
/* Errors: EINVAL (NULL), EBUSY (MRs or QPs still use it). */
int smrc_dealloc_pd(struct smrc_pd* pd);

enum smrc_access_flags {
  SMRC_ACCESS_LOCAL_WRITE = 1 << 0,
  SMRC_ACCESS_REMOTE_WRITE = 1 << 1,
  /* Accepted and ignored (verbs tools pass them). */
  SMRC_ACCESS_REMOTE_READ = 1 << 2,
  SMRC_ACCESS_RELAXED_ORDERING = 1 << 20,
};

/* Allocates `length` bytes of zeroed shared memory (hugepage-backed where
 * the system has free hugepages, else normal pages), page aligned, and
 * registers it with the daemon at its address in this process: remote
 * writes name it by mr->addr and mr->rkey. Only memory from here can be
 * the source or target of a Write: the daemon cannot reach other memory.
 * Errors: EINVAL (NULL pd, length 0 or over max_mr_size, unknown access
 * bits), ENOMEM (no memory, or the daemon's region table is full),
 * ENOTCONN. */
struct smrc_mr* smrc_alloc_mr(struct smrc_pd* pd, size_t length, uint32_t access);
/* Deregisters and unmaps. Once it returns, no incoming packet is placed
 * there any more (a peer's Write to it gets SMRC_WC_REM_ACCESS_ERR). The
 * first Write from it that the daemon had not yet handed to its engine
 * (still in the send ring, or waiting for room in the send queue), or
 * that is posted from it afterwards, completes with SMRC_WC_LOC_PROT_ERR
 * and takes the QP to ERR, as in verbs; a Write the engine already had
 * completes normally (the daemon keeps its own mapping of the region until
 * no QP of the application has a Write outstanding). Errors: EINVAL
 * (NULL), ENOTCONN (the memory is freed anyway). */
int smrc_free_mr(struct smrc_mr* mr);

/* ------------------------------------------------------------------ */
/* Completions                                                         */

enum smrc_wc_status {
  SMRC_WC_SUCCESS = 0,
  SMRC_WC_LOC_LEN_ERR,     /* a length over the limits */
  SMRC_WC_LOC_QP_OP_ERR,   /* the QP cannot take this request (state, opcode) */
  SMRC_WC_LOC_PROT_ERR,    /* the SGE is outside the lkey's region, or not ours */
  SMRC_WC_WR_FLUSH_ERR,    /* the QP went to ERROR before this request finished */
  SMRC_WC_BAD_RESP_ERR,    /* malformed or forged work request (opcode, handle) */
  SMRC_WC_REM_ACCESS_ERR,  /* the responder refused the target (rkey, bounds, access) */
  SMRC_WC_REM_INV_REQ_ERR, /* the responder refused the request (no receive for a WIMM) */
  SMRC_WC_RETRY_EXC_ERR,   /* no acknowledgement within the retry counts */
  SMRC_WC_FATAL_ERR,       /* the daemon is gone */
  SMRC_WC_GENERAL_ERR,
  SMRC_WC_REM_OP_ERR, /* the peer's QP is gone (its application exited, or its daemon stopped) */
};
/* A constant string naming the status ("success", "retry exceeded", ...). */
const char* smrc_wc_status_str(enum smrc_wc_status status);

enum smrc_wc_opcode {
  SMRC_WC_RDMA_WRITE = 0,          /* send side: a Write */
  SMRC_WC_RDMA_WRITE_WITH_IMM = 1, /* send side: a Write-with-Immediate */
  SMRC_WC_RECV_RDMA_WITH_IMM = 2,  /* receive side: a WIMM consumed a receive */
};

enum smrc_wc_flags {
  SMRC_WC_WITH_IMM = 1 << 0,
};

struct smrc_wc {
  uint64_t wr_id;
  uint32_t status; /* enum smrc_wc_status */
  uint32_t opcode; /* enum smrc_wc_opcode; valid only on success */
  uint32_t qp_num;
  uint32_t byte_len; /* receive: the WIMM message's length */
  uint32_t imm_data; /* receive: the immediate, network byte order */
  uint32_t wc_flags; /* SMRC_WC_WITH_IMM */
  /* A daemon-specific detail, 0 if none. 1: the engine refused a Write
   * the daemon's checks had passed (status SMRC_WC_GENERAL_ERR), e.g. a
   * Write-with-Immediate on a QP whose max_wimm is 0. */
  uint32_t vendor_err;
  uint32_t reserved;
};

/* A completion channel: an fd that becomes readable when a CQ bound to it
 * with a request for notification gets a completion. Errors: EINVAL,
 * ENOMEM (256 on this device already, or the daemon's descriptor limit
 * leaves no more), EMFILE (the daemon could not make its pipe, or this
 * process has no descriptor free for it), ENOTCONN. */
struct smrc_comp_channel* smrc_create_comp_channel(struct smrc_context* ctx);
/* Errors: EINVAL (NULL), EBUSY (CQs still bound to it; the channel stays
 * the application's). */
int smrc_destroy_comp_channel(struct smrc_comp_channel* channel);
/* The fd to poll()/epoll (readable: call smrc_get_cq_event, with timeout
 * 0 in an event loop). It stays readable while a CQ of the channel has a
 * notification not yet taken; the call that finds none left empties it
 * and returns ETIMEDOUT. -1 for NULL. */
int smrc_comp_channel_fd(const struct smrc_comp_channel* channel);

/* A CQ of at least `cqe` entries (rounded up to a power of two). `channel`
 * may be NULL. Errors: EINVAL (NULL ctx, cqe 0 or over max_cqe, a channel of
 * another context), ENOMEM, ENOTCONN. */
struct smrc_cq* smrc_create_cq(struct smrc_context* ctx, int cqe, void* cq_context,
                               struct smrc_comp_channel* channel);
/* Errors: EINVAL (NULL), EBUSY (a QP still uses it). */
int smrc_destroy_cq(struct smrc_cq* cq);
/* Entries of the CQ, as created (a power of two, at least 2); -EINVAL for
 * NULL. */
int smrc_cq_size(const struct smrc_cq* cq);

/* Takes up to `num_entries` completions, oldest first. Returns how many
 * (0: none now), or a negative errno value: -EINVAL (NULL, num_entries <
 * 0), -ENOTCONN (the daemon is gone: once the library knows, at the
 * next empty poll, and it looks itself every few hundred empty polls;
 * never when completions are waiting), -EIO (the daemon corrupted
 * the ring, or the CQ overflowed and completions were lost). */
int smrc_poll_cq(struct smrc_cq* cq, int num_entries, struct smrc_wc* wc);

/* Asks for one notification on the CQ's channel when its next completion
 * lands (solicited_only is accepted and treated as 0). Poll the CQ once
 * more after arming: a completion that landed just before is not
 * signalled. Errors: EINVAL (NULL, or a CQ created without a channel),
 * ENOTCONN. */
int smrc_req_notify_cq(struct smrc_cq* cq, int solicited_only);

/* Waits until a CQ of the channel has a notification, and returns it and
 * its cq_context (cq_context may be NULL). timeout_ms: -1 waits for ever,
 * 0 does not wait; signals and wake-ups that bring nothing do not make
 * the wait longer. Returns 0, or ETIMEDOUT, EINVAL (NULL channel or cq),
 * ENOTCONN (the daemon went away while waiting; never a hang). */
int smrc_get_cq_event(struct smrc_comp_channel* channel, struct smrc_cq** cq, void** cq_context,
                      int timeout_ms);
/* Acknowledges `nevents` events of smrc_get_cq_event. It does nothing:
 * it is kept for verbs familiarity, and smrc_destroy_cq does not wait for
 * acknowledgements. */
void smrc_ack_cq_events(struct smrc_cq* cq, unsigned int nevents);

/* ------------------------------------------------------------------ */
/* Queue pairs                                                         */

struct smrc_qp_cap {
  uint32_t max_send_wr;     /* Writes outstanding at once */
  uint32_t max_recv_wr;     /* receives posted at once */
  uint32_t max_send_sge;    /* 0 or 1 */
  uint32_t max_recv_sge;    /* ignored: receives have no SGEs */
  uint32_t max_inline_data; /* must be 0 */
};

struct smrc_qp_init_attr {
  void* qp_context;
  struct smrc_cq* send_cq;
  struct smrc_cq* recv_cq;
  struct smrc_qp_cap cap;
  int sq_sig_all; /* every Write completes, signaled or not */
};

/* A QP in RESET. Its send ring holds max_send_wr requests and its receive
 * ring max_recv_wr, each rounded up to a power of two (at least 2). Errors:
 * EINVAL (NULL CQs, CQs of another context, max_send_wr 0, cap over
 * max_qp_wr, max_send_sge > 1, inline data), ENOMEM (the endpoint's QP
 * table is full), ENOTCONN. */
struct smrc_qp* smrc_create_qp(struct smrc_pd* pd, struct smrc_qp_init_attr* init_attr);
/* Destroys the QP at once; its outstanding work is not completed. Errors:
 * EINVAL (NULL), ENOTCONN (the handle is freed anyway). */
int smrc_destroy_qp(struct smrc_qp* qp);
/* The QP number (24 bits) the peer names as its dest_qp_num. */
uint32_t smrc_qp_num(const struct smrc_qp* qp);

enum smrc_qp_state {
  SMRC_QPS_RESET = 0,
  SMRC_QPS_INIT = 1,
  SMRC_QPS_RTR = 2,
  SMRC_QPS_RTS = 3,
  SMRC_QPS_ERR = 4,
};
/* A constant string naming the state ("RESET", "INIT", "RTR", "RTS", "ERR";
 * "unknown" for any other value). */
const char* smrc_qp_state_str(enum smrc_qp_state state);

enum smrc_mtu {
  SMRC_MTU_256 = 1,
  SMRC_MTU_512 = 2,
  SMRC_MTU_1024 = 3,
  SMRC_MTU_2048 = 4,
  SMRC_MTU_4096 = 5,
};

/* smrc_qp_attr.caps */
enum smrc_qp_caps {
  SMRC_QP_CAP_DYNAMIC_MPR = 1 << 0,
  SMRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = 1 << 1,
  SMRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = 1 << 2,
};

/* Mask bits of smrc_modify_qp: which fields of smrc_qp_attr it sets.
 *
 *   RESET -> INIT  SMRC_QP_EV_PROFILE, SMRC_QP_CC_PROFILE (both optional:
 *                  0 or absent takes the daemon's default profiles)
 *   INIT  -> INIT  the same (optional: each moves the QP to that profile,
 *                  with neither nothing changes; receives posted stay)
 *   INIT  -> RTR   SMRC_QP_AV, SMRC_QP_DEST_QPN, SMRC_QP_RQ_PSN (required);
 *                  SMRC_QP_PATH_MTU, SMRC_QP_MPR_DEST, SMRC_QP_MAX_WIMM_DEST,
 *                  SMRC_QP_CAPS
 *   RTR   -> RTS   SMRC_QP_SQ_PSN (required); SMRC_QP_MPR, SMRC_QP_MAX_WIMM,
 *                  SMRC_QP_TIMEOUT, SMRC_QP_RETRY_CNT, SMRC_QP_CAPS
 *   RTS   -> RTS   SMRC_QP_TIMEOUT, SMRC_QP_RETRY_CNT
 *   any   -> ERR, any -> RESET
 *
 * As in verbs, a move to ERR completes every request posted and not yet
 * completed with SMRC_WC_WR_FLUSH_ERR, each queue in post order, and
 * raises no SMRC_EVENT_QP_FATAL (the application asked for it); a move to
 * RESET drops them without completions, and the QP may be moved to INIT
 * and connected again.
 *
 * Fields absent from the mask take the daemon's `qp` defaults. The
 * verbs-only bits (PKEY_INDEX, PORT, ACCESS_FLAGS, VERBS_TIMEOUT,
 * VERBS_RETRY_CNT, RNR_RETRY, MIN_RNR_TIMER, MAX_QP_RD_ATOMIC,
 * MAX_DEST_RD_ATOMIC) are accepted with any value and ignored, as MRC
 * tools pass them. */
enum smrc_qp_attr_mask {
  SMRC_QP_STATE = 1 << 0,
  SMRC_QP_EV_PROFILE = 1 << 1,
  SMRC_QP_CC_PROFILE = 1 << 2,
  SMRC_QP_AV = 1 << 3, /* dgid */
  SMRC_QP_DEST_QPN = 1 << 4,
  SMRC_QP_PATH_MTU = 1 << 5,
  SMRC_QP_RQ_PSN = 1 << 6,
  SMRC_QP_MPR_DEST = 1 << 7,
  SMRC_QP_MAX_WIMM_DEST = 1 << 8,
  SMRC_QP_SQ_PSN = 1 << 9,
  SMRC_QP_MPR = 1 << 10,
  SMRC_QP_MAX_WIMM = 1 << 11,
  SMRC_QP_TIMEOUT = 1 << 12,
  SMRC_QP_RETRY_CNT = 1 << 13, /* retry_linear and retry_exp */
  SMRC_QP_CAPS = 1 << 14,
  /* Accepted and ignored. */
  SMRC_QP_PKEY_INDEX = 1 << 20,
  SMRC_QP_PORT = 1 << 21,
  SMRC_QP_ACCESS_FLAGS = 1 << 22,
  SMRC_QP_VERBS_TIMEOUT = 1 << 23,
  SMRC_QP_VERBS_RETRY_CNT = 1 << 24,
  SMRC_QP_RNR_RETRY = 1 << 25,
  SMRC_QP_MIN_RNR_TIMER = 1 << 26,
  SMRC_QP_MAX_QP_RD_ATOMIC = 1 << 27,
  SMRC_QP_MAX_DEST_RD_ATOMIC = 1 << 28,
};

struct smrc_qp_attr {
  uint32_t qp_state; /* enum smrc_qp_state: the state to move to */
  /* INIT */
  uint64_t ev_profile_id; /* smrc_query_profile; 0: the daemon's default */
  uint64_t cc_profile_id;
  /* RTR */
  union smrc_gid dgid;    /* the peer's smrc_query_gid */
  uint32_t dest_qp_num;   /* the peer's smrc_qp_num */
  uint32_t path_mtu;      /* enum smrc_mtu, at most the endpoint's */
  uint32_t rq_psn;        /* 24 bits: the peer's sq_psn */
  uint8_t mpr_dest;       /* responder window, 128-PSN units, 1..max_mpr */
  uint16_t max_wimm_dest; /* WIMMs accepted at once, <= max_wimm */
  /* RTS */
  uint32_t sq_psn; /* 24 bits */
  uint8_t mpr;     /* requester window, 128-PSN units, 1..max_mpr */
  /* WIMMs outstanding at once (<= the peer's receives, <= max_wimm); with
   * 0, a Write-with-Immediate completes with SMRC_WC_GENERAL_ERR,
   * vendor_err 1. */
  uint16_t max_wimm;
  uint8_t timeout;      /* ACK timeout 1.024 us * 2^timeout, <= 24 */
  uint8_t retry_linear; /* <= 7 */
  uint8_t retry_exp;    /* <= 25 (25: unlimited) */
  uint32_t caps;        /* SMRC_QP_CAP_* (no other bits) */
  /* Verbs-only, ignored. */
  uint16_t pkey_index;
  uint8_t port_num;
  uint32_t qp_access_flags;
  uint8_t verbs_timeout;
  uint8_t verbs_retry_cnt;
  uint8_t rnr_retry;
  uint8_t min_rnr_timer;
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
};

/* Moves the QP (see the mask table above). Errors: EINVAL (a transition
 * the state machine does not have, a required field missing, a value out
 * of range or over the device's limits: mpr or mpr_dest 0 or over
 * max_mpr, max_wimm or max_wimm_dest over max_wimm, timeout over 24,
 * unknown caps bits; path MTU over the endpoint's; at INIT an EV or CC
 * profile that is not ONLINE, or an EV profile whose format is not the
 * endpoint's EV mode),
 * ENOENT (an EV or CC profile id the daemon does not have), EHOSTUNREACH
 * (SMRC_QP_AV names no endpoint the daemon knows: neither a hosted
 * endpoint nor one of its `peers`), ENOTCONN. A refused modify leaves the
 * QP where it was. */
int smrc_modify_qp(struct smrc_qp* qp, struct smrc_qp_attr* attr, uint32_t attr_mask);
/* The QP's state and attributes (as last set). attr_mask is accepted and
 * ignored; everything is filled in. Errors: EINVAL (NULL qp or attr),
 * ENOTCONN. */
int smrc_query_qp(struct smrc_qp* qp, struct smrc_qp_attr* attr, uint32_t attr_mask,
                  struct smrc_qp_init_attr* init_attr);

/* ------------------------------------------------------------------ */
/* Posting work                                                        */

struct smrc_sge {
  uint64_t addr; /* inside the MR named by lkey */
  uint32_t length;
  uint32_t lkey;
};

enum smrc_wr_opcode {
  SMRC_WR_RDMA_WRITE = 0,
  SMRC_WR_RDMA_WRITE_WITH_IMM = 1,
  /* Not MRC operations: posting them fails with EOPNOTSUPP. */
  SMRC_WR_SEND = 2,
  SMRC_WR_SEND_WITH_IMM = 3,
  SMRC_WR_RDMA_READ = 4,
  SMRC_WR_ATOMIC_CMP_AND_SWP = 5,
  SMRC_WR_ATOMIC_FETCH_AND_ADD = 6,
};

enum smrc_send_flags {
  SMRC_SEND_SIGNALED = 1 << 1,  /* a completion on success too */
  SMRC_SEND_FENCE = 1 << 0,     /* accepted; MRC Writes are ordered anyway */
  SMRC_SEND_SOLICITED = 1 << 2, /* accepted and ignored */
  SMRC_SEND_INLINE = 1 << 3,    /* not supported: EINVAL */
};

struct smrc_send_wr {
  uint64_t wr_id;
  struct smrc_send_wr* next;
  struct smrc_sge* sg_list;
  int num_sge;         /* 0 (a zero-length Write) or 1 */
  uint32_t opcode;     /* enum smrc_wr_opcode */
  uint32_t send_flags; /* SMRC_SEND_* */
  uint32_t imm_data;   /* network byte order, WIMM only */
  struct {
    uint64_t remote_addr; /* the peer's address (its mr->addr + offset) */
    uint32_t rkey;
  } rdma;
};

struct smrc_recv_wr {
  uint64_t wr_id;
  struct smrc_recv_wr* next;
  struct smrc_sge* sg_list; /* ignored: MRC receives have no SGEs */
  int num_sge;
};

/* Posts a chain of Writes. Stops at the first it refuses, which *bad_wr
 * names (all before it were posted). num_sge 0 is a zero-length Write and
 * sg_list is then not read, as in verbs. Errors: EINVAL (NULL, num_sge
 * below 0 or over 1, num_sge 1 with a NULL sg_list, inline, QP not in
 * RTS or ERR: in ERR, as in verbs, the daemon completes what is posted
 * with SMRC_WC_WR_FLUSH_ERR), EOPNOTSUPP (an opcode other than Write and
 * Write-with-Immediate), ENOMEM (the QP's send ring is full: it holds
 * max_send_wr rounded up to a power of two, requests the daemon has not
 * taken yet), EIO (the send
 * ring's consumer index in shared memory is impossible: something
 * overwrote it, and the ring takes nothing more), ENOTCONN. The SGE is
 * checked by the daemon, which completes a request outside the lkey's
 * region with SMRC_WC_LOC_PROT_ERR. */
int smrc_post_send(struct smrc_qp* qp, struct smrc_send_wr* wr, struct smrc_send_wr** bad_wr);
/* Posts receives, each consumed by one incoming Write-with-Immediate: from
 * INIT on, as in verbs (in ERR they complete with SMRC_WC_WR_FLUSH_ERR).
 * The daemon holds at most max_recv_wr of them not yet consumed; more wait
 * in the receive ring. Errors: EINVAL (NULL, QP in RESET), ENOMEM (the
 * receive ring is full: it holds max_recv_wr rounded up to a power of two;
 * or max_recv_wr is 0), EIO (the receive ring's consumer index is
 * impossible, as for smrc_post_send), ENOTCONN. */
int smrc_post_recv(struct smrc_qp* qp, struct smrc_recv_wr* wr, struct smrc_recv_wr** bad_wr);

/* ------------------------------------------------------------------ */
/* Asynchronous events                                                 */

enum smrc_event_type {
  SMRC_EVENT_QP_FATAL = 1,     /* the QP failed (retries exhausted, ...); not for a
                                * move to ERR the application asked for */
  SMRC_EVENT_PORT_ACTIVE = 2,  /* a plane came up */
  SMRC_EVENT_PORT_ERR = 3,     /* a plane went down */
  SMRC_EVENT_CQ_ERR = 4,       /* a CQ overflowed: completions were lost */
  SMRC_EVENT_DEVICE_FATAL = 5, /* the daemon is gone */
};
/* A constant string naming the event type ("QP fatal", "port active",
 * "port error", "CQ error", "device fatal"; "unknown event" for any other
 * value). */
const char* smrc_event_type_str(enum smrc_event_type type);

struct smrc_async_event {
  uint32_t event_type; /* enum smrc_event_type */
  uint32_t plane;      /* PORT_* */
  struct smrc_qp* qp;  /* QP_FATAL */
  struct smrc_cq* cq;  /* CQ_ERR */
  uint32_t qp_num;     /* QP_FATAL */
  uint32_t status;     /* QP_FATAL: enum smrc_wc_status, why */
};

/* The fd to poll()/epoll for async events (readable: call
 * smrc_get_async_event): an epoll set of the library's, readable while an
 * event waits, in the socket or already taken off it by another call,
 * and when the daemon goes away. -1 for NULL. */
int smrc_async_fd(const struct smrc_context* ctx);
/* The next async event. timeout_ms: -1 for ever, 0 no wait; signals and
 * other threads' calls do not end the wait early. Returns 0, ETIMEDOUT,
 * EINVAL (NULL ctx or event). An event of a QP destroyed before it was
 * taken is dropped. When the daemon goes away, the next call returns one
 * SMRC_EVENT_DEVICE_FATAL event, then ENOTCONN. */
int smrc_get_async_event(struct smrc_context* ctx, struct smrc_async_event* event, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* SOFTMRC_SOFTMRC_H */
