/*
 * rpc_server.c - see rpc_server.h for the design.
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
#include "common/rpc_server.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"

#define RBUF_SIZE (64u << 10)
#define MAX_IOV 64
#define READS_PER_EVENT 16
#define STOP_FLUSH_MS 200

enum { CALL_PENDING = 0, CALL_DONE = 1 };

struct out_item {
    struct out_item *next;
    uint8_t *buf;      /* owned: header (+ peer prefix + control, or body) */
    uint8_t *req_body; /* owned: the request body, which a peer payload may point into */
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
    uint32_t events;
    void *ctx;
    uint8_t *rbuf;
    size_t rpos, rlen;
    /* large body being read directly into its own buffer */
    bool in_body;
    struct mc_wire_header cur;
    uint8_t *body;
    size_t body_got;
    struct mc_rpc_call *calls; /* unanswered calls (doubly linked) */
    int inflight;
    struct out_item *out_head, *out_tail;
    struct conn *next, *prev;
};

struct mc_rpc_call {
    struct conn *conn;
    _Atomic int state;
    _Atomic int refs;
    bool in_list;
    uint16_t method;
    uint64_t id;
    uint8_t *body;
    size_t len;
    struct out_item *reply;
    struct mc_rpc_call *qnext, *lnext, *lprev;
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
    _Atomic uint64_t next_conn_id;
    _Atomic uint64_t conns_open, conns_accepted, conns_rejected, requests, protocol_errors,
        unknown_methods;
    struct handler handlers[MC_METHOD_TABLE_SIZE];
};

static __thread struct io_thread *tls_io;

/* ---- references -------------------------------------------------------------------------- */

static void conn_unref(struct conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1) {
        free(c->rbuf);
        free(c->body);
        free(c);
    }
}

static void call_unref(struct mc_rpc_call *call)
{
    if (atomic_fetch_sub(&call->refs, 1) == 1) {
        free(call->body);
        conn_unref(call->conn);
        free(call);
    }
}

static void item_free(struct out_item *it)
{
    if (!it)
        return;
    if (it->release)
        it->release(it->release_arg);
    free(it->buf);
    free(it->req_body);
    free(it);
}

/* ---- output ------------------------------------------------------------------------------ */

static void conn_close(struct io_thread *io, struct conn *c, const char *why);

static void conn_set_events(struct io_thread *io, struct conn *c)
{
    uint32_t want = (c->paused ? 0 : EPOLLIN) | (c->out_head ? EPOLLOUT : 0);
    if (c->closed || want == c->events)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    if (epoll_ctl(io->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->events = want;
}

/* Writes as much of the output queue as the socket takes. */
static void conn_flush(struct io_thread *io, struct conn *c)
{
    while (!c->closed && c->out_head) {
        struct iovec iov[MAX_IOV];
        int n = 0;
        for (struct out_item *it = c->out_head; it && n < MAX_IOV; it = it->next)
            for (int i = it->idx; i < it->niov && n < MAX_IOV; i++)
                if (it->iov[i].iov_len)
                    iov[n++] = it->iov[i];
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = n ? sendmsg(c->fd, &mh, MSG_NOSIGNAL) : 0;
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == EINTR)
                continue;
            mc_warn(io->srv->name, "write failed", "conn=%llu errno=%d", (unsigned long long)c->id,
                    errno);
            conn_close(io, c, "write failed");
            return;
        }
        size_t left = (size_t)w;
        while (c->out_head) {
            struct out_item *it = c->out_head;
            while (it->idx < it->niov) {
                struct iovec *v = &it->iov[it->idx];
                if (v->iov_len > left) {
                    v->iov_base = (uint8_t *)v->iov_base + left;
                    v->iov_len -= left;
                    left = 0;
                    break;
                }
                left -= v->iov_len;
                v->iov_len = 0;
                it->idx++;
            }
            if (it->idx < it->niov)
                break;
            c->out_head = it->next;
            if (!c->out_head)
                c->out_tail = NULL;
            item_free(it);
        }
    }
    if (c->closed)
        return;
    if (!c->out_head && c->close_after_flush) {
        conn_close(io, c, "protocol error");
        return;
    }
    conn_set_events(io, c);
}

static void conn_push_out(struct io_thread *io, struct conn *c, struct out_item *it)
{
    if (c->closed) {
        item_free(it);
        return;
    }
    it->next = NULL;
    if (c->out_tail)
        c->out_tail->next = it;
    else
        c->out_head = it;
    c->out_tail = it;
    if (io->batch_conn != c)
        conn_flush(io, c);
}

static struct out_item *item_new(size_t buflen, int npayload)
{
    struct out_item *it = calloc(1, sizeof(*it) + (size_t)(1 + npayload) * sizeof(struct iovec));
    if (!it)
        return NULL;
    it->buf = malloc(buflen ? buflen : 1);
    if (!it->buf) {
        free(it);
        return NULL;
    }
    it->niov = 1 + npayload;
    it->iov[0].iov_base = it->buf;
    it->iov[0].iov_len = buflen;
    return it;
}

static struct out_item *frame_new(uint16_t method, uint64_t id, int32_t status, const void *body,
                                  size_t len)
{
    struct out_item *it = item_new(MC_WIRE_HEADER_SIZE + len, 0);
    if (!it)
        return NULL;
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, method, id, status, (uint32_t)len);
    mc_wire_encode_header(&h, it->buf);
    if (len)
        memcpy(it->buf + MC_WIRE_HEADER_SIZE, body, len);
    return it;
}

/* ---- calls ------------------------------------------------------------------------------- */

static void call_list_remove(struct conn *c, struct mc_rpc_call *call)
{
    if (!call->in_list)
        return;
    if (call->lprev)
        call->lprev->lnext = call->lnext;
    else
        c->calls = call->lnext;
    if (call->lnext)
        call->lnext->lprev = call->lprev;
    call->in_list = false;
    c->inflight--;
    call_unref(call); /* the list's reference */
}

static void process_input(struct io_thread *io, struct conn *c);

/* On the I/O thread: queue the reply (if any), retire the call, drop the owner's reference. */
static void finish_call(struct io_thread *io, struct mc_rpc_call *call, struct out_item *reply)
{
    struct conn *c = call->conn;
    if (reply)
        conn_push_out(io, c, reply);
    call_list_remove(c, call);
    call_unref(call); /* the owner's reference */
}

static void complete(struct mc_rpc_call *call, struct out_item *reply)
{
    int expect = CALL_PENDING;
    if (!atomic_compare_exchange_strong(&call->state, &expect, CALL_DONE)) {
        item_free(reply); /* already answered (stop) or completed twice */
        call_unref(call);
        return;
    }
    struct io_thread *io = call->conn->io;
    if (tls_io == io) {
        finish_call(io, call, reply);
        return;
    }
    call->reply = reply;
    call->qnext = NULL;
    pthread_mutex_lock(&io->qlock);
    if (io->qclosed) {
        pthread_mutex_unlock(&io->qlock);
        item_free(reply);
        call_unref(call);
        return;
    }
    bool was_empty = io->qhead == NULL;
    if (io->qtail)
        io->qtail->qnext = call;
    else
        io->qhead = call;
    io->qtail = call;
    pthread_mutex_unlock(&io->qlock);
    if (was_empty) {
        uint64_t one = 1;
        ssize_t r = write(io->evfd, &one, sizeof(one));
        (void)r;
    }
}

static void reply_oom(struct mc_rpc_call *call)
{
    mc_error("rpc", "out of memory building reply", "method=%u", call->method);
    complete(call, frame_new(call->method, call->id, MC_ERR_INTERNAL_ERROR, NULL, 0));
}

void mc_rpc_reply(struct mc_rpc_call *call, int32_t status, const void *body, size_t len)
{
    if (status != 0 || len > UINT32_MAX)
        len = 0;
    struct out_item *it = frame_new(call->method, call->id, status, body, len);
    if (!it) {
        reply_oom(call);
        return;
    }
    complete(call, it);
}

void mc_rpc_reply_msg(struct mc_rpc_call *call, int32_t status, const ProtobufCMessage *msg)
{
    size_t len = (status == 0 && msg) ? protobuf_c_message_get_packed_size(msg) : 0;
    if (len > UINT32_MAX) {
        mc_rpc_reply(call, MC_ERR_SERIALIZE_FAIL, NULL, 0);
        return;
    }
    struct out_item *it = frame_new(call->method, call->id, status, NULL, 0);
    struct out_item *big = len ? item_new(MC_WIRE_HEADER_SIZE + len, 0) : NULL;
    if (!it || (len && !big)) {
        item_free(it);
        item_free(big);
        reply_oom(call);
        return;
    }
    if (big) {
        item_free(it);
        it = big;
        struct mc_wire_header h;
        mc_wire_header_init(&h, MC_WIRE_RESPONSE, call->method, call->id, 0, (uint32_t)len);
        mc_wire_encode_header(&h, it->buf);
        protobuf_c_message_pack(msg, it->buf + MC_WIRE_HEADER_SIZE);
    }
    complete(call, it);
}

void mc_rpc_reply_peer(struct mc_rpc_call *call, int32_t status, const ProtobufCMessage *ctl,
                       const struct iovec *payload, int niov, void (*release)(void *),
                       void *release_arg)
{
    if (status != 0) {
        if (release)
            release(release_arg);
        mc_rpc_reply(call, status, NULL, 0);
        return;
    }
    size_t clen = ctl ? protobuf_c_message_get_packed_size(ctl) : 0;
    uint64_t total = MC_WIRE_PEER_PREFIX + (uint64_t)clen;
    for (int i = 0; i < niov; i++)
        total += payload[i].iov_len;
    if (total > UINT32_MAX || niov < 0) {
        if (release)
            release(release_arg);
        mc_rpc_reply(call, MC_ERR_INVALID_PARAMS, NULL, 0);
        return;
    }
    struct out_item *it = item_new(MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + clen, niov);
    if (!it) {
        if (release)
            release(release_arg);
        reply_oom(call);
        return;
    }
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, call->method, call->id, 0, (uint32_t)total);
    mc_wire_encode_header(&h, it->buf);
    mc_wire_put_u32(it->buf + MC_WIRE_HEADER_SIZE, (uint32_t)clen);
    if (clen)
        protobuf_c_message_pack(ctl, it->buf + MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX);
    for (int i = 0; i < niov; i++)
        it->iov[1 + i] = payload[i];
    it->release = release;
    it->release_arg = release_arg;
    it->req_body = call->body; /* the payload may point into it: keep it until written */
    call->body = NULL;
    call->len = 0;
    complete(call, it);
}

void mc_rpc_call_drop(struct mc_rpc_call *call)
{
    complete(call, NULL);
}

uint16_t mc_rpc_call_method(const struct mc_rpc_call *c)
{
    return c->method;
}

uint64_t mc_rpc_call_id(const struct mc_rpc_call *c)
{
    return c->id;
}

uint64_t mc_rpc_call_conn_id(const struct mc_rpc_call *c)
{
    return c->conn->id;
}

const uint8_t *mc_rpc_call_body(const struct mc_rpc_call *c, size_t *len)
{
    *len = c->len;
    return c->body;
}

void **mc_rpc_call_conn_ctx(struct mc_rpc_call *c)
{
    return &c->conn->ctx;
}

ProtobufCMessage *mc_rpc_call_unpack(struct mc_rpc_call *c, const ProtobufCMessageDescriptor *desc)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, c->len, c->body);
    if (!m) {
        mc_warn("rpc", "undecodable request body", "method=%s conn=%llu len=%zu",
                mc_method_name(c->method) ? mc_method_name(c->method) : "?",
                (unsigned long long)c->conn->id, c->len);
        mc_rpc_reply_status(c, MC_ERR_DESERIALIZE_FAIL);
    }
    return m;
}

ProtobufCMessage *mc_rpc_call_unpack_peer(struct mc_rpc_call *c,
                                          const ProtobufCMessageDescriptor *desc,
                                          const uint8_t **payload, size_t *payload_len)
{
    const uint8_t *ctl;
    size_t clen;
    ProtobufCMessage *m = NULL;
    if (mc_wire_peer_split(c->body, c->len, &ctl, &clen, payload, payload_len) == 0)
        m = protobuf_c_message_unpack(desc, NULL, clen, ctl);
    if (!m) {
        mc_warn("rpc", "undecodable peer request", "method=%s conn=%llu len=%zu",
                mc_method_name(c->method) ? mc_method_name(c->method) : "?",
                (unsigned long long)c->conn->id, c->len);
        mc_rpc_reply_status(c, MC_ERR_DESERIALIZE_FAIL);
    }
    return m;
}

/* ---- input ------------------------------------------------------------------------------- */

static void echo_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    mc_rpc_reply(call, 0, call->body, call->len);
}

static void service_ready_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    Mc__ServiceReadyResponse r = MC__SERVICE_READY_RESPONSE__INIT;
    r.version = (char *)MC_SERVICE_VERSION;
    r.proto_version = MC_PROTO_VERSION;
    mc_rpc_reply_msg(call, 0, &r.base);
}

static void unknown_handler(void *arg, struct mc_rpc_call *call)
{
    struct mc_rpc_server *s = arg;
    atomic_fetch_add(&s->unknown_methods, 1);
    mc_warn(s->name, "unknown method", "method=%u conn=%llu", call->method,
            (unsigned long long)call->conn->id);
    mc_rpc_reply_status(call, MC_ERR_NOT_SUPPORTED);
}

static void dispatch(struct io_thread *io, struct conn *c, const struct mc_wire_header *h,
                     uint8_t *body)
{
    struct mc_rpc_server *s = io->srv;
    struct mc_rpc_call *call = calloc(1, sizeof(*call));
    if (!call) {
        free(body);
        conn_close(io, c, "out of memory");
        return;
    }
    atomic_fetch_add(&s->requests, 1);
    call->conn = c;
    atomic_fetch_add(&c->refs, 1);
    atomic_init(&call->state, CALL_PENDING);
    atomic_init(&call->refs, 2);
    call->method = h->method;
    call->id = h->request_id;
    call->body = body;
    call->len = h->body_length;
    call->in_list = true;
    call->lnext = c->calls;
    if (c->calls)
        c->calls->lprev = call;
    c->calls = call;
    c->inflight++;
    const struct handler *hd = h->method < MC_METHOD_TABLE_SIZE ? &s->handlers[h->method] : NULL;
    if (hd && hd->fn)
        hd->fn(hd->arg, call);
    else
        unknown_handler(s, call);
}

static void protocol_error(struct io_thread *io, struct conn *c, const struct mc_wire_header *h,
                           enum mc_wire_check why)
{
    struct mc_rpc_server *s = io->srv;
    atomic_fetch_add(&s->protocol_errors, 1);
    mc_warn(s->name, "bad frame, closing connection",
            "conn=%llu reason=%s magic=0x%08x version=%u kind=%u len=%u max=%u",
            (unsigned long long)c->id, mc_wire_check_name(why), h->magic, h->version, h->kind,
            h->body_length, s->cfg.max_frame_bytes);
    if (why == MC_WIRE_BAD_VERSION) {
        /* tell a client from another release why before closing */
        struct out_item *it = frame_new(h->method, h->request_id, MC_ERR_INVALID_VERSION, NULL, 0);
        c->paused = true;
        c->close_after_flush = true;
        if (it) {
            conn_push_out(io, c, it);
            if (io->batch_conn == c)
                conn_flush(io, c);
            return;
        }
    }
    conn_close(io, c, "protocol error");
}

/* Parses and dispatches every complete frame in the read buffer. */
static void process_input(struct io_thread *io, struct conn *c)
{
    struct mc_rpc_server *s = io->srv;
    while (!c->closed && !c->in_body && !c->close_after_flush) {
        if (c->inflight >= s->cfg.max_inflight_per_conn) {
            c->paused = true;
            break;
        }
        size_t avail = c->rlen - c->rpos;
        if (avail < MC_WIRE_HEADER_SIZE)
            break;
        struct mc_wire_header h;
        mc_wire_decode_header(c->rbuf + c->rpos, &h);
        enum mc_wire_check chk = mc_wire_validate(&h, s->cfg.max_frame_bytes);
        if (chk == MC_WIRE_OK && h.kind != MC_WIRE_REQUEST)
            chk = MC_WIRE_BAD_KIND;
        if (chk != MC_WIRE_OK) {
            protocol_error(io, c, &h, chk);
            return;
        }
        size_t total = MC_WIRE_HEADER_SIZE + (size_t)h.body_length;
        uint8_t *body = NULL;
        if (h.body_length) {
            body = malloc(h.body_length);
            if (!body) {
                conn_close(io, c, "out of memory");
                return;
            }
        }
        if (avail >= total) {
            if (h.body_length)
                memcpy(body, c->rbuf + c->rpos + MC_WIRE_HEADER_SIZE, h.body_length);
            c->rpos += total;
            dispatch(io, c, &h, body);
            continue;
        }
        if (total <= RBUF_SIZE) {
            free(body); /* wait for the rest in the read buffer */
            break;
        }
        /* a large body: copy what we have, read the rest straight into it */
        size_t have = avail - MC_WIRE_HEADER_SIZE;
        memcpy(body, c->rbuf + c->rpos + MC_WIRE_HEADER_SIZE, have);
        c->cur = h;
        c->body = body;
        c->body_got = have;
        c->in_body = true;
        c->rpos = c->rlen = 0;
    }
    if (c->rpos == c->rlen) {
        c->rpos = c->rlen = 0;
    } else if (c->rpos > 0 && !c->closed) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
}

static void conn_on_readable(struct io_thread *io, struct conn *c)
{
    io->batch_conn = c;
    for (int round = 0; round < READS_PER_EVENT && !c->closed && !c->paused; round++) {
        ssize_t n;
        if (!c->in_body && c->rlen == RBUF_SIZE)
            break; /* only whole frames waiting for dispatch can fill it; never read 0 bytes */
        if (c->in_body)
            n = read(c->fd, c->body + c->body_got, c->cur.body_length - c->body_got);
        else
            n = read(c->fd, c->rbuf + c->rlen, RBUF_SIZE - c->rlen);
        if (n == 0) {
            bool mid = c->in_body || c->rlen > c->rpos;
            conn_close(io, c, mid ? "peer closed mid-frame" : "peer closed");
            break;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                conn_close(io, c, "read failed");
            break;
        }
        if (c->in_body) {
            c->body_got += (size_t)n;
            if (c->body_got == c->cur.body_length) {
                uint8_t *body = c->body;
                c->body = NULL;
                c->in_body = false;
                dispatch(io, c, &c->cur, body);
            }
        } else {
            c->rlen += (size_t)n;
        }
        process_input(io, c);
    }
    io->batch_conn = NULL;
    if (!c->closed)
        conn_flush(io, c);
}

/* ---- connections ------------------------------------------------------------------------- */

static void conn_close(struct io_thread *io, struct conn *c, const char *why)
{
    if (c->closed)
        return;
    struct mc_rpc_server *s = io->srv;
    c->closed = true;
    if (io->batch_conn == c)
        io->batch_conn = NULL;
    epoll_ctl(io->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    mc_debug(s->name, "connection closed", "conn=%llu reason=\"%s\" inflight=%d",
             (unsigned long long)c->id, why, c->inflight);
    if (strcmp(why, "peer closed") != 0 && strcmp(why, "server stopping") != 0)
        mc_info(s->name, "connection closed", "conn=%llu reason=\"%s\"", (unsigned long long)c->id,
                why);
    while (c->out_head) {
        struct out_item *it = c->out_head;
        c->out_head = it->next;
        item_free(it);
    }
    c->out_tail = NULL;
    while (c->calls)
        call_list_remove(c, c->calls);
    if (s->cfg.on_close)
        s->cfg.on_close(s->cfg.on_close_arg, c->id, c->ctx);
    if (c->prev)
        c->prev->next = c->next;
    else
        io->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    atomic_fetch_sub(&s->conns_open, 1);
    /* an event for c may still be in this round's epoll batch: free it after the round */
    c->next = io->graveyard;
    c->prev = NULL;
    io->graveyard = c;
}

static void bury(struct io_thread *io)
{
    while (io->graveyard) {
        struct conn *c = io->graveyard;
        io->graveyard = c->next;
        conn_unref(c);
    }
}

static void conn_attach(struct io_thread *io, struct conn *c)
{
    c->io = io;
    c->events = EPOLLIN;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(io->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        mc_error(io->srv->name, "epoll_ctl add failed", "errno=%d", errno);
        close(c->fd);
        atomic_fetch_sub(&io->srv->conns_open, 1);
        conn_unref(c);
        return;
    }
    c->next = io->conns;
    if (io->conns)
        io->conns->prev = c;
    io->conns = c;
}

static void do_accept(struct io_thread *io0)
{
    struct mc_rpc_server *s = io0->srv;
    for (int i = 0; i < 256; i++) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                mc_warn(s->name, "accept failed", "errno=%d", errno);
            return;
        }
        if ((int)atomic_load(&s->conns_open) >= s->cfg.max_conns) {
            atomic_fetch_add(&s->conns_rejected, 1);
            mc_warn(s->name, "connection limit reached, refusing", "max_conns=%d",
                    s->cfg.max_conns);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct conn *c = calloc(1, sizeof(*c));
        uint8_t *rbuf = c ? malloc(RBUF_SIZE) : NULL;
        if (!c || !rbuf) {
            free(c);
            free(rbuf);
            close(fd);
            continue;
        }
        c->rbuf = rbuf;
        c->fd = fd;
        atomic_init(&c->refs, 1);
        c->id = atomic_fetch_add(&s->next_conn_id, 1) + 1;
        atomic_fetch_add(&s->conns_open, 1);
        atomic_fetch_add(&s->conns_accepted, 1);
        struct io_thread *io = &s->io[s->rr++ % (unsigned)s->nio];
        if (io == io0) {
            conn_attach(io, c);
            continue;
        }
        c->io = io;
        pthread_mutex_lock(&io->qlock);
        bool closed = io->qclosed;
        if (!closed) {
            c->next = io->newconns;
            io->newconns = c;
        }
        pthread_mutex_unlock(&io->qlock);
        if (closed) {
            close(fd);
            atomic_fetch_sub(&s->conns_open, 1);
            conn_unref(c);
            continue;
        }
        uint64_t one64 = 1;
        ssize_t r = write(io->evfd, &one64, sizeof(one64));
        (void)r;
    }
}

/* Takes the completion queue and new connections; processes both. */
static void drain_queue(struct io_thread *io, bool close_queue)
{
    uint64_t v;
    ssize_t r = read(io->evfd, &v, sizeof(v));
    (void)r;
    pthread_mutex_lock(&io->qlock);
    struct mc_rpc_call *q = io->qhead;
    struct conn *nc = io->newconns;
    io->qhead = io->qtail = NULL;
    io->newconns = NULL;
    if (close_queue)
        io->qclosed = true;
    pthread_mutex_unlock(&io->qlock);
    while (nc) {
        struct conn *next = nc->next;
        nc->next = NULL;
        if (close_queue) {
            close(nc->fd);
            atomic_fetch_sub(&io->srv->conns_open, 1);
            conn_unref(nc);
        } else {
            conn_attach(io, nc);
        }
        nc = next;
    }
    while (q) {
        struct mc_rpc_call *next = q->qnext;
        struct conn *c = q->conn;
        atomic_fetch_add(&c->refs, 1); /* keep c while we may resume it */
        struct out_item *reply = q->reply;
        q->reply = NULL;
        finish_call(io, q, reply);
        if (!c->closed && c->paused && !c->close_after_flush &&
            c->inflight < io->srv->cfg.max_inflight_per_conn) {
            c->paused = false;
            io->batch_conn = c;
            process_input(io, c);
            io->batch_conn = NULL;
            if (!c->closed)
                conn_flush(io, c);
        }
        conn_unref(c);
        q = next;
    }
}

static void stop_thread(struct io_thread *io)
{
    struct mc_rpc_server *s = io->srv;
    drain_queue(io, true);
    /* answer parked calls, then flush what the sockets take within a short deadline */
    struct conn *next;
    for (struct conn *c = io->conns; c; c = next) {
        next = c->next;
        for (struct mc_rpc_call *call = c->calls; call; call = call->lnext) {
            int expect = CALL_PENDING;
            if (!atomic_compare_exchange_strong(&call->state, &expect, CALL_DONE))
                continue;
            struct out_item *it =
                frame_new(call->method, call->id, MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS, NULL, 0);
            if (it) {
                it->next = NULL;
                if (c->out_tail)
                    c->out_tail->next = it;
                else
                    c->out_head = it;
                c->out_tail = it;
            }
        }
        c->paused = true;
        conn_flush(io, c);
    }
    uint64_t deadline = mc_now_ms() + STOP_FLUSH_MS;
    for (;;) {
        bool pending = false;
        for (struct conn *c = io->conns; c; c = next) {
            next = c->next;
            if (!c->closed && c->out_head) {
                conn_flush(io, c);
                pending = pending || (!c->closed && c->out_head);
            }
        }
        if (!pending || mc_now_ms() >= deadline)
            break;
        struct epoll_event evs[16];
        epoll_wait(io->epfd, evs, 16, 10);
    }
    while (io->conns)
        conn_close(io, io->conns, "server stopping");
    (void)s;
}

static void *io_main(void *arg)
{
    struct io_thread *io = arg;
    struct mc_rpc_server *s = io->srv;
    tls_io = io;
    struct epoll_event evs[64];
    while (!atomic_load(&s->stopping)) {
        int n = epoll_wait(io->epfd, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            mc_error(s->name, "epoll_wait failed", "errno=%d", errno);
            break;
        }
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &s->lfd) {
                do_accept(io);
            } else if (p == io) {
                drain_queue(io, false);
            } else {
                struct conn *c = p; /* valid until bury(), even if closed in this round */
                if (!c->closed && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                    conn_on_readable(io, c);
                if (!c->closed && (evs[i].events & EPOLLOUT))
                    conn_flush(io, c);
                if (!c->closed && (evs[i].events & (EPOLLHUP | EPOLLERR)) && c->paused)
                    conn_close(io, c, "hangup");
            }
        }
        bury(io);
    }
    stop_thread(io);
    bury(io);
    tls_io = NULL;
    return NULL;
}

/* ---- server ------------------------------------------------------------------------------ */

void mc_rpc_server_config_init(struct mc_rpc_server_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->io_threads = 2;
    cfg->max_conns = 10000;
    cfg->max_inflight_per_conn = 1024;
    cfg->max_frame_bytes = MC_WIRE_DEFAULT_MAX_FRAME_BYTES;
}

int mc_rpc_server_new(const struct mc_rpc_server_config *cfg, struct mc_rpc_server **out)
{
    *out = NULL;
    if (!cfg || cfg->io_threads < 0 || cfg->io_threads > 256 || cfg->max_conns < 0 ||
        cfg->max_inflight_per_conn < 0 ||
        (cfg->max_frame_bytes && cfg->max_frame_bytes < MC_WIRE_MIN_MAX_FRAME_BYTES))
        return MC_ERR_INVALID_PARAMS;
    struct mc_rpc_server *s = calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    s->cfg = *cfg;
    if (!s->cfg.io_threads)
        s->cfg.io_threads = 2;
    if (!s->cfg.max_conns)
        s->cfg.max_conns = 10000;
    if (!s->cfg.max_inflight_per_conn)
        s->cfg.max_inflight_per_conn = 1024;
    if (!s->cfg.max_frame_bytes)
        s->cfg.max_frame_bytes = MC_WIRE_DEFAULT_MAX_FRAME_BYTES;
    snprintf(s->name, sizeof(s->name), "%s", cfg->name && *cfg->name ? cfg->name : "rpc");
    s->cfg.name = s->name;
    s->cfg.bind_addr = NULL; /* not kept: only used in start, copied below */
    s->lfd = -1;
    s->handlers[MC_METHOD_ECHO].fn = echo_handler;
    s->handlers[MC_METHOD_SERVICE_READY].fn = service_ready_handler;
    s->nio = s->cfg.io_threads;
    s->io = calloc((size_t)s->nio, sizeof(*s->io));
    if (!s->io) {
        free(s);
        return MC_ERR_INTERNAL_ERROR;
    }
    for (int i = 0; i < s->nio; i++) {
        struct io_thread *io = &s->io[i];
        io->srv = s;
        io->index = i;
        io->epfd = epoll_create1(EPOLL_CLOEXEC);
        io->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        pthread_mutex_init(&io->qlock, NULL);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = io};
        if (io->epfd < 0 || io->evfd < 0 ||
            epoll_ctl(io->epfd, EPOLL_CTL_ADD, io->evfd, &ev) != 0) {
            mc_error(s->name, "epoll/eventfd setup failed", "errno=%d", errno);
            s->nio = i + 1;
            mc_rpc_server_free(s);
            return MC_ERR_INTERNAL_ERROR;
        }
    }
    /* keep the bind address for start() */
    if (cfg->bind_addr && *cfg->bind_addr) {
        s->cfg.bind_addr = strdup(cfg->bind_addr);
        if (!s->cfg.bind_addr) {
            mc_rpc_server_free(s);
            return MC_ERR_INTERNAL_ERROR;
        }
    }
    *out = s;
    return 0;
}

int mc_rpc_server_register(struct mc_rpc_server *s, uint16_t method, mc_rpc_handler_fn fn,
                           void *arg)
{
    if (!s || s->started || method == MC_METHOD_INVALID || method >= MC_METHOD_TABLE_SIZE)
        return MC_ERR_INVALID_PARAMS;
    s->handlers[method].fn = fn;
    s->handlers[method].arg = arg;
    return 0;
}

static int listen_on(struct mc_rpc_server *s)
{
    struct addrinfo hints = {
        .ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", s->cfg.port);
    int rc = getaddrinfo(s->cfg.bind_addr, port, &hints, &ai);
    if (rc != 0 || !ai) {
        mc_error(s->name, "cannot resolve bind address", "addr=%s err=\"%s\"",
                 s->cfg.bind_addr ? s->cfg.bind_addr : "0.0.0.0", gai_strerror(rc));
        return MC_ERR_RPC_FAIL;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        mc_error(s->name, "cannot listen", "addr=%s port=%u errno=%d",
                 s->cfg.bind_addr ? s->cfg.bind_addr : "0.0.0.0", s->cfg.port, errno);
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return MC_ERR_RPC_FAIL;
    }
    freeaddrinfo(ai);
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.sin_port);
    s->lfd = fd;
    return 0;
}

int mc_rpc_server_start(struct mc_rpc_server *s)
{
    if (!s || s->started)
        return MC_ERR_INVALID_PARAMS;
    int rc = listen_on(s);
    if (rc)
        return rc;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->lfd};
    if (epoll_ctl(s->io[0].epfd, EPOLL_CTL_ADD, s->lfd, &ev) != 0) {
        close(s->lfd);
        s->lfd = -1;
        return MC_ERR_INTERNAL_ERROR;
    }
    s->started = true;
    for (int i = 0; i < s->nio; i++) {
        if (pthread_create(&s->io[i].tid, NULL, io_main, &s->io[i]) != 0) {
            mc_error(s->name, "cannot start I/O thread", "errno=%d", errno);
            mc_rpc_server_stop(s);
            return MC_ERR_INTERNAL_ERROR;
        }
        s->io[i].started = true;
    }
    mc_info(s->name, "rpc server listening", "addr=%s port=%u io_threads=%d max_conns=%d",
            s->cfg.bind_addr ? s->cfg.bind_addr : "0.0.0.0", s->port, s->nio, s->cfg.max_conns);
    return 0;
}

uint16_t mc_rpc_server_port(const struct mc_rpc_server *s)
{
    return s->port;
}

void mc_rpc_server_stop(struct mc_rpc_server *s)
{
    if (!s || s->stopped)
        return;
    s->stopped = true;
    atomic_store(&s->stopping, true);
    for (int i = 0; i < s->nio; i++) {
        uint64_t one = 1;
        if (s->io[i].evfd >= 0) {
            ssize_t r = write(s->io[i].evfd, &one, sizeof(one));
            (void)r;
        }
    }
    for (int i = 0; i < s->nio; i++)
        if (s->io[i].started)
            pthread_join(s->io[i].tid, NULL);
    for (int i = 0; i < s->nio; i++) {
        struct io_thread *io = &s->io[i];
        if (!io->started) {
            /* never ran: close its queue so late completions are no-ops */
            drain_queue(io, true);
        }
    }
    if (s->lfd >= 0) {
        close(s->lfd);
        s->lfd = -1;
    }
}

void mc_rpc_server_free(struct mc_rpc_server *s)
{
    if (!s)
        return;
    mc_rpc_server_stop(s);
    for (int i = 0; i < s->nio; i++) {
        struct io_thread *io = &s->io[i];
        if (io->epfd >= 0)
            close(io->epfd);
        if (io->evfd >= 0)
            close(io->evfd);
        pthread_mutex_destroy(&io->qlock);
    }
    free(s->io);
    free((void *)s->cfg.bind_addr);
    free(s);
}

void mc_rpc_server_get_stats(const struct mc_rpc_server *s, struct mc_rpc_server_stats *st)
{
    struct mc_rpc_server *m = (struct mc_rpc_server *)s;
    st->conns_open = atomic_load(&m->conns_open);
    st->conns_accepted = atomic_load(&m->conns_accepted);
    st->conns_rejected = atomic_load(&m->conns_rejected);
    st->requests = atomic_load(&m->requests);
    st->protocol_errors = atomic_load(&m->protocol_errors);
    st->unknown_methods = atomic_load(&m->unknown_methods);
}
