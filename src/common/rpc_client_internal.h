/*
 * rpc_client_internal.h - the RPC client's shared state, for its two source files only.
 *
 * The split. rpc_client_conn.c owns the connection: config, connect/reconnect with back-off,
 * the idle liveness check, and breaking a connection (failing its calls). rpc_client.c is the
 * call path: register a pending entry, send, then lead or follow until the reply is in. Only
 * the functions declared at the end cross between them.
 *
 * Locks: `lock` guards the connection state (up, gen, fd number, reading), the pending table,
 * the waiter list and every pending entry; the `rx` state belongs to the token holder (the token
 * is taken and released under `lock`, which orders the hand-over). `send_lock` serializes frame
 * writes and is what the reconnect path takes before closing an old socket, so no sender ever
 * writes to a recycled descriptor; no reader can hold the token of a connection that is down,
 * so closing it never pulls the socket from under a reader. `connect_lock` serializes
 * (re)connects. Order: connect_lock -> send_lock -> lock. A pending entry lives on its caller's
 * stack.
 *
 * Every take and drop of the three goes through rpcc_lock / rpcc_send_lock / rpcc_connect_lock
 * (below), which checking builds feed to the lock-order checker (common/lock_order.h: after
 * every other level, since callers hold their own locks while they call), and every function
 * named *_locked asserts `lock` is held (RPCC_ASSERT_LOCKED). A condition wait keeps `lock`
 * recorded as held, which it is again when the wait returns.
 */
#ifndef MC_COMMON_RPC_CLIENT_INTERNAL_H
#define MC_COMMON_RPC_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/auth.h"
#include "common/lock_order.h"
#include "common/mc_assert.h"
#include "common/rpc_client.h"
#include "common/wire.h"

#define NBUCKETS 256
#define RBUF_SIZE (64u << 10)
/* A call skips the idle connection's liveness peek when bytes came in this recently: a server
 * that closed the connection so soon after answering on it is indistinguishable from one that
 * closes it while the call is in flight, which fails the call either way. */
#define RPCC_FRESH_MS 20

struct pending {
    uint64_t id;
    uint64_t gen;
    struct pending *next;          /* hash bucket */
    struct pending *wnext, *wprev; /* waiter list (blocked on cv, not leading) */
    bool waiting;
    pthread_cond_t cv;
    bool done, receiving, cut;
    int status;
    uint8_t *resp; /* non-peer: whole body; peer: control bytes */
    size_t resp_len;
    bool peer;
    void *recv_buf;
    size_t recv_cap, recv_len;
    /* the request's bytes and the connection's byte count once they were written (tx_bytes;
     * 0: not written yet), for the not-taken check at a break (rpc_client_conn.c) */
    uint64_t tx_len;
    _Atomic uint64_t tx_end;
    bool not_taken; /* failed by a break that the server's socket never took its bytes from */
    bool not_sent;  /* its send failed (or its connection was gone first): never whole */
};

/* Read state of the current connection; touched only by the token holder. */
struct rx {
    uint8_t *buf; /* RBUF_SIZE */
    size_t pos, len;
    /* the rest of a frame being read straight to its destination */
    bool big;
    bool big_peer;           /* a peer payload into target's buffer (else an ordinary body) */
    struct pending *target;  /* big_peer: the receiving entry; NULL = discard */
    struct mc_wire_header h; /* !big_peer: the frame, for delivery by id */
    uint8_t *body;           /* !big_peer: the malloc'd body (NULL = discard) */
    size_t body_cap;         /* !big_peer: body's size so far (grows as bytes arrive) */
    uint8_t *dst;            /* where the next bytes go; NULL = discard */
    size_t left;
    uint32_t rcv_ms; /* the SO_RCVTIMEO the socket has now (plain sockets; 0: none set) */
};

struct mc_rpc_client {
    struct mc_rpc_client_config cfg;
    struct mc_auth_key auth;
    char name[32];
    pthread_mutex_t lock, send_lock, connect_lock;
    uint32_t lo_idx; /* tells clients apart in the lock-order checker */
    int fd;
    bool up;
    int32_t refused; /* a connection-level refusal (request id 0) read on this connection */
    bool reading;    /* the read token of connection `gen` is held */
    uint64_t gen;
    uint64_t next_id;
    uint32_t backoff_ms;
    uint64_t next_attempt_ms;
    uint64_t last_rx_ms;       /* when the token holder last read bytes (written under the token,
                                * read under `lock` while nobody holds it) */
    _Atomic uint64_t tx_bytes; /* bytes written on the current connection (under send_lock) */
    _Atomic bool shut_local;   /* this side shut the current connection down itself (a
                                * disconnect, a failed send, a cut): its reads then end with 0
                                * as if the server had closed, but they prove nothing about what
                                * the server read (its ACKs may be delayed) */
    struct pending *buckets[NBUCKETS];
    struct pending *waiters;
    struct rx rx;
};

/* ---- locks ------------------------------------------------------------------------------- */

static inline void rpcc_lock(struct mc_rpc_client *c)
{
    mc_lo_acquire(MC_LO_RPC, c->lo_idx);
    pthread_mutex_lock(&c->lock);
}
static inline void rpcc_unlock(struct mc_rpc_client *c)
{
    pthread_mutex_unlock(&c->lock);
    mc_lo_release(MC_LO_RPC, c->lo_idx);
}
static inline void rpcc_send_lock(struct mc_rpc_client *c)
{
    mc_lo_acquire(MC_LO_RPC_SEND, c->lo_idx);
    pthread_mutex_lock(&c->send_lock);
}
static inline void rpcc_send_unlock(struct mc_rpc_client *c)
{
    pthread_mutex_unlock(&c->send_lock);
    mc_lo_release(MC_LO_RPC_SEND, c->lo_idx);
}
static inline void rpcc_connect_lock(struct mc_rpc_client *c)
{
    mc_lo_acquire(MC_LO_RPC_CONNECT, c->lo_idx);
    pthread_mutex_lock(&c->connect_lock);
}
static inline void rpcc_connect_unlock(struct mc_rpc_client *c)
{
    pthread_mutex_unlock(&c->connect_lock);
    mc_lo_release(MC_LO_RPC_CONNECT, c->lo_idx);
}
#define RPCC_ASSERT_LOCKED(c) MC_ASSERT(mc_lo_holds(MC_LO_RPC, (c)->lo_idx, false))

/* ---- pending table (under lock) ---------------------------------------------------------- */

static inline struct pending **bucket(struct mc_rpc_client *c, uint64_t id)
{
    return &c->buckets[id & (NBUCKETS - 1)];
}

static inline struct pending *pending_find(struct mc_rpc_client *c, uint64_t id)
{
    for (struct pending *p = *bucket(c, id); p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static inline void pending_remove(struct mc_rpc_client *c, struct pending *p)
{
    for (struct pending **pp = bucket(c, p->id); *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

/* Under lock: completes p (already out of the table) and wakes its caller. */
static inline void finish(struct pending *p, int status)
{
    p->status = status;
    p->done = true;
    pthread_cond_signal(&p->cv);
}

/* ---- rpc_client_conn.c ------------------------------------------------------------------- */

/* Under lock (token holder, or nobody holds the token): connection `gen` is dead. Fails every
 * call of it, the receiving one included, and resets the read state. */
void mc_rpcc_conn_broken_locked(struct mc_rpc_client *c, uint64_t gen, const char *why);
/* Makes sure a connection is up (reconnecting if allowed before deadline_ms); returns its
 * generation in *gen. */
int mc_rpcc_ensure_connected(struct mc_rpc_client *c, uint64_t deadline_ms, uint64_t *gen);

#endif
