/*
 * test_promotion_cancel.c - promotion on hit (src/master/promotion.h) through the core API on a
 * fake clock with manual ticks (promotion_fixture.h): cancellation and cleanup: the reaper and an
 * AllocStart restart; Remove, BatchRemove and RemoveAll mid-promotion; a refused Remove keeps its
 * task; the pinned source not evicted; disk eviction of the source, holder expiry or unmount, the
 * EvictDiskReplica RPC and a lost staging segment each cancel. After every scenario the funnel
 * invariant is checked against the real state (check_funnel).
 */
#include "promotion_fixture.h"

/* ---- cleanup ------------------------------------------------------------------------------- */

static void test_reaper_and_alloc_start_restart(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_task_timeout_ms = 2000;
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 0);
    uint64_t alloc0 = mc_segments_allocated(f->m->segs);
    uint64_t id = admit_one(f, "k");
    advance(f, 1500);
    assert_int_equal(mc_master_tick_reaper(f->m), 0);
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK); /* restarts at 1.5 s */
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0 + OBJ);
    advance(f, 1500); /* 3.0 s since admission, 1.5 s since AllocStart */
    mc_master_tick_reaper(f->m);
    assert_int_equal(stats(f).in_flight, 1);
    advance(f, 500); /* 2.0 s since AllocStart */
    mc_master_tick_reaper(f->m);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.expired, 1);
    assert_int_equal(st.in_flight, 0);
    /* the staged range is parked, not freed: the holder may still write it (staged space) */
    assert_int_equal(st.parked, 1);
    assert_int_equal(st.parked_bytes, OBJ);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0 + OBJ);
    mc_master_tick_reaper(f->m); /* its mount is live: stays parked */
    assert_int_equal(stats(f).parked, 1);
    assert_false(lists_memory(f, "k"));
    /* the holder's (late) report frees it */
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(stats(f).parked, 0);
    assert_int_equal(stats(f).parked_bytes, 0);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0);
    check_funnel(f);
    /* the key can be admitted again */
    get_n(f, "k", 2);
    assert_int_equal(stats(f).admitted, 2);
    check_funnel(f);
    fx_free(f);
}

enum rm_how { RM_REMOVE, RM_REMOVE_FORCE, RM_BATCH, RM_ALL };

static void remove_case(enum rm_how how, bool staged)
{
    struct fx *f = fx_new();
    uint64_t alloc0 = mc_segments_allocated(f->m->segs);
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    if (staged)
        assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    advance(f, TTL_MS + 1); /* the Gets' leases end */
    struct mc_key_ref kr = {"k", 1};
    int rc = -1;
    uint64_t removed = 0;
    switch (how) {
    case RM_REMOVE:
        assert_int_equal(mc_master_remove(f->m, "k", 1, false), MC_OK);
        break;
    case RM_REMOVE_FORCE:
        assert_int_equal(mc_master_remove(f->m, "k", 1, true), MC_OK);
        break;
    case RM_BATCH:
        assert_int_equal(mc_master_batch_remove(f->m, &kr, 1, false, &rc), MC_OK);
        assert_int_equal(rc, MC_OK);
        break;
    case RM_ALL:
        assert_int_equal(mc_master_remove_all(f->m, false, &removed), MC_OK);
        assert_int_equal(removed, 1);
        break;
    }
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.in_flight, 0);
    /* a staged range is parked until the holder reports (it may write it late), never freed
     * under its live mount; this freed it at once before */
    assert_int_equal(st.parked, staged ? 1 : 0);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0 + (staged ? OBJ : 0));
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "k", 1, &ki), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(stats(f).parked, 0);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0);
    assert_int_equal(failure(f, f->holder, id, "k"), MC_OK);
    check_funnel(f);
    fx_free(f);
}

static void test_remove_mid_promotion(void **state)
{
    (void)state;
    remove_case(RM_REMOVE, false);
    remove_case(RM_REMOVE, true);
    remove_case(RM_REMOVE_FORCE, true);
}

static void test_batch_remove_mid_promotion(void **state)
{
    (void)state;
    remove_case(RM_BATCH, false);
    remove_case(RM_BATCH, true);
}

static void test_remove_all_mid_promotion(void **state)
{
    (void)state;
    remove_case(RM_ALL, false);
    remove_case(RM_ALL, true);
}

/* The read lease still blocks a non-forced Remove, and the task then stays. */
static void test_remove_refused_keeps_task(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k");
    assert_int_equal(mc_master_remove(f->m, "k", 1, false), MC_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(stats(f).in_flight, 1);
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    assert_int_equal(success(f, f->holder, id, "k"), MC_OK);
    check_funnel(f);
}

static void test_pinned_source_not_evicted(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    for (int i = 0; i < 20; i++)
        put_n(f, key("cold", i), OBJ, 1);
    advance(f, TTL_MS + 1);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    assert_int_equal(es.evicted, 20); /* every cold object, not the promoting one */
    unsigned proc;
    assert_int_equal(mem_replicas(f, "k", &proc), 0);
    assert_int_equal(proc, 1); /* the staged replica stays */
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "k", 1, &ki), MC_OK);
    bool disk = false;
    for (uint32_t i = 0; i < ki.nreplicas; i++)
        if (ki.replicas[i].type == MC_REPLICA_TYPE_LOCAL_DISK) {
            disk = true;
            assert_int_equal(ki.replicas[i].refcnt, 1); /* pinned */
        }
    assert_true(disk);
    assert_int_equal(stats(f).in_flight, 1);
    assert_int_equal(success(f, f->holder, id, "k"), MC_OK);
    check_funnel(f);
}

/* Disk eviction of the source (what EvictDiskReplica does before dropping it). */
static void test_disk_eviction_of_source_cancels(void **state)
{
    struct fx *f = *state;
    uint64_t alloc0 = mc_segments_allocated(f->m->segs);
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    struct mc_shard *s;
    struct mc_object *o = mc_master_lock_find(f->m, mc_hash_key("k", 1), "k", 1, true, &s);
    assert_non_null(o);
    assert_true(mc_promotion_cancel_locked(f->m, s, o, &fl));
    assert_false(mc_promotion_cancel_locked(f->m, s, o, &fl));
    assert_int_equal(o->nrep, 1);
    assert_int_equal(o->rep[0].refcnt, 0);
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    /* parked (was: freed at once) until the holder's report */
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0 + OBJ);
    assert_int_equal(stats(f).parked, 1);
    assert_int_equal(stats(f).cancelled, 1);
    assert_int_equal(failure(f, f->holder, id, "k"), MC_OK); /* a failure report frees it too */
    assert_int_equal(stats(f).parked, 0);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0);
    check_funnel(f);
}

static void holder_gone_case(bool expiry)
{
    struct fx *f = fx_new();
    uint64_t alloc0 = mc_segments_allocated(f->m->segs);
    uint64_t id = admit_one(f, "k");
    admit_one(f, "k2");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    if (expiry) {
        /* the holder stops pinging; the others do */
        advance(f, 6000);
        struct mc_ping_result pr;
        assert_int_equal(mc_master_ping(f->m, f->owner, &pr), MC_OK);
        assert_int_equal(mc_master_ping(f->m, f->other, &pr), MC_OK);
        advance(f, 5000);
        assert_int_equal(mc_master_tick_monitor(f->m), 1);
    } else {
        assert_int_equal(mc_master_unmount_local_disk(f->m, f->holder), MC_OK);
        mc_master_tick_monitor(f->m); /* the sweep of its replicas */
    }
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.cancelled, 2);
    assert_int_equal(st.in_flight, 0);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "k", 1, &ki), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_query_key(f->m, "k2", 2, &ki), MC_ERR_OBJECT_NOT_FOUND);
    if (expiry) {
        /* expiry unmounted the holder's DRAM segment before the sweep cancelled the task: a
         * range of an ended mount is freed, not parked */
        assert_int_equal(stats(f).parked, 0);
    } else {
        /* its DRAM segment is still mounted: parked until the holder reports (was: freed) */
        assert_int_equal(mc_segments_allocated(f->m->segs), alloc0 + OBJ);
        assert_int_equal(stats(f).parked, 1);
        mc_master_tick_reaper(f->m);
        assert_int_equal(stats(f).parked, 1);
    }
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(stats(f).parked, 0);
    if (!expiry)
        assert_int_equal(mc_segments_allocated(f->m->segs), alloc0);
    check_funnel(f);
    fx_free(f);
}

static void test_holder_expiry_cancels(void **state)
{
    (void)state;
    holder_gone_case(true);
}

static void test_holder_unmount_cancels(void **state)
{
    (void)state;
    holder_gone_case(false);
}

/* EvictDiskReplica of the pinned source (the holder's disk store evicts it) cancels first. */
static void test_evict_disk_replica_rpc_cancels(void **state)
{
    struct fx *f = *state;
    uint64_t alloc0 = mc_segments_allocated(f->m->segs);
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    uint64_t id2 = admit_one(f, "k2");
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->holder, "k", 1, 0), MC_OK);
    struct mc_key_ref kr = {"k2", 2};
    int rc = -1;
    assert_int_equal(mc_master_batch_evict_disk_replica(f->m, f->holder, &kr, NULL, 1, &rc), MC_OK);
    assert_int_equal(rc, MC_OK);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.cancelled, 2);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.parked, 1); /* the staged replica is parked (was: freed) */
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0 + OBJ);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "k", 1, &ki), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0); /* freed by the report */
    assert_int_equal(failure(f, f->holder, id2, "k2"), MC_OK);
    check_funnel(f);
}

/* The staged replica's segment is unmounted mid-promotion: the commit is refused and the task
 * cancelled; the object keeps its disk copy. */
static void test_staged_segment_lost(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k");
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    assert_int_equal(mc_master_unmount_segment(f->m, f->holder, d.u.mem.segment_id), MC_OK);
    assert_int_equal(success(f, f->holder, id, "k"), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(stats(f).cancelled, 1);
    mc_master_tick_monitor(f->m);
    struct mc_get_result g;
    assert_int_equal(get(f, "k", &g), MC_OK);
    assert_int_equal(g.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    check_funnel(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reaper_and_alloc_start_restart),
        cmocka_unit_test(test_remove_mid_promotion),
        cmocka_unit_test(test_batch_remove_mid_promotion),
        cmocka_unit_test(test_remove_all_mid_promotion),
        cmocka_unit_test_setup_teardown(test_remove_refused_keeps_task, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pinned_source_not_evicted, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_disk_eviction_of_source_cancels, fx_setup,
                                        fx_teardown),
        cmocka_unit_test(test_holder_expiry_cancels),
        cmocka_unit_test(test_holder_unmount_cancels),
        cmocka_unit_test_setup_teardown(test_evict_disk_replica_rpc_cancels, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_staged_segment_lost, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
