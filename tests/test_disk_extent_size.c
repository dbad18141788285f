/*
 * test_disk_extent_size.c - the LOCAL_DISK store's default extent size follows its capacity
 * (disk_store.h, mc_disk_extent_size_for): at least 16 extents per tier between the 1 MiB
 * floor and the 64 MiB ceiling, and the promise that follows from it: a tier filled past its
 * capacity never evicts a record before MC_DISK_KEEP_FRACTION (3/4) of its capacity has been
 * appended after it. Sizes: a 16 MiB store, 32 KiB values, 32 MiB appended.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "disk_test_util.h"

static void test_extent_size_follows_capacity(void **state)
{
    (void)state;
    assert_int_equal(mc_disk_extent_size_for(64 * MIB), 4 * MIB);
    assert_int_equal(mc_disk_extent_size_for(256 * MIB), 16 * MIB);
    assert_int_equal(mc_disk_extent_size_for(1024 * MIB), 64 * MIB);
    assert_int_equal(mc_disk_extent_size_for(1ull << 40), MC_DISK_EXTENT_MAX);
    assert_int_equal(mc_disk_extent_size_for(4 * MIB), MC_DISK_EXTENT_MIN);
    uint64_t odd = mc_disk_extent_size_for(100 * MIB + 12345);
    assert_int_equal(odd % MC_DISK_BLOCK, 0);
    assert_true(odd * MC_DISK_MIN_EXTENTS <= 100 * MIB + 12345);
}

#define CAP (16 * MIB)
#define VAL (32 * KIB)
#define NREC 1024 /* 2 x CAP of values */

struct watch {
    int appending;    /* index of the record being appended */
    int evicted;      /* records evicted */
    int youngest;     /* the youngest record evicted so far (-1: none) */
    int violations;   /* evicted with less than the kept fraction appended after it */
    uint64_t on_disk; /* bytes one record takes on disk at least (header block + value) */
};

static int on_evict(void *ctx, const struct mc_disk_evict_item *it, size_t n)
{
    struct watch *w = ctx;
    for (size_t i = 0; i < n; i++) {
        char num[16] = ""; /* "r<idx>": the key is not NUL-terminated */
        uint32_t len = it[i].key_len > 1 ? it[i].key_len - 1 : 0;
        memcpy(num, it[i].key + 1, len < sizeof(num) - 1 ? len : sizeof(num) - 1);
        int idx = atoi(num);
        uint64_t after = (uint64_t)(w->appending - idx) * w->on_disk;
        if ((double)after < MC_DISK_KEEP_FRACTION * (double)CAP)
            w->violations++;
        if (idx > w->youngest)
            w->youngest = idx;
        w->evicted++;
    }
    return 0;
}

static void test_never_evicts_the_youngest_three_quarters(void **state)
{
    struct env *e = *state;
    struct watch w = {.youngest = -1, .on_disk = VAL + MC_DISK_BLOCK};
    e->s = open_store(e->dir, CAP, 0, on_evict, &w); /* the default extent size */
    char *buf = malloc(VAL);
    assert_non_null(buf);
    char key[16];
    for (int i = 0; i < NREC; i++) {
        w.appending = i;
        snprintf(key, sizeof(key), "r%d", i);
        fill(buf, VAL, (uint64_t)i);
        assert_int_equal(put(e->s, key, 1, buf, VAL), MC_OK);
    }
    free(buf);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_true(w.evicted > 0); /* it was filled past its capacity */
    assert_int_equal(w.violations, 0);
    assert_true(u.extents >= MC_DISK_MIN_EXTENTS - 2); /* the tier is many extents */
    /* and what it promises it keeps is readable, bytes checked */
    int first_kept = w.youngest + 1;
    assert_true((double)(NREC - first_kept) * (double)w.on_disk >=
                MC_DISK_KEEP_FRACTION * (double)CAP);
    for (int i = first_kept; i < NREC; i += 7) {
        snprintf(key, sizeof(key), "r%d", i);
        assert_int_equal(get_check(e->s, key, VAL, (uint64_t)i, 0), MC_OK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extent_size_follows_capacity),
        cmocka_unit_test_setup_teardown(test_never_evicts_the_youngest_three_quarters, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
