/*
 * test_disk_store.c - the LOCAL_DISK store (src/client/disk_store.h): round trips, batches,
 * restart recovery, torn appends (truncation and a SIGKILLed writer), bit flips, injected I/O
 * faults, capacity eviction (callback first, readers respected, pins), duplicate keys, and the
 * refusal of directories without O_DIRECT. Every test works in its own mkdtemp directory under
 * /tmp and removes it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"
#include "test_spawn.h"

/* Sizes and offsets here are written for 4 KiB record units: this file covers the format-2
 * layout (test_disk_format covers the 512 B one). */
#define DISK_TEST_RECORD_ALIGN MC_DISK_BLOCK
#include "disk_test_util.h"

/* ------------------------------------------------------------------ tests */

static void test_round_trip_sizes(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 256 * MIB, 8 * MIB, NULL, NULL);
    const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 65536, 65536 + 17, MIB, 3 * MIB + 5};
    const size_t n = sizeof(sizes) / sizeof(sizes[0]);
    char key[32];
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "size-%zu", sizes[i]);
        assert_int_equal(put_gen(e->s, key, 10 + i, sizes[i], i), MC_OK);
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "size-%zu", sizes[i]);
        assert_int_equal(get_check(e->s, key, sizes[i], i, 0), MC_OK);
        assert_int_equal(get_check(e->s, key, sizes[i], i, 1), MC_OK);
        struct mc_disk_record_info info;
        assert_int_equal(mc_disk_store_lookup(e->s, key, (uint32_t)strlen(key), &info), MC_OK);
        assert_int_equal(info.version, 10 + i);
        assert_int_equal(info.size, sizes[i]);
    }
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, n);
    assert_true(u.bytes_used >= u.live_bytes && u.live_bytes > 4 * MIB);
    assert_int_equal(get_check(e->s, "absent", 10, 0, 0), MC_ERR_OBJECT_NOT_FOUND);
}

static void test_batches(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 1 * MIB, NULL, NULL);
    enum { N = 150 };
    static char keys[N][16];
    struct mc_disk_put p[N];
    char *vals[N];
    int res[N];
    for (int i = 0; i < N; i++) {
        size_t len = (size_t)(i * 997) % 20000;
        vals[i] = malloc(len + 1);
        fill(vals[i], len, (uint64_t)i);
        snprintf(keys[i], sizeof(keys[i]), "b%03d", i);
        p[i] = (struct mc_disk_put){
            keys[i], (uint32_t)strlen(keys[i]), 1, len ? mc_crc32c(vals[i], len) : 0, vals[i], len};
    }
    p[7].crc ^= 1; /* a caller CRC that does not match its bytes is refused */
    assert_int_equal(mc_disk_store_append(e->s, p, N, res), MC_ERR_CHECKSUM_MISMATCH);
    for (int i = 0; i < N; i++)
        assert_int_equal(res[i], i == 7 ? MC_ERR_CHECKSUM_MISMATCH : MC_OK);

    struct mc_disk_get g[N + 1];
    char *bufs[N + 1];
    for (int i = 0; i <= N; i++) {
        bufs[i] = malloc(20000);
        g[i] = (struct mc_disk_get){
            .key = i < N ? keys[i] : "missing", .key_len = 4, .buf = bufs[i], .cap = 20000};
        g[i].key_len = (uint32_t)strlen(g[i].key);
    }
    g[3].cap = p[3].len - 1; /* too small */
    assert_int_not_equal(mc_disk_store_read(e->s, g, N + 1), MC_OK);
    for (int i = 0; i < N; i++) {
        if (i == 7) {
            assert_int_equal(g[i].result, MC_ERR_OBJECT_NOT_FOUND);
        } else if (i == 3) {
            assert_int_equal(g[i].result, MC_ERR_BUFFER_OVERFLOW);
        } else {
            assert_int_equal(g[i].result, MC_OK);
            assert_int_equal(g[i].len, p[i].len);
            assert_memory_equal(bufs[i], vals[i], p[i].len);
        }
    }
    assert_int_equal(g[N].result, MC_ERR_OBJECT_NOT_FOUND);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, N - 1);
    assert_true(u.extents > 1); /* 1 MiB extents roll over */
    for (int i = 0; i <= N; i++) {
        free(bufs[i]);
        if (i < N)
            free(vals[i]);
    }
}

static int count_cb(void *ctx, const struct mc_disk_record_info *r)
{
    (void)r;
    (*(int *)ctx)++;
    return 0;
}

static void test_restart_recovery(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 256 * KIB, NULL, NULL);
    char key[32];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "r%d", i);
        assert_int_equal(put_gen(e->s, key, 100 + i, 1000 + i * 777, i), MC_OK);
    }
    const char *rm[] = {"r5", "r6"};
    uint32_t rml[] = {2, 2};
    int rres[2];
    assert_int_equal(mc_disk_store_remove(e->s, rm, rml, 2, rres), MC_OK);
    assert_int_equal(mc_disk_store_remove(e->s, rm, rml, 1, rres), MC_ERR_OBJECT_NOT_FOUND);
    struct mc_disk_usage before, after;
    mc_disk_store_usage(e->s, &before);
    reopen(e, 64 * MIB, 256 * KIB);
    mc_disk_store_usage(e->s, &after);
    assert_int_equal(after.records, 38);
    assert_int_equal(after.live_bytes, before.live_bytes);
    assert_int_equal(after.dropped_records_at_recovery, 0);
    int n = 0;
    assert_int_equal(mc_disk_store_foreach(e->s, count_cb, &n), 0);
    assert_int_equal(n, 38);
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "r%d", i);
        int want = (i == 5 || i == 6) ? MC_ERR_OBJECT_NOT_FOUND : MC_OK;
        assert_int_equal(get_check(e->s, key, 1000 + i * 777, i, i & 1), want);
    }
    /* Appends after a restart go to a new extent and survive another restart. */
    assert_int_equal(put_gen(e->s, "after", 1, 5000, 77), MC_OK);
    reopen(e, 64 * MIB, 256 * KIB);
    assert_int_equal(get_check(e->s, "after", 5000, 77, 0), MC_OK);
    assert_int_equal(get_check(e->s, "r39", 1000 + 39 * 777, 39, 0), MC_OK);
}

/* The end of an extent's written part: extents are preallocated (their unwritten tail reads as
 * zeros), so the last byte written ends the last 4 KiB block that is not all zeros. */
static off_t written_end(const char *path)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    char blk[4096];
    off_t end = 0, at = 0;
    ssize_t n;
    while ((n = pread(fd, blk, sizeof(blk), at)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            if (blk[i]) {
                end = at + n;
                break;
            }
        at += n;
    }
    close(fd);
    return end;
}

static void test_torn_tail_truncated(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(put_gen(e->s, "t1", 1, 10000, 1), MC_OK);
    assert_int_equal(put_gen(e->s, "t2", 1, 20000, 2), MC_OK);
    assert_int_equal(put_gen(e->s, "t3", 1, 30000, 3), MC_OK);
    mc_disk_store_close(e->s);
    e->s = NULL;
    char path[512];
    nth_extent(e->dir, 1, path, sizeof(path));
    off_t end = written_end(path);
    assert_true(end > 6000);
    assert_int_equal(truncate(path, end - 6000), 0); /* mid-value of t3 */
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(get_check(e->s, "t1", 10000, 1, 0), MC_OK);
    assert_int_equal(get_check(e->s, "t2", 20000, 2, 0), MC_OK);
    assert_int_equal(get_check(e->s, "t3", 30000, 3, 0), MC_ERR_OBJECT_NOT_FOUND);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.dropped_records_at_recovery, 1);
    assert_true(u.dropped_bytes_at_recovery > 0);
    /* The torn bytes were cut off: the next restart finds nothing to drop. */
    reopen(e, 64 * MIB, 8 * MIB);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.dropped_records_at_recovery, 0);
    assert_int_equal(u.records, 2);
}

/* A child appends 256 KiB records as fast as it can and reports each acknowledged one; it is
 * SIGKILLed mid-stream. Everything acknowledged must be intact afterwards. */
static void test_kill_mid_append(void **state)
{
    struct env *e = *state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        tu_die_with_parent(parent);
        close(fds[0]);
        struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                         .path = e->dir,
                                         .capacity = 1024 * MIB,
                                         .extent_size = 4 * MIB,
                                         .queue_depth = 8};
        struct mc_disk_store *s = NULL;
        if (mc_disk_store_open(&c, &s, NULL, 0) != MC_OK)
            _exit(1);
        char *b = malloc(256 * KIB);
        for (uint32_t i = 0;; i++) {
            char key[32];
            snprintf(key, sizeof(key), "k%u", i);
            fill(b, 256 * KIB, i);
            struct mc_disk_put p = {key,      (uint32_t)strlen(key), 1, mc_crc32c(b, 256 * KIB), b,
                                    256 * KIB};
            if (mc_disk_store_append(s, &p, 1, NULL) != MC_OK)
                _exit(2);
            if (write(fds[1], &i, sizeof(i)) != sizeof(i))
                _exit(3);
        }
    }
    close(fds[1]);
    uint32_t acked = 0, v;
    int got = 0;
    while (got < 20 && read(fds[0], &v, sizeof(v)) == sizeof(v)) {
        acked = v + 1;
        got++;
    }
    kill(pid, SIGKILL);
    while (read(fds[0], &v, sizeof(v)) == sizeof(v))
        acked = v + 1; /* acknowledgements already in the pipe */
    int status;
    waitpid(pid, &status, 0);
    close(fds[0]);
    assert_true(WIFSIGNALED(status));
    assert_true(acked >= 20);
    e->s = open_store(e->dir, 1024 * MIB, 4 * MIB, NULL, NULL);
    char key[32];
    for (uint32_t i = 0; i < acked; i++) {
        snprintf(key, sizeof(key), "k%u", i);
        assert_int_equal(get_check(e->s, key, 256 * KIB, i, 0), MC_OK);
    }
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_true(u.records >= acked && u.records <= acked + 1);
}

static void test_bit_flips_at_recovery(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    /* After the 4 KiB superblock, records of 4 KiB header + 8 KiB value: r0 at 4 KiB, r1 at
     * 16 KiB, r2 at 28 KiB, r3 at 40 KiB. */
    for (int i = 0; i < 4; i++) {
        char key[8];
        snprintf(key, sizeof(key), "f%d", i);
        assert_int_equal(put_gen(e->s, key, 1, 8192, i), MC_OK);
    }
    mc_disk_store_close(e->s);
    e->s = NULL;
    char path[512];
    nth_extent(e->dir, 1, path, sizeof(path));
    flip_bit(path, 16 * KIB + 4096 + 5000); /* f1's value */
    flip_bit(path, 28 * KIB + 20);          /* f2's header */
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(get_check(e->s, "f0", 8192, 0, 0), MC_OK);
    assert_int_equal(get_check(e->s, "f1", 8192, 1, 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get_check(e->s, "f2", 8192, 2, 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get_check(e->s, "f3", 8192, 3, 0), MC_OK);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.dropped_records_at_recovery, 2);
    assert_int_equal(u.records, 2);
}

static void test_bit_flip_at_read(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(put_gen(e->s, "x", 1, 8192, 9), MC_OK);
    assert_int_equal(put_gen(e->s, "y", 1, 100, 10), MC_OK);
    char path[512];
    nth_extent(e->dir, 1, path, sizeof(path));
    flip_bit(path, 8 * KIB + 3);         /* x's value (after the superblock and its header) */
    flip_bit(path, 16 * KIB + 4096 + 7); /* y's value */
    for (int odd = 0; odd < 2; odd++) {
        char *raw = NULL;
        assert_int_equal(posix_memalign((void **)&raw, 4096, 16384), 0);
        memset(raw, 0, 16384);
        struct mc_disk_get g = {.key = "x", .key_len = 1, .buf = raw + odd, .cap = 8192};
        /* the first read finds the damage and drops the record: the second finds none */
        assert_int_equal(mc_disk_store_read(e->s, &g, 1),
                         odd ? MC_ERR_OBJECT_NOT_FOUND : MC_ERR_CHECKSUM_MISMATCH);
        assert_int_equal(g.len, 0);
        char zero[8192] = {0};
        assert_memory_equal(raw + odd, zero, 8192); /* no wrong bytes handed out */
        free(raw);
    }
    assert_int_equal(get_check(e->s, "y", 100, 10, 1), MC_ERR_CHECKSUM_MISMATCH);
}

struct dropped {
    int calls;
    char key[16];
    uint64_t version, size;
};

static int drop_cb(void *ctx, const struct mc_disk_evict_item *items, size_t n)
{
    struct dropped *d = ctx;
    d->calls++;
    assert_int_equal(n, 1);
    snprintf(d->key, sizeof(d->key), "%.*s", (int)items[0].key_len, items[0].key);
    d->version = items[0].version;
    d->size = items[0].size;
    return 0;
}

/* A record whose value fails its check on read is dropped (dead mark written, out of the
 * index) and reported through drop_cb: the old store kept it, so every later read failed the
 * same way and its owner kept listing it. The key can be written again, and a restart finds
 * the dead mark (nothing dropped at recovery). */
static void test_read_check_failure_drops_record(void **state)
{
    struct env *e = *state;
    struct dropped d = {0};
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = e->dir,
                                     .capacity = 64 * MIB,
                                     .extent_size = 8 * MIB,
                                     .drop_cb = drop_cb,
                                     .drop_ctx = &d};
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    assert_int_equal(put_gen(e->s, "x", 7, 8192, 9), MC_OK);
    assert_int_equal(put_gen(e->s, "y", 1, 100, 10), MC_OK);
    char path[512];
    nth_extent(e->dir, 1, path, sizeof(path));
    flip_bit(path, 8 * KIB + 3); /* x's value (after the superblock and its header) */
    assert_int_equal(get_check(e->s, "x", 8192, 9, 1), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(d.calls, 1);
    assert_string_equal(d.key, "x");
    assert_int_equal(d.version, 7);
    assert_int_equal(d.size, 8192);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.corrupt_dropped, 1);
    assert_int_equal(u.records, 1);
    assert_int_equal(mc_disk_store_lookup(e->s, "x", 1, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(get_check(e->s, "x", 8192, 9, 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(d.calls, 1);
    assert_int_equal(get_check(e->s, "y", 100, 10, 0), MC_OK);
    assert_int_equal(put_gen(e->s, "x", 8, 8192, 11), MC_OK);
    assert_int_equal(get_check(e->s, "x", 8192, 11, 0), MC_OK);
    reopen(e, 64 * MIB, 8 * MIB);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.dropped_records_at_recovery, 0); /* it was marked dead, not left damaged */
    assert_int_equal(u.records, 2);
    assert_int_equal(get_check(e->s, "x", 8192, 11, 1), MC_OK);
}

static int remove_key(struct mc_disk_store *s, const char *key)
{
    uint32_t len = (uint32_t)strlen(key);
    int res = -1;
    int rc = mc_disk_store_remove(s, &key, &len, 1, &res);
    assert_int_equal(rc, res);
    return rc;
}

/* An extent whose last live record goes (removed, or replaced by a newer version) is deleted
 * at once and its bytes leave bytes_used: the old store kept it until capacity eviction, so a
 * store emptied by removals held its dead extents (and their disk space) forever. Geometry:
 * 256 KiB extents holding three 64 KiB records (4 KiB header + 60 KiB value). */
static void test_dead_extent_reclaimed(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 256 * KIB, NULL, NULL);
    char key[16];
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof(key), "r%02d", i);
        assert_int_equal(put_gen(e->s, key, 1, 60 * KIB, (uint64_t)i), MC_OK);
    }
    struct mc_disk_usage u0, u;
    mc_disk_store_usage(e->s, &u0);
    assert_int_equal(u0.extents, 4);
    assert_int_equal(count_extents(e->dir), 4);
    /* part of an extent: it stays */
    assert_int_equal(remove_key(e->s, "r00"), MC_OK);
    assert_int_equal(remove_key(e->s, "r01"), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.extents, 4);
    assert_int_equal(u.reclaimed_extents, 0);
    /* its last record: it goes, and its bytes with it */
    assert_int_equal(remove_key(e->s, "r02"), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.extents, 3);
    assert_int_equal(u.reclaimed_extents, 1);
    assert_int_equal(u.bytes_used, u0.bytes_used - (4 * KIB + 3 * 64 * KIB));
    assert_int_equal(count_extents(e->dir), 3);
    /* replaced by newer versions: the second extent goes too */
    for (int i = 3; i < 6; i++) {
        snprintf(key, sizeof(key), "r%02d", i);
        assert_int_equal(put_gen(e->s, key, 2, 60 * KIB, 100 + (uint64_t)i), MC_OK);
    }
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.reclaimed_extents, 2);
    assert_int_equal(u.records, 9);
    /* everything removed: nothing left */
    for (int i = 3; i < 12; i++) {
        snprintf(key, sizeof(key), "r%02d", i);
        assert_int_equal(remove_key(e->s, key), MC_OK);
    }
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 0);
    assert_int_equal(u.extents, 0);
    assert_int_equal(u.bytes_used, 0);
    assert_int_equal(u.live_bytes, 0);
    assert_int_equal(count_extents(e->dir), 0);
    /* the store goes on, and a restart finds only what is live */
    assert_int_equal(put_gen(e->s, "new", 1, 60 * KIB, 77), MC_OK);
    reopen(e, 64 * MIB, 256 * KIB);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 1);
    assert_int_equal(get_check(e->s, "new", 60 * KIB, 77, 1), MC_OK);
    assert_int_equal(get_check(e->s, "r05", 60 * KIB, 105, 0), MC_ERR_OBJECT_NOT_FOUND);
}

static void test_write_faults(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(put_gen(e->s, "before", 1, 7000, 100), MC_OK);
    const enum mc_disk_fault_kind kinds[] = {MC_DISK_FAULT_EIO, MC_DISK_FAULT_ENOSPC,
                                             MC_DISK_FAULT_SHORT};
    for (int k = 0; k < 3; k++) {
        char keys[4][16];
        char *vals[4];
        struct mc_disk_put p[4];
        int res[4];
        for (int i = 0; i < 4; i++) {
            snprintf(keys[i], sizeof(keys[i]), "w%d-%d", k, i);
            vals[i] = malloc(20000);
            fill(vals[i], 20000, (uint64_t)(k * 10 + i));
            p[i] = (struct mc_disk_put){
                keys[i], (uint32_t)strlen(keys[i]), 1, mc_crc32c(vals[i], 20000), vals[i], 20000};
        }
        /* The four records sit back to back and go out as one write; the fault hits it, then
         * the first record's own write in the record-by-record retry. */
        struct mc_disk_fault f = {
            .kind = kinds[k], .ops = MC_DISK_FAULT_WRITE, .skip = 0, .count = 2};
        mc_disk_store_test_set_fault(e->s, &f);
        /* EIO fails the record, ENOSPC fails it as a capacity signal, a short write is
         * resubmitted for the rest and succeeds. */
        int want = k == 0 ? MC_ERR_FILE_WRITE_FAIL : k == 1 ? MC_ERR_UNABLE_OFFLOAD : MC_OK;
        assert_int_equal(mc_disk_store_append(e->s, p, 4, res), want);
        for (int i = 0; i < 4; i++)
            assert_int_equal(res[i], i == 0 ? want : MC_OK);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(get_check(e->s, keys[i], 20000, (uint64_t)(k * 10 + i), 0),
                             i == 0 && want != MC_OK ? MC_ERR_OBJECT_NOT_FOUND : MC_OK);
            free(vals[i]);
        }
        /* The hole stays in the same extent: a failure does not seal it. */
        assert_int_equal(count_extents(e->dir), 1);
    }
    assert_int_equal(get_check(e->s, "before", 7000, 100, 0), MC_OK);
    /* Later appends work and everything acknowledged survives a restart. */
    assert_int_equal(put_gen(e->s, "later", 1, 3000, 101), MC_OK);
    reopen(e, 64 * MIB, 8 * MIB);
    assert_int_equal(get_check(e->s, "before", 7000, 100, 0), MC_OK);
    assert_int_equal(get_check(e->s, "later", 3000, 101, 0), MC_OK);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++) {
            char key[16];
            snprintf(key, sizeof(key), "w%d-%d", k, i);
            assert_int_equal(get_check(e->s, key, 20000, (uint64_t)(k * 10 + i), 0),
                             i == 0 && k < 2 ? MC_ERR_OBJECT_NOT_FOUND : MC_OK);
        }
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 2 + 3 + 3 + 4);
}

static void test_read_faults(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    const char *keys[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(put_gen(e->s, keys[i], 1, 40000, (uint64_t)i), MC_OK);
    const enum mc_disk_fault_kind kinds[] = {MC_DISK_FAULT_EIO, MC_DISK_FAULT_ENOSPC,
                                             MC_DISK_FAULT_SHORT};
    for (int k = 0; k < 3; k++) {
        struct mc_disk_get g[3];
        char *bufs[3];
        for (int i = 0; i < 3; i++) {
            bufs[i] = malloc(40000);
            g[i] = (struct mc_disk_get){.key = keys[i], .key_len = 1, .buf = bufs[i], .cap = 40000};
        }
        struct mc_disk_fault f = {
            .kind = kinds[k], .ops = MC_DISK_FAULT_READ, .skip = 2, .count = 1};
        mc_disk_store_test_set_fault(e->s, &f);
        /* A short read is resubmitted for the rest and succeeds. */
        int want = kinds[k] == MC_DISK_FAULT_SHORT ? MC_OK : MC_ERR_FILE_READ_FAIL;
        assert_int_equal(mc_disk_store_read(e->s, g, 3), want);
        assert_int_equal(g[0].result, MC_OK);
        assert_int_equal(g[1].result, MC_OK);
        assert_int_equal(g[2].result, want);
        for (int i = 0; i < 3; i++)
            free(bufs[i]);
        for (int i = 0; i < 3; i++)
            assert_int_equal(get_check(e->s, keys[i], 40000, (uint64_t)i, k & 1), MC_OK);
    }
}

/* ------------------------------------------------------------------ eviction */

struct evict_log {
    struct mc_disk_store **s;
    int fail;
    int calls;
    int keys;
    int readable_in_cb; /* keys still readable when the callback ran */
    char first_key[32];
    const char *dir;
    int extents_at_cb;
};

static int evict_cb(void *ctx, const struct mc_disk_evict_item *items, size_t n)
{
    struct evict_log *l = ctx;
    l->calls++;
    l->extents_at_cb = count_extents(l->dir);
    if (l->fail)
        return MC_ERR_RPC_FAIL;
    snprintf(l->first_key, sizeof(l->first_key), "%.*s", (int)items[0].key_len, items[0].key);
    for (size_t i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%.*s", (int)items[i].key_len, items[i].key);
        char *b = malloc(items[i].size + 1);
        struct mc_disk_get g = {
            .key = key, .key_len = items[i].key_len, .buf = b, .cap = items[i].size};
        if (mc_disk_store_read(*l->s, &g, 1) == MC_OK && g.version == items[i].version)
            l->readable_in_cb++;
        free(b);
        l->keys++;
    }
    return 0;
}

/* 64 KiB extents of four 16 KiB records (4 KiB header + 12 KiB value); capacity 4 extents. */
static void fill_extents(struct env *e, int from, int count)
{
    char key[32];
    for (int i = from; i < from + count; i++) {
        snprintf(key, sizeof(key), "e%03d", i);
        assert_int_equal(put_gen(e->s, key, 1, 12 * KIB, (uint64_t)i), MC_OK);
    }
}

/* A batch of n fresh 12 KiB values (16 KiB records) keyed PREFIX000.., value i seeded seed + i. */
#define BATCH_MAX 32
struct batch {
    size_t n;
    uint64_t seed;
    char keys[BATCH_MAX][16];
    struct mc_disk_put p[BATCH_MAX];
    char *vals[BATCH_MAX];
    int res[BATCH_MAX];
};

static void batch_make(struct batch *b, size_t n, char prefix, uint64_t seed)
{
    assert_true(n <= BATCH_MAX);
    b->n = n;
    b->seed = seed;
    for (size_t i = 0; i < n; i++) {
        b->vals[i] = malloc(12 * KIB);
        assert_non_null(b->vals[i]);
        fill(b->vals[i], 12 * KIB, seed + i);
        snprintf(b->keys[i], sizeof(b->keys[i]), "%c%03zu", prefix, i);
        b->p[i] = (struct mc_disk_put){b->keys[i], (uint32_t)strlen(b->keys[i]),
                                       1,          mc_crc32c(b->vals[i], 12 * KIB),
                                       b->vals[i], 12 * KIB};
    }
}

/* After an append of b: every MC_OK item reads back its bytes, every other one was refused for
 * space and is absent. Returns how many were stored; frees the values. */
static int batch_check_free(struct env *e, struct batch *b)
{
    int ok = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (b->res[i] == MC_OK) {
            assert_int_equal(get_check(e->s, b->keys[i], 12 * KIB, b->seed + i, 0), MC_OK);
            ok++;
        } else {
            assert_int_equal(b->res[i], MC_ERR_UNABLE_OFFLOAD);
            assert_int_equal(get_check(e->s, b->keys[i], 12 * KIB, b->seed + i, 0),
                             MC_ERR_OBJECT_NOT_FOUND);
        }
        free(b->vals[i]);
    }
    return ok;
}

/* A store of four 68 KiB extents (272 KiB, high watermark 1.0) whose evictions l logs, filled
 * exactly full: 16 records e000..e015, four per extent after its 4 KiB superblock. */
static void open_full_store(struct env *e, struct evict_log *l)
{
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = e->dir,
                                     .capacity = 272 * KIB,
                                     .high_watermark = 1.0,
                                     .extent_size = 68 * KIB,
                                     .queue_depth = 4,
                                     .evict_cb = evict_cb,
                                     .evict_ctx = l};
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    fill_extents(e, 0, 16);
}

static void test_capacity_eviction(void **state)
{
    struct env *e = *state;
    struct evict_log l = {.s = &e->s, .dir = e->dir};
    open_full_store(e, &l);
    assert_int_equal(l.calls, 0);
    assert_int_equal(count_extents(e->dir), 4);

    /* A refusing callback: nothing deleted, the append fails with the callback's error. */
    l.fail = 1;
    assert_int_equal(put_gen(e->s, "e016", 1, 12 * KIB, 16), MC_ERR_RPC_FAIL);
    assert_int_equal(l.calls, 1);
    assert_int_equal(count_extents(e->dir), 4);
    for (int i = 0; i < 16; i++) {
        char key[32];
        snprintf(key, sizeof(key), "e%03d", i);
        assert_int_equal(get_check(e->s, key, 12 * KIB, (uint64_t)i, 0), MC_OK);
    }

    /* An accepting one: told first (files and keys still there), then the oldest extent goes. */
    l.fail = 0;
    assert_int_equal(put_gen(e->s, "e016", 1, 12 * KIB, 16), MC_OK);
    assert_int_equal(l.calls, 2);
    assert_int_equal(l.keys, 4);
    assert_int_equal(l.readable_in_cb, 4);
    assert_int_equal(l.extents_at_cb, 4);
    assert_memory_equal(l.first_key, "e00", 3); /* one of e000..e003: the oldest extent */
    assert_true(l.first_key[3] >= '0' && l.first_key[3] <= '3');
    for (int i = 0; i < 4; i++) {
        char key[32];
        snprintf(key, sizeof(key), "e%03d", i);
        assert_int_equal(get_check(e->s, key, 12 * KIB, (uint64_t)i, 0), MC_ERR_OBJECT_NOT_FOUND);
    }
    assert_int_equal(get_check(e->s, "e004", 12 * KIB, 4, 0), MC_OK);
    assert_int_equal(get_check(e->s, "e016", 12 * KIB, 16, 0), MC_OK);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.evicted_extents, 1);
    assert_int_equal(u.evicted_records, 4);
    assert_true(u.bytes_used <= u.capacity);

    /* A pinned record keeps its extent (e004..e007) while another one can go instead. */
    assert_int_equal(mc_disk_store_pin(e->s, "e005", 4, NULL), MC_OK);
    fill_extents(e, 17, 4);
    assert_int_equal(get_check(e->s, "e005", 12 * KIB, 5, 0), MC_OK);
    assert_int_equal(get_check(e->s, "e008", 12 * KIB, 8, 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_disk_store_unpin(e->s, "e005", 4), MC_OK);
    assert_int_equal(mc_disk_store_unpin(e->s, "e005", 4), MC_ERR_INVALID_PARAMS);
    /* A record bigger than the capacity is refused outright. */
    assert_int_equal(put_gen(e->s, "huge", 1, 300 * KIB, 1), MC_ERR_INVALID_PARAMS);
}

/* One batch larger than the whole store: the part that fits is written and readable, the rest
 * refused, never the whole store evicted for a batch that then fails entirely. */
static void test_batch_larger_than_store(void **state)
{
    struct env *e = *state;
    struct evict_log l = {.s = &e->s, .dir = e->dir};
    open_full_store(e, &l);
    static struct batch b; /* 20 records of 16 KiB: 320 KiB, past the 272 KiB capacity */
    batch_make(&b, 20, 'b', 100);
    assert_int_equal(mc_disk_store_append(e->s, b.p, b.n, b.res), MC_ERR_UNABLE_OFFLOAD);
    int ok = batch_check_free(e, &b);
    assert_true(ok >= 8 && ok < 20);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, (uint64_t)ok);
    assert_true(u.bytes_used <= u.capacity);
}

static void test_watermark_eviction(void **state)
{
    struct env *e = *state;
    struct evict_log l = {.s = &e->s, .dir = e->dir};
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = e->dir,
                                     .capacity = 272 * KIB,
                                     .high_watermark = 0.5,
                                     .extent_size = 68 * KIB,
                                     .evict_cb = evict_cb,
                                     .evict_ctx = &l};
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    fill_extents(e, 0, 12);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_true(l.calls >= 1);
    assert_true(u.bytes_used <= 136 * KIB + 68 * KIB); /* the active extent may be partial */
    assert_int_equal(get_check(e->s, "e011", 12 * KIB, 11, 0), MC_OK);
    assert_int_equal(get_check(e->s, "e000", 12 * KIB, 0, 0), MC_ERR_OBJECT_NOT_FOUND);
}

/* One batch larger than the high watermark: the pass after the append evicts extents written by
 * this very batch. Those records were never reported stored to anyone (the tier tells the master
 * after the append), so each must come back failed, never MC_OK: every MC_OK item is readable. */
static void test_watermark_evicts_own_batch(void **state)
{
    struct env *e = *state;
    struct evict_log l = {.s = &e->s, .dir = e->dir};
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = e->dir,
                                     .capacity = 272 * KIB,
                                     .high_watermark = 0.5,
                                     .extent_size = 68 * KIB,
                                     .evict_cb = evict_cb,
                                     .evict_ctx = &l};
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    static struct batch b; /* 14 records of 16 KiB: 224 KiB, past 136 KiB */
    batch_make(&b, 14, 'w', 0);
    int rc = mc_disk_store_append(e->s, b.p, b.n, b.res);
    assert_true(l.calls >= 1); /* the watermark pass ran over this batch's own extents */
    int ok = batch_check_free(e, &b);
    assert_true(ok > 0 && ok < 14);
    assert_int_equal(rc, MC_ERR_UNABLE_OFFLOAD);
}

/* A reader parked inside its I/O holds its extent: eviction removes the keys but waits to delete
 * the file until the read finished. */
struct park {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int parked, release;
};

static void park_hook(void *ctx, int write)
{
    struct park *p = ctx;
    if (write)
        return;
    pthread_mutex_lock(&p->mu);
    p->parked = 1;
    pthread_cond_broadcast(&p->cv);
    while (!p->release)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

struct thread_arg {
    struct env *e;
    int rc;
};

static void *reader_thread(void *arg)
{
    struct thread_arg *a = arg;
    a->rc = get_check(a->e->s, "e000", 12 * KIB, 0, 0);
    return NULL;
}

static void *writer_thread(void *arg)
{
    struct thread_arg *a = arg;
    a->rc = put_gen(a->e->s, "new", 1, 12 * KIB, 99);
    return NULL;
}

static void test_eviction_waits_for_reader(void **state)
{
    struct env *e = *state;
    struct evict_log l = {.s = &e->s, .dir = e->dir};
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = e->dir,
                                     .capacity = 272 * KIB,
                                     .high_watermark = 1.0,
                                     .extent_size = 68 * KIB,
                                     .evict_cb = evict_cb,
                                     .evict_ctx = &l};
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    fill_extents(e, 0, 16);
    char oldest[512];
    nth_extent(e->dir, 0, oldest, sizeof(oldest));

    struct park p = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    struct mc_disk_fault f = {
        .kind = MC_DISK_FAULT_NONE, .before_io = park_hook, .before_io_ctx = &p};
    mc_disk_store_test_set_fault(e->s, &f);
    struct thread_arg ra = {e, -1}, wa = {e, -1};
    pthread_t rt, wt;
    pthread_create(&rt, NULL, reader_thread, &ra);
    pthread_mutex_lock(&p.mu);
    while (!p.parked)
        pthread_cond_wait(&p.cv, &p.mu);
    pthread_mutex_unlock(&p.mu);
    mc_disk_store_test_set_fault(e->s, NULL); /* the callback's own reads must not park */
    pthread_create(&wt, NULL, writer_thread, &wa);

    /* Poll (bounded) until the eviction has dropped the keys: it then waits for the reader. */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (mc_disk_store_lookup(e->s, "e001", 4, NULL) == MC_ERR_OBJECT_NOT_FOUND)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        assert_true(now.tv_sec - t0.tv_sec < 10);
        sched_yield();
    }
    assert_int_equal(l.calls, 1);
    assert_int_equal(access(oldest, F_OK), 0); /* not deleted under the reader */
    pthread_mutex_lock(&p.mu);
    p.release = 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    pthread_join(rt, NULL);
    pthread_join(wt, NULL);
    assert_int_equal(ra.rc, MC_OK); /* the parked read still got the right bytes */
    assert_int_equal(wa.rc, MC_OK);
    assert_int_equal(access(oldest, F_OK), -1);
}

static void test_duplicate_keys(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 64 * KIB, NULL, NULL);
    assert_int_equal(put_gen(e->s, "dup", 5, 3000, 1), MC_OK);
    assert_int_equal(put_gen(e->s, "dup", 7, 9000, 2), MC_OK);
    assert_int_equal(get_check(e->s, "dup", 9000, 2, 0), MC_OK);
    assert_int_equal(put_gen(e->s, "dup", 6, 100, 3), MC_ERR_INVALID_VERSION);
    assert_int_equal(get_check(e->s, "dup", 9000, 2, 0), MC_OK);
    /* Same batch: the later of equal keys wins. */
    char a[100], b[200];
    fill(a, sizeof(a), 4);
    fill(b, sizeof(b), 5);
    struct mc_disk_put p[2] = {{"pair", 4, 9, mc_crc32c(a, sizeof(a)), a, sizeof(a)},
                               {"pair", 4, 9, mc_crc32c(b, sizeof(b)), b, sizeof(b)}};
    assert_int_equal(mc_disk_store_append(e->s, p, 2, NULL), MC_OK);
    assert_int_equal(get_check(e->s, "pair", 200, 5, 0), MC_OK);
    /* Pins follow the key to its newer version. */
    assert_int_equal(mc_disk_store_pin(e->s, "dup", 3, NULL), MC_OK);
    assert_int_equal(put_gen(e->s, "dup", 8, 5000, 6), MC_OK);
    struct mc_disk_record_info info;
    assert_int_equal(mc_disk_store_lookup(e->s, "dup", 3, &info), MC_OK);
    assert_int_equal(info.pins, 1);
    assert_int_equal(info.version, 8);
    /* The newest version wins across a restart too. */
    reopen(e, 64 * MIB, 64 * KIB);
    assert_int_equal(get_check(e->s, "dup", 5000, 6, 0), MC_OK);
    assert_int_equal(mc_disk_store_lookup(e->s, "dup", 3, &info), MC_OK);
    assert_int_equal(info.version, 8);
    assert_int_equal(get_check(e->s, "pair", 200, 5, 0), MC_OK);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 2);
}

static void test_open_errors(void **state)
{
    struct env *e = *state;
    char err[512] = "";
    struct mc_disk_store *s = NULL;
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = e->dir,
                                     .capacity = MIB,
                                     .test_refuse_odirect = 1};
    assert_int_equal(mc_disk_store_open(&c, &s, err, sizeof(err)), MC_ERR_FILE_OPEN_FAIL);
    assert_null(s);
    assert_non_null(strstr(err, e->dir));
    assert_non_null(strstr(err, "O_DIRECT"));

    /* tmpfs: older kernels refuse O_DIRECT (then the message names the path); 6.6+ accept it. */
    char shm[64] = "/dev/shm/mc_disk_test_XXXXXX";
    if (mkdtemp(shm)) {
        c = (struct mc_disk_store_config){
            .record_align = DISK_TEST_RECORD_ALIGN, .path = shm, .capacity = MIB};
        err[0] = 0;
        int rc = mc_disk_store_open(&c, &s, err, sizeof(err));
        if (rc == MC_OK)
            mc_disk_store_close(s);
        else
            assert_non_null(strstr(err, shm));
        rm_rf(shm);
    }

    /* A second open of the same directory is refused while the first holds it. */
    e->s = open_store(e->dir, MIB, 0, NULL, NULL);
    c = (struct mc_disk_store_config){
        .record_align = DISK_TEST_RECORD_ALIGN, .path = e->dir, .capacity = MIB};
    assert_int_equal(mc_disk_store_open(&c, &s, err, sizeof(err)), MC_ERR_FILE_LOCK_FAIL);
    assert_non_null(strstr(err, e->dir));
    c.capacity = 0;
    assert_int_equal(mc_disk_store_open(&c, &s, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
    c = (struct mc_disk_store_config){.record_align = DISK_TEST_RECORD_ALIGN,
                                      .path = e->dir,
                                      .capacity = MIB,
                                      .extent_size = 1000};
    assert_int_equal(mc_disk_store_open(&c, &s, err, sizeof(err)), MC_ERR_INVALID_PARAMS);

    /* Bad arguments never crash. */
    struct mc_disk_put bad = {NULL, 0, 1, 0, NULL, 0};
    int r;
    assert_int_equal(mc_disk_store_append(e->s, &bad, 1, &r), MC_ERR_INVALID_PARAMS);
    struct mc_disk_get g = {.key = "k", .key_len = MC_DISK_MAX_KEY_LEN + 1};
    assert_int_equal(mc_disk_store_read(e->s, &g, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_disk_store_pin(e->s, "zz", 2, NULL), MC_ERR_OBJECT_NOT_FOUND);
    /* A long key (header block beyond 4 KiB) round-trips and survives a restart. */
    char *lk = malloc(10001);
    memset(lk, 'k', 10000);
    lk[10000] = 0;
    assert_int_equal(put_gen(e->s, lk, 1, 777, 3), MC_OK);
    reopen(e, MIB, 0);
    assert_int_equal(get_check(e->s, lk, 777, 3, 1), MC_OK);
    free(lk);
}

/* Threads appending and reading their own keys at once (also run under TSan). */
struct conc_arg {
    struct mc_disk_store *s;
    int id;
    int failures;
};

static void *conc_thread(void *arg)
{
    struct conc_arg *a = arg;
    char key[32];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "t%d-%d", a->id, i);
        if (put_gen(a->s, key, 1, 5000 + (size_t)i * 100, (uint64_t)(a->id * 1000 + i)) != MC_OK)
            a->failures++;
        if (get_check(a->s, key, 5000 + (size_t)i * 100, (uint64_t)(a->id * 1000 + i), i & 1) !=
            MC_OK)
            a->failures++;
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 256 * KIB, NULL, NULL);
    pthread_t t[4];
    struct conc_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (struct conc_arg){e->s, i, 0};
        pthread_create(&t[i], NULL, conc_thread, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(a[i].failures, 0);
    }
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 160);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(getenv("MC_TEST_LOG") ? MC_LOG_DEBUG : MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_mid_append, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bit_flips_at_recovery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bit_flip_at_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_check_failure_drops_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_extent_reclaimed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_faults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_capacity_eviction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_larger_than_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watermark_eviction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watermark_evicts_own_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_waits_for_reader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
