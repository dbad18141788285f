/*
 * test_eviction_slices.c - a large eviction target goes in slices (eviction.c run_pass: at most
 * MC_EVICT_SLICE objects a round, here a test slice of 700): the cycle counts its slices, still
 * evicts exactly the oldest objects by lease deadline, and reaches its target.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/eviction.h"
#include "master/master_internal.h"
#include "master_fixture.h"

#define N 6000

static void key_of(char *buf, size_t len, int i)
{
    snprintf(buf, len, "slice-%05d", i);
}

static void test_large_target_in_slices_oldest_first(void **state)
{
    (void)state;
    struct fx *f = mfx_new(7, 256 * MIB, 0);
    assert_non_null(f);
    struct mc_master *m = f->m;
    struct mc_id a = f->a;
    char key[32];
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        assert_int_equal(tm_put(m, a, key, 4096), MC_OK);
    }
    /* lease deadlines in key order: a Get 1 ms apart for each */
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        struct mc_get_result g;
        assert_int_equal(mc_master_get_replica_list(m, key, strlen(key), &g), MC_OK);
        mc_fake_clock_advance_ms(&f->fc, 1);
    }
    mc_fake_clock_advance_ms(&f->fc, 3600 * 1000); /* every lease over */
    struct mc_evict_test_opts o = {.slice_objects = 700};
    mc_master_evict_set_test_opts(m, &o);
    struct mc_evict_stats st;
    assert_int_equal(mc_master_batch_evict(m, 0.5, 0.5, &st), MC_OK);
    assert_int_equal(st.evicted, N / 2);
    assert_true(st.slices >= (N / 2 + 699) / 700); /* 3000 objects: 5 slices at least */
    for (int i = 0; i < N; i++) {
        key_of(key, sizeof(key), i);
        bool ex = false;
        assert_int_equal(mc_master_exist_key(m, key, strlen(key), &ex), MC_OK);
        assert_int_equal(ex, i >= N / 2); /* the older half went, slice after slice */
    }
    mfx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_target_in_slices_oldest_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
