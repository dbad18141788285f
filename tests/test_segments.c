/*
 * test_segments.c - segment table, reference counting and allocation strategies
 * (src/master/segments.c).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/segments.h"
#include "mooncake/errors.h"

#define MIB (1ull << 20)

static struct mc_id mkid(uint64_t hi, uint64_t lo)
{
    return (struct mc_id){hi, lo};
}

static struct mc_segment_desc mkdesc(uint64_t n, uint64_t size)
{
    struct mc_segment_desc d;
    memset(&d, 0, sizeof(d));
    d.id = mkid(0x5e6, n);
    snprintf(d.name, sizeof(d.name), "seg-%llu", (unsigned long long)n);
    d.base = 0x100000000ull * (n + 1);
    d.size = size;
    snprintf(d.endpoint, sizeof(d.endpoint), "127.0.0.1:%llu", 20000 + (unsigned long long)n);
    snprintf(d.protocol, sizeof(d.protocol), "tcp");
    return d;
}

static const struct mc_id OWNER = {1, 1};
static const struct mc_id OTHER = {2, 2};

static void test_mount_errors(void **state)
{
    (void)state;
    struct mc_segments *t = mc_segments_new(MC_ALLOC_RANDOM);
    struct mc_segment_desc d;

    d = mkdesc(1, 16 * MIB);
    d.id = mkid(0, 0);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, 16 * MIB);
    d.name[0] = 0;
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, 16 * MIB);
    memset(d.name, 'x', sizeof(d.name)); /* not NUL-terminated */
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, 16 * MIB);
    d.base = 0;
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, 0);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, MC_SEGMENT_MIN_SIZE - 1);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, 16 * MIB);
    d.base = UINT64_MAX - 100;
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, 16 * MIB);
    snprintf(d.protocol, sizeof(d.protocol), "smoke");
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, 16 * MIB);
    d.endpoint[0] = 0;
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_segments_count(t), 0);
    assert_int_equal(mc_segments_capacity(t), 0);
    d = mkdesc(1, 16 * MIB);
    snprintf(d.protocol, sizeof(d.protocol), "rdma");
    d.rkey = 77;
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    mc_segments_free(t);
}

/* Offsets are 48-bit in the master's replica records: a segment they cannot address is refused,
 * the largest one they can is accepted, and the sum of capacities is capped far from wrapping
 * (a refused mount leaves it unchanged). */
static void test_mount_size_limits(void **state)
{
    (void)state;
    struct mc_segments *t = mc_segments_new(MC_ALLOC_RANDOM);
    struct mc_segment_desc d = mkdesc(1, 1ull << 50); /* 1 PiB */
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    d = mkdesc(1, MC_SEGMENT_MAX_SIZE + 1);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_segments_count(t), 0);
    assert_int_equal(mc_segments_capacity(t), 0);

    /* the largest segment: its last bytes are allocatable, and every offset is below 2^48 */
    d = mkdesc(1, MC_SEGMENT_MAX_SIZE);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    assert_int_equal(mc_segments_capacity(t), MC_SEGMENT_MAX_SIZE);
    struct mc_segment_alloc a[8];
    uint32_t n = 0;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(mc_segments_allocate(t, MC_SEGMENT_MAX_SIZE / 8, 1, NULL, 0, &a[i], &n),
                         MC_OK);
        assert_int_equal(n, 1);
        assert_true(a[i].offset + a[i].size <= MC_SEGMENT_MAX_SIZE);
        for (int j = 0; j < i; j++)
            assert_true(a[i].offset != a[j].offset);
    }
    for (int i = 0; i < 8; i++)
        mc_segment_alloc_release(&a[i]);

    /* fill the capacity cap with segments of the largest size, then one of the smallest more */
    uint64_t nmax = MC_SEGMENTS_MAX_CAPACITY / MC_SEGMENT_MAX_SIZE;
    for (uint64_t i = 2; i <= nmax; i++) {
        d = mkdesc(i, MC_SEGMENT_MAX_SIZE);
        assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    }
    assert_int_equal(mc_segments_capacity(t), MC_SEGMENTS_MAX_CAPACITY);
    d = mkdesc(nmax + 1, MC_SEGMENT_MIN_SIZE);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_segments_capacity(t), MC_SEGMENTS_MAX_CAPACITY);
    assert_int_equal(mc_segments_count(t), nmax);
    /* room again after an unmount */
    bool un = false;
    struct mc_segment_desc first = mkdesc(1, MC_SEGMENT_MAX_SIZE);
    assert_int_equal(mc_segments_unmount(t, first.id, OWNER, &un), MC_OK);
    assert_true(un);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    assert_int_equal(mc_segments_capacity(t),
                     MC_SEGMENTS_MAX_CAPACITY - MC_SEGMENT_MAX_SIZE + MC_SEGMENT_MIN_SIZE);
    mc_segments_free(t);
}

static void test_mount_idempotent(void **state)
{
    (void)state;
    struct mc_segments *t = mc_segments_new(MC_ALLOC_RANDOM);
    struct mc_segment_desc d = mkdesc(1, 16 * MIB);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    assert_int_equal(mc_segments_count(t), 1);
    assert_int_equal(mc_segments_capacity(t), 16 * MIB);
    assert_int_equal(mc_segments_mount(t, &d, OTHER, NULL), MC_ERR_ILLEGAL_CLIENT);
    d.size = 32 * MIB;
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_ERR_SEGMENT_ALREADY_EXISTS);
    assert_true(mc_segments_is_mounted(t, d.id));

    bool un = true;
    assert_int_equal(mc_segments_unmount(t, mkid(9, 9), OWNER, &un), MC_OK);
    assert_false(un);
    assert_int_equal(mc_segments_unmount(t, d.id, OTHER, &un), MC_ERR_ILLEGAL_CLIENT);
    assert_false(un);
    assert_int_equal(mc_segments_unmount(t, d.id, OWNER, &un), MC_OK);
    assert_true(un);
    assert_int_equal(mc_segments_unmount(t, d.id, OWNER, &un), MC_OK);
    assert_false(un);
    assert_int_equal(mc_segments_count(t), 0);
    assert_int_equal(mc_segments_capacity(t), 0);
    mc_segments_free(t);
}

static void test_accounting_and_list(void **state)
{
    (void)state;
    struct mc_segments *t = mc_segments_new(MC_ALLOC_RANDOM);
    struct mc_segment_desc d1 = mkdesc(1, 16 * MIB), d2 = mkdesc(2, 48 * MIB);
    assert_int_equal(mc_segments_mount(t, &d1, OWNER, NULL), MC_OK);
    assert_int_equal(mc_segments_mount(t, &d2, OTHER, NULL), MC_OK);
    assert_int_equal(mc_segments_capacity(t), 64 * MIB);
    assert_true(mc_segments_used_ratio(t) == 0.0);
    const char *pref[] = {"seg-1"};
    struct mc_segment_alloc a[2];
    uint32_t n;
    assert_int_equal(mc_segments_allocate(t, 4 * MIB + 3, 1, pref, 1, a, &n), MC_OK);
    assert_int_equal(n, 1);
    assert_string_equal(a[0].seg->desc.name, "seg-1");
    assert_int_equal(mc_segments_allocated(t), 4 * MIB + 3);
    assert_int_equal(atomic_load(&a[0].seg->allocated), 4 * MIB + 3);

    struct mc_segment_info *info;
    size_t ni;
    assert_int_equal(mc_segments_list(t, &info, &ni), MC_OK);
    assert_int_equal(ni, 2);
    for (size_t i = 0; i < ni; i++) {
        if (!strcmp(info[i].desc.name, "seg-1")) {
            assert_int_equal(info[i].allocated, 4 * MIB + 3);
            assert_int_equal(info[i].nallocs, 1);
            assert_true(info[i].used_ratio > 0.25 && info[i].used_ratio < 0.26);
            assert_true(mc_id_eq(info[i].owner, OWNER));
        } else {
            assert_int_equal(info[i].allocated, 0);
            assert_int_equal(info[i].largest_free, 48 * MIB);
            assert_string_equal(info[i].desc.endpoint, "127.0.0.1:20002");
        }
    }
    free(info);
    assert_true(mc_segments_used_ratio(t) > 0.06 && mc_segments_used_ratio(t) < 0.07);
    mc_segment_alloc_release(&a[0]);
    assert_int_equal(mc_segments_allocated(t), 0);
    assert_int_equal(mc_segments_allocate(t, 0, 1, NULL, 0, a, &n), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_segments_allocate(t, 1, 0, NULL, 0, a, &n), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_segments_allocate(t, 1, MC_MAX_REPLICAS + 1, NULL, 0, a, &n),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_segments_allocate(t, 49 * MIB, 1, NULL, 0, a, &n),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(n, 0);
    mc_segments_free(t);

    t = mc_segments_new(MC_ALLOC_RANDOM);
    assert_int_equal(mc_segments_allocate(t, 1, 1, NULL, 0, a, &n), MC_ERR_NO_AVAILABLE_HANDLE);
    mc_segments_free(t);
}

static void test_unmount_with_live_replicas(void **state)
{
    (void)state;
    struct mc_segments *t = mc_segments_new(MC_ALLOC_RANDOM);
    struct mc_segment_desc d = mkdesc(1, 16 * MIB);
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    struct mc_segment_alloc a[3];
    uint32_t n;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mc_segments_allocate(t, MIB, 1, NULL, 0, &a[i], &n), MC_OK);
        assert_int_equal(n, 1);
    }
    struct mc_segment *seg = a[0].seg;
    assert_true(mc_segment_alive(seg));
    assert_int_equal(atomic_load(&seg->refs), 4); /* table + 3 buffers */
    bool un;
    assert_int_equal(mc_segments_unmount(t, d.id, OWNER, &un), MC_OK);
    assert_true(un);
    /* Dead, out of the global figures, but still valid memory for its replicas. */
    assert_false(mc_segment_alive(seg));
    assert_int_equal(atomic_load(&seg->refs), 3);
    assert_int_equal(mc_segments_capacity(t), 0);
    assert_int_equal(mc_segments_allocated(t), 0);
    assert_int_equal(atomic_load(&seg->allocated), 3 * MIB);
    assert_int_equal(mc_segments_allocate(t, 1, 1, NULL, 0, a, &n), MC_ERR_NO_AVAILABLE_HANDLE);
    /* Re-mounting the same id makes a new segment while the old one drains. */
    assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    struct mc_segment_alloc b;
    assert_int_equal(mc_segments_allocate(t, MIB, 1, NULL, 0, &b, &n), MC_OK);
    assert_true(b.seg != seg);
    mc_segment_alloc_release(&a[0]);
    mc_segment_alloc_release(&a[1]);
    assert_int_equal(atomic_load(&seg->allocated), MIB);
    assert_int_equal(mc_segments_allocated(t), MIB); /* only the new segment's buffer counts */
    mc_segment_alloc_release(&a[2]);                 /* last reference: segment freed (ASan) */
    mc_segment_alloc_release(&b);
    assert_int_equal(mc_segments_allocated(t), 0);
    /* Unmount by owner, and freeing the table while a buffer is still live. */
    assert_int_equal(mc_segments_allocate(t, MIB, 1, NULL, 0, &b, &n), MC_OK);
    assert_int_equal(mc_segments_unmount_owner(t, OTHER), 0);
    assert_int_equal(mc_segments_unmount_owner(t, OWNER), 1);
    mc_segments_free(t);
    mc_segment_alloc_release(&b);
}

static void test_random_spreads_and_prefers(void **state)
{
    (void)state;
    struct mc_segments *t = mc_segments_new(MC_ALLOC_RANDOM);
    for (uint64_t i = 0; i < 4; i++) {
        struct mc_segment_desc d = mkdesc(i, 64 * MIB);
        assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    }
    int hits[4] = {0};
    struct mc_segment_alloc a[MC_MAX_REPLICAS];
    uint32_t n;
    for (int k = 0; k < 400; k++) {
        assert_int_equal(mc_segments_allocate(t, 4096, 1, NULL, 0, a, &n), MC_OK);
        assert_int_equal(n, 1);
        hits[a[0].seg->desc.id.lo]++;
        mc_segment_alloc_release(&a[0]);
    }
    for (int i = 0; i < 4; i++)
        assert_true(hits[i] > 40); /* expected 100 each */
    /* Three replicas land on three distinct segments; eight ask for more than exist. */
    assert_int_equal(mc_segments_allocate(t, 4096, 3, NULL, 0, a, &n), MC_OK);
    assert_int_equal(n, 3);
    assert_true(a[0].seg != a[1].seg && a[1].seg != a[2].seg && a[0].seg != a[2].seg);
    for (uint32_t i = 0; i < n; i++)
        mc_segment_alloc_release(&a[i]);
    assert_int_equal(mc_segments_allocate(t, 4096, 8, NULL, 0, a, &n), MC_OK);
    assert_int_equal(n, 4);
    for (uint32_t i = 0; i < n; i++)
        mc_segment_alloc_release(&a[i]);
    /* Preferences are honoured in order, unknown names skipped, duplicates placed once. */
    const char *pref[] = {"nope", "seg-2", "seg-2", "seg-0"};
    for (int k = 0; k < 20; k++) {
        assert_int_equal(mc_segments_allocate(t, 4096, 3, pref, 4, a, &n), MC_OK);
        assert_int_equal(n, 3);
        assert_string_equal(a[0].seg->desc.name, "seg-2");
        assert_string_equal(a[1].seg->desc.name, "seg-0");
        assert_true(a[2].seg != a[0].seg && a[2].seg != a[1].seg);
        for (uint32_t i = 0; i < n; i++)
            mc_segment_alloc_release(&a[i]);
    }
    /* A full preferred segment falls back to the others. */
    struct mc_segment_alloc big;
    const char *p3[] = {"seg-3"};
    assert_int_equal(mc_segments_allocate(t, 64 * MIB, 1, p3, 1, &big, &n), MC_OK);
    assert_string_equal(big.seg->desc.name, "seg-3");
    assert_int_equal(mc_segments_allocate(t, 4096, 1, p3, 1, a, &n), MC_OK);
    assert_string_not_equal(a[0].seg->desc.name, "seg-3");
    mc_segment_alloc_release(&a[0]);
    mc_segment_alloc_release(&big);
    mc_segments_free(t);
}

static void test_free_ratio_first(void **state)
{
    (void)state;
    enum mc_alloc_strategy s;
    assert_int_equal(mc_alloc_strategy_parse("free_ratio_first", &s), 0);
    assert_int_equal(s, MC_ALLOC_FREE_RATIO_FIRST);
    assert_int_equal(mc_alloc_strategy_parse("random", &s), 0);
    assert_int_equal(s, MC_ALLOC_RANDOM);
    assert_int_equal(mc_alloc_strategy_parse("cxl", &s), -1);
    assert_string_equal(mc_alloc_strategy_name(MC_ALLOC_FREE_RATIO_FIRST), "free_ratio_first");

    struct mc_segments *t = mc_segments_new(MC_ALLOC_FREE_RATIO_FIRST);
    for (uint64_t i = 0; i < 4; i++) {
        struct mc_segment_desc d = mkdesc(i, 64 * MIB);
        assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    }
    /* Fill segments 0, 1 and 3 to different levels; segment 2 stays empty. */
    struct mc_segment_alloc fill[3];
    uint32_t n;
    const char *names[] = {"seg-0", "seg-1", "seg-3"};
    uint64_t sizes[] = {32 * MIB, 8 * MIB, 16 * MIB};
    for (int i = 0; i < 3; i++) {
        const char *p[] = {names[i]};
        assert_int_equal(mc_segments_allocate(t, sizes[i], 1, p, 1, &fill[i], &n), MC_OK);
        assert_string_equal(fill[i].seg->desc.name, names[i]);
    }
    struct mc_segment_alloc a[4];
    assert_int_equal(mc_segments_allocate(t, 4096, 1, NULL, 0, a, &n), MC_OK);
    assert_string_equal(a[0].seg->desc.name, "seg-2");
    mc_segment_alloc_release(&a[0]);
    /* Two replicas: the two emptiest. */
    assert_int_equal(mc_segments_allocate(t, 4096, 2, NULL, 0, a, &n), MC_OK);
    assert_int_equal(n, 2);
    assert_string_equal(a[0].seg->desc.name, "seg-2");
    assert_string_equal(a[1].seg->desc.name, "seg-1");
    mc_segment_alloc_release(&a[0]);
    mc_segment_alloc_release(&a[1]);
    /* Preferred still wins over the ratio. */
    const char *p0[] = {"seg-0"};
    assert_int_equal(mc_segments_allocate(t, 4096, 1, p0, 1, a, &n), MC_OK);
    assert_string_equal(a[0].seg->desc.name, "seg-0");
    mc_segment_alloc_release(&a[0]);
    for (int i = 0; i < 3; i++)
        mc_segment_alloc_release(&fill[i]);
    mc_segments_free(t);
}

/* Allocators on several threads while another mounts and unmounts a segment. */
struct worker_arg {
    struct mc_segments *t;
    int id;
};

static void *alloc_worker(void *p)
{
    struct worker_arg *w = p;
    uint64_t s = 0x1234 + (uint64_t)w->id;
    struct mc_segment_alloc held[32];
    int nheld = 0;
    for (int k = 0; k < 3000; k++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        if (nheld < 32 && (s & 1)) {
            uint32_t n;
            if (mc_segments_allocate(w->t, 4096 + s % 65536, 1, NULL, 0, &held[nheld], &n) == MC_OK)
                nheld++;
        } else if (nheld) {
            mc_segment_alloc_release(&held[--nheld]);
        }
    }
    while (nheld)
        mc_segment_alloc_release(&held[--nheld]);
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    struct mc_segments *t = mc_segments_new(MC_ALLOC_RANDOM);
    for (uint64_t i = 0; i < 3; i++) {
        struct mc_segment_desc d = mkdesc(i, 16 * MIB);
        assert_int_equal(mc_segments_mount(t, &d, OWNER, NULL), MC_OK);
    }
    pthread_t th[4];
    struct worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct worker_arg){t, i};
        pthread_create(&th[i], NULL, alloc_worker, &args[i]);
    }
    struct mc_segment_desc extra = mkdesc(7, 16 * MIB);
    for (int k = 0; k < 200; k++) {
        assert_int_equal(mc_segments_mount(t, &extra, OTHER, NULL), MC_OK);
        bool un;
        assert_int_equal(mc_segments_unmount(t, extra.id, OTHER, &un), MC_OK);
        assert_true(un);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(mc_segments_allocated(t), 0);
    assert_int_equal(mc_segments_capacity(t), 48 * MIB);
    mc_segments_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mount_errors),
        cmocka_unit_test(test_mount_size_limits),
        cmocka_unit_test(test_mount_idempotent),
        cmocka_unit_test(test_accounting_and_list),
        cmocka_unit_test(test_unmount_with_live_replicas),
        cmocka_unit_test(test_random_spreads_and_prefers),
        cmocka_unit_test(test_free_ratio_first),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
