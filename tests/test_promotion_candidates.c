/*
 * test_promotion_candidates.c - promotion on hit (src/master/promotion.h) through the core API on a
 * fake clock with manual ticks (promotion_fixture.h): retry candidates (admitted when room appears,
 * dropped after retries or when removed, backoff and TTL), hot beats cold (with and without offload
 * on evict), and the lease a commit grants. After every scenario the funnel invariant is checked
 * against the real state (check_funnel).
 */
#include "promotion_fixture.h"

/* ---- retry candidates and hot beats cold --------------------------------------------------- */

/* DRAM of n objects of OBJ bytes (one segment, the holder's: a holder stages in its own DRAM
 * only), filled with n Puts. */
static struct fx *fx_full(uint32_t n, double hw, uint32_t threshold)
{
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_admission_threshold = threshold;
    c.eviction_high_watermark_ratio = hw;
    struct fx *f = fx_new_cfg(&c, (uint64_t)n * OBJ, 0);
    return f;
}

static void test_candidate_admitted_when_room(void **state)
{
    (void)state;
    struct fx *f = fx_full(100, 0.9, 1);
    disk_only(f, "cand", OBJ);
    for (int i = 0; i < 95; i++)
        put_n(f, key("fill", i), OBJ, 1);
    for (int i = 0; i < 95; i++) /* leased: eviction cannot make room */
        get_n(f, key("fill", i), 1);
    get_n(f, "cand", 1);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.rejected_watermark, 1);
    assert_int_equal(st.candidates, 1);
    /* no room yet: the retry is refused again (and backs off) */
    advance(f, 10);
    mc_master_tick_eviction(f->m);
    st = stats(f);
    assert_int_equal(st.admitted, 0);
    assert_int_equal(st.rejected_watermark, 1); /* one decision: a retry is not one */
    assert_int_equal(st.candidate_retried, 1);
    assert_int_equal(st.candidates, 1);
    /* room appears (some objects removed) */
    advance(f, TTL_MS);
    for (int i = 0; i < 20; i++)
        assert_int_equal(mc_master_remove(f->m, key("fill", i), 9, true), MC_OK);
    advance(f, 1000);
    mc_master_tick_eviction(f->m);
    st = stats(f);
    assert_int_equal(st.admitted, 1);
    assert_int_equal(st.candidate_admitted, 1);
    assert_int_equal(st.candidates, 0);
    check_funnel(f);
    assert_int_equal(promote_all(f), 1);
    check_funnel(f);
    fx_free(f);
}

static void test_candidate_dropped_after_retries(void **state)
{
    (void)state;
    struct fx *f = fx_full(100, 0.9, 1);
    disk_only(f, "cand", OBJ);
    for (int i = 0; i < 95; i++)
        put_n(f, key("fill", i), OBJ, 1);
    for (int i = 0; i < 95; i++)
        assert_int_equal(mc_master_query_key(f->m, key("fill", i), 9, &(struct mc_key_info){0}),
                         MC_OK);
    /* hard-pin the fill so no eviction can make room: a Remove+Put with a hard pin */
    for (int i = 0; i < 95; i++) {
        struct mc_shard *s;
        const char *k = key("fill", i);
        struct mc_object *o =
            mc_master_lock_find(f->m, mc_hash_key(k, strlen(k)), k, strlen(k), true, &s);
        o->flags |= MC_OBJ_HARD_PIN;
        mc_shard_refresh_bits(s, o);
        mc_shard_unlock(s);
    }
    get_n(f, "cand", 1);
    assert_int_equal(stats(f).candidates, 1);
    for (int r = 0; r < 20; r++) {
        advance(f, 1000); /* past every backoff */
        mc_master_tick_eviction(f->m);
    }
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.candidates, 0);
    assert_int_equal(st.candidate_dropped, 1);
    assert_int_equal(st.rejected_watermark, 1); /* the Get's decision ... */
    assert_int_equal(st.candidate_retried, 8);  /* ... then eight retries, not counted in it */
    assert_int_equal(st.admitted, 0);
    check_funnel(f);
    fx_free(f);
}

/* DRAM full of leased objects (no eviction can make room) and one candidate. */
static struct fx *fx_blocked_candidate(void)
{
    struct fx *f = fx_full(100, 0.9, 1);
    disk_only(f, "cand", OBJ);
    for (int i = 0; i < 95; i++)
        put_n(f, key("fill", i), OBJ, 1);
    for (int i = 0; i < 95; i++) {
        struct mc_shard *s;
        const char *k = key("fill", i);
        struct mc_object *o =
            mc_master_lock_find(f->m, mc_hash_key(k, strlen(k)), k, strlen(k), true, &s);
        o->flags |= MC_OBJ_HARD_PIN;
        mc_shard_refresh_bits(s, o);
        mc_shard_unlock(s);
    }
    get_n(f, "cand", 1);
    assert_int_equal(stats(f).candidates, 1);
    return f;
}

/* Retries back off 10 ms, 20 ms, 40 ms ...; a candidate older than its TTL is dropped unretried. */
static void test_candidate_backoff_and_ttl(void **state)
{
    (void)state;
    struct fx *f = fx_blocked_candidate();
    uint64_t wm = stats(f).candidate_retried; /* 0: the Get's decision only */
    assert_int_equal(wm, 0);
    advance(f, 9);
    mc_master_tick_eviction(f->m);
    assert_int_equal(stats(f).candidate_retried, wm); /* not due yet */
    advance(f, 1);
    mc_master_tick_eviction(f->m);
    assert_int_equal(stats(f).candidate_retried, wm + 1); /* retry 1 at +10 ms */
    advance(f, 19);
    mc_master_tick_eviction(f->m);
    assert_int_equal(stats(f).candidate_retried, wm + 1); /* backoff 20 ms */
    advance(f, 1);
    mc_master_tick_eviction(f->m);
    assert_int_equal(stats(f).candidate_retried, wm + 2); /* retry 2 */
    advance(f, 39);
    mc_master_tick_eviction(f->m);
    assert_int_equal(stats(f).candidate_retried, wm + 2);
    advance(f, 1);
    mc_master_tick_eviction(f->m);
    assert_int_equal(stats(f).candidate_retried, wm + 3); /* retry 3 after 40 ms */
    check_funnel(f);
    fx_free(f);

    f = fx_blocked_candidate();
    wm = stats(f).candidate_retried;
    advance(f, MC_PROMO_CANDIDATE_TTL_MS);
    mc_master_tick_eviction(f->m);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.candidates, 0);
    assert_int_equal(st.candidate_dropped, 1);
    assert_int_equal(st.candidate_retried, wm); /* dropped, not retried */
    assert_int_equal(st.rejected_watermark, 1);
    check_funnel(f);
    fx_free(f);
}

static void test_candidate_dropped_when_removed(void **state)
{
    (void)state;
    struct fx *f = fx_full(100, 0.9, 1);
    disk_only(f, "cand", OBJ);
    for (int i = 0; i < 95; i++)
        put_n(f, key("fill", i), OBJ, 1);
    get_n(f, "cand", 1);
    assert_int_equal(stats(f).candidates, 1);
    advance(f, TTL_MS + 1);
    assert_int_equal(mc_master_remove(f->m, "cand", 4, false), MC_OK);
    for (int i = 0; i < 30; i++)
        assert_int_equal(mc_master_remove(f->m, key("fill", i), 9, false), MC_OK);
    advance(f, 100);
    mc_master_tick_eviction(f->m);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.candidates, 0);
    assert_int_equal(st.candidate_dropped, 1);
    assert_int_equal(st.admitted, 0);
    check_funnel(f);
    fx_free(f);
}

/* DRAM full of once-read objects, each with a disk copy already (so eviction loses nothing);
 * ten disk-only keys read past the threshold: all ten promoted within a second of fake time by
 * the eviction and promotion ticks, the displaced objects still readable from disk, and a
 * just-promoted key not the next victim. */
static void test_hot_beats_cold(void **state)
{
    (void)state;
    struct fx *f = fx_full(100, 0.9, 2);
    for (int i = 0; i < 90; i++) { /* exactly at the watermark: no eviction of its own */
        put_n(f, key("cold", i), OBJ, 1);
    }
    for (int i = 0; i < 90; i++) /* each with a disk copy already (offloaded) */
        add_disk_copy(f, key("cold", i));
    for (int i = 0; i < 10; i++)
        disk_only(f, key("hot", i), OBJ);
    for (int i = 0; i < 90; i++) /* once-read */
        get_n(f, key("cold", i), 1);
    advance(f, TTL_MS + 1); /* their leases end: evictable */
    assert_true(mc_segments_used_ratio(f->m->segs) >= 0.9);
    assert_int_equal(mc_master_tick_eviction(f->m), 0); /* at, not above, the watermark */
    for (int i = 0; i < 10; i++)
        get_n(f, key("hot", i), 2);
    assert_int_equal(stats(f).rejected_watermark, 10);
    assert_int_equal(stats(f).admitted, 0);
    uint64_t start = mc_clock_now_ms(&f->fc.clock);
    int promoted = 0;
    while (mc_clock_now_ms(&f->fc.clock) < start + 1000 && promoted < 10) {
        advance(f, 10);
        mc_master_tick_eviction(f->m);
        promoted += (int)promote_all(f);
    }
    assert_int_equal(promoted, 10);
    /* checked with QueryKey (no lease): the Gets of a check would reorder the LRU */
    for (int i = 0; i < 10; i++)
        assert_int_equal(mem_replicas(f, key("hot", i), NULL), 1);
    int in_dram = 0;
    for (int i = 0; i < 90; i++)
        in_dram += mem_replicas(f, key("cold", i), NULL);
    assert_true(in_dram < 90); /* some were displaced */
    /* the next victims are the cold ones, not the just-promoted keys: evict exactly as many
     * objects as cold ones are left in DRAM */
    advance(f, TTL_MS + 1);
    struct mc_evict_stats es;
    double ratio = (double)in_dram / (double)(in_dram + 10);
    assert_int_equal(mc_master_batch_evict(f->m, ratio, ratio, &es), MC_OK);
    assert_int_equal(es.evicted, (uint64_t)in_dram);
    for (int i = 0; i < 10; i++)
        assert_int_equal(mem_replicas(f, key("hot", i), NULL), 1);
    /* the displaced cold objects are not lost: every one is still readable, from disk */
    for (int i = 0; i < 90; i++) {
        struct mc_get_result g;
        assert_int_equal(get(f, key("cold", i), &g), MC_OK);
        assert_int_equal(g.nreplicas, 1);
        assert_int_equal(g.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    }
    check_funnel(f);
    fx_free(f);
}

/* The holder's offload worker for one tick: pulls offload tasks, reports each stored. */
struct off_pull {
    size_t n;
    uint64_t ids[256], versions[256], sizes[256];
    uint32_t crcs[256];
    bool crc_valid[256];
    char keys[256][64];
};

static void on_off(void *arg, struct mc_task_list *tasks)
{
    struct off_pull *o = arg;
    for (struct mc_task *t = tasks->head; t; t = t->next) {
        if (t->kind != MC_TASK_OFFLOAD || o->n == 256)
            continue;
        o->ids[o->n] = t->task_id;
        o->versions[o->n] = t->version;
        o->sizes[o->n] = t->size;
        o->crcs[o->n] = t->crc32c;
        o->crc_valid[o->n] = t->crc_valid;
        snprintf(o->keys[o->n], sizeof(o->keys[o->n]), "%s", t->key);
        o->n++;
    }
    mc_task_list_free(tasks);
}

static size_t offload_all(struct fx *f)
{
    struct off_pull *o = calloc(1, sizeof(*o));
    assert_non_null(o);
    assert_true(mc_master_offload_heartbeat(f->m, f->holder, true, 256, 0, on_off, o) >= 0);
    for (size_t i = 0; i < o->n; i++) {
        struct mc_offload_result it = {.task_id = o->ids[i],
                                       .key = o->keys[i],
                                       .key_len = strlen(o->keys[i]),
                                       .size = o->sizes[i],
                                       .version = o->versions[i],
                                       .crc32c = o->crcs[i],
                                       .crc_valid = o->crc_valid[i]};
        int rc = -1;
        assert_int_equal(mc_master_notify_offload(f->m, f->holder, &it, 1, false, &rc), MC_OK);
        assert_int_equal(rc, MC_OK);
    }
    size_t n = o->n;
    free(o);
    return n;
}

/* Hot beats cold with --offload_on_evict: the displaced cold objects are offloaded by eviction
 * (pinned until their disk copy exists) before they leave DRAM, so none is lost. */
static void test_hot_beats_cold_offload_on_evict(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.offload_on_evict = true;
    struct fx *f = fx_new_cfg(&c, 100 * OBJ, 0);
    assert_int_equal(
        mc_master_mount_local_disk(f->m, f->holder, "10.0.0.2:17002", 1ull << 30, true),
        MC_OK); /* this holder takes offload tasks */
    for (int i = 0; i < 10; i++)
        disk_only(f, key("hot", i), OBJ);
    for (int i = 0; i < 90; i++)
        put_n(f, key("cold", i), OBJ, 1); /* no disk copy */
    for (int i = 0; i < 90; i++)
        get_n(f, key("cold", i), 1);
    advance(f, TTL_MS + 1);
    for (int i = 0; i < 10; i++)
        get_n(f, key("hot", i), 2);
    assert_int_equal(stats(f).rejected_watermark, 10);
    uint64_t start = mc_clock_now_ms(&f->fc.clock);
    int promoted = 0;
    size_t offloaded = 0;
    while (mc_clock_now_ms(&f->fc.clock) < start + 1000 && promoted < 10) {
        advance(f, 10);
        mc_master_tick_eviction(f->m);
        offloaded += offload_all(f);
        promoted += (int)promote_all(f);
    }
    assert_int_equal(promoted, 10);
    assert_true(offloaded > 0);
    for (int i = 0; i < 10; i++)
        assert_int_equal(mem_replicas(f, key("hot", i), NULL), 1);
    int on_disk_only = 0;
    for (int i = 0; i < 90; i++) { /* none lost */
        struct mc_get_result g;
        assert_int_equal(get(f, key("cold", i), &g), MC_OK);
        on_disk_only += g.nreplicas == 1 && g.replicas[0].type == MC_REPLICA_TYPE_LOCAL_DISK;
    }
    assert_true(on_disk_only > 0);
    check_funnel(f);
    fx_free(f);
}

/* The commit's lease: a key read (and admitted) long ago, committed after another object was
 * read, is newer than that object in the LRU order; without it the promoted key would be the
 * next victim. */
static void test_commit_grants_lease(void **state)
{
    struct fx *f = *state;
    uint64_t id = admit_one(f, "k"); /* read at T0: lease T0 + TTL */
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, id, "k", OBJ, &d), MC_OK);
    put_n(f, "c", OBJ, 1);
    advance(f, TTL_MS + 500);
    get_n(f, "c", 1); /* lease T0 + 2.5 TTL */
    advance(f, 2 * TTL_MS);
    assert_int_equal(success(f, f->holder, id, "k"), MC_OK); /* lease = T0 + 3.5 TTL */
    advance(f, 1);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 0.5, 0.5, &es), MC_OK);
    assert_int_equal(es.evicted, 1);
    assert_int_equal(mem_replicas(f, "k", NULL), 1);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "c", 1, &ki), MC_ERR_OBJECT_NOT_FOUND);
    /* and the lease does not block eviction or Remove: it is zero-length */
    assert_int_equal(mc_master_remove(f->m, "k", 1, false), MC_OK);
    check_funnel(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_candidate_admitted_when_room),
        cmocka_unit_test(test_candidate_dropped_after_retries),
        cmocka_unit_test(test_candidate_dropped_when_removed),
        cmocka_unit_test(test_candidate_backoff_and_ttl),
        cmocka_unit_test(test_hot_beats_cold),
        cmocka_unit_test(test_hot_beats_cold_offload_on_evict),
        cmocka_unit_test_setup_teardown(test_commit_grants_lease, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
