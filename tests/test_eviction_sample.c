/*
 * test_eviction_sample.c - the sampled census of a selective BatchEvict cycle
 * (src/master/eviction_sample.c) picks the same victims, cycle after cycle, as the census of
 * every entry.
 *
 * Two masters on fake clocks get the same operations from one seeded generator: objects with
 * random distinct lease deadlines, hard- and soft-pinned ones, in-flight Puts, two-replica
 * objects of which some keep a LOCAL_DISK copy, objects whose lease is still held, and between
 * cycles churn (Removes, which move entries into holes, new Puts, reads). One master takes the
 * sampled census on every selective cycle, the other the census of every entry; after each
 * cycle every key's state (gone, or its MEMORY and LOCAL_DISK replica counts) must be the same
 * on both. Small slices make a cycle evict in several rounds, oldest first, so the order across
 * rounds is compared too. The test checks that the sampled census ran and skipped blocks
 * (visited fewer entries than the table holds), so the lease floors it relies on are exercised,
 * and after every cycle and every churn that each block's floor is at most its deadlines and
 * each shard's population count is exact. Two more cases: churn between the census and the
 * frontier (the recorded positions go stale), and an insert into a block whose floor is above
 * the new key's deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/hash.h"
#include "eviction_sides.h"
#include "master/eviction.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/segments.h"
#include "master/shard.h"

#define NKEYS 40000 /* about 39 entries (five blocks) per shard */
#define NCYCLES 10

/* Side options: the sampled census on every selective cycle (sampled) or never; slices of 37
 * objects, so a cycle evicts in several rounds; the workers on a small table when threads > 1. */
static void side_init_threads(struct side *s, bool sampled, uint32_t threads)
{
    struct mc_evict_test_opts o = {
        .sample_min_objects = sampled ? 1 : UINT32_MAX,
        .slice_objects = 37,
        .parallel_min_objects = threads > 1 ? 1 : 0,
    };
    es_side_init(s, threads, &o);
}

static void side_init(struct side *s, bool sampled)
{
    side_init_threads(s, sampled, 1);
}

static void test_sampled_matches_census(void **state)
{
    (void)state;
    static struct side sides[2];
    side_init_threads(&sides[0], true, 2); /* two workers: scans and rounds in parallel */
    side_init(&sides[1], false);
    uint64_t seed = 0x5eed5a3b1e;
    int nkeys = NKEYS;
    uint32_t *when = malloc(NKEYS * sizeof(*when)); /* a permutation: distinct read times */
    assert_non_null(when);
    es_read_times(when, NKEYS, 1, &seed);
    enum es_kind *kinds = malloc(NKEYS * 2 * sizeof(*kinds));
    assert_non_null(kinds);
    es_random_kinds(kinds, NKEYS, &seed);
    for (int sd = 0; sd < 2; sd++)
        es_fill(&sides[sd], NKEYS, kinds, when);
    uint64_t now = ES_T0_MS + NKEYS + ES_TTL_MS + 1;
    int sampled_cycles = 0, skipping_cycles = 0;
    uint64_t evicted_total = 0;
    const double targets[NCYCLES] = {0.05, 0.10, 0.15, 0.02, 0.20, 0.10, 0.20, 0.15, 0.20, 0.10};
    for (int cyc = 0; cyc < NCYCLES; cyc++) {
        /* some leases still held at the cycle: read just before it */
        int held = (int)(es_rnd(&seed) % 50);
        int held_keys[50];
        for (int h = 0; h < held; h++)
            held_keys[h] = (int)(es_rnd(&seed) % (uint64_t)nkeys);
        struct mc_evict_stats st[2];
        for (int sd = 0; sd < 2; sd++) {
            for (int h = 0; h < held; h++)
                es_read_at(&sides[sd], held_keys[h], now - 10);
            es_set_now(&sides[sd], now);
            assert_int_equal(
                mc_master_batch_evict(sides[sd].m, targets[cyc], targets[cyc] / 2, &st[sd]), MC_OK);
        }
        assert_int_equal(st[0].path, MC_EVICT_SELECTIVE);
        assert_int_equal(st[0].evictable, st[1].evictable);
        assert_int_equal(st[0].primary, st[1].primary);
        assert_int_equal(st[0].k, st[1].k);
        assert_int_equal(st[0].evicted, st[1].evicted);
        assert_true(st[0].evicted > 0);
        evicted_total += st[0].evicted;
        sampled_cycles += st[0].sampled;
        skipping_cycles += st[0].sampled && st[0].census < (uint64_t)nkeys;
        for (int i = 0; i < nkeys; i++) {
            int a = es_state_of(&sides[0], i), b = es_state_of(&sides[1], i);
            if (a != b)
                fail_msg("cycle %d key %d: sampled %d census %d", cyc, i, a, b);
        }
        es_check_floors_and_counts(&sides[0]);
        /* churn: Removes move the shards' last entries into the holes; new Puts; reads */
        now += 1;
        int nread;
        int nput = es_churn(sides, nkeys, kinds, now, 1, &seed, &nread);
        es_check_floors_and_counts(&sides[0]); /* after Removes, Puts and reads */
        nkeys += nput;
        now += (uint64_t)nread + ES_TTL_MS + 2;
    }
    assert_true(evicted_total > 0);
    assert_int_equal(sampled_cycles, NCYCLES);
    assert_true(skipping_cycles >= NCYCLES / 2);
    for (int sd = 0; sd < 2; sd++)
        mc_master_free(sides[sd].m);
    free(when);
    free(kinds);
}

/* Records reallocated between the census and the frontier: the hook grows every third key's
 * record by a replica and drops it again. mc_shard_obj_grow moves a record (same position, same
 * version, no gen bump, the old record freed), as a LOCAL_DISK replica attached by offload does,
 * so the addresses the low census recorded go stale while the positions still hold. */
static void regrow_hook(struct mc_master *m, void *arg)
{
    struct es_churn *c = arg;
    (void)m;
    struct mc_master *mm = c->s->m;
    for (int i = 0; i < c->nkeys; i += 3) {
        const char *k = es_key(i);
        uint64_t h = mc_hash_key(k, strlen(k));
        struct mc_shard *s = &mm->shards[mc_master_key_shard(mm, h)];
        mc_shard_wrlock(s);
        struct mc_object *o = mc_shard_find(s, h, k, strlen(k));
        struct mc_object *n = o ? mc_shard_obj_grow(s, o) : NULL;
        if (n) {
            mc_obj_drop_replica(n, (uint8_t)(n->nrep - 1));
            mc_shard_refresh_bits(s, n);
        }
        mc_shard_unlock(s);
    }
}

/* Two masters fed the same keys and reads, one taking the sampled census and one the census,
 * hook run on each after its census: the same victims. */
static void sampled_vs_census_with_hook(void (*hook)(struct mc_master *, void *), uint64_t seed)
{
    static struct side sides[2];
    static struct es_churn ch[2];
    int n = NKEYS;
    uint32_t *when = malloc(NKEYS * sizeof(*when));
    assert_non_null(when);
    es_read_times(when, n, 1, &seed);
    struct mc_evict_stats st[2];
    for (int sd = 0; sd < 2; sd++) {
        side_init_threads(&sides[sd], sd == 0, sd == 0 ? 3 : 1); /* side 0: 3 scan workers */
        es_fill(&sides[sd], n, NULL, when);
        /* es_churn_hook: every 23rd key removed (moving the shards' last entries into the
         * holes, so the low census's positions go stale: the sampled path must notice and scan)
         * and a few old keys read (their leases are then held) */
        ch[sd] = (struct es_churn){.s = &sides[sd],
                                   .nkeys = n,
                                   .rm_from = 5,
                                   .rm_every = 23,
                                   .read_below = n,
                                   .read_every = 997};
        struct mc_evict_test_opts o = {
            .sample_min_objects = sd == 0 ? 1 : UINT32_MAX,
            /* side 0 also runs the parallel and large-round code (3 workers, buffers held and
             * released sorted by handle) */
            .parallel_min_objects = sd == 0 ? 1 : 0,
            .after_census = hook,
            .arg = &ch[sd],
        };
        mc_master_evict_set_test_opts(sides[sd].m, &o);
        es_set_now(&sides[sd], ES_T0_MS + NKEYS + ES_TTL_MS + 1);
        assert_int_equal(mc_master_batch_evict(sides[sd].m, 0.05, 0.025, &st[sd]), MC_OK);
    }
    assert_true(st[0].sampled);
    assert_int_equal(st[0].evicted, st[1].evicted);
    assert_true(st[0].evicted > 0);
    for (int i = 0; i < n; i++) {
        int a = es_state_of(&sides[0], i), b = es_state_of(&sides[1], i);
        if (a != b)
            fail_msg("key %d: sampled %d census %d", i, a, b);
    }
    /* every evicted buffer went back to its segment on both sides */
    assert_true(mc_segments_used_ratio(sides[0].m->segs) ==
                mc_segments_used_ratio(sides[1].m->segs));
    assert_true(mc_segments_used_ratio(sides[0].m->segs) > 0.0);
    for (int sd = 0; sd < 2; sd++)
        mc_master_free(sides[sd].m);
    free(when);
}

static void test_sampled_churn_after_census(void **state)
{
    (void)state;
    sampled_vs_census_with_hook(es_churn_hook, 0xc4c4e);
}

static void test_sampled_records_regrown_after_census(void **state)
{
    (void)state;
    sampled_vs_census_with_hook(regrow_hook, 0x7e6e0);
}

/* Ties at the cutoff with churn: deadlines shared by 8 keys each, every 31st key removed after
 * the census (its shard's entries move, so the sampled side scans that shard again for its
 * frontier with the tie quota left). One worker on both sides, so both take tied entries in
 * shard and position order: the victims must be the same keys. */
static void test_sampled_churn_with_ties(void **state)
{
    (void)state;
    static struct side sides[2];
    static struct es_churn ch[2];
    uint64_t seed = 0x71e5;
    int n = NKEYS;
    uint32_t *when = malloc(NKEYS * sizeof(*when));
    assert_non_null(when);
    es_read_times(when, n, 7, &seed); /* 7 keys per deadline: the k-th (2200) inside a tie */
    struct mc_evict_stats st[2];
    for (int sd = 0; sd < 2; sd++) {
        side_init(&sides[sd], sd == 0);
        es_fill(&sides[sd], n, NULL, when);
        ch[sd] = (struct es_churn){.s = &sides[sd], .nkeys = n, .rm_from = 3, .rm_every = 31};
        struct mc_evict_test_opts o = {
            .sample_min_objects = sd == 0 ? 1 : UINT32_MAX,
            .after_census = es_churn_hook,
            .arg = &ch[sd],
        };
        mc_master_evict_set_test_opts(sides[sd].m, &o);
        es_set_now(&sides[sd], ES_T0_MS + NKEYS + ES_TTL_MS + 1);
        assert_int_equal(mc_master_batch_evict(sides[sd].m, 0.05, 0.025, &st[sd]), MC_OK);
    }
    assert_true(st[0].sampled);
    assert_int_equal(st[0].k, st[1].k);
    assert_int_equal(st[0].materialized, st[1].materialized);
    assert_int_equal(st[0].evicted, st[1].evicted);
    assert_true(st[0].evicted > 0);
    for (int i = 0; i < n; i++) {
        int a = es_state_of(&sides[0], i), b = es_state_of(&sides[1], i);
        if (a != b)
            fail_msg("key %d: sampled %d census %d", i, a, b);
    }
    for (int sd = 0; sd < 2; sd++)
        mc_master_free(sides[sd].m);
    free(when);
}

/* An insert lowers its block's floor: a shard's tail block gets an exact floor from a census
 * (its keys' leases still held, far ahead), loses its keys, and a key Put now lands there with
 * an older deadline than that floor. */
static void test_insert_lowers_floor(void **state)
{
    (void)state;
    static struct side sd;
    side_init(&sd, true);
    char names[16][32];
    int got = 0;
    uint32_t shard = UINT32_MAX;
    for (int i = 0; got < 17 && i < 1000000; i++) {
        char k[32];
        snprintf(k, sizeof(k), "f-%07d", i);
        uint32_t si = mc_master_key_shard(sd.m, mc_hash_key(k, strlen(k)));
        if (shard == UINT32_MAX)
            shard = si;
        if (si != shard)
            continue;
        if (got < 16)
            memcpy(names[got], k, sizeof(k));
        got++;
        if (got == 17) { /* the 17th: the key Put after the removals */
            for (int j = 0; j < 16; j++) {
                struct mc_put_start_result r;
                assert_int_equal(mc_master_put_start(sd.m, sd.client, names[j], strlen(names[j]),
                                                     ES_OBJ_SIZE, NULL, &r),
                                 MC_OK);
                assert_int_equal(
                    mc_master_put_end(sd.m, sd.client, names[j], strlen(names[j]), 0, 7, true),
                    MC_OK);
            }
            struct mc_get_result g;
            es_set_now(&sd, ES_T0_MS + 5000); /* leases up to T0 + 6000 */
            for (int j = 0; j < 16; j++)
                assert_int_equal(mc_master_get_replica_list(sd.m, names[j], strlen(names[j]), &g),
                                 MC_OK);
            es_set_now(&sd, ES_T0_MS + 5100); /* every lease held: a census, every floor exact */
            struct mc_evict_stats st;
            assert_int_equal(mc_master_batch_evict(sd.m, 0.5, 0.25, &st), MC_OK);
            assert_int_equal(st.evicted, 0);
            es_check_floors_and_counts(&sd);
            for (int j = 8; j < 16; j++) /* the tail block empties */
                assert_int_equal(mc_master_remove(sd.m, names[j], strlen(names[j]), true), MC_OK);
            struct mc_put_start_result r;
            assert_int_equal(
                mc_master_put_start(sd.m, sd.client, k, strlen(k), ES_OBJ_SIZE, NULL, &r), MC_OK);
            assert_int_equal(mc_master_put_end(sd.m, sd.client, k, strlen(k), 0, 7, true), MC_OK);
            es_check_floors_and_counts(&sd); /* its deadline T0 + 5100 < the old floor */
        }
    }
    assert_int_equal(got, 17);
    mc_master_free(sd.m);
}

/* Each shard's entry chunks start on a cache line, so a block of MC_ENT_BLOCK entries is exactly
 * the two lines a skipping scan fetches ahead (from a plain malloc, 16-byte aligned, most blocks
 * straddled three lines and the middle one was read cold). */
static void test_entry_blocks_on_line_boundaries(void **state)
{
    (void)state;
    static struct side sd;
    side_init(&sd, true);
    for (int i = 0; i < 6000; i++)
        es_put_kind(&sd, i, K_PLAIN);
    uint32_t shards = 0;
    for (uint32_t si = 0; si < MC_NSHARDS; si++) {
        struct mc_shard *sh = &sd.m->shards[si];
        mc_shard_rdlock(sh);
        for (uint32_t e = 0; e < sh->n; e += MC_ENT_BLOCK)
            if ((uintptr_t)mc_shard_ent(sh, e) % 64 != 0)
                fail_msg("shard %u: the block at entry %u starts at %p", si, e,
                         (void *)mc_shard_ent(sh, e));
        shards += sh->n > 0;
        mc_shard_unlock(sh);
    }
    assert_true(shards > MC_NSHARDS / 2); /* most shards hold a chunk */
    mc_master_free(sd.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampled_matches_census),
        cmocka_unit_test(test_sampled_churn_after_census),
        cmocka_unit_test(test_sampled_records_regrown_after_census),
        cmocka_unit_test(test_sampled_churn_with_ties),
        cmocka_unit_test(test_insert_lowers_floor),
        cmocka_unit_test(test_entry_blocks_on_line_boundaries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
