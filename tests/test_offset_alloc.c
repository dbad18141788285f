/*
 * test_offset_alloc.c - the per-segment offset allocator (src/master/offset_alloc.c).
 *
 * Random alloc/free sequences are checked against a shadow bitmap of the segment (no overlap, in
 * range, aligned); full reuse, coalescing, exhaustion, alignment, bin edges, multi-TiB
 * capacities, bad handles, and a fragmentation figure for a mixed workload (printed); releasing
 * every allocation at once (what a RemoveAll of a whole segment does).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/offset_alloc.h"
#include "mooncake/errors.h"

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void test_bins(void **state)
{
    (void)state;
    uint64_t s = 42;
    for (int i = 0; i < 200000; i++) {
        uint64_t u = (rnd(&s) >> (2 + rnd(&s) % 60)) + 1;
        uint32_t up = mc_oa_bin_round_up(u), down = mc_oa_bin_round_down(u);
        assert_true(mc_oa_bin_size(up) >= u);
        assert_true(mc_oa_bin_size(down) <= u);
        assert_true(up == down || up == down + 1);
        if (up == down)
            assert_int_equal(mc_oa_bin_size(up), u);
        /* A bin spans at most 1/8 of its size. */
        if (u >= 8)
            assert_true(mc_oa_bin_size(down + 1) - mc_oa_bin_size(down) <=
                        mc_oa_bin_size(down) / 8);
    }
    for (uint32_t b = 0; b < 480; b++) {
        assert_int_equal(mc_oa_bin_round_up(mc_oa_bin_size(b)), b);
        assert_int_equal(mc_oa_bin_round_down(mc_oa_bin_size(b)), b);
        assert_true(mc_oa_bin_size(b + 1) > mc_oa_bin_size(b));
    }
}

static void test_bad_args(void **state)
{
    (void)state;
    assert_null(mc_offset_alloc_new(0, 0));
    assert_null(mc_offset_alloc_new(32, 64)); /* smaller than one unit */
    assert_null(mc_offset_alloc_new(1 << 20, 48));
    assert_null(mc_offset_alloc_new(1 << 20, 4));
    struct mc_offset_alloc *a = mc_offset_alloc_new(1 << 20, 0);
    assert_non_null(a);
    struct mc_oa_allocation al;
    assert_int_equal(mc_offset_alloc_alloc(a, 0, &al), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_offset_alloc_alloc(a, UINT64_MAX, &al), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_offset_alloc_alloc(a, (1 << 20) + 1, &al), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc_offset_alloc_release(a, 12345), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_offset_alloc_release(a, MC_OA_INVALID_HANDLE), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_offset_alloc_alloc(a, 100, &al), MC_OK);
    assert_int_equal(mc_offset_alloc_release(a, al.handle), MC_OK);
    assert_int_equal(mc_offset_alloc_release(a, al.handle), MC_ERR_INVALID_PARAMS); /* double */
    assert_int_equal(mc_offset_alloc_block_size(a, al.handle), 0);
    mc_offset_alloc_free(a);
}

#define CAP (8u << 20)
#define ALIGN 64u
#define UNITS (CAP / ALIGN)

struct live {
    uint32_t handle;
    uint64_t offset, size;
};

static void shadow_mark(uint8_t *bits, uint64_t off, uint64_t size, int set)
{
    uint64_t u0 = off / ALIGN, u1 = (off + size + ALIGN - 1) / ALIGN;
    assert_true(u1 <= UNITS);
    for (uint64_t u = u0; u < u1; u++) {
        uint8_t m = (uint8_t)(1u << (u & 7));
        if (set) {
            assert_false(bits[u >> 3] & m); /* overlap with a live allocation */
            bits[u >> 3] |= m;
        } else {
            assert_true(bits[u >> 3] & m);
            bits[u >> 3] &= (uint8_t)~m;
        }
    }
}

static void test_random_shadow(void **state)
{
    (void)state;
    struct mc_offset_alloc *a = mc_offset_alloc_new(CAP, ALIGN);
    assert_non_null(a);
    uint8_t *bits = calloc(UNITS / 8, 1);
    size_t cap = 20000, n = 0;
    struct live *lv = calloc(cap, sizeof(*lv));
    uint64_t s = 7, sum = 0;
    int fails = 0;
    for (int op = 0; op < 60000; op++) {
        if (n == 0 || (rnd(&s) % 100) < 55) {
            uint64_t size = 1 + rnd(&s) % (rnd(&s) % 4 ? 4096 : 256 * 1024);
            struct mc_oa_allocation al;
            int rc = mc_offset_alloc_alloc(a, size, &al);
            if (rc == MC_ERR_NO_AVAILABLE_HANDLE) {
                fails++;
                continue;
            }
            assert_int_equal(rc, MC_OK);
            assert_int_equal(al.offset % ALIGN, 0);
            assert_true(al.offset + size <= CAP);
            assert_true(mc_offset_alloc_block_size(a, al.handle) >= size);
            shadow_mark(bits, al.offset, size, 1);
            assert_true(n < cap);
            lv[n++] = (struct live){al.handle, al.offset, size};
            sum += (size + ALIGN - 1) / ALIGN * ALIGN;
        } else {
            size_t k = rnd(&s) % n;
            shadow_mark(bits, lv[k].offset, lv[k].size, 0);
            assert_int_equal(mc_offset_alloc_release(a, lv[k].handle), MC_OK);
            sum -= (lv[k].size + ALIGN - 1) / ALIGN * ALIGN;
            lv[k] = lv[--n];
        }
        if (op % 1000 == 0) {
            struct mc_oa_stats st;
            mc_offset_alloc_stats(a, &st);
            assert_int_equal(st.allocated, sum);
            assert_int_equal(st.used_blocks, n);
            assert_int_equal(st.free, CAP - sum);
            assert_true(st.largest_free <= st.free);
        }
    }
    assert_true(fails > 0); /* the workload did reach exhaustion */
    /* Free everything: one block of the whole capacity comes back. */
    while (n) {
        shadow_mark(bits, lv[n - 1].offset, lv[n - 1].size, 0);
        assert_int_equal(mc_offset_alloc_release(a, lv[--n].handle), MC_OK);
    }
    struct mc_oa_stats st;
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.allocated, 0);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free, CAP);
    struct mc_oa_allocation al;
    assert_int_equal(mc_offset_alloc_alloc(a, CAP, &al), MC_OK);
    assert_int_equal(al.offset, 0);
    free(lv);
    free(bits);
    mc_offset_alloc_free(a);
}

static void test_coalescing(void **state)
{
    (void)state;
    struct mc_offset_alloc *a = mc_offset_alloc_new(1 << 20, 0);
    struct mc_oa_allocation x[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(mc_offset_alloc_alloc(a, 256 * 1024, &x[i]), MC_OK);
    struct mc_oa_stats st;
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.free, 0);
    assert_int_equal(st.largest_free, 0);
    struct mc_oa_allocation y;
    assert_int_equal(mc_offset_alloc_alloc(a, 64, &y), MC_ERR_NO_AVAILABLE_HANDLE);
    /* Free 0 and 2: two separate holes, no 512 KiB block. */
    assert_int_equal(mc_offset_alloc_release(a, x[0].handle), MC_OK);
    assert_int_equal(mc_offset_alloc_release(a, x[2].handle), MC_OK);
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.free_blocks, 2);
    assert_int_equal(st.largest_free, 256 * 1024);
    assert_int_equal(mc_offset_alloc_alloc(a, 512 * 1024, &y), MC_ERR_NO_AVAILABLE_HANDLE);
    /* Freeing 1 merges with both neighbours: 768 KiB in one block. */
    assert_int_equal(mc_offset_alloc_release(a, x[1].handle), MC_OK);
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free, 768 * 1024);
    assert_int_equal(mc_offset_alloc_alloc(a, 768 * 1024, &y), MC_OK);
    assert_int_equal(y.offset, 0);
    assert_int_equal(mc_offset_alloc_release(a, y.handle), MC_OK);
    assert_int_equal(mc_offset_alloc_release(a, x[3].handle), MC_OK);
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free, 1 << 20);
    mc_offset_alloc_free(a);
}

static void test_exhaustion(void **state)
{
    (void)state;
    struct mc_offset_alloc *a = mc_offset_alloc_new(1 << 20, 0);
    struct mc_oa_allocation al;
    int n = 0;
    while (mc_offset_alloc_alloc(a, 4096, &al) == MC_OK)
        n++;
    assert_int_equal(n, 256);
    assert_int_equal(mc_offset_alloc_alloc(a, 1, &al), MC_ERR_NO_AVAILABLE_HANDLE);
    mc_offset_alloc_free(a); /* with live allocations: must not leak */
}

static void test_alignment(void **state)
{
    (void)state;
    struct mc_offset_alloc *a = mc_offset_alloc_new((1 << 20) + 100, 4096);
    struct mc_oa_stats st;
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.capacity, 1 << 20); /* rounded down to the alignment */
    uint64_t s = 3;
    for (int i = 0; i < 100; i++) {
        struct mc_oa_allocation al;
        uint64_t size = 1 + rnd(&s) % 9000;
        if (mc_offset_alloc_alloc(a, size, &al) != MC_OK)
            break;
        assert_int_equal(al.offset % 4096, 0);
        assert_int_equal(mc_offset_alloc_block_size(a, al.handle), (size + 4095) / 4096 * 4096);
    }
    mc_offset_alloc_free(a);
}

static void test_bin_edges(void **state)
{
    (void)state;
    struct mc_offset_alloc *a = mc_offset_alloc_new(1ull << 30, 64);
    for (uint32_t b = 1; b < 120; b++) {
        uint64_t base = mc_oa_bin_size(b) * 64;
        if (base > (1ull << 28))
            break;
        for (int d = -1; d <= 1; d++) {
            uint64_t size = base + (uint64_t)(d * 64);
            if (size == 0)
                continue;
            struct mc_oa_allocation al;
            assert_int_equal(mc_offset_alloc_alloc(a, size, &al), MC_OK);
            assert_int_equal(mc_offset_alloc_block_size(a, al.handle), size);
            assert_int_equal(mc_offset_alloc_release(a, al.handle), MC_OK);
        }
    }
    struct mc_oa_stats st;
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.allocated, 0);
    mc_offset_alloc_free(a);
}

static void test_multi_tib(void **state)
{
    (void)state;
    uint64_t tib = 1ull << 40;
    struct mc_offset_alloc *a = mc_offset_alloc_new(4 * tib, 0);
    assert_non_null(a);
    struct mc_oa_allocation x[5];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(mc_offset_alloc_alloc(a, tib, &x[i]), MC_OK);
        assert_int_equal(x[i].offset, (uint64_t)i * tib);
    }
    assert_int_equal(mc_offset_alloc_alloc(a, 64, &x[4]), MC_ERR_NO_AVAILABLE_HANDLE);
    for (int i = 0; i < 4; i++)
        assert_int_equal(mc_offset_alloc_release(a, x[i].handle), MC_OK);
    assert_int_equal(mc_offset_alloc_alloc(a, 4 * tib, &x[0]), MC_OK);
    mc_offset_alloc_free(a);
    /* And the small end: a 1 MiB segment handles 64-byte objects. */
    a = mc_offset_alloc_new(1 << 20, 0);
    int n = 0;
    while (mc_offset_alloc_alloc(a, 64, &x[0]) == MC_OK)
        n++;
    assert_int_equal(n, (1 << 20) / 64);
    mc_offset_alloc_free(a);
}

/* Mixed workload: fill with random sizes until the first failure, churn, and report
 * utilisation (allocated / capacity at failure) and fragmentation (1 - largest/free). */
static void test_fragmentation_figure(void **state)
{
    (void)state;
    uint64_t cap = 256ull << 20;
    struct mc_offset_alloc *a = mc_offset_alloc_new(cap, 0);
    size_t lcap = 1 << 16, n = 0;
    struct live *lv = calloc(lcap, sizeof(*lv));
    uint64_t s = 99, requested = 0;
    double util_sum = 0;
    int rounds = 0;
    for (int round = 0; round < 8; round++) {
        for (;;) {
            uint64_t size = 4096 + rnd(&s) % (1 << 20);
            struct mc_oa_allocation al;
            if (n == lcap || mc_offset_alloc_alloc(a, size, &al) != MC_OK)
                break;
            lv[n++] = (struct live){al.handle, al.offset, size};
            requested += size;
        }
        util_sum += (double)requested / (double)cap;
        rounds++;
        /* Free a random half. */
        for (size_t k = 0; k < n / 2; k++) {
            size_t i = rnd(&s) % n;
            assert_int_equal(mc_offset_alloc_release(a, lv[i].handle), MC_OK);
            requested -= lv[i].size;
            lv[i] = lv[--n];
        }
    }
    struct mc_oa_stats st;
    mc_offset_alloc_stats(a, &st);
    double util = util_sum / rounds;
    double frag = st.free ? 1.0 - (double)st.largest_free / (double)st.free : 0.0;
    printf("offset_alloc mixed workload: mean utilisation at first failure %.3f, "
           "fragmentation after churn %.3f (%llu free blocks)\n",
           util, frag, (unsigned long long)st.free_blocks);
    assert_true(util > 0.80);
    free(lv);
    mc_offset_alloc_free(a);
}

/* A new allocator writes one node, not a chunk of them (a segment's mount stays cheap): the
 * nodes are handed out in order as they are needed, and a handle never handed out is refused
 * like garbage (release, block size, a claim's hint), never read as a node. */
static void test_nodes_handed_out_lazily(void **state)
{
    (void)state;
    enum { CHUNK = 4096 };
    struct mc_offset_alloc *a = mc_offset_alloc_new(1ull << 20, 64);
    assert_non_null(a);
    struct mc_oa_allocation o[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mc_offset_alloc_alloc(a, 4096, &o[i]), MC_OK);
        assert_true(o[i].handle < 8); /* the lowest nodes first */
    }
    uint32_t never[] = {8, 100, CHUNK - 1, CHUNK, CHUNK + 7};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
        assert_int_equal(mc_offset_alloc_release(a, never[i]), MC_ERR_INVALID_PARAMS);
        assert_int_equal(mc_offset_alloc_block_size(a, never[i]), 0);
        mc_offset_alloc_prefetch(a, never[i], true); /* ignored */
    }
    /* a claim whose hint was never handed out finds its way from a real node */
    struct mc_oa_allocation c;
    assert_int_equal(mc_offset_alloc_claim(a, 64 * 4096, 4096, 100, &c), MC_OK);
    assert_int_equal(c.offset, 64 * 4096);
    /* a released node is the next one handed out */
    assert_int_equal(mc_offset_alloc_release(a, o[1].handle), MC_OK);
    struct mc_oa_allocation r;
    assert_int_equal(mc_offset_alloc_alloc(a, 128, &r), MC_OK);
    assert_true(r.handle < 8);
    assert_int_equal(mc_offset_alloc_release(a, r.handle), MC_OK);
    assert_int_equal(mc_offset_alloc_release(a, r.handle), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_offset_alloc_release(a, o[0].handle), MC_OK);
    assert_int_equal(mc_offset_alloc_release(a, o[2].handle), MC_OK);
    assert_int_equal(mc_offset_alloc_release(a, c.handle), MC_OK);
    struct mc_oa_stats st;
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.used_blocks, 0);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free, 1ull << 20);
    mc_offset_alloc_free(a);
}

/* release_all: every allocation goes at once, the node chunks past the first are freed (the
 * handle bound is one chunk again), and the allocator works as new afterwards. */
static void test_release_all(void **state)
{
    (void)state;
    enum { N = 10000, CHUNK = 4096 };
    struct mc_offset_alloc *a = mc_offset_alloc_new(1ull << 30, 64);
    assert_non_null(a);
    assert_int_equal(mc_offset_alloc_handle_bound(a), CHUNK);
    struct mc_oa_allocation o;
    for (int i = 0; i < N; i++)
        assert_int_equal(mc_offset_alloc_alloc(a, 4096, &o), MC_OK);
    assert_int_equal(mc_offset_alloc_used_blocks(a), N);
    assert_true(mc_offset_alloc_handle_bound(a) >= 3 * CHUNK); /* N + 1 nodes: 3 chunks */
    mc_offset_alloc_release_all(a);
    struct mc_oa_stats st;
    mc_offset_alloc_stats(a, &st);
    assert_int_equal(st.used_blocks, 0);
    assert_int_equal(st.allocated, 0);
    assert_int_equal(st.free_blocks, 1);
    assert_int_equal(st.largest_free, 1ull << 30);
    assert_int_equal(mc_offset_alloc_handle_bound(a), CHUNK);
    assert_int_equal(mc_offset_alloc_release(a, o.handle), MC_ERR_INVALID_PARAMS);
    /* the whole capacity is one block again, and handles come from the kept chunk first */
    assert_int_equal(mc_offset_alloc_alloc(a, 1ull << 30, &o), MC_OK);
    assert_int_equal(o.offset, 0);
    assert_true(o.handle < CHUNK);
    assert_int_equal(mc_offset_alloc_release(a, o.handle), MC_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(mc_offset_alloc_alloc(a, 4096, &o), MC_OK);
    assert_int_equal(mc_offset_alloc_used_blocks(a), N);
    mc_offset_alloc_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bins),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_random_shadow),
        cmocka_unit_test(test_coalescing),
        cmocka_unit_test(test_exhaustion),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_bin_edges),
        cmocka_unit_test(test_multi_tib),
        cmocka_unit_test(test_fragmentation_figure),
        cmocka_unit_test(test_release_all),
        cmocka_unit_test(test_nodes_handed_out_lazily),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
