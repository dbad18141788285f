/*
 * test_promotion_holder.c - promotion on hit (src/master/promotion.h) through the core API on a
 * fake clock with manual ticks (promotion_fixture.h): the holder's side: AllocStart / success /
 * failure refused to a non-holder, with a wrong size or a stale id; PutEnd cannot complete a staged
 * copy; where a staged copy is placed; leftovers past max-per-heartbeat; the heartbeat's long poll.
 * After every scenario the funnel invariant is checked against the real state (check_funnel).
 */
#include "promotion_fixture.h"

/* ---- holder side --------------------------------------------------------------------------- */

static void test_non_holder_size_and_stale_refused(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    uint64_t alloc0 = mc_segments_allocated(f->m->segs);
    assert_int_equal(alloc_start(f, f->other, id, "k", OBJ, &d), MC_ERR_INVALID_PARAMS);
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ + 1, &d), MC_ERR_INVALID_PARAMS);
    assert_int_equal(alloc_start(f, f->holder, id + 1000, "k", OBJ, &d),
                     MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(alloc_start(f, f->holder, id, "nokey", OBJ, &d), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0);
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY); /* not staged */
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(success(f, f->other, id, "k"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(failure(f, f->other, id, "k"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(stats(f).in_flight, 1);
    check_funnel(f);
    /* heartbeat of a client with no LOCAL_DISK registration */
    struct hb h;
    assert_int_equal(mc_master_promotion_heartbeat(f->m, f->other, 0, 0, on_hb, &h),
                     MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(failure(f, f->holder, id, "k"), MC_OK);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0); /* staged buffer freed */
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.failed, 1);
    /* stale now: success refused, failure idempotent, nothing changes */
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(failure(f, f->holder, id, "k"), MC_OK);
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_ERR_REPLICA_IS_NOT_READY);
    struct mc_promotion_stats st2 = stats(f);
    assert_memory_equal(&st, &st2, sizeof(st));
    assert_false(lists_memory(f, "k"));
    check_funnel(f);
}

static void test_put_end_cannot_complete_staged(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "k", 1, &ki), MC_OK);
    /* the Put's owner ending it again, and the holder trying, change nothing */
    mc_master_put_end(f->m, f->owner, "k", 1, ki.version, 1, true);
    assert_int_equal(mc_master_put_end(f->m, f->holder, "k", 1, ki.version, 1, true),
                     MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_put_revoke(f->m, f->owner, "k", 1, ki.version),
                     MC_ERR_INVALID_WRITE);
    unsigned proc;
    assert_int_equal(mem_replicas(f, "k", &proc), 0);
    assert_int_equal(proc, 1);
    assert_false(lists_memory(f, "k"));
    /* a new Put of the key is refused while it exists */
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->owner, "k", 1, OBJ, NULL, &r),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(success(f, f->holder, id, "k"), MC_OK);
    assert_int_equal(mem_replicas(f, "k", &proc), 1);
    assert_int_equal(proc, 0);
    check_funnel(f);
}

static void test_staged_placement(void **state)
{
    (void)state;
    /* the holder's own segment when it has room */
    struct fx *f = fx_new();
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    assert_string_equal(d.u.mem.segment_name, "seg-1");
    assert_int_equal(success(f, f->holder, id, "k"), MC_OK);
    check_funnel(f);
    fx_free(f);
    /* a holder without DRAM gets no task: a range elsewhere would outlive its mount (the
     * staged space rule; this placed it on seg-2 before) */
    struct mc_master_config c;
    cfg_defaults(&c);
    f = fx_new_cfg(&c, 0, 16 * MIB);
    disk_only(f, "k", OBJ);
    get_n(f, "k", 3);
    struct hb h;
    assert_int_equal(pull(f, 0, &h), 0);
    assert_int_equal(stats(f).admitted, 0);
    check_funnel(f);
    fx_free(f);
    /* never elsewhere when its segment is full: AllocStart finds no room, the task stays for
     * the holder's failure report */
    cfg_defaults(&c);
    f = fx_new_cfg(&c, 16 * 4096, 16 * MIB);
    struct mc_master_replicate_config rc;
    mc_master_replicate_config_init(&rc);
    const char *pref[] = {"seg-1"};
    rc.preferred_segments = pref;
    rc.n_preferred = 1;
    for (int i = 0; i < 16; i++) {
        struct mc_put_start_result r;
        const char *k = key("full", i);
        assert_int_equal(mc_master_put_start(f->m, f->owner, k, strlen(k), 4096, &rc, &r), MC_OK);
        assert_string_equal(r.replicas[0].u.mem.segment_name, "seg-1");
        assert_int_equal(mc_master_put_end(f->m, f->owner, k, strlen(k), r.version, 0, false),
                         MC_OK);
    }
    id = admit_one(f, "k");
    const char *other_pref[] = {"seg-2"}; /* a preference for another client's segment too */
    assert_int_equal(
        mc_master_promotion_alloc_start(f->m, f->holder, id, "k", 1, OBJ, other_pref, 1, &d),
        MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(stats(f).in_flight, 1);
    assert_int_equal(failure(f, f->holder, id, "k"), MC_OK);
    check_funnel(f);
    fx_free(f);
}

static void test_max_per_heartbeat_leftovers(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_admission_threshold = 1;
    c.promotion_max_per_heartbeat = 3;
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 0);
    for (int i = 0; i < 7; i++) {
        disk_only(f, key("h", i), OBJ);
        get_n(f, key("h", i), 1);
    }
    assert_int_equal(stats(f).admitted, 7);
    struct hb h;
    uint64_t seen[7];
    size_t ns = 0;
    assert_int_equal(pull(f, 0, &h), 3); /* max_items 0: the knob */
    for (size_t i = 0; i < h.n; i++)
        seen[ns++] = h.ids[i];
    assert_int_equal(pull(f, 10, &h), 3); /* above the knob: the knob */
    for (size_t i = 0; i < h.n; i++)
        seen[ns++] = h.ids[i];
    assert_int_equal(pull(f, 1, &h), 1); /* below it: max_items */
    seen[ns++] = h.ids[0];
    assert_int_equal(pull(f, 0, &h), 0); /* none lost, none twice */
    for (size_t i = 0; i < ns; i++)
        for (size_t j = i + 1; j < ns; j++)
            assert_true(seen[i] != seen[j]);
    check_funnel(f);
    for (int i = 0; i < 7; i++) {
        bool found = false;
        for (size_t j = 0; j < ns && !found; j++)
            found = failure(f, f->holder, seen[j], key("h", i)) == MC_OK &&
                    stats(f).failed == (uint64_t)i + 1;
        assert_true(found);
    }
    assert_int_equal(stats(f).in_flight, 0);
    check_funnel(f);
    fx_free(f);
}

static void test_heartbeat_long_poll(void **state)
{
    struct fx *f = *state;
    struct hb h;
    memset(&h, 0, sizeof(h));
    /* parked: answered as soon as a task arrives */
    assert_int_equal(mc_master_promotion_heartbeat(f->m, f->holder, 0, 5000, on_hb, &h), 0);
    assert_int_equal(h.calls, 0);
    disk_only(f, "k", OBJ);
    get_n(f, "k", 1);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.n, 1);
    assert_string_equal(h.keys[0], "k");
    /* parked with nothing: answered empty at the deadline, by the eviction tick, not before */
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_promotion_heartbeat(f->m, f->holder, 0, 50, on_hb, &h), 0);
    advance(f, 49);
    mc_master_tick_eviction(f->m);
    assert_int_equal(h.calls, 0);
    advance(f, 1);
    mc_master_tick_eviction(f->m);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.n, 0);
    check_funnel(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_non_holder_size_and_stale_refused, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_put_end_cannot_complete_staged, fx_setup, fx_teardown),
        cmocka_unit_test(test_staged_placement),
        cmocka_unit_test(test_max_per_heartbeat_leftovers),
        cmocka_unit_test_setup_teardown(test_heartbeat_long_poll, fx_setup_threshold1, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
