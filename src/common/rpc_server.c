/*
 * rpc_server.c - the RPC server's API side: answering calls (mc_rpc_reply*, from any thread),
 * call accessors, and the server's lifecycle (new, register, start, stop, free, stats). The
 * I/O threads live in rpc_server_conn.c; rpc_server_internal.h has the split and the shared
 * state. See rpc_server.h for the design.
 */
#include "common/rpc_server.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
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

#include "common/log.h"
#include "common/pb_budget.h"
#include "common/rpc_server_internal.h"
#include "mooncake/errors.h"

/* ---- replies ----------------------------------------------------------------------------- */

/* One allocation per item: the item, its iovecs, then buflen bytes of buf (a reply costs one
 * malloc, not a calloc for the item and a malloc for its bytes). */
struct out_item *mc_rpcs_item_new(size_t buflen, int npayload)
{
    size_t head = sizeof(struct out_item) + (size_t)(1 + npayload) * sizeof(struct iovec);
    struct out_item *it = malloc(head + (buflen ? buflen : 1));
    if (!it)
        return NULL;
    memset(it, 0, head);
    it->buf = (uint8_t *)it + head;
    it->niov = 1 + npayload;
    it->iov[0].iov_base = it->buf;
    it->iov[0].iov_len = buflen;
    return it;
}

struct out_item *mc_rpcs_frame_new(uint16_t method, uint64_t id, int32_t status, const void *body,
                                   size_t len)
{
    struct out_item *it = mc_rpcs_item_new(MC_WIRE_HEADER_SIZE + len, 0);
    if (!it)
        return NULL;
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, method, id, status, (uint32_t)len);
    mc_wire_encode_header(&h, it->buf);
    if (len)
        memcpy(it->buf + MC_WIRE_HEADER_SIZE, body, len);
    return it;
}

static void reply_oom(struct mc_rpc_call *call)
{
    mc_error("rpc", "out of memory building reply", "method=%u", call->method);
    mc_rpcs_complete(call,
                     mc_rpcs_frame_new(call->method, call->id, MC_ERR_INTERNAL_ERROR, NULL, 0));
}

void mc_rpc_reply(struct mc_rpc_call *call, int32_t status, const void *body, size_t len)
{
    if (status != 0 || len > UINT32_MAX)
        len = 0;
    struct out_item *it = mc_rpcs_frame_new(call->method, call->id, status, body, len);
    if (!it) {
        reply_oom(call);
        return;
    }
    mc_rpcs_complete(call, it);
}

void mc_rpc_reply_msg(struct mc_rpc_call *call, int32_t status, const ProtobufCMessage *msg)
{
    size_t len = (status == 0 && msg) ? protobuf_c_message_get_packed_size(msg) : 0;
    if (len > UINT32_MAX) {
        mc_rpc_reply(call, MC_ERR_SERIALIZE_FAIL, NULL, 0);
        return;
    }
    /* One item: the header alone, or the header and the packed message behind it. */
    struct out_item *it = mc_rpcs_item_new(MC_WIRE_HEADER_SIZE + len, 0);
    if (!it) {
        reply_oom(call);
        return;
    }
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, call->method, call->id, status, (uint32_t)len);
    mc_wire_encode_header(&h, it->buf);
    if (len)
        protobuf_c_message_pack(msg, it->buf + MC_WIRE_HEADER_SIZE);
    mc_rpcs_complete(call, it);
}

uint8_t *mc_rpc_draft_room(struct mc_rpc_draft *d, size_t need)
{
    struct out_item *it = d->item;
    if (need > UINT32_MAX)
        return NULL;
    if (!it || need > d->cap) {
        size_t head = sizeof(struct out_item) + sizeof(struct iovec);
        size_t cap = it && d->cap * 2 > need ? d->cap * 2 : need;
        struct out_item *nit = realloc(it, head + MC_WIRE_HEADER_SIZE + (cap ? cap : 1));
        if (!nit)
            return NULL;
        if (!it)
            memset(nit, 0, head);
        it = nit;
        it->buf = (uint8_t *)it + head; /* the block may have moved */
        it->niov = 1;
        it->iov[0].iov_base = it->buf;
        d->item = it;
        d->cap = cap;
    }
    return it->buf + MC_WIRE_HEADER_SIZE;
}

void mc_rpc_draft_free(struct mc_rpc_draft *d)
{
    free(d->item);
    d->item = NULL;
    d->cap = 0;
}

void mc_rpc_reply_draft(struct mc_rpc_call *call, struct mc_rpc_draft *d, size_t len)
{
    if ((!d->item && !mc_rpc_draft_room(d, 0)) || len > d->cap) {
        mc_rpc_draft_free(d);
        reply_oom(call);
        return;
    }
    struct out_item *it = d->item;
    d->item = NULL;
    d->cap = 0;
    struct mc_wire_header h;
    mc_wire_header_init(&h, MC_WIRE_RESPONSE, call->method, call->id, 0, (uint32_t)len);
    mc_wire_encode_header(&h, it->buf);
    it->iov[0].iov_len = MC_WIRE_HEADER_SIZE + len;
    mc_rpcs_complete(call, it);
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
    struct out_item *it = mc_rpcs_item_new(MC_WIRE_HEADER_SIZE + MC_WIRE_PEER_PREFIX + clen, niov);
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
    /* the payload may point into the request body: keep it until written */
    if (call->body_inline) {
        it->req_call = call; /* the body lives as long as its call */
        atomic_fetch_add(&call->refs, 1);
    } else {
        it->req_body = call->body;
        call->body = NULL;
        call->len = 0;
    }
    mc_rpcs_complete(call, it);
}

void mc_rpc_call_drop(struct mc_rpc_call *call)
{
    mc_rpcs_complete(call, NULL);
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

bool mc_rpc_call_conn_closed(const struct mc_rpc_call *c)
{
    return atomic_load_explicit(&c->conn->gone, memory_order_acquire) ||
           atomic_load_explicit(&((struct mc_rpc_call *)c)->state, memory_order_acquire) ==
               CALL_DONE;
}

const uint8_t *mc_rpc_call_body(const struct mc_rpc_call *c, size_t *len)
{
    *len = c->len;
    return c->body;
}

int mc_rpc_call_check_endpoint(const struct mc_rpc_call *c, const char *endpoint)
{
    const struct conn *cn = c->conn;
    const struct mc_rpc_server *s = cn->io->srv;
    if (s->cfg.endpoint_check_off || cn->loopback)
        return 0;
    char host[64];
    const char *ep = endpoint ? endpoint : "";
    const char *end = ep[0] == '[' ? strchr(ep, ']') : strrchr(ep, ':');
    const char *start = ep[0] == '[' ? ep + 1 : ep;
    uint8_t a[16] = {0};
    bool ok = false;
    if (end && end > start && (size_t)(end - start) < sizeof(host)) {
        memcpy(host, start, (size_t)(end - start));
        host[end - start] = '\0';
        struct in_addr v4;
        if (inet_pton(AF_INET, host, &v4) == 1) {
            a[10] = a[11] = 0xff; /* v4-mapped, as the connection's address is kept */
            memcpy(a + 12, &v4, 4);
            ok = memcmp(a, cn->addr, 16) == 0;
        } else if (inet_pton(AF_INET6, host, a) == 1) {
            ok = memcmp(a, cn->addr, 16) == 0;
        }
    }
    if (ok)
        return 0;
    char q[MC_LOG_QUOTE_MAX];
    mc_warn(s->name, "endpoint refused: not the caller's own address",
            "peer=%s conn=%llu method=%s endpoint=%s", cn->peer, (unsigned long long)cn->id,
            mc_method_name(c->method) ? mc_method_name(c->method) : "?",
            mc_log_quote(ep, q, sizeof(q)));
    return MC_ERR_INVALID_PARAMS;
}

bool mc_rpc_call_is_admin(const struct mc_rpc_call *c)
{
    return !c->conn->io->srv->admin_auth.set || c->conn->admin;
}

bool mc_rpc_call_creds_on(const struct mc_rpc_call *c)
{
    return c->conn->io->srv->auth.set;
}

bool mc_rpc_call_proven_client(const struct mc_rpc_call *c, uint8_t *id)
{
    if (!c->conn->client_proven)
        return false;
    memcpy(id, c->conn->client_id, sizeof(c->conn->client_id));
    return true;
}

bool mc_rpc_call_mint_cred(const struct mc_rpc_call *c, const uint8_t *id, uint8_t *cred)
{
    const struct mc_rpc_server *s = c->conn->io->srv;
    if (!s->auth.set)
        return false;
    mc_auth_cred_mint(s->admin_auth.set ? &s->admin_auth : &s->auth, id, cred);
    return true;
}

void **mc_rpc_call_conn_ctx(struct mc_rpc_call *c)
{
    return &c->conn->ctx;
}

void *mc_rpc_call_handler_arg(const struct mc_rpc_call *c)
{
    return c->conn->io->srv->handlers[c->method].arg;
}

/* Decodes an untrusted body within the server's limits (common/pb_budget.h); on failure logs
 * and answers (INVALID_PARAMS for a repeated field over the batch cap, as a handler checking the
 * count would; DESERIALIZE_FAIL otherwise). */
static ProtobufCMessage *unpack_bounded(struct mc_rpc_call *c,
                                        const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                        size_t len, const char *what)
{
    struct mc_rpc_server *s = c->conn->io->srv;
    struct mc_pb_limits lim = {.max_repeated = s->cfg.max_repeated};
    struct mc_pb_report rep;
    ProtobufCMessage *m = mc_pb_unpack_bounded(desc, data, len, &lim, &rep);
    if (m)
        return m;
    if (rep.verdict == MC_PB_TOO_MANY || rep.verdict == MC_PB_OVER_BUDGET)
        atomic_fetch_add(&s->decode_refusals, 1);
    mc_warn(s->name, what, "method=%s conn=%llu peer=%s len=%zu reason=%s field=%s count=%llu",
            mc_method_name(c->method) ? mc_method_name(c->method) : "?",
            (unsigned long long)c->conn->id, c->conn->peer, len, mc_pb_verdict_name(rep.verdict),
            rep.field ? rep.field : "-", (unsigned long long)rep.count);
    mc_rpc_reply_status(c, rep.verdict == MC_PB_TOO_MANY ? MC_ERR_INVALID_PARAMS
                                                         : MC_ERR_DESERIALIZE_FAIL);
    return NULL;
}

void mc_rpc_call_refuse_body(struct mc_rpc_call *c, const char *why)
{
    struct mc_rpc_server *s = c->conn->io->srv;
    mc_warn(s->name, "undecodable request body", "method=%s conn=%llu peer=%s len=%zu reason=%s",
            mc_method_name(c->method) ? mc_method_name(c->method) : "?",
            (unsigned long long)c->conn->id, c->conn->peer, c->len, why ? why : "-");
    mc_rpc_reply_status(c, MC_ERR_DESERIALIZE_FAIL);
}

ProtobufCMessage *mc_rpc_call_unpack(struct mc_rpc_call *c, const ProtobufCMessageDescriptor *desc)
{
    return unpack_bounded(c, desc, c->body, c->len, "undecodable request body");
}

ProtobufCMessage *mc_rpc_call_unpack_peer(struct mc_rpc_call *c,
                                          const ProtobufCMessageDescriptor *desc,
                                          const uint8_t **payload, size_t *payload_len)
{
    struct mc_rpc_server *s = c->conn->io->srv;
    const uint8_t *ctl = NULL;
    size_t clen = 0;
    if (mc_wire_peer_split(c->body, c->len, &ctl, &clen, payload, payload_len) != 0 ||
        clen > s->cfg.max_control_bytes) {
        if (clen > s->cfg.max_control_bytes)
            atomic_fetch_add(&s->decode_refusals, 1);
        mc_warn(s->name, "undecodable peer request",
                "method=%s conn=%llu peer=%s len=%zu control_max=%llu",
                mc_method_name(c->method) ? mc_method_name(c->method) : "?",
                (unsigned long long)c->conn->id, c->conn->peer, c->len,
                (unsigned long long)s->cfg.max_control_bytes);
        mc_rpc_reply_status(c, MC_ERR_DESERIALIZE_FAIL);
        return NULL;
    }
    return unpack_bounded(c, desc, ctl, clen, "undecodable peer request");
}

/* ---- built-in handlers ------------------------------------------------------------------- */

static void echo_handler(void *arg, struct mc_rpc_call *call)
{
    (void)arg;
    mc_rpc_reply(call, 0, call->body, call->len);
}

/* ---- server ------------------------------------------------------------------------------ */

/* Large request bodies kept for reuse, per server (see rpc_server_bodies.c): a peer Put's
 * window of 1 MiB slices on a few connections. */
#define BODY_CACHE_BYTES (32u << 20)

void mc_rpc_server_config_init(struct mc_rpc_server_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->io_threads = 2;
    cfg->max_conns = 10000;
    cfg->max_inflight_per_conn = 1024;
    cfg->max_frame_bytes = MC_WIRE_DEFAULT_MAX_FRAME_BYTES;
    cfg->protected_mode = true;
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
    if (!s->cfg.body_ahead_bytes)
        s->cfg.body_ahead_bytes = 64u << 20;
    if (!s->cfg.max_pending_conns)
        s->cfg.max_pending_conns = MC_RPC_DEFAULT_MAX_PENDING;
    if (!s->cfg.max_pending_per_addr)
        s->cfg.max_pending_per_addr = MC_RPC_DEFAULT_MAX_PENDING_PER_ADDR;
    if (!s->cfg.out_soft_bytes)
        s->cfg.out_soft_bytes = s->cfg.max_frame_bytes;
    if (!s->cfg.out_hard_bytes)
        s->cfg.out_hard_bytes = 4 * s->cfg.out_soft_bytes;
    if (s->cfg.out_hard_bytes < s->cfg.out_soft_bytes)
        s->cfg.out_soft_bytes = s->cfg.out_hard_bytes;
    if (!s->cfg.max_repeated)
        s->cfg.max_repeated = MC_PB_DEFAULT_MAX_REPEATED;
    if (!s->cfg.max_control_bytes)
        s->cfg.max_control_bytes =
            (uint64_t)s->cfg.max_repeated * (MC_RPC_MAX_KEY_BYTES + 64) + (4u << 10);
    snprintf(s->name, sizeof(s->name), "%s", cfg->name && *cfg->name ? cfg->name : "rpc");
    s->cfg.name = s->name;
    s->cfg.bind_addr = NULL; /* not kept: only used in start, copied below */
    if (cfg->auth && cfg->auth->set)
        s->auth = *cfg->auth;
    s->cfg.auth = NULL; /* copied into s->auth */
    if (cfg->admin_auth && cfg->admin_auth->set)
        s->admin_auth = *cfg->admin_auth;
    s->cfg.admin_auth = NULL; /* copied into s->admin_auth */
    s->lfd = -1;
    pthread_mutex_init(&s->addr_lock, NULL);
    s->bodies = mc_rpcs_bodies_new(BODY_CACHE_BYTES);
    if (!s->bodies) {
        pthread_mutex_destroy(&s->addr_lock);
        free(s);
        return MC_ERR_INTERNAL_ERROR;
    }
    s->handlers[MC_METHOD_ECHO].fn = echo_handler;
    s->nio = s->cfg.io_threads;
    s->io = calloc((size_t)s->nio, sizeof(*s->io));
    if (!s->io) {
        mc_rpcs_bodies_release(s->bodies);
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
    s->logger = mc_log_current();
    for (int i = 0; i < s->nio; i++) {
        if (pthread_create(&s->io[i].tid, NULL, mc_rpcs_io_main, &s->io[i]) != 0) {
            mc_error(s->name, "cannot start I/O thread", "errno=%d", errno);
            mc_rpc_server_stop(s);
            return MC_ERR_INTERNAL_ERROR;
        }
        s->io[i].started = true;
    }
    mc_info(s->name, "rpc server listening",
            "addr=%s port=%u io_threads=%d max_conns=%d auth=%s protected_mode=%s",
            s->cfg.bind_addr ? s->cfg.bind_addr : "0.0.0.0", s->port, s->nio, s->cfg.max_conns,
            s->auth.set ? "token" : "none",
            s->auth.set             ? "n/a"
            : s->cfg.protected_mode ? "on"
                                    : "off");
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
            mc_rpcs_drain_queue(io, true);
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
    for (int b = 0; b < ADDR_BUCKETS; b++) /* empty once every connection closed */
        while (s->addrs[b]) {
            struct addr_count *e = s->addrs[b];
            s->addrs[b] = e->next;
            free(e);
        }
    pthread_mutex_destroy(&s->addr_lock);
    free((void *)s->cfg.bind_addr);
    mc_rpcs_bodies_release(s->bodies);
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
    st->auth_failures = atomic_load(&m->auth_failures);
    st->protected_refusals = atomic_load(&m->protected_refusals);
    st->idle_closed = atomic_load(&m->idle_closed);
    st->idle_sweeps = atomic_load(&m->idle_sweeps);
    st->bodies_receiving = atomic_load(&m->bodies_receiving);
    st->body_bytes_buffered = atomic_load(&m->body_bytes_buffered);
    st->decode_refusals = atomic_load(&m->decode_refusals);
    st->pending_refusals = atomic_load(&m->pending_refusals);
    st->out_paused = atomic_load(&m->out_paused_total);
    st->out_closed = atomic_load(&m->out_closed_total);
    int64_t q = atomic_load(&m->out_bytes_queued);
    st->out_bytes_queued = q > 0 ? (uint64_t)q : 0;
    mc_rpcs_bodies_stats(m->bodies, &st->body_buffers_new, &st->body_buffers_reused);
}
