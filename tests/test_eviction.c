/*
 * test_eviction.c - BatchEvict (src/master/eviction*.c) called directly on a fake clock:
 * exact victim sets (oldest lease first), counts from the evictable population, the selective,
 * bypass and fallback paths, the reserve and the refill, pins, leases, groups, disk-only
 * objects, the trigger of the eviction tick, and the metrics.
 *
 * Lease order is built the way clients build it: key i is read (Get) at fake time T0 + i ms with
 * a 1000 ms lease TTL, then the clock jumps past every lease, so key i's deadline is the i-th
 * oldest. A few cases need states a client cannot make directly (one group member leased alone,
 * a replica pinned by a task, a LOCAL_DISK copy before the offload issue lands); they set them
 * through the core's internal header, under the shard lock, and say so.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/hash.h"
#include "common/metrics.h"
#include "eviction_sides.h"
#include "master/eviction.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/segments.h"
#include "master/shard.h"
#include "test_master_util.h"

#define T0_MS 1000000ull
#define TTL_MS 1000ull
#define OBJ_SIZE 1024ull

struct fx {
    struct mc_fake_clock fc;
    struct mc_master *m;
    struct mc_id client;
    uint64_t next_ms; /* fake time of the next staggered read */
};

static struct fx *fx_new(uint32_t reserve_min, uint32_t frontier_min, bool allow_soft)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    mc_fake_clock_init(&f->fc, T0_MS * 1000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &f->fc.clock;
    c.manual_ticks = true;
    c.epoch = 3;
    c.default_kv_lease_ttl_ms = TTL_MS;
    c.allow_evict_soft_pinned_objects = allow_soft;
    c.eviction_threads = 1;
    if (reserve_min)
        c.eviction_reserve_min = reserve_min;
    if (frontier_min)
        c.eviction_frontier_min = frontier_min;
    assert_int_equal(mc_master_new(&c, &f->m), MC_OK);
    f->client = tm_id(1);
    struct mc_segment_desc s1 = tm_seg(1, 256 * MIB), s2 = tm_seg(2, 256 * MIB);
    assert_int_equal(mc_master_mount_segment(f->m, f->client, &s1, NULL), MC_OK);
    assert_int_equal(mc_master_mount_segment(f->m, f->client, &s2, NULL), MC_OK);
    f->next_ms = T0_MS;
    return f;
}

static void fx_free(struct fx *f)
{
    mc_master_free(f->m);
    free(f);
}

static const char *key(const char *prefix, int i)
{
    static char buf[8][64];
    static int slot;
    char *b = buf[slot++ & 7];
    snprintf(b, 64, "%s-%05d", prefix, i);
    return b;
}

static void put_cfg(struct fx *f, const char *k, const struct mc_master_replicate_config *cfg)
{
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->client, k, strlen(k), OBJ_SIZE, cfg, &r), MC_OK);
    assert_int_equal(mc_master_put_end(f->m, f->client, k, strlen(k), 0, 7, true), MC_OK);
}

static void put(struct fx *f, const char *k)
{
    put_cfg(f, k, NULL);
}

static void put_group(struct fx *f, const char *k, const char *group)
{
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.group_id = group;
    c.group_id_len = strlen(group);
    put_cfg(f, k, &c);
}

/* Reads k at the next staggered instant: its lease deadline is the next-oldest. */
static void touch(struct fx *f, const char *k)
{
    mc_fake_clock_set_ns(&f->fc, f->next_ms * 1000000ull);
    f->next_ms++;
    struct mc_get_result g;
    assert_int_equal(mc_master_get_replica_list(f->m, k, strlen(k), &g), MC_OK);
}

/* Moves the clock past every lease granted by touch(). */
static void expire_all(struct fx *f)
{
    mc_fake_clock_set_ns(&f->fc, (f->next_ms + TTL_MS + 1) * 1000000ull);
}

static bool present(struct fx *f, const char *k)
{
    struct mc_key_info ki;
    return mc_master_query_key(f->m, k, strlen(k), &ki) == MC_OK;
}

static int count_present(struct fx *f, const char *prefix, int from, int to)
{
    int n = 0;
    for (int i = from; i < to; i++)
        n += present(f, key(prefix, i));
    return n;
}

/* n plain objects "p-i", read in order i = 0..n-1 (p-0 the oldest), leases expired. */
static void fill_plain(struct fx *f, const char *prefix, int n)
{
    for (int i = 0; i < n; i++)
        put(f, key(prefix, i));
    for (int i = 0; i < n; i++)
        touch(f, key(prefix, i));
}

static int evict(struct fx *f, double t, double l, struct mc_evict_stats *st)
{
    return mc_master_batch_evict(f->m, t, l, st);
}

/* ---- internal setters (states clients cannot make directly) --------------------------------- */

static void set_lease(struct fx *f, const char *k, uint64_t deadline_ms)
{
    struct mc_shard *s;
    struct mc_object *o =
        mc_master_lock_find(f->m, mc_hash_key(k, strlen(k)), k, strlen(k), true, &s);
    assert_non_null(o);
    atomic_store(&mc_shard_ent(s, o->ent)->lease_ms, deadline_ms);
    mc_shard_unlock(s);
}

/* A replica pinned by a task (offload/promotion source), as those modules will do. */
static void pin_replica(struct fx *f, const char *k)
{
    struct mc_shard *s;
    struct mc_object *o =
        mc_master_lock_find(f->m, mc_hash_key(k, strlen(k)), k, strlen(k), true, &s);
    assert_non_null(o);
    o->rep[0].refcnt++;
    mc_shard_refresh_bits(s, o);
    mc_shard_unlock(s);
}

/* ---- exact victim sets ---------------------------------------------------------------------- */

static void test_oldest_at_low_ratio(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    fill_plain(f, "p", 400);
    expire_all(f);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.05, 0.05, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_SELECTIVE);
    assert_int_equal(st.census, 400);
    assert_int_equal(st.evictable, 400);
    assert_int_equal(st.evicted, 20);
    assert_int_equal(st.evicted_bytes, 20 * OBJ_SIZE);
    assert_int_equal(count_present(f, "p", 0, 20), 0);
    assert_int_equal(count_present(f, "p", 20, 400), 380);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.key_count, 380);
    assert_int_equal(ms.allocated_bytes, 380 * OBJ_SIZE);
    assert_int_equal(ms.evicted_key_count, 20);
    assert_int_equal(ms.successful_evictions, 1);
    fx_free(f);
}

static void test_oldest_at_high_ratio(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    fill_plain(f, "p", 200);
    expire_all(f);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.80, 0.80, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_FULL_BYPASS);
    assert_int_equal(st.evicted, 160);
    assert_int_equal(st.materialized, 200);
    assert_int_equal(count_present(f, "p", 0, 160), 0);
    assert_int_equal(count_present(f, "p", 160, 200), 40);
    fx_free(f);
}

static void test_target_equals_lower_bound(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    fill_plain(f, "p", 250);
    expire_all(f);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK);
    assert_int_equal(st.primary, 25);
    assert_int_equal(st.lower, 25);
    assert_int_equal(st.evicted, 25);
    assert_int_equal(count_present(f, "p", 0, 25), 0);
    assert_int_equal(count_present(f, "p", 25, 250), 225);
    /* A lower bound above the target is clamped to it. */
    assert_int_equal(evict(f, 0.02, 0.5, &st), MC_OK);
    assert_int_equal(st.evicted, 5); /* ceil(225 * 0.02 - 1e-9) */
    assert_int_equal(count_present(f, "p", 25, 30), 0);
    /* Counts use ceil(x - 1e-9): 220 * 0.05 = 11 exactly, not 12. */
    assert_int_equal(evict(f, 0.05, 0.05, &st), MC_OK);
    assert_int_equal(st.evicted, 11);
    fx_free(f);
}

static void test_bad_ratios(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 1.5, 0.1, &st), MC_ERR_INVALID_PARAMS);
    assert_int_equal(evict(f, 0.1, -0.1, &st), MC_ERR_INVALID_PARAMS);
    assert_int_equal(evict(f, NAN, 0.1, &st), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_master_batch_evict(NULL, 0.1, 0.1, &st), MC_ERR_INVALID_PARAMS);
    /* An empty table: nothing to do, nothing counted. */
    assert_int_equal(evict(f, 0.5, 0.5, NULL), MC_OK);
    assert_int_equal(evict(f, 0.5, 0.5, &st), MC_OK);
    assert_int_equal(st.evicted, 0);
    assert_int_equal(st.evictable, 0);
    fx_free(f);
}

/* ---- pins and leases ------------------------------------------------------------------------ */

static void soft_fixture(struct fx *f)
{
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.with_soft_pin = true;
    for (int i = 0; i < 10; i++)
        put_cfg(f, key("s", i), &c);
    for (int i = 0; i < 10; i++)
        put(f, key("p", i));
    /* The soft-pinned ones are the oldest: order alone would take them first. */
    for (int i = 0; i < 10; i++)
        touch(f, key("s", i));
    for (int i = 0; i < 10; i++)
        touch(f, key("p", i));
    expire_all(f);
}

static void test_soft_pinned_are_fallback(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    soft_fixture(f);
    struct mc_evict_stats st;
    /* 0.10 of 20 = 2: plain ones only, although the soft-pinned are older. */
    assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK);
    assert_int_equal(st.evicted, 2);
    assert_int_equal(count_present(f, "s", 0, 10), 10);
    assert_int_equal(count_present(f, "p", 0, 2), 0);
    fx_free(f);

    f = fx_new(0, 0, true);
    soft_fixture(f);
    /* 0.80 of 20 = 16: all 10 plain, then the 6 oldest soft-pinned. */
    assert_int_equal(evict(f, 0.80, 0.80, &st), MC_OK);
    assert_int_equal(st.evictable, 20);
    assert_int_equal(st.eligible, 10);
    assert_int_equal(st.soft_eligible, 10);
    assert_int_equal(st.evicted, 16);
    assert_int_equal(count_present(f, "p", 0, 10), 0);
    assert_int_equal(count_present(f, "s", 0, 6), 0);
    assert_int_equal(count_present(f, "s", 6, 10), 4);
    fx_free(f);

    /* Same on the selective path (target below the bypass ratio, lower bound above plain). */
    f = fx_new(0, 0, true);
    soft_fixture(f);
    assert_int_equal(evict(f, 0.20, 0.20, &st), MC_OK); /* 4: plain only */
    assert_int_equal(st.path, MC_EVICT_SELECTIVE);
    assert_int_equal(st.evicted, 4);
    assert_int_equal(count_present(f, "s", 0, 10), 10);
    fx_free(f);

    /* Not allowed: soft-pinned objects are never evicted. */
    f = fx_new(0, 0, false);
    soft_fixture(f);
    assert_int_equal(evict(f, 0.80, 0.80, &st), MC_OK);
    assert_int_equal(st.evicted, 10);
    assert_int_equal(count_present(f, "s", 0, 10), 10);
    assert_int_equal(count_present(f, "p", 0, 10), 0);
    fx_free(f);
}

static void test_hard_pinned_never(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.with_hard_pin = true;
    c.with_soft_pin = true; /* hard wins over an allowed soft pin */
    for (int i = 0; i < 10; i++)
        put_cfg(f, key("h", i), &c);
    for (int i = 0; i < 10; i++)
        put(f, key("p", i));
    for (int i = 0; i < 10; i++)
        touch(f, key("h", i));
    for (int i = 0; i < 10; i++)
        touch(f, key("p", i));
    expire_all(f);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 1.0, 1.0, &st), MC_OK);
    assert_int_equal(st.evictable, 10); /* hard-pinned objects are not in the population */
    assert_int_equal(st.evicted, 10);
    assert_int_equal(count_present(f, "h", 0, 10), 10);
    assert_int_equal(count_present(f, "p", 0, 10), 0);
    assert_int_equal(evict(f, 1.0, 1.0, &st), MC_OK);
    assert_int_equal(st.evicted, 0);
    assert_int_equal(count_present(f, "h", 0, 10), 10);
    fx_free(f);
}

static void test_leased_and_pinned_survive(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    fill_plain(f, "p", 20);
    expire_all(f);
    /* p-0..4 read again now (active leases), p-5..9 pinned by a task (refcnt). */
    for (int i = 0; i < 5; i++) {
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(f->m, key("p", i), 7, &g), MC_OK);
    }
    for (int i = 5; i < 10; i++)
        pin_replica(f, key("p", i));
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 1.0, 1.0, &st), MC_OK);
    assert_int_equal(st.evictable, 15); /* the leased count, the pinned do not */
    assert_int_equal(st.eligible, 10);
    assert_int_equal(st.evicted, 10);
    assert_int_equal(count_present(f, "p", 0, 10), 10);
    assert_int_equal(count_present(f, "p", 10, 20), 0);
    /* Once the leases run out they go too; pinned ones stay. */
    mc_fake_clock_advance_ms(&f->fc, TTL_MS + 1);
    assert_int_equal(evict(f, 1.0, 1.0, &st), MC_OK);
    assert_int_equal(st.evicted, 5);
    assert_int_equal(count_present(f, "p", 0, 5), 0);
    assert_int_equal(count_present(f, "p", 5, 10), 5);
    fx_free(f);
}

/* ---- groups --------------------------------------------------------------------------------- */

static void test_whole_group_evicted(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    for (int i = 0; i < 3; i++)
        put_group(f, key("g", i), "grp");
    for (int i = 0; i < 7; i++)
        put(f, key("p", i));
    touch(f, key("g", 1)); /* leases the whole group: the oldest */
    for (int i = 0; i < 7; i++)
        touch(f, key("p", i));
    expire_all(f);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK); /* one victim wanted: its group goes */
    assert_int_equal(st.primary, 1);
    assert_int_equal(st.evicted, 3);
    assert_int_equal(count_present(f, "g", 0, 3), 0);
    assert_int_equal(count_present(f, "p", 0, 7), 7);
    fx_free(f);
}

static void test_active_member_blocks_group(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    for (int i = 0; i < 3; i++)
        put_group(f, key("g", i), "grp");
    for (int i = 0; i < 7; i++)
        put(f, key("p", i));
    touch(f, key("g", 0));
    for (int i = 0; i < 7; i++)
        touch(f, key("p", i));
    expire_all(f);
    /* One member alone still leased (internal: a group Get leases every member). */
    set_lease(f, key("g", 2), mc_clock_now_ms(&f->fc.clock) + 5000);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK);
    assert_int_equal(st.eligible, 9); /* g-0, g-1 look eligible to the census */
    assert_int_equal(st.evicted, 1);
    assert_int_equal(count_present(f, "g", 0, 3), 3);
    assert_false(present(f, key("p", 0)));
    assert_int_equal(count_present(f, "p", 1, 7), 6);
    fx_free(f);
}

/* A group with a soft-pinned member: the group is the oldest, yet the passes over plain
 * candidates leave it whole (its plain members included); only the soft-pinned phase takes it,
 * whole. On the selective path, on the full one, and by cut (the walk skips the group, and the
 * pass over every eligible object after it takes the next oldest), also with one victim a shard
 * lock hold (a hold that evicts nothing, the group's member, ends its shard's walk). */
static void soft_group_fixture(struct fx *f)
{
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.group_id = "grp";
    c.group_id_len = 3;
    put_cfg(f, key("g", 0), &c);
    c.with_soft_pin = true;
    put_cfg(f, key("g", 1), &c);
    c.with_soft_pin = false;
    put_cfg(f, key("g", 2), &c);
    for (int i = 0; i < 7; i++)
        put(f, key("p", i));
    touch(f, key("g", 0)); /* leases the whole group: the oldest */
    for (int i = 0; i < 7; i++)
        touch(f, key("p", i));
    expire_all(f);
}

static void test_soft_pinned_member_holds_group(void **state)
{
    (void)state;
    for (int mode = 0; mode < 4; mode++) { /* 3: by cut, one victim a shard lock hold */
        bool full = mode == 1;
        struct mc_evict_test_opts o = {.force_full = full,
                                       .cut_min_objects = mode >= 2 ? 1 : 0,
                                       .cut_hold_max = mode == 3 ? 1 : 0};
        struct fx *f = fx_new(0, 0, true);
        soft_group_fixture(f);
        mc_master_evict_set_test_opts(f->m, &o);
        struct mc_evict_stats st;
        /* one victim wanted: a plain object, not the group (nor part of it) */
        assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK);
        assert_int_equal(st.path, full ? MC_EVICT_FULL_BYPASS : MC_EVICT_SELECTIVE);
        assert_int_equal(st.soft_eligible, 1);
        assert_int_equal(st.evicted, 1);
        assert_int_equal(count_present(f, "g", 0, 3), 3);
        assert_false(present(f, key("p", 0)));
        assert_int_equal(count_present(f, "p", 1, 7), 6);
        /* every plain object wanted: still not the group; the lower bound reaches the
         * soft-pinned phase only when it asks for more than the plain ones */
        assert_int_equal(evict(f, 0.60, 0.60, &st), MC_OK); /* 6 of the 9 left */
        if (mode >= 2)
            assert_int_equal(st.path, MC_EVICT_FULL_FALLBACK);
        assert_int_equal(st.evicted, 6);
        assert_int_equal(count_present(f, "g", 0, 3), 3);
        assert_int_equal(count_present(f, "p", 0, 7), 0);
        /* now the soft-pinned phase: the group goes, whole */
        assert_int_equal(evict(f, 0.30, 0.30, &st), MC_OK); /* 1 of the 3 left */
        assert_int_equal(st.evicted, 3);
        assert_int_equal(count_present(f, "g", 0, 3), 0);
        mc_master_evict_set_test_opts(f->m, NULL);
        fx_free(f);

        /* soft-pinned eviction off: the group is never a victim, not even in part */
        f = fx_new(0, 0, false);
        soft_group_fixture(f);
        mc_master_evict_set_test_opts(f->m, &o);
        assert_int_equal(evict(f, 1.0, 1.0, &st), MC_OK);
        assert_int_equal(st.evicted, 7);
        assert_int_equal(count_present(f, "g", 0, 3), 3);
        assert_int_equal(count_present(f, "p", 0, 7), 0);
        mc_master_evict_set_test_opts(f->m, NULL);
        fx_free(f);
    }
}

/* ---- selective materialization -------------------------------------------------------------- */

static void test_selective_bounded(void **state)
{
    (void)state;
    struct fx *f = fx_new(8, 16, true);
    fill_plain(f, "p", 4000);
    expire_all(f);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.05, 0.05, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_SELECTIVE);
    assert_int_equal(st.primary, 200);
    assert_int_equal(st.k, 220); /* 200 + max(8, ceil(200 / 10)) */
    assert_int_equal(st.materialized, 220);
    assert_int_equal(st.refills, 0);
    assert_true(st.materialized <= st.k + st.refills);
    assert_int_equal(st.evicted, 200);
    assert_int_equal(count_present(f, "p", 0, 200), 0);
    assert_int_equal(count_present(f, "p", 200, 4000), 3800);
    fx_free(f);
}

static void test_selective_ties_at_cutoff(void **state)
{
    (void)state;
    struct fx *f = fx_new(8, 16, true);
    for (int i = 0; i < 3000; i++)
        put(f, key("p", i)); /* never read: every deadline is 0, one big tie */
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.01, 0.01, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_SELECTIVE);
    assert_int_equal(st.k, 38);
    assert_int_equal(st.materialized, 38); /* the tie is cut at k, not taken whole */
    assert_int_equal(st.evicted, 30);
    assert_int_equal(count_present(f, "p", 0, 3000), 2970);
    fx_free(f);
}

static void test_frontier_limit_takes_full_path(void **state)
{
    (void)state;
    struct fx *f = fx_new(8, 16, true);
    fill_plain(f, "p", 4000);
    expire_all(f);
    for (int i = 2000; i < 4000; i++) { /* the newer half leased again: N = 2000 */
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(f->m, key("p", i), 7, &g), MC_OK);
    }
    struct mc_evict_stats st;
    /* primary 480, k 528 > frontier limit max(16, 2000 / 4) = 500 */
    assert_int_equal(evict(f, 0.12, 0.12, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_FULL_BYPASS);
    assert_int_equal(st.eligible, 2000);
    assert_int_equal(st.materialized, 2000);
    assert_int_equal(st.evicted, 480);
    assert_int_equal(count_present(f, "p", 0, 480), 0);
    assert_int_equal(count_present(f, "p", 480, 4000), 3520);
    fx_free(f);
}

static void test_reserve_absorbs_blocked(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    for (int i = 0; i < 13; i++)
        put_group(f, key("g", i), "blocked");
    for (int i = 0; i < 1200; i++)
        put(f, key("p", i));
    touch(f, key("g", 0));
    for (int i = 0; i < 1200; i++)
        touch(f, key("p", i));
    expire_all(f);
    set_lease(f, key("g", 12), mc_clock_now_ms(&f->fc.clock) + 5000);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.05, 0.05, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_SELECTIVE);
    assert_int_equal(st.evictable, 1213);
    assert_int_equal(st.primary, 61);
    assert_int_equal(st.refills, 0);
    assert_int_equal(st.evicted, 61);
    assert_int_equal(count_present(f, "g", 0, 13), 13);
    assert_int_equal(count_present(f, "p", 0, 61), 0);
    assert_int_equal(count_present(f, "p", 61, 1200), 1139);
    fx_free(f);
}

static void test_refill_after_reserve_exhausted(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    for (int i = 0; i < 1161; i++)
        put_group(f, key("g", i), "blocked");
    for (int i = 0; i < 200; i++)
        put(f, key("p", i));
    touch(f, key("g", 0));
    for (int i = 0; i < 200; i++)
        touch(f, key("p", i));
    expire_all(f);
    set_lease(f, key("g", 1160), mc_clock_now_ms(&f->fc.clock) + 5000);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.05, 0.05, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_SELECTIVE);
    assert_int_equal(st.primary, 69); /* ceil(1361 * 0.05) */
    assert_int_equal(st.k, 69 + 1024);
    assert_true(st.refills > 0);
    assert_true(st.materialized <= st.k + st.refills);
    assert_int_equal(st.evicted, 69);
    assert_int_equal(count_present(f, "g", 0, 1161), 1161);
    assert_int_equal(count_present(f, "p", 0, 69), 0);
    assert_int_equal(count_present(f, "p", 69, 200), 131);
    fx_free(f);
}

struct hook_ctx {
    struct fx *f;
    int lease_from, lease_to;   /* read these plain keys (lease them) */
    int remove_from, remove_to; /* remove these */
    int calls;
};

static void hook(struct mc_master *m, void *arg)
{
    struct hook_ctx *h = arg;
    h->calls++;
    for (int i = h->lease_from; i < h->lease_to; i++) {
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, key("p", i), 7, &g), MC_OK);
    }
    for (int i = h->remove_from; i < h->remove_to; i++)
        assert_int_equal(mc_master_remove(m, key("p", i), 7, false), MC_OK);
}

static void test_hook_lease_forces_fallback(void **state)
{
    (void)state;
    struct fx *f = fx_new(4, 16, true);
    fill_plain(f, "p", 2000);
    expire_all(f);
    struct hook_ctx h = {.f = f, .lease_from = 0, .lease_to = 10};
    struct mc_evict_test_opts o = {.after_census = hook, .arg = &h};
    mc_master_evict_set_test_opts(f->m, &o);
    struct mc_evict_stats st;
    /* primary 20, k 24: leasing the 10 oldest leaves 14 in the frontier */
    assert_int_equal(evict(f, 0.01, 0.01, &st), MC_OK);
    assert_int_equal(h.calls, 1);
    assert_int_equal(st.path, MC_EVICT_FULL_FALLBACK);
    assert_int_equal(st.evicted, 20);
    assert_int_equal(count_present(f, "p", 0, 10), 10);
    assert_int_equal(count_present(f, "p", 10, 30), 0);
    assert_int_equal(count_present(f, "p", 30, 2000), 1970);
    fx_free(f);
}

static void test_hook_removal_absorbed(void **state)
{
    (void)state;
    struct fx *f = fx_new(4, 16, true);
    fill_plain(f, "p", 2000);
    expire_all(f);
    struct hook_ctx h = {.f = f, .remove_from = 0, .remove_to = 3};
    struct mc_evict_test_opts o = {.after_census = hook, .arg = &h};
    mc_master_evict_set_test_opts(f->m, &o);
    struct mc_evict_stats st;
    /* 3 of the 24 frontier objects vanish: 21 >= 20 still, the selective path holds. */
    assert_int_equal(evict(f, 0.01, 0.01, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_SELECTIVE);
    assert_int_equal(st.materialized, 21);
    assert_int_equal(st.evicted, 20);
    assert_int_equal(count_present(f, "p", 0, 23), 0);
    assert_int_equal(count_present(f, "p", 23, 2000), 1977);
    mc_master_evict_set_test_opts(f->m, NULL);
    fx_free(f);
}

static void test_forced_full_path(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    fill_plain(f, "p", 500);
    expire_all(f);
    struct mc_evict_test_opts o = {.force_full = true};
    mc_master_evict_set_test_opts(f->m, &o);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.01, 0.01, &st), MC_OK);
    assert_int_equal(st.path, MC_EVICT_FULL_BYPASS);
    assert_int_equal(st.materialized, 500);
    assert_int_equal(st.evicted, 5);
    assert_int_equal(count_present(f, "p", 0, 5), 0);
    fx_free(f);
}

/* ---- PutEnd grants a zero-length lease ---------------------------------------------------------
 */

#define LRU_N 240

/* Object p (0..LRU_N-1) gets its last access at L0 + 10 p: p % 3 == 0 is read then (put early,
 * read at L0 + 10 p - TTL: its lease ends at L0 + 10 p), the others are written then and never
 * read. Events are played in time order; afterwards every lease has expired. */
static void fill_lru_mix(struct fx *f)
{
    const uint64_t l0 = T0_MS + TTL_MS + 10;
    for (int p = 0; p < LRU_N; p += 3)
        put(f, key("x", p)); /* at T0: written long before it is read */
    int order[LRU_N];
    uint64_t when[LRU_N];
    for (int p = 0; p < LRU_N; p++) {
        when[p] = l0 + 10ull * (uint64_t)p - (p % 3 == 0 ? TTL_MS : 0);
        order[p] = p;
    }
    for (int i = 1; i < LRU_N; i++) /* insertion sort by event time */
        for (int j = i; j > 0 && when[order[j]] < when[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 0; i < LRU_N; i++) {
        int p = order[i];
        mc_fake_clock_set_ns(&f->fc, when[p] * 1000000ull);
        if (p % 3 == 0) {
            struct mc_get_result g;
            assert_int_equal(mc_master_get_replica_list(f->m, key("x", p), 7, &g), MC_OK);
        } else {
            put(f, key("x", p));
        }
    }
    mc_fake_clock_set_ns(&f->fc, (l0 + 10ull * LRU_N + 1) * 1000000ull);
}

/* Never-read objects leave in PutEnd order, interleaved with read ones by last access (their
 * lease deadline), on the selective path and on the full path. Before PutEnd granted a lease,
 * every never-read object tied at deadline 0 and went first, in hash order. */
static void test_put_end_lease_orders_never_read(void **state)
{
    (void)state;
    for (int full = 0; full < 2; full++) {
        struct fx *f = fx_new(0, 0, true);
        fill_lru_mix(f);
        if (full) {
            struct mc_evict_test_opts o = {.force_full = true};
            mc_master_evict_set_test_opts(f->m, &o);
        }
        struct mc_evict_stats st;
        int victims = full ? LRU_N / 2 : LRU_N / 5;
        double r = full ? 0.5 : 0.2;
        assert_int_equal(evict(f, r, r, &st), MC_OK);
        assert_int_equal(st.path, full ? MC_EVICT_FULL_BYPASS : MC_EVICT_SELECTIVE);
        assert_int_equal(st.evicted, victims);
        assert_int_equal(count_present(f, "x", 0, victims), 0);
        assert_int_equal(count_present(f, "x", victims, LRU_N), LRU_N - victims);
        fx_free(f);
    }
}

/* ---- LOCAL_DISK copies ---------------------------------------------------------------------- */

static void test_disk_only_objects(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    struct mc_master_replicate_config c;
    mc_master_replicate_config_init(&c);
    c.replica_num = 2;
    for (int i = 0; i < 100; i++)
        put_cfg(f, key("d", i), &c);
    for (int i = 0; i < 100; i++)
        touch(f, key("d", i));
    expire_all(f);
    for (int i = 0; i < 50; i++) /* internal: the offload issue will attach these */
        es_make_disk_copy(f->m, key("d", i));
    struct mc_evict_stats st;
    /* 0.10 of 100 = 10 oldest: they keep their disk copy and lose only DRAM. */
    assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK);
    assert_int_equal(st.evicted, 10);
    assert_int_equal(st.evicted_bytes, 10 * OBJ_SIZE);
    for (int i = 0; i < 10; i++) {
        struct mc_key_info ki;
        assert_int_equal(mc_master_query_key(f->m, key("d", i), 7, &ki), MC_OK);
        assert_int_equal(ki.nreplicas, 1);
        assert_int_equal(ki.replicas[0].type, MC_REPLICA_TYPE_LOCAL_DISK);
    }
    /* The 10 disk-only objects no longer count: 90 evictable, 0.10 -> 9. */
    assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK);
    assert_int_equal(st.census, 100);
    assert_int_equal(st.evictable, 90);
    assert_int_equal(st.evicted, 9);
    assert_int_equal(count_present(f, "d", 0, 100), 100); /* d-10..18: disk copies stay */
    for (int i = 19; i < 50; i++) {
        struct mc_key_info ki;
        assert_int_equal(mc_master_query_key(f->m, key("d", i), 7, &ki), MC_OK);
        assert_int_equal(ki.nreplicas, 2);
    }
    /* Everything evictable: 50 objects erased, 50 become disk-only. */
    assert_int_equal(evict(f, 1.0, 1.0, &st), MC_OK);
    assert_int_equal(st.evicted, 81);
    assert_int_equal(count_present(f, "d", 0, 50), 50);
    assert_int_equal(count_present(f, "d", 50, 100), 0);
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.allocated_bytes, 0);
    /* Disk-only objects do not inflate the target of new DRAM objects. */
    fill_plain(f, "p", 100);
    expire_all(f);
    assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK);
    assert_int_equal(st.census, 150);
    assert_int_equal(st.evictable, 100);
    assert_int_equal(st.evicted, 10);
    fx_free(f);
}

/* ---- the tick ------------------------------------------------------------------------------- */

static void test_tick_trigger_and_capacity(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    struct mc_master_stats ms;
    /* 512 MiB mounted, 64 KiB objects: 8192 fit; Put 4x that, one eviction tick per Put. */
    const uint64_t size = 64 * 1024;
    const int total = 4 * 8192;
    int ok = 0, evicted = 0;
    assert_int_equal(mc_master_tick_eviction(f->m), 0); /* empty: below the watermark */
    for (int i = 0; i < total; i++) {
        const char *k = key("big", i);
        struct mc_put_start_result r;
        int rc = mc_master_put_start(f->m, f->client, k, strlen(k), size, NULL, &r);
        if (rc == MC_ERR_NO_AVAILABLE_HANDLE) { /* the tick frees space; one retry */
            evicted += mc_master_tick_eviction(f->m);
            rc = mc_master_put_start(f->m, f->client, k, strlen(k), size, NULL, &r);
        }
        if (rc != MC_OK)
            continue;
        assert_int_equal(mc_master_put_end(f->m, f->client, k, strlen(k), 0, 1, true), MC_OK);
        ok++;
        mc_fake_clock_advance_ms(&f->fc, 1);
        evicted += mc_master_tick_eviction(f->m);
    }
    assert_int_equal(ok, total);
    mc_master_get_stats(f->m, &ms);
    assert_true(ms.used_ratio <= 0.90 + 1e-9); /* the last tick brought it under */
    assert_true(evicted >= total - 8192);
    assert_int_equal(ms.evicted_key_count, (uint64_t)evicted);
    assert_int_equal(ms.key_count + (uint64_t)evicted, (uint64_t)total);
    assert_int_equal(ms.allocated_bytes, ms.key_count * size);
    assert_true(ms.successful_evictions > 0);
    fx_free(f);
}

static void test_tick_need_flag(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    fill_plain(f, "p", 100); /* 100 KiB of 512 MiB: far below the watermark */
    expire_all(f);
    assert_int_equal(mc_master_tick_eviction(f->m), 0);
    /* A request larger than every segment (256 MiB each) can never fit: no eviction for it. */
    struct mc_put_start_result r;
    assert_int_equal(mc_master_put_start(f->m, f->client, "huge", 4, 300 * MIB, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_false(atomic_load(&f->m->need_eviction));
    assert_int_equal(mc_master_tick_eviction(f->m), 0);
    /* Two hard-pinned 200 MiB objects (never evictable, not counted) leave ~56 MiB per segment:
     * a PutStart of 100 MiB fails for space but would fit a segment, so it raises the need flag
     * and the tick evicts r = 5% of the evictable population. */
    struct mc_master_replicate_config hard;
    mc_master_replicate_config_init(&hard);
    hard.with_hard_pin = true;
    assert_int_equal(mc_master_put_start(f->m, f->client, "big-a", 5, 200 * MIB, &hard, &r), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->client, "big-b", 5, 200 * MIB, &hard, &r), MC_OK);
    assert_int_equal(mc_master_put_start(f->m, f->client, "huge", 4, 100 * MIB, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_true(atomic_load(&f->m->need_eviction));
    assert_int_equal(mc_master_tick_eviction(f->m), 5);
    assert_false(atomic_load(&f->m->need_eviction));
    assert_int_equal(count_present(f, "p", 0, 5), 0);
    assert_int_equal(mc_master_tick_eviction(f->m), 0);
    /* Everything leased: a cycle is attempted and counted as such, and the request is spent:
     * it must not stay armed and later evict objects Put after the failure. */
    for (int i = 5; i < 100; i++) {
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(f->m, key("p", i), 7, &g), MC_OK);
    }
    assert_int_equal(mc_master_put_start(f->m, f->client, "huge", 4, 100 * MIB, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_true(atomic_load(&f->m->need_eviction));
    assert_int_equal(mc_master_tick_eviction(f->m), 0);
    assert_false(atomic_load(&f->m->need_eviction));
    struct mc_master_stats ms;
    mc_master_get_stats(f->m, &ms);
    assert_int_equal(ms.attempted_evictions, 1);
    assert_int_equal(ms.successful_evictions, 1);
    /* Leases run out and a new object arrives, far below the watermark: nothing is evicted. */
    mc_fake_clock_advance_ms(&f->fc, 60 * 1000);
    fill_plain(f, "late", 1);
    expire_all(f);
    for (int i = 0; i < 3; i++)
        assert_int_equal(mc_master_tick_eviction(f->m), 0);
    assert_int_equal(count_present(f, "late", 0, 1), 1);
    assert_int_equal(count_present(f, "p", 5, 100), 95);
    fx_free(f);
}

static void test_metrics(void **state)
{
    (void)state;
    struct fx *f = fx_new(0, 0, true);
    fill_plain(f, "p", 100);
    expire_all(f);
    struct mc_evict_stats st;
    assert_int_equal(evict(f, 0.10, 0.10, &st), MC_OK);
    assert_int_equal(evict(f, 0.50, 0.50, &st), MC_OK);
    struct mc_textbuf tb;
    mc_textbuf_init(&tb);
    assert_int_equal(mc_metrics_render(mc_master_metrics(f->m), &tb), 0);
    const char *t = tb.data;
    assert_non_null(strstr(t, "\nmaster_successful_evictions_total 2\n"));
    assert_non_null(strstr(t, "\nmaster_attempted_evictions_total 0\n"));
    assert_non_null(strstr(t, "\nmaster_evicted_key_count 55\n"));
    assert_non_null(strstr(t, "\nmaster_evicted_size_bytes 56320\n"));
    assert_non_null(strstr(t, "master_eviction_cycles_total{path=\"selective\"} 1\n"));
    assert_non_null(strstr(t, "master_eviction_cycles_total{path=\"full_bypass\"} 1\n"));
    assert_non_null(strstr(t, "master_eviction_cycles_total{path=\"full_fallback\"} 0\n"));
    assert_non_null(strstr(t, "master_eviction_duration_ms_count 2\n"));
    mc_textbuf_destroy(&tb);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oldest_at_low_ratio),
        cmocka_unit_test(test_oldest_at_high_ratio),
        cmocka_unit_test(test_target_equals_lower_bound),
        cmocka_unit_test(test_bad_ratios),
        cmocka_unit_test(test_soft_pinned_are_fallback),
        cmocka_unit_test(test_hard_pinned_never),
        cmocka_unit_test(test_leased_and_pinned_survive),
        cmocka_unit_test(test_whole_group_evicted),
        cmocka_unit_test(test_active_member_blocks_group),
        cmocka_unit_test(test_soft_pinned_member_holds_group),
        cmocka_unit_test(test_selective_bounded),
        cmocka_unit_test(test_selective_ties_at_cutoff),
        cmocka_unit_test(test_frontier_limit_takes_full_path),
        cmocka_unit_test(test_reserve_absorbs_blocked),
        cmocka_unit_test(test_refill_after_reserve_exhausted),
        cmocka_unit_test(test_hook_lease_forces_fallback),
        cmocka_unit_test(test_hook_removal_absorbed),
        cmocka_unit_test(test_forced_full_path),
        cmocka_unit_test(test_put_end_lease_orders_never_read),
        cmocka_unit_test(test_disk_only_objects),
        cmocka_unit_test(test_tick_trigger_and_capacity),
        cmocka_unit_test(test_tick_need_flag),
        cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
