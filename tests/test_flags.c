/*
 * test_flags.c - the gflags shim (common/flags.h), driven through tests/flags_demo_main.c.
 *
 * gflags keeps one process-wide registry and aborts on a duplicate name, so every scenario runs
 * the demo program in a child process (fork + exec) with its stdout and stderr sent to files in
 * a private temporary directory, and checks the exit status and the "name=value" lines it
 * prints. Children are waited for with a deadline and killed if they overrun.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "test_spawn.h"

static char g_dir[64];
static char g_demo[4096];

struct run {
    int status; /* exit status, or 128 + signal */
    char *out;  /* stdout */
    char *err;  /* stderr */
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

/* Runs the demo with the given arguments (NULL-terminated). */
static struct run run_demo(const char *first, ...)
{
    const char *argv[64];
    char out_path[128], err_path[128];
    struct run r = {0};
    va_list ap;
    int n = 0, st = 0;
    pid_t pid, w;

    argv[n++] = g_demo;
    va_start(ap, first);
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    snprintf(out_path, sizeof(out_path), "%s/out", g_dir);
    snprintf(err_path, sizeof(err_path), "%s/err", g_dir);

    pid_t parent = getpid();
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tu_die_with_parent(parent);
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(99);
        execv(g_demo, (char *const *)argv);
        _exit(98);
    }
    uint64_t deadline = mc_now_ms() + 20000;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && mc_now_ms() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        fail_msg("demo did not finish within the deadline");
    }
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    unlink(out_path);
    unlink(err_path);
    return r;
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* The value printed for "name=" (a line of its own), copied into a static buffer. */
static const char *val(const struct run *r, const char *name)
{
    static char buf[256];
    size_t nl = strlen(name);
    for (const char *p = r->out; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
            snprintf(buf, sizeof(buf), "%.*s", (int)(len - nl - 1), p + nl + 1);
            return buf;
        }
        p = e ? e + 1 : NULL;
    }
    return NULL;
}

static void assert_val(const struct run *r, const char *name, const char *want)
{
    const char *got = val(r, name);
    if (!got)
        fail_msg("no '%s=' line in output:\n%s\nstderr:\n%s", name, r->out, r->err);
    assert_string_equal(got, want);
}

static void test_defaults(void **state)
{
    (void)state;
    struct run r = run_demo(NULL);
    assert_int_equal(r.status, 0);
    assert_val(&r, "verbose", "0");
    assert_val(&r, "i32", "-7");
    assert_val(&r, "u32", "50051");
    assert_val(&r, "i64", "-9000000000");
    assert_val(&r, "u64", "18000000000000000000");
    assert_val(&r, "ratio", "0.050000000000000003");
    assert_val(&r, "name", "mooncake");
    assert_val(&r, "size", "4294967296");
    assert_val(&r, "ttl_ms", "10000");
    assert_val(&r, "log_level", "1");
    assert_val(&r, "set_i32", "0");
    assert_val(&r, "set_name", "0");
    assert_null(val(&r, "arg"));
    run_free(&r);
}

static void test_every_type(void **state)
{
    (void)state;
    struct run r =
        run_demo("--verbose", "--i32=-2147483648", "--u32=4294967295", "--i64=-9223372036854775808",
                 "--u64=18446744073709551615", "--ratio=0.9", "--name=a b", "pos1", "--size=256MB",
                 "--ttl=5m", "pos2", NULL);
    assert_int_equal(r.status, 0);
    assert_val(&r, "verbose", "1");
    assert_val(&r, "i32", "-2147483648");
    assert_val(&r, "u32", "4294967295");
    assert_val(&r, "i64", "-9223372036854775808");
    assert_val(&r, "u64", "18446744073709551615");
    assert_val(&r, "ratio", "0.90000000000000002");
    assert_val(&r, "name", "a b");
    assert_val(&r, "size", "268435456");
    assert_val(&r, "ttl_ms", "300000");
    assert_val(&r, "set_i32", "1");
    assert_val(&r, "set_name", "1");
    /* positional arguments survive, in order, after the flags are removed */
    assert_non_null(strstr(r.out, "arg=pos1\narg=pos2\n"));
    run_free(&r);

    /* separate-argument form and the bool negation */
    r = run_demo("--noverbose", "--i32", "12", "-name", "single-dash", NULL);
    assert_int_equal(r.status, 0);
    assert_val(&r, "verbose", "0");
    assert_val(&r, "i32", "12");
    assert_val(&r, "name", "single-dash");
    run_free(&r);
}

static void expect_usage_error(const char *arg, const char *needle)
{
    struct run r = run_demo(arg, NULL);
    if (r.status != 2 || !strstr(r.err, needle))
        fail_msg("%s: status %d, stderr:\n%s", arg, r.status, r.err);
    assert_string_equal(r.out, ""); /* nothing printed as if it had run */
    run_free(&r);
}

static void test_bad_values_exit_2(void **state)
{
    (void)state;
    expect_usage_error("--i32=abc", "illegal value 'abc'");
    expect_usage_error("--i32=2147483648", "illegal value");
    expect_usage_error("--u32=4294967296", "illegal value");
    expect_usage_error("--u32=-1", "illegal value");
    expect_usage_error("--i64=9223372036854775808", "illegal value");
    expect_usage_error("--u64=-5", "illegal value");
    expect_usage_error("--ratio=fast", "illegal value 'fast'");
    expect_usage_error("--verbose=maybe", "illegal value 'maybe'");
}

static void test_unknown_flag_exit_2(void **state)
{
    (void)state;
    expect_usage_error("--no_such_flag=1", "unknown command line flag 'no_such_flag'");
    expect_usage_error("--rpc_portt", "unknown command line flag");
}

static void test_sizes(void **state)
{
    static const struct {
        const char *in, *bytes;
    } good[] = {
        {"4096", "4096"},
        {"256MB", "268435456"},
        {"4GiB", "4294967296"},
        {"1.5G", "1610612736"},
        {"64k", "65536"},
        {"1T", "1099511627776"},
        {"0", "0"},
        {"7b", "7"},
    };
    static const char *const bad[] = {"4X", "-1", "", "abc", "1.5", "99999999999T", "12 MB x"};
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char arg[64];
        snprintf(arg, sizeof(arg), "--size=%s", good[i].in);
        struct run r = run_demo(arg, NULL);
        assert_int_equal(r.status, 0);
        assert_val(&r, "size", good[i].bytes);
        run_free(&r);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char arg[64];
        snprintf(arg, sizeof(arg), "--size=%s", bad[i]);
        expect_usage_error(arg, "flag --size must be a size");
    }
}

static void test_durations(void **state)
{
    static const struct {
        const char *in, *ms;
    } good[] = {
        {"500ms", "500"}, {"10s", "10000"}, {"5m", "300000"}, {"1h", "3600000"},
        {"2", "2"},       {"1.5s", "1500"}, {"250us", "0"},   {"3d", "259200000"},
    };
    static const char *const bad[] = {"10parsecs", "-5s", "", "s", "1e400s"};
    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char arg[64];
        snprintf(arg, sizeof(arg), "--ttl=%s", good[i].in);
        struct run r = run_demo(arg, NULL);
        assert_int_equal(r.status, 0);
        assert_val(&r, "ttl_ms", good[i].ms);
        run_free(&r);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char arg[64];
        snprintf(arg, sizeof(arg), "--ttl=%s", bad[i]);
        expect_usage_error(arg, "flag --ttl must be a duration");
    }
}

static void test_flagfile(void **state)
{
    char path[128], arg[160];
    FILE *f;
    (void)state;

    snprintf(path, sizeof(path), "%s/flags.txt", g_dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "# comment\n--i32=42\n--name=from file\n--size=64k\n--verbose\n");
    fclose(f);
    snprintf(arg, sizeof(arg), "--flagfile=%s", path);

    struct run r = run_demo(arg, NULL);
    assert_int_equal(r.status, 0);
    assert_val(&r, "i32", "42");
    assert_val(&r, "name", "from file");
    assert_val(&r, "size", "65536");
    assert_val(&r, "verbose", "1");
    assert_val(&r, "set_i32", "1");
    run_free(&r);

    /* the command line after the flagfile wins */
    r = run_demo(arg, "--i32=7", NULL);
    assert_int_equal(r.status, 0);
    assert_val(&r, "i32", "7");
    run_free(&r);

    /* a bad value inside the flagfile is a usage error too */
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "--i32=forty\n");
    fclose(f);
    expect_usage_error(arg, "illegal value 'forty'");
    unlink(path);

    snprintf(arg, sizeof(arg), "--flagfile=%s/missing.txt", g_dir);
    struct run m = run_demo(arg, NULL);
    assert_int_equal(m.status, 2);
    assert_non_null(strstr(m.err, "missing.txt"));
    run_free(&m);
}

static void test_help_and_version_exit_0(void **state)
{
    (void)state;
    struct run r = run_demo("--help", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "mc_flags_demo [flags] [args]")); /* the usage line */
    assert_non_null(strstr(r.out, "-i32 (an int32)"));
    assert_non_null(strstr(r.out, "default: \"4GiB\""));
    assert_null(strstr(r.out, "i32=")); /* it did not go on to run */
    assert_string_equal(r.err, "");
    run_free(&r);

    r = run_demo("--version", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "mc_flags_demo version " MC_VERSION_STRING));
    assert_string_equal(r.err, "");
    run_free(&r);

    r = run_demo("--helpxml", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "<AllFlags>"));
    assert_non_null(strstr(r.out, "<name>u64</name>"));
    run_free(&r);

    r = run_demo("--helpon=mc_flags_demo", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "-ttl (a duration"));
    run_free(&r);

    r = run_demo("--helpfull", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "-flagfile"));
    assert_non_null(strstr(r.out, "-ratio (a double)"));
    run_free(&r);
}

static void test_log_level(void **state)
{
    (void)state;
    struct run r = run_demo("--log_level=debug", NULL);
    assert_int_equal(r.status, 0);
    assert_val(&r, "log_level", "0");
    run_free(&r);
    r = run_demo("--log_level=ERROR", NULL);
    assert_int_equal(r.status, 0);
    assert_val(&r, "log_level", "3");
    run_free(&r);
    expect_usage_error("--log_level=loud", "flag --log_level must be one of");
}

static void test_bad_table_aborts(void **state)
{
    (void)state;
    struct run r = run_demo("--bad_table", NULL);
    assert_int_equal(r.status, 128 + SIGABRT);
    assert_non_null(strstr(r.err, "'dup'"));
    run_free(&r);
}

static int setup(void **state)
{
    const char *bin = getenv("MC_BIN_DIR");
    (void)state;
    snprintf(g_demo, sizeof(g_demo), "%s/mc_flags_demo", bin ? bin : ".");
    if (access(g_demo, X_OK) != 0) {
        fprintf(stderr, "cannot run %s (set MC_BIN_DIR)\n", g_demo);
        return -1;
    }
    snprintf(g_dir, sizeof(g_dir), "/tmp/mc_test_flags.XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return rmdir(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_type),
        cmocka_unit_test(test_bad_values_exit_2),
        cmocka_unit_test(test_unknown_flag_exit_2),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_flagfile),
        cmocka_unit_test(test_help_and_version_exit_0),
        cmocka_unit_test(test_log_level),
        cmocka_unit_test(test_bad_table_aborts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
