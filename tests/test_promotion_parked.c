/*
 * test_promotion_parked.c - promotion on hit (src/master/promotion.h) through the core API on a
 * fake clock with manual ticks (promotion_fixture.h): staged space: a cancelled promotion's staged
 * range is parked, not reused, until its holder reports or its mount ends (unmount, expiry), and
 * counts toward the cap; a remount cancels the holder's tasks. After every scenario the funnel
 * invariant is checked against the real state (check_funnel).
 */
#include "promotion_fixture.h"

/* ---- staged space: parked ranges ------------------------------------------------------------ */

/* A Remove while the holder holds a staged range: new Puts fill the holder's segment and none
 * lands on the parked range (a late write of the holder cannot reach another key's bytes);
 * after the holder's failure report the range is free and a Put can take it. */
static void test_parked_range_not_reused(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    struct fx *f = fx_new_cfg(&c, 64 * OBJ, 0); /* one small segment, the holder's */
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    uint64_t lo = d.u.mem.offset, hi = lo + OBJ;
    advance(f, TTL_MS + 1);
    assert_int_equal(mc_master_remove(f->m, "k", 1, false), MC_OK);
    assert_int_equal(stats(f).parked, 1);
    int n = 0;
    for (;; n++) {
        const char *k = key("new", n);
        struct mc_put_start_result r;
        if (mc_master_put_start(f->m, f->owner, k, strlen(k), OBJ, NULL, &r) != MC_OK)
            break;
        uint64_t off = r.replicas[0].u.mem.offset;
        assert_true(off + OBJ <= lo || off >= hi); /* never on the parked range */
        assert_int_equal(mc_master_put_end(f->m, f->owner, k, strlen(k), r.version, 0, false),
                         MC_OK);
    }
    assert_true(n >= 60);
    assert_int_equal(failure(f, f->holder, id, "k"), MC_OK);
    assert_int_equal(stats(f).parked, 0);
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->owner, "after", 5, OBJ, NULL, &r), MC_OK);
    assert_int_equal(r.replicas[0].u.mem.offset, lo);
    check_funnel(f);
    fx_free(f);
}

/* The parked range's mount ends (its segment unmounted, the holder alive): the reaper frees it
 * without a report; a later report changes nothing. The metrics show the gauge. */
static void test_parked_freed_on_unmount(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    advance(f, TTL_MS + 1);
    assert_int_equal(mc_master_remove(f->m, "k", 1, false), MC_OK);
    assert_int_equal(stats(f).parked, 1);
    struct mc_textbuf tb;
    mc_textbuf_init(&tb);
    assert_int_equal(mc_metrics_render(mc_master_metrics(f->m), &tb), 0);
    size_t len = 0;
    char *text = mc_textbuf_steal(&tb, &len);
    assert_non_null(text);
    assert_non_null(strstr(text, "master_promotion_parked_ranges 1"));
    assert_non_null(strstr(text, "master_promotion_parked_bytes 4096"));
    free(text);
    mc_textbuf_destroy(&tb);
    assert_int_equal(mc_master_unmount_segment(f->m, f->holder, d.u.mem.segment_id), MC_OK);
    assert_int_equal(stats(f).parked, 1); /* until the reaper's pass */
    mc_master_tick_reaper(f->m);
    assert_int_equal(stats(f).parked, 0);
    assert_int_equal(stats(f).parked_bytes, 0);
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY);
    check_funnel(f);
}

/* The holder expires while its range is parked (stopped past its TTL): the expiry unmounts its
 * segment and the reaper frees the range without a report. */
static void test_parked_freed_on_expiry(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    advance(f, TTL_MS + 1);
    assert_int_equal(mc_master_remove(f->m, "k", 1, false), MC_OK);
    assert_int_equal(stats(f).parked, 1);
    advance(f, 6000);
    struct mc_ping_result pr;
    assert_int_equal(mc_master_ping(f->m, f->owner, &pr), MC_OK);
    assert_int_equal(mc_master_ping(f->m, f->other, &pr), MC_OK);
    advance(f, 5000);
    assert_int_equal(mc_master_tick_monitor(f->m), 1);
    mc_master_tick_reaper(f->m);
    assert_int_equal(stats(f).parked, 0);
    assert_int_equal(stats(f).parked_bytes, 0);
    assert_int_equal(failure(f, f->holder, id, "k"), MC_OK);
    check_funnel(f);
}

/* Parked ranges count toward promotion_queue_limit: they are bounded. */
static void test_parked_counts_to_cap(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_queue_limit = 1;
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 0);
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    advance(f, TTL_MS + 1);
    assert_int_equal(mc_master_remove(f->m, "k", 1, false), MC_OK);
    assert_int_equal(stats(f).in_flight, 0);
    disk_only(f, "k2", OBJ);
    get_n(f, "k2", 2);
    assert_int_equal(stats(f).admitted, 1); /* refused: the parked range fills the cap */
    assert_true(stats(f).rejected_cap >= 1);
    assert_int_equal(failure(f, f->holder, id, "k"), MC_OK);
    get_n(f, "k2", 1);
    assert_int_equal(stats(f).admitted, 2);
    check_funnel(f);
    fx_free(f);
}

/* The holder mounts its LOCAL_DISK segment again (restarted within its TTL): its tasks, staged
 * or not, are cancelled (a staged range parked), and the keys can be admitted again. */
static void test_remount_cancels_tasks(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k");
    admit_one(f, "k2");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    assert_int_equal(
        mc_master_mount_local_disk(f->m, f->holder, "10.0.0.2:17002", 1ull << 30, false), MC_OK);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.cancelled, 2);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.parked, 1);
    assert_false(lists_memory(f, "k"));
    check_funnel(f);
    get_n(f, "k2", 1); /* (lists_memory read k a third time: admitted too) */
    assert_int_equal(stats(f).admitted, 4);
    assert_int_equal(promote_all(f), 2);
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(stats(f).parked, 0);
    check_funnel(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parked_range_not_reused),
        cmocka_unit_test_setup_teardown(test_parked_freed_on_unmount, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_parked_freed_on_expiry, fx_setup, fx_teardown),
        cmocka_unit_test(test_parked_counts_to_cap),
        cmocka_unit_test_setup_teardown(test_remount_cancels_tasks, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
