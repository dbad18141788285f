/*
 * test_master_remove_all.c - RemoveAll over a shard larger than its step (remove_all.c removes at
 * most REMOVE_ALL_STEP objects per shard write lock, resuming below where it stopped): every
 * removable object goes exactly once, the leased ones stay and are not counted, and a second
 * RemoveAll after the leases end takes the rest. Keys are chosen to land in one shard. The
 * buffers it frees are released per segment in handle order (remove_all.c): exactly the removed
 * objects' ones, and a whole table's memory comes back (allocator nodes, slab pages); outside
 * RemoveAll the slab pool stays within its bound.
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
#include "master/master_internal.h"
#include "master/objslab.h"
#include "master/segments.h"
#include "master/shard.h"
#include "master_fixture.h"

#define SHARD 5u
#define NKEYS 10000 /* > 2 steps of 4096 */
#define KEYLEN 16

static void test_remove_all_steps_through_a_large_shard(void **state)
{
    (void)state;
    struct fx *f = mfx_new(7, 512 * MIB, 0);
    assert_non_null(f);
    struct mc_master *m = f->m;
    struct mc_id a = f->a;
    char(*keys)[KEYLEN] = calloc(NKEYS, KEYLEN);
    assert_non_null(keys);
    int n = 0;
    char buf[KEYLEN];
    for (uint64_t i = 0; n < NKEYS; i++) {
        int len = snprintf(buf, sizeof(buf), "k%llu", (unsigned long long)i);
        if ((mc_hash_key(buf, (size_t)len) & MC_SHARD_MASK) == SHARD)
            memcpy(keys[n++], buf, (size_t)len + 1);
    }
    for (int i = 0; i < NKEYS; i++)
        assert_int_equal(tm_put(m, a, keys[i], 64), MC_OK);
    assert_int_equal(tm_put(m, a, "elsewhere-1", 64), MC_OK);
    assert_int_equal(tm_put(m, a, "elsewhere-2", 64), MC_OK);
    assert_int_equal(m->shards[SHARD].n, NKEYS);
    /* every third key leased by a Get: a non-forced RemoveAll keeps it */
    int leased = 0;
    for (int i = 0; i < NKEYS; i += 3) {
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, keys[i], strlen(keys[i]), &g), MC_OK);
        leased++;
    }
    uint64_t removed = 0;
    assert_int_equal(mc_master_remove_all(m, false, &removed), MC_OK);
    assert_int_equal(removed, (uint64_t)(NKEYS - leased + 2));
    assert_int_equal(m->shards[SHARD].n, (uint32_t)leased);
    for (int i = 0; i < NKEYS; i++) {
        bool ex = false;
        assert_int_equal(mc_master_exist_key(m, keys[i], strlen(keys[i]), &ex), MC_OK);
        assert_int_equal(ex, i % 3 == 0);
    }
    struct mc_master_stats st;
    mc_master_get_stats(m, &st);
    assert_int_equal(st.key_count, (uint64_t)leased);
    mc_fake_clock_advance_ms(&f->fc, 60 * 1000);
    assert_int_equal(mc_master_remove_all(m, false, &removed), MC_OK);
    assert_int_equal(removed, (uint64_t)leased);
    mc_master_get_stats(m, &st);
    assert_int_equal(st.key_count, 0);
    assert_int_equal(st.allocated_bytes, 0);
    free(keys);
    mfx_free(f);
}

/* A RemoveAll of a whole table gives its memory back: the segment's allocator starts afresh (its
 * node pool one chunk again), the slab pool keeps few slabs with their pages, and a refill reuses
 * the slabs whose pages went back instead of mapping new ones. */
#define NBIG 70000 /* > TRIM_AT (65536): the RemoveAll trims */

static struct mc_segment *seg_of(struct mc_master *m, const char *key)
{
    uint64_t h = mc_hash_key(key, strlen(key));
    struct mc_shard *s = &m->shards[h & MC_SHARD_MASK];
    struct mc_object *o = mc_shard_find(s, h, key, strlen(key));
    return o && o->nrep ? o->rep[0].u.seg : NULL;
}

/* Key i of a range: PREFIX-000...i, 100 bytes (records of 176 B: two slabs per shard at 70k
 * keys, so a RemoveAll sends one slab per shard to the pool). */
static void key_of(char *k, size_t cap, const char *prefix, int i)
{
    snprintf(k, cap, "%s-%0*d", prefix, 99 - (int)strlen(prefix), i);
}

static void put_range(struct mc_master *m, struct mc_id a, const char *prefix, int n)
{
    char k[128];
    for (int i = 0; i < n; i++) {
        key_of(k, sizeof(k), prefix, i);
        assert_int_equal(tm_put(m, a, k, 64), MC_OK);
    }
}

static void test_remove_all_returns_memory(void **state)
{
    (void)state;
    struct fx *f = mfx_new(7, 512 * MIB, 0);
    assert_non_null(f);
    struct mc_master *m = f->m;
    struct mc_id a = f->a;
    put_range(m, a, "big", NBIG);
    char k0[128];
    key_of(k0, sizeof(k0), "big", 0);
    struct mc_segment *seg = seg_of(m, k0);
    assert_non_null(seg);
    assert_true(mc_segment_handle_bound(seg) > NBIG);
    uint64_t removed = 0;
    assert_int_equal(mc_master_remove_all(m, true, &removed), MC_OK);
    assert_int_equal(removed, NBIG);
    struct mc_master_stats st;
    mc_master_get_stats(m, &st);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(mc_segment_handle_bound(seg), 4096); /* one node chunk kept */
    struct mc_objslab_pool_stats ps;
    mc_objslab_pool_stats(&ps);
    assert_true(ps.warm <= 256);
    assert_true(ps.cold >= 500); /* ~46 records per slab, ~1500 slabs: most went cold */
    struct mc_objslab_pool_stats before = ps;
    /* the refill takes the cold slabs back (their pages come back zeroed) rather than carving
     * new ones (a few more: the new keys fall into the shards a little differently) */
    put_range(m, a, "again", NBIG);
    mc_objslab_pool_stats(&ps);
    assert_true(ps.cold + 400 < before.cold);
    assert_true(ps.carved < before.carved + 50);
    assert_int_equal(mc_master_remove_all(m, true, &removed), MC_OK);
    assert_int_equal(removed, NBIG);
    mfx_free(f);
}

/* The buffers RemoveAll holds back and releases per segment in handle order are exactly the
 * removed objects' ones: with two segments and leased objects left behind, the allocated bytes
 * are the kept objects', and new Puts that fill both segments never get a kept object's range. */
static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void test_remove_all_keeps_leased_buffers(void **state)
{
    (void)state;
    enum { N = 20000, SEGBYTES = N * 64 }; /* each segment holds N 64-byte values */
    struct fx *f = mfx_new(7, SEGBYTES, 0);
    assert_non_null(f);
    struct mc_master *m = f->m;
    struct mc_id a = f->a;
    struct mc_segment_desc s2 = tm_seg(2, SEGBYTES);
    assert_int_equal(mc_master_mount_segment(m, a, &s2, NULL), MC_OK);
    put_range(m, a, "k", N);
    /* every seventh key leased: its buffer stays */
    uint64_t *kept = calloc(N, sizeof(*kept));
    assert_non_null(kept);
    int nkept = 0;
    char k[128];
    for (int i = 0; i < N; i += 7) {
        struct mc_get_result g;
        key_of(k, sizeof(k), "k", i);
        assert_int_equal(mc_master_get_replica_list(m, k, strlen(k), &g), MC_OK);
        kept[nkept++] = g.replicas[0].u.mem.addr;
    }
    uint64_t removed = 0;
    assert_int_equal(mc_master_remove_all(m, false, &removed), MC_OK);
    assert_int_equal(removed, (uint64_t)(N - nkept));
    struct mc_master_stats st;
    mc_master_get_stats(m, &st);
    assert_int_equal(st.allocated_bytes, (uint64_t)nkept * 64);
    /* fill what is free: every new buffer is elsewhere than the kept ones */
    qsort(kept, (size_t)nkept, sizeof(*kept), cmp_u64);
    int fresh = 0;
    for (int i = 0;; i++) {
        struct mc_get_result g;
        snprintf(k, sizeof(k), "new-%d", i);
        if (tm_put(m, a, k, 64) != MC_OK)
            break;
        assert_int_equal(mc_master_get_replica_list(m, k, strlen(k), &g), MC_OK);
        uint64_t addr = g.replicas[0].u.mem.addr;
        assert_null(bsearch(&addr, kept, (size_t)nkept, sizeof(*kept), cmp_u64));
        fresh++;
    }
    assert_int_equal(fresh, 2 * N - nkept); /* every removed object's room came back */
    for (int i = 0; i < N; i += 7) {
        bool ex = false;
        key_of(k, sizeof(k), "k", i);
        assert_int_equal(mc_master_exist_key(m, k, strlen(k), &ex), MC_OK);
        assert_true(ex);
    }
    free(kept);
    mfx_free(f);
}

/* Outside RemoveAll the pool keeps at most POOL_KEEP (8192) free slabs with their pages, plus
 * TRIM_BATCH (512) gathered before a trim: Removes one at a time of a table of ~13k slabs leave
 * the rest's pages given back (cold). 440-byte keys make 504-byte records, 16 per slab. */
static void test_removes_trim_the_slab_pool(void **state)
{
    (void)state;
    enum { N = 200000 };
    struct fx *f = mfx_new(7, 512 * MIB, 0);
    assert_non_null(f);
    struct mc_master *m = f->m;
    struct mc_id a = f->a;
    struct mc_objslab_pool_stats before, after;
    mc_objslab_pool_stats(&before);
    char k[448];
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "long-%0435d", i);
        assert_int_equal(tm_put(m, a, k, 64), MC_OK);
    }
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof(k), "long-%0435d", i);
        assert_int_equal(mc_master_remove(m, k, strlen(k), true), MC_OK);
    }
    mc_objslab_pool_stats(&after);
    assert_true(after.warm <= 8192 + 512);
    assert_true(after.cold >= before.cold + 1000);
    mfx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_all_steps_through_a_large_shard),
        cmocka_unit_test(test_remove_all_returns_memory),
        cmocka_unit_test(test_remove_all_keeps_leased_buffers),
        cmocka_unit_test(test_removes_trim_the_slab_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
