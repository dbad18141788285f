/*
 * test_master_safety.c - the master core never hands out wrong bytes (fake clock, manual ticks):
 * Put versions on PutEnd/PutRevoke (a Put taken over by a newer PutStart cannot be completed or
 * revoked by its stale first incarnation), PutEnd ownership after completion, versions that
 * increase across master restarts, the deferred free of force-removed objects under a lease,
 * and the reaper's idle tick.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/master_internal.h"
#include "master_fixture.h"

static int setup(void **state)
{
    *state = mfx_new(7, 64 * MIB, 0);
    return *state ? 0 : -1;
}

static bool complete(struct fx *f, const char *k, uint64_t *version)
{
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, k, strlen(k), &ki), MC_OK);
    if (version)
        *version = ki.version;
    return ki.complete;
}

/* The first Put of "k" by owner1 stalls past put_start_discard_timeout; owner2 takes it over
 * (v2). Returns v1 and v2 in ps1/ps2. */
static void takeover(struct fx *f, struct mc_id owner1, struct mc_id owner2,
                     struct mc_put_start_result *ps1, struct mc_put_start_result *ps2)
{
    assert_int_equal(mc_master_put_start(f->m, owner1, "k", 1, MIB, NULL, ps1), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 30000);
    assert_int_equal(mc_master_put_start(f->m, owner2, "k", 1, MIB, NULL, ps2), MC_OK);
    assert_true(ps2->version > ps1->version);
}

/* Same owner: its late PutEnd(v1) must not complete v2, its late PutRevoke(v1) must not kill v2. */
static void test_late_put_end_same_owner(void **state)
{
    struct fx *f = *state;
    struct mc_put_start_result ps1, ps2;
    takeover(f, f->a, f->a, &ps1, &ps2);
    assert_int_equal(mc_master_put_end(f->m, f->a, "k", 1, ps1.version, 1, true),
                     MC_ERR_INVALID_VERSION);
    uint64_t v;
    assert_false(complete(f, "k", &v)); /* v2 still PROCESSING */
    assert_int_equal(v, ps2.version);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(mc_master_put_revoke(f->m, f->a, "k", 1, ps1.version), MC_ERR_INVALID_VERSION);
    assert_false(complete(f, "k", &v));
    assert_int_equal(v, ps2.version);
    /* The current incarnation ends normally; a late v1 on the complete object is still refused. */
    assert_int_equal(mc_master_put_end(f->m, f->a, "k", 1, ps2.version, 2, true), MC_OK);
    assert_true(complete(f, "k", NULL));
    assert_int_equal(mc_master_put_end(f->m, f->a, "k", 1, ps1.version, 1, true),
                     MC_ERR_INVALID_VERSION);
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    assert_int_equal(g.crc32c, 2);
    assert_int_equal(g.version, ps2.version);
}

/* Two owners: the first one's late PutEnd/PutRevoke(v1) change nothing. */
static void test_late_put_end_two_owners(void **state)
{
    struct fx *f = *state;
    struct mc_put_start_result ps1, ps2;
    takeover(f, f->a, f->b, &ps1, &ps2);
    assert_int_equal(mc_master_put_end(f->m, f->a, "k", 1, ps1.version, 1, true),
                     MC_ERR_INVALID_VERSION);
    assert_int_equal(mc_master_put_revoke(f->m, f->a, "k", 1, ps1.version), MC_ERR_INVALID_VERSION);
    uint64_t v;
    assert_false(complete(f, "k", &v));
    assert_int_equal(v, ps2.version);
    /* the right version from the wrong client is still the owner check's business */
    assert_int_equal(mc_master_put_end(f->m, f->a, "k", 1, ps2.version, 1, true),
                     MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_put_revoke(f->m, f->a, "k", 1, ps2.version), MC_ERR_ILLEGAL_CLIENT);
    assert_false(complete(f, "k", NULL));
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.processing_count, 1);
    /* owner 2 revokes its own (v2): gone */
    assert_int_equal(mc_master_put_revoke(f->m, f->b, "k", 1, ps2.version), MC_OK);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "k", 1, &ki), MC_ERR_OBJECT_NOT_FOUND);
}

/* The batch forms check every key's version. */
static void test_batch_versions(void **state)
{
    struct fx *f = *state;
    struct mc_key_ref keys[2] = {{"k", 1}, {"j", 1}};
    struct mc_put_start_result ps1, ps2, pj;
    takeover(f, f->a, f->a, &ps1, &ps2);
    assert_int_equal(mc_master_put_start(f->m, f->a, "j", 1, MIB, NULL, &pj), MC_OK);
    uint64_t stale[2] = {ps1.version, pj.version};
    int rcs[2];
    assert_int_equal(mc_master_batch_put_revoke(f->m, f->a, keys, stale, 2, rcs), MC_OK);
    assert_int_equal(rcs[0], MC_ERR_INVALID_VERSION);
    assert_int_equal(rcs[1], MC_OK);
    assert_false(complete(f, "k", NULL));
    assert_int_equal(mc_master_put_start(f->m, f->a, "j", 1, MIB, NULL, &pj), MC_OK);
    stale[1] = pj.version;
    uint32_t crcs[2] = {1, 2};
    assert_int_equal(mc_master_batch_put_end(f->m, f->a, keys, stale, crcs, 2, rcs), MC_OK);
    assert_int_equal(rcs[0], MC_ERR_INVALID_VERSION);
    assert_int_equal(rcs[1], MC_OK);
    assert_false(complete(f, "k", NULL));
    assert_true(complete(f, "j", NULL));
    uint64_t cur[2] = {ps2.version, pj.version};
    assert_int_equal(mc_master_batch_put_end(f->m, f->a, keys, cur, crcs, 2, rcs), MC_OK);
    assert_int_equal(rcs[0], MC_OK);
    assert_int_equal(rcs[1], MC_OK); /* idempotent for the owner */
    assert_true(complete(f, "k", NULL));
}

/* A PutEnd from another client on a COMPLETE object is ILLEGAL_CLIENT (upstream), not OK. */
static void test_put_end_non_owner_on_complete(void **state)
{
    struct fx *f = *state;
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(f->m, f->a, "c", 1, MIB, NULL, &ps), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->a, "c", 1, ps.version, 5, true), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->b, "c", 1, ps.version, 6, true),
                     MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_put_end(f->m, f->b, "c", 1, 0, 6, true), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_put_end(f->m, f->a, "c", 1, ps.version, 5, true), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "c", 1, &g), MC_OK);
    assert_int_equal(g.crc32c, 5);
}

/* ---- deferred free of force-removed objects ---------------------------------------------- */

/* The fixture's segment (64 MiB, client a) filled by one object "big", read (leased 10 s). */
static uint64_t fill_and_read(struct fx *f, const char *k)
{
    assert_int_equal(tm_put(f->m, f->a, k, 64 * MIB), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, k, strlen(k), &g), MC_OK);
    assert_int_equal(g.nreplicas, 1);
    return g.replicas[0].u.mem.offset;
}

/* A reader inside its lease never sees its range reused: a forced Remove (and RemoveAll) of a
 * leased object drops the key at once but parks the space until the lease ends. */
static void test_forced_remove_defers_free(void **state)
{
    struct fx *f = *state;
    for (int all = 0; all < 2; all++) {
        uint64_t off = fill_and_read(f, "big");
        mc_fake_clock_advance_ms(&f->fc, 4000); /* 6 s of the lease left */
        if (all) {
            uint64_t n = 0;
            assert_int_equal(mc_master_remove_all(f->m, true, &n), MC_OK);
            assert_int_equal(n, 1);
        } else {
            assert_int_equal(mc_master_remove(f->m, "big", 3, true), MC_OK);
        }
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(f->m, "big", 3, &g), MC_ERR_OBJECT_NOT_FOUND);
        /* the range is still taken: a new Put of any size cannot land on it */
        struct mc_put_start_result ps;
        assert_int_equal(mc_master_put_start(f->m, f->a, "new", 3, 64 * MIB, NULL, &ps),
                         MC_ERR_NO_AVAILABLE_HANDLE);
        assert_int_equal(mc_master_put_start(f->m, f->a, "small", 5, 4096, NULL, &ps),
                         MC_ERR_NO_AVAILABLE_HANDLE);
        struct mc_master_stats st;
        mc_master_get_stats(f->m, &st);
        assert_int_equal(st.key_count, 0);
        assert_int_equal(st.allocated_bytes, 64 * MIB);
        /* one ms before the lease ends: still parked, whatever the reaper does */
        mc_fake_clock_advance_ms(&f->fc, 5999);
        assert_int_equal(mc_master_tick_reaper(f->m), 0);
        assert_int_equal(mc_master_put_start(f->m, f->a, "new", 3, 64 * MIB, NULL, &ps),
                         MC_ERR_NO_AVAILABLE_HANDLE);
        /* the lease ended: released, and the same range is handed out again */
        mc_fake_clock_advance_ms(&f->fc, 1);
        assert_int_equal(mc_master_tick_reaper(f->m), 1);
        mc_master_get_stats(f->m, &st);
        assert_int_equal(st.allocated_bytes, 0);
        assert_int_equal(st.put_start_release_cnt, 0);
        assert_int_equal(mc_master_put_start(f->m, f->a, "new", 3, 64 * MIB, NULL, &ps), MC_OK);
        assert_int_equal(ps.replicas[0].u.mem.offset, off);
        assert_int_equal(mc_master_put_revoke(f->m, f->a, "new", 3, ps.version), MC_OK);
    }
}

/* Without an active lease a forced Remove frees at once (nothing to wait for). */
static void test_forced_remove_unleased_frees_now(void **state)
{
    struct fx *f = *state;
    fill_and_read(f, "big");
    mc_fake_clock_advance_ms(&f->fc, 10000);
    assert_int_equal(mc_master_remove(f->m, "big", 3, true), MC_OK);
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.allocated_bytes, 0);
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(f->m, f->a, "new", 3, 64 * MIB, NULL, &ps), MC_OK);
}

/* ---- the reaper's idle tick ---------------------------------------------------------------- */

static uint64_t reaper_locks(struct fx *f)
{
    return atomic_load(&f->m->reaper_shard_locks);
}

/* The reaper locks no shard when no Put is in flight, and only the shard of a Put that may be
 * due; a shard whose Puts finished is looked at once more, then left alone. */
static void test_reaper_idle_locks_nothing(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(mc_master_tick_reaper(f->m), 0);
        mc_fake_clock_advance_ms(&f->fc, 1000);
    }
    assert_int_equal(reaper_locks(f), 0);
    /* a Put in flight, not due: nothing locked either */
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(f->m, f->a, "p", 1, 4096, NULL, &ps), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 1000);
    assert_int_equal(mc_master_tick_reaper(f->m), 0);
    assert_int_equal(reaper_locks(f), 0);
    /* it completes; when its release time would have come, its shard is checked once */
    assert_int_equal(mc_master_put_end(f->m, f->a, "p", 1, ps.version, 0, false), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 600000);
    assert_int_equal(mc_master_tick_reaper(f->m), 0);
    assert_int_equal(reaper_locks(f), 1);
    for (int i = 0; i < 5; i++) {
        mc_fake_clock_advance_ms(&f->fc, 1000);
        assert_int_equal(mc_master_tick_reaper(f->m), 0);
    }
    assert_int_equal(reaper_locks(f), 1);
    /* a Put left unfinished is reaped on time, locking its shard only */
    assert_int_equal(mc_master_put_start(f->m, f->a, "q", 1, 4096, NULL, &ps), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 599999);
    assert_int_equal(mc_master_tick_reaper(f->m), 0);
    assert_int_equal(reaper_locks(f), 1);
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_tick_reaper(f->m), 1);
    assert_int_equal(reaper_locks(f), 2);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "q", 1, &ki), MC_ERR_OBJECT_NOT_FOUND);
    mc_fake_clock_advance_ms(&f->fc, 1000);
    assert_int_equal(mc_master_tick_reaper(f->m), 0);
    assert_int_equal(reaper_locks(f), 2);
}

/* ---- versions across restarts ------------------------------------------------------------- */

/* A master on an injected wall clock. */
static struct mc_master *master_at(struct mc_fake_clock *fc, struct mc_fake_clock *wall)
{
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc->clock;
    c.wall_clock = &wall->clock;
    c.manual_ticks = true;
    struct mc_master *m = NULL;
    assert_int_equal(mc_master_new(&c, &m), MC_OK);
    struct mc_segment_desc s1 = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(m, tm_id(1), &s1, NULL), MC_OK);
    return m;
}

/* Issues n versions (PutStarts of distinct keys); returns the lowest and highest. */
static void issue(struct mc_master *m, int n, uint64_t *lo, uint64_t *hi)
{
    *lo = UINT64_MAX;
    *hi = 0;
    char key[32];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "v-%d", i);
        struct mc_put_start_result ps;
        assert_int_equal(mc_master_put_start(m, tm_id(1), key, strlen(key), 64, NULL, &ps), MC_OK);
        assert_true(ps.version > *hi); /* strictly increasing within one incarnation */
        *lo = ps.version < *lo ? ps.version : *lo;
        *hi = ps.version;
    }
}

/* Three incarnations started 1 ms, then 1 s apart on the wall clock (the monotonic clock of each
 * restarts near zero, as a new process's would): every version of a later one is above every
 * version of an earlier one, and each tells the earlier ones' versions apart by its base. */
static void test_versions_increase_across_restarts(void **state)
{
    (void)state;
    struct mc_fake_clock fc, wall;
    const uint64_t now_unix_ns = 1796083200ull * 1000000000ull; /* 2026-12-01T00:00:00Z */
    mc_fake_clock_init(&wall, now_unix_ns);
    uint64_t prev_hi = 0;
    const uint64_t start_ms[3] = {0, 1, 1001};
    for (int inc = 0; inc < 3; inc++) {
        mc_fake_clock_set_ns(&wall, now_unix_ns + start_ms[inc] * 1000000ull);
        mc_fake_clock_init(&fc, 1000000000ull);
        struct mc_master *m = master_at(&fc, &wall);
        uint64_t base = mc_master_version_base(m);
        assert_true(base >= prev_hi); /* every earlier version is recognisably older */
        uint64_t lo, hi;
        issue(m, 3000, &lo, &hi);
        assert_true(lo > prev_hi);
        assert_true(lo > base);
        /* wall time moving during the run changes nothing (read once) */
        mc_fake_clock_advance_ms(&wall, 5);
        struct mc_put_start_result ps;
        assert_int_equal(mc_master_put_start(m, tm_id(1), "late", 4, 64, NULL, &ps), MC_OK);
        assert_int_equal(ps.version, hi + 1);
        prev_hi = ps.version;
        mc_master_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_late_put_end_same_owner, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_late_put_end_two_owners, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_batch_versions, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_put_end_non_owner_on_complete, setup, mfx_teardown),
        cmocka_unit_test(test_versions_increase_across_restarts),
        cmocka_unit_test_setup_teardown(test_forced_remove_defers_free, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_forced_remove_unleased_frees_now, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_reaper_idle_locks_nothing, setup, mfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
