/*
 * test_disk_fallback.c - bad bytes on one copy of a key, as separate clients on loopback: a
 * mooncake_master with offload at PutEnd (--enable_offload: a key keeps its MEMORY copy and
 * gets a LOCAL_DISK one), an in-test holder H (a DRAM segment and a disk store) and an in-test
 * reader R with neither, so R's reads cross to H.
 *
 *   memory_bad_disk_serves  R's read of the MEMORY copy comes back corrupted (the test hook
 *                           that flips a byte of what a read brought): mc_get and
 *                           mc_batch_get_tiers fall back to the LOCAL_DISK copy and return the
 *                           right bytes (they failed CHECKSUM_MISMATCH before)
 *   disk_bad_dropped        a byte of the key's record flipped in H's extent file: the disk read
 *                           fails its check, H drops the record and reports it like an eviction,
 *                           so the master stops listing the LOCAL_DISK replica (it listed it
 *                           for good before) and reads keep being served by the MEMORY copy
 *
 * Every process and file goes in teardown.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "client/disk_store.h"
#include "cluster_data.h"
#include "cluster_util.h"
#include "mooncake/client.h"

#define VLEN (256u << 10)
#define START_MS 20000
#define WAIT_MS 20000

static struct {
    struct cu_cluster cl;
    struct cu_proc master;
    char disk[160];
    struct mc_client *h, *r;
    uint8_t *buf, *want;
} g;

static int group_setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.master.out_fd = -1;
    if (cu_cluster_init(&g.cl, "mc_disk_fallback") != 0)
        return -1;
    snprintf(g.disk, sizeof(g.disk), "%s/disk", g.cl.dir);
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    static const char *const flags[] = {"--enable_offload", "--log_level=warn", NULL};
    if (!g.buf || !g.want || cu_start_master(&g.cl, &g.master, 0, flags, START_MS) != 0)
        return -1;
    if (cu_open_client(&g.cl, 32u << 20, g.disk, 256u << 20, 3000, &g.h) != 0 ||
        cu_open_client(&g.cl, 0, NULL, 0, 3000, &g.r) != 0)
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    mc_client_close(g.r);
    mc_client_close(g.h);
    cu_stop(&g.master, SIGTERM, 10000);
    cu_cluster_destroy(&g.cl);
    free(g.buf);
    free(g.want);
    return 0;
}

/* H puts key (bytes of seed) and the offload gives it a LOCAL_DISK copy besides the MEMORY one. */
static void put_both(const char *key, uint64_t seed)
{
    cu_fill(g.want, VLEN, seed);
    assert_int_equal(cu_put_retry(g.h, key, g.want, VLEN, NULL, WAIT_MS), 0);
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    while (cu_tiers(g.r, key) != (CU_TIER_MEMORY | CU_TIER_DISK) && cu_now_ms() < deadline)
        cu_sleep_ms(20);
    assert_int_equal(cu_tiers(g.r, key), CU_TIER_MEMORY | CU_TIER_DISK);
}

static void test_memory_bad_disk_serves(void **state)
{
    (void)state;
    const char *key = "fb/mem";
    put_both(key, 11);
    /* single Get: the MEMORY copy's bytes come back bad, the LOCAL_DISK copy serves */
    memset(g.buf, 0, VLEN);
    mc_client_test_corrupt_reads(g.r, 1);
    cu_assert_value(key, mc_get(g.r, key, g.buf, VLEN), g.buf, g.want, VLEN);
    /* batch Get: the batch read and the single-way read of the MEMORY copy both come back
     * bad, the LOCAL_DISK copy serves, and the tier says so */
    const char *kp[1] = {key};
    void *bufs[1] = {g.buf};
    size_t caps[1] = {VLEN};
    int64_t res[1] = {0};
    int tiers[1] = {-1};
    memset(g.buf, 0, VLEN);
    mc_client_test_corrupt_reads(g.r, 2);
    assert_int_equal(mc_batch_get_tiers(g.r, 1, kp, bufs, caps, res, tiers), 0);
    cu_assert_value(key, res[0], g.buf, g.want, VLEN);
    assert_int_equal(tiers[0], MC_REPLICA_LOCAL_DISK);
    /* a good read is served by the MEMORY copy */
    memset(g.buf, 0, VLEN);
    assert_int_equal(mc_batch_get_tiers(g.r, 1, kp, bufs, caps, res, tiers), 0);
    cu_assert_value(key, res[0], g.buf, g.want, VLEN);
    assert_int_equal(tiers[0], MC_REPLICA_MEMORY);
    /* both copies bad: the Get fails, never with wrong bytes */
    mc_client_test_corrupt_reads(g.r, 2);
    assert_int_equal(mc_get(g.r, key, g.buf, VLEN), MC_ERR_CHECKSUM_MISMATCH);
    mc_client_test_corrupt_reads(g.r, 0);
    assert_int_equal(mc_remove(g.h, key, true), 0);
}

/* Flips a byte of key's value in its record in an extent file of dir. true when found. */
static bool corrupt_record(const char *dir, const char *key)
{
    size_t kl = strlen(key);
    uint64_t hb = (64 + kl + MC_DISK_BLOCK - 1) / MC_DISK_BLOCK * MC_DISK_BLOCK;
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool done = false;
    struct dirent *de;
    char path[512];
    while (!done && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".ext"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        int fd = open(path, O_RDWR);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        char *blk = malloc(MC_DISK_BLOCK);
        /* a record's header block starts on a 4 KiB boundary; its key follows the 64-byte
         * header */
        for (off_t off = MC_DISK_BLOCK; !done && off + MC_DISK_BLOCK <= st.st_size;
             off += MC_DISK_BLOCK) {
            if (pread(fd, blk, MC_DISK_BLOCK, off) != MC_DISK_BLOCK)
                break;
            if (memcmp(blk + 64, key, kl) != 0)
                continue;
            uint8_t c;
            off_t at = off + (off_t)hb + 100;
            if (pread(fd, &c, 1, at) == 1) {
                c ^= 0x20;
                done = pwrite(fd, &c, 1, at) == 1 && fsync(fd) == 0;
            }
        }
        free(blk);
        close(fd);
    }
    closedir(d);
    return done;
}

static void test_disk_bad_dropped(void **state)
{
    (void)state;
    const char *key = "fb/disk";
    put_both(key, 12);
    assert_true(corrupt_record(g.disk, key));
    /* the MEMORY read comes back bad too, so the Get reads the damaged disk copy */
    mc_client_test_corrupt_reads(g.r, 1);
    assert_int_equal(mc_get(g.r, key, g.buf, VLEN), MC_ERR_CHECKSUM_MISMATCH);
    mc_client_test_corrupt_reads(g.r, 0);
    /* H dropped the record and told the master: the LOCAL_DISK replica is no longer listed */
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    while (cu_tiers(g.r, key) != CU_TIER_MEMORY && cu_now_ms() < deadline)
        cu_sleep_ms(20);
    assert_int_equal(cu_tiers(g.r, key), CU_TIER_MEMORY);
    struct mc_disk_tier *t = atomic_load(&g.h->disk);
    assert_non_null(t);
    struct mc_disk_tier_stats ts;
    mc_disk_tier_get_stats(t, &ts);
    assert_true(ts.evict_notified >= 1);
    /* the good copy still serves */
    memset(g.buf, 0, VLEN);
    cu_assert_value(key, cu_read(g.r, key, g.buf, VLEN), g.buf, g.want, VLEN);
    assert_int_equal(mc_remove(g.h, key, true), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_bad_disk_serves),
        cmocka_unit_test(test_disk_bad_dropped),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
