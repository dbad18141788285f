/*
 * test_http.c - the /metrics and /health endpoint (common/http.h), served on loopback with an
 * ephemeral port and scraped with plain sockets (a minimal HTTP/1.1 client with receive
 * timeouts, so a hung server fails the test instead of hanging it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/http.h"
#include "common/log.h"
#include "common/metrics.h"
#include "mooncake/errors.h"
#include "tools/metrics_scrape.h"

struct resp {
    int status;
    char ctype[128];
    char *body;
    size_t body_len;
};

static int connect_to(const char *ip, uint16_t port)
{
    struct sockaddr_in a;
    struct timeval tv = {5, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request on a fresh connection ("Connection: close"); the body is read to EOF. */
static struct resp http_request(uint16_t port, const char *method, const char *path)
{
    struct mc_http_reply h;
    struct resp r = {0};

    assert_int_equal(mc_http_fetch("127.0.0.1", port, method, path, 5000, &h), 0);
    assert_int_equal(h.http_minor, 1);
    r.status = h.status;
    snprintf(r.ctype, sizeof(r.ctype), "%s", h.content_type);
    r.body = h.body; /* handed over */
    r.body_len = h.body_len;
    return r;
}

static void resp_free(struct resp *r)
{
    free(r->body);
    r->body = NULL;
}

static struct mc_http_server *start(struct mc_http_config *cfg)
{
    struct mc_http_server *s = NULL;
    if (!cfg->addr)
        cfg->addr = "127.0.0.1";
    assert_int_equal(mc_http_server_new(cfg, &s), 0);
    assert_non_null(s);
    assert_true(mc_http_server_port(s) != 0);
    return s;
}

static void test_metrics_endpoint(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    struct mc_counter *c = mc_metrics_counter(m, "master_get_requests_total", "gets", NULL);
    mc_metrics_gauge(m, "master_key_count", "keys", NULL);
    mc_counter_add(c, 42);
    struct mc_http_config cfg = {.port = 0, .metrics = m};
    struct mc_http_server *s = start(&cfg);
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%u", (unsigned)mc_http_server_port(s));
    assert_string_equal(mc_http_server_addr(s), want);

    struct resp r = http_request(mc_http_server_port(s), "GET", "/metrics");
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.ctype, "text/plain; version=0.0.4"));
    assert_non_null(strstr(r.body, "# TYPE master_get_requests_total counter\n"));
    assert_non_null(strstr(r.body, "\nmaster_get_requests_total 42\n"));
    assert_non_null(strstr(r.body, "\nmaster_key_count 0\n")); /* zero-valued series served */
    /* the body is exactly what a render gives */
    struct mc_textbuf b;
    mc_textbuf_init(&b);
    mc_metrics_render(m, &b);
    assert_int_equal(r.body_len, b.len);
    assert_memory_equal(r.body, b.data, b.len);
    mc_textbuf_destroy(&b);
    resp_free(&r);

    /* later updates show in the next scrape */
    mc_counter_inc(c);
    r = http_request(mc_http_server_port(s), "GET", "/metrics");
    assert_non_null(strstr(r.body, "\nmaster_get_requests_total 43\n"));
    resp_free(&r);

    /* HEAD: headers only */
    r = http_request(mc_http_server_port(s), "HEAD", "/metrics");
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    resp_free(&r);

    mc_http_server_free(s);
    mc_metrics_free(m);
}

static int g_ready;
static int health_cb(void *arg, struct mc_textbuf *body)
{
    int *ready = arg;
    if (*ready) {
        mc_textbuf_printf(body, "OK");
        return 200;
    }
    mc_textbuf_printf(body, "NOT READY: %s", "recovering");
    return 503;
}

static void test_health(void **state)
{
    (void)state;
    struct mc_http_config cfg = {0};
    struct mc_http_server *s = start(&cfg);
    struct resp r = http_request(mc_http_server_port(s), "GET", "/health");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "OK");
    resp_free(&r);
    /* no registry: /metrics is an empty exposition */
    r = http_request(mc_http_server_port(s), "GET", "/metrics");
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    resp_free(&r);
    mc_http_server_free(s);

    g_ready = 0;
    struct mc_http_config cfg2 = {.health = health_cb, .health_arg = &g_ready};
    s = start(&cfg2);
    r = http_request(mc_http_server_port(s), "GET", "/health");
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "NOT READY: recovering");
    resp_free(&r);
    g_ready = 1;
    r = http_request(mc_http_server_port(s), "GET", "/health");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "OK");
    resp_free(&r);
    mc_http_server_free(s);
}

static int extra_handler(void *arg, const char *path, const struct mc_http_request *req,
                         struct mc_textbuf *body, const char **content_type)
{
    (void)arg;
    if (strcmp(path, "/query_key") != 0)
        return 0;
    const char *key = mc_http_request_arg(req, "key");
    if (!key) {
        mc_textbuf_printf(body, "missing key\n");
        return 400;
    }
    *content_type = "application/json";
    mc_textbuf_printf(body, "{\"key\":\"%s\"}", key);
    return 200;
}

static void test_routes_and_methods(void **state)
{
    (void)state;
    struct mc_http_config cfg = {0};
    struct mc_http_server *s = start(&cfg);
    uint16_t port = mc_http_server_port(s);
    struct resp r = http_request(port, "GET", "/nope");
    assert_int_equal(r.status, 404);
    resp_free(&r);
    r = http_request(port, "GET", "/metrics/extra");
    assert_int_equal(r.status, 404);
    resp_free(&r);
    r = http_request(port, "POST", "/metrics");
    assert_int_equal(r.status, 405);
    resp_free(&r);
    r = http_request(port, "DELETE", "/health");
    assert_int_equal(r.status, 405);
    resp_free(&r);
    mc_http_server_free(s);

    struct mc_http_config cfg2 = {.handler = extra_handler};
    s = start(&cfg2);
    port = mc_http_server_port(s);
    r = http_request(port, "GET", "/query_key?key=abc");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "application/json");
    assert_string_equal(r.body, "{\"key\":\"abc\"}");
    resp_free(&r);
    r = http_request(port, "GET", "/query_key");
    assert_int_equal(r.status, 400);
    resp_free(&r);
    r = http_request(port, "GET", "/other");
    assert_int_equal(r.status, 404);
    resp_free(&r);
    mc_http_server_free(s);
}

static void test_bind_errors(void **state)
{
    (void)state;
    struct mc_http_config cfg = {0};
    struct mc_http_server *s = start(&cfg), *s2 = NULL;
    enum mc_log_level saved = mc_log_get_level();

    mc_log_set_level(MC_LOG_OFF); /* the failures below log errors on purpose */
    struct mc_http_config same = {.addr = "127.0.0.1", .port = mc_http_server_port(s)};
    assert_int_equal(mc_http_server_new(&same, &s2), MC_ERR_INTERNAL_ERROR);
    assert_null(s2);
    struct mc_http_config bad = {.addr = "not an address", .port = 0};
    assert_int_equal(mc_http_server_new(&bad, &s2), MC_ERR_INVALID_PARAMS);
    struct mc_http_config bad2 = {.addr = "999.1.1.1", .port = 0};
    assert_int_equal(mc_http_server_new(&bad2, &s2), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_http_server_new(NULL, &s2), MC_ERR_INVALID_PARAMS);
    mc_log_set_level(saved);
    mc_http_server_free(s);
    mc_http_server_free(NULL);

    /* "localhost" and the default (any address) work too */
    struct mc_http_config lh = {.addr = "localhost"};
    s = start(&lh);
    struct resp r = http_request(mc_http_server_port(s), "GET", "/health");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    mc_http_server_free(s);
    struct mc_http_config any = {.addr = ""};
    assert_int_equal(mc_http_server_new(&any, &s), 0);
    assert_non_null(strstr(mc_http_server_addr(s), "0.0.0.0:"));
    r = http_request(mc_http_server_port(s), "GET", "/health");
    assert_int_equal(r.status, 200);
    resp_free(&r);
    mc_http_server_free(s);
}

static void test_stop_with_idle_connection(void **state)
{
    (void)state;
    struct mc_http_config cfg = {0};
    struct mc_http_server *s = start(&cfg);
    uint16_t port = mc_http_server_port(s);
    int idle = connect_to("127.0.0.1", port); /* connected, never sends a request */
    assert_true(idle >= 0);
    mc_http_server_free(s); /* must not wait for the idle client */
    char c;
    assert_true(recv(idle, &c, 1, 0) <= 0); /* the server side is gone */
    close(idle);
    /* the port is free again */
    assert_true(connect_to("127.0.0.1", port) < 0);
}

struct writer {
    struct mc_counter *c;
    atomic_int stop;
};

static void *write_loop(void *arg)
{
    struct writer *w = arg;
    while (!atomic_load(&w->stop))
        mc_counter_inc(w->c);
    return NULL;
}

static void test_scrape_while_updating(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    struct writer w = {.c = mc_metrics_counter(m, "busy_total", "busy", NULL)};
    struct mc_http_config cfg = {.metrics = m};
    struct mc_http_server *s = start(&cfg);
    pthread_t th;
    atomic_init(&w.stop, 0);
    assert_int_equal(pthread_create(&th, NULL, write_loop, &w), 0);
    unsigned long long last = 0;
    for (int i = 0; i < 20; i++) {
        struct resp r = http_request(mc_http_server_port(s), "GET", "/metrics");
        unsigned long long v;
        const char *line = strstr(r.body, "\nbusy_total ");
        assert_non_null(line);
        assert_int_equal(sscanf(line, "\nbusy_total %llu", &v), 1);
        assert_true(v >= last); /* a counter never goes back */
        last = v;
        resp_free(&r);
    }
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    mc_http_server_free(s);
    mc_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_endpoint),
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_routes_and_methods),
        cmocka_unit_test(test_bind_errors),
        cmocka_unit_test(test_stop_with_idle_connection),
        cmocka_unit_test(test_scrape_while_updating),
    };
    mc_log_set_level(MC_LOG_WARN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
