/*
 * test_master_objects.c - the master core's object operations (src/master/objects*.c, shard.c)
 * on a fake clock: Put/Get/Exist/Remove and their error codes, leases, stale Puts, soft and hard
 * pins, groups, versions and epochs, batches, unmount with objects, QueryKey; and the shard
 * table under churn (tombstones, purge rebuilds, bulk unlink by an eviction round) against a
 * model, with keys chosen to land in one shard.
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
#include "common/metrics.h"
#include "master/eviction.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/objslab.h"
#include "master/shard.h"
#include "master_fixture.h"

static int setup(void **state)
{
    *state = mfx_new(7, 64 * MIB, 64 * MIB);
    return *state ? 0 : -1;
}

static void test_config_errors(void **state)
{
    (void)state;
    struct mc_master_config c;
    struct mc_master *m;
    mc_master_config_init(&c);
    c.eviction_ratio = 1.5;
    assert_int_equal(mc_master_new(&c, &m), MC_ERR_INVALID_PARAMS);
    mc_master_config_init(&c);
    c.eviction_high_watermark_ratio = -0.1;
    assert_int_equal(mc_master_new(&c, &m), MC_ERR_INVALID_PARAMS);
    mc_master_config_init(&c);
    c.default_kv_soft_pin_ttl_ms = c.max_kv_soft_pin_ttl_ms + 1;
    assert_int_equal(mc_master_new(&c, &m), MC_ERR_INVALID_PARAMS);
    mc_master_config_init(&c);
    c.put_start_release_timeout_ms = c.put_start_discard_timeout_ms;
    assert_int_equal(mc_master_new(&c, &m), MC_ERR_INVALID_PARAMS);
    mc_master_config_init(&c);
    c.max_key_len = 0;
    assert_int_equal(mc_master_new(&c, &m), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_new(NULL, &m), MC_ERR_INVALID_PARAMS);
    mc_master_config_init(&c);
    assert_int_equal(mc_master_new(&c, &m), MC_OK);
    assert_true(mc_master_epoch(m) != 0);
    assert_int_equal(mc_master_config_get(m)->default_kv_lease_ttl_ms, 10000);
    mc_master_free(m);
}

static void test_put_get_roundtrip(void **state)
{
    struct fx *f = *state;
    const char *k = "layer0/block42";
    struct mc_put_start_result ps;
    const char *pref[] = {"seg-2"};
    struct mc_master_replicate_config cfg;
    mc_master_replicate_config_init(&cfg);
    cfg.preferred_segments = pref;
    cfg.n_preferred = 1;
    assert_int_equal(mc_master_put_start(f->m, f->a, k, strlen(k), 5000, &cfg, &ps), MC_OK);
    assert_int_equal(ps.nreplicas, 1);
    struct mc_replica_desc *d = &ps.replicas[0];
    assert_int_equal(d->type, MC_REPLICA_TYPE_MEMORY);
    assert_int_equal(d->status, MC_REPLICA_STATUS_PROCESSING);
    assert_int_equal(d->size, 5000);
    assert_string_equal(d->u.mem.segment_name, "seg-2");
    assert_string_equal(d->u.mem.endpoint, "10.0.0.2:17002");
    assert_string_equal(d->u.mem.protocol, "tcp");
    assert_string_equal(d->u.mem.transport_meta, "meta-2");
    assert_true(mc_id_eq(d->u.mem.segment_id, tm_seg(2, 1).id));
    assert_int_equal(d->u.mem.addr, tm_seg(2, 1).base + d->u.mem.offset);

    /* Not readable while PROCESSING. */
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, k, strlen(k), &g),
                     MC_ERR_REPLICA_IS_NOT_READY);
    bool ex = true;
    assert_int_equal(mc_master_exist_key(f->m, k, strlen(k), &ex), MC_OK);
    assert_false(ex);
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.key_count, 1);
    assert_int_equal(st.processing_count, 1);
    assert_int_equal(st.allocated_bytes, 5000);

    assert_int_equal(mc_master_put_end(f->m, f->a, k, strlen(k), 0, 0xdeadbeef, true), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->a, k, strlen(k), 0, 0, false), MC_OK); /* idem */
    assert_int_equal(mc_master_get_replica_list(f->m, k, strlen(k), &g), MC_OK);
    assert_int_equal(g.nreplicas, 1);
    assert_int_equal(g.replicas[0].status, MC_REPLICA_STATUS_COMPLETE);
    assert_int_equal(g.replicas[0].id, d->id);
    assert_int_equal(g.replicas[0].u.mem.offset, d->u.mem.offset);
    assert_int_equal(g.version, ps.version);
    assert_int_equal(g.size, 5000);
    assert_true(g.has_crc);
    assert_int_equal(g.crc32c, 0xdeadbeef);
    assert_int_equal(g.lease_ttl_ms, 10000);
    assert_int_equal(mc_master_exist_key(f->m, k, strlen(k), &ex), MC_OK);
    assert_true(ex);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.processing_count, 0);
    assert_int_equal(st.put_start_requests, 1);
    assert_int_equal(st.get_replica_list_requests, 2);
    assert_int_equal(st.get_replica_list_failures, 1);
}

static void test_error_codes(void **state)
{
    struct fx *f = *state;
    struct mc_put_start_result ps;
    struct mc_get_result g;
    struct mc_master_replicate_config cfg;
    char longkey[5000];
    memset(longkey, 'k', sizeof(longkey));
    /* Keys. */
    assert_int_equal(mc_master_put_start(f->m, f->a, "", 0, 10, NULL, &ps), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_put_start(f->m, f->a, longkey, 4097, 10, NULL, &ps),
                     MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_put_start(f->m, f->a, longkey, 4096, 10, NULL, &ps), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->a, "a\0b", 3, 10, NULL, &ps), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_get_replica_list(f->m, NULL, 3, &g), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_remove(f->m, "", 0, false), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_put_end(f->m, f->a, "", 0, 0, 0, false), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_master_put_revoke(f->m, f->a, "", 0, 0), MC_ERR_INVALID_KEY);
    bool ex;
    assert_int_equal(mc_master_exist_key(f->m, "", 0, &ex), MC_ERR_INVALID_KEY);
    /* Params. */
    struct mc_id zero = {0, 0};
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 0, NULL, &ps), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_put_start(f->m, zero, "k", 1, 10, NULL, &ps), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 1ull << 40, NULL, &ps),
                     MC_ERR_INVALID_PARAMS);
    mc_master_replicate_config_init(&cfg);
    cfg.replica_num = 0;
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 10, &cfg, &ps), MC_ERR_INVALID_PARAMS);
    cfg.replica_num = MC_MAX_REPLICAS + 1;
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 10, &cfg, &ps), MC_ERR_INVALID_PARAMS);
    mc_master_replicate_config_init(&cfg);
    cfg.with_soft_pin = true;
    cfg.soft_pin_ttl_ms = 24ull * 3600 * 1000 + 1;
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 10, &cfg, &ps), MC_ERR_INVALID_PARAMS);
    mc_master_replicate_config_init(&cfg);
    cfg.group_id = "g\0x";
    cfg.group_id_len = 3;
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 10, &cfg, &ps), MC_ERR_INVALID_PARAMS);
    cfg.group_id = longkey;
    cfg.group_id_len = MC_GROUP_ID_MAX;
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 10, &cfg, &ps), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_put_end(f->m, zero, "k", 1, 0, 0, false), MC_ERR_INVALID_PARAMS);
    /* Space. */
    assert_int_equal(mc_master_put_start(f->m, f->a, "huge", 4, 65 * MIB, NULL, &ps),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    /* larger than every segment (64 MiB): eviction could not help, so none is asked for */
    assert_false(atomic_load(&f->m->need_eviction));
    /* Existence. */
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 10, NULL, &ps), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->b, "k", 1, 10, NULL, &ps),
                     MC_ERR_OBJECT_ALREADY_EXISTS); /* in flight */
    assert_int_equal(mc_master_put_end(f->m, f->b, "k", 1, 0, 0, false), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_put_revoke(f->m, f->b, "k", 1, 0), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_remove(f->m, "k", 1, true), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(mc_master_put_end(f->m, f->a, "k", 1, 0, 0, false), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->a, "k", 1, 10, NULL, &ps),
                     MC_ERR_OBJECT_ALREADY_EXISTS); /* complete */
    assert_int_equal(mc_master_put_revoke(f->m, f->a, "k", 1, 0), MC_ERR_INVALID_WRITE);
    /* Absent keys. */
    assert_int_equal(mc_master_put_end(f->m, f->a, "nope", 4, 0, 0, false),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_put_revoke(f->m, f->a, "nope", 4, 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_get_replica_list(f->m, "nope", 4, &g), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_remove(f->m, "nope", 4, false), MC_ERR_OBJECT_NOT_FOUND);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "nope", 4, &ki), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_exist_key(f->m, "nope", 4, &ex), MC_OK);
    assert_false(ex);
    /* Lease. */
    assert_int_equal(mc_master_get_replica_list(f->m, "k", 1, &g), MC_OK);
    assert_int_equal(mc_master_remove(f->m, "k", 1, false), MC_ERR_OBJECT_HAS_LEASE);
    /* No segments at all. */
    struct mc_master *m2 = tm_master(&f->fc, 9);
    assert_int_equal(mc_master_put_start(m2, f->a, "k", 1, 10, NULL, &ps),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    mc_master_free(m2);
}

static void test_lease_blocks_remove(void **state)
{
    struct fx *f = *state;
    assert_int_equal(tm_put(f->m, f->a, "x", 100), MC_OK);
    assert_int_equal(tm_put(f->m, f->a, "y", 100), MC_OK);
    assert_int_equal(tm_put(f->m, f->a, "z", 100), MC_OK);
    /* PutEnd grants no lease: removable at once. */
    assert_int_equal(mc_master_remove(f->m, "z", 1, false), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "x", 1, &g), MC_OK);
    bool ex;
    assert_int_equal(mc_master_exist_key(f->m, "y", 1, &ex), MC_OK);
    assert_true(ex);
    assert_int_equal(mc_master_remove(f->m, "x", 1, false), MC_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(mc_master_remove(f->m, "y", 1, false), MC_ERR_OBJECT_HAS_LEASE);
    uint64_t n = 99;
    assert_int_equal(mc_master_remove_all(f->m, false, &n), MC_OK);
    assert_int_equal(n, 0);
    mc_fake_clock_advance_ms(&f->fc, 9999);
    assert_int_equal(mc_master_remove(f->m, "x", 1, false), MC_ERR_OBJECT_HAS_LEASE);
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_remove(f->m, "x", 1, false), MC_OK);
    /* Forced removal ignores the lease; RemoveAll(force) too, but never an in-flight Put. */
    assert_int_equal(mc_master_exist_key(f->m, "y", 1, &ex), MC_OK);
    assert_int_equal(mc_master_remove(f->m, "y", 1, true), MC_OK);
    assert_int_equal(tm_put(f->m, f->a, "p", 100), MC_OK);
    assert_int_equal(tm_put(f->m, f->a, "q", 100), MC_OK);
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(f->m, f->a, "inflight", 8, 100, NULL, &ps), MC_OK);
    assert_int_equal(mc_master_get_replica_list(f->m, "p", 1, &g), MC_OK);
    assert_int_equal(mc_master_remove_all(f->m, false, &n), MC_OK);
    assert_int_equal(n, 1); /* q */
    assert_int_equal(mc_master_remove_all(f->m, true, &n), MC_OK);
    assert_int_equal(n, 1); /* p */
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.key_count, 1);
    /* inflight, and y and p: force-removed under their leases, their space waits for the end */
    assert_int_equal(st.allocated_bytes, 300);
    assert_int_equal(mc_master_put_revoke(f->m, f->a, "inflight", 8, 0), MC_OK);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.key_count, 0);
    assert_int_equal(st.allocated_bytes, 200);
    mc_fake_clock_advance_ms(&f->fc, 10000);
    assert_int_equal(mc_master_tick_reaper(f->m), 2);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.put_start_release_cnt, 0); /* not taken-over Puts */
}

static void test_stale_put_takeover(void **state)
{
    struct fx *f = *state;
    struct mc_put_start_result ps1, ps2;
    assert_int_equal(mc_master_put_start(f->m, f->a, "s", 1, MIB, NULL, &ps1), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 29999);
    assert_int_equal(mc_master_put_start(f->m, f->b, "s", 1, MIB, NULL, &ps2),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_put_start(f->m, f->b, "s", 1, MIB, NULL, &ps2), MC_OK);
    assert_true(ps2.version > ps1.version);
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.put_start_discard_cnt, 1);
    assert_int_equal(st.key_count, 1);
    assert_int_equal(st.allocated_bytes, 2 * MIB); /* old buffers not yet released */
    /* The old writer lost the key. */
    assert_int_equal(mc_master_put_end(f->m, f->a, "s", 1, 0, 0, false), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_put_end(f->m, f->b, "s", 1, 0, 0, false), MC_OK);
    /* Released 600 s after the old PutStart, not before. */
    mc_fake_clock_advance_ms(&f->fc, 600000 - 30000 - 1);
    mc_master_tick_reaper(f->m);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.allocated_bytes, 2 * MIB);
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_tick_reaper(f->m), 1);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.allocated_bytes, MIB);
    assert_int_equal(st.put_start_release_cnt, 1);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "s", 1, &g), MC_OK);
    assert_int_equal(g.version, ps2.version);

    /* A Put nobody takes over is reaped put_start_release_timeout after its start. */
    assert_int_equal(mc_master_put_start(f->m, f->a, "t", 1, MIB, NULL, &ps1), MC_OK);
    mc_fake_clock_advance_ms(&f->fc, 599999);
    assert_int_equal(mc_master_tick_reaper(f->m), 0);
    mc_fake_clock_advance_ms(&f->fc, 1);
    assert_int_equal(mc_master_tick_reaper(f->m), 1);
    assert_int_equal(mc_master_get_replica_list(f->m, "t", 1, &g), MC_ERR_OBJECT_NOT_FOUND);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.allocated_bytes, MIB);
    assert_int_equal(st.processing_count, 0);
}

static void test_pins(void **state)
{
    struct fx *f = *state;
    struct mc_master_replicate_config cfg;
    struct mc_put_start_result ps;
    mc_master_replicate_config_init(&cfg);
    cfg.with_soft_pin = true; /* default TTL: 30 min */
    assert_int_equal(mc_master_put_start(f->m, f->a, "soft", 4, 10, &cfg, &ps), MC_OK);
    mc_master_replicate_config_init(&cfg);
    cfg.with_soft_pin = true;
    cfg.soft_pin_ttl_ms = 5000;
    assert_int_equal(mc_master_put_start(f->m, f->a, "short", 5, 10, &cfg, &ps), MC_OK);
    mc_master_replicate_config_init(&cfg);
    cfg.with_hard_pin = true;
    assert_int_equal(mc_master_put_start(f->m, f->a, "hard", 4, 10, &cfg, &ps), MC_OK);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "soft", 4, &ki), MC_OK);
    assert_int_equal(ki.soft_pin_remaining_ms, 0); /* starts at PutEnd */
    assert_false(ki.complete);
    assert_true(mc_id_eq(ki.put_owner, f->a));
    mc_fake_clock_advance_ms(&f->fc, 1000);
    assert_int_equal(mc_master_put_end(f->m, f->a, "soft", 4, 0, 0, false), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->a, "short", 5, 0, 0, false), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->a, "hard", 4, 0, 0, false), MC_OK);
    assert_int_equal(mc_master_query_key(f->m, "soft", 4, &ki), MC_OK);
    assert_int_equal(ki.soft_pin_remaining_ms, 30ull * 60 * 1000);
    assert_true(ki.complete);
    assert_false(ki.hard_pinned);
    assert_int_equal(mc_master_query_key(f->m, "hard", 4, &ki), MC_OK);
    assert_true(ki.hard_pinned);
    assert_int_equal(ki.soft_pin_remaining_ms, 0);
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.soft_pin_key_count, 2);
    /* The census bits follow the pins. */
    struct mc_shard *s;
    struct mc_object *o = mc_master_lock_find(f->m, mc_hash_key("hard", 4), "hard", 4, false, &s);
    assert_non_null(o);
    assert_true(mc_ent_bits(mc_shard_ent(s, o->ent)) & MC_ENT_HARD_PIN);
    assert_true(mc_ent_bits(mc_shard_ent(s, o->ent)) & MC_ENT_EVICTABLE);
    mc_shard_unlock(s);
    /* Expiry: the short pin ends after 5 s, the default one after 30 min. */
    mc_fake_clock_advance_ms(&f->fc, 5000);
    assert_int_equal(mc_master_query_key(f->m, "short", 5, &ki), MC_OK);
    assert_int_equal(ki.soft_pin_remaining_ms, 0);
    assert_int_equal(mc_master_tick_reaper(f->m), 1);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.soft_pin_key_count, 1);
    mc_fake_clock_advance_ms(&f->fc, 30ull * 60 * 1000);
    assert_int_equal(mc_master_query_key(f->m, "soft", 4, &ki), MC_OK);
    assert_int_equal(ki.soft_pin_remaining_ms, 0);
    assert_int_equal(mc_master_tick_reaper(f->m), 1);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.soft_pin_key_count, 0);
    o = mc_master_lock_find(f->m, mc_hash_key("soft", 4), "soft", 4, false, &s);
    assert_false(mc_ent_bits(mc_shard_ent(s, o->ent)) & MC_ENT_SOFT_PIN);
    mc_shard_unlock(s);
}

static void test_versions_and_epoch(void **state)
{
    struct fx *f = *state;
    uint64_t prev = 0;
    char key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "v%d", i);
        struct mc_put_start_result ps;
        assert_int_equal(mc_master_put_start(f->m, f->a, key, strlen(key), 64, NULL, &ps), MC_OK);
        assert_true(ps.version > mc_master_version_base(f->m));
        assert_true(ps.version > prev);
        prev = ps.version;
    }
    assert_int_equal(mc_master_epoch(f->m), 7);
}

/* Looks key up in shard si (a read lock around the lookup). */
static struct mc_object *find_in(struct fx *f, uint32_t si, const char *key, size_t len)
{
    struct mc_shard *s = &f->m->shards[si];
    mc_shard_rdlock(s);
    struct mc_object *o = mc_shard_find(s, mc_hash_key(key, len), key, len);
    mc_shard_unlock(s);
    return o;
}

/* The record of an object with a 64-byte key and one replica takes 128 bytes (a 40-byte header,
 * one 24-byte replica, the key): two such records allocated one after the other in a fresh
 * shard's slab sit 128 bytes apart (144 while the header held the group pointer). A grouped
 * object's record carries its group link behind the key (136 bytes: the 144-byte class), and the
 * link survives a replica added in front of it and one dropped. */
static void test_record_sizes(void **state)
{
    struct fx *f = *state;
    char keys[2][65];
    int found = 0;
    uint32_t shard0 = 0;
    for (int i = 0; found < 2 && i < 1000000; i++) {
        char k[65];
        snprintf(k, sizeof(k), "%064d", i);
        uint32_t si = (uint32_t)mc_hash_key(k, 64) & MC_SHARD_MASK;
        if (found == 0 || si == shard0) {
            shard0 = si;
            memcpy(keys[found++], k, sizeof(k));
        }
    }
    assert_int_equal(found, 2);
    for (int i = 0; i < 2; i++)
        assert_int_equal(tm_put(f->m, f->a, keys[i], 4096), MC_OK);
    struct mc_object *o0 = find_in(f, shard0, keys[0], 64), *o1 = find_in(f, shard0, keys[1], 64);
    assert_non_null(o0);
    assert_non_null(o1);
    assert_int_equal(o0->nrep, 1);
    assert_null(mc_obj_group(o0));
    assert_int_equal((intptr_t)((char *)o1 - (char *)o0), 128);

    /* Two grouped records in the group's shard (fresh: no other record of that class). */
    struct mc_master_replicate_config cfg;
    mc_master_replicate_config_init(&cfg);
    cfg.group_id = "rec-group";
    cfg.group_id_len = 9;
    uint32_t gshard = (uint32_t)mc_hash_key("rec-group", 9) & MC_SHARD_MASK;
    assert_int_not_equal(gshard, shard0);
    char gk[2][65];
    for (int i = 0; i < 2; i++) {
        snprintf(gk[i], sizeof(gk[i]), "g%063d", i);
        struct mc_put_start_result ps;
        assert_int_equal(mc_master_put_start(f->m, f->a, gk[i], 64, 4096, &cfg, &ps), MC_OK);
        assert_int_equal(mc_master_put_end(f->m, f->a, gk[i], 64, 0, 0, false), MC_OK);
    }
    struct mc_object *g0 = find_in(f, gshard, gk[0], 64), *g1 = find_in(f, gshard, gk[1], 64);
    assert_non_null(g0);
    assert_non_null(g1);
    assert_int_equal((intptr_t)((char *)g1 - (char *)g0), 144);
    struct mc_group *grp = mc_obj_group(g0);
    assert_non_null(grp);
    assert_ptr_equal(mc_obj_group(g1), grp);
    assert_int_equal(grp->id_len, 9);
    assert_memory_equal(grp->id, "rec-group", 9);
    /* A replica added (the record moves to a larger one) and dropped again: key and link kept. */
    struct mc_shard *s = &f->m->shards[gshard];
    mc_shard_wrlock(s);
    struct mc_object *n = mc_shard_obj_grow(s, g0);
    assert_non_null(n);
    assert_int_equal(n->nrep, 2);
    assert_ptr_equal(mc_obj_group(n), grp);
    assert_memory_equal(mc_obj_key(n), gk[0], 64);
    mc_obj_drop_replica(n, 1);
    assert_int_equal(n->nrep, 1);
    assert_ptr_equal(mc_obj_group(n), grp);
    assert_memory_equal(mc_obj_key(n), gk[0], 64);
    mc_shard_unlock(s);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, gk[0], 64, &ki), MC_OK);
    assert_string_equal(ki.group_id, "rec-group");
    assert_int_equal(mc_master_remove(f->m, gk[0], 64, true), MC_OK);
    assert_int_equal(mc_master_remove(f->m, gk[1], 64, true), MC_OK);
    assert_int_equal(atomic_load(&f->m->grouped_keys), 0);
}

static void test_groups(void **state)
{
    struct fx *f = *state;
    struct mc_master_replicate_config cfg;
    mc_master_replicate_config_init(&cfg);
    cfg.group_id = "req-17";
    cfg.group_id_len = 6;
    const char *keys[] = {"g/a", "g/b", "g/c"};
    uint32_t gshard = (uint32_t)mc_hash_key("req-17", 6) & MC_SHARD_MASK;
    for (int i = 0; i < 3; i++) {
        struct mc_put_start_result ps;
        assert_int_equal(mc_master_put_start(f->m, f->a, keys[i], 3, 100, &cfg, &ps), MC_OK);
        assert_int_equal(mc_master_put_end(f->m, f->a, keys[i], 3, 0, 0, false), MC_OK);
        /* Routed to the group's shard, found from the key alone. */
        assert_int_equal(mc_master_key_shard(f->m, mc_hash_key(keys[i], 3)), gshard);
    }
    assert_int_equal(tm_put(f->m, f->a, "loner", 100), MC_OK);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "g/b", 3, &ki), MC_OK);
    assert_string_equal(ki.group_id, "req-17");
    assert_int_equal(ki.lease_remaining_ms, 0);
    /* A Get of one member leases every member, and nothing else. */
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "g/a", 3, &g), MC_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mc_master_query_key(f->m, keys[i], 3, &ki), MC_OK);
        assert_int_equal(ki.lease_remaining_ms, 10000);
    }
    assert_int_equal(mc_master_query_key(f->m, "loner", 5, &ki), MC_OK);
    assert_int_equal(ki.lease_remaining_ms, 0);
    assert_int_equal(mc_master_remove(f->m, "g/c", 3, false), MC_ERR_OBJECT_HAS_LEASE);
    mc_fake_clock_advance_ms(&f->fc, 10000);
    assert_int_equal(mc_master_remove(f->m, "g/c", 3, false), MC_OK);
    bool ex;
    assert_int_equal(mc_master_exist_key(f->m, "g/b", 3, &ex), MC_OK);
    assert_true(ex);
    assert_int_equal(mc_master_query_key(f->m, "g/a", 3, &ki), MC_OK);
    assert_int_equal(ki.lease_remaining_ms, 10000);
    /* A key re-put outside its group moves back to its own shard. */
    assert_int_equal(mc_master_remove(f->m, "g/a", 3, true), MC_OK);
    assert_int_equal(tm_put(f->m, f->a, "g/a", 100), MC_OK);
    assert_int_equal(mc_master_query_key(f->m, "g/a", 3, &ki), MC_OK);
    assert_string_equal(ki.group_id, "");
    assert_int_equal(mc_master_remove(f->m, "g/b", 3, true), MC_OK);
    assert_int_equal(atomic_load(&f->m->grouped_keys), 0);
    assert_int_equal(mc_master_get_replica_list(f->m, "g/a", 3, &g), MC_OK);
    /* The eviction census sees the grouped bit. */
    assert_int_equal(
        mc_master_put_start(f->m, f->a, "g/z", 3, 100, &cfg, &(struct mc_put_start_result){0}),
        MC_OK);
    struct mc_shard *s;
    struct mc_object *o = mc_master_lock_find(f->m, mc_hash_key("g/z", 3), "g/z", 3, false, &s);
    assert_non_null(o);
    assert_int_equal(s->index, gshard);
    assert_true(mc_ent_bits(mc_shard_ent(s, o->ent)) & MC_ENT_GROUPED);
    assert_false(mc_ent_bits(mc_shard_ent(s, o->ent)) & MC_ENT_EVICTABLE); /* not complete */
    assert_ptr_equal(mc_shard_revalidate(s, o->ent, o->version), o);
    assert_null(mc_shard_revalidate(s, o->ent, o->version + 1));
    mc_shard_unlock(s);
}

static void test_batches(void **state)
{
    struct fx *f = *state;
    enum { N = 100 };
    struct mc_key_ref keys[N + 2];
    char names[N][24];
    uint64_t sizes[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "batch-%d", i);
        keys[i] = (struct mc_key_ref){names[i], strlen(names[i])};
        sizes[i] = 100 + (uint64_t)i;
    }
    struct mc_put_start_result *ps = calloc(N, sizeof(*ps));
    int rcs[N + 2];
    assert_int_equal(mc_master_batch_put_start(f->m, f->a, keys, sizes, N, NULL, ps, rcs), MC_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(rcs[i], MC_OK);
    /* Revoke the last 10, end the rest with CRCs. */
    assert_int_equal(mc_master_batch_put_revoke(f->m, f->a, keys + 90, NULL, 10, rcs), MC_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(rcs[i], MC_OK);
    uint32_t crcs[N];
    for (int i = 0; i < N; i++)
        crcs[i] = (uint32_t)i * 3;
    assert_int_equal(mc_master_batch_put_end(f->m, f->a, keys, NULL, crcs, N, rcs), MC_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(rcs[i], i < 90 ? MC_OK : MC_ERR_OBJECT_NOT_FOUND);
    /* Batch read: the 100 keys, an empty key and an unknown one. */
    keys[N] = (struct mc_key_ref){"", 0};
    keys[N + 1] = (struct mc_key_ref){"unknown", 7};
    struct mc_get_result *g = calloc(N + 2, sizeof(*g));
    assert_int_equal(mc_master_batch_get_replica_list(f->m, keys, N + 2, g, rcs), MC_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(rcs[i], i < 90 ? MC_OK : MC_ERR_OBJECT_NOT_FOUND);
        if (i < 90) {
            assert_int_equal(g[i].size, sizes[i]);
            assert_int_equal(g[i].crc32c, crcs[i]);
            assert_int_equal(g[i].version, ps[i].version);
            assert_int_equal(g[i].nreplicas, 1);
        }
    }
    assert_int_equal(rcs[N], MC_ERR_INVALID_KEY);
    assert_int_equal(rcs[N + 1], MC_ERR_OBJECT_NOT_FOUND);
    bool ex[N + 2];
    assert_int_equal(mc_master_batch_exist_key(f->m, keys, N + 2, ex, rcs), MC_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(rcs[i], MC_OK);
        assert_int_equal(ex[i], i < 90);
    }
    assert_int_equal(rcs[N], MC_ERR_INVALID_KEY);
    assert_int_equal(rcs[N + 1], MC_OK);
    assert_false(ex[N + 1]);
    /* Leased by the reads: a plain batch remove is refused, a forced one is not. */
    assert_int_equal(mc_master_batch_remove(f->m, keys, 2, false, rcs), MC_OK);
    assert_int_equal(rcs[0], MC_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(mc_master_batch_remove(f->m, keys, N, true, rcs), MC_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(rcs[i], i < 90 ? MC_OK : MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_batch_get_replica_list(f->m, NULL, 3, g, rcs),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_batch_get_replica_list(f->m, NULL, 0, NULL, NULL), MC_OK);
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.key_count, 0);
    mc_fake_clock_advance_ms(&f->fc, 10000); /* the forced removals' space waits for the leases */
    mc_master_tick_reaper(f->m);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.allocated_bytes, 0);
    free(g);
    free(ps);
}

static void test_unmount_drops_objects(void **state)
{
    struct fx *f = *state;
    const char *p1[] = {"seg-1"}, *p2[] = {"seg-2"};
    struct mc_master_replicate_config c1, c2, both;
    mc_master_replicate_config_init(&c1);
    c1.preferred_segments = p1;
    c1.n_preferred = 1;
    c2 = c1;
    c2.preferred_segments = p2;
    mc_master_replicate_config_init(&both);
    both.replica_num = 2;
    struct mc_put_start_result ps;
    assert_int_equal(mc_master_put_start(f->m, f->a, "on1", 3, 1000, &c1, &ps), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->a, "on1", 3, 0, 0, false), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->a, "on2", 3, 1000, &c2, &ps), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->a, "on2", 3, 0, 0, false), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->a, "dup", 3, 1000, &both, &ps), MC_OK);
    assert_int_equal(ps.nreplicas, 2);
    assert_false(mc_id_eq(ps.replicas[0].u.mem.segment_id, ps.replicas[1].u.mem.segment_id));
    assert_int_equal(mc_master_put_end(f->m, f->a, "dup", 3, 0, 0, false), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->a, "wip", 3, 1000, &c1, &ps), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, "on1", 3, &g), MC_OK);
    /* Only the owner may unmount; unknown ids are fine. */
    assert_int_equal(mc_master_unmount_segment(f->m, f->b, tm_seg(1, 1).id), MC_ERR_ILLEGAL_CLIENT);
    assert_int_equal(mc_master_unmount_segment(f->m, f->a, tm_seg(99, 1).id), MC_OK);
    assert_int_equal(mc_master_unmount_segment(f->m, f->a, tm_seg(1, 1).id), MC_OK);
    /* At once: the segment's replicas are unreadable, objects left with none are absent to
     * Get, Exist and PutEnd, and the dead segment left the global figures. */
    assert_int_equal(mc_master_get_replica_list(f->m, "on1", 3, &g), MC_ERR_OBJECT_NOT_FOUND);
    bool ex = true;
    assert_int_equal(mc_master_exist_key(f->m, "on1", 3, &ex), MC_OK);
    assert_false(ex);
    assert_int_equal(mc_master_put_end(f->m, f->a, "wip", 3, 0, 0, false), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_get_replica_list(f->m, "on2", 3, &g), MC_OK);
    assert_int_equal(mc_master_get_replica_list(f->m, "dup", 3, &g), MC_OK);
    assert_int_equal(g.nreplicas, 1);
    assert_string_equal(g.replicas[0].u.mem.segment_name, "seg-2");
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.allocated_bytes, 2000);
    assert_int_equal(st.total_capacity_bytes, 64 * MIB);
    assert_int_equal(st.segment_count, 1);
    struct mc_key_info ki;
    assert_int_equal(mc_master_query_key(f->m, "on1", 3, &ki), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_query_key(f->m, "dup", 3, &ki), MC_OK);
    assert_int_equal(ki.nreplicas, 1);
    /* The table was not swept by the call (it runs on an RPC I/O thread): the records are all
     * still there. */
    assert_int_equal(st.key_count, 4);
    /* The key can be Put again at once (its old copy is gone). */
    assert_int_equal(tm_put(f->m, f->a, "on1", 10), MC_OK);
    assert_int_equal(mc_master_get_replica_list(f->m, "on1", 3, &g), MC_OK);
    assert_string_equal(g.replicas[0].u.mem.segment_name, "seg-2");
    /* The monitor tick sweeps: dead replicas dropped, objects left with none erased. */
    assert_int_equal(mc_master_tick_monitor(f->m), 0);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.key_count, 3);
    assert_int_equal(st.processing_count, 0);
    assert_int_equal(mc_master_query_key(f->m, "wip", 3, &ki), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_master_query_key(f->m, "dup", 3, &ki), MC_OK);
    assert_int_equal(ki.nreplicas, 1);
    assert_int_equal(mc_master_query_key(f->m, "on1", 3, &ki), MC_OK);
    assert_int_equal(ki.size, 10);
    assert_int_equal(mc_master_get_replica_list(f->m, "on2", 3, &g), MC_OK);
    /* Nothing more to sweep: the next tick changes nothing. */
    assert_int_equal(mc_master_tick_monitor(f->m), 0);
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.key_count, 3);
    assert_int_equal(mc_master_unmount_segment(f->m, f->a, tm_seg(1, 1).id), MC_OK);
}

static void test_query_no_side_effects(void **state)
{
    struct fx *f = *state;
    assert_int_equal(tm_put(f->m, f->a, "q", 10), MC_OK);
    struct mc_key_info ki;
    struct mc_master_stats before, after;
    mc_master_get_stats(f->m, &before);
    for (int i = 0; i < 3; i++)
        assert_int_equal(mc_master_query_key(f->m, "q", 1, &ki), MC_OK);
    mc_master_get_stats(f->m, &after);
    assert_int_equal(ki.lease_remaining_ms, 0);
    assert_int_equal(ki.nreplicas, 1);
    assert_int_equal(ki.replicas[0].status, MC_REPLICA_STATUS_COMPLETE);
    assert_int_equal(after.get_replica_list_requests, before.get_replica_list_requests);
    assert_int_equal(mc_master_remove(f->m, "q", 1, false), MC_OK);
    struct mc_segment_info *segs;
    size_t n;
    assert_int_equal(mc_master_list_segments(f->m, &segs, &n), MC_OK);
    assert_int_equal(n, 2);
    free(segs);
}

/* ---- one shard under churn ----------------------------------------------------------------- */

#define CH_SHARD 37u
#define CH_KEYS 2000u

struct churn {
    char keys[CH_KEYS][24];
    bool present[CH_KEYS];
    uint64_t rng;
};

static uint32_t ch_rand(struct churn *c, uint32_t n)
{
    c->rng = c->rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((c->rng >> 33) % n);
}

/* CH_KEYS distinct keys that all hash to shard CH_SHARD. */
static void ch_make_keys(struct churn *c)
{
    uint32_t k = 0;
    for (uint64_t i = 0; k < CH_KEYS; i++) {
        char buf[24];
        int len = snprintf(buf, sizeof(buf), "churn-%llu", (unsigned long long)i);
        if ((mc_hash_key(buf, (size_t)len) & MC_SHARD_MASK) == CH_SHARD)
            memcpy(c->keys[k++], buf, (size_t)len + 1);
    }
}

/* Every key answers as the model says, and the shard's counts agree: live objects, non-empty
 * slots = objects + tombstones, every entry's object found again by its key at that entry. */
static void ch_check(struct fx *f, struct churn *c)
{
    uint32_t live = 0;
    for (uint32_t i = 0; i < CH_KEYS; i++) {
        bool ex = false;
        assert_int_equal(mc_master_exist_key(f->m, c->keys[i], strlen(c->keys[i]), &ex), MC_OK);
        assert_int_equal(ex, c->present[i]);
        live += c->present[i];
    }
    struct mc_shard *s = &f->m->shards[CH_SHARD];
    mc_shard_rdlock(s);
    assert_int_equal(s->n, live);
    uint32_t used = 0;
    for (uint32_t i = 0; s->slots && i <= s->mask; i++)
        used += s->slots[i] != UINT32_MAX;
    assert_int_equal(used, s->n + s->ntomb);
    assert_true(s->slots == NULL || (uint64_t)used * 4 <= (uint64_t)(s->mask + 1) * 3);
    /* no tombstone just before an empty slot: no probe needs it, and every unlink empties it */
    for (uint32_t i = 0; s->slots && i <= s->mask; i++)
        if (s->slots[i] == UINT32_MAX - 1)
            assert_int_not_equal(s->slots[(i + 1) & s->mask], UINT32_MAX);
    for (uint32_t e = 0; e < s->n; e++) {
        struct mc_object *o = mc_ent_obj(mc_shard_ent(s, e));
        assert_int_equal(o->ent, e);
        uint64_t h = mc_hash_key(mc_obj_key(o), o->key_len);
        assert_ptr_equal(mc_shard_find(s, h, mc_obj_key(o), o->key_len), o);
    }
    mc_shard_unlock(s);
}

static void ch_put(struct fx *f, struct churn *c, uint32_t i)
{
    assert_int_equal(tm_put(f->m, f->a, c->keys[i], 1024), MC_OK);
    c->present[i] = true;
}

static void test_shard_churn(void **state)
{
    struct fx *f = *state;
    struct churn *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->rng = 42;
    ch_make_keys(c);
    /* Waves: fill to a random level, drain to a random level (Remove leaves tombstones; inserts
     * reuse them; purge rebuilds and growth keep the table consistent), check after each. */
    for (int wave = 0; wave < 12; wave++) {
        uint32_t hi = CH_KEYS / 2 + ch_rand(c, CH_KEYS / 2), lo = ch_rand(c, hi / 2 + 1);
        if (wave == 6)
            lo = 0; /* empty the shard once: its memory goes back, then it grows again */
        uint32_t live = 0;
        for (uint32_t i = 0; i < CH_KEYS; i++)
            live += c->present[i];
        while (live < hi) {
            uint32_t i = ch_rand(c, CH_KEYS);
            if (!c->present[i]) {
                ch_put(f, c, i);
                live++;
            }
        }
        while (live > lo) {
            uint32_t i = ch_rand(c, CH_KEYS);
            if (c->present[i]) {
                assert_int_equal(mc_master_remove(f->m, c->keys[i], strlen(c->keys[i]), true),
                                 MC_OK);
                c->present[i] = false;
                live--;
            }
        }
        ch_check(f, c);
        if (wave == 6)
            assert_null(f->m->shards[CH_SHARD].slots);
    }
    free(c);
}

/* An eviction round that takes a random half of one shard unlinks it in bulk: exactly the
 * oldest-leased half is gone, the rest is intact, and the keys can be Put again. */
static void test_shard_bulk_unlink(void **state)
{
    struct fx *f = *state;
    struct churn *c = calloc(1, sizeof(*c));
    uint32_t *order = calloc(CH_KEYS, sizeof(*order));
    assert_non_null(c);
    assert_non_null(order);
    c->rng = 7;
    ch_make_keys(c);
    for (uint32_t i = 0; i < CH_KEYS; i++) {
        ch_put(f, c, i);
        order[i] = i;
    }
    for (uint32_t i = CH_KEYS - 1; i > 0; i--) { /* random lease order */
        uint32_t j = ch_rand(c, i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int round = 0; round < 3; round++) {
        uint32_t live = 0, idx[CH_KEYS];
        for (uint32_t i = 0; i < CH_KEYS; i++)
            if (c->present[order[i]])
                idx[live++] = order[i];
        /* Leases in this order, one ms apart, then all expired. */
        for (uint32_t i = 0; i < live; i++) {
            mc_fake_clock_advance_ms(&f->fc, 1);
            struct mc_get_result g;
            assert_int_equal(
                mc_master_get_replica_list(f->m, c->keys[idx[i]], strlen(c->keys[idx[i]]), &g),
                MC_OK);
        }
        mc_fake_clock_advance_ms(&f->fc, f->m->cfg.default_kv_lease_ttl_ms + 1);
        struct mc_evict_stats st;
        assert_int_equal(mc_master_batch_evict(f->m, 0.5, 0.5, &st), MC_OK);
        uint64_t want = (live + 1) / 2;
        assert_int_equal(st.evicted, want);
        for (uint32_t i = 0; i < want; i++)
            c->present[idx[i]] = false;
        ch_check(f, c);
        /* Half of the evicted keys come back (they reuse the tombstones). */
        for (uint32_t i = 0; i < want; i += 2)
            ch_put(f, c, idx[i]);
        ch_check(f, c);
    }
    free(order);
    free(c);
}

/* ---- metrics ------------------------------------------------------------------------------ */

/* Renders the master's registry. */
static char *scrape(struct mc_master *m)
{
    struct mc_textbuf tb;
    mc_textbuf_init(&tb);
    assert_int_equal(mc_metrics_render(mc_master_metrics(m), &tb), 0);
    return mc_textbuf_steal(&tb, NULL);
}

/* The value of the sample line "name{labels} v" (labels NULL: none), -1 when absent. Each line
 * is parsed as the exposition format writes it: name, optional {...}, one space, a number. */
static double sample(const char *text, const char *name, const char *labels)
{
    char want[256];
    if (labels)
        snprintf(want, sizeof(want), "%s{%s} ", name, labels);
    else
        snprintf(want, sizeof(want), "%s ", name);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (*l == '#' || strncmp(l, want, strlen(want)) != 0)
            continue;
        char *end;
        double v = strtod(l + strlen(want), &end);
        assert_true(*end == '\n' || *end == '\0');
        return v;
    }
    return -1;
}

static void test_metrics_series_move(void **state)
{
    struct fx *f = *state;
    char *t = scrape(f->m);
    /* Every new family is there from the start, zero-valued. */
    assert_true(sample(t, "master_batch_get_replica_list_requests_total", NULL) == 0);
    assert_true(sample(t, "master_batch_put_revoke_failed_items_total", NULL) == 0);
    assert_true(sample(t, "master_batch_exist_key_partial_successes_total", NULL) == 0);
    assert_true(sample(t, "master_value_size_bytes_count", NULL) == 0);
    assert_true(sample(t, "mem_cache_hit_nums_", NULL) == 0);
    assert_true(sample(t, "total_get_nums_", NULL) == 0);
    assert_true(sample(t, "segment_total_capacity_bytes", "segment=\"seg-1\"") == 64.0 * MIB);
    assert_true(sample(t, "segment_total_capacity_bytes", "segment=\"seg-2\"") == 64.0 * MIB);
    assert_true(sample(t, "segment_allocated_bytes", "segment=\"seg-1\"") == 0);
    free(t);

    /* BatchPutStart of three keys, one invalid: a partial success. */
    struct mc_key_ref keys[3] = {{"mk-a", 4}, {"", 0}, {"mk-b", 4}};
    uint64_t sizes[3] = {1000, 5, 100000};
    struct mc_put_start_result pr[3];
    int rcs[3];
    assert_int_equal(mc_master_batch_put_start(f->m, f->a, keys, sizes, 3, NULL, pr, rcs), MC_OK);
    assert_int_equal(rcs[0], MC_OK);
    assert_int_not_equal(rcs[1], MC_OK);
    struct mc_key_ref done[2] = {keys[0], keys[2]};
    assert_int_equal(mc_master_batch_put_end(f->m, f->a, done, NULL, NULL, 2, rcs), MC_OK);
    /* A batch revoke of keys nobody is putting: every item fails. */
    assert_int_equal(mc_master_batch_put_revoke(f->m, f->a, done, NULL, 2, rcs), MC_OK);
    t = scrape(f->m);
    assert_true(sample(t, "master_batch_put_start_requests_total", NULL) == 1);
    assert_true(sample(t, "master_batch_put_start_items_total", NULL) == 3);
    assert_true(sample(t, "master_batch_put_start_failed_items_total", NULL) == 1);
    assert_true(sample(t, "master_batch_put_start_partial_successes_total", NULL) == 1);
    assert_true(sample(t, "master_batch_put_start_failures_total", NULL) == 0);
    assert_true(sample(t, "master_batch_put_end_items_total", NULL) == 2);
    assert_true(sample(t, "master_batch_put_end_failed_items_total", NULL) == 0);
    assert_true(sample(t, "master_batch_put_revoke_failures_total", NULL) == 1);
    assert_true(sample(t, "master_batch_put_revoke_failed_items_total", NULL) == 2);
    /* Value sizes at PutEnd: 1000 in le=4096, 100000 in le=262144 (cumulative buckets). */
    assert_true(sample(t, "master_value_size_bytes_bucket", "le=\"4096\"") == 1);
    assert_true(sample(t, "master_value_size_bytes_bucket", "le=\"65536\"") == 1);
    assert_true(sample(t, "master_value_size_bytes_bucket", "le=\"262144\"") == 2);
    assert_true(sample(t, "master_value_size_bytes_bucket", "le=\"+Inf\"") == 2);
    assert_true(sample(t, "master_value_size_bytes_count", NULL) == 2);
    assert_true(sample(t, "master_value_size_bytes_sum", NULL) == 101000);
    /* Per-segment allocation adds up to the master's figure. */
    double a1 = sample(t, "segment_allocated_bytes", "segment=\"seg-1\"");
    double a2 = sample(t, "segment_allocated_bytes", "segment=\"seg-2\"");
    assert_true(a1 >= 0 && a2 >= 0 && a1 + a2 > 0);
    assert_true(a1 + a2 == sample(t, "master_allocated_bytes", NULL));
    free(t);

    /* Gets: two hits in a batch with one miss, then a single miss. */
    struct mc_key_ref gk[3] = {keys[0], {"mk-missing", 10}, keys[2]};
    struct mc_get_result gr[3];
    assert_int_equal(mc_master_batch_get_replica_list(f->m, gk, 3, gr, rcs), MC_OK);
    assert_int_equal(mc_master_get_replica_list(f->m, "mk-none", 7, &gr[0]),
                     MC_ERR_OBJECT_NOT_FOUND);
    bool ex[3];
    assert_int_equal(mc_master_batch_exist_key(f->m, gk, 3, ex, rcs), MC_OK);
    struct mc_key_ref bad[1] = {{"", 0}};
    assert_int_equal(mc_master_batch_exist_key(f->m, bad, 1, ex, rcs), MC_OK);
    t = scrape(f->m);
    assert_true(sample(t, "master_batch_get_replica_list_requests_total", NULL) == 1);
    assert_true(sample(t, "master_batch_get_replica_list_items_total", NULL) == 3);
    assert_true(sample(t, "master_batch_get_replica_list_failed_items_total", NULL) == 1);
    assert_true(sample(t, "master_batch_get_replica_list_partial_successes_total", NULL) == 1);
    assert_true(sample(t, "total_get_nums_", NULL) == 4);
    assert_true(sample(t, "valid_get_nums_", NULL) == 2);
    assert_true(sample(t, "mem_cache_hit_nums_", NULL) == 2);
    assert_true(sample(t, "mem_cache_hit_bytes_total", NULL) == 101000);
    assert_true(sample(t, "file_cache_hit_nums_", NULL) == 0);
    /* Exist: a missing key is an answer, not a failure; an invalid key is. */
    assert_true(sample(t, "master_batch_exist_key_requests_total", NULL) == 2);
    assert_true(sample(t, "master_batch_exist_key_failed_items_total", NULL) == 1);
    assert_true(sample(t, "master_batch_exist_key_failures_total", NULL) == 1);
    assert_true(sample(t, "master_batch_exist_key_partial_successes_total", NULL) == 0);
    free(t);

    /* Bad arguments count as a failed call. */
    assert_int_equal(mc_master_batch_get_replica_list(f->m, gk, 3, NULL, rcs),
                     MC_ERR_INVALID_PARAMS);
    /* An unmounted segment's series go away at the next scrape. */
    struct mc_segment_desc s2 = tm_seg(2, 64 * MIB);
    assert_int_equal(mc_master_unmount_segment(f->m, f->b, s2.id), MC_OK);
    t = scrape(f->m);
    assert_true(sample(t, "master_batch_get_replica_list_failures_total", NULL) == 1);
    assert_true(sample(t, "segment_total_capacity_bytes", "segment=\"seg-2\"") == -1);
    assert_true(sample(t, "segment_total_capacity_bytes", "segment=\"seg-1\"") == 64.0 * MIB);
    free(t);
}

/* Object records (objslab.c): per-shard size-class slabs, LIFO reuse, one empty slab kept per
 * class, long records as mallocs; and the object calls on both kinds of record. */
static void test_object_records(void **state)
{
    struct fx *f = *state;
    struct mc_shard *s = &f->m->shards[3];
    enum { N = 3000, SZ = 112, CLS = SZ / MC_SLAB_GRAIN - 1 };
    struct mc_object **v = calloc(N, sizeof(*v));
    assert_non_null(v);
    mc_shard_wrlock(s);
    assert_null(s->slabs[CLS]); /* nothing of this class in this shard yet */
    for (int i = 0; i < N; i++) {
        v[i] = mc_obj_alloc(s, SZ);
        assert_non_null(v[i]);
        assert_int_equal((uintptr_t)v[i] & 15, 0);
        assert_int_equal(v[i]->flags, 0);
        assert_int_equal(v[i]->version, 0);
        memset(v[i], (unsigned char)i, SZ); /* the whole record is ours */
    }
    for (int i = 0; i < N; i++) { /* no two records overlap */
        for (int b = 0; b < SZ; b++)
            assert_int_equal(((unsigned char *)v[i])[b], (unsigned char)i);
        v[i]->flags = 0;
    }
    /* LIFO reuse of a released record */
    struct mc_object *x = v[N / 2];
    mc_obj_free_locked(s, x);
    v[N / 2] = mc_obj_alloc(s, SZ);
    assert_ptr_equal(v[N / 2], x);
    for (int i = 0; i < N; i++)
        mc_obj_free_locked(s, v[i]);
    /* everything released: one empty slab of the class kept, and the next record comes from it */
    assert_non_null(s->slabs[CLS]);
    uintptr_t kept = (uintptr_t)s->slabs[CLS];
    x = mc_obj_alloc(s, SZ);
    assert_int_equal((uintptr_t)x & ~(uintptr_t)(MC_SLAB_SIZE - 1), kept);
    mc_obj_free_locked(s, x);
    /* a record too long for a slab class is a malloc */
    x = mc_obj_alloc(s, MC_SLAB_NCLASS * MC_SLAB_GRAIN + 1);
    assert_non_null(x);
    assert_true(x->flags & MC_OBJ_HEAP);
    mc_obj_free_locked(s, x);
    mc_shard_unlock(s);
    free(v);

    /* Put / Get / Remove with a long key (heap record) and many short ones (slab records). */
    char big[1001];
    memset(big, 'k', 1000);
    big[1000] = 0;
    assert_int_equal(tm_put(f->m, f->a, big, 100), MC_OK);
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, big, 1000, &g), MC_OK);
    char key[64];
    for (int i = 0; i < 600; i++) {
        snprintf(key, sizeof(key), "records/%d", i);
        assert_int_equal(tm_put(f->m, f->a, key, 100), MC_OK);
    }
    for (int i = 0; i < 600; i += 2) {
        snprintf(key, sizeof(key), "records/%d", i);
        assert_int_equal(mc_master_remove(f->m, key, strlen(key), false), MC_OK);
    }
    for (int i = 0; i < 600; i++) {
        snprintf(key, sizeof(key), "records/%d", i);
        bool ex = false;
        assert_int_equal(mc_master_exist_key(f->m, key, strlen(key), &ex), MC_OK);
        assert_int_equal(ex, i % 2 == 1);
    }
    mc_fake_clock_advance_ms(&f->fc, 20000); /* past the lease */
    assert_int_equal(mc_master_remove(f->m, big, 1000, false), MC_OK);
    struct mc_master_stats st;
    mc_master_get_stats(f->m, &st);
    assert_int_equal(st.key_count, 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test_setup_teardown(test_put_get_roundtrip, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_error_codes, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_lease_blocks_remove, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_stale_put_takeover, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_pins, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_versions_and_epoch, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_groups, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_record_sizes, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_batches, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_unmount_drops_objects, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_query_no_side_effects, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_shard_churn, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_shard_bulk_unlink, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_metrics_series_move, setup, mfx_teardown),
        cmocka_unit_test_setup_teardown(test_object_records, setup, mfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
