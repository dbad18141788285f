/*
 * rpc_client.h - framed RPC client: one TCP connection, pipelined, thread-safe, reconnecting.
 *
 * Design. A client owns one connection to one server ("host:port"). Any number of threads call
 * concurrently: each call takes a fresh request id, registers itself in a pending table, writes
 * its frame under a send mutex (MSG_NOSIGNAL, writev, payloads never copied), then waits for the
 * response with the same id, so many calls are outstanding at once and answers may come in any
 * order. There is no receiver thread: callers read the socket themselves, one at a time
 * (leader/follower, see rpc_client.c). The caller holding the read token reads responses and
 * hands each to its call (waking that caller); when its own is in, it passes the token on. A
 * lone caller thus reads its own reply with no thread hand-off: on a plain socket a call is one
 * sendmsg and one recv (a blocking read bounded by SO_RCVTIMEO, no poll before it; the idle
 * liveness peek is skipped while the connection delivered bytes in the last 20 ms). A peer call may
 * name a receive buffer: the reader lands the reply payload straight in it (a 64 MiB Get lands in
 * the user's buffer with no intermediate copy).
 *
 * Timeouts. A call waits at most call_timeout_ms + server_wait_ms (server_wait_ms is how long
 * the call asked the server to hold it, e.g. a long-poll heartbeat) and then fails with
 * MC_ERR_RPC_TIMEOUT; a late answer is discarded. If the deadline hits while the caller itself
 * is receiving its payload, the rest of that frame is discarded (the connection stays usable);
 * if it hits while another caller is writing into its buffer, the connection is shut down (the
 * stream position is lost) and the call returns only after that caller let go of the buffer.
 *
 * Failures and reconnect. When the connection breaks, every outstanding call fails with
 * MC_ERR_RPC_FAIL; an idle connection the server closed is noticed by the next call (or
 * mc_rpc_client_connected) before it sends. The next call reconnects (connect_timeout_ms); failed
 * attempts back off exponentially from reconnect_min_ms to reconnect_max_ms, and a call that finds
 * the client in back-off waits for the next attempt if it falls inside its own deadline, else fails
 * fast with MC_ERR_RPC_FAIL. Calls are never resent automatically (the server may have executed
 * them).
 *
 * Results. A call returns a transport error (RPC_FAIL, RPC_TIMEOUT, BUFFER_OVERFLOW,
 * DESERIALIZE_FAIL, INVALID_PARAMS) or else the status from the response header (0 or an
 * errors.h code sent by the server).
 */
#ifndef MC_COMMON_RPC_CLIENT_H
#define MC_COMMON_RPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <protobuf-c/protobuf-c.h>

#include "common/wire.h"

struct mc_rpc_client;
struct mc_auth_key;
struct mc_tls_ctx;

#define MC_RPC_DEFAULT_SPIN_US 50

struct mc_rpc_client_config {
    const char *host; /* name or IPv4 address */
    uint16_t port;
    uint32_t connect_timeout_ms; /* 0 = 3000 */
    uint32_t call_timeout_ms;    /* 0 = 10000 */
    uint32_t reconnect_min_ms;   /* 0 = 20 */
    uint32_t reconnect_max_ms;   /* 0 = 2000 */
    uint32_t max_frame_bytes;    /* largest response accepted; 0 = 64 MiB */
    const char *name;            /* log component; NULL = "rpc" */
    uint32_t spin_us; /* a waiting caller reads the socket without sleeping this long before it
                       * blocks (a reply often comes back within tens of microseconds, and
                       * waking a sleeping thread can cost more than that); at most one caller
                       * per CPU but one spins at a time in a process; 0 = never spin */
    struct mc_tls_ctx *tls;         /* TLS client context (common/tls.h; not owned); NULL = plain */
    const struct mc_auth_key *auth; /* shared secret (copied); NULL/unset = no handshake. With
                                     * one, every (re)connect runs the handshake of common/auth.h
                                     * and a refusal fails the call with UNAUTHENTICATED or
                                     * PROTECTED_MODE */
};
void mc_rpc_client_config_init(struct mc_rpc_client_config *cfg);

/* Parses "host:port" into cfg->host (pointing into buf, which must outlive cfg) and cfg->port.
 * Returns 0 or MC_ERR_INVALID_PARAMS. */
int mc_rpc_parse_endpoint(const char *endpoint, char *buf, size_t buflen,
                          struct mc_rpc_client_config *cfg);

/* Creates a client (no network I/O). Returns 0, MC_ERR_INVALID_PARAMS or INTERNAL_ERROR. */
int mc_rpc_client_new(const struct mc_rpc_client_config *cfg, struct mc_rpc_client **out);
/* Connects now (calls also connect on demand). Returns 0, MC_ERR_RPC_FAIL (refused/unreachable)
 * or MC_ERR_RPC_TIMEOUT. */
int mc_rpc_client_connect(struct mc_rpc_client *c);
/* Closes the connection (outstanding calls fail with RPC_FAIL) and frees. NULL is a no-op.
 * No call may be running on c. */
void mc_rpc_client_free(struct mc_rpc_client *c);
/* Closes the current connection (outstanding calls fail with RPC_FAIL); the next call
 * reconnects. Thread-safe. */
void mc_rpc_client_disconnect(struct mc_rpc_client *c);
/* Whether a connection is currently up. */
int mc_rpc_client_connected(struct mc_rpc_client *c);

/* The current connection's generation: it grows with every connection made, so a caller can
 * tell a failure of an earlier connection from one of the connection up now. */
uint64_t mc_rpc_client_generation(struct mc_rpc_client *c);

/* Raw call: sends body, returns the response body in *resp (malloc'd, free() it; NULL when
 * empty) and its length. resp/resp_len may be NULL to discard. */
int mc_rpc_client_call(struct mc_rpc_client *c, uint16_t method, const void *body, size_t len,
                       uint32_t server_wait_ms, void **resp, size_t *resp_len);

/* Protobuf call: encodes req (NULL = empty), decodes the response as resp_desc into *resp
 * (free with protobuf_c_message_free_unpacked(*resp, NULL)). *resp is NULL unless the call
 * returns 0. */
int mc_rpc_client_call_msg(struct mc_rpc_client *c, uint16_t method, const ProtobufCMessage *req,
                           const ProtobufCMessageDescriptor *resp_desc, uint32_t server_wait_ms,
                           ProtobufCMessage **resp);

/* A peer-protocol call (wire.h peer body). */
struct mc_rpc_peer_call {
    uint16_t method;
    const ProtobufCMessage *ctl; /* request control message (NULL = empty) */
    const struct iovec *payload; /* request payload, sent without copying */
    int npayload;
    const ProtobufCMessageDescriptor *resp_desc; /* response control type (NULL = ignore) */
    void *recv_buf;  /* where the response payload goes (may be NULL if none expected) */
    size_t recv_cap; /* a larger payload fails the call with MC_ERR_BUFFER_OVERFLOW */
    uint32_t server_wait_ms;
    /* out */
    ProtobufCMessage *resp; /* decoded control (free with protobuf_c_message_free_unpacked) */
    size_t recv_len;        /* payload bytes written to recv_buf */
};
int mc_rpc_client_call_peer(struct mc_rpc_client *c, struct mc_rpc_peer_call *pc);

/* The name the client logs under (its config's name). */
const char *mc_rpc_client_name(const struct mc_rpc_client *c);

#ifdef MC_TEST_HOOKS
/*
 * Fault injection (test builds only). Arms a one-shot connection drop for the next call of
 * `method` made by any rpc client of this process (master and peer connections alike):
 *   MC_RPC_TEST_DROP_BEFORE_SEND  the connection breaks before the request is written: the
 *                                 server never sees it;
 *   MC_RPC_TEST_DROP_AFTER_REPLY  the request is sent and the connection breaks once the reply
 *                                 has arrived (or 2 s passed), before it is read: the server
 *                                 executed the call, the caller never learns its result.
 * Either way that call, and every other call outstanding on the connection, fails with
 * MC_ERR_RPC_FAIL, as on a real drop; the next call reconnects.
 *   MC_RPC_TEST_DROP_SEND_FAILS   the connection is shut locally just before the request is
 *                                 written (as another call's timeout cuts it), so the real send
 *                                 fails: the request never left, and the call is made again on
 *                                 a new connection (it succeeds; other calls outstanding on
 *                                 the connection fail). For the tcp peer transport's own
 *                                 sockets (mc_rpc_test_send_iov) it is BEFORE_SEND.
 * Up to 8 drops may be armed at once (a further one is ignored); mc_rpc_test_drop_reset()
 * disarms all.
 */
enum mc_rpc_test_drop {
    MC_RPC_TEST_DROP_BEFORE_SEND = 1,
    MC_RPC_TEST_DROP_AFTER_REPLY = 2,
    MC_RPC_TEST_DROP_SEND_FAILS = 3,
};
void mc_rpc_test_drop_next(uint16_t method, enum mc_rpc_test_drop when);
void mc_rpc_test_drop_reset(void);
/* Armed drops that have fired since the process started. */
uint64_t mc_rpc_test_drops_fired(void);
/* Drops armed for method that have not fired yet. */
int mc_rpc_test_drops_armed(uint16_t method);
/* For code that writes request frames on its own sockets (the tcp peer transport): sends
 * iov[0..n) on fd as mc_net_send_iov does, unless a drop is armed for method: then returns -1
 * without sending (BEFORE_SEND), or sends, waits until the reply is there (2 s at most), shuts
 * the socket down and returns -1 (AFTER_REPLY). The caller treats -1 as a broken connection. */
int mc_rpc_test_send_iov(int fd, uint16_t method, struct iovec *iov, int n);
#endif

#endif
