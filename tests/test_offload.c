/*
 * test_offload.c - the master half of the LOCAL_DISK tier (src/master/offload.c), driven
 * through master.h with a fake clock and manual ticks, no sleeps.
 *
 * Modes are named by their flags: enable_offload (queue at PutEnd), offload_on_evict (queue when
 * eviction picks the object), offload_force_evict (evict without offload past the per-cycle
 * cap). Covers upstream's offload-on-evict scenarios that apply (no Upsert, no tenants) and the
 * version rules of DESIGN.md §11: a stale completion never attaches, Remove -> re-Put -> late
 * completion of the old version never attaches, re-registration recreates an absent object only
 * after a master restart; plus long-polls (answered on arrival, at the deadline, never before),
 * task expiry, cancellation by Remove/BatchRemove/RemoveAll and holder expiry (nothing left in
 * any mailbox), deletes pushed to holders, disk-only objects readable and never evictable DRAM.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/metrics.h"
#include "master/eviction.h"
#include "master/lock_order.h"
#include "master/master.h"
#include "mooncake/errors.h"
#include "test_heartbeat_util.h"
#include "offload_fixture.h"
#include "test_master_util.h"

#define T0_MS OF_T0_MS
#define RELEASE_MS 600000ull
#define TTL_MS 10000ull

/* ---- fixture -------------------------------------------------------------------------------- */

struct fx {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id a, b; /* a: holder with a DRAM segment; b: a plain client */
};

enum { MODE_PUT_END = 0, MODE_ON_EVICT = 1, MODE_FORCE = 2, MODE_FORCE_ALONE = 3, MODE_OFF = 4 };

static struct mc_master_config fx_config(struct fx *f, int mode)
{
    struct mc_master_config c = of_config(&f->fc, NULL, 7, TTL_MS, RELEASE_MS);
    c.enable_offload = mode != MODE_OFF;
    c.offload_on_evict = mode == MODE_ON_EVICT || mode == MODE_FORCE;
    c.offload_force_evict = mode == MODE_FORCE || mode == MODE_FORCE_ALONE;
    return c;
}

/* A master in mode, client a with a seg_size DRAM segment and (disk) a LOCAL_DISK mount. */
static struct fx *fx_new_cfg(int mode, uint64_t seg_size, bool disk, uint32_t queue_limit)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, T0_MS * 1000000ull);
    struct mc_master_config c = fx_config(f, mode);
    if (queue_limit)
        c.offloading_queue_limit = queue_limit;
    f->m = of_master(&c);
    f->a = tm_id(1);
    f->b = tm_id(2);
    of_mount_holder(f->m, f->a, seg_size, disk);
    return f;
}

static struct fx *fx_new(int mode)
{
    return fx_new_cfg(mode, 64 * MIB, true, 0);
}

static void fx_free(struct fx *f)
{
    of_free(f->m);
    free(f);
}

/* PutStart + PutEnd by a, on a's segment seg-1 (crc = size ^ 0x5a). */
/* Per-test fixture (cmocka): the enable_offload master most scenarios start from, freed by the
 * teardown even when the test fails. */
static int fx_setup(void **state)
{
    *state = fx_new(MODE_PUT_END);
    return 0;
}

static int fx_teardown(void **state)
{
    fx_free(*state);
    return 0;
}

static uint64_t put(struct fx *f, const char *key, uint64_t size)
{
    return of_put(f->m, f->a, key, size);
}

/* A heartbeat's answer. */
/* A heartbeat answered at once (wait 0). */
static struct tm_hb pull(struct fx *f, uint32_t max)
{
    return tm_pull(f->m, f->a, max);
}

static int report(struct fx *f, struct mc_id who, uint64_t task_id, const char *key, int status,
                  uint64_t size, uint64_t version, uint32_t crc)
{
    struct mc_offload_result it = {.task_id = task_id,
                                   .key = key,
                                   .key_len = strlen(key),
                                   .status = status,
                                   .size = size,
                                   .version = version,
                                   .crc32c = crc,
                                   .crc_valid = true};
    int rc = -12345;
    int frame = mc_master_notify_offload(f->m, who, &it, 1, false, &rc);
    return frame != MC_OK ? frame : rc;
}

static int reregister(struct mc_master *m, struct mc_id who, const char *key, uint64_t size,
                      uint64_t version, uint32_t crc)
{
    struct mc_offload_result it = {.key = key,
                                   .key_len = strlen(key),
                                   .size = size,
                                   .version = version,
                                   .crc32c = crc,
                                   .crc_valid = true};
    int rc = -12345;
    int frame = mc_master_notify_offload(m, who, &it, 1, true, &rc);
    return frame != MC_OK ? frame : rc;
}

/* Completes every task of h (stored). */
static void complete_all(struct fx *f, const struct tm_hb *h)
{
    for (size_t i = 0; i < h->n; i++)
        if (!h->it[i].drop)
            assert_int_equal(report(f, f->a, h->it[i].task_id, h->it[i].key, 0, h->it[i].size,
                                    h->it[i].version, h->it[i].crc),
                             MC_OK);
}

static struct mc_key_info query(struct fx *f, const char *key, int want_rc)
{
    return of_query(f->m, key, want_rc);
}

static uint32_t count_type(const struct mc_key_info *ki, uint8_t type)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < ki->nreplicas; i++)
        n += ki->replicas[i].type == type;
    return n;
}

static struct mc_offload_stats ostats(struct fx *f)
{
    return of_stats(f->m);
}

static void ping(struct fx *f, struct mc_id who)
{
    struct mc_ping_result pr;
    assert_int_equal(mc_master_ping(f->m, who, &pr), MC_OK);
}

/* ---- mode A: enable_offload ------------------------------------------------------------------ */

static void test_enable_offload_queues_at_put_end(void **state)
{
    struct fx *f = *state;
    uint64_t v[3];
    v[0] = put(f, "k0", 1000);
    v[1] = put(f, "k1", 2000);
    v[2] = put(f, "k2", 3000);
    struct mc_key_info ki = query(f, "k1", MC_OK);
    assert_true(ki.offload_pending);
    assert_int_equal(ki.replicas[0].refcnt, 1); /* the source is pinned */
    /* at most max_items per answer, oldest first; the rest stays queued */
    struct tm_hb h = pull(f, 2);
    assert_int_equal(h.n, 2);
    assert_string_equal(h.it[0].key, "k0");
    assert_int_equal(h.it[0].version, v[0]);
    assert_int_equal(h.it[0].size, 1000);
    assert_int_equal(h.it[0].crc, 1000 ^ 0x5a);
    assert_false(h.it[0].drop);
    assert_string_equal(h.it[1].key, "k1");
    struct tm_hb h2 = pull(f, 2);
    assert_int_equal(h2.n, 1);
    assert_string_equal(h2.it[0].key, "k2");
    assert_int_equal(h2.it[0].version, v[2]);
    assert_int_equal(pull(f, 0).n, 0);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.queued, 3);
    assert_int_equal(st.in_flight, 3);
    /* completing attaches a LOCAL_DISK replica with the holder's endpoint and unpins */
    complete_all(f, &h);
    complete_all(f, &h2);
    ki = query(f, "k1", MC_OK);
    assert_false(ki.offload_pending);
    assert_int_equal(ki.nreplicas, 2);
    assert_int_equal(ki.replicas[0].refcnt, 0);
    assert_int_equal(ki.replicas[1].type, MC_REPLICA_TYPE_LOCAL_DISK);
    assert_string_equal(ki.replicas[1].u.disk.endpoint, "10.0.0.1:18001");
    assert_true(mc_id_eq(ki.replicas[1].u.disk.holder, f->a));
    st = ostats(f);
    assert_int_equal(st.completed, 3);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.file_allocated_bytes, 6000);
    assert_int_equal(st.file_capacity_bytes, 1ull << 30);
    assert_int_equal(st.disk_replicas, 3);
    assert_int_equal(st.disk_only_keys, 0);
    /* a repeated report of a finished task finds nothing */
    assert_int_equal(report(f, f->a, h.it[0].task_id, "k0", 0, 1000, v[0], 1000 ^ 0x5a),
                     MC_ERR_TASK_NOT_FOUND);
}

/* Disk-only objects are readable (the LOCAL_DISK replica with its holder's endpoint) and never
 * counted as evictable DRAM. */
static void test_disk_only_readable_never_evictable(void **state)
{
    struct fx *f = *state;
    put(f, "d", 4096);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    assert_int_equal(es.evicted, 1);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "d", 1, &g), MC_OK);
    assert_int_equal(g.nreplicas, 1);
    assert_int_equal(g.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    assert_string_equal(g.replicas[0].u.disk.endpoint, "10.0.0.1:18001");
    assert_int_equal(g.size, 4096);
    struct mc_key_ref k = {"d", 1};
    int rc;
    assert_int_equal(mc_master_batch_get_replica_list(f->m, &k, 1, &g, &rc), MC_OK);
    assert_int_equal(rc, MC_OK);
    assert_int_equal(g.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    for (int i = 0; i < 1024; i++) /* the disk-only figure is a census: one round of ticks */
        mc_master_tick_eviction(f->m);
    assert_int_equal(ostats(f).disk_only_keys, 1);
    mc_fake_clock_advance_ms(&f->fc, 60000); /* leases over */
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    assert_int_equal(es.evictable, 0);
    assert_int_equal(es.evicted, 0);
    assert_int_equal(query(f, "d", MC_OK).nreplicas, 1);
}

static void test_long_poll_answered_on_arrival_and_at_deadline(void **state)
{
    (void)state;
    struct fx *f = fx_new(MODE_PUT_END);
    struct tm_hb h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 4, 500, tm_on_hb, &h), 0);
    mc_fake_clock_advance_ms(&f->fc, 100);
    assert_int_equal(mc_master_tick_offload(f->m), 0);
    assert_int_equal(h.calls, 0);
    put(f, "arrives", 100); /* answered by PutEnd, after it dropped the shard lock */
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.n, 1);
    assert_string_equal(h.it[0].key, "arrives");
    /* nothing queued: answered empty at the deadline, never before */
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 4, 500, tm_on_hb, &h), 0);
    mc_fake_clock_advance_ms(&f->fc, 499);
    mc_master_tick_offload(f->m);
    assert_int_equal(h.calls, 0);
    mc_fake_clock_advance_ms(&f->fc, 1);
    mc_master_tick_offload(f->m);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.n, 0);
    /* a poll parked when the master goes is answered (empty) by mc_master_free */
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 4, 500, tm_on_hb, &h), 0);
    fx_free(f);
    assert_int_equal(h.calls, 1);
}

static void test_heartbeat_errors(void **state)
{
    (void)state;
    struct fx *f = fx_new(MODE_PUT_END);
    struct tm_hb h;
    memset(&h, 0, sizeof(h));
    /* b is not a holder */
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->b, true, 4, 100, tm_on_hb, &h),
                     MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(
        mc_master_offload_heartbeat(f->m, (struct mc_id){0, 0}, true, 4, 100, tm_on_hb, &h),
        MC_ERR_INVALID_PARAMS);
    assert_int_equal(h.calls, 0);
    assert_int_equal(mc_master_mount_local_disk(f->m, f->b, NULL, 0, true), MC_ERR_INVALID_PARAMS);
    char longep[MC_ENDPOINT_MAX + 4];
    memset(longep, 'x', sizeof(longep) - 1);
    longep[sizeof(longep) - 1] = 0;
    assert_int_equal(mc_master_mount_local_disk(f->m, f->b, longep, 0, true),
                     MC_ERR_INVALID_PARAMS);
    /* a notify from a non-holder */
    assert_int_equal(report(f, f->b, 1, "x", 0, 1, 1, 1), MC_ERR_SEGMENT_NOT_FOUND);
    fx_free(f);
    /* without enable_offload every tier call answers UNABLE_OFFLOAD */
    f = fx_new_cfg(MODE_OFF, 64 * MIB, false, 0);
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "h:1", 0, true), MC_ERR_UNABLE_OFFLOAD);
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 4, 0, tm_on_hb, &h),
                     MC_ERR_UNABLE_OFFLOAD);
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->a, "k", 1, 0), MC_ERR_UNABLE_OFFLOAD);
    assert_int_equal(mc_master_unmount_local_disk(f->m, f->a), MC_ERR_UNABLE_OFFLOAD);
    put(f, "k", 10);
    assert_false(query(f, "k", MC_OK).offload_pending);
    fx_free(f);
}

static void test_heartbeat_disable_offloading_cancels_queued(void **state)
{
    struct fx *f = *state;
    put(f, "q1", 10);
    put(f, "q2", 10);
    struct tm_hb h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, false, 0, 1000, tm_on_hb, &h), 1);
    assert_int_equal(h.n, 0);
    assert_false(query(f, "q1", MC_OK).offload_pending);
    assert_int_equal(query(f, "q2", MC_OK).replicas[0].refcnt, 0);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.cancelled, 2);
    assert_int_equal(st.in_flight, 0);
    put(f, "q3", 10); /* offloading off: nothing queued */
    assert_false(query(f, "q3", MC_OK).offload_pending);
}

static void test_nack_releases_pin(void **state)
{
    struct fx *f = *state;
    uint64_t v = put(f, "n", 100);
    struct tm_hb h = pull(f, 0);
    assert_int_equal(h.n, 1);
    assert_int_equal(report(f, f->a, h.it[0].task_id, "n", MC_ERR_WRITE_FAIL, 0, v, 0), MC_OK);
    struct mc_key_info ki = query(f, "n", MC_OK);
    assert_int_equal(ki.nreplicas, 1);
    assert_int_equal(ki.replicas[0].refcnt, 0);
    assert_false(ki.offload_pending);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.nacked, 1);
    assert_int_equal(st.in_flight, 0);
}

static void test_stale_version_completion_refused(void **state)
{
    struct fx *f = *state;
    uint64_t v = put(f, "s", 100);
    struct tm_hb h = pull(f, 0);
    /* a report claiming another version: refused, nothing attached, the pin released */
    assert_int_equal(report(f, f->a, h.it[0].task_id, "s", 0, 100, v + 1, 100 ^ 0x5a),
                     MC_ERR_INVALID_VERSION);
    struct mc_key_info ki = query(f, "s", MC_OK);
    assert_int_equal(count_type(&ki, MC_REPLICA_TYPE_LOCAL_DISK), 0);
    assert_int_equal(ki.replicas[0].refcnt, 0);
    /* bytes that do not match the object's CRC or size are refused as well */
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_remove(f->m, "s", 1, true), MC_OK);
    v = put(f, "s", 100);
    h = pull(f, 0);
    assert_int_equal(report(f, f->a, h.it[0].task_id, "s", 0, 100, v, 0xdead),
                     MC_ERR_CHECKSUM_MISMATCH);
    put(f, "t", 100);
    h = pull(f, 0);
    assert_int_equal(report(f, f->a, h.it[0].task_id, "t", 0, 99, h.it[0].version, 100 ^ 0x5a),
                     MC_ERR_INVALID_PARAMS);
    /* a report naming another key than its task: refused, the task's pin released */
    put(f, "u", 100);
    h = pull(f, 0);
    assert_int_equal(report(f, f->a, h.it[0].task_id, "t", 0, 100, h.it[0].version, 100 ^ 0x5a),
                     MC_ERR_INVALID_PARAMS);
    assert_false(query(f, "u", MC_OK).offload_pending);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.stale_refused, 4);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.disk_replicas, 0);
}

static void test_remove_reput_late_completion_never_attaches(void **state)
{
    struct fx *f = *state;
    uint64_t v1 = put(f, "r", 100);
    struct tm_hb old = pull(f, 0); /* the holder is copying v1 ... */
    assert_int_equal(old.n, 1);
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_remove(f->m, "r", 1, false), MC_OK); /* the pin does not block */
    assert_int_equal(ostats(f).cancelled, 1);
    uint64_t v2 = put(f, "r", 100);
    assert_true(v2 > v1);
    /* ... and reports v1 late: the task is gone, nothing is attached to v2 */
    assert_int_equal(report(f, f->a, old.it[0].task_id, "r", 0, 100, v1, 100 ^ 0x5a),
                     MC_ERR_TASK_NOT_FOUND);
    struct mc_key_info ki = query(f, "r", MC_OK);
    assert_int_equal(ki.version, v2);
    assert_int_equal(count_type(&ki, MC_REPLICA_TYPE_LOCAL_DISK), 0);
    /* a re-registration of the v1 record is refused too (another version exists) */
    assert_int_equal(reregister(f->m, f->a, "r", 100, v1, 100 ^ 0x5a), MC_ERR_INVALID_VERSION);
    /* the holder that was copying v1 is told to drop any record of it first (the delete
     * rule: it may have written one), then v2's own task still completes */
    struct tm_hb h = pull(f, 0);
    assert_int_equal(h.n, 1);
    assert_true(h.it[0].drop);
    assert_int_equal(h.it[0].version, v1);
    h = pull(f, 0);
    assert_int_equal(h.n, 1);
    assert_false(h.it[0].drop);
    assert_int_equal(h.it[0].version, v2);
    complete_all(f, &h);
    ki = query(f, "r", MC_OK);
    assert_int_equal(count_type(&ki, MC_REPLICA_TYPE_LOCAL_DISK), 1);
    /* Remove of an object with a disk copy pushes a delete of that version to its holder */
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_remove(f->m, "r", 1, false), MC_OK);
    h = pull(f, 0);
    assert_int_equal(h.n, 1);
    assert_true(h.it[0].drop);
    assert_string_equal(h.it[0].key, "r");
    assert_int_equal(h.it[0].version, v2);
    assert_int_equal(ostats(f).deletes_queued, 2);
    assert_int_equal(ostats(f).disk_replicas, 0);
}

static void test_batch_remove_before_pull_leaves_no_orphan(void **state)
{
    struct fx *f = *state;
    put(f, "b0", 10);
    put(f, "b1", 10);
    put(f, "b2", 10);
    assert_int_equal(ostats(f).in_flight, 3);
    struct mc_key_ref keys[3] = {{"b0", 2}, {"b1", 2}, {"b2", 2}};
    int rcs[3];
    mc_fake_clock_advance_ms(&f->fc, 1); /* past PutEnd's zero-length lease */
    assert_int_equal(mc_master_batch_remove(f->m, keys, 3, false, rcs), MC_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rcs[i], MC_OK);
    assert_int_equal(pull(f, 0).n, 0); /* no orphan task */
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.cancelled, 3);
}

static void test_remove_all_cancels_and_deletes(void **state)
{
    struct fx *f = *state;
    put(f, "x0", 10);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h); /* x0 has a disk copy */
    put(f, "x1", 10);    /* x1's task queued, x2's handed out */
    put(f, "x2", 10);
    struct tm_hb h2 = pull(f, 1);
    assert_string_equal(h2.it[0].key, "x1");
    mc_fake_clock_advance_ms(&f->fc, 1);
    uint64_t removed = 0;
    assert_int_equal(mc_master_remove_all(f->m, false, &removed), MC_OK);
    assert_int_equal(removed, 3);
    h = pull(f, 0);
    /* the deletes of x0's record and of x1's (its task was handed out: the holder may have
     * written it); x2's task was never pulled: nothing to delete */
    assert_int_equal(h.n, 2);
    assert_true(h.it[0].drop && h.it[1].drop);
    assert_true((strcmp(h.it[0].key, "x0") == 0 && strcmp(h.it[1].key, "x1") == 0) ||
                (strcmp(h.it[0].key, "x1") == 0 && strcmp(h.it[1].key, "x0") == 0));
    assert_int_equal(report(f, f->a, h2.it[0].task_id, "x1", 0, 10, h2.it[0].version, 10 ^ 0x5a),
                     MC_ERR_TASK_NOT_FOUND);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.cancelled, 2);
    assert_int_equal(st.disk_replicas, 0);
}

static void test_task_expiry_releases_pin(void **state)
{
    struct fx *f = *state;
    uint64_t v = put(f, "e", 10);
    struct tm_hb h = pull(f, 0);
    mc_fake_clock_advance_ms(&f->fc, RELEASE_MS - 1);
    ping(f, f->a);
    mc_master_tick_reaper(f->m);
    assert_true(query(f, "e", MC_OK).offload_pending);
    mc_fake_clock_advance_ms(&f->fc, 1);
    ping(f, f->a);
    assert_true(mc_master_tick_reaper(f->m) >= 1);
    struct mc_key_info ki = query(f, "e", MC_OK);
    assert_false(ki.offload_pending);
    assert_int_equal(ki.replicas[0].refcnt, 0);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.expired, 1);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(report(f, f->a, h.it[0].task_id, "e", 0, 10, v, 10 ^ 0x5a),
                     MC_ERR_TASK_NOT_FOUND);
}

static void test_queue_limit(void **state)
{
    (void)state;
    struct fx *f = fx_new_cfg(MODE_PUT_END, 64 * MIB, true, 2);
    put(f, "l0", 10);
    put(f, "l1", 10);
    put(f, "l2", 10); /* third: refused by the mailbox, not pinned */
    assert_false(query(f, "l2", MC_OK).offload_pending);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.queued, 2);
    assert_int_equal(st.refused, 1);
    struct tm_hb h = pull(f, 0); /* in flight still counts towards the limit */
    assert_int_equal(h.n, 2);
    put(f, "l3", 10);
    assert_false(query(f, "l3", MC_OK).offload_pending);
    complete_all(f, &h);
    put(f, "l4", 10);
    assert_true(query(f, "l4", MC_OK).offload_pending);
    fx_free(f);
}

/* enable_offload + offload_force_evict without offload_on_evict: force_evict is ignored, tasks are
 * queued at PutEnd (upstream's Combo D). */
static void test_force_evict_alone_behaves_like_put_end_queueing(void **state)
{
    (void)state;
    struct fx *f = fx_new(MODE_FORCE_ALONE);
    assert_false(mc_master_config_get(f->m)->offload_force_evict);
    put(f, "d0", 10);
    put(f, "d1", 10);
    assert_int_equal(pull(f, 0).n, 2);
    fx_free(f);
}

static void test_offload_on_evict_without_enable_offload_refused(void **state)
{
    (void)state;
    struct fx f;
    mc_fake_clock_init(&f.fc, T0_MS * 1000000ull);
    struct mc_master_config c = fx_config(&f, MODE_ON_EVICT);
    c.enable_offload = false;
    struct mc_master *m = NULL;
    assert_int_equal(mc_master_new(&c, &m), MC_ERR_INVALID_PARAMS);
    assert_null(m);
    c = fx_config(&f, MODE_ON_EVICT);
    c.offload_cap_ratio = 1.5;
    assert_int_equal(mc_master_new(&c, &m), MC_ERR_INVALID_PARAMS);
}

/* ---- modes B and C: offload_on_evict, offload_force_evict ------------------------------------ */

/* n objects of size bytes, each read once in order (older leases first). */
static void fill(struct fx *f, const char *pfx, int n, uint64_t size)
{
    char k[32];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof(k), "%s%d", pfx, i);
        put(f, k, size);
        mc_fake_clock_advance_ms(&f->fc, 1);
    }
    mc_fake_clock_advance_ms(&f->fc, 1000);
}

static void on_evict_queues_at_eviction(bool force_full)
{
    struct fx *f = fx_new(MODE_ON_EVICT);
    fill(f, "o", 200, 4096);
    assert_int_equal(pull(f, 0).n, 0); /* PutEnd queued nothing */
    if (force_full)
        mc_master_evict_set_test_opts(f->m, &(struct mc_evict_test_opts){.force_full = true});
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 0.05, 0.05, &es), MC_OK);
    if (force_full)
        assert_int_not_equal(es.path, MC_EVICT_SELECTIVE);
    else
        assert_int_equal(es.path, MC_EVICT_SELECTIVE);
    /* the victims were queued for offload, pinned and kept: nothing left DRAM yet */
    assert_int_equal(es.evicted, 0);
    struct mc_offload_stats st = ostats(f);
    assert_true(st.queued >= 10);
    assert_int_equal(st.in_flight, st.queued);
    /* nothing was freed, so the cycle went through every candidate: all 200 are queued */
    assert_int_equal(st.queued, 200);
    struct tm_hb h = pull(f, 0);
    assert_int_equal(h.n, 200);
    /* (one round evicts its candidates shard by shard: queue order is not lease order) */
    assert_true(query(f, "o0", MC_OK).offload_pending);
    /* a second cycle does not queue them again (pinned: not evictable) */
    assert_int_equal(mc_master_batch_evict(f->m, 0.05, 0.05, &es), MC_OK);
    assert_int_equal(ostats(f).queued, 200);
    /* once the disk copies exist, eviction frees their DRAM with no new offload */
    complete_all(f, &h);
    uint64_t before = ostats(f).queued;
    struct mc_get_result g;
    assert_int_equal(mc_master_batch_evict(f->m, 0.05, 0.05, &es), MC_OK);
    assert_true(es.evicted >= 10);
    assert_int_equal(ostats(f).queued, before);
    assert_int_equal(mc_master_get_replica_list(f->m, "o0", 2, &g), MC_OK);
    assert_int_equal(g.nreplicas, 1);
    assert_int_equal(g.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    fx_free(f);
}

static void test_offload_on_evict_queues_at_eviction_selective(void **state)
{
    (void)state;
    on_evict_queues_at_eviction(false);
}

static void test_offload_on_evict_queues_at_eviction_full(void **state)
{
    (void)state;
    on_evict_queues_at_eviction(true);
}

/* offload_on_evict with no LOCAL_DISK registration: no push succeeds, nothing is evicted, and
 * Puts stop at the segment's capacity (upstream's ComboB_NoFallbackWithoutForceEvict). */
static void test_offload_on_evict_no_local_disk_nothing_offloaded(void **state)
{
    (void)state;
    struct fx *f = fx_new_cfg(MODE_ON_EVICT, 1 * MIB, false, 0);
    char k[32];
    int ok = 0;
    for (int i = 0; i < 600; i++) {
        snprintf(k, sizeof(k), "n%d", i);
        struct mc_put_start_result r;
        int rc = mc_master_put_start(f->m, f->a, k, strlen(k), 4096, NULL, &r);
        if (rc == MC_OK) {
            assert_int_equal(mc_master_put_end(f->m, f->a, k, strlen(k), r.version, 1, true),
                             MC_OK);
            ok++;
        } else {
            assert_int_equal(rc, MC_ERR_NO_AVAILABLE_HANDLE);
        }
        mc_fake_clock_advance_ms(&f->fc, 1);
        mc_master_tick_eviction(f->m);
    }
    assert_true(ok <= (int)(MIB / 4096));
    assert_true(ok > 0);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.key_count, (uint64_t)ok); /* nothing was evicted */
    assert_int_equal(ms.evicted_key_count, 0);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.queued, 0);
    assert_true(st.refused > 0);
    fx_free(f);
}

/* offload_on_evict + offload_force_evict: once offloading_queue_limit x offload_cap_ratio tasks
 * were queued in a cycle, the rest are evicted without offload. */
static void test_offload_force_evict_cap(void **state)
{
    (void)state;
    struct fx *f = fx_new_cfg(MODE_FORCE, 64 * MIB, true, 10); /* cap = 10 x 0.5 = 5 */
    fill(f, "c", 20, 4096);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.queued, 5);
    assert_int_equal(st.forced_evictions, 15);
    assert_int_equal(es.evicted, 15);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.key_count, 5); /* the offloading ones stay until their copy exists */
    assert_int_equal(pull(f, 0).n, 5);
    /* a push that fails (queue full: 5 in flight + 5 more fill the limit of 10) force-evicts too */
    fill(f, "d", 20, 4096);
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    st = ostats(f);
    assert_int_equal(st.queued, 10);
    assert_int_equal(st.forced_evictions, 30);
    fx_free(f);
}

/* An object with a COMPLETE LOCAL_DISK replica of its current version leaves DRAM with no new
 * offload (here its disk copy came from a holder's re-registration of that version). */
static void test_disk_copy_leaves_dram_without_new_offload(void **state)
{
    (void)state;
    struct fx *f = fx_new(MODE_ON_EVICT);
    uint64_t v = put(f, "have", 4096);
    assert_int_equal(reregister(f->m, f->a, "have", 4096, v, 4096 ^ 0x5a), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 1000);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    assert_int_equal(es.evicted, 1);
    assert_int_equal(ostats(f).queued, 0);
    struct mc_key_info ki = query(f, "have", MC_OK);
    assert_int_equal(ki.nreplicas, 1);
    assert_int_equal(ki.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    fx_free(f);
}

/* Puts far beyond DRAM with eviction running after each, and a holder that keeps up (stores
 * every task it is given after each Put): in the modes that offload (enable_offload,
 * offload_on_evict) every key stays readable, from DRAM or from disk; with offload_force_evict
 * every Put still succeeds (no deadlock), and keys evicted past the cap are the only ones lost. */
static void eviction_keeps_keys(int mode)
{
    struct fx *f = fx_new_cfg(mode, 1 * MIB, true, 64);
    const int n = 1000; /* 4 MiB of 4 KiB objects into 1 MiB */
    char k[32];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof(k), "w%d", i);
        int tries = 0;
        for (;;) {
            const char *pref[] = {"seg-1"};
            struct mc_master_replicate_config cfg;
            mc_master_replicate_config_init(&cfg);
            cfg.preferred_segments = pref;
            cfg.n_preferred = 1;
            struct mc_put_start_result r;
            int rc = mc_master_put_start(f->m, f->a, k, strlen(k), 4096, &cfg, &r);
            if (rc == MC_OK) {
                assert_int_equal(
                    mc_master_put_end(f->m, f->a, k, strlen(k), r.version, 4096 ^ 0x5a, true),
                    MC_OK);
                break;
            }
            assert_int_equal(rc, MC_ERR_NO_AVAILABLE_HANDLE);
            assert_true(++tries < 50);
            struct tm_hb h = pull(f, 0);
            complete_all(f, &h);
            mc_fake_clock_advance_ms(&f->fc, 1);
            mc_master_tick_eviction(f->m);
        }
        struct tm_hb h = pull(f, 0); /* a holder that keeps up */
        complete_all(f, &h);
        mc_fake_clock_advance_ms(&f->fc, 1);
        mc_master_tick_eviction(f->m);
    }
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    int readable = 0, on_disk = 0;
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof(k), "w%d", i);
        struct mc_get_result g;
        if (mc_master_get_replica_list(f->m, k, strlen(k), &g) != MC_OK)
            continue;
        readable++;
        for (uint32_t r = 0; r < g.nreplicas; r++)
            on_disk += g.replicas[r].type == MC_REPLICA_TYPE_LOCAL_DISK;
    }
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_true(ms.evicted_key_count > 0);
    if (mode == MODE_FORCE) {
        assert_true(ostats(f).forced_evictions > 0);
        assert_true(readable < n);
    } else {
        assert_int_equal(readable, n);
        assert_true(on_disk >= n - (int)(MIB / 4096));
    }
    fx_free(f);
}

static void test_eviction_with_enable_offload_keeps_keys(void **state)
{
    (void)state;
    eviction_keeps_keys(MODE_PUT_END);
}

static void test_eviction_with_offload_on_evict_keeps_keys(void **state)
{
    (void)state;
    eviction_keeps_keys(MODE_ON_EVICT);
}

static void test_eviction_with_offload_force_evict_never_stalls(void **state)
{
    (void)state;
    eviction_keeps_keys(MODE_FORCE);
}

/* Attaching a disk replica moves the object's record: a grouped object keeps its group (a Get of
 * one member leases the other, Remove leaves the group cleanly). */
static void test_grouped_object_gets_disk_copy(void **state)
{
    struct fx *f = *state;
    struct mc_master_replicate_config cfg;
    mc_master_replicate_config_init(&cfg);
    cfg.group_id = "grp";
    cfg.group_id_len = 3;
    const char *keys[2] = {"g0", "g1"};
    for (int i = 0; i < 2; i++) {
        struct mc_put_start_result r;
        assert_int_equal(mc_master_put_start(f->m, f->a, keys[i], 2, 100, &cfg, &r), MC_OK);
        assert_int_equal(mc_master_put_end(f->m, f->a, keys[i], 2, r.version, 1, true), MC_OK);
    }
    struct tm_hb h = pull(f, 0);
    assert_int_equal(h.n, 2);
    for (size_t i = 0; i < h.n; i++)
        assert_int_equal(report(f, f->a, h.it[i].task_id, h.it[i].key, 0, 100, h.it[i].version, 1),
                         MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "g0", 2, &g), MC_OK);
    assert_int_equal(g.nreplicas, 2);
    struct mc_key_info ki = query(f, "g1", MC_OK);
    assert_string_equal(ki.group_id, "grp");
    assert_true(ki.lease_remaining_ms > 0); /* leased through g0's Get */
    assert_int_equal(count_type(&ki, MC_REPLICA_TYPE_LOCAL_DISK), 1);
    assert_int_equal(mc_master_remove(f->m, "g0", 2, true), MC_OK);
    assert_int_equal(mc_master_remove(f->m, "g1", 2, true), MC_OK);
    query(f, "g1", MC_ERR_OBJECT_NOT_FOUND);
}

/* ---- re-registration --------------------------------------------------------------------------
 */

/* Wall clock: ns since the Unix epoch (seeds mc_master_version_base). */
static struct mc_master *master_at(struct fx *f, struct mc_fake_clock *wall, uint16_t epoch)
{
    struct mc_master_config c = fx_config(f, MODE_PUT_END);
    c.wall_clock = &wall->clock;
    c.epoch = epoch;
    struct mc_master *m = NULL;
    assert_int_equal(mc_master_new(&c, &m), MC_OK);
    return m;
}

static void test_reregister_after_restart_recreates_same_epoch_does_not(void **state)
{
    (void)state;
    struct fx *f = calloc(1, sizeof(*f));
    mc_fake_clock_init(&f->fc, T0_MS * 1000000ull);
    struct mc_fake_clock wall;
    mc_fake_clock_init(&wall, OF_WALL0_NS); /* 2026-01-01 */
    f->a = tm_id(1);
    f->m = master_at(f, &wall, 1);
    struct mc_segment_desc s1 = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, f->a, &s1, NULL), MC_OK);
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18001", 0, true), MC_OK);
    uint64_t v = put(f, "p", 500);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    /* within the same incarnation: a removed object is never recreated from its record */
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_remove(f->m, "p", 1, false), MC_OK);
    assert_int_equal(reregister(f->m, f->a, "p", 500, v, 500 ^ 0x5a), MC_ERR_OBJECT_NOT_FOUND);
    query(f, "p", MC_ERR_OBJECT_NOT_FOUND);
    uint64_t v2 = put(f, "q", 700); /* q's record survives the restart */
    h = pull(f, 0);
    complete_all(f, &h);
    /* the same version re-registered again is idempotent (already attached) */
    assert_int_equal(reregister(f->m, f->a, "q", 700, v2, 700 ^ 0x5a), MC_OK);
    mc_master_free(f->m);

    /* the master restarts (a later wall clock): records of the previous incarnation recreate
     * their absent objects, disk-only, with their version, size and CRC */
    mc_fake_clock_advance_ms(&wall, 5000);
    f->m = master_at(f, &wall, 2);
    assert_true(v2 <= mc_master_version_base(f->m));
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18001", 0, true), MC_OK);
    assert_int_equal(reregister(f->m, f->a, "q", 700, v2, 700 ^ 0x5a), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "q", 1, &g), MC_OK);
    assert_int_equal(g.version, v2);
    assert_int_equal(g.size, 700);
    assert_true(g.has_crc);
    assert_int_equal(g.crc32c, 700 ^ 0x5a);
    assert_int_equal(g.nreplicas, 1);
    assert_int_equal(g.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    assert_string_equal(g.replicas[0].u.disk.endpoint, "10.0.0.1:18001");
    /* a second holder's record of another old version of q is refused (one version only) */
    struct mc_id c = tm_id(3);
    assert_int_equal(mc_master_mount_local_disk(f->m, c, "10.0.0.3:18003", 0, true), MC_OK);
    assert_int_equal(reregister(f->m, c, "q", 700, v2 - 1, 700 ^ 0x5a), MC_ERR_INVALID_VERSION);
    /* a record of a version this incarnation issued for an absent key: refused */
    assert_int_equal(reregister(f->m, f->a, "z", 10, mc_master_version_base(f->m) + 1, 1),
                     MC_ERR_OBJECT_NOT_FOUND);
    /* a new Put of q is refused while the disk copy exists; after a Remove, a new version
     * takes it and the old record can no longer attach */
    struct mc_put_start_result r;
    struct mc_segment_desc s1b = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, f->a, &s1b, NULL), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->a, "q", 1, 700, NULL, &r),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    mc_fake_clock_advance_ms(&f->fc, 20000);
    assert_int_equal(mc_master_remove(f->m, "q", 1, false), MC_OK);
    uint64_t v3 = put(f, "q", 700);
    assert_true(v3 > v2);
    assert_int_equal(reregister(f->m, f->a, "q", 700, v2, 700 ^ 0x5a), MC_ERR_INVALID_VERSION);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.reregistered, 1);
    assert_int_equal(st.reregister_refused, 3);
    fx_free(f);
}

/* After a master restart, old records recreate absent objects only in the holder's first
 * registration with the new incarnation (mount .. first heartbeat). An object this incarnation
 * then drops (Remove, the holder's expiry) is never resurrected by the same records when the
 * holder registers again (a restart within its TTL, or a return after its expiry). */
static void test_reregister_never_resurrects_what_this_incarnation_dropped(void **state)
{
    (void)state;
    struct fx *f = calloc(1, sizeof(*f));
    mc_fake_clock_init(&f->fc, T0_MS * 1000000ull);
    struct mc_fake_clock wall;
    mc_fake_clock_init(&wall, OF_WALL0_NS);
    f->a = tm_id(1);
    f->m = master_at(f, &wall, 1);
    struct mc_segment_desc s1 = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, f->a, &s1, NULL), MC_OK);
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18001", 0, true), MC_OK);
    uint64_t vp = put(f, "p", 500), vq = put(f, "q", 600), vr = put(f, "r", 700);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    mc_master_free(f->m);

    mc_fake_clock_advance_ms(&wall, 5000);
    f->m = master_at(f, &wall, 2);
    /* first registration: p and r are recreated */
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18001", 0, true), MC_OK);
    assert_int_equal(reregister(f->m, f->a, "p", 500, vp, 500 ^ 0x5a), MC_OK);
    assert_int_equal(reregister(f->m, f->a, "r", 700, vr, 700 ^ 0x5a), MC_OK);
    query(f, "p", MC_OK);
    /* its first heartbeat ends the registration: a record sent after it recreates nothing */
    h = pull(f, 0);
    assert_int_equal(h.n, 0);
    assert_int_equal(reregister(f->m, f->a, "q", 600, vq, 600 ^ 0x5a), MC_ERR_OBJECT_NOT_FOUND);
    query(f, "q", MC_ERR_OBJECT_NOT_FOUND);
    /* this incarnation removes p; the holder restarts (new endpoint) and registers again */
    mc_fake_clock_advance_ms(&f->fc, 20000);
    assert_int_equal(mc_master_remove(f->m, "p", 1, false), MC_OK);
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18002", 0, true), MC_OK);
    assert_int_equal(reregister(f->m, f->a, "p", 500, vp, 500 ^ 0x5a), MC_ERR_OBJECT_NOT_FOUND);
    query(f, "p", MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(reregister(f->m, f->a, "r", 700, vr, 700 ^ 0x5a), MC_OK); /* still there */
    /* the holder expires: r goes with it; back after its TTL, its record of r is refused */
    for (int i = 0; i < 12; i++) {
        mc_fake_clock_advance_ms(&f->fc, 1000);
        mc_master_tick_monitor(f->m);
    }
    query(f, "r", MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18003", 0, true), MC_OK);
    assert_int_equal(reregister(f->m, f->a, "r", 700, vr, 700 ^ 0x5a), MC_ERR_OBJECT_NOT_FOUND);
    query(f, "r", MC_ERR_OBJECT_NOT_FOUND);
    /* a holder seen for the first time by this incarnation still recreates its old records */
    struct mc_id c = tm_id(3);
    assert_int_equal(mc_master_mount_local_disk(f->m, c, "10.0.0.3:18003", 0, true), MC_OK);
    assert_int_equal(reregister(f->m, c, "q", 600, vq, 600 ^ 0x5a), MC_OK);
    query(f, "q", MC_OK);
    fx_free(f);
}

/* ---- holders going away ------------------------------------------------------------------------
 */

static void test_holder_expiry_drops_replicas_and_tasks(void **state)
{
    struct fx *f = *state;
    /* b keeps a DRAM segment and pings; a holds disk copies and a task */
    struct mc_segment_desc s2 = tm_seg(2, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, f->b, &s2, NULL), MC_OK);
    const char *pref[] = {"seg-2"};
    struct mc_master_replicate_config cfg;
    mc_master_replicate_config_init(&cfg);
    cfg.preferred_segments = pref;
    cfg.n_preferred = 1;
    put(f, "diskonly", 100);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    struct mc_evict_stats es;
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK); /* drops DRAM copies */
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->b, "onb", 3, 100, &cfg, &r), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->b, "onb", 3, r.version, 7, true), MC_OK);
    assert_int_equal(reregister(f->m, f->a, "onb", 100, r.version, 7), MC_OK); /* same version */
    put(f, "tasked", 100); /* a queued task at a */
    assert_int_equal(query(f, "diskonly", MC_OK).nreplicas, 1);
    assert_int_equal(ostats(f).in_flight, 1);
    for (int i = 0; i < 11; i++) { /* a stops pinging; b goes on */
        mc_fake_clock_advance_ms(&f->fc, 1000);
        ping(f, f->b);
        mc_master_tick_monitor(f->m);
    }
    query(f, "diskonly", MC_ERR_OBJECT_NOT_FOUND);
    query(f, "tasked", MC_ERR_OBJECT_NOT_FOUND); /* its segment went with a */
    struct mc_key_info ki = query(f, "onb", MC_OK);
    assert_int_equal(ki.nreplicas, 1);
    assert_int_equal(ki.replicas[0].type, MC_REPLICA_TYPE_MEMORY);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.in_flight, 0);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.holders, 0);
    struct tm_hb hh;
    memset(&hh, 0, sizeof(hh));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 0, 0, tm_on_hb, &hh),
                     MC_ERR_SEGMENT_NOT_FOUND);
}

static void test_unmount_local_disk(void **state)
{
    struct fx *f = *state;
    put(f, "m0", 100);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    put(f, "m1", 100); /* queued */
    struct tm_hb parked;
    memset(&parked, 0, sizeof(parked));
    struct mc_local_disk_info *ld = NULL;
    size_t nld = 0;
    assert_int_equal(mc_master_list_local_disks(f->m, &ld, &nld), MC_OK);
    assert_int_equal(nld, 1);
    assert_string_equal(ld[0].endpoint, "10.0.0.1:18001");
    assert_int_equal(ld[0].replica_count, 1);
    assert_int_equal(ld[0].used_bytes, 100);
    assert_int_equal(ld[0].capacity_bytes, 1ull << 30);
    assert_true(ld[0].enable_offloading);
    free(ld);
    assert_int_equal(mc_master_unmount_local_disk(f->m, f->a), MC_OK);
    assert_int_equal(mc_master_unmount_local_disk(f->m, f->a), MC_OK); /* idempotent */
    /* its replicas stop being readable at once; the task is cancelled and its pin released */
    struct mc_key_info ki = query(f, "m0", MC_OK);
    assert_int_equal(count_type(&ki, MC_REPLICA_TYPE_LOCAL_DISK), 0);
    assert_false(query(f, "m1", MC_OK).offload_pending);
    assert_int_equal(report(f, f->a, 1, "m0", 0, 100, 1, 1), MC_ERR_SEGMENT_NOT_FOUND);
    mc_master_tick_monitor(f->m); /* the sweep */
    assert_int_equal(ostats(f).disk_replicas, 0);
    assert_int_equal(mc_master_list_local_disks(f->m, &ld, &nld), MC_OK);
    assert_int_equal(nld, 0);
    assert_null(ld);
    /* mounting again works, and re-registration attaches to the current version */
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18001", 0, true), MC_OK);
    assert_int_equal(reregister(f->m, f->a, "m0", 100, h.it[0].version, 100 ^ 0x5a), MC_OK);
    ki = query(f, "m0", MC_OK);
    assert_int_equal(count_type(&ki, MC_REPLICA_TYPE_LOCAL_DISK), 1);
}

/* A holder that mounts again with a new endpoint (a restarted daemon) keeps its replicas, which
 * now name the new endpoint. */
static void test_remount_moves_endpoint(void **state)
{
    struct fx *f = *state;
    put(f, "ep", 100);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:18001", 0, true), MC_OK);
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, "10.0.0.1:19999", 0, true), MC_OK);
    struct mc_key_info ki = query(f, "ep", MC_OK);
    assert_int_equal(ki.nreplicas, 2);
    assert_string_equal(ki.replicas[1].u.disk.endpoint, "10.0.0.1:19999");
    assert_int_equal(ostats(f).disk_replicas, 1);
    assert_int_equal(ostats(f).file_allocated_bytes, 100);
}

static void test_evict_disk_replica(void **state)
{
    struct fx *f = *state;
    uint64_t v0 = put(f, "e0", 100);
    put(f, "e1", 100);
    put(f, "e2", 100);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    /* e0 keeps its DRAM copy: only the disk replica goes */
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->a, "e0", 2, v0 + 1000),
                     MC_ERR_INVALID_VERSION);
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->b, "e0", 2, 0),
                     MC_ERR_REPLICA_NOT_FOUND);
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->a, "e0", 2, v0), MC_OK);
    struct mc_key_info ki = query(f, "e0", MC_OK);
    assert_int_equal(ki.nreplicas, 1);
    assert_int_equal(ki.replicas[0].type, MC_REPLICA_TYPE_MEMORY);
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->a, "e0", 2, 0),
                     MC_ERR_REPLICA_NOT_FOUND);
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->a, "nope", 4, 0),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_evict_disk_replica(f->m, f->a, "", 0, 0), MC_ERR_INVALID_KEY);
    /* e1, e2 disk-only: evicting their disk replicas erases them (no delete is pushed: the
     * holder asked) */
    mc_fake_clock_advance_ms(&f->fc, 1);
    struct mc_evict_stats es;
    assert_int_equal(mc_master_batch_evict(f->m, 1.0, 1.0, &es), MC_OK);
    struct mc_key_ref keys[3] = {{"e1", 2}, {"e2", 2}, {"zz", 2}};
    int rcs[3];
    assert_int_equal(mc_master_batch_evict_disk_replica(f->m, f->a, keys, NULL, 3, rcs), MC_OK);
    assert_int_equal(rcs[0], MC_OK);
    assert_int_equal(rcs[1], MC_OK);
    assert_int_equal(rcs[2], MC_ERR_OBJECT_NOT_FOUND);
    query(f, "e1", MC_ERR_OBJECT_NOT_FOUND);
    query(f, "e2", MC_ERR_OBJECT_NOT_FOUND);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.key_count, 0); /* erased with their last copy (e0 went with the eviction) */
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.disk_replicas, 0);
    assert_int_equal(st.deletes_queued, 0);
    assert_int_equal(pull(f, 0).n, 0);
}

static void test_metrics_rendered(void **state)
{
    struct fx *f = *state;
    put(f, "mm", 100);
    struct tm_hb h = pull(f, 0);
    complete_all(f, &h);
    struct mc_textbuf tb;
    mc_textbuf_init(&tb);
    assert_int_equal(mc_metrics_render(mc_master_metrics(f->m), &tb), 0);
    size_t len = 0;
    char *txt = mc_textbuf_steal(&tb, &len);
    assert_non_null(txt);
    assert_non_null(strstr(txt, "master_offload_queued_total 1"));
    assert_non_null(strstr(txt, "master_offload_completed_total 1"));
    assert_non_null(strstr(txt, "master_offload_nacked_total 0"));
    assert_non_null(strstr(txt, "master_offload_expired_total 0"));
    assert_non_null(strstr(txt, "master_offload_cancelled_total 0"));
    assert_non_null(strstr(txt, "master_allocated_file_size_bytes 100"));
    assert_non_null(strstr(txt, "master_total_file_capacity_bytes 1073741824"));
    assert_non_null(strstr(txt, "master_disk_only_key_count 0"));
    free(txt);
    mc_textbuf_destroy(&tb);
}

/* ---- threads (TSan) ----------------------------------------------------------------------------
 */

/* A holder thread long-polls and reports every task while the main thread Puts and Removes and a
 * third runs the eviction, reaper and offload ticks. At the end every task ended one way or
 * another and no pin is left: queued = completed + nacked + expired + cancelled + in flight. */
struct mt {
    struct fx *f;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool answered;
    struct tm_hb h;
    _Atomic bool stop, done;
    _Atomic uint64_t reports;
};

static void mt_reply(void *arg, struct mc_task_list *tasks)
{
    struct mt *t = arg;
    pthread_mutex_lock(&t->mu);
    tm_on_hb(&t->h, tasks);
    t->answered = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

static void *mt_holder(void *arg)
{
    struct mt *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->mu);
        t->answered = false;
        memset(&t->h, 0, sizeof(t->h));
        pthread_mutex_unlock(&t->mu);
        int rc = mc_master_offload_heartbeat(t->f->m, t->f->a, true, 16, 10000, mt_reply, t);
        if (rc == MC_ERR_SEGMENT_NOT_FOUND && atomic_load(&t->stop)) {
            /* the clock jumped while a delete of its last answer was not yet acknowledged:
             * fenced and deregistered (the delete rule) */
            atomic_store(&t->done, true);
            return NULL;
        }
        assert_true(rc == 0 || rc == 1);
        pthread_mutex_lock(&t->mu);
        while (!t->answered)
            pthread_cond_wait(&t->cv, &t->mu);
        struct tm_hb h = t->h;
        pthread_mutex_unlock(&t->mu);
        for (size_t i = 0; i < h.n; i++) {
            if (h.it[i].drop) { /* a holder acknowledges its deletes (the delete rule) */
                mc_master_offload_ack_deletes(t->f->m, t->f->a, &h.it[i].task_id, 1);
                continue;
            }
            report(t->f, t->f->a, h.it[i].task_id, h.it[i].key, (i % 5 == 4) ? -1 : 0, h.it[i].size,
                   h.it[i].version, h.it[i].crc);
            atomic_fetch_add(&t->reports, 1);
        }
        if (h.n == 0 && atomic_load(&t->stop)) {
            atomic_store(&t->done, true);
            return NULL;
        }
    }
}

static void *mt_ticker(void *arg)
{
    struct mt *t = arg;
    while (!atomic_load(&t->stop)) {
        mc_master_tick_offload(t->f->m);
        mc_master_tick_reaper(t->f->m);
        mc_master_batch_evict(t->f->m, 0.01, 0.01, NULL);
    }
    return NULL;
}

static void test_threads_holder_puts_removes_ticks(void **state)
{
    (void)state;
    struct mt t = {.f = fx_new(MODE_PUT_END)};
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    pthread_t holder, ticker;
    assert_int_equal(pthread_create(&holder, NULL, mt_holder, &t), 0);
    assert_int_equal(pthread_create(&ticker, NULL, mt_ticker, &t), 0);
    char k[32];
    for (int i = 0; i < 400; i++) {
        snprintf(k, sizeof(k), "t%d", i);
        put(t.f, k, 512);
        if (i % 3 == 0) {
            snprintf(k, sizeof(k), "t%d", i / 2);
            mc_master_remove(t.f->m, k, strlen(k), true);
        }
    }
    atomic_store(&t.stop, true);
    pthread_join(ticker, NULL);
    /* answer the holder's polls (empty, at their deadline) until it saw stop and left */
    uint64_t deadline = mc_now_ms() + 20000;
    while (!atomic_load(&t.done)) {
        assert_true(mc_now_ms() < deadline);
        mc_fake_clock_advance_ms(&t.f->fc, 20000);
        mc_master_tick_offload(t.f->m);
        sched_yield();
    }
    pthread_join(holder, NULL);
    mc_master_tick_reaper(t.f->m); /* tasks left (any) expire now: the clock moved far */
    struct mc_offload_stats st = ostats(t.f);
    assert_true(atomic_load(&t.reports) > 0);
    assert_int_equal(st.queued, st.completed + st.nacked + st.expired + st.cancelled +
                                    st.stale_refused + st.in_flight);
    assert_int_equal(st.in_flight, 0);
    pthread_cond_destroy(&t.cv);
    pthread_mutex_destroy(&t.mu);
    fx_free(t.f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_enable_offload_queues_at_put_end, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_disk_only_readable_never_evictable, fx_setup,
                                        fx_teardown),
        cmocka_unit_test(test_long_poll_answered_on_arrival_and_at_deadline),
        cmocka_unit_test(test_heartbeat_errors),
        cmocka_unit_test_setup_teardown(test_heartbeat_disable_offloading_cancels_queued, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_nack_releases_pin, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_stale_version_completion_refused, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_remove_reput_late_completion_never_attaches, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_batch_remove_before_pull_leaves_no_orphan, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_remove_all_cancels_and_deletes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_task_expiry_releases_pin, fx_setup, fx_teardown),
        cmocka_unit_test(test_queue_limit),
        cmocka_unit_test(test_force_evict_alone_behaves_like_put_end_queueing),
        cmocka_unit_test(test_offload_on_evict_without_enable_offload_refused),
        cmocka_unit_test(test_offload_on_evict_queues_at_eviction_selective),
        cmocka_unit_test(test_offload_on_evict_queues_at_eviction_full),
        cmocka_unit_test(test_offload_on_evict_no_local_disk_nothing_offloaded),
        cmocka_unit_test(test_offload_force_evict_cap),
        cmocka_unit_test(test_disk_copy_leaves_dram_without_new_offload),
        cmocka_unit_test_setup_teardown(test_grouped_object_gets_disk_copy, fx_setup, fx_teardown),
        cmocka_unit_test(test_eviction_with_enable_offload_keeps_keys),
        cmocka_unit_test(test_eviction_with_offload_on_evict_keeps_keys),
        cmocka_unit_test(test_eviction_with_offload_force_evict_never_stalls),
        cmocka_unit_test(test_reregister_after_restart_recreates_same_epoch_does_not),
        cmocka_unit_test(test_reregister_never_resurrects_what_this_incarnation_dropped),
        cmocka_unit_test_setup_teardown(test_holder_expiry_drops_replicas_and_tasks, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_unmount_local_disk, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_remount_moves_endpoint, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_evict_disk_replica, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_metrics_rendered, fx_setup, fx_teardown),
        cmocka_unit_test(test_threads_holder_puts_removes_ticks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
