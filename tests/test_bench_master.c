/*
 * test_bench_master.c - `mooncake_bench master` against a real mooncake_master on loopback:
 *   - two invocations (same --bench_id, the default) mount one fake segment: the master's
 *     capacity stays 1 TiB after the second (each used to add another 1 TiB);
 *   - a Get run over more keys than were prefilled counts the missing ones as misses and exits
 *     0 (it used to fail the run);
 *   - --probe_hz reports the open-loop probe's calls and max latency;
 *   - the io_uring loop with hand-written bodies (default) and the epoll loop with protobuf-c
 *     (--io=epoll --encode=pb) both count Get hits and misses and complete Puts.
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

/* One bench run with up to three extra flags (NULL: none); its JSON line parsed (the first
 * stdout line starting with '{'). */
static struct cu_json *bench_with(const char *op, const char *keys, const char *x1, const char *x2,
                                  const char *x3)
{
    char master[128];
    snprintf(master, sizeof(master), "--master=%s", g.cl.rpc);
    const char *argv[12] = {g.bench, "master", master, "--conns=2", "--seconds=0.3", op, keys};
    int n = 7;
    const char *x[] = {x1, x2, x3};
    for (int i = 0; i < 3; i++)
        if (x[i])
            argv[n++] = x[i];
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
    return bench_with("--op=get", keys, prefill ? "--prefill" : NULL, probe, NULL);
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

static double ops_per_s(const struct cu_json *j)
{
    const struct cu_json *m = cu_json_get(j, "ops_per_s");
    assert_non_null(m);
    assert_int_equal(m->type, CU_JNUM);
    return strtod(m->str, NULL);
}

/* The io_uring loop with hand-written bodies (the default) and the old epoll loop with the
 * protobuf-c packer both drive Gets whose replies are counted (hits as objects, keys beyond the
 * prefill as misses) and Puts that complete; the JSON says which loop and encoder ran. */
static void test_loops_and_encoders(void **state)
{
    (void)state;
    static const char *const io[][2] = {{NULL, NULL}, {"--io=epoll", "--encode=pb"}};
    static const char *const want[][2] = {{"uring", "hand"}, {"epoll", "pb"}};
    cu_json_free(bench("--keys=500", true, NULL)); /* Gets over 1000 keys: some miss */
    for (int i = 0; i < 2; i++) {
        struct cu_json *j = bench_with("--op=get", "--keys=1000", io[i][0], io[i][1], NULL);
        const char *s = NULL;
        uint64_t v = 0;
        assert_true(cu_json_str(j, "io", &s));
        assert_string_equal(s, want[i][0]);
        assert_true(cu_json_str(j, "encode", &s));
        assert_string_equal(s, want[i][1]);
        assert_true(cu_json_u64(j, "misses", &v));
        assert_true(v > 0);
        assert_true(ops_per_s(j) > 0);
        cu_json_free(j);

        j = bench_with("--op=put", "--keys=1000", io[i][0], io[i][1], NULL);
        assert_true(cu_json_str(j, "io", &s));
        assert_string_equal(s, want[i][0]);
        assert_true(cu_json_u64(j, "put_refused", &v));
        assert_int_equal(v, 0);
        assert_true(ops_per_s(j) > 0);
        cu_json_free(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reused_segment_misses_probe),
        cmocka_unit_test(test_loops_and_encoders),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
