/*
 * test_client_log.c - a client's log level and log callback are its own.
 *
 * The library's lines are quiet by default (warn): a client opened with the default config
 * writes no info line to stderr while it opens, puts, gets and closes. Two clients in one
 * process, one at warn and one at info, each with its own callback, get only their own lines:
 * the warn client never an info line, the info client its own "client open" line (naming its
 * endpoint, not the other's); the process-wide level (set to off here) does not matter to
 * either. Lines from the clients' own threads (the ping thread noticing the master is gone)
 * reach each client's callback, and nothing reaches the process's log fd.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/log.h"
#include "mooncake/client.h"
#include "test_client_util.h"

/* Lines a callback received (thread-safe: clients log from their own threads too). */
struct sink {
    pthread_mutex_t lock;
    char *text; /* every line, '\n'-terminated */
    size_t len;
    int by_level[5];
};

static void collect(void *arg, int level, const char *line)
{
    struct sink *s = arg;
    size_t n = strlen(line);
    pthread_mutex_lock(&s->lock);
    char *t = realloc(s->text, s->len + n + 2);
    if (t) {
        memcpy(t + s->len, line, n);
        t[s->len + n] = '\n';
        t[s->len + n + 1] = '\0';
        s->text = t;
        s->len += n + 1;
    }
    if (level >= 0 && level < 5)
        s->by_level[level]++;
    pthread_mutex_unlock(&s->lock);
}

static bool sink_has(struct sink *s, const char *needle)
{
    pthread_mutex_lock(&s->lock);
    bool r = s->text && strstr(s->text, needle);
    pthread_mutex_unlock(&s->lock);
    return r;
}

static struct mc_client *open_client(const char *master, int level, struct sink *s)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = master;
    cfg.segment_size = 8u << 20;
    cfg.ping_interval_ms = 50;
    cfg.rpc_timeout_ms = 2000;
    cfg.connect_timeout_ms = 2000;
    if (s) {
        cfg.log_level = level;
        cfg.log_fn = collect;
        cfg.log_arg = s;
    }
    struct mc_client *c = NULL;
    int rc = mc_client_open(&cfg, &c);
    if (rc)
        fail_msg("mc_client_open: %s", mc_strerror(rc));
    return c;
}

/* Put on a, get on b (a transfer between the two clients), both ways. */
static void traffic(struct mc_client *a, struct mc_client *b, const char *key)
{
    uint8_t v[4096], r[4096];
    tm_fill(v, sizeof(v), 7);
    struct mc_replicate_config rc;
    mc_replicate_config_init(&rc);
    const char *pref[] = {mc_client_endpoint(b)};
    rc.preferred_segments = pref;
    rc.preferred_segments_count = 1;
    assert_int_equal(mc_put(a, key, v, sizeof(v), &rc), 0);
    assert_int_equal(mc_get(b, key, r, sizeof(r)), (int64_t)sizeof(v));
    assert_int_equal(mc_get(a, key, r, sizeof(r)), (int64_t)sizeof(v));
    assert_memory_equal(v, r, sizeof(v));
    assert_int_equal(mc_get(a, "no-such-key", r, sizeof(r)), MC_ERR_OBJECT_NOT_FOUND);
}

/* Reads what is in the pipe without blocking. */
static char *drain(int fd)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = calloc(1, cap + 1);
    ssize_t k;
    while (buf && (k = read(fd, buf + len, cap - len)) > 0)
        len += (size_t)k;
    return buf;
}

static void test_defaults_are_quiet(void **state)
{
    struct test_master *m = *state;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    assert_int_equal(cfg.log_level, MC_CLIENT_LOG_WARN);
    assert_null(cfg.log_fn);

    /* the process default stays at info: the client's level, not the process's, applies */
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    mc_log_set_level(MC_LOG_INFO);
    mc_log_set_fd(p[1]);
    struct mc_client *a = open_client(m->addr, 0, NULL);
    struct mc_client *b = open_client(m->addr, 0, NULL);
    traffic(a, b, "quiet");
    mc_client_close(a);
    mc_client_close(b);
    mc_log_set_fd(2);
    char *out = drain(p[0]);
    close(p[0]);
    close(p[1]);
    assert_non_null(out);
    if (strstr(out, "level=info") || strstr(out, "level=debug"))
        fail_msg("a default client wrote info lines:\n%s", out);
    free(out);

    /* a level out of range is refused */
    cfg.master_address = m->addr;
    cfg.log_level = 7;
    struct mc_client *c = NULL;
    assert_int_equal(mc_client_open(&cfg, &c), MC_ERR_INVALID_PARAMS);
    assert_null(c);
}

static void test_two_clients_two_levels(void **state)
{
    struct test_master *m = *state;
    struct sink sw = {.lock = PTHREAD_MUTEX_INITIALIZER}, si = {.lock = PTHREAD_MUTEX_INITIALIZER};
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    mc_log_set_fd(p[1]);
    mc_log_set_level(MC_LOG_OFF); /* process-wide: neither client may care */

    struct mc_client *w = open_client(m->addr, MC_CLIENT_LOG_WARN, &sw);
    struct mc_client *i = open_client(m->addr, MC_CLIENT_LOG_INFO, &si);
    traffic(w, i, "k1");
    traffic(i, w, "k2");

    char want[200], other[200];
    snprintf(want, sizeof(want), "msg=\"client open\" id=");
    assert_true(sink_has(&si, want));
    assert_false(sink_has(&sw, want));
    snprintf(want, sizeof(want), "endpoint=%s ", mc_client_endpoint(i));
    snprintf(other, sizeof(other), "endpoint=%s ", mc_client_endpoint(w));
    assert_true(sink_has(&si, want));
    assert_false(sink_has(&si, other));

    /* the ping threads notice the master is gone: each client's warn reaches its own sink */
    tm_kill(m);
    uint64_t deadline = mc_now_ms() + 10000;
    while (mc_now_ms() < deadline &&
           !(sink_has(&sw, "master unreachable") && sink_has(&si, "master unreachable"))) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_true(sink_has(&sw, "master unreachable"));
    assert_true(sink_has(&si, "master unreachable"));
    mc_client_close(w);
    mc_client_close(i);

    pthread_mutex_lock(&sw.lock);
    if (sw.by_level[MC_CLIENT_LOG_DEBUG] || sw.by_level[MC_CLIENT_LOG_INFO])
        fail_msg("the warn client got info lines:\n%s", sw.text);
    pthread_mutex_unlock(&sw.lock);
    assert_true(si.by_level[MC_CLIENT_LOG_INFO] > 0);
    assert_int_equal(si.by_level[MC_CLIENT_LOG_DEBUG], 0);

    mc_log_set_fd(2);
    mc_log_set_level(MC_LOG_INFO);
    char *out = drain(p[0]);
    close(p[0]);
    close(p[1]);
    assert_non_null(out);
    if (*out)
        fail_msg("lines went to the process log instead of the clients' callbacks:\n%s", out);
    free(out);
    free(sw.text);
    free(si.text);
}

static int setup(void **state)
{
    struct test_master *m = calloc(1, sizeof(*m));
    if (!m || tm_start(m, 0, NULL) != 0) {
        free(m);
        return -1;
    }
    *state = m;
    return 0;
}

static int teardown(void **state)
{
    struct test_master *m = *state;
    mc_log_set_fd(2);
    if (m->pid > 0)
        tm_kill(m);
    free(m);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults_are_quiet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_clients_two_levels, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
