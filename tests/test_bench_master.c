/*
 * test_bench_master.c - `mooncake_bench master` against a real mooncake_master on loopback:
 *   - two invocations (same --bench_id, the default) mount one fake segment: the master's
 *     capacity stays 1 TiB after the second (each used to add another 1 TiB);
 *   - a Get run over more keys than were prefilled counts the missing ones as misses and exits
 *     0 (it used to fail the run);
 *   - --probe_hz reports the open-loop probe's calls and max latency;
 *   - --io=uring drives the same calls: Gets of missing keys counted as misses, Puts that land
 *     in the master (its allocated bytes grow), io and syscalls_per_call in the JSON.
 * The master is stopped in teardown and the temporary directory removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_util.h"

#define START_MS 20000
#define RUN_MS 60000
#define TIB (1ull << 40)

static struct {
    struct cu_cluster cl;
    struct cu_proc master;
    char bench[700];
} g;

static int setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    if (cu_cluster_init(&g.cl, "mc_bench_master") != 0)
        return -1;
    snprintf(g.bench, sizeof(g.bench), "%s/mooncake_bench", getenv("MC_BIN_DIR"));
    const char *flags[] = {"--client_ttl=60", "--log_level=warn", NULL};
    return cu_start_master(&g.cl, &g.master, 0, flags, START_MS);
}

static int teardown(void **state)
{
    (void)state;
    cu_stop(&g.master, SIGTERM, 5000);
    cu_cluster_destroy(&g.cl);
    return 0;
}

/* One bench run; its JSON line parsed (the first stdout line starting with '{'). */
static struct cu_json *bench_op(const char *keys, bool prefill, const char *probe, const char *op,
                                const char *io)
{
    char master[128];
    snprintf(master, sizeof(master), "--master=%s", g.cl.rpc);
    const char *argv[12] = {g.bench, "master", master, "--conns=2", "--seconds=0.3", op, keys};
    int n = 7;
    if (io)
        argv[n++] = io;
    if (prefill)
        argv[n++] = "--prefill";
    if (probe)
        argv[n++] = probe;
    argv[n] = NULL;
    struct cu_run r;
    cu_run(&r, g.cl.dir, argv, NULL, RUN_MS);
    if (r.status != 0)
        fprintf(stderr, "bench: %s\n", r.err);
    assert_int_equal(r.status, 0);
    char *line = strchr(r.out, '{');
    assert_non_null(line);
    char *end = strchr(line, '\n');
    if (end)
        *end = '\0';
    struct cu_json *j = cu_json_parse(line);
    assert_non_null(j);
    cu_run_free(&r);
    return j;
}

static struct cu_json *bench(const char *keys, bool prefill, const char *probe)
{
    return bench_op(keys, prefill, probe, "--op=get", NULL);
}

static void test_reused_segment_misses_probe(void **state)
{
    (void)state;
    struct cu_json *j = bench("--keys=500", true, "--probe_hz=100");
    uint64_t v = 1;
    assert_true(cu_json_u64(j, "misses", &v));
    assert_int_equal(v, 0);
    assert_true(cu_json_u64(j, "probe_calls", &v));
    assert_true(v > 0);
    assert_non_null(cu_json_get(j, "probe_max_ms"));
    assert_non_null(cu_json_get(j, "max_ms"));
    cu_json_free(j);
    assert_true(cu_master_metric(&g.cl, "master_total_capacity_bytes") == (double)TIB);

    /* again, over twice the keys: the same segment, half the Gets miss */
    j = bench("--keys=1000", false, NULL);
    assert_true(cu_json_u64(j, "misses", &v));
    assert_true(v > 0);
    cu_json_free(j);
    assert_true(cu_master_metric(&g.cl, "master_total_capacity_bytes") == (double)TIB);
    assert_true(cu_master_metric(&g.cl, "master_segment_count") == 1);
}

/* A number member of the bench's JSON (asserted present and numeric). */
static double num(const struct cu_json *j, const char *key)
{
    const struct cu_json *v = cu_json_get(j, key);
    assert_non_null(v);
    assert_int_equal(v->type, CU_JNUM);
    return strtod(v->str, NULL);
}

static void test_io_uring(void **state)
{
    (void)state;
    /* the segment and the first 500 keys are there from the test before (one master) */
    struct cu_json *j = bench_op("--keys=1000", false, NULL, "--op=get", "--io=uring");
    const char *io = NULL;
    uint64_t v = 0;
    assert_true(cu_json_str(j, "io", &io));
    assert_string_equal(io, "uring");
    assert_true(cu_json_u64(j, "misses", &v));
    assert_true(v > 0);
    assert_true(num(j, "calls_per_s") > 0);
    assert_true(num(j, "syscalls_per_call") > 0);
    cu_json_free(j);

    double before = cu_master_metric(&g.cl, "master_allocated_bytes");
    j = bench_op("--keys=1000", false, NULL, "--op=put", "--io=uring");
    assert_true(cu_json_str(j, "io", &io));
    assert_string_equal(io, "uring");
    assert_true(num(j, "calls_per_s") > 0);
    cu_json_free(j);
    assert_true(cu_master_metric(&g.cl, "master_allocated_bytes") >= before + 4096);

    j = bench_op("--keys=1000", false, NULL, "--op=batch_get", "--io=uring");
    assert_true(num(j, "calls_per_s") > 0);
    cu_json_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reused_segment_misses_probe),
        cmocka_unit_test(test_io_uring),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
