/*
 * test_bench_lru.c - the replay's reference caches, its prefix rule, its trace parser and its
 * block bytes (src/tools/bench_lru.c, bench_trace.c).
 *
 *   lru_order           eviction is least recently used first; a touch refreshes
 *   lru_capacity_zero   capacity 0 caches nothing; unbounded never evicts
 *   hand_trace          a five-request trace whose hits are worked out by hand (below), for an
 *                       LRU of 4 blocks and an unbounded cache
 *   longer_than_cache   a request longer than the cache keeps only its newest blocks
 *   against_naive       20,000 random touches agree with a naive array LRU (every capacity
 *                       1..40), so the hash table's deletions are right
 *   prefix_rules        mc_prefix_present / mc_prefix_read stop at the first miss or error
 *   capacities          usable DRAM and disk in whole blocks / records
 *   parse               the trace format: members skipped, --limit, blank lines
 *   parse_errors        malformed lines are errors that name the line, never a crash
 *   block_bytes         the pattern is deterministic and every wrong byte is counted
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tools/bench_lru.h"
#include "tools/bench_trace.h"

static void test_lru_order(void **state)
{
    struct mc_lru *l = mc_lru_new(3);
    uint64_t id;

    (void)state;
    assert_non_null(l);
    assert_false(mc_lru_oldest(l, &id));
    for (uint64_t i = 1; i <= 3; i++)
        assert_int_equal(mc_lru_touch(l, i), 0);
    assert_int_equal(mc_lru_size(l), 3);
    assert_int_equal(mc_lru_touch(l, 1), 0); /* order, oldest first: 2 3 1 */
    assert_true(mc_lru_oldest(l, &id));
    assert_int_equal(id, 2);
    assert_int_equal(mc_lru_touch(l, 4), 0); /* evicts 2 */
    assert_false(mc_lru_contains(l, 2));
    assert_true(mc_lru_contains(l, 1));
    assert_true(mc_lru_contains(l, 3));
    assert_true(mc_lru_contains(l, 4));
    assert_int_equal(mc_lru_evictions(l), 1);
    assert_true(mc_lru_oldest(l, &id));
    assert_int_equal(id, 3);
    assert_int_equal(mc_lru_size(l), 3);
    mc_lru_free(l);
}

static void test_lru_capacity_zero(void **state)
{
    struct mc_lru *z = mc_lru_new(0), *u = mc_lru_new(MC_LRU_UNBOUNDED);
    uint64_t ids[] = {5, 6, 5};

    (void)state;
    assert_non_null(z);
    assert_non_null(u);
    assert_int_equal(mc_lru_request(z, ids, 3), 0);
    assert_int_equal(mc_lru_request(z, ids, 3), 0);
    assert_int_equal(mc_lru_size(z), 0);
    for (uint64_t i = 0; i < 100000; i++)
        assert_int_equal(mc_lru_touch(u, i * 7919), 0);
    assert_int_equal(mc_lru_size(u), 100000);
    assert_int_equal(mc_lru_evictions(u), 0);
    assert_true(mc_lru_contains(u, 0));
    assert_true(mc_lru_contains(u, 99999ull * 7919));
    mc_lru_free(z);
    mc_lru_free(u);
}

/*
 * By hand, capacity 4 (cache listed oldest first after each request):
 *   R1 [1 2 3]    hits 0            -> 1 2 3
 *   R2 [1 2 5]    hits 2 (1 2)      -> 3 1 2 5
 *   R3 [1 9 3]    hits 1 (1; 3 is present but after the miss of 9, so not a hit)
 *                 touch 1 -> 3 2 5 1; insert 9 evicts 3 -> 2 5 1 9; insert 3 evicts 2
 *                                   -> 5 1 9 3
 *   R4 [2 5]      hits 0 (2 absent); insert 2 evicts 5 -> 1 9 3 2; insert 5 evicts 1
 *                                   -> 9 3 2 5
 *   R5 [9 3 2 5]  hits 4
 *   total 7 hits of 15 blocks. Unbounded: 0 + 2 + 1 + 2 + 4 = 9.
 */
static const char HAND_TRACE[] =
    "{\"timestamp\": 0, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}\n"
    "{\"timestamp\": 10, \"hash_ids\": [1, 2, 5], \"note\": {\"a\": [true, null, \"x\\\"y\"]}}\n"
    "\n"
    "{\"hash_ids\":[1,9,3],\"timestamp\":25.5}\n"
    "  {\"timestamp\": 40, \"hash_ids\": [2, 5]}  \r\n"
    "{\"timestamp\": 41, \"input_length\": -3, \"hash_ids\": [9, 3, 2, 5]}\n";

static void test_hand_trace(void **state)
{
    static const int64_t lru_hits[] = {0, 2, 1, 0, 4}, unb_hits[] = {0, 2, 1, 2, 4};
    struct mc_trace t;
    struct mc_lru *l = mc_lru_new(4), *u = mc_lru_new(MC_LRU_UNBOUNDED);
    char err[128];
    int64_t sum = 0;
    uint64_t id;

    (void)state;
    assert_int_equal(mc_trace_parse(HAND_TRACE, strlen(HAND_TRACE), 0, &t, err, sizeof(err)), 0);
    assert_int_equal(t.nreq, 5);
    assert_int_equal(t.nids, 15);
    for (size_t i = 0; i < t.nreq; i++) {
        assert_int_equal(mc_lru_request(l, t.reqs[i].ids, t.reqs[i].n), lru_hits[i]);
        assert_int_equal(mc_lru_request(u, t.reqs[i].ids, t.reqs[i].n), unb_hits[i]);
        sum += lru_hits[i];
    }
    assert_int_equal(sum, 7);
    /* final order 9 3 2 5: 9 is the oldest */
    assert_true(mc_lru_oldest(l, &id));
    assert_int_equal(id, 9);
    assert_false(mc_lru_contains(l, 1));
    assert_int_equal(mc_lru_evictions(l), 4);
    assert_int_equal(mc_lru_size(u), 5);
    mc_lru_free(l);
    mc_lru_free(u);
    mc_trace_destroy(&t);
}

static void test_longer_than_cache(void **state)
{
    struct mc_lru *l = mc_lru_new(2);
    uint64_t ids[] = {1, 2, 3};

    (void)state;
    assert_int_equal(mc_lru_request(l, ids, 3), 0);
    assert_false(mc_lru_contains(l, 1));
    assert_true(mc_lru_contains(l, 2));
    assert_true(mc_lru_contains(l, 3));
    /* 1 is gone, so the prefix is empty although 2 and 3 are cached */
    assert_int_equal(mc_lru_request(l, ids, 3), 0);
    assert_int_equal(mc_lru_request(l, ids + 1, 2), 2);
    mc_lru_free(l);
}

/* A naive LRU: an array, most recent last. */
struct naive {
    uint64_t v[64];
    size_t n, cap;
};

static bool naive_has(const struct naive *nv, uint64_t id)
{
    for (size_t i = 0; i < nv->n; i++)
        if (nv->v[i] == id)
            return true;
    return false;
}

static void naive_touch(struct naive *nv, uint64_t id)
{
    size_t i;

    for (i = 0; i < nv->n && nv->v[i] != id; i++)
        ;
    if (i < nv->n) {
        memmove(nv->v + i, nv->v + i + 1, (nv->n - i - 1) * sizeof(uint64_t));
        nv->n--;
    } else if (nv->n == nv->cap) {
        memmove(nv->v, nv->v + 1, (nv->n - 1) * sizeof(uint64_t));
        nv->n--;
    }
    nv->v[nv->n++] = id;
}

static void test_against_naive(void **state)
{
    (void)state;
    for (size_t cap = 1; cap <= 40; cap++) {
        struct mc_lru *l = mc_lru_new(cap);
        struct naive nv = {.cap = cap};
        uint64_t x = 0x9e3779b97f4a7c15ull + cap, id;

        assert_non_null(l);
        for (int i = 0; i < 20000; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            id = (x % 97) * 1000003ull; /* colliding homes in a small table */
            assert_int_equal(mc_lru_contains(l, id), naive_has(&nv, id));
            assert_int_equal(mc_lru_touch(l, id), 0);
            naive_touch(&nv, id);
            assert_int_equal(mc_lru_size(l), nv.n);
        }
        for (size_t k = 0; k < nv.n; k++)
            assert_true(mc_lru_contains(l, nv.v[k]));
        assert_true(mc_lru_oldest(l, &id));
        assert_int_equal(id, nv.v[0]);
        mc_lru_free(l);
    }
}

static void test_prefix_rules(void **state)
{
    int e1[] = {1, 1, 0, 1}, e2[] = {1, -704, 1}, e3[] = {0, 1};
    int64_t g1[] = {64, 64, 64}, g2[] = {64, -706, 64}, g3[] = {64, 63, 64};

    (void)state;
    assert_int_equal(mc_prefix_present(e1, 4), 2);
    assert_int_equal(mc_prefix_present(e2, 3), 1);
    assert_int_equal(mc_prefix_present(e3, 2), 0);
    assert_int_equal(mc_prefix_present(e1, 0), 0);
    assert_int_equal(mc_prefix_read(g1, 3, 64), 3);
    assert_int_equal(mc_prefix_read(g2, 3, 64), 1);
    assert_int_equal(mc_prefix_read(g3, 3, 64), 1);
}

static void test_capacities(void **state)
{
    (void)state;
    /* 2 x 64 MiB at 0.90: 115.2 MiB of 64 KiB blocks = 1843.2 -> 1843 */
    assert_int_equal(mc_lru_dram_blocks(128ull << 20, 0.90, 64 << 10), 1843);
    assert_int_equal(mc_lru_dram_blocks(128ull << 20, 1.0, 64 << 10), 2048);
    assert_int_equal(mc_lru_dram_blocks(128ull << 20, 0.90, 0), 0);
    /* a 64 KiB record takes 4 KiB of header + key and 64 KiB of value: 512 MiB x 0.9 / 68 KiB =
     * 6939.07 -> 6939 */
    assert_int_equal(mc_lru_disk_blocks(512ull << 20, 0.90, 64 << 10), 6939);
    /* a 1000-byte value is padded to 4 KiB: 1 MiB / 8 KiB = 128 */
    assert_int_equal(mc_lru_disk_blocks(1 << 20, 1.0, 1000), 128);
}

static void test_parse(void **state)
{
    struct mc_trace t;
    char err[128];

    (void)state;
    assert_int_equal(mc_trace_parse(HAND_TRACE, strlen(HAND_TRACE), 2, &t, err, sizeof(err)), 0);
    assert_int_equal(t.nreq, 2);
    assert_int_equal(t.nids, 6);
    assert_int_equal(t.max_n, 3);
    assert_int_equal(t.reqs[1].timestamp_ms, 10);
    assert_int_equal(t.reqs[1].ids[2], 5);
    mc_trace_destroy(&t);
    assert_int_equal(mc_trace_parse(HAND_TRACE, strlen(HAND_TRACE), 0, &t, err, sizeof(err)), 0);
    assert_int_equal(t.reqs[2].timestamp_ms, 25);
    assert_int_equal(t.reqs[4].n, 4);
    assert_int_equal(t.reqs[4].ids[0], 9);
    assert_int_equal(t.max_n, 4);
    mc_trace_destroy(&t);

    static const char big[] = "{\"timestamp\":0,\"hash_ids\":[18446744073709551615,0,[]]}";
    assert_int_equal(mc_trace_parse(big, strlen(big), 0, &t, err, sizeof(err)), -1);
    static const char ok[] = "{\"timestamp\":0,\"hash_ids\":[18446744073709551615,0]}";
    assert_int_equal(mc_trace_parse(ok, strlen(ok), 0, &t, err, sizeof(err)), 0);
    assert_true(t.reqs[0].ids[0] == UINT64_MAX);
    mc_trace_destroy(&t);
    static const char empty_ids[] = "{\"timestamp\":3,\"hash_ids\":[]}";
    assert_int_equal(mc_trace_parse(empty_ids, strlen(empty_ids), 0, &t, err, sizeof(err)), 0);
    assert_int_equal(t.reqs[0].n, 0);
    mc_trace_destroy(&t);
}

static void test_parse_errors(void **state)
{
    static const char *const bad[] = {
        "",
        "\n\n",
        "{\"timestamp\": 0}\n",
        "{\"hash_ids\": [1]}\n",
        "{\"timestamp\": -1, \"hash_ids\": [1]}\n",
        "{\"timestamp\": 0, \"hash_ids\": [1.5]}\n",
        "{\"timestamp\": 0, \"hash_ids\": [-2]}\n",
        "{\"timestamp\": 0, \"hash_ids\": [1,]}\n",
        "{\"timestamp\": 0, \"hash_ids\": [1]} x\n",
        "{\"timestamp\": 0, \"hash_ids\": [1], \"hash_ids\": [2]}\n",
        "{\"timestamp\": 0, \"hash_ids\": [1], \"s\": \"unterminated}\n",
        "{\"timestamp\": 0, \"hash_ids\": [1], \"n\": "
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]"
        "]]]]]]]]]]]]]]]]]]]]]]]]]}\n",
        "[1, 2]\n",
        "{\"timestamp\": 0, \"hash_ids\": 7}\n",
        "{\"timestamp\": 0 \"hash_ids\": [1]}\n",
        "{\"timestamp\": 0, \"hash_ids\": [1, 99999999999999999999]}\n",
        "{\"timestamp\": 0, \"hash_ids\": [1], \"t\": tru}\n",
    };
    static const char second[] = "{\"timestamp\": 0, \"hash_ids\": [1]}\n{\"timestamp\": 1\n";
    static const char nul[] = "{\"timestamp\": 0, \"hash_ids\": [1\0]}";
    struct mc_trace t;
    char err[128];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(mc_trace_parse(bad[i], strlen(bad[i]), 0, &t, err, sizeof(err)), -1);
        assert_true(err[0] != '\0');
        assert_null(t.reqs);
    }
    assert_int_equal(mc_trace_parse(second, strlen(second), 0, &t, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "line 2"));
    assert_int_equal(mc_trace_parse(nul, sizeof(nul) - 1, 0, &t, err, sizeof(err)), -1);
    assert_int_equal(mc_trace_load("/nonexistent/trace.jsonl", 0, &t, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "nonexistent"));
}

static void test_block_bytes(void **state)
{
    static uint8_t a[65536], b[65536];

    (void)state;
    mc_block_fill(a, sizeof(a), 42, 1);
    mc_block_fill(b, sizeof(b), 42, 1);
    assert_memory_equal(a, b, sizeof(a));
    assert_int_equal(mc_block_check(a, sizeof(a), 42, 1), 0);
    a[12345] ^= 0x01;
    assert_int_equal(mc_block_check(a, sizeof(a), 42, 1), 1);
    a[0] ^= 0xff;
    a[65535] ^= 0x80;
    assert_int_equal(mc_block_check(a, sizeof(a), 42, 1), 3);
    /* another block's bytes, or another seed's, are almost all wrong */
    assert_true(mc_block_check(b, sizeof(b), 43, 1) > 60000);
    assert_true(mc_block_check(b, sizeof(b), 42, 2) > 60000);
    memset(b, 0, sizeof(b));
    assert_true(mc_block_check(b, sizeof(b), 42, 1) > 60000);
    /* a length that is not a multiple of 8 */
    mc_block_fill(a, 13, 7, 9);
    assert_int_equal(mc_block_check(a, 13, 7, 9), 0);
    a[12] ^= 1;
    assert_int_equal(mc_block_check(a, 13, 7, 9), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lru_order),     cmocka_unit_test(test_lru_capacity_zero),
        cmocka_unit_test(test_hand_trace),    cmocka_unit_test(test_longer_than_cache),
        cmocka_unit_test(test_against_naive), cmocka_unit_test(test_prefix_rules),
        cmocka_unit_test(test_capacities),    cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_errors),  cmocka_unit_test(test_block_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
