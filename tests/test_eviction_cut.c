/*
 * test_eviction_cut.c - a large target evicted by cut (src/master/eviction.c run_by_cut: a
 * census of deadlines, the cut selected from them, the victims evicted where they lie, shard by
 * shard) takes the same victims as the path that materializes every eligible object.
 *
 * Two masters get the same operations from one seeded generator (eviction_sides.h): objects with
 * random lease deadlines (distinct, or shared by several keys), hard- and soft-pinned ones,
 * in-flight Puts, two-replica objects of which some keep a LOCAL_DISK copy, leases still held at
 * the cycle, and between cycles churn (Removes, which move entries into holes, new Puts, reads).
 * One master evicts by cut, the other materializes every candidate; after each cycle every key's
 * state must be the same on both, and so must the DRAM in use. Small slices make the cut walk
 * several ranges of shards, and a case with three victims a shard lock hold makes each shard's
 * walk start over several times. Ties are compared with one eviction thread (both take tied
 * entries in shard and position order); distinct deadlines with two. One more case: churn between
 * the census and the walk (Removes and reads of old keys), which leaves the walk short, so a pass
 * over every eligible object takes the rest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eviction_sides.h"
#include "master/eviction.h"
#include "master/master_internal.h"
#include "master/segments.h"

#define NKEYS 30000
#define NCYCLES 8

/* Side 0 evicts by cut (at most hold_max victims a shard lock hold; 0: the default), side 1
 * materializes every candidate. */
static void sides_init(struct side sides[2], uint32_t threads, uint32_t hold_max)
{
    for (int sd = 0; sd < 2; sd++) {
        struct mc_evict_test_opts o = {
            .cut_min_objects = sd == 0 ? 1 : UINT32_MAX,
            .sample_min_objects = UINT32_MAX,
            .slice_objects = 211,
            .parallel_min_objects = threads > 1 ? 1 : 0,
            .cut_hold_max = hold_max,
        };
        es_side_init(&sides[sd], sd == 0 ? threads : 1, &o);
    }
}

static void compare_keys(struct side sides[2], int nkeys, int cyc)
{
    for (int i = 0; i < nkeys; i++) {
        int a = es_state_of(&sides[0], i), b = es_state_of(&sides[1], i);
        if (a != b)
            fail_msg("cycle %d key %d: by cut %d, every candidate %d", cyc, i, a, b);
    }
    assert_true(mc_segments_used_ratio(sides[0].m->segs) ==
                mc_segments_used_ratio(sides[1].m->segs));
}

/* Cycles at large targets with churn between them; per: keys sharing a deadline. */
static void cut_matches_candidates(uint32_t threads, uint32_t per, uint64_t seed, uint32_t hold_max)
{
    static struct side sides[2];
    sides_init(sides, threads, hold_max);
    int nkeys = NKEYS;
    uint32_t *when = malloc(NKEYS * sizeof(*when));
    enum es_kind *kinds = malloc(NKEYS * 2 * sizeof(*kinds));
    assert_non_null(when);
    assert_non_null(kinds);
    es_read_times(when, NKEYS, per, &seed);
    es_random_kinds(kinds, NKEYS, &seed);
    for (int sd = 0; sd < 2; sd++)
        es_fill(&sides[sd], NKEYS, kinds, when);
    uint64_t now = ES_T0_MS + NKEYS + ES_TTL_MS + 1;
    /* all at or above 10/44: every eligible object a candidate on side 1 */
    const double targets[NCYCLES] = {0.5, 0.3, 0.25, 0.6, 0.23, 0.4, 0.9, 0.5};
    uint64_t evicted = 0;
    for (int cyc = 0; cyc < NCYCLES; cyc++) {
        int held = (int)(es_rnd(&seed) % 50), held_keys[50];
        for (int h = 0; h < held; h++)
            held_keys[h] = (int)(es_rnd(&seed) % (uint64_t)nkeys);
        struct mc_evict_stats st[2];
        for (int sd = 0; sd < 2; sd++) {
            for (int h = 0; h < held; h++) /* leases still held at the cycle */
                es_read_at(&sides[sd], held_keys[h], now - 10);
            es_set_now(&sides[sd], now);
            assert_int_equal(
                mc_master_batch_evict(sides[sd].m, targets[cyc], targets[cyc] / 2, &st[sd]), MC_OK);
        }
        assert_int_equal(st[1].path, MC_EVICT_FULL_BYPASS);
        if (st[0].primary > 0) {
            assert_int_equal(st[0].path, MC_EVICT_BY_CUT);
            assert_int_equal(st[0].materialized, 0);
            assert_true(st[0].slices > 1); /* slices of 211 objects: several ranges of shards */
        }
        assert_int_equal(st[0].evictable, st[1].evictable);
        assert_int_equal(st[0].primary, st[1].primary);
        assert_int_equal(st[0].evicted, st[1].evicted);
        evicted += st[0].evicted;
        compare_keys(sides, nkeys, cyc);
        es_check_floors_and_counts(&sides[0]);
        /* churn: Removes move the shards' last entries into the holes; new Puts; reads */
        now += 1;
        int nread;
        int nput = es_churn(sides, nkeys, kinds, now, per, &seed, &nread);
        nkeys += nput;
        now += (uint64_t)nread + ES_TTL_MS + 2;
    }
    assert_true(evicted > NKEYS / 2);
    for (int sd = 0; sd < 2; sd++)
        mc_master_free(sides[sd].m);
    free(when);
    free(kinds);
}

static void test_cut_matches_candidates(void **state)
{
    (void)state;
    cut_matches_candidates(1, 1, 0xc07c07, 0);
}

/* Three victims a shard lock hold: each shard's walk starts over several times (about 15
 * victims a shard at the first cycle). */
static void test_cut_matches_candidates_small_holds(void **state)
{
    (void)state;
    cut_matches_candidates(1, 1, 0x40d5, 3);
}

static void test_cut_matches_candidates_with_ties(void **state)
{
    (void)state;
    cut_matches_candidates(1, 5, 0x7135, 0);
}

static void test_cut_matches_candidates_two_threads(void **state)
{
    (void)state;
    cut_matches_candidates(2, 1, 0x2d2d, 0);
}

static void test_cut_churn_after_census(void **state)
{
    (void)state;
    static struct side sides[2];
    static struct es_churn ch[2];
    sides_init(sides, 1, 0);
    struct mc_evict_stats st[2];
    uint32_t *when = malloc(NKEYS * sizeof(*when));
    assert_non_null(when);
    for (int i = 0; i < NKEYS; i++)
        when[i] = (uint32_t)i; /* key i the i-th oldest */
    for (int sd = 0; sd < 2; sd++) {
        es_fill(&sides[sd], NKEYS, NULL, when);
        /* between the census and the walk: every 17th key removed (entries move into the
         * holes) and every 5th of the oldest quarter read (its lease held now: no victim) */
        ch[sd] = (struct es_churn){.s = &sides[sd],
                                   .nkeys = NKEYS,
                                   .rm_from = 2,
                                   .rm_every = 17,
                                   .read_below = NKEYS / 4,
                                   .read_every = 5};
        struct mc_evict_test_opts o = {
            .cut_min_objects = sd == 0 ? 1 : UINT32_MAX,
            .slice_objects = 211,
            .after_census = es_churn_hook,
            .arg = &ch[sd],
        };
        mc_master_evict_set_test_opts(sides[sd].m, &o);
        es_set_now(&sides[sd], ES_T0_MS + NKEYS + ES_TTL_MS + 1);
        assert_int_equal(mc_master_batch_evict(sides[sd].m, 0.5, 0.25, &st[sd]), MC_OK);
    }
    assert_int_equal(st[0].path, MC_EVICT_FULL_FALLBACK); /* the walk came up short */
    assert_true(st[0].materialized > 0);
    assert_int_equal(st[0].evicted, st[1].evicted);
    assert_int_equal(st[0].evicted, st[0].primary);
    compare_keys(sides, NKEYS, 0);
    /* the victims: the oldest that were neither removed nor read after the census */
    int gone = 0;
    for (int i = 0; i < NKEYS; i++) {
        bool removed = i % 17 == 2, read = i < NKEYS / 4 && i % 5 == 0;
        int s = es_state_of(&sides[0], i);
        if (removed || read) {
            assert_int_equal(s, removed ? -1 : 8);
        } else if (gone < (int)st[0].primary) {
            assert_int_equal(s, -1);
            gone++;
        } else {
            assert_int_equal(s, 8);
        }
    }
    for (int sd = 0; sd < 2; sd++)
        mc_master_free(sides[sd].m);
    free(when);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_matches_candidates),
        cmocka_unit_test(test_cut_matches_candidates_small_holds),
        cmocka_unit_test(test_cut_matches_candidates_with_ties),
        cmocka_unit_test(test_cut_matches_candidates_two_threads),
        cmocka_unit_test(test_cut_churn_after_census),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
