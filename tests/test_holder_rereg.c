/*
 * test_holder_rereg.c - the master's side of the DRAM holder stream, on the core with the
 * injected clock: commits carry each replica's place; a holder whose backlog passes
 * holder_backlog_limit is fenced (its next poll REPLICA_IS_GONE); re-registration into a new
 * master claims the exact ranges, refuses a range already taken, a version of this
 * incarnation and a key it has, and later Puts never overlap a re-registered range. Pushes for
 * an owner without a stream are dropped and draw no id.
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
    size_t drop_items; /* every drop handed out, with an id or not */
};

static void capture(void *arg, struct mc_task_list *tasks)
{
    struct cap *c = arg;
    c->calls++;
    for (struct mc_task *t = tasks->head; t && c->n < 64; t = t->next) {
        if (!t->has_src) {
            c->drop_items++;
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

/* A test's master and holders: a (tm_id(1), segment sa = tm_seg(1, ...)) and, in the tests of
 * two, b (tm_id(2), sb); what each one's heartbeats brought (ca, cb). */
struct rig {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id a, b;
    struct mc_segment_desc sa, sb;
    struct cap ca, cb;
    int holders; /* 1 or 2 */
};

/* A heartbeat of each holder, its tasks into its capture. */
static void beat(struct rig *r)
{
    assert_int_equal(mc_master_holder_heartbeat(r->m, r->a, 0, 0, capture, &r->ca), 0);
    if (r->holders > 1)
        assert_int_equal(mc_master_holder_heartbeat(r->m, r->b, 0, 0, capture, &r->cb), 0);
}

/* The clock at 1000 s, a master (backlog, with_offload), and holders (1: a; 2: a and b) each
 * with a segment of seg_bytes mounted and its stream opened (the first heartbeat). */
static void rig_start(struct rig *r, uint32_t backlog, bool with_offload, uint64_t seg_bytes,
                      int holders)
{
    memset(r, 0, sizeof(*r));
    r->holders = holders;
    mc_fake_clock_init(&r->fc, 1000ull * 1000000000ull);
    r->m = new_master_with(&r->fc, backlog, with_offload);
    r->a = tm_id(1);
    r->b = tm_id(2);
    r->sa = tm_seg(1, seg_bytes);
    r->sb = tm_seg(2, seg_bytes);
    assert_int_equal(mc_master_mount_segment(r->m, r->a, &r->sa, NULL), MC_OK);
    if (holders > 1)
        assert_int_equal(mc_master_mount_segment(r->m, r->b, &r->sb, NULL), MC_OK);
    beat(r);
}

/* A Put by a of key with two replicas, one on each holder's segment. */
static void put_twice(struct rig *r, const char *key, uint32_t crc)
{
    struct mc_master_replicate_config rc2;
    mc_master_replicate_config_init(&rc2);
    rc2.replica_num = 2;
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(r->m, r->a, key, strlen(key), 4096, &rc2, &ps), MC_OK);
    assert_int_equal(ps.nreplicas, 2);
    assert_int_equal(mc_master_put_end(r->m, r->a, key, strlen(key), ps.version, crc, true), MC_OK);
}

/* A new incarnation on the same fake clock (its version base above the last one's). */
static struct mc_master *restart(struct mc_master *m, struct mc_fake_clock *fc, bool with_offload)
{
    mc_master_free(m);
    struct timespec ts = {0, 3 * 1000000L};
    nanosleep(&ts, NULL);
    return new_master_with(fc, 0, with_offload);
}

/* A Put of key by c with its replica on the segment named seg. */
static void put_on(struct mc_master *m, struct mc_id c, const char *key, const char *seg)
{
    struct mc_master_replicate_config rc;
    mc_master_replicate_config_init(&rc);
    const char *pref[1] = {seg};
    rc.preferred_segments = pref;
    rc.n_preferred = 1;
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(m, c, key, strlen(key), 4096, &rc, &ps), MC_OK);
    assert_int_equal(mc_master_put_end(m, c, key, strlen(key), ps.version, 1, true), MC_OK);
}

/* Pushes for an owner that keeps no stream are dropped and draw no id: first with no stream open
 * at all (the table is not even looked at), then beside one holder that has one. A drop for
 * that holder gets the next id of the one id space (offload's, with a disk tier). */
static void test_pushes_without_a_stream(void **state)
{
    (void)state;
    struct rig r;
    memset(&r, 0, sizeof(r));
    mc_fake_clock_init(&r.fc, 1000ull * 1000000000ull);
    r.m = new_master_with(&r.fc, 0, true);
    r.a = tm_id(1);
    r.b = tm_id(2);
    r.sa = tm_seg(1, 64 * MIB);
    r.sb = tm_seg(2, 64 * MIB);
    assert_int_equal(mc_master_mount_segment(r.m, r.a, &r.sa, NULL), MC_OK);
    assert_int_equal(mc_master_mount_segment(r.m, r.b, &r.sb, NULL), MC_OK);
    struct mc_mailboxes *ids = mc_offload_mailboxes(r.m);
    assert_non_null(ids);
    uint64_t id0 = mc_mailboxes_reserve_id(ids);
    struct mc_holder_stream_stats st;
    /* no stream anywhere: a commit and a drop, both dropped */
    put_on(r.m, r.a, "k1", r.sa.name);
    assert_int_equal(mc_master_remove(r.m, "k1", 2, true), MC_OK);
    mc_holder_stream_stats(r.m, &st);
    assert_int_equal(st.commits, 0);
    assert_int_equal(st.dropped, 2);
    /* b opens its stream; a still has none */
    assert_int_equal(mc_master_holder_heartbeat(r.m, r.b, 0, 0, capture, &r.cb), 0);
    put_on(r.m, r.a, "k2", r.sa.name);
    put_on(r.m, r.b, "k3", r.sb.name);
    assert_int_equal(mc_master_remove(r.m, "k3", 2, true), MC_OK);
    assert_int_equal(mc_master_remove(r.m, "k2", 2, true), MC_OK);
    mc_holder_stream_stats(r.m, &st);
    assert_int_equal(st.commits, 2); /* k3's commit and drop */
    assert_int_equal(st.dropped, 4); /* and k2's two */
    assert_int_equal(mc_master_holder_heartbeat(r.m, r.b, 0, 0, capture, &r.cb), 0);
    assert_int_equal(r.cb.n, 1);
    assert_string_equal(r.cb.keys[0], "k3");
    assert_int_equal(r.cb.drop_items, 1);
    assert_int_equal(r.cb.ndrops, 1);
    assert_int_equal(r.cb.drop_ids[0], id0 + 1); /* drawn by the one queued drop only */
    assert_int_equal(mc_mailboxes_reserve_id(ids), id0 + 2);
    mc_master_free(r.m);
}

static void test_backlog_fences(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 4, false, 64 * MIB, 1);
    assert_int_equal(rg.ca.calls, 1);
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(tm_put(rg.m, rg.a, key, 4096), MC_OK);
    }
    struct mc_holder_stream_stats st;
    mc_holder_stream_stats(rg.m, &st);
    assert_int_equal(st.fenced, 1);
    assert_int_equal(mc_master_holder_heartbeat(rg.m, rg.a, 0, 0, capture, &rg.ca),
                     MC_ERR_REPLICA_IS_GONE);
    beat(&rg); /* fresh again */
    mc_master_free(rg.m);
}

static void test_reregister_rules(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 0, false, 1 * MIB, 1);
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(tm_put(rg.m, rg.a, key, 4096 * (uint64_t)(i + 1)), MC_OK);
    }
    beat(&rg);
    assert_int_equal(rg.ca.n, 8);

    /* a new incarnation (a later version base), the same segment mounted again */
    rg.m = restart(rg.m, &rg.fc, false);
    uint64_t epoch = 0;
    assert_int_equal(mc_master_mount_segment(rg.m, rg.a, &rg.sa, &epoch), MC_OK);
    int st[64];
    /* the wrong mount epoch: refused */
    assert_int_equal(
        mc_master_holder_reregister(rg.m, rg.a, rg.sa.id, epoch + 1, rg.ca.items, 1, st), MC_OK);
    assert_int_equal(st[0], MC_ERR_REPLICA_IS_GONE);
    assert_int_equal(
        mc_master_holder_reregister(rg.m, rg.a, rg.sa.id, epoch, rg.ca.items, rg.ca.n, st), MC_OK);
    for (size_t i = 0; i < rg.ca.n; i++)
        assert_int_equal(st[i], MC_OK);
    for (size_t i = 0; i < rg.ca.n; i++) {
        struct mc_get_result g;
        assert_int_equal(
            mc_master_get_replica_list(rg.m, rg.ca.items[i].key, rg.ca.items[i].key_len, &g),
            MC_OK);
        assert_int_equal(g.version, rg.ca.items[i].version);
        assert_int_equal(g.replicas[0].u.mem.offset, rg.ca.items[i].offset);
        assert_int_equal(g.replicas[0].u.mem.mount_epoch, epoch);
    }
    /* again: the same replica is confirmed; the key elsewhere (the master has it); another key on
     * a taken range; a version of this incarnation */
    assert_int_equal(mc_master_holder_reregister(rg.m, rg.a, rg.sa.id, epoch, rg.ca.items, 1, st),
                     MC_OK);
    assert_int_equal(st[0], MC_OK);
    struct mc_hrereg_item bad[3] = {rg.ca.items[0], rg.ca.items[1], rg.ca.items[2]};
    bad[0].offset = 800 * 1024;
    bad[1].key = "other";
    bad[1].key_len = 5;
    bad[2].key = "newer";
    bad[2].key_len = 5;
    bad[2].version = rg.m->version_base + 1;
    bad[2].offset = 900 * 1024;
    assert_int_equal(mc_master_holder_reregister(rg.m, rg.a, rg.sa.id, epoch, bad, 3, st), MC_OK);
    assert_int_equal(st[0], MC_ERR_INVALID_VERSION);
    assert_int_equal(st[1], MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(st[2], MC_ERR_OBJECT_NOT_FOUND);
    /* new Puts fill the rest and never overlap a re-registered range */
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "n%d", i);
        if (tm_put(rg.m, rg.a, key, 4096) != MC_OK)
            break;
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(rg.m, key, strlen(key), &g), MC_OK);
        uint64_t off = g.replicas[0].u.mem.offset;
        for (size_t k = 0; k < rg.ca.n; k++)
            assert_false(off < rg.ca.items[k].offset + rg.ca.items[k].size &&
                         rg.ca.items[k].offset < off + 4096);
    }
    mc_master_free(rg.m);
}

static void done_cb(void *arg, int rc)
{
    int *d = arg;
    *d = rc == MC_OK ? 1 : -1;
}

/* A Remove of key that holder a (its heartbeats into c) acknowledges: pending until a's next
 * heartbeat brings the drop and a acks it, then answered. */
static void remove_acked(struct mc_master *m, struct mc_id a, struct cap *c, const char *key)
{
    int done = 0;
    assert_int_equal(mc_master_remove_wait(m, key, strlen(key), false, done_cb, &done),
                     MC_MASTER_PENDING);
    size_t before = c->ndrops;
    assert_int_equal(mc_master_holder_heartbeat(m, a, 0, 0, capture, c), 0);
    assert_true(c->ndrops > before);
    assert_int_equal(mc_master_holder_ack(m, a, c->drop_ids + before, c->ndrops - before), 1);
    assert_int_equal(done, 1);
}

/* The delete rule for DRAM copies (no disk tier): a Remove answers once the holder acked its
 * drop; a holder silent past holder_delete_timeout is fenced and the Remove answers. */
static void test_remove_waits_for_holder(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 0, false, 64 * MIB, 1);
    assert_int_equal(tm_put(rg.m, rg.a, "k1", 4096), MC_OK);
    assert_int_equal(tm_put(rg.m, rg.a, "k2", 4096), MC_OK);
    int done = 0;
    assert_int_equal(mc_master_remove_wait(rg.m, "k1", 2, false, done_cb, &done),
                     MC_MASTER_PENDING);
    assert_int_equal(done, 0);
    beat(&rg);
    assert_true(rg.ca.ndrops >= 1);
    assert_int_equal(done, 0);
    assert_int_equal(mc_master_holder_ack(rg.m, rg.a, rg.ca.drop_ids, rg.ca.ndrops), 1);
    assert_int_equal(done, 1);

    /* silent holder: fenced after the timeout, then the Remove answers */
    done = 0;
    assert_int_equal(mc_master_remove_wait(rg.m, "k2", 2, false, done_cb, &done),
                     MC_MASTER_PENDING);
    mc_fake_clock_advance_ms(&rg.fc, 1000);
    mc_master_tick_eviction(rg.m);
    assert_int_equal(done, 0);
    mc_fake_clock_advance_ms(&rg.fc, 1500);
    mc_master_tick_eviction(rg.m);
    assert_int_equal(done, 1);
    assert_int_equal(mc_master_holder_heartbeat(rg.m, rg.a, 0, 0, capture, &rg.ca),
                     MC_ERR_REPLICA_IS_GONE);
    mc_master_free(rg.m);
}

/* A holder fenced for a drop it never acknowledged keeps its fence record (holder, version) in
 * the master's fence table (in etcd under HA). A master that knows the record (HA: loaded from
 * etcd at the take-over) refuses that holder's re-registered copies at or below the version, so
 * the removed key does not come back; without the record the same items are taken. */
static void test_fenced_holder_reregisters_nothing_removed(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 0, false, 64 * MIB, 1);
    assert_int_equal(tm_put(rg.m, rg.a, "k1", 4096), MC_OK);
    assert_int_equal(tm_put(rg.m, rg.a, "k2", 4096), MC_OK);
    beat(&rg);
    assert_int_equal(rg.ca.n, 2); /* the holder's index: k1 and k2 */
    uint64_t v2 =
        strcmp(rg.ca.items[1].key, "k2") == 0 ? rg.ca.items[1].version : rg.ca.items[0].version;
    int done = 0;
    assert_int_equal(mc_master_remove_wait(rg.m, "k2", 2, false, done_cb, &done),
                     MC_MASTER_PENDING);
    mc_fake_clock_advance_ms(&rg.fc, 2500); /* the holder is silent past the timeout */
    mc_master_tick_eviction(rg.m);
    assert_int_equal(done, 1);
    struct mc_fences *f = mc_master_fences(rg.m);
    assert_non_null(f);
    uint64_t fv = mc_fences_get(f, rg.a);
    assert_true(fv >= v2);

    for (int loaded = 1; loaded >= 0; loaded--) {
        rg.m = restart(rg.m, &rg.fc, false);
        if (loaded)
            assert_int_equal(mc_fences_load(mc_master_fences(rg.m), rg.a, fv), 0);
        uint64_t epoch = 0;
        assert_int_equal(mc_master_mount_segment(rg.m, rg.a, &rg.sa, &epoch), MC_OK);
        int st[64];
        assert_int_equal(
            mc_master_holder_reregister(rg.m, rg.a, rg.sa.id, epoch, rg.ca.items, rg.ca.n, st),
            MC_OK);
        for (size_t i = 0; i < rg.ca.n; i++)
            assert_int_equal(st[i], loaded ? MC_ERR_OBJECT_NOT_FOUND : MC_OK);
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(rg.m, "k2", 2, &g),
                         loaded ? MC_ERR_OBJECT_NOT_FOUND : MC_OK);
    }
    mc_master_free(rg.m);
}

/* With a disk tier configured, a Remove's tracked drop draws its id from offload's table; the
 * drops every erasure sends draw theirs from the same table. A holder acks each drop by id and an
 * ack settles the waiting delete of that id, so two drops may never share one: an ack for one
 * key's drop would complete another key's Remove before its holder dropped it. */
static void test_drop_ids_unique_with_offload(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 0, true, 64 * MIB, 1);
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "u%d", i);
        assert_int_equal(tm_put(rg.m, rg.a, key, 4096), MC_OK);
    }
    beat(&rg);
    /* offload tasks handed to a disk holder draw from offload's table too: a few of them */
    for (int i = 0; i < 8; i++)
        (void)mc_mailboxes_reserve_id(mc_offload_mailboxes(rg.m));
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "u%d", i);
        remove_acked(rg.m, rg.a, &rg.ca, key);
    }
    for (size_t i = 0; i < rg.ca.ndrops; i++)
        for (size_t j = i + 1; j < rg.ca.ndrops; j++)
            if (rg.ca.drop_ids[i] == rg.ca.drop_ids[j])
                fail_msg("drops %zu and %zu share the id %llu", i, j,
                         (unsigned long long)rg.ca.drop_ids[i]);
    mc_master_free(rg.m);
}

/* After a restart, a key re-registered, then removed (answered: its holder acked), must not
 * come back when another copy of it is re-registered later (a second holder's, a late batch):
 * the removal is a tombstone of the recovery window, which DRAM re-registration honours as disk
 * re-registration does. */
static void test_removed_key_not_recreated(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 0, true, 1 * MIB, 1);
    assert_int_equal(tm_put(rg.m, rg.a, "gone", 4096), MC_OK);
    beat(&rg);
    assert_int_equal(rg.ca.n, 1);

    rg.m = restart(rg.m, &rg.fc, true);
    uint64_t epoch = 0;
    assert_int_equal(mc_master_mount_segment(rg.m, rg.a, &rg.sa, &epoch), MC_OK);
    beat(&rg);
    int st[4];
    assert_int_equal(mc_master_holder_reregister(rg.m, rg.a, rg.sa.id, epoch, rg.ca.items, 1, st),
                     MC_OK);
    assert_int_equal(st[0], MC_OK);
    remove_acked(rg.m, rg.a, &rg.ca, "gone");
    /* the same copy again (its range is free again): refused, the key stays removed */
    assert_int_equal(mc_master_holder_reregister(rg.m, rg.a, rg.sa.id, epoch, rg.ca.items, 1, st),
                     MC_OK);
    assert_int_equal(st[0], MC_ERR_OBJECT_NOT_FOUND);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(rg.m, "gone", 4, &g), MC_ERR_OBJECT_NOT_FOUND);
    mc_master_free(rg.m);
}

static uint64_t key_count(struct mc_master *m)
{
    struct mc_master_stats ms;
    mc_master_get_stats(m, &ms);
    return ms.key_count;
}

static size_t item_of(const struct cap *c, const char *key)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0)
            return i;
    fail_msg("no item of %s", key);
    return 0;
}

/* No disk tier: a key with two DRAM replicas (holders a and b) is re-registered by a, then
 * removed (a acks its drop); b's copy, re-registered after the Remove answered, must not bring
 * it back (the removal is a tombstone of the recovery window, kept by the holder stream when
 * there is no offload). After the window nothing absent is recreated at all. */
static void test_dram_only_removal_is_a_tombstone(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 0, false, 1 * MIB, 2);
    put_twice(&rg, "twice", 77);
    put_twice(&rg, "late", 77);
    beat(&rg);
    assert_int_equal(rg.ca.n, 2);
    assert_int_equal(rg.cb.n, 2);

    rg.m = restart(rg.m, &rg.fc, false);
    uint64_t ea = 0, eb = 0;
    assert_int_equal(mc_master_mount_segment(rg.m, rg.a, &rg.sa, &ea), MC_OK);
    assert_int_equal(mc_master_mount_segment(rg.m, rg.b, &rg.sb, &eb), MC_OK);
    beat(&rg);
    int st[4];
    assert_int_equal(
        mc_master_holder_reregister(rg.m, rg.a, rg.sa.id, ea, rg.ca.items, rg.ca.n, st), MC_OK);
    assert_int_equal(st[0], MC_OK);
    assert_int_equal(st[1], MC_OK);
    remove_acked(rg.m, rg.a, &rg.ca, "twice");
    /* b's copy of the removed key comes later: refused; its copy of the other key is fine */
    size_t tw = item_of(&rg.cb, "twice"), lt = item_of(&rg.cb, "late");
    assert_int_equal(mc_master_holder_reregister(rg.m, rg.b, rg.sb.id, eb, &rg.cb.items[tw], 1, st),
                     MC_OK);
    assert_int_equal(st[0], MC_ERR_OBJECT_NOT_FOUND);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(rg.m, "twice", 5, &g), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_holder_reregister(rg.m, rg.b, rg.sb.id, eb, &rg.cb.items[lt], 1, st),
                     MC_OK);
    assert_int_equal(st[0], MC_ERR_INVALID_VERSION); /* a's copy has the key */

    /* past --disk_recovery_window_sec (60 s) nothing absent is recreated: "late" removed
     * after the window, then b's copy listed again */
    mc_fake_clock_advance_ms(&rg.fc, 61000);
    mc_master_tick_eviction(rg.m);
    remove_acked(rg.m, rg.a, &rg.ca, "late");
    assert_int_equal(mc_master_holder_reregister(rg.m, rg.b, rg.sb.id, eb, &rg.cb.items[lt], 1, st),
                     MC_OK);
    assert_int_equal(st[0], MC_ERR_OBJECT_NOT_FOUND);
    mc_master_free(rg.m);
}

/* A Remove sends each holder of a MEMORY replica exactly one drop: the tracked one it waits for
 * (the erasure that follows sends no second, untracked drop); an erasure nobody waits for still
 * sends its one untracked drop. */
static void test_remove_sends_one_drop(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 0, false, 1 * MIB, 2);
    put_twice(&rg, "k", 5);
    assert_int_equal(tm_put(rg.m, rg.a, "single", 4096), MC_OK);
    beat(&rg);
    assert_int_equal(rg.ca.drop_items + rg.cb.drop_items, 0);
    int done = 0;
    assert_int_equal(mc_master_remove_wait(rg.m, "k", 1, false, done_cb, &done), MC_MASTER_PENDING);
    beat(&rg);
    assert_int_equal(rg.ca.drop_items, 1);
    assert_int_equal(rg.cb.drop_items, 1);
    assert_int_equal(mc_master_holder_ack(rg.m, rg.a, rg.ca.drop_ids, rg.ca.ndrops), 1);
    assert_int_equal(done, 0);
    assert_int_equal(mc_master_holder_ack(rg.m, rg.b, rg.cb.drop_ids, rg.cb.ndrops), 1);
    assert_int_equal(done, 1);
    /* a Remove nobody waits for: its erasure sends the one untracked drop */
    assert_int_equal(mc_master_remove(rg.m, "single", 6, false), MC_OK);
    beat(&rg);
    assert_int_equal(rg.ca.drop_items + rg.cb.drop_items, 3); /* on whichever segment it landed */
    mc_master_free(rg.m);
}

/* A holder's complete listing is authoritative for its segment's mount: a second listing of
 * the same mount confirms what it names, and what the first brought back and the second left
 * out is dropped, its range freed; a Put made since the restart is untouched; a listing not
 * marked complete drops nothing. */
static void test_listing_is_authoritative(void **state)
{
    (void)state;
    struct rig rg;
    rig_start(&rg, 0, false, 1 * MIB, 1);
    const char *keys[] = {"l0", "l1", "l2", "l3"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(tm_put(rg.m, rg.a, keys[i], 8192), MC_OK);
    beat(&rg);
    assert_int_equal(rg.ca.n, 4);

    rg.m = restart(rg.m, &rg.fc, false);
    uint64_t epoch = 0;
    assert_int_equal(mc_master_mount_segment(rg.m, rg.a, &rg.sa, &epoch), MC_OK);
    beat(&rg);
    struct mc_hrereg_batch bt = {
        .client = rg.a, .segment = rg.sa.id, .mount_epoch = epoch, .listing = 1, .complete = true};
    int st[8];
    assert_int_equal(mc_master_holder_reregister_batch(rg.m, &bt, rg.ca.items, 4, st), MC_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(st[i], MC_OK);
    assert_int_equal(tm_put(rg.m, rg.a, "fresh", 4096), MC_OK); /* a Put of this incarnation */

    /* the same mount listed again (a repeated ReMount answers the same epoch), l2 left out */
    uint64_t again = 0;
    assert_int_equal(mc_master_mount_segment(rg.m, rg.a, &rg.sa, &again), MC_OK);
    assert_int_equal(again, epoch);
    size_t l2 = item_of(&rg.ca, "l2");
    struct mc_hrereg_item second[3];
    size_t n2 = 0;
    for (size_t i = 0; i < 4; i++)
        if (i != l2)
            second[n2++] = rg.ca.items[i];
    bt.listing = 2;
    bt.complete = false; /* not the end yet: nothing dropped */
    assert_int_equal(mc_master_holder_reregister_batch(rg.m, &bt, second, 2, st), MC_OK);
    assert_int_equal(st[0], MC_OK); /* confirmed, not refused as a key the master has */
    assert_int_equal(st[1], MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(rg.m, "l2", 2, &g), MC_OK);
    bt.complete = true;
    assert_int_equal(mc_master_holder_reregister_batch(rg.m, &bt, second + 2, 1, st), MC_OK);
    assert_int_equal(st[0], MC_OK);
    assert_int_equal(mc_master_get_replica_list(rg.m, "l2", 2, &g), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(key_count(rg.m), 4); /* l2 erased with its one copy */
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(mc_master_get_replica_list(rg.m, second[i].key, second[i].key_len, &g),
                         MC_OK);
        assert_int_equal(g.replicas[0].u.mem.offset, second[i].offset);
    }
    assert_int_equal(mc_master_get_replica_list(rg.m, "fresh", 5, &g), MC_OK);
    struct mc_holder_stream_stats hs;
    mc_holder_stream_stats(rg.m, &hs);
    assert_int_equal(hs.unlisted, 1);
    /* l2's range is free again: another old copy may claim exactly it */
    struct mc_hrereg_item other = rg.ca.items[l2];
    other.key = "other";
    other.key_len = 5;
    bt.listing = 3;
    assert_int_equal(mc_master_holder_reregister_batch(rg.m, &bt, &other, 1, st), MC_OK);
    assert_int_equal(st[0], MC_OK);
    /* that listing named only "other": the three confirmed by listing 2 go, "fresh" stays */
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(mc_master_get_replica_list(rg.m, second[i].key, second[i].key_len, &g),
                         MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_get_replica_list(rg.m, "fresh", 5, &g), MC_OK);
    assert_int_equal(mc_master_get_replica_list(rg.m, "other", 5, &g), MC_OK);
    assert_int_equal(key_count(rg.m), 2);
    mc_master_free(rg.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pushes_without_a_stream),
        cmocka_unit_test(test_backlog_fences),
        cmocka_unit_test(test_reregister_rules),
        cmocka_unit_test(test_remove_waits_for_holder),
        cmocka_unit_test(test_fenced_holder_reregisters_nothing_removed),
        cmocka_unit_test(test_drop_ids_unique_with_offload),
        cmocka_unit_test(test_removed_key_not_recreated),
        cmocka_unit_test(test_dram_only_removal_is_a_tombstone),
        cmocka_unit_test(test_remove_sends_one_drop),
        cmocka_unit_test(test_listing_is_authoritative),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
