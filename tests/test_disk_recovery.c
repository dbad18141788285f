/*
 * test_disk_recovery.c - what a restart of the LOCAL_DISK store may and may not bring back:
 * a record image stored inside a value is never adopted (not even after the header before it
 * is damaged), an extent of the older on-disk format is refused cleanly, a removed or replaced
 * key does not come back when the extents after it are evicted first, and a writer SIGKILLed
 * mid-stream loses nothing it had acknowledged (removals included).
 */
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static void le16(unsigned char *p, uint16_t v)
{
    v = htole16(v);
    memcpy(p, &v, 2);
}
static void le32(unsigned char *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}
static void le64(unsigned char *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

/* A format-1 record header block (48-byte header + key, CRC at 44) as older versions wrote. */
static void v1_header(unsigned char *blk, const char *key, uint64_t version, const void *val,
                      uint64_t len)
{
    uint32_t kl = (uint32_t)strlen(key);
    memset(blk, 0, 4096);
    le32(blk, 0x5244434du);
    le16(blk + 4, 1);
    le32(blk + 8, kl);
    le32(blk + 12, len ? mc_crc32c(val, len) : 0);
    le64(blk + 16, len);
    le64(blk + 24, version);
    memcpy(blk + 48, key, kl);
    le32(blk + 44, mc_crc32c_extend(mc_crc32c(blk, 44), key, kl));
}

/* A format-2 record header block that names extent id / offset with a guessed nonce. */
static void v2_forged_header(unsigned char *blk, const char *key, uint64_t ext, uint64_t off,
                             uint64_t nonce)
{
    uint32_t kl = (uint32_t)strlen(key);
    memset(blk, 0, 4096);
    le32(blk, 0x5244434du);
    le16(blk + 4, 2);
    le32(blk + 8, kl);
    le64(blk + 24, 1);
    le64(blk + 32, ext);
    le64(blk + 40, off);
    le64(blk + 48, nonce);
    memcpy(blk + 64, key, kl);
    le32(blk + 60, mc_crc32c_extend(mc_crc32c(blk, 60), key, kl));
}

static void read_at(const char *path, void *buf, size_t len, uint64_t off)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

/* A value carrying record images: a byte copy of a real record (header and value), a record of
 * the older format, and a current-format header that names its own extent and offset with a
 * guessed nonce. The header of the record holding that value is then damaged, so the restart
 * scan steps through the value block by block: none of the images may be adopted. */
static void test_value_image_not_adopted(void **state)
{
    struct env *e = *state;
    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(put_gen(e->s, "a", 1, 4096, 1), MC_OK);
    mc_disk_store_close(e->s);
    e->s = NULL;
    char path[512];
    uint64_t ext = nth_extent(e->dir, 1, path, sizeof(path));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    /* "a" is the last record of the file: its header block and its 4 KiB value. */
    uint64_t a_off = (uint64_t)st.st_size - 8192;

    unsigned char *val = calloc(1, 6 * 4096);
    fill(val, 4096, 50);
    read_at(path, val + 4096, 8192, a_off); /* blocks 1-2: a byte copy of "a" */
    unsigned char *ghost = val + 4 * 4096;  /* block 4: the old-format image's value */
    fill(ghost, 4096, 51);
    v1_header(val + 3 * 4096, "ghost", 1, ghost, 4096); /* block 3 */
    /* After a restart appends go to a fresh extent: the carrier is its first record, right
     * after the extent's superblock ("MCDX"; block 0 of "a"'s extent tells the layout). */
    unsigned char b0[4];
    read_at(path, b0, 4, 0);
    uint64_t cext = ext + 1, carrier_off = memcmp(b0, "MCDX", 4) == 0 ? 4096 : 0;
    v2_forged_header(val + 5 * 4096, "ghost2", cext, carrier_off + 4096 + 5 * 4096, 0);

    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(put(e->s, "carrier", 1, val, 6 * 4096), MC_OK);
    mc_disk_store_close(e->s);
    e->s = NULL;
    char path2[512];
    assert_int_equal(nth_extent(e->dir, 1, path2, sizeof(path2)), cext);
    flip_bit(path2, carrier_off + 20); /* the carrier's header */

    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    assert_int_equal(get_check(e->s, "a", 4096, 1, 0), MC_OK);
    assert_int_equal(mc_disk_store_lookup(e->s, "carrier", 7, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_disk_store_lookup(e->s, "ghost", 5, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_disk_store_lookup(e->s, "ghost2", 6, NULL), MC_ERR_OBJECT_NOT_FOUND);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 1);
    assert_int_equal(u.dropped_records_at_recovery, 1); /* the damaged carrier, once */
    free(val);
}

/* An extent file of the older record format is logged and left alone: not adopted, not
 * deleted, no crash; the store works beside it. */
static void test_old_format_extent_refused(void **state)
{
    struct env *e = *state;
    char path[512];
    snprintf(path, sizeof(path), "%s/0000000000000001.ext", e->dir);
    unsigned char *rec = calloc(1, 8192);
    fill(rec + 4096, 4096, 9);
    v1_header(rec, "old", 1, rec + 4096, 4096);
    int fd = open(path, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, rec, 8192), 8192);
    close(fd);
    free(rec);

    e->s = open_store(e->dir, 64 * MIB, 8 * MIB, NULL, NULL);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 0);
    assert_int_equal(u.extents, 0);
    assert_int_equal(u.skipped_extents, 1);
    assert_int_equal(mc_disk_store_lookup(e->s, "old", 3, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(put_gen(e->s, "new", 1, 5000, 3), MC_OK);
    reopen(e, 64 * MIB, 8 * MIB);
    assert_int_equal(get_check(e->s, "new", 5000, 3, 0), MC_OK);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, 1);
    assert_int_equal(u.skipped_extents, 1);
    struct stat st;
    assert_int_equal(stat(path, &st), 0); /* left on disk */
    assert_int_equal(st.st_size, 8192);
}

/* Eviction goes by extent and skips pinned ones, so extents newer than a pinned one can go
 * first. A key removed (or replaced) after it was written into the pinned extent must stay
 * removed (or not fall back to its old version) across a restart, even when every extent
 * holding the removal or the newer version has been evicted meanwhile. */
static void test_removed_key_stays_removed(void **state)
{
    struct env *e = *state;
    /* 68 KiB extents: a 4 KiB superblock and four 16 KiB records; room for four extents. */
    const uint64_t cap = 272 * KIB, ext = 68 * KIB, len = 12 * KIB;
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = e->dir,
                                     .capacity = cap,
                                     .high_watermark = 1.0,
                                     .extent_size = ext};
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(put_gen(e->s, key, 1, len, (uint64_t)i), MC_OK);
    }
    assert_int_equal(mc_disk_store_pin(e->s, "k0", 2, NULL), MC_OK); /* the oldest extent stays */
    const char *rm[1] = {"k1"};
    uint32_t rml[1] = {2};
    assert_int_equal(mc_disk_store_remove(e->s, rm, rml, 1, NULL), MC_OK);
    assert_int_equal(put_gen(e->s, "k2", 2, len, 200), MC_OK); /* replaces k2 v1 */
    for (int i = 0; i < 16; i++) {
        snprintf(key, sizeof(key), "f%d", i);
        assert_int_equal(put_gen(e->s, key, 1, len, 100 + (uint64_t)i), MC_OK);
    }
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_true(u.evicted_extents >= 2); /* extents after the pinned one went */
    assert_int_equal(get_check(e->s, "k0", len, 0, 0), MC_OK);
    assert_int_equal(get_check(e->s, "k3", len, 3, 0), MC_OK);
    assert_int_equal(mc_disk_store_lookup(e->s, "k1", 2, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_disk_store_lookup(e->s, "k2", 2, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_disk_store_unpin(e->s, "k0", 2), MC_OK);

    mc_disk_store_close(e->s);
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    assert_int_equal(get_check(e->s, "k0", len, 0, 0), MC_OK);
    assert_int_equal(get_check(e->s, "k3", len, 3, 0), MC_OK);
    assert_int_equal(mc_disk_store_lookup(e->s, "k1", 2, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_disk_store_lookup(e->s, "k2", 2, NULL), MC_ERR_OBJECT_NOT_FOUND);
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.dropped_records_at_recovery, 0);
}

/* A dead mark that cannot be written: a removal then fails and the key stays; a replacement
 * succeeds but the extent holding the old version may not be passed by eviction any more (not
 * even for a pin), so the old version can never come back after a restart. */
static void test_dead_mark_failure(void **state)
{
    struct env *e = *state;
    const uint64_t len = 12 * KIB;
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = e->dir,
                                     .capacity = 272 * KIB,
                                     .high_watermark = 1.0,
                                     .extent_size = 68 * KIB};
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    char key[16];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_int_equal(put_gen(e->s, key, 1, len, (uint64_t)i), MC_OK);
    }
    struct mc_disk_fault f = {
        .kind = MC_DISK_FAULT_EIO, .ops = MC_DISK_FAULT_WRITE, .skip = 0, .count = 1};
    mc_disk_store_test_set_fault(e->s, &f);
    const char *rm[1] = {"k1"};
    uint32_t rml[1] = {2};
    int res = 0;
    assert_int_equal(mc_disk_store_remove(e->s, rm, rml, 1, &res), MC_ERR_FILE_WRITE_FAIL);
    assert_int_equal(res, MC_ERR_FILE_WRITE_FAIL);
    assert_int_equal(get_check(e->s, "k1", len, 1, 0), MC_OK); /* not removed */

    f.skip = 1; /* the new record's write passes, the old one's mark fails */
    mc_disk_store_test_set_fault(e->s, &f);
    assert_int_equal(put_gen(e->s, "k2", 2, len, 200), MC_OK);
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.kill_failures, 1);

    assert_int_equal(mc_disk_store_pin(e->s, "k0", 2, NULL), MC_OK);
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof(key), "f%d", i);
        assert_int_equal(put_gen(e->s, key, 1, len, 100 + (uint64_t)i), MC_OK);
    }
    /* The first extent (k0..k3, k2 v1 not marked) went first despite k0's pin. */
    assert_int_equal(mc_disk_store_lookup(e->s, "k0", 2, NULL), MC_ERR_OBJECT_NOT_FOUND);
    mc_disk_store_close(e->s);
    assert_int_equal(mc_disk_store_open(&c, &e->s, NULL, 0), MC_OK);
    struct mc_disk_record_info info;
    if (mc_disk_store_lookup(e->s, "k2", 2, &info) == MC_OK)
        assert_int_equal(info.version, 2);
}

/* ------------------------------------------------------------------ kill -9 mid-stream */

enum { OP_PUT, OP_PUT2, OP_REMOVE };

/* The writer's deterministic op sequence: put k<i>; every 5th step also replace k<i-1> with
 * version 2; every 4th step also remove k<i-2> (a removed key is never written again). */
static void op_at(uint32_t n, int *type, uint32_t *k)
{
    uint32_t i = 0, at = 0;
    for (;; i++) {
        if (at++ == n) {
            *type = OP_PUT;
            *k = i;
            return;
        }
        if (i % 5 == 4 && at++ == n) {
            *type = OP_PUT2;
            *k = i - 1;
            return;
        }
        if (i % 4 == 3 && at++ == n) {
            *type = OP_REMOVE;
            *k = i - 2;
            return;
        }
    }
}

#define KM_LEN (64 * KIB)

static uint64_t km_seed(uint32_t k, int version)
{
    return (uint64_t)k * 2 + (uint64_t)version;
}

static void km_child(const char *dir, int wfd)
{
    struct mc_disk_store_config c = {.record_align = DISK_TEST_RECORD_ALIGN,
                                     .path = dir,
                                     .capacity = 1024 * MIB,
                                     .extent_size = 2 * MIB,
                                     .queue_depth = 8};
    struct mc_disk_store *s = NULL;
    if (mc_disk_store_open(&c, &s, NULL, 0) != MC_OK)
        _exit(1);
    char *b = malloc(KM_LEN);
    for (uint32_t n = 0;; n++) {
        int type;
        uint32_t k;
        op_at(n, &type, &k);
        char key[32];
        snprintf(key, sizeof(key), "k%u", k);
        uint32_t kl = (uint32_t)strlen(key);
        int rc;
        if (type == OP_REMOVE) {
            const char *keys[1] = {key};
            rc = mc_disk_store_remove(s, keys, &kl, 1, NULL);
        } else {
            int v = type == OP_PUT ? 1 : 2;
            fill(b, KM_LEN, km_seed(k, v));
            struct mc_disk_put p = {key, kl, (uint64_t)v, mc_crc32c(b, KM_LEN), b, KM_LEN};
            rc = mc_disk_store_append(s, &p, 1, NULL);
        }
        if (rc != MC_OK)
            _exit(2);
        if (write(wfd, &n, sizeof(n)) != sizeof(n))
            _exit(3);
    }
}

/* A child runs puts, replacements and removals as fast as it can and acknowledges each; it is
 * SIGKILLed mid-stream. After a restart every acknowledged state holds: each key has its last
 * acknowledged version with the right bytes, each acknowledged removal stays removed. Only the
 * one operation in flight at the kill may have happened or not. */
static void test_kill_mid_stream_loses_nothing_acked(void **state)
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
        km_child(e->dir, fds[1]);
        _exit(4);
    }
    close(fds[1]);
    uint32_t acked = 0, v;
    while (acked < 60 && read(fds[0], &v, sizeof(v)) == sizeof(v))
        acked = v + 1;
    kill(pid, SIGKILL);
    while (read(fds[0], &v, sizeof(v)) == sizeof(v))
        acked = v + 1; /* acknowledgements already in the pipe */
    int status;
    waitpid(pid, &status, 0);
    close(fds[0]);
    assert_true(WIFSIGNALED(status));
    assert_true(acked >= 60);

    /* Replay the acknowledged operations: 0 absent, 1 / 2 the version present. */
    uint32_t nkeys = acked + 2;
    int *want = calloc(nkeys, sizeof(*want));
    for (uint32_t n = 0; n < acked; n++) {
        int type;
        uint32_t k;
        op_at(n, &type, &k);
        want[k] = type == OP_REMOVE ? 0 : type == OP_PUT ? 1 : 2;
    }
    int ftype;
    uint32_t fk; /* the operation in flight */
    op_at(acked, &ftype, &fk);
    int fwant = ftype == OP_REMOVE ? 0 : ftype == OP_PUT ? 1 : 2;

    e->s = open_store(e->dir, 1024 * MIB, 2 * MIB, NULL, NULL);
    uint32_t present = 0;
    for (uint32_t k = 0; k < nkeys; k++) {
        char key[32];
        snprintf(key, sizeof(key), "k%u", k);
        struct mc_disk_record_info info;
        int rc = mc_disk_store_lookup(e->s, key, (uint32_t)strlen(key), &info);
        int got = rc == MC_OK ? (int)info.version : 0;
        if (k == fk)
            assert_true(got == want[k] || got == fwant);
        else
            assert_int_equal(got, want[k]);
        if (got) {
            present++;
            assert_int_equal(get_check(e->s, key, KM_LEN, km_seed(k, got), k & 1), MC_OK);
        }
    }
    struct mc_disk_usage u;
    mc_disk_store_usage(e->s, &u);
    assert_int_equal(u.records, present);
    free(want);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    mc_log_set_level(getenv("MC_TEST_LOG") ? MC_LOG_DEBUG : MC_LOG_OFF);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_value_image_not_adopted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_format_extent_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removed_key_stays_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_mark_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_mid_stream_loses_nothing_acked, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
