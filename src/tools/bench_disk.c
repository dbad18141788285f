/*
 * bench_disk.c - `mooncake_bench disk`: batched random reads through the LOCAL_DISK store
 * (src/client/disk_store.h), to be compared with fio on a file set of the same size
 * (scripts/bench/disk_vs_fio.sh runs both, alternating, and prints the ratio).
 *
 * For each value size (--sizes, default 64KiB,1MiB) the bench fills a store directory with
 * --data bytes of values of exactly that size (once: a later run with the same --dir reuses the
 * records after the store's own recovery scan), then, --runs times, reads --data bytes' worth of
 * uniformly random keys in batches of --batch keys (one mc_disk_store_read call each, the ring
 * keeping --qd reads in flight) into 4 KiB-aligned buffers: the path the promotion worker uses.
 * Every read is CRC-checked by the store, as in production.
 *
 * JSON per size: bench=disk, case=randread_<size>, ms (median run), p50_ms/p99_ms (per batch),
 * ops_per_s and bytes_per_s (median run), and with --ref <bytes/s> the reference and ratio.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/parse.h"
#include "mooncake/errors.h"
#include "tools/bench_util.h"

#define BATCH_BYTES_MAX (64ull << 20)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void rm_rf(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char p[4500];
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mooncake_bench disk [--dir DIR] [--data 1GiB] [--sizes 64KiB,1MiB]\n"
               "       [--runs 3] [--qd 32] [--batch 256] [--seed N] [--ref BYTES_PER_S]\n"
               "       [--keep]\n"
               "  --dir   directory on the disk under test (default: a new one under $TMPDIR\n"
               "          or /tmp, removed afterwards unless --keep)\n"
               "  --data  bytes of values per size, and bytes read per run\n"
               "  --ref   a reference throughput (e.g. fio's) to report a ratio against\n");
}

static int populate(struct mc_disk_store *s, uint64_t nvals, uint64_t vsize, uint64_t seed)
{
    /* Skip when a previous run left the same set behind. */
    struct mc_disk_usage u;
    mc_disk_store_usage(s, &u);
    char key[32];
    snprintf(key, sizeof(key), "v%" PRIu64, nvals - 1);
    struct mc_disk_record_info info;
    if (u.records == nvals && mc_disk_store_lookup(s, key, (uint32_t)strlen(key), &info) == 0 &&
        info.size == vsize)
        return 0;
    enum { B = 16 };
    char *vals = malloc(B * vsize);
    struct mc_disk_put p[B];
    char keys[B][32];
    if (!vals)
        return -1;
    uint64_t x = seed | 1;
    for (uint64_t i = 0; i < B * vsize / 8; i++)
        ((uint64_t *)vals)[i] = mc_bench_rand(&x);
    double t0 = now_ms();
    for (uint64_t i = 0; i < nvals; i += B) {
        size_t n = 0;
        for (; n < B && i + n < nvals; n++) {
            snprintf(keys[n], sizeof(keys[n]), "v%" PRIu64, i + n);
            char *v = vals + n * vsize;
            memcpy(v, &i, sizeof(i)); /* distinct values */
            p[n] = (struct mc_disk_put){
                keys[n], (uint32_t)strlen(keys[n]), 1, mc_crc32c(v, vsize), v, vsize};
        }
        int rc = mc_disk_store_append(s, p, n, NULL);
        if (rc != 0) {
            fprintf(stderr, "bench disk: append failed: %s\n", mc_strerror(rc));
            free(vals);
            return -1;
        }
    }
    double ms = now_ms() - t0;
    fprintf(stderr, "populated %" PRIu64 " x %" PRIu64 " B in %.0f ms (%.0f MB/s)\n", nvals, vsize,
            ms, (double)nvals * vsize / ms / 1e3);
    free(vals);
    return 0;
}

static int bench_size(const char *root, uint64_t data, uint64_t vsize, int runs, unsigned qd,
                      unsigned batch, uint64_t seed, double ref)
{
    char dir[4160];
    snprintf(dir, sizeof(dir), "%s/v%" PRIu64, root, vsize);
    uint64_t nvals = data / vsize;
    if (nvals == 0)
        nvals = 1;
    struct mc_disk_store_config cfg = {
        .path = dir,
        .capacity = nvals * (vsize + 8192) + (512ull << 20),
        .high_watermark = 1.0,
        .extent_size = 256ull << 20,
        .queue_depth = qd,
    };
    struct mc_disk_store *s = NULL;
    char err[512] = "";
    int rc = mc_disk_store_open(&cfg, &s, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "bench disk: %s\n", err[0] ? err : mc_strerror(rc));
        return 1;
    }
    int ret = 1;
    unsigned nb = batch;
    if ((uint64_t)nb * vsize > BATCH_BYTES_MAX)
        nb = (unsigned)(BATCH_BYTES_MAX / vsize);
    if (nb == 0)
        nb = 1;
    uint64_t reads = nvals; /* data bytes per run */
    size_t nbatches = (size_t)((reads + nb - 1) / nb);
    char *bufs = NULL;
    struct mc_disk_get *g = calloc(nb, sizeof(*g));
    char(*keys)[32] = calloc(nb, 32);
    double *run_ms = calloc((size_t)runs, sizeof(double));
    double *lat = calloc(nbatches * (size_t)runs, sizeof(double));
    size_t nlat = 0;
    if (posix_memalign((void **)&bufs, 4096, (size_t)nb * vsize) != 0)
        bufs = NULL;
    if (!g || !keys || !run_ms || !lat || !bufs || populate(s, nvals, vsize, seed) != 0)
        goto out;

    uint64_t rng = seed * 2654435761u + 7;
    for (int r = 0; r < runs; r++) {
        double t0 = now_ms();
        for (uint64_t done = 0; done < reads;) {
            unsigned n = reads - done < nb ? (unsigned)(reads - done) : nb;
            for (unsigned i = 0; i < n; i++) {
                snprintf(keys[i], 32, "v%" PRIu64, mc_bench_rand(&rng) % nvals);
                g[i] = (struct mc_disk_get){.key = keys[i],
                                            .key_len = (uint32_t)strlen(keys[i]),
                                            .buf = bufs + (size_t)i * vsize,
                                            .cap = vsize};
            }
            double b0 = now_ms();
            rc = mc_disk_store_read(s, g, n);
            lat[nlat++] = now_ms() - b0;
            if (rc != 0) {
                fprintf(stderr, "bench disk: read failed: %s\n", mc_strerror(rc));
                goto out;
            }
            done += n;
        }
        run_ms[r] = now_ms() - t0;
    }
    struct mc_bench_result res;
    char cname[64];
    if (vsize % (1u << 20) == 0)
        snprintf(cname, sizeof(cname), "randread_%" PRIu64 "MiB", vsize >> 20);
    else if (vsize % 1024 == 0)
        snprintf(cname, sizeof(cname), "randread_%" PRIu64 "KiB", vsize >> 10);
    else
        snprintf(cname, sizeof(cname), "randread_%" PRIu64 "B", vsize);
    mc_bench_result_init(&res, "disk", cname);
    res.runs = runs;
    res.ms = mc_bench_median(run_ms, (size_t)runs);
    res.p50_ms = mc_bench_percentile(lat, nlat, 50);
    res.p99_ms = mc_bench_percentile(lat, nlat, 99);
    res.ops_per_s = (double)reads / (res.ms / 1e3);
    res.bytes_per_s = (double)reads * vsize / (res.ms / 1e3);
    if (ref > 0)
        mc_bench_set_ref(&res, ref, res.bytes_per_s / ref);
    mc_bench_add_num(&res, "value_bytes", (double)vsize);
    mc_bench_add_num(&res, "queue_depth", qd);
    mc_bench_add_num(&res, "batch", nb);
    mc_bench_add_num(&res, "data_bytes", (double)nvals * vsize);
    struct mc_disk_usage u;
    mc_disk_store_usage(s, &u);
    mc_bench_add_num(&res, "registered_buffers", u.registered_buffers);
    mc_bench_add_num(&res, "registered_files", u.registered_files);
    mc_bench_emit(&res);
    ret = 0;
out:
    mc_disk_store_close(s);
    free(bufs);
    free(g);
    free(keys);
    free(run_ms);
    free(lat);
    return ret;
}

int mc_bench_disk(int argc, char **argv)
{
    const char *dir = NULL;
    uint64_t data = 1ull << 30, sizes[8] = {64 << 10, 1 << 20};
    int nsizes = 2, runs = 3, keep = 0;
    unsigned qd = 32, batch = 256;
    uint64_t seed = 1;
    double ref = 0;
    char err[128];
    static const struct option opts[] = {{"dir", required_argument, 0, 'd'},
                                         {"data", required_argument, 0, 'D'},
                                         {"sizes", required_argument, 0, 's'},
                                         {"runs", required_argument, 0, 'r'},
                                         {"qd", required_argument, 0, 'q'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"seed", required_argument, 0, 'S'},
                                         {"ref", required_argument, 0, 'R'},
                                         {"keep", no_argument, 0, 'k'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            dir = optarg;
            break;
        case 'D':
            if (mc_parse_size(optarg, &data, err, sizeof(err)) != 0 || data == 0) {
                fprintf(stderr, "bench disk: --data: %s\n", err);
                return 2;
            }
            break;
        case 's':
            nsizes = mc_bench_parse_sizes(optarg, sizes, 8);
            if (nsizes <= 0) {
                fprintf(stderr, "bench disk: bad --sizes '%s'\n", optarg);
                return 2;
            }
            break;
        case 'r':
            runs = atoi(optarg);
            break;
        case 'q':
            qd = (unsigned)atoi(optarg);
            break;
        case 'b':
            batch = (unsigned)atoi(optarg);
            break;
        case 'S':
            seed = strtoull(optarg, NULL, 10);
            break;
        case 'R':
            ref = atof(optarg);
            break;
        case 'k':
            keep = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (runs < 1 || qd < 1 || batch < 1) {
        usage(stderr);
        return 2;
    }
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] == 0 || sizes[i] > (1ull << 30)) {
            fprintf(stderr, "bench disk: value sizes must be 1 B .. 1 GiB\n");
            return 2;
        }
    mc_log_set_level(MC_LOG_WARN);
    char tmp[4096];
    int made = 0;
    if (!dir) {
        const char *t = getenv("TMPDIR");
        snprintf(tmp, sizeof(tmp), "%s/mc_bench_disk_XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmp)) {
            perror("bench disk: mkdtemp");
            return 1;
        }
        dir = tmp;
        made = 1;
    }
    if (!made && mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "bench disk: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < nsizes && rc == 0; i++)
        rc = bench_size(dir, data, sizes[i], runs, qd, batch, seed, ref);
    if (!keep) {
        char sub[4160];
        for (int i = 0; i < nsizes; i++) {
            snprintf(sub, sizeof(sub), "%s/v%" PRIu64, dir, sizes[i]);
            rm_rf(sub);
        }
        if (made)
            rmdir(dir);
    }
    return rc;
}
