/*
 * rdma_internal.h - what the RDMA transport's files share (transport_rdma.c: the vtable, peer
 * pools, retries; rdma_conn.c: devices, memory regions, rdma_cm connections, the listener;
 * rdma_xfer.c: one sliced transfer on one queue pair). Internal to the client library and its
 * tests; only the RDMA build compiles it.
 *
 * Objects:
 *   - rdma_ctx: the devices rdma_cm knows (one protection domain each; those in use are the
 *     ones named in the config, else the one that owns --host once it is known) and the table
 *     of registered ranges (segment, user buffers, staging buffer), each registered on every
 *     device in use with the rights its kind needs (rdma_mr.c);
 *   - rdma_conn: one RC queue pair to a peer, with its own completion channel and CQ. Active
 *     connections (we dialled) carry our work requests and belong to one transfer at a time;
 *     passive ones (a peer dialled our listener) only serve the peer's one-sided verbs and live
 *     until the peer disconnects.
 */
#ifndef MC_CLIENT_RDMA_INTERNAL_H
#define MC_CLIENT_RDMA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/rdma_ops.h"
#include "client/rdma_plan.h"
#include "common/auth.h"
#include "common/id.h"
#include "common/lock_order.h"

#define MC_RDMA_MAX_DEVS 32
#define MC_RDMA_CQE 512    /* completion queue entries per connection */
#define MC_RDMA_MAX_WR 256 /* send queue depth per queue pair: the window's upper bound */

/* What a registered range is for, which decides its access rights (rdma_mr.c). */
enum mc_rdma_mr_kind {
    MC_RDMA_MR_REMOTE,      /* the segment: peers READ and WRITE it */
    MC_RDMA_MR_PEER_WRITES, /* a buffer a peer WRITEs for one request (LOCAL_DISK reads) */
    MC_RDMA_MR_LOCAL,       /* this process's own transfers only: LOCAL_WRITE */
    MC_RDMA_MR_SOURCE,      /* only ever read by the device: no rights (read-only memory) */
};

struct rdma_mr {
    uint8_t *addr;
    size_t len;
    enum mc_rdma_mr_kind kind;
    struct ibv_mr *mr[MC_RDMA_MAX_DEVS]; /* per device, in rdma_ctx order */
};

struct rdma_listener;

struct rdma_ctx {
    const struct mc_rdma_ops *ops;
    struct ibv_context **devlist;
    int ndev;
    struct ibv_pd *pd[MC_RDMA_MAX_DEVS];
    bool in_use[MC_RDMA_MAX_DEVS];               /* registrations go to these devices only */
    _Atomic uint32_t dev_gen[MC_RDMA_MAX_DEVS];  /* bumped by a port or device error event */
    _Atomic bool dev_down[MC_RDMA_MAX_DEVS];     /* its port is down (async event) */
    int ack_timeout;                             /* RDMA_OPTION_ID_ACK_TIMEOUT, <0 = leave */
    int tos;                                     /* RDMA_OPTION_ID_TOS, <0 = leave */
    struct rdma_async *async;                    /* the async event thread (rdma_fabric.c) */
    _Atomic uint64_t async_events;               /* port/device events seen */
    _Atomic uint32_t next_vec[MC_RDMA_MAX_DEVS]; /* the next CQ's completion vector (spread) */
    uint8_t rd_atom[MC_RDMA_MAX_DEVS];           /* max_qp_rd_atom, at most 16 */
    uint8_t init_rd_atom[MC_RDMA_MAX_DEVS];      /* max_qp_init_rd_atom, at most 16 */
    pthread_mutex_t mr_lock; /* through rdma_mr_lock / rdma_mr_unlock (lock-order checked) */
    uint32_t lo_idx;         /* tells contexts apart in the lock-order checker */
    struct rdma_mr *mrs;
    size_t nmrs, capmrs;
    struct rdma_listener *listener;
    int serve_dev;       /* the device that owns the advertised address: its rkeys go to peers */
    char host[64];       /* the advertised address (mc_transport_rdma_serve_on), "" before */
    bool dial_from_host; /* a device owns host: connections we dial leave from it */
    struct mc_auth_key auth;       /* set: every connection proves the token (rdma_plan.h) */
    _Atomic uint64_t auth_refused; /* peers the listener refused: no proof or a wrong one */
    _Atomic uint64_t auth_failed;  /* peers we dialled that refused us or failed to prove */
};

struct rdma_conn {
    struct rdma_cm_id *id;
    struct rdma_event_channel *ech; /* active side: the id's own event channel */
    struct ibv_comp_channel *cch;
    struct ibv_cq *cq;
    int dev;          /* index of id->verbs in rdma_ctx */
    uint64_t next_wr; /* work request ids of the next transfer start here */
    uint32_t gen;     /* the device's dev_gen when the connection was made */
    bool armed;       /* a req_notify_cq is outstanding */
    bool broken;      /* saw an error: destroy, never reuse */
    struct rdma_conn *next;
};

/* Per transfer counters, summed into the transport's stats. */
struct rdma_xfer_stats {
    uint64_t posted;       /* work requests handed to the QP */
    uint64_t completed;    /* successful completions */
    uint64_t flushed;      /* completions with an error after the first error (flushed WRs) */
    uint64_t errors;       /* first error completions (one per failed transfer) */
    uint64_t stray;        /* completions matching no outstanding request (ignored) */
    uint64_t empty_events; /* CQ events after which nothing was there to poll */
};

/* ---- rdma_conn.c -------------------------------------------------------------------------- */

/* Opens every device rdma_cm knows and a PD on each. MC_ERR_NOT_SUPPORTED (logged, naming the
 * problem) when there is none or none is usable. */
int mc_rdma_ctx_open(struct rdma_ctx *x, const struct mc_rdma_ops *ops);
/* Stops the listener, deregisters everything, frees the PDs. Safe on a zeroed struct. */
void mc_rdma_ctx_close(struct rdma_ctx *x);
/* Registers [addr, addr+len) on every device. INVALID_PARAMS (overlaps a registered range),
 * TRANSFER_FAIL (reg_mr failed: logged with errno). */
int mc_rdma_ctx_register(struct rdma_ctx *x, void *addr, size_t len, enum mc_rdma_mr_kind kind);
/* Registers the range that starts at addr afresh: new memory regions first (without mr_lock),
 * swapped in, then the old ones deregistered (their rkeys stop working; the new ones differ).
 * 0, INVALID_PARAMS (addr does not start a registered range), TRANSFER_FAIL (reg_mr failed or
 * a key repeated: the range is then not registered at all, so the fence still holds). */
int mc_rdma_ctx_reregister(struct rdma_ctx *x, void *addr);
/* 0 or INVALID_PARAMS (addr does not start a registered range). */
int mc_rdma_ctx_unregister(struct rdma_ctx *x, void *addr);
/* The keys of the registered range holding [addr, addr+len) on device dev: 0 or
 * SEGMENT_NOT_FOUND (not inside one range, not registered on dev, or an rkey asked of a range
 * peers may not access). */
int mc_rdma_ctx_keys(struct rdma_ctx *x, const void *addr, size_t len, int dev, uint32_t *lkey,
                     uint32_t *rkey);

/* The index of the device that owns host's address (rdma_bind_addr on a scratch cm id: a peer
 * that dials host lands on that device, so an rkey it uses must come from that device's memory
 * region), or -1 when no device owns it (a wildcard, an unknown or non-local address). */
int mc_rdma_ctx_device_of(struct rdma_ctx *x, const char *host);

/* Dials endpoint "host:port" (rdma_cm: address, route, QP, connect with the connection
 * message). With a token (x->auth set) it is two connects: a hello that the peer rejects with
 * its challenge and proof, then, once that proof checks out, a prove on a fresh cm id that the
 * peer accepts. 0 or TRANSFER_FAIL (logged; a failed handshake counts in auth_failed). */
int mc_rdma_conn_connect(struct rdma_ctx *x, const char *endpoint, struct mc_id client_id,
                         int timeout_ms, struct rdma_conn **out);
/* Disconnects and frees every verbs object of c. NULL is a no-op. */
void mc_rdma_conn_destroy(struct rdma_ctx *x, struct rdma_conn *c);

/* Accepts connections on bind_addr:port (the rdma_cm port space is not TCP's, so this is the
 * peer server's own port number). A connect request whose message does not decode is rejected,
 * and with loopback_only (protected mode, ignored with a token) one from another host. With a
 * token, a peer gets a queue pair only with a prove that answers a challenge this listener
 * issued (single use, expires); anything else is rejected before any verbs object is made,
 * logged with the peer address and counted in auth_refused. 0 or TRANSFER_FAIL. */
int mc_rdma_listen(struct rdma_ctx *x, const char *bind_addr, uint16_t port, struct mc_id client_id,
                   bool loopback_only);
/* Connections the listener holds now. */
size_t mc_rdma_listener_conns(struct rdma_ctx *x);

/* ---- rdma_mr.c ---------------------------------------------------------------------------- */

int mc_rdma_access(enum mc_rdma_mr_kind kind);
void mc_rdma_mr_release(struct rdma_ctx *x, struct rdma_mr *m);
/* Logs a failed reg_mr; ENOMEM under a finite RLIMIT_MEMLOCK names the limit and the fix. */
void mc_rdma_log_reg_failure(struct rdma_ctx *x, int dev, size_t len, int err);

/* ---- rdma_fabric.c ------------------------------------------------------------------------ */

/* ibv_fork_init before any registration (engines fork workers; a child touching a registered
 * page would otherwise corrupt the parent's DMA on kernels before 5.12). Logged on failure. */
void mc_rdma_fork_safe(const struct mc_rdma_ops *ops);
/* Whether one of the device's ports is ACTIVE (logged, naming the device, when none is). */
bool mc_rdma_port_active(const struct mc_rdma_ops *ops, struct ibv_context *ctx, int nports);
/* The ACK timeout and ToS options on a cm id (after address resolution). 0 or -1 (logged). */
int mc_rdma_id_options(struct rdma_ctx *x, struct rdma_cm_id *id);
/* Starts / stops the thread that reads the devices' async events: a port error or a fatal
 * device error marks the device down and bumps its generation, so pooled connections on it
 * are replaced instead of used; PORT_ACTIVE marks it up again. */
int mc_rdma_async_start(struct rdma_ctx *x);
void mc_rdma_async_stop(struct rdma_ctx *x);
/* Whether c was made before its device's last error event (or the device is down now). */
bool mc_rdma_conn_stale(struct rdma_ctx *x, const struct rdma_conn *c);

/* ---- rdma_addr.c -------------------------------------------------------------------------- */

bool mc_rdma_addr_is_loopback(const struct sockaddr *sa);
/* Whether sa is this host: loopback, an address of one of its interfaces, or an address an open
 * RDMA device owns (protected mode admits these peers without a token). */
bool mc_rdma_addr_is_own(struct rdma_ctx *x, const struct sockaddr *sa);
/* 0, or INVALID_PARAMS (logged, naming the fix: --host) when addr is a loopback address, which
 * rdma_cm can neither bind nor resolve. what names the setting in the message. */
int mc_rdma_check_addr(const char *what, const char *addr);

/* ---- rdma_xfer.c -------------------------------------------------------------------------- */

struct rdma_op {
    bool is_write;  /* RDMA WRITE (local -> remote), else RDMA READ */
    uint8_t *local; /* inside a registered range */
    uint32_t lkey;
    uint64_t remote; /* remote virtual address */
    uint32_t rkey;
    uint64_t len;
    uint32_t spin_polls; /* empty polls before arming the CQ (a short transfer's completions
                            usually arrive within microseconds: no interrupt, no sleep) */
};

/* Moves op->len bytes on c in slices of slice_bytes, at most window work requests in flight,
 * waiting for completions on c's completion channel (no polling while nothing completes) for at
 * most timeout_ms of silence. Completions are matched to slices by work request id, in any
 * order. On the first error completion (its verbs status logged) nothing more is posted and the
 * call waits until every posted request has completed (the rest arrive flushed), so no request
 * still points into the caller's buffer when it returns. 0, REPLICA_IS_GONE (the first error
 * was IBV_WC_REM_ACCESS_ERR: the remote key or range is not registered there) or
 * TRANSFER_FAIL; on failure c is
 * marked broken (the caller destroys it: destroying the QP also ends any request a dead device
 * never completed). */
int mc_rdma_xfer_run(const struct mc_rdma_ops *ops, struct rdma_conn *c, const struct rdma_op *op,
                     uint32_t slice_bytes, uint32_t window, int timeout_ms,
                     struct rdma_xfer_stats *st);
/* The same for nops operations on one queue pair, their slices posted as one stream (a batch:
 * one window, one wait, no round trip per key). status[j] (optional): 0 when every slice of
 * op j completed, REPLICA_IS_GONE for the op whose remote key was refused, else TRANSFER_FAIL
 * (flushed after another op's error, or never posted). Returns as mc_rdma_xfer_run. */
int mc_rdma_xfer_run_many(const struct mc_rdma_ops *ops, struct rdma_conn *c,
                          const struct rdma_op *op, size_t nops, uint32_t slice_bytes,
                          uint32_t window, int timeout_ms, struct rdma_xfer_stats *st, int *status);

/* The rdma transport's leaf locks (t->lock, staging_lock, rr.lock, the listener's lock):
 * MC_LO_RDMA_LEAF in the lock order; nothing is taken under one. */
static inline void rdma_leaf_lock(pthread_mutex_t *mu)
{
    mc_lo_acquire(MC_LO_RDMA_LEAF, 0);
    pthread_mutex_lock(mu);
}
static inline void rdma_leaf_unlock(pthread_mutex_t *mu)
{
    pthread_mutex_unlock(mu);
    mc_lo_release(MC_LO_RDMA_LEAF, 0);
}

/* mr_lock: a leaf of the lock order (common/lock_order.h, MC_LO_RDMA_MR). */
static inline void rdma_mr_lock(struct rdma_ctx *x)
{
    mc_lo_acquire(MC_LO_RDMA_MR, x->lo_idx);
    pthread_mutex_lock(&x->mr_lock);
}
static inline void rdma_mr_unlock(struct rdma_ctx *x)
{
    pthread_mutex_unlock(&x->mr_lock);
    mc_lo_release(MC_LO_RDMA_MR, x->lo_idx);
}

#endif
