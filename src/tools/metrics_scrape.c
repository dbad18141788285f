/*
 * metrics_scrape.c - a deadline-bounded HTTP/1.1 client and a Prometheus-text reader for the
 * tests and the bench tools. See metrics_scrape.h.
 */
#include "tools/metrics_scrape.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Milliseconds left before deadline (0 when it passed). */
static int left_ms(uint64_t deadline)
{
    uint64_t t = now_ms();
    return t >= deadline ? 0 : (int)(deadline - t);
}

/* Waits for events on fd until the deadline. Returns 0 when they came, -1 otherwise. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = events};
        int left = left_ms(deadline);
        if (left == 0)
            return -1;
        int n = poll(&pfd, 1, left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* A non-blocking connection to host:port, made before the deadline; -1 on failure. */
static int connect_by(const char *host, uint16_t port, uint64_t deadline)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char svc[8];
    int fd = -1;

    snprintf(svc, sizeof(svc), "%u", port);
    if (getaddrinfo(host, svc, &hints, &ai) != 0)
        return -1;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0)
            continue;
        int err = 0;
        socklen_t elen = sizeof(err);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
            break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static int send_all(int fd, const char *buf, size_t len, uint64_t deadline)
{
    while (len > 0) {
        ssize_t k = send(fd, buf, len, MSG_NOSIGNAL);
        if (k > 0) {
            buf += k;
            len -= (size_t)k;
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(fd, POLLOUT, deadline) != 0)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Reads to EOF into *out (malloc'd, NUL-terminated, length *len). */
static int recv_all(int fd, uint64_t deadline, char **out, size_t *len)
{
    size_t cap = 1 << 14, n = 0;
    char *buf = malloc(cap + 1);

    while (buf) {
        if (n == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t k = recv(fd, buf + n, cap - n, 0);
        if (k > 0) {
            n += (size_t)k;
        } else if (k == 0) {
            buf[n] = '\0';
            *out = buf;
            *len = n;
            return 0;
        } else if (errno == EINTR) {
            continue;
        } else if ((errno != EAGAIN && errno != EWOULDBLOCK) ||
                   wait_fd(fd, POLLIN, deadline) != 0) {
            break;
        }
    }
    free(buf);
    return -1;
}

/* Splits a raw reply into r. Returns 0 or MC_HTTP_FETCH_MALFORMED. */
static int split_reply(char *raw, size_t len, struct mc_http_reply *r)
{
    char *hdr_end = strstr(raw, "\r\n\r\n");

    if (!hdr_end || sscanf(raw, "HTTP/1.%d %d", &r->http_minor, &r->status) != 2)
        return MC_HTTP_FETCH_MALFORMED;
    *hdr_end = '\0';
    for (char *line = strstr(raw, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, "Content-Type:", 13) == 0) {
            const char *v = line + 15;
            while (*v == ' ')
                v++;
            snprintf(r->content_type, sizeof(r->content_type), "%.*s", (int)strcspn(v, "\r"), v);
        }
    }
    r->body_len = len - (size_t)(hdr_end + 4 - raw);
    r->body = malloc(r->body_len + 1);
    if (!r->body)
        return MC_HTTP_FETCH_IO;
    memcpy(r->body, hdr_end + 4, r->body_len);
    r->body[r->body_len] = '\0';
    return 0;
}

int mc_http_fetch(const char *host, uint16_t port, const char *method, const char *path,
                  int timeout_ms, struct mc_http_reply *r)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    char req[1024], *raw = NULL;
    size_t len = 0;
    int rc = MC_HTTP_FETCH_IO, fd;

    memset(r, 0, sizeof(*r));
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                     method, path, host);
    if (n < 0 || (size_t)n >= sizeof(req))
        return MC_HTTP_FETCH_IO;
    fd = connect_by(host, port, deadline);
    if (fd < 0)
        return MC_HTTP_FETCH_IO;
    if (send_all(fd, req, (size_t)n, deadline) == 0 && recv_all(fd, deadline, &raw, &len) == 0)
        rc = split_reply(raw, len, r);
    close(fd);
    free(raw);
    if (rc != 0)
        mc_http_reply_free(r);
    return rc;
}

void mc_http_reply_free(struct mc_http_reply *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
}

int mc_metrics_scrape(const char *addr, int timeout_ms, char **text)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    struct mc_http_reply r;
    char host[256];
    char *end = NULL;

    *text = NULL;
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof(host))
        return -1;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (end == colon + 1 || *end || port == 0 || port > 65535)
        return -1;
    /* "[::1]:PORT": the brackets are the URL's, not the address's */
    if (addr[0] == '[' && colon[-1] == ']')
        snprintf(host, sizeof(host), "%.*s", (int)(colon - addr - 2), addr + 1);
    else
        snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
    if (mc_http_fetch(host, (uint16_t)port, "GET", "/metrics", timeout_ms, &r) != 0)
        return -1;
    if (r.status != 200) {
        mc_http_reply_free(&r);
        return -1;
    }
    *text = r.body; /* handed over */
    return 0;
}

int mc_metrics_find(const char *text, const char *name, double *value)
{
    size_t nl = strlen(name);

    for (const char *p = text; p && *p; p = strchr(p, '\n')) {
        if (*p == '\n')
            p++;
        if (strncmp(p, name, nl) == 0 && p[nl] == ' ') {
            *value = strtod(p + nl + 1, NULL);
            return 0;
        }
    }
    return -1;
}

double mc_metrics_value(const char *text, const char *name)
{
    double v = -1;
    return mc_metrics_find(text, name, &v) == 0 ? v : -1;
}

int mc_metrics_check(const char *text)
{
    for (const char *p = text; p && *p;) {
        size_t n = strcspn(p, "\n");
        if (n > 0 && p[0] != '#') {
            /* the value is the last space-separated field; the series before it is not empty */
            const char *sp = NULL;
            for (size_t i = 0; i < n; i++)
                if (p[i] == ' ')
                    sp = p + i;
            if (!sp || sp == p)
                return -1;
            char *end = NULL;
            (void)strtod(sp + 1, &end);
            if (end == sp + 1 || end != p + n)
                return -1;
        }
        p += n;
        if (*p == '\n')
            p++;
    }
    return 0;
}
