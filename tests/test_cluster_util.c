/*
 * test_cluster_util.c - the cluster fixture of cluster_util.c without a real cluster: stand-in
 * mooncake_master / mooncake_client scripts in a private $MC_BIN_DIR print READY lines (and
 * their arguments to stderr), so the flags the fixture passes, the addresses it takes from
 * READY and its refusals are checked in milliseconds. Also the value pattern the cluster tests
 * compare bytes with (the /metrics reader is tested in test_metrics_scrape.c).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_util.h"

static char g_bin[64];

/* bin/NAME: a script that logs its arguments on stderr and prints ready (a printf format
 * argument list is not needed: the line is fixed) on stdout, then waits. */
static void write_script(const char *name, const char *ready)
{
    char path[128], text[512];
    snprintf(path, sizeof(path), "%s/%s", g_bin, name);
    snprintf(text, sizeof(text), "#!/bin/sh\necho \"args: $*\" >&2\necho '%s'\nexec sleep 30\n",
             ready);
    assert_int_equal(cu_write_file(path, text, strlen(text)), 0);
    assert_int_equal(chmod(path, 0700), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_bin, sizeof(g_bin), "/tmp/mc_cluster_util.XXXXXX");
    if (!mkdtemp(g_bin))
        return -1;
    return setenv("MC_BIN_DIR", g_bin, 1);
}

static int teardown(void **state)
{
    (void)state;
    cu_rm_rf(g_bin);
    return 0;
}

static void test_start_master_and_daemon(void **state)
{
    struct cu_cluster c;
    struct cu_proc m = {.out_fd = -1}, d = {.out_fd = -1};
    char ep[64], log[128];
    (void)state;
    write_script("mooncake_master", "READY rpc=0.0.0.0:4101 metrics=0.0.0.0:4102");
    write_script("mooncake_client", "READY endpoint=127.0.0.1:4103");
    assert_int_equal(cu_cluster_init(&c, "mc_cu_fixture"), 0);
    const char *mflags[] = {"--client_ttl=3", NULL};
    assert_int_equal(cu_start_master(&c, &m, 4101, mflags, 10000), 0);
    /* loopback forms of what READY said */
    assert_string_equal(c.rpc, "127.0.0.1:4101");
    assert_string_equal(c.metrics, "127.0.0.1:4102");
    const char *dflags[] = {"--segment_size=16MiB", NULL};
    assert_int_equal(cu_start_daemon(&c, &d, "holder", dflags, ep, sizeof(ep), 10000), 0);
    assert_string_equal(ep, "127.0.0.1:4103");
    assert_int_equal(cu_stop(&d, SIGTERM, 5000), 128 + SIGTERM);
    assert_int_equal(cu_stop(&m, SIGTERM, 5000), 128 + SIGTERM);
    /* the fixture's flags, then the test's */
    snprintf(log, sizeof(log), "%s/master.log", c.dir);
    char *text = cu_slurp(log, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "args: --rpc_port=4101 --rpc_address=127.0.0.1 "
                                 "--metrics_port=0 --metrics_host=127.0.0.1 --client_ttl=3"));
    free(text);
    snprintf(log, sizeof(log), "%s/holder.log", c.dir);
    text = cu_slurp(log, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "args: --master=127.0.0.1:4101 --host=127.0.0.1 "
                                 "--data_port=0 --segment_size=16MiB"));
    free(text);
    char dir[64];
    snprintf(dir, sizeof(dir), "%s", c.dir);
    cu_cluster_destroy(&c);
    struct stat st;
    assert_int_equal(stat(dir, &st), -1); /* removed */
}

/* A daemon where a master should be (and the other way round) is refused, and killed. */
static void test_start_refuses_wrong_ready(void **state)
{
    struct cu_cluster c;
    struct cu_proc p = {.out_fd = -1};
    char ep[64];
    (void)state;
    write_script("mooncake_master", "READY endpoint=127.0.0.1:4103");
    write_script("mooncake_client", "READY rpc=127.0.0.1:1 metrics=127.0.0.1:2");
    assert_int_equal(cu_cluster_init(&c, "mc_cu_fixture"), 0);
    assert_int_equal(cu_start_master(&c, &p, 0, NULL, 10000), -1);
    assert_int_equal(p.pid, 0);
    assert_string_equal(c.rpc, "");
    assert_int_equal(cu_start_daemon(&c, &p, "d", NULL, ep, sizeof(ep), 10000), -1);
    assert_int_equal(p.pid, 0);
    /* no binaries at all */
    unsetenv("MC_BIN_DIR");
    struct cu_cluster none;
    assert_int_equal(cu_cluster_init(&none, "mc_cu_fixture"), -1);
    setenv("MC_BIN_DIR", g_bin, 1);
    cu_cluster_destroy(&c);
}

static void test_fill(void **state)
{
    uint8_t a[37], b[37], c[37];
    (void)state;
    memset(a, 0, sizeof(a));
    memset(b, 0xff, sizeof(b));
    cu_fill(a, sizeof(a), 42);
    cu_fill(b, sizeof(b), 42);
    cu_fill(c, sizeof(c), 43);
    assert_memory_equal(a, b, sizeof(a)); /* deterministic, every byte written (tail too) */
    assert_memory_not_equal(a, c, sizeof(a));
    /* a prefix of a longer fill */
    uint8_t d[64];
    cu_fill(d, sizeof(d), 42);
    assert_memory_equal(a, d, 32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_master_and_daemon),
        cmocka_unit_test(test_start_refuses_wrong_ready),
        cmocka_unit_test(test_fill),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
