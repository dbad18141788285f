/*
 * rpc_server_conn.c - the RPC server's I/O side (see rpc_server_internal.h for the split and the
 * ownership rules, rpc_server.h for the design): each I/O thread's epoll loop, accepting and
 * handing out connections, reading and parsing frames, dispatching calls to their handlers,
 * the output queue and its writes, completions handed over from other threads, closing, and
 * answering parked calls at stop.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_server_internal.h"
#include "mooncake/errors.h"

#define RBUF_SIZE (64u << 10)
#define READS_PER_EVENT 16
#define STOP_FLUSH_MS 200
#define SWEEP_MS 1000               /* idle / handshake timeout checks, at most this far apart */
#define BODY_MIN_CHUNK (64u << 10)  /* a large body's first buffer at least */
#define BODY_FIRST_CHUNK (2u << 20) /* ... and at most, when allocated ahead of its bytes */

static __thread struct io_thread *tls_io;

static void process_input(struct io_thread *io, struct conn *c);

/* Reads c's requests again once its replies drained below half the soft limit and it has
 * room for calls: what is already in the read buffer is processed now (no new byte may come
 * to wake the loop), then the socket is polled again. */
static void conn_resume(struct io_thread *io, struct conn *c)
{
    struct mc_rpc_server *s = io->srv;
    if (c->closed || c->close_after_flush)
        return;
    if (c->out_paused && c->out_bytes <= s->cfg.out_soft_bytes / 2)
        c->out_paused = false;
    if (c->paused && c->inflight < s->cfg.max_inflight_per_conn)
        c->paused = false;
    while (!c->paused && !c->out_paused) {
        io->batch_conn = c;
        process_input(io, c);
        io->batch_conn = NULL;
        if (c->closed)
            return;
        mc_rpcs_flush(io, c);
        if (c->closed || !c->out_paused || c->out_bytes > s->cfg.out_soft_bytes / 2)
            return;
        c->out_paused = false; /* the socket took it all at once: go on */
    }
}

/* ---- completions ------------------------------------------------------------------------- */

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

/* On the I/O thread: queue the reply (if any), retire the call, drop the owner's reference. */
static void finish_call(struct io_thread *io, struct mc_rpc_call *call, struct out_item *reply)
{
    struct conn *c = call->conn;
    if (reply)
        mc_rpcs_push_out(io, c, reply);
    call_list_remove(c, call);
    call_unref(call); /* the owner's reference */
}

void mc_rpcs_complete(struct mc_rpc_call *call, struct out_item *reply)
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

/* ---- input ------------------------------------------------------------------------------- */

static void unknown_handler(void *arg, struct mc_rpc_call *call)
{
    struct mc_rpc_server *s = arg;
    atomic_fetch_add(&s->unknown_methods, 1);
    mc_warn(s->name, "unknown method", "method=%u conn=%llu", call->method,
            (unsigned long long)call->conn->id);
    mc_rpc_reply_status(call, MC_ERR_NOT_SUPPORTED);
}

/* Sends the gate's answer to frame h; closes the connection after it when the gate says so. */
static void gate_answer(struct io_thread *io, struct conn *c, const struct mc_wire_header *h,
                        const struct mc_rpcs_gate_reply *r)
{
    struct out_item *it = mc_rpcs_frame_new(h->method, h->request_id, r->status, r->body, r->len);
    if (!it) {
        mc_rpcs_conn_close(io, c, "out of memory");
        return;
    }
    if (r->close) {
        c->paused = true;
        c->close_after_flush = true;
    }
    mc_rpcs_push_out(io, c, it);
    if (r->close && io->batch_conn == c)
        mc_rpcs_flush(io, c);
}

/* Hands frame h to its handler as a call. The body is either `body` (its own buffer, owned
 * from here: a large one read apart) or the bytes at `src` (still in the read buffer: copied
 * into the call's own block, one allocation for both). */
static void dispatch(struct io_thread *io, struct conn *c, const struct mc_wire_header *h,
                     uint8_t *body, const uint8_t *src)
{
    struct mc_rpc_server *s = io->srv;
    if (c->gate != MC_GATE_OPEN) {
        struct mc_rpcs_gate_reply r;
        mc_rpcs_gate_frame(s, c, h, body ? body : src, &r);
        mc_rpcs_body_free(body);
        gate_answer(io, c, h, &r);
        return;
    }
    size_t inl = body ? 0 : h->body_length;
    struct mc_rpc_call *call = malloc(sizeof(*call) + inl);
    if (!call) {
        mc_rpcs_body_free(body);
        mc_rpcs_conn_close(io, c, "out of memory");
        return;
    }
    memset(call, 0, sizeof(*call));
    if (!body) {
        call->body_inline = true;
        body = inl ? call->inline_body : NULL;
        if (inl)
            memcpy(body, src, inl);
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
        struct out_item *it =
            mc_rpcs_frame_new(h->method, h->request_id, MC_ERR_INVALID_VERSION, NULL, 0);
        c->paused = true;
        c->close_after_flush = true;
        if (it) {
            mc_rpcs_push_out(io, c, it);
            if (io->batch_conn == c)
                mc_rpcs_flush(io, c);
            return;
        }
    }
    mc_rpcs_conn_close(io, c, "protocol error");
}

/* Parses and dispatches every complete frame in the read buffer. */
static void process_input(struct io_thread *io, struct conn *c)
{
    struct mc_rpc_server *s = io->srv;
    while (!c->closed && !c->in_body && !c->close_after_flush && !c->out_paused) {
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
        struct mc_rpcs_gate_reply gr;
        if (c->gate != MC_GATE_OPEN && mc_rpcs_gate_header(s, c, &h, &gr)) {
            c->rpos = c->rlen; /* the body is never read */
            gate_answer(io, c, &h, &gr);
            break;
        }
        size_t total = MC_WIRE_HEADER_SIZE + (size_t)h.body_length;
        if (avail >= total) {
            const uint8_t *src = c->rbuf + c->rpos + MC_WIRE_HEADER_SIZE;
            c->rpos += total; /* the bytes stay put until the next read: dispatch copies them */
            dispatch(io, c, &h, NULL, src);
            continue;
        }
        if (total <= RBUF_SIZE)
            break; /* wait for the rest in the read buffer */
        /* A large body: copy what we have and read the rest straight into it. The buffer is
         * sized by the bytes that arrived (here and in the socket; BODY_MIN_CHUNK at least)
         * and grows as more arrive. Allocating ahead of the bytes (up to BODY_FIRST_CHUNK,
         * so a 1 MiB slice needs one buffer and no copy) is allowed only while the server's
         * bytes allocated ahead stay within body_ahead_bytes: a header's claim alone can
         * never make the server allocate more than that in all. */
        size_t have = avail - MC_WIRE_HEADER_SIZE;
        size_t arrived = have + mc_rpcs_queued(c);
        size_t cap = arrived < BODY_MIN_CHUNK ? BODY_MIN_CHUNK : arrived;
        size_t ahead_want = h.body_length < BODY_FIRST_CHUNK ? h.body_length : BODY_FIRST_CHUNK;
        c->body_ahead = 0;
        if (ahead_want > cap) {
            uint64_t ahead = ahead_want - arrived;
            if (atomic_fetch_add(&s->body_ahead_bytes, ahead) + ahead <= s->cfg.body_ahead_bytes) {
                cap = ahead_want;
                c->body_ahead = ahead;
            } else {
                atomic_fetch_sub(&s->body_ahead_bytes, ahead);
            }
        }
        if (cap > h.body_length)
            cap = h.body_length;
        uint8_t *body = mc_rpcs_body_alloc(s->bodies, cap);
        if (!body) {
            mc_rpcs_conn_close(io, c, "out of memory");
            return;
        }
        memcpy(body, c->rbuf + c->rpos + MC_WIRE_HEADER_SIZE, have);
        c->cur = h;
        c->body = body;
        c->body_got = have;
        c->body_cap = cap;
        c->in_body = true;
        atomic_fetch_add(&s->bodies_receiving, 1);
        atomic_fetch_add(&s->body_bytes_buffered, cap);
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

/* A large body is complete, or its connection closed: it no longer counts as buffered. */
static void body_done(struct mc_rpc_server *s, struct conn *c)
{
    atomic_fetch_sub(&s->bodies_receiving, 1);
    atomic_fetch_sub(&s->body_bytes_buffered, c->body_cap);
    atomic_fetch_sub(&s->body_ahead_bytes, c->body_ahead);
    c->body_cap = 0;
    c->body_ahead = 0;
}

/* The body buffer is full but the frame is not: doubles it, or more when more bytes wait in
 * the socket (up to the frame's length). */
static bool body_grow(struct mc_rpc_server *s, struct conn *c)
{
    size_t want = c->body_cap * 2;
    size_t queued = c->body_got + mc_rpcs_queued(c);
    if (want < queued)
        want = queued;
    if (want > c->cur.body_length)
        want = c->cur.body_length;
    uint8_t *nb = mc_rpcs_body_alloc(s->bodies, want);
    if (!nb)
        return false;
    memcpy(nb, c->body, c->body_got);
    mc_rpcs_body_free(c->body);
    atomic_fetch_add(&s->body_bytes_buffered, want - c->body_cap);
    c->body = nb;
    c->body_cap = want;
    return true;
}

/* Reads c's socket and processes what came. pre >= 0 or -errno: the result of a read of
 * RBUF_SIZE - rlen bytes into the read buffer already made for this event (ring_read_round);
 * PRE_NONE: none made. */
#define PRE_NONE INT32_MIN
static void conn_read(struct io_thread *io, struct conn *c, int pre)
{
    io->batch_conn = c;
    /* bytes already read are taken even if a call of another connection paused c since */
    for (int round = 0; round < READS_PER_EVENT && !c->closed &&
                        (pre != PRE_NONE || (!c->paused && !c->out_paused));
         round++) {
        ssize_t n;
        size_t want;
        if (pre != PRE_NONE) { /* read already, straight into the read buffer */
            want = RBUF_SIZE - c->rlen;
            n = pre < 0 ? -1 : pre;
            if (pre < 0)
                errno = -pre;
            pre = PRE_NONE;
            goto got;
        }
        if (!c->in_body && c->rlen == RBUF_SIZE)
            break; /* only whole frames waiting for dispatch can fill it; never read 0 bytes */
        if (c->in_body && c->body_got == c->body_cap) {
            uint8_t probe;
            if (!mc_rpcs_queued(c)) { /* grow when more bytes are there, not ahead of them */
                ssize_t p = recv(c->fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
                if (p == 0 ||
                    (p < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                    mc_rpcs_conn_close(io, c, p == 0 ? "peer closed mid-frame" : "read failed");
                    break;
                }
                if (p < 0)
                    break;
            }
            if (!body_grow(io->srv, c)) {
                mc_rpcs_conn_close(io, c, "out of memory");
                break;
            }
        }
        if (c->in_body) {
            want = c->body_cap - c->body_got;
            n = mc_rpcs_read(io->srv, c, c->body + c->body_got, want);
        } else {
            want = RBUF_SIZE - c->rlen;
            n = mc_rpcs_read(io->srv, c, c->rbuf + c->rlen, want);
        }
    got:
        if (n == 0) {
            bool mid = c->in_body || c->rlen > c->rpos;
            mc_rpcs_conn_close(io, c, mid ? "peer closed mid-frame" : "peer closed");
            break;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                mc_rpcs_conn_close(io, c, errno == EPROTO ? "TLS error" : "read failed");
            break;
        }
        c->last_active_ms = mc_now_ms();
        if (c->in_body) {
            c->body_got += (size_t)n;
            if (c->body_got == c->cur.body_length) {
                uint8_t *body = c->body;
                c->body = NULL;
                c->in_body = false;
                body_done(io->srv, c);
                dispatch(io, c, &c->cur, body, NULL);
            }
        } else {
            c->rlen += (size_t)n;
        }
        process_input(io, c);
        /* A short read took all the socket had: the next read would only say EAGAIN (one
         * wasted syscall per request); epoll (level-triggered) reports the bytes that come, and
         * what a TLS session holds decrypted is read by tls_catch_up (tls_more below). */
        if ((size_t)n < want)
            break;
    }
    io->batch_conn = NULL;
    if (!c->closed)
        mc_rpcs_defer_flush(io, c); /* written with the round's others (rpc_server_out.c) */
    if (!c->closed && c->out_paused && c->out_bytes <= io->srv->cfg.out_soft_bytes / 2)
        conn_resume(io, c);
    io->tls_more |= !c->closed && mc_rpcs_has_pending(c); /* epoll will not say */
}

static void conn_on_readable(struct io_thread *io, struct conn *c)
{
    conn_read(io, c, PRE_NONE);
}

/* Whether c's next read goes into its read buffer and may be made through the ring. */
static bool ring_readable(const struct conn *c)
{
    return !c->closed && !c->tls && !c->in_body && !c->paused && !c->out_paused &&
           !c->close_after_flush && c->rlen < RBUF_SIZE;
}

/*
 * The reads of one round in one submission. The plain connections epoll reported readable are
 * read together through the thread's ring (one io_uring_enter instead of one read(2) each) and
 * processed at once, in the order epoll gave, before the round's other events: nothing else
 * touches their read buffers between the submission and the processing. Those events are then
 * marked done (data.ptr NULL) for the loop, unless they also asked for output. A round with
 * fewer than two such connections, TLS connections and connections in the middle of a large
 * body read the ordinary way.
 */
static void ring_read_round(struct io_thread *io, struct epoll_event *evs, int n)
{
    struct mc_rpc_server *s = io->srv;
    struct conn *cs[MC_RPCS_RING_READS];
    void *bufs[MC_RPCS_RING_READS];
    size_t lens[MC_RPCS_RING_READS];
    int res[MC_RPCS_RING_READS], at[MC_RPCS_RING_READS];
    int k = 0;
    if (!io->ring || n < 2)
        return;
    for (int i = 0; i < n && k < MC_RPCS_RING_READS; i++) {
        void *p = evs[i].data.ptr;
        if (p == &s->lfd || p == io || !(evs[i].events & EPOLLIN) ||
            (evs[i].events & (EPOLLHUP | EPOLLERR)) || !ring_readable(p))
            continue;
        struct conn *c = p;
        cs[k] = c;
        bufs[k] = c->rbuf + c->rlen;
        lens[k] = RBUF_SIZE - c->rlen;
        at[k++] = i;
    }
    if (k < 2 || !mc_rpcs_ring_recv(io, cs, bufs, lens, k, res))
        return;
    for (int j = 0; j < k; j++) {
        struct conn *c = cs[j];
        struct epoll_event *ev = &evs[at[j]];
        if (c->closed) /* by a call of an earlier one: the bytes go with it */
            ev->data.ptr = NULL;
        else
            conn_read(io, c, res[j]);
        ev->events &= ~(uint32_t)EPOLLIN;
        if (!(ev->events & EPOLLOUT))
            ev->data.ptr = NULL;
    }
}

/* Reads what TLS sessions hold decrypted, which no socket event announces. */
static void tls_catch_up(struct io_thread *io)
{
    io->tls_more = false;
    for (struct conn *c = io->conns, *next; c; c = next) {
        next = c->next;
        if (!c->paused && !c->out_paused && mc_rpcs_has_pending(c))
            conn_on_readable(io, c);
    }
}

/* ---- connections ------------------------------------------------------------------------- */

void mc_rpcs_conn_close(struct io_thread *io, struct conn *c, const char *why)
{
    if (c->closed)
        return;
    struct mc_rpc_server *s = io->srv;
    c->closed = true;
    atomic_store_explicit(&c->gone, true, memory_order_release);
    if (io->batch_conn == c)
        io->batch_conn = NULL;
    epoll_ctl(io->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    mc_rpcs_tls_detach(c);
    mc_rpcs_gate_closed(s, c);
    if (c->in_body)
        body_done(s, c);
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
    atomic_fetch_sub(&s->out_bytes_queued, (int64_t)c->out_bytes);
    c->out_bytes = 0;
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
    c->attach_ms = c->last_active_ms = mc_now_ms(); /* the handshake deadline starts here */
    c->events = EPOLLIN;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(io->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        mc_error(io->srv->name, "epoll_ctl add failed", "errno=%d", errno);
        mc_rpcs_gate_closed(io->srv, c);
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

/*
 * Accepting when accept4 fails. The listener is level-triggered: a pending connection the
 * process cannot take (EMFILE, ENFILE, ENOBUFS, ENOMEM) wakes the loop again at once, which
 * spun a core and wrote a log line per wake-up. Instead the listener leaves the epoll set for
 * ACCEPT_PAUSE_MS (open connections keep being served meanwhile; new ones wait in the kernel's
 * backlog) and the failure is logged at most once per ACCEPT_LOG_MS, with the count of the
 * failures not logged.
 */
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_LOG_MS 1000

static void accept_failed(struct io_thread *io0, int err)
{
    struct mc_rpc_server *s = io0->srv;
    uint64_t now = mc_now_ms();
    bool pause = err != ECONNABORTED && err != EPROTO && err != EPERM;
    if (pause && epoll_ctl(io0->epfd, EPOLL_CTL_DEL, s->lfd, NULL) == 0)
        io0->accept_resume_ms = now + ACCEPT_PAUSE_MS;
    if (io0->accept_log_ms && now - io0->accept_log_ms < ACCEPT_LOG_MS) {
        io0->accept_suppressed++;
        return;
    }
    mc_warn(s->name, pause ? "accept failed, pausing accepts" : "accept failed",
            "errno=%d pause_ms=%d conns_open=%llu not_logged=%llu", err,
            pause ? ACCEPT_PAUSE_MS : 0, (unsigned long long)atomic_load(&s->conns_open),
            (unsigned long long)io0->accept_suppressed);
    io0->accept_log_ms = now;
    io0->accept_suppressed = 0;
}

/* Puts the listener back into thread 0's epoll set once its pause is over; returns the
 * epoll_wait timeout to use until then (-1: none). */
static int accept_resume(struct io_thread *io)
{
    if (!io->accept_resume_ms)
        return -1;
    uint64_t now = mc_now_ms();
    if (now < io->accept_resume_ms)
        return (int)(io->accept_resume_ms - now);
    struct mc_rpc_server *s = io->srv;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &s->lfd};
    if (epoll_ctl(io->epfd, EPOLL_CTL_ADD, s->lfd, &ev) != 0) {
        mc_error(s->name, "cannot resume accepting", "errno=%d", errno);
        io->accept_resume_ms = now + ACCEPT_PAUSE_MS;
        return ACCEPT_PAUSE_MS;
    }
    io->accept_resume_ms = 0;
    return -1;
}

static void do_accept(struct io_thread *io0)
{
    struct mc_rpc_server *s = io0->srv;
    for (int i = 0; i < 256; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                accept_failed(io0, errno);
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
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        /* refusals (protected mode, per-address and handshake limits) cost nothing more */
        if (!mc_rpcs_gate_admit(s, c, (struct sockaddr *)&ss, sl)) {
            close(fd);
            free(c);
            continue;
        }
        uint8_t *rbuf = malloc(RBUF_SIZE);
        if (!rbuf || !mc_rpcs_tls_attach(s, c)) {
            free(rbuf);
            mc_rpcs_gate_closed(s, c);
            close(fd);
            free(c);
            continue;
        }
        c->rbuf = rbuf;
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
            mc_rpcs_gate_closed(s, c);
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
void mc_rpcs_drain_queue(struct io_thread *io, bool close_queue)
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
            mc_rpcs_gate_closed(io->srv, nc);
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
        if (!c->closed && (c->paused || c->out_paused))
            conn_resume(io, c);
        conn_unref(c);
        q = next;
    }
}

static void stop_thread(struct io_thread *io)
{
    struct mc_rpc_server *s = io->srv;
    mc_rpcs_drain_queue(io, true);
    /* answer parked calls, then flush what the sockets take within a short deadline */
    struct conn *next;
    for (struct conn *c = io->conns; c; c = next) {
        next = c->next;
        for (struct mc_rpc_call *call = c->calls; call; call = call->lnext) {
            int expect = CALL_PENDING;
            if (!atomic_compare_exchange_strong(&call->state, &expect, CALL_DONE))
                continue;
            struct out_item *it = mc_rpcs_frame_new(call->method, call->id,
                                                    MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS, NULL, 0);
            if (it)
                mc_rpcs_out_append(io, c, it);
        }
        c->paused = true;
        mc_rpcs_flush(io, c);
    }
    uint64_t deadline = mc_now_ms() + STOP_FLUSH_MS;
    for (;;) {
        bool pending = false;
        for (struct conn *c = io->conns; c; c = next) {
            next = c->next;
            if (!c->closed && c->out_head) {
                mc_rpcs_flush(io, c);
                pending = pending || (!c->closed && c->out_head);
            }
        }
        if (!pending || mc_now_ms() >= deadline)
            break;
        struct epoll_event evs[16];
        epoll_wait(io->epfd, evs, 16, 10);
    }
    while (io->conns)
        mc_rpcs_conn_close(io, io->conns, "server stopping");
    (void)s;
}

/* How often the idle and handshake timeouts are checked. */
static uint64_t sweep_interval_ms(const struct mc_rpc_server *s)
{
    uint64_t ms = SWEEP_MS;
    if (s->cfg.idle_timeout_ms && s->cfg.idle_timeout_ms / 2 < ms)
        ms = s->cfg.idle_timeout_ms / 2;
    if (s->cfg.handshake_timeout_ms && s->cfg.handshake_timeout_ms / 2 < ms)
        ms = s->cfg.handshake_timeout_ms / 2;
    return ms < 10 ? 10 : ms;
}

/* Closes this thread's connections that idled too long or never finished the handshake. */
static void sweep(struct io_thread *io)
{
    struct mc_rpc_server *s = io->srv;
    uint64_t now = mc_now_ms();
    if (now < io->next_sweep_ms)
        return;
    io->next_sweep_ms = now + sweep_interval_ms(s);
    struct conn *next;
    for (struct conn *c = io->conns; c; c = next) {
        next = c->next;
        const char *why = c->closed ? NULL : mc_rpcs_gate_expired(s, c, now);
        if (!why)
            continue;
        atomic_fetch_add(&s->idle_closed, 1);
        mc_info(s->name, "closing connection", "peer=%s conn=%llu reason=\"%s\"", c->peer,
                (unsigned long long)c->id, why);
        mc_rpcs_conn_close(io, c, why);
    }
    atomic_fetch_add(&s->idle_sweeps, 1);
}

/* The epoll timeout: the sooner of the accept resume and the next sweep. */
static int loop_timeout(struct io_thread *io)
{
    int t = io->tls_more ? 0 : accept_resume(io);
    uint64_t now = mc_now_ms();
    if (!io->next_sweep_ms)
        io->next_sweep_ms = now + sweep_interval_ms(io->srv);
    int sw = io->next_sweep_ms > now ? (int)(io->next_sweep_ms - now) : 0;
    return t < 0 || sw < t ? sw : t;
}

void *mc_rpcs_io_main(void *arg)
{
    struct io_thread *io = arg;
    struct mc_rpc_server *s = io->srv;
    tls_io = io;
    mc_log_set_current(s->logger);
    struct epoll_event evs[64];
    mc_rpcs_ring_init(io);
    while (!atomic_load(&s->stopping)) {
        int n = epoll_wait(io->epfd, evs, 64, loop_timeout(io));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            mc_error(s->name, "epoll_wait failed", "errno=%d", errno);
            break;
        }
        io->in_round = true;
        ring_read_round(io, evs, n);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (!p)
                continue; /* read through the ring */
            if (p == &s->lfd) {
                do_accept(io);
            } else if (p == io) {
                mc_rpcs_drain_queue(io, false);
            } else {
                struct conn *c = p; /* valid until bury(), even if closed in this round */
                if (!c->closed && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                    conn_on_readable(io, c);
                if (!c->closed && (evs[i].events & EPOLLOUT)) {
                    if (mc_rpcs_wants_write(c))
                        conn_on_readable(io, c); /* the TLS handshake goes on */
                    mc_rpcs_flush(io, c);
                    if (!c->closed && c->out_paused)
                        conn_resume(io, c);
                }
                if (!c->closed && (evs[i].events & (EPOLLHUP | EPOLLERR)) && c->paused)
                    mc_rpcs_conn_close(io, c, "hangup");
            }
        }
        if (io->tls_more)
            tls_catch_up(io);
        io->in_round = false;
        mc_rpcs_flush_round(io);
        sweep(io);
        bury(io);
    }
    mc_rpcs_flush_round(io); /* a round cut short by an epoll error */
    stop_thread(io);
    bury(io);
    mc_rpcs_ring_free(io);
    tls_io = NULL;
    return NULL;
}

/* ---- test hook: a byte stream fed to a server that is not started ------------------------- */

#ifdef MC_TEST_HOOKS
#include <sys/un.h>

/* Sends b[0..n) into *fd as far as it takes; returns bytes sent. */
static size_t feed_some(int fd, const uint8_t *b, size_t n)
{
    ssize_t w = n ? send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
    return w > 0 ? (size_t)w : 0;
}

static void drain_replies(int fd)
{
    uint8_t sink[16384];
    while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
        ;
}

int mc_rpc_server_test_feed(struct mc_rpc_server *s, const uint8_t *data, size_t len)
{
    if (!s || s->started)
        return MC_ERR_INVALID_PARAMS;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return MC_ERR_INTERNAL_ERROR;
    struct io_thread *io = &s->io[0];
    struct conn *c = calloc(1, sizeof(*c));
    uint8_t *rbuf = c ? malloc(RBUF_SIZE) : NULL;
    if (!c || !rbuf) {
        free(c);
        free(rbuf);
        close(sv[0]);
        close(sv[1]);
        return MC_ERR_INTERNAL_ERROR;
    }
    c->rbuf = rbuf;
    c->fd = sv[0];
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) != 0 ||
        !mc_rpcs_gate_admit(s, c, (struct sockaddr *)&ss, sl)) {
        free(c);
        free(rbuf);
        close(sv[0]);
        close(sv[1]);
        return MC_ERR_INTERNAL_ERROR;
    }
    atomic_init(&c->refs, 2); /* the I/O side's, and ours until the end */
    c->id = atomic_fetch_add(&s->next_conn_id, 1) + 1;
    atomic_fetch_add(&s->conns_open, 1);
    struct io_thread *saved = tls_io;
    tls_io = io; /* completions on this thread are synchronous */
    conn_attach(io, c);
    size_t off = 0;
    int idle_rounds = 0;
    while (!c->closed && idle_rounds < 4) {
        size_t w = feed_some(sv[1], data + off, len - off);
        off += w;
        if (off == len)
            shutdown(sv[1], SHUT_WR); /* the peer is done: EOF after the last byte */
        bool was_paused = c->paused;
        conn_on_readable(io, c);
        if (!c->closed)
            mc_rpcs_flush(io, c);
        drain_replies(sv[1]);
        mc_rpcs_drain_queue(io, false);
        idle_rounds = (w == 0 && (was_paused || c->paused)) || off == len ? idle_rounds + 1 : 0;
    }
    if (!c->closed)
        mc_rpcs_conn_close(io, c, "test feed done");
    bury(io);
    tls_io = saved;
    conn_unref(c);
    close(sv[1]);
    return 0;
}
#endif
