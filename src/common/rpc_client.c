/*
 * rpc_client.c - see rpc_client.h for the design.
 *
 * Leader/follower receive. There is no receiver thread: the callers read the socket themselves.
 * At most one caller at a time holds the read token (`reading`, under `lock`) of the current
 * connection; it is the leader. The leader reads frames into a shared 64 KiB buffer (`rx`),
 * hands every reply to its call (waking that caller) and keeps reading until its own reply is
 * in or its own deadline passes; then it passes the token to a waiting follower. A lone caller
 * (the common case) thus sends, polls and reads its own reply without any thread hand-off; with
 * several callers in flight each reply costs at most one wake-up (leader -> its caller).
 *
 * The read state lives in `rx`, not on a stack, so a leader may leave at any point (even in the
 * middle of a large body) and the next leader continues where it stopped. A large body is read
 * straight into its destination: a peer payload into the caller's buffer (that entry is marked
 * `receiving` meanwhile and its caller never leaves while it is), an ordinary body into a
 * malloc'd buffer. A leader whose deadline passes while its own payload is being received
 * switches the rest of that frame to "discard" (the stream stays in sync) and returns
 * RPC_TIMEOUT. A follower whose deadline passes while a leader fills its buffer cuts the
 * connection (the stream position is then lost) and returns only once the buffer is let go.
 *
 * Liveness without a receiver: a caller that finds no leader first peeks at the idle socket
 * (MSG_PEEK | MSG_DONTWAIT); a connection the server closed is then replaced before the request
 * is sent, as the receiver thread used to notice it.
 *
 * Locks: `lock` guards the connection state (up, gen, fd number, reading), the pending table,
 * the waiter list and every pending entry; the `rx` state belongs to the token holder (the token
 * is taken and released under `lock`, which orders the hand-over). `send_lock` serializes frame
 * writes and is what the reconnect path takes before closing an old socket, so no sender ever
 * writes to a recycled descriptor; no reader can hold the token of a connection that is down,
 * so closing it never pulls the socket from under a reader. `connect_lock` serializes
 * (re)connects. Order: connect_lock -> send_lock -> lock. A pending entry lives on its caller's
 * stack.
 */
#include "common/rpc_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define NBUCKETS 256
#define MAX_SEND_IOV 64
#define RBUF_SIZE (64u << 10)

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
    uint8_t *dst;            /* where the next bytes go; NULL = discard */
    size_t left;
};

struct mc_rpc_client {
    struct mc_rpc_client_config cfg;
    char name[32];
    pthread_mutex_t lock, send_lock, connect_lock;
    int fd;
    bool up;
    bool reading; /* the read token of connection `gen` is held */
    uint64_t gen;
    uint64_t next_id;
    uint32_t backoff_ms;
    uint64_t next_attempt_ms;
    struct pending *buckets[NBUCKETS];
    struct pending *waiters;
    struct rx rx;
};

/* ---- config ------------------------------------------------------------------------------ */

void mc_rpc_client_config_init(struct mc_rpc_client_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->connect_timeout_ms = 3000;
    cfg->call_timeout_ms = 10000;
    cfg->reconnect_min_ms = 20;
    cfg->reconnect_max_ms = 2000;
    cfg->max_frame_bytes = MC_WIRE_DEFAULT_MAX_FRAME_BYTES;
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

/* ---- pending table (under lock) ---------------------------------------------------------- */

static struct pending **bucket(struct mc_rpc_client *c, uint64_t id)
{
    return &c->buckets[id & (NBUCKETS - 1)];
}

static struct pending *pending_find(struct mc_rpc_client *c, uint64_t id)
{
    for (struct pending *p = *bucket(c, id); p; p = p->next)
        if (p->id == id)
            return p;
    return NULL;
}

static void pending_remove(struct mc_rpc_client *c, struct pending *p)
{
    for (struct pending **pp = bucket(c, p->id); *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
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
                p->status = MC_ERR_RPC_FAIL;
                p->done = true;
                pthread_cond_signal(&p->cv);
            } else {
                pp = &p->next;
            }
        }
    }
}

static void waiter_add(struct mc_rpc_client *c, struct pending *p)
{
    p->waiting = true;
    p->wprev = NULL;
    p->wnext = c->waiters;
    if (c->waiters)
        c->waiters->wprev = p;
    c->waiters = p;
}

static void waiter_remove(struct mc_rpc_client *c, struct pending *p)
{
    if (!p->waiting)
        return;
    if (p->wprev)
        p->wprev->wnext = p->wnext;
    else
        c->waiters = p->wnext;
    if (p->wnext)
        p->wnext->wprev = p->wprev;
    p->waiting = false;
}

/* Under lock, after the token was released: wakes one waiter that still needs an answer so it
 * can take the token (every not-done entry is either leading, waiting or about to check). */
static void wake_successor(struct mc_rpc_client *c)
{
    for (struct pending *p = c->waiters; p; p = p->wnext)
        if (!p->done) {
            pthread_cond_signal(&p->cv);
            return;
        }
}

/* Under lock: completes p (already out of the table) and wakes its caller. */
static void finish(struct pending *p, int status)
{
    p->status = status;
    p->done = true;
    pthread_cond_signal(&p->cv);
}

/* ---- socket helpers ---------------------------------------------------------------------- */

/* Sends all iovecs (modifies the array). */
static int send_iov(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov,
                            .msg_iovlen = (size_t)(n > MAX_SEND_IOV ? MAX_SEND_IOV : n)};
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

static int connect_fd(struct mc_rpc_client *c, int *out)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", c->cfg.port);
    int rc = getaddrinfo(c->cfg.host, port, &hints, &ai);
    if (rc != 0 || !ai) {
        mc_warn(c->name, "cannot resolve server", "host=%s err=\"%s\"", c->cfg.host,
                gai_strerror(rc));
        return MC_ERR_RPC_FAIL;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        return MC_ERR_RPC_FAIL;
    }
    int ret = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            ret = MC_ERR_RPC_FAIL;
            goto out;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int pr;
        do {
            pr = poll(&pfd, 1, (int)c->cfg.connect_timeout_ms);
        } while (pr < 0 && errno == EINTR);
        if (pr == 0) {
            ret = MC_ERR_RPC_TIMEOUT;
            goto out;
        }
        int err = 0;
        socklen_t el = sizeof(err);
        if (pr < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
            ret = MC_ERR_RPC_FAIL;
            goto out;
        }
    }
    /* blocking from here on; sends give up after the call timeout */
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        ret = MC_ERR_RPC_FAIL;
        goto out;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct timeval tv = {.tv_sec = c->cfg.call_timeout_ms / 1000,
                         .tv_usec = (c->cfg.call_timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
out:
    freeaddrinfo(ai);
    if (ret) {
        close(fd);
        return ret;
    }
    *out = fd;
    return 0;
}

/* ---- receive (token holder only, unless noted) ------------------------------------------- */

static void rx_reset(struct rx *rx)
{
    free(rx->body);
    rx->body = NULL;
    rx->pos = rx->len = 0;
    rx->big = rx->big_peer = false;
    rx->target = NULL;
    rx->dst = NULL;
    rx->left = 0;
}

/* Under lock (token holder, or nobody holds the token): connection `gen` is dead. Fails every
 * call of it, the receiving one included, and resets the read state. */
static void conn_broken_locked(struct mc_rpc_client *c, uint64_t gen, const char *why)
{
    if (c->gen != gen)
        return;
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
}

/* Starts reading the rest (`left` bytes, some of the frame being already consumed) to dst. */
static void rx_big(struct rx *rx, bool peer, struct pending *target, uint8_t *dst, size_t left)
{
    rx->big = true;
    rx->big_peer = peer;
    rx->target = target;
    rx->dst = dst;
    rx->left = left;
}

/* Consumes `len` body bytes: what is buffered now, the rest as a discarded big read. */
static void rx_discard(struct rx *rx, size_t len)
{
    size_t have = rx->len - rx->pos;
    size_t n = len < have ? len : have;
    rx->pos += n;
    if (len > n) {
        free(rx->body);
        rx->body = NULL;
        rx_big(rx, false, NULL, NULL, len - n);
        rx->h.request_id = 0; /* never matches: ids start at 1 */
    }
}

/* The big read is complete: deliver its frame. */
static void rx_big_done(struct mc_rpc_client *c)
{
    struct rx *rx = &c->rx;
    pthread_mutex_lock(&c->lock);
    if (rx->big_peer) {
        struct pending *t = rx->target;
        if (t) {
            t->receiving = false;
            pending_remove(c, t);
            finish(t, 0);
        }
    } else if (rx->h.request_id) {
        struct pending *p = pending_find(c, rx->h.request_id);
        if (p) {
            pending_remove(c, p);
            if (rx->h.status == 0 && !p->peer) {
                p->resp = rx->body;
                p->resp_len = rx->h.body_length;
                rx->body = NULL;
            }
            finish(p, rx->h.status);
        }
    }
    pthread_mutex_unlock(&c->lock);
    free(rx->body);
    rx->body = NULL;
    rx->big = false;
    rx->target = NULL;
    rx->dst = NULL;
}

/* Fails the call with this id, if it is still waiting. */
static void fail_id(struct mc_rpc_client *c, uint64_t id, int status)
{
    pthread_mutex_lock(&c->lock);
    struct pending *p = pending_find(c, id);
    if (p) {
        pending_remove(c, p);
        finish(p, status);
    }
    pthread_mutex_unlock(&c->lock);
}

enum { RX_MORE = 0, RX_BROKEN = -1 };

/*
 * Handles the frames in the buffer. Returns RX_MORE when it needs more bytes (or a big read
 * started), RX_BROKEN on a protocol error (*why set). Once `me` is done it only finishes frames
 * that are entirely buffered (no reading on behalf of others after our own reply).
 */
static int rx_parse(struct mc_rpc_client *c, struct pending *me, const char **why)
{
    struct rx *rx = &c->rx;
    while (!rx->big) {
        size_t avail = rx->len - rx->pos;
        if (avail < MC_WIRE_HEADER_SIZE)
            return RX_MORE;
        const uint8_t *f = rx->buf + rx->pos;
        struct mc_wire_header h;
        mc_wire_decode_header(f, &h);
        enum mc_wire_check chk = mc_wire_validate(&h, c->cfg.max_frame_bytes);
        if (chk == MC_WIRE_OK && h.kind != MC_WIRE_RESPONSE)
            chk = MC_WIRE_BAD_KIND;
        if (chk != MC_WIRE_OK) {
            mc_warn(c->name, "bad response frame, closing", "reason=%s len=%u",
                    mc_wire_check_name(chk), h.body_length);
            *why = "protocol error";
            return RX_BROKEN;
        }
        size_t blen = h.body_length;
        bool whole = avail >= MC_WIRE_HEADER_SIZE + blen;
        if (me->done && !whole)
            return RX_MORE;
        pthread_mutex_lock(&c->lock);
        struct pending *p = pending_find(c, h.request_id);
        bool direct = p && p->peer && h.status == 0 && blen > 0;
        pthread_mutex_unlock(&c->lock);
        if (!direct) {
            /* ordinary body (or a peer error / empty reply): read it, then hand it over */
            if (!whole && MC_WIRE_HEADER_SIZE + blen <= RBUF_SIZE)
                return RX_MORE;
            uint8_t *body = NULL;
            if (blen) {
                body = malloc(blen);
                if (!body) {
                    *why = "out of memory";
                    return RX_BROKEN;
                }
            }
            size_t have = avail - MC_WIRE_HEADER_SIZE < blen ? avail - MC_WIRE_HEADER_SIZE : blen;
            if (have)
                memcpy(body, f + MC_WIRE_HEADER_SIZE, have);
            rx->pos += MC_WIRE_HEADER_SIZE + have;
            rx->h = h;
            rx->body = body;
            if (have < blen) {
                rx_big(rx, false, NULL, body + have, blen - have);
                return RX_MORE;
            }
            rx->big_peer = false;
            rx_big_done(c);
            continue;
        }
        /* a peer reply: prefix and control from the buffer, payload straight to recv_buf */
        if (blen < MC_WIRE_PEER_PREFIX) {
            rx->pos += MC_WIRE_HEADER_SIZE;
            fail_id(c, h.request_id, MC_ERR_DESERIALIZE_FAIL);
            rx_discard(rx, blen);
            continue;
        }
        if (avail < MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX)
            return RX_MORE;
        size_t clen = mc_wire_get_u32(f + MC_WIRE_HEADER_SIZE);
        size_t rest = blen - MC_WIRE_PEER_PREFIX;
        size_t lead = MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX;
        if (clen > rest || lead + clen > RBUF_SIZE) {
            mc_warn(c->name, "bad peer reply", "control_length=%zu body=%zu", clen, blen);
            rx->pos += lead;
            fail_id(c, h.request_id, MC_ERR_DESERIALIZE_FAIL);
            rx_discard(rx, rest);
            continue;
        }
        if (avail < lead + clen)
            return RX_MORE;
        size_t plen = rest - clen;
        uint8_t *ctl = NULL;
        if (clen && !(ctl = malloc(clen))) {
            *why = "out of memory";
            return RX_BROKEN;
        }
        if (clen)
            memcpy(ctl, f + lead, clen);
        rx->pos += lead + clen;
        pthread_mutex_lock(&c->lock);
        p = pending_find(c, h.request_id); /* it may have timed out meanwhile */
        if (p && (plen > p->recv_cap || (plen && !p->recv_buf))) {
            pending_remove(c, p);
            finish(p, MC_ERR_BUFFER_OVERFLOW);
            p = NULL;
        } else if (p) {
            p->resp = ctl;
            p->resp_len = clen;
            ctl = NULL;
            p->recv_len = plen;
            p->receiving = true;
        }
        pthread_mutex_unlock(&c->lock);
        free(ctl);
        if (!p) {
            rx_discard(rx, plen);
            continue;
        }
        size_t have = rx->len - rx->pos < plen ? rx->len - rx->pos : plen;
        if (have)
            memcpy(p->recv_buf, rx->buf + rx->pos, have);
        rx->pos += have;
        rx_big(rx, true, p, (uint8_t *)p->recv_buf + have, plen - have);
        if (rx->left)
            return RX_MORE;
        rx_big_done(c);
    }
    return RX_MORE;
}

/* Token holder, own deadline passed: leave with RPC_TIMEOUT. A payload still arriving for us
 * is discarded from now on (the stream stays usable). */
static void lead_timeout_locked(struct mc_rpc_client *c, struct pending *me)
{
    struct rx *rx = &c->rx;
    if (rx->big && rx->big_peer && rx->target == me) {
        me->receiving = false;
        rx->target = NULL;
        rx->dst = NULL;
        free(me->resp);
        me->resp = NULL;
        me->resp_len = 0;
    }
    if (!me->done) {
        pending_remove(c, me);
        me->status = MC_ERR_RPC_TIMEOUT;
        me->done = true;
    }
}

/*
 * The leader: holds the token of connection gen (socket fd), reads and dispatches replies until
 * me is done or its deadline passes, then releases the token (waking a successor).
 */
static void lead(struct mc_rpc_client *c, struct pending *me, int fd, uint64_t gen,
                 uint64_t deadline_ms)
{
    struct rx *rx = &c->rx;
    const char *why = "closed by server";
    bool poll_first = true;
    for (;;) {
        if (!rx->big && rx_parse(c, me, &why) == RX_BROKEN)
            goto broken;
        if (me->done)
            break;
        /* need bytes: wait for them (until our deadline), then read */
        if (poll_first) {
            uint64_t now = mc_now_ms();
            if (now >= deadline_ms) {
                pthread_mutex_lock(&c->lock);
                lead_timeout_locked(c, me);
                pthread_mutex_unlock(&c->lock);
                break;
            }
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int pr = poll(&pfd, 1, (int)(deadline_ms - now));
            if (pr < 0 && errno != EINTR) {
                why = "poll failed";
                goto broken;
            }
            if (pr <= 0)
                continue; /* timeout (checked above) or EINTR */
        }
        uint8_t scratch[16384];
        uint8_t *to;
        size_t want;
        if (rx->big) {
            to = rx->dst ? rx->dst : scratch;
            want = rx->dst ? rx->left : (rx->left < sizeof(scratch) ? rx->left : sizeof(scratch));
        } else {
            if (rx->pos == rx->len) {
                rx->pos = rx->len = 0;
            } else if (rx->pos > 0) {
                memmove(rx->buf, rx->buf + rx->pos, rx->len - rx->pos);
                rx->len -= rx->pos;
                rx->pos = 0;
            }
            to = rx->buf + rx->len;
            want = RBUF_SIZE - rx->len;
        }
        ssize_t n = recv(fd, to, want, MSG_DONTWAIT);
        if (n == 0)
            goto broken;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                poll_first = true;
                continue;
            }
            why = "read failed";
            goto broken;
        }
        poll_first = (size_t)n < want; /* the socket is drained: wait before the next read */
        if (rx->big) {
            if (rx->dst)
                rx->dst += n;
            rx->left -= (size_t)n;
            if (rx->left == 0)
                rx_big_done(c);
        } else {
            rx->len += (size_t)n;
        }
    }
    pthread_mutex_lock(&c->lock);
    c->reading = false;
    wake_successor(c);
    pthread_mutex_unlock(&c->lock);
    return;
broken:
    pthread_mutex_lock(&c->lock);
    c->reading = false;
    conn_broken_locked(c, gen, why);
    wake_successor(c);
    pthread_mutex_unlock(&c->lock);
}

/* ---- connection management --------------------------------------------------------------- */

/* Under lock, nobody leading: whether the idle connection was closed by the server (or broke).
 * Marks it down if so. Unread bytes (a late reply) mean it is alive. */
static void check_idle_locked(struct mc_rpc_client *c)
{
    if (!c->up || c->reading || c->fd < 0)
        return;
    uint8_t b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        conn_broken_locked(c, c->gen, n == 0 ? "closed by server" : "socket error");
}

/* Under connect_lock. Closes a dead connection and opens a new one. */
static int reconnect_locked(struct mc_rpc_client *c)
{
    pthread_mutex_lock(&c->send_lock);
    pthread_mutex_lock(&c->lock);
    int old = c->fd;
    if (c->up)
        conn_broken_locked(c, c->gen, "reconnect");
    c->fd = -1;
    pthread_mutex_unlock(&c->lock);
    if (old >= 0)
        close(old); /* down: no reader holds it; send_lock: no sender uses it */
    pthread_mutex_unlock(&c->send_lock);

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
    pthread_mutex_lock(&c->lock);
    c->fd = fd;
    c->gen++;
    c->up = true;
    rx_reset(&c->rx);
    pthread_mutex_unlock(&c->lock);
    c->backoff_ms = 0;
    c->next_attempt_ms = 0;
    return 0;
}

/* Makes sure a connection is up; returns its generation in *gen. */
static int ensure_connected(struct mc_rpc_client *c, uint64_t deadline_ms, uint64_t *gen)
{
    pthread_mutex_lock(&c->lock);
    check_idle_locked(c);
    bool up = c->up;
    *gen = c->gen;
    pthread_mutex_unlock(&c->lock);
    if (up)
        return 0;
    pthread_mutex_lock(&c->connect_lock);
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    up = c->up;
    *gen = c->gen;
    pthread_mutex_unlock(&c->lock);
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
    rc = reconnect_locked(c);
    pthread_mutex_lock(&c->lock);
    *gen = c->gen;
    pthread_mutex_unlock(&c->lock);
out:
    pthread_mutex_unlock(&c->connect_lock);
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
    pthread_mutex_lock(&c->connect_lock);
    pthread_mutex_lock(&c->lock);
    bool up = c->up;
    pthread_mutex_unlock(&c->lock);
    int rc = up ? 0 : reconnect_locked(c);
    pthread_mutex_unlock(&c->connect_lock);
    return rc;
}

void mc_rpc_client_disconnect(struct mc_rpc_client *c)
{
    pthread_mutex_lock(&c->lock);
    if (c->up && c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&c->lock);
}

int mc_rpc_client_connected(struct mc_rpc_client *c)
{
    pthread_mutex_lock(&c->lock);
    check_idle_locked(c);
    int up = c->up;
    pthread_mutex_unlock(&c->lock);
    return up;
}

void mc_rpc_client_free(struct mc_rpc_client *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->rx.body);
    free(c->rx.buf);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->connect_lock);
    free((void *)c->cfg.host);
    free(c);
}

/* ---- calls ------------------------------------------------------------------------------- */

/*
 * The one call path. iov[0] must be left free for the header; iov[1..n) is the body.
 * On return p holds the result (p->status) and any response bytes.
 */
static void do_call(struct mc_rpc_client *c, uint16_t method, struct iovec *iov, int niov,
                    uint32_t server_wait_ms, struct pending *p)
{
    uint64_t start = mc_now_ms();
    uint64_t deadline = start + c->cfg.call_timeout_ms + server_wait_ms;
    uint64_t body_len = 0;
    for (int i = 1; i < niov; i++)
        body_len += iov[i].iov_len;
    if (body_len > UINT32_MAX) {
        p->status = MC_ERR_INVALID_PARAMS;
        return;
    }
    uint64_t gen = 0;
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        rc = ensure_connected(c, deadline, &gen);
        if (rc) {
            p->status = rc == MC_ERR_RPC_TIMEOUT ? MC_ERR_RPC_TIMEOUT : MC_ERR_RPC_FAIL;
            return;
        }
        pthread_mutex_lock(&c->lock);
        if (c->up && c->gen == gen)
            break; /* keep the lock: register below */
        pthread_mutex_unlock(&c->lock);
        if (attempt >= 1) {
            p->status = MC_ERR_RPC_FAIL;
            return;
        }
    }
    p->id = c->next_id++;
    p->gen = gen;
    struct pending **b = bucket(c, p->id);
    p->next = *b;
    *b = p;
    int fd = c->fd;
    pthread_mutex_unlock(&c->lock);

    uint8_t hb[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, p->id, 0, (uint32_t)body_len);
    mc_wire_encode_header(&h, hb);
    iov[0].iov_base = hb;
    iov[0].iov_len = sizeof(hb);
    pthread_mutex_lock(&c->send_lock);
    pthread_mutex_lock(&c->lock);
    bool same = c->gen == gen && c->up; /* fd still ours: not closed while we hold send_lock */
    pthread_mutex_unlock(&c->lock);
    int sr = same ? send_iov(fd, iov, niov) : -1;
    if (sr && same) {
        mc_warn(c->name, "send failed, dropping connection", "method=%s errno=%d",
                mc_method_name(method) ? mc_method_name(method) : "?", errno);
        shutdown(fd, SHUT_RDWR); /* a partial frame poisons the stream */
    }
    pthread_mutex_unlock(&c->send_lock);

    /* wait: lead (read the socket ourselves) whenever nobody else does, else follow */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = mc_now_ms();
    uint64_t wait = deadline > now ? deadline - now : 0;
    ts.tv_sec += (time_t)(wait / 1000);
    ts.tv_nsec += (long)(wait % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    bool expired = false;
    pthread_mutex_lock(&c->lock);
    while (!p->done) {
        if (!c->up || c->gen != gen) {
            /* cannot happen (a dead connection fails its calls), but never wait on it */
            pending_remove(c, p);
            finish(p, MC_ERR_RPC_FAIL);
            break;
        }
        if (!c->reading) {
            c->reading = true;
            int rfd = c->fd;
            pthread_mutex_unlock(&c->lock);
            lead(c, p, rfd, gen, deadline);
            pthread_mutex_lock(&c->lock);
            continue;
        }
        if (expired || mc_now_ms() >= deadline) {
            expired = true;
            if (!p->receiving) {
                pending_remove(c, p);
                p->status = MC_ERR_RPC_TIMEOUT;
                p->done = true;
                mc_debug(c->name, "call timed out", "method=%s id=%llu",
                         mc_method_name(method) ? mc_method_name(method) : "?",
                         (unsigned long long)p->id);
                break;
            }
            /* the leader is writing into the caller's buffer: cut the stream, wait for it */
            if (!p->cut) {
                p->cut = true;
                shutdown(c->fd, SHUT_RDWR);
            }
            waiter_add(c, p);
            pthread_cond_wait(&p->cv, &c->lock);
            waiter_remove(c, p);
            continue;
        }
        waiter_add(c, p);
        int w = pthread_cond_timedwait(&p->cv, &c->lock, &ts);
        waiter_remove(c, p);
        if (w == ETIMEDOUT)
            expired = true;
    }
    if (p->cut && p->status == MC_ERR_RPC_FAIL)
        p->status = MC_ERR_RPC_TIMEOUT;
    pthread_mutex_unlock(&c->lock);
}

static void pending_init(struct pending *p)
{
    memset(p, 0, sizeof(*p));
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
}

int mc_rpc_client_call(struct mc_rpc_client *c, uint16_t method, const void *body, size_t len,
                       uint32_t server_wait_ms, void **resp, size_t *resp_len)
{
    struct pending p;
    pending_init(&p);
    struct iovec iov[2] = {{0}, {(void *)body, len}};
    do_call(c, method, iov, len ? 2 : 1, server_wait_ms, &p);
    pthread_cond_destroy(&p.cv);
    if (resp) {
        *resp = p.status == 0 ? p.resp : NULL;
        if (p.status == 0)
            p.resp = NULL;
    }
    if (resp_len)
        *resp_len = p.status == 0 ? p.resp_len : 0;
    free(p.resp);
    return p.status;
}

int mc_rpc_client_call_msg(struct mc_rpc_client *c, uint16_t method, const ProtobufCMessage *req,
                           const ProtobufCMessageDescriptor *resp_desc, uint32_t server_wait_ms,
                           ProtobufCMessage **resp)
{
    if (resp)
        *resp = NULL;
    size_t len = req ? protobuf_c_message_get_packed_size(req) : 0;
    uint8_t stackbuf[512];
    uint8_t *buf = len <= sizeof(stackbuf) ? stackbuf : malloc(len);
    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    if (len)
        protobuf_c_message_pack(req, buf);
    void *rb = NULL;
    size_t rl = 0;
    int rc = mc_rpc_client_call(c, method, buf, len, server_wait_ms, &rb, &rl);
    if (buf != stackbuf)
        free(buf);
    if (rc == 0 && resp_desc && resp) {
        *resp = protobuf_c_message_unpack(resp_desc, NULL, rl, rb);
        if (!*resp) {
            mc_warn(c->name, "undecodable response", "method=%s len=%zu",
                    mc_method_name(method) ? mc_method_name(method) : "?", rl);
            rc = MC_ERR_DESERIALIZE_FAIL;
        }
    }
    free(rb);
    return rc;
}

int mc_rpc_client_call_peer(struct mc_rpc_client *c, struct mc_rpc_peer_call *pc)
{
    pc->resp = NULL;
    pc->recv_len = 0;
    if (pc->npayload < 0 || (pc->npayload && !pc->payload))
        return MC_ERR_INVALID_PARAMS;
    size_t clen = pc->ctl ? protobuf_c_message_get_packed_size(pc->ctl) : 0;
    uint8_t stackbuf[512];
    size_t hlen = MC_WIRE_PEER_PREFIX + clen;
    uint8_t *buf = hlen <= sizeof(stackbuf) ? stackbuf : malloc(hlen);
    struct iovec small[8];
    int niov = 2 + pc->npayload;
    struct iovec *iov = niov <= 8 ? small : malloc((size_t)niov * sizeof(*iov));
    int rc = 0;
    if (!buf || !iov) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    mc_wire_put_u32(buf, (uint32_t)clen);
    if (clen)
        protobuf_c_message_pack(pc->ctl, buf + MC_WIRE_PEER_PREFIX);
    iov[1].iov_base = buf;
    iov[1].iov_len = hlen;
    for (int i = 0; i < pc->npayload; i++)
        iov[2 + i] = pc->payload[i];
    struct pending p;
    pending_init(&p);
    p.peer = true;
    p.recv_buf = pc->recv_buf;
    p.recv_cap = pc->recv_buf ? pc->recv_cap : 0;
    do_call(c, pc->method, iov, niov, pc->server_wait_ms, &p);
    pthread_cond_destroy(&p.cv);
    rc = p.status;
    if (rc == 0) {
        pc->recv_len = p.recv_len;
        if (pc->resp_desc) {
            pc->resp = protobuf_c_message_unpack(pc->resp_desc, NULL, p.resp_len, p.resp);
            if (!pc->resp)
                rc = MC_ERR_DESERIALIZE_FAIL;
        }
    }
    free(p.resp);
out:
    if (buf && buf != stackbuf)
        free(buf);
    if (iov && iov != small)
        free(iov);
    return rc;
}

int mc_rpc_check_version(struct mc_rpc_client *c, char *version, size_t len)
{
    Mc__ServiceReadyRequest req = MC__SERVICE_READY_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    int rc = mc_rpc_client_call_msg(c, MC_METHOD_SERVICE_READY, &req.base,
                                    &mc__service_ready_response__descriptor, 0, &m);
    if (rc)
        return rc;
    Mc__ServiceReadyResponse *r = (Mc__ServiceReadyResponse *)m;
    uint32_t proto = r->proto_version;
    if (!proto && mc_wire_parse_proto_version(r->version, &proto) != 0)
        proto = 0;
    if (version && len)
        snprintf(version, len, "%s", r->version ? r->version : "");
    if (proto != MC_PROTO_VERSION) {
        mc_error(c->name, "server speaks another protocol version", "server=\"%s\" ours=%u",
                 r->version ? r->version : "", (unsigned)MC_PROTO_VERSION);
        rc = MC_ERR_INVALID_VERSION;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}
