/*
 * http.c - see http.h.
 *
 * The server creates its listening socket itself (so a bind failure is reported precisely and
 * port 0 is resolved with getsockname) and hands it to microhttpd with MHD_OPTION_LISTEN_SOCKET;
 * microhttpd then runs one internal polling thread and closes the socket on stop. Every request
 * is answered from the access handler's first call: GET and HEAD carry no body, and anything
 * else is refused with 405.
 */
#include "common/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "mooncake/errors.h"

#define TEXT_PLAIN "text/plain; charset=utf-8"

/* A flood of refused connections must not flood the log: warnings about connections are
 * written at most once a second (the next line says how many were not). */
static _Atomic uint64_t g_log_ms, g_not_logged;

static bool log_allowed(void)
{
    uint64_t now = mc_now_ms(), last = atomic_load(&g_log_ms);
    if (last && now - last < 1000) {
        atomic_fetch_add(&g_not_logged, 1);
        return false;
    }
    atomic_store(&g_log_ms, now);
    return true;
}

struct mc_http_server {
    struct MHD_Daemon *daemon;
    struct mc_http_config cfg;
    struct mc_auth_key admin;
    uint16_t port;
    char addr[INET6_ADDRSTRLEN + 16];
    char *tls_cert, *tls_key; /* HTTPS: the PEM texts, kept while the daemon runs */
};

/* A PEM file's text, NUL-terminated (malloc'd), or NULL. */
static char *read_pem(const char *path)
{
    FILE *f = path && *path ? fopen(path, "r") : NULL;
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (buf)
        n = fread(buf, 1, cap, f);
    bool whole = buf && feof(f) && !ferror(f);
    fclose(f);
    if (!whole) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

struct reply_header {
    char name[64];
    char *value; /* malloc'd */
};

struct mc_http_request {
    struct MHD_Connection *conn;
    struct mc_http_server *srv;
    struct reply_header *extra; /* one header a handler may add to its reply */
};

static const char *const g_public[] = {"/metrics", "/health", "/get_all_segments", NULL};

bool mc_http_path_is_public(const struct mc_http_server *s, const char *path)
{
    for (int i = 0; g_public[i]; i++)
        if (strcmp(path, g_public[i]) == 0)
            return true;
    for (int i = 0; s->cfg.public_paths && s->cfg.public_paths[i]; i++)
        if (strcmp(path, s->cfg.public_paths[i]) == 0)
            return true;
    return false;
}

static bool peer_is_loopback(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return false;
    socklen_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                           : sizeof(struct sockaddr_in);
    return mc_auth_addr_is_loopback(ci->client_addr, len);
}

/* "Authorization: Bearer <token>" naming the admin token (compared through its key). */
static bool bearer_ok(const struct mc_http_server *s, struct MHD_Connection *conn)
{
    const char *h =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    const char *tok = h + 7;
    while (*tok == ' ')
        tok++;
    struct mc_auth_key k;
    if (mc_auth_key_from_token(tok, strlen(tok), &k) != 0)
        return false;
    return mc_auth_key_matches(&s->admin, &k);
}

bool mc_http_request_is_admin(const struct mc_http_request *req)
{
    const struct mc_http_server *s = req->srv;
    if (s->admin.set)
        return bearer_ok(s, req->conn);
    return s->cfg.protected_mode_off || peer_is_loopback(req->conn);
}

/* Accept policy: without a token, loopback only unless public reads or protected mode off. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t len)
{
    struct mc_http_server *s = cls;
    if (s->admin.set || s->cfg.public_reads || s->cfg.protected_mode_off ||
        mc_auth_addr_is_loopback(addr, len))
        return MHD_YES;
    if (!log_allowed())
        return MHD_NO;
    char peer[64];
    mc_auth_format_addr(addr, len, peer, sizeof(peer));
    mc_warn("http", "refusing a non-loopback peer in protected mode",
            "peer=%s not_logged=%llu hint=\"%s\"", peer,
            (unsigned long long)atomic_exchange(&g_not_logged, 0),
            "give the daemon an auth token, or --metrics_public to let any host read /metrics, "
            "/health and /get_all_segments");
    return MHD_NO;
}

__attribute__((format(printf, 2, 0))) static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    size_t n;

    (void)cls;
    if (!log_allowed())
        return;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    for (char *p = buf; *p; p++)
        if (*p == '"')
            *p = '\'';
    mc_warn("http", "microhttpd", "detail=\"%s\" not_logged=%llu", buf,
            (unsigned long long)atomic_exchange(&g_not_logged, 0));
}

const char *mc_http_request_arg(const struct mc_http_request *req, const char *key)
{
    if (!req || !key)
        return NULL;
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *mc_http_request_header(const struct mc_http_request *req, const char *name)
{
    if (!req || !name)
        return NULL;
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

void mc_http_reply_header(const struct mc_http_request *req, const char *name, const char *value)
{
    if (req && req->extra && name && value) {
        char *v = strdup(value);
        if (!v)
            return;
        snprintf(req->extra->name, sizeof(req->extra->name), "%s", name);
        free(req->extra->value);
        req->extra->value = v;
    }
}

static enum MHD_Result reply(struct MHD_Connection *conn, int status, struct mc_textbuf *body,
                             const char *content_type, const struct reply_header *extra)
{
    struct MHD_Response *resp;
    enum MHD_Result r;
    size_t len = 0;
    char *data = NULL;

    if (body && !body->failed)
        data = mc_textbuf_steal(body, &len);
    else if (body && body->failed)
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    if (data)
        resp = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    else
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (extra && extra->name[0] && extra->value)
        MHD_add_response_header(resp, extra->name, extra->value);
    r = MHD_queue_response(conn, (unsigned int)status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    struct mc_http_server *s = cls;
    struct mc_textbuf body;
    const char *ctype = TEXT_PLAIN;
    struct reply_header extra = {{0}, NULL};
    enum MHD_Result r;
    int status;

    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    mc_textbuf_init(&body);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        mc_textbuf_printf(&body, "method not allowed\n");
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (strcmp(url, "/metrics") == 0) {
        status = MHD_HTTP_OK;
        ctype = MC_METRICS_CONTENT_TYPE;
        if (s->cfg.metrics)
            mc_metrics_render(s->cfg.metrics, &body);
        else
            mc_textbuf_append(&body, "", 0);
    } else if (strcmp(url, "/health") == 0) {
        if (s->cfg.health) {
            status = s->cfg.health(s->cfg.health_arg, &body);
        } else {
            status = MHD_HTTP_OK;
            mc_textbuf_printf(&body, "OK");
        }
    } else if (!mc_http_path_is_public(s, url) &&
               !mc_http_request_is_admin(&(struct mc_http_request){.conn = conn, .srv = s})) {
        /* an admin route (or an unknown path: not telling which) without admin rights */
        status = s->admin.set ? MHD_HTTP_UNAUTHORIZED : MHD_HTTP_FORBIDDEN;
        mc_textbuf_printf(&body, "%s\n",
                          s->admin.set ? "this endpoint needs Authorization: Bearer <admin token>"
                                       : "this endpoint is served to loopback peers only");
        mc_warn("http", "admin endpoint refused", "path_len=%zu status=%d", strlen(url), status);
    } else {
        struct mc_http_request req = {.conn = conn, .srv = s, .extra = &extra};
        status = s->cfg.handler ? s->cfg.handler(s->cfg.handler_arg, url, &req, &body, &ctype) : 0;
        if (status == 0) {
            mc_textbuf_destroy(&body);
            mc_textbuf_printf(&body, "not found\n");
            status = MHD_HTTP_NOT_FOUND;
            ctype = TEXT_PLAIN;
        }
    }
    if (status < 100 || status > 599)
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    r = reply(conn, status, &body, ctype ? ctype : TEXT_PLAIN, &extra);
    free(extra.value);
    mc_textbuf_destroy(&body);
    return r;
}

/* Resolves cfg->addr and binds a listening socket; returns the fd or -1 (with a log line). */
static int listen_on(const char *addr, uint16_t port, int *family, int *err)
{
    struct addrinfo hints, *ai = NULL;
    char portstr[8];
    int fd = -1, one = 1, rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST; /* never a DNS lookup */
    if (strcmp(addr, "localhost") == 0)
        addr = "127.0.0.1";
    snprintf(portstr, sizeof(portstr), "%u", (unsigned)port);
    rc = getaddrinfo(addr, portstr, &hints, &ai);
    if (rc != 0 || !ai) {
        mc_error("http", "bad listen address", "addr=\"%s\" reason=\"%s\"", addr, gai_strerror(rc));
        *err = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        goto fail;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0)
        goto fail;
    *family = ai->ai_family;
    goto out;
fail:
    mc_error("http", "cannot listen", "addr=\"%s\" port=%u errno=%d reason=\"%s\"", addr,
             (unsigned)port, errno, strerror(errno));
    if (fd >= 0)
        close(fd);
    fd = -1;
    *err = MC_ERR_INTERNAL_ERROR;
out:
    if (ai)
        freeaddrinfo(ai);
    return fd;
}

int mc_http_server_new(const struct mc_http_config *cfg, struct mc_http_server **out)
{
    struct mc_http_server *s = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[INET6_ADDRSTRLEN];
    int fd = -1, family = AF_INET, err = MC_ERR_INTERNAL_ERROR;
    unsigned int flags;

    if (!cfg || !out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    s = calloc(1, sizeof(*s));
    if (!s)
        goto fail;
    s->cfg = *cfg;
    s->cfg.addr = NULL; /* not kept: the caller's string may go away */
    if (cfg->admin_key && cfg->admin_key->set)
        s->admin = *cfg->admin_key;
    s->cfg.admin_key = NULL; /* copied */
    fd = listen_on(cfg->addr && *cfg->addr ? cfg->addr : "0.0.0.0", cfg->port, &family, &err);
    if (fd < 0)
        goto fail;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        goto fail;
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        s->port = ntohs(a->sin6_port);
        snprintf(s->addr, sizeof(s->addr), "[%s]:%u", host, (unsigned)s->port);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        s->port = ntohs(a->sin_port);
        snprintf(s->addr, sizeof(s->addr), "%s:%u", host, (unsigned)s->port);
    }
    bool https = cfg->tls_cert_file && *cfg->tls_cert_file;
    if (https) {
        s->tls_cert = read_pem(cfg->tls_cert_file);
        s->tls_key = read_pem(cfg->tls_key_file);
        if (!s->tls_cert || !s->tls_key) {
            mc_error("http", "cannot read the TLS certificate or key", "cert=%s key=%s",
                     cfg->tls_cert_file, cfg->tls_key_file ? cfg->tls_key_file : "");
            err = MC_ERR_INVALID_PARAMS;
            goto fail;
        }
    }
    flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG | MHD_USE_ITC |
            (https ? MHD_USE_TLS : 0);
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_OptionItem no_opts[] = {{MHD_OPTION_END, 0, NULL}};
    if (family == AF_INET6)
        flags |= MHD_USE_IPv6;
    unsigned int per_addr =
        cfg->max_conns_per_addr ? cfg->max_conns_per_addr : MC_HTTP_DEFAULT_CONNS_PER_ADDR;
    unsigned int timeout =
        cfg->header_timeout_s ? cfg->header_timeout_s : MC_HTTP_DEFAULT_HEADER_TIMEOUT_S;
    s->daemon = MHD_start_daemon(
        flags, 0, accept_policy, s, handle, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, NULL,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MC_HTTP_MAX_CONNS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_addr, MHD_OPTION_CONNECTION_TIMEOUT, timeout,
        MHD_OPTION_ARRAY, https ? tls_opts : no_opts, MHD_OPTION_END);
    if (!s->daemon) {
        mc_error("http", "microhttpd failed to start", "addr=%s", s->addr);
        err = MC_ERR_INTERNAL_ERROR;
        goto fail;
    }
    mc_info("http", "serving", "addr=%s", s->addr);
    *out = s;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    if (s) {
        free(s->tls_cert);
        free(s->tls_key);
    }
    free(s);
    return err;
}

void mc_http_server_free(struct mc_http_server *s)
{
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    free(s->tls_cert);
    free(s->tls_key);
    free(s);
}

uint16_t mc_http_server_port(const struct mc_http_server *s)
{
    return s->port;
}

const char *mc_http_server_addr(const struct mc_http_server *s)
{
    return s->addr;
}
