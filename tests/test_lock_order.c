/*
 * test_lock_order.c - the master core's per-thread lock-order check (src/master/lock_order.h).
 *
 * Violations must abort with one stderr line naming both locks: each violating sequence runs in
 * a forked child whose stderr goes to a pipe, and the parent checks the child died of SIGABRT
 * and what it printed. Legal sequences (ascending levels, shards ascending, releases in any
 * order) pass and leave nothing held. A real master driven through mount, Put, Get, batches,
 * Remove, client expiry and eviction leaves the thread holding nothing after every call (a lock
 * taken and not released, or released twice, would abort or show up here). The whole master
 * suite runs with the check compiled in as well, which is the wider test.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "abort_fixture.h"
#include "master/lock_order.h"
#include "test_master_util.h"

#ifndef MC_LOCK_ORDER_CHECK
#error "test builds define MC_LOCK_ORDER_CHECK (top CMakeLists.txt)"
#endif

/* A violation aborts with one line naming both locks. */
static void expect_abort(af_seq_fn fn, const char *a, const char *b)
{
    af_expect_abort(fn, "lock order violation", a, b);
}

static void shards_descending(void)
{
    mc_lo_acquire(MC_LO_SHARD, 9);
    mc_lo_acquire(MC_LO_SHARD, 3);
}
static void shard_twice(void)
{
    mc_lo_acquire(MC_LO_SHARD, 5);
    mc_lo_acquire(MC_LO_SHARD, 5);
}
static void registry_under_shard(void)
{
    mc_lo_acquire(MC_LO_SHARD, 1);
    mc_lo_acquire(MC_LO_REGISTRY, 0);
}
static void table_under_segment(void)
{
    mc_lo_acquire(MC_LO_SEGMENT, 0);
    mc_lo_acquire(MC_LO_SEGTABLE, 0);
}
static void two_segments(void)
{
    mc_lo_acquire(MC_LO_SEGTABLE, 0);
    mc_lo_acquire(MC_LO_SEGMENT, 0);
    mc_lo_acquire(MC_LO_SEGMENT, 0);
}
static void shard_under_leaf(void)
{
    mc_lo_acquire(MC_LO_LEAF, 0);
    mc_lo_acquire(MC_LO_SHARD, 2);
}
static void release_not_held(void)
{
    mc_lo_acquire(MC_LO_SHARD, 4);
    mc_lo_release(MC_LO_SHARD, 6);
}
/* A shard taken after the others were partly released still obeys the highest one held. */
static void shard_below_remaining(void)
{
    mc_lo_acquire(MC_LO_SHARD, 2);
    mc_lo_acquire(MC_LO_SHARD, 8);
    mc_lo_release(MC_LO_SHARD, 2);
    mc_lo_acquire(MC_LO_SHARD, 5);
}

static void test_violations_abort(void **state)
{
    (void)state;
    expect_abort(shards_descending, "acquiring shard[3]", "holding shard[9]");
    expect_abort(shard_twice, "acquiring shard[5]", "holding shard[5]");
    expect_abort(registry_under_shard, "acquiring client registry[0]", "holding shard[1]");
    expect_abort(table_under_segment, "acquiring segment table[0]", "holding segment allocator[0]");
    expect_abort(two_segments, "acquiring segment allocator[0]", "holding segment allocator[0]");
    expect_abort(shard_under_leaf, "acquiring shard[2]", "holding leaf lock[0]");
    expect_abort(release_not_held, "releasing (not held) shard[6]", "holding shard[4]");
    expect_abort(shard_below_remaining, "acquiring shard[5]", "holding shard[8]");
}

/* The same child harness exits 0 for a legal sequence (so the abort above is the check's). */
static void legal_full_order(void)
{
    mc_lo_acquire(MC_LO_REGISTRY, 0);
    mc_lo_acquire(MC_LO_SHARD, 3);
    mc_lo_acquire(MC_LO_SHARD, 9);
    mc_lo_acquire(MC_LO_SHARD, 1000);
    mc_lo_acquire(MC_LO_SEGTABLE, 0);
    mc_lo_acquire(MC_LO_SEGMENT, 0);
    mc_lo_acquire(MC_LO_MAILBOX_TABLE, 0);
    mc_lo_acquire(MC_LO_MAILBOX, 0);
    mc_lo_acquire(MC_LO_LEAF, 0);
    /* Releases in any order. */
    mc_lo_release(MC_LO_SHARD, 9);
    mc_lo_release(MC_LO_REGISTRY, 0);
    mc_lo_release(MC_LO_LEAF, 0);
    mc_lo_release(MC_LO_SEGMENT, 0);
    mc_lo_release(MC_LO_SHARD, 3);
    mc_lo_release(MC_LO_MAILBOX, 0);
    mc_lo_release(MC_LO_MAILBOX_TABLE, 0);
    mc_lo_release(MC_LO_SEGTABLE, 0);
    mc_lo_release(MC_LO_SHARD, 1000);
    if (mc_lo_depth() != 0)
        _exit(3);
    /* After everything is released, any order may start again. */
    mc_lo_acquire(MC_LO_SEGMENT, 0);
    mc_lo_release(MC_LO_SEGMENT, 0);
    mc_lo_acquire(MC_LO_SHARD, 0);
    mc_lo_release(MC_LO_SHARD, 0);
}

static void test_legal_sequences_pass(void **state)
{
    (void)state;
    af_expect_clean(legal_full_order);
    /* And in this process too. */
    legal_full_order();
    assert_int_equal(mc_lo_depth(), 0);
}

/* mc_lo_holds tells what this thread holds, and a shard's write lock from its read lock (the
 * _locked calls and the object events assert it). */
static void test_holds(void **state)
{
    (void)state;
    assert_false(mc_lo_holds(MC_LO_SHARD, 3, false));
    mc_lo_acquire(MC_LO_SHARD, 3); /* a read lock */
    assert_true(mc_lo_holds(MC_LO_SHARD, 3, false));
    assert_false(mc_lo_holds(MC_LO_SHARD, 3, true));
    assert_false(mc_lo_holds(MC_LO_SHARD, 4, false));
    mc_lo_acquire_write(MC_LO_SHARD, 5);
    assert_true(mc_lo_holds(MC_LO_SHARD, 5, true));
    assert_true(mc_lo_holds(MC_LO_SHARD, 5, false));
    assert_false(mc_lo_holds(MC_LO_SEGMENT, 5, false));
    mc_lo_release(MC_LO_SHARD, 5);
    mc_lo_release(MC_LO_SHARD, 3);
    assert_false(mc_lo_holds(MC_LO_SHARD, 5, true));
    assert_int_equal(mc_lo_depth(), 0);
}

/* Every public call on a real master returns with no lock held by this thread. */
static void test_master_paths_balanced(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = tm_master(&fc, 3);
    assert_non_null(m);
    struct mc_id a = tm_id(1), b = tm_id(2);
    struct mc_segment_desc s1 = tm_seg(1, 16 * MIB), s2 = tm_seg(2, 16 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &s1, NULL), MC_OK);
    assert_int_equal(mc_master_mount_segment(m, b, &s2, NULL), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);

    char keys[32][16];
    struct mc_key_ref refs[32];
    uint64_t sizes[32];
    for (int i = 0; i < 32; i++) {
        snprintf(keys[i], sizeof(keys[i]), "lo-%d", i);
        refs[i] = (struct mc_key_ref){keys[i], strlen(keys[i])};
        sizes[i] = 4096;
    }
    struct mc_put_start_result pr[32];
    int rcs[32];
    assert_int_equal(mc_master_batch_put_start(m, a, refs, sizes, 32, NULL, pr, rcs), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    assert_int_equal(mc_master_batch_put_end(m, a, refs, NULL, NULL, 32, rcs), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    struct mc_get_result gr[32];
    assert_int_equal(mc_master_batch_get_replica_list(m, refs, 32, gr, rcs), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    bool ex[32];
    assert_int_equal(mc_master_batch_exist_key(m, refs, 32, ex, rcs), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    assert_int_equal(tm_put(m, b, "single", 8192), MC_OK);
    assert_int_equal(mc_master_get_replica_list(m, "single", 6, &gr[0]), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    assert_int_equal(mc_master_remove(m, "single", 6, true), MC_OK);
    assert_int_equal(mc_master_batch_remove(m, refs, 8, true, rcs), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    struct mc_ping_result ping;
    assert_int_equal(mc_master_ping(m, a, &ping), MC_OK);
    mc_fake_clock_advance_ms(&fc, 60 * 1000); /* both clients expire: unmount + sweep */
    assert_int_equal(mc_master_tick_monitor(m), 2);
    assert_int_equal(mc_lo_depth(), 0);
    mc_master_tick_reaper(m);
    mc_master_tick_eviction(m);
    uint64_t removed = 0;
    assert_int_equal(mc_master_remove_all(m, true, &removed), MC_OK);
    assert_int_equal(mc_lo_depth(), 0);
    mc_master_free(m);
    assert_int_equal(mc_lo_depth(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_violations_abort),
        cmocka_unit_test(test_legal_sequences_pass),
        cmocka_unit_test(test_master_paths_balanced),
        cmocka_unit_test(test_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
