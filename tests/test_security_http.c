/*
 * test_security_http.c - the HTTP port's protections (common/http.h, README "Security"): idle
 * connections from one host do not starve /health, a connection that sends no header is
 * closed soon, admin routes need the admin token (or loopback without one), and without a
 * token non-loopback peers are refused unless public reads are allowed.
 *
 * A real server on an ephemeral port; raw sockets speak HTTP/1.1. Receives have a timeout as a
 * safety net only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/http.h"
#include "common/log.h"
#include "test_skip.h"
#include "tools/proc_harness.h"

static const char g_token[] = "http-admin-token-0123456789abcdef0123456789";

static int handler(void *arg, const char *path, const struct mc_http_request *req,
                   struct mc_textbuf *body, const char **content_type)
{
    (void)arg;
    (void)req;
    (void)content_type;
    if (strcmp(path, "/query_key") != 0 && strcmp(path, "/get_all_segments") != 0)
        return 0;
    mc_textbuf_printf(body, "ok %s\n", path);
    return 200;
}

static struct mc_http_server *server(const char *addr, const struct mc_auth_key *key,
                                     bool public_reads, uint32_t header_timeout_s)
{
    struct mc_http_config cfg = {.addr = addr, .handler = handler};
    cfg.admin_key = key;
    cfg.public_reads = public_reads;
    cfg.header_timeout_s = header_timeout_s;
    struct mc_http_server *s;
    assert_int_equal(mc_http_server_new(&cfg, &s), 0);
    return s;
}

/* A TCP connection to ip:port from src (NULL: any). */
static int dial(const char *src, const char *ip, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 4};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (src) {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &sa.sin_addr);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, ip, &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* GET path; returns the HTTP status, or -1 when the connection ended without a response. */
static int get(const char *src, const char *ip, uint16_t port, const char *path, const char *bearer)
{
    int fd = dial(src, ip, port);
    if (fd < 0)
        return -1;
    char req[512];
    int n = snprintf(
        req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s%s%s\r\n", path,
        bearer ? "Authorization: Bearer " : "", bearer ? bearer : "", bearer ? "\r\n" : "");
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return -1;
    }
    char resp[4096];
    size_t got = 0;
    for (;;) {
        ssize_t r = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof(resp) - 1)
            break;
    }
    close(fd);
    resp[got] = 0;
    int status = -1;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    return status;
}

/* 200 idle connections from one address (127.0.0.1) do not keep /health from answering
 * another (127.0.0.2): connections per address are capped. */
static void test_idle_conns_do_not_starve_health(void **state)
{
    (void)state;
    struct mc_http_server *s = server("127.0.0.1", NULL, false, 0);
    uint16_t port = mc_http_server_port(s);
    enum { N = 200 };
    int fds[N];
    for (int i = 0; i < N; i++)
        fds[i] = dial("127.0.0.1", "127.0.0.1", port);
    usleep(200 * 1000); /* let the server take them (a safety margin, not a measurement) */
    assert_int_equal(get("127.0.0.2", "127.0.0.1", port, "/health", NULL), 200);
    assert_int_equal(get("127.0.0.2", "127.0.0.1", port, "/metrics", NULL), 200);
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    mc_http_server_free(s);
}

/* A connection that sends half a header and stops is closed after the header timeout (1 s
 * here), not held for 30 s. */
static void test_header_timeout(void **state)
{
    (void)state;
    struct mc_http_server *s = server("127.0.0.1", NULL, false, 1);
    int fd = dial(NULL, "127.0.0.1", mc_http_server_port(s));
    assert_true(fd >= 0);
    assert_int_equal(send(fd, "GET /hea", 8, MSG_NOSIGNAL), 8);
    char c;
    ssize_t r = recv(fd, &c, 1, 0); /* EOF (or a reset) well before the 4 s receive timeout */
    assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
    close(fd);
    mc_http_server_free(s);
}

/* With an admin token, admin routes need "Authorization: Bearer <token>"; public routes do
 * not. Without one, admin routes are served to loopback peers. */
static void test_admin_routes(void **state)
{
    (void)state;
    struct mc_auth_key key;
    assert_int_equal(mc_auth_key_from_token(g_token, strlen(g_token), &key), 0);
    struct mc_http_server *s = server("127.0.0.1", &key, false, 0);
    uint16_t port = mc_http_server_port(s);
    assert_int_equal(get(NULL, "127.0.0.1", port, "/query_key", NULL), 401);
    assert_int_equal(
        get(NULL, "127.0.0.1", port, "/query_key", "not-the-admin-token-0123456789abcdef"), 401);
    assert_int_equal(get(NULL, "127.0.0.1", port, "/query_key", g_token), 200);
    assert_int_equal(get(NULL, "127.0.0.1", port, "/get_all_segments", NULL), 200);
    assert_int_equal(get(NULL, "127.0.0.1", port, "/metrics", NULL), 200);
    assert_int_equal(get(NULL, "127.0.0.1", port, "/health", NULL), 200);
    assert_int_equal(get(NULL, "127.0.0.1", port, "/nope", g_token), 404);
    assert_int_equal(get(NULL, "127.0.0.1", port, "/nope", NULL), 401); /* not telling */
    mc_http_server_free(s);

    s = server("127.0.0.1", NULL, false, 0);
    assert_int_equal(get(NULL, "127.0.0.1", mc_http_server_port(s), "/query_key", NULL), 200);
    mc_http_server_free(s);
}

/* Without a token, a non-loopback peer gets nothing (closed at accept); with public reads it
 * gets the public routes and a 403 on admin ones. */
static void test_protected_mode_non_loopback(void **state)
{
    (void)state;
    char ip[INET_ADDRSTRLEN];
    if (!mc_proc_local_ipv4(ip, sizeof(ip))) {
        MC_SKIP("no non-loopback IPv4 address here");
    }
    struct mc_http_server *s = server("0.0.0.0", NULL, false, 0);
    uint16_t port = mc_http_server_port(s);
    assert_int_equal(get(ip, ip, port, "/metrics", NULL), -1);
    assert_int_equal(get("127.0.0.1", "127.0.0.1", port, "/metrics", NULL), 200);
    mc_http_server_free(s);

    s = server("0.0.0.0", NULL, true, 0);
    port = mc_http_server_port(s);
    assert_int_equal(get(ip, ip, port, "/metrics", NULL), 200);
    assert_int_equal(get(ip, ip, port, "/get_all_segments", NULL), 200);
    assert_int_equal(get(ip, ip, port, "/query_key", NULL), 403);
    assert_int_equal(get("127.0.0.1", "127.0.0.1", port, "/query_key", NULL), 200);
    mc_http_server_free(s);
}

int main(void)
{
    mc_log_set_level(MC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_conns_do_not_starve_health),
        cmocka_unit_test(test_header_timeout),
        cmocka_unit_test(test_admin_routes),
        cmocka_unit_test(test_protected_mode_non_loopback),
    };
    return MC_RUN_TESTS(tests, NULL, NULL);
}
