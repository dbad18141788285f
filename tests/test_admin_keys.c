/*
 * test_admin_keys.c - the master's paged key listing (src/master/admin_keys.c), on the master
 * core with a fake clock: pages of every size cover every complete key exactly once; a Put in
 * flight is not listed; keys removed and added between pages never make a key that stayed
 * present appear twice or go missing; bad cursors are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/admin_keys.h"
#include "master_fixture.h"

#define NKEYS 300

static int setup(void **state)
{
    struct fx *f = mfx_new(3, 64 * MIB, 0);
    if (!f)
        return -1;
    *state = f;
    char k[32];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(k, sizeof(k), "key-%04d", i);
        if (tm_put(f->m, f->a, k, 64) != MC_OK)
            return -1;
    }
    return 0;
}

/* Lists everything in pages of `limit`; counts[i] = times key-i was seen. Between pages, calls
 * between(f, page_no) if given. Returns the number of pages. */
static int list_all(struct fx *f, size_t limit, int *counts, int extra_cap, int *extra_seen,
                    void (*between)(struct fx *, int))
{
    uint32_t shard = 0;
    char *after = NULL;
    size_t after_len = 0;
    int pages = 0;
    for (;;) {
        struct mc_key_page pg;
        assert_int_equal(mc_master_list_keys(f->m, shard, after, after_len, limit, &pg), MC_OK);
        free(after);
        after = NULL;
        assert_true(pg.n <= limit);
        for (size_t i = 0; i < pg.n; i++) {
            const char *k = pg.buf + pg.keys_off[i];
            assert_int_equal(strlen(k), pg.keys_len[i]);
            int idx;
            if (sscanf(k, "key-%d", &idx) == 1 && idx >= 0 && idx < NKEYS)
                counts[idx]++;
            else if (sscanf(k, "new-%d", &idx) == 1 && idx >= 0 && idx < extra_cap)
                extra_seen[idx]++;
            else
                fail_msg("unexpected key %s", k);
        }
        pages++;
        assert_true(pages < 10000);
        if (!pg.more) {
            mc_key_page_free(&pg);
            break;
        }
        shard = pg.next_shard;
        after_len = pg.next_after_len;
        after = malloc(after_len + 1);
        memcpy(after, pg.next_after, after_len + 1);
        mc_key_page_free(&pg);
        if (between)
            between(f, pages);
    }
    free(after);
    return pages;
}

static void test_pages_cover_every_key_once(void **state)
{
    struct fx *f = *state;
    const size_t limits[] = {1, 2, 7, 64, 299, 300, 301, 100000};
    for (size_t li = 0; li < sizeof(limits) / sizeof(limits[0]); li++) {
        int counts[NKEYS] = {0};
        int pages = list_all(f, limits[li], counts, 0, NULL, NULL);
        for (int i = 0; i < NKEYS; i++)
            assert_int_equal(counts[i], 1);
        assert_true((size_t)pages >= (NKEYS + limits[li] - 1) / limits[li]);
    }
}

static void test_put_in_flight_not_listed(void **state)
{
    struct fx *f = *state;
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->a, "pending", 7, 64, NULL, &r), MC_OK);
    struct mc_key_page pg;
    assert_int_equal(mc_master_list_keys(f->m, 0, NULL, 0, 100000, &pg), MC_OK);
    assert_int_equal(pg.n, NKEYS);
    assert_false(pg.more);
    for (size_t i = 0; i < pg.n; i++)
        assert_string_not_equal(pg.buf + pg.keys_off[i], "pending");
    mc_key_page_free(&pg);
}

/* Between pages: force-remove one original key and put one new key. */
static int g_removed[NKEYS];
static void churn(struct fx *f, int page)
{
    char k[32];
    int victim = (page * 37) % NKEYS;
    snprintf(k, sizeof(k), "key-%04d", victim);
    if (!g_removed[victim] && mc_master_remove(f->m, k, strlen(k), true) == MC_OK)
        g_removed[victim] = 1;
    snprintf(k, sizeof(k), "new-%d", page);
    assert_int_equal(tm_put(f->m, f->a, k, 64), MC_OK);
}

static void test_changes_between_pages(void **state)
{
    struct fx *f = *state;
    int counts[NKEYS] = {0}, extra[4096] = {0};
    memset(g_removed, 0, sizeof(g_removed));
    int pages = list_all(f, 5, counts, 4096, extra, churn);
    assert_true(pages > 10);
    int nremoved = 0;
    for (int i = 0; i < NKEYS; i++)
        nremoved += g_removed[i];
    assert_true(nremoved > 10);
    for (int i = 0; i < NKEYS; i++) {
        if (g_removed[i])
            assert_true(counts[i] <= 1); /* removed during the listing: may or may not appear */
        else
            assert_int_equal(counts[i], 1); /* present throughout: exactly once */
    }
    for (int i = 0; i < 4096; i++)
        assert_true(extra[i] <= 1); /* added during the listing: never twice */
}

static void test_bad_arguments(void **state)
{
    struct fx *f = *state;
    struct mc_key_page pg;
    assert_int_equal(mc_master_list_keys(f->m, 0, NULL, 0, 0, &pg), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_list_keys(f->m, mc_master_list_keys_shards(), NULL, 0, 10, &pg),
                     MC_ERR_INVALID_PARAMS);
    /* a cursor past the last shard's keys: an empty last page */
    assert_int_equal(
        mc_master_list_keys(f->m, mc_master_list_keys_shards() - 1, "\xff\xff", 2, 10, &pg), MC_OK);
    assert_false(pg.more);
    mc_key_page_free(&pg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pages_cover_every_key_once, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_put_in_flight_not_listed, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_changes_between_pages, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, mfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
