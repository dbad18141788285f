/*
 * transport_tcp.c - the peer protocol over TCP (see transport.h for the contract).
 *
 * Connections. The transport keeps, per peer endpoint, a stack of idle connections (at most
 * max_idle_per_peer). A transfer takes one (or dials a new one), owns it exclusively for the
 * transfer and gives it back only when every reply was read cleanly; any error closes it, so a
 * pooled connection is always at a frame boundary. Sockets are blocking with SO_SNDTIMEO and
 * SO_RCVTIMEO set to io_timeout_ms, so a stalled peer fails the transfer instead of hanging it.
 *
 * The pool forgets. A connection idle for idle_timeout_ms, or older than max_conn_age_ms, is
 * closed (a prune pass runs at most once a second from the pool's calls, and from
 * mc_transport_tcp_prune, which the client's ping thread calls); an endpoint's entry goes when
 * it has had no use for idle_timeout_ms, and at once, with its idle connections, when dialing
 * it fails or a transfer to it fails on the wire: peers that are gone cost nothing.
 *
 * Pipelining. A transfer of len bytes is ceil(len / slice) requests with consecutive request
 * ids. The sender keeps up to `window` of them outstanding: it sends until the window is full,
 * then reads one reply and sends the next request. Replies are matched by id (any order is
 * accepted), a read reply's payload is received straight into the caller's buffer at the
 * slice's place. Requests of a read are tiny and a write's replies are tiny, so neither side
 * can block the other with full socket buffers.
 *
 * Checksum on the wire's time (mc_transport_tcp_write_crc). A Put needs the CRC32C of its value;
 * computed up front it is a serial pass over the bytes before the first one is sent (about a
 * third of a 4 MiB Put between processes). Instead, the writer extends the CRC over each slice
 * right after handing that slice to the socket, while the peer is still receiving and copying
 * it, so the checksum overlaps the transfer. Bytes are checksummed once, in order, even when a
 * stale pooled connection makes the transfer start over. A checked read
 * (mc_transport_tcp_read_crc) does the same on the other side: a slice's payload is received
 * in pieces of at most RECV_CRC_PIECE bytes and each piece is folded into the CRC right after
 * the kernel copied it, while it is still in cache and while the peer already sends the next
 * slices; the caller then compares one word instead of making a second pass over the value.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "client/transport.h"
#include "client/transport_tcp_internal.h"
#include "common/auth.h"
#include "common/tls.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/lock_order.h"
#include "common/log.h"
#include "common/mc_assert.h"
#include "common/net.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/peer.pb-c.h"

#define EP_MAX 128
#define MAX_SLICE (16u << 20)
#define RECV_CRC_PIECE (256u << 10) /* a quarter of this CPU's L2 */

#define PRUNE_EVERY_MS 1000

struct conn {
    int fd;
    uint64_t next_id;
    uint64_t born_ms; /* dialed */
    uint64_t idle_ms; /* put in the pool */
};

struct peer {
    char endpoint[EP_MAX];
    struct conn **idle;
    uint32_t nidle;
    uint64_t used_ms; /* last taken from or given to the pool */
    struct peer *next;
};

struct tcp_transport {
    struct mc_transport base;
    struct mc_tcp_transport_config cfg;
    struct mc_auth_key auth;
    pthread_mutex_t lock; /* through tcp_lock / tcp_unlock only */
    uint32_t lo_idx;      /* tells transports apart in the lock-order checker */
    struct peer *peers;
    uint64_t npeers, next_prune_ms;              /* under lock */
    uint64_t connects, reuses, retries, expired; /* under lock */
    _Atomic uint64_t slices;                     /* per slice: kept off the shared lock */
};

void mc_tcp_transport_config_init(struct mc_tcp_transport_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->connect_timeout_ms = 3000;
    cfg->io_timeout_ms = 5000;
    cfg->slice_bytes = 1u << 20;
    cfg->window = 8;
    cfg->max_idle_per_peer = 4;
    cfg->max_frame_bytes = MC_WIRE_DEFAULT_MAX_FRAME_BYTES;
    cfg->idle_timeout_ms = 30000;
    cfg->max_conn_age_ms = 600000;
}

/* t->lock: every take and drop goes through these, so a checking build knows which thread
 * holds it (common/lock_order.h); the functions that need it assert it (TCP_ASSERT_LOCKED). */
static void tcp_lock(struct tcp_transport *t)
{
    mc_lo_acquire(MC_LO_TCP_PEERS, t->lo_idx);
    pthread_mutex_lock(&t->lock);
}

static void tcp_unlock(struct tcp_transport *t)
{
    pthread_mutex_unlock(&t->lock);
    mc_lo_release(MC_LO_TCP_PEERS, t->lo_idx);
}

#define TCP_ASSERT_LOCKED(t) MC_ASSERT(mc_lo_holds(MC_LO_TCP_PEERS, (t)->lo_idx, false))

static uint64_t now_ms(const struct tcp_transport *t)
{
    return t->cfg.now_ms ? t->cfg.now_ms(t->cfg.now_arg) : mc_now_ms();
}

/* ---- connections -------------------------------------------------------------------------- */

static void conn_close(struct conn *c)
{
    if (c) {
        mc_tls_sock_close(c->fd);
        free(c);
    }
}

static int dial(struct tcp_transport *t, const char *endpoint, struct conn **out)
{
    char hostbuf[EP_MAX];
    struct mc_rpc_client_config hc;
    memset(&hc, 0, sizeof(hc));
    if (mc_rpc_parse_endpoint(endpoint, hostbuf, sizeof(hostbuf), &hc) != 0)
        return MC_ERR_INVALID_PARAMS;
    struct mc_net_connect_opts o = {.connect_timeout_ms = t->cfg.connect_timeout_ms,
                                    .send_timeout_ms = t->cfg.io_timeout_ms,
                                    .recv_timeout_ms = t->cfg.io_timeout_ms};
    int fd = -1;
    int nr = mc_net_connect(hc.host, hc.port, &o, &fd);
    if (nr != MC_NET_OK) {
        if (nr == MC_NET_ERESOLVE)
            mc_warn("tcp", "cannot resolve peer", "endpoint=%s", endpoint);
        else
            mc_debug("tcp", "cannot connect to peer", "endpoint=%s errno=%d", endpoint, errno);
        return MC_ERR_TRANSFER_FAIL;
    }
    int tr = t->cfg.tls
                 ? mc_tls_sock_connect(t->cfg.tls, fd, t->cfg.connect_timeout_ms, "tcp", endpoint)
                 : 0;
    if (tr) {
        close(fd);
        return tr == MC_ERR_UNAUTHENTICATED ? tr : MC_ERR_TRANSFER_FAIL;
    }
    if (t->auth.set) {
        int ar = mc_auth_client_handshake(fd, &t->auth, t->cfg.connect_timeout_ms, "tcp", endpoint);
        if (ar) {
            mc_tls_sock_close(fd);
            return ar == MC_ERR_UNAUTHENTICATED || ar == MC_ERR_PROTECTED_MODE
                       ? ar
                       : MC_ERR_TRANSFER_FAIL;
        }
    }
    struct conn *c = calloc(1, sizeof(*c));
    if (!c) {
        mc_tls_sock_close(fd);
        return MC_ERR_TRANSFER_FAIL;
    }
    c->fd = fd;
    c->next_id = 1;
    c->born_ms = now_ms(t);
    *out = c;
    tcp_lock(t);
    t->connects++;
    tcp_unlock(t);
    return 0;
}

/* Under lock. */
static struct peer *peer_find(struct tcp_transport *t, const char *endpoint, bool create)
{
    TCP_ASSERT_LOCKED(t);
    for (struct peer *p = t->peers; p; p = p->next)
        if (strcmp(p->endpoint, endpoint) == 0)
            return p;
    if (!create)
        return NULL;
    struct peer *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->idle = calloc(t->cfg.max_idle_per_peer, sizeof(*p->idle));
    if (!p->idle) {
        free(p);
        return NULL;
    }
    snprintf(p->endpoint, sizeof(p->endpoint), "%s", endpoint);
    p->next = t->peers;
    t->peers = p;
    t->npeers++;
    return p;
}

/* Under lock: unlinks *pp (closing its idle connections) and frees it. */
static void peer_drop(struct tcp_transport *t, struct peer **pp)
{
    TCP_ASSERT_LOCKED(t);
    struct peer *p = *pp;
    *pp = p->next;
    for (uint32_t i = 0; i < p->nidle; i++)
        conn_close(p->idle[i]);
    free(p->idle);
    free(p);
    t->npeers--;
}

static bool conn_expired(const struct tcp_transport *t, const struct conn *c, uint64_t now)
{
    return now - c->idle_ms >= t->cfg.idle_timeout_ms || now - c->born_ms >= t->cfg.max_conn_age_ms;
}

/* Under lock: closes expired idle connections, drops entries unused for the idle time. */
static void prune_locked(struct tcp_transport *t, uint64_t now)
{
    TCP_ASSERT_LOCKED(t);
    t->next_prune_ms = now + PRUNE_EVERY_MS;
    for (struct peer **pp = &t->peers; *pp;) {
        struct peer *p = *pp;
        uint32_t keep = 0;
        for (uint32_t i = 0; i < p->nidle; i++) {
            if (conn_expired(t, p->idle[i], now)) {
                conn_close(p->idle[i]);
                t->expired++;
            } else {
                p->idle[keep++] = p->idle[i];
            }
        }
        p->nidle = keep;
        if (!p->nidle && now - p->used_ms >= t->cfg.idle_timeout_ms)
            peer_drop(t, pp);
        else
            pp = &p->next;
    }
}

void mc_transport_tcp_prune(struct mc_transport *tp)
{
    struct tcp_transport *t = (struct tcp_transport *)tp;
    tcp_lock(t);
    prune_locked(t, now_ms(t));
    tcp_unlock(t);
}

/* The endpoint failed (no connection, or one broke mid-transfer): its pooled connections are
 * most likely dead too, and a peer that is gone must not keep an entry. */
static void peer_forget(struct tcp_transport *t, const char *endpoint)
{
    tcp_lock(t);
    for (struct peer **pp = &t->peers; *pp; pp = &(*pp)->next)
        if (strcmp((*pp)->endpoint, endpoint) == 0) {
            peer_drop(t, pp);
            break;
        }
    tcp_unlock(t);
}

static struct conn *pool_take(struct tcp_transport *t, const char *endpoint)
{
    struct conn *c = NULL;
    tcp_lock(t);
    uint64_t now = now_ms(t);
    if (now >= t->next_prune_ms)
        prune_locked(t, now);
    struct peer *p = peer_find(t, endpoint, false);
    if (p) {
        p->used_ms = now;
        while (!c && p->nidle) {
            c = p->idle[--p->nidle];
            if (conn_expired(t, c, now)) { /* between two prune passes */
                conn_close(c);
                t->expired++;
                c = NULL;
            }
        }
    }
    if (c)
        t->reuses++;
    tcp_unlock(t);
    return c;
}

static void pool_give(struct tcp_transport *t, const char *endpoint, struct conn *c)
{
    tcp_lock(t);
    uint64_t now = now_ms(t);
    if (now - c->born_ms >= t->cfg.max_conn_age_ms) {
        t->expired++; /* old enough: a fresh one next time */
    } else {
        struct peer *p = peer_find(t, endpoint, true);
        if (p)
            p->used_ms = now;
        if (p && p->nidle < t->cfg.max_idle_per_peer) {
            c->idle_ms = now;
            p->idle[p->nidle++] = c;
            c = NULL;
        }
    }
    tcp_unlock(t);
    conn_close(c);
}

/* ---- socket helpers ----------------------------------------------------------------------- */

/* len bytes into buf, asking for at most piece bytes per call; with crc, each call's bytes are
 * folded into *crc right after they arrived (still in cache). */
static int recv_into(int fd, void *buf, size_t len, size_t piece, uint32_t *crc)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t n = mc_tls_sock_recv(fd, p, len < piece ? len : piece, 0);
        if (n == 0)
            return -1;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (crc)
            *crc = mc_crc32c_extend(*crc, p, (size_t)n);
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len)
{
    return recv_into(fd, buf, len, SIZE_MAX, NULL);
}

static int discard(int fd, size_t len)
{
    uint8_t scratch[4096];
    while (len) {
        size_t n = len < sizeof(scratch) ? len : sizeof(scratch);
        if (recv_all(fd, scratch, n))
            return -1;
        len -= n;
    }
    return 0;
}

/* ---- one pipelined transfer --------------------------------------------------------------- */

struct xfer {
    bool is_write;
    struct mc_id seg;
    uint64_t epoch;
    uint64_t offset;
    uint8_t *buf;
    size_t len;
    size_t slice;
    size_t nslices;
    uint32_t *crc;   /* extend over the bytes as they are sent (write) or received (read);
                      * NULL = no CRC */
    size_t crc_done; /* bytes already in *crc */
};

static int send_request(struct tcp_transport *t, struct conn *c, const struct xfer *x, size_t i,
                        uint64_t id)
{
    size_t off = i * x->slice;
    size_t l = x->len - off < x->slice ? x->len - off : x->slice;
    Mc__Uuid u = MC__UUID__INIT;
    u.hi = x->seg.hi;
    u.lo = x->seg.lo;
    uint8_t hdr[MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + 96];
    size_t clen;
    uint8_t *ctl = hdr + MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX;
    if (x->is_write) {
        Mc__PeerWriteRequest r = MC__PEER_WRITE_REQUEST__INIT;
        r.segment_id = &u;
        r.offset = x->offset + off;
        r.length = l;
        r.mount_epoch = x->epoch;
        clen = mc__peer_write_request__pack(&r, ctl);
    } else {
        Mc__PeerReadRequest r = MC__PEER_READ_REQUEST__INIT;
        r.segment_id = &u;
        r.offset = x->offset + off;
        r.length = l;
        r.mount_epoch = x->epoch;
        clen = mc__peer_read_request__pack(&r, ctl);
    }
    size_t body = MC_WIRE_PEER_PREFIX + clen + (x->is_write ? l : 0);
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_REQUEST,
                        x->is_write ? MC_METHOD_PEER_WRITE : MC_METHOD_PEER_READ, id, 0,
                        (uint32_t)body);
    mc_wire_encode_header(&h, hdr);
    mc_wire_put_u32(hdr + MC_WIRE_HEADER_SIZE, (uint32_t)clen);
    struct iovec iov[2] = {{hdr, MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + clen},
                           {x->buf + off, l}};
    atomic_fetch_add_explicit(&t->slices, 1, memory_order_relaxed);
    return SEND_IOV(c->fd, h.method, iov, x->is_write && l ? 2 : 1) ? MC_ERR_TRANSFER_FAIL : 0;
}

/* A read's payload of slice bytes at off: received into x->buf, and folded into the CRC piece
 * by piece as it arrives when it is the next range the CRC needs (else a later catch-up
 * folds it in order: crc_catch_up). */
static int recv_payload(int fd, struct xfer *x, size_t off, size_t len)
{
    if (!x->crc || off != x->crc_done)
        return recv_all(fd, x->buf + off, len);
    if (recv_into(fd, x->buf + off, len, RECV_CRC_PIECE, x->crc))
        return -1; /* the transfer fails: a retry starts the CRC over */
    x->crc_done += len;
    return 0;
}

/* A read's CRC carried over the slices that are complete and next in order (replies may come
 * in any order; a slice answered ahead of its turn is folded in once its turn comes). */
static void crc_catch_up(struct xfer *x, const bool *done)
{
    while (x->crc && x->crc_done < x->len && done[x->crc_done / x->slice]) {
        size_t i = x->crc_done / x->slice;
        size_t end = (i + 1) * x->slice < x->len ? (i + 1) * x->slice : x->len;
        *x->crc = mc_crc32c_extend(*x->crc, x->buf + x->crc_done, end - x->crc_done);
        x->crc_done = end;
    }
}

/* Reads one reply (it must answer a request sent and not yet answered); marks its slice done.
 * Returns 0, a peer status, or TRANSFER_FAIL. */
static int recv_reply(struct tcp_transport *t, struct conn *c, struct xfer *x, uint64_t base_id,
                      size_t sent, bool *done, bool *any)
{
    uint8_t hb[MC_WIRE_HEADER_SIZE];
    if (recv_all(c->fd, hb, sizeof(hb)))
        return MC_ERR_TRANSFER_FAIL;
    *any = true;
    struct mc_wire_header h;
    mc_wire_decode_header(hb, &h);
    if (mc_wire_conn_refusal(&h))
        return mc_wire_conn_refusal(&h); /* refused at accept (protected mode) */
    uint16_t want = x->is_write ? MC_METHOD_PEER_WRITE : MC_METHOD_PEER_READ;
    if (mc_wire_validate(&h, t->cfg.max_frame_bytes) != MC_WIRE_OK || h.kind != MC_WIRE_RESPONSE ||
        h.method != want || h.request_id < base_id || h.request_id - base_id >= sent ||
        done[h.request_id - base_id]) {
        mc_warn("tcp", "bad reply from peer", "method=%u id=%llu len=%u", h.method,
                (unsigned long long)h.request_id, h.body_length);
        return MC_ERR_TRANSFER_FAIL;
    }
    size_t i = (size_t)(h.request_id - base_id);
    done[i] = true;
    if (h.status != 0) {
        /* a refusal: the stream stays in sync, but the caller closes the connection anyway */
        if (discard(c->fd, h.body_length))
            return MC_ERR_TRANSFER_FAIL;
        return h.status < 0 ? h.status : MC_ERR_TRANSFER_FAIL;
    }
    size_t off = i * x->slice;
    size_t l = x->len - off < x->slice ? x->len - off : x->slice;
    if (h.body_length < MC_WIRE_PEER_PREFIX)
        return MC_ERR_TRANSFER_FAIL;
    uint8_t pre[MC_WIRE_PEER_PREFIX];
    if (recv_all(c->fd, pre, sizeof(pre)))
        return MC_ERR_TRANSFER_FAIL;
    uint32_t clen = mc_wire_get_u32(pre);
    uint32_t rest = h.body_length - MC_WIRE_PEER_PREFIX;
    if (clen > rest)
        return MC_ERR_TRANSFER_FAIL;
    size_t plen = rest - clen;
    if (plen != (x->is_write ? 0 : l))
        return MC_ERR_TRANSFER_FAIL;
    if (discard(c->fd, clen))
        return MC_ERR_TRANSFER_FAIL;
    if (plen && recv_payload(c->fd, x, off, plen))
        return MC_ERR_TRANSFER_FAIL;
    return 0;
}

/* After slice i went out: fold its bytes not yet checksummed into the CRC. */
static void crc_slice(struct xfer *x, size_t i)
{
    size_t end = (i + 1) * x->slice < x->len ? (i + 1) * x->slice : x->len;
    if (!x->is_write || !x->crc || end <= x->crc_done)
        return;
    *x->crc = mc_crc32c_extend(*x->crc, x->buf + x->crc_done, end - x->crc_done);
    x->crc_done = end;
}

static int run(struct tcp_transport *t, struct conn *c, struct xfer *x, bool *any)
{
    bool small[64];
    bool *done = x->nslices <= 64 ? small : calloc(x->nslices, sizeof(bool));
    if (!done)
        return MC_ERR_INTERNAL_ERROR;
    memset(done, 0, (x->nslices <= 64 ? 64 : x->nslices) * sizeof(bool));
    uint64_t base_id = c->next_id;
    c->next_id += x->nslices;
    size_t sent = 0, got = 0;
    int rc = 0;
    while (got < x->nslices) {
        while (sent < x->nslices && sent - got < t->cfg.window) {
            rc = send_request(t, c, x, sent, base_id + sent);
            if (rc)
                goto out;
            crc_slice(x, sent);
            sent++;
        }
        rc = recv_reply(t, c, x, base_id, sent, done, any);
        if (rc)
            goto out;
        if (!x->is_write)
            crc_catch_up(x, done);
        got++;
    }
out:
    if (done != small)
        free(done);
    return rc;
}

static int transfer(struct mc_transport *tp, bool is_write, const struct mc_xfer_loc *loc,
                    uint8_t *buf, size_t len, uint32_t *crc)
{
    struct tcp_transport *t = (struct tcp_transport *)tp;
    if (!loc || !loc->endpoint || strlen(loc->endpoint) >= EP_MAX || (len && !buf))
        return MC_ERR_INVALID_PARAMS;
    if (len == 0)
        return 0;
    struct xfer x = {.is_write = is_write,
                     .seg = loc->segment_id,
                     .epoch = loc->mount_epoch,
                     .offset = loc->offset,
                     .buf = buf,
                     .len = len,
                     .slice = t->cfg.slice_bytes,
                     .crc = crc};
    x.nslices = (len + x.slice - 1) / x.slice;
    for (int attempt = 0;; attempt++) {
        struct conn *c = attempt == 0 ? pool_take(t, loc->endpoint) : NULL;
        bool reused = c != NULL;
        if (!c) {
            int rc = dial(t, loc->endpoint, &c);
            if (rc) {
                peer_forget(t, loc->endpoint);
                return rc;
            }
        }
        bool any = false;
        if (!is_write && crc) {
            *crc = 0; /* a read checksums what it receives: each attempt from the start */
            x.crc_done = 0;
        }
        int rc = run(t, c, &x, &any);
        if (rc == 0) {
            pool_give(t, loc->endpoint, c);
            return 0;
        }
        conn_close(c);
        if (rc == MC_ERR_TRANSFER_FAIL && reused && !any) {
            tcp_lock(t);
            t->retries++;
            tcp_unlock(t);
            continue; /* a pooled connection the peer had closed: dial afresh once */
        }
        if (rc == MC_ERR_TRANSFER_FAIL) {
            peer_forget(t, loc->endpoint);
            mc_warn("tcp", "transfer failed", "endpoint=%s op=%s len=%zu", loc->endpoint,
                    is_write ? "write" : "read", len);
        }
        return rc;
    }
}

static int tcp_write(struct mc_transport *tp, const struct mc_xfer_loc *dst, const void *src,
                     size_t len)
{
    return transfer(tp, true, dst, (uint8_t *)src, len, NULL);
}

static int tcp_read(struct mc_transport *tp, const struct mc_xfer_loc *src, void *dst, size_t len)
{
    return transfer(tp, false, src, dst, len, NULL);
}

static void tcp_free(struct mc_transport *tp)
{
    struct tcp_transport *t = (struct tcp_transport *)tp;
    struct peer *p = t->peers;
    while (p) {
        struct peer *next = p->next;
        for (uint32_t i = 0; i < p->nidle; i++)
            conn_close(p->idle[i]);
        free(p->idle);
        free(p);
        p = next;
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int mc_transport_tcp_write_crc(struct mc_transport *tp, const struct mc_xfer_loc *dst,
                               const void *src, size_t len, uint32_t *crc)
{
    return transfer(tp, true, dst, (uint8_t *)src, len, crc);
}

int mc_transport_tcp_read_crc(struct mc_transport *tp, const struct mc_xfer_loc *src, void *dst,
                              size_t len, uint32_t *crc)
{
    *crc = 0;
    return transfer(tp, false, src, dst, len, crc);
}

static const struct mc_transport_ops tcp_ops = {
    .name = "tcp",
    .write = tcp_write,
    .read = tcp_read,
    .batch = mc_tcp_batch,
    .free = tcp_free,
};

int mc_transport_tcp_new(const struct mc_tcp_transport_config *cfg, struct mc_transport **out)
{
    *out = NULL;
    struct tcp_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return MC_ERR_INTERNAL_ERROR;
    mc_tcp_transport_config_init(&t->cfg);
    if (cfg) {
        if (cfg->connect_timeout_ms)
            t->cfg.connect_timeout_ms = cfg->connect_timeout_ms;
        if (cfg->io_timeout_ms)
            t->cfg.io_timeout_ms = cfg->io_timeout_ms;
        if (cfg->slice_bytes)
            t->cfg.slice_bytes = cfg->slice_bytes;
        if (cfg->window)
            t->cfg.window = cfg->window;
        if (cfg->max_idle_per_peer)
            t->cfg.max_idle_per_peer = cfg->max_idle_per_peer;
        if (cfg->max_frame_bytes)
            t->cfg.max_frame_bytes = cfg->max_frame_bytes;
        if (cfg->idle_timeout_ms)
            t->cfg.idle_timeout_ms = cfg->idle_timeout_ms;
        if (cfg->max_conn_age_ms)
            t->cfg.max_conn_age_ms = cfg->max_conn_age_ms;
        t->cfg.now_ms = cfg->now_ms;
        t->cfg.tls = cfg->tls;
        t->cfg.now_arg = cfg->now_arg;
        if (cfg->auth && cfg->auth->set)
            t->auth = *cfg->auth;
    }
    t->cfg.auth = NULL; /* copied into t->auth */
    if (t->cfg.slice_bytes > MAX_SLICE || t->cfg.slice_bytes + 4096u > t->cfg.max_frame_bytes) {
        free(t);
        return MC_ERR_INVALID_PARAMS;
    }
    static _Atomic uint32_t next_lo_idx;
    t->lo_idx = atomic_fetch_add(&next_lo_idx, 1);
    pthread_mutex_init(&t->lock, NULL);
    t->base.ops = &tcp_ops;
    *out = &t->base;
    return 0;
}

void mc_transport_tcp_get_stats(struct mc_transport *tp, struct mc_tcp_transport_stats *st)
{
    struct tcp_transport *t = (struct tcp_transport *)tp;
    tcp_lock(t);
    st->connects = t->connects;
    st->reuses = t->reuses;
    st->slices = atomic_load_explicit(&t->slices, memory_order_relaxed);
    st->retries = t->retries;
    st->peers = t->npeers;
    st->expired = t->expired;
    st->idle = 0;
    for (struct peer *p = t->peers; p; p = p->next)
        st->idle += p->nidle;
    tcp_unlock(t);
}

/* ---- lent to transport_tcp_batch.c (transport_tcp_internal.h) ----------------------------- */

int mc_tcp_conn_get(struct mc_transport *tp, const char *endpoint, bool pooled,
                    struct mc_tcp_conn **out, bool *reused)
{
    struct tcp_transport *t = (struct tcp_transport *)tp;
    *reused = false;
    if (!endpoint || strlen(endpoint) >= EP_MAX)
        return MC_ERR_INVALID_PARAMS;
    struct conn *c = pooled ? pool_take(t, endpoint) : NULL;
    *reused = c != NULL;
    if (!c) {
        int rc = dial(t, endpoint, &c);
        if (rc) {
            peer_forget(t, endpoint);
            return rc;
        }
    }
    *out = (struct mc_tcp_conn *)c;
    return 0;
}

void mc_tcp_peer_forget(struct mc_transport *tp, const char *endpoint)
{
    peer_forget((struct tcp_transport *)tp, endpoint);
}

void mc_tcp_conn_put(struct mc_transport *tp, const char *endpoint, struct mc_tcp_conn *mc,
                     bool clean)
{
    struct conn *c = (struct conn *)mc;
    if (clean)
        pool_give((struct tcp_transport *)tp, endpoint, c);
    else
        conn_close(c);
}

int mc_tcp_conn_fd(const struct mc_tcp_conn *mc)
{
    return ((const struct conn *)mc)->fd;
}

uint64_t mc_tcp_conn_ids(struct mc_tcp_conn *mc, uint64_t n)
{
    struct conn *c = (struct conn *)mc;
    uint64_t first = c->next_id;
    c->next_id += n;
    return first;
}

void mc_tcp_count_request(struct mc_transport *tp)
{
    atomic_fetch_add_explicit(&((struct tcp_transport *)tp)->slices, 1, memory_order_relaxed);
}

void mc_tcp_count_retry(struct mc_transport *tp)
{
    struct tcp_transport *t = (struct tcp_transport *)tp;
    tcp_lock(t);
    t->retries++;
    tcp_unlock(t);
}

const struct mc_tcp_transport_config *mc_tcp_config(const struct mc_transport *tp)
{
    return &((const struct tcp_transport *)tp)->cfg;
}

int mc_tcp_recv_all(int fd, void *buf, size_t len)
{
    return recv_all(fd, buf, len);
}

int mc_tcp_recv_crc(int fd, void *buf, size_t len, uint32_t *crc)
{
    *crc = 0;
    return recv_into(fd, buf, len, RECV_CRC_PIECE, crc);
}

int mc_tcp_discard(int fd, size_t len)
{
    return discard(fd, len);
}

int mc_tcp_transfer(struct mc_transport *tp, bool is_write, const struct mc_xfer_loc *loc,
                    void *buf, size_t len, uint32_t *crc)
{
    return transfer(tp, is_write, loc, buf, len, crc);
}
