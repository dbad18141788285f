/* test_fanout.c - mc_fanout (src/common/fanout.h): every task runs exactly once, the tasks run
 * side by side (a task waits for all the others to have started: run one after the other, they
 * would time out), more tasks than threads, no task at all, helper threads reused from call to
 * call, and a forked child that gets helpers of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_skip.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fanout.h"
#include "common/log.h"

struct rendezvous {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t arrived, expect;
    int runs[64];
    int timed_out;
    pthread_t who[64];
};

static void count_task(void *arg, size_t i)
{
    struct rendezvous *r = arg;
    pthread_mutex_lock(&r->mu);
    r->runs[i]++;
    r->who[i] = pthread_self();
    pthread_mutex_unlock(&r->mu);
}

/* Waits (at most 10 s) until every task has arrived. */
static void meet_task(void *arg, size_t i)
{
    struct rendezvous *r = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&r->mu);
    r->runs[i]++;
    r->who[i] = pthread_self();
    r->arrived++;
    pthread_cond_broadcast(&r->cv);
    while (r->arrived < r->expect) {
        if (pthread_cond_timedwait(&r->cv, &r->mu, &until) == ETIMEDOUT) {
            r->timed_out = 1;
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
}

static void init(struct rendezvous *r, size_t expect)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->expect = expect;
}

static void fini(struct rendezvous *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static void test_side_by_side(void **state)
{
    (void)state;
    struct rendezvous r;
    init(&r, 4);
    mc_fanout(4, meet_task, &r);
    assert_int_equal(r.timed_out, 0);
    assert_int_equal(r.arrived, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(r.runs[i], 1);
    fini(&r);
}

/* Task 0 runs on the caller; tasks that meet it run on helpers, each on its own. */
static void test_task0_on_caller(void **state)
{
    (void)state;
    struct rendezvous r;
    init(&r, 3);
    mc_fanout(3, meet_task, &r);
    assert_int_equal(r.timed_out, 0);
    assert_true(pthread_equal(r.who[0], pthread_self()));
    assert_false(pthread_equal(r.who[1], pthread_self()));
    assert_false(pthread_equal(r.who[2], pthread_self()));
    assert_false(pthread_equal(r.who[1], r.who[2]));
    /* tasks that do not wait run wherever there is a thread: all of them once */
    fini(&r);
    init(&r, 0);
    mc_fanout(3, count_task, &r);
    assert_true(pthread_equal(r.who[0], pthread_self()));
    for (int i = 0; i < 3; i++)
        assert_int_equal(r.runs[i], 1);
    fini(&r);
}

/* Helpers are kept: many calls in a row do not pile up threads. */
static void test_helpers_reused(void **state)
{
    (void)state;
    for (int k = 0; k < 200; k++) {
        struct rendezvous r;
        init(&r, 4);
        mc_fanout(4, meet_task, &r);
        assert_int_equal(r.timed_out, 0);
        fini(&r);
    }
    assert_true(mc_fanout_threads() >= 3);
    assert_true(mc_fanout_threads() <= MC_FANOUT_MAX_THREADS);
}

/* A forked child has none of its parent's helpers: it starts its own (a rendezvous would time
 * out if it counted on the parent's idle ones). */
static void test_fork_child_gets_helpers(void **state)
{
    (void)state;
#if defined(__SANITIZE_THREAD__)
    MC_SKIP("TSan refuses to start threads in the child of a multi-threaded fork");
#endif
    struct rendezvous r;
    init(&r, 4);
    mc_fanout(4, meet_task, &r); /* the parent has idle helpers now */
    fini(&r);
    assert_true(mc_fanout_threads() >= 3);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rendezvous c;
        init(&c, 4);
        mc_fanout(4, meet_task, &c);
        _exit(c.timed_out || c.arrived != 4 || mc_fanout_threads() < 3 ? 1 : 0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_more_tasks_than_threads(void **state)
{
    (void)state;
    struct rendezvous r;
    size_t n = 2 * MC_FANOUT_MAX_THREADS + 3;
    assert_true(n <= 64);
    init(&r, 0);
    mc_fanout(n, count_task, &r);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(r.runs[i], 1);
    assert_int_equal(r.runs[n], 0);
    /* a whole slot's worth of tasks meeting: they must all run at once too */
    fini(&r);
    init(&r, MC_FANOUT_MAX_THREADS);
    mc_fanout(MC_FANOUT_MAX_THREADS, meet_task, &r);
    assert_int_equal(r.timed_out, 0);
    fini(&r);
}

/* The tasks log through the caller's logger, on their threads too. */
static int g_lines;
static pthread_mutex_t g_lines_mu = PTHREAD_MUTEX_INITIALIZER;

static void count_line(void *arg, enum mc_log_level level, const char *line, size_t len)
{
    (void)arg;
    (void)level;
    (void)len;
    if (!strstr(line, "fanout task"))
        return;
    pthread_mutex_lock(&g_lines_mu);
    g_lines++;
    pthread_mutex_unlock(&g_lines_mu);
}

static void log_task(void *arg, size_t i)
{
    (void)arg;
    mc_warn("test", "fanout task", "i=%zu", i);
}

static void test_caller_logger(void **state)
{
    (void)state;
    static const struct mc_logger lg = {.level = MC_LOG_INFO, .sink = count_line};
    const struct mc_logger *lp = &lg;
    g_lines = 0;
    {
        mc_log_scope(lp);
        mc_fanout(5, log_task, NULL);
    }
    assert_int_equal(g_lines, 5);
}

static void test_none(void **state)
{
    (void)state;
    struct rendezvous r;
    init(&r, 0);
    mc_fanout(0, count_task, &r);
    mc_fanout(3, NULL, &r);
    for (int i = 0; i < 4; i++)
        assert_int_equal(r.runs[i], 0);
    mc_fanout(1, count_task, &r);
    assert_int_equal(r.runs[0], 1);
    assert_true(pthread_equal(r.who[0], pthread_self()));
    fini(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_side_by_side),
        cmocka_unit_test(test_task0_on_caller),
        cmocka_unit_test(test_more_tasks_than_threads),
        cmocka_unit_test(test_caller_logger),
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_helpers_reused),
        cmocka_unit_test(test_fork_child_gets_helpers),
    };
    return MC_RUN_TESTS(tests, NULL, NULL);
}
