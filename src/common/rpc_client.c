/*
 * rpc_client.c - the RPC client's call path: sending a request, then leading (reading the
 * socket for everyone) or following until its reply is in. Connections (connect, reconnect with
 * back-off, liveness, breakage) are in rpc_client_conn.c; rpc_client_internal.h has the shared
 * state and its locks. See rpc_client.h for the design.
 *
 * Leader/follower receive. There is no receiver thread: the callers read the socket themselves.
 * At most one caller at a time holds the read token (`reading`, under `lock`) of the current
 * connection; it is the leader. The leader reads frames into a shared 64 KiB buffer (`rx`),
 * hands every reply to its call (waking that caller) and keeps reading until its own reply is
 * in or its own deadline passes; then it passes the token to a waiting follower. A lone caller
 * (the common case) thus sends and reads its own reply without any thread hand-off (on a plain
 * socket the read itself waits: recv_wait); with several callers in flight each reply costs at
 * most one wake-up (leader -> its caller).
 *
 * The read state lives in `rx`, not on a stack, so a leader may leave at any point (even in the
 * middle of a large body) and the next leader continues where it stopped. A large body is read
 * straight into its destination: a peer payload into the caller's buffer (that entry is marked
 * `receiving` meanwhile and its caller never leaves while it is), an ordinary body into a
 * malloc'd buffer sized by the bytes that arrived (RX_BODY_MIN at least) and doubled only once
 * they fill it (so it stays within twice what arrived): a header's claimed length is never
 * allocated ahead of its bytes, and a server that claims 60 MiB and sends little costs the
 * client little. A leader whose deadline passes while its own payload is being received
 * switches the rest of that frame to "discard" (the stream stays in sync) and returns
 * RPC_TIMEOUT. A follower whose deadline passes while a leader fills its buffer cuts the
 * connection (the stream position is then lost) and returns only once the buffer is let go.
 *
 * Liveness without a receiver: a caller that finds no leader first peeks at the idle socket
 * (MSG_PEEK | MSG_DONTWAIT); a connection the server closed is then replaced before the request
 * is sent, as the receiver thread used to notice it. The peek is skipped when the connection
 * delivered bytes within RPCC_FRESH_MS (back-to-back calls).
 */
#include "common/rpc_client.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/net.h"
#include "common/pb_budget.h"
#include "common/rpc_client_internal.h"
#include "common/tls.h"
#include "mooncake/errors.h"

/* ---- waiters (under lock) ---------------------------------------------------------------- */

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

/* ---- receive (token holder only, unless noted) ------------------------------------------- */

/* An ordinary body's first buffer; it doubles (up to the body's length) as bytes fill it. */
#define RX_BODY_MIN (64u << 10)

/* Before reading into an ordinary body: makes room for the next bytes when the buffer is full
 * (doubling, at most up to the body's length). false when out of memory. */
static bool rx_body_room(struct rx *rx)
{
    if (!rx->big || rx->big_peer || !rx->dst || !rx->body)
        return true;
    size_t got = (size_t)(rx->dst - rx->body);
    if (got < rx->body_cap)
        return true;
    size_t total = rx->h.body_length;
    size_t cap = rx->body_cap * 2 < total ? rx->body_cap * 2 : total;
    uint8_t *b = realloc(rx->body, cap);
    if (!b)
        return false;
    rx->body = b;
    rx->body_cap = cap;
    rx->dst = b + got;
    return true;
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
    rpcc_lock(c);
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
    } else if (rx->h.status != 0) {
        c->refused = rx->h.status; /* the server refused the connection (e.g. protected mode) */
    }
    rpcc_unlock(c);
    free(rx->body);
    rx->body = NULL;
    rx->big = false;
    rx->target = NULL;
    rx->dst = NULL;
}

/* Fails the call with this id, if it is still waiting. */
static void fail_id(struct mc_rpc_client *c, uint64_t id, int status)
{
    rpcc_lock(c);
    struct pending *p = pending_find(c, id);
    if (p) {
        pending_remove(c, p);
        finish(p, status);
    }
    rpcc_unlock(c);
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
        rpcc_lock(c);
        struct pending *p = pending_find(c, h.request_id);
        bool direct = p && p->peer && h.status == 0 && blen > 0;
        rpcc_unlock(c);
        if (!direct) {
            /* ordinary body (or a peer error / empty reply): read it, then hand it over */
            if (!whole && MC_WIRE_HEADER_SIZE + blen <= RBUF_SIZE)
                return RX_MORE;
            uint8_t *body = NULL;
            size_t have = avail - MC_WIRE_HEADER_SIZE < blen ? avail - MC_WIRE_HEADER_SIZE : blen;
            size_t cap = have > RX_BODY_MIN ? have : RX_BODY_MIN; /* not blen: see the top */
            if (cap > blen)
                cap = blen;
            if (blen) {
                body = malloc(cap);
                if (!body) {
                    *why = "out of memory";
                    return RX_BROKEN;
                }
            }
            if (have)
                memcpy(body, f + MC_WIRE_HEADER_SIZE, have);
            rx->pos += MC_WIRE_HEADER_SIZE + have;
            rx->h = h;
            rx->body = body;
            rx->body_cap = cap;
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
        rpcc_lock(c);
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
        rpcc_unlock(c);
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
    RPCC_ASSERT_LOCKED(c);
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

/* Callers of this process spinning now, and how many may (one core is left to the threads
 * whose replies they wait for: more spinners than that only take CPU from them). */
static _Atomic int g_spinners;
static _Atomic int g_max_spinners;

static int max_spinners(void)
{
    int n = atomic_load_explicit(&g_max_spinners, memory_order_relaxed);
    if (!n) {
        long p = sysconf(_SC_NPROCESSORS_ONLN);
        n = p > 2 ? (int)p - 1 : 1;
        atomic_store_explicit(&g_max_spinners, n, memory_order_relaxed);
    }
    return n;
}

/*
 * Token holder, plain socket, nothing buffered: waits for bytes (at most ms) and reads them in
 * the same syscall. First it spins on non-blocking reads for spin_us (when fewer callers of the
 * process spin than max_spinners), then one blocking recv bounded by SO_RCVTIMEO, which is set
 * only when the socket's is longer than the time left, or less than half of it (so calls with
 * the same timeout set it once per connection). A reply thus costs one recv, not a poll and a
 * recv. Returns recv's result; -1 with EAGAIN when the time ran out.
 */
static ssize_t recv_wait(struct mc_rpc_client *c, int fd, void *to, size_t want, uint64_t ms)
{
    struct rx *rx = &c->rx;
    if (c->cfg.spin_us) {
        bool spin = atomic_fetch_add(&g_spinners, 1) < max_spinners();
        ssize_t n = -1;
        int err = EAGAIN;
        if (spin) {
            uint64_t until = mc_now_ns() + (uint64_t)c->cfg.spin_us * 1000u;
            do {
                n = recv(fd, to, want, MSG_DONTWAIT);
                err = errno;
            } while (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) &&
                     mc_now_ns() < until);
        }
        atomic_fetch_sub(&g_spinners, 1);
        if (n >= 0 || (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)) {
            errno = err;
            return n;
        }
    }
    uint32_t r = ms > INT32_MAX ? INT32_MAX : ms ? (uint32_t)ms : 1;
    if (!rx->rcv_ms || rx->rcv_ms > r || rx->rcv_ms < r / 2) {
        struct timeval tv = {.tv_sec = (time_t)(r / 1000),
                             .tv_usec = (suseconds_t)(r % 1000) * 1000};
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
            /* cannot bound a blocking read: wait with poll, then read what is there */
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int pr = poll(&pfd, 1, (int)r);
            if (pr <= 0) {
                if (pr == 0)
                    errno = EAGAIN;
                return -1;
            }
            return recv(fd, to, want, MSG_DONTWAIT);
        }
        rx->rcv_ms = r;
    }
    return recv(fd, to, want, 0);
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
    const bool plain = !mc_tls_sock_is_tls(fd);
    bool poll_first = true;
    for (;;) {
        if (!rx->big && rx_parse(c, me, &why) == RX_BROKEN)
            goto broken;
        if (me->done)
            break;
        /* need bytes: wait for them (until our deadline), then read */
        uint64_t wait_ms = 0; /* plain socket: recv_wait waits this long, reading at once */
        if (poll_first && (plain || !mc_tls_sock_pending(fd))) {
            uint64_t now = mc_now_ms();
            if (now >= deadline_ms) {
                rpcc_lock(c);
                lead_timeout_locked(c, me);
                rpcc_unlock(c);
                break;
            }
            if (plain) {
                wait_ms = deadline_ms - now;
            } else {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                int pr = 0;
                if (c->cfg.spin_us) {
                    uint64_t until = mc_now_ns() + (uint64_t)c->cfg.spin_us * 1000u;
                    while ((pr = poll(&pfd, 1, 0)) == 0 && mc_now_ns() < until)
                        ;
                }
                if (pr == 0)
                    pr = poll(&pfd, 1, (int)(deadline_ms - now));
                if (pr < 0 && errno != EINTR) {
                    why = "poll failed";
                    goto broken;
                }
                if (pr <= 0)
                    continue; /* timeout (checked above) or EINTR */
            }
        }
        uint8_t scratch[16384];
        uint8_t *to;
        size_t want;
        if (rx->big) {
            if (!rx_body_room(rx)) {
                why = "out of memory";
                goto broken;
            }
            to = rx->dst ? rx->dst : scratch;
            want = rx->dst ? rx->left : (rx->left < sizeof(scratch) ? rx->left : sizeof(scratch));
            if (rx->dst && !rx->big_peer && rx->body) {
                size_t room = rx->body_cap - (size_t)(rx->dst - rx->body);
                want = want < room ? want : room;
            }
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
        ssize_t n = wait_ms ? recv_wait(c, fd, to, want, wait_ms)
                            : mc_tls_sock_recv(fd, to, want, MSG_DONTWAIT);
        if (n == 0)
            goto broken;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                poll_first = true;
                continue;
            }
            why = errno == EPROTO ? "TLS error" : "read failed"; /* common/tls.c logs why */
            goto broken;
        }
        c->last_rx_ms = mc_now_ms();
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
    rpcc_lock(c);
    c->reading = false;
    wake_successor(c);
    rpcc_unlock(c);
    return;
broken:
    rpcc_lock(c);
    c->reading = false;
    mc_rpcc_conn_broken_locked(c, gen, why);
    wake_successor(c);
    rpcc_unlock(c);
}

/* ---- fault injection (test builds) ------------------------------------------------------- */

#ifdef MC_TEST_HOOKS
#define TEST_DROP_SLOTS 8
static pthread_mutex_t test_drop_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint16_t method;
    int when; /* 0 = free */
} test_drop[TEST_DROP_SLOTS];
static uint64_t test_drops_fired;

void mc_rpc_test_drop_next(uint16_t method, enum mc_rpc_test_drop when)
{
    pthread_mutex_lock(&test_drop_lock);
    for (int i = 0; i < TEST_DROP_SLOTS; i++)
        if (!test_drop[i].when) {
            test_drop[i].method = method;
            test_drop[i].when = (int)when;
            break;
        }
    pthread_mutex_unlock(&test_drop_lock);
}

void mc_rpc_test_drop_reset(void)
{
    pthread_mutex_lock(&test_drop_lock);
    memset(test_drop, 0, sizeof(test_drop));
    pthread_mutex_unlock(&test_drop_lock);
}

uint64_t mc_rpc_test_drops_fired(void)
{
    pthread_mutex_lock(&test_drop_lock);
    uint64_t n = test_drops_fired;
    pthread_mutex_unlock(&test_drop_lock);
    return n;
}

int mc_rpc_test_drops_armed(uint16_t method)
{
    int n = 0;
    pthread_mutex_lock(&test_drop_lock);
    for (int i = 0; i < TEST_DROP_SLOTS; i++)
        n += test_drop[i].when && test_drop[i].method == method;
    pthread_mutex_unlock(&test_drop_lock);
    return n;
}

/* The drop armed for method (taking it), or 0. */
static int test_drop_take(uint16_t method)
{
    int when = 0;
    pthread_mutex_lock(&test_drop_lock);
    for (int i = 0; i < TEST_DROP_SLOTS && !when; i++)
        if (test_drop[i].when && test_drop[i].method == method) {
            when = test_drop[i].when;
            test_drop[i].when = 0;
            test_drops_fired++;
        }
    pthread_mutex_unlock(&test_drop_lock);
    return when;
}

int mc_rpc_test_send_iov(int fd, uint16_t method, struct iovec *iov, int n)
{
    int when = test_drop_take(method);
    if (when == MC_RPC_TEST_DROP_BEFORE_SEND || when == MC_RPC_TEST_DROP_SEND_FAILS) {
        mc_warn("rpc", "test hook: dropping the connection", "method=%s when=before_send",
                mc_method_name(method) ? mc_method_name(method) : "?");
        shutdown(fd, SHUT_RDWR);
        return -1;
    }
    int rc = mc_net_send_iov(fd, iov, n);
    if (rc || when != MC_RPC_TEST_DROP_AFTER_REPLY)
        return rc;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    (void)poll(&pfd, 1, 2000);
    mc_warn("rpc", "test hook: dropping the connection", "method=%s when=after_reply",
            mc_method_name(method) ? mc_method_name(method) : "?");
    shutdown(fd, SHUT_RDWR);
    return -1;
}

/* Breaks connection gen (fd) as a drop would: for AFTER_REPLY once p's reply is there (read
 * by another thread leading the connection, or waiting in the socket). Called without
 * send_lock: the wait (up to 2 s) must not hold up the other threads' sends, which a real drop
 * never does (a holder's delete ack would wait behind it). c->lock guards the fd: while gen is
 * current and up, fd is still this connection's. */
static void test_drop_apply(struct mc_rpc_client *c, int fd, uint64_t gen, int when,
                            uint16_t method, struct pending *p)
{
    uint64_t deadline = mc_now_ms() + 2000;
    while (when == MC_RPC_TEST_DROP_AFTER_REPLY && mc_now_ms() < deadline) {
        rpcc_lock(c);
        bool done = p->done || c->gen != gen || !c->up;
        rpcc_unlock(c);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (done || poll(&pfd, 1, 5) > 0)
            break;
    }
    mc_warn(c->name, "test hook: dropping the connection", "method=%s when=%s",
            mc_method_name(method) ? mc_method_name(method) : "?",
            when == MC_RPC_TEST_DROP_AFTER_REPLY ? "after_reply" : "before_send");
    rpcc_lock(c);
    if (c->gen == gen && c->up) {
        atomic_store(&c->shut_local, true);
        shutdown(fd, SHUT_RDWR);
        if (!c->reading)
            mc_rpcc_conn_broken_locked(c, gen, "test hook: connection dropped");
    }
    rpcc_unlock(c);
}
#endif

/* ---- calls ------------------------------------------------------------------------------- */

/* One attempt of do_call. */
static void call_once(struct mc_rpc_client *c, uint16_t method, struct iovec *iov, int niov,
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
    struct iovec small[8], *tx = niov <= 8 ? small : malloc((size_t)niov * sizeof(*tx));
    if (!tx) {
        p->status = MC_ERR_INTERNAL_ERROR;
        return;
    }
    uint64_t gen = 0;
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        rc = mc_rpcc_ensure_connected(c, deadline, &gen);
        if (rc) {
            bool keep = rc == MC_ERR_RPC_TIMEOUT || rc == MC_ERR_UNAUTHENTICATED ||
                        rc == MC_ERR_PROTECTED_MODE || rc == MC_ERR_TLS_REQUIRED;
            p->status = keep ? rc : MC_ERR_RPC_FAIL;
            goto out;
        }
        rpcc_lock(c);
        if (c->up && c->gen == gen)
            break; /* keep the lock: register below */
        rpcc_unlock(c);
        if (attempt >= 1) {
            p->status = MC_ERR_RPC_FAIL;
            goto out;
        }
    }
    p->id = c->next_id++;
    p->gen = gen;
    struct pending **b = bucket(c, p->id);
    p->next = *b;
    *b = p;
    int fd = c->fd;
    rpcc_unlock(c);

    uint8_t hb[MC_WIRE_HEADER_SIZE];
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST, method, p->id, 0, (uint32_t)body_len);
    mc_wire_encode_header(&h, hb);
    iov[0].iov_base = hb;
    iov[0].iov_len = sizeof(hb);
    int drop = 0;
#ifdef MC_TEST_HOOKS
    drop = test_drop_take(method);
#endif
    /* the send advances the entries it writes: it writes a copy, so that a call made again
     * sends the request whole */
    memcpy(tx, iov, (size_t)niov * sizeof(*tx));
    rpcc_send_lock(c);
    rpcc_lock(c);
    bool same = c->gen == gen && c->up; /* fd still ours: not closed while we hold send_lock */
    rpcc_unlock(c);
#ifdef MC_TEST_HOOKS
    if (same && drop == MC_RPC_TEST_DROP_SEND_FAILS) { /* shut as another call's cut does */
        atomic_store(&c->shut_local, true);
        shutdown(fd, SHUT_RDWR);
    }
#endif
    int sr = !same ? -1 : drop == 1 /* before send */ ? 0 : mc_net_send_iov(fd, tx, niov);
    /* a request whose send failed was never written whole (a partial frame is dropped with its
     * connection), so the server cannot have run it: do_call sends it again */
    p->not_sent = sr != 0;
    if (!sr && same && drop != 1) { /* its place in the stream, for mark_not_taken_locked */
        p->tx_len = sizeof(hb) + body_len;
        atomic_store(&p->tx_end, atomic_fetch_add(&c->tx_bytes, p->tx_len) + p->tx_len);
    }
    if (sr && same) {
        mc_warn(c->name, "send failed, dropping connection", "method=%s errno=%d",
                mc_method_name(method) ? mc_method_name(method) : "?", errno);
        atomic_store(&c->shut_local, true);
        shutdown(fd, SHUT_RDWR); /* a partial frame poisons the stream */
    }
    rpcc_send_unlock(c);
#ifdef MC_TEST_HOOKS
    if (drop && drop != MC_RPC_TEST_DROP_SEND_FAILS && same)
        test_drop_apply(c, fd, gen, drop, method, p);
#endif

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
    rpcc_lock(c);
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
            rpcc_unlock(c);
            lead(c, p, rfd, gen, deadline);
            rpcc_lock(c);
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
                atomic_store(&c->shut_local, true);
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
    rpcc_unlock(c);
    if (p->status == MC_ERR_TLS_REQUIRED ||
        ((p->status == MC_ERR_PROTECTED_MODE || p->status == MC_ERR_UNAUTHENTICATED) &&
         !c->auth.set))
        mc_error(c->name, "the server refused the connection", "server=%s:%u status=%s hint=\"%s\"",
                 c->cfg.host, c->cfg.port, mc_strerror(p->status), mc_auth_hint(p->status));
out:
    if (tx != small)
        free(tx);
}

/*
 * The one call path. iov[0] must be left free for the header; iov[1..n) is the body.
 * On return p holds the result (p->status) and any response bytes.
 *
 * A call sent on a connection the server had just closed (a restart: within RPCC_FRESH_MS of
 * the last reply no liveness peek is made before sending) fails with the break; when the
 * server's socket never took a byte of the request (not_taken, rpc_client_conn.c) the server
 * cannot have run it, and the call is made once more on a new connection. So is a call whose
 * send failed (not_sent: the connection shut locally, by another call's timeout or failed send,
 * or gone before the send): its frame never reached the server whole.
 */
static void do_call(struct mc_rpc_client *c, uint16_t method, struct iovec *iov, int niov,
                    uint32_t server_wait_ms, struct pending *p)
{
    call_once(c, method, iov, niov, server_wait_ms, p);
    if (p->status != MC_ERR_RPC_FAIL || !(p->not_taken || p->not_sent))
        return;
    mc_info(c->name,
            p->not_sent ? "request not sent on a broken connection, sending it again"
                        : "request not taken by a closed connection, sending it again",
            "server=%s:%u method=%s", c->cfg.host, c->cfg.port,
            mc_method_name(method) ? mc_method_name(method) : "?");
    free(p->resp);
    p->resp = NULL;
    p->resp_len = p->recv_len = 0;
    p->done = p->receiving = p->cut = p->not_taken = p->not_sent = false;
    p->status = 0;
    p->tx_len = 0;
    atomic_store(&p->tx_end, 0);
    call_once(c, method, iov, niov, server_wait_ms, p);
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

/* Decodes a reply as the servers decode requests (common/pb_budget.h): a server's reply is
 * untrusted input too, and protobuf-c spends 50-80 bytes per 2-byte element. Replies may list
 * more than a request batch (ListSegments of a large cluster), hence the wider element cap;
 * the memory budget stays about twice the body. NULL (logged) when refused. */
#define MC_RPC_REPLY_MAX_REPEATED 65536u
static ProtobufCMessage *decode_reply(struct mc_rpc_client *c, uint16_t method,
                                      const ProtobufCMessageDescriptor *desc, const void *data,
                                      size_t len)
{
    /* the element cap bounds a reply; the budget per element leaves room for the allocator's
     * rounding (one element sits at 120-136 bytes depending on the malloc in use) */
    const struct mc_pb_limits lim = {.max_repeated = MC_RPC_REPLY_MAX_REPEATED, .tag_bytes = 256};
    struct mc_pb_report rep;
    ProtobufCMessage *m = mc_pb_unpack_bounded(desc, data, len, &lim, &rep);
    if (!m)
        mc_warn(c->name, "undecodable response", "method=%s len=%zu verdict=%s field=%s count=%llu",
                mc_method_name(method) ? mc_method_name(method) : "?", len,
                mc_pb_verdict_name(rep.verdict), rep.field ? rep.field : "-",
                (unsigned long long)rep.count);
    return m;
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
        *resp = decode_reply(c, method, resp_desc, rb, rl);
        if (!*resp)
            rc = MC_ERR_DESERIALIZE_FAIL;
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
            pc->resp = decode_reply(c, pc->method, pc->resp_desc, p.resp, p.resp_len);
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

const char *mc_rpc_client_name(const struct mc_rpc_client *c)
{
    return c->name;
}
