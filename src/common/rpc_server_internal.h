/*
 * rpc_server_internal.h - the RPC server's shared state, for its two source files only.
 *
 * The split. rpc_server_conn.c is the I/O side: each I/O thread's loop, accepting, reading and
 * parsing frames, dispatching calls, the output queue and writes, the hand-over of completions
 * from other threads, closing and stop. rpc_server.c is the API side: building replies
 * (mc_rpc_reply*, on any thread), call accessors and the server's lifecycle. Only the few
 * functions below cross between them.
 *
 * Ownership in one paragraph. A connection (struct conn) belongs to one I/O thread; only that
 * thread reads, writes, closes it or walks its call list. It is reference-counted: one reference
 * for the I/O thread while open, one per call alive. A call has two references: the connection's
 * call list (dropped when the reply is processed or the connection closes) and the owner's (the
 * handler's, dropped when it completes the call). `state` is CAS'd from PENDING to DONE by
 * whoever answers first (the owner, or stop); the loser only drops its reference. A completion
 * from another thread is pushed on the I/O thread's queue (mutex + eventfd); after stop the
 * queue is closed and completions just free.
 */
#ifndef MC_COMMON_RPC_SERVER_INTERNAL_H
#define MC_COMMON_RPC_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/auth.h"
#include "common/rpc_server.h"
#include "common/tls.h"
#include "common/wire.h"

enum { CALL_PENDING = 0, CALL_DONE = 1 };

struct out_item {
    struct out_item *next;
    uint8_t *buf;      /* header (+ peer prefix + control, or body): inside the item's block */
    uint8_t *req_body; /* owned: the request body, which a peer payload may point into */
    struct mc_rpc_call *req_call; /* a reference: the call whose inline body it may point into */
    void (*release)(void *);
    void *release_arg;
    int niov, idx;
    struct iovec iov[]; /* iov[0] = buf; the rest = caller payload (not owned) */
};

struct io_thread;

struct conn {
    _Atomic int refs;
    struct io_thread *io;
    uint64_t id;
    int fd;
    bool closed, paused, close_after_flush;
    _Atomic bool gone; /* closed, readable from any thread that holds a call of it */
    uint32_t events;
    void *ctx;
    uint8_t *rbuf;
    size_t rpos, rlen;
    /* large body being read directly into its own buffer */
    bool in_body;
    struct mc_wire_header cur;
    uint8_t *body;
    size_t body_got, body_cap; /* the buffer grows as the body arrives */
    uint64_t body_ahead;       /* of body_cap, allocated ahead of the bytes (body_ahead_bytes) */
    struct mc_rpc_call *calls; /* unanswered calls (doubly linked) */
    int inflight;
    struct out_item *out_head, *out_tail;
    size_t out_bytes;       /* bytes queued in out_head.. and not yet written */
    bool out_paused;        /* not read while out_bytes is past the soft limit */
    uint64_t last_write_ms; /* last byte written, or when the queue stopped being empty */
    struct conn *next, *prev;
    /* who may connect (rpc_server_gate.c) */
    uint8_t gate; /* enum mc_rpcs_gate */
    bool loopback;
    bool addr_counted;    /* holds one slot of its address's count (max_conns_per_addr) */
    bool pending_counted; /* holds a handshake slot (max_pending_conns, max_pending_per_addr) */
    bool admin;           /* proved the admin token (cfg.admin_auth) */
    uint8_t addr[16];     /* the peer address (v4 in its v4-mapped v6 form) */
    uint64_t attach_ms, last_active_ms;
    char peer[64]; /* "a.b.c.d:port", for log lines */
    /* presented a client credential that checks (auth.h), for client_id (big-endian hi, lo) */
    bool client_proven;
    uint8_t client_id[16];
    uint8_t cnonce[MC_AUTH_NONCE_BYTES], snonce[MC_AUTH_NONCE_BYTES];
    struct mc_tls *tls; /* the TLS session (cfg.tls), NULL on a plain server */
    bool tls_checked;   /* the first byte was a TLS handshake record */
    bool fqueued;       /* on its I/O thread's flushq (rpc_server_out.c), holding a reference */
    struct conn *fnext;
};

struct mc_rpc_call {
    struct conn *conn;
    _Atomic int state;
    _Atomic int refs;
    bool in_list;
    uint16_t method;
    uint64_t id;
    bool body_inline; /* body is inline_body (freed with the call), else its own buffer */
    uint8_t *body;
    size_t len;
    struct out_item *reply;
    struct mc_rpc_call *qnext, *lnext, *lprev;
    uint8_t inline_body[]; /* a body that arrived whole in the read buffer, copied with the call */
};

struct io_thread {
    struct mc_rpc_server *srv;
    int index;
    pthread_t tid;
    bool started;
    int epfd, evfd;
    pthread_mutex_t qlock;
    struct mc_rpc_call *qhead, *qtail; /* completed calls from other threads */
    struct conn *newconns;             /* accepted, handed over by thread 0 */
    bool qclosed;
    struct conn *conns;
    struct conn *graveyard;  /* closed this round; last reference dropped after the round */
    struct conn *batch_conn; /* conn whose replies are being batched (no flush per reply) */
    /* Thread 0 (which owns the listener): accepting is paused until accept_resume_ms (0: not
     * paused) after accept4 failed for lack of descriptors or memory. */
    uint64_t accept_resume_ms;
    uint64_t accept_log_ms;     /* when the last "accept failed" line was written */
    uint64_t accept_suppressed; /* failures since that line */
    uint64_t next_sweep_ms;     /* idle / handshake timeouts are checked then */
    bool tls_more;              /* a connection holds decrypted bytes its socket will not signal */
    /* rpc_server_out.c: connections answered during this round's events, written together at
     * its end through the thread's ring (NULL: io_uring unavailable, one sendmsg each) */
    bool in_round;
    struct conn *flushq;
    struct mc_rpcs_ring *ring;
};

/* Connections per peer address (rpc_server_gate.c), shared by the I/O threads. */
struct addr_count {
    uint8_t addr[16];
    uint32_t n;       /* connections (non-loopback only, for max_conns_per_addr) */
    uint32_t pending; /* of them still in the handshake (loopback included) */
    struct addr_count *next;
};
#define ADDR_BUCKETS 256

/* One exported series (rpc_server_metrics.c): the server and the series' index. */
#define MC_RPCS_METRIC_SERIES 7
struct mc_rpcs_metric_arg {
    struct mc_rpc_server *srv;
    int index;
};

struct handler {
    mc_rpc_handler_fn fn;
    void *arg;
};

struct mc_rpc_server {
    struct mc_rpc_server_config cfg;
    char name[32];
    int lfd;
    uint16_t port;
    bool started, stopped;
    _Atomic bool stopping;
    struct io_thread *io;
    int nio;
    unsigned rr;
    const struct mc_logger *logger; /* the I/O threads log through their starter's logger */
    struct mc_rpcs_bodies *bodies;  /* request bodies: large ones reused (rpc_server_bodies.c) */
    _Atomic uint64_t next_conn_id;
    _Atomic uint64_t conns_open, conns_accepted, conns_rejected, requests, protocol_errors,
        unknown_methods, auth_failures, protected_refusals, bodies_receiving, body_bytes_buffered,
        idle_closed, idle_sweeps, decode_refusals, out_paused_total, out_closed_total;
    _Atomic int64_t out_bytes_queued;
    _Atomic uint64_t body_ahead_bytes; /* large-body bytes allocated before they arrived */
    pthread_mutex_t addr_lock;
    struct addr_count *addrs[ADDR_BUCKETS];
    uint32_t pending_conns; /* connections in the handshake (under addr_lock) */
    _Atomic uint64_t pending_refusals, refusal_log_ms, refusals_not_logged;
    struct mc_auth_key auth;
    struct mc_auth_key admin_auth;
    struct handler handlers[MC_METHOD_TABLE_SIZE];
    struct mc_rpcs_metric_arg metric_args[MC_RPCS_METRIC_SERIES];
};

/* ---- request bodies (rpc_server_bodies.c) -------------------------------------------------- */

/* A cache of large body buffers, keeping at most max_bytes; NULL when out of memory. */
struct mc_rpcs_bodies *mc_rpcs_bodies_new(size_t max_bytes);
/* The server's reference: empties the cache; bodies still out are freed when they come back. */
void mc_rpcs_bodies_release(struct mc_rpcs_bodies *p);
/* A body of len bytes (from the cache when large), NULL when out of memory; p may be NULL. */
uint8_t *mc_rpcs_body_alloc(struct mc_rpcs_bodies *p, size_t len);
/* Frees or caches a body from mc_rpcs_body_alloc, on any thread; NULL is a no-op. */
void mc_rpcs_body_free(uint8_t *body);
/* Large bodies that needed a new buffer, and those served from the cache. */
void mc_rpcs_bodies_stats(struct mc_rpcs_bodies *p, uint64_t *fresh, uint64_t *reused);

/* ---- references (any thread) ------------------------------------------------------------- */

static inline void conn_unref(struct conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        free(c->rbuf);
        mc_rpcs_body_free(c->body);
        mc_tls_free(c->tls);
        free(c);
    }
}

static inline void call_unref(struct mc_rpc_call *call)
{
    if (atomic_fetch_sub(&call->refs, 1) == 1) {
        if (!call->body_inline)
            mc_rpcs_body_free(call->body);
        conn_unref(call->conn);
        free(call);
    }
}

static inline void item_free(struct out_item *it)
{
    if (!it)
        return;
    if (it->release)
        it->release(it->release_arg);
    mc_rpcs_body_free(it->req_body);
    if (it->req_call)
        call_unref(it->req_call);
    free(it);
}

/* ---- rpc_server_gate.c: who may connect ------------------------------------------------- */

enum mc_rpcs_gate {
    MC_GATE_OPEN = 0,  /* serve every method */
    MC_GATE_CHALLENGE, /* expecting AuthChallenge */
    MC_GATE_PROVE,     /* expecting AuthProve */
    MC_GATE_REFUSE,    /* protected mode: answer the first frame PROTECTED_MODE and close */
};

/* What the gate answers to a frame; close: disconnect once it is written. */
struct mc_rpcs_gate_reply {
    int32_t status;
    uint32_t len;
    bool close;
    uint8_t body[MC_AUTH_NONCE_BYTES + MC_AUTH_MAC_BYTES];
};

/* At accept, before anything is allocated for the connection but c itself: learns the peer
 * address, refuses a non-loopback peer in protected mode (one PROTECTED_MODE frame, then close),
 * takes a slot of its address's connection count and, with a token, a handshake slot (a small
 * pool of its own, with a per-address limit that includes loopback), and sets the gate. false:
 * refused (logged at most once a second, counted): close it at once. */
bool mc_rpcs_gate_admit(struct mc_rpc_server *s, struct conn *c, const struct sockaddr *sa,
                        socklen_t sl);
/* Why the connection should be closed now (idle, handshake too slow), or NULL. */
const char *mc_rpcs_gate_expired(struct mc_rpc_server *s, const struct conn *c, uint64_t now);
/* For a connection whose gate is not open, from a frame's header alone: true when the frame
 * must be answered with *r (and the connection closed) without reading its body; false when it
 * is a well-sized handshake frame, to be read and given to mc_rpcs_gate_frame. */
bool mc_rpcs_gate_header(struct mc_rpc_server *s, struct conn *c, const struct mc_wire_header *h,
                         struct mc_rpcs_gate_reply *r);
/* A whole handshake frame (header checked by mc_rpcs_gate_header): fills the answer *r. */
void mc_rpcs_gate_frame(struct mc_rpc_server *s, struct conn *c, const struct mc_wire_header *h,
                        const uint8_t *body, struct mc_rpcs_gate_reply *r);

/* When a connection closes: gives back its address slot; one that left in the middle of the
 * handshake (after our proof, before its own: it did not accept ours, so it holds another
 * token) counts as a failure. */
void mc_rpcs_gate_closed(struct mc_rpc_server *s, struct conn *c);

/* ---- rpc_server_tls.c: the socket, plain or TLS ----------------------------------------- */

/* At accept: c's TLS session when the server has a context. false: out of memory. */
bool mc_rpcs_tls_attach(struct mc_rpc_server *s, struct conn *c);
/* read(2) / sendmsg(2) of c's socket, through its session if any (-1 with errno EAGAIN,
 * EPROTO after a TLS failure, which is logged). */
ssize_t mc_rpcs_read(struct mc_rpc_server *s, struct conn *c, void *buf, size_t len);
ssize_t mc_rpcs_send(struct conn *c, const struct iovec *iov, int n);
/* Bytes received and not yet read, decrypted ones included (0 when unknown). */
size_t mc_rpcs_queued(const struct conn *c);
/* Whether c waits for its socket to be writable to go on reading (TLS handshake). */
bool mc_rpcs_wants_write(const struct conn *c);
/* Decrypted bytes c holds (epoll will not report them). */
bool mc_rpcs_has_pending(const struct conn *c);
/* At close: frees the session. */
void mc_rpcs_tls_detach(struct conn *c);

/* ---- rpc_server_out.c: the reply queue and its writes ----------------------------------- */

/* The epoll events c needs now (reading unless paused, writing while replies wait). */
void mc_rpcs_set_events(struct io_thread *io, struct conn *c);
/* Writes as much of c's output queue as the socket takes (then polls for the rest). */
void mc_rpcs_flush(struct io_thread *io, struct conn *c);
/* Appends it to c's output queue and counts its bytes. */
void mc_rpcs_out_append(struct io_thread *io, struct conn *c, struct out_item *it);
/* The output-buffer limits (rpc_server.h, out_soft_bytes): false when c was closed. */
bool mc_rpcs_out_limits(struct io_thread *io, struct conn *c);
/* Queues a reply on c and writes it unless c's replies are being batched (batch_conn). */
void mc_rpcs_push_out(struct io_thread *io, struct conn *c, struct out_item *it);
/* During a round of events: c's replies are written at the round's end with the others';
 * otherwise (or for a TLS, paused or closing connection) now. */
void mc_rpcs_defer_flush(struct io_thread *io, struct conn *c);
/* The round's end: writes every connection queued by mc_rpcs_defer_flush. */
void mc_rpcs_flush_round(struct io_thread *io);
/* Reads of one round through the ring (rpc_server_conn.c): at most this many connections. */
#define MC_RPCS_RING_READS 64
/* Reads bufs[i] (lens[i] bytes) from c[i]'s socket for i < n (n <= MC_RPCS_RING_READS) in one
 * io_uring submission, without waiting for bytes: res[i] is what read(2) would return (bytes,
 * 0 at end of stream) or -errno. false: nothing was read (no ring, or the submission failed):
 * read them the ordinary way. */
bool mc_rpcs_ring_recv(struct io_thread *io, struct conn *const *c, void *const *bufs,
                       const size_t *lens, int n, int *res);
/* The I/O thread's ring, made and freed on that thread (none when io_uring is unavailable). */
void mc_rpcs_ring_init(struct io_thread *io);
void mc_rpcs_ring_free(struct io_thread *io);

/* ---- rpc_server_conn.c ------------------------------------------------------------------- */

/* Closes c (once): its calls are dropped, its queue freed, its memory kept until the round's
 * end. */
void mc_rpcs_conn_close(struct io_thread *io, struct conn *c, const char *why);

/* A reply frame with `buflen` bytes of its own (iov[0]) and room for `npayload` caller iovecs;
 * NULL when out of memory. */
struct out_item *mc_rpcs_item_new(size_t buflen, int npayload);
/* A response frame: header plus a copy of body. NULL when out of memory. */
struct out_item *mc_rpcs_frame_new(uint16_t method, uint64_t id, int32_t status, const void *body,
                                   size_t len);
/* Answers call with reply (NULL: none), from any thread: the first answer wins, a later one is
 * freed; off the connection's I/O thread it goes through that thread's queue. Consumes the
 * owner's reference. */
void mc_rpcs_complete(struct mc_rpc_call *call, struct out_item *reply);
/* Takes the I/O thread's completion queue and new connections and processes them;
 * close_queue: later completions only free. */
void mc_rpcs_drain_queue(struct io_thread *io, bool close_queue);
/* An I/O thread (pthread entry point, arg = its struct io_thread). */
void *mc_rpcs_io_main(void *arg);

#endif
