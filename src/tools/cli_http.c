/*
 * cli_http.c - `metrics`: fetch the master's Prometheus text from its HTTP port.
 *
 * The master serves /metrics on --metrics_port, a port of its own (not the RPC port), so the
 * command takes --metrics=HOST:PORT or --metrics=http://HOST:PORT[/PATH] (--metrics_url is an
 * alias); without it, the command asks the master (GetStats reports the port it serves HTTP on
 * as "master_http_port") and uses the master's host with that port; a master too old to say
 * gets upstream's default port 9003, with a note on stderr. One
 * HTTP/1.0 GET with "Connection: close": the body is everything after the header block, so no
 * chunked decoding is needed. Non-blocking connect and reads with a deadline, so an unresponsive
 * peer cannot hang the command. The body is copied to stdout unchanged.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/rpc_client.h"
#include "common/tls.h"
#include "common/wire.h"
#include "mooncake/errors.h"
#include "proto/master.pb-c.h"
#include "tools/cli.h"

#define CLI_HTTP_MAX_BYTES (64u << 20)
#define CLI_HTTP_DEFAULT_PORT "9003"

struct http_target {
    char host[256];
    char port[16];
    char path[512];
};

/* "host:port", "host", "http://host:port/path", "[v6]:port". Returns 0 or INVALID_PARAMS. */
static int parse_target(const char *spec, const char *master, struct http_target *t)
{
    const char *s = spec, *hend, *pstart = NULL, *slash;
    size_t hlen;

    memset(t, 0, sizeof(*t));
    if (!s) { /* master host, default metrics port */
        s = master;
        slash = NULL;
    } else {
        if (!strncmp(s, "http://", 7))
            s += 7;
        else if (!strncmp(s, "https://", 8))
            s += 8;
        slash = strchr(s, '/');
    }
    snprintf(t->path, sizeof(t->path), "%s", slash ? slash : "/metrics");
    hend = slash ? slash : s + strlen(s);
    if (*s == '[') {
        const char *rb = memchr(s, ']', (size_t)(hend - s));
        if (!rb)
            return MC_ERR_INVALID_PARAMS;
        hlen = (size_t)(rb - s - 1);
        if (hlen >= sizeof(t->host))
            return MC_ERR_INVALID_PARAMS;
        memcpy(t->host, s + 1, hlen);
        if (rb + 1 < hend && rb[1] == ':')
            pstart = rb + 2;
    } else {
        const char *colon = memchr(s, ':', (size_t)(hend - s));
        hlen = (size_t)((colon ? colon : hend) - s);
        if (hlen >= sizeof(t->host))
            return MC_ERR_INVALID_PARAMS;
        memcpy(t->host, s, hlen);
        if (colon)
            pstart = colon + 1;
    }
    if (!t->host[0])
        return MC_ERR_INVALID_PARAMS;
    if (!spec || !pstart) {
        snprintf(t->port, sizeof(t->port), "%s", CLI_HTTP_DEFAULT_PORT);
    } else {
        size_t plen = (size_t)(hend - pstart);
        if (plen == 0 || plen >= sizeof(t->port) || strspn(pstart, "0123456789") < plen)
            return MC_ERR_INVALID_PARAMS;
        memcpy(t->port, pstart, plen);
    }
    return 0;
}

static int wait_fd(int fd, short ev, uint64_t deadline_ms)
{
    if (ev == POLLIN && mc_tls_sock_pending(fd))
        return 0; /* decrypted already: poll would not see it */
    for (;;) {
        uint64_t now = mc_now_ms();
        struct pollfd p = {.fd = fd, .events = ev};
        int n;
        if (now >= deadline_ms)
            return MC_ERR_RPC_TIMEOUT;
        n = poll(&p, 1, (int)(deadline_ms - now));
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return MC_ERR_RPC_FAIL;
    }
}

static int connect_to(const struct http_target *t, uint64_t deadline_ms, int *out)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = MC_ERR_RPC_FAIL;

    if (getaddrinfo(t->host, t->port, &hints, &ai) != 0 || !ai)
        return MC_ERR_RPC_FAIL;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int err = 0;
        socklen_t len = sizeof(err);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
            close(fd);
            continue;
        }
        rc = wait_fd(fd, POLLOUT, deadline_ms);
        if (rc == 0 && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0))
            rc = MC_ERR_RPC_FAIL;
        if (rc == 0) {
            *out = fd;
            break;
        }
        close(fd);
    }
    freeaddrinfo(ai);
    return rc;
}

static int send_all(int fd, const char *buf, size_t len, uint64_t deadline_ms)
{
    while (len) {
        ssize_t n = mc_tls_sock_send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            int rc = wait_fd(fd, POLLOUT, deadline_ms);
            if (rc)
                return rc;
        } else {
            return MC_ERR_RPC_FAIL;
        }
    }
    return 0;
}

/* Reads until EOF into a malloc'd buffer (NUL-terminated). */
static int recv_all(int fd, uint64_t deadline_ms, char **out, size_t *out_len)
{
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap + 1);

    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    for (;;) {
        ssize_t n;
        if (len == cap) {
            char *nb;
            if (cap >= CLI_HTTP_MAX_BYTES) {
                free(buf);
                return MC_ERR_BUFFER_OVERFLOW;
            }
            cap *= 2;
            nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                return MC_ERR_INTERNAL_ERROR;
            }
            buf = nb;
        }
        n = mc_tls_sock_recv(fd, buf + len, cap - len, MSG_DONTWAIT);
        if (n > 0) {
            len += (size_t)n;
        } else if (n == 0) {
            break;
        } else if (errno == EAGAIN || errno == EINTR) {
            int rc = wait_fd(fd, POLLIN, deadline_ms);
            if (rc) {
                free(buf);
                return rc;
            }
        } else {
            free(buf);
            return MC_ERR_RPC_FAIL;
        }
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return 0;
}

/* The master's HTTP port as its GetStats reports it, into port; 0, or an error. */
static int ask_http_port(const struct mc_cli_opts *o, char *port, size_t cap)
{
    Mc__GetStatsRequest req = MC__GET_STATS_REQUEST__INIT;
    struct mc_rpc_client *c = NULL;
    ProtobufCMessage *m = NULL;
    int rc = mc_cli_admin_connect(o, &c);

    if (!rc)
        rc = mc_rpc_client_call_msg(c, MC_METHOD_GET_STATS, &req.base,
                                    &mc__get_stats_response__descriptor, 0, &m);
    mc_rpc_client_free(c);
    if (rc)
        return rc;
    const Mc__GetStatsResponse *st = (const Mc__GetStatsResponse *)m;
    rc = MC_ERR_NOT_SUPPORTED;
    for (size_t i = 0; i < st->n_extra; i++)
        if (!strcmp(st->extra[i]->name, "master_http_port") && st->extra[i]->value >= 1 &&
            st->extra[i]->value <= 65535) {
            snprintf(port, cap, "%u", (unsigned)st->extra[i]->value);
            rc = 0;
        }
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

int mc_cli_metrics(const struct mc_cli_opts *o)
{
    struct http_target t;
    uint64_t deadline = mc_now_ms() + (o->timeout_ms ? o->timeout_ms : 5000);
    char req[1024];
    char *resp = NULL, *body;
    size_t resp_len = 0;
    int fd = -1, rc, status = 0, n;
    struct mc_tls_ctx *tls_ctx = NULL; /* HTTPS (--tls_ca_file) */

    if (parse_target(o->metrics, o->master, &t)) {
        fprintf(stderr,
                "mooncake_cli: metrics: bad address '%s' (want HOST:PORT or "
                "http://HOST:PORT/PATH)\n",
                o->metrics ? o->metrics : o->master);
        return MC_CLI_EXIT_USAGE;
    }
    if (!o->metrics) {
        rc = ask_http_port(o, t.port, sizeof(t.port));
        if (rc == MC_ERR_NOT_SUPPORTED)
            fprintf(stderr,
                    "mooncake_cli: metrics: the master does not report its HTTP port; trying "
                    "port %s (give --metrics=HOST:PORT)\n",
                    t.port);
        else if (rc)
            return mc_cli_fail("metrics", rc);
    }
    rc = connect_to(&t, deadline, &fd);
    if (rc)
        return mc_cli_fail("metrics", rc);
    if (o->tls_ca_file) { /* HTTPS: the master's HTTP port uses its TLS certificate */
        struct mc_tls_files tf = {o->tls_cert_file, o->tls_key_file, o->tls_ca_file};
        struct mc_tls_ctx *tls = NULL;
        char err[256], peer[300];
        rc = mc_tls_ctx_new(&tf, false, &tls, err, sizeof(err));
        if (rc)
            fprintf(stderr, "mooncake_cli: TLS: %s\n", err);
        snprintf(peer, sizeof(peer), "%s:%s", t.host, t.port);
        if (!rc)
            rc = mc_tls_sock_connect(tls, fd, (uint32_t)(deadline - mc_now_ms()), "cli", peer);
        if (rc) {
            mc_tls_sock_close(fd);
            mc_tls_ctx_free(tls);
            return mc_cli_fail("metrics", rc);
        }
        tls_ctx = tls;
    }
    n = snprintf(req, sizeof(req),
                 "GET %s HTTP/1.0\r\nHost: %s:%s\r\nAccept: text/plain\r\nConnection: "
                 "close\r\n\r\n",
                 t.path, t.host, t.port);
    rc = send_all(fd, req, (size_t)n, deadline);
    if (!rc)
        rc = recv_all(fd, deadline, &resp, &resp_len);
    mc_tls_sock_close(fd);
    mc_tls_ctx_free(tls_ctx);
    if (rc)
        return mc_cli_fail("metrics", rc);
    body = strstr(resp, "\r\n\r\n");
    if (sscanf(resp, "HTTP/%*d.%*d %d", &status) != 1 || !body) {
        free(resp);
        fprintf(stderr, "mooncake_cli: metrics: not an HTTP response from %s:%s\n", t.host, t.port);
        return mc_cli_fail("metrics", MC_ERR_DESERIALIZE_FAIL);
    }
    body += 4;
    if (status != 200) {
        fprintf(stderr, "mooncake_cli: metrics: HTTP %d from %s:%s%s\n", status, t.host, t.port,
                t.path);
        free(resp);
        return mc_cli_fail("metrics", status == 404 ? MC_ERR_NOT_SUPPORTED
                                                    : MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    }
    rc = fwrite(body, 1, resp_len - (size_t)(body - resp), stdout) ==
                     resp_len - (size_t)(body - resp) &&
                 fflush(stdout) == 0
             ? MC_CLI_EXIT_OK
             : mc_cli_fail("metrics", MC_ERR_FILE_WRITE_FAIL);
    free(resp);
    return rc;
}
