/*
 * bench_transfer.c - `mooncake_bench transfer`: Put and Get throughput and latency.
 *
 * Two placements, each measured for every --sizes value (default 4KiB,64KiB,1MiB,4MiB,16MiB):
 *   same     one process: a client whose own DRAM segment holds the object (the replica is
 *            local, so Put and Get are a master round trip plus a memcpy);
 *   between  two processes: a client without DRAM in this process, the object on a
 *            mooncake_client daemon's segment, bytes over the TCP peer protocol on loopback.
 * Unless --master is given, the bench starts its own mooncake_master and (for "between") a
 * mooncake_client daemon from the directory of this executable (or --bin), on free loopback
 * ports, and stops them at the end. The same-process client is closed before the daemon
 * starts, so every "between" byte crosses a process boundary.
 *
 * Method. Buffers are allocated and touched before timing (warm). Put: each timed call stores
 * a new key (a put of an existing key is a no-op) and the key is removed, untimed, right after,
 * so the segment never fills. Get: one key is stored once and read --runs times into the same
 * buffer; every read is checked for length and the first one byte by byte. A few untimed warm-up
 * operations precede each series. Per case: median/p50/p99 latency over the calls,
 * ops_per_s = runs / total time, bytes_per_s = runs * size / total time.
 *
 * Reference: for the same-process 4 MiB case, a plain memcpy of 4 MiB between the same warm
 * buffers, timed the same way; the put and get lines carry ref (memcpy bytes/s) and ratio
 * (ours / memcpy, from the means), and ref_p50_ms and ratio_p50 (the memcpy's
 * median call over ours: on a loaded machine a preempted call moves the means).
 *
 * Cold sources (--working_set W > 0): the Get series stores K = W / size keys and reads them in
 * rotation, so with W past the last-level cache each Get's source is cold as a served value's
 * is; the memcpy reference then copies 4 MiB slices of a W-byte buffer in the same rotation.
 * Case names gain "/cold" and the JSON carries working_set. Put series are unchanged.
 * scripts/bench/transfer_vs_iperf.sh puts the between-process lines beside iperf3 on loopback.
 *
 * Batches (--batch N, N > 1): every timed call is mc_batch_put of N new keys (removed, untimed,
 * right after) or mc_batch_get of the same N keys, each of the given size; latencies are per
 * batch call, ops_per_s counts keys and bytes_per_s their bytes. Case names gain "/bN".
 *
 * Checksums: the reading client verifies every value's CRC32C unless --checksums=off (the
 * library's default is on); --checksums=both measures every series with them off, then on, in
 * the same run, the case names then ending in /crc_off and /crc_on.
 *
 * JSON: bench=transfer case=<op>/<mode>/<size>[/bN][/crc_off|/crc_on] runs ms p50_ms p99_ms
 * ops_per_s bytes_per_s op mode size batch checksums [ref ratio].
 */
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/parse.h"
#include "mooncake/client.h"
#include "tools/bench_util.h"
#include "tools/proc_harness.h"

#define MAX_SIZES 16
#define REF_SIZE (4u << 20)

struct opts {
    uint64_t sizes[MAX_SIZES];
    int nsizes;
    int runs;  /* 0 = by size */
    int batch; /* keys per call (1 = single Put/Get) */
    bool same, between;
    const char *master; /* external master; NULL = start one */
    int checksums;      /* the reading client verifies CRC32C: 0 off, 1 on, 2 both (A/B) */
    char bin[PATH_MAX];
    uint64_t segment_size;
    uint64_t working_set; /* > 0: Gets and the memcpy reference rotate over this many bytes */
};

/* --protocol and --host: the bench's clients and its daemon (rdma needs the NIC's address) */
static const char *g_protocol = "tcp", *g_host = "127.0.0.1";

/* ---- child processes (tools/proc_harness.h) ------------------------------------------------ */

/* Starts mooncake_master on free loopback ports; fills addr with its RPC "127.0.0.1:PORT". */
static int start_master(const struct opts *o, struct mc_proc *c, char *addr, size_t cap)
{
    char path[PATH_MAX + 32];
    const char *argv[] = {path,
                          "--rpc_port=0",
                          "--rpc_address=127.0.0.1",
                          "--metrics_port=0",
                          "--metrics_host=127.0.0.1",
                          "--log_level=warn",
                          NULL};
    struct mc_proc_ready r;

    snprintf(path, sizeof(path), "%s/mooncake_master", o->bin);
    if (mc_proc_start(c, argv, NULL, MC_PROC_READY_MASTER, &r, 20000) != 0) {
        fprintf(stderr, "transfer: could not start %s\n", path);
        return -1;
    }
    snprintf(addr, cap, "127.0.0.1:%u", r.rpc_port);
    return 0;
}

static int start_daemon(const struct opts *o, const char *master, struct mc_proc *c, char *ep,
                        size_t cap)
{
    char path[PATH_MAX + 32], m[128], seg[64], host[128], proto[32];
    const char *argv[] = {path, m, host, "--data_port=0", seg, "--log_level=warn", proto, NULL};
    struct mc_proc_ready r;

    snprintf(path, sizeof(path), "%s/mooncake_client", o->bin);
    snprintf(m, sizeof(m), "--master=%s", master);
    snprintf(seg, sizeof(seg), "--segment_size=%llu", (unsigned long long)o->segment_size);
    snprintf(host, sizeof(host), "--host=%s", g_host);
    snprintf(proto, sizeof(proto), "--protocol=%s", g_protocol);
    if (mc_proc_start(c, argv, NULL, MC_PROC_READY_DAEMON, &r, 20000) != 0) {
        fprintf(stderr, "transfer: could not start %s\n", path);
        return -1;
    }
    snprintf(ep, cap, "%s", r.endpoint);
    return 0;
}

/* ---- measurement --------------------------------------------------------------------------- */

static int runs_for(const struct opts *o, uint64_t size)
{
    uint64_t r;

    if (o->runs > 0)
        return o->runs;
    r = (512ull << 20) / size; /* ~512 MiB per series */
    return r < 20 ? 20 : r > 2000 ? 2000 : (int)r;
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

/* The reading client's checksums setting for the series being reported, and whether case
 * names carry it (--checksums both). */
static bool g_crc = true, g_crc_tagged;
/* --working_set: the bytes the Get series and the memcpy reference rotate over (0: warm) */
static uint64_t g_cold;
/* the memcpy reference's median call (ms) for the series being reported; 0: none */
static double g_ref_p50;

static void report(const char *op, const char *mode, uint64_t size, int batch, double *lat_ms,
                   int n, double ref)
{
    const char *crc = !g_crc_tagged ? "" : g_crc ? "/crc_on" : "/crc_off";
    struct mc_bench_result r;
    char name[96], sz[32], tag[32];
    double total = 0;

    for (int i = 0; i < n; i++)
        total += lat_ms[i];
    snprintf(tag, sizeof(tag), "%s%s", g_cold && !strcmp(op, "get") ? "/cold" : "", crc);
    size_name(size, sz, sizeof(sz));
    if (batch > 1)
        snprintf(name, sizeof(name), "%s/%s/%s/b%d%s", op, mode, sz, batch, tag);
    else
        snprintf(name, sizeof(name), "%s/%s/%s%s", op, mode, sz, tag);
    mc_bench_result_init(&r, "transfer", name);
    r.runs = n;
    r.ops_per_s = total > 0 ? (double)n * batch / (total / 1e3) : 0;
    r.bytes_per_s = r.ops_per_s * (double)size;
    r.p99_ms = mc_bench_percentile(lat_ms, (size_t)n, 99);
    r.p50_ms = mc_bench_percentile(lat_ms, (size_t)n, 50);
    r.ms = mc_bench_median(lat_ms, (size_t)n);
    if (ref > 0)
        mc_bench_set_ref(&r, ref, r.bytes_per_s / ref);
    if (ref > 0 && g_ref_p50 > 0 && r.p50_ms > 0) {
        /* medians beside the means: a preempted call moves a mean, not a median */
        mc_bench_add_num(&r, "ref_p50_ms", g_ref_p50);
        mc_bench_add_num(&r, "ratio_p50", g_ref_p50 / r.p50_ms);
    }
    mc_bench_add_str(&r, "op", op);
    mc_bench_add_str(&r, "mode", mode);
    mc_bench_add_num(&r, "size", (double)size);
    mc_bench_add_num(&r, "batch", batch);
    mc_bench_add_num(&r, "checksums", g_crc ? 1 : 0);
    if (g_cold && !strcmp(op, "get"))
        mc_bench_add_num(&r, "working_set", (double)g_cold);
    mc_bench_emit(&r);
}

/* memcpy of size bytes into dst from slice i % nsrc of src (nsrc slices of size bytes: 1 = the
 * same warm buffer each time), timed like the store: bytes/s. */
static double memcpy_ref(uint8_t *dst, const uint8_t *src, size_t nsrc, uint64_t size, int runs,
                         double *lat)
{
    double total = 0;

    for (int i = 0; i < 3; i++)
        memcpy(dst, src + (size_t)i % nsrc * size, size);
    for (int i = 0; i < runs; i++) {
        const uint8_t *from = src + (size_t)(i + 3) % nsrc * size;
        uint64_t t0 = mc_now_ns();
        memcpy(dst, from, size);
        __asm__ volatile("" : : "r"(dst) : "memory"); /* keep the copy */
        lat[i] = (double)(mc_now_ns() - t0) / 1e6;
        total += lat[i];
    }
    return total > 0 ? (double)size * runs / (total / 1e3) : 0;
}

/* The name of the Get series' key number k. */
static void get_key(char *key, size_t cap, const char *mode, uint64_t size, size_t k)
{
    snprintf(key, cap, "bench-transfer-%s-%llu-get-%zu", mode, (unsigned long long)size, k);
}

/* Put and Get series of every size through client c; placement preferred on segment pref. */
static int measure(const struct opts *o, struct mc_client *c, const char *mode, const char *pref)
{
    struct mc_replicate_config rc;
    const char *prefs[1] = {pref};
    int status = 0;

    mc_replicate_config_init(&rc);
    if (pref) {
        rc.preferred_segments = prefs;
        rc.preferred_segments_count = 1;
    }
    for (int s = 0; s < o->nsizes && status == 0; s++) {
        uint64_t size = o->sizes[s];
        int runs = runs_for(o, size), warm = runs / 10 < 5 ? runs / 10 + 1 : 5;
        uint8_t *src = malloc(size), *dst = malloc(size);
        double *lat = calloc((size_t)runs, sizeof(double));
        double *glat = calloc((size_t)runs, sizeof(double)), ref = 0;
        char key[96];
        size_t nkeys;
        int64_t n;

        if (!src || !dst || !lat || !glat) {
            fprintf(stderr, "transfer: out of memory for %llu-byte buffers\n",
                    (unsigned long long)size);
            status = 1;
            goto next;
        }
        for (uint64_t i = 0; i < size; i++)
            src[i] = (uint8_t)(i * 131 + 7);
        memset(dst, 0, size);

        /* Put: a new key each time, removed (untimed) right after. */
        for (int i = -warm; i < runs; i++) {
            uint64_t t0;
            int r;
            snprintf(key, sizeof(key), "bench-transfer-%s-%llu-%d", mode, (unsigned long long)size,
                     i);
            t0 = mc_now_ns();
            r = mc_put(c, key, src, size, &rc);
            if (i >= 0)
                lat[i] = (double)(mc_now_ns() - t0) / 1e6;
            if (r != 0) {
                fprintf(stderr, "transfer: put %s: %s\n", key, mc_strerror(r));
                status = 1;
                goto next;
            }
            mc_remove(c, key, true);
        }

        /* Get: one key read runs times into the same warm buffer, or (--working_set) nkeys
         * keys read in rotation. */
        nkeys = g_cold ? (size_t)(g_cold / size) : 1;
        if (nkeys == 0)
            nkeys = 1;
        for (size_t k = 0; k < nkeys; k++) {
            get_key(key, sizeof(key), mode, size, k);
            mc_remove(c, key, true);
            if ((status = mc_put(c, key, src, size, &rc)) != 0) {
                fprintf(stderr, "transfer: put %s: %s\n", key, mc_strerror(status));
                status = 1;
                goto next;
            }
        }
        for (int i = -warm; i < runs; i++) {
            get_key(key, sizeof(key), mode, size, (size_t)(i + warm) % nkeys);
            uint64_t t0 = mc_now_ns();
            n = mc_get(c, key, dst, size);
            if (i >= 0)
                glat[i] = (double)(mc_now_ns() - t0) / 1e6;
            if (n != (int64_t)size || (i == -warm && memcmp(dst, src, size) != 0)) {
                fprintf(stderr, "transfer: get %s: %s\n", key,
                        n < 0 ? mc_strerror((int)n) : "wrong length or bytes");
                status = 1;
                goto next;
            }
        }
        for (size_t k = 0; k < nkeys; k++) {
            get_key(key, sizeof(key), mode, size, k);
            mc_remove(c, key, true);
        }

        /* The reference runs last, on the same buffers, as warm (or as cold) as the get's. */
        if (!strcmp(mode, "same") && size == REF_SIZE) {
            double *rl = calloc((size_t)runs, sizeof(double));
            /* huge pages where the kernel gives them, as the segment asks for them */
            uint8_t *pool = nkeys > 1 ? aligned_alloc(2u << 20, nkeys * (size_t)size) : NULL;
            if (pool)
                (void)madvise(pool, nkeys * (size_t)size, MADV_HUGEPAGE);
            if (pool)
                for (size_t k = 0; k < nkeys; k++)
                    memcpy(pool + k * size, src, size);
            if (rl && (nkeys == 1 || pool)) {
                ref = memcpy_ref(dst, pool ? pool : src, pool ? nkeys : 1, size, runs, rl);
                g_ref_p50 = mc_bench_percentile(rl, (size_t)runs, 50);
            }
            free(pool);
            free(rl);
        }
        report("put", mode, size, 1, lat, runs, g_cold ? 0 : ref);
        report("get", mode, size, 1, glat, runs, ref);
        g_ref_p50 = 0;
    next:
        free(src);
        free(dst);
        free(lat);
        free(glat);
    }
    return status;
}

/* --batch: batch Put and Get series of every size, o->batch keys per call. */
static int measure_batch(const struct opts *o, struct mc_client *c, const char *mode,
                         const char *pref)
{
    struct mc_replicate_config rc;
    const char *prefs[1] = {pref};
    int nb = o->batch, status = 0;

    mc_replicate_config_init(&rc);
    if (pref) {
        rc.preferred_segments = prefs;
        rc.preferred_segments_count = 1;
    }
    for (int s = 0; s < o->nsizes && status == 0; s++) {
        uint64_t size = o->sizes[s];
        int runs = runs_for(o, size * (uint64_t)nb), warm = runs / 10 < 5 ? runs / 10 + 1 : 5;
        uint8_t *src = malloc(size * (size_t)nb), *dst = malloc(size * (size_t)nb);
        double *lat = calloc((size_t)runs, sizeof(double));
        double *glat = calloc((size_t)runs, sizeof(double));
        char(*keys)[96] = calloc((size_t)nb, sizeof(*keys));
        const char **kp = calloc((size_t)nb, sizeof(*kp));
        const void **sp = calloc((size_t)nb, sizeof(*sp));
        void **dp = calloc((size_t)nb, sizeof(*dp));
        size_t *lens = calloc((size_t)nb, sizeof(*lens));
        int *pres = calloc((size_t)nb, sizeof(*pres));
        int64_t *gres = calloc((size_t)nb, sizeof(*gres));

        if (!src || !dst || !lat || !glat || !keys || !kp || !sp || !dp || !lens || !pres ||
            !gres) {
            fprintf(stderr, "transfer: out of memory for a batch of %d x %llu bytes\n", nb,
                    (unsigned long long)size);
            status = 1;
            goto next;
        }
        for (uint64_t i = 0; i < size * (uint64_t)nb; i++)
            src[i] = (uint8_t)(i * 131 + 7);
        memset(dst, 0, size * (size_t)nb);
        for (int k = 0; k < nb; k++) {
            kp[k] = keys[k];
            sp[k] = src + (size_t)k * size;
            dp[k] = dst + (size_t)k * size;
            lens[k] = size;
        }

        /* Put: a new set of keys each time, removed (untimed) right after. */
        for (int i = -warm; i < runs && status == 0; i++) {
            for (int k = 0; k < nb; k++)
                snprintf(keys[k], sizeof(keys[k]), "bench-transfer-%s-%llu-%d-%d", mode,
                         (unsigned long long)size, i, k);
            uint64_t t0 = mc_now_ns();
            int r = mc_batch_put(c, (size_t)nb, kp, sp, lens, &rc, pres);
            if (i >= 0)
                lat[i] = (double)(mc_now_ns() - t0) / 1e6;
            for (int k = 0; k < nb && r == 0; k++)
                r = pres[k];
            if (r != 0) {
                fprintf(stderr, "transfer: batch put %s: %s\n", keys[0], mc_strerror(r));
                status = 1;
            }
            for (int k = 0; k < nb; k++)
                mc_remove(c, keys[k], true);
        }
        if (status)
            goto next;

        /* Get: one set of keys, read runs times into the same buffers. */
        for (int k = 0; k < nb; k++) {
            snprintf(keys[k], sizeof(keys[k]), "bench-transfer-%s-%llu-get-%d", mode,
                     (unsigned long long)size, k);
            mc_remove(c, keys[k], true);
        }
        if (mc_batch_put(c, (size_t)nb, kp, sp, lens, &rc, pres) != 0) {
            fprintf(stderr, "transfer: batch put of the get keys failed\n");
            status = 1;
            goto next;
        }
        for (int i = -warm; i < runs && status == 0; i++) {
            uint64_t t0 = mc_now_ns();
            int r = mc_batch_get(c, (size_t)nb, kp, (void *const *)dp, lens, gres);
            if (i >= 0)
                glat[i] = (double)(mc_now_ns() - t0) / 1e6;
            for (int k = 0; k < nb && r == 0; k++)
                r = gres[k] == (int64_t)size ? 0 : gres[k] < 0 ? (int)gres[k] : -1;
            if (r != 0 || (i == -warm && memcmp(dst, src, size * (size_t)nb) != 0)) {
                fprintf(stderr, "transfer: batch get %s: %s\n", keys[0],
                        r < -1 ? mc_strerror(r) : "wrong length or bytes");
                status = 1;
            }
        }
        for (int k = 0; k < nb; k++)
            mc_remove(c, keys[k], true);
        if (status == 0) {
            report("put", mode, size, nb, lat, runs, 0);
            report("get", mode, size, nb, glat, runs, 0);
        }
    next:
        free(src);
        free(dst);
        free(lat);
        free(glat);
        free(keys);
        free(kp);
        free(sp);
        free(dp);
        free(lens);
        free(pres);
        free(gres);
    }
    return status;
}

/* ---- main -------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mooncake_bench transfer [--sizes LIST] [--runs N] [--mode same|between|both]\n"
            "                               [--master HOST:PORT] [--bin DIR] [--segment_size "
            "SIZE]\n"
            "                               [--batch N] [--checksums on|off|both]\n"
            "                               [--protocol tcp|rdma] [--host ADDR]\n"
            "                               [--working_set SIZE]\n"
            "  --sizes         object sizes (default 4KiB,64KiB,1MiB,4MiB,16MiB)\n"
            "  --runs          calls per series (default: ~512 MiB of data, 20..2000)\n"
            "  --mode          same (local segment), between (a daemon's segment), both\n"
            "  --master        use this master (and whatever segments it has) instead of\n"
            "                  starting mooncake_master [+ mooncake_client] from --bin\n"
            "  --bin           where mooncake_master and mooncake_client are (default: this\n"
            "                  program's directory)\n"
            "  --segment_size  DRAM of the bench's segments (default 1GiB)\n"
            "  --batch         keys per call: N > 1 measures mc_batch_put / mc_batch_get of N\n"
            "                  keys of each size (default 1: single Put and Get)\n"
            "  --checksums     the reading client verifies each value's CRC32C (default on, the\n"
            "                  library's default); both = every series with off, then on\n"
            "  --protocol      tcp (default) or rdma: the data plane of the bench's clients and\n"
            "                  daemon (scripts/rdma_selftest.sh)\n"
            "  --host          the address they serve on (default 127.0.0.1; rdma needs the\n"
            "                  RDMA NIC's)\n"
            "  --working_set   bytes the Get series and the 4 MiB memcpy reference rotate over\n"
            "                  (default 0: one key, warm); past the last-level cache each\n"
            "                  Get's source is cold, as a served value's is; needs a segment\n"
            "                  of at least twice it (case names gain /cold)\n");
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        {"sizes", required_argument, NULL, 's'},
        {"runs", required_argument, NULL, 'r'},
        {"mode", required_argument, NULL, 'm'},
        {"master", required_argument, NULL, 'M'},
        {"bin", required_argument, NULL, 'b'},
        {"segment_size", required_argument, NULL, 'S'},
        {"batch", required_argument, NULL, 'B'},
        {"checksums", required_argument, NULL, 'C'},
        {"protocol", required_argument, NULL, 'P'},
        {"host", required_argument, NULL, 'H'},
        {"working_set", required_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *sizes = "4KiB,64KiB,1MiB,4MiB,16MiB", *mode = "both";
    char exe[PATH_MAX];
    ssize_t n;
    int c;

    memset(o, 0, sizeof(*o));
    o->segment_size = 1ull << 30;
    o->batch = 1;
    o->checksums = 1;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        snprintf(o->bin, sizeof(o->bin), "%s", dirname(exe));
    }
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 's':
            sizes = optarg;
            break;
        case 'r':
            o->runs = atoi(optarg);
            if (o->runs <= 0)
                return 2;
            break;
        case 'm':
            mode = optarg;
            break;
        case 'B':
            o->batch = atoi(optarg);
            if (o->batch <= 0 || o->batch > 4096)
                return 2;
            break;
        case 'C':
            if (!strcmp(optarg, "on"))
                o->checksums = 1;
            else if (!strcmp(optarg, "off"))
                o->checksums = 0;
            else if (!strcmp(optarg, "both"))
                o->checksums = 2;
            else
                return 2;
            break;
        case 'M':
            o->master = optarg;
            break;
        case 'P':
            if (strcmp(optarg, "tcp") != 0 && strcmp(optarg, "rdma") != 0)
                return 2;
            g_protocol = optarg;
            break;
        case 'H':
            g_host = optarg;
            break;
        case 'b':
            snprintf(o->bin, sizeof(o->bin), "%s", optarg);
            break;
        case 'S':
            if (mc_parse_size(optarg, &o->segment_size, NULL, 0) != 0 || !o->segment_size)
                return 2;
            break;
        case 'W':
            if (mc_parse_size(optarg, &g_cold, NULL, 0) != 0)
                return 2;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            return 2;
        }
    }
    if (optind < argc)
        return 2;
    o->nsizes = mc_bench_parse_sizes(sizes, o->sizes, MAX_SIZES);
    if (o->nsizes <= 0)
        return 2;
    for (int i = 0; i < o->nsizes; i++)
        if (o->sizes[i] == 0 || o->sizes[i] * 2 * (uint64_t)o->batch > o->segment_size)
            return 2;
    if (g_cold && (g_cold > o->segment_size / 2 || o->batch > 1)) {
        fprintf(stderr, "transfer: --working_set must be at most half of --segment_size (the "
                        "keys must not be evicted), and only with --batch 1\n");
        return 2;
    }
    o->same = !strcmp(mode, "same") || !strcmp(mode, "both");
    o->between = !strcmp(mode, "between") || !strcmp(mode, "both");
    return o->same || o->between ? 0 : 2;
}

static int open_client(const char *master, uint64_t segment_size, struct mc_client **out)
{
    struct mc_client_config cfg;
    int rc;

    mc_client_config_init(&cfg);
    cfg.master_address = master;
    cfg.segment_size = segment_size;
    cfg.checksums = g_crc;
    cfg.protocol = g_protocol;
    cfg.host = g_host;
    rc = mc_client_open(&cfg, out);
    if (rc)
        fprintf(stderr, "transfer: cannot open a client on %s: %s\n", master, mc_strerror(rc));
    return rc;
}

/* Warns when the placement is not what the mode means (e.g. an external master that put the
 * same-process object on another node). */
static void check_placement(struct mc_client *c, const char *want_ep, const char *mode)
{
    struct mc_replicate_config rc;
    struct mc_object_info info = {0};
    const char *prefs[1] = {want_ep};
    uint8_t b = 1;

    mc_replicate_config_init(&rc);
    rc.preferred_segments = prefs;
    rc.preferred_segments_count = 1;
    if (mc_put(c, "bench-transfer-probe", &b, 1, &rc) == 0 &&
        mc_query(c, "bench-transfer-probe", &info) == 0 && info.replica_count > 0 &&
        strcmp(info.replicas[0].endpoint, want_ep) != 0)
        fprintf(stderr, "transfer: warning: %s objects land on %s, not on %s\n", mode,
                info.replicas[0].endpoint, want_ep);
    mc_object_info_free(&info);
    mc_remove(c, "bench-transfer-probe", true);
}

int mc_bench_transfer(int argc, char **argv)
{
    struct opts o;
    struct mc_proc master = {.out_fd = -1}, daemon = {.out_fd = -1};
    struct mc_client *c = NULL;
    char addr[64], ep[256];
    int rc = 0;

    switch (parse_opts(argc, argv, &o)) {
    case 0:
        break;
    case 1:
        return 0;
    default:
        usage(stderr);
        return 2;
    }
    mc_log_set_level(MC_LOG_WARN);
    signal(SIGPIPE, SIG_IGN);
    if (o.master) {
        snprintf(addr, sizeof(addr), "%s", o.master);
    } else if (start_master(&o, &master, addr, sizeof(addr)) != 0) {
        rc = 1;
        goto out;
    }

    /* --checksums both: every placement measured with checksums off, then on, in this run */
    int crc_from = o.checksums == 2 ? 0 : o.checksums, crc_to = o.checksums == 2 ? 1 : o.checksums;
    g_crc_tagged = o.checksums == 2;
    if (o.same) {
        for (int crc = crc_from; crc <= crc_to && rc == 0; crc++) {
            g_crc = crc;
            if (open_client(addr, o.segment_size, &c) != 0) {
                rc = 1;
                goto out;
            }
            check_placement(c, mc_client_endpoint(c), "same-process");
            rc = o.batch > 1 ? measure_batch(&o, c, "same", mc_client_endpoint(c))
                             : measure(&o, c, "same", mc_client_endpoint(c));
            mc_client_close(c);
            c = NULL;
        }
        if (rc)
            goto out;
    }
    if (o.between) {
        const char *pref = NULL;
        if (!o.master) {
            if (start_daemon(&o, addr, &daemon, ep, sizeof(ep)) != 0) {
                rc = 1;
                goto out;
            }
            pref = ep;
        }
        for (int crc = crc_from; crc <= crc_to && rc == 0; crc++) {
            g_crc = crc;
            if (open_client(addr, 0, &c) != 0) {
                rc = 1;
                goto out;
            }
            if (pref)
                check_placement(c, pref, "between-process");
            rc = o.batch > 1 ? measure_batch(&o, c, "between", pref)
                             : measure(&o, c, "between", pref);
            mc_client_close(c);
            c = NULL;
        }
    }
out:
    mc_client_close(c);
    mc_proc_stop(&daemon, SIGTERM, 10000);
    mc_proc_stop(&master, SIGTERM, 10000);
    return rc;
}
