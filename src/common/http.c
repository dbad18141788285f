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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "mooncake/errors.h"

#define TEXT_PLAIN "text/plain; charset=utf-8"

struct mc_http_server {
    struct MHD_Daemon *daemon;
    struct mc_http_config cfg;
    uint16_t port;
    char addr[INET6_ADDRSTRLEN + 16];
};

struct reply_header {
    char name[64];
    char *value; /* malloc'd */
};

struct mc_http_request {
    struct MHD_Connection *conn;
    struct reply_header *extra; /* one header a handler may add to its reply */
};

__attribute__((format(printf, 2, 0))) static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    size_t n;

    (void)cls;
    vsnprintf(buf, sizeof(buf), fmt, ap);
    n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    for (char *p = buf; *p; p++)
        if (*p == '"')
            *p = '\'';
    mc_warn("http", "microhttpd", "detail=\"%s\"", buf);
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
    } else {
        struct mc_http_request req = {.conn = conn, .extra = &extra};
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
    flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG | MHD_USE_ITC;
    if (family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER,
                                 mhd_logger, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned int)128,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30, MHD_OPTION_END);
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
    free(s);
    return err;
}

void mc_http_server_free(struct mc_http_server *s)
{
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
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
