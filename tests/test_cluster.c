/*
 * test_cluster.c - the whole system as separate processes on loopback (issue 9).
 *
 * One cluster for the whole group: mooncake_master (ephemeral ports, --client_ttl=3s), two
 * mooncake_client daemons A and B (a DRAM segment each), mooncake_cli runs, and an in-test
 * libmooncake_client that contributes no DRAM, so every byte it moves crosses a process
 * boundary to a daemon's peer server. The tests run in order and build on each other:
 *
 *   roundtrip       values of 1 B .. 64 MiB: put by the CLI, read by the in-test client, and the
 *                   other way round, placed on A and on B in turn; byte-equal; rm then absent
 *   json            stat --json / segments --json parsed strictly and checked field by field
 *                   against the daemons' READY endpoints; stat takes no lease, a get does
 *   exit_codes      0 / 1 (not found) / 2 (usage) / 3 (other, error name on stderr)
 *   daemon_killed   B gets SIGKILL: its objects fail cleanly at once (never wrong bytes); after
 *                   the TTL its segment is gone, its objects are OBJECT_NOT_FOUND, and new
 *                   puts (even ones preferring B) land on A
 *   master_restart  the master gets SIGKILL and restarts on the same port: A re-mounts by
 *                   itself, and puts and gets work again through both kinds of client
 *   sigterm         A gets SIGTERM: exit status 0 and its segment is unmounted at once
 *
 * Everything is polled with deadlines; every process dies with the test (PR_SET_PDEATHSIG) and
 * is stopped in teardown; the temporary directory is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_data.h"
#include "cluster_util.h"
#include "common/log.h"
#include "mooncake/client.h"

#define SEG_SIZE (200ull << 20)
#define SEG_SIZE_FLAG "--segment_size=200MiB"
#define START_MS 20000
#define CLI_MS 60000
#define TTL_WAIT_MS 20000

static struct {
    struct cu_cluster cl; /* binaries, directory, the master's addresses */
    char bin[512];
    struct cu_proc master, a, b;
    char ep_a[256], ep_b[256];
    int metrics_a; /* daemon A's /metrics port */
    struct mc_client *client;
    uint64_t seed;
} g;

/* ---- helpers ----------------------------------------------------------------------------- */

static int start_master(int rpc_port)
{
    static const char *const flags[] = {"--client_ttl=3", "--log_level=warn", NULL};
    return cu_start_master(&g.cl, &g.master, rpc_port, flags, START_MS);
}

/* Starts a daemon; metrics_port > 0 also serves /metrics there. */
static int start_daemon(struct cu_proc *p, const char *name, int metrics_port, char *ep, size_t cap)
{
    char log[64], mport[64];
    const char *flags[] = {SEG_SIZE_FLAG, "--log_level=warn", mport, NULL};

    snprintf(mport, sizeof(mport), "--metrics_port=%d", metrics_port > 0 ? metrics_port : 0);
    snprintf(log, sizeof(log), "daemon_%s", name);
    return cu_start_daemon(&g.cl, p, log, flags, ep, cap, START_MS);
}

/* Runs mooncake_cli --master=<rpc> ARGS... (NULL-terminated). */
static void cli(struct cu_run *r, const char *in_path, ...)
{
    const char *argv[32];
    char master[128];
    va_list ap;
    int n = 0;

    snprintf(master, sizeof(master), "--master=%s", g.cl.rpc);
    argv[n++] = g.cl.cli_bin;
    argv[n++] = master;
    va_start(ap, in_path);
    for (const char *a = va_arg(ap, const char *); a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    cu_run(r, g.cl.dir, argv, in_path, CLI_MS);
}

static void fill_random(uint8_t *buf, size_t len)
{
    cu_fill(buf, len, g.seed);
    g.seed += 0x9e3779b97f4a7c15ull; /* the next value's bytes differ */
}

static int put_on(const char *key, const void *buf, size_t len, const char *segment)
{
    struct mc_replicate_config rc;
    const char *pref[1] = {segment};

    mc_replicate_config_init(&rc);
    if (segment) {
        rc.preferred_segments = pref;
        rc.preferred_segments_count = 1;
    }
    return mc_put(g.client, key, buf, len, &rc);
}

/* stat KEY --json: the endpoint of its only COMPLETE replica (copied into ep). */
static void stat_endpoint(const char *key, char *ep, size_t cap)
{
    struct cu_run r;
    struct cu_json *j;
    const struct cu_json *reps;
    const char *s = NULL;

    cli(&r, NULL, "stat", key, "--json", NULL);
    assert_int_equal(r.status, 0);
    j = cu_json_parse(r.out);
    assert_non_null(j);
    reps = cu_json_get(j, "replicas");
    assert_non_null(reps);
    assert_int_equal(reps->type, CU_JARR);
    assert_int_equal(reps->n, 1);
    assert_true(cu_json_str(&reps->items[0], "endpoint", &s));
    snprintf(ep, cap, "%s", s);
    cu_json_free(j);
    cu_run_free(&r);
}

/* segments --json, parsed (caller frees). */
static struct cu_json *segments_json(void)
{
    struct cu_run r;
    struct cu_json *j;

    cli(&r, NULL, "segments", "--json", NULL);
    assert_int_equal(r.status, 0);
    j = cu_json_parse(r.out);
    if (!j)
        fprintf(stderr, "segments --json gave: %s\n", r.out);
    assert_non_null(j);
    assert_int_equal(j->type, CU_JARR);
    cu_run_free(&r);
    return j;
}

static bool segments_has(const struct cu_json *segs, const char *ep)
{
    for (size_t i = 0; i < segs->n; i++) {
        const char *e = NULL;
        if (cu_json_str(&segs->items[i], "endpoint", &e) && !strcmp(e, ep))
            return true;
    }
    return false;
}

/* ---- setup / teardown -------------------------------------------------------------------- */

static int group_setup(void **state)
{
    const char *bin = getenv("MC_BIN_DIR");

    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.a.out_fd = g.b.out_fd = -1;
    g.seed = 0x2545f4914f6cdd1dull;
    if (!bin) {
        fprintf(stderr, "MC_BIN_DIR is not set\n");
        return -1;
    }
    snprintf(g.bin, sizeof(g.bin), "%s", bin);
    if (cu_cluster_init(&g.cl, "mc_cluster") != 0)
        return -1;
    if (start_master(0) != 0 || (g.metrics_a = cu_free_port()) <= 0 ||
        start_daemon(&g.a, "A", g.metrics_a, g.ep_a, sizeof(g.ep_a)) != 0 ||
        start_daemon(&g.b, "B", 0, g.ep_b, sizeof(g.ep_b)) != 0)
        return -1;
    if (cu_open_client(&g.cl, 0, NULL, 0, 0, &g.client) != 0)
        return -1;
    (void)state;
    return 0;
}

static int group_teardown(void **state)
{
    mc_client_close(g.client);
    g.client = NULL;
    cu_stop(&g.a, SIGTERM, 10000);
    cu_stop(&g.b, SIGTERM, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    cu_cluster_destroy(&g.cl);
    (void)state;
    return 0;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_roundtrip(void **state)
{
    static const size_t sizes[] = {1, 4095, 4096, 65537, (1u << 20) + 7, 16u << 20, 64u << 20};
    char in_path[128], out_path[128], key[64], ep[128];
    struct cu_run r;

    (void)state;
    snprintf(in_path, sizeof(in_path), "%s/value.in", g.cl.dir);
    snprintf(out_path, sizeof(out_path), "%s/value.out", g.cl.dir);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t len = sizes[i], got_len = 0;
        const char *seg = (i & 1) ? g.ep_b : g.ep_a;
        uint8_t *src = malloc(len), *dst = malloc(len + 1);
        char *got;
        int64_t n;
        assert_non_null(src);
        assert_non_null(dst);

        /* CLI put (another process) -> in-test client get. */
        fill_random(src, len);
        assert_int_equal(cu_write_file(in_path, src, len), 0);
        snprintf(key, sizeof(key), "rt-cli-%zu", len);
        cli(&r, NULL, "put", key, in_path, NULL);
        if (r.status != 0)
            fprintf(stderr, "put %s: %s\n", key, r.err);
        assert_int_equal(r.status, 0);
        cu_run_free(&r);
        stat_endpoint(key, ep, sizeof(ep));
        assert_true(!strcmp(ep, g.ep_a) || !strcmp(ep, g.ep_b));
        memset(dst, 0xa5, len + 1);
        n = mc_get(g.client, key, dst, len + 1);
        assert_int_equal(n, (int64_t)len);
        assert_memory_equal(dst, src, len);

        /* In-test client put on A or B in turn -> CLI get (stdin path for the put above was a
         * file; here the value comes back through -o FILE). */
        fill_random(src, len);
        snprintf(key, sizeof(key), "rt-lib-%zu", len);
        assert_int_equal(put_on(key, src, len, seg), 0);
        stat_endpoint(key, ep, sizeof(ep));
        assert_string_equal(ep, seg);
        cli(&r, NULL, "get", key, "-o", out_path, NULL);
        if (r.status != 0)
            fprintf(stderr, "get %s: %s\n", key, r.err);
        assert_int_equal(r.status, 0);
        cu_run_free(&r);
        got = cu_slurp(out_path, &got_len);
        assert_non_null(got);
        assert_int_equal(got_len, len);
        assert_memory_equal(got, src, len);
        free(got);

        /* rm through the CLI (forced: the gets above hold leases), then absent everywhere. */
        cli(&r, NULL, "rm", key, "--force", NULL);
        assert_int_equal(r.status, 0);
        cu_run_free(&r);
        snprintf(key, sizeof(key), "rt-cli-%zu", len);
        cli(&r, NULL, "rm", key, "--force", NULL);
        assert_int_equal(r.status, 0);
        cu_run_free(&r);
        assert_int_equal(mc_get(g.client, key, dst, len), MC_ERR_OBJECT_NOT_FOUND);
        free(src);
        free(dst);
    }

    /* A small value through stdin and back through stdout. */
    assert_int_equal(cu_write_file(in_path, "hello, stdin\n", 13), 0);
    cli(&r, in_path, "put", "rt-stdin", "-", NULL);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    cli(&r, NULL, "get", "rt-stdin", NULL);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.out, "hello, stdin\n");
    cu_run_free(&r);
}

static void check_segment_entry(const struct cu_json *s, const char *ep)
{
    const char *id = NULL, *name = NULL, *status = NULL, *owner = NULL, *e = NULL;
    uint64_t size = 0, used = 0;

    assert_int_equal(s->type, CU_JOBJ);
    assert_true(cu_json_str(s, "id", &id));
    assert_int_equal(strlen(id), 32);
    assert_int_equal(strspn(id, "0123456789abcdef"), 32);
    assert_true(cu_json_str(s, "name", &name));
    assert_true(cu_json_str(s, "endpoint", &e));
    assert_string_equal(e, ep); /* byte-identical to the daemon's READY line */
    assert_string_equal(name, ep);
    assert_true(cu_json_u64(s, "size", &size));
    assert_int_equal(size, SEG_SIZE);
    assert_true(cu_json_u64(s, "used", &used));
    assert_true(used <= size);
    assert_true(cu_json_str(s, "status", &status));
    assert_string_equal(status, "OK");
    assert_true(cu_json_str(s, "owner", &owner));
    assert_int_equal(strlen(owner), 32);
    assert_string_not_equal(owner, "00000000000000000000000000000000");
}

static void test_json(void **state)
{
    static const size_t len = 12345;
    uint8_t *buf = malloc(len);
    struct cu_run r;
    struct cu_json *j, *segs;
    const struct cu_json *reps, *rep, *seg_a = NULL, *seg_b = NULL;
    const char *s = NULL;
    uint64_t u = 0, version = 0, used_a = 0;
    int64_t lease = -1;

    (void)state;
    assert_non_null(buf);
    fill_random(buf, len);
    assert_int_equal(put_on("json-key", buf, len, g.ep_a), 0);

    /* stat --json: every field, and no lease taken by looking. */
    for (int round = 0; round < 2; round++) {
        cli(&r, NULL, "stat", "json-key", "--json", NULL);
        assert_int_equal(r.status, 0);
        j = cu_json_parse(r.out);
        if (!j)
            fprintf(stderr, "stat --json gave: %s\n", r.out);
        assert_non_null(j);
        assert_int_equal(j->type, CU_JOBJ);
        assert_true(cu_json_str(j, "key", &s));
        assert_string_equal(s, "json-key");
        assert_true(cu_json_u64(j, "size", &u));
        assert_int_equal(u, len);
        assert_true(cu_json_u64(j, "version", &u));
        assert_true(u > 0);
        assert_true(round == 0 || u == version);
        version = u;
        assert_true(cu_json_i64(j, "lease_ms_left", &lease));
        assert_int_equal(lease, 0); /* a put grants no lease, and stat takes none */
        reps = cu_json_get(j, "replicas");
        assert_non_null(reps);
        assert_int_equal(reps->type, CU_JARR);
        assert_int_equal(reps->n, 1);
        rep = &reps->items[0];
        assert_true(cu_json_u64(rep, "id", &u));
        assert_true(cu_json_str(rep, "type", &s));
        assert_string_equal(s, "MEMORY");
        assert_true(cu_json_str(rep, "status", &s));
        assert_string_equal(s, "COMPLETE");
        assert_true(cu_json_str(rep, "segment", &s));
        assert_string_equal(s, g.ep_a);
        assert_true(cu_json_u64(rep, "offset", &u));
        assert_true(u + len <= SEG_SIZE);
        assert_true(cu_json_str(rep, "endpoint", &s));
        assert_string_equal(s, g.ep_a);
        assert_true(cu_json_str(rep, "holder", &s));
        assert_string_equal(s, "");
        assert_true(cu_json_u64(rep, "refcnt", &u));
        assert_int_equal(u, 0);    /* nothing pins it */
        assert_int_equal(j->n, 5); /* exactly the documented members */
        cu_json_free(j);
        cu_run_free(&r);
    }

    /* A real get takes the lease; stat shows it (default 10 s). */
    assert_int_equal(mc_get(g.client, "json-key", buf, len), (int64_t)len);
    cli(&r, NULL, "stat", "json-key", "--json", "--all", NULL);
    assert_int_equal(r.status, 0);
    j = cu_json_parse(r.out);
    assert_non_null(j);
    assert_true(cu_json_i64(j, "lease_ms_left", &lease));
    assert_true(lease > 0 && lease <= 10000);
    cu_json_free(j);
    cu_run_free(&r);

    /* segments --json: both daemons, fields checked, A's usage covers the object. */
    segs = segments_json();
    assert_int_equal(segs->n, 2);
    for (size_t i = 0; i < segs->n; i++) {
        const char *e = NULL;
        assert_true(cu_json_str(&segs->items[i], "endpoint", &e));
        if (!strcmp(e, g.ep_a))
            seg_a = &segs->items[i];
        else if (!strcmp(e, g.ep_b))
            seg_b = &segs->items[i];
    }
    assert_non_null(seg_a);
    assert_non_null(seg_b);
    check_segment_entry(seg_a, g.ep_a);
    check_segment_entry(seg_b, g.ep_b);
    assert_true(cu_json_u64(seg_a, "used", &used_a));
    assert_true(used_a >= len);
    cu_json_free(segs);

    /* The tables for people carry the same facts. */
    cli(&r, NULL, "segments", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, g.ep_a));
    assert_non_null(strstr(r.out, g.ep_b));
    assert_non_null(strstr(r.out, "ENDPOINT"));
    cu_run_free(&r);
    cli(&r, NULL, "stat", "json-key", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "json-key"));
    assert_non_null(strstr(r.out, "12345"));
    assert_non_null(strstr(r.out, "MEMORY"));
    assert_non_null(strstr(r.out, g.ep_a));
    cu_run_free(&r);

    /* metrics: Prometheus text from an HTTP port: the master's (well-formed lines), and
     * daemon A's, whose values the test knows. */
    {
        char opt[128], *line;
        snprintf(opt, sizeof(opt), "--metrics=%s", g.cl.metrics);
        cli(&r, NULL, "metrics", opt, NULL);
        assert_int_equal(r.status, 0);
        for (line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
            char name[256];
            double v;
            assert_true(line[0] == '#' || sscanf(line, "%255s %lf", name, &v) == 2);
        }
        cu_run_free(&r);

        snprintf(opt, sizeof(opt), "--metrics_url=http://127.0.0.1:%d/metrics", g.metrics_a);
        cli(&r, NULL, "metrics", opt, NULL);
        assert_int_equal(r.status, 0);
        assert_non_null(strstr(r.out, "\nmooncake_client_segment_bytes 209715200\n"));
        cu_run_free(&r);
    }
    free(buf);
}

/* A counter of the master's /metrics (read through `mooncake_cli metrics`). */
static double master_metric(const char *name)
{
    double v = cu_master_metric(&g.cl, name);
    assert_true(v >= 0);
    return v;
}

/* `mooncake_cli get` is one read: one GetReplicaList (one access for eviction order and the
 * promotion count), its buffer sized from that answer (mc_get_alloc), no size query first. */
static void test_cli_get_one_access(void **state)
{
    static const size_t len = 300000;
    char out_path[128];
    uint8_t *src = malloc(len);
    char *got;
    size_t got_len = 0;
    struct cu_run r;

    (void)state;
    assert_non_null(src);
    fill_random(src, len);
    assert_int_equal(put_on("one-access", src, len, g.ep_a), 0);
    snprintf(out_path, sizeof(out_path), "%s/one-access.out", g.cl.dir);
    double before = master_metric("master_get_replica_list_requests_total");
    cli(&r, NULL, "get", "one-access", "-o", out_path, NULL);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    double after = master_metric("master_get_replica_list_requests_total");
    assert_true(after - before == 1.0);
    got = cu_slurp(out_path, &got_len);
    assert_non_null(got);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, src, len);
    free(got);
    free(src);
    cli(&r, NULL, "rm", "one-access", "--force", NULL);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
}

static void expect_exit(int status, const char *err_substr, ...)
{
    const char *argv[16];
    struct cu_run r;
    va_list ap;
    int n = 0;

    argv[n++] = g.cl.cli_bin;
    va_start(ap, err_substr);
    for (const char *a = va_arg(ap, const char *); a && n < 15; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    cu_run(&r, g.cl.dir, argv, NULL, CLI_MS);
    if (r.status != status || (err_substr && !strstr(r.err, err_substr)))
        fprintf(stderr, "%s %s: status %d, stderr: %s\n", argv[1], n > 2 ? argv[2] : "", r.status,
                r.err);
    assert_int_equal(r.status, status);
    if (err_substr)
        assert_non_null(strstr(r.err, err_substr));
    cu_run_free(&r);
}

static void test_exit_codes(void **state)
{
    char m[128], dead_metrics[64], bad_file[160];
    uint8_t v[100] = {1, 2, 3};

    (void)state;
    snprintf(m, sizeof(m), "--master=%s", g.cl.rpc);
    snprintf(bad_file, sizeof(bad_file), "%s/no/such/file", g.cl.dir);
    snprintf(dead_metrics, sizeof(dead_metrics), "--metrics=%s", "127.0.0.1:1");

    /* 0 */
    expect_exit(0, NULL, "--help", NULL);
    assert_int_equal(put_on("exit-key", v, sizeof(v), NULL), 0);
    expect_exit(0, NULL, m, "exist", "exit-key", NULL);
    /* 1: not found */
    expect_exit(1, "OBJECT_NOT_FOUND", m, "get", "no-such-key", NULL);
    expect_exit(1, NULL, m, "exist", "no-such-key", NULL);
    expect_exit(1, "OBJECT_NOT_FOUND", m, "stat", "no-such-key", "--json", NULL);
    expect_exit(1, "OBJECT_NOT_FOUND", m, "rm", "no-such-key", NULL);
    /* 2: usage */
    expect_exit(2, NULL, NULL);
    expect_exit(2, NULL, m, NULL);
    expect_exit(2, NULL, m, "frobnicate", NULL);
    expect_exit(2, NULL, m, "--bogus", "segments", NULL);
    expect_exit(2, NULL, m, "get", NULL);
    expect_exit(2, NULL, m, "get", "a", "b", NULL);
    expect_exit(2, NULL, m, "stat", "exit-key", "--force", NULL);
    expect_exit(2, NULL, m, "segments", "--all", NULL);
    expect_exit(2, NULL, m, "get", "exit-key", "-o", NULL);
    expect_exit(2, NULL, m, "--timeout=abc", "segments", NULL);
    expect_exit(2, NULL, "--master=no-port", "segments", NULL);
    expect_exit(2, NULL, "--master=127.0.0.1:99999", "get", "k", NULL);
    /* 3: other errors, named on stderr */
    expect_exit(3, "RPC_FAIL", "--master=127.0.0.1:1", "segments", NULL);
    expect_exit(3, "RPC_FAIL", "--master=127.0.0.1:1", "get", "k", NULL);
    expect_exit(3, "FILE_NOT_FOUND", m, "put", "k", bad_file, NULL);
    expect_exit(3, "RPC_FAIL", m, "metrics", dead_metrics, NULL);
    /* A leased object resists a plain rm (3, OBJECT_HAS_LEASE) but not --force. */
    assert_int_equal(mc_get(g.client, "exit-key", v, sizeof(v)), (int64_t)sizeof(v));
    expect_exit(3, "OBJECT_HAS_LEASE", m, "rm", "exit-key", NULL);
    expect_exit(0, NULL, m, "rm", "exit-key", "--force", NULL);
    expect_exit(1, NULL, m, "exist", "exit-key", NULL);
}

/* put --value, --version (cli and bench), and the warning when a put finds its key already
 * there (the value is kept, exit 0, stderr says so; a first put is silent). */
static void test_cli_value_version_existing(void **state)
{
    char out[64], bench[600];
    struct cu_run r;
    (void)state;

    cli(&r, NULL, "--version", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "mooncake_cli version "));
    cu_run_free(&r);
    snprintf(bench, sizeof(bench), "%s/mooncake_bench", g.bin);
    const char *bargv[] = {bench, "--version", NULL};
    cu_run(&r, g.cl.dir, bargv, NULL, CLI_MS);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "mooncake_bench version "));
    cu_run_free(&r);

    cli(&r, NULL, "put", "val-key", "--value", "hello value", NULL);
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.err, "already exists"));
    cu_run_free(&r);
    assert_int_equal(mc_get(g.client, "val-key", out, sizeof(out)), 11);
    assert_memory_equal(out, "hello value", 11);

    cli(&r, NULL, "put", "val-key", "--value=other", NULL);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.err, "warning: key 'val-key' already exists"));
    cu_run_free(&r);
    assert_int_equal(mc_get(g.client, "val-key", out, sizeof(out)), 11);
    assert_memory_equal(out, "hello value", 11);

    expect_exit(2, "not both", "--master=127.0.0.1:1", "put", "k", "file", "--value", "v", NULL);
    expect_exit(2, NULL, "get", "val-key", "--value", "v", NULL);
    cli(&r, NULL, "rm", "val-key", "--force", NULL);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
}

/* Polls path for needle until deadline_ms; true when found. */
static bool log_has(const char *path, const char *needle, int deadline_ms)
{
    uint64_t end = cu_now_ms() + (uint64_t)deadline_ms;
    for (;;) {
        char *text = cu_slurp(path, NULL);
        bool found = text && strstr(text, needle);
        free(text);
        if (found || cu_now_ms() >= end)
            return found;
        cu_sleep_ms(20);
    }
}

static int spawn_waiting_daemon(struct cu_proc *p, int port, const char *wait, const char *log)
{
    char master[64], w[64];
    const char *argv[] = {g.cl.daemon_bin,
                          master,
                          "--host=127.0.0.1",
                          "--segment_size=16MiB",
                          "--log_level=warn",
                          w,
                          NULL};
    snprintf(master, sizeof(master), "--master=127.0.0.1:%d", port);
    snprintf(w, sizeof(w), "--master_wait=%s", wait);
    return cu_spawn(p, argv, log);
}

/* mooncake_client started before its master keeps retrying (logged) and serves once the master
 * is up; the wait is bounded by --master_wait (then exit 1) and ended by SIGTERM (exit 0). */
static void test_daemon_waits_for_master(void **state)
{
    struct cu_proc d = {0}, m = {0};
    char log[128], mlog[128], line[256], port_flag[32];
    int port = cu_free_port();
    (void)state;
    assert_true(port > 0);
    snprintf(log, sizeof(log), "%s/daemon_wait.log", g.cl.dir);
    snprintf(mlog, sizeof(mlog), "%s/master_wait.log", g.cl.dir);

    /* 1. the master comes later: READY after it */
    assert_int_equal(spawn_waiting_daemon(&d, port, "60s", log), 0);
    assert_true(log_has(log, "master unreachable; retrying", START_MS));
    snprintf(port_flag, sizeof(port_flag), "--rpc_port=%d", port);
    const char *margv[] = {g.cl.master_bin,
                           port_flag,
                           "--rpc_address=127.0.0.1",
                           "--metrics_port=0",
                           "--metrics_host=127.0.0.1",
                           "--log_level=warn",
                           NULL};
    assert_int_equal(cu_spawn(&m, margv, mlog), 0);
    struct mc_proc_ready ready;
    assert_int_equal(cu_await_ready(&m, MC_PROC_READY_MASTER, &ready, "master", START_MS), 0);
    assert_int_equal(cu_await_ready(&d, MC_PROC_READY_DAEMON, &ready, "daemon", START_MS), 0);
    assert_int_equal(cu_stop(&d, SIGTERM, 5000), 0);
    assert_int_equal(cu_stop(&m, SIGTERM, 5000), 0);

    /* 2. bounded: no master within --master_wait, exit 1 */
    uint64_t t0 = cu_now_ms();
    assert_int_equal(spawn_waiting_daemon(&d, port, "300ms", log), 0);
    assert_int_equal(cu_read_line(&d, line, sizeof(line), START_MS), -1); /* EOF: it exited */
    assert_true(cu_now_ms() - t0 < (uint64_t)START_MS);
    assert_int_equal(cu_stop(&d, SIGTERM, 5000), 1);

    /* 3. SIGTERM while waiting: exit 0 at once */
    assert_int_equal(truncate(log, 0), 0);
    assert_int_equal(spawn_waiting_daemon(&d, port, "60s", log), 0);
    assert_true(log_has(log, "master unreachable; retrying", START_MS));
    assert_int_equal(cu_stop(&d, SIGTERM, 5000), 0);
}

static void test_daemon_killed(void **state)
{
    enum { NKEYS = 4, LEN = 300000 };
    uint8_t *vals[NKEYS], *buf = malloc(LEN);
    char key[32], ep[128];
    struct cu_json *segs;
    uint64_t deadline;
    bool gone = false;
    struct cu_run r;

    (void)state;
    assert_non_null(buf);
    for (int i = 0; i < NKEYS; i++) {
        vals[i] = malloc(LEN);
        assert_non_null(vals[i]);
        fill_random(vals[i], LEN);
        snprintf(key, sizeof(key), "dead-%d", i);
        assert_int_equal(put_on(key, vals[i], LEN, g.ep_b), 0);
        stat_endpoint(key, ep, sizeof(ep));
        assert_string_equal(ep, g.ep_b);
    }
    assert_int_equal(cu_stop(&g.b, SIGKILL, 5000), 128 + SIGKILL);

    /* Before the TTL: the master still lists B's replicas; reading them fails, never with
     * wrong bytes. */
    for (int i = 0; i < NKEYS; i++) {
        int64_t n;
        snprintf(key, sizeof(key), "dead-%d", i);
        memset(buf, 0, LEN);
        n = mc_get(g.client, key, buf, LEN);
        assert_true(n < 0);
    }

    /* After the TTL (3 s: above one missed ping of the 1 s period, so a loaded CI machine does not
     * expire the live daemon A too): B's segment is gone. */
    deadline = cu_now_ms() + TTL_WAIT_MS;
    while (!gone && cu_now_ms() < deadline) {
        segs = segments_json();
        gone = !segments_has(segs, g.ep_b);
        if (gone) {
            assert_int_equal(segs->n, 1);
            assert_true(segments_has(segs, g.ep_a));
        }
        cu_json_free(segs);
        if (!gone)
            cu_sleep_ms(200);
    }
    assert_true(gone);
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "dead-%d", i);
        assert_int_equal(mc_get(g.client, key, buf, LEN), MC_ERR_OBJECT_NOT_FOUND);
    }
    cli(&r, NULL, "get", "dead-0", NULL);
    assert_int_equal(r.status, 1);
    assert_int_equal(r.out[0], '\0'); /* no bytes at all on stdout */
    cu_run_free(&r);

    /* New puts land on the survivor, even when they prefer the dead segment. */
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "after-%d", i);
        assert_int_equal(put_on(key, vals[i], LEN, (i & 1) ? g.ep_b : NULL), 0);
        stat_endpoint(key, ep, sizeof(ep));
        assert_string_equal(ep, g.ep_a);
        assert_int_equal(mc_get(g.client, key, buf, LEN), LEN);
        assert_memory_equal(buf, vals[i], LEN);
    }
    for (int i = 0; i < NKEYS; i++)
        free(vals[i]);
    free(buf);
}

static void test_master_restart(void **state)
{
    static const char val[] = "value written after the master restarted";
    char port_s[16], key[32], ep[128], in_path[128];
    const char *colon = strrchr(g.cl.rpc, ':');
    int port = colon ? atoi(colon + 1) : 0;
    uint64_t deadline;
    bool back = false;
    struct cu_run r;
    char buf[128];
    int rc = -1;

    (void)state;
    assert_true(port > 0);
    snprintf(port_s, sizeof(port_s), "%d", port);
    assert_int_equal(cu_stop(&g.master, SIGKILL, 5000), 128 + SIGKILL);

    /* Same port again (the old listener's connections may linger briefly). */
    deadline = cu_now_ms() + START_MS;
    while (start_master(port) != 0) {
        assert_true(cu_now_ms() < deadline);
        cu_sleep_ms(200);
    }

    /* A re-mounts by itself (Ping -> NEED_REMOUNT -> ReMountSegment). */
    deadline = cu_now_ms() + TTL_WAIT_MS;
    while (!back && cu_now_ms() < deadline) {
        struct cu_json *segs = segments_json();
        back = segs->n == 1 && segments_has(segs, g.ep_a);
        cu_json_free(segs);
        if (!back)
            cu_sleep_ms(200);
    }
    if (!back)
        cu_dump_log(&g.a, "daemon A");
    assert_true(back);

    /* The in-test client reconnects on its own; its first call may still see the old
     * connection break. */
    deadline = cu_now_ms() + START_MS;
    while (cu_now_ms() < deadline && (rc = put_on("restart-lib", val, sizeof(val), NULL)) != 0)
        cu_sleep_ms(100);
    assert_int_equal(rc, 0);
    stat_endpoint("restart-lib", ep, sizeof(ep));
    assert_string_equal(ep, g.ep_a);
    cli(&r, NULL, "get", "restart-lib", NULL);
    assert_int_equal(r.status, 0);
    assert_memory_equal(r.out, val, sizeof(val));
    cu_run_free(&r);

    snprintf(in_path, sizeof(in_path), "%s/restart.in", g.cl.dir);
    assert_int_equal(cu_write_file(in_path, val, sizeof(val)), 0);
    snprintf(key, sizeof(key), "restart-cli");
    cli(&r, NULL, "put", key, in_path, NULL);
    assert_int_equal(r.status, 0);
    cu_run_free(&r);
    memset(buf, 0, sizeof(buf));
    assert_int_equal(mc_get(g.client, key, buf, sizeof(buf)), (int64_t)sizeof(val));
    assert_memory_equal(buf, val, sizeof(val));
}

static void test_sigterm(void **state)
{
    struct cu_json *segs;

    (void)state;
    assert_int_equal(cu_stop(&g.a, SIGTERM, 10000), 0);
    segs = segments_json(); /* unmounted on the way out, not left for the TTL */
    assert_int_equal(segs->n, 0);
    cu_json_free(segs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_cli_get_one_access),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_cli_value_version_existing),
        cmocka_unit_test(test_daemon_waits_for_master),
        cmocka_unit_test(test_daemon_killed),
        cmocka_unit_test(test_master_restart),
        cmocka_unit_test(test_sigterm),
    };
    signal(SIGPIPE, SIG_IGN);
    mc_log_set_level(MC_LOG_WARN); /* the in-test client's info lines are noise here */
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
