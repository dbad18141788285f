/*
 * bench_disk_write.c - `mooncake_bench disk --write`: batched appends (the offload path). What
 * it measures and reports: bench_disk.c.
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

/* ---- writes (the offload path) -------------------------------------------------------------- */

/* Appends values of vsize bytes in batches (as the offload worker does: one append call per
 * batch, CRC-checked by the store) into a store of o->data bytes, which evicts its oldest
 * extents once full. */
int mc_bench_disk_write(const char *root, const struct disk_opts *o, uint64_t vsize)
{
    char dir[4160];
    snprintf(dir, sizeof(dir), "%s/w%" PRIu64, root, vsize);
    if (!o->keep)
        rm_rf(dir);
    uint64_t cap = o->data < (256ull << 20) ? 256ull << 20 : o->data;
    struct mc_disk_store_config cfg = {
        .path = dir, .capacity = cap, .extent_size = 64ull << 20, .queue_depth = o->qd};
    struct mc_disk_store *s = open_store(&cfg);
    if (!s)
        return 1;
    unsigned nb = o->batch;
    if ((uint64_t)nb * vsize > BATCH_BYTES_MAX)
        nb = (unsigned)(BATCH_BYTES_MAX / vsize);
    if (nb == 0)
        nb = 1;
    int ret = 1;
    char *vals = malloc((size_t)nb * vsize);
    struct mc_disk_put *p = calloc(nb, sizeof(*p));
    char(*keys)[32] = calloc(nb, 32);
    uint32_t *crcs = calloc(nb, sizeof(*crcs));
    double *run_bps = calloc((size_t)o->runs, sizeof(double));
    double *run_ms = calloc((size_t)o->runs, sizeof(double));
    double *lat = calloc(1u << 20, sizeof(double));
    size_t nlat = 0;
    if (!vals || !p || !keys || !crcs || !run_bps || !run_ms || !lat)
        goto out;
    uint64_t x = o->seed | 1;
    for (uint64_t i = 0; i < (uint64_t)nb * vsize / 8; i++)
        ((uint64_t *)vals)[i] = mc_bench_rand(&x);
    for (unsigned i = 0; i < nb; i++)
        crcs[i] = mc_crc32c(vals + (size_t)i * vsize, vsize);
    uint64_t seq = 0, total = 0, disk_total = 0;
    struct mc_disk_usage u0;
    mc_disk_store_usage(s, &u0);
    const uint64_t unit = u0.record_unit ? u0.record_unit : MC_DISK_BLOCK;
    unsigned tag = (unsigned)getpid(); /* fresh keys even over a kept store */
    for (int r = 0; r < o->runs; r++) {
        double t0 = now_ms(), el = 0;
        uint64_t bytes = 0;
        while (o->seconds > 0 ? el < o->seconds * 1e3 : bytes < o->data) {
            for (unsigned i = 0; i < nb; i++) {
                snprintf(keys[i], 32, "w%x_%" PRIu64, tag, seq++);
                p[i] = (struct mc_disk_put){keys[i], (uint32_t)strlen(keys[i]), 1,
                                            crcs[i], vals + (size_t)i * vsize,  vsize};
                /* the record on disk: header (64 B + key) and value, each padded to the unit */
                disk_total +=
                    (64 + p[i].key_len + unit - 1) / unit * unit + (vsize + unit - 1) / unit * unit;
            }
            double b0 = now_ms();
            int rc = mc_disk_store_append(s, p, nb, NULL);
            double b1 = now_ms();
            if (nlat < (1u << 20))
                lat[nlat++] = b1 - b0;
            if (rc != 0) {
                fprintf(stderr, "bench disk: append failed: %s\n", mc_strerror(rc));
                goto out;
            }
            bytes += (uint64_t)nb * vsize;
            el = b1 - t0;
        }
        run_ms[r] = now_ms() - t0;
        run_bps[r] = (double)bytes / (run_ms[r] / 1e3);
        total += bytes;
    }
    struct mc_bench_result res;
    char cname[64];
    case_name(cname, sizeof(cname), "write", vsize);
    mc_bench_result_init(&res, "disk", cname);
    res.runs = o->runs;
    res.ms = mc_bench_median(run_ms, (size_t)o->runs);
    res.p50_ms = mc_bench_percentile(lat, nlat, 50);
    res.p99_ms = mc_bench_percentile(lat, nlat, 99);
    res.bytes_per_s = mc_bench_median(run_bps, (size_t)o->runs);
    res.ops_per_s = res.bytes_per_s / (double)vsize;
    if (o->ref > 0)
        mc_bench_set_ref(&res, o->ref, res.bytes_per_s / o->ref);
    mc_bench_add_num(&res, "value_bytes", (double)vsize);
    mc_bench_add_num(&res, "queue_depth", o->qd);
    mc_bench_add_num(&res, "batch", nb);
    mc_bench_add_num(&res, "bytes_written", (double)total);
    mc_bench_add_num(&res, "disk_bytes_written", (double)disk_total);
    mc_bench_add_num(&res, "disk_bytes_per_s",
                     total ? res.bytes_per_s * (double)disk_total / (double)total : 0);
    if (o->seconds > 0)
        mc_bench_add_num(&res, "seconds_per_run", o->seconds);
    struct mc_disk_usage u;
    mc_disk_store_usage(s, &u);
    /* what a value costs on disk in this store's layout (record unit, header, padding) */
    mc_bench_add_num(&res, "record_unit", (double)unit);
    mc_bench_add_num(&res, "disk_bytes_per_value",
                     u.records ? (double)u.live_bytes / (double)u.records : 0);
    mc_bench_add_num(&res, "disk_ratio",
                     u.records ? (double)u.live_bytes / (double)u.records / (double)vsize : 0);
    mc_bench_add_num(&res, "evicted_extents", (double)u.evicted_extents);
    mc_bench_add_num(&res, "recycled_extents", (double)u.recycled_extents);
    mc_bench_add_num(&res, "window_maps", (double)u.window_maps);
    /* the store's own write I/O: what fio is set to for a like-for-like reference */
    uint64_t calls = nlat ? nlat : 1, dios = u.write_ios - u0.write_ios;
    mc_bench_add_num(&res, "write_ios", (double)dios);
    mc_bench_add_num(&res, "write_io_bytes",
                     dios ? (double)(u.write_bytes - u0.write_bytes) / (double)dios : 0);
    mc_bench_add_num(&res, "write_ios_per_call", (double)dios / (double)calls);
    mc_bench_add_num(&res, "filler_bytes", (double)(u.filler_bytes - u0.filler_bytes));
    mc_bench_emit(&res);
    ret = 0;
out:
    mc_disk_store_close(s);
    if (!o->keep)
        rm_rf(dir);
    free(vals);
    free(p);
    free(keys);
    free(crcs);
    free(run_bps);
    free(run_ms);
    free(lat);
    return ret;
}
