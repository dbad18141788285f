/*
 * bench_disk_evict.c - `mooncake_bench disk --evict`: the cost of an eviction with second
 * chance. What it measures and reports: bench_disk.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"
#include "tools/bench_disk.h"
#include "tools/bench_util.h"

/* --evict: see the header. */
int mc_bench_disk_evict(const char *root, const struct disk_opts *o, uint64_t vsize)
{
    char dir[4160];
    snprintf(dir, sizeof(dir), "%s/e%" PRIu64, root, vsize);
    rm_rf(dir);
    const uint64_t ext = 64ull << 20;
    if (vsize > ext / 16) {
        fprintf(stderr, "bench disk: --evict takes values of at most 4 MiB (64 MiB extents)\n");
        return 2;
    }
    struct mc_disk_store_config cfg = {.path = dir,
                                       .capacity = 8 * ext,
                                       .high_watermark = 0.5,
                                       .extent_size = ext,
                                       .queue_depth = o->qd};
    struct mc_disk_store *s = open_store(&cfg);
    if (!s)
        return 1;
    enum { B = 16 };
    uint64_t per_ext = ext / (vsize + 2 * MC_DISK_BLOCK) + 1; /* an extent's worth, about */
    int ret = 1, n = 0;
    char *vals = NULL, *rbuf = NULL;
    struct mc_disk_put p[B];
    char keys[B][32], key[32];
    double *ms = calloc((size_t)o->runs, sizeof(double));
    uint64_t *moved = calloc((size_t)o->runs, sizeof(uint64_t)), seq = 0;
    if (!ms || !moved || posix_memalign((void **)&vals, MC_DISK_BLOCK, B * vsize) != 0) {
        vals = NULL;
        goto out;
    }
    if (posix_memalign((void **)&rbuf, MC_DISK_BLOCK, vsize) != 0) {
        rbuf = NULL;
        goto out;
    }
    uint64_t x = o->seed | 1;
    for (uint64_t i = 0; i < B * vsize / 8; i++)
        ((uint64_t *)vals)[i] = mc_bench_rand(&x);
    uint32_t crc[B];
    for (int i = 0; i < B; i++)
        crc[i] = mc_crc32c(vals + (size_t)i * vsize, vsize);
    while (n < o->runs) {
        for (uint64_t k = 0; k < per_ext && n < o->runs; k += B) {
            for (int i = 0; i < B; i++) {
                snprintf(keys[i], sizeof(keys[i]), "e%" PRIu64, seq++);
                p[i] = (struct mc_disk_put){keys[i], (uint32_t)strlen(keys[i]), 1,
                                            crc[i],  vals + (size_t)i * vsize,  vsize};
            }
            struct mc_disk_usage u0, u1;
            mc_disk_store_usage(s, &u0);
            double t0 = now_ms();
            int rc = mc_disk_store_append(s, p, B, NULL);
            double t1 = now_ms();
            if (rc != 0) {
                fprintf(stderr, "bench disk: append failed: %s\n", mc_strerror(rc));
                goto out;
            }
            mc_disk_store_usage(s, &u1);
            if (u1.evicted_extents > u0.evicted_extents) {
                ms[n] = t1 - t0;
                moved[n++] = u1.reinserted_records - u0.reinserted_records;
            }
        }
        /* every live record read once: all of them are "accessed" */
        for (uint64_t i = 0; i < seq; i++) {
            snprintf(key, sizeof(key), "e%" PRIu64, i);
            struct mc_disk_get g = {
                .key = key, .key_len = (uint32_t)strlen(key), .buf = rbuf, .cap = vsize};
            mc_disk_store_read(s, &g, 1);
            if (g.result != 0 && g.result != MC_ERR_OBJECT_NOT_FOUND) {
                fprintf(stderr, "bench disk: read failed: %s\n", mc_strerror(g.result));
                goto out;
            }
        }
    }
    double tot_ms = 0, mv = 0;
    for (int i = 0; i < n; i++) {
        tot_ms += ms[i];
        mv += (double)moved[i];
    }
    struct mc_bench_result res;
    char cname[64];
    case_name(cname, sizeof(cname), "evict", vsize);
    mc_bench_result_init(&res, "disk", cname);
    res.runs = n;
    res.ms = res.p50_ms = mc_bench_percentile(ms, (size_t)n, 50);
    res.p99_ms = mc_bench_percentile(ms, (size_t)n, 99);
    res.ops_per_s = tot_ms > 0 ? n / (tot_ms / 1e3) : 0;
    double rec = (double)((vsize + 2 * MC_DISK_BLOCK - 1) / MC_DISK_BLOCK * MC_DISK_BLOCK);
    res.bytes_per_s = tot_ms > 0 ? mv * rec / (tot_ms / 1e3) : 0;
    mc_bench_add_num(&res, "value_bytes", (double)vsize);
    mc_bench_add_num(&res, "queue_depth", o->qd);
    mc_bench_add_num(&res, "extent_bytes", (double)ext);
    mc_bench_add_num(&res, "moved_records", n ? mv / n : 0);
    mc_bench_add_num(&res, "moved_bytes", n ? mv / n * rec : 0);
    mc_bench_add_num(&res, "moved_bytes_per_s", res.bytes_per_s);
    mc_bench_emit(&res);
    ret = 0;
out:
    mc_disk_store_close(s);
    rm_rf(dir);
    free(vals);
    free(rbuf);
    free(ms);
    free(moved);
    return ret;
}
