/*
 * test_admission.c - the promotion admission gate at scale (src/master/sketch.c, the gates of
 * src/master/promotion.c): the doorkeeper + sketch estimate distribution, one-shot disk reads
 * against a full DRAM (not admitted, nothing evicted for them), keys read repeatedly still
 * admitted, DRAM reads counted, and hot beats cold both ways (eviction is asked for room only
 * for a candidate hotter than the last eviction victims).
 *
 * Core test style: the master library on a fake clock with manual ticks, no sleeps; the holder's
 * side is played by the test (heartbeat, AllocStart, success), as in test_promotion_*.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"
#include "master/eviction.h"
#include "master/freelist.h"
#include "master/lock_order.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/offload.h"
#include "master/promotion.h"
#include "master/promotion_core.h"
#include "master/shard.h"
#include "master/sketch.h"
#include "test_master_util.h"

#define T0_MS 1000000ull
#define TTL_MS 1000ull
#define OBJ 4096ull

/* ---- the sketch alone ----------------------------------------------------------------------- */

static uint64_t kh(const char *p, uint32_t i)
{
    char b[64];
    int n = snprintf(b, sizeof(b), "%s-%u", p, i);
    return mc_hash_key(b, (size_t)n);
}

/* Estimates at scale: a background of repeated keys, then one-shot keys. A key read once must
 * estimate 1 (<= 1 % of them more, i.e. doorkeeper false positives and full collisions), a key
 * read k times at least k, and aging forgets a single read. */
static void test_sketch_estimate_distribution(void **state)
{
    (void)state;
    struct mc_sketch *s = malloc(sizeof(*s));
    assert_non_null(s);
    mc_sketch_init(s);
    /* 20,000 keys read 4 times each (80,000 reads), interleaved */
    for (uint32_t r = 0; r < 4; r++)
        for (uint32_t i = 0; i < 20000; i++)
            assert_true(mc_sketch_increment(s, kh("warm", i)) >= r + 1);
    uint32_t hist[8] = {0};
    for (uint32_t i = 0; i < 20000; i++) {
        uint32_t e = mc_sketch_estimate(s, kh("warm", i));
        assert_true(e >= 4); /* never below the truth */
        hist[e < 7 ? e : 7]++;
    }
    assert_true(hist[4] >= 19000); /* and mostly exact */
    /* 100,000 distinct one-shot reads (180,000 reads in all: one sample, no aging yet) */
    uint32_t one[4] = {0};
    for (uint32_t i = 0; i < 100000; i++) {
        uint32_t e = mc_sketch_increment(s, kh("once", i));
        one[e < 3 ? e : 3]++;
    }
    assert_int_equal(mc_sketch_agings(s), 0);
    assert_int_equal(one[0], 0);
    print_message("one-shot estimates: 1: %u, 2: %u, >2: %u\n", one[1], one[2], one[3]);
    assert_true(one[2] + one[3] <= 1000); /* <= 1 % estimate 2 or more */
    /* a second read of a key read once estimates 2 (the threshold's "read twice") */
    for (uint32_t i = 0; i < 1000; i++)
        assert_true(mc_sketch_increment(s, kh("once", i)) >= 2);
    /* aging: the doorkeeper is cleared and the counters halved */
    uint32_t before = mc_sketch_estimate(s, kh("warm", 7));
    mc_sketch_age(s);
    assert_int_equal(mc_sketch_agings(s), 1);
    assert_int_equal(mc_sketch_estimate(s, kh("warm", 7)), (before - 1) / 2);
    uint32_t gone = 0;
    for (uint32_t i = 5000; i < 10000; i++)
        gone += mc_sketch_estimate(s, kh("once", i)) == 0;
    assert_true(gone >= 4950); /* a single read is forgotten */
    /* a full sample of reads ages by itself */
    uint64_t n = MC_SKETCH_SAMPLE;
    for (uint64_t i = 0; i < n; i++)
        (void)mc_sketch_increment(s, kh("fill", (uint32_t)i));
    assert_int_equal(mc_sketch_agings(s), 2);
    free(s);
}

/* ---- the gate in the master --------------------------------------------------------------- */

struct fx {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id owner, holder, other;
};

/* A master whose DRAM is one segment of dram_objs objects of OBJ bytes, the disk holder's own
 * (staged promotion copies go to the holder's own DRAM), and the holder's LOCAL_DISK segment. */
static struct fx *fx_new(uint32_t dram_objs, uint32_t threshold)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, T0_MS * 1000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.manual_ticks = true;
    c.epoch = 5;
    c.default_kv_lease_ttl_ms = TTL_MS;
    c.eviction_threads = 1;
    c.enable_offload = true;
    c.promotion_on_hit = true;
    c.promotion_admission_threshold = threshold;
    c.eviction_high_watermark_ratio = 0.9;
    c.clock = &f->fc.clock;
    assert_int_equal(mc_master_new(&c, &f->m), MC_OK);
    f->owner = tm_id(1);
    f->holder = tm_id(2);
    f->other = tm_id(3);
    struct mc_segment_desc sd = tm_seg(2, (uint64_t)dram_objs * OBJ);
    assert_int_equal(mc_master_mount_segment(f->m, f->holder, &sd, NULL), MC_OK);
    assert_int_equal(
        mc_master_mount_local_disk(f->m, f->holder, "10.0.0.2:17002", 1ull << 30, false), MC_OK);
    return f;
}

static void fx_free(struct fx *f)
{
    assert_int_equal(mc_lo_depth(), 0);
    mc_master_free(f->m);
    free(f);
}

static void advance(struct fx *f, uint64_t ms)
{
    mc_fake_clock_advance_ms(&f->fc, ms);
}

static const char *key(const char *p, int i)
{
    static char buf[8][64];
    static int slot;
    char *b = buf[slot++ & 7];
    snprintf(b, 64, "%s-%05d", p, i);
    return b;
}

static void put(struct fx *f, const char *k)
{
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.replica_num = 1;
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->owner, k, strlen(k), OBJ, &c, &r), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->owner, k, strlen(k), r.version, 0x77, true), MC_OK);
}

/* k Put, given the holder's disk copy, then its DRAM copy evicted: a LOCAL_DISK-only key. */
static void disk_only(struct fx *f, const char *k)
{
    put(f, k);
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

static void get(struct fx *f, const char *k)
{
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, k, strlen(k), &g), MC_OK);
}

static struct mc_promotion_stats stats(struct fx *f)
{
    struct mc_promotion_stats st;
    mc_master_promotion_stats(f->m, &st);
    return st;
}

static uint64_t evicted(struct fx *f)
{
    return atomic_load(&f->m->c.evicted_key_count);
}

struct hb {
    size_t n;
    uint64_t ids[256], sizes[256];
    char keys[256][64];
};

static void on_hb(void *arg, struct mc_task_list *tasks)
{
    struct hb *h = arg;
    for (struct mc_task *t = tasks->head; t; t = t->next) {
        assert_true(h->n < 256);
        h->ids[h->n] = t->task_id;
        h->sizes[h->n] = t->size;
        snprintf(h->keys[h->n], sizeof(h->keys[h->n]), "%s", t->key);
        h->n++;
    }
    mc_task_list_free(tasks);
}

/* The holder's worker: every task pulled, staged and committed. */
static size_t promote_all(struct fx *f)
{
    size_t done = 0;
    static struct hb h;
    for (;;) {
        memset(&h, 0, sizeof(h));
        assert_int_equal(mc_master_promotion_heartbeat(f->m, f->holder, 0, 0, on_hb, &h), 1);
        if (h.n == 0)
            return done;
        for (size_t i = 0; i < h.n; i++) {
            struct mc_replica_desc d;
            const char *k = h.keys[i];
            int rc = mc_master_promotion_alloc_start(f->m, f->holder, h.ids[i], k, strlen(k),
                                                     h.sizes[i], NULL, 0, &d);
            if (rc != MC_OK) { /* no room left now: the holder gives up on the task */
                assert_int_equal(
                    mc_master_promotion_failure(f->m, f->holder, h.ids[i], k, strlen(k), rc),
                    MC_OK);
                continue;
            }
            assert_int_equal(mc_master_promotion_success(f->m, f->holder, h.ids[i], k, strlen(k)),
                             MC_OK);
            done++;
        }
    }
}

static bool in_memory(struct fx *f, const char *k)
{
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, k, strlen(k), &ki), MC_OK);
    for (uint32_t i = 0; i < ki.nreplicas; i++)
        if (ki.replicas[i].type == MC_REPLICA_TYPE_MEMORY &&
            ki.replicas[i].status == MC_REPLICA_STATUS_COMPLETE)
            return true;
    return false;
}

/* One 10 ms eviction tick and the holder's work. */
static void tick(struct fx *f)
{
    advance(f, 10);
    mc_master_tick_eviction(f->m);
    promote_all(f);
}

#define ONE_SHOT 30000
#define HOT 300

/* DRAM of 1,000 objects at its watermark with once-read objects; 30,000 distinct disk-only keys
 * read once each, and among them 300 keys read twice (the default threshold), the two reads
 * 3,000 reads apart, with the eviction tick and the holder running every 50 reads (10 ms). At
 * most 5 % of the one-shot keys may pass the frequency gate (the saturated sketch passed almost
 * all), and only a few DRAM objects may be evicted for them; every twice-read key passes and is
 * promoted. */
static void test_one_shot_reads_not_admitted(void **state)
{
    (void)state;
    struct fx *f = fx_new(1000, 2);
    for (int i = 0; i < ONE_SHOT; i++)
        disk_only(f, key("once", i));
    for (int i = 0; i < HOT; i++)
        disk_only(f, key("hot", i));
    for (int i = 0; i < 900; i++) /* DRAM at the watermark, each object read once */
        put(f, key("dram", i));
    for (int i = 0; i < 900; i++)
        get(f, key("dram", i));
    advance(f, TTL_MS + 1); /* leases over: all evictable */
    uint64_t ev0 = evicted(f);
    int once_passed = 0, hot_passed = 0, hot_reads = 0;
    for (int i = 0; i < ONE_SHOT; i++) {
        uint64_t rf = stats(f).rejected_frequency;
        get(f, key("once", i));
        once_passed += stats(f).rejected_frequency == rf;
        /* hot key j is read at i = 10 j + 7 and again 3,000 reads later */
        int j = -1;
        if (i % 10 == 7 && i / 10 < HOT)
            j = i / 10;
        else if (i >= 3000 && (i - 3000) % 10 == 7 && (i - 3000) / 10 < HOT)
            j = (i - 3000) / 10;
        if (j >= 0) {
            rf = stats(f).rejected_frequency;
            get(f, key("hot", j));
            bool passed = stats(f).rejected_frequency == rf;
            hot_reads++;
            hot_passed += passed;
            if (i >= 3000)
                assert_true(passed); /* the second read of a key reaches threshold 2 */
        }
        if (i % 50 == 49)
            tick(f);
    }
    assert_int_equal(hot_reads, 2 * HOT);
    for (int t = 0; t < 300; t++) /* 3 s more: the retries of the candidates */
        tick(f);
    struct mc_promotion_stats st = stats(f);
    int hot_in_dram = 0, once_in_dram = 0;
    for (int i = 0; i < HOT; i++)
        hot_in_dram += in_memory(f, key("hot", i));
    for (int i = 0; i < ONE_SHOT; i++)
        once_in_dram += in_memory(f, key("once", i));
    uint64_t ev = evicted(f) - ev0;
    print_message("one-shot passed %d admitted-in-DRAM %d; hot passed %d in DRAM %d; admitted %llu "
                  "evicted %llu room asked %llu declined %llu\n",
                  once_passed, once_in_dram, hot_passed, hot_in_dram,
                  (unsigned long long)st.admitted, (unsigned long long)ev,
                  (unsigned long long)st.room_asked, (unsigned long long)st.room_declined);
    assert_true(once_passed <= ONE_SHOT / 20);
    assert_true(once_in_dram <= ONE_SHOT / 20);
    assert_true(st.admitted <= (uint64_t)HOT + ONE_SHOT / 20);
    /* each admission displaces about one object; a one-shot flood displaced ~17,000 */
    assert_true(ev <= (uint64_t)HOT + ONE_SHOT / 20 + 100);
    assert_int_equal(hot_passed, HOT); /* the second reads, every one */
    assert_true(hot_in_dram >= HOT * 95 / 100);
    fx_free(f);
}

/* Reads answered from DRAM count in the sketch, through Get and BatchGet. */
static void test_dram_reads_counted(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 2);
    put(f, "a");
    put(f, "b");
    struct mc_shard *s;
    struct mc_object *o = mc_master_lock_find(f->m, mc_hash_key("a", 1), "a", 1, false, &s);
    assert_int_equal(mc_promotion_victim_estimate(f->m, o), 0);
    mc_shard_unlock(s);
    get(f, "a");
    get(f, "a");
    struct mc_key_ref keys[2] = {{"a", 1}, {"b", 1}};
    struct mc_get_result out[2];
    int rcs[2];
    assert_int_equal(mc_master_batch_get_replica_list(f->m, keys, 2, out, rcs), MC_OK);
    assert_int_equal(rcs[0], MC_OK);
    o = mc_master_lock_find(f->m, mc_hash_key("a", 1), "a", 1, false, &s);
    assert_int_equal(mc_promotion_victim_estimate(f->m, o), 3);
    mc_shard_unlock(s);
    o = mc_master_lock_find(f->m, mc_hash_key("b", 1), "b", 1, false, &s);
    assert_int_equal(mc_promotion_victim_estimate(f->m, o), 1);
    mc_shard_unlock(s);
    fx_free(f);
}

/* Hot beats cold, both ways. DRAM holds objects read 4 times each; an eviction cycle evicts some
 * of them (the victims' level: 4). A disk-only key read 3 times is refused at the watermark and
 * does NOT ask eviction for room: nothing is evicted for it, it stays on disk. A key read 5 times
 * does ask, and is promoted over them. */
static void test_hot_beats_cold_both_ways(void **state)
{
    (void)state;
    struct fx *f = fx_new(100, 2);
    disk_only(f, "lukewarm");
    disk_only(f, "hotter");
    for (int i = 0; i < 95; i++)
        put(f, key("warm", i));
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 95; i++)
            get(f, key("warm", i));
    advance(f, TTL_MS + 1);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 0.05, 0.05, &es), MC_OK);
    assert_int_equal(es.evicted, 5);                        /* the victims: read 4 times each */
    assert_true(mc_segments_used_ratio(f->m->segs) >= 0.9); /* 90 of 100: at the watermark */
    uint64_t ev0 = evicted(f);

    for (int r = 0; r < 3; r++)
        get(f, "lukewarm");
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.rejected_watermark, 2); /* reads 2 and 3 passed the frequency gate */
    assert_int_equal(st.room_declined, 2);
    assert_int_equal(st.room_asked, 0);
    assert_false(atomic_load(&f->m->need_eviction));
    for (int t = 0; t < 100; t++) /* 1 s: the candidate's retries ask nothing either */
        tick(f);
    assert_int_equal(evicted(f), ev0);
    assert_int_equal(stats(f).admitted, 0);
    assert_false(in_memory(f, "lukewarm"));

    for (int r = 0; r < 5; r++)
        get(f, "hotter");
    st = stats(f);
    assert_true(st.room_asked >= 1); /* read 5: 5 > 4 */
    for (int t = 0; t < 100 && !in_memory(f, "hotter"); t++)
        tick(f);
    assert_true(in_memory(f, "hotter"));
    assert_true(evicted(f) > ev0);
    fx_free(f);
}

/* ---- queue bounds: each task kind its own --------------------------------------------------- */

/* --offloading_queue_limit bounds offload tasks only: with it at 2, five promotions of one
 * holder are all queued (promotion_queue_limit bounds them), and deletes have their own
 * --delete_queue_limit. */
static void test_queue_bounds_per_kind(void **state)
{
    (void)state;
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, T0_MS * 1000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    assert_int_equal(c.delete_queue_limit, 1000000); /* the default: generous */
    c.manual_ticks = true;
    c.epoch = 5;
    c.default_kv_lease_ttl_ms = TTL_MS;
    c.eviction_threads = 1;
    c.enable_offload = true;
    c.promotion_on_hit = true;
    c.promotion_admission_threshold = 1;
    c.offloading_queue_limit = 2;
    c.delete_queue_limit = 3;
    c.clock = &f->fc.clock;
    assert_int_equal(mc_master_new(&c, &f->m), MC_OK);
    f->owner = tm_id(1);
    f->holder = tm_id(2);
    struct mc_segment_desc sd = tm_seg(1, 100 * OBJ); /* the holder's own DRAM */
    assert_int_equal(mc_master_mount_segment(f->m, f->holder, &sd, NULL), MC_OK);
    assert_int_equal(
        mc_master_mount_local_disk(f->m, f->holder, "10.0.0.2:17002", 1ull << 30, false), MC_OK);
    for (int i = 0; i < 5; i++)
        disk_only(f, key("p", i));
    for (int i = 0; i < 5; i++)
        get(f, key("p", i));
    struct mc_promotion_stats st = stats(f);
    assert_int_equal(st.admitted, 5);
    assert_int_equal(st.cancelled, 0);
    assert_int_equal(st.in_flight, 5);
    assert_int_equal(promote_all(f), 5);
    struct mc_mailboxes *mb = mc_offload_mailboxes(f->m);
    assert_non_null(mb);
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            mc_mailbox_push(mb, f->holder, MC_TASK_DELETE, key("d", i), 7, 1, 0, 0, false, 0, NULL),
            MC_OK);
    assert_int_equal(
        mc_mailbox_push(mb, f->holder, MC_TASK_DELETE, "d-00003", 7, 1, 0, 0, false, 0, NULL),
        MC_ERR_TASK_PENDING_LIMIT_EXCEEDED);
    for (int i = 0; i < 2; i++)
        assert_int_equal(mc_mailbox_push(mb, f->holder, MC_TASK_OFFLOAD, key("o", i), 7, 1, 0, 0,
                                         false, 0, NULL),
                         MC_OK);
    assert_int_equal(
        mc_mailbox_push(mb, f->holder, MC_TASK_OFFLOAD, "o-00002", 7, 1, 0, 0, false, 0, NULL),
        MC_ERR_TASK_PENDING_LIMIT_EXCEEDED);
    struct mc_mailbox_stats ms;
    mc_mailboxes_stats(mb, &ms);
    assert_int_equal(ms.refused_kind[MC_TASK_DELETE], 1);
    assert_int_equal(ms.refused_kind[MC_TASK_OFFLOAD], 1);
    assert_int_equal(ms.refused_kind[MC_TASK_PROMOTION], 0);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sketch_estimate_distribution),
        cmocka_unit_test(test_dram_reads_counted),
        cmocka_unit_test(test_hot_beats_cold_both_ways),
        cmocka_unit_test(test_one_shot_reads_not_admitted),
        cmocka_unit_test(test_queue_bounds_per_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
