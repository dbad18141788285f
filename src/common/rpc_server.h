/*
 * rpc_server.h - framed RPC server: epoll, a few I/O threads, many connections, deferred replies.
 *
 * Design. One listening socket, served by I/O thread 0, hands accepted connections round-robin
 * to `io_threads` I/O threads; each thread owns an epoll set, an eventfd and its connections, so
 * a connection is only ever touched by its own thread. Frames (wire.h) are parsed from a 64 KiB
 * read buffer; a large body gets its own buffer and is read into it directly. Each request
 * becomes a `struct mc_rpc_call` and is handed to the handler registered for its method, on the
 * I/O thread. Handlers must be quick: they decode, call the core, and either reply at once or
 * keep the call (a *deferred* reply, e.g. a long-poll) and complete it later from any thread.
 *
 * Replies. A call is answered exactly once with one of mc_rpc_reply*(). The frame is built by
 * the caller (so protobuf encoding never happens under a core lock, nor on the I/O thread for
 * deferred replies) and queued to the connection's I/O thread, which writes it with sendmsg (a
 * raw payload is written from the caller's memory without a copy); the replies of one epoll
 * round on plain connections go out together in one io_uring submission (rpc_server_out.c). A
 * reply on the I/O thread itself skips the queue. Completing a call whose connection has closed
 * only frees it. On mc_rpc_server_stop() every call not yet answered gets
 * UNAVAILABLE_IN_CURRENT_STATUS; later mc_rpc_reply*() on such calls only free them. Every call
 * handed to a handler must eventually be completed (reply or mc_rpc_call_drop) or it leaks.
 *
 * Limits and bad input. A large body's buffer is sized by the bytes that arrived (64 KiB at
 * least) and grows as more arrive; what is allocated ahead of the bytes (2 MiB per body at
 * most) is bounded server-wide by body_ahead_bytes. At most `max_conns`
 * connections (extra ones are accepted and closed), at most `max_inflight_per_conn` unanswered
 * calls per connection (the connection is simply not read until some are answered: back-pressure,
 * not an error). A frame with a bad magic, version or kind, or a body above `max_frame_bytes`,
 * closes the connection (bad version is first answered with INVALID_VERSION); an unknown method is
 * answered NOT_SUPPORTED; a body the handler cannot decode is answered DESERIALIZE_FAIL
 * (mc_rpc_call_unpack does it). Each is logged.
 *
 * Lifetime: mc_rpc_server_new -> mc_rpc_server_register (any number, before start) ->
 * mc_rpc_server_start -> ... -> mc_rpc_server_stop -> (owners drop their parked calls) ->
 * mc_rpc_server_free. Completions between stop and free are safe no-ops; after free they are a
 * use-after-free, so stop the code that parks calls before freeing the server.
 */
#ifndef MC_COMMON_RPC_SERVER_H
#define MC_COMMON_RPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <protobuf-c/protobuf-c.h>

#include "common/wire.h"

struct mc_rpc_server;
struct mc_rpc_call;
struct mc_auth_key;

struct mc_tls_ctx;

struct mc_rpc_server_config {
    const char *bind_addr;     /* IPv4 address or host name; NULL/"" = 0.0.0.0 */
    uint16_t port;             /* 0 = ephemeral; mc_rpc_server_port() reports it */
    int io_threads;            /* --rpc_thread_num; 0 = 2 */
    int max_conns;             /* 0 = 10000 */
    int max_inflight_per_conn; /* 0 = 1024 */
    uint32_t max_frame_bytes;  /* --max_frame_bytes; 0 = MC_WIRE_DEFAULT_MAX_FRAME_BYTES */
    const char *name;          /* for log lines ("master", "peer"); NULL = "rpc" */
    /* Called on the connection's I/O thread after it closed (by either side or at stop), with
     * the per-connection context (see mc_rpc_call_conn_ctx); may be NULL. Calls of the
     * connection that are still parked stay valid until completed. */
    void (*on_close)(void *arg, uint64_t conn_id, void *conn_ctx);
    void *on_close_arg;
    /* Who may connect (common/auth.h). With a key (copied; NULL or unset = none) every
     * connection must pass the handshake before any other method. Without one and with
     * protected_mode (the default), only loopback peers are served; others get
     * MC_ERR_PROTECTED_MODE and are disconnected. */
    const struct mc_auth_key *auth;
    bool protected_mode;
    /* A connection with no call in flight and no byte moved for this long is closed (0 = never;
     * a call parked by its handler, e.g. a long-poll, keeps it open). A connection that has not
     * finished the handshake (or been refused in protected mode) is closed after
     * handshake_timeout_ms (0 = MC_RPC_HANDSHAKE_TIMEOUT_MS) whatever this says. */
    uint32_t idle_timeout_ms;
    uint32_t handshake_timeout_ms;
    /* At most this many connections from one peer address (0 = no limit); loopback peers are
     * exempt (every process of a single-host deployment and every test shares 127.0.0.1).
     * Extra ones are accepted and closed at once (counted in conns_rejected, logged). */
    uint32_t max_conns_per_addr;
    /* With a key: connections that have not finished the handshake have a pool of their own,
     * max_pending_conns (0 = MC_RPC_DEFAULT_MAX_PENDING), at most max_pending_per_addr of them
     * from one address, loopback included (0 = MC_RPC_DEFAULT_MAX_PENDING_PER_ADDR); more are
     * closed at accept. Authenticated connections thus keep max_conns - max_pending of room. */
    uint32_t max_pending_conns;
    uint32_t max_pending_per_addr;
    /* Decode limits (common/pb_budget.h), applied by mc_rpc_call_unpack*: a repeated field of
     * more than max_repeated elements in one message is refused before decoding (INVALID_PARAMS;
     * 0 = MC_PB_DEFAULT_MAX_REPEATED, the master's batch cap), and decoding runs under a memory
     * budget of a small multiple of the body. A peer request's control message above
     * max_control_bytes is refused (DESERIALIZE_FAIL) whatever the frame limit (0 =
     * max_repeated x (MC_RPC_MAX_KEY_BYTES + 64) + 4 KiB: a full batch of the longest keys). */
    uint32_t max_repeated;
    uint64_t max_control_bytes;
    /* Replies queued on one connection and not yet taken by its socket (Redis's
     * client-output-buffer-limit): past out_soft_bytes the connection's requests are no longer
     * read until the queue is down to half of it; past out_hard_bytes (with more than one reply
     * queued: a single reply of any size is always allowed) the connection is closed. 0 =
     * defaults: soft = max_frame_bytes, hard = 4 x soft. A queue that does not move for
     * idle_timeout_ms closes the connection too. */
    uint64_t out_soft_bytes;
    uint64_t out_hard_bytes;
    /* mc_rpc_call_check_endpoint accepts every endpoint (--check_segment_endpoint=false). */
    bool endpoint_check_off;
    /* A large body's buffer may be allocated ahead of its bytes (2 MiB at most, so a 1 MiB
     * slice fits one buffer) while all such bytes of the server stay within this (0 = 64 MiB);
     * past it a body's buffer follows the bytes that arrived. */
    uint64_t body_ahead_bytes;
    /* Roles (with auth set): a connection whose handshake proof was made with this key (copied;
     * --admin_token_file) is an admin one (mc_rpc_call_is_admin); proofs with auth are data
     * ones. NULL or unset: every connection is admin (one token for everything). */
    const struct mc_auth_key *admin_auth;
    /* TLS (common/tls.h): every connection is a TLS server session of this context (not
     * owned; it outlives the server), and the handshake above runs inside it. A client that
     * speaks plain text gets one MC_ERR_TLS_REQUIRED frame and is closed. NULL = plain TCP. */
    struct mc_tls_ctx *tls;
};

#define MC_RPC_MAX_KEY_BYTES 4096

#define MC_RPC_HANDSHAKE_TIMEOUT_MS 3000
#define MC_RPC_DEFAULT_MAX_PENDING 1024
#define MC_RPC_DEFAULT_MAX_PENDING_PER_ADDR 128

/* Fills defaults (0.0.0.0:0, 2 threads, 10000 conns, 1024 in flight, 64 MiB frames, no auth
 * key, protected mode). */
void mc_rpc_server_config_init(struct mc_rpc_server_config *cfg);

/* A handler owns `call` until it completes it. Runs on the connection's I/O thread. */
typedef void (*mc_rpc_handler_fn)(void *arg, struct mc_rpc_call *call);

/* Returns 0, or MC_ERR_INVALID_PARAMS for a bad config, or MC_ERR_INTERNAL_ERROR. */
int mc_rpc_server_new(const struct mc_rpc_server_config *cfg, struct mc_rpc_server **out);
/* Registers a handler before start. MC_METHOD_ECHO (echo the body) has a built-in handler;
 * registering replaces it. The layer knows no other method: a master registers its
 * ServiceReady answer itself (common/service_ready.h).
 * Returns 0 or MC_ERR_INVALID_PARAMS (method out of range, or server already started). */
int mc_rpc_server_register(struct mc_rpc_server *s, uint16_t method, mc_rpc_handler_fn fn,
                           void *arg);
/* Binds, listens and starts the I/O threads. Returns 0, MC_ERR_RPC_FAIL (bind/listen failed,
 * logged with errno) or MC_ERR_INTERNAL_ERROR. */
int mc_rpc_server_start(struct mc_rpc_server *s);
/* The bound port (after start). */
uint16_t mc_rpc_server_port(const struct mc_rpc_server *s);
/* Stops accepting, answers unanswered calls with UNAVAILABLE_IN_CURRENT_STATUS, flushes what it
 * can without blocking long, closes every connection (on_close runs) and joins the threads.
 * Idempotent. */
void mc_rpc_server_stop(struct mc_rpc_server *s);
/* Stops if needed and frees. NULL is a no-op. */
void mc_rpc_server_free(struct mc_rpc_server *s);

/* Live counters, for tests and metrics. */
struct mc_rpc_server_stats {
    uint64_t conns_open, conns_accepted, conns_rejected;
    uint64_t requests, protocol_errors, unknown_methods;
    uint64_t auth_failures;       /* handshakes failed, or requests before one */
    uint64_t protected_refusals;  /* non-loopback peers refused in protected mode */
    uint64_t pending_refusals;    /* refused at accept: the handshake pool (or its share for
                                   * one address) was full */
    uint64_t idle_closed;         /* closed for idleness or a handshake timeout */
    uint64_t idle_sweeps;         /* runs of the idle check (for tests) */
    uint64_t bodies_receiving;    /* large bodies being read now */
    uint64_t body_bytes_buffered; /* bytes allocated for them (grows as their bytes arrive) */
    uint64_t body_buffers_new;    /* large request bodies that needed a new buffer */
    uint64_t body_buffers_reused; /* large request bodies read into a cached buffer */
    uint64_t decode_refusals;     /* bodies refused by the decode limits (pb_budget.h) */
    uint64_t out_paused;          /* times a connection stopped being read: replies piled up */
    uint64_t out_closed;          /* connections closed past the output hard limit */
    uint64_t out_bytes_queued;    /* reply bytes queued on all connections now */
};
void mc_rpc_server_get_stats(const struct mc_rpc_server *s, struct mc_rpc_server_stats *st);

struct mc_metrics;
/* Registers the server's protection counters in m as "<prefix>_rpc_<name>" (connections open
 * and refused, decode refusals, output-buffer pauses and closes, bytes queued, idle closes).
 * The server must outlive m's renders. Returns 0 or the registry's error. */
int mc_rpc_server_export_metrics(struct mc_rpc_server *s, struct mc_metrics *m, const char *prefix);

#ifdef MC_TEST_HOOKS
/* Test builds (fuzzers): runs `data` through a server that was never started, as the byte
 * stream of one connection, on the calling thread: frames are parsed, checked and dispatched to
 * the registered handlers exactly as on a live connection; replies are discarded; the
 * connection is closed at the end (on_close runs). Returns 0, or INVALID_PARAMS if started. */
int mc_rpc_server_test_feed(struct mc_rpc_server *s, const uint8_t *data, size_t len);
#endif

/* ---- a call, as its handler sees it -------------------------------------------------------- */

uint16_t mc_rpc_call_method(const struct mc_rpc_call *c);
uint64_t mc_rpc_call_id(const struct mc_rpc_call *c);
/* Connection id (unique per server run, for logs and for binding a client to a connection). */
uint64_t mc_rpc_call_conn_id(const struct mc_rpc_call *c);
/* Whether nobody can receive this call's answer any more: its connection closed (the flag is
 * set before on_close runs), or the call was answered already (server stop). Any thread, until
 * the call is completed. A parked call's owner asks it before handing the call work that must
 * not be lost (a long-poll's tasks): a reply to such a call is only freed. */
bool mc_rpc_call_conn_closed(const struct mc_rpc_call *c);
/* The request body (valid until the call is completed). */
const uint8_t *mc_rpc_call_body(const struct mc_rpc_call *c, size_t *len);
/* Whether endpoint ("host:port", "[v6]:port") may be claimed by the caller's connection: 0 when
 * its host is the connection's own peer address (numeric), when the peer is loopback (same
 * host: any of its addresses), or when the server's endpoint_check_off; MC_ERR_INVALID_PARAMS
 * otherwise (a host name from a remote peer included: no DNS on an I/O thread), logged. A
 * mounted segment's endpoint is where other clients will send their values. */
int mc_rpc_call_check_endpoint(const struct mc_rpc_call *c, const char *endpoint);
/* Whether the call's connection proved the admin token (always true without an admin key). */
bool mc_rpc_call_is_admin(const struct mc_rpc_call *c);
/* Client credentials (auth.h), with a token set: whether the server checks them at all (false
 * without a token); the client id (16 bytes) the connection proved with one in its handshake
 * (false: none presented, or one that did not check); the credential for an id, as the server
 * hands it out (false without a token). */
bool mc_rpc_call_creds_on(const struct mc_rpc_call *c);
bool mc_rpc_call_proven_client(const struct mc_rpc_call *c, uint8_t *id);
bool mc_rpc_call_mint_cred(const struct mc_rpc_call *c, const uint8_t *id, uint8_t *cred);
/* A per-connection slot a higher layer may set (e.g. the client id bound to this connection).
 * Read and write it only from the handler (the connection's I/O thread); on_close receives it. */
void **mc_rpc_call_conn_ctx(struct mc_rpc_call *c);
/* The arg its handler was registered with (any thread, until the call is completed): for a
 * parked call's later answer, made away from the handler. */
void *mc_rpc_call_handler_arg(const struct mc_rpc_call *c);

/* Decodes the body as `desc`. On failure logs, answers DESERIALIZE_FAIL (completing the call)
 * and returns NULL: the handler must then just return. Free the result with
 * protobuf_c_message_free_unpacked(msg, NULL). */
ProtobufCMessage *mc_rpc_call_unpack(struct mc_rpc_call *c, const ProtobufCMessageDescriptor *desc);
/* Splits a peer body (wire.h) and decodes its control message as `desc`; `payload` points into
 * the body. On failure answers DESERIALIZE_FAIL and returns NULL, as above. */
ProtobufCMessage *mc_rpc_call_unpack_peer(struct mc_rpc_call *c,
                                          const ProtobufCMessageDescriptor *desc,
                                          const uint8_t **payload, size_t *payload_len);

/* ---- completing a call (exactly once; any thread) ----------------------------------------- */

/* Answers with `status` and a copy of body[0..len). A non-zero status sends an empty body. */
void mc_rpc_reply(struct mc_rpc_call *c, int32_t status, const void *body, size_t len);
/* Answers with a protobuf message (encoded by the caller's thread, outside any lock the caller
 * does not hold) or, when status != 0 or msg == NULL, an empty body. */
void mc_rpc_reply_msg(struct mc_rpc_call *c, int32_t status, const ProtobufCMessage *msg);
/* Answers a peer call: status, control message (may be NULL = empty) and a raw payload written
 * from the given iovecs without copying. The payload may point into the request body (kept
 * until written). `release(release_arg)` runs once the payload memory is no longer needed
 * (written, or connection gone); it may be NULL when the memory outlives the connection (e.g. a
 * mounted segment). */
void mc_rpc_reply_peer(struct mc_rpc_call *c, int32_t status, const ProtobufCMessage *ctl,
                       const struct iovec *payload, int niov, void (*release)(void *),
                       void *release_arg);
/* A reply body written in place by a hand encoder (no message struct, no copy): the draft is
 * the reply frame being built. Start from {0}. mc_rpc_draft_room gives room for at least `need`
 * body bytes, keeping the bytes written so far (the block may move: write through the pointer it
 * returns), NULL when out of memory (the draft is kept as it was). mc_rpc_reply_draft answers
 * status 0 with the first len bytes and empties the draft; mc_rpc_draft_free drops an unsent
 * one (an error answered instead). */
struct mc_rpc_draft {
    void *item; /* the server's reply item (rpc_server_internal.h), NULL when empty */
    size_t cap; /* body bytes it has room for */
};
uint8_t *mc_rpc_draft_room(struct mc_rpc_draft *d, size_t need);
void mc_rpc_reply_draft(struct mc_rpc_call *c, struct mc_rpc_draft *d, size_t len);
void mc_rpc_draft_free(struct mc_rpc_draft *d);
/* For a handler that decodes its body itself: logs why the body is refused (with the method,
 * connection and length) and answers DESERIALIZE_FAIL, as mc_rpc_call_unpack does. */
void mc_rpc_call_refuse_body(struct mc_rpc_call *c, const char *why);
/* Answers an error (empty body). */
static inline void mc_rpc_reply_status(struct mc_rpc_call *c, int32_t status)
{
    mc_rpc_reply(c, status, NULL, 0);
}
/* Releases a call without answering (the client times out). For owners that discard parked
 * calls after stop, or deliberately unanswered tests. */
void mc_rpc_call_drop(struct mc_rpc_call *c);

#endif
