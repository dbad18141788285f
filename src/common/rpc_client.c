/*
 * rpc_client.c - see rpc_client.h for the design.
 *
 * Locks: `lock` guards the connection state (up, gen, fd number), the pending table and every
 * pending entry; `send_lock` serializes frame writes and is what the reconnect path takes
 * before closing an old socket, so no sender ever writes to a recycled descriptor;
 * `connect_lock` serializes (re)connects. Order: connect_lock -> send_lock -> lock.
 * A pending entry lives on its caller's stack. The receiver never touches an entry outside
 * `lock` except while the entry is marked `receiving` (payload going straight into the caller's
 * buffer), and a caller never leaves while its entry is `receiving`.
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

struct pending {
    uint64_t id;
    uint64_t gen;
    struct pending *next;
    pthread_cond_t cv;
    bool done, receiving;
    int status;
    uint8_t *resp; /* non-peer: whole body; peer: control bytes */
    size_t resp_len;
    bool peer;
    void *recv_buf;
    size_t recv_cap, recv_len;
};

struct mc_rpc_client {
    struct mc_rpc_client_config cfg;
    char name[32];
    pthread_mutex_t lock, send_lock, connect_lock;
    int fd;
    bool up;
    uint64_t gen;
    pthread_t rx;
    bool rx_joinable;
    uint64_t next_id;
    uint32_t backoff_ms;
    uint64_t next_attempt_ms;
    struct pending *buckets[NBUCKETS];
};

struct rx_arg {
    struct mc_rpc_client *c;
    int fd;
    uint64_t gen;
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

/* ---- socket helpers ---------------------------------------------------------------------- */

static int read_full(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n == 0)
            return -1;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int discard(int fd, size_t len)
{
    uint8_t scratch[16384];
    while (len) {
        size_t n = len < sizeof(scratch) ? len : sizeof(scratch);
        if (read_full(fd, scratch, n))
            return -1;
        len -= n;
    }
    return 0;
}

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

/* ---- receiver ---------------------------------------------------------------------------- */

/* Reads one peer reply body into p (entry marked receiving; lock not held). */
static int rx_peer_body(struct mc_rpc_client *c, int fd, struct pending *p, uint32_t len)
{
    uint8_t pre[MC_WIRE_PEER_PREFIX];
    if (len == 0)
        return 0; /* empty reply: no control, no payload */
    if (len < MC_WIRE_PEER_PREFIX) {
        p->status = MC_ERR_DESERIALIZE_FAIL;
        return discard(fd, len);
    }
    if (read_full(fd, pre, sizeof(pre)))
        return -1;
    uint32_t clen = mc_wire_get_u32(pre);
    uint32_t rest = len - MC_WIRE_PEER_PREFIX;
    if (clen > rest) {
        mc_warn(c->name, "bad peer reply", "control_length=%u body=%u", clen, len);
        p->status = MC_ERR_DESERIALIZE_FAIL;
        return discard(fd, rest);
    }
    if (clen) {
        p->resp = malloc(clen);
        if (!p->resp)
            return -1;
        p->resp_len = clen;
        if (read_full(fd, p->resp, clen))
            return -1;
    }
    size_t plen = rest - clen;
    if (plen > p->recv_cap || (plen && !p->recv_buf)) {
        p->status = MC_ERR_BUFFER_OVERFLOW;
        return discard(fd, plen);
    }
    if (plen && read_full(fd, p->recv_buf, plen))
        return -1;
    p->recv_len = plen;
    return 0;
}

static void *rx_main(void *arg)
{
    struct rx_arg a = *(struct rx_arg *)arg;
    free(arg);
    struct mc_rpc_client *c = a.c;
    const char *why = "closed by server";
    for (;;) {
        uint8_t hb[MC_WIRE_HEADER_SIZE];
        if (read_full(a.fd, hb, sizeof(hb)))
            break;
        struct mc_wire_header h;
        mc_wire_decode_header(hb, &h);
        enum mc_wire_check chk = mc_wire_validate(&h, c->cfg.max_frame_bytes);
        if (chk == MC_WIRE_OK && h.kind != MC_WIRE_RESPONSE)
            chk = MC_WIRE_BAD_KIND;
        if (chk != MC_WIRE_OK) {
            mc_warn(c->name, "bad response frame, closing", "reason=%s len=%u",
                    mc_wire_check_name(chk), h.body_length);
            why = "protocol error";
            break;
        }
        pthread_mutex_lock(&c->lock);
        struct pending *p = pending_find(c, h.request_id);
        bool direct = p && p->peer && h.status == 0;
        if (direct)
            p->receiving = true;
        pthread_mutex_unlock(&c->lock);
        if (direct) {
            p->status = 0;
            int r = rx_peer_body(c, a.fd, p, h.body_length);
            pthread_mutex_lock(&c->lock);
            p->receiving = false;
            pending_remove(c, p);
            if (r) {
                p->status = MC_ERR_RPC_FAIL;
                free(p->resp);
                p->resp = NULL;
                p->resp_len = 0;
            }
            p->done = true;
            pthread_cond_signal(&p->cv);
            pthread_mutex_unlock(&c->lock);
            if (r)
                break;
            continue;
        }
        /* ordinary body: read it first, then hand it to the call if it is still waiting */
        uint8_t *body = NULL;
        if (h.body_length) {
            body = malloc(h.body_length);
            if (!body || read_full(a.fd, body, h.body_length)) {
                free(body);
                break;
            }
        }
        pthread_mutex_lock(&c->lock);
        p = pending_find(c, h.request_id);
        if (p) {
            pending_remove(c, p);
            p->status = h.status;
            if (h.status == 0 && !p->peer) {
                p->resp = body;
                p->resp_len = h.body_length;
                body = NULL;
            }
            p->done = true;
            pthread_cond_signal(&p->cv);
        }
        pthread_mutex_unlock(&c->lock);
        free(body);
    }
    pthread_mutex_lock(&c->lock);
    if (c->gen == a.gen && c->up) {
        c->up = false;
        mc_info(c->name, "connection lost", "server=%s:%u reason=\"%s\"", c->cfg.host, c->cfg.port,
                why);
    }
    fail_all(c, a.gen);
    pthread_mutex_unlock(&c->lock);
    shutdown(a.fd, SHUT_RDWR);
    return NULL;
}

/* ---- connection management --------------------------------------------------------------- */

/* Under connect_lock. Closes a dead connection (joining its receiver) and opens a new one. */
static int reconnect_locked(struct mc_rpc_client *c)
{
    if (c->rx_joinable) {
        pthread_mutex_lock(&c->lock);
        if (c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->rx, NULL);
        c->rx_joinable = false;
    }
    pthread_mutex_lock(&c->send_lock);
    pthread_mutex_lock(&c->lock);
    int old = c->fd;
    c->fd = -1;
    c->up = false;
    pthread_mutex_unlock(&c->lock);
    if (old >= 0)
        close(old);
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
    struct rx_arg *a = malloc(sizeof(*a));
    if (!a) {
        close(fd);
        return MC_ERR_INTERNAL_ERROR;
    }
    pthread_mutex_lock(&c->lock);
    c->fd = fd;
    c->gen++;
    c->up = true;
    a->c = c;
    a->fd = fd;
    a->gen = c->gen;
    pthread_mutex_unlock(&c->lock);
    if (pthread_create(&c->rx, NULL, rx_main, a) != 0) {
        free(a);
        pthread_mutex_lock(&c->lock);
        c->up = false;
        pthread_mutex_unlock(&c->lock);
        return MC_ERR_INTERNAL_ERROR;
    }
    c->rx_joinable = true;
    c->backoff_ms = 0;
    c->next_attempt_ms = 0;
    return 0;
}

/* Makes sure a connection is up; returns its generation in *gen. */
static int ensure_connected(struct mc_rpc_client *c, uint64_t deadline_ms, uint64_t *gen)
{
    pthread_mutex_lock(&c->lock);
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
    int up = c->up;
    pthread_mutex_unlock(&c->lock);
    return up;
}

void mc_rpc_client_free(struct mc_rpc_client *c)
{
    if (!c)
        return;
    mc_rpc_client_disconnect(c);
    if (c->rx_joinable)
        pthread_join(c->rx, NULL);
    if (c->fd >= 0)
        close(c->fd);
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
    pthread_mutex_lock(&c->lock);
    while (!p->done) {
        int w = pthread_cond_timedwait(&p->cv, &c->lock, &ts);
        if (w == ETIMEDOUT && !p->done) {
            if (p->receiving) {
                /* the receiver is writing into the caller's buffer: cut the stream, wait */
                if (c->gen == gen && c->fd >= 0)
                    shutdown(c->fd, SHUT_RDWR);
                while (!p->done)
                    pthread_cond_wait(&p->cv, &c->lock);
                if (p->status == MC_ERR_RPC_FAIL)
                    p->status = MC_ERR_RPC_TIMEOUT;
                break;
            }
            pending_remove(c, p);
            p->status = MC_ERR_RPC_TIMEOUT;
            p->done = true;
            mc_debug(c->name, "call timed out", "method=%s id=%llu",
                     mc_method_name(method) ? mc_method_name(method) : "?",
                     (unsigned long long)p->id);
        }
    }
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
