/*
 * test_client_batch.c - the connector batch calls of libmooncake_client (client_batch.c,
 * client_upsert.c) against a real mooncake_master, two clients in this process:
 *   - a value put in three parts reads back whole, and scattered over two parts of another
 *     split; a one-part value goes zero-copy both ways; parts too small are BUFFER_OVERFLOW;
 *   - mc_batch_get_alloc sizes each buffer to its value; mc_batch_get_ranges copies ranges and
 *     fails a range past the end or a missing key alone;
 *   - mc_batch_query describes each key from one call; mc_batch_remove removes per key;
 *   - mc_upsert / mc_batch_upsert replace values; mc_remove_by_regex counts what it removed;
 *   - bad input (NULL arrays, out-of-range indices, an empty pattern) is INVALID_PARAMS.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/client.h"
#include "test_client_util.h"

struct fx {
    struct test_master m;
    struct mc_client *a, *b; /* a contributes DRAM; b reads and writes remotely */
};

static struct mc_client *open_client(const char *master, uint64_t seg)
{
    struct mc_client_config cfg;
    mc_client_config_init(&cfg);
    cfg.master_address = master;
    cfg.segment_size = seg;
    struct mc_client *c = NULL;
    int rc = mc_client_open(&cfg, &c);
    if (rc)
        fail_msg("mc_client_open: %s", mc_strerror(rc));
    return c;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    *state = NULL;
    if (!f || tm_start(&f->m, 0, NULL) != 0) {
        free(f);
        return -1;
    }
    f->a = open_client(f->m.addr, 32u << 20);
    f->b = open_client(f->m.addr, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    if (!f)
        return 0;
    mc_client_close(f->b);
    mc_client_close(f->a);
    tm_stop(&f->m);
    free(f);
    return 0;
}

static void test_parts_round_trip(void **state)
{
    struct fx *f = *state;
    uint8_t v[3000], w[5000], got[3000], g1[1000], g2[2000], one[5000];
    tm_fill(v, sizeof(v), 1);
    tm_fill(w, sizeof(w), 2);
    const char *keys[2] = {"parts/3", "parts/1"};
    const void *p0[3] = {v, v + 100, v + 2500};
    size_t l0[3] = {100, 2400, 500};
    const void *p1[1] = {w};
    size_t l1[1] = {sizeof(w)};
    const void *const *parts[2] = {p0, p1};
    const size_t *lens[2] = {l0, l1};
    size_t np[2] = {3, 1};
    int res[2] = {-1, -1};
    assert_int_equal(mc_batch_put_parts(f->b, 2, keys, parts, lens, np, NULL, res), 0);
    assert_int_equal(res[0], 0);
    assert_int_equal(res[1], 0);
    assert_int_equal(mc_get(f->b, "parts/3", got, sizeof(got)), sizeof(v));
    assert_memory_equal(got, v, sizeof(v));
    /* read back scattered over another split, and the one-part value straight */
    void *q0[2] = {g1, g2};
    size_t c0[2] = {sizeof(g1), sizeof(g2)};
    void *q1[1] = {one};
    size_t c1[1] = {sizeof(one)};
    void *const *qs[2] = {q0, q1};
    const size_t *cs[2] = {c0, c1};
    int64_t out[2] = {0, 0};
    size_t nq[2] = {2, 1};
    assert_int_equal(mc_batch_get_parts(f->b, 2, keys, qs, cs, nq, out), 0);
    assert_int_equal(out[0], sizeof(v));
    assert_int_equal(out[1], sizeof(w));
    assert_memory_equal(g1, v, sizeof(g1));
    assert_memory_equal(g2, v + sizeof(g1), sizeof(g2));
    assert_memory_equal(one, w, sizeof(w));
    /* parts that cannot hold the value */
    size_t small[2] = {1000, 1000};
    const size_t *cs2[1] = {small};
    assert_int_equal(mc_batch_get_parts(f->b, 1, keys, qs, cs2, nq, out), 0);
    assert_int_equal(out[0], MC_ERR_BUFFER_OVERFLOW);
}

static void test_alloc_ranges_query_remove(void **state)
{
    struct fx *f = *state;
    uint8_t v[4096];
    tm_fill(v, sizeof(v), 3);
    assert_int_equal(mc_put(f->b, "r/a", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_put(f->b, "r/b", v, 10, NULL), 0);
    const char *keys[3] = {"r/a", "r/b", "r/none"};
    void *outs[3];
    int64_t res[3];
    assert_int_equal(mc_batch_get_alloc(f->b, 3, keys, 0, outs, res), 0);
    assert_int_equal(res[0], sizeof(v));
    assert_int_equal(res[1], 10);
    assert_int_equal(res[2], MC_ERR_OBJECT_NOT_FOUND);
    assert_null(outs[2]);
    assert_memory_equal(outs[0], v, sizeof(v));
    assert_memory_equal(outs[1], v, 10);
    mc_value_free(outs[0]);
    mc_value_free(outs[1]);
    /* max_size: a larger value is BUFFER_OVERFLOW, nothing allocated */
    assert_int_equal(mc_batch_get_alloc(f->b, 2, keys, 100, outs, res), 0);
    assert_int_equal(res[0], MC_ERR_BUFFER_OVERFLOW);
    assert_null(outs[0]);
    mc_value_free(outs[1]);

    uint8_t d0[100], d1[8], d2[4];
    size_t ki[4] = {0, 1, 1, 2};
    uint64_t src[4] = {4000, 2, 8, 0};
    void *dst[4] = {d0, d1, d1, d2};
    size_t len[4] = {96, 8, 8, 4};
    int64_t rr[4];
    assert_int_equal(mc_batch_get_ranges(f->b, 3, keys, 4, ki, src, dst, len, rr), 0);
    assert_int_equal(rr[0], 96);
    assert_memory_equal(d0, v + 4000, 96);
    assert_int_equal(rr[1], 8);
    assert_memory_equal(d1, v + 2, 8);
    assert_int_equal(rr[2], MC_ERR_INVALID_PARAMS); /* 8 + 8 > 10 */
    assert_int_equal(rr[3], MC_ERR_OBJECT_NOT_FOUND);
    size_t bad[1] = {3};
    assert_int_equal(mc_batch_get_ranges(f->b, 3, keys, 1, bad, src, dst, len, rr),
                     MC_ERR_INVALID_PARAMS);

    struct mc_object_info info[3];
    int qr[3];
    assert_int_equal(mc_batch_query(f->b, 3, keys, info, qr), 0);
    assert_int_equal(qr[0], 0);
    assert_int_equal(info[0].size, sizeof(v));
    assert_int_equal(info[0].replica_count, 1);
    assert_int_equal(info[0].replicas[0].type, MC_REPLICA_MEMORY);
    assert_string_equal(info[0].replicas[0].endpoint, mc_client_endpoint(f->a));
    assert_int_equal(qr[2], MC_ERR_OBJECT_NOT_FOUND);
    for (int i = 0; i < 3; i++)
        mc_object_info_free(&info[i]);

    int rm[3];
    assert_int_equal(mc_batch_remove(f->b, 3, keys, true, rm), 0);
    assert_int_equal(rm[0], 0);
    assert_int_equal(rm[1], 0);
    assert_int_equal(rm[2], MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_exist(f->b, "r/a"), 0);
}

static void test_upsert_and_regex(void **state)
{
    struct fx *f = *state;
    uint8_t v1[2000], v2[3000], got[3000];
    tm_fill(v1, sizeof(v1), 4);
    tm_fill(v2, sizeof(v2), 5);
    assert_int_equal(mc_put(f->b, "u/k", v1, sizeof(v1), NULL), 0);
    assert_int_equal(mc_upsert(f->b, "u/k", v2, sizeof(v2), NULL), 0);
    assert_int_equal(mc_get(f->b, "u/k", got, sizeof(got)), sizeof(v2));
    assert_memory_equal(got, v2, sizeof(v2));
    const char *keys[2] = {"u/k", "u/new"};
    const void *bufs[2] = {v1, v2};
    size_t lens[2] = {sizeof(v1), 7};
    int res[2] = {-1, -1};
    assert_int_equal(mc_batch_upsert(f->b, 2, keys, bufs, lens, NULL, res), 0);
    assert_int_equal(res[0], 0);
    assert_int_equal(res[1], 0);
    assert_int_equal(mc_get(f->b, "u/k", got, sizeof(got)), sizeof(v1));
    assert_memory_equal(got, v1, sizeof(v1));
    assert_int_equal(mc_get(f->b, "u/new", got, sizeof(got)), 7);
    assert_memory_equal(got, v2, 7);
    assert_int_equal(mc_remove_by_regex(f->b, "u/.*", true), 2);
    assert_int_equal(mc_remove_by_regex(f->b, "u/.*", true), 0);
    assert_int_equal(mc_remove_by_regex(f->b, "(", true), MC_ERR_INVALID_PARAMS);
}

static void test_bad_input(void **state)
{
    struct fx *f = *state;
    const char *keys[1] = {"x"};
    int r[1];
    int64_t r64[1];
    assert_int_equal(mc_batch_put_parts(f->b, 1, keys, NULL, NULL, NULL, NULL, r),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_batch_get_parts(NULL, 1, keys, NULL, NULL, NULL, r64),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_batch_get_alloc(f->b, 1, keys, 0, NULL, r64), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_batch_query(f->b, 1, NULL, NULL, r), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_batch_remove(f->b, 1, NULL, false, r), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_remove_by_regex(f->b, "", false), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_remove_by_regex(f->b, NULL, false), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_upsert(f->b, "x", NULL, 5, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_upsert(f->b, "", "v", 1, NULL), MC_ERR_INVALID_KEY);
    const char *bad[1] = {""};
    assert_int_equal(mc_batch_remove(f->b, 1, bad, false, r), MC_ERR_INVALID_KEY);
    /* n 0 is a no-op */
    assert_int_equal(mc_batch_put_parts(f->b, 0, NULL, NULL, NULL, NULL, NULL, NULL), 0);
    assert_int_equal(mc_batch_get_ranges(f->b, 0, NULL, 0, NULL, NULL, NULL, NULL, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parts_round_trip),
        cmocka_unit_test(test_alloc_ranges_query_remove),
        cmocka_unit_test(test_upsert_and_regex),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
