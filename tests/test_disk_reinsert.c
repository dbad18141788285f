/*
 * test_disk_reinsert.c - second chance in the LOCAL_DISK store's eviction (disk_store.h,
 * "Second chance"): a record read since it was written is moved to the newest extent instead of
 * going with its extent; the moves are bounded (an eviction always frees space); the callback
 * hears only of the records that really go; a crash between the moves and the deletion (the
 * directory copied inside the callback) recovers one copy; a refused eviction leaves no old copy
 * that a restart could bring back; a Remove during a move (while the record is copied, and after
 * the copy but before the old extent is deleted) leaves no live copy in a crash image taken as it
 * returns; no_reinsert is plain FIFO. Real files in mkdtemp directories.
 *
 * Geometry: 68 KiB extents (a 4 KiB superblock + four 16 KiB records: 4 KiB header + 12 KiB
 * value), capacity 8 extents, high watermark 0.5 (4 extents): the 17th record opens a fifth
 * extent and the watermark drops the oldest one, with room left to move records.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "mooncake/errors.h"

/* Sizes and offsets here are written for 4 KiB record units: this file covers the format-2
 * layout (test_disk_format covers the 512 B one). */
#define DISK_TEST_RECORD_ALIGN MC_DISK_BLOCK
#include "disk_test_util.h"

#define VAL (12 * KIB)

struct told {
    int calls;
    int fail;
    char keys[64][8]; /* every key the callback was told about */
    int n;
    const char *dir; /* copy the directory here inside the callback (a crash image) */
    const char *snap;
};

static void copy_dir(const char *from, const char *to)
{
    assert_int_equal(mkdir(to, 0755), 0);
    DIR *d = opendir(from);
    assert_non_null(d);
    struct dirent *de;
    char a[512], b[512];
    static char buf[64 * 1024];
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n != 20 || strcmp(de->d_name + 16, ".ext"))
            continue;
        snprintf(a, sizeof(a), "%s/%s", from, de->d_name);
        snprintf(b, sizeof(b), "%s/%s", to, de->d_name);
        int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(in >= 0 && out >= 0);
        ssize_t r;
        while ((r = read(in, buf, sizeof(buf))) > 0)
            assert_int_equal(write(out, buf, (size_t)r), r);
        close(in);
        close(out);
    }
    closedir(d);
}

static int told_cb(void *ctx, const struct mc_disk_evict_item *items, size_t n)
{
    struct told *t = ctx;
    t->calls++;
    if (t->snap && t->calls == 1)
        copy_dir(t->dir, t->snap);
    if (t->fail)
        return MC_ERR_RPC_FAIL;
    for (size_t i = 0; i < n && t->n < 64; i++)
        snprintf(t->keys[t->n++], sizeof(t->keys[0]), "%.*s", (int)items[i].key_len, items[i].key);
    return 0;
}

static int was_told(const struct told *t, const char *key)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->keys[i], key))
            return 1;
    return 0;
}

/* Capacity 8 extents of ext bytes, high watermark 0.5, queue depth 4. */
static struct mc_disk_store *open_geom(const char *dir, struct told *t, int no_reinsert,
                                       uint64_t ext)
{
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = dir,
                                     .capacity = 8 * ext,
                                     .high_watermark = 0.5,
                                     .extent_size = ext,
                                     .queue_depth = 4,
                                     .evict_cb = t ? told_cb : NULL,
                                     .evict_ctx = t,
                                     .no_reinsert = no_reinsert};
    struct mc_disk_store *s = NULL;
    assert_int_equal(mc_disk_store_open(&c, &s, NULL, 0), MC_OK);
    return s;
}

static struct mc_disk_store *open_cfg(const char *dir, struct told *t, int no_reinsert)
{
    return open_geom(dir, t, no_reinsert, 68 * KIB);
}

static void put_n(struct mc_disk_store *s, int from, int count)
{
    char key[16];
    for (int i = from; i < from + count; i++) {
        snprintf(key, sizeof(key), "e%03d", i);
        assert_int_equal(put_gen(s, key, 1, VAL, (uint64_t)i), MC_OK);
    }
}

static int read_key(struct mc_disk_store *s, int i)
{
    char key[16];
    snprintf(key, sizeof(key), "e%03d", i);
    return get_check(s, key, VAL, (uint64_t)i, 0);
}

/* A record read between fills survives the eviction of its extent; its unread neighbours of
 * the same age go, and only they are reported. */
static void test_read_record_survives(void **state)
{
    struct env *e = *state;
    struct told t = {0};
    e->s = open_cfg(e->dir, &t, 0);
    put_n(e->s, 0, 4); /* extent 1: e000..e003 */
    assert_int_equal(read_key(e->s, 1), MC_OK);
    put_n(e->s, 4, 12); /* extents 2..4: exactly at the watermark, nothing evicted yet */
    assert_int_equal(t.calls, 0);
    put_n(e->s, 16, 1); /* opens extent 5: the watermark drops extent 1 */
    assert_int_equal(t.calls, 1);
    assert_int_equal(t.n, 3);
    assert_true(was_told(&t, "e000") && was_told(&t, "e002") && was_told(&t, "e003"));
    assert_false(was_told(&t, "e001"));
    assert_int_equal(read_key(e->s, 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(read_key(e->s, 2), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(read_key(e->s, 1), MC_OK); /* the same bytes, version and CRC */
    struct mc_disk_record_info info;
    assert_int_equal(mc_disk_store_lookup(e->s, "e001", 4, &info), MC_OK);
    assert_int_equal(info.version, 1);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.reinserted_records, 1);
    assert_int_equal(u.evicted_records, 3);
    assert_int_equal(u.evicted_extents, 1);
    assert_int_equal(u.records, 14);
    assert_true(u.bytes_used <= 4 * 68 * KIB);

    /* The moved copy survives a restart; the read bit was cleared by the move, so unless it is
     * read again it goes with its new extent like any other record. */
    mc_disk_store_close(e->s);
    e->s = open_cfg(e->dir, &t, 0);
    assert_int_equal(read_key(e->s, 1), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 14);
    assert_int_equal(u.dropped_records_at_recovery, 0);
}

/* An extent full of read records: at most half its bytes move, so the eviction frees space, the
 * records that do not fit go and are reported. */
static void test_bound_frees_space(void **state)
{
    struct env *e = *state;
    struct told t = {0};
    e->s = open_cfg(e->dir, &t, 0);
    put_n(e->s, 0, 16);
    for (int i = 0; i < 4; i++)
        assert_int_equal(read_key(e->s, i), MC_OK);
    struct mc_disk_usage before, u;
    mc_disk_store_usage(e->s, &before);
    put_n(e->s, 16, 1);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(t.calls, 1);
    assert_int_equal(u.evicted_extents, 1);
    assert_int_equal(u.reinserted_records, 2); /* 2 x 16 KiB <= 68 KiB / 2 */
    assert_int_equal(u.evicted_records, 2);
    assert_int_equal(t.n, 2);
    int alive = 0;
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof(key), "e%03d", i);
        int rc = read_key(e->s, i);
        assert_true(rc == MC_OK || rc == MC_ERR_OBJECT_NOT_FOUND);
        assert_int_equal(rc == MC_OK, !was_told(&t, key)); /* told exactly about those gone */
        alive += rc == MC_OK;
    }
    assert_int_equal(alive, 2);
    /* 17 records' worth was appended, one extent of 68 KiB freed, 32 KiB moved */
    assert_int_equal(u.bytes_used, before.bytes_used + 4 * KIB + 16 * KIB - 68 * KIB + 32 * KIB);
    assert_true(u.bytes_used < before.bytes_used);

    /* Everything read all the time: the store still keeps to its watermark. */
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < 17 + 4 * round; i++) {
            char key[16];
            snprintf(key, sizeof(key), "e%03d", i);
            struct mc_disk_record_info info;
            if (mc_disk_store_lookup(e->s, key, 4, &info) == MC_OK)
                assert_int_equal(read_key(e->s, i), MC_OK);
        }
        put_n(e->s, 17 + 4 * round, 4);
        mc_disk_store_usage(e->s, &u);
        assert_true(u.bytes_used <= 4 * 68 * KIB + 68 * KIB);
        assert_true(u.bytes_used <= u.capacity);
    }
    assert_true(u.evicted_extents >= 5);
}

/* The directory as it is inside the callback, after the moves and before the deletion, is a
 * crash image: recovering it keeps one copy of the moved key, and marks the other dead (a later
 * removal then sticks across another restart). */
static void test_crash_between_move_and_delete(void **state)
{
    struct env *e = *state;
    char snap[96];
    snprintf(snap, sizeof(snap), "%s.snap", e->dir);
    struct told t = {.dir = e->dir, .snap = snap};
    e->s = open_cfg(e->dir, &t, 0);
    put_n(e->s, 0, 16);
    assert_int_equal(read_key(e->s, 1), MC_OK);
    put_n(e->s, 16, 1);
    assert_int_equal(t.calls, 1);
    mc_disk_store_close(e->s);
    e->s = NULL;

    /* the image holds extents 1..5, e001 in extent 1 and again in extent 5 */
    assert_int_equal(count_extents(snap), 5);
    struct mc_disk_store *r = open_cfg(snap, NULL, 0);
    struct mc_disk_usage u;
    mc_disk_store_usage(r, &u);
    assert_int_equal(u.records, 17); /* e000..e016 once each */
    assert_int_equal(u.dropped_records_at_recovery, 0);
    assert_int_equal(read_key(r, 1), MC_OK);
    const char *k = "e001";
    uint32_t kl = 4;
    int res = 0;
    assert_int_equal(mc_disk_store_remove(r, &k, &kl, 1, &res), MC_OK);
    mc_disk_store_close(r);
    r = open_cfg(snap, NULL, 0);
    assert_int_equal(read_key(r, 1), MC_ERR_OBJECT_NOT_FOUND); /* no old copy came back */
    mc_disk_store_usage(r, &u);
    assert_int_equal(u.records, 16);
    mc_disk_store_close(r);
    rm_rf(snap);
}

/* A refused eviction keeps its extent, and the moved record's old copy there is marked dead: a
 * removal of the key sticks across a restart. */
static void test_refused_eviction_leaves_no_old_copy(void **state)
{
    struct env *e = *state;
    struct told t = {.fail = 1};
    e->s = open_cfg(e->dir, &t, 0);
    put_n(e->s, 0, 16);
    assert_int_equal(read_key(e->s, 1), MC_OK);
    put_n(e->s, 16, 1); /* the append succeeds; the watermark eviction is refused */
    assert_int_equal(t.calls, 1);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.evicted_extents, 0);
    assert_int_equal(u.reinserted_records, 1);
    assert_int_equal(u.records, 17);
    for (int i = 0; i < 17; i++)
        assert_int_equal(read_key(e->s, i), MC_OK);
    const char *k = "e001";
    uint32_t kl = 4;
    int res = 0;
    assert_int_equal(mc_disk_store_remove(e->s, &k, &kl, 1, &res), MC_OK);
    mc_disk_store_close(e->s);
    e->s = open_cfg(e->dir, NULL, 0);
    assert_int_equal(read_key(e->s, 1), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(read_key(e->s, 0), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 16);
}

/* Many moves at once (more than the ring's depth): they are read in one batch and written in
 * runs; a record whose value no longer matches its CRC is not moved and breaks its run, the
 * records on both sides of it still move, and all of them come back after a restart.
 * Geometry: 260 KiB extents of sixteen 16 KiB records, so half an extent moves 8 records. */
static void test_batched_moves_skip_bad_record(void **state)
{
    struct env *e = *state;
    struct told t = {0};
    e->s = open_geom(e->dir, &t, 0, 260 * KIB);
    put_n(e->s, 0, 64); /* extents 1..4, at the watermark */
    for (int i = 2; i < 10; i++)
        assert_int_equal(read_key(e->s, i), MC_OK);
    char path[512];
    nth_extent(e->dir, 0, path, sizeof(path));
    flip_bit(path, 4 * KIB + 5 * 16 * KIB + 4 * KIB + 100); /* e005's value */
    assert_int_equal(t.calls, 0);
    put_n(e->s, 64, 1); /* opens extent 5: extent 1 goes */
    assert_int_equal(t.calls, 1);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.reinserted_records, 7);
    assert_int_equal(u.evicted_records, 9);
    assert_int_equal(t.n, 9);
    for (int i = 0; i < 16; i++) {
        char key[16];
        snprintf(key, sizeof(key), "e%03d", i);
        int moved = i >= 2 && i < 10 && i != 5;
        assert_int_equal(was_told(&t, key), !moved);
        assert_int_equal(read_key(e->s, i), moved ? MC_OK : MC_ERR_OBJECT_NOT_FOUND);
    }
    mc_disk_store_close(e->s);
    e->s = open_geom(e->dir, NULL, 0, 260 * KIB);
    for (int i = 2; i < 10; i++)
        assert_int_equal(read_key(e->s, i), i == 5 ? MC_ERR_OBJECT_NOT_FOUND : MC_OK);
    for (int i = 16; i < 65; i++)
        assert_int_equal(read_key(e->s, i), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 48 + 1 + 7);
    assert_int_equal(u.dropped_records_at_recovery, 0);
}

/* A Remove of e001 started at one point of its second-chance move (MC_DISK_MOVE_*), from
 * another thread; the directory is copied (a crash image) as soon as the Remove has returned
 * and before the eviction deletes the old extent. */
struct mid_move {
    struct mc_disk_store *s;
    int stage; /* where the Remove starts */
    const char *dir, *snap;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, done, snapped, res;
};

static void *mid_remove_main(void *arg)
{
    struct mid_move *m = arg;
    const char *k = "e001";
    uint32_t kl = 4;
    int res = -1;
    int rc = mc_disk_store_remove(m->s, &k, &kl, 1, &res);
    pthread_mutex_lock(&m->mu);
    m->res = rc == MC_OK ? res : rc;
    m->done = 1;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

static void mid_move_hook(void *ctx, int stage)
{
    struct mid_move *m = ctx;
    if (stage == m->stage && !m->started) {
        m->started = 1;
        assert_int_equal(pthread_create(&m->th, NULL, mid_remove_main, m), 0);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 300 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&m->mu);
        while (!m->done && pthread_cond_timedwait(&m->cv, &m->mu, &until) == 0)
            ;
        int done = m->done;
        pthread_mutex_unlock(&m->mu);
        if (!done)
            return; /* it waits for the move: the copy goes on (the next stage joins it) */
        pthread_join(m->th, NULL);
        copy_dir(m->dir, m->snap);
        m->snapped = 1;
    } else if (stage == MC_DISK_MOVE_SWITCHED && m->started && !m->snapped) {
        pthread_join(m->th, NULL);
        copy_dir(m->dir, m->snap);
        m->snapped = 1;
    }
}

/* The Remove of a record the eviction is moving returns only once both copies are dead: the
 * crash image taken right after it (before the old extent is deleted) recovers without the
 * key, as do the live store and a restart of it. */
static void remove_during_move(struct env *e, int stage)
{
    char snap[96];
    snprintf(snap, sizeof(snap), "%s.snap", e->dir);
    struct told t = {0};
    struct mid_move m = {.stage = stage, .dir = e->dir, .snap = snap, .res = -1};
    pthread_mutex_init(&m.mu, NULL);
    pthread_cond_init(&m.cv, NULL);
    e->s = m.s = open_cfg(e->dir, &t, 0);
    put_n(e->s, 0, 16);
    assert_int_equal(read_key(e->s, 1), MC_OK);
    struct mc_disk_fault f = {.on_move = mid_move_hook, .on_move_ctx = &m};
    mc_disk_store_test_set_fault(e->s, &f);
    put_n(e->s, 16, 1); /* the watermark eviction moves e001 out of extent 1 */
    mc_disk_store_test_set_fault(e->s, NULL);
    assert_int_equal(m.started, 1);
    assert_int_equal(m.snapped, 1);
    assert_int_equal(m.res, MC_OK);
    assert_int_equal(read_key(e->s, 1), MC_ERR_OBJECT_NOT_FOUND);
    mc_disk_store_close(e->s);
    e->s = NULL;

    struct mc_disk_store *r = open_cfg(snap, NULL, 0);
    assert_int_equal(read_key(r, 1), MC_ERR_OBJECT_NOT_FOUND); /* the crash did not bring it back */
    assert_int_equal(read_key(r, 0), MC_OK);
    assert_int_equal(read_key(r, 16), MC_OK);
    mc_disk_store_close(r);
    rm_rf(snap);
    e->s = open_cfg(e->dir, NULL, 0);
    assert_int_equal(read_key(e->s, 1), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(read_key(e->s, 16), MC_OK);
    pthread_mutex_destroy(&m.mu);
    pthread_cond_destroy(&m.cv);
}

/* Variant 1: the Remove comes while the record is being copied (new copy written, the index
 * still at the old one). */
static void test_remove_during_copy(void **state)
{
    remove_during_move(*state, MC_DISK_MOVE_COPIED);
}

/* Variant 2: the Remove comes after the copy, before the old extent is deleted. */
static void test_remove_after_copy_before_delete(void **state)
{
    remove_during_move(*state, MC_DISK_MOVE_SWITCHED);
}

/* no_reinsert: a read record goes with its extent (plain FIFO). */
static void test_no_reinsert_is_fifo(void **state)
{
    struct env *e = *state;
    struct told t = {0};
    e->s = open_cfg(e->dir, &t, 1);
    put_n(e->s, 0, 16);
    assert_int_equal(read_key(e->s, 1), MC_OK);
    put_n(e->s, 16, 1);
    assert_int_equal(t.n, 4);
    assert_true(was_told(&t, "e001"));
    assert_int_equal(read_key(e->s, 1), MC_ERR_OBJECT_NOT_FOUND);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.reinserted_records, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_read_record_survives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bound_frees_space, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_between_move_and_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_eviction_leaves_no_old_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batched_moves_skip_bad_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_reinsert_is_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_during_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_after_copy_before_delete, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
