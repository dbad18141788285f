/*
 * test_proc_harness.c - the child-process harness (src/tools/proc_harness.c) against /bin/sh
 * children: READY lines parsed to the daemons' contract and refused when malformed, stdio
 * wiring, deadlines on reading and waiting, SIGTERM-then-SIGKILL stopping, runs to completion,
 * a child dying with its parent, and temporary directories removed without following links.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/proc_harness.h"

static char g_dir[256];

static int setup(void **state)
{
    (void)state;
    return mc_proc_mkdtemp(g_dir, sizeof(g_dir), NULL, "mc_proc_harness");
}

static int teardown(void **state)
{
    (void)state;
    mc_proc_rm_rf(g_dir);
    return 0;
}

static void path_in(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n = 0;
    buf[0] = '\0';
    if (f) {
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

static void test_parse_master(void **state)
{
    struct mc_proc_ready r;
    (void)state;
    assert_int_equal(mc_proc_parse_ready("READY rpc=0.0.0.0:50051 metrics=127.0.0.1:9003", &r), 0);
    assert_int_equal(r.kind, MC_PROC_READY_MASTER);
    assert_string_equal(r.rpc_host, "0.0.0.0");
    assert_int_equal(r.rpc_port, 50051);
    assert_string_equal(r.metrics_host, "127.0.0.1");
    assert_int_equal(r.metrics_port, 9003);
    /* an IPv6 host keeps its colons: the port is after the last one */
    assert_int_equal(mc_proc_parse_ready("READY rpc=[::1]:1 metrics=[::1]:65535", &r), 0);
    assert_string_equal(r.rpc_host, "[::1]");
    assert_int_equal(r.rpc_port, 1);
    assert_int_equal(r.metrics_port, 65535);
}

static void test_parse_daemon(void **state)
{
    struct mc_proc_ready r;
    (void)state;
    assert_int_equal(mc_proc_parse_ready("READY endpoint=127.0.0.1:40123", &r), 0);
    assert_int_equal(r.kind, MC_PROC_READY_DAEMON);
    assert_string_equal(r.endpoint, "127.0.0.1:40123");
    assert_int_equal(r.endpoint_port, 40123);
    assert_string_equal(r.line, "READY endpoint=127.0.0.1:40123");
}

static void test_parse_refuses(void **state)
{
    static const char *const bad[] = {
        "",
        "READY",
        "READY ",
        "ready endpoint=127.0.0.1:1",
        "READYendpoint=127.0.0.1:1",
        "READY  endpoint=127.0.0.1:1",
        "READY endpoint=",
        "READY endpoint=127.0.0.1",
        "READY endpoint=127.0.0.1:",
        "READY endpoint=:80",
        "READY endpoint=127.0.0.1:0",
        "READY endpoint=127.0.0.1:65536",
        "READY endpoint=127.0.0.1:123456",
        "READY endpoint=127.0.0.1:8x",
        "READY endpoint=127.0.0.1:-1",
        "READY endpoint=127.0.0.1:80 extra",
        "READY rpc=127.0.0.1:80",
        "READY rpc=127.0.0.1:80 ",
        "READY rpc=127.0.0.1:80 metrics=",
        "READY rpc=127.0.0.1:80 metrics=127.0.0.1:0",
        "READY rpc=127.0.0.1 metrics=127.0.0.1:81",
        "READY rpc=127.0.0.1:80 metrics=127.0.0.1:81 extra",
        "READY metrics=127.0.0.1:81 rpc=127.0.0.1:80",
        "READY rpc=127.0.0.1:80  metrics=127.0.0.1:81",
        "READY rpc=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:80 "
        "metrics=h:81",
    };
    struct mc_proc_ready r;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (mc_proc_parse_ready(bad[i], &r) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(r.kind, 0);
    }
    assert_int_equal(mc_proc_parse_ready(NULL, &r), -1);
}

/* A daemon-like child: READY on stdout, a log line on stderr, then it runs until stopped. */
static void test_ready_and_sigterm(void **state)
{
    char log[300];
    struct mc_proc p;
    struct mc_proc_ready r;
    (void)state;
    path_in(log, sizeof(log), "daemon.log");
    const char *argv[] = {"/bin/sh", "-c",
                          "echo started >&2; echo READY endpoint=127.0.0.1:4242; "
                          "echo after; exec sleep 30",
                          NULL};
    struct mc_proc_io io = {.err_path = log};
    assert_int_equal(mc_proc_spawn(&p, argv, &io), 0);
    assert_true(p.pid > 0);
    assert_true(p.out_fd >= 0);
    assert_string_equal(p.log, log);
    assert_int_equal(mc_proc_await_ready(&p, &r, 10000), 0);
    assert_int_equal(r.kind, MC_PROC_READY_DAEMON);
    assert_int_equal(r.endpoint_port, 4242);
    /* the line after READY was not consumed by reading READY */
    char line[64];
    assert_int_equal(mc_proc_read_line(&p, line, sizeof(line), 10000), 0);
    assert_string_equal(line, "after");
    /* nothing more within the deadline: -1, and it is still running */
    assert_int_equal(mc_proc_read_line(&p, line, sizeof(line), 100), -1);
    assert_int_equal(mc_proc_wait(&p, 50), MC_PROC_TIMEOUT);
    assert_true(p.pid > 0);
    assert_int_equal(mc_proc_stop(&p, SIGTERM, 10000), 128 + SIGTERM);
    assert_int_equal(p.pid, 0);
    assert_int_equal(p.out_fd, -1);
    assert_non_null(strstr(slurp(log), "started"));
    /* stopping again: not running */
    assert_int_equal(mc_proc_stop(&p, SIGTERM, 100), MC_PROC_NOT_RUNNING);

    /* the log is appended to on request, truncated otherwise */
    io.err_append = true;
    const char *again[] = {"/bin/sh", "-c", "echo second >&2", NULL};
    assert_int_equal(mc_proc_spawn(&p, again, &io), 0);
    assert_int_equal(mc_proc_wait(&p, 10000), 0);
    mc_proc_stop(&p, SIGKILL, 100);
    assert_non_null(strstr(slurp(log), "started"));
    assert_non_null(strstr(slurp(log), "second"));
    io.err_append = false;
    assert_int_equal(mc_proc_spawn(&p, again, &io), 0);
    assert_int_equal(mc_proc_wait(&p, 10000), 0);
    mc_proc_stop(&p, SIGKILL, 100);
    assert_null(strstr(slurp(log), "started"));
}

/* A child that ignores SIGTERM is killed after the deadline, and says so. */
static void test_stop_escalates(void **state)
{
    struct mc_proc p;
    char line[32];
    (void)state;
    const char *argv[] = {"/bin/sh", "-c", "trap '' TERM; echo up; exec sleep 30", NULL};
    assert_int_equal(mc_proc_spawn(&p, argv, NULL), 0);
    assert_int_equal(mc_proc_read_line(&p, line, sizeof(line), 10000), 0);
    assert_string_equal(line, "up");
    pid_t pid = p.pid;
    assert_int_equal(mc_proc_stop(&p, SIGTERM, 300), MC_PROC_KILLED);
    assert_int_equal(p.pid, 0);
    assert_int_equal(kill(pid, 0), -1); /* reaped: no zombie left */
}

static void test_ready_failures(void **state)
{
    struct mc_proc p;
    struct mc_proc_ready r;
    (void)state;
    /* silent: no line within the deadline */
    const char *silent[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    assert_int_equal(mc_proc_spawn(&p, silent, NULL), 0);
    assert_int_equal(mc_proc_await_ready(&p, &r, 200), -1);
    assert_int_equal(mc_proc_stop(&p, SIGKILL, 5000), 128 + SIGKILL);
    /* a line that is not READY */
    const char *chatty[] = {"/bin/sh", "-c", "echo hello; exec sleep 30", NULL};
    assert_int_equal(mc_proc_spawn(&p, chatty, NULL), 0);
    assert_int_equal(mc_proc_await_ready(&p, &r, 10000), -2);
    assert_string_equal(r.line, "hello");
    mc_proc_stop(&p, SIGKILL, 5000);
    /* exits at once: EOF, and the status tells exec failed */
    const char *missing[] = {"/nonexistent/mc_no_such_binary", NULL};
    assert_int_equal(mc_proc_spawn(&p, missing, NULL), 0);
    assert_int_equal(mc_proc_await_ready(&p, &r, 10000), -1);
    assert_int_equal(mc_proc_wait(&p, 10000), 127);
    assert_int_equal(p.pid, 0);
    mc_proc_stop(&p, SIGTERM, 100); /* closes the pipe */
    assert_int_equal(p.out_fd, -1);
    /* no argv at all */
    const char *none[] = {NULL};
    assert_int_equal(mc_proc_spawn(&p, none, NULL), -1);
    assert_int_equal(p.pid, 0);
}

/* spawn + READY of an expected kind in one call; on any failure the child is gone */
static void test_start(void **state)
{
    char log[300];
    struct mc_proc p;
    struct mc_proc_ready r;
    (void)state;
    path_in(log, sizeof(log), "start.log");
    struct mc_proc_io io = {.err_path = log};
    const char *master[] = {"/bin/sh", "-c",
                            "echo READY rpc=127.0.0.1:7001 metrics=127.0.0.1:7002; exec sleep 30",
                            NULL};
    assert_int_equal(mc_proc_start(&p, master, &io, MC_PROC_READY_MASTER, &r, 10000), 0);
    assert_int_equal(r.rpc_port, 7001);
    assert_int_equal(r.metrics_port, 7002);
    assert_int_equal(mc_proc_stop(&p, SIGTERM, 10000), 128 + SIGTERM);
    /* the other kind: refused, child killed and reaped */
    assert_int_equal(mc_proc_start(&p, master, &io, MC_PROC_READY_DAEMON, &r, 10000), -1);
    assert_int_equal(p.pid, 0);
    assert_int_equal(p.out_fd, -1);
    assert_string_equal(r.line, "READY rpc=127.0.0.1:7001 metrics=127.0.0.1:7002");
    /* no READY in time */
    const char *silent[] = {"/bin/sh", "-c", "echo why >&2; exec sleep 30", NULL};
    assert_int_equal(mc_proc_start(&p, silent, &io, MC_PROC_READY_DAEMON, &r, 200), -1);
    assert_int_equal(p.pid, 0);
    assert_string_equal(r.line, "");
}

static void test_run(void **state)
{
    char in[300], out[300], err[300];
    (void)state;
    path_in(in, sizeof(in), "in");
    path_in(out, sizeof(out), "out");
    path_in(err, sizeof(err), "err");
    FILE *f = fopen(in, "w");
    assert_non_null(f);
    fputs("from stdin\n", f);
    fclose(f);
    struct mc_proc_io io = {.in_path = in, .out_path = out, .err_path = err};
    const char *cat[] = {"/bin/sh", "-c", "cat; echo oops >&2; exit 3", NULL};
    assert_int_equal(mc_proc_run(cat, &io, 10000), 3);
    assert_string_equal(slurp(out), "from stdin\n");
    assert_string_equal(slurp(err), "oops\n");
    /* stdin defaults to /dev/null (cat ends at once), PATH lookup works */
    io.in_path = NULL;
    const char *cat2[] = {"cat", NULL};
    assert_int_equal(mc_proc_run(cat2, &io, 10000), 0);
    assert_string_equal(slurp(out), "");
    /* overrun: killed, MC_PROC_TIMEOUT */
    const char *slow[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    assert_int_equal(mc_proc_run(slow, NULL, 200), MC_PROC_TIMEOUT);
    /* a missing input file: not started */
    io.in_path = "/nonexistent/mc_in";
    assert_int_equal(mc_proc_run(cat2, &io, 1000), MC_PROC_NOT_RUNNING);
}

/* Whether pid is gone or a zombie (its parent died; init reaps it eventually). */
static int dead(pid_t pid)
{
    char path[64], s[512] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(s, 1, sizeof(s) - 1, f);
    fclose(f);
    s[n] = '\0';
    const char *p = strrchr(s, ')');
    return p && (p[2] == 'Z' || p[2] == 'X');
}

/* A child whose parent dies is killed with it (PR_SET_PDEATHSIG). */
static void test_dies_with_parent(void **state)
{
    int fds[2];
    pid_t mid, grandchild = 0;
    (void)state;
    assert_int_equal(pipe(fds), 0);
    mid = fork();
    assert_true(mid >= 0);
    if (mid == 0) {
        struct mc_proc p;
        const char *argv[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
        close(fds[0]);
        if (mc_proc_spawn(&p, argv, NULL) != 0)
            _exit(1);
        if (write(fds[1], &p.pid, sizeof(p.pid)) != (ssize_t)sizeof(p.pid))
            _exit(1);
        _exit(0); /* without stopping it */
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &grandchild, sizeof(grandchild)), (ssize_t)sizeof(grandchild));
    close(fds[0]);
    waitpid(mid, NULL, 0);
    assert_true(grandchild > 0);
    uint64_t deadline = mc_proc_now_ms() + 10000;
    while (!dead(grandchild) && mc_proc_now_ms() < deadline)
        mc_proc_sleep_ms(10);
    int gone = dead(grandchild);
    if (!gone)
        kill(grandchild, SIGKILL);
    assert_true(gone);
}

static void test_tmpdir_rm_rf(void **state)
{
    char dir[300], outside[300], sub[400], file[450], link[400];
    (void)state;
    assert_int_equal(mc_proc_mkdtemp(dir, sizeof(dir), g_dir, "tree"), 0);
    assert_int_equal(strncmp(dir, g_dir, strlen(g_dir)), 0);
    assert_non_null(strstr(dir, "/tree."));
    assert_int_equal(mc_proc_mkdtemp(outside, sizeof(outside), g_dir, "outside"), 0);
    snprintf(file, sizeof(file), "%s/keep", outside);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(sub, sizeof(sub), "%s/a", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(sub, sizeof(sub), "%s/a/b", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(file, sizeof(file), "%s/a/b/f", dir);
    f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(link, sizeof(link), "%s/a/link", dir);
    assert_int_equal(symlink(outside, link), 0);
    mc_proc_rm_rf(dir);
    struct stat st;
    assert_int_equal(lstat(dir, &st), -1);
    snprintf(file, sizeof(file), "%s/keep", outside);
    assert_int_equal(stat(file, &st), 0); /* the link's target is untouched */
    /* a parent that does not exist, a name that does not fit */
    char small[8];
    assert_int_equal(mc_proc_mkdtemp(dir, sizeof(dir), "/nonexistent/mc", "x"), -1);
    assert_int_equal(mc_proc_mkdtemp(small, sizeof(small), g_dir, "x"), -1);
    mc_proc_rm_rf("/nonexistent/mc_proc_harness_none"); /* nothing happens */
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_master),
        cmocka_unit_test(test_parse_daemon),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_ready_and_sigterm),
        cmocka_unit_test(test_stop_escalates),
        cmocka_unit_test(test_ready_failures),
        cmocka_unit_test(test_start),
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_dies_with_parent),
        cmocka_unit_test(test_tmpdir_rm_rf),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
