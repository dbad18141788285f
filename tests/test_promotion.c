/*
 * test_promotion.c - promotion on hit (src/master/promotion.h) driven through the core API on a
 * fake clock with manual ticks: the trigger and its gates (sketch, watermark, re-check, cap),
 * the holder's heartbeat / AllocStart / success / failure, the reaper, cancellation by Remove,
 * RemoveAll, BatchRemove, holder expiry, disk eviction of the source, retry candidates, hot beats
 * cold, the metrics; racing readers with threads (TSan label). After every scenario the funnel
 * invariant is checked against the real state: admitted = completed + failed + expired +
 * cancelled + in_flight, and in_flight = task records = pins = promotion tasks in the mailboxes.
 *
 * The holder registers its LOCAL_DISK segment (MountLocalDiskSegment, offloading off so no
 * offload task pins anything); a disk copy is attached the way a holder's start-up scan attaches
 * one (NotifyOffloadSuccess, re-registration of the same version), and a LOCAL_DISK-only object
 * is such an object whose MEMORY replica was then evicted (dropped under its shard lock).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"
#include "common/metrics.h"
#include "master/eviction.h"
#include "master/lock_order.h"
#include "master/mailbox.h"
#include "master/freelist.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/promotion.h"
#include "master/promotion_core.h"
#include "master/shard.h"
#include "test_master_util.h"

#define T0_MS 1000000ull
#define TTL_MS 1000ull
#define OBJ 4096ull

struct fx {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id owner;  /* the client that Puts */
    struct mc_id holder; /* the LOCAL_DISK holder */
    struct mc_id other;  /* a third client */
};

static void cfg_defaults(struct mc_master_config *c)
{
    mc_master_config_init(c);
    c->manual_ticks = true;
    c->epoch = 5;
    c->default_kv_lease_ttl_ms = TTL_MS;
    c->eviction_threads = 1;
    c->enable_offload = true;
    c->promotion_on_hit = true;
}

/* A master with cfg (clock set here); the holder mounts seg 1 (holder_seg bytes, 0: none), the
 * other client seg 2 (other_seg bytes), and the holder's mailbox is opened. */
static struct fx *fx_new_cfg(struct mc_master_config *c, uint64_t holder_seg, uint64_t other_seg)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, T0_MS * 1000000ull);
    c->clock = &f->fc.clock;
    assert_int_equal(mc_master_new(c, &f->m), MC_OK);
    f->owner = tm_id(1);
    f->holder = tm_id(2);
    f->other = tm_id(3);
    if (holder_seg) {
        struct mc_segment_desc s = tm_seg(1, holder_seg);
        assert_int_equal(mc_master_mount_segment(f->m, f->holder, &s, NULL), MC_OK);
    }
    if (other_seg) {
        struct mc_segment_desc s = tm_seg(2, other_seg);
        assert_int_equal(mc_master_mount_segment(f->m, f->other, &s, NULL), MC_OK);
    }
    assert_int_equal(
        mc_master_mount_local_disk(f->m, f->holder, "10.0.0.2:17002", 1ull << 30, false), MC_OK);
    return f;
}

static struct fx *fx_new(void)
{
    struct mc_master_config c;
    cfg_defaults(&c);
    return fx_new_cfg(&c, 16 * MIB, 16 * MIB);
}

static void fx_free(struct fx *f)
{
    assert_int_equal(mc_lo_depth(), 0);
    mc_master_free(f->m);
    free(f);
}

/* Per-test fixtures (cmocka): the default master, or one that admits at the first Get with
 * only the holder's 16 MiB segment; freed by the teardown even when the test fails. */
static int fx_setup(void **state)
{
    *state = fx_new();
    return 0;
}

static int fx_setup_threshold1(void **state)
{
    struct mc_master_config c;
    cfg_defaults(&c);
    c.promotion_admission_threshold = 1;
    c.promotion_batch_admission_threshold = 1; /* BatchGets of several keys too */
    *state = fx_new_cfg(&c, 16 * MIB, 0);
    return 0;
}

static int fx_teardown(void **state)
{
    fx_free(*state);
    return 0;
}

static void advance(struct fx *f, uint64_t ms)
{
    mc_fake_clock_advance_ms(&f->fc, ms);
}

static const char *key(const char *p, int i)
{
    static _Thread_local char buf[8][64]; /* per thread: the churn test's threads use it */
    static _Thread_local int slot;
    char *b = buf[slot++ & 7];
    snprintf(b, 64, "%s-%04d", p, i);
    return b;
}

static void put_n(struct fx *f, const char *k, uint64_t size, uint32_t nrep)
{
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.replica_num = nrep;
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->owner, k, strlen(k), size, &c, &r), MC_OK);
    assert_int_equal(r.nreplicas, nrep);
    assert_int_equal(mc_master_put_end(f->m, f->owner, k, strlen(k), r.version, 0x77, true), MC_OK);
}

/* The holder reports its disk copy of k (same version, size, CRC): a LOCAL_DISK replica. */
static void add_disk_copy(struct fx *f, const char *k)
{
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, k, strlen(k), &ki), MC_OK);
    struct mc_offload_result it = {.key = k,
                                   .key_len = strlen(k),
                                   .size = ki.size,
                                   .version = ki.version,
                                   .crc32c = ki.crc32c,
                                   .crc_valid = ki.has_crc};
    int rc = -1;
    assert_int_equal(mc_master_notify_offload(f->m, f->holder, &it, 1, true, &rc), MC_OK);
    assert_int_equal(rc, MC_OK);
}

/* k's MEMORY replicas are evicted (k keeps its disk copy). */
static void drop_memory(struct fx *f, const char *k)
{
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    struct mc_shard *s;
    struct mc_object *o =
        mc_master_lock_find(f->m, mc_hash_key(k, strlen(k)), k, strlen(k), true, &s);
    assert_non_null(o);
    assert_true(mc_master_evict_memory(f->m, s, o, &fl, NULL) > 0);
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
}

static void disk_only(struct fx *f, const char *k, uint64_t size)
{
    put_n(f, k, size, 1);
    add_disk_copy(f, k);
    drop_memory(f, k);
}

static int get(struct fx *f, const char *k, struct mc_get_result *g)
{
    return mc_master_get_replica_list(f->m, k, strlen(k), g);
}

static void get_n(struct fx *f, const char *k, int n)
{
    struct mc_get_result g;
    for (int i = 0; i < n; i++)
        assert_int_equal(get(f, k, &g), MC_OK);
}

static struct mc_promotion_stats stats(struct fx *f)
{
    struct mc_promotion_stats st;
    mc_master_promotion_stats(f->m, &st);
    return st;
}

/* The funnel invariant and the real state behind in_flight. */
static void check_funnel(struct fx *f)
{
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.admitted,
                     st.completed + st.failed + st.expired + st.cancelled + st.in_flight);
    assert_int_equal(st.candidate_recorded,
                     st.candidate_admitted + st.candidate_dropped + st.candidates);
    struct mc_promotion_debug d;
    mc_master_promotion_debug_counts(f->m, &d);
    assert_int_equal(d.in_flight, st.in_flight);
    assert_int_equal(d.tasks, d.in_flight);
    assert_int_equal(d.pins, d.in_flight);
    assert_int_equal(d.mailbox_tasks, d.in_flight);
    assert_true(d.staged <= d.in_flight);
    assert_int_equal(d.parked, st.parked);
    assert_int_equal(mc_lo_depth(), 0);
}

/* Heartbeat answers collected (wait 0 unless parked explicitly). */
struct hb {
    int calls;
    size_t n;
    uint64_t ids[64];
    uint64_t sizes[64];
    uint64_t versions[64];
    char keys[64][64];
};

static void on_hb(void *arg, struct mc_task_list *tasks)
{
    struct hb *h = arg;
    h->calls++;
    for (struct mc_task *t = tasks->head; t; t = t->next) {
        assert_true(h->n < 64);
        assert_int_equal(t->kind, MC_TASK_PROMOTION);
        h->ids[h->n] = t->task_id;
        h->sizes[h->n] = t->size;
        h->versions[h->n] = t->version;
        snprintf(h->keys[h->n], sizeof(h->keys[h->n]), "%s", t->key);
        h->n++;
    }
    mc_task_list_free(tasks);
}

static size_t pull(struct fx *f, uint32_t max, struct hb *h)
{
    memset(h, 0, sizeof(*h));
    assert_int_equal(mc_master_promotion_heartbeat(f->m, f->holder, max, 0, on_hb, h), 1);
    assert_int_equal(h->calls, 1);
    return h->n;
}

static int alloc_start(struct fx *f, struct mc_id who, uint64_t id, const char *k, uint64_t size,
                       struct mc_replica_desc *d)
{
    return mc_master_promotion_alloc_start(f->m, who, id, k, strlen(k), size, NULL, 0, d);
}

static int success(struct fx *f, struct mc_id who, uint64_t id, const char *k)
{
    return mc_master_promotion_success(f->m, who, id, k, strlen(k));
}

static int failure(struct fx *f, struct mc_id who, uint64_t id, const char *k)
{
    return mc_master_promotion_failure(f->m, who, id, k, strlen(k), MC_ERR_INTERNAL_ERROR);
}

/* Pull every task, stage and commit each (what the holder's worker does). */
static size_t promote_all(struct fx *f)
{
    struct hb h;
    size_t done = 0;
    while (pull(f, 0, &h) > 0) {
        for (size_t i = 0; i < h.n; i++) {
            struct mc_replica_desc d;
            assert_int_equal(alloc_start(f, f->holder, h.ids[i], h.keys[i], h.sizes[i], &d), MC_OK);
            assert_int_equal(success(f, f->holder, h.ids[i], h.keys[i]), MC_OK);
            done++;
        }
    }
    return done;
}

static unsigned mem_replicas(struct fx *f, const char *k, unsigned *processing)
{
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, k, strlen(k), &ki), MC_OK);
    unsigned n = 0, p = 0;
    for (uint32_t i = 0; i < ki.nreplicas; i++) {
        if (ki.replicas[i].type != MC_REPLICA_TYPE_MEMORY)
            continue;
        if (ki.replicas[i].status == MC_REPLICA_STATUS_COMPLETE)
            n++;
        else
            p++;
    }
    if (processing)
        *processing = p;
    return n;
}

static bool lists_memory(struct fx *f, const char *k)
{
    struct mc_get_result g;
    assert_int_equal(get(f, k, &g), MC_OK);
    for (uint32_t i = 0; i < g.nreplicas; i++)
        if (g.replicas[i].type == MC_REPLICA_TYPE_MEMORY)
            return true;
    return false;
}

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

/* ---- holder side --------------------------------------------------------------------------- */

static uint64_t admit_one(struct fx *f, const char *k)
{
    disk_only(f, k, OBJ);
    get_n(f, k, 2);
    struct hb h;
    assert_int_equal(pull(f, 1, &h), 1);
    assert_string_equal(h.keys[0], k);
    return h.ids[0];
}

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

/* ---- racing readers ------------------------------------------------------------------------ */

struct racer {
    struct fx *f;
    pthread_barrier_t *bar;
    int rounds;
};

static void *race_main(void *arg)
{
    struct racer *r = arg;
    pthread_barrier_wait(r->bar);
    struct mc_get_result g;
    for (int i = 0; i < r->rounds; i++) {
        int rc = mc_master_get_replica_list(r->f->m, "hot", 3, &g);
        if (rc != MC_OK)
            abort();
        struct mc_key_ref k = {"hot", 3};
        int rcs;
        if (mc_master_batch_get_replica_list(r->f->m, &k, 1, &g, &rcs) != MC_OK || rcs != MC_OK)
            abort();
    }
    return NULL;
}

static void test_racing_readers_one_task(void **state)
{
    struct fx *f = *state;
    disk_only(f, "hot", OBJ);
    enum { NT = 4 };
    pthread_t th[NT];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT);
    struct racer r = {.f = f, .bar = &bar, .rounds = 200};
    for (int i = 0; i < NT; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_main, &r), 0);
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.attempts, NT * 200 * 2);
    assert_int_equal(st.admitted, 1);
    struct mc_promotion_debug dbg;
    mc_master_promotion_debug_counts(f->m, &dbg);
    assert_int_equal(dbg.tasks, 1);
    assert_int_equal(dbg.pins, 1);
    check_funnel(f);
    assert_int_equal(promote_all(f), 1);
    check_funnel(f);
}

/* Readers, the holder's worker and a remover at once (TSan): every task ends exactly once and
 * the funnel matches the state afterwards. The overlap is made, not hoped for: the readers keep
 * reading until the holder has ended CHURN_OVERLAP tasks (a bound on rounds only stops a stuck
 * holder from hanging the test), whatever the machine's speed. */
#define CHURN_OVERLAP 10
#define CHURN_MAX_ROUNDS 200000

struct churn {
    struct fx *f;
    _Atomic bool stop;
    _Atomic int done;
    _Atomic int ended;        /* tasks the holder reported (success or failure) */
    _Atomic int ended_by_end; /* ended while a reader still read (seen by the last reader) */
};

static void *churn_reader(void *arg)
{
    struct churn *c = arg;
    struct mc_get_result g;
    for (int r = 0; r < CHURN_MAX_ROUNDS && atomic_load(&c->ended) < CHURN_OVERLAP; r++)
        for (int i = 0; i < 40; i++) {
            const char *k = key("c", i);
            (void)mc_master_get_replica_list(c->f->m, k, strlen(k), &g);
        }
    int seen = atomic_load(&c->ended);
    if (atomic_fetch_add(&c->done, 1) == 0)
        atomic_store(&c->ended_by_end, seen); /* the first reader to finish */
    return NULL;
}

static void *churn_holder(void *arg)
{
    struct churn *c = arg;
    struct fx *f = c->f;
    struct hb h;
    while (!atomic_load(&c->stop)) {
        memset(&h, 0, sizeof(h));
        if (mc_master_promotion_heartbeat(f->m, f->holder, 8, 0, on_hb, &h) != 1)
            abort();
        for (size_t i = 0; i < h.n; i++) {
            struct mc_replica_desc d;
            int rc = mc_master_promotion_alloc_start(f->m, f->holder, h.ids[i], h.keys[i],
                                                     strlen(h.keys[i]), h.sizes[i], NULL, 0, &d);
            if (rc == MC_OK && (h.ids[i] & 1))
                rc = mc_master_promotion_success(f->m, f->holder, h.ids[i], h.keys[i],
                                                 strlen(h.keys[i]));
            else
                rc = mc_master_promotion_failure(f->m, f->holder, h.ids[i], h.keys[i],
                                                 strlen(h.keys[i]), rc);
            (void)rc;
            atomic_fetch_add(&c->ended, 1);
        }
    }
    return NULL;
}

static void *churn_remover(void *arg)
{
    struct churn *c = arg;
    for (int i = 0; i < 40; i += 3) {
        const char *k = key("c", i);
        (void)mc_master_remove(c->f->m, k, strlen(k), true);
    }
    return NULL;
}

static void test_concurrent_churn(void **state)
{
    struct fx *f = *state;
    for (int i = 0; i < 40; i++)
        disk_only(f, key("c", i), OBJ);
    struct churn c = {.f = f};
    pthread_t rd[3], ho, rm;
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&rd[i], NULL, churn_reader, &c), 0);
    assert_int_equal(pthread_create(&ho, NULL, churn_holder, &c), 0);
    assert_int_equal(pthread_create(&rm, NULL, churn_remover, &c), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(rd[i], NULL);
    pthread_join(rm, NULL);
    atomic_store(&c.stop, true);
    pthread_join(ho, NULL);
    /* the holder ended tasks while every reader was still reading */
    assert_true(atomic_load(&c.ended_by_end) >= CHURN_OVERLAP);
    /* what is left: failed by the holder */
    struct hb h;
    while (pull(f, 0, &h) > 0)
        for (size_t i = 0; i < h.n; i++)
            assert_int_equal(failure(f, f->holder, h.ids[i], h.keys[i]), MC_OK);
    struct mc_promotion_stats st = stats(f);
    assert_true(st.admitted > 0);
    assert_int_equal(st.in_flight, 0);
    check_funnel(f);
}

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
        cmocka_unit_test_setup_teardown(test_non_holder_size_and_stale_refused, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_put_end_cannot_complete_staged, fx_setup, fx_teardown),
        cmocka_unit_test(test_staged_placement),
        cmocka_unit_test(test_max_per_heartbeat_leftovers),
        cmocka_unit_test_setup_teardown(test_heartbeat_long_poll, fx_setup_threshold1, fx_teardown),
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
        cmocka_unit_test(test_parked_range_not_reused),
        cmocka_unit_test_setup_teardown(test_parked_freed_on_unmount, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_parked_freed_on_expiry, fx_setup, fx_teardown),
        cmocka_unit_test(test_parked_counts_to_cap),
        cmocka_unit_test_setup_teardown(test_remount_cancels_tasks, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_racing_readers_one_task, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_churn, fx_setup, fx_teardown),
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
