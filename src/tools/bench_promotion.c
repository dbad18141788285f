/*
 * bench_promotion.c - `mooncake_bench promotion`: what promotion on hit buys (DESIGN.md §1.1).
 *
 * Every case starts its own mooncake_master (from --bin: --enable_offload --offload_on_evict,
 * --promotion_on_hit unless the case measures "off", threshold 2, a --lease_ms read lease) on
 * free loopback ports, and stops it at the end. Disk stores live under --dir (O_DIRECT: no
 * page cache) and are removed afterwards.
 *
 * latency (per --sizes value, default 4MiB), two readers:
 *   holder  the bench process is the holder: a client with a --segment_size DRAM segment and
 *           a disk store; it reads its own keys (disk-only: its store directly; promoted: a
 *           memcpy out of its own segment);
 *   remote  a mooncake_client daemon is the holder; the bench's client has no DRAM and reads
 *           over loopback TCP (disk-only: one PeerDiskRead; promoted: a peer read).
 *   Method: Put 2 × segment + --keys objects so eviction offloads most of them, take --keys
 *   LOCAL_DISK-only keys, read each twice (both reads served by the disk; the second one
 *   admits the promotion: phase disk_only), wait until each lists a MEMORY replica, then read
 *   each --runs times (phase promoted). Only reads the library reports as served by the tier of
 *   the phase are counted. Promotion lag: the master's master_promotion_lag_seconds histogram
 *   (admission to COMPLETE, master clock) scraped before and after, the difference's p50 / p99
 *   interpolated inside its buckets (1 ms, 2 ms, 4 ms, ... bounds).
 *   JSON: case=get/<phase>/<reader>/<size>, phase, reader, size; the promoted line carries
 *   ref = the disk_only p50 and ratio = disk_only p50 / promoted p50 (the speed-up), and
 *   lag_p50_ms / lag_p99_ms; a line case=lag/<reader>/<size> has the lag as p50_ms / p99_ms.
 *
 * zipf (unless --zipf_objects 0): --zipf_objects keys of --zipf_size (default 10000 × 1 MiB),
 *   DRAM = --dram_ratio (0.2) of the data, the bench process the holder, --threads readers
 *   drawing keys from a Zipf(--zipf_s = 0.99) distribution over a fixed random permutation of
 *   the keys; --warmup seconds (10) unmeasured, then --seconds (60) measured; promotion off,
 *   then on, each on a fresh master and store. JSON: case=zipf/<off|on>, promotion, ops_per_s,
 *   bytes_per_s, p50/p99 per Get, hit_memory (fraction of Gets served by DRAM), promoted (tasks
 *   completed in the measured window); the "on" line has ref = the off ops_per_s and ratio.
 *
 * oscillation (with --osc_seconds S > 0): promotion on, the bench the holder with a
 *   --segment_size segment; --osc_hot hot keys made disk-only, then for S seconds one thread
 *   reads the hot keys round robin while another Puts fresh cold keys non-stop (DRAM held at
 *   the watermark by eviction and offload); a poller looks at every hot key's replicas every
 *   10 ms and counts its disk-only -> MEMORY transitions. JSON: case=oscillation, admitted
 *   (master_promotion_admitted_total over the window), max_admitted_per_key (the most
 *   transitions of one key seen by the poller), hot_keys, cold_puts, seconds.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/parse.h"
#include "mooncake/client.h"
#include "tools/bench_util.h"
#include "tools/metrics_scrape.h"
#include "tools/proc_harness.h"

#define MAX_SIZES 8
#define NBUCKETS 64
#define SCRAPE_TIMEOUT_MS 5000 /* one /metrics GET; a master that stops answering fails it */

struct opts {
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    int keys, runs;
    uint64_t segment_size;
    int zipf_objects;
    uint64_t zipf_size;
    double dram_ratio, zipf_s;
    int warmup, seconds, threads;
    int osc_seconds, osc_hot;
    int lease_ms;
    bool holder, remote;
    char bin[PATH_MAX];
    char dir[PATH_MAX];
};

static uint64_t g_seed = 0x5eed;

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- processes (tools/proc_harness.h) ------------------------------------------------------- */

struct cluster {
    struct mc_proc master, daemon;
    char rpc[64], metrics_host[64];
    int metrics_port;
    char ep[256];
};

static void stop(struct mc_proc *c)
{
    mc_proc_stop(c, SIGTERM, 10000);
}

static int start_master(const struct opts *o, struct cluster *cl, bool promotion)
{
    char path[PATH_MAX + 32], lease[64];
    const char *argv[] = {path,
                          "--rpc_port=0",
                          "--rpc_address=127.0.0.1",
                          "--metrics_port=0",
                          "--metrics_host=127.0.0.1",
                          "--log_level=error",
                          "--enable_offload",
                          "--offload_on_evict",
                          "--promotion_admission_threshold=2",
                          lease,
                          promotion ? "--promotion_on_hit" : NULL,
                          NULL};
    struct mc_proc_ready r;
    snprintf(path, sizeof(path), "%s/mooncake_master", o->bin);
    snprintf(lease, sizeof(lease), "--default_kv_lease_ttl=%d", o->lease_ms);
    if (mc_proc_start(&cl->master, argv, NULL, MC_PROC_READY_MASTER, &r, 20000) != 0) {
        fprintf(stderr, "promotion: could not start %s\n", path);
        return -1;
    }
    snprintf(cl->rpc, sizeof(cl->rpc), "127.0.0.1:%u", r.rpc_port);
    snprintf(cl->metrics_host, sizeof(cl->metrics_host), "127.0.0.1");
    cl->metrics_port = r.metrics_port;
    return 0;
}

static int start_daemon(const struct opts *o, struct cluster *cl, const char *disk)
{
    char path[PATH_MAX + 32], m[128], seg[64], dp[PATH_MAX + 64], cap[64];
    const char *argv[] = {
        path, m, "--host=127.0.0.1", "--data_port=0", seg, dp, cap, "--log_level=error", NULL};
    struct mc_proc_ready r;
    snprintf(path, sizeof(path), "%s/mooncake_client", o->bin);
    snprintf(m, sizeof(m), "--master=%s", cl->rpc);
    snprintf(seg, sizeof(seg), "--segment_size=%llu", (unsigned long long)o->segment_size);
    snprintf(dp, sizeof(dp), "--disk_path=%s", disk);
    snprintf(cap, sizeof(cap), "--disk_capacity=%llu", (unsigned long long)(64ull << 30));
    if (mc_proc_start(&cl->daemon, argv, NULL, MC_PROC_READY_DAEMON, &r, 30000) != 0) {
        fprintf(stderr, "promotion: could not start %s\n", path);
        return -1;
    }
    snprintf(cl->ep, sizeof(cl->ep), "%s", r.endpoint);
    return 0;
}

/* Removes a store directory the bench made (only those: the name carries the bench's prefix). */
static void rm_store(const char *dir)
{
    if (strstr(dir, "/mc_bench_promo."))
        mc_proc_rm_rf(dir);
}

/* ---- the lag histogram from /metrics ------------------------------------------------------- */

struct hist {
    int n;
    double le[NBUCKETS];
    double cum[NBUCKETS];
};

static int scrape(const struct cluster *cl, char **out)
{
    char addr[96];
    snprintf(addr, sizeof(addr), "%s:%d", cl->metrics_host, cl->metrics_port);
    return mc_metrics_scrape(addr, SCRAPE_TIMEOUT_MS, out);
}

static double metric(const struct cluster *cl, const char *name)
{
    char *t = NULL;
    if (scrape(cl, &t) != 0)
        return -1;
    double v = mc_metrics_value(t, name);
    free(t);
    return v;
}

static void lag_hist(const struct cluster *cl, struct hist *h)
{
    char *t = NULL;
    memset(h, 0, sizeof(*h));
    if (scrape(cl, &t) != 0)
        return;
    const char *pre = "master_promotion_lag_seconds_bucket{le=\"";
    for (const char *p = strstr(t, pre); p && h->n < NBUCKETS; p = strstr(p + 1, pre)) {
        const char *q = p + strlen(pre);
        h->le[h->n] = strncmp(q, "+Inf", 4) == 0 ? INFINITY : strtod(q, NULL);
        const char *sp = strchr(q, ' ');
        h->cum[h->n++] = sp ? strtod(sp + 1, NULL) : 0;
    }
    free(t);
}

/* The q-quantile (0..1) of after - before, in ms, linear inside a bucket; -1 when empty. */
static double lag_quantile(const struct hist *b, const struct hist *a, double q)
{
    if (a->n == 0 || a->n != b->n)
        return -1;
    double total = a->cum[a->n - 1] - b->cum[b->n - 1];
    if (total <= 0)
        return -1;
    double want = q * total, prev_le = 0, prev = 0;
    for (int i = 0; i < a->n; i++) {
        double c = a->cum[i] - b->cum[i];
        if (c >= want) {
            if (isinf(a->le[i]))
                return prev_le * 1e3;
            double f = c > prev ? (want - prev) / (c - prev) : 1;
            return (prev_le + f * (a->le[i] - prev_le)) * 1e3;
        }
        prev = c;
        prev_le = a->le[i];
    }
    return -1;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static void fill(uint8_t *buf, uint64_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
}

static int put_retry(struct mc_client *c, const char *key, const void *buf, uint64_t len)
{
    uint64_t deadline = mc_now_ms() + 30000;
    int rc;
    while ((rc = mc_put(c, key, buf, len, NULL)) != 0 && mc_now_ms() < deadline)
        usleep(5000);
    return rc;
}

/* 1 MEMORY, 2 LOCAL_DISK (bits) of COMPLETE replicas. */
static int tiers_of(struct mc_client *c, const char *key)
{
    struct mc_object_info info;
    int t = 0;
    if (mc_query(c, key, &info) != 0)
        return 0;
    for (size_t k = 0; k < info.replica_count; k++)
        if (info.replicas[k].status == MC_REPLICA_COMPLETE)
            t |= info.replicas[k].type == MC_REPLICA_LOCAL_DISK ? 2 : 1;
    mc_object_info_free(&info);
    return t;
}

/* One Get of key into buf; *ms its latency, *tier what served it. */
static int64_t timed_get(struct mc_client *c, const char *key, void *buf, size_t cap, double *ms,
                         int *tier)
{
    const char *kp = key;
    void *bp = buf;
    int64_t res = 0;
    uint64_t t0 = now_us();
    int rc = mc_batch_get_tiers(c, 1, &kp, &bp, &cap, &res, tier);
    *ms = (double)(now_us() - t0) / 1e3;
    return rc ? rc : res;
}

static void size_name(uint64_t size, char *buf, size_t cap)
{
    if (size >= (1u << 20) && size % (1u << 20) == 0)
        snprintf(buf, cap, "%lluMiB", (unsigned long long)(size >> 20));
    else if (size >= 1024 && size % 1024 == 0)
        snprintf(buf, cap, "%lluKiB", (unsigned long long)(size >> 10));
    else
        snprintf(buf, cap, "%lluB", (unsigned long long)size);
}

static int open_client(const char *rpc, uint64_t seg, const char *disk, uint64_t disk_cap,
                       struct mc_client **out)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = rpc;
    cfg.segment_size = seg;
    cfg.disk_path = disk;
    cfg.disk_capacity = disk_cap;
    cfg.put_retry_window_ms = 5000;
    cfg.log_level = MC_CLIENT_LOG_ERROR;
    int rc = mc_client_open(&cfg, out);
    if (rc)
        fprintf(stderr, "promotion: cannot open a client on %s: %s\n", rpc, mc_strerror(rc));
    return rc;
}

/* Puts n keys "<prefix>-<i>" of size bytes. */
static int put_keys(struct mc_client *c, const char *prefix, int n, uint64_t size, uint8_t *buf)
{
    char key[64];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%s-%d", prefix, i);
        fill(buf, size, (uint64_t)i + 1);
        int rc = put_retry(c, key, buf, size);
        if (rc) {
            fprintf(stderr, "promotion: put %s: %s\n", key, mc_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/* ---- latency ------------------------------------------------------------------------------- */

static void emit_lat(const char *phase, const char *reader, uint64_t size, double *lat, int n,
                     double ref_p50, double lag50, double lag99)
{
    char name[96], sz[32];
    struct mc_bench_result r;
    double total = 0;
    size_name(size, sz, sizeof(sz));
    snprintf(name, sizeof(name), "get/%s/%s/%s", phase, reader, sz);
    mc_bench_result_init(&r, "promotion", name);
    for (int i = 0; i < n; i++)
        total += lat[i];
    r.runs = n;
    r.p99_ms = mc_bench_percentile(lat, (size_t)n, 99);
    r.p50_ms = mc_bench_percentile(lat, (size_t)n, 50);
    r.ms = r.p50_ms;
    r.ops_per_s = total > 0 ? n / (total / 1e3) : 0;
    r.bytes_per_s = r.ops_per_s * (double)size;
    if (ref_p50 > 0 && r.p50_ms > 0)
        mc_bench_set_ref(&r, ref_p50, ref_p50 / r.p50_ms);
    mc_bench_add_str(&r, "phase", phase);
    mc_bench_add_str(&r, "reader", reader);
    mc_bench_add_num(&r, "size", (double)size);
    if (lag50 >= 0) {
        mc_bench_add_num(&r, "lag_p50_ms", lag50);
        mc_bench_add_num(&r, "lag_p99_ms", lag99);
    }
    mc_bench_emit(&r);
}

static int latency_case(const struct opts *o, uint64_t size, bool remote)
{
    const char *reader = remote ? "remote" : "holder";
    struct cluster cl = {.master.out_fd = -1, .daemon.out_fd = -1};
    struct mc_client *c = NULL;
    char disk[PATH_MAX + 16], key[64];
    int rc = -1, nkeys = (int)(2 * o->segment_size / size) + o->keys;
    int *hot = calloc((size_t)nkeys, sizeof(*hot)), nhot = 0;
    double *dlat = calloc((size_t)o->keys * 2, sizeof(double));
    double *plat = calloc((size_t)o->keys * (size_t)o->runs, sizeof(double));
    size_t cap = (size + 4095) / 4096 * 4096;
    uint8_t *buf = aligned_alloc(4096, cap);
    snprintf(disk, sizeof(disk), "%s/%s", o->dir, reader);
    if (!hot || !dlat || !plat || !buf || start_master(o, &cl, true) != 0)
        goto out;
    if (remote) {
        if (start_daemon(o, &cl, disk) != 0 || open_client(cl.rpc, 0, NULL, 0, &c) != 0)
            goto out;
    } else if (open_client(cl.rpc, o->segment_size, disk, 64ull << 30, &c) != 0) {
        goto out;
    }
    if (put_keys(c, "lat", nkeys, size, buf) != 0)
        goto out;
    /* disk-only keys, after the offloads settle */
    uint64_t deadline = mc_now_ms() + 30000;
    do {
        nhot = 0;
        for (int i = 0; i < nkeys && nhot < o->keys; i++) {
            snprintf(key, sizeof(key), "lat-%d", i);
            if (tiers_of(c, key) == 2)
                hot[nhot++] = i;
        }
        if (nhot >= o->keys)
            break;
        usleep(50000);
    } while (mc_now_ms() < deadline);
    if (nhot < 1) {
        fprintf(stderr, "promotion: no LOCAL_DISK-only key appeared\n");
        goto out;
    }
    struct hist h0, h1;
    lag_hist(&cl, &h0);
    int nd = 0, np = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < nhot; k++) {
            double ms;
            int tier = -1;
            snprintf(key, sizeof(key), "lat-%d", hot[k]);
            int64_t n = timed_get(c, key, buf, cap, &ms, &tier);
            if (n == (int64_t)size && tier == MC_REPLICA_LOCAL_DISK)
                dlat[nd++] = ms;
        }
    /* every hot key promoted (bounded wait) */
    int promoted = 0;
    deadline = mc_now_ms() + 20000;
    while (mc_now_ms() < deadline) {
        promoted = 0;
        for (int k = 0; k < nhot; k++) {
            snprintf(key, sizeof(key), "lat-%d", hot[k]);
            promoted += (tiers_of(c, key) & 1) != 0;
        }
        if (promoted == nhot)
            break;
        usleep(5000);
    }
    lag_hist(&cl, &h1);
    if (promoted < nhot)
        fprintf(stderr, "promotion: only %d of %d hot keys promoted within 20 s\n", promoted, nhot);
    for (int r = 0; r < o->runs; r++)
        for (int k = 0; k < nhot; k++) {
            double ms;
            int tier = -1;
            snprintf(key, sizeof(key), "lat-%d", hot[k]);
            int64_t n = timed_get(c, key, buf, cap, &ms, &tier);
            if (n == (int64_t)size && tier == MC_REPLICA_MEMORY)
                plat[np++] = ms;
        }
    double lag50 = lag_quantile(&h0, &h1, 0.5), lag99 = lag_quantile(&h0, &h1, 0.99);
    double d50 = nd ? mc_bench_percentile(dlat, (size_t)nd, 50) : 0;
    emit_lat("disk_only", reader, size, dlat, nd, 0, -1, -1);
    emit_lat("promoted", reader, size, plat, np, d50, lag50, lag99);
    {
        char name[96], sz[32];
        struct mc_bench_result r;
        size_name(size, sz, sizeof(sz));
        snprintf(name, sizeof(name), "lag/%s/%s", reader, sz);
        mc_bench_result_init(&r, "promotion", name);
        r.runs = promoted;
        r.ms = r.p50_ms = lag50;
        r.p99_ms = lag99;
        mc_bench_add_str(&r, "reader", reader);
        mc_bench_add_num(&r, "lag_p50_ms", lag50);
        mc_bench_add_num(&r, "lag_p99_ms", lag99);
        mc_bench_emit(&r);
    }
    rc = 0;
out:
    mc_client_close(c);
    stop(&cl.daemon);
    stop(&cl.master);
    rm_store(disk);
    free(hot);
    free(dlat);
    free(plat);
    free(buf);
    return rc;
}

/* ---- zipf ---------------------------------------------------------------------------------- */

struct zipf_ctx {
    const struct opts *o;
    struct mc_client *c;
    const double *cdf; /* cumulative probability of rank i */
    const int *perm;   /* rank -> key index */
    _Atomic int phase; /* 0 warm-up, 1 measured, 2 stop */
    _Atomic uint64_t gets, mem_hits, errors;
    _Atomic int last_error;
    double *lat;
    _Atomic size_t nlat;
    size_t maxlat;
};

static int zipf_draw(const struct zipf_ctx *z, uint64_t *rs)
{
    double u = (double)(mc_bench_rand(rs) >> 11) / 9007199254740992.0;
    int lo = 0, hi = z->o->zipf_objects - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return z->perm[lo];
}

static void *zipf_reader(void *arg)
{
    struct zipf_ctx *z = arg;
    uint64_t rs = g_seed ^ (uint64_t)(uintptr_t)&rs;
    size_t cap = (z->o->zipf_size + 4095) / 4096 * 4096;
    uint8_t *buf = aligned_alloc(4096, cap);
    char key[64];
    while (buf && atomic_load(&z->phase) < 2) {
        snprintf(key, sizeof(key), "z-%d", zipf_draw(z, &rs));
        double ms;
        int tier = -1;
        int64_t n = timed_get(z->c, key, buf, cap, &ms, &tier);
        if (atomic_load(&z->phase) != 1)
            continue;
        if (n != (int64_t)z->o->zipf_size) {
            atomic_fetch_add(&z->errors, 1);
            atomic_store(&z->last_error, (int)n);
            continue;
        }
        atomic_fetch_add(&z->gets, 1);
        if (tier == MC_REPLICA_MEMORY)
            atomic_fetch_add(&z->mem_hits, 1);
        size_t i = atomic_fetch_add(&z->nlat, 1);
        if (i < z->maxlat)
            z->lat[i] = ms;
    }
    free(buf);
    return NULL;
}

static int zipf_case(const struct opts *o, bool promotion, double *ops_out, double ref_ops)
{
    struct cluster cl = {.master.out_fd = -1, .daemon.out_fd = -1};
    struct mc_client *c = NULL;
    char disk[PATH_MAX + 16];
    int rc = -1, n = o->zipf_objects;
    uint64_t data = (uint64_t)n * o->zipf_size;
    uint64_t seg = (uint64_t)((double)data * o->dram_ratio);
    double *cdf = calloc((size_t)n, sizeof(double));
    int *perm = calloc((size_t)n, sizeof(int));
    uint8_t *buf = malloc(o->zipf_size);
    pthread_t th[64];
    int nth = 0;
    struct zipf_ctx z = {.o = o, .cdf = cdf, .perm = perm};
    z.maxlat = 1u << 22;
    z.lat = calloc(z.maxlat, sizeof(double));
    snprintf(disk, sizeof(disk), "%s/zipf_%s", o->dir, promotion ? "on" : "off");
    if (!cdf || !perm || !buf || !z.lat || start_master(o, &cl, promotion) != 0 ||
        open_client(cl.rpc, seg, disk, data * 2 + (1ull << 30), &c) != 0)
        goto out;
    z.c = c;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += 1.0 / pow((double)(i + 1), o->zipf_s);
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += 1.0 / pow((double)(i + 1), o->zipf_s) / sum;
        cdf[i] = acc;
        perm[i] = i;
    }
    cdf[n - 1] = 1.0;
    uint64_t rs = g_seed;
    for (int i = n - 1; i > 0; i--) { /* the same permutation in both runs */
        int j = (int)(mc_bench_rand(&rs) % (uint64_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    uint64_t t0 = mc_now_ms();
    if (put_keys(c, "z", n, o->zipf_size, buf) != 0)
        goto out;
    fprintf(stderr, "promotion: zipf/%s: %d keys put in %.1f s\n", promotion ? "on" : "off", n,
            (double)(mc_now_ms() - t0) / 1e3);
    int threads = o->threads < 1 ? 1 : o->threads > 64 ? 64 : o->threads;
    for (nth = 0; nth < threads; nth++)
        if (pthread_create(&th[nth], NULL, zipf_reader, &z) != 0)
            break;
    sleep((unsigned)o->warmup);
    double completed0 = metric(&cl, "master_promotion_completed_total");
    uint64_t m0 = now_us();
    atomic_store(&z.phase, 1);
    sleep((unsigned)o->seconds);
    atomic_store(&z.phase, 2);
    double secs = (double)(now_us() - m0) / 1e6;
    double completed = metric(&cl, "master_promotion_completed_total") - completed0;
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    nth = 0;
    struct mc_bench_result r;
    mc_bench_result_init(&r, "promotion", promotion ? "zipf/on" : "zipf/off");
    uint64_t gets = atomic_load(&z.gets);
    size_t nl = atomic_load(&z.nlat);
    if (nl > z.maxlat)
        nl = z.maxlat;
    r.runs = (int)gets;
    r.p99_ms = mc_bench_percentile(z.lat, nl, 99);
    r.p50_ms = mc_bench_percentile(z.lat, nl, 50);
    r.ms = r.p50_ms;
    r.ops_per_s = secs > 0 ? (double)gets / secs : 0;
    r.bytes_per_s = r.ops_per_s * (double)o->zipf_size;
    if (ref_ops > 0)
        mc_bench_set_ref(&r, ref_ops, r.ops_per_s / ref_ops);
    mc_bench_add_str(&r, "promotion", promotion ? "on" : "off");
    mc_bench_add_str(&r, "reader", "holder");
    mc_bench_add_num(&r, "objects", n);
    mc_bench_add_num(&r, "size", (double)o->zipf_size);
    mc_bench_add_num(&r, "dram_ratio", o->dram_ratio);
    mc_bench_add_num(&r, "zipf_s", o->zipf_s);
    mc_bench_add_num(&r, "threads", threads);
    mc_bench_add_num(&r, "warmup_s", o->warmup);
    mc_bench_add_num(&r, "seconds", secs);
    mc_bench_add_num(&r, "hit_memory", gets ? (double)atomic_load(&z.mem_hits) / (double)gets : 0);
    mc_bench_add_num(&r, "promoted", completed > 0 ? completed : 0);
    mc_bench_add_num(&r, "errors", (double)atomic_load(&z.errors));
    if (atomic_load(&z.errors))
        mc_bench_add_str(&r, "last_error", mc_strerror(atomic_load(&z.last_error)));
    mc_bench_emit(&r);
    *ops_out = r.ops_per_s;
    rc = 0;
out:
    atomic_store(&z.phase, 2);
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    mc_client_close(c);
    stop(&cl.master);
    rm_store(disk);
    free(cdf);
    free(perm);
    free(buf);
    free(z.lat);
    return rc;
}

/* ---- oscillation --------------------------------------------------------------------------- */

struct osc_ctx {
    const struct opts *o;
    struct mc_client *c;
    int nhot;
    int *hot;
    _Atomic bool stop;
    _Atomic uint64_t cold_puts;
};

static void *osc_reader(void *arg)
{
    struct osc_ctx *x = arg;
    uint8_t *buf = malloc(1u << 20);
    char key[64];
    for (int k = 0; buf && !atomic_load(&x->stop); k = (k + 1) % x->nhot) {
        snprintf(key, sizeof(key), "osc-%d", x->hot[k]);
        mc_get(x->c, key, buf, 1u << 20);
    }
    free(buf);
    return NULL;
}

static void *osc_putter(void *arg)
{
    struct osc_ctx *x = arg;
    uint8_t *buf = malloc(1u << 20);
    char key[64];
    for (uint64_t i = 0; buf && !atomic_load(&x->stop); i++) {
        snprintf(key, sizeof(key), "cold-%llu", (unsigned long long)i);
        fill(buf, 1u << 20, i + 99);
        if (mc_put(x->c, key, buf, 1u << 20, NULL) == 0)
            atomic_fetch_add(&x->cold_puts, 1);
        else
            usleep(2000);
    }
    free(buf);
    return NULL;
}

static int osc_case(const struct opts *o)
{
    struct cluster cl = {.master.out_fd = -1, .daemon.out_fd = -1};
    struct mc_client *c = NULL;
    char disk[PATH_MAX + 16], key[64];
    int rc = -1, nkeys = (int)(2 * o->segment_size / (1u << 20)) + o->osc_hot;
    int *hot = calloc((size_t)nkeys, sizeof(int)), nhot = 0;
    int *trans = calloc((size_t)nkeys, sizeof(int)), *was_mem = calloc((size_t)nkeys, sizeof(int));
    uint8_t *buf = malloc(1u << 20);
    struct osc_ctx x = {.o = o};
    pthread_t tr, tp;
    bool started = false;
    snprintf(disk, sizeof(disk), "%s/osc", o->dir);
    if (!hot || !trans || !was_mem || !buf || start_master(o, &cl, true) != 0 ||
        open_client(cl.rpc, o->segment_size, disk, 64ull << 30, &c) != 0)
        goto out;
    if (put_keys(c, "osc", nkeys, 1u << 20, buf) != 0)
        goto out;
    for (int i = 0; i < nkeys && nhot < o->osc_hot; i++) {
        snprintf(key, sizeof(key), "osc-%d", i);
        if (tiers_of(c, key) == 2)
            hot[nhot++] = i;
    }
    if (!nhot)
        goto out;
    x.c = c;
    x.nhot = nhot;
    x.hot = hot;
    double adm0 = metric(&cl, "master_promotion_admitted_total");
    if (pthread_create(&tr, NULL, osc_reader, &x) != 0)
        goto out;
    if (pthread_create(&tp, NULL, osc_putter, &x) != 0) {
        atomic_store(&x.stop, true);
        pthread_join(tr, NULL);
        goto out;
    }
    started = true;
    uint64_t end = mc_now_ms() + (uint64_t)o->osc_seconds * 1000;
    while (mc_now_ms() < end) {
        for (int k = 0; k < nhot; k++) {
            snprintf(key, sizeof(key), "osc-%d", hot[k]);
            int mem = (tiers_of(c, key) & 1) != 0;
            if (mem && !was_mem[k])
                trans[k]++;
            was_mem[k] = mem;
        }
        usleep(10000);
    }
    double adm = metric(&cl, "master_promotion_admitted_total") - adm0;
    atomic_store(&x.stop, true);
    pthread_join(tr, NULL);
    pthread_join(tp, NULL);
    started = false;
    int maxt = 0;
    for (int k = 0; k < nhot; k++)
        maxt = trans[k] > maxt ? trans[k] : maxt;
    struct mc_bench_result r;
    mc_bench_result_init(&r, "promotion", "oscillation");
    r.runs = nhot;
    mc_bench_add_num(&r, "hot_keys", nhot);
    mc_bench_add_num(&r, "seconds", o->osc_seconds);
    mc_bench_add_num(&r, "admitted", adm);
    mc_bench_add_num(&r, "max_admitted_per_key", maxt);
    mc_bench_add_num(&r, "cold_puts", (double)atomic_load(&x.cold_puts));
    mc_bench_emit(&r);
    rc = 0;
out:
    if (started) {
        atomic_store(&x.stop, true);
        pthread_join(tr, NULL);
        pthread_join(tp, NULL);
    }
    mc_client_close(c);
    stop(&cl.master);
    rm_store(disk);
    free(hot);
    free(trans);
    free(was_mem);
    free(buf);
    return rc;
}

/* ---- main ---------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(
        f, "usage: mooncake_bench promotion [--sizes 4MiB] [--keys 16] [--runs 20]\n"
           "         [--segment_size 128MiB] [--reader holder|remote|both]\n"
           "         [--zipf_objects 10000] [--zipf_size 1MiB] [--dram_ratio 0.2] [--zipf_s 0.99]\n"
           "         [--warmup 10] [--seconds 60] [--threads 4]\n"
           "         [--osc_seconds 0] [--osc_hot 8] [--lease_ms 100] [--bin DIR] [--dir DIR]\n"
           "         [--seed N]\n\n"
           "Hot-key Get latency while LOCAL_DISK-only vs after promotion (reader in the holder's\n"
           "process and in another one), promotion lag (master_promotion_lag_seconds), Zipf Get\n"
           "throughput with promotion off vs on, and (with --osc_seconds) promotions per hot key\n"
           "while cold Puts keep DRAM full. Starts its own mooncake_master (+ mooncake_client)\n"
           "from --bin (default: this executable's directory); stores under --dir (default\n"
           "$TMPDIR). --zipf_objects 0 skips the Zipf runs; --keys 0 the latency cases.\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {{"sizes", required_argument, NULL, 's'},
                                       {"keys", required_argument, NULL, 'k'},
                                       {"runs", required_argument, NULL, 'r'},
                                       {"segment_size", required_argument, NULL, 'S'},
                                       {"reader", required_argument, NULL, 'R'},
                                       {"zipf_objects", required_argument, NULL, 'z'},
                                       {"zipf_size", required_argument, NULL, 'Z'},
                                       {"dram_ratio", required_argument, NULL, 'd'},
                                       {"zipf_s", required_argument, NULL, 'e'},
                                       {"warmup", required_argument, NULL, 'w'},
                                       {"seconds", required_argument, NULL, 't'},
                                       {"threads", required_argument, NULL, 'T'},
                                       {"osc_seconds", required_argument, NULL, 'o'},
                                       {"osc_hot", required_argument, NULL, 'O'},
                                       {"lease_ms", required_argument, NULL, 'L'},
                                       {"bin", required_argument, NULL, 'b'},
                                       {"dir", required_argument, NULL, 'D'},
                                       {"seed", required_argument, NULL, 'x'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int c;
    char *dir = NULL;
    o->sizes[0] = 4u << 20;
    o->nsizes = 1;
    o->keys = 16;
    o->runs = 20;
    o->segment_size = 128u << 20;
    o->zipf_objects = 10000;
    o->zipf_size = 1u << 20;
    o->dram_ratio = 0.2;
    o->zipf_s = 0.99;
    o->warmup = 10;
    o->seconds = 60;
    o->threads = 4;
    o->osc_hot = 8;
    o->lease_ms = 100;
    o->holder = o->remote = true;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(o->bin, sizeof(o->bin), "%s", self);
    } else {
        snprintf(o->bin, sizeof(o->bin), ".");
    }
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        uint64_t v;
        switch (c) {
        case 's':
            o->nsizes = mc_bench_parse_sizes(optarg, o->sizes, MAX_SIZES);
            if (o->nsizes <= 0)
                return -1;
            break;
        case 'k':
            o->keys = atoi(optarg);
            break;
        case 'r':
            o->runs = atoi(optarg);
            break;
        case 'S':
            if (mc_parse_size(optarg, &v, NULL, 0) != 0 || v < (8u << 20))
                return -1;
            o->segment_size = v;
            break;
        case 'R':
            o->holder = !strcmp(optarg, "holder") || !strcmp(optarg, "both");
            o->remote = !strcmp(optarg, "remote") || !strcmp(optarg, "both");
            if (!o->holder && !o->remote)
                return -1;
            break;
        case 'z':
            o->zipf_objects = atoi(optarg);
            break;
        case 'Z':
            if (mc_parse_size(optarg, &v, NULL, 0) != 0 || v == 0 || v > (64u << 20))
                return -1;
            o->zipf_size = v;
            break;
        case 'd':
            o->dram_ratio = atof(optarg);
            break;
        case 'e':
            o->zipf_s = atof(optarg);
            break;
        case 'w':
            o->warmup = atoi(optarg);
            break;
        case 't':
            o->seconds = atoi(optarg);
            break;
        case 'T':
            o->threads = atoi(optarg);
            break;
        case 'o':
            o->osc_seconds = atoi(optarg);
            break;
        case 'O':
            o->osc_hot = atoi(optarg);
            break;
        case 'L':
            o->lease_ms = atoi(optarg);
            break;
        case 'b':
            snprintf(o->bin, sizeof(o->bin), "%s", optarg);
            break;
        case 'D':
            dir = optarg;
            break;
        case 'x':
            g_seed = strtoull(optarg, NULL, 0);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return -1;
        }
    }
    if (optind < argc || o->keys < 0 || o->runs < 1 || o->zipf_objects < 0 ||
        (o->zipf_objects > 0 && o->zipf_objects < 10) || o->dram_ratio <= 0 || o->dram_ratio >= 1 ||
        o->warmup < 0 || o->seconds < 1 || o->osc_seconds < 0 || o->osc_hot < 1 || o->lease_ms < 1)
        return -1;
    /* the parent of the store directory (NULL: $TMPDIR or /tmp), made in mc_bench_promotion */
    snprintf(o->dir, sizeof(o->dir), "%s", dir ? dir : "");
    return 0;
}

int mc_bench_promotion(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof(o));
    if (parse(argc, argv, &o) != 0) {
        usage(stderr);
        return 2;
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", o.dir);
    if (mc_proc_mkdtemp(o.dir, sizeof(o.dir), parent[0] ? parent : NULL, "mc_bench_promo") != 0) {
        fprintf(stderr, "promotion: cannot create a directory in %s: %s\n",
                parent[0] ? parent : "$TMPDIR", strerror(errno));
        return 1;
    }
    int rc = 0;
    for (int i = 0; o.keys > 0 && i < o.nsizes; i++) {
        if (o.holder && latency_case(&o, o.sizes[i], false) != 0)
            rc = 1;
        if (o.remote && latency_case(&o, o.sizes[i], true) != 0)
            rc = 1;
    }
    if (o.zipf_objects > 0) {
        double off = 0, on = 0;
        if (zipf_case(&o, false, &off, 0) != 0 || zipf_case(&o, true, &on, off) != 0)
            rc = 1;
    }
    if (o.osc_seconds > 0 && osc_case(&o) != 0)
        rc = 1;
    rm_store(o.dir);
    return rc;
}
