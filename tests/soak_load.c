/*
 * soak_load.c - the load of scripts/soak.sh: Put / Get / Remove over a Zipf-distributed key set
 * (larger than the cluster's DRAM, so eviction runs all the time), every byte verified.
 *
 *   soak_load --master=HOST:PORT --seconds=S [--keys=N] [--value_kb=K] [--threads=T]
 *             [--zipf=A] [--get=P --put=P --remove=P] [--seed=X] [--report_s=R]
 *
 * Values verify themselves, so no shared bookkeeping is needed and concurrent writers of one
 * key are fine: a value is a 32-byte header {magic, key index, generation, length, CRC32C of the
 * payload} followed by a payload generated from (key index, generation). A Get checks the
 * header names the key it asked for, the length and the CRC of the payload, and regenerates the
 * payload: any mismatch is a wrong byte. OBJECT_NOT_FOUND (evicted or removed),
 * REPLICA_IS_NOT_READY (a Get or Remove of a key another thread is putting), OBJECT_HAS_LEASE
 * (a Remove of a key being read) and NO_AVAILABLE_HANDLE (a Put while eviction catches up) are
 * expected outcomes and counted as such; any other code is an error.
 *
 * Output: one JSON line per report interval and a final one with "final":true:
 *   {"t_s":..,"ops":..,"gets":..,"hits":..,"puts":..,"removes":..,"not_found":..,
 *    "not_ready":..,"busy":..,
 *    "no_space":..,"errors":..,"wrong_bytes":..,"bytes_verified":..}
 * Exit status: 0 when errors and wrong_bytes are both 0, 1 otherwise, 2 on bad usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc32c.h"
#include "mooncake/client.h"

#define MAGIC 0x4b414f53u /* "SOAK" */
#define HDR 32

static struct {
    const char *master;
    int seconds, threads, report_s;
    uint32_t keys, value_kb;
    double zipf, p_get, p_put;
    uint64_t seed;
    double *cdf;
    struct mc_client *client;
    _Atomic int stop;
    _Atomic uint64_t ops, gets, hits, puts, removes, not_found, not_ready, busy, no_space, errors,
        wrong_bytes, bytes_verified;
} g = {.seconds = 60,
       .threads = 4,
       .report_s = 5,
       .keys = 4096,
       .value_kb = 128,
       .zipf = 0.9,
       .p_get = 0.5,
       .p_put = 0.35,
       .seed = 42};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return (double)(rng(s) >> 11) / 9007199254740992.0;
}

/* Key index by the Zipf CDF (binary search). */
static uint32_t pick_key(uint64_t *s)
{
    double u = uniform(s);
    uint32_t lo = 0, hi = g.keys - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (g.cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Value length of a key (varies by key so sizes mix: 1/4 .. 1x value_kb). */
static size_t value_len(uint32_t k)
{
    size_t max = (size_t)g.value_kb << 10;
    return max / 4 + (size_t)((k * 2654435761u) % (3 * max / 4 + 1));
}

static void payload(uint32_t k, uint64_t gen, uint8_t *p, size_t n)
{
    uint64_t s = ((uint64_t)k << 32) ^ gen ^ 0x5eed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rng(&s);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

static void build(uint32_t k, uint64_t gen, uint8_t *buf, size_t len)
{
    payload(k, gen, buf + HDR, len - HDR);
    uint32_t hdr[8] = {MAGIC,
                       k,
                       (uint32_t)gen,
                       (uint32_t)(gen >> 32),
                       (uint32_t)len,
                       mc_crc32c(buf + HDR, len - HDR),
                       0,
                       0};
    memcpy(buf, hdr, HDR);
}

/* 0 when buf[0..len) is a value of key k, else -1. */
static int verify(uint32_t k, const uint8_t *buf, size_t len, uint8_t *scratch)
{
    uint32_t hdr[8];
    if (len < HDR)
        return -1;
    memcpy(hdr, buf, HDR);
    uint64_t gen = hdr[2] | (uint64_t)hdr[3] << 32;
    if (hdr[0] != MAGIC || hdr[1] != k || hdr[4] != len || len != value_len(k) ||
        hdr[5] != mc_crc32c(buf + HDR, len - HDR))
        return -1;
    payload(k, gen, scratch, len - HDR);
    return memcmp(scratch, buf + HDR, len - HDR) == 0 ? 0 : -1;
}

static void count_error(const char *op, uint32_t k, int rc)
{
    if (atomic_fetch_add(&g.errors, 1) < 20)
        fprintf(stderr, "soak_load: %s soak/%u: %s\n", op, k, mc_strerror(rc));
}

static void *worker(void *arg)
{
    uint64_t s = g.seed ^ ((uint64_t)(uintptr_t)arg * 0x100000001b3ull);
    size_t max = (size_t)g.value_kb << 10;
    uint8_t *buf = malloc(max), *scratch = malloc(max);
    char key[32];
    if (!buf || !scratch)
        abort();
    while (!atomic_load(&g.stop)) {
        uint32_t k = pick_key(&s);
        snprintf(key, sizeof(key), "soak/%u", k);
        double op = uniform(&s);
        size_t len = value_len(k);
        if (op < g.p_get) {
            atomic_fetch_add(&g.gets, 1);
            int64_t n = mc_get(g.client, key, buf, max);
            if (n >= 0) {
                atomic_fetch_add(&g.hits, 1);
                if (verify(k, buf, (size_t)n, scratch) != 0) {
                    if (atomic_fetch_add(&g.wrong_bytes, 1) < 20)
                        fprintf(stderr, "soak_load: WRONG BYTES in soak/%u (%" PRId64 " bytes)\n",
                                k, n);
                } else {
                    atomic_fetch_add(&g.bytes_verified, (uint64_t)n);
                }
            } else if (n == MC_ERR_OBJECT_NOT_FOUND) {
                atomic_fetch_add(&g.not_found, 1);
            } else if (n == MC_ERR_REPLICA_IS_NOT_READY) {
                atomic_fetch_add(&g.not_ready, 1);
            } else {
                count_error("get", k, (int)n);
            }
        } else if (op < g.p_get + g.p_put) {
            atomic_fetch_add(&g.puts, 1);
            build(k, rng(&s), buf, len);
            int rc = mc_put(g.client, key, buf, len, NULL);
            if (rc == MC_ERR_NO_AVAILABLE_HANDLE)
                atomic_fetch_add(&g.no_space, 1);
            else if (rc != 0)
                count_error("put", k, rc);
        } else {
            atomic_fetch_add(&g.removes, 1);
            int rc = mc_remove(g.client, key, false);
            if (rc == MC_ERR_OBJECT_NOT_FOUND)
                atomic_fetch_add(&g.not_found, 1);
            else if (rc == MC_ERR_OBJECT_HAS_LEASE)
                atomic_fetch_add(&g.busy, 1);
            else if (rc == MC_ERR_REPLICA_IS_NOT_READY)
                atomic_fetch_add(&g.not_ready, 1);
            else if (rc != 0)
                count_error("remove", k, rc);
        }
        atomic_fetch_add(&g.ops, 1);
    }
    free(buf);
    free(scratch);
    return NULL;
}

static void report(double t, bool final)
{
    printf("{\"t_s\":%.1f,\"ops\":%" PRIu64 ",\"gets\":%" PRIu64 ",\"hits\":%" PRIu64
           ",\"puts\":%" PRIu64 ",\"removes\":%" PRIu64 ",\"not_found\":%" PRIu64
           ",\"not_ready\":%" PRIu64 ",\"busy\":%" PRIu64 ",\"no_space\":%" PRIu64
           ",\"errors\":%" PRIu64 ",\"wrong_bytes\":%" PRIu64 ",\"bytes_verified\":%" PRIu64
           "%s}\n",
           t, atomic_load(&g.ops), atomic_load(&g.gets), atomic_load(&g.hits), atomic_load(&g.puts),
           atomic_load(&g.removes), atomic_load(&g.not_found), atomic_load(&g.not_ready),
           atomic_load(&g.busy), atomic_load(&g.no_space), atomic_load(&g.errors),
           atomic_load(&g.wrong_bytes), atomic_load(&g.bytes_verified),
           final ? ",\"final\":true" : "");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"master", required_argument, NULL, 'm'},   {"seconds", required_argument, NULL, 's'},
        {"keys", required_argument, NULL, 'k'},     {"value_kb", required_argument, NULL, 'v'},
        {"threads", required_argument, NULL, 't'},  {"zipf", required_argument, NULL, 'z'},
        {"get", required_argument, NULL, 'g'},      {"put", required_argument, NULL, 'p'},
        {"remove", required_argument, NULL, 'r'},   {"seed", required_argument, NULL, 'S'},
        {"report_s", required_argument, NULL, 'R'}, {NULL, 0, NULL, 0}};
    double p_rm = 0.15;
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (c) {
        case 'm':
            g.master = optarg;
            break;
        case 's':
            g.seconds = atoi(optarg);
            break;
        case 'k':
            g.keys = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 'v':
            g.value_kb = (uint32_t)strtoul(optarg, NULL, 10);
            break;
        case 't':
            g.threads = atoi(optarg);
            break;
        case 'z':
            g.zipf = atof(optarg);
            break;
        case 'g':
            g.p_get = atof(optarg);
            break;
        case 'p':
            g.p_put = atof(optarg);
            break;
        case 'r':
            p_rm = atof(optarg);
            break;
        case 'S':
            g.seed = strtoull(optarg, NULL, 0);
            break;
        case 'R':
            g.report_s = atoi(optarg);
            break;
        default:
            return 2;
        }
    }
    double sum = g.p_get + g.p_put + p_rm;
    if (!g.master || g.seconds <= 0 || g.keys < 2 || g.value_kb < 1 || g.threads < 1 ||
        g.threads > 256 || sum <= 0 || g.report_s <= 0) {
        fprintf(stderr, "usage: soak_load --master=HOST:PORT --seconds=S [options]\n");
        return 2;
    }
    g.p_get /= sum;
    g.p_put /= sum;
    g.cdf = malloc(sizeof(double) * g.keys);
    double acc = 0;
    for (uint32_t i = 0; i < g.keys; i++)
        acc += 1.0 / pow((double)i + 1, g.zipf);
    double run = 0;
    for (uint32_t i = 0; i < g.keys; i++) {
        run += 1.0 / pow((double)i + 1, g.zipf) / acc;
        g.cdf[i] = run;
    }
    g.cdf[g.keys - 1] = 1.0;

    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = g.master;
    cfg.segment_size = 0; /* every byte crosses to a daemon */
    cfg.checksums = true;
    int rc = mc_client_open(&cfg, &g.client);
    if (rc) {
        fprintf(stderr, "soak_load: cannot open the client: %s\n", mc_strerror(rc));
        return 1;
    }
    pthread_t *th = calloc((size_t)g.threads, sizeof(*th));
    for (int i = 0; i < g.threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    uint64_t t0 = now_ms(), next = t0 + (uint64_t)g.report_s * 1000;
    while (now_ms() - t0 < (uint64_t)g.seconds * 1000) {
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL);
        if (now_ms() >= next) {
            report((double)(now_ms() - t0) / 1000.0, false);
            next += (uint64_t)g.report_s * 1000;
        }
    }
    atomic_store(&g.stop, 1);
    for (int i = 0; i < g.threads; i++)
        pthread_join(th[i], NULL);
    report((double)(now_ms() - t0) / 1000.0, true);
    mc_client_close(g.client);
    free(th);
    free(g.cdf);
    return atomic_load(&g.errors) == 0 && atomic_load(&g.wrong_bytes) == 0 ? 0 : 1;
}
