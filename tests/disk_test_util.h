/*
 * disk_test_util.h - helpers shared by the LOCAL_DISK store tests (test_disk_store.c,
 * test_disk_faults.c): a mkdtemp directory per test, store open/reopen, generated values and
 * their checks, extent file helpers. Include after cmocka.h.
 */
#ifndef MC_TESTS_DISK_TEST_UTIL_H
#define MC_TESTS_DISK_TEST_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "mooncake/errors.h"
#include "tools/proc_harness.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)

struct env {
    char dir[64];
    struct mc_disk_store *s;
};

/* rm -rf of a store directory (the harness's: a symlink is removed, never followed). */
static inline void rm_rf(const char *dir)
{
    mc_proc_rm_rf(dir);
}

static inline int setup(void **state)
{
    struct env *e = calloc(1, sizeof(*e));
    strcpy(e->dir, "/tmp/mc_disk_test_XXXXXX");
    if (!mkdtemp(e->dir))
        return -1;
    *state = e;
    return 0;
}

static inline int teardown(void **state)
{
    struct env *e = *state;
    mc_disk_store_close(e->s);
    rm_rf(e->dir);
    free(e);
    return 0;
}

/* The record unit the stores of a test file use (mc_disk_store_config.record_align): a file
 * whose sizes and offsets are written for 4 KiB units (the format-2 layout) defines it as
 * MC_DISK_BLOCK before including this header; 0 lets the store probe (512 B where it can). */
#ifndef DISK_TEST_RECORD_ALIGN
#define DISK_TEST_RECORD_ALIGN 0
#endif

static inline struct mc_disk_store *open_store(const char *dir, uint64_t cap, uint64_t extent,
                                               mc_disk_evict_fn cb, void *ctx)
{
    struct mc_disk_store_config c = {.path = dir,
                                     .capacity = cap,
                                     .extent_size = extent,
                                     .queue_depth = 8,
                                     .staging_bytes = 256 * KIB,
                                     .evict_cb = cb,
                                     .evict_ctx = ctx,
                                     .record_align = DISK_TEST_RECORD_ALIGN};
    struct mc_disk_store *s = NULL;
    char err[256] = "";
    int rc = mc_disk_store_open(&c, &s, err, sizeof(err));
    if (rc != MC_OK)
        fprintf(stderr, "open failed: %s (%s)\n", mc_strerror(rc), err);
    assert_int_equal(rc, MC_OK);
    return s;
}

static inline void reopen(struct env *e, uint64_t cap, uint64_t extent)
{
    mc_disk_store_close(e->s);
    e->s = open_store(e->dir, cap, extent, NULL, NULL);
}

static inline void fill(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)x;
    }
}

static inline int put(struct mc_disk_store *s, const char *key, uint64_t version, const void *data,
                      size_t len)
{
    struct mc_disk_put p = {
        key, (uint32_t)strlen(key), version, len ? mc_crc32c(data, len) : 0, data, len};
    int r = 1;
    int rc = mc_disk_store_append(s, &p, 1, &r);
    assert_int_equal(rc, r);
    return rc;
}

/* Appends a value generated from seed. */
static inline int put_gen(struct mc_disk_store *s, const char *key, uint64_t version, size_t len,
                          uint64_t seed)
{
    char *b = malloc(len ? len : 1);
    fill(b, len, seed);
    int rc = put(s, key, version, b, len);
    free(b);
    return rc;
}

/* Reads key and checks it equals the generated value (unaligned buffer when odd != 0). */
static inline int get_check(struct mc_disk_store *s, const char *key, size_t len, uint64_t seed,
                            int odd)
{
    char *raw = NULL;
    assert_int_equal(posix_memalign((void **)&raw, 4096, len + 8192), 0);
    char *buf = raw + (odd ? 1 : 0);
    struct mc_disk_get g = {
        .key = key, .key_len = (uint32_t)strlen(key), .buf = buf, .cap = odd ? len : len + 4096};
    int rc = mc_disk_store_read(s, &g, 1);
    assert_int_equal(rc, g.result);
    if (rc == MC_OK) {
        char *want = malloc(len ? len : 1);
        fill(want, len, seed);
        assert_int_equal(g.len, len);
        assert_memory_equal(buf, want, len);
        free(want);
    }
    free(raw);
    return rc;
}

static inline uint64_t nth_extent(const char *dir, int last, char *path, size_t plen)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    uint64_t best = last ? 0 : UINT64_MAX;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n != 20 || strcmp(de->d_name + 16, ".ext"))
            continue;
        uint64_t id = strtoull(de->d_name, NULL, 16);
        if (last ? id > best : id < best)
            best = id;
    }
    closedir(d);
    snprintf(path, plen, "%s/%016" PRIx64 ".ext", dir, best);
    return best;
}

static inline int count_extents(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        n += strlen(de->d_name) == 20 && !strcmp(de->d_name + 16, ".ext");
    closedir(d);
    return n;
}

static inline void flip_bit(const char *path, uint64_t off)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, (off_t)off), 1);
    c ^= 0x10;
    assert_int_equal(pwrite(fd, &c, 1, (off_t)off), 1);
    close(fd);
}

#endif
