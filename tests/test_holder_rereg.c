/*
 * test_holder_rereg.c - the master's side of the DRAM holder stream, on the core with the
 * injected clock: commits carry each replica's place; a holder whose backlog passes
 * holder_backlog_limit is fenced (its next poll REPLICA_IS_GONE); re-registration into a new
 * master claims the exact ranges, refuses a range already taken, a version of this
 * incarnation and a key it has, and later Puts never overlap a re-registered range.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "master/holder_stream.h"
#include "master/mailbox.h"
#include "master/fence.h"
#include "master/master_state.h"
#include "master/objects.h"
#include "master/offload.h"
#include "mooncake/errors.h"
#include "test_master_util.h"

#define MIB (1ull << 20)

struct cap {
    int calls;
    size_t n;
    struct mc_hrereg_item items[64];
    char keys[64][16];
    uint64_t drop_ids[64];
    size_t ndrops;
};

static void capture(void *arg, struct mc_task_list *tasks)
{
    struct cap *c = arg;
    c->calls++;
    for (struct mc_task *t = tasks->head; t && c->n < 64; t = t->next) {
        if (!t->has_src) {
            if (t->task_id && c->ndrops < 64)
                c->drop_ids[c->ndrops++] = t->task_id;
            continue;
        }
        snprintf(c->keys[c->n], sizeof(c->keys[0]), "%s", t->key);
        c->items[c->n] = (struct mc_hrereg_item){.key = c->keys[c->n],
                                                 .key_len = t->key_len,
                                                 .version = t->version,
                                                 .offset = t->src.offset,
                                                 .size = t->size,
                                                 .crc32c = t->crc32c,
                                                 .crc_valid = t->crc_valid};
        c->n++;
    }
    mc_task_list_free(tasks);
}

/* A master on the fake clock; with_offload configures a disk tier (its id space, tombstones). */
static struct mc_master *new_master_with(struct mc_fake_clock *fc, uint32_t backlog,
                                         bool with_offload)
{
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc->clock;
    c.manual_ticks = true;
    c.holder_backlog_limit = backlog;
    c.enable_offload = with_offload;
    struct mc_master *m = NULL;
    assert_int_equal(mc_master_new(&c, &m), MC_OK);
    return m;
}

static struct mc_master *new_master(struct mc_fake_clock *fc, uint32_t backlog)
{
    return new_master_with(fc, backlog, false);
}

static void test_backlog_fences(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = new_master(&fc, 4);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &s1, NULL), MC_OK);
    struct cap c = {0};
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0); /* opens it */
    assert_int_equal(c.calls, 1);
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(tm_put(m, a, key, 4096), MC_OK);
    }
    struct mc_holder_stream_stats st;
    mc_holder_stream_stats(m, &st);
    assert_int_equal(st.fenced, 1);
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0); /* fresh again */
    mc_master_free(m);
}

static void test_reregister_rules(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = new_master(&fc, 0);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 1 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &s1, NULL), MC_OK);
    struct cap c = {0};
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(tm_put(m, a, key, 4096 * (uint64_t)(i + 1)), MC_OK);
    }
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    assert_int_equal(c.n, 8);
    mc_master_free(m);

    /* a new incarnation (a later version base), the same segment mounted again */
    struct timespec ts = {0, 3 * 1000000L};
    nanosleep(&ts, NULL);
    m = new_master(&fc, 0);
    uint64_t epoch = 0;
    assert_int_equal(mc_master_mount_segment(m, a, &s1, &epoch), MC_OK);
    int st[64];
    /* the wrong mount epoch: refused */
    assert_int_equal(mc_master_holder_reregister(m, a, s1.id, epoch + 1, c.items, 1, st), MC_OK);
    assert_int_equal(st[0], MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(mc_master_holder_reregister(m, a, s1.id, epoch, c.items, c.n, st), MC_OK);
    for (size_t i = 0; i < c.n; i++)
        assert_int_equal(st[i], MC_OK);
    for (size_t i = 0; i < c.n; i++) {
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, c.items[i].key, c.items[i].key_len, &g),
                         MC_OK);
        assert_int_equal(g.version, c.items[i].version);
        assert_int_equal(g.replicas[0].u.mem.offset, c.items[i].offset);
        assert_int_equal(g.replicas[0].u.mem.mount_epoch, epoch);
    }
    /* again: the key exists; another key on a taken range; a version of this incarnation */
    struct mc_hrereg_item bad[3] = {c.items[0], c.items[1], c.items[2]};
    bad[1].key = "other";
    bad[1].key_len = 5;
    bad[2].key = "newer";
    bad[2].key_len = 5;
    bad[2].version = m->version_base + 1;
    bad[2].offset = 900 * 1024;
    assert_int_equal(mc_master_holder_reregister(m, a, s1.id, epoch, bad, 3, st), MC_OK);
    assert_int_equal(st[0], MC_ERR_INVALID_VERSION);
    assert_int_equal(st[1], MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(st[2], MC_ERR_OBJECT_NOT_FOUND);
    /* new Puts fill the rest and never overlap a re-registered range */
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "n%d", i);
        if (tm_put(m, a, key, 4096) != MC_OK)
            break;
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, key, strlen(key), &g), MC_OK);
        uint64_t off = g.replicas[0].u.mem.offset;
        for (size_t k = 0; k < c.n; k++)
            assert_false(off < c.items[k].offset + c.items[k].size &&
                         c.items[k].offset < off + 4096);
    }
    mc_master_free(m);
}

static void done_cb(void *arg, int rc)
{
    int *d = arg;
    *d = rc == MC_OK ? 1 : -1;
}

/* The delete rule for DRAM copies (no disk tier): a Remove answers once the holder acked its
 * drop; a holder silent past holder_delete_timeout is fenced and the Remove answers. */
static void test_remove_waits_for_holder(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = new_master(&fc, 0);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &s1, NULL), MC_OK);
    struct cap c = {0};
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    assert_int_equal(tm_put(m, a, "k1", 4096), MC_OK);
    assert_int_equal(tm_put(m, a, "k2", 4096), MC_OK);
    int done = 0;
    assert_int_equal(mc_master_remove_wait(m, "k1", 2, false, done_cb, &done), MC_MASTER_PENDING);
    assert_int_equal(done, 0);
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    assert_true(c.ndrops >= 1);
    assert_int_equal(done, 0);
    assert_int_equal(mc_master_holder_ack(m, a, c.drop_ids, c.ndrops), 1);
    assert_int_equal(done, 1);

    /* silent holder: fenced after the timeout, then the Remove answers */
    done = 0;
    assert_int_equal(mc_master_remove_wait(m, "k2", 2, false, done_cb, &done), MC_MASTER_PENDING);
    mc_fake_clock_advance_ms(&fc, 1000);
    mc_master_tick_eviction(m);
    assert_int_equal(done, 0);
    mc_fake_clock_advance_ms(&fc, 1500);
    mc_master_tick_eviction(m);
    assert_int_equal(done, 1);
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), MC_ERR_REPLICA_IS_GONE);
    mc_master_free(m);
}

/* A holder fenced for a drop it never acknowledged keeps its fence record (holder, version) in
 * the master's fence table (in etcd under HA). A master that knows the record (HA: loaded from
 * etcd at the take-over) refuses that holder's re-registered copies at or below the version, so
 * the removed key does not come back; without the record the same items are taken. */
static void test_fenced_holder_reregisters_nothing_removed(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = new_master(&fc, 0);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &s1, NULL), MC_OK);
    struct cap c = {0};
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    assert_int_equal(tm_put(m, a, "k1", 4096), MC_OK);
    assert_int_equal(tm_put(m, a, "k2", 4096), MC_OK);
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    assert_int_equal(c.n, 2); /* the holder's index: k1 and k2 */
    uint64_t v2 = strcmp(c.items[1].key, "k2") == 0 ? c.items[1].version : c.items[0].version;
    int done = 0;
    assert_int_equal(mc_master_remove_wait(m, "k2", 2, false, done_cb, &done), MC_MASTER_PENDING);
    mc_fake_clock_advance_ms(&fc, 2500); /* the holder is silent past the timeout */
    mc_master_tick_eviction(m);
    assert_int_equal(done, 1);
    struct mc_fences *f = mc_master_fences(m);
    assert_non_null(f);
    uint64_t fv = mc_fences_get(f, a);
    assert_true(fv >= v2);
    mc_master_free(m);

    for (int loaded = 1; loaded >= 0; loaded--) {
        struct timespec ts = {0, 3 * 1000000L};
        nanosleep(&ts, NULL);
        m = new_master(&fc, 0);
        if (loaded)
            assert_int_equal(mc_fences_load(mc_master_fences(m), a, fv), 0);
        uint64_t epoch = 0;
        assert_int_equal(mc_master_mount_segment(m, a, &s1, &epoch), MC_OK);
        int st[64];
        assert_int_equal(mc_master_holder_reregister(m, a, s1.id, epoch, c.items, c.n, st), MC_OK);
        for (size_t i = 0; i < c.n; i++)
            assert_int_equal(st[i], loaded ? MC_ERR_OBJECT_NOT_FOUND : MC_OK);
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, "k2", 2, &g),
                         loaded ? MC_ERR_OBJECT_NOT_FOUND : MC_OK);
        mc_master_free(m);
    }
}

/* With a disk tier configured, a Remove's tracked drop draws its id from offload's table; the
 * drops every erasure sends draw theirs from the same table. A holder acks each drop by id and an
 * ack settles the waiting delete of that id, so two drops may never share one: an ack for one
 * key's drop would complete another key's Remove before its holder dropped it. */
static void test_drop_ids_unique_with_offload(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = new_master_with(&fc, 0, true);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &s1, NULL), MC_OK);
    struct cap c = {0};
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "u%d", i);
        assert_int_equal(tm_put(m, a, key, 4096), MC_OK);
    }
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    /* offload tasks handed to a disk holder draw from offload's table too: a few of them */
    for (int i = 0; i < 8; i++)
        (void)mc_mailboxes_reserve_id(mc_offload_mailboxes(m));
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "u%d", i);
        int done = 0;
        assert_int_equal(mc_master_remove_wait(m, key, strlen(key), false, done_cb, &done),
                         MC_MASTER_PENDING);
        size_t before = c.ndrops;
        assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
        assert_true(c.ndrops > before);
        assert_int_equal(mc_master_holder_ack(m, a, c.drop_ids + before, c.ndrops - before), 1);
        assert_int_equal(done, 1);
    }
    for (size_t i = 0; i < c.ndrops; i++)
        for (size_t j = i + 1; j < c.ndrops; j++)
            if (c.drop_ids[i] == c.drop_ids[j])
                fail_msg("drops %zu and %zu share the id %llu", i, j,
                         (unsigned long long)c.drop_ids[i]);
    mc_master_free(m);
}

/* After a restart, a key re-registered, then removed (answered: its holder acked), must not
 * come back when another copy of it is re-registered later (a second holder's, a late batch):
 * the removal is a tombstone of the recovery window, which DRAM re-registration honours as disk
 * re-registration does. */
static void test_removed_key_not_recreated(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = new_master_with(&fc, 0, true);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 1 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &s1, NULL), MC_OK);
    struct cap c = {0};
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    assert_int_equal(tm_put(m, a, "gone", 4096), MC_OK);
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    assert_int_equal(c.n, 1);
    mc_master_free(m);

    struct timespec ts = {0, 3 * 1000000L};
    nanosleep(&ts, NULL);
    m = new_master_with(&fc, 0, true);
    uint64_t epoch = 0;
    assert_int_equal(mc_master_mount_segment(m, a, &s1, &epoch), MC_OK);
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    int st[4];
    assert_int_equal(mc_master_holder_reregister(m, a, s1.id, epoch, c.items, 1, st), MC_OK);
    assert_int_equal(st[0], MC_OK);
    int done = 0;
    assert_int_equal(mc_master_remove_wait(m, "gone", 4, false, done_cb, &done), MC_MASTER_PENDING);
    size_t before = c.ndrops;
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, &c), 0);
    assert_int_equal(mc_master_holder_ack(m, a, c.drop_ids + before, c.ndrops - before), 1);
    assert_int_equal(done, 1);
    /* the same copy again (its range is free again): refused, the key stays removed */
    assert_int_equal(mc_master_holder_reregister(m, a, s1.id, epoch, c.items, 1, st), MC_OK);
    assert_int_equal(st[0], MC_ERR_OBJECT_NOT_FOUND);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(m, "gone", 4, &g), MC_ERR_OBJECT_NOT_FOUND);
    mc_master_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backlog_fences),
        cmocka_unit_test(test_reregister_rules),
        cmocka_unit_test(test_remove_waits_for_holder),
        cmocka_unit_test(test_fenced_holder_reregisters_nothing_removed),
        cmocka_unit_test(test_drop_ids_unique_with_offload),
        cmocka_unit_test(test_removed_key_not_recreated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
