/*
 * test_eviction_slices.c - a large eviction target goes in slices (eviction.c run_pass: at most
 * MC_EVICT_SLICE objects a round, here a test slice of 700): the cycle counts its slices, still
 * evicts exactly the oldest objects by lease deadline, and reaches its target; candidates that
 * fail their revalidation inside a slice (leased after the census) are replaced by the next
 * oldest ones, so the victims stay exactly the oldest eligible objects. Entries that a slice's
 * unlinks moved are followed to their new position, without a walk over their shard. Each case
 * runs twice: with every eligible object a candidate, and by cut (the victims evicted where they
 * lie, a slice a range of shards; the ones skipped replaced by a pass over every eligible one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/eviction.h"
#include "master/master_internal.h"
#include "master_fixture.h"

#define N 6000

static void key_of(char *buf, size_t len, int i)
{
    snprintf(buf, len, "slice-%05d", i);
}

static void large_target_in_slices(bool by_cut)
{
    struct fx *f = mfx_new(7, 256 * MIB, 0);
    assert_non_null(f);
    struct mc_master *m = f->m;
    struct mc_id a = f->a;
    char key[32];
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        assert_int_equal(tm_put(m, a, key, 4096), MC_OK);
    }
    /* lease deadlines in key order: a Get 1 ms apart for each */
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, key, strlen(key), &g), MC_OK);
        mc_fake_clock_advance_ms(&f->fc, 1);
    }
    mc_fake_clock_advance_ms(&f->fc, 3600 * 1000); /* every lease over */
    struct mc_evict_test_opts o = {.slice_objects = 700,
                                   .cut_min_objects = by_cut ? 1 : UINT32_MAX};
    mc_master_evict_set_test_opts(m, &o);
    struct mc_evict_stats st;
    assert_int_equal(mc_master_batch_evict(m, 0.5, 0.5, &st), MC_OK);
    assert_int_equal(st.path, by_cut ? MC_EVICT_BY_CUT : MC_EVICT_FULL_BYPASS);
    assert_int_equal(st.materialized, by_cut ? 0 : N);
    assert_int_equal(st.evicted, N / 2);
    assert_true(st.slices >= (N / 2 + 699) / 700); /* 3000 objects: 5 slices at least */
    /* entries the earlier slices' unlinks moved are followed, not searched for by a walk over
     * their shard (no Remove or Put ran between the slices) */
    assert_int_equal(st.moved_walks, 0);
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        bool ex = false;
        assert_int_equal(mc_master_exist_key(m, key, strlen(key), &ex), MC_OK);
        assert_int_equal(ex, i >= N / 2); /* the older half went, slice after slice */
    }
    mfx_free(f);
}

static void test_large_target_in_slices_oldest_first(void **state)
{
    (void)state;
    large_target_in_slices(false);
    large_target_in_slices(true);
}

/* Leases every 7th of the oldest half between the census and the rounds. */
static void lease_some(struct mc_master *m, void *arg)
{
    (void)arg;
    char key[32];
    for (int i = 0; i < N / 2; i += 7) {
        key_of(key, sizeof(key), i);
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, key, strlen(key), &g), MC_OK);
    }
}

static void skipped_candidates_replaced(bool by_cut)
{
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = tm_master(&fc, 7);
    assert_non_null(m);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc sd = tm_seg(1, 256 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &sd, NULL), MC_OK);
    char key[32];
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        assert_int_equal(tm_put(m, a, key, 4096), MC_OK);
    }
    /* key order is lease order, shuffled over the entries by the shards' hashing */
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, key, strlen(key), &g), MC_OK);
        mc_fake_clock_advance_ms(&fc, 1);
    }
    mc_fake_clock_advance_ms(&fc, 3600 * 1000);
    struct mc_evict_test_opts o = {.slice_objects = 700,
                                   .after_census = lease_some,
                                   .cut_min_objects = by_cut ? 1 : UINT32_MAX};
    mc_master_evict_set_test_opts(m, &o);
    struct mc_evict_stats st;
    /* target >= 10/44: every eligible object is a candidate, or the cut is the N/2-th deadline */
    assert_int_equal(mc_master_batch_evict(m, 0.5, 0.5, &st), MC_OK);
    int leased = (N / 2 + 6) / 7;
    /* by cut: the leased ones leave the walk short, and a pass over every eligible object (the
     * objects left) takes the next oldest */
    assert_int_equal(st.path, by_cut ? MC_EVICT_FULL_FALLBACK : MC_EVICT_FULL_BYPASS);
    /* (those not evicted, less the leased ones) */
    assert_int_equal(st.materialized, by_cut ? N / 2 : N);
    assert_int_equal(st.evicted, N / 2);
    assert_true(st.slices >= (N / 2 + 699) / 700 + 1); /* the replacements took one more */
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        bool ex = false;
        assert_int_equal(mc_master_exist_key(m, key, strlen(key), &ex), MC_OK);
        bool leased_now = i < N / 2 && i % 7 == 0;
        /* the oldest N/2 + leased eligible objects went, the leased ones stayed */
        assert_int_equal(ex, leased_now || i >= N / 2 + leased);
    }
    mc_master_free(m);
}

static void test_skipped_candidates_replaced_oldest_first(void **state)
{
    (void)state;
    skipped_candidates_replaced(false);
    skipped_candidates_replaced(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_target_in_slices_oldest_first),
        cmocka_unit_test(test_skipped_candidates_replaced_oldest_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
