/*
 * rpc_server_out.c - the RPC server's output side (see rpc_server_internal.h for the split):
 * a connection's reply queue, its limits, its writes, and the writes of one epoll round made
 * together.
 *
 * One round, one submission. The I/O loop handles every event epoll_wait returned; a plain
 * (non-TLS) connection whose requests were answered during that handling is not written at
 * once but queued (mc_rpcs_defer_flush), and at the end of the round every queued connection's
 * replies go out as one sendmsg each in a single io_uring submission (MSG_DONTWAIT: a socket
 * that cannot take them all completes at once with what it took, and the rest is left to
 * mc_rpcs_flush, which polls for EPOLLOUT as before). N connections answered in a round thus
 * cost one syscall instead of N. A round with one connection, a TLS connection, or a thread
 * without a ring (io_uring unavailable) writes with sendmsg(2) as before. Replies keep their
 * order per connection (they leave their queue in order, whichever call writes them).
 */
#include <errno.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/rpc_server_internal.h"

#define MAX_IOV 64
#define RING_BATCH 64 /* connections per submission */
#define RING_IOV 16   /* iovecs per connection in a batched write (the rest: mc_rpcs_flush) */

struct mc_rpcs_ring {
    struct io_uring ring;
    struct conn *conn[RING_BATCH];
    struct msghdr mh[RING_BATCH];
    struct iovec iov[RING_BATCH][RING_IOV];
};

void mc_rpcs_set_events(struct io_thread *io, struct conn *c)
{
    /* out_paused polls for output even with an empty queue: the loop then resumes reading */
    uint32_t want = (c->paused || c->out_paused ? 0 : EPOLLIN) |
                    (c->out_head || c->out_paused || mc_rpcs_wants_write(c) ? EPOLLOUT : 0);
    io->tls_more |= !c->closed && (want & EPOLLIN) && mc_rpcs_has_pending(c); /* no event */
    if (c->closed || want == c->events)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    if (epoll_ctl(io->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->events = want;
}

/* The queue's first bytes as at most max iovecs. */
static int out_iov(const struct conn *c, struct iovec *iov, int max)
{
    int n = 0;
    for (const struct out_item *it = c->out_head; it && n < max; it = it->next)
        for (int i = it->idx; i < it->niov && n < max; i++)
            if (it->iov[i].iov_len)
                iov[n++] = it->iov[i];
    return n;
}

/* w bytes of the queue were written: counts them and frees the items written whole. */
static void out_wrote(struct io_thread *io, struct conn *c, size_t w)
{
    if (w > 0) {
        c->last_active_ms = c->last_write_ms = mc_now_ms();
        c->out_bytes -= w;
        atomic_fetch_sub(&io->srv->out_bytes_queued, (int64_t)w);
    }
    size_t left = w;
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

void mc_rpcs_flush(struct io_thread *io, struct conn *c)
{
    while (!c->closed && c->out_head) {
        struct iovec iov[MAX_IOV];
        int n = out_iov(c, iov, MAX_IOV);
        ssize_t w = n ? mc_rpcs_send(c, iov, n) : 0;
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == EINTR)
                continue;
            mc_warn(io->srv->name, "write failed", "conn=%llu errno=%d", (unsigned long long)c->id,
                    errno);
            mc_rpcs_conn_close(io, c, "write failed");
            return;
        }
        out_wrote(io, c, (size_t)w);
    }
    if (c->closed)
        return;
    if (!c->out_head && c->close_after_flush) {
        mc_rpcs_conn_close(io, c, "protocol error");
        return;
    }
    mc_rpcs_set_events(io, c);
}

void mc_rpcs_out_append(struct io_thread *io, struct conn *c, struct out_item *it)
{
    size_t n = 0;
    for (int i = it->idx; i < it->niov; i++)
        n += it->iov[i].iov_len;
    it->next = NULL;
    if (c->out_tail)
        c->out_tail->next = it;
    else
        c->out_head = it;
    if (!c->out_tail)
        c->last_write_ms = mc_now_ms(); /* the queue's stall clock starts now */
    c->out_tail = it;
    c->out_bytes += n;
    atomic_fetch_add(&io->srv->out_bytes_queued, (int64_t)n);
}

bool mc_rpcs_out_limits(struct io_thread *io, struct conn *c)
{
    struct mc_rpc_server *s = io->srv;
    if (c->out_bytes > s->cfg.out_hard_bytes && c->out_head != c->out_tail) {
        atomic_fetch_add(&s->out_closed_total, 1);
        mc_warn(s->name, "replies not read: output buffer over its hard limit, closing",
                "peer=%s conn=%llu queued=%zu hard_limit=%llu", c->peer, (unsigned long long)c->id,
                c->out_bytes, (unsigned long long)s->cfg.out_hard_bytes);
        mc_rpcs_conn_close(io, c, "output buffer over its hard limit");
        return false;
    }
    if (!c->out_paused && c->out_bytes > s->cfg.out_soft_bytes) {
        c->out_paused = true;
        atomic_fetch_add(&s->out_paused_total, 1);
        mc_debug(s->name, "replies piling up: not reading requests until they drain",
                 "peer=%s conn=%llu queued=%zu", c->peer, (unsigned long long)c->id, c->out_bytes);
    }
    return true;
}

void mc_rpcs_push_out(struct io_thread *io, struct conn *c, struct out_item *it)
{
    if (c->closed) {
        item_free(it);
        return;
    }
    mc_rpcs_out_append(io, c, it);
    if (!mc_rpcs_out_limits(io, c))
        return;
    if (io->batch_conn != c)
        mc_rpcs_defer_flush(io, c); /* a completion handed over in a round: with the others */
}

/* ---- a round's writes in one submission ------------------------------------------------- */

void mc_rpcs_ring_init(struct io_thread *io)
{
    struct mc_rpcs_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return;
    unsigned flags = 0;
#ifdef IORING_SETUP_SINGLE_ISSUER
    flags |= IORING_SETUP_SINGLE_ISSUER; /* only this I/O thread submits */
#endif
#ifdef IORING_SETUP_COOP_TASKRUN
    flags |= IORING_SETUP_COOP_TASKRUN;
#endif
    int rc = io_uring_queue_init(2 * RING_BATCH, &r->ring, flags);
    if (rc < 0 && flags)
        rc = io_uring_queue_init(2 * RING_BATCH, &r->ring, 0); /* an older kernel */
    if (rc < 0) {
        mc_info(io->srv->name, "io_uring unavailable: replies written one sendmsg each", "errno=%d",
                -rc);
        free(r);
        return;
    }
    io->ring = r;
}

void mc_rpcs_ring_free(struct io_thread *io)
{
    if (!io->ring)
        return;
    io_uring_queue_exit(&io->ring->ring);
    free(io->ring);
    io->ring = NULL;
}

void mc_rpcs_defer_flush(struct io_thread *io, struct conn *c)
{
    if (c->closed || c->fqueued)
        return;
    if (!io->in_round || !io->ring || c->tls || c->out_paused || c->close_after_flush ||
        !c->out_head) {
        mc_rpcs_flush(io, c);
        return;
    }
    c->fqueued = true;
    atomic_fetch_add(&c->refs, 1); /* until the round's writes are done */
    c->fnext = io->flushq;
    io->flushq = c;
}

/* After a batched write of c that returned res: counts what went, then writes the rest (or
 * polls for room) the ordinary way. */
static void ring_done(struct io_thread *io, struct conn *c, int res)
{
    if (c->closed)
        return;
    if (res > 0)
        out_wrote(io, c, (size_t)res);
    /* an error is met again by sendmsg, which logs it and closes; EAGAIN polls for room */
    mc_rpcs_flush(io, c);
}

/* Writes up to RING_BATCH queued connections in one submission. */
static void ring_batch(struct io_thread *io)
{
    struct mc_rpcs_ring *r = io->ring;
    struct conn *batch[RING_BATCH];
    int n = 0;
    while (io->flushq && n < RING_BATCH) {
        struct conn *c = io->flushq;
        io->flushq = c->fnext;
        c->fnext = NULL;
        c->fqueued = false;
        if (c->closed || !c->out_head) {
            conn_unref(c);
            continue;
        }
        batch[n++] = c;
    }
    int res[RING_BATCH];
    bool got[RING_BATCH] = {false};
    bool drop = false;
    if (n > 1) {
        for (int i = 0; i < n; i++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
            memset(&r->mh[i], 0, sizeof(r->mh[i]));
            r->mh[i].msg_iov = r->iov[i];
            r->mh[i].msg_iovlen = (size_t)out_iov(batch[i], r->iov[i], RING_IOV);
            io_uring_prep_sendmsg(sqe, batch[i]->fd, &r->mh[i], MSG_NOSIGNAL | MSG_DONTWAIT);
            io_uring_sqe_set_data64(sqe, (uint64_t)i);
        }
        int submitted;
        do
            submitted = io_uring_submit(&r->ring);
        while (submitted == -EINTR || submitted == -EAGAIN || submitted == -EBUSY);
        if (submitted < 0) {
            mc_warn(io->srv->name, "io_uring submit failed: replies written one sendmsg each",
                    "errno=%d", -submitted);
            drop = true; /* the ring goes, its unsubmitted entries with it */
            submitted = 0;
        }
        for (int k = 0; k < submitted;) {
            struct io_uring_cqe *cqe = NULL;
            int rc = io_uring_wait_cqe(&r->ring, &cqe); /* MSG_DONTWAIT: done in the submit */
            if (rc == -EINTR)
                continue;
            if (rc < 0)
                break;
            uint64_t i = io_uring_cqe_get_data64(cqe);
            if (i < (uint64_t)n) {
                res[i] = cqe->res;
                got[i] = true;
            }
            io_uring_cqe_seen(&r->ring, cqe);
            k++;
        }
    }
    for (int i = 0; i < n; i++) {
        if (n == 1 || !got[i])
            mc_rpcs_flush(io, batch[i]);
        else
            ring_done(io, batch[i], res[i]);
        conn_unref(batch[i]);
    }
    if (drop)
        mc_rpcs_ring_free(io);
}

/* ---- a round's reads in one submission (for rpc_server_conn.c) --------------------------- */

bool mc_rpcs_ring_recv(struct io_thread *io, struct conn *const *c, void *const *bufs,
                       const size_t *lens, int n, int *res)
{
    struct mc_rpcs_ring *r = io->ring;
    /* the ring is empty between rounds, so there is room; a read prepared and not taken
     * would lose its bytes, hence the check before preparing any */
    if (!r || n <= 0 || n > MC_RPCS_RING_READS || io_uring_sq_space_left(&r->ring) < (unsigned)n)
        return false;
    for (int i = 0; i < n; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
        /* MSG_DONTWAIT: an empty socket completes at once with -EAGAIN, never waits */
        io_uring_prep_recv(sqe, c[i]->fd, bufs[i], lens[i], MSG_DONTWAIT);
        io_uring_sqe_set_data64(sqe, (uint64_t)i);
        res[i] = -EAGAIN;
    }
    int submitted;
    do
        submitted = io_uring_submit(&r->ring);
    while (submitted == -EINTR || submitted == -EAGAIN || submitted == -EBUSY);
    if (submitted < 0) {
        mc_warn(io->srv->name, "io_uring submit failed: requests read one read(2) each", "errno=%d",
                -submitted);
        mc_rpcs_ring_free(io); /* the ring goes, its unsubmitted entries with it */
        return false;
    }
    for (int k = 0; k < submitted;) {
        struct io_uring_cqe *cqe = NULL;
        int rc = io_uring_wait_cqe(&r->ring, &cqe); /* MSG_DONTWAIT: done in the submit */
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            break;
        uint64_t i = io_uring_cqe_get_data64(cqe);
        if (i < (uint64_t)n)
            res[i] = cqe->res;
        io_uring_cqe_seen(&r->ring, cqe);
        k++;
    }
    return true;
}

void mc_rpcs_flush_round(struct io_thread *io)
{
    while (io->flushq) {
        if (io->ring) {
            ring_batch(io);
            continue;
        }
        struct conn *c = io->flushq;
        io->flushq = c->fnext;
        c->fnext = NULL;
        c->fqueued = false;
        mc_rpcs_flush(io, c);
        conn_unref(c);
    }
}
