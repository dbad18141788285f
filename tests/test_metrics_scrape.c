/*
 * test_metrics_scrape.c - the tests' and bench tools' one HTTP client and Prometheus-text
 * reader (src/tools/metrics_scrape.c): a sample found by exact name, malformed expositions
 * refused, a fetch against the project's own HTTP server, and a server that accepts and never
 * answers costing the deadline instead of hanging the caller.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/http.h"
#include "common/metrics.h"
#include "tools/metrics_scrape.h"
#include "test_listen.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void test_value(void **state)
{
    (void)state;
    const char *text = "# HELP a_total things\n"
                       "# TYPE a_total counter\n"
                       "a_total 12\n"
                       "a_total_x 99\n"
                       "b{le=\"1\"} 3\n"
                       "b 4.5\n"
                       "c 7";
    assert_true(mc_metrics_value(text, "a_total") == 12);
    assert_true(mc_metrics_value(text, "a_total_x") == 99);
    assert_true(mc_metrics_value(text, "b") == 4.5); /* the labelled series is not it */
    assert_true(mc_metrics_value(text, "c") == 7);   /* last line, no newline */
    assert_true(mc_metrics_value(text, "a") == -1);  /* a prefix of a name is not the name */
    assert_true(mc_metrics_value(text, "HELP") == -1);
    assert_true(mc_metrics_value("", "a_total") == -1);
    assert_true(mc_metrics_value("\na_total 1\n", "a_total") == 1);
    assert_int_equal(mc_metrics_check(text), 0);
}

static void test_check(void **state)
{
    (void)state;
    assert_int_equal(mc_metrics_check(""), 0);
    assert_int_equal(mc_metrics_check("# only a comment\n\n"), 0);
    assert_int_equal(mc_metrics_check("x{le=\"+Inf\"} +Inf\ny NaN\nz -1.5e3\n"), 0);
    static const char *const bad[] = {
        "x\n",         /* no value */
        "x \n",        /* empty value */
        " 1\n",        /* no series */
        "x 1 extra\n", /* a word after the value */
        "x one\n",     /* not a number */
        "a 1\nx 2z\n", /* a later line is broken */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(mc_metrics_check(bad[i]), -1);
}

static void test_fetch_own_server(void **state)
{
    (void)state;
    struct mc_metrics *m = mc_metrics_new();
    struct mc_counter *c = mc_metrics_counter(m, "scrape_hits_total", "hits", NULL);
    mc_counter_add(c, 7);
    struct mc_http_config cfg = {.addr = "127.0.0.1", .metrics = m};
    struct mc_http_server *s = NULL;
    assert_int_equal(mc_http_server_new(&cfg, &s), 0);
    uint16_t port = mc_http_server_port(s);

    struct mc_http_reply r;
    assert_int_equal(mc_http_fetch("127.0.0.1", port, "GET", "/metrics", 5000, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.http_minor, 1);
    assert_non_null(strstr(r.content_type, "text/plain"));
    assert_int_equal(r.body_len, strlen(r.body));
    assert_true(mc_metrics_value(r.body, "scrape_hits_total") == 7);
    assert_int_equal(mc_metrics_check(r.body), 0);
    mc_http_reply_free(&r);
    assert_null(r.body);

    assert_int_equal(mc_http_fetch("127.0.0.1", port, "GET", "/nope", 5000, &r), 0);
    assert_int_equal(r.status, 404);
    mc_http_reply_free(&r);

    char addr[32], *text = NULL;
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    mc_counter_inc(c);
    assert_int_equal(mc_metrics_scrape(addr, 5000, &text), 0);
    assert_true(mc_metrics_value(text, "scrape_hits_total") == 8);
    free(text);
    /* bad addresses are refused before any connection */
    static const char *const bad[] = {"127.0.0.1",   "127.0.0.1:",      ":80",
                                      "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:8x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        text = (char *)1;
        assert_int_equal(mc_metrics_scrape(bad[i], 1000, &text), -1);
        assert_null(text);
    }
    mc_http_server_free(s);
    /* nobody listens there now */
    assert_int_equal(mc_http_fetch("127.0.0.1", port, "GET", "/metrics", 2000, &r),
                     MC_HTTP_FETCH_IO);
    mc_metrics_free(m);
}

/* A listener that accepts (the kernel's backlog does) and never answers: the fetch ends at its
 * deadline with an error; it does not wait for the peer. */
static void test_fetch_deadline(void **state)
{
    (void)state;
    uint16_t port;
    int l = tl_listen(4, &port);

    struct mc_http_reply r;
    uint64_t t0 = now_ms();
    assert_int_equal(mc_http_fetch("127.0.0.1", port, "GET", "/metrics", 300, &r),
                     MC_HTTP_FETCH_IO);
    uint64_t took = now_ms() - t0;
    assert_null(r.body);
    /* it waited for the deadline (the reply was not given up on early) and returned, where a
     * client without one blocks until the test's own TIMEOUT kills it */
    assert_true(took >= 300);
    close(l);
}

/* A reply that is not HTTP: refused as malformed. */
static void test_fetch_malformed(void **state)
{
    (void)state;
    uint16_t port;
    int l = tl_listen(4, &port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = accept(l, NULL, NULL);
        char buf[512];
        (void)!read(fd, buf, sizeof(buf));
        (void)!write(fd, "SSH-2.0-nope\r\n", 14);
        _exit(0);
    }
    struct mc_http_reply r;
    assert_int_equal(mc_http_fetch("127.0.0.1", port, "GET", "/", 5000, &r),
                     MC_HTTP_FETCH_MALFORMED);
    assert_null(r.body);
    close(l);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_fetch_own_server),
        cmocka_unit_test(test_fetch_deadline),
        cmocka_unit_test(test_fetch_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
