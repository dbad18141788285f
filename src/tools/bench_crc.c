/*
 * bench_crc.c - `mooncake_bench crc`: CRC32C implementations side by side, and the copy a
 * same-process Get makes (copy, then check) against the copy fused with the CRC.
 *
 * Cases, per size in --sizes (each op reads the next size-sized slot of a --working-set buffer
 * larger than the last-level cache, as a Get's source is; the destination is one reused buffer,
 * as a Get's is):
 *   memcpy          the reference: a plain copy;
 *   crc             mc_crc32c (ISA-L's crc32_iscsi) over the source;
 *   copy_then_crc   memcpy, then mc_crc32c over the copy (two passes: what Get did);
 *   copy_crc_chunked  mc_crc32c_copy_chunked: 32 KiB chunks copied, each checksummed while in
 *                   L1 (two passes over L1, one over memory; what Get did before the fold);
 *   copy_crc_fused  mc_crc32c_copy: each 64-byte block loaded once, stored and folded into the
 *                   CRC with carry-less multiplies (one pass; the chunked copy where the CPU
 *                   lacks AVX-512 VPCLMULQDQ, which the stderr line says).
 * The first version of this bench also ran the hand-written three-chain crc32 code, copy+CRC
 * with it, and a load/crc/store copy built on it; ISA-L was about twice as fast at every size
 * (docs/performance.md has the figures), so that code is gone.
 * --rounds rounds alternate the cases (the order rotates each round); each case in a round
 * moves about --bytes bytes. Per-round GB/s go to stderr; the JSON row per case and size
 * carries the median GB/s and its ratio to memcpy's median (ref).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "tools/bench_util.h"

#define MAX_SIZES 8
#define MAX_ROUNDS 64

typedef uint32_t (*crc_case_fn)(uint8_t *dst, const uint8_t *src, size_t n);

static uint32_t case_memcpy(uint8_t *dst, const uint8_t *src, size_t n)
{
    memcpy(dst, src, n);
    return dst[n - 1];
}

static uint32_t case_crc(uint8_t *dst, const uint8_t *src, size_t n)
{
    (void)dst;
    return mc_crc32c(src, n);
}

static uint32_t case_copy_then_crc(uint8_t *dst, const uint8_t *src, size_t n)
{
    memcpy(dst, src, n);
    return mc_crc32c(dst, n);
}

static uint32_t case_chunked(uint8_t *dst, const uint8_t *src, size_t n)
{
    return mc_crc32c_copy_chunked(0, dst, src, n);
}

static uint32_t case_fused(uint8_t *dst, const uint8_t *src, size_t n)
{
    return mc_crc32c_copy(0, dst, src, n);
}

struct crc_case {
    const char *name;
    crc_case_fn fn;
    int is_crc; /* its answer is the CRC32C of the bytes (checked once before timing) */
};

static const struct crc_case g_cases[] = {
    {"memcpy", case_memcpy, 0},
    {"crc", case_crc, 1},
    {"copy_then_crc", case_copy_then_crc, 1},
    {"copy_crc_chunked", case_chunked, 1},
    {"copy_crc_fused", case_fused, 1},
};
#define NCASES (sizeof(g_cases) / sizeof(g_cases[0]))

/* One timed pass of case c: ops of n bytes over consecutive slots of ws; GB/s. */
static double run_case(const struct crc_case *c, uint8_t *dst, const uint8_t *ws, size_t ws_len,
                       size_t n, uint64_t bytes, size_t *slot, volatile uint32_t *sink)
{
    size_t nslots = ws_len / n;
    uint64_t ops = bytes / n ? bytes / n : 1;
    uint64_t t0 = mc_now_ns();
    for (uint64_t i = 0; i < ops; i++) {
        *sink ^= c->fn(dst, ws + (*slot) * n, n);
        *slot = (*slot + 1) % nslots;
    }
    uint64_t ns = mc_now_ns() - t0;
    return (double)(ops * n) / (double)(ns ? ns : 1);
}

static int check_cases(uint8_t *dst, const uint8_t *src, size_t n)
{
    uint32_t want = mc_crc32c_extend_sw(0, src, n);
    for (size_t i = 0; i < NCASES; i++) {
        if (!g_cases[i].is_crc)
            continue;
        uint32_t got = g_cases[i].fn(dst, src, n);
        if (got != want) {
            fprintf(stderr, "crc: case %s gives %08x, want %08x at %zu bytes\n", g_cases[i].name,
                    got, want, n);
            return -1;
        }
    }
    return 0;
}

int mc_bench_crc(int argc, char **argv)
{
    uint64_t sizes[MAX_SIZES] = {4u << 10, 64u << 10, 1u << 20, 4u << 20};
    int nsizes = 4, rounds = 5;
    uint64_t ws_len = 1ull << 30, bytes = 1ull << 30;
    const struct mc_bench_opt opts[] = {
        {"sizes", MC_BENCH_SIZES, sizes, "LIST", "operation sizes", &nsizes, MAX_SIZES,
         "4KiB,64KiB,1MiB,4MiB"},
        {"working-set", MC_BENCH_SIZE, &ws_len, "BYTES",
         "source buffer the ops walk through (keep it larger than the LLC)", NULL, 0, "1GiB"},
        {"bytes", MC_BENCH_SIZE, &bytes, "BYTES", "bytes each case moves per round", NULL, 0,
         "1GiB"},
        {"rounds", MC_BENCH_INT, &rounds, "N", "alternated rounds (median reported)", NULL, 0,
         NULL},
    };
    struct mc_bench_cli cli = {"crc",
                               "CRC32C, copy then CRC, and the copy fused with the CRC, "
                               "against memcpy",
                               opts,
                               sizeof(opts) / sizeof(opts[0]),
                               {{0}}};
    int prc = mc_bench_opts_parse(&cli, argc, argv);
    if (prc)
        return prc == 1 ? 0 : 2;
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "crc: --rounds must be 1..%d\n", MAX_ROUNDS);
        return 2;
    }
    uint64_t max_n = 0;
    for (int s = 0; s < nsizes; s++) {
        if (sizes[s] == 0) {
            fprintf(stderr, "crc: sizes must be > 0\n");
            return 2;
        }
        max_n = sizes[s] > max_n ? sizes[s] : max_n;
    }
    if (ws_len < max_n) {
        fprintf(stderr, "crc: --working-set must hold at least one op of the largest size\n");
        return 2;
    }
    int rc = 1;
    uint8_t *ws = mmap(NULL, ws_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *dst = malloc(max_n);
    if (ws == MAP_FAILED || !dst) {
        fprintf(stderr, "crc: cannot allocate the working set\n");
        goto out;
    }
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i + 8 <= ws_len; i += 8) {
        uint64_t v = mc_bench_rand(&rng);
        memcpy(ws + i, &v, 8);
    }
    volatile uint32_t sink = 0;
    fprintf(stderr, "crc: working_set=%llu copy_crc_fused=%s\n", (unsigned long long)ws_len,
            mc_crc32c_copy_folds() ? "fold (AVX-512 VPCLMULQDQ)" : "chunked (no VPCLMULQDQ)");
    for (int s = 0; s < nsizes; s++) {
        size_t n = (size_t)sizes[s];
        if (check_cases(dst, ws, n) != 0)
            goto out;
        static double gbps[NCASES][MAX_ROUNDS];
        size_t slot = 0;
        for (int r = 0; r < rounds; r++) {
            fprintf(stderr, "crc: size=%zu round=%d", n, r + 1);
            for (size_t k = 0; k < NCASES; k++) {
                size_t i = (k + (size_t)r) % NCASES;
                gbps[i][r] = run_case(&g_cases[i], dst, ws, ws_len, n, bytes, &slot, &sink);
            }
            for (size_t i = 0; i < NCASES; i++)
                fprintf(stderr, " %s=%.2f", g_cases[i].name, gbps[i][r]);
            fprintf(stderr, " GB/s\n");
        }
        double ref = mc_bench_median(gbps[0], (size_t)rounds);
        for (size_t i = 0; i < NCASES; i++) {
            double per[MAX_ROUNDS];
            memcpy(per, gbps[i], sizeof(double) * (size_t)rounds);
            double lo = mc_bench_percentile(per, (size_t)rounds, 0);
            double hi = mc_bench_percentile(per, (size_t)rounds, 100);
            double med = mc_bench_median(per, (size_t)rounds);
            struct mc_bench_result res;
            char name[96];
            snprintf(name, sizeof(name), "%s_%zu", g_cases[i].name, n);
            mc_bench_result_init(&res, "crc", name);
            res.runs = rounds;
            res.bytes_per_s = med * 1e9;
            res.ms = med > 0 ? (double)n / (med * 1e9) * 1e3 : 0;
            res.p50_ms = res.ms;
            res.ops_per_s = med * 1e9 / (double)n;
            mc_bench_add_num(&res, "gb_per_s", med);
            mc_bench_add_num(&res, "gb_per_s_min", lo);
            mc_bench_add_num(&res, "gb_per_s_max", hi);
            mc_bench_set_ref(&res, ref, ref > 0 ? med / ref : 0);
            mc_bench_emit(&res);
        }
    }
    rc = 0;
out:
    if (ws != MAP_FAILED)
        munmap(ws, ws_len);
    free(dst);
    return rc;
}
