/*
 * bench_promotion_zipf.c - `mooncake_bench promotion`'s Zipf runs: Get throughput over a
 * Zipf-distributed key set with promotion off, then on (described in bench_promotion.c).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/parse.h"
#include "mooncake/client.h"
#include "tools/bench_util.h"
#include "tools/proc_harness.h"
#include "tools/bench_promotion.h"

/* ---- zipf ---------------------------------------------------------------------------------- */

struct zipf_ctx {
    const struct promo_opts *o;
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
    uint64_t rs = z->o->seed ^ (uint64_t)(uintptr_t)&rs;
    size_t cap = (z->o->zipf_size + 4095) / 4096 * 4096;
    uint8_t *buf = aligned_alloc(4096, cap);
    char key[64];
    while (buf && atomic_load(&z->phase) < 2) {
        snprintf(key, sizeof(key), "z-%d", zipf_draw(z, &rs));
        double ms;
        int tier = -1;
        int64_t n = mc_promo_timed_get(z->c, key, buf, cap, &ms, &tier);
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

int mc_promo_zipf_case(const struct promo_opts *o, bool promotion, double *ops_out, double ref_ops)
{
    struct promo_cluster cl = {.master.out_fd = -1, .daemon.out_fd = -1};
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
    if (!cdf || !perm || !buf || !z.lat || mc_promo_start_master(o, &cl, promotion) != 0 ||
        mc_promo_open_client(cl.rpc, seg, disk, data * 2 + (1ull << 30), &c) != 0)
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
    uint64_t rs = o->seed;
    for (int i = n - 1; i > 0; i--) { /* the same permutation in both runs */
        int j = (int)(mc_bench_rand(&rs) % (uint64_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    uint64_t t0 = mc_now_ms();
    if (mc_promo_put_keys(c, "z", n, o->zipf_size, buf) != 0)
        goto out;
    fprintf(stderr, "promotion: zipf/%s: %d keys put in %.1f s\n", promotion ? "on" : "off", n,
            (double)(mc_now_ms() - t0) / 1e3);
    int threads = o->threads < 1 ? 1 : o->threads > 64 ? 64 : o->threads;
    for (nth = 0; nth < threads; nth++)
        if (pthread_create(&th[nth], NULL, zipf_reader, &z) != 0)
            break;
    sleep((unsigned)o->warmup);
    double completed0 = mc_promo_metric(&cl, "master_promotion_completed_total");
    uint64_t m0 = mc_promo_now_us();
    atomic_store(&z.phase, 1);
    sleep((unsigned)o->seconds);
    atomic_store(&z.phase, 2);
    double secs = (double)(mc_promo_now_us() - m0) / 1e6;
    double completed = mc_promo_metric(&cl, "master_promotion_completed_total") - completed0;
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
    mc_promo_stop(&cl.master);
    mc_promo_rm_store(disk);
    free(cdf);
    free(perm);
    free(buf);
    free(z.lat);
    return rc;
}
