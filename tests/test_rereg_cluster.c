/*
 * test_rereg_cluster.c - LOCAL_DISK re-registration with the real binaries: a real
 * mooncake_master (offload at PutEnd) and real mooncake_client holders with a --disk_path, an
 * in-test client W with no DRAM (its Puts land in a holder's segment) and an admin rpc client
 * for the master's lease-free view (tier_query).
 *
 *   phantom_after_holder_restart  H holds 8 disk-only objects; H is killed, one record's value
 *       bytes are flipped on its disk (recovery drops it), H restarts within its TTL with the
 *       same id. Its complete listing leaves the record out: the master lists that key no more
 *       (a clean miss, and a Put of it succeeds and reads back); the other 7 read back.
 *   higher_version_wins  K v1 on H1, which dies and expires; K v2 put on H2. The master and H2
 *       are killed; the master restarts and H1 registers first (v1 recreated), then H2: v2 takes
 *       the key (the master's replaced-by-version count is 1) and reads back with v2's bytes.
 *
 * Every process dies with the test (PR_SET_PDEATHSIG) and is stopped in teardown; the temporary
 * directory is removed.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster_data.h"
#include "cluster_util.h"
#include "common/rpc_client.h"
#include "common/wire.h"
#include "mooncake/client.h"
#include "proto/master.pb-c.h"
#include "tier_query.h"

#define VLEN (256u * 1024u)
#define START_MS 20000
#define WAIT_MS 20000
#define NTARGET 8
#define NFILL 80

static struct {
    struct cu_cluster cl;
    int port; /* the master's RPC port, kept across its restarts */
    struct cu_proc master, h1, h2;
    char disk1[128], disk2[128];
    char ep[256];
    struct mc_client *w;
    struct mc_rpc_client *adm;
    uint8_t *buf, *want;
} g;

/* ---- processes ------------------------------------------------------------------------------ */

/* ttl: the holders' --client_ttl (a restart within it, or an expiry after it) */
static int g_ttl_flag_sec = 10;

static int start_master(int port)
{
    char ttl[32];
    snprintf(ttl, sizeof(ttl), "--client_ttl=%d", g_ttl_flag_sec);
    const char *const flags[] = {ttl, "--enable_offload", "--log_level=info", NULL};
    return cu_start_master(&g.cl, &g.master, port, flags, START_MS);
}

static int start_holder(struct cu_proc *p, const char *name, const char *path)
{
    char disk[160];
    const char *flags[] = {"--segment_size=16MiB", disk, "--disk_capacity=1GiB", "--log_level=info",
                           "--master_wait=20s",    NULL};
    snprintf(disk, sizeof(disk), "--disk_path=%s", path);
    return cu_start_daemon(&g.cl, p, name, flags, g.ep, sizeof(g.ep), START_MS);
}

static int admin_open(void)
{
    mc_rpc_client_free(g.adm);
    return cu_admin_open(g.cl.rpc, 5000, &g.adm);
}

static void restart_master(void)
{
    uint64_t deadline = cu_now_ms() + START_MS;
    while (start_master(g.port) != 0) {
        if (cu_now_ms() >= deadline)
            fail_msg("the master did not restart on port %d", g.port);
        cu_sleep_ms(200);
    }
    assert_int_equal(admin_open(), 0);
}

/* A counter of the master's /metrics (read through `mooncake_cli metrics`). */
static double master_metric(const char *name)
{
    double v = cu_master_metric(&g.cl, name);
    assert_true(v >= 0);
    return v;
}

/* ---- data ----------------------------------------------------------------------------------- */

static void value_of(const char *key, uint64_t gen, uint8_t *buf)
{
    uint64_t seed = gen * 0x9e3779b97f4a7c15ull;
    for (const char *p = key; *p; p++)
        seed = seed * 131 + (uint8_t)*p;
    cu_fill(buf, VLEN, seed);
}

static void put_value(const char *key, uint64_t gen)
{
    value_of(key, gen, g.want);
    assert_int_equal(cu_put_retry(g.w, key, g.want, VLEN, NULL, WAIT_MS), 0);
}

/* key reads back with the bytes of gen. */
static void check_value(const char *key, uint64_t gen)
{
    int64_t r = cu_read(g.w, key, g.buf, VLEN);
    for (int t = 0; r < 0 && r != MC_ERR_OBJECT_NOT_FOUND && t < 40; t++) {
        cu_sleep_ms(50);
        r = cu_read(g.w, key, g.buf, VLEN);
    }
    value_of(key, gen, g.want);
    cu_assert_value(key, r, g.buf, g.want, VLEN);
}

/* Until key lists want_mem MEMORY (-1: any) and want_disk LOCAL_DISK replicas; its version. */
static uint64_t wait_tiers(const char *key, int want_mem, int want_disk)
{
    uint64_t deadline = cu_now_ms() + WAIT_MS, v = 0;
    int mem = 0, disk = 0;
    for (;;) {
        bool ok = tq_replicas(g.adm, key, &mem, &disk, &v);
        if (ok && disk == want_disk && (want_mem < 0 || mem == want_mem))
            return v;
        if (cu_now_ms() >= deadline)
            fail_msg("%s: %d MEMORY / %d LOCAL_DISK replicas (found %d), want %d / %d", key, mem,
                     disk, ok, want_mem, want_disk);
        cu_sleep_ms(50);
    }
}

/* Flips one byte of the value of key (its bytes of gen) in an extent file under dir. Returns
 * how many copies were found (each is flipped). */
static int corrupt_value(const char *dir, const char *key, uint64_t gen)
{
    value_of(key, gen, g.want);
    int found = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
            st.st_size < 4096)
            continue;
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        uint8_t blk[4096];
        for (off_t off = 0; off + 4096 <= st.st_size;
             off += 512) { /* values start on a 512-byte record unit */
            if (pread(fd, blk, sizeof(blk), off) != (ssize_t)sizeof(blk))
                break;
            if (memcmp(blk, g.want, sizeof(blk)) != 0)
                continue;
            uint8_t b = blk[100] ^ 0x5a;
            assert_int_equal(pwrite(fd, &b, 1, off + 100), 1);
            found++;
        }
        fsync(fd);
        close(fd);
    }
    closedir(d);
    return found;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_phantom_after_holder_restart(void **state)
{
    (void)state;
    assert_int_equal(start_holder(&g.h1, "h1", g.disk1), 0);
    char key[32];
    for (int i = 0; i < NTARGET; i++) {
        snprintf(key, sizeof(key), "t%d", i);
        put_value(key, 1);
    }
    for (int i = 0; i < NTARGET; i++) {
        snprintf(key, sizeof(key), "t%d", i);
        wait_tiers(key, -1, 1);
    }
    /* the targets leave DRAM: more Puts than H's segment holds, eviction takes the oldest */
    for (int i = 0; i < NFILL; i++) {
        snprintf(key, sizeof(key), "f%d", i);
        put_value(key, 1);
    }
    for (int i = 0; i < NTARGET; i++) {
        snprintf(key, sizeof(key), "t%d", i);
        wait_tiers(key, 0, 1);
    }
    int rc = cu_stop(&g.h1, SIGKILL, 5000);
    assert_int_equal(rc, 128 + SIGKILL);
    assert_true(corrupt_value(g.disk1, "t3", 1) >= 1);
    /* back within its TTL with the same id: recovery drops t3, the listing leaves it out */
    assert_int_equal(start_holder(&g.h1, "h1", g.disk1), 0); /* READY after re-registration */
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    int mem = 0, disk = 0;
    while (tq_replicas(g.adm, "t3", &mem, &disk, NULL) && cu_now_ms() < deadline)
        cu_sleep_ms(50);
    if (tq_replicas(g.adm, "t3", &mem, &disk, NULL))
        fail_msg("t3 is still listed (%d MEMORY, %d LOCAL_DISK) after its record was lost", mem,
                 disk);
    assert_true(master_metric("master_offload_unlisted_dropped_total") >= 1);
    for (int i = 0; i < NTARGET; i++) {
        if (i == 3)
            continue;
        snprintf(key, sizeof(key), "t%d", i);
        wait_tiers(key, 0, 1);
        check_value(key, 1);
    }
    assert_int_equal(cu_read(g.w, "t3", g.buf, VLEN), MC_ERR_OBJECT_NOT_FOUND);
    put_value("t3", 2); /* no phantom copy blocks a new Put */
    check_value("t3", 2);
    assert_int_equal(cu_stop(&g.h1, SIGTERM, 10000), 0);
}

static void test_higher_version_wins(void **state)
{
    (void)state;
    /* K v1 on H1 */
    assert_int_equal(start_holder(&g.h1, "h1", g.disk1), 0);
    put_value("K", 1);
    uint64_t v1 = wait_tiers("K", -1, 1);
    /* H1 dies and expires: K goes with it */
    assert_int_equal(cu_stop(&g.h1, SIGKILL, 5000), 128 + SIGKILL);
    uint64_t deadline = cu_now_ms() + WAIT_MS;
    int mem, disk;
    while (tq_replicas(g.adm, "K", &mem, &disk, NULL) && cu_now_ms() < deadline)
        cu_sleep_ms(100);
    assert_false(tq_replicas(g.adm, "K", &mem, &disk, NULL));
    /* K v2 on H2 */
    assert_int_equal(start_holder(&g.h2, "h2", g.disk2), 0);
    put_value("K", 2);
    uint64_t v2 = wait_tiers("K", -1, 1);
    assert_true(v2 > v1);
    /* the master and H2 die; the master restarts, H1 registers first, then H2 */
    assert_int_equal(cu_stop(&g.h2, SIGKILL, 5000), 128 + SIGKILL);
    assert_int_equal(cu_stop(&g.master, SIGKILL, 5000), 128 + SIGKILL);
    restart_master();
    assert_int_equal(start_holder(&g.h1, "h1", g.disk1), 0);
    assert_int_equal(wait_tiers("K", 0, 1), v1); /* recreated from H1's record */
    assert_int_equal(start_holder(&g.h2, "h2", g.disk2), 0);
    deadline = cu_now_ms() + WAIT_MS;
    uint64_t v = 0;
    while ((!tq_replicas(g.adm, "K", &mem, &disk, &v) || v != v2) && cu_now_ms() < deadline)
        cu_sleep_ms(50);
    if (v != v2)
        fail_msg("K: version %llu after both holders registered, want v2 = %llu (v1 = %llu)",
                 (unsigned long long)v, (unsigned long long)v2, (unsigned long long)v1);
    assert_int_equal(wait_tiers("K", 0, 1), v2);
    assert_int_equal(master_metric("master_offload_reregister_replaced_total"), 1);
    check_value("K", 2);
    /* H1 was told to delete v1: restarted, it brings nothing back */
    cu_sleep_ms(1500);
    assert_int_equal(cu_stop(&g.h1, SIGKILL, 5000), 128 + SIGKILL);
    assert_int_equal(start_holder(&g.h1, "h1", g.disk1), 0);
    assert_int_equal(wait_tiers("K", 0, 1), v2);
    check_value("K", 2);
    cu_stop(&g.h1, SIGTERM, 10000);
    cu_stop(&g.h2, SIGTERM, 10000);
}

/* ---- setup / teardown ----------------------------------------------------------------------- */

static int setup(void **state)
{
    g_ttl_flag_sec = (int)(intptr_t)*state;
    memset(&g, 0, sizeof(g));
    g.master.out_fd = g.h1.out_fd = g.h2.out_fd = -1;
    if (cu_cluster_init(&g.cl, "mc_rrc") != 0)
        return -1;
    snprintf(g.disk1, sizeof(g.disk1), "%s/disk1", g.cl.dir);
    snprintf(g.disk2, sizeof(g.disk2), "%s/disk2", g.cl.dir);
    g.buf = malloc(VLEN);
    g.want = malloc(VLEN);
    if (!g.buf || !g.want || start_master(0) != 0)
        return -1;
    const char *colon = strrchr(g.cl.rpc, ':');
    g.port = colon ? atoi(colon + 1) : 0;
    if (g.port <= 0 || admin_open() != 0)
        return -1;
    if (cu_open_client(&g.cl, 0, NULL, 0, 3000, &g.w) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mc_client_close(g.w);
    mc_rpc_client_free(g.adm);
    cu_stop(&g.h1, SIGTERM, 10000);
    cu_stop(&g.h2, SIGTERM, 10000);
    cu_stop(&g.master, SIGTERM, 10000);
    cu_cluster_destroy(&g.cl);
    free(g.buf);
    free(g.want);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        /* initial state: the master's --client_ttl in seconds */
        cmocka_unit_test_prestate_setup_teardown(test_phantom_after_holder_restart, setup, teardown,
                                                 (void *)(intptr_t)10),
        cmocka_unit_test_prestate_setup_teardown(test_higher_version_wins, setup, teardown,
                                                 (void *)(intptr_t)3),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
