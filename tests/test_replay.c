/*
 * test_replay.c - `mooncake_bench replay` against a real cluster: mooncake_master (ephemeral
 * ports, a 500 ms read lease) and one mooncake_client daemon with an 8 MiB DRAM segment, all on
 * loopback; the trace is generated here (documents whose prefixes requests share, plus new
 * blocks), so the cache fills, evicts and hits.
 *
 *   wrong_bytes    one request replayed under seed 1 into the empty segment, then again under
 *                  seed 2 with the same keys: the blocks the store holds are not seed 2's
 *                  bytes, so wrong bytes are counted and the run exits 1 (the check can fail)
 *   short_replay   300 requests of 64 KiB blocks, two workers: exit 0, one strictly parsed
 *                  JSON line with the DESIGN §12 fields and the replay's, 0 wrong bytes,
 *                  hits > 0 all from MEMORY, ratios in range, the LRU bound at usable DRAM
 *   bad_usage      a missing --dram_bytes is exit 2; a malformed trace is exit 1 naming the line
 *   disk_replay    a second cluster with the disk tier (--enable_offload --offload_on_evict, the
 *                  daemon with a 256 MiB --disk_path): the same trace, 0 wrong bytes, hits from
 *                  LOCAL_DISK as well as MEMORY (the tier that served each), the bound at
 *                  usable DRAM + disk
 *
 * Every process dies with the test (PR_SET_PDEATHSIG) and is stopped in teardown; the
 * temporary directory is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_util.h"

#define START_MS 20000
#define RUN_MS 120000
#define NREQ 300

static struct {
    char dir[64];
    char master_bin[600], daemon_bin[600], bench_bin[600];
    char trace[128], last[128], bad[128];
    struct cu_proc master, daemon;
    char rpc[64];
    struct cu_proc dmaster, ddaemon; /* the disk-tier cluster of test_disk_replay */
    char drpc[64];
} g;

static uint64_t xs(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* NREQ requests: each is the prefix of one of 16 documents (8..23 blocks, ids doc*1000+i) and
 * 1..4 blocks of its own (ids from 100000 up); the last request also goes alone to g.last. */
static int write_traces(void)
{
    FILE *f = fopen(g.trace, "w"), *l = fopen(g.last, "w"), *b = fopen(g.bad, "w");
    uint64_t s = 0x243f6a8885a308d3ull, fresh = 100000;
    int rc = -1;

    if (!f || !l || !b)
        goto out;
    for (int r = 0; r < NREQ; r++) {
        char line[4096];
        int n = snprintf(line, sizeof(line), "{\"timestamp\": %d, \"hash_ids\": [", r * 3);
        uint64_t doc = xs(&s) % 16, len = 8 + doc, own = 1 + xs(&s) % 4;
        for (uint64_t i = 0; i < len; i++)
            n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%llu", i ? ", " : "",
                          (unsigned long long)(doc * 1000 + i));
        for (uint64_t i = 0; i < own; i++)
            n +=
                snprintf(line + n, sizeof(line) - (size_t)n, ", %llu", (unsigned long long)fresh++);
        snprintf(line + n, sizeof(line) - (size_t)n, "]}\n");
        fputs(line, f);
        if (r == NREQ - 1)
            fputs(line, l);
    }
    fputs("{\"timestamp\": 0, \"hash_ids\": [1, 2]}\n{\"timestamp\": 1, \"hash_ids\": [1,]}\n", b);
    rc = 0;
out:
    if (f && fclose(f) != 0)
        rc = -1;
    if (l && fclose(l) != 0)
        rc = -1;
    if (b && fclose(b) != 0)
        rc = -1;
    return rc;
}

/* Starts a master (with the extra flag, or none) and one daemon (with --disk_path=disk_dir when
 * given); rpc gets the master's "127.0.0.1:PORT". */
static int start_cluster(struct cu_proc *mp, struct cu_proc *dp, char *rpc, size_t cap,
                         const char *tag, const char *disk_dir)
{
    char log[128], master[128], disk[200];
    const char *margv[] = {g.master_bin,
                           "--rpc_port=0",
                           "--rpc_address=127.0.0.1",
                           "--metrics_port=0",
                           "--metrics_host=127.0.0.1",
                           "--default_kv_lease_ttl=500",
                           "--log_level=warn",
                           disk_dir ? "--enable_offload" : NULL,
                           "--offload_on_evict",
                           NULL};
    const char *dargv[] = {g.daemon_bin,
                           master,
                           "--host=127.0.0.1",
                           "--data_port=0",
                           "--segment_size=8MiB",
                           "--log_level=warn",
                           disk_dir ? disk : NULL,
                           "--disk_capacity=256MiB",
                           NULL};
    struct mc_proc_ready ready;

    snprintf(disk, sizeof(disk), "--disk_path=%s", disk_dir ? disk_dir : "");
    snprintf(log, sizeof(log), "%s/master_%s.log", g.dir, tag);
    if (cu_spawn(mp, margv, log) != 0 ||
        cu_await_ready(mp, MC_PROC_READY_MASTER, &ready, "master", START_MS) != 0)
        return -1;
    snprintf(rpc, cap, "127.0.0.1:%u", ready.rpc_port);
    snprintf(master, sizeof(master), "--master=%s", rpc);
    snprintf(log, sizeof(log), "%s/daemon_%s.log", g.dir, tag);
    if (cu_spawn(dp, dargv, log) != 0 ||
        cu_await_ready(dp, MC_PROC_READY_DAEMON, &ready, "daemon", START_MS) != 0)
        return -1;
    return 0;
}

static int group_setup(void **state)
{
    const char *bin = getenv("MC_BIN_DIR");

    (void)state;
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.daemon.out_fd = g.dmaster.out_fd = g.ddaemon.out_fd = -1;
    if (!bin) {
        fprintf(stderr, "MC_BIN_DIR is not set\n");
        return -1;
    }
    snprintf(g.master_bin, sizeof(g.master_bin), "%s/mooncake_master", bin);
    snprintf(g.daemon_bin, sizeof(g.daemon_bin), "%s/mooncake_client", bin);
    snprintf(g.bench_bin, sizeof(g.bench_bin), "%s/mooncake_bench", bin);
    snprintf(g.dir, sizeof(g.dir), "/tmp/mc_replay.XXXXXX");
    if (!mkdtemp(g.dir)) {
        g.dir[0] = '\0';
        return -1;
    }
    snprintf(g.trace, sizeof(g.trace), "%s/trace.jsonl", g.dir);
    snprintf(g.last, sizeof(g.last), "%s/last.jsonl", g.dir);
    snprintf(g.bad, sizeof(g.bad), "%s/bad.jsonl", g.dir);
    if (write_traces() != 0 ||
        start_cluster(&g.master, &g.daemon, g.rpc, sizeof(g.rpc), "dram", NULL) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    cu_stop(&g.ddaemon, SIGTERM, 10000);
    cu_stop(&g.dmaster, SIGTERM, 10000);
    cu_stop(&g.daemon, SIGTERM, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    if (g.dir[0])
        cu_rm_rf(g.dir);
    return 0;
}

static const char *g_target; /* the master the next replay() talks to (NULL: g.rpc) */

/* Runs the replay with the given extra arguments (NULL-terminated). */
static void replay(struct cu_run *r, const char *trace, ...)
{
    const char *argv[32];
    char t[200], m[100];
    va_list ap;
    int n = 0;

    snprintf(t, sizeof(t), "--trace=%s", trace);
    snprintf(m, sizeof(m), "--master=%s", g_target ? g_target : g.rpc);
    argv[n++] = g.bench_bin;
    argv[n++] = "replay";
    argv[n++] = t;
    argv[n++] = m;
    argv[n++] = "--progress=off";
    va_start(ap, trace);
    for (const char *a = va_arg(ap, const char *); a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    cu_run(r, g.dir, argv, NULL, RUN_MS);
}

static double num(const struct cu_json *j, const char *key)
{
    const struct cu_json *m = cu_json_get(j, key);
    char *end;
    double v;

    if (!m || m->type != CU_JNUM) {
        fail_msg("JSON field %s is missing or not a number", key);
        return 0;
    }
    v = strtod(m->str, &end);
    assert_true(*end == '\0');
    return v;
}

static void test_short_replay(void **state)
{
    static const char *const fields[] = {
        "runs",
        "ms",
        "p50_ms",
        "p99_ms",
        "ops_per_s",
        "bytes_per_s",
        "ref",
        "ratio",
        "lru_dram_ratio",
        "lru_total_ratio",
        "unbounded_ratio",
        "get_p50_ms",
        "get_p99_ms",
        "put_p50_ms",
        "put_p99_ms",
        "refused_puts",
        "errors",
        "block_size",
        "lru_total_blocks",
        "elapsed_s",
    };
    struct cu_run r;
    struct cu_json *j;
    const char *s;
    uint64_t u, hits, mem, blocks;

    (void)state;
    replay(&r, g.trace, "--dram_bytes=8MiB", "--key_prefix=t/", "--seed=1", "--workers=2", NULL);
    if (r.status != 0)
        fprintf(stderr, "replay stderr:\n%s\n", r.err);
    assert_int_equal(r.status, 0);
    assert_non_null(strchr(r.out, '\n'));
    assert_null(strchr(strchr(r.out, '\n') + 1, '\n')); /* one line */
    j = cu_json_parse(r.out);
    assert_non_null(j);
    assert_true(cu_json_str(j, "bench", &s));
    assert_string_equal(s, "replay");
    assert_true(cu_json_str(j, "case", &s));
    assert_string_equal(s, "trace/64KiB");
    assert_true(cu_json_str(j, "error_names", &s));
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        assert_true(num(j, fields[i]) >= 0);
    assert_true(cu_json_u64(j, "requests", &u));
    assert_int_equal(u, NREQ);
    assert_true(cu_json_u64(j, "wrong_bytes", &u));
    assert_int_equal(u, 0);
    assert_true(cu_json_u64(j, "hits", &hits));
    assert_true(cu_json_u64(j, "mem_hits", &mem));
    assert_true(cu_json_u64(j, "disk_hits", &u));
    assert_int_equal(u, 0);
    assert_int_equal(mem, hits);
    assert_true(hits > 0);
    /* DRAM only: every Get with a hit is an all-MEMORY one, and their blocks hold the hits */
    assert_true(cu_json_u64(j, "get_mem_n", &u));
    assert_true(u > 0 && u <= NREQ);
    assert_true(cu_json_u64(j, "get_mem_blocks", &u));
    assert_true(u >= hits);
    assert_true(num(j, "get_mem_p50_ms") > 0);
    assert_true(num(j, "get_mem_p99_ms") >= num(j, "get_mem_p50_ms"));
    assert_true(cu_json_u64(j, "get_disk_n", &u));
    assert_int_equal(u, 0);
    assert_true(cu_json_u64(j, "get_mixed_n", &u));
    assert_int_equal(u, 0);
    assert_true(cu_json_u64(j, "blocks", &blocks));
    assert_true(blocks > hits);
    assert_true(num(j, "hit_ratio") > 0 && num(j, "hit_ratio") <= 1);
    double d = num(j, "hit_ratio") - (double)hits / (double)blocks;
    assert_true(d < 1e-5 && d > -1e-5);
    assert_true(num(j, "lru_dram_ratio") <= num(j, "unbounded_ratio"));
    assert_true(num(j, "unbounded_ratio") < 1);
    /* 8 MiB x 0.90 of 64 KiB blocks */
    assert_true(cu_json_u64(j, "lru_dram_blocks", &u));
    assert_int_equal(u, 115);
    assert_true(num(j, "runs") == NREQ);
    assert_true(num(j, "workers") == 2);
    assert_non_null(strstr(r.err, "exact LRU, usable DRAM"));
    cu_json_free(j);
    cu_run_free(&r);
}

static void test_wrong_bytes(void **state)
{
    struct cu_run r;
    struct cu_json *j;
    uint64_t u;

    (void)state;
    /* one request written under seed 1 into the empty segment (at most 27 of 128 blocks) ... */
    replay(&r, g.last, "--dram_bytes=8MiB", "--key_prefix=w/", "--seed=1", NULL);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    /* ... and read back under seed 2: the same keys, other bytes */
    replay(&r, g.last, "--dram_bytes=8MiB", "--key_prefix=w/", "--seed=2", NULL);
    if (r.status != 1)
        fprintf(stderr, "replay stderr:\n%s\n", r.err);
    assert_int_equal(r.status, 1);
    j = cu_json_parse(r.out);
    assert_non_null(j);
    assert_true(cu_json_u64(j, "wrong_bytes", &u));
    assert_true(u > 0);
    assert_true(cu_json_u64(j, "hits", &u));
    assert_int_equal(u, 0); /* a block with wrong bytes is never a hit */
    assert_non_null(strstr(r.err, "wrong bytes"));
    cu_json_free(j);
    cu_run_free(&r);
}

static void test_bad_usage(void **state)
{
    struct cu_run r;

    (void)state;
    replay(&r, g.trace, NULL);
    assert_int_equal(r.status, 2);
    cu_run_free(&r);
    replay(&r, g.bad, "--dram_bytes=8MiB", NULL);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "line 2"));
    assert_string_equal(r.out, "");
    cu_run_free(&r);
}

static void test_disk_replay(void **state)
{
    struct cu_run r;
    struct cu_json *j;
    uint64_t hits, mem, disk, u;
    char dir[128];

    (void)state;
    snprintf(dir, sizeof(dir), "%s/disk", g.dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(start_cluster(&g.dmaster, &g.ddaemon, g.drpc, sizeof(g.drpc), "disk", dir), 0);
    g_target = g.drpc;
    replay(&r, g.trace, "--dram_bytes=8MiB", "--disk_bytes=256MiB", "--key_prefix=d/",
           "--label=disk", NULL);
    g_target = NULL;
    if (r.status != 0)
        fprintf(stderr, "replay stderr:\n%s\n", r.err);
    assert_int_equal(r.status, 0);
    j = cu_json_parse(r.out);
    assert_non_null(j);
    assert_true(cu_json_u64(j, "wrong_bytes", &u));
    assert_int_equal(u, 0);
    assert_true(cu_json_u64(j, "hits", &hits));
    assert_true(cu_json_u64(j, "mem_hits", &mem));
    assert_true(cu_json_u64(j, "disk_hits", &disk));
    assert_int_equal(mem + disk, hits);
    assert_true(disk > 0); /* blocks evicted from the 8 MiB of DRAM were read from the disk */
    /* Gets by the tiers of their hits: some read disk blocks, and the blocks they asked for
     * hold every hit of the tiers they were classed by */
    uint64_t nd = 0, nx = 0, bm = 0, bd = 0, bx = 0;
    assert_true(cu_json_u64(j, "get_disk_n", &nd));
    assert_true(cu_json_u64(j, "get_mixed_n", &nx));
    assert_true(nd + nx > 0);
    assert_true(cu_json_u64(j, "get_mem_blocks", &bm));
    assert_true(cu_json_u64(j, "get_disk_blocks", &bd));
    assert_true(cu_json_u64(j, "get_mixed_blocks", &bx));
    assert_true(bd + bx >= disk);
    assert_true(bm + bd + bx >= hits);
    assert_true(num(j, "get_disk_p50_ms") > 0 || num(j, "get_mixed_p50_ms") > 0);
    /* 115 DRAM blocks + floor(256 MiB x 0.90 / 68 KiB) = 115 + 3469 */
    assert_true(cu_json_u64(j, "lru_total_blocks", &u));
    assert_int_equal(u, 115 + 3469);
    assert_true(num(j, "lru_total_ratio") >= num(j, "lru_dram_ratio"));
    assert_true(num(j, "ref") == num(j, "lru_total_ratio"));
    assert_non_null(strstr(r.err, "exact LRU, DRAM + disk"));
    cu_json_free(j);
    cu_run_free(&r);
    assert_int_equal(cu_stop(&g.ddaemon, SIGTERM, 10000), 0);
    assert_int_equal(cu_stop(&g.dmaster, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_bytes), /* first: nothing is evicted from an empty segment */
        cmocka_unit_test(test_short_replay),
        cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_disk_replay),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
