/*
 * bench_alloc.c - `mooncake_bench alloc`: the per-segment offset allocator (offset_alloc.c).
 *
 * Cases (each run --runs times, median reported):
 *   uniform_<size>   every request the same size (the --sizes list, default 32 B .. 4 MiB);
 *   pow2_jitter      powers of two from 64 B to 1 MiB, ±17 bytes;
 *   random           uniformly random sizes in [1 KiB, 1 MiB].
 * Each run fills a fresh allocator until the first failure (utilisation = requested bytes held
 * at that moment / capacity; the fill rate gives ns per allocation), then churns: frees a random
 * live allocation and allocates a new one of the case's size distribution, --ops times (the
 * steady-state alloc+free rate). Capacity is sized so a fill takes about --max-allocs
 * allocations of the mean size; after the churn it fills again to the first failure
 * (utilisation_after_churn: the figure that reflects fragmentation). Upstream's published figures
 * (same algorithm family): ~100-550 ns per allocation, utilisation 1.0 uniform, >= 0.84 random;
 * they are printed as `published_ns` for orientation, not as a side-by-side reference run.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "master/offset_alloc.h"
#include "mooncake/errors.h"
#include "tools/bench_util.h"

enum dist { DIST_UNIFORM, DIST_POW2_JITTER, DIST_RANDOM };

struct bcase {
    char name[64];
    enum dist dist;
    uint64_t size;
};

struct live {
    uint32_t handle;
    uint64_t size;
};

static uint64_t draw(const struct bcase *c, uint64_t *rng)
{
    switch (c->dist) {
    case DIST_UNIFORM:
        return c->size;
    case DIST_POW2_JITTER: {
        uint64_t p = 64ull << (mc_bench_rand(rng) % 15); /* 64 B .. 1 MiB */
        int64_t j = (int64_t)(mc_bench_rand(rng) % 35) - 17;
        return (uint64_t)((int64_t)p + j);
    }
    case DIST_RANDOM:
    default:
        return 1024 + mc_bench_rand(rng) % ((1 << 20) - 1024 + 1);
    }
}

static uint64_t mean_size(const struct bcase *c)
{
    switch (c->dist) {
    case DIST_UNIFORM:
        return c->size;
    case DIST_POW2_JITTER:
        return ((1u << 21) - 64) / 15; /* mean of 64 << k, k in 0..14 */
    default:
        return (1024 + (1 << 20)) / 2;
    }
}

struct run_out {
    double fill_ns_per_alloc;
    double churn_ops_per_s;
    double util;
    double churn_util;
};

static int run_once(const struct bcase *c, uint64_t max_allocs, uint64_t ops, uint64_t seed,
                    struct run_out *o)
{
    uint64_t mean = mean_size(c);
    uint64_t cap = mean && max_allocs > (64ull << 30) / mean ? (64ull << 30) : mean * max_allocs;
    if (cap > (64ull << 30))
        cap = 64ull << 30;
    if (cap < (1 << 20))
        cap = 1 << 20;
    struct mc_offset_alloc *a = mc_offset_alloc_new(cap, 0);
    uint64_t limit = max_allocs * 4; /* the fill stops at the first failure, not here */
    struct live *lv = malloc(sizeof(*lv) * (limit + 1));
    if (!a || !lv) {
        mc_offset_alloc_free(a);
        free(lv);
        return -1;
    }
    uint64_t rng = seed, n = 0, held = 0;
    uint64_t t0 = mc_now_ns();
    while (n < limit) {
        uint64_t size = draw(c, &rng);
        struct mc_oa_allocation al;
        if (mc_offset_alloc_alloc(a, size, &al) != MC_OK)
            break;
        lv[n++] = (struct live){al.handle, size};
        held += size;
    }
    uint64_t t1 = mc_now_ns();
    o->fill_ns_per_alloc = n ? (double)(t1 - t0) / (double)n : 0;
    o->util = (double)held / (double)cap;
    uint64_t done = 0;
    t0 = mc_now_ns();
    for (uint64_t k = 0; k < ops && n; k++) {
        uint64_t i = mc_bench_rand(&rng) % n;
        mc_offset_alloc_release(a, lv[i].handle);
        held -= lv[i].size;
        uint64_t size = draw(c, &rng);
        struct mc_oa_allocation al;
        if (mc_offset_alloc_alloc(a, size, &al) == MC_OK) {
            lv[i] = (struct live){al.handle, size};
            held += size;
        } else {
            lv[i] = lv[--n];
        }
        done++;
    }
    t1 = mc_now_ns();
    o->churn_ops_per_s = t1 > t0 ? (double)done * 1e9 / (double)(t1 - t0) : 0;
    /* Fragmented state: fill again until the first failure. */
    while (n < limit) {
        uint64_t size = draw(c, &rng);
        struct mc_oa_allocation al;
        if (mc_offset_alloc_alloc(a, size, &al) != MC_OK)
            break;
        lv[n++] = (struct live){al.handle, size};
        held += size;
    }
    o->churn_util = (double)held / (double)cap;
    free(lv);
    mc_offset_alloc_free(a);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: mooncake_bench alloc [--sizes 32,4096,...] [--runs N] [--seed S]\n"
                    "                            [--max-allocs N] [--ops N]\n");
}

int mc_bench_alloc(int argc, char **argv)
{
    uint64_t sizes[16] = {32, 512, 4096, 65536, 1 << 20, 4 << 20};
    int nsizes = 6, runs = 3;
    uint64_t seed = 0x9e3779b97f4a7c15ull, max_allocs = 1000000, ops = 1000000;
    static const struct option opts[] = {
        {"sizes", required_argument, 0, 's'},
        {"runs", required_argument, 0, 'r'},
        {"seed", required_argument, 0, 'S'},
        {"max-allocs", required_argument, 0, 'm'},
        {"ops", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            nsizes = mc_bench_parse_sizes(optarg, sizes, 16);
            if (nsizes <= 0) {
                usage();
                return 2;
            }
            break;
        case 'r':
            runs = atoi(optarg);
            break;
        case 'S':
            seed = strtoull(optarg, NULL, 0);
            break;
        case 'm':
            max_allocs = strtoull(optarg, NULL, 0);
            break;
        case 'o':
            ops = strtoull(optarg, NULL, 0);
            break;
        case 'h':
            usage();
            return 0;
        default:
            usage();
            return 2;
        }
    }
    /* max_allocs bounds the live-allocation table (16 B each, 4x over-provisioned): keep
     * its size computation far from wrapping */
    if (runs < 1 || runs > 1000 || max_allocs < 1 || max_allocs > (1ull << 32) || seed == 0) {
        usage();
        return 2;
    }
    struct bcase cases[20];
    int nc = 0;
    for (int i = 0; i < nsizes && nc < 18; i++) {
        cases[nc] = (struct bcase){.dist = DIST_UNIFORM, .size = sizes[i]};
        snprintf(cases[nc].name, sizeof(cases[nc].name), "uniform_%llu",
                 (unsigned long long)sizes[i]);
        nc++;
    }
    cases[nc++] = (struct bcase){.name = "pow2_jitter", .dist = DIST_POW2_JITTER};
    cases[nc++] = (struct bcase){.name = "random", .dist = DIST_RANDOM};

    double *fill = calloc((size_t)runs, sizeof(double));
    double *churn = calloc((size_t)runs, sizeof(double));
    double *util = calloc((size_t)runs, sizeof(double));
    double *cutil = calloc((size_t)runs, sizeof(double));
    int rc = 0;
    for (int c = 0; c < nc; c++) {
        for (int r = 0; r < runs; r++) {
            struct run_out o;
            if (run_once(&cases[c], max_allocs, ops, seed + (uint64_t)r, &o) != 0) {
                rc = 1;
                goto out;
            }
            fill[r] = o.fill_ns_per_alloc;
            churn[r] = o.churn_ops_per_s;
            util[r] = o.util;
            cutil[r] = o.churn_util;
        }
        struct mc_bench_result res;
        mc_bench_result_init(&res, "alloc", cases[c].name);
        res.runs = runs;
        double ns = mc_bench_median(fill, (size_t)runs);
        double p99 = mc_bench_percentile(fill, (size_t)runs, 99);
        res.ms = ns / 1e6;
        res.p50_ms = ns / 1e6;
        res.p99_ms = p99 / 1e6;
        res.ops_per_s = ns > 0 ? 1e9 / ns : 0;
        double ch_ops = mc_bench_median(churn, (size_t)runs);
        double u = mc_bench_median(util, (size_t)runs);
        mc_bench_add_num(&res, "ns_per_alloc", ns);
        mc_bench_add_num(&res, "churn_ops_per_s", ch_ops);
        mc_bench_add_num(&res, "utilisation", u);
        mc_bench_add_num(&res, "utilisation_after_churn", mc_bench_median(cutil, (size_t)runs));
        mc_bench_add_str(&res, "published_ns", "100-550");
        mc_bench_emit(&res);
    }
out:
    free(fill);
    free(churn);
    free(util);
    free(cutil);
    return rc;
}
