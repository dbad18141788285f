/*
 * rdma_conn.c - devices, memory regions and rdma_cm connections of the RDMA transport
 * (rdma_internal.h).
 *
 * Connection set-up is librdmacm's: the active side resolves the peer's "host:port" to an
 * address (rdma_resolve_addr picks the local device and, on RoCE, the GID that matches the IP
 * address), resolves the route, creates its RC queue pair on that device and connects with the
 * connection message (rdma_plan.h) as private data; rdma_cm moves the queue pair through
 * INIT, RTR and RTS on both sides. The listener (a thread sleeping on its event channel) checks
 * the message, creates a queue pair for the peer and accepts with its own message, or rejects.
 * RDMA READ depth is the smaller of 16 and what the device supports.
 *
 * With an auth token the set-up proves it both ways before any queue pair exists on the
 * listener's side (rdma_plan.h has the messages): the dialler's first connect carries a hello
 * (its nonce); the listener rejects it with a challenge (its nonce and its proof) and keeps the
 * pair of nonces as a pending challenge; the dialler checks that proof and connects again, on a
 * fresh cm id, with its own proof; the listener accepts only a proof that matches a pending
 * challenge of that client id, which is then used up (a replay or a second guess finds none).
 * Anything else is rejected, logged with the peer address and counted. The rkeys a peer needs
 * come in replica descriptors from the master, whose connections prove the token too.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/rdma_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define RD_ATOM_MAX 16

/* ---- devices and memory regions ----------------------------------------------------------- */

int mc_rdma_ctx_open(struct rdma_ctx *x, const struct mc_rdma_ops *ops)
{
    memset(x, 0, sizeof(*x));
    x->ops = ops;
    x->ack_timeout = x->tos = -1;
    pthread_mutex_init(&x->mr_lock, NULL);
    static _Atomic uint32_t next_lo_idx;
    x->lo_idx = atomic_fetch_add(&next_lo_idx, 1);
    mc_rdma_fork_safe(ops);
    int n = 0;
    errno = 0;
    x->devlist = ops->get_devices(&n);
    if (!x->devlist || n <= 0) {
        mc_error("rdma",
                 "no RDMA device found: protocol rdma cannot start; use --protocol=tcp "
                 "(library config: protocol=tcp)",
                 "devices=0 errno=%d(%s)", errno, errno ? strerror(errno) : "none");
        return MC_ERR_NOT_SUPPORTED;
    }
    for (int i = 0; i < n && x->ndev < MC_RDMA_MAX_DEVS; i++) {
        struct ibv_context *ctx = x->devlist[i];
        struct ibv_device_attr attr;
        memset(&attr, 0, sizeof(attr));
        if (ops->query_device(ctx, &attr)) {
            mc_warn("rdma", "cannot query device, skipped", "device=%s", ops->device_name(ctx));
            x->devlist[i] = NULL;
            continue;
        }
        if (!mc_rdma_port_active(ops, ctx, attr.phys_port_cnt)) {
            x->devlist[i] = NULL;
            continue;
        }
        struct ibv_pd *pd = ops->alloc_pd(ctx);
        if (!pd) {
            mc_warn("rdma", "cannot allocate a protection domain, device skipped",
                    "device=%s errno=%d", ops->device_name(ctx), errno);
            x->devlist[i] = NULL;
            continue;
        }
        /* keep the usable ones first, in order: pd[k] belongs to devlist[k] */
        x->devlist[i] = NULL;
        x->devlist[x->ndev] = ctx;
        x->pd[x->ndev] = pd;
        x->in_use[x->ndev] = true; /* until the transport narrows it (devices, --host) */
        x->rd_atom[x->ndev] =
            (uint8_t)(attr.max_qp_rd_atom < RD_ATOM_MAX ? attr.max_qp_rd_atom : RD_ATOM_MAX);
        x->init_rd_atom[x->ndev] =
            (uint8_t)(attr.max_qp_init_rd_atom < RD_ATOM_MAX ? attr.max_qp_init_rd_atom
                                                             : RD_ATOM_MAX);
        mc_info("rdma", "device ready", "device=%s max_qp_rd_atom=%d", ops->device_name(ctx),
                attr.max_qp_rd_atom);
        x->ndev++;
    }
    if (x->ndev == 0) {
        mc_error("rdma",
                 "no usable RDMA device: protocol rdma cannot start; use --protocol=tcp "
                 "(library config: protocol=tcp)",
                 "devices=%d", n);
        return MC_ERR_NOT_SUPPORTED;
    }
    return 0;
}

static int dev_index(struct rdma_ctx *x, struct ibv_context *ctx)
{
    for (int d = 0; d < x->ndev; d++)
        if (x->devlist[d] == ctx)
            return d;
    return -1;
}

/* ---- connections -------------------------------------------------------------------------- */

static int parse_endpoint(const char *ep, struct sockaddr_storage *ss)
{
    char host[128], port[8];
    const char *colon = strrchr(ep, ':');
    if (!colon || colon == ep || strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof(port))
        return -1;
    size_t hl = (size_t)(colon - ep);
    if (ep[0] == '[' && hl >= 2 && ep[hl - 1] == ']') {
        ep++;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return -1;
    memcpy(host, ep, hl);
    host[hl] = 0;
    snprintf(port, sizeof(port), "%s", colon + 1);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICSERV}, *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) || !res)
        return -1;
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

int mc_rdma_ctx_device_of(struct rdma_ctx *x, const char *host)
{
    const struct mc_rdma_ops *ops = x->ops;
    char ep[160];
    struct sockaddr_storage ss;
    if (!host || !*host)
        return -1;
    snprintf(ep, sizeof(ep), strchr(host, ':') ? "[%s]:0" : "%s:0", host);
    if (parse_endpoint(ep, &ss))
        return -1;
    struct rdma_event_channel *ch = ops->create_event_channel();
    struct rdma_cm_id *id = NULL;
    int dev = -1;
    if (!ch)
        return -1;
    if (ops->create_id(ch, &id, NULL, RDMA_PS_TCP) == 0) {
        if (ops->bind_addr(id, (struct sockaddr *)&ss) == 0 && id->verbs)
            dev = dev_index(x, id->verbs);
        ops->destroy_id(id);
    }
    ops->destroy_event_channel(ch);
    return dev;
}

/* The QP and CQ of a connection whose id has its device (id->verbs) set. */
static int conn_make_qp(struct rdma_ctx *x, struct rdma_conn *c, bool with_channel)
{
    const struct mc_rdma_ops *ops = x->ops;
    c->dev = dev_index(x, c->id->verbs);
    if (c->dev >= 0)
        c->gen = atomic_load(&x->dev_gen[c->dev]);
    if (c->dev < 0) {
        mc_warn("rdma", "connection is on a device that is not open", "device=%s",
                ops->device_name(c->id->verbs));
        return -1;
    }
    if (with_channel) {
        c->cch = ops->create_comp_channel(c->id->verbs);
        if (!c->cch) {
            mc_warn("rdma", "cannot create a completion channel", "errno=%d", errno);
            return -1;
        }
    }
    /* CQs spread round robin over the device's completion vectors (each its own interrupt,
     * usually on its own CPU), not all on vector 0 */
    int nvec = c->id->verbs->num_comp_vectors;
    int vec = nvec > 1 ? (int)(atomic_fetch_add(&x->next_vec[c->dev], 1) % (uint32_t)nvec) : 0;
    c->cq = ops->create_cq(c->id->verbs, MC_RDMA_CQE, c, c->cch, vec);
    if (!c->cq) {
        mc_warn("rdma", "cannot create a completion queue", "errno=%d", errno);
        return -1;
    }
    struct ibv_qp_init_attr qa;
    memset(&qa, 0, sizeof(qa));
    qa.send_cq = qa.recv_cq = c->cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = MC_RDMA_MAX_WR;
    qa.cap.max_recv_wr = 1;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    if (ops->create_qp(c->id, x->pd[c->dev], &qa)) {
        mc_warn("rdma", "cannot create a queue pair", "errno=%d(%s)", errno, strerror(errno));
        return -1;
    }
    return 0;
}

void mc_rdma_conn_destroy(struct rdma_ctx *x, struct rdma_conn *c)
{
    if (!c)
        return;
    const struct mc_rdma_ops *ops = x->ops;
    if (c->id) {
        if (c->id->qp) {
            ops->disconnect(c->id);
            ops->destroy_qp(c->id);
        }
        ops->destroy_id(c->id);
    }
    if (c->cq)
        ops->destroy_cq(c->cq);
    if (c->cch)
        ops->destroy_comp_channel(c->cch);
    if (c->ech)
        ops->destroy_event_channel(c->ech);
    free(c);
}

/* Waits for the next event on ech; it must be `want`. 0 or -1 (logged). */
static int await(const struct mc_rdma_ops *ops, struct rdma_event_channel *ech,
                 enum rdma_cm_event_type want, int timeout_ms, const char *endpoint)
{
    struct rdma_cm_event *ev = NULL;
    int r = ops->get_cm_event(ech, -1, timeout_ms, &ev);
    if (r != 0) {
        mc_warn("rdma", r > 0 ? "connection step timed out" : "reading a cm event failed",
                "endpoint=%s waiting_for=%s", endpoint, rdma_event_str(want));
        return -1;
    }
    int rc = 0;
    if (ev->event != want) {
        mc_warn("rdma", "connection failed", "endpoint=%s event=%s status=%d waiting_for=%s",
                endpoint, rdma_event_str(ev->event), ev->status, rdma_event_str(want));
        rc = -1;
    }
    ops->ack_cm_event(ev);
    return rc;
}

/* The peer's answer to one connect: the event (ESTABLISHED or REJECTED) and its message. */
struct answer {
    enum rdma_cm_event_type event;
    int status;
    bool msg_ok; /* msg decoded */
    struct mc_rdma_conn_msg msg;
};

/* One rdma_cm connect to dst carrying send: address, route, queue pair, connect, answer. 0 with
 * *a filled (an established connection in *out, else *out NULL), or -1 (logged) when no answer
 * came. */
static int dial(struct rdma_ctx *x, const char *endpoint, const struct sockaddr_storage *dst,
                const struct mc_rdma_conn_msg *send, int timeout_ms, struct rdma_conn **out,
                struct answer *a)
{
    const struct mc_rdma_ops *ops = x->ops;
    *out = NULL;
    memset(a, 0, sizeof(*a));
    struct rdma_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -1;
    c->next_wr = 1;
    c->ech = ops->create_event_channel();
    if (!c->ech) {
        mc_warn("rdma", "cannot create a cm event channel", "errno=%d(%s)", errno, strerror(errno));
        goto fail;
    }
    if (ops->create_id(c->ech, &c->id, c, RDMA_PS_TCP)) {
        mc_warn("rdma", "cannot create a cm id", "errno=%d", errno);
        c->id = NULL;
        goto fail;
    }
    /* from the serving device's address: the connection then uses the device our buffers are
     * registered on (a route through another NIC would find no keys there) */
    struct sockaddr_storage src;
    bool with_src = false;
    if (x->dial_from_host) {
        char sep[160];
        snprintf(sep, sizeof(sep), strchr(x->host, ':') ? "[%s]:0" : "%s:0", x->host);
        with_src = parse_endpoint(sep, &src) == 0 && src.ss_family == dst->ss_family;
    }
    if (ops->resolve_addr(c->id, with_src ? (struct sockaddr *)&src : NULL, (struct sockaddr *)dst,
                          timeout_ms) ||
        await(ops, c->ech, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms, endpoint))
        goto fail;
    if (mc_rdma_id_options(x, c->id)) /* ToS before the route is resolved, ACK timeout */
        goto fail;
    if (ops->resolve_route(c->id, timeout_ms) ||
        await(ops, c->ech, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms, endpoint))
        goto fail;
    if (conn_make_qp(x, c, true))
        goto fail;
    uint8_t pd[MC_RDMA_CONN_MSG_MAX];
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof(cp));
    cp.private_data = pd;
    cp.private_data_len = (uint8_t)mc_rdma_conn_msg_encode(send, pd);
    cp.responder_resources = x->rd_atom[c->dev];
    cp.initiator_depth = x->init_rd_atom[c->dev];
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    if (ops->connect(c->id, &cp)) {
        mc_warn("rdma", "rdma_connect failed", "endpoint=%s errno=%d", endpoint, errno);
        goto fail;
    }
    struct rdma_cm_event *ev = NULL;
    int r = ops->get_cm_event(c->ech, -1, timeout_ms, &ev);
    if (r != 0) {
        mc_warn("rdma", r > 0 ? "connection step timed out" : "reading a cm event failed",
                "endpoint=%s waiting_for=%s", endpoint, rdma_event_str(RDMA_CM_EVENT_ESTABLISHED));
        goto fail;
    }
    a->event = ev->event;
    a->status = ev->status;
    a->msg_ok = mc_rdma_conn_msg_decode(ev->param.conn.private_data,
                                        ev->param.conn.private_data_len, &a->msg) == 0;
    ops->ack_cm_event(ev);
    if (a->event == RDMA_CM_EVENT_ESTABLISHED)
        *out = c;
    else
        mc_rdma_conn_destroy(x, c);
    return 0;
fail:
    mc_rdma_conn_destroy(x, c);
    return -1;
}

/* The last connect's answer must be an accept; anything else is logged and *c destroyed. */
static int want_accept(struct rdma_ctx *x, const char *endpoint, const struct answer *a,
                       struct rdma_conn **c)
{
    if (a->event != RDMA_CM_EVENT_ESTABLISHED) {
        mc_warn("rdma", "connection failed", "endpoint=%s event=%s status=%d waiting_for=%s",
                endpoint, rdma_event_str(a->event), a->status,
                rdma_event_str(RDMA_CM_EVENT_ESTABLISHED));
        return -1;
    }
    if (!a->msg_ok || a->msg.kind != MC_RDMA_CONN_ACCEPT) {
        mc_warn("rdma", "peer accepted with a malformed connection message", "endpoint=%s",
                endpoint);
        mc_rdma_conn_destroy(x, *c);
        *c = NULL;
        return -1;
    }
    return 0;
}

/* The token handshake (rdma_plan.h): hello, the peer's challenge in its reject, our proof. */
static int dial_authenticated(struct rdma_ctx *x, const char *endpoint,
                              const struct sockaddr_storage *dst, struct mc_id client_id,
                              int timeout_ms, struct rdma_conn **out)
{
    struct mc_rdma_conn_msg hello = {.kind = MC_RDMA_CONN_HELLO, .client_id = client_id};
    if (mc_auth_random(hello.nonce, sizeof(hello.nonce)))
        return -1;
    struct answer a;
    struct rdma_conn *c = NULL;
    if (dial(x, endpoint, dst, &hello, timeout_ms, &c, &a))
        return -1;
    if (c || a.event != RDMA_CM_EVENT_REJECTED || !a.msg_ok ||
        a.msg.kind != MC_RDMA_CONN_CHALLENGE) {
        /* a peer without the token (or in protected mode) rejects a hello without a challenge;
         * one that accepts it never saw a token either */
        mc_rdma_conn_destroy(x, c);
        atomic_fetch_add(&x->auth_failed, 1);
        mc_warn("rdma",
                "peer did not answer the token handshake: it has no auth token, or refuses this "
                "host",
                "endpoint=%s event=%s status=%d", endpoint, rdma_event_str(a.event), a.status);
        return -1;
    }
    /* either token of a rotation (a token file with two lines) is accepted, as the tcp gate */
    if (!mc_auth_check_server_proof(&x->auth, hello.nonce, a.msg.nonce, a.msg.mac)) {
        atomic_fetch_add(&x->auth_failed, 1);
        mc_warn("rdma", "peer failed to prove the auth token: not connecting to it", "endpoint=%s",
                endpoint);
        return -1;
    }
    struct mc_rdma_conn_msg prove = {.kind = MC_RDMA_CONN_PROVE, .client_id = client_id};
    mc_auth_client_proof(&x->auth, hello.nonce, a.msg.nonce, prove.mac);
    if (dial(x, endpoint, dst, &prove, timeout_ms, &c, &a))
        return -1;
    if (a.event == RDMA_CM_EVENT_REJECTED) {
        atomic_fetch_add(&x->auth_failed, 1);
        mc_warn("rdma", "peer refused our proof of the auth token", "endpoint=%s status=%d",
                endpoint, a.status);
        return -1;
    }
    if (want_accept(x, endpoint, &a, &c))
        return -1;
    *out = c;
    return 0;
}

int mc_rdma_conn_connect(struct rdma_ctx *x, const char *endpoint, struct mc_id client_id,
                         int timeout_ms, struct rdma_conn **out)
{
    const struct mc_rdma_ops *ops = x->ops;
    *out = NULL;
    struct sockaddr_storage dst;
    if (parse_endpoint(endpoint, &dst)) {
        mc_warn("rdma", "cannot resolve peer", "endpoint=%s", endpoint);
        return MC_ERR_TRANSFER_FAIL;
    }
    struct rdma_conn *c = NULL;
    if (x->auth.set) {
        if (dial_authenticated(x, endpoint, &dst, client_id, timeout_ms, &c))
            return MC_ERR_TRANSFER_FAIL;
    } else {
        struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_REQUEST, .client_id = client_id};
        struct answer a;
        if (dial(x, endpoint, &dst, &m, timeout_ms, &c, &a) || want_accept(x, endpoint, &a, &c))
            return MC_ERR_TRANSFER_FAIL;
    }
    mc_debug("rdma", "connected", "endpoint=%s device=%s auth=%d", endpoint,
             ops->device_name(c->id->verbs), x->auth.set ? 1 : 0);
    *out = c;
    return 0;
}

/* ---- listener ----------------------------------------------------------------------------- */

#define PENDING_MAX 64          /* challenges awaiting their prove */
#define PENDING_TTL_MS 30000ull /* a challenge unanswered this long is void */

/* A challenge this listener issued: single use, answered by a prove from the same client id. */
struct pending {
    bool live;
    struct mc_id client_id;
    uint64_t issued_ms;
    uint8_t cnonce[MC_RDMA_CONN_NONCE];
    uint8_t snonce[MC_RDMA_CONN_NONCE];
};

struct rdma_listener {
    struct rdma_event_channel *ech;
    struct rdma_cm_id *id;
    int wake[2];
    pthread_t thread;
    const struct mc_logger *logger; /* the thread logs through its starter's (the client's) */
    bool running;
    bool loopback_only; /* protected mode: peers from other hosts are rejected */
    struct mc_id client_id;
    pthread_mutex_t lock;
    struct rdma_conn *conns;          /* accepted */
    struct pending pend[PENDING_MAX]; /* only the listener thread touches these */
};

static void peer_addr(const struct rdma_cm_event *ev, char *out, size_t cap)
{
    const struct sockaddr *sa = &ev->id->route.addr.dst_addr;
    socklen_t len =
        sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    mc_auth_format_addr(sa, len, out, cap);
}

static void refuse(struct rdma_ctx *x, const struct rdma_cm_event *ev, const char *why)
{
    char peer[80];
    peer_addr(ev, peer, sizeof(peer));
    atomic_fetch_add(&x->auth_refused, 1);
    mc_warn("rdma", "rejected a connection: the peer did not prove the auth token",
            "peer=%s why=%s", peer, why);
    x->ops->reject(ev->id, NULL, 0);
    x->ops->destroy_id(ev->id);
}

/* Answers a hello with a challenge (in the reject: no queue pair yet). The oldest pending
 * challenge gives way when the table is full. */
static void challenge(struct rdma_ctx *x, struct rdma_listener *l, const struct rdma_cm_event *ev,
                      const struct mc_rdma_conn_msg *hello)
{
    uint64_t now = mc_now_ms();
    struct pending *p = &l->pend[0];
    for (int i = 0; i < PENDING_MAX; i++) {
        struct pending *q = &l->pend[i];
        if (!q->live || now - q->issued_ms > PENDING_TTL_MS) {
            p = q;
            break;
        }
        if (q->issued_ms < p->issued_ms)
            p = q;
    }
    struct mc_rdma_conn_msg m = {.kind = MC_RDMA_CONN_CHALLENGE, .client_id = l->client_id};
    if (mc_auth_random(m.nonce, sizeof(m.nonce))) {
        x->ops->reject(ev->id, NULL, 0);
        x->ops->destroy_id(ev->id);
        return;
    }
    *p = (struct pending){.live = true, .client_id = hello->client_id, .issued_ms = now};
    memcpy(p->cnonce, hello->nonce, sizeof(p->cnonce));
    memcpy(p->snonce, m.nonce, sizeof(p->snonce));
    mc_auth_server_proof(&x->auth, p->cnonce, p->snonce, m.mac);
    uint8_t pd[MC_RDMA_CONN_MSG_MAX];
    uint8_t len = (uint8_t)mc_rdma_conn_msg_encode(&m, pd);
    x->ops->reject(ev->id, pd, len);
    x->ops->destroy_id(ev->id);
}

/* Whether a prove answers a live challenge issued to its client id; that challenge is used up
 * either way. */
static bool proof_ok(struct rdma_ctx *x, struct rdma_listener *l, const struct mc_rdma_conn_msg *m)
{
    uint64_t now = mc_now_ms();
    bool ok = false;
    for (int i = 0; i < PENDING_MAX && !ok; i++) {
        struct pending *p = &l->pend[i];
        if (!p->live || !mc_id_eq(p->client_id, m->client_id))
            continue;
        if (now - p->issued_ms > PENDING_TTL_MS) {
            p->live = false;
            continue;
        }
        if (mc_auth_check_client_proof(&x->auth, p->cnonce, p->snonce, m->mac)) {
            ok = true;
            p->live = false;
        }
    }
    if (!ok) /* a wrong proof voids every challenge of that client id: no second guess */
        for (int i = 0; i < PENDING_MAX; i++)
            if (l->pend[i].live && mc_id_eq(l->pend[i].client_id, m->client_id))
                l->pend[i].live = false;
    return ok;
}

static void passive_accept(struct rdma_ctx *x, struct rdma_listener *l,
                           const struct rdma_cm_event *ev)
{
    const struct mc_rdma_ops *ops = x->ops;
    if (!x->auth.set && l->loopback_only && !mc_rdma_addr_is_own(x, &ev->id->route.addr.dst_addr)) {
        char peer[80];
        peer_addr(ev, peer, sizeof(peer));
        mc_warn("rdma",
                "rejected an RDMA connection from another host: protected mode without an auth "
                "token admits this host's own addresses only; give every client and the master "
                "the same --auth_token_file to serve RDMA peers on other hosts",
                "peer=%s", peer);
        ops->reject(ev->id, NULL, 0);
        ops->destroy_id(ev->id);
        return;
    }
    struct mc_rdma_conn_msg m;
    if (mc_rdma_conn_msg_decode(ev->param.conn.private_data, ev->param.conn.private_data_len, &m) ||
        (m.kind != MC_RDMA_CONN_REQUEST && m.kind != MC_RDMA_CONN_HELLO &&
         m.kind != MC_RDMA_CONN_PROVE)) {
        if (x->auth.set) {
            refuse(x, ev, "malformed connection message");
            return;
        }
        mc_warn("rdma", "rejected a connection: malformed connection message", "len=%u",
                ev->param.conn.private_data_len);
        ops->reject(ev->id, NULL, 0);
        ops->destroy_id(ev->id);
        return;
    }
    if (x->auth.set) {
        if (m.kind == MC_RDMA_CONN_HELLO) {
            challenge(x, l, ev, &m);
            return;
        }
        if (m.kind != MC_RDMA_CONN_PROVE || !proof_ok(x, l, &m)) {
            refuse(x, ev, m.kind == MC_RDMA_CONN_PROVE ? "wrong proof" : "no proof");
            return;
        }
    } else if (m.kind != MC_RDMA_CONN_REQUEST) {
        mc_warn("rdma",
                "rejected a connection that offers the auth token handshake: this process has no "
                "auth token (give both sides the same --auth_token_file)",
                "kind=%u", m.kind);
        ops->reject(ev->id, NULL, 0);
        ops->destroy_id(ev->id);
        return;
    }
    struct rdma_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        ops->reject(ev->id, NULL, 0);
        ops->destroy_id(ev->id);
        return;
    }
    c->id = ev->id;
    c->id->context = c;
    if (mc_rdma_id_options(x, c->id) || conn_make_qp(x, c, false)) {
        ops->reject(ev->id, NULL, 0);
        mc_rdma_conn_destroy(x, c);
        return;
    }
    uint8_t pd[MC_RDMA_CONN_MSG_MAX];
    struct mc_rdma_conn_msg me = {.kind = MC_RDMA_CONN_ACCEPT, .client_id = l->client_id};
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof(cp));
    cp.private_data = pd;
    cp.private_data_len = (uint8_t)mc_rdma_conn_msg_encode(&me, pd);
    /* rdma_accept(3): the connect request event already reports the peer's values from this
     * side's point of view (ib_cm swaps them: its responder_resources is the dialler's
     * initiator depth), so each is capped by its own name and the local device's limit */
    cp.responder_resources = ev->param.conn.responder_resources < x->rd_atom[c->dev]
                                 ? ev->param.conn.responder_resources
                                 : x->rd_atom[c->dev];
    cp.initiator_depth = ev->param.conn.initiator_depth < x->init_rd_atom[c->dev]
                             ? ev->param.conn.initiator_depth
                             : x->init_rd_atom[c->dev];
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    if (ops->accept(c->id, &cp)) {
        mc_warn("rdma", "rdma_accept failed", "errno=%d", errno);
        mc_rdma_conn_destroy(x, c);
        return;
    }
    char idbuf[MC_ID_STRLEN];
    mc_debug("rdma", "accepted a connection", "peer_client=%s", mc_id_format(m.client_id, idbuf));
    rdma_leaf_lock(&l->lock);
    c->next = l->conns;
    l->conns = c;
    rdma_leaf_unlock(&l->lock);
}

static struct rdma_conn *passive_take(struct rdma_listener *l, struct rdma_cm_id *id)
{
    rdma_leaf_lock(&l->lock);
    struct rdma_conn **pp = &l->conns, *c = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->id == id) {
            c = *pp;
            *pp = c->next;
            break;
        }
    rdma_leaf_unlock(&l->lock);
    return c;
}

static void *listener_main(void *arg)
{
    struct rdma_ctx *x = arg;
    struct rdma_listener *l = x->listener;
    const struct mc_rdma_ops *ops = x->ops;
    mc_log_set_current(l->logger);
    for (;;) {
        struct rdma_cm_event *ev = NULL;
        int r = ops->get_cm_event(l->ech, l->wake[0], -1, &ev);
        if (r != 0) {
            char b;
            if (r > 0 && read(l->wake[0], &b, 1) == 1)
                break; /* stop */
            if (r < 0) {
                mc_warn("rdma", "listener: reading a cm event failed", "errno=%d", errno);
                break;
            }
            continue;
        }
        /* acknowledge first (destroying an id waits for its events' acks), keeping a copy */
        struct rdma_cm_event copy = *ev;
        uint8_t pdata[256];
        uint8_t plen = ev->param.conn.private_data ? ev->param.conn.private_data_len : 0;
        if (plen)
            memcpy(pdata, ev->param.conn.private_data, plen);
        copy.param.conn.private_data = plen ? pdata : NULL;
        copy.param.conn.private_data_len = plen;
        ops->ack_cm_event(ev);
        switch (copy.event) {
        case RDMA_CM_EVENT_CONNECT_REQUEST:
            passive_accept(x, l, &copy);
            break;
        case RDMA_CM_EVENT_DISCONNECTED:
        case RDMA_CM_EVENT_CONNECT_ERROR:
        case RDMA_CM_EVENT_UNREACHABLE:
        case RDMA_CM_EVENT_REJECTED: {
            struct rdma_conn *c = passive_take(l, copy.id);
            mc_debug("rdma", "peer connection closed", "event=%s", rdma_event_str(copy.event));
            mc_rdma_conn_destroy(x, c);
            break;
        }
        case RDMA_CM_EVENT_DEVICE_REMOVAL: {
            /* the peer's queue pair on it is gone; pooled ones of ours on it are replaced */
            int d = copy.id ? dev_index(x, copy.id->verbs) : -1;
            if (d >= 0) {
                atomic_store(&x->dev_down[d], true);
                atomic_fetch_add(&x->dev_gen[d], 1);
            }
            mc_error("rdma", "RDMA device removed: its connections are closed", "device=%s",
                     d >= 0 ? ops->device_name(x->devlist[d]) : "?");
            mc_rdma_conn_destroy(x, passive_take(l, copy.id));
            break;
        }
        default:
            break;
        }
    }
    return NULL;
}

int mc_rdma_listen(struct rdma_ctx *x, const char *bind_addr, uint16_t port, struct mc_id client_id,
                   bool loopback_only)
{
    const struct mc_rdma_ops *ops = x->ops;
    if (x->listener)
        return MC_ERR_INVALID_PARAMS;
    if (mc_rdma_check_addr("bind_address", bind_addr) || mc_rdma_check_addr("host", x->host))
        return MC_ERR_INVALID_PARAMS;
    char ep[160];
    snprintf(ep, sizeof(ep), "%s:%u", bind_addr && *bind_addr ? bind_addr : "0.0.0.0", port);
    struct sockaddr_storage ss;
    if (parse_endpoint(ep, &ss)) {
        mc_error("rdma", "cannot parse the listen address", "addr=%s", ep);
        return MC_ERR_INVALID_PARAMS;
    }
    struct rdma_listener *l = calloc(1, sizeof(*l));
    if (!l)
        return MC_ERR_INTERNAL_ERROR;
    l->wake[0] = l->wake[1] = -1;
    l->client_id = client_id;
    l->loopback_only = loopback_only;
    pthread_mutex_init(&l->lock, NULL);
    x->listener = l;
    l->ech = ops->create_event_channel();
    if (!l->ech || ops->create_id(l->ech, &l->id, NULL, RDMA_PS_TCP)) {
        mc_error("rdma", "cannot create the listener", "errno=%d(%s)", errno, strerror(errno));
        goto fail;
    }
    if (ops->bind_addr(l->id, (struct sockaddr *)&ss) || ops->listen(l->id, 64)) {
        mc_error("rdma", "cannot listen", "addr=%s errno=%d(%s)", ep, errno, strerror(errno));
        goto fail;
    }
    if (pipe2(l->wake, O_CLOEXEC)) {
        l->wake[0] = l->wake[1] = -1;
        goto fail;
    }
    l->logger = mc_log_current();
    if (pthread_create(&l->thread, NULL, listener_main, x))
        goto fail;
    l->running = true;
    mc_info("rdma", "listening", "addr=%s", ep);
    return 0;
fail:;
    struct rdma_listener *dead = x->listener;
    x->listener = NULL;
    if (dead->id)
        ops->destroy_id(dead->id);
    if (dead->ech)
        ops->destroy_event_channel(dead->ech);
    if (dead->wake[0] >= 0) {
        close(dead->wake[0]);
        close(dead->wake[1]);
    }
    pthread_mutex_destroy(&dead->lock);
    free(dead);
    return MC_ERR_TRANSFER_FAIL;
}

size_t mc_rdma_listener_conns(struct rdma_ctx *x)
{
    size_t n = 0;
    if (!x->listener)
        return 0;
    rdma_leaf_lock(&x->listener->lock);
    for (struct rdma_conn *c = x->listener->conns; c; c = c->next)
        n++;
    rdma_leaf_unlock(&x->listener->lock);
    return n;
}

static void listener_stop(struct rdma_ctx *x)
{
    struct rdma_listener *l = x->listener;
    if (!l)
        return;
    if (l->running) {
        char b = 1;
        while (write(l->wake[1], &b, 1) < 0 && errno == EINTR)
            ;
        pthread_join(l->thread, NULL);
    }
    while (l->conns) {
        struct rdma_conn *c = l->conns;
        l->conns = c->next;
        mc_rdma_conn_destroy(x, c);
    }
    x->ops->destroy_id(l->id);
    x->ops->destroy_event_channel(l->ech);
    close(l->wake[0]);
    close(l->wake[1]);
    pthread_mutex_destroy(&l->lock);
    free(l);
    x->listener = NULL;
}

void mc_rdma_ctx_close(struct rdma_ctx *x)
{
    if (!x->ops)
        return;
    mc_rdma_async_stop(x);
    listener_stop(x);
    for (size_t i = 0; i < x->nmrs; i++)
        mc_rdma_mr_release(x, &x->mrs[i]);
    free(x->mrs);
    x->mrs = NULL;
    x->nmrs = x->capmrs = 0;
    for (int d = 0; d < x->ndev; d++)
        x->ops->dealloc_pd(x->pd[d]);
    if (x->devlist)
        x->ops->free_devices(x->devlist);
    pthread_mutex_destroy(&x->mr_lock);
    memset(x, 0, sizeof(*x));
}
