/*
 * bench_failover.c - mooncake_bench failover: how long clients of a high-availability cluster
 * wait when the leader master dies.
 *
 * Set-up (once): an etcd on loopback ports (data in the run directory), two mooncake_master
 * with --enable_ha --enable_offload (lease --ttl seconds), a mooncake_client holder daemon with
 * a LOCAL_DISK store, and an in-process library client without DRAM, both given the cluster as
 * etcd://. The client puts --objects values of --size bytes and waits until each has its disk
 * copy. Each run: SIGKILL the leader, then time
 *   first_put: until a Put of a fresh key succeeds;
 *   all_back:  until every object reads back with its exact bytes (batches of 256);
 * then the killed master is restarted as a standby for the next run. Reported as p50/p99 over
 * --runs, in ms, with the TTL beside them (the goals: first Put <= TTL + 1 s, all back <=
 * TTL + 5 s at 100k objects).
 */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/etcd.h"
#include "mooncake/client.h"
#include "mooncake/errors.h"
#include "tools/bench_procs.h"
#include "tools/bench_util.h"
#include "tools/bench_values.h"
#include "tools/proc_harness.h"

#define MAX_RUNS 64
#define BATCH MC_BENCH_VALUES_BATCH

struct fo_opts {
    int objects, runs, ttl;
    uint64_t size;
    char bin[PATH_MAX], dir[PATH_MAX], etcd_bin[PATH_MAX];
};

struct fo_master {
    struct mc_proc p;
    char rpc[64];
};

static uint64_t now_ms(void)
{
    return mc_proc_now_ms();
}

/* ---- processes ------------------------------------------------------------------------------ */

static int start_etcd(const struct fo_opts *o, struct mc_proc *p, char *endpoints, size_t cap)
{
    int cp = mc_proc_free_port(), pp = mc_proc_free_port();
    char data[PATH_MAX + 16], lc[64], ac[64], lp[64], ap[64], cl[96], log[PATH_MAX + 16];
    snprintf(data, sizeof(data), "--data-dir=%s/etcd", o->dir);
    snprintf(lc, sizeof(lc), "--listen-client-urls=http://127.0.0.1:%d", cp);
    snprintf(ac, sizeof(ac), "--advertise-client-urls=http://127.0.0.1:%d", cp);
    snprintf(lp, sizeof(lp), "--listen-peer-urls=http://127.0.0.1:%d", pp);
    snprintf(ap, sizeof(ap), "--initial-advertise-peer-urls=http://127.0.0.1:%d", pp);
    snprintf(cl, sizeof(cl), "--initial-cluster=default=http://127.0.0.1:%d", pp);
    snprintf(log, sizeof(log), "%s/etcd.log", o->dir);
    const char *argv[] = {o->etcd_bin, data, lc, ac, lp, ap, cl, "--log-level=error", NULL};
    const struct mc_proc_io io = {.err_path = log};
    if (mc_proc_spawn(p, argv, &io) != 0)
        return -1;
    snprintf(endpoints, cap, "127.0.0.1:%d", cp);
    struct mc_etcd_config ec = {.endpoints = endpoints, .timeout_ms = 1000};
    struct mc_etcd *e;
    if (mc_etcd_new(&ec, &e) != 0)
        return -1;
    int rc = -1;
    for (uint64_t end = now_ms() + 20000; now_ms() < end; mc_proc_sleep_ms(50))
        if (mc_etcd_put(e, "/mc-bench/ready", "1", 1, 0) == 0) {
            rc = 0;
            break;
        }
    mc_etcd_free(e);
    return rc;
}

static int start_master(const struct fo_opts *o, const char *endpoints, struct fo_master *m)
{
    const struct mc_bench_procs b = {.bench = "failover", .bin = o->bin, .dir = o->dir};
    char ep[300], ttl[48];
    snprintf(ep, sizeof(ep), "--etcd_endpoints=%s", endpoints);
    snprintf(ttl, sizeof(ttl), "--ha_lease_ttl_sec=%d", o->ttl);
    const char *const extra[] = {
        "--enable_offload", "--enable_ha", "--cluster_id=bench", ep, ttl, NULL};
    uint16_t port;
    if (mc_bench_start_master(&b, 0, extra, 0, &m->p, &port) != 0)
        return -1;
    snprintf(m->rpc, sizeof(m->rpc), "127.0.0.1:%u", port);
    return 0;
}

static int start_holder(const struct fo_opts *o, const char *url, struct mc_proc *p)
{
    const struct mc_bench_procs b = {.bench = "failover", .bin = o->bin, .dir = o->dir};
    char dp[PATH_MAX + 32], cap[64];
    uint64_t need = (uint64_t)o->objects * (o->size + 8192) * 2 + (256ull << 20);
    snprintf(dp, sizeof(dp), "--disk_path=%s/disk", o->dir);
    snprintf(cap, sizeof(cap), "--disk_capacity=%llu", (unsigned long long)need);
    const char *const extra[] = {dp, cap, NULL};
    return mc_bench_start_daemon(&b, "holder", url, need / 2, extra, p);
}

/* ---- data ----------------------------------------------------------------------------------- */

static bool has_disk_copy(struct mc_client *c, const char *key)
{
    struct mc_object_info info;
    bool yes = false;
    if (mc_query(c, key, &info) != 0)
        return false;
    for (size_t k = 0; k < info.replica_count; k++)
        yes |= info.replicas[k].type == MC_REPLICA_LOCAL_DISK &&
               info.replicas[k].status == MC_REPLICA_COMPLETE;
    mc_object_info_free(&info);
    return yes;
}

/* ---- the bench ------------------------------------------------------------------------------ */

static int parse(int argc, char **argv, struct fo_opts *o)
{
    static const struct option lo[] = {{"objects", required_argument, NULL, 'o'},
                                       {"runs", required_argument, NULL, 'r'},
                                       {"size", required_argument, NULL, 's'},
                                       {"ttl", required_argument, NULL, 't'},
                                       {"bin", required_argument, NULL, 'b'},
                                       {"dir", required_argument, NULL, 'D'},
                                       {"etcd", required_argument, NULL, 'e'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof(*o));
    o->objects = 1000;
    o->runs = 3;
    o->size = 4096;
    o->ttl = 3;
    snprintf(o->etcd_bin, sizeof(o->etcd_bin), "etcd");
    mc_bench_self_dir(o->bin, sizeof(o->bin));
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'o':
            o->objects = atoi(optarg);
            break;
        case 'r':
            o->runs = atoi(optarg);
            break;
        case 's':
            o->size = strtoull(optarg, NULL, 10);
            break;
        case 't':
            o->ttl = atoi(optarg);
            break;
        case 'b':
            snprintf(o->bin, sizeof(o->bin), "%s", optarg);
            break;
        case 'D':
            snprintf(o->dir, sizeof(o->dir), "%s", optarg);
            break;
        case 'e':
            snprintf(o->etcd_bin, sizeof(o->etcd_bin), "%s", optarg);
            break;
        case 'h':
            fprintf(stdout,
                    "usage: mooncake_bench failover [--objects 1000] [--runs 3] [--size 4096]\n"
                    "       [--ttl 3] [--bin DIR] [--dir DIR] [--etcd PATH]\n"
                    "Times a fail-over of an HA cluster (etcd + two masters + a disk holder):\n"
                    "SIGKILL of the leader -> first successful Put, and -> every object read\n"
                    "back with its bytes. Binaries from --bin (default: this executable's\n"
                    "directory), etcd from PATH or --etcd; files under --dir (default $TMPDIR).\n");
            return 1;
        default:
            return -1;
        }
    }
    if (o->objects < 1 || o->runs < 1 || o->runs > MAX_RUNS || o->size < 8 ||
        o->size > (64u << 20) || o->ttl < 1 || o->ttl > 60) {
        fprintf(stderr, "failover: --objects >= 1, --runs 1..%d, --size 8..64MiB, --ttl 1..60\n",
                MAX_RUNS);
        return -1;
    }
    return 0;
}

static void emit(const char *name, const struct fo_opts *o, double *ms, int n)
{
    struct mc_bench_result r;
    mc_bench_result_init(&r, "failover", name);
    r.runs = n;
    r.p99_ms = mc_bench_percentile(ms, (size_t)n, 99);
    r.p50_ms = mc_bench_percentile(ms, (size_t)n, 50);
    r.ms = r.p50_ms;
    mc_bench_add_num(&r, "objects", o->objects);
    mc_bench_add_num(&r, "ttl_ms", o->ttl * 1000.0);
    mc_bench_add_num(&r, "size", (double)o->size);
    mc_bench_emit(&r);
}

int mc_bench_failover(int argc, char **argv); /* bench_main.c's MC_BENCHES */
int mc_bench_failover(int argc, char **argv)
{
    struct fo_opts o;
    int prc = parse(argc, argv, &o);
    if (prc)
        return prc > 0 ? 0 : 2;
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", o.dir);
    if (mc_proc_mkdtemp(o.dir, sizeof(o.dir), parent[0] ? parent : NULL, "mc_bench_failover") !=
        0) {
        fprintf(stderr, "failover: cannot create a directory\n");
        return 1;
    }
    int status = 1;
    struct mc_proc etcd = {0}, holder = {0};
    struct fo_master m[2] = {0};
    struct mc_client *c = NULL;
    char endpoints[64], url[128];
    uint8_t *bufs = malloc(BATCH * o.size), *want = malloc(o.size);
    bool *back = calloc((size_t)o.objects, sizeof(bool));
    double first_ms[MAX_RUNS], all_ms[MAX_RUNS];
    if (!bufs || !want || !back)
        goto out;
    if (start_etcd(&o, &etcd, endpoints, sizeof(endpoints)) != 0) {
        fprintf(stderr, "failover: cannot start etcd (%s): is etcd-server installed?\n",
                o.etcd_bin);
        status = 77;
        goto out;
    }
    snprintf(url, sizeof(url), "etcd://%s/bench", endpoints);
    if (start_master(&o, endpoints, &m[0]) != 0)
        goto out;
    mc_proc_sleep_ms(300); /* the first one leads */
    if (start_master(&o, endpoints, &m[1]) != 0 || start_holder(&o, url, &holder) != 0)
        goto out;
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = url;
    cfg.segment_size = 0;
    if (mc_client_open(&cfg, &c) != 0) {
        fprintf(stderr, "failover: cannot open a client of %s\n", url);
        goto out;
    }
    const struct mc_bench_values v = {
        .bench = "failover", .prefix = "fo", .objects = o.objects, .size = o.size};
    char key[32];
    for (int i = 0; i < o.objects; i++) {
        mc_bench_value_key(&v, i, key, sizeof(key));
        mc_bench_value_fill(want, o.size, (uint64_t)i);
        int rc = -1;
        for (uint64_t end = now_ms() + 10000; rc != 0 && now_ms() < end;)
            if ((rc = mc_put(c, key, want, o.size, NULL)) != 0)
                mc_proc_sleep_ms(5);
        if (rc != 0) {
            fprintf(stderr, "failover: put %s: %s\n", key, mc_strerror(rc));
            goto out;
        }
    }
    for (int i = 0; i < o.objects; i++) {
        mc_bench_value_key(&v, i, key, sizeof(key));
        uint64_t end = now_ms() + 60000;
        while (!has_disk_copy(c, key) && now_ms() < end)
            mc_proc_sleep_ms(10);
    }
    fprintf(stderr, "failover: %d objects of %llu bytes on disk; %d runs, TTL %d s\n", o.objects,
            (unsigned long long)o.size, o.runs, o.ttl);
    int leader = 0;
    for (int r = 0; r < o.runs; r++) {
        uint64_t t0 = now_ms();
        mc_proc_stop(&m[leader].p, SIGKILL, 5000);
        int rc = -1;
        char fresh[32];
        snprintf(fresh, sizeof(fresh), "fo-fresh-%d", r);
        mc_bench_value_fill(want, o.size, 1000000007u + (uint64_t)r);
        while (rc != 0 && now_ms() < t0 + 120000)
            if ((rc = mc_put(c, fresh, want, o.size, NULL)) != 0)
                mc_proc_sleep_ms(5);
        first_ms[r] = (double)(now_ms() - t0);
        memset(back, 0, (size_t)o.objects * sizeof(bool));
        int nb = 0;
        uint64_t wrong = 0;
        while (nb < o.objects && !wrong && now_ms() < t0 + 300000) {
            int got = mc_bench_read_pass(c, &v, back, bufs, want, &wrong);
            if (got > nb)
                nb = got;
            if (nb < o.objects)
                mc_proc_sleep_ms(5);
        }
        if (wrong)
            goto out; /* other bytes are never acceptable */
        all_ms[r] = (double)(now_ms() - t0);
        fprintf(stderr, "  run %d: first put %.0f ms, %d/%d back in %.0f ms\n", r, first_ms[r], nb,
                o.objects, all_ms[r]);
        if (rc != 0 || nb < o.objects)
            goto out;
        if (start_master(&o, endpoints, &m[leader]) != 0) /* back as a standby */
            goto out;
        leader ^= 1;
        mc_proc_sleep_ms(200);
    }
    emit("first_put", &o, first_ms, o.runs);
    emit("all_back", &o, all_ms, o.runs);
    status = 0;
out:
    mc_client_close(c);
    mc_proc_stop(&holder, SIGTERM, 10000);
    mc_proc_stop(&m[0].p, SIGTERM, 10000);
    mc_proc_stop(&m[1].p, SIGTERM, 10000);
    mc_proc_stop(&etcd, SIGTERM, 10000);
    if (strstr(o.dir, "/mc_bench_failover."))
        mc_proc_rm_rf(o.dir);
    free(bufs);
    free(want);
    free(back);
    return status;
}
