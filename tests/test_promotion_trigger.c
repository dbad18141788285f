/*
 * test_promotion_trigger.c - promotion on hit (src/master/promotion.h) through the core API on a
 * fake clock with manual ticks (promotion_fixture.h): the trigger and its gates: the flag, MEMORY
 * keys never promoted, the admission threshold over Get and BatchGet (windowed or not), the
 * watermark gate recording a candidate, the in-flight cap across shards, the threshold clamp, a Put
 * in flight blocking it. After every scenario the funnel invariant is checked against the real
 * state (check_funnel).
 */
#include "promotion_fixture.h"

/* ---- trigger ------------------------------------------------------------------------------- */

static void test_flag_off(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_on_hit = false;
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 0);
    disk_only(f, "k", OBJ);
    get_n(f, "k", 10);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.attempts, 0);
    assert_int_equal(st.admitted, 0);
    struct hb h;
    assert_int_equal(pull(f, 0, &h), 0);
    check_funnel(f);
    fx_free(f);
}

static void test_memory_keys_never_promote(void **state)
{
    struct fx *f = *state;
    put_n(f, "mem", OBJ, 1);
    put_n(f, "both", OBJ, 1);
    add_disk_copy(f, "both");
    get_n(f, "mem", 5);
    get_n(f, "both", 5);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.attempts, 0);
    assert_int_equal(st.admitted, 0);
    check_funnel(f);
}

static void test_threshold_and_commit(void **state)
{
    struct fx *f = *state;
    disk_only(f, "k", OBJ);
    uint64_t alloc0 = mc_segments_allocated(f->m->segs);
    get_n(f, "k", 1); /* below the threshold (2) */
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.attempts, 1);
    assert_int_equal(st.rejected_frequency, 1);
    assert_int_equal(st.admitted, 0);
    get_n(f, "k", 1); /* at the threshold */
    st = stats(f);
    assert_int_equal(st.attempts, 2);
    assert_int_equal(st.admitted, 1);
    assert_int_equal(st.in_flight, 1);
    check_funnel(f);
    get_n(f, "k", 3); /* already in flight: no second task */
    assert_int_equal(stats(f).admitted, 1);
    struct hb h;
    assert_int_equal(pull(f, 0, &h), 1);
    assert_string_equal(h.keys[0], "k");
    assert_int_equal(h.sizes[0], OBJ);
    struct mc_replica_desc d;
    assert_int_equal(alloc_start(f, f->holder, h.ids[0], "k", OBJ, &d), MC_OK);
    assert_int_equal(d.type, MC_REPLICA_TYPE_MEMORY);
    assert_int_equal(d.status, MC_REPLICA_STATUS_PROCESSING);
    assert_int_equal(mc_segments_allocated(f->m->segs), alloc0 + OBJ);
    assert_false(lists_memory(f, "k")); /* staged: invisible to readers */
    check_funnel(f);
    advance(f, 7);
    assert_int_equal(success(f, f->holder, h.ids[0], "k"), MC_OK);
    assert_true(lists_memory(f, "k"));
    struct mc_get_result g;
    assert_int_equal(get(f, "k", &g), MC_OK);
    assert_int_equal(g.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK); /* stored order */
    assert_int_equal(g.nreplicas, 2);
    st = stats(f);
    assert_int_equal(st.completed, 1);
    assert_int_equal(st.completed_bytes, OBJ);
    assert_int_equal(st.in_flight, 0);
    /* a MEMORY replica now: further Gets are no attempts */
    uint64_t att = st.attempts;
    get_n(f, "k", 3);
    assert_int_equal(stats(f).attempts, att);
    /* the lag histogram saw one promotion */
    struct mc_textbuf tb;
    mc_textbuf_init(&tb);
    assert_int_equal(mc_metrics_render(mc_master_metrics(f->m), &tb), 0);
    size_t len;
    char *txt = mc_textbuf_steal(&tb, &len);
    assert_non_null(strstr(txt, "master_promotion_lag_seconds_count 1"));
    assert_non_null(strstr(txt, "master_promotion_completed_total 1"));
    assert_non_null(strstr(txt, "master_promotion_in_flight 0"));
    assert_non_null(strstr(txt, "master_promotion_rejected_frequency_total 1"));
    free(txt);
    mc_textbuf_destroy(&tb);
    check_funnel(f);
}

static void test_batch_get_promotes(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_admission_threshold = 1;
    c.promotion_batch_admission_threshold = 0; /* = the one above */
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 16 * MIB);
    for (int i = 0; i < 40; i++)
        disk_only(f, key("b", i), OBJ);
    put_n(f, "mem", OBJ, 1);
    struct mc_key_ref keys[41];
    for (int i = 0; i < 40; i++) {
        const char *k = key("b", i);
        keys[i].data = strdup(k);
        keys[i].len = strlen(k);
    }
    keys[40] = (struct mc_key_ref){"mem", 3};
    struct mc_get_result out[41];
    int rcs[41];
    assert_int_equal(mc_master_batch_get_replica_list(f->m, keys, 41, out, rcs), MC_OK);
    for (int i = 0; i < 41; i++)
        assert_int_equal(rcs[i], MC_OK);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.attempts, 40);
    assert_int_equal(st.admitted, 40);
    check_funnel(f);
    assert_int_equal(promote_all(f), 40);
    for (int i = 0; i < 40; i++)
        assert_true(lists_memory(f, keys[i].data));
    check_funnel(f);
    for (int i = 0; i < 40; i++)
        free((void *)keys[i].data);
    fx_free(f);
}

static int emit_nop(void *arg, size_t first, size_t cnt, const struct mc_get_result *out,
                    const int *rcs)
{
    (void)first;
    (void)out;
    size_t *seen = arg;
    for (size_t i = 0; i < cnt; i++)
        assert_int_equal(rcs[i], MC_OK);
    *seen += cnt;
    return 0;
}

static void test_windowed_batch_and_admin_never(void **state)
{
    struct fx *f = *state;
    disk_only(f, "a", OBJ);
    disk_only(f, "b", OBJ);
    /* admin query, Exist and BatchExist never count or promote */
    struct mc_key_info ki;
    bool ex;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(mc_master_query_key(f->m, "a", 1, &ki), MC_OK);
        assert_int_equal(mc_master_exist_key(f->m, "a", 1, &ex), MC_OK);
        assert_true(ex);
    }
    struct mc_key_ref keys[2] = {{"a", 1}, {"b", 1}};
    bool exs[2];
    int rcs[2];
    assert_int_equal(mc_master_batch_exist_key(f->m, keys, 2, exs, rcs), MC_OK);
    assert_int_equal(stats(f).attempts, 0);
    /* the windowed batch (the RPC adapter's path) promotes */
    struct mc_get_result out[1];
    size_t seen = 0;
    assert_int_equal(
        mc_master_batch_get_replica_list_windowed(f->m, keys, 2, 1, out, rcs, emit_nop, &seen),
        MC_OK);
    assert_int_equal(seen, 2);
    assert_int_equal(stats(f).admitted, 2);
    check_funnel(f);
}

/* BatchGets of n keys over keys[], rounds times; every key must answer OK. */
static void batch_get_n(struct fx *f, const struct mc_key_ref *keys, size_t n, int rounds)
{
    struct mc_get_result out[4];
    int rcs[4];
    assert_true(n <= 4);
    for (int r = 0; r < rounds; r++) {
        assert_int_equal(mc_master_batch_get_replica_list(f->m, keys, n, out, rcs), MC_OK);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(rcs[i], MC_OK);
    }
}

/* A key read by a BatchGet of several keys needs promotion_batch_admission_threshold reads; a
 * single Get, and a BatchGet of one key, need promotion_admission_threshold. */
static void test_batch_threshold(void **state)
{
    (void)state;
    struct fx *f = fx_new(); /* the defaults: 2 for a Get, 12 for a BatchGet of several keys */
    assert_int_equal(mc_master_config_get(f->m)->promotion_admission_threshold, 2);
    assert_int_equal(mc_master_config_get(f->m)->promotion_batch_admission_threshold, 12);
    disk_only(f, "p0", OBJ);
    disk_only(f, "p1", OBJ);
    disk_only(f, "single", OBJ);
    disk_only(f, "one", OBJ);
    struct mc_key_ref prefix[2] = {{"p0", 2}, {"p1", 2}};
    batch_get_n(f, prefix, 2, 11);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.attempts, 22);
    assert_int_equal(st.rejected_frequency, 22); /* 11 reads each: below 12 */
    assert_int_equal(st.admitted, 0);
    get_n(f, "single", 2); /* a Get at 2 admits */
    assert_int_equal(stats(f).admitted, 1);
    struct mc_key_ref one = {"one", 3}; /* a BatchGet of one key is a Get */
    batch_get_n(f, &one, 1, 2);
    assert_int_equal(stats(f).admitted, 2);
    batch_get_n(f, prefix, 2, 1); /* the twelfth read of the prefix admits both */
    st = stats(f);
    assert_int_equal(st.admitted, 4);
    assert_int_equal(st.rejected_frequency, 22 + 1 + 1);
    assert_int_equal(st.in_flight, 4);
    check_funnel(f);
    assert_int_equal(promote_all(f), 4);
    assert_true(lists_memory(f, "p0"));
    assert_true(lists_memory(f, "p1"));
    check_funnel(f);
    fx_free(f);
}

/* The windowed BatchGet (the RPC adapter's path, one window at a time) judges by the whole
 * request's key count, not by the window's: windows of one key still use the batch threshold. */
static void test_batch_threshold_windowed(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_batch_admission_threshold = 3;
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 0);
    disk_only(f, "a", OBJ);
    disk_only(f, "b", OBJ);
    struct mc_key_ref keys[2] = {{"a", 1}, {"b", 1}};
    struct mc_get_result out[1];
    int rcs[2];
    for (int r = 1; r <= 3; r++) {
        size_t seen = 0;
        assert_int_equal(
            mc_master_batch_get_replica_list_windowed(f->m, keys, 2, 1, out, rcs, emit_nop, &seen),
            MC_OK);
        assert_int_equal(seen, 2);
        assert_int_equal(stats(f).admitted, r < 3 ? 0 : 2);
    }
    check_funnel(f);
    fx_free(f);
}

/* 0 = the single-Get threshold; above 255 clamped. */
static void test_batch_threshold_zero_and_clamp(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_batch_admission_threshold = 0;
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 0);
    assert_int_equal(mc_master_config_get(f->m)->promotion_batch_admission_threshold, 2);
    disk_only(f, "a", OBJ);
    disk_only(f, "b", OBJ);
    struct mc_key_ref keys[2] = {{"a", 1}, {"b", 1}};
    batch_get_n(f, keys, 2, 1);
    assert_int_equal(stats(f).admitted, 0);
    batch_get_n(f, keys, 2, 1);
    assert_int_equal(stats(f).admitted, 2);
    check_funnel(f);
    fx_free(f);
    cfg_defaults(&c);
    c.promotion_batch_admission_threshold = 1000;
    f = fx_new_cfg(&c, 16 * MIB, 0);
    assert_int_equal(mc_master_config_get(f->m)->promotion_batch_admission_threshold, 255);
    disk_only(f, "a", OBJ);
    disk_only(f, "b", OBJ);
    batch_get_n(f, keys, 2, 254);
    assert_int_equal(stats(f).admitted, 0);
    batch_get_n(f, keys, 2, 1);
    assert_int_equal(stats(f).admitted, 2);
    check_funnel(f);
    fx_free(f);
}

/* ---- gates --------------------------------------------------------------------------------- */

static void test_watermark_gate_records_candidate(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_admission_threshold = 1;
    struct fx *f = fx_new_cfg(&c, 1 * MIB, 0);
    disk_only(f, "k", OBJ);
    /* DRAM at 100%: 256 objects of 4 KiB, read (leased) so nothing is evictable yet */
    for (int i = 0; i < 256; i++)
        put_n(f, key("fill", i), OBJ, 1);
    get_n(f, "k", 1);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.rejected_watermark, 1);
    assert_int_equal(st.admitted, 0);
    assert_int_equal(st.candidate_recorded, 1);
    assert_int_equal(st.candidates, 1);
    check_funnel(f);
    fx_free(f);
}

/* Two keys whose objects live in the same shard (same = true) or in different shards. */
static void two_keys(const char *p, bool same, char *k1, char *k2)
{
    snprintf(k1, 64, "%s-0", p);
    uint32_t s1 = (uint32_t)mc_hash_key(k1, strlen(k1)) & MC_SHARD_MASK;
    for (int i = 1; i < 100000; i++) {
        snprintf(k2, 64, "%s-%d", p, i);
        uint32_t s2 = (uint32_t)mc_hash_key(k2, strlen(k2)) & MC_SHARD_MASK;
        if ((s1 == s2) == same)
            return;
    }
    fail();
}

static void cap_case(bool same_shard, bool free_by_success)
{
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_admission_threshold = 1;
    c.promotion_queue_limit = 1;
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 0);
    char k1[64], k2[64];
    two_keys("cap", same_shard, k1, k2);
    disk_only(f, k1, OBJ);
    disk_only(f, k2, OBJ);
    get_n(f, k1, 1);
    struct mc_get_result g;
    assert_int_equal(get(f, k2, &g), MC_OK); /* the read itself succeeds */
    assert_int_equal(g.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.admitted, 1);
    assert_int_equal(st.rejected_cap, 1);
    assert_int_equal(st.candidates, 1);
    check_funnel(f);
    struct hb h;
    assert_int_equal(pull(f, 0, &h), 1);
    assert_string_equal(h.keys[0], k1);
    if (free_by_success) {
        struct mc_replica_desc d;
        assert_int_equal(alloc_start(f, f->holder, h.ids[0], k1, OBJ, &d), MC_OK);
        assert_int_equal(success(f, f->holder, h.ids[0], k1), MC_OK);
    } else {
        assert_int_equal(failure(f, f->holder, h.ids[0], k1), MC_OK);
    }
    assert_int_equal(stats(f).in_flight, 0);
    get_n(f, k2, 1); /* the freed slot takes the next key */
    st = stats(f);
    assert_int_equal(st.admitted, 2);
    assert_int_equal(st.candidate_admitted, 1); /* the cap's candidate was this key */
    assert_int_equal(st.candidates, 0);
    check_funnel(f);
    fx_free(f);
}

static void test_cap_same_shard_success(void **state)
{
    (void)state;
    cap_case(true, true);
}

static void test_cap_cross_shard_failure(void **state)
{
    (void)state;
    cap_case(false, false);
}

static void test_threshold_clamped(void **state)
{
    (void)state;
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_admission_threshold = 0;
    c.promotion_max_per_heartbeat = 0;
    struct fx *f = fx_new_cfg(&c, 16 * MIB, 0);
    assert_int_equal(mc_master_config_get(f->m)->promotion_admission_threshold, 1);
    assert_int_equal(mc_master_config_get(f->m)->promotion_max_per_heartbeat, 1);
    disk_only(f, "k", OBJ);
    get_n(f, "k", 1);
    assert_int_equal(stats(f).admitted, 1); /* 1: the first Get admits */
    check_funnel(f);
    fx_free(f);
    cfg_defaults(&c);
    c.promotion_admission_threshold = 256;
    f = fx_new_cfg(&c, 16 * MIB, 0);
    assert_int_equal(mc_master_config_get(f->m)->promotion_admission_threshold, 255);
    disk_only(f, "k", OBJ);
    get_n(f, "k", 254);
    assert_int_equal(stats(f).admitted, 0);
    get_n(f, "k", 1);
    assert_int_equal(stats(f).admitted, 1);
    check_funnel(f);
    fx_free(f);
}

/* A Put in flight of the key blocks admission (re-checked under the write lock). */
static void test_put_in_flight_blocks(void **state)
{
    struct fx *f = *state;
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->owner, "p", 1, OBJ, NULL, &r), MC_OK);
    struct mc_get_result g;
    assert_int_equal(get(f, "p", &g), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(stats(f).attempts, 0);
    check_funnel(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_off),
        cmocka_unit_test_setup_teardown(test_memory_keys_never_promote, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_threshold_and_commit, fx_setup, fx_teardown),
        cmocka_unit_test(test_batch_get_promotes),
        cmocka_unit_test_setup_teardown(test_windowed_batch_and_admin_never, fx_setup_threshold1,
                                        fx_teardown),
        cmocka_unit_test(test_batch_threshold),
        cmocka_unit_test(test_batch_threshold_windowed),
        cmocka_unit_test(test_batch_threshold_zero_and_clamp),
        cmocka_unit_test(test_watermark_gate_records_candidate),
        cmocka_unit_test(test_cap_same_shard_success),
        cmocka_unit_test(test_cap_cross_shard_failure),
        cmocka_unit_test(test_threshold_clamped),
        cmocka_unit_test_setup_teardown(test_put_in_flight_blocks, fx_setup_threshold1,
                                        fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
