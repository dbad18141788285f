/*
 * test_delete_rule.c - the delete rule of DESIGN.md §7 in the master core (objects.c,
 * offload.c, delwait.c, fence.c), driven through master.h with a fake clock and manual ticks.
 *
 * A Remove of a key with LOCAL_DISK copies answers only once every live holder acknowledged the
 * delete durable, or was fenced after holder_delete_timeout:
 *   - the Remove is pending until the ack; the key is invisible to Gets and to re-registration
 *     from its start; the delete wakes the holder's parked poll at once;
 *   - a holder silent past the timeout is fenced: the Remove completes, the holder is
 *     deregistered, and its re-registration at or below the fence version is refused (above it
 *     is accepted);
 *   - a holder with no mailbox at the Remove is fenced at once (the Remove does not wait);
 *   - a delete that cannot be queued fails the Remove (the object stays, readable);
 *   - BatchRemove waits for all of its keys' acks in one round trip; RemoveAll waits too;
 *   - a Put of the key during or after the wait gets a fresh version the old record never
 *     shadows.
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
#include "master/fence.h"
#include "master/lock_order.h"
#include "master/mailbox.h"
#include "master/master.h"
#include "mooncake/errors.h"
#include "test_heartbeat_util.h"
#include "offload_fixture.h"
#include "test_master_util.h"

#define TIMEOUT_MS 2000ull

struct fx {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id a; /* a holder with a DRAM segment and a disk */
};

static struct fx *fx_new_limit(uint32_t queue_limit)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, OF_T0_MS * 1000000ull);
    /* mode A (enable_offload): an offload task at PutEnd */
    struct mc_master_config c = of_config(&f->fc, NULL, 9, 10000, 0);
    c.holder_delete_timeout_ms = TIMEOUT_MS;
    if (queue_limit) { /* every kind's bound, deletes' own included */
        c.offloading_queue_limit = queue_limit;
        c.delete_queue_limit = queue_limit;
    }
    f->m = of_master(&c);
    f->a = tm_id(1);
    of_mount_holder(f->m, f->a, 64 * MIB, true);
    return f;
}

static int setup(void **state)
{
    *state = fx_new_limit(0);
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    of_free(f->m);
    free(f);
    return 0;
}

/* ---- helpers -------------------------------------------------------------------------------- */

static struct tm_hb pull(struct fx *f)
{
    return tm_pull(f->m, f->a, 64);
}

static uint64_t put(struct fx *f, const char *key, uint64_t size)
{
    return of_put(f->m, f->a, key, size);
}

/* Pulls and completes every offload task queued (each gets its disk copy at a). */
static void offload_all(struct fx *f)
{
    struct tm_hb h;
    while ((h = pull(f)).n > 0) {
        for (size_t i = 0; i < h.n; i++) {
            assert_false(h.it[i].drop);
            tm_notify(f->m, f->a, &h, i, 0);
        }
    }
    mc_fake_clock_advance_ms(&f->fc, 1); /* past PutEnd's zero-length lease */
}

static int reregister(struct fx *f, const char *key, uint64_t size, uint64_t version)
{
    struct mc_offload_result it = {.key = key,
                                   .key_len = strlen(key),
                                   .size = size,
                                   .version = version,
                                   .crc32c = (uint32_t)size ^ 0x5a,
                                   .crc_valid = true};
    int rc = -12345;
    int frame = mc_master_notify_offload(f->m, f->a, &it, 1, true, &rc);
    return frame != MC_OK ? frame : rc;
}

static uint32_t disk_copies(struct fx *f, const char *key)
{
    struct mc_key_info ki;
    memset(&ki, 0, sizeof(ki));
    if (mc_master_query_key(f->m, key, strlen(key), &ki) != MC_OK)
        return 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < ki.nreplicas; i++)
        n += ki.replicas[i].type == MC_REPLICA_TYPE_LOCAL_DISK;
    return n;
}

static struct mc_offload_stats ostats(struct fx *f)
{
    return of_stats(f->m);
}

struct done {
    int calls;
    int rc;
};

static void on_done(void *arg, int rc)
{
    struct done *d = arg;
    d->calls++;
    d->rc = rc;
}

static void ack(struct fx *f, uint64_t task_id, int settled)
{
    assert_int_equal(mc_master_offload_ack_deletes(f->m, f->a, &task_id, 1), settled);
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* The Remove waits for the holder's ack; the key is gone for Gets and re-registration at once. */
static void test_remove_completes_on_ack(void **state)
{
    struct fx *f = *state;
    uint64_t v = put(f, "k", 100);
    offload_all(f);
    assert_int_equal(disk_copies(f, "k"), 1);
    struct done d = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "k", 1, false, on_done, &d), MC_MASTER_PENDING);
    assert_int_equal(d.calls, 0);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_ERR_OBJECT_NOT_FOUND);
    /* a record of k (this holder's, or any other's) cannot bring it back meanwhile */
    assert_int_equal(reregister(f, "k", 100, v), MC_ERR_OBJECT_NOT_FOUND);
    struct tm_hb h = pull(f);
    assert_int_equal(h.n, 1);
    assert_true(h.it[0].drop);
    assert_string_equal(h.it[0].key, "k");
    assert_int_equal(h.it[0].version, v);
    assert_int_not_equal(h.it[0].task_id, 0);
    /* a tick before the timeout changes nothing */
    mc_fake_clock_advance_ms(&f->fc, TIMEOUT_MS - 1);
    assert_int_equal(mc_master_tick_offload(f->m), 0);
    assert_int_equal(d.calls, 0);
    ack(f, h.it[0].task_id + 1000, 0); /* an unknown id settles nothing */
    assert_int_equal(d.calls, 0);
    ack(f, h.it[0].task_id, 1);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, MC_OK);
    ack(f, h.it[0].task_id, 0); /* a repeated ack is ignored */
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.deletes_acked, 1);
    assert_int_equal(st.holders_fenced, 0);
    assert_int_equal(st.deletes_outstanding, 0);
    assert_int_equal(st.disk_replicas, 0);
    /* the holder is still registered; the tick at timeout - 1 had pushed the unacknowledged
     * delete again: the copy comes, and its ack settles nothing more */
    struct tm_hb again = pull(f);
    assert_int_equal(again.n, 1);
    assert_int_equal(again.it[0].task_id, h.it[0].task_id);
    ack(f, again.it[0].task_id, 0);
    assert_int_equal(d.calls, 1);
    assert_int_equal(pull(f).n, 0);
}

/* A Remove without a disk copy answers at once; a pending one is woken at the holder at once. */
static void test_delete_wakes_parked_poll(void **state)
{
    struct fx *f = *state;
    put(f, "m", 10);
    put(f, "n", 10);
    offload_all(f);
    /* the holder parks its long-poll */
    struct tm_hb h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 0, 1000, tm_on_hb, &h), 0);
    assert_int_equal(h.calls, 0);
    struct done d = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "m", 1, false, on_done, &d), MC_MASTER_PENDING);
    /* answered by the Remove's own thread, no tick, no clock advance */
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.n, 1);
    assert_true(h.it[0].drop);
    assert_string_equal(h.it[0].key, "m");
    ack(f, h.it[0].task_id, 1);
    assert_int_equal(d.calls, 1);
    /* a key with no disk copy (n's DRAM and disk are both there: drop its disk copy first) */
    put(f, "p", 10); /* its offload task is queued, never pulled: no record can exist */
    mc_fake_clock_advance_ms(&f->fc, 1);
    struct done d2 = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "p", 1, false, on_done, &d2), MC_OK);
    assert_int_equal(d2.calls, 0);
    assert_int_equal(mc_master_remove_wait(f->m, "nope", 4, false, on_done, &d2),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(d2.calls, 0);
}

/* A holder silent past holder_delete_timeout is fenced; its re-registration at or below the
 * fence version is refused, above it accepted. */
static void test_timeout_fences_holder(void **state)
{
    struct fx *f = *state;
    uint64_t vl = put(f, "l", 10); /* stays: a copy at a below the fence */
    uint64_t vk = put(f, "k", 20);
    offload_all(f);
    struct done d = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "k", 1, false, on_done, &d), MC_MASTER_PENDING);
    /* the holder never answers */
    mc_fake_clock_advance_ms(&f->fc, TIMEOUT_MS - 1);
    assert_int_equal(mc_master_tick_offload(f->m), 0);
    assert_int_equal(d.calls, 0);
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_tick_offload(f->m), 1);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, MC_OK);
    struct mc_offload_stats st = ostats(f);
    assert_int_equal(st.holders_fenced, 1);
    assert_int_equal(st.deletes_outstanding, 0);
    assert_int_equal(st.holders, 0); /* deregistered as by its expiry */
    struct tm_hb h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(mc_master_offload_heartbeat(f->m, f->a, true, 0, 0, tm_on_hb, &h),
                     MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(mc_master_tick_monitor(f->m) >= 0, 1); /* the sweep drops its replicas */
    assert_int_equal(disk_copies(f, "l"), 0);
    /* it comes back and re-registers: nothing at or below the fence version */
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, OF_DISK_EP, 1ull << 30, true), MC_OK);
    assert_int_equal(reregister(f, "k", 20, vk), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(reregister(f, "l", 10, vl), MC_ERR_OBJECT_NOT_FOUND); /* l still exists */
    assert_int_equal(disk_copies(f, "l"), 0);
    /* a copy made after the fence is not void */
    uint64_t vj = put(f, "j", 30);
    assert_true(vj > vk);
    offload_all(f);
    assert_int_equal(disk_copies(f, "j"), 1);
    assert_int_equal(reregister(f, "j", 30, vj), MC_OK); /* already attached: accepted again */
    /* a late ack of the fenced delete settles nothing */
    ack(f, 1, 0);
    assert_int_equal(d.calls, 1);
}

/* A heartbeat answer lost with its connection loses the deletes it carried (the mailbox forgot
 * them once handed out): unacknowledged, a delete is pushed again after a quarter of the timeout,
 * so the holder acknowledges it and is not fenced. */
static void test_lost_answer_resent(void **state)
{
    struct fx *f = *state;
    uint64_t v = put(f, "k", 10);
    offload_all(f);
    struct done d = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "k", 1, false, on_done, &d), MC_MASTER_PENDING);
    struct tm_hb lost = pull(f); /* never reaches the holder */
    assert_int_equal(lost.n, 1);
    assert_int_equal(mc_master_tick_offload(f->m), 0);
    assert_int_equal(pull(f).n, 0); /* not yet: a quarter of the timeout */
    mc_fake_clock_advance_ms(&f->fc, TIMEOUT_MS / 4);
    assert_int_equal(mc_master_tick_offload(f->m), 0);
    struct tm_hb h = pull(f);
    assert_int_equal(h.n, 1);
    assert_true(h.it[0].drop);
    assert_string_equal(h.it[0].key, "k");
    assert_int_equal(h.it[0].version, v);
    assert_int_equal(h.it[0].task_id, lost.it[0].task_id); /* the same delete, again */
    ack(f, h.it[0].task_id, 1);
    assert_int_equal(d.calls, 1);
    mc_fake_clock_advance_ms(&f->fc, TIMEOUT_MS);
    assert_int_equal(mc_master_tick_offload(f->m), 0); /* nothing left to fence */
    assert_int_equal(ostats(f).holders_fenced, 0);
}

/* Under HA a fence counts once its record is in etcd (fence.h, ha_fence.c): the Remove that
 * waits for a silent holder completes only after the fence is stored, not at the fence. */
static void test_fence_waits_for_durable_record(void **state)
{
    struct fx *f = *state;
    struct mc_fences *fences = mc_master_fences(f->m);
    assert_non_null(fences);
    mc_fences_require_durable(fences);
    uint64_t vk = put(f, "k", 20);
    offload_all(f);
    struct done d = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "k", 1, false, on_done, &d), MC_MASTER_PENDING);
    mc_fake_clock_advance_ms(&f->fc, TIMEOUT_MS);
    assert_int_equal(mc_master_tick_offload(f->m), 1);
    assert_int_equal(ostats(f).holders_fenced, 1);
    assert_int_equal(mc_fences_get(fences, f->a), vk);
    assert_int_equal(d.calls, 0); /* fenced, but the record is not in etcd yet */
    assert_int_equal(mc_fences_pending(fences), 1);
    mc_fake_clock_advance_ms(&f->fc, 100);
    mc_master_tick_offload(f->m);
    assert_int_equal(d.calls, 0);
    assert_int_equal(ostats(f).holders_fenced, 1); /* not fenced twice */
    mc_fences_stored(fences, f->a, vk);            /* the HA thread's txn landed */
    mc_master_tick_offload(f->m);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, MC_OK);
    assert_int_equal(ostats(f).deletes_outstanding, 0);
    assert_int_equal(ostats(f).holders_fenced, 1);
}

/* A holder with no mailbox when the Remove runs is fenced at once: nothing to wait for. */
static void test_holder_without_mailbox_fenced_at_once(void **state)
{
    struct fx *f = *state;
    uint64_t v = put(f, "k", 10);
    offload_all(f);
    /* the holder unmounts its disk (or expired): its replicas are dead until the sweep */
    assert_int_equal(mc_master_unmount_local_disk(f->m, f->a), MC_OK);
    struct done d = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "k", 1, false, on_done, &d), MC_OK);
    assert_int_equal(d.calls, 0);
    assert_int_equal(ostats(f).holders_fenced, 1);
    /* back: its record of k is void */
    assert_int_equal(mc_master_mount_local_disk(f->m, f->a, OF_DISK_EP, 1ull << 30, true), MC_OK);
    assert_int_equal(reregister(f, "k", 10, v), MC_ERR_OBJECT_NOT_FOUND);
}

/* Under HA even the holder without a mailbox holds the Remove until its fence is in etcd. */
static void test_holder_without_mailbox_waits_for_durable_fence(void **state)
{
    struct fx *f = *state;
    struct mc_fences *fences = mc_master_fences(f->m);
    mc_fences_require_durable(fences);
    uint64_t v = put(f, "k", 10);
    offload_all(f);
    assert_int_equal(mc_master_unmount_local_disk(f->m, f->a), MC_OK);
    struct done d = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "k", 1, false, on_done, &d), MC_MASTER_PENDING);
    assert_int_equal(ostats(f).holders_fenced, 1);
    assert_int_equal(mc_fences_get(fences, f->a), v);
    mc_master_tick_offload(f->m);
    assert_int_equal(d.calls, 0); /* not in etcd yet */
    mc_fences_stored(fences, f->a, v);
    mc_master_tick_offload(f->m);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, MC_OK);
    assert_int_equal(ostats(f).holders_fenced, 1);
    assert_int_equal(ostats(f).deletes_outstanding, 0);
}

/* A delete that cannot be queued fails the Remove instead of being dropped: the object stays. */
static void test_unqueued_delete_fails_remove(void **state)
{
    (void)state;
    struct fx *f = fx_new_limit(2); /* each task kind: 2 per holder */
    put(f, "a", 10);
    put(f, "b", 10);
    offload_all(f);
    put(f, "c", 10);
    offload_all(f);
    struct done d[3] = {{0}};
    assert_int_equal(mc_master_remove_wait(f->m, "a", 1, false, on_done, &d[0]), MC_MASTER_PENDING);
    assert_int_equal(mc_master_remove_wait(f->m, "b", 1, false, on_done, &d[1]), MC_MASTER_PENDING);
    /* the holder's delete queue is full */
    assert_int_equal(mc_master_remove_wait(f->m, "c", 1, false, on_done, &d[2]),
                     MC_ERR_TASK_PENDING_LIMIT_EXCEEDED);
    assert_int_equal(d[2].calls, 0);
    assert_int_equal(disk_copies(f, "c"), 1); /* still there, still listed */
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "c", 1, &g), MC_OK);
    assert_int_equal(ostats(f).deletes_refused, 1);
    /* the holder catches up: both Removes complete; then c goes too */
    struct tm_hb h = pull(f);
    assert_int_equal(h.n, 2);
    uint64_t ids[2] = {h.it[0].task_id, h.it[1].task_id};
    assert_int_equal(mc_master_offload_ack_deletes(f->m, f->a, ids, 2), 2);
    assert_int_equal(d[0].calls + d[1].calls, 2);
    mc_fake_clock_advance_ms(&f->fc, 20000); /* past c's read lease */
    assert_int_equal(mc_master_remove_wait(f->m, "c", 1, false, on_done, &d[2]), MC_MASTER_PENDING);
    h = pull(f);
    assert_int_equal(h.n, 1);
    ack(f, h.it[0].task_id, 1);
    assert_int_equal(d[2].calls, 1);
    mc_master_free(f->m);
    free(f);
}

/* BatchRemove: one answer carries every key's delete; it completes with the last ack. RemoveAll
 * waits the same way. */
static void test_batch_and_remove_all_wait(void **state)
{
    struct fx *f = *state;
    put(f, "b0", 10);
    put(f, "b1", 10);
    put(f, "b2", 10);
    offload_all(f);
    struct mc_key_ref keys[4] = {{"b0", 2}, {"b1", 2}, {"b2", 2}, {"zz", 2}};
    int rcs[4];
    struct done d = {0};
    assert_int_equal(mc_master_batch_remove_wait(f->m, keys, 4, false, rcs, on_done, &d),
                     MC_MASTER_PENDING);
    assert_int_equal(rcs[0], MC_OK);
    assert_int_equal(rcs[2], MC_OK);
    assert_int_equal(rcs[3], MC_ERR_OBJECT_NOT_FOUND);
    struct tm_hb h = pull(f);
    assert_int_equal(h.n, 3);
    ack(f, h.it[0].task_id, 1);
    ack(f, h.it[1].task_id, 1);
    assert_int_equal(d.calls, 0);
    ack(f, h.it[2].task_id, 1);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, MC_OK);

    put(f, "r0", 10);
    put(f, "r1", 10);
    offload_all(f);
    struct done da = {0};
    uint64_t removed = 0;
    assert_int_equal(mc_master_remove_all_wait(f->m, false, &removed, on_done, &da),
                     MC_MASTER_PENDING);
    assert_int_equal(removed, 2);
    h = pull(f);
    assert_int_equal(h.n, 2);
    uint64_t ids[2] = {h.it[0].task_id, h.it[1].task_id};
    assert_int_equal(mc_master_offload_ack_deletes(f->m, f->a, ids, 2), 2);
    assert_int_equal(da.calls, 1);
}

/* A Put of the key while its Remove waits gets a fresh version; the old record never shadows it,
 * before or after the ack. */
static void test_reput_never_shadowed(void **state)
{
    struct fx *f = *state;
    uint64_t v1 = put(f, "k", 10);
    offload_all(f);
    struct done d = {0};
    assert_int_equal(mc_master_remove_wait(f->m, "k", 1, false, on_done, &d), MC_MASTER_PENDING);
    uint64_t v2 = put(f, "k", 10);
    assert_true(v2 > v1);
    assert_int_not_equal(reregister(f, "k", 10, v1), MC_OK);
    struct tm_hb h = pull(f); /* the delete alone, ahead of v2's offload */
    assert_int_equal(h.n, 1);
    assert_true(h.it[0].drop);
    assert_int_equal(h.it[0].version, v1);
    ack(f, h.it[0].task_id, 1);
    assert_int_equal(d.calls, 1);
    assert_int_not_equal(reregister(f, "k", 10, v1), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    assert_int_equal(g.version, v2);
}

/* Threads (TSan): two removers wait on Removes while a holder thread pulls and acknowledges
 * deletes and a ticker ticks; every Remove completes exactly once, with MC_OK, none fenced. */
#define TN 200
struct thr {
    struct fx *f;
    _Atomic int stop;
    _Atomic int done_calls;
    int first;
};

static void on_done_count(void *arg, int rc)
{
    struct thr *t = arg;
    assert_int_equal(rc, MC_OK);
    atomic_fetch_add(&t->done_calls, 1);
}

static void *holder_thread(void *arg)
{
    struct thr *t = arg;
    while (!atomic_load(&t->stop)) {
        struct tm_hb h;
        memset(&h, 0, sizeof(h));
        if (mc_master_offload_heartbeat(t->f->m, t->f->a, true, 64, 0, tm_on_hb, &h) != 1)
            continue;
        uint64_t ids[64];
        size_t n = 0;
        for (size_t i = 0; i < h.n && i < 64; i++)
            if (h.it[i].drop)
                ids[n++] = h.it[i].task_id;
        if (n)
            mc_master_offload_ack_deletes(t->f->m, t->f->a, ids, n);
        mc_master_tick_offload(t->f->m);
    }
    return NULL;
}

struct remover {
    struct thr *t;
    int from, to;
    int pending, now;
};

static void *remover_thread(void *arg)
{
    struct remover *r = arg;
    char key[32];
    for (int k = r->from; k < r->to; k++) {
        snprintf(key, sizeof(key), "t%d", k);
        int rc = mc_master_remove_wait(r->t->f->m, key, strlen(key), false, on_done_count, r->t);
        if (rc == MC_MASTER_PENDING)
            r->pending++;
        else if (rc == MC_OK)
            r->now++;
    }
    return NULL;
}

static void test_threads_remove_and_ack(void **state)
{
    struct fx *f = *state;
    char key[32];
    for (int k = 0; k < TN; k++) {
        snprintf(key, sizeof(key), "t%d", k);
        put(f, key, 10);
    }
    offload_all(f);
    struct thr t = {.f = f};
    pthread_t ht;
    assert_int_equal(pthread_create(&ht, NULL, holder_thread, &t), 0);
    struct remover r[2] = {{.t = &t, .from = 0, .to = TN / 2}, {.t = &t, .from = TN / 2, .to = TN}};
    pthread_t rt[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&rt[i], NULL, remover_thread, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(rt[i], NULL);
    int pending = r[0].pending + r[1].pending;
    assert_int_equal(pending + r[0].now + r[1].now, TN);
    for (int i = 0; i < 5000 && atomic_load(&t.done_calls) < pending; i++)
        sched_yield();
    while (atomic_load(&t.done_calls) < pending)
        sched_yield(); /* the holder thread acks them all (the fake clock never times out) */
    atomic_store(&t.stop, 1);
    pthread_join(ht, NULL);
    assert_int_equal(atomic_load(&t.done_calls), pending);
    assert_int_equal(ostats(f).holders_fenced, 0);
    assert_int_equal(ostats(f).deletes_outstanding, 0);
    assert_int_equal(ostats(f).disk_replicas, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_remove_completes_on_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_wakes_parked_poll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_fences_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fence_waits_for_durable_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_holder_without_mailbox_waits_for_durable_fence, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_holder_without_mailbox_fenced_at_once, setup,
                                        teardown),
        cmocka_unit_test(test_unqueued_delete_fails_remove),
        cmocka_unit_test_setup_teardown(test_lost_answer_resent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_and_remove_all_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reput_never_shadowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_remove_and_ack, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
