/*
 * transport_rdma.c - the RDMA transport's vtable, peer pools and staging buffer (transport.h;
 * connections in rdma_conn.c, the transfer itself in rdma_xfer.c).
 *
 * Per peer endpoint the transport keeps a stack of idle queue pairs (at most max_idle_per_peer).
 * A transfer takes one or dials a new one (lazily: the first transfer to a peer connects), owns
 * it for the transfer, and gives it back only when every completion was a success. A queue pair
 * that saw an error is destroyed at once (counted in teardowns); the next transfer to that peer
 * dials a fresh one. A pooled queue pair with an event pending (its peer disconnected) is
 * replaced before use; one that fails before any slice completed (a peer that vanished without
 * a word) is retried once on a fresh queue pair, as the tcp transport does with a stale pooled
 * connection. Any other failure is the caller's to handle (a Get tries the next replica, a Put
 * revokes).
 *
 * Mount epochs (DESIGN.md §6). One-sided verbs never reach the holder's peer server, so the
 * epoch check there cannot apply; the rkey stands in for it. The holder registers its segment
 * afresh when the master fences it for a re-mount (mc_transport_rdma_rereg_start, from the
 * client's epoch callback: a worker thread registers, so the ping thread goes on pinging; the
 * client holds the ReMountSegment back until the worker is done), before the ReMountSegment
 * that announces the new rkey, so every
 * descriptor of an earlier mount names a key the device no longer honours: the transfer fails
 * with a remote access error, reported as REPLICA_IS_GONE, and no byte moves. A descriptor
 * with epoch 0 (which no mount has) is refused before anything is posted.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/rdma_internal.h"
#include "client/transport.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define EP_MAX 128

struct peer {
    char endpoint[EP_MAX];
    struct rdma_conn **idle;
    uint32_t nidle;
    struct peer *next;
};

struct rdma_transport {
    struct mc_transport base;
    struct mc_rdma_transport_config cfg;
    struct rdma_ctx x;
    pthread_mutex_t lock; /* peers and the counters below */
    struct peer *peers;
    uint64_t connects, reuses, teardowns, temp_regs, stale, retries;
    struct rdma_xfer_stats xs;
    pthread_mutex_t staging_lock; /* the staging slots' free mask */
    pthread_cond_t staging_cond;  /* a slot was given back */
    uint64_t staging_free;        /* bit i: slot i (staging + i * staging_bytes) is free */
    uint8_t *staging;             /* staging_count slots, one registered range */
    char devices[256];            /* cfg.devices, copied */
    struct rereg {                /* the background re-registration (mc_transport_rdma_rereg_*) */
        pthread_mutex_t lock;
        pthread_t thread;
        bool joinable; /* thread was started and not joined yet */
        bool closing;  /* no new start: the owner is shutting down */
        enum { REREG_IDLE, REREG_PENDING, REREG_DONE } state;
        void *addr;
        int rc;
        uint32_t rkey;
        void (*done)(void *arg);
        void *arg;
    } rr;
};

void mc_rdma_transport_config_init(struct mc_rdma_transport_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->connect_timeout_ms = 3000;
    cfg->io_timeout_ms = 5000;
    cfg->slice_bytes = 64u << 10;
    cfg->window = 32;
    cfg->staging_bytes = 4u << 20;
    cfg->staging_count = 4;
    cfg->ack_timeout = 14;
    cfg->cq_spin_polls = 128;
    /* a queue pair per thread that may talk to one peer at once: the CPUs, within [4, 64] */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->max_idle_per_peer = cpus < 4 ? 4 : cpus > 64 ? 64 : (uint32_t)cpus;
}

/* ---- pool --------------------------------------------------------------------------------- */

static struct peer *peer_find(struct rdma_transport *t, const char *endpoint, bool create)
{
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
    return p;
}

/* Takes a pooled connection (unless fresh) or dials one; *reused says which. A pooled one with
 * an event pending on its channel (the peer disconnected, the device went away: nothing else
 * arrives on an established connection) is destroyed and replaced before any work is posted. */
static int conn_take(struct rdma_transport *t, const char *endpoint, bool fresh,
                     struct rdma_conn **out, bool *reused)
{
    struct rdma_conn *c = NULL;
    *reused = false;
    while (!fresh) {
        rdma_leaf_lock(&t->lock);
        struct peer *p = peer_find(t, endpoint, false);
        c = p && p->nidle ? p->idle[--p->nidle] : NULL;
        rdma_leaf_unlock(&t->lock);
        if (!c)
            break;
        struct rdma_cm_event *ev = NULL;
        if (mc_rdma_conn_stale(&t->x, c)) {
            mc_info("rdma", "pooled queue pair predates a device error event, replaced",
                    "endpoint=%s", endpoint);
        } else if (t->x.ops->get_cm_event(c->ech, -1, 0, &ev) == 1) {
            rdma_leaf_lock(&t->lock);
            t->reuses++;
            rdma_leaf_unlock(&t->lock);
            *reused = true;
            break;
        }
        if (ev) {
            mc_info("rdma", "pooled queue pair lost its peer, replaced", "endpoint=%s event=%s",
                    endpoint, rdma_event_str(ev->event));
            t->x.ops->ack_cm_event(ev);
        }
        rdma_leaf_lock(&t->lock);
        t->stale++;
        rdma_leaf_unlock(&t->lock);
        mc_rdma_conn_destroy(&t->x, c);
        c = NULL;
    }
    if (!c) {
        int rc = mc_rdma_conn_connect(&t->x, endpoint, t->cfg.client_id,
                                      (int)t->cfg.connect_timeout_ms, &c);
        if (rc)
            return rc;
        rdma_leaf_lock(&t->lock);
        t->connects++;
        rdma_leaf_unlock(&t->lock);
    }
    *out = c;
    return 0;
}

/* Pools a healthy connection, destroys a broken one. */
static void conn_give(struct rdma_transport *t, const char *endpoint, struct rdma_conn *c)
{
    if (c->broken) {
        rdma_leaf_lock(&t->lock);
        t->teardowns++;
        rdma_leaf_unlock(&t->lock);
        mc_info("rdma", "queue pair torn down after an error; the next transfer reconnects",
                "endpoint=%s", endpoint);
        mc_rdma_conn_destroy(&t->x, c);
        return;
    }
    rdma_leaf_lock(&t->lock);
    struct peer *p = peer_find(t, endpoint, true);
    if (p && p->nidle < t->cfg.max_idle_per_peer) {
        p->idle[p->nidle++] = c;
        c = NULL;
    }
    rdma_leaf_unlock(&t->lock);
    mc_rdma_conn_destroy(&t->x, c);
}

static void add_stats(struct rdma_transport *t, const struct rdma_xfer_stats *s)
{
    rdma_leaf_lock(&t->lock);
    t->xs.posted += s->posted;
    t->xs.completed += s->completed;
    t->xs.flushed += s->flushed;
    t->xs.errors += s->errors;
    t->xs.stray += s->stray;
    t->xs.empty_events += s->empty_events;
    rdma_leaf_unlock(&t->lock);
}

/* ---- transfers ---------------------------------------------------------------------------- */

/* One transfer on a connection already taken: local keys (registered range, else a temporary
 * registration on the connection's device, returned in *temp: the caller deregisters it only
 * after conn_give, because a broken queue pair must be destroyed before the memory a request it
 * never completed may still name), then the sliced run. */
static int run_on(struct rdma_transport *t, struct rdma_conn *c, bool is_write, uint8_t *buf,
                  uint64_t len, uint64_t remote, uint32_t rkey, struct ibv_mr **temp,
                  uint64_t *completed)
{
    struct rdma_op op = {.is_write = is_write,
                         .local = buf,
                         .remote = remote,
                         .rkey = rkey,
                         .len = len,
                         .spin_polls = (uint32_t)t->cfg.cq_spin_polls};
    if (mc_rdma_ctx_keys(&t->x, buf, len, c->dev, &op.lkey, NULL)) {
        if (!temp)
            return MC_ERR_INVALID_PARAMS;
        /* this process's own transfer only: the device writes a READ's destination, and only
         * reads a WRITE's source (which may then be read-only memory) */
        *temp = t->x.ops->reg_mr(t->x.pd[c->dev], buf, len,
                                 mc_rdma_access(is_write ? MC_RDMA_MR_SOURCE : MC_RDMA_MR_LOCAL));
        if (!*temp) {
            mc_warn("rdma", "cannot register the caller's buffer", "len=%llu errno=%d",
                    (unsigned long long)len, errno);
            return MC_ERR_TRANSFER_FAIL;
        }
        op.lkey = (*temp)->lkey;
        rdma_leaf_lock(&t->lock);
        t->temp_regs++;
        rdma_leaf_unlock(&t->lock);
    }
    struct rdma_xfer_stats s;
    memset(&s, 0, sizeof(s));
    int rc = mc_rdma_xfer_run(t->x.ops, c, &op, t->cfg.slice_bytes, t->cfg.window,
                              (int)t->cfg.io_timeout_ms, &s);
    add_stats(t, &s);
    if (completed)
        *completed = s.completed;
    return rc;
}

static int transfer(struct mc_transport *tp, bool is_write, const struct mc_xfer_loc *loc,
                    uint8_t *buf, size_t len)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    if (!loc || !loc->endpoint || strlen(loc->endpoint) >= EP_MAX || (len && !buf))
        return MC_ERR_INVALID_PARAMS;
    if (len == 0)
        return 0;
    if (!loc->rkey || !loc->remote_addr)
        return MC_ERR_INVALID_REPLICA; /* the descriptor carries no RDMA keys */
    if (!loc->mount_epoch)
        return MC_ERR_REPLICA_IS_GONE; /* no mount names epoch 0 (DESIGN.md §6) */
    for (int attempt = 0;; attempt++) {
        struct rdma_conn *c = NULL;
        bool reused = false;
        int rc = conn_take(t, loc->endpoint, attempt > 0, &c, &reused);
        if (rc)
            return rc;
        struct ibv_mr *temp = NULL;
        uint64_t completed = 0;
        rc = run_on(t, c, is_write, buf, len, loc->remote_addr, loc->rkey, &temp, &completed);
        conn_give(t, loc->endpoint, c);
        if (temp)
            t->x.ops->dereg_mr(temp);
        if (rc == MC_ERR_TRANSFER_FAIL && reused && completed == 0 && attempt == 0) {
            /* a pooled queue pair whose peer went away without telling us (restart, crash):
             * reads and writes of a range are idempotent, so once more on a fresh one */
            rdma_leaf_lock(&t->lock);
            t->retries++;
            rdma_leaf_unlock(&t->lock);
            continue;
        }
        if (rc == MC_ERR_REPLICA_IS_GONE)
            mc_warn("rdma",
                    "replica gone: the holder's device refused the descriptor's key (its segment "
                    "was re-mounted since the descriptor was issued)",
                    "endpoint=%s op=%s len=%zu rkey=%u mount_epoch=%llx", loc->endpoint,
                    is_write ? "write" : "read", len, loc->rkey,
                    (unsigned long long)loc->mount_epoch);
        else if (rc)
            mc_warn("rdma", "transfer failed", "endpoint=%s op=%s len=%zu", loc->endpoint,
                    is_write ? "write" : "read", len);
        return rc;
    }
}

/* ---- batches: every item of one endpoint on one queue pair, posted as one stream ---------- */

/* The items idx[0..m) of one endpoint; their statuses are set. */
static void batch_group(struct rdma_transport *t, bool is_write, struct mc_xfer_item *items,
                        const size_t *idx, size_t m, struct rdma_op *ops, struct ibv_mr **temps,
                        int *st)
{
    const char *ep = items[idx[0]].loc.endpoint;
    for (int attempt = 0;; attempt++) {
        struct rdma_conn *c = NULL;
        bool reused = false;
        int rc = conn_take(t, ep, attempt > 0, &c, &reused);
        if (rc) {
            for (size_t k = 0; k < m; k++)
                items[idx[k]].status = rc;
            return;
        }
        size_t nops = 0;
        for (size_t k = 0; k < m; k++) {
            struct mc_xfer_item *it = &items[idx[k]];
            struct rdma_op *op = &ops[nops];
            *op = (struct rdma_op){.is_write = is_write,
                                   .local = it->buf,
                                   .remote = it->loc.remote_addr,
                                   .rkey = it->loc.rkey,
                                   .len = it->len,
                                   .spin_polls = (uint32_t)t->cfg.cq_spin_polls};
            temps[nops] = NULL;
            if (mc_rdma_ctx_keys(&t->x, it->buf, it->len, c->dev, &op->lkey, NULL)) {
                temps[nops] = t->x.ops->reg_mr(
                    t->x.pd[c->dev], it->buf, it->len,
                    mc_rdma_access(is_write ? MC_RDMA_MR_SOURCE : MC_RDMA_MR_LOCAL));
                if (!temps[nops]) {
                    it->status = MC_ERR_TRANSFER_FAIL;
                    continue;
                }
                op->lkey = temps[nops]->lkey;
                rdma_leaf_lock(&t->lock);
                t->temp_regs++;
                rdma_leaf_unlock(&t->lock);
            }
            st[nops++] = (int)k;
        }
        struct rdma_xfer_stats s;
        memset(&s, 0, sizeof(s));
        int *status = st + m; /* the second half of st */
        rc = nops ? mc_rdma_xfer_run_many(t->x.ops, c, ops, nops, t->cfg.slice_bytes, t->cfg.window,
                                          (int)t->cfg.io_timeout_ms, &s, status)
                  : 0;
        add_stats(t, &s);
        conn_give(t, ep, c); /* a broken queue pair dies before the temporary regions */
        for (size_t j = 0; j < nops; j++)
            if (temps[j])
                t->x.ops->dereg_mr(temps[j]);
        if (rc == MC_ERR_TRANSFER_FAIL && reused && s.completed == 0 && attempt == 0) {
            rdma_leaf_lock(&t->lock); /* a pooled queue pair whose peer vanished: once more */
            t->retries++;
            rdma_leaf_unlock(&t->lock);
            continue;
        }
        for (size_t j = 0; j < nops; j++)
            items[idx[st[j]]].status = status[j];
        if (rc)
            mc_warn("rdma", "batch transfer failed", "endpoint=%s op=%s items=%zu rc=%s", ep,
                    is_write ? "write" : "read", nops, mc_strerror(rc));
        return;
    }
}

static int rdma_batch(struct mc_transport *tp, bool is_write, struct mc_xfer_item *items, size_t n)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    if (n == 0)
        return 0;
    size_t *idx = calloc(n, sizeof(*idx));
    bool *taken = calloc(n, sizeof(*taken));
    struct rdma_op *ops = calloc(n, sizeof(*ops));
    struct ibv_mr **temps = calloc(n, sizeof(*temps));
    int *st = calloc(2 * n, sizeof(*st));
    int rc = 0;
    if (!idx || !taken || !ops || !temps || !st) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) { /* what a single transfer refuses before any verbs */
        struct mc_xfer_item *it = &items[i];
        const struct mc_xfer_loc *l = &it->loc;
        taken[i] = true;
        it->status = !l->endpoint || strlen(l->endpoint) >= EP_MAX || (it->len && !it->buf)
                         ? MC_ERR_INVALID_PARAMS
                     : it->len == 0                ? 0
                     : !l->rkey || !l->remote_addr ? MC_ERR_INVALID_REPLICA
                     : !l->mount_epoch             ? MC_ERR_REPLICA_IS_GONE
                                                   : 1;
        if (is_write && it->crc && it->buf)
            *it->crc = mc_crc32c(it->buf, it->len);
        taken[i] = it->status != 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (taken[i])
            continue;
        size_t m = 0;
        for (size_t j = i; j < n; j++)
            if (!taken[j] && strcmp(items[j].loc.endpoint, items[i].loc.endpoint) == 0) {
                taken[j] = true;
                idx[m++] = j;
            }
        batch_group(t, is_write, items, idx, m, ops, temps, st);
    }
out:
    free(idx);
    free(taken);
    free(ops);
    free(temps);
    free(st);
    return rc;
}

static int rdma_write(struct mc_transport *tp, const struct mc_xfer_loc *dst, const void *src,
                      size_t len)
{
    return transfer(tp, true, dst, (uint8_t *)src, len);
}

static int rdma_read(struct mc_transport *tp, const struct mc_xfer_loc *src, void *dst, size_t len)
{
    return transfer(tp, false, src, dst, len);
}

int mc_transport_rdma_push(struct mc_transport *tp, const char *endpoint, uint64_t remote_addr,
                           uint32_t rkey, uint64_t len, mc_rdma_fill_fn fill, void *arg)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    if (!endpoint || strlen(endpoint) >= EP_MAX || !fill || !rkey || !remote_addr)
        return MC_ERR_INVALID_PARAMS;
    if (len == 0)
        return 0;
    struct rdma_conn *c = NULL;
    bool reused;
    int rc = conn_take(t, endpoint, false, &c, &reused);
    if (rc)
        return rc;
    /* a staging slot of its own: concurrent pushes (one per PeerDiskRead) run side by side */
    rdma_leaf_lock(&t->staging_lock);
    while (!t->staging_free)
        pthread_cond_wait(&t->staging_cond, &t->staging_lock);
    int slot = __builtin_ctzll(t->staging_free);
    t->staging_free &= ~(1ull << slot);
    rdma_leaf_unlock(&t->staging_lock);
    uint8_t *buf = t->staging + (size_t)slot * t->cfg.staging_bytes;
    for (uint64_t off = 0; off < len && rc == 0;) {
        size_t n = len - off < t->cfg.staging_bytes ? (size_t)(len - off) : t->cfg.staging_bytes;
        rc = fill(arg, off, buf, n);
        if (rc)
            break;
        rc = run_on(t, c, true, buf, n, remote_addr + off, rkey, NULL, NULL);
        off += n;
    }
    if (rc && c->broken)
        mc_warn("rdma", "disk push failed", "endpoint=%s len=%llu", endpoint,
                (unsigned long long)len);
    conn_give(t, endpoint, c); /* a broken queue pair dies before the staging slot is reused */
    rdma_leaf_lock(&t->staging_lock);
    t->staging_free |= 1ull << slot;
    pthread_cond_signal(&t->staging_cond);
    rdma_leaf_unlock(&t->staging_lock);
    return rc;
}

/* ---- devices in use ----------------------------------------------------------------------- */

/* Registrations go to device d only from here on: the ranges already registered (the staging
 * buffer) lose their regions on the other devices, so the locked-memory limit is charged once. */
static void narrow_to(struct rdma_transport *t, int d)
{
    rdma_mr_lock(&t->x);
    for (int k = 0; k < t->x.ndev; k++) {
        t->x.in_use[k] = k == d;
        for (size_t i = 0; k != d && i < t->x.nmrs; i++)
            if (t->x.mrs[i].mr[k]) {
                t->x.ops->dereg_mr(t->x.mrs[i].mr[k]);
                t->x.mrs[i].mr[k] = NULL;
            }
    }
    rdma_mr_unlock(&t->x);
}

/* cfg.devices: only the devices named are used (each must exist). */
static int use_named_devices(struct rdma_transport *t)
{
    char list[256];
    snprintf(list, sizeof(list), "%s", t->cfg.devices);
    for (int k = 0; k < t->x.ndev; k++)
        t->x.in_use[k] = false;
    char *save = NULL;
    for (char *name = strtok_r(list, ", ", &save); name; name = strtok_r(NULL, ", ", &save)) {
        int found = -1;
        for (int k = 0; k < t->x.ndev && found < 0; k++)
            if (strcmp(t->x.ops->device_name(t->x.devlist[k]), name) == 0)
                found = k;
        if (found < 0) {
            mc_error("rdma",
                     "rdma_devices names a device that is not there or not usable (see "
                     "ibv_devices and the port state)",
                     "device=%s devices=%s", name, t->cfg.devices);
            return MC_ERR_INVALID_PARAMS;
        }
        if (!t->x.in_use[found] && (t->x.serve_dev == found || !t->x.in_use[t->x.serve_dev]))
            t->x.serve_dev = found; /* the first named one serves until serve_on says */
        t->x.in_use[found] = true;
    }
    return 0;
}

/* ---- registration, listener, stats -------------------------------------------------------- */

int mc_transport_rdma_register(struct mc_transport *tp, void *addr, size_t len, uint32_t *rkey)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    /* with rkey: a range peers access (the segment); without: this process's buffer */
    int rc = mc_rdma_ctx_register(&t->x, addr, len, rkey ? MC_RDMA_MR_REMOTE : MC_RDMA_MR_LOCAL);
    if (rc == 0 && rkey)
        rc = mc_rdma_ctx_keys(&t->x, addr, len, t->x.serve_dev, NULL, rkey);
    return rc;
}

int mc_transport_rdma_unregister(struct mc_transport *tp, void *addr)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    return mc_rdma_ctx_unregister(&t->x, addr);
}

int mc_transport_rdma_reregister(struct mc_transport *tp, void *addr, uint32_t *rkey)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    int rc = mc_rdma_ctx_reregister(&t->x, addr);
    if (rc == 0 && rkey)
        rc = mc_rdma_ctx_keys(&t->x, addr, 1, t->x.serve_dev, NULL, rkey);
    return rc;
}

/* The re-registration worker: one run of mc_transport_rdma_reregister, its result kept for
 * mc_transport_rdma_rereg_ready, then the owner's callback (outside the lock). */
static void *rereg_main(void *arg)
{
    struct rdma_transport *t = arg;
    rdma_leaf_lock(&t->rr.lock);
    void *addr = t->rr.addr;
    rdma_leaf_unlock(&t->rr.lock);
    uint32_t rkey = 0;
    int rc = mc_transport_rdma_reregister(&t->base, addr, &rkey);
    rdma_leaf_lock(&t->rr.lock);
    t->rr.rc = rc;
    t->rr.rkey = rc ? 0 : rkey;
    t->rr.state = REREG_DONE;
    void (*done)(void *) = t->rr.done;
    void *darg = t->rr.arg;
    rdma_leaf_unlock(&t->rr.lock);
    if (done)
        done(darg);
    return NULL;
}

int mc_transport_rdma_rereg_start(struct mc_transport *tp, void *addr, void (*done)(void *arg),
                                  void *arg)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    int rc = 0;
    rdma_leaf_lock(&t->rr.lock);
    if (t->rr.closing) {
        rc = MC_ERR_NOT_SUPPORTED;
        goto out;
    }
    if (t->rr.state != REREG_IDLE)
        goto out; /* running, or its key not announced yet: that one serves this fence too */
    if (t->rr.joinable) {
        pthread_join(t->rr.thread, NULL); /* finished: its state went back to idle */
        t->rr.joinable = false;
    }
    t->rr.addr = addr;
    t->rr.done = done;
    t->rr.arg = arg;
    t->rr.state = REREG_PENDING;
    if (pthread_create(&t->rr.thread, NULL, rereg_main, t) != 0) {
        t->rr.state = REREG_IDLE;
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    t->rr.joinable = true;
out:
    rdma_leaf_unlock(&t->rr.lock);
    return rc;
}

bool mc_transport_rdma_rereg_ready(struct mc_transport *tp, int *rc, uint32_t *rkey)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    rdma_leaf_lock(&t->rr.lock);
    bool ready = t->rr.state != REREG_PENDING;
    *rc = t->rr.state == REREG_DONE ? t->rr.rc : 0;
    *rkey = t->rr.state == REREG_DONE ? t->rr.rkey : 0;
    rdma_leaf_unlock(&t->rr.lock);
    return ready;
}

bool mc_transport_rdma_rereg_settle(struct mc_transport *tp)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    rdma_leaf_lock(&t->rr.lock);
    bool was = t->rr.state == REREG_DONE;
    if (was)
        t->rr.state = REREG_IDLE;
    rdma_leaf_unlock(&t->rr.lock);
    return was;
}

void mc_transport_rdma_rereg_stop(struct mc_transport *tp)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    rdma_leaf_lock(&t->rr.lock);
    t->rr.closing = true;
    bool join = t->rr.joinable;
    t->rr.joinable = false;
    rdma_leaf_unlock(&t->rr.lock);
    if (join)
        pthread_join(t->rr.thread, NULL);
}

int mc_transport_rdma_rkey(struct mc_transport *tp, const void *addr, size_t len, uint32_t *rkey)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    return mc_rdma_ctx_keys(&t->x, addr, len, t->x.serve_dev, NULL, rkey);
}

int mc_transport_rdma_expose(struct mc_transport *tp, void *addr, size_t len, uint32_t *rkey,
                             void **handle)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    *handle = NULL;
    struct ibv_mr *mr = t->x.ops->reg_mr(t->x.pd[t->x.serve_dev], addr, len,
                                         mc_rdma_access(MC_RDMA_MR_PEER_WRITES));
    if (!mr) {
        mc_rdma_log_reg_failure(&t->x, t->x.serve_dev, len, errno);
        return MC_ERR_TRANSFER_FAIL;
    }
    *rkey = mr->rkey;
    *handle = mr;
    return 0;
}

void mc_transport_rdma_revoke(struct mc_transport *tp, void *handle)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    if (handle)
        t->x.ops->dereg_mr(handle);
}

uint64_t mc_transport_rdma_staging_bytes(struct mc_transport *tp)
{
    return ((struct rdma_transport *)tp)->cfg.staging_bytes;
}

const char *mc_transport_rdma_device(struct mc_transport *tp)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    return t->x.ndev ? t->x.ops->device_name(t->x.devlist[t->x.serve_dev]) : "";
}

int mc_transport_rdma_serve_on(struct mc_transport *tp, const char *host)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    snprintf(t->x.host, sizeof(t->x.host), "%s", host ? host : "");
    int d = mc_rdma_ctx_device_of(&t->x, host);
    if (d >= 0 && !t->x.in_use[d]) {
        mc_warn("rdma",
                "the device that owns the advertised address is not in rdma_devices: peers "
                "connecting to it get keys of another device",
                "host=%s device=%s", host ? host : "", t->x.ops->device_name(t->x.devlist[d]));
        d = -1;
    }
    bool owned = d >= 0;
    if (d < 0) {
        if (t->x.ndev > 1)
            mc_warn("rdma",
                    "no RDMA device owns the advertised address: peers get the first device's "
                    "keys, which only work if their connections land there",
                    "host=%s device=%s", host ? host : "", t->x.ops->device_name(t->x.devlist[0]));
        d = 0;
        while (d < t->x.ndev - 1 && !t->x.in_use[d])
            d++;
    }
    t->x.dial_from_host = owned;
    t->x.serve_dev = d;
    if (!t->cfg.devices)
        narrow_to(t, d);
    mc_info("rdma", "serving on device", "host=%s device=%s", host ? host : "",
            t->x.ops->device_name(t->x.devlist[d]));
    return d;
}

int mc_transport_rdma_listen(struct mc_transport *tp, const char *bind_addr, uint16_t port,
                             bool loopback_only)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    return mc_rdma_listen(&t->x, bind_addr, port, t->cfg.client_id, loopback_only);
}

void mc_transport_rdma_get_stats(struct mc_transport *tp, struct mc_rdma_transport_stats *st)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    memset(st, 0, sizeof(*st));
    rdma_leaf_lock(&t->lock);
    st->connects = t->connects;
    st->reuses = t->reuses;
    st->teardowns = t->teardowns;
    st->temp_regs = t->temp_regs;
    st->stale = t->stale;
    st->retries = t->retries;
    st->posted = t->xs.posted;
    st->completed = t->xs.completed;
    st->errors = t->xs.errors;
    st->flushed = t->xs.flushed;
    st->stray = t->xs.stray;
    st->empty_events = t->xs.empty_events;
    st->auth_refused = atomic_load(&t->x.auth_refused);
    st->auth_failed = atomic_load(&t->x.auth_failed);
    st->async_events = atomic_load(&t->x.async_events);
    for (struct peer *p = t->peers; p; p = p->next)
        st->idle += p->nidle;
    rdma_leaf_unlock(&t->lock);
}

static void rdma_free(struct mc_transport *tp)
{
    struct rdma_transport *t = (struct rdma_transport *)tp;
    mc_transport_rdma_rereg_stop(tp); /* before the regions it swaps are freed */
    pthread_mutex_destroy(&t->rr.lock);
    struct peer *p = t->peers;
    while (p) {
        struct peer *next = p->next;
        for (uint32_t i = 0; i < p->nidle; i++)
            mc_rdma_conn_destroy(&t->x, p->idle[i]);
        free(p->idle);
        free(p);
        p = next;
    }
    mc_rdma_ctx_close(&t->x);
    free(t->staging);
    pthread_cond_destroy(&t->staging_cond);
    pthread_mutex_destroy(&t->staging_lock);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static const struct mc_transport_ops rdma_vtable = {
    .name = "rdma",
    .write = rdma_write,
    .read = rdma_read,
    .batch = rdma_batch,
    .free = rdma_free,
};

int mc_transport_rdma_new(const struct mc_rdma_transport_config *cfg, const struct mc_rdma_ops *ops,
                          struct mc_transport **out)
{
    *out = NULL;
    struct rdma_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return MC_ERR_INTERNAL_ERROR;
    mc_rdma_transport_config_init(&t->cfg);
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
        if (cfg->staging_bytes)
            t->cfg.staging_bytes = cfg->staging_bytes;
        if (cfg->staging_count)
            t->cfg.staging_count = cfg->staging_count > 64 ? 64 : cfg->staging_count;
        if (cfg->cq_spin_polls)
            t->cfg.cq_spin_polls = cfg->cq_spin_polls < 0 ? 0 : cfg->cq_spin_polls;
        if (cfg->ack_timeout)
            t->cfg.ack_timeout = cfg->ack_timeout;
        t->cfg.tos = cfg->tos;
        if (cfg->devices && *cfg->devices)
            snprintf(t->devices, sizeof(t->devices), "%s", cfg->devices);
        t->cfg.client_id = cfg->client_id;
    }
    struct mc_auth_key auth = {0};
    if (cfg && cfg->auth && cfg->auth->set)
        auth = *cfg->auth;
    t->cfg.auth = NULL; /* the key lives in the context, copied below */
    t->cfg.devices = t->devices[0] ? t->devices : NULL;
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->rr.lock, NULL);
    pthread_mutex_init(&t->staging_lock, NULL);
    pthread_cond_init(&t->staging_cond, NULL);
    t->base.ops = &rdma_vtable;
    int rc = MC_ERR_INVALID_PARAMS;
    if (cfg && (mc_rdma_check_addr("host", cfg->host) ||
                mc_rdma_check_addr("bind_address", cfg->bind_address)))
        goto fail;
    if (t->cfg.slice_bytes < MC_RDMA_MIN_SLICE || t->cfg.slice_bytes > MC_RDMA_MAX_SLICE ||
        t->cfg.window > MC_RDMA_MAX_WR || mc_id_is_zero(t->cfg.client_id))
        goto fail;
    rc = mc_rdma_ctx_open(&t->x, ops ? ops : mc_rdma_ops_verbs());
    t->x.auth = auth;
    t->x.ack_timeout = t->cfg.ack_timeout > 31 ? 31 : t->cfg.ack_timeout;
    t->x.tos = t->cfg.tos > 0 && t->cfg.tos < 256 ? t->cfg.tos : -1;
    if (rc)
        goto fail;
    if (t->cfg.devices && *t->cfg.devices && (rc = use_named_devices(t)) != 0)
        goto fail;
    rc = mc_rdma_async_start(&t->x);
    if (rc)
        goto fail;
    rc = MC_ERR_INTERNAL_ERROR;
    size_t area = (size_t)t->cfg.staging_bytes * t->cfg.staging_count;
    t->staging = aligned_alloc(4096, (area + 4095) & ~(size_t)4095);
    if (!t->staging)
        goto fail;
    t->staging_free = t->cfg.staging_count >= 64 ? ~0ull : (1ull << t->cfg.staging_count) - 1;
    rc = mc_rdma_ctx_register(&t->x, t->staging, area, MC_RDMA_MR_LOCAL);
    if (rc)
        goto fail;
    *out = &t->base;
    return 0;
fail:
    rdma_free(&t->base);
    return rc;
}
