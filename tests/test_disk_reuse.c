/*
 * test_disk_reuse.c - what the LOCAL_DISK store reuses on its write path (disk_store.h
 * "Space", disk_uring.c): the ring's kept write window buffer, and evicted extent files kept
 * as spares and written over by new extents.
 *
 *   window_kept            appends larger than staging map one window buffer, not one each
 *   window_no_stale_bytes  a record written after a longer one (same window bytes) reads back
 *                          exactly, and its padding and header block are zero on disk
 *   recycle_steady         a full store writes new extents over evicted ones: at most two
 *                          spares on disk, live keys exact, evicted keys gone, and a clean
 *                          restart drops nothing and leaves no spare behind
 *   recycle_crash          a writer killed while its active extent is a reused file: the
 *                          restart counts no stale byte as damage, brings no evicted key back,
 *                          deletes the spares, and every key it keeps reads back exactly
 *   recycle_off            no_recycle: evicted extents are deleted as before
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>

#include <cmocka.h>

/* Sizes and offsets here are written for 4 KiB record units: this file covers the format-2
 * layout (test_disk_format covers the 512 B one). */
#define DISK_TEST_RECORD_ALIGN MC_DISK_BLOCK
#include "disk_test_util.h"

static int count_suffix(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        n += strlen(de->d_name) == 20 && !strcmp(de->d_name + 16, suffix);
    closedir(d);
    return n;
}

static struct mc_disk_store *open_cfg(const char *dir, uint64_t cap, uint64_t extent,
                                      int no_recycle)
{
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = dir,
                                     .capacity = cap,
                                     .extent_size = extent,
                                     .queue_depth = 8,
                                     .staging_bytes = 256 * KIB,
                                     .no_reinsert = 1,
                                     .no_recycle = no_recycle};
    struct mc_disk_store *s = NULL;
    char err[256] = "";
    assert_int_equal(mc_disk_store_open(&c, &s, err, sizeof(err)), MC_OK);
    return s;
}

static void window_kept(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 16 * MIB, NULL, NULL);
    struct mc_disk_usage u;
    char key[16];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        /* 1..2 MiB: past the 256 KiB staging, within one kept window buffer */
        assert_int_equal(put_gen(e->s, key, 1, MIB + (size_t)i * 100 * KIB, (uint64_t)i), MC_OK);
    }
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.window_maps, 1);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(get_check(e->s, key, MIB + (size_t)i * 100 * KIB, (uint64_t)i, 0), MC_OK);
    }
    /* a small append goes through staging and maps nothing */
    assert_int_equal(put_gen(e->s, "small", 1, 10 * KIB, 99), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.window_maps, 1);
}

static void window_no_stale_bytes(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 16 * MIB, NULL, NULL);
    size_t big = 3 * MIB, small = MIB + 100;
    char *v = malloc(big);
    memset(v, 0xAA, big); /* fills the window buffer where the next record's padding will be */
    assert_int_equal(put(e->s, "a-long-key-for-the-first-record", 1, v, big), MC_OK);
    assert_int_equal(put_gen(e->s, "b", 1, small, 7), MC_OK);
    assert_int_equal(get_check(e->s, "b", small, 7, 0), MC_OK);
    assert_int_equal(get_check(e->s, "b", small, 7, 1), MC_OK);

    /* On disk: superblock, record a (header block + 3 MiB), then record b. */
    char path[512];
    nth_extent(e->dir, 0, path, sizeof(path));
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    off_t b_off = (off_t)(MC_DISK_BLOCK + MC_DISK_BLOCK + big);
    char *blk = malloc(MC_DISK_BLOCK);
    assert_int_equal(pread(fd, blk, MC_DISK_BLOCK, b_off), MC_DISK_BLOCK);
    for (size_t i = 64 + 1; i < MC_DISK_BLOCK; i++) /* past header and key "b" */
        assert_int_equal(blk[i], 0);
    size_t pad = MC_DISK_BLOCK - small % MC_DISK_BLOCK;
    assert_int_equal(pread(fd, blk, pad, b_off + MC_DISK_BLOCK + (off_t)small), (ssize_t)pad);
    for (size_t i = 0; i < pad; i++)
        assert_int_equal(blk[i], 0);
    close(fd);
    free(blk);
    free(v);
}

/* Appends 128 KiB values "r<i>" for i in [from, to). */
static void put_range(struct mc_disk_store *s, int from, int to)
{
    char key[16];
    for (int i = from; i < to; i++) {
        snprintf(key, sizeof(key), "r%d", i);
        assert_int_equal(put_gen(s, key, 1, 128 * KIB, 1000 + (uint64_t)i), MC_OK);
    }
}

/* Every key of [0, n) reads back exactly or is gone; the last `tail` are there; returns how
 * many are there. */
static int check_range(struct mc_disk_store *s, int n, int tail)
{
    char key[16];
    int found = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "r%d", i);
        int rc = get_check(s, key, 128 * KIB, 1000 + (uint64_t)i, 0);
        if (rc == MC_OK)
            found++;
        else
            assert_int_equal(rc, MC_ERR_OBJECT_NOT_FOUND);
        if (i >= n - tail)
            assert_int_equal(rc, MC_OK);
    }
    return found;
}

static void recycle_steady(void **state)
{
    struct env *e = *state;
    e->s = open_cfg(e->dir, 4 * MIB, MIB, 0);
    put_range(e->s, 0, 80); /* 80 x 132 KiB: 2.5 times the capacity */
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_true(u.evicted_extents >= 4);
    assert_true(u.recycled_extents >= 3);
    assert_true(u.bytes_used <= u.capacity);
    int spares = count_suffix(e->dir, ".spr");
    assert_true(spares <= 2);
    int live = check_range(e->s, 80, 8);
    assert_int_equal(live, (int)u.records);
    assert_true(live < 40);

    mc_disk_store_close(e->s);
    assert_int_equal(count_suffix(e->dir, ".spr"), 0);
    e->s = open_cfg(e->dir, 4 * MIB, MIB, 0);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.dropped_records_at_recovery, 0);
    assert_int_equal(u.dropped_bytes_at_recovery, 0);
    assert_int_equal(u.skipped_extents, 0);
    assert_int_equal(check_range(e->s, 80, 8), live);
    /* and it keeps recycling after the restart */
    put_range(e->s, 80, 120);
    mc_disk_store_usage(e->s, &u);
    assert_true(u.recycled_extents >= 2);
    check_range(e->s, 120, 8);
}

static void recycle_crash(void **state)
{
    struct env *e = *state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct mc_disk_store *s = open_cfg(e->dir, 4 * MIB, MIB, 0);
        /* 75 records: the active extent is a reused file holding 5 of its 7 records, the
         * rest of it the stale bytes of the extent it held before */
        char key[16];
        for (int i = 0; i < 75; i++) {
            snprintf(key, sizeof(key), "r%d", i);
            char *b = malloc(128 * KIB);
            fill(b, 128 * KIB, 1000 + (uint64_t)i);
            struct mc_disk_put p = {key,      (uint32_t)strlen(key), 1, mc_crc32c(b, 128 * KIB), b,
                                    128 * KIB};
            if (mc_disk_store_append(s, &p, 1, NULL) != MC_OK)
                _exit(100);
            free(b);
        }
        struct mc_disk_usage u;
        mc_disk_store_usage(s, &u);
        if (u.recycled_extents < 3)
            _exit(101);
        _exit((int)u.records); /* killed: no close, the spares and the stale tail stay */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    int live = WEXITSTATUS(st);
    assert_true(live > 8 && live < 40);
    e->s = open_cfg(e->dir, 4 * MIB, MIB, 0);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.dropped_records_at_recovery, 0);
    assert_int_equal(u.dropped_bytes_at_recovery, 0);
    assert_int_equal(u.skipped_extents, 0);
    assert_int_equal(count_suffix(e->dir, ".spr"), 0);
    assert_int_equal((int)u.records, live);
    assert_int_equal(check_range(e->s, 75, 5), live);
}

static void recycle_off(void **state)
{
    struct env *e = *state;
    e->s = open_cfg(e->dir, 4 * MIB, MIB, 1);
    put_range(e->s, 0, 60);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_true(u.evicted_extents >= 2);
    assert_int_equal(u.recycled_extents, 0);
    assert_int_equal(count_suffix(e->dir, ".spr"), 0);
    check_range(e->s, 60, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(window_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(window_no_stale_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(recycle_steady, setup, teardown),
        cmocka_unit_test_setup_teardown(recycle_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(recycle_off, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
