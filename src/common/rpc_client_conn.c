/*
 * rpc_client_conn.c - the RPC client's connection: configuration, connecting (non-blocking
 * connect with a timeout, then a blocking socket), reconnecting with exponential back-off,
 * noticing an idle connection the server closed, and failing every call of a connection that
 * broke. The call path (leader/follower receive) is in rpc_client.c; rpc_client_internal.h has
 * the shared state and its locks. See rpc_client.h for the design.
 */
#include "common/rpc_client.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/rpc_client_internal.h"
#include "common/tls.h"
#include "mooncake/errors.h"

/* ---- config ------------------------------------------------------------------------------ */

void mc_rpc_client_config_init(struct mc_rpc_client_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->connect_timeout_ms = 3000;
    cfg->call_timeout_ms = 10000;
    cfg->reconnect_min_ms = 20;
    cfg->reconnect_max_ms = 2000;
    cfg->max_frame_bytes = MC_WIRE_DEFAULT_MAX_FRAME_BYTES;
    cfg->spin_us = MC_RPC_DEFAULT_SPIN_US;
}

int mc_rpc_parse_endpoint(const char *endpoint, char *buf, size_t buflen,
                          struct mc_rpc_client_config *cfg)
{
    if (!endpoint)
        return MC_ERR_INVALID_PARAMS;
    const char *colon = strrchr(endpoint, ':');
    if (!colon || colon == endpoint || (size_t)(colon - endpoint) >= buflen)
        return MC_ERR_INVALID_PARAMS;
    char *end = NULL;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || !colon[1] || *end || port == 0 || port > 65535)
        return MC_ERR_INVALID_PARAMS;
    memcpy(buf, endpoint, (size_t)(colon - endpoint));
    buf[colon - endpoint] = '\0';
    cfg->host = buf;
    cfg->port = (uint16_t)port;
    return 0;
}

/* ---- connecting -------------------------------------------------------------------------- */

static int connect_fd(struct mc_rpc_client *c, int *out)
{
    /* blocking once connected; sends give up after the call timeout (receives poll) */
    struct mc_net_connect_opts o = {.connect_timeout_ms = c->cfg.connect_timeout_ms,
                                    .send_timeout_ms = c->cfg.call_timeout_ms};
    int rc = mc_net_connect(c->cfg.host, c->cfg.port, &o, out);
    if (rc == MC_NET_ERESOLVE)
        mc_warn(c->name, "cannot resolve server", "host=%s", c->cfg.host ? c->cfg.host : "");
    if (rc != MC_NET_OK)
        return rc == MC_NET_ETIMEOUT ? MC_ERR_RPC_TIMEOUT : MC_ERR_RPC_FAIL;
    char peer[128];
    snprintf(peer, sizeof(peer), "%s:%u", c->cfg.host, c->cfg.port);
    rc = c->cfg.tls
             ? mc_tls_sock_connect(c->cfg.tls, *out, c->cfg.connect_timeout_ms, c->name, peer)
             : 0;
    if (!rc && c->auth.set)
        rc = mc_auth_client_handshake(*out, &c->auth, c->cfg.connect_timeout_ms, c->name, peer);
    if (rc) {
        mc_tls_sock_close(*out);
        *out = -1;
    }
    return rc;
}

/* ---- connection state (under lock) ------------------------------------------------------- */

static void rx_reset(struct rx *rx)
{
    free(rx->body);
    rx->body = NULL;
    rx->pos = rx->len = 0;
    rx->big = rx->big_peer = false;
    rx->target = NULL;
    rx->dst = NULL;
    rx->left = 0;
    rx->rcv_ms = 0; /* the next socket has no receive timeout yet */
}

/* Fails every pending call of connection `gen`. */
static void fail_all(struct mc_rpc_client *c, uint64_t gen)
{
    for (int i = 0; i < NBUCKETS; i++) {
        struct pending **pp = &c->buckets[i];
        while (*pp) {
            struct pending *p = *pp;
            if (p->gen == gen && !p->receiving) {
                *pp = p->next;
                p->status = c->refused ? c->refused : MC_ERR_RPC_FAIL;
                p->done = true;
                pthread_cond_signal(&p->cv);
            } else {
                pp = &p->next;
            }
        }
    }
}

/*
 * Under lock, connection `gen` just broke: marks its one pending call not_taken when the
 * server's socket never took (acknowledged) a byte of its request, so that the call may be sent
 * again on a new connection without being run twice. The kernel acknowledges every byte it
 * receives before the server can read it, and the segment that closes a connection (FIN)
 * acknowledges all it received; bytes that reach a closed socket are answered with a reset and
 * never read. So when the unacknowledged tail of the stream (SIOCOUTQ) covers the whole request
 * (and nothing was written after it), the server never read any of it. Only with one call
 * pending (no other sender in the middle of a write) and on a plain socket (TLS adds its own
 * bytes); otherwise nothing is marked and the call fails as before.
 */
static void mark_not_taken_locked(struct mc_rpc_client *c, uint64_t gen)
{
    struct pending *only = NULL;
    int n = 0;
    for (int i = 0; i < NBUCKETS && n < 2; i++)
        for (struct pending *p = c->buckets[i]; p && n < 2; p = p->next)
            if (p->gen == gen) {
                only = p;
                n++;
            }
    if (n != 1 || c->cfg.tls || c->fd < 0 || only->receiving || only->cut)
        return;
    uint64_t end = atomic_load(&only->tx_end);
    int outq = 0;
    if (!end || ioctl(c->fd, SIOCOUTQ, &outq) != 0 || outq < 0)
        return;
    uint64_t tail = atomic_load(&c->tx_bytes) - (end - only->tx_len); /* from its first byte */
    only->not_taken = tail > 0 && (uint64_t)outq >= tail;
}

/* Under lock (token holder, or nobody holds the token): connection `gen` is dead. Fails every
 * call of it, the receiving one included, and resets the read state. */
void mc_rpcc_conn_broken_locked(struct mc_rpc_client *c, uint64_t gen, const char *why)
{
    RPCC_ASSERT_LOCKED(c);
    if (c->gen != gen)
        return;
    /* only a break the kernel saw (the server closed, or the connection failed): when the
     * client itself gives up on a live connection (a protocol error, out of memory, a
     * reconnect, a shutdown of its own, after which its reads end as a server's close would)
     * its unacknowledged bytes may still be delivered, or may have been read by a server whose
     * ACK was delayed, and a request sent again could then run twice */
    if (c->up && !atomic_load(&c->shut_local) &&
        (!strcmp(why, "closed by server") || !strcmp(why, "read failed") ||
         !strcmp(why, "socket error")))
        mark_not_taken_locked(c, gen);
    if (c->up) {
        c->up = false;
        mc_info(c->name, "connection lost", "server=%s:%u reason=\"%s\"", c->cfg.host, c->cfg.port,
                why);
    }
    struct pending *t = c->rx.big && c->rx.big_peer ? c->rx.target : NULL;
    if (t) {
        t->receiving = false;
        pending_remove(c, t);
        free(t->resp);
        t->resp = NULL;
        t->resp_len = 0;
        finish(t, MC_ERR_RPC_FAIL);
    }
    rx_reset(&c->rx);
    fail_all(c, gen);
    c->refused = 0;
}

/* ---- connection management --------------------------------------------------------------- */

/* Under lock, nobody leading: whether the idle connection was closed by the server (or broke).
 * Marks it down if so. Unread bytes (a late reply) mean it is alive. For a call (for_call), a
 * connection that delivered bytes within RPCC_FRESH_MS is taken as alive without the peek (one
 * syscall less per call when calls follow each other). */
static void check_idle_locked(struct mc_rpc_client *c, bool for_call)
{
    RPCC_ASSERT_LOCKED(c);
    if (!c->up || c->reading || c->fd < 0)
        return;
    if (for_call && c->last_rx_ms && mc_now_ms() - c->last_rx_ms < RPCC_FRESH_MS)
        return;
    uint8_t b;
    ssize_t n = mc_tls_sock_recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        mc_rpcc_conn_broken_locked(c, c->gen, n == 0 ? "closed by server" : "socket error");
}

/* Under connect_lock (asserted); takes send_lock and lock itself. Closes a dead connection and
 * opens a new one. */
static int reconnect_serialized(struct mc_rpc_client *c)
{
    MC_ASSERT(mc_lo_holds(MC_LO_RPC_CONNECT, c->lo_idx, false));
    rpcc_send_lock(c);
    rpcc_lock(c);
    int old = c->fd;
    if (c->up)
        mc_rpcc_conn_broken_locked(c, c->gen, "reconnect");
    c->fd = -1;
    rpcc_unlock(c);
    if (old >= 0)
        mc_tls_sock_close(old); /* down: no reader holds it; send_lock: no sender uses it */
    rpcc_send_unlock(c);

    int fd = -1;
    int rc = connect_fd(c, &fd);
    if (rc) {
        c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : c->cfg.reconnect_min_ms;
        if (c->backoff_ms > c->cfg.reconnect_max_ms)
            c->backoff_ms = c->cfg.reconnect_max_ms;
        c->next_attempt_ms = mc_now_ms() + c->backoff_ms;
        mc_debug(c->name, "connect failed", "server=%s:%u rc=%s backoff_ms=%u", c->cfg.host,
                 c->cfg.port, mc_strerror(rc), c->backoff_ms);
        return rc;
    }
    rpcc_lock(c);
    c->fd = fd;
    c->gen++;
    c->up = true;
    atomic_store(&c->shut_local, false);
    c->last_rx_ms = 0; /* a new connection: its first call peeks */
    rx_reset(&c->rx);
    rpcc_unlock(c);
    c->backoff_ms = 0;
    c->next_attempt_ms = 0;
    return 0;
}

/* Makes sure a connection is up; returns its generation in *gen. */
int mc_rpcc_ensure_connected(struct mc_rpc_client *c, uint64_t deadline_ms, uint64_t *gen)
{
    rpcc_lock(c);
    check_idle_locked(c, true);
    bool up = c->up;
    *gen = c->gen;
    rpcc_unlock(c);
    if (up)
        return 0;
    rpcc_connect_lock(c);
    int rc = 0;
    rpcc_lock(c);
    up = c->up;
    *gen = c->gen;
    rpcc_unlock(c);
    if (up)
        goto out;
    uint64_t now = mc_now_ms();
    if (c->next_attempt_ms > now) {
        if (c->next_attempt_ms >= deadline_ms) {
            rc = MC_ERR_RPC_FAIL; /* in back-off and no time to wait for the next attempt */
            goto out;
        }
        uint64_t ms = c->next_attempt_ms - now;
        struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                              .tv_nsec = (long)(ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    rc = reconnect_serialized(c);
    rpcc_lock(c);
    *gen = c->gen;
    rpcc_unlock(c);
out:
    rpcc_connect_unlock(c);
    return rc;
}

int mc_rpc_client_new(const struct mc_rpc_client_config *cfg, struct mc_rpc_client **out)
{
    *out = NULL;
    if (!cfg || !cfg->host || !*cfg->host || cfg->port == 0)
        return MC_ERR_INVALID_PARAMS;
    struct mc_rpc_client *c = calloc(1, sizeof(*c));
    if (!c)
        return MC_ERR_INTERNAL_ERROR;
    c->cfg = *cfg;
    if (cfg->auth && cfg->auth->set)
        c->auth = *cfg->auth;
    c->cfg.auth = NULL; /* copied into c->auth */
    c->cfg.host = strdup(cfg->host);
    if (!c->cfg.host) {
        free(c);
        return MC_ERR_INTERNAL_ERROR;
    }
    if (!c->cfg.connect_timeout_ms)
        c->cfg.connect_timeout_ms = 3000;
    if (!c->cfg.call_timeout_ms)
        c->cfg.call_timeout_ms = 10000;
    if (!c->cfg.reconnect_min_ms)
        c->cfg.reconnect_min_ms = 20;
    if (!c->cfg.reconnect_max_ms)
        c->cfg.reconnect_max_ms = 2000;
    if (c->cfg.reconnect_max_ms < c->cfg.reconnect_min_ms)
        c->cfg.reconnect_max_ms = c->cfg.reconnect_min_ms;
    if (!c->cfg.max_frame_bytes)
        c->cfg.max_frame_bytes = MC_WIRE_DEFAULT_MAX_FRAME_BYTES;
    snprintf(c->name, sizeof(c->name), "%s", cfg->name && *cfg->name ? cfg->name : "rpc");
    c->cfg.name = c->name;
    c->fd = -1;
    c->next_id = 1;
    static _Atomic uint32_t next_lo_idx;
    c->lo_idx = atomic_fetch_add(&next_lo_idx, 1);
    c->rx.buf = malloc(RBUF_SIZE);
    if (!c->rx.buf) {
        free((void *)c->cfg.host);
        free(c);
        return MC_ERR_INTERNAL_ERROR;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->connect_lock, NULL);
    *out = c;
    return 0;
}

int mc_rpc_client_connect(struct mc_rpc_client *c)
{
    rpcc_connect_lock(c);
    rpcc_lock(c);
    bool up = c->up;
    rpcc_unlock(c);
    int rc = up ? 0 : reconnect_serialized(c);
    rpcc_connect_unlock(c);
    return rc;
}

void mc_rpc_client_disconnect(struct mc_rpc_client *c)
{
    rpcc_lock(c);
    if (c->up && c->fd >= 0) {
        atomic_store(&c->shut_local, true);
        shutdown(c->fd, SHUT_RDWR);
    }
    rpcc_unlock(c);
}

int mc_rpc_client_connected(struct mc_rpc_client *c)
{
    rpcc_lock(c);
    check_idle_locked(c, false);
    int up = c->up;
    rpcc_unlock(c);
    return up;
}

uint64_t mc_rpc_client_generation(struct mc_rpc_client *c)
{
    rpcc_lock(c);
    uint64_t g = c->gen;
    rpcc_unlock(c);
    return g;
}

void mc_rpc_client_free(struct mc_rpc_client *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        mc_tls_sock_close(c->fd);
    free(c->rx.body);
    free(c->rx.buf);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->connect_lock);
    free((void *)c->cfg.host);
    free(c);
}
