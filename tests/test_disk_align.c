/*
 * test_disk_align.c - large appends in 512-byte record units start and end on a 4 KiB boundary
 * of their extent (dead filler records take the gaps), their writes are cut at 4 KiB-aligned
 * offsets (a record may straddle two writes), and none of it costs a record at a restart: the
 * fillers are stepped over, a failed straddling write is redone record by record, a value that
 * does not match its CRC is written dead, and a torn append after a filler is cut off alone.
 * Exits 77 where the filesystem refuses 512-byte O_DIRECT I/O (4 KiB units need no fillers).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "disk_test_util.h"

#define NV 17 /* 64 KiB values of the large append */

static void keyname(char *k, size_t len, int i)
{
    snprintf(k, len, "big%02d", i);
}

/* One append of n values of len bytes (seeds 100 + i), the i-th CRC spoiled when bad == i. */
static int put_batch(struct mc_disk_store *s, int n, size_t len, int bad, int *res)
{
    struct mc_disk_put *p = calloc((size_t)n, sizeof(*p));
    char(*keys)[16] = calloc((size_t)n, 16);
    char *vals = malloc((size_t)n * len);
    for (int i = 0; i < n; i++) {
        keyname(keys[i], 16, i);
        fill(vals + (size_t)i * len, len, 100 + (uint64_t)i);
        p[i] = (struct mc_disk_put){keys[i],
                                    (uint32_t)strlen(keys[i]),
                                    1,
                                    mc_crc32c(vals + (size_t)i * len, len),
                                    vals + (size_t)i * len,
                                    len};
        if (i == bad)
            p[i].crc ^= 1;
    }
    int rc = mc_disk_store_append(s, p, (size_t)n, res);
    free(p);
    free(keys);
    free(vals);
    return rc;
}

static void check_all(struct mc_disk_store *s, int n, size_t len, int bad)
{
    char k[16];
    for (int i = 0; i < n; i++) {
        keyname(k, sizeof(k), i);
        assert_int_equal(get_check(s, k, len, 100 + (uint64_t)i, i & 1),
                         i == bad ? MC_ERR_OBJECT_NOT_FOUND : MC_OK);
    }
}

static struct mc_disk_store *open_unit(struct env *e)
{
    struct mc_disk_store *s = open_store(e->dir, 256 * MIB, 64 * MIB, NULL, NULL);
    struct mc_disk_usage u;
    mc_disk_store_usage(s, &u);
    if (u.record_unit != 512) {
        mc_disk_store_close(s);
        fprintf(stderr, "skipped: the filesystem takes no 512-byte O_DIRECT I/O\n");
        exit(77);
    }
    return s;
}

/* A small record leaves the extent's end off a 4 KiB boundary; the large append after it
 * starts and ends on one, and a restart finds every record and no damage. */
static void test_large_append_aligned(void **state)
{
    struct env *e = *state;
    e->s = open_unit(e);
    assert_int_equal(put_gen(e->s, "small", 1, 4096, 7), MC_OK);
    struct mc_disk_usage u0, u;
    mc_disk_store_usage(e->s, &u0);
    /* superblock, then the small record (a 512 B header unit and its 4 KiB value) */
    assert_int_equal(u0.bytes_used, 4096 + 512 + 4096);
    int res[NV];
    assert_int_equal(put_batch(e->s, NV, 64 * KIB, -1, res), MC_OK);
    mc_disk_store_usage(e->s, &u);
    uint64_t recs = NV * (512 + 64 * KIB);
    /* 3584 B before (8704 -> 12288) and after (the records end 512 B past a block) */
    assert_int_equal(u.filler_bytes - u0.filler_bytes, 3584 + 3584);
    assert_int_equal(u.bytes_used, u0.bytes_used + recs + 7168);
    assert_int_equal(u.bytes_used % 4096, 0);
    assert_int_equal(u.live_bytes, u0.live_bytes + recs);
    check_all(e->s, NV, 64 * KIB, -1);

    mc_disk_store_close(e->s);
    e->s = open_unit(e);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, NV + 1);
    assert_int_equal(u.dropped_records_at_recovery, 0);
    assert_int_equal(u.dropped_bytes_at_recovery, 0);
    check_all(e->s, NV, 64 * KIB, -1);
    assert_int_equal(get_check(e->s, "small", 4096, 7, 0), MC_OK);
}

/* A small append is written as it falls: no filler. */
static void test_small_append_unpadded(void **state)
{
    struct env *e = *state;
    e->s = open_unit(e);
    assert_int_equal(put_gen(e->s, "a", 1, 4096, 1), MC_OK);
    assert_int_equal(put_gen(e->s, "b", 1, 4096, 2), MC_OK);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.filler_bytes, 0);
    assert_int_equal(u.bytes_used, 4096 + 2 * (512 + 4096));
}

/* Values of 300 KiB straddle the 4 MiB cuts; the second write fails once: the records it held
 * are rewritten one by one and every value reads back, before and after a restart. */
static void test_failed_straddling_write(void **state)
{
    struct env *e = *state;
    e->s = open_unit(e);
    struct mc_disk_fault f = {
        .kind = MC_DISK_FAULT_EIO, .ops = MC_DISK_FAULT_WRITE, .skip = 1, .count = 1};
    mc_disk_store_test_set_fault(e->s, &f);
    int res[40];
    assert_int_equal(put_batch(e->s, 40, 300 * KIB, -1, res), MC_OK);
    mc_disk_store_test_set_fault(e->s, NULL);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_true(u.write_ios >= 3); /* 12 MiB in writes of at most 4 MiB */
    assert_int_equal(u.write_errors, 0);
    check_all(e->s, 40, 300 * KIB, -1);
    mc_disk_store_close(e->s);
    e->s = open_unit(e);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 40);
    assert_int_equal(u.dropped_records_at_recovery, 0);
    assert_int_equal(u.dropped_bytes_at_recovery, 0);
    check_all(e->s, 40, 300 * KIB, -1);
}

/* A value whose bytes do not match its CRC (found as it is copied) fails alone and is on disk
 * as a dead record: a restart steps over it without counting damage. */
static void test_bad_crc_written_dead(void **state)
{
    struct env *e = *state;
    e->s = open_unit(e);
    int res[NV];
    assert_int_equal(put_batch(e->s, NV, 64 * KIB, 5, res), MC_ERR_CHECKSUM_MISMATCH);
    for (int i = 0; i < NV; i++)
        assert_int_equal(res[i], i == 5 ? MC_ERR_CHECKSUM_MISMATCH : MC_OK);
    check_all(e->s, NV, 64 * KIB, 5);
    mc_disk_store_close(e->s);
    e->s = open_unit(e);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, NV - 1);
    assert_int_equal(u.dropped_records_at_recovery, 0);
    assert_int_equal(u.dropped_bytes_at_recovery, 0);
    check_all(e->s, NV, 64 * KIB, 5);
}

/* A crash: a torn record right after the filler that ends a large append (a header and part of
 * its value in the preallocated tail). The restart cuts the torn record off, counts it, and
 * keeps every record before it. */
static void test_torn_after_filler(void **state)
{
    struct env *e = *state;
    e->s = open_unit(e);
    assert_int_equal(put_gen(e->s, "small", 1, 4096, 7), MC_OK);
    int res[NV];
    assert_int_equal(put_batch(e->s, NV, 64 * KIB, -1, res), MC_OK);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    uint64_t end = u.bytes_used; /* one extent: its append offset */
    /* the next append's record, torn: its header and 8 KiB of its 64 KiB value */
    assert_int_equal(put_gen(e->s, "torn", 1, 64 * KIB, 9), MC_OK);
    mc_disk_store_close(e->s);
    e->s = NULL;
    char path[512];
    nth_extent(e->dir, 1, path, sizeof(path));
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    char *z = calloc(1, 56 * KIB);
    assert_int_equal(pwrite(fd, z, 56 * KIB, (off_t)(end + 512 + 8 * KIB)), (ssize_t)(56 * KIB));
    free(z);
    close(fd);
    e->s = open_unit(e);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, NV + 1);
    assert_int_equal(u.dropped_records_at_recovery, 1);
    assert_int_equal(get_check(e->s, "torn", 64 * KIB, 9, 0), MC_ERR_OBJECT_NOT_FOUND);
    check_all(e->s, NV, 64 * KIB, -1);
    assert_int_equal(get_check(e->s, "small", 4096, 7, 0), MC_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_large_append_aligned, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_append_unpadded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_straddling_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_crc_written_dead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_after_filler, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
