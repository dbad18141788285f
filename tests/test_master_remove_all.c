/*
 * test_master_remove_all.c - RemoveAll over a shard larger than its step (objects.c removes at
 * most REMOVE_ALL_STEP objects per shard write lock, resuming below where it stopped): every
 * removable object goes exactly once, the leased ones stay and are not counted, and a second
 * RemoveAll after the leases end takes the rest. Keys are chosen to land in one shard.
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
#include "master/shard.h"
#include "test_master_util.h"

#define SHARD 5u
#define NKEYS 10000 /* > 2 steps of 4096 */
#define KEYLEN 16

static void test_remove_all_steps_through_a_large_shard(void **state)
{
    (void)state;
    struct mc_fake_clock fc;
    mc_fake_clock_init(&fc, 1000ull * 1000000000ull);
    struct mc_master *m = tm_master(&fc, 7);
    assert_non_null(m);
    struct mc_id a = tm_id(1);
    struct mc_segment_desc sd = tm_seg(1, 512 * MIB);
    assert_int_equal(mc_master_mount_segment(m, a, &sd, NULL), MC_OK);
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
    mc_fake_clock_advance_ms(&fc, 60 * 1000);
    assert_int_equal(mc_master_remove_all(m, false, &removed), MC_OK);
    assert_int_equal(removed, (uint64_t)leased);
    mc_master_get_stats(m, &st);
    assert_int_equal(st.key_count, 0);
    assert_int_equal(st.allocated_bytes, 0);
    free(keys);
    mc_master_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_remove_all_steps_through_a_large_shard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
