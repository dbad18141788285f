/*
 * test_eviction_unlink.c - an eviction round's one-by-one unlinks with the keys' hashes computed
 * once (eviction_unlink.c, mc_shard_unlink_hashed): the victim's hash is trusted, the hint for the
 * shard's last object is used only when that object is still last; when an earlier unlink moved
 * another object there (a victim that sat in the tail), its key is hashed afresh. Every object
 * left is then still found by its key at its new position, and the victims are not.
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
#include "master/freelist.h"
#include "master/master_internal.h"
#include "master/objects.h"
#include "master/shard.h"
#include "test_master_util.h"

#define NKEYS 6000 /* about six objects per shard */

static const char *key(int i)
{
    static char buf[4][32];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, 32, "u-%06d", i);
    return b;
}

static uint64_t hash_of(const struct mc_object *o)
{
    return mc_hash_key(mc_obj_key((struct mc_object *)o), o->key_len);
}

/* Every object of s is found at its entry by its key (s locked). */
static void check_index(struct mc_shard *s)
{
    for (uint32_t e = 0; e < s->n; e++) {
        struct mc_object *o = mc_ent_obj(mc_shard_ent(s, e));
        assert_int_equal(o->ent, e);
        assert_ptr_equal(mc_shard_find(s, hash_of(o), mc_obj_key(o), o->key_len), o);
    }
}

static void test_unlink_hashed_with_stale_tail_hint(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000000ull * 1000000ull);
    struct mc_master_config c;
    mc_master_config_init(&c);
    c.clock = &fc.clock;
    c.manual_ticks = true;
    struct mc_master *m;
    assert_int_equal(mc_master_new(&c, &m), MC_OK);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc sd = tm_seg(1, 256 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &sd, NULL), MC_OK);
    for (int i = 0; i < NKEYS; i++)
        assert_int_equal(tm_put(m, a, key(i), 1024), MC_OK);
    struct mc_shard *s = NULL;
    for (uint32_t i = 0; i < MC_NSHARDS && !s; i++)
        if (m->shards[i].n >= 6)
            s = &m->shards[i];
    assert_non_null(s);

    mc_shard_wrlock(s);
    uint32_t n0 = s->n;
    /* The round's victims in its order: V1 at n0 - 2 (in the tail, not last), then V2 at 0. */
    struct mc_object *v1 = mc_ent_obj(mc_shard_ent(s, n0 - 2));
    struct mc_object *v2 = mc_ent_obj(mc_shard_ent(s, 0));
    struct mc_object *last = mc_ent_obj(mc_shard_ent(s, n0 - 1));
    struct mc_object *second = mc_ent_obj(mc_shard_ent(s, n0 - 2)); /* = v1 */
    uint64_t hv1 = hash_of(v1), hv2 = hash_of(v2), hlast = hash_of(last), hsec = hash_of(second);
    struct mc_freelist fl;
    mc_freelist_init(&fl);
    struct mc_unlink_batch ub = {0};
    assert_true(mc_master_evict_memory(m, s, v1, &fl, &ub) > 0);
    assert_true(mc_master_evict_memory(m, s, v2, &fl, &ub) > 0);
    assert_int_equal(ub.n, 2);

    /* Unlink 0: the last object is the tail's first (the hint is right): it moves into V1's hole.
     */
    mc_shard_unlink_hashed(s, v1, hv1, last, hlast);
    assert_int_equal(s->n, n0 - 1);
    assert_int_equal(last->ent, n0 - 2);
    /* Unlink 1: the hint says the object that sat at n0 - 2 (V1, gone) is last, with V1's hash;
     * the last object is `last` now, so its key must be hashed again, not the hint used. */
    mc_shard_unlink_hashed(s, v2, hv2, second, hsec);
    assert_int_equal(s->n, n0 - 2);
    assert_int_equal(last->ent, 0);
    assert_int_equal(v1->ent, MC_NO_INDEX);
    assert_int_equal(v2->ent, MC_NO_INDEX);
    assert_null(mc_shard_find(s, hv1, mc_obj_key(v1), v1->key_len));
    assert_null(mc_shard_find(s, hv2, mc_obj_key(v2), v2->key_len));
    check_index(s);
    for (size_t i = 0; i < ub.n; i++) {
        ub.objs[i]->flags &= ~(uint64_t)MC_OBJ_UNLINKING;
        mc_freelist_add_object_locked(&fl, s, ub.objs[i]);
    }
    mc_shard_unlock(s);
    mc_freelist_flush(&fl);
    free(ub.objs);

    /* Through the API: every key but the two victims' is still there. */
    int missing = 0;
    for (int i = 0; i < NKEYS; i++) {
        struct mc_get_result g;
        if (mc_master_get_replica_list(m, key(i), strlen(key(i)), &g) != MC_OK)
            missing++;
    }
    assert_int_equal(missing, 2);
    mc_master_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlink_hashed_with_stale_tail_hint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
