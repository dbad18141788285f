/*
 * rdma_fake.c - the loopback test provider of the RDMA ops table (see rdma_fake.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/rdma_plan.h"
#include "rdma_fake.h"

#define SQ_MAX 1024
#define CQ_MAX 4096
#define STRAY_BASE 0xdead00000000ull

struct fake *g_fake;

struct fwr {
    uint64_t wr_id, no;
    enum ibv_wr_opcode opcode;
    uint8_t *local;
    uint32_t len, lkey;
    uint64_t remote;
    uint32_t rkey;
};

struct fcq;
struct fqp {
    struct ibv_qp base;
    struct ibv_context *remote_ctx; /* the device of the side that accepted (loopback) */
    struct fcq *cq;
    bool error;
    uint32_t max_send_wr;
    struct fwr q[SQ_MAX];
    int nq;
};

struct fchan {
    struct ibv_comp_channel base;
    struct fcq *cq;
};

struct fcq {
    struct ibv_cq base;
    struct fchan *ch;
    struct fqp *qp;
    bool armed;
    bool notify;     /* a completion arrived while armed: one event is due */
    int empty_polls; /* poll_latency: empty polls so far */
    struct ibv_wc ring[CQ_MAX];
    int head, n;
};

struct fev {
    struct rdma_cm_event ev;
    uint8_t data[256]; /* holds any uint8_t length */
};

struct fech {
    struct rdma_event_channel base;
    int pipe[2];
    struct fev *q[64];
    int n;
};

static int ctx_index(const struct ibv_context *ctx);

/* ---- helpers (lock held) ------------------------------------------------------------------ */

static struct fake_mr *mr_find(uint32_t key, uint64_t addr, uint64_t len)
{
    for (int i = 0; i < g_fake->nmrs; i++) {
        struct fake_mr *m = &g_fake->mrs[i];
        uint64_t a = (uint64_t)(uintptr_t)m->addr;
        if (m->key == key && addr >= a && len <= m->len && addr - a <= m->len - len)
            return m;
    }
    return NULL;
}

static void queue_event(struct rdma_event_channel *ch, struct rdma_cm_id *id,
                        enum rdma_cm_event_type type, int status, const void *data, uint8_t len)
{
    struct fech *e = (struct fech *)ch;
    if (e->n >= 64)
        abort(); /* nobody reads this channel */
    struct fev *v = calloc(1, sizeof(*v));
    v->ev.id = id;
    v->ev.event = type;
    v->ev.status = status;
    if (data && len) {
        memcpy(v->data, data, len);
        v->ev.param.conn.private_data = v->data;
        v->ev.param.conn.private_data_len = len;
    }
    v->ev.param.conn.initiator_depth = 16;
    v->ev.param.conn.responder_resources = 16;
    e->q[e->n++] = v;
    char b = 1;
    if (write(e->pipe[1], &b, 1) != 1)
        abort();
}

static void wire_log(const void *data, size_t len)
{
    if (!data || g_fake->wire_len + len > sizeof(g_fake->wire))
        return;
    memcpy(g_fake->wire + g_fake->wire_len, data, len);
    g_fake->wire_len += len;
}

static uint16_t sa_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    return 0;
}

static void sa_copy(struct sockaddr *dst, const struct sockaddr *src)
{
    size_t n =
        src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    memcpy(dst, src, n);
}

static int pair_find(struct rdma_cm_id *child)
{
    for (int i = 0; i < 64; i++)
        if (g_fake->pairs[i].child == child && child)
            return i;
    return -1;
}

static void cq_push(struct fcq *cq, const struct ibv_wc *wc)
{
    if (cq->n >= CQ_MAX)
        abort(); /* a CQ overrun: the transport posted beyond its depth */
    cq->ring[(cq->head + cq->n) % CQ_MAX] = *wc;
    cq->n++;
    if (cq->armed) { /* the event fires for a completion added to an armed CQ, and only then */
        cq->armed = false;
        cq->notify = true;
    }
}

static void exec_wr(struct fqp *qp, const struct fwr *w, struct ibv_wc *wc)
{
    memset(wc, 0, sizeof(*wc));
    wc->wr_id = w->wr_id;
    wc->opcode = w->opcode == IBV_WR_RDMA_WRITE ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ;
    wc->qp_num = qp->base.qp_num;
    if (qp->error) {
        wc->status = IBV_WC_WR_FLUSH_ERR;
        return;
    }
    int qd = ctx_index(qp->base.context), rd = qp->remote_ctx ? ctx_index(qp->remote_ctx) : -1;
    if ((qd >= 0 && g_fake->port_down[qd]) || (rd >= 0 && g_fake->port_down[rd])) {
        wc->status = IBV_WC_RETRY_EXC_ERR; /* the link is gone: no ACK ever comes */
        qp->error = true;
        return;
    }
    if ((g_fake->fail_at_wr && w->no == g_fake->fail_at_wr) ||
        (g_fake->fail_at_wr2 && w->no == g_fake->fail_at_wr2)) {
        wc->status = g_fake->fail_status;
        qp->error = true;
        return;
    }
    struct fake_mr *l = mr_find(w->lkey, (uint64_t)(uintptr_t)w->local, w->len);
    struct fake_mr *r = mr_find(w->rkey, w->remote, w->len);
    if (l && l->mr && l->mr->context != qp->base.context)
        l = NULL; /* a key of another device's protection domain */
    if (r && r->mr && qp->remote_ctx && r->mr->context != qp->remote_ctx)
        r = NULL;
    if (!l) {
        wc->status = IBV_WC_LOC_PROT_ERR;
        qp->error = true;
        return;
    }
    /* a READ writes the local buffer: that needs LOCAL_WRITE; the remote side needs the
     * matching remote right */
    if (w->opcode == IBV_WR_RDMA_READ && !(l->access & IBV_ACCESS_LOCAL_WRITE)) {
        wc->status = IBV_WC_LOC_PROT_ERR;
        qp->error = true;
        return;
    }
    int need = w->opcode == IBV_WR_RDMA_WRITE ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
    if (!r || !(r->access & need)) {
        wc->status = IBV_WC_REM_ACCESS_ERR;
        qp->error = true;
        return;
    }
    uint8_t *remote = (uint8_t *)(uintptr_t)w->remote;
    if (w->opcode == IBV_WR_RDMA_WRITE)
        memmove(remote, w->local, w->len);
    else
        memmove(w->local, remote, w->len);
    wc->status = IBV_WC_SUCCESS;
    wc->byte_len = w->len;
}

/* ---- devices and memory ------------------------------------------------------------------- */

static struct ibv_context **f_get_devices(int *n)
{
    if (g_fake->no_device) {
        *n = 0;
        errno = ENODEV;
        return NULL;
    }
    int k = g_fake->ndev < 1 ? 1 : g_fake->ndev > FAKE_MAX_DEVS ? FAKE_MAX_DEVS : g_fake->ndev;
    /* a fresh array per call, as rdma_get_devices(3) gives: the caller may rewrite its copy
     * (two transports in one process must not share one) */
    struct ibv_context **list = calloc(FAKE_MAX_DEVS + 1, sizeof(*list));
    if (!list) {
        *n = 0;
        errno = ENOMEM;
        return NULL;
    }
    for (int d = 0; d < k; d++)
        list[d] = &g_fake->ctx[d];
    *n = k;
    return list;
}

static void f_free_devices(struct ibv_context **list)
{
    free(list);
}

static int ctx_index(const struct ibv_context *ctx)
{
    for (int d = 0; d < FAKE_MAX_DEVS; d++)
        if (ctx == &g_fake->ctx[d])
            return d;
    return -1;
}

static const char *f_device_name(struct ibv_context *ctx)
{
    static const char *names[FAKE_MAX_DEVS] = {"fake0", "fake1", "fake2",  "fake3",
                                               "fake4", "fake5", "fake6",  "fake7",
                                               "fake8", "fake9", "fake10", "fake11"};
    int d = ctx_index(ctx);
    return d >= 0 ? names[d] : "?";
}

static int f_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
    int d = ctx_index(ctx);
    memset(attr, 0, sizeof(*attr));
    attr->max_qp_rd_atom = d >= 0 && g_fake->rd_atom[d] ? g_fake->rd_atom[d] : 16;
    attr->max_qp_init_rd_atom = d >= 0 && g_fake->init_rd_atom[d] ? g_fake->init_rd_atom[d] : 16;
    attr->phys_port_cnt = 1;
    return 0;
}

static int f_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
    int d = ctx_index(ctx);
    memset(attr, 0, sizeof(*attr));
    if (d < 0 || port != 1) {
        errno = EINVAL;
        return EINVAL;
    }
    pthread_mutex_lock(&g_fake->lock);
    attr->state = g_fake->port_down[d] ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
    pthread_mutex_unlock(&g_fake->lock);
    attr->link_layer = IBV_LINK_LAYER_ETHERNET;
    return 0;
}

static struct ibv_pd *f_alloc_pd(struct ibv_context *ctx)
{
    struct ibv_pd *pd = calloc(1, sizeof(*pd));
    pd->context = ctx;
    pthread_mutex_lock(&g_fake->lock);
    g_fake->pds++;
    pthread_mutex_unlock(&g_fake->lock);
    return pd;
}

static int f_dealloc_pd(struct ibv_pd *pd)
{
    pthread_mutex_lock(&g_fake->lock);
    g_fake->pds--;
    pthread_mutex_unlock(&g_fake->lock);
    free(pd);
    return 0;
}

static struct ibv_mr *f_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    const int writes = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    int err = 0;
    pthread_mutex_lock(&g_fake->lock);
    int delay = g_fake->reg_delay_ms && len >= g_fake->reg_delay_len ? g_fake->reg_delay_ms : 0;
    if (delay) { /* pinning takes a while; the device lock is not held meanwhile */
        g_fake->regs_slow++;
        pthread_cond_broadcast(&g_fake->cond);
        pthread_mutex_unlock(&g_fake->lock);
        struct timespec ts = {delay / 1000, (long)(delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&g_fake->lock);
        g_fake->regs_slow--;
        g_fake->regs_slow_done++;
        pthread_cond_broadcast(&g_fake->cond);
    }
    g_fake->last_access = access;
    uintptr_t a = (uintptr_t)addr, ro = (uintptr_t)g_fake->ro_addr;
    if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))
        err = EINVAL; /* ibv_reg_mr(3): remote write needs local write */
    else if ((access & writes) && g_fake->ro_len && a < ro + g_fake->ro_len && ro < a + len)
        err = EFAULT; /* pinning read-only pages for writing */
    else if (g_fake->nmrs >= 64 ||
             (g_fake->memlock_limit && g_fake->pinned + len > g_fake->memlock_limit))
        err = ENOMEM;
    if (err) {
        pthread_mutex_unlock(&g_fake->lock);
        errno = err;
        return NULL;
    }
    struct ibv_mr *mr = calloc(1, sizeof(*mr));
    mr->pd = pd;
    mr->context = pd->context;
    mr->addr = addr;
    mr->length = len;
    mr->lkey = mr->rkey = ++g_fake->next_key;
    for (int i = g_fake->nfreed - 1; g_fake->reuse_keys && i >= 0; i--) /* newest first */
        if (g_fake->freed[i].addr == addr && g_fake->freed[i].len == len &&
            g_fake->freed[i].mr == (void *)pd) {
            mr->lkey = mr->rkey = g_fake->freed[i].key; /* the cached mkey comes back */
            g_fake->freed[i] = g_fake->freed[--g_fake->nfreed];
            break;
        }
    g_fake->mrs[g_fake->nmrs++] = (struct fake_mr){addr, len, mr->lkey, mr, access};
    g_fake->mrs_live++;
    g_fake->pinned += len;
    pthread_mutex_unlock(&g_fake->lock);
    return mr;
}

static int f_dereg_mr(struct ibv_mr *mr)
{
    pthread_mutex_lock(&g_fake->lock);
    for (int i = 0; i < g_fake->nmrs; i++)
        if (g_fake->mrs[i].mr == mr) {
            g_fake->mrs[i] = g_fake->mrs[--g_fake->nmrs];
            break;
        }
    if (g_fake->nfreed < 16) /* remembered by protection domain, for reuse_keys */
        g_fake->freed[g_fake->nfreed++] =
            (struct fake_mr){mr->addr, mr->length, mr->rkey, (struct ibv_mr *)mr->pd, 0};
    g_fake->mrs_live--;
    g_fake->pinned -= mr->length;
    pthread_mutex_unlock(&g_fake->lock);
    free(mr);
    return 0;
}

uint32_t fake_expose(void *addr, size_t len)
{
    pthread_mutex_lock(&g_fake->lock);
    uint32_t key = ++g_fake->next_key;
    g_fake->mrs[g_fake->nmrs++] =
        (struct fake_mr){addr, len, key, NULL,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE};
    pthread_mutex_unlock(&g_fake->lock);
    return key;
}

/* ---- completion queues -------------------------------------------------------------------- */

static struct ibv_comp_channel *f_create_comp_channel(struct ibv_context *ctx)
{
    struct fchan *ch = calloc(1, sizeof(*ch));
    ch->base.context = ctx;
    ch->base.fd = -1;
    pthread_mutex_lock(&g_fake->lock);
    g_fake->chans++;
    pthread_mutex_unlock(&g_fake->lock);
    return &ch->base;
}

static int f_destroy_comp_channel(struct ibv_comp_channel *ch)
{
    pthread_mutex_lock(&g_fake->lock);
    g_fake->chans--;
    pthread_mutex_unlock(&g_fake->lock);
    free(ch);
    return 0;
}

static struct ibv_cq *f_create_cq(struct ibv_context *ctx, int cqe, void *cq_ctx,
                                  struct ibv_comp_channel *ch, int vec)
{
    if (vec < 0 || vec >= ctx->num_comp_vectors) {
        errno = EINVAL;
        return NULL;
    }
    struct fcq *cq = calloc(1, sizeof(*cq));
    cq->base.context = ctx;
    cq->base.cq_context = cq_ctx;
    cq->base.channel = ch;
    cq->base.cqe = cqe;
    cq->ch = (struct fchan *)ch;
    if (ch)
        cq->ch->cq = cq;
    pthread_mutex_lock(&g_fake->lock);
    g_fake->cqs++;
    if (vec < 8)
        g_fake->cq_vec[vec]++;
    pthread_mutex_unlock(&g_fake->lock);
    return &cq->base;
}

static int f_destroy_cq(struct ibv_cq *cqp)
{
    struct fcq *cq = (struct fcq *)cqp;
    pthread_mutex_lock(&g_fake->lock);
    for (int i = 0; i < cq->n; i++)
        if (cq->ring[(cq->head + i) % CQ_MAX].wr_id < STRAY_BASE)
            g_fake->outstanding--;
    if (cq->ch)
        cq->ch->cq = NULL;
    if (cq->qp)
        cq->qp->cq = NULL;
    g_fake->cqs--;
    pthread_mutex_unlock(&g_fake->lock);
    free(cq);
    return 0;
}

static void execute_queued(struct fcq *cq, int max);

static int f_req_notify_cq(struct ibv_cq *cqp, int solicited_only)
{
    struct fcq *cq = (struct fcq *)cqp;
    pthread_mutex_lock(&g_fake->lock);
    g_fake->arms++;
    if (g_fake->complete_on_arm)
        execute_queued(cq, 0); /* these land before the arm: no event for them */
    cq->armed = true;
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

/* Executes up to max (0 = all) of the work requests queued on cq's QP (lock held). */
static void execute_queued(struct fcq *cq, int max)
{
    struct fqp *qp = cq->qp;
    if (!qp || !qp->nq)
        return;
    struct ibv_wc wcs[SQ_MAX];
    int k = max && max < qp->nq ? max : qp->nq;
    for (int i = 0; i < k; i++)
        exec_wr(qp, &qp->q[i], &wcs[i]);
    if (g_fake->reorder && k > 1)
        g_fake->reordered++;
    for (int i = 0; i < k; i++)
        cq_push(cq, &wcs[g_fake->reorder ? k - 1 - i : i]);
    memmove(qp->q, qp->q + k, sizeof(qp->q[0]) * (size_t)(qp->nq - k));
    qp->nq -= k;
}

/* The device makes progress while the application sleeps here. */
static int f_wait_cq_event(struct ibv_comp_channel *chp, int timeout_ms, struct ibv_cq **out)
{
    struct fchan *ch = (struct fchan *)chp;
    int rc = 0;
    pthread_mutex_lock(&g_fake->lock);
    struct fcq *cq = ch->cq;
    if (!cq)
        goto out;
    g_fake->waits++;
    if (g_fake->spurious > 0 && cq->armed) {
        g_fake->spurious--;
        cq->armed = false;
        *out = &cq->base;
        rc = 1;
        goto out;
    }
    if (g_fake->stall)
        goto out;
    while (g_fake->stray > 0) {
        struct ibv_wc wc = {.wr_id = STRAY_BASE + (uint64_t)g_fake->stray--,
                            .status = IBV_WC_SUCCESS};
        cq_push(cq, &wc);
    }
    execute_queued(cq, g_fake->per_wait);
    if (cq->notify) {
        cq->notify = false;
        *out = &cq->base;
        rc = 1;
    }
out:
    pthread_mutex_unlock(&g_fake->lock);
    return rc;
}

static int f_poll_cq(struct ibv_cq *cqp, int n, struct ibv_wc *wc)
{
    struct fcq *cq = (struct fcq *)cqp;
    int k = 0;
    pthread_mutex_lock(&g_fake->lock);
    if (g_fake->poll_latency > 0 && !cq->n && ++cq->empty_polls >= g_fake->poll_latency) {
        cq->empty_polls = 0;
        execute_queued(cq, g_fake->per_wait);
    }
    while (k < n && cq->n) {
        wc[k] = cq->ring[cq->head];
        cq->head = (cq->head + 1) % CQ_MAX;
        cq->n--;
        if (wc[k].wr_id < STRAY_BASE)
            g_fake->outstanding--;
        k++;
    }
    pthread_mutex_unlock(&g_fake->lock);
    return k;
}

static int f_post_send(struct ibv_qp *qpp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct fqp *qp = (struct fqp *)qpp;
    int rc = 0;
    pthread_mutex_lock(&g_fake->lock);
    g_fake->post_calls++;
    for (; wr; wr = wr->next) {
        int in_sq = qp->nq;
        for (int i = 0; qp->cq && i < qp->cq->n; i++)
            if (qp->cq->ring[(qp->cq->head + i) % CQ_MAX].wr_id < STRAY_BASE)
                in_sq++;
        if ((uint32_t)in_sq >= qp->max_send_wr || wr->num_sge != 1 ||
            (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_READ) ||
            !(wr->send_flags & IBV_SEND_SIGNALED)) {
            *bad = wr;
            rc = ENOMEM;
            break;
        }
        struct fwr *w = &qp->q[qp->nq++];
        w->wr_id = wr->wr_id;
        w->no = ++g_fake->wrs;
        w->opcode = wr->opcode;
        w->local = (uint8_t *)(uintptr_t)wr->sg_list[0].addr;
        w->len = wr->sg_list[0].length;
        w->lkey = wr->sg_list[0].lkey;
        w->remote = wr->wr.rdma.remote_addr;
        w->rkey = wr->wr.rdma.rkey;
        g_fake->outstanding++;
        if (g_fake->outstanding > g_fake->max_outstanding)
            g_fake->max_outstanding = g_fake->outstanding;
    }
    pthread_mutex_unlock(&g_fake->lock);
    return rc;
}

/* ---- connection manager ------------------------------------------------------------------- */

static struct rdma_event_channel *f_create_event_channel(void)
{
    struct fech *e = calloc(1, sizeof(*e));
    if (pipe(e->pipe))
        abort();
    e->base.fd = e->pipe[0];
    pthread_mutex_lock(&g_fake->lock);
    g_fake->echs++;
    pthread_mutex_unlock(&g_fake->lock);
    return &e->base;
}

static void f_destroy_event_channel(struct rdma_event_channel *ch)
{
    struct fech *e = (struct fech *)ch;
    pthread_mutex_lock(&g_fake->lock);
    for (int i = 0; i < e->n; i++)
        free(e->q[i]);
    if (g_fake->listen_ch == ch)
        g_fake->listen_ch = NULL;
    for (int i = 0; i < g_fake->nlst; i++)
        if (g_fake->lst[i].ch == ch)
            g_fake->lst[i--] = g_fake->lst[--g_fake->nlst];
    g_fake->echs--;
    pthread_mutex_unlock(&g_fake->lock);
    close(e->pipe[0]);
    close(e->pipe[1]);
    free(e);
}

static int f_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                       enum rdma_port_space ps)
{
    struct rdma_cm_id *i = calloc(1, sizeof(*i));
    i->channel = ch;
    i->context = ctx;
    i->ps = ps;
    pthread_mutex_lock(&g_fake->lock);
    g_fake->ids_created++;
    pthread_mutex_unlock(&g_fake->lock);
    *id = i;
    return 0;
}

static int f_destroy_id(struct rdma_cm_id *id)
{
    pthread_mutex_lock(&g_fake->lock);
    for (int i = 0; i < 64; i++)
        if (g_fake->pairs[i].child == id || g_fake->pairs[i].active == id)
            g_fake->pairs[i].child = g_fake->pairs[i].active = NULL;
    g_fake->ids_destroyed++;
    pthread_cond_broadcast(&g_fake->cond);
    pthread_mutex_unlock(&g_fake->lock);
    free(id);
    return 0;
}

/* The device an IPv4 address belongs to (dev_addr), or NULL. */
static struct ibv_context *dev_of(const struct sockaddr *sa)
{
    char ip[INET6_ADDRSTRLEN] = "";
    if (sa->sa_family != AF_INET ||
        !inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip)))
        return NULL;
    for (int d = 0; d < FAKE_MAX_DEVS && d < (g_fake->ndev > 1 ? g_fake->ndev : 1); d++)
        if (g_fake->dev_addr[d][0] && strcmp(g_fake->dev_addr[d], ip) == 0)
            return &g_fake->ctx[d];
    return NULL;
}

/* 127/8, ::1, ::ffff:127/104: rdma_cm finds no RDMA device for the lo netdev. */
static bool sa_is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

static int f_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    if (sa_is_loopback(addr)) {
        errno = ENODEV;
        return -1;
    }
    sa_copy(&id->route.addr.src_addr, addr);
    pthread_mutex_lock(&g_fake->lock);
    id->verbs = dev_of(addr);
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static int f_listen(struct rdma_cm_id *id, int backlog)
{
    pthread_mutex_lock(&g_fake->lock);
    g_fake->listen_ch = id->channel;
    if (g_fake->nlst < 8) {
        g_fake->lst[g_fake->nlst].port = sa_port(&id->route.addr.src_addr);
        g_fake->lst[g_fake->nlst++].ch = id->channel;
    }
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static int f_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                          int timeout_ms)
{
    if (sa_is_loopback(dst) || (src && sa_is_loopback(src))) {
        errno = ENODEV;
        return -1;
    }
    pthread_mutex_lock(&g_fake->lock);
    /* a source address picks its device (rdma_cm binds the id there); else the first one */
    struct ibv_context *sd = src ? dev_of(src) : NULL;
    if (src && !sd && src->sa_family == AF_INET &&
        ((const struct sockaddr_in *)src)->sin_addr.s_addr != htonl(INADDR_ANY)) {
        pthread_mutex_unlock(&g_fake->lock);
        errno = EADDRNOTAVAIL; /* not an address of any RDMA device */
        return -1;
    }
    id->verbs = sd ? sd : &g_fake->ctx[0];
    if (src)
        sa_copy(&id->route.addr.src_addr, src);
    sa_copy(&id->route.addr.dst_addr, dst);
    queue_event(id->channel, id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static int f_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
    pthread_mutex_lock(&g_fake->lock);
    queue_event(id->channel, id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static int f_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    struct fqp *qp = calloc(1, sizeof(*qp));
    pthread_mutex_lock(&g_fake->lock);
    qp->base.context = id->verbs;
    qp->base.pd = pd;
    qp->base.send_cq = attr->send_cq;
    qp->base.recv_cq = attr->recv_cq;
    qp->base.qp_num = (uint32_t)(100 + g_fake->qps_created);
    qp->base.qp_type = attr->qp_type;
    qp->cq = (struct fcq *)attr->send_cq;
    qp->cq->qp = qp;
    qp->max_send_wr = attr->cap.max_send_wr < SQ_MAX ? attr->cap.max_send_wr : SQ_MAX;
    id->qp = &qp->base;
    g_fake->qps_created++;
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static void f_destroy_qp(struct rdma_cm_id *id)
{
    struct fqp *qp = (struct fqp *)id->qp;
    pthread_mutex_lock(&g_fake->lock);
    g_fake->outstanding -= qp->nq; /* never executed: gone with the QP */
    if (qp->cq)
        qp->cq->qp = NULL;
    g_fake->qps_destroyed++;
    pthread_cond_broadcast(&g_fake->cond);
    pthread_mutex_unlock(&g_fake->lock);
    free(qp);
    id->qp = NULL;
}

static struct rdma_cm_id *last_connected;

static int f_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    struct mc_rdma_conn_msg m;
    if (p->private_data_len > FAKE_PDATA_REQ) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&g_fake->lock);
    g_fake->connects++;
    last_connected = id;
    wire_log(p->private_data, p->private_data_len);
    if (mc_rdma_conn_msg_decode(p->private_data, p->private_data_len, &m) ||
        (m.kind != MC_RDMA_CONN_REQUEST && m.kind != MC_RDMA_CONN_HELLO &&
         m.kind != MC_RDMA_CONN_PROVE))
        g_fake->bad_connect_msgs++;
    if (g_fake->loopback) {
        struct rdma_event_channel *lch = NULL;
        uint16_t port = sa_port(&id->route.addr.dst_addr);
        for (int i = 0; i < g_fake->nlst; i++)
            if (g_fake->lst[i].port == port)
                lch = g_fake->lst[i].ch;
        int slot = -1;
        for (int i = 0; i < 64 && slot < 0; i++)
            if (!g_fake->pairs[i].child)
                slot = i;
        if (!lch || slot < 0) {
            queue_event(id->channel, id, RDMA_CM_EVENT_REJECTED, 8, NULL, 0);
        } else {
            struct rdma_cm_id *child = calloc(1, sizeof(*child));
            child->route.addr.dst_sin.sin_family = AF_INET;
            /* the dialler's address: its device's (rdma_cm never reports a loopback peer) */
            int sd = ctx_index(id->verbs);
            const char *from = g_fake->loop_from[0]                 ? g_fake->loop_from
                               : sd >= 0 && g_fake->dev_addr[sd][0] ? g_fake->dev_addr[sd]
                                                                    : "10.0.0.9";
            if (inet_pton(AF_INET, from, &child->route.addr.dst_sin.sin_addr) != 1)
                abort();
            struct ibv_context *dv = dev_of(&id->route.addr.dst_addr);
            child->verbs = dv ? dv : &g_fake->ctx[0];
            child->channel = lch;
            child->ps = RDMA_PS_TCP;
            g_fake->ids_created++;
            g_fake->pairs[slot].child = child;
            g_fake->pairs[slot].active = id;
            queue_event(lch, child, RDMA_CM_EVENT_CONNECT_REQUEST, 0, p->private_data,
                        p->private_data_len);
            /* as ib_cm reports it to the passive side: the dialler's initiator depth is what
             * this side should answer as its responder resources, and the other way round */
            struct fech *le = (struct fech *)lch;
            le->q[le->n - 1]->ev.param.conn.responder_resources = p->initiator_depth;
            le->q[le->n - 1]->ev.param.conn.initiator_depth = p->responder_resources;
        }
    } else if (g_fake->reject_connect)
        queue_event(id->channel, id, RDMA_CM_EVENT_REJECTED, 28, NULL, 0);
    else
        queue_event(id->channel, id, RDMA_CM_EVENT_ESTABLISHED, 0, g_fake->accept_msg,
                    g_fake->accept_len);
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static struct rdma_cm_id *last_accepted;

static int f_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
    struct mc_rdma_conn_msg m;
    struct ibv_device_attr attr;
    f_query_device(id->verbs, &attr);
    if (p->private_data_len > FAKE_PDATA_REP || p->responder_resources > attr.max_qp_rd_atom ||
        p->initiator_depth > attr.max_qp_init_rd_atom) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&g_fake->lock);
    g_fake->accept_resp = p->responder_resources;
    g_fake->accept_init = p->initiator_depth;
    wire_log(p->private_data, p->private_data_len);
    if (mc_rdma_conn_msg_decode(p->private_data, p->private_data_len, &m) ||
        m.kind != MC_RDMA_CONN_ACCEPT)
        g_fake->bad_connect_msgs++;
    int k = pair_find(id);
    if (k >= 0 && g_fake->pairs[k].active->qp)
        ((struct fqp *)g_fake->pairs[k].active->qp)->remote_ctx = id->verbs;
    if (k >= 0)
        queue_event(g_fake->pairs[k].active->channel, g_fake->pairs[k].active,
                    RDMA_CM_EVENT_ESTABLISHED, 0, p->private_data, p->private_data_len);
    g_fake->accepted++;
    last_accepted = id;
    pthread_cond_broadcast(&g_fake->cond);
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static int f_reject(struct rdma_cm_id *id, const void *data, uint8_t len)
{
    if (len > FAKE_PDATA_REJ) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&g_fake->lock);
    wire_log(data, len);
    int k = pair_find(id);
    if (k >= 0) {
        queue_event(g_fake->pairs[k].active->channel, g_fake->pairs[k].active,
                    RDMA_CM_EVENT_REJECTED, 28, data, len);
        g_fake->pairs[k].child = g_fake->pairs[k].active = NULL;
    }
    g_fake->rejected++;
    pthread_cond_broadcast(&g_fake->cond);
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static int f_disconnect(struct rdma_cm_id *id)
{
    pthread_mutex_lock(&g_fake->lock);
    g_fake->disconnects++;
    pthread_cond_broadcast(&g_fake->cond);
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static int f_get_cm_event(struct rdma_event_channel *ch, int wake_fd, int timeout_ms,
                          struct rdma_cm_event **ev)
{
    struct fech *e = (struct fech *)ch;
    for (;;) {
        pthread_mutex_lock(&g_fake->lock);
        if (e->n) {
            *ev = &e->q[0]->ev;
            memmove(e->q, e->q + 1, sizeof(e->q[0]) * (size_t)(e->n - 1));
            e->n--;
            char b;
            if (read(e->pipe[0], &b, 1) != 1)
                abort();
            pthread_mutex_unlock(&g_fake->lock);
            return 0;
        }
        pthread_mutex_unlock(&g_fake->lock);
        struct pollfd p[2] = {{.fd = e->pipe[0], .events = POLLIN},
                              {.fd = wake_fd, .events = POLLIN}};
        int n = poll(p, wake_fd >= 0 ? 2 : 1, timeout_ms);
        if (n <= 0 || !(p[0].revents & POLLIN))
            return n < 0 ? -1 : 1;
    }
}

static int f_ack_cm_event(struct rdma_cm_event *ev)
{
    pthread_mutex_lock(&g_fake->lock);
    pthread_cond_broadcast(&g_fake->cond);
    pthread_mutex_unlock(&g_fake->lock);
    free(ev); /* struct fev starts with the event */
    return 0;
}

void fake_inject_connect_from(const char *ipv4, const void *data, uint8_t len)
{
    struct rdma_cm_id *child = calloc(1, sizeof(*child));
    child->route.addr.dst_sin.sin_family = AF_INET;
    if (inet_pton(AF_INET, ipv4, &child->route.addr.dst_sin.sin_addr) != 1)
        abort();
    pthread_mutex_lock(&g_fake->lock);
    child->verbs = &g_fake->ctx[0];
    child->channel = g_fake->listen_ch;
    child->ps = RDMA_PS_TCP;
    g_fake->ids_created++;
    queue_event(g_fake->listen_ch, child, RDMA_CM_EVENT_CONNECT_REQUEST, 0, data, len);
    pthread_mutex_unlock(&g_fake->lock);
}

void fake_inject_connect(const void *data, uint8_t len)
{
    fake_inject_connect_from("10.0.0.3", data, len);
}

void fake_inject_peer_gone(void)
{
    pthread_mutex_lock(&g_fake->lock);
    queue_event(last_connected->channel, last_connected, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
    pthread_mutex_unlock(&g_fake->lock);
}

void fake_inject_disconnect_last(void)
{
    fake_inject_event_last(RDMA_CM_EVENT_DISCONNECTED);
}

void fake_inject_event_last(enum rdma_cm_event_type type)
{
    pthread_mutex_lock(&g_fake->lock);
    queue_event(g_fake->listen_ch, last_accepted, type, 0, NULL, 0);
    pthread_mutex_unlock(&g_fake->lock);
}

bool fake_wait_for(const int *counter, int want)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    bool ok = true;
    pthread_mutex_lock(&g_fake->lock);
    while (*counter < want && ok)
        ok = pthread_cond_timedwait(&g_fake->cond, &g_fake->lock, &dl) == 0;
    ok = *counter >= want;
    pthread_mutex_unlock(&g_fake->lock);
    return ok;
}

static int f_set_option(struct rdma_cm_id *id, int level, int optname, void *val, size_t len)
{
    (void)id;
    if (level != RDMA_OPTION_ID || (optname == RDMA_OPTION_ID_TOS && len != sizeof(uint8_t)) ||
        (optname == RDMA_OPTION_ID_ACK_TIMEOUT && len != sizeof(uint8_t))) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&g_fake->lock);
    if (optname == RDMA_OPTION_ID_TOS)
        g_fake->tos = *(uint8_t *)val;
    else if (optname == RDMA_OPTION_ID_ACK_TIMEOUT)
        g_fake->ack_timeout = *(uint8_t *)val;
    pthread_mutex_unlock(&g_fake->lock);
    return 0;
}

static int async_fd_of(int d)
{
    if (g_fake->async_pipe[d][0] < 0 && pipe(g_fake->async_pipe[d]))
        abort();
    return g_fake->async_pipe[d][0];
}

static int f_get_async_event(struct ibv_context *ctx, int wake_fd, int timeout_ms,
                             struct ibv_async_event *ev)
{
    int d = ctx_index(ctx);
    if (d < 0)
        return -1;
    pthread_mutex_lock(&g_fake->lock);
    int fd = async_fd_of(d);
    pthread_mutex_unlock(&g_fake->lock);
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
    int n = poll(p, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n <= 0 || !(p[0].revents & POLLIN))
        return n < 0 ? -1 : 1;
    int type;
    if (read(fd, &type, sizeof(type)) != (ssize_t)sizeof(type))
        return -1;
    memset(ev, 0, sizeof(*ev));
    ev->event_type = (enum ibv_event_type)type;
    ev->element.port_num = 1;
    return 0;
}

static void f_ack_async_event(struct ibv_async_event *ev)
{
    (void)ev;
}

static int f_fork_init(void)
{
    pthread_mutex_lock(&g_fake->lock);
    int rc = g_fake->mrs_live > 0 ? EINVAL : 0; /* ibv_fork_init(3): after a registration */
    if (!rc)
        g_fake->fork_inited = true;
    pthread_mutex_unlock(&g_fake->lock);
    return rc;
}

void fake_inject_async(int d, enum ibv_event_type type)
{
    pthread_mutex_lock(&g_fake->lock);
    int fd = async_fd_of(d);
    (void)fd;
    if (type == IBV_EVENT_PORT_ERR || type == IBV_EVENT_DEVICE_FATAL)
        g_fake->port_down[d] = true;
    else if (type == IBV_EVENT_PORT_ACTIVE)
        g_fake->port_down[d] = false;
    int t = (int)type;
    if (write(g_fake->async_pipe[d][1], &t, sizeof(t)) != (ssize_t)sizeof(t))
        abort();
    pthread_mutex_unlock(&g_fake->lock);
}

void fake_init(struct fake *f)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    for (int d = 0; d < FAKE_MAX_DEVS; d++) {
        f->ctx[d].device = &f->dev[d];
        f->ctx[d].async_fd = -1;
        f->ctx[d].num_comp_vectors = 1;
        f->async_pipe[d][0] = f->async_pipe[d][1] = -1;
    }
    f->ndev = 1;
    f->list[0] = &f->ctx[0];
    f->ack_timeout = f->tos = -1;
    snprintf(f->dev_addr[0], sizeof(f->dev_addr[0]), "10.0.0.1"); /* device 0's netdev */
    f->fail_status = IBV_WC_REM_ACCESS_ERR;
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_ACCEPT, .client_id = {7, 7}};
    mc_rdma_conn_msg_encode(&m, f->accept_msg);
    f->accept_len = 56; /* padded, as InfiniBand CM delivers it */
    g_fake = f;
    last_accepted = NULL;
    last_connected = NULL;
}

const struct mc_rdma_ops fake_ops = {
    .name = "fake",
    .get_devices = f_get_devices,
    .free_devices = f_free_devices,
    .device_name = f_device_name,
    .query_device = f_query_device,
    .alloc_pd = f_alloc_pd,
    .dealloc_pd = f_dealloc_pd,
    .reg_mr = f_reg_mr,
    .dereg_mr = f_dereg_mr,
    .create_comp_channel = f_create_comp_channel,
    .destroy_comp_channel = f_destroy_comp_channel,
    .create_cq = f_create_cq,
    .destroy_cq = f_destroy_cq,
    .req_notify_cq = f_req_notify_cq,
    .wait_cq_event = f_wait_cq_event,
    .poll_cq = f_poll_cq,
    .post_send = f_post_send,
    .create_event_channel = f_create_event_channel,
    .destroy_event_channel = f_destroy_event_channel,
    .create_id = f_create_id,
    .destroy_id = f_destroy_id,
    .bind_addr = f_bind_addr,
    .listen = f_listen,
    .resolve_addr = f_resolve_addr,
    .resolve_route = f_resolve_route,
    .create_qp = f_create_qp,
    .destroy_qp = f_destroy_qp,
    .connect = f_connect,
    .accept = f_accept,
    .reject = f_reject,
    .disconnect = f_disconnect,
    .get_cm_event = f_get_cm_event,
    .ack_cm_event = f_ack_cm_event,
    .set_option = f_set_option,
    .query_port = f_query_port,
    .get_async_event = f_get_async_event,
    .ack_async_event = f_ack_async_event,
    .fork_init = f_fork_init,
};
