/*
 * test_disk_full.c - the LOCAL_DISK store on a filesystem that really fills up: a small ext4
 * image loop-mounted in a mkdtemp directory, a store whose configured capacity is four times
 * the filesystem. ENOSPC is capacity pressure: the store's capacity drops to what it uses, it
 * evicts (the owner told first, every record it keeps reads back right) and appends resume;
 * removing every key gives the space back to the filesystem at once (extents with no live
 * record are deleted). Needs root, mkfs.ext4 and loop devices: exits 77 (skipped) when this
 * machine cannot mount one. Every mount is unmounted and every file removed, also on failure.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "client/disk_store.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "mooncake/errors.h"

#include "disk_test_util.h"

#define FS_MIB 64u              /* the filesystem */
#define CAPACITY (256ull * MIB) /* the store's configured capacity */
#define VAL (256 * KIB)
#define MAX_KEYS 4096

struct fsenv {
    struct env e;
    char base[64];
    char img[128];
    char mnt[128];
    int mounted;
    size_t told; /* records the eviction callback heard of */
};

static int run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_cmd(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void fs_cleanup(struct fsenv *f)
{
    mc_disk_store_close(f->e.s);
    f->e.s = NULL;
    if (f->mounted && run_cmd("umount '%s' 2>/dev/null", f->mnt) != 0)
        run_cmd("umount -l '%s' 2>/dev/null", f->mnt);
    f->mounted = 0;
    rmdir(f->mnt);
    unlink(f->img);
    rmdir(f->base);
}

/* Makes and mounts a fresh ext4 image; 0, or -1 with the reason on stderr. */
static int fs_make(struct fsenv *f)
{
    strcpy(f->base, "/tmp/mc_disk_full_XXXXXX");
    if (!mkdtemp(f->base))
        return -1;
    snprintf(f->img, sizeof(f->img), "%s/img", f->base);
    snprintf(f->mnt, sizeof(f->mnt), "%s/mnt", f->base);
    snprintf(f->e.dir, sizeof(f->e.dir), "%s/mnt/store", f->base);
    if (mkdir(f->mnt, 0755) != 0)
        return -1;
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: a loop-mounted filesystem needs root\n");
        return -1;
    }
    int fd = open(f->img, O_CREAT | O_WRONLY, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)FS_MIB << 20) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    if (run_cmd("mkfs.ext4 -q -F -m 0 -b 4096 '%s' >/dev/null 2>&1", f->img) != 0) {
        fprintf(stderr, "skipped: cannot make an ext4 image (mkfs.ext4 missing?)\n");
        return -1;
    }
    if (run_cmd("mount -o loop '%s' '%s' >/dev/null 2>&1", f->img, f->mnt) != 0) {
        fprintf(stderr, "skipped: cannot loop-mount an ext4 image here\n");
        return -1;
    }
    f->mounted = 1;
    return 0;
}

static int fs_setup(void **state)
{
    struct fsenv *f = calloc(1, sizeof(*f));
    *state = f;
    if (!f || fs_make(f) != 0)
        return -1;
    return 0;
}

static int fs_teardown(void **state)
{
    struct fsenv *f = *state;
    if (f)
        fs_cleanup(f);
    free(f);
    return 0;
}

static int told_cb(void *ctx, const struct mc_disk_evict_item *items, size_t n)
{
    (void)items;
    ((struct fsenv *)ctx)->told += n;
    return 0;
}

static uint64_t fs_avail(const char *path)
{
    struct statvfs st;
    assert_int_equal(statvfs(path, &st), 0);
    return (uint64_t)st.f_bavail * st.f_frsize;
}

static struct mc_disk_store *open_full(struct fsenv *f, uint64_t extent)
{
    struct mc_disk_store_config c = {.path = f->e.dir,
                                     .capacity = CAPACITY,
                                     .extent_size = extent,
                                     .queue_depth = 8,
                                     .evict_cb = told_cb,
                                     .evict_ctx = f};
    struct mc_disk_store *s = NULL;
    char err[256] = "";
    int rc = mc_disk_store_open(&c, &s, err, sizeof(err));
    if (rc != MC_OK)
        fprintf(stderr, "open failed: %s\n", err);
    assert_int_equal(rc, MC_OK);
    return s;
}

struct keys {
    char (*k)[24];
    const char **p;
    uint32_t *len;
    size_t n;
};

static int collect(void *ctx, const struct mc_disk_record_info *r)
{
    struct keys *ks = ctx;
    if (ks->n >= MAX_KEYS)
        return 1;
    snprintf(ks->k[ks->n], sizeof(ks->k[0]), "%.*s", (int)r->key_len, r->key);
    ks->p[ks->n] = ks->k[ks->n];
    ks->len[ks->n] = r->key_len;
    ks->n++;
    return 0;
}

/* Fills the filesystem past ENOSPC, keeps appending (they must go through again, the store
 * evicting against the filesystem's room), checks every kept record's bytes, then removes
 * every key: the store's extents go and the filesystem gets its space back. */
static void fill_evict_remove(struct fsenv *f, uint64_t extent)
{
    uint64_t avail0 = fs_avail(f->mnt);
    f->e.s = open_full(f, extent);
    int i = 0, rc = MC_OK;
    char key[24];
    for (; i < 2000; i++) {
        snprintf(key, sizeof(key), "g%d", i);
        rc = put_gen(f->e.s, key, 1, VAL, (uint64_t)i);
        if (rc != MC_OK)
            break;
    }
    assert_int_equal(rc, MC_ERR_UNABLE_OFFLOAD); /* the filesystem filled up */
    assert_true(i >= 20);
    struct mc_disk_usage u;
    mc_disk_store_usage(f->e.s, &u);
    assert_true(u.no_space_events >= 1);
    assert_true(u.capacity_limit < CAPACITY);
    assert_true(u.capacity_limit <= (uint64_t)FS_MIB * MIB);

    /* Appends resume: the store evicts to make room (the old store refused them all and
     * evicted nothing). A few may still meet ENOSPC while the limit settles. */
    int ok = 0, from = i + 1, n_after = 200;
    for (int j = from; j < from + n_after; j++) {
        snprintf(key, sizeof(key), "g%d", j);
        ok += put_gen(f->e.s, key, 1, VAL, (uint64_t)j) == MC_OK;
    }
    mc_disk_store_usage(f->e.s, &u);
    fprintf(stderr,
            "extent %" PRIu64 " KiB: %d acked before ENOSPC, %d of %d after; limit %" PRIu64
            " MiB, full %" PRIu64 " times, evicted %" PRIu64 "\n",
            (uint64_t)(extent / KIB), i, ok, n_after, (uint64_t)(u.capacity_limit / MIB),
            u.no_space_events, u.evicted_records);
    assert_true(ok >= n_after * 9 / 10);
    assert_true(u.evicted_records > 0);
    assert_int_equal(f->told, u.evicted_records); /* every eviction was reported */
    assert_true(u.no_space_events <= 10);
    snprintf(key, sizeof(key), "g%d", from + n_after - 1);
    assert_int_equal(get_check(f->e.s, key, VAL, (uint64_t)(from + n_after - 1), 0), MC_OK);

    /* Every kept record reads back right. */
    struct keys ks = {calloc(MAX_KEYS, sizeof(*ks.k)), calloc(MAX_KEYS, sizeof(*ks.p)),
                      calloc(MAX_KEYS, sizeof(*ks.len)), 0};
    assert_int_equal(mc_disk_store_foreach(f->e.s, collect, &ks), 0);
    assert_int_equal(ks.n, u.records);
    for (size_t k = 0; k < ks.n; k++)
        assert_int_equal(get_check(f->e.s, ks.k[k], VAL, strtoull(ks.k[k] + 1, NULL, 10), k & 1),
                         MC_OK);

    /* Remove everything: the space comes back at once. */
    int *res = calloc(ks.n ? ks.n : 1, sizeof(*res));
    assert_int_equal(mc_disk_store_remove(f->e.s, ks.p, ks.len, ks.n, res), MC_OK);
    mc_disk_store_usage(f->e.s, &u);
    assert_int_equal(u.records, 0);
    assert_int_equal(u.extents, 0); /* the old store kept the dead extents */
    assert_int_equal(u.bytes_used, 0);
    assert_int_equal(count_extents(f->e.dir), 0);
    uint64_t avail = fs_avail(f->mnt);
    fprintf(stderr, "free before %" PRIu64 " KiB, after removing all %" PRIu64 " KiB\n",
            (uint64_t)(avail0 / KIB), (uint64_t)(avail / KIB));
    assert_true(avail + 2 * MIB >= avail0);
    /* and the store takes appends again */
    assert_int_equal(put_gen(f->e.s, "again", 1, VAL, 4242), MC_OK);
    assert_int_equal(get_check(f->e.s, "again", VAL, 4242, 1), MC_OK);
    free(res);
    free(ks.k);
    free(ks.p);
    free(ks.len);
}

/* Extents much smaller than the filesystem: eviction drops whole older extents. */
static void test_full_fs_small_extents(void **state)
{
    fill_evict_remove(*state, 4 * MIB);
}

/* The client's default extent size (64 MiB) is as large as the whole filesystem: the extent
 * that filled it is the only one and must be evictable too. */
static void test_full_fs_one_extent(void **state)
{
    fill_evict_remove(*state, 64 * MIB);
}

int main(void)
{
    mc_log_set_level(getenv("MC_TEST_LOG") ? MC_LOG_DEBUG : MC_LOG_OFF);
    /* Can this machine loop-mount a filesystem at all? If not, the test is skipped. */
    struct fsenv probe = {0};
    int can = fs_make(&probe) == 0;
    fs_cleanup(&probe);
    if (!can) {
        fprintf(stderr, "SKIP: this machine cannot loop-mount a small filesystem (needs root and "
                        "mkfs/mount)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_full_fs_small_extents, fs_setup, fs_teardown),
        cmocka_unit_test_setup_teardown(test_full_fs_one_extent, fs_setup, fs_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
